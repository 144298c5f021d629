//! The plan file (TOML): what to compare, over which link, how often; and the job list.
//!
//! `Plan::parse` turns the file's text into checked values (names safe for CSV, sizes in
//! bytes, a known baseline, known clients). `Plan::jobs` expands it into one `Job` per
//! request (condition × size × client × seq) and shuffles them with the plan's seed, so the
//! same plan and seed always give the same order — which is what lets an interrupted run
//! resume by skipping the jobs already in `results.csv`.
//!
//! ```toml
//! seed = 2026
//! n = 200
//! sizes = ["10k", "100k", "1m"]
//! clients = ["curl-h2"]
//! baseline = "baseline-16k"
//! [network]
//! delay = "50ms"
//! loss = "1%"
//! [[condition]]
//! name = "baseline-16k"
//! server = "firstbyte"
//! config = "ssl_buffer_size 16k;"
//! clients = ["rust-h2", "rust-h3"]   # optional: this condition's clients instead of the plan's
//! ```

use serde::Deserialize;

use super::client::ClientKind;
use super::rng::SplitMix64;

/// n per cell under `--quick`: enough to see the medians and check the rig, not the tails.
pub const QUICK_N: u32 = 10;

/// First TCP port of the servers in the server namespace; condition `i` listens on
/// `BASE_PORT + i` (the namespace is private, so any free range works).
pub const BASE_PORT: u16 = 9400;

/// Errors in a plan file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The TOML did not parse or a field has the wrong type.
    #[error("plan: {0}")]
    Toml(#[from] toml::de::Error),
    /// A size is not `N`, `Nk` or `Nm` (nginx's size syntax).
    #[error("plan: invalid size \"{0}\" (use bytes, or nginx's k/m suffixes)")]
    Size(String),
    /// A client name is unknown.
    #[error("plan: unknown client \"{0}\" (known: curl-h2, curl-h1, rust-h2, rust-h1, rust-h3, rust-h2-warm, rust-h1-warm, rust-h2-resumed, rust-h2-0rtt, rust-h1-resumed, rust-h1-0rtt, rust-h3-0rtt)")]
    Client(String),
    /// A gap is not a duration.
    #[error("plan: invalid gap \"{0}\" (a duration: 200ms, 1.5s)")]
    Gap(String),
    /// A server kind is unknown.
    #[error("plan: condition \"{0}\": unknown server \"{1}\" (firstbyte, nginx or caddy)")]
    Server(String, String),
    /// A condition's server cannot serve one of its clients (nginx 1.22 and HTTP/3).
    #[error("plan: condition \"{0}\": {1} cannot serve client {2}")]
    Unservable(String, &'static str, &'static str),
    /// A condition name is empty, repeated, or has characters unsafe in CSV and file names.
    #[error("plan: bad condition name \"{0}\" (unique, letters, digits, '-', '_', '.')")]
    Name(String),
    /// The baseline (or a `[compare]` name) names no condition.
    #[error("plan: \"{0}\" is not a condition")]
    Baseline(String),
    /// Something is missing or empty.
    #[error("plan: {0}")]
    Missing(&'static str),
}

/// Which server program runs a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// `target/*/firstbyte`, one process for all firstbyte conditions.
    Firstbyte,
    /// Debian's `/usr/sbin/nginx`, one process for all nginx conditions.
    Nginx,
    /// Debian's `/usr/bin/caddy` (2.6, HTTP/3 on), one process for all caddy conditions.
    Caddy,
}

impl ServerKind {
    /// The name used in results.csv.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Firstbyte => "firstbyte",
            ServerKind::Nginx => "nginx",
            ServerKind::Caddy => "caddy",
        }
    }

    /// Whether it can serve this client (Debian's nginx 1.22 has no HTTP/3).
    pub fn serves(self, client: ClientKind) -> bool {
        !(self == ServerKind::Nginx && client.is_h3())
    }
}

/// One compared configuration: a server and the directives placed in its `server {}` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Name in tables and results.csv.
    pub name: String,
    /// Which server runs it.
    pub server: ServerKind,
    /// Directives for its `server {}` block (e.g. `ssl_buffer_size 4k;`; for caddy,
    /// Caddyfile lines inside the site block).
    pub config: String,
    /// TCP port it listens on in the server namespace (and UDP, for HTTP/3).
    pub port: u16,
    /// The clients run against it (its own `clients`, or the plan's).
    pub clients: Vec<ClientKind>,
}

/// The emulated link: passed to `firstbyte-netem` as its options.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// One-way delay, each direction (`50ms` = 100 ms RTT).
    pub delay: Option<String>,
    /// Jitter, each direction.
    pub jitter: Option<String>,
    /// Bernoulli loss per packet, each direction (`1%`).
    pub loss: Option<String>,
    /// Gilbert–Elliott loss (`gilbert:p,r[,h,k]`).
    pub loss_model: Option<String>,
    /// Bottleneck rate (`100mbit`).
    pub rate: Option<String>,
    /// Bottleneck queue in packets.
    pub queue: Option<u32>,
    /// MTU of the link (default 1500, Ethernet).
    pub mtu: Option<u32>,
    /// Congestion control of the server namespace (default cubic, as most servers).
    pub cc: Option<String>,
}

impl Network {
    /// The emulator's options for this link.
    pub fn netem_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push(flag.to_string());
                out.push(v);
            }
        };
        push("--delay", self.delay.clone());
        push("--jitter", self.jitter.clone());
        push("--loss", self.loss.clone());
        push("--loss-model", self.loss_model.clone());
        push("--rate", self.rate.clone());
        push("--queue", self.queue.map(|q| q.to_string()));
        push("--mtu", Some(self.mtu.unwrap_or(1500).to_string()));
        push(
            "--cc",
            Some(self.cc.clone().unwrap_or_else(|| "cubic".into())),
        );
        out
    }

    /// Round-trip time implied by the fixed delay, in ms (0 when unset or unparsable).
    pub fn rtt_ms(&self) -> f64 {
        self.delay
            .as_deref()
            .and_then(parse_duration_ms)
            .map_or(0.0, |d| 2.0 * d)
    }
}

/// TLS settings shared by every condition.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// `ssl_protocols` for every server.
    #[serde(default = "default_protocols")]
    pub protocols: String,
    /// Certificate: `ec` (one P-256 self-signed certificate, ~0.5 KB) or `long-rsa` (an
    /// RSA-4096 leaf and three RSA-4096 intermediates, over 6 KB: the handshake check).
    #[serde(default = "default_chain")]
    pub chain: String,
}

fn default_protocols() -> String {
    "TLSv1.2 TLSv1.3".into()
}

fn default_chain() -> String {
    "ec".into()
}

impl Default for Tls {
    fn default() -> Self {
        Self {
            protocols: default_protocols(),
            chain: default_chain(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    name: String,
    server: String,
    #[serde(default)]
    config: String,
    clients: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompare {
    candidate: String,
    against: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(default)]
    description: String,
    seed: u64,
    n: u32,
    sizes: Vec<toml::Value>,
    #[serde(default)]
    clients: Vec<String>,
    #[serde(default)]
    gaps: Vec<String>,
    baseline: String,
    #[serde(default)]
    handshake_check: bool,
    compare: Option<RawCompare>,
    #[serde(default)]
    network: Network,
    #[serde(default)]
    tls: Tls,
    #[serde(default)]
    condition: Vec<RawCondition>,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
}

/// A checked plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Free text shown in summary.md.
    pub description: String,
    /// Seed of the shuffle, the bootstrap and (mixed) the emulator's loss draws.
    pub seed: u64,
    /// Requests per cell (condition × size × client).
    pub n: u32,
    /// Response sizes in bytes.
    pub sizes: Vec<u64>,
    /// Every client of the plan (the plan's, then those only some conditions run), each a
    /// column of cells.
    pub clients: Vec<ClientKind>,
    /// Idle gaps of the warm clients, in order on one connection (`gaps = ["0.2s", ...]`):
    /// each warm job GETs, then after each gap GETs again. Empty when no warm client runs.
    pub gaps: Vec<std::time::Duration>,
    /// Index of the baseline condition (ratios are to it).
    pub baseline: usize,
    /// Whether summary.md includes the handshake check (item 4 of the bench issue).
    pub handshake_check: bool,
    /// `[compare]`: a candidate condition and the conditions it must match or beat (indices);
    /// the summary gives its ratio to the best of them per column, with a verdict.
    pub compare: Option<(usize, Vec<usize>)>,
    /// The link.
    pub network: Network,
    /// TLS settings.
    pub tls: Tls,
    /// Compared conditions, in file order.
    pub conditions: Vec<Condition>,
    /// CPU the servers are pinned to (default 0).
    pub server_cpu: usize,
    /// CPU the client loop and clients are pinned to (default 1).
    pub client_cpu: usize,
}

/// One request of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Job {
    /// Index into `Plan::conditions`.
    pub condition: usize,
    /// Response size in bytes.
    pub size: u64,
    /// Which client makes it.
    pub client: ClientKind,
    /// 0-based repetition within its cell.
    pub seq: u32,
}

impl Plan {
    /// Parses and checks a plan file's text; `quick` replaces n by `QUICK_N` (or keeps a
    /// smaller n).
    pub fn parse(text: &str, quick: bool) -> Result<Plan, PlanError> {
        let raw: RawPlan = toml::from_str(text)?;
        if raw.condition.is_empty() {
            return Err(PlanError::Missing("no [[condition]]"));
        }
        if raw.sizes.is_empty() {
            return Err(PlanError::Missing("sizes is empty"));
        }
        if raw.n == 0 {
            return Err(PlanError::Missing("n must be at least 1"));
        }
        let mut sizes = Vec::new();
        for v in &raw.sizes {
            let s = match v {
                toml::Value::Integer(i) if *i > 0 => *i as u64,
                toml::Value::String(s) => {
                    parse_size(s).ok_or_else(|| PlanError::Size(s.clone()))?
                }
                other => return Err(PlanError::Size(other.to_string())),
            };
            if !sizes.contains(&s) {
                sizes.push(s);
            }
        }
        let kinds = |names: &[String]| -> Result<Vec<ClientKind>, PlanError> {
            let mut out = Vec::new();
            for c in names {
                let k = ClientKind::from_name(c).ok_or_else(|| PlanError::Client(c.clone()))?;
                if !out.contains(&k) {
                    out.push(k);
                }
            }
            Ok(out)
        };
        let mut clients = kinds(&raw.clients)?;
        let plan_clients = clients.clone();
        let mut per_condition = Vec::new();
        for c in &raw.condition {
            let own = match &c.clients {
                Some(names) => kinds(names)?,
                None => plan_clients.clone(),
            };
            if own.is_empty() {
                return Err(PlanError::Missing(
                    "clients is empty (give the plan's, or each condition's)",
                ));
            }
            for k in &own {
                if !clients.contains(k) {
                    clients.push(*k);
                }
            }
            per_condition.push(own);
        }
        let mut gaps = Vec::new();
        for g in &raw.gaps {
            let ms = parse_duration_ms(g).ok_or_else(|| PlanError::Gap(g.clone()))?;
            gaps.push(std::time::Duration::from_secs_f64(ms / 1000.0));
        }
        if clients.iter().any(|c| c.is_warm()) == gaps.is_empty() {
            return Err(PlanError::Missing(
                "gaps: give them when (and only when) a warm client (rust-h2-warm, rust-h1-warm) runs",
            ));
        }
        let mut conditions: Vec<Condition> = Vec::new();
        for (i, (c, own)) in raw.condition.into_iter().zip(per_condition).enumerate() {
            let ok = !c.name.is_empty()
                && c.name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
                && !conditions.iter().any(|o| o.name == c.name);
            if !ok {
                return Err(PlanError::Name(c.name));
            }
            let server = match c.server.as_str() {
                "firstbyte" => ServerKind::Firstbyte,
                "nginx" => ServerKind::Nginx,
                "caddy" => ServerKind::Caddy,
                _ => return Err(PlanError::Server(c.name, c.server)),
            };
            if let Some(k) = own.iter().find(|k| !server.serves(**k)) {
                return Err(PlanError::Unservable(c.name, server.name(), k.name()));
            }
            let port = BASE_PORT + i as u16;
            conditions.push(Condition {
                name: c.name,
                server,
                config: c.config,
                port,
                clients: own,
            });
        }
        let baseline = conditions
            .iter()
            .position(|c| c.name == raw.baseline)
            .ok_or(PlanError::Baseline(raw.baseline))?;
        let index = |name: &str| {
            conditions
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| PlanError::Baseline(name.to_string()))
        };
        let compare = match raw.compare {
            None => None,
            Some(c) => {
                let against = c
                    .against
                    .iter()
                    .map(|n| index(n))
                    .collect::<Result<Vec<_>, _>>()?;
                if against.is_empty() {
                    return Err(PlanError::Missing("compare.against is empty"));
                }
                Some((index(&c.candidate)?, against))
            }
        };
        Ok(Plan {
            compare,
            description: raw.description,
            seed: raw.seed,
            n: if quick { raw.n.min(QUICK_N) } else { raw.n },
            sizes,
            clients,
            gaps,
            baseline,
            handshake_check: raw.handshake_check,
            network: raw.network,
            tls: raw.tls,
            conditions,
            server_cpu: raw.server_cpu.unwrap_or(0),
            client_cpu: raw.client_cpu.unwrap_or(1),
        })
    }

    /// Every request of the run, shuffled with the plan's seed (the same plan and seed always
    /// give the same order).
    pub fn jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for (condition, c) in self.conditions.iter().enumerate() {
            for &size in &self.sizes {
                for &client in &c.clients {
                    for seq in 0..self.n {
                        jobs.push(Job {
                            condition,
                            size,
                            client,
                            seq,
                        });
                    }
                }
            }
        }
        SplitMix64::new(self.seed).shuffle(&mut jobs);
        jobs
    }

    /// The columns of cells: each client's name, and for a warm client one more per gap
    /// (`rust-h2-warm@1.5s`: the request after 1.5 s idle), as `Row::series` names rows.
    pub fn series(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.clients {
            out.push(c.name().to_string());
            if c.is_warm() {
                for g in &self.gaps {
                    out.push(series_name(c.name(), g.as_secs_f64() * 1000.0));
                }
            }
        }
        out
    }

    /// Whether any condition runs on this server.
    pub fn uses(&self, server: ServerKind) -> bool {
        self.conditions.iter().any(|c| c.server == server)
    }
}

/// nginx's size syntax: `N`, `Nk`/`NK` (×1024), `Nm`/`NM` (×1024²).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1024),
        'm' | 'M' => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let n: u64 = num.parse().ok()?;
    n.checked_mul(mult).filter(|&v| v > 0)
}

/// A plan with `[[link]]` tables (each a `[network]` with a `name`) as one plan text per link:
/// the same plan with that link as its `[network]`, by name in file order. `None` for a plan
/// without links.
pub fn split_links(text: &str) -> Result<Option<Vec<(String, String)>>, PlanError> {
    let mut table: toml::Table = toml::from_str(text)?;
    let Some(links) = table.remove("link") else {
        return Ok(None);
    };
    if table.contains_key("network") {
        return Err(PlanError::Missing(
            "give either [network] or [[link]], not both",
        ));
    }
    let toml::Value::Array(links) = links else {
        return Err(PlanError::Missing("link: use [[link]] tables"));
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for link in links {
        let toml::Value::Table(mut net) = link else {
            return Err(PlanError::Missing("link: use [[link]] tables"));
        };
        let name = match net.remove("name") {
            Some(toml::Value::String(n)) => n,
            _ => return Err(PlanError::Missing("every [[link]] needs a name")),
        };
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !name.starts_with('.')
            && !out.iter().any(|(n, _)| *n == name);
        if !ok {
            return Err(PlanError::Name(name));
        }
        let mut one = table.clone();
        one.insert("network".into(), toml::Value::Table(net));
        let text =
            toml::to_string(&one).map_err(|_| PlanError::Missing("link: cannot write the plan"))?;
        out.push((name, text));
    }
    if out.is_empty() {
        return Err(PlanError::Missing("[[link]] is empty"));
    }
    Ok(Some(out))
}

/// The column of a warm connection's request after a gap of `gap_ms`:
/// `rust-h2-warm@0.2s`, `rust-h1-warm@5s`.
pub fn series_name(client: &str, gap_ms: f64) -> String {
    format!("{client}@{}s", (gap_ms / 10.0).round() / 100.0)
}

/// A size for people: 10240 → "10 KB", 1048576 → "1 MB", 1500 → "1500 B".
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0 {
        format!("{} MB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// `firstbyte-netem`'s duration syntax (`ns`, `us`, `ms`, `s`) in milliseconds.
pub fn parse_duration_ms(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic())?;
    let v: f64 = t[..split].parse().ok()?;
    let scale = match &t[split..] {
        "ns" => 1e-6,
        "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1000.0,
        _ => return None,
    };
    Some(v * scale).filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const PLAN: &str = r#"
        seed = 42
        n = 5
        sizes = ["10k", 2000, "1m"]
        clients = ["curl-h2", "rust-h1"]
        baseline = "b"
        [network]
        delay = "50ms"
        loss = "1%"
        [[condition]]
        name = "b"
        server = "firstbyte"
        config = "ssl_buffer_size 16k;"
        [[condition]]
        name = "n4"
        server = "nginx"
        config = "ssl_buffer_size 4k;"
    "#;

    #[test]
    fn parses_sizes_clients_ports_and_network() {
        let p = Plan::parse(PLAN, false).expect("plan parses");
        assert_eq!(p.sizes, vec![10240, 2000, 1048576]);
        assert_eq!(p.clients, vec![ClientKind::CurlH2, ClientKind::RustH1]);
        assert_eq!(p.baseline, 0);
        assert_eq!(p.conditions[1].server, ServerKind::Nginx);
        assert_eq!(p.conditions[1].port, BASE_PORT + 1);
        assert_eq!(p.network.rtt_ms(), 100.0);
        let args = p.network.netem_args();
        assert_eq!(
            args,
            ["--delay", "50ms", "--loss", "1%", "--mtu", "1500", "--cc", "cubic"]
        );
        assert_eq!((p.server_cpu, p.client_cpu), (0, 1));
        assert_eq!(
            Plan::parse(PLAN, true).expect("quick").n,
            5,
            "quick never raises n"
        );
    }

    #[test]
    fn jobs_cover_every_cell_and_shuffle_is_seeded() {
        let p = Plan::parse(PLAN, false).expect("plan parses");
        let jobs = p.jobs();
        assert_eq!(jobs.len(), 2 * 3 * 2 * 5);
        let uniq: std::collections::HashSet<_> = jobs.iter().collect();
        assert_eq!(uniq.len(), jobs.len());
        assert_eq!(jobs, p.jobs(), "same plan, same order");
        let mut other = p.clone();
        other.seed = 43;
        assert_ne!(jobs, other.jobs(), "other seed, other order");
        // Interleaved: the first 12 jobs are not all one condition.
        assert!(jobs[..12].iter().any(|j| j.condition != jobs[0].condition));
    }

    #[test]
    fn rejects_bad_plans() {
        let bad_base = PLAN.replace("baseline = \"b\"", "baseline = \"zz\"");
        assert!(matches!(
            Plan::parse(&bad_base, false),
            Err(PlanError::Baseline(_))
        ));
        let bad_cmp = format!("{PLAN}\n[compare]\ncandidate = \"b\"\nagainst = [\"zz\"]\n");
        assert!(matches!(
            Plan::parse(&bad_cmp, false),
            Err(PlanError::Baseline(_))
        ));
        let cmp = format!("{PLAN}\n[compare]\ncandidate = \"n4\"\nagainst = [\"b\"]\n");
        assert_eq!(
            Plan::parse(&cmp, false).expect("compare").compare,
            Some((1, vec![0]))
        );
        let bad_client = PLAN.replace("rust-h1", "wget");
        assert!(matches!(
            Plan::parse(&bad_client, false),
            Err(PlanError::Client(_))
        ));
        let bad_name = PLAN.replace("name = \"n4\"", "name = \"a,b\"");
        assert!(matches!(
            Plan::parse(&bad_name, false),
            Err(PlanError::Name(_))
        ));
        let dup = PLAN.replace("name = \"n4\"", "name = \"b\"");
        assert!(matches!(Plan::parse(&dup, false), Err(PlanError::Name(_))));
        let bad_size = PLAN.replace("\"1m\"", "\"1g\"");
        assert!(matches!(
            Plan::parse(&bad_size, false),
            Err(PlanError::Size(_))
        ));
        let bad_server = PLAN.replace("\"nginx\"", "\"h3o\"");
        assert!(matches!(
            Plan::parse(&bad_server, false),
            Err(PlanError::Server(..))
        ));
        let nginx_h3 = PLAN.replace("\"rust-h1\"]", "\"rust-h3-0rtt\"]");
        assert!(matches!(
            Plan::parse(&nginx_h3, false),
            Err(PlanError::Unservable(..))
        ));
        let no_clients = PLAN.replace("clients = [\"curl-h2\", \"rust-h1\"]", "");
        assert!(matches!(
            Plan::parse(&no_clients, false),
            Err(PlanError::Missing(_))
        ));
        assert!(matches!(
            Plan::parse("seed = ", false),
            Err(PlanError::Toml(_))
        ));
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("1M"), Some(1048576));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("k"), None);
        assert_eq!(size_label(10240), "10 KB");
        assert_eq!(size_label(1048576), "1 MB");
        assert_eq!(size_label(1500), "1500 B");
        assert_eq!(parse_duration_ms("50ms"), Some(50.0));
        assert_eq!(parse_duration_ms("1s"), Some(1000.0));
        assert_eq!(parse_duration_ms("250us"), Some(0.25));
        assert_eq!(parse_duration_ms("5"), None);
        assert_eq!(parse_duration_ms("5h"), None);
    }

    #[test]
    fn warm_clients_need_gaps_and_get_a_column_per_gap() {
        let base = r#"
            seed = 1
            n = 2
            sizes = ["10k"]
            baseline = "a"
            [[condition]]
            name = "a"
            server = "firstbyte""#;
        let with = |extra: &str| Plan::parse(&format!("{extra}\n{base}"), false);
        let p = with(
            r#"clients = ["rust-h1", "rust-h2-warm"]
            gaps = ["200ms", "1.5s"]"#,
        )
        .expect("plan");
        assert_eq!(
            p.gaps,
            vec![Duration::from_millis(200), Duration::from_millis(1500)]
        );
        assert_eq!(
            p.series(),
            [
                "rust-h1",
                "rust-h2-warm",
                "rust-h2-warm@0.2s",
                "rust-h2-warm@1.5s"
            ]
        );
        assert!(matches!(
            with(r#"clients = ["rust-h2-warm"]"#),
            Err(PlanError::Missing(_))
        ));
        assert!(matches!(
            with(
                r#"clients = ["rust-h2"]
            gaps = ["1s"]"#
            ),
            Err(PlanError::Missing(_))
        ));
        assert!(matches!(
            with(
                r#"clients = ["rust-h2-warm"]
            gaps = ["soon"]"#
            ),
            Err(PlanError::Gap(_))
        ));
    }

    #[test]
    fn links_split_into_one_plan_each() {
        let text = r#"
            seed = 1
            n = 2
            sizes = ["10k"]
            clients = ["rust-h2"]
            baseline = "a"
            [[link]]
            name = "fast"
            delay = "50ms"
            [[link]]
            name = "2mbit-1pct"
            delay = "50ms"
            rate = "2mbit"
            loss = "1%"
            [[condition]]
            name = "a"
            server = "firstbyte""#;
        let links = split_links(text).expect("links").expect("some");
        let names: Vec<&str> = links.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fast", "2mbit-1pct"]);
        let slow = Plan::parse(&links[1].1, false).expect("plan");
        assert_eq!(slow.network.rate.as_deref(), Some("2mbit"));
        assert_eq!(slow.network.loss.as_deref(), Some("1%"));
        assert_eq!(slow.conditions[0].name, "a");
        // The same text always gives the same per-link text (a resume compares them).
        assert_eq!(split_links(text).expect("again").expect("some"), links);
        assert_eq!(split_links(PLAN).expect("no links"), None);
        let both = format!("{text}\n[network]\ndelay = \"1ms\"");
        assert!(split_links(&both).is_err());
        let bad = text.replace("name = \"fast\"", "name = \"../x\"");
        assert!(matches!(split_links(&bad), Err(PlanError::Name(_))));
    }

    #[test]
    fn conditions_may_run_their_own_clients() {
        let text = r#"
            seed = 1
            n = 3
            sizes = ["10k", "1m"]
            baseline = "fb"
            [network]
            delay = "50ms"
            [[condition]]
            name = "fb"
            server = "firstbyte"
            config = "ssl_early_data on;"
            clients = ["rust-h2", "rust-h2-0rtt", "rust-h3", "rust-h3-0rtt"]
            [[condition]]
            name = "caddy"
            server = "caddy"
            clients = ["rust-h3", "rust-h3-0rtt"]
            [[condition]]
            name = "nginx"
            server = "nginx"
            clients = ["rust-h2"]"#;
        let p = Plan::parse(text, false).expect("plan");
        assert_eq!(
            p.series(),
            ["rust-h2", "rust-h2-0rtt", "rust-h3", "rust-h3-0rtt"]
        );
        assert_eq!(p.conditions[1].server, ServerKind::Caddy);
        assert_eq!(p.conditions[2].clients, [ClientKind::RustH2]);
        let jobs = p.jobs();
        assert_eq!(jobs.len(), (4 + 2 + 1) * 2 * 3);
        for j in &jobs {
            assert!(
                p.conditions[j.condition].clients.contains(&j.client),
                "{j:?}"
            );
        }
    }

    /// Every plan committed in bench/ parses (each link of a `[[link]]` plan too).
    #[test]
    fn committed_plans_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).expect("bench/") {
            let path = e.expect("entry").path();
            if path.extension().and_then(|x| x.to_str()) != Some("toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read plan");
            let plans = match split_links(&text).expect("links") {
                Some(links) => links.into_iter().map(|(_, t)| t).collect(),
                None => vec![text],
            };
            for t in plans {
                Plan::parse(&t, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
        assert!(seen >= 8, "{seen} plans");
    }
}
