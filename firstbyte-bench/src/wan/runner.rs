//! The request loop: runs inside the emulator's client namespace, pinned to the client CPU.
//!
//! `firstbyte-bench run --worker --out DIR` is the emulator's client command. It reloads the
//! plan saved in DIR, rebuilds the same shuffled job list, skips the jobs already in
//! `results.csv`, waits until every condition's port answers, then makes each remaining
//! request as a cold connection (a warm client: a series of requests with the plan's gaps on
//! one connection), appending one row per request. Around each request it
//! reads the namespace's `TcpExt: TCPSynRetrans` counter (`/proc/net/netstat`): the client
//! namespace holds only the bench's connections, so the difference is exactly the SYNs this
//! connection retransmitted. Progress and an ETA go to stderr.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::client::{fetcher, ClientKind, Fetcher, Handshake, Target};
use super::lanes::Lane;
use super::plan::{Job, Plan};
use super::results::{self, Row, Writer};
use super::servers::file_name;
use crate::progress::progress_line;

/// Pause between requests, in ms: lets the previous connection's FIN exchange finish so it
/// never shares the link with the next SYN (a 10 ms gap is 0.5% of a 2 s request).
pub const PAUSE_MS: u64 = 10;

/// Most time to wait for every server port to answer, in s: servers start in well under a
/// second; 30 s covers a loaded machine.
pub const PORT_WAIT_S: u64 = 30;

/// One counter of a `/proc/net/netstat` (or `/proc/net/snmp`) text: lines come in pairs,
/// `Prefix: name name ...` then `Prefix: value value ...`.
pub fn netstat_counter(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        let (names, values) = (pair[0], pair[1]);
        let (Some(n), Some(v)) = (names.strip_prefix(prefix), values.strip_prefix(prefix)) else {
            continue;
        };
        let (Some(n), Some(v)) = (n.strip_prefix(':'), v.strip_prefix(':')) else {
            continue;
        };
        if n.split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
            .is_some()
        {
            continue; // a values line paired with the next names line
        }
        let idx = n.split_whitespace().position(|f| f == name)?;
        return v.split_whitespace().nth(idx).and_then(|f| f.parse().ok());
    }
    None
}

fn syn_retransmits_now() -> u64 {
    std::fs::read_to_string("/proc/net/netstat")
        .ok()
        .and_then(|t| netstat_counter(&t, "TcpExt", "TCPSynRetrans"))
        .unwrap_or(0)
}

/// Pins this process (and what it starts afterwards) to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size passed; pid 0 is the calling thread, which is the
    // only thread when this runs (before any runtime starts).
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn wait_for_ports(ip: IpAddr, ports: &[u16]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(PORT_WAIT_S);
    for &port in ports {
        let addr = SocketAddr::new(ip, port);
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no server answered on {addr} within {PORT_WAIT_S} s"
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// The `handshake` column of a fetch: what the client saw, or `cold` for a successful
/// request of a client that never offers a ticket; empty when nothing is known.
pub fn handshake_name(client: ClientKind, got: &super::client::Fetched) -> String {
    match got.handshake {
        Some(h) => h.name().to_string(),
        None if got.error.is_none() && client.intended() == Handshake::Cold => {
            Handshake::Cold.name().to_string()
        }
        None => String::new(),
    }
}

/// The jobs not yet in the results, in run order.
pub fn remaining(plan: &Plan, rows: &[Row]) -> Vec<Job> {
    let done = results::done_keys(rows);
    plan.jobs()
        .into_iter()
        .filter(|j| {
            let key = (
                plan.conditions[j.condition].name.clone(),
                j.size,
                j.client.name().to_string(),
                j.seq,
            );
            !done.contains(&key)
        })
        .collect()
}

/// The jobs of one lane not yet in the results, in run order.
pub fn remaining_in_lane(plan: &Plan, rows: &[Row], lane: Lane) -> Vec<Job> {
    let mut todo = remaining(plan, rows);
    todo.retain(|j| lane.takes(j));
    todo
}

/// The worker of one lane (`Lane::ONE` without lanes): returns the exit code. It appends to
/// `results.csv`, which the run prepared (`Writer::open`) before starting any lane.
pub fn worker(plan: &Plan, out: &Path, lane: Lane) -> i32 {
    let tag = if lane.count > 1 {
        format!("lane {}: ", lane.index)
    } else {
        String::new()
    };
    if let Err(e) = pin_to_cpu(plan.client_cpu) {
        eprintln!(
            "firstbyte-bench: cannot pin the client to CPU {}: {e}",
            plan.client_cpu
        );
        return 1;
    }
    let Some(ip) = std::env::var("FB_SERVER_ADDR")
        .ok()
        .and_then(|a| a.parse::<IpAddr>().ok())
    else {
        eprintln!("firstbyte-bench: --worker runs inside firstbyte-netem (FB_SERVER_ADDR unset)");
        return 2;
    };
    let ports: Vec<u16> = plan.conditions.iter().map(|c| c.port).collect();
    if let Err(e) = wait_for_ports(ip, &ports) {
        eprintln!("firstbyte-bench: {e}");
        return 1;
    }
    let path = out.join("results.csv");
    let rows = match results::read(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("firstbyte-bench: {e}");
            return 1;
        }
    };
    let todo = remaining_in_lane(plan, &rows, lane);
    let total = plan.jobs().iter().filter(|j| lane.takes(j)).count();
    let mut done = total - todo.len();
    let mut writer = match Writer::append_only(&path) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("firstbyte-bench: {e}");
            return 1;
        }
    };
    let mut fetchers: HashMap<ClientKind, Box<dyn Fetcher>> = HashMap::new();
    let started = Instant::now();
    let mut last_print = Instant::now();
    eprintln!(
        "firstbyte-bench: {tag}{} requests to go ({} already in {})",
        todo.len(),
        done,
        path.display()
    );
    for (i, job) in todo.iter().enumerate() {
        let cond = &plan.conditions[job.condition];
        let target = Target {
            addr: SocketAddr::new(ip, cond.port),
            path: format!("/{}", file_name(job.size)),
        };
        let f = match fetchers.entry(job.client) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(v) => match fetcher(job.client) {
                Ok(mut f) => {
                    // One unrecorded request first: the first TLS handshake of a process
                    // pays one-time library set-up (~70 ms seen here) that is not the server's.
                    let _ = f.fetch(&target);
                    v.insert(f)
                }
                Err(e) => {
                    eprintln!(
                        "firstbyte-bench: cannot start client {}: {e}",
                        job.client.name()
                    );
                    return 1;
                }
            },
        };
        let before = syn_retransmits_now();
        let series = if job.client.is_warm() {
            f.fetch_series(&target, &plan.gaps)
        } else {
            vec![f.fetch(&target)]
        };
        let syn = syn_retransmits_now().saturating_sub(before);
        for (k, got) in series.iter().enumerate() {
            let mut status = got.status;
            if status == 200 && got.body_bytes != job.size {
                eprintln!(
                    "firstbyte-bench: {} {} seq {}: body {} bytes, expected {}",
                    cond.name, job.size, job.seq, got.body_bytes, job.size
                );
                status = 0;
            }
            if let Some(e) = &got.error {
                eprintln!(
                    "firstbyte-bench: {} {} {} seq {} #{}: {e}",
                    cond.name,
                    job.size,
                    job.client.name(),
                    job.seq,
                    k + 1
                );
            }
            let row = Row {
                condition: cond.name.clone(),
                server: cond.server.name().to_string(),
                size_bytes: job.size,
                client: job.client.name().to_string(),
                seq: job.seq,
                connect_ms: got.connect_ms,
                appconnect_ms: got.appconnect_ms,
                ttfb_ms: got.ttfb_ms,
                total_ms: got.total_ms,
                // The connection's SYNs: counted on its first request.
                syn_retransmits: if k == 0 {
                    u32::try_from(syn).unwrap_or(u32::MAX)
                } else {
                    0
                },
                http_version: got.http_version.clone(),
                status,
                gap_ms: if k == 0 {
                    0.0
                } else {
                    plan.gaps[k - 1].as_secs_f64() * 1000.0
                },
                position: k as u32 + 1,
                handshake: handshake_name(job.client, got),
            };
            if let Err(e) = writer.append(&row) {
                eprintln!("firstbyte-bench: {}: {e}", path.display());
                return 1;
            }
        }
        done += 1;
        if i + 1 == todo.len() || last_print.elapsed() >= Duration::from_secs(15) || i < 3 {
            eprintln!(
                "{tag}{}",
                progress_line(done, total, i + 1, started.elapsed().as_secs_f64())
            );
            last_print = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(PAUSE_MS));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "TcpExt: SyncookiesSent SyncookiesRecv TCPSynRetrans TCPOrigDataSent\n\
                           TcpExt: 0 0 7 1234\n\
                           IpExt: InNoRoutes InTruncatedPkts\n\
                           IpExt: 0 0\n";

    #[test]
    fn reads_tcp_syn_retrans() {
        assert_eq!(netstat_counter(NETSTAT, "TcpExt", "TCPSynRetrans"), Some(7));
        assert_eq!(
            netstat_counter(NETSTAT, "TcpExt", "TCPOrigDataSent"),
            Some(1234)
        );
        assert_eq!(
            netstat_counter(NETSTAT, "IpExt", "InTruncatedPkts"),
            Some(0)
        );
        assert_eq!(netstat_counter(NETSTAT, "TcpExt", "Nope"), None);
        assert_eq!(netstat_counter("", "TcpExt", "TCPSynRetrans"), None);
        // This machine's own file has the counter (the kernel has had it since 3.x).
        let real = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
        assert!(netstat_counter(&real, "TcpExt", "TCPSynRetrans").is_some());
    }

    #[test]
    fn remaining_skips_recorded_jobs_and_keeps_order() {
        let plan = Plan::parse(
            r#"seed = 5
            n = 3
            sizes = ["1k", "2k"]
            clients = ["curl-h2"]
            baseline = "a"
            [[condition]]
            name = "a"
            server = "firstbyte"
            [[condition]]
            name = "b"
            server = "nginx""#,
            false,
        )
        .expect("plan");
        let all = plan.jobs();
        let done: Vec<Row> = all[..5]
            .iter()
            .map(|j| Row {
                condition: plan.conditions[j.condition].name.clone(),
                server: "x".into(),
                size_bytes: j.size,
                client: j.client.name().into(),
                seq: j.seq,
                connect_ms: 1.0,
                appconnect_ms: 2.0,
                ttfb_ms: 3.0,
                total_ms: 4.0,
                syn_retransmits: 0,
                http_version: "2".into(),
                status: 200,
                gap_ms: 0.0,
                position: 1,
                handshake: "cold".into(),
            })
            .collect();
        let rest = remaining(&plan, &done);
        assert_eq!(rest, all[5..].to_vec());
        assert!(remaining(&plan, &[]).len() == 12);
        // A lane resumes its own jobs: the rest of the shuffle with its seqs, in order.
        let lanes = Lane::all(2);
        let mut again: Vec<Job> = Vec::new();
        for lane in lanes {
            let mine = remaining_in_lane(&plan, &done, lane);
            assert!(mine.iter().all(|j| j.seq as usize % 2 == lane.index));
            let want: Vec<Job> = rest.iter().filter(|j| lane.takes(j)).copied().collect();
            assert_eq!(mine, want);
            again.extend(mine);
        }
        again.sort_by_key(|j| all.iter().position(|x| x == j));
        assert_eq!(again, rest);
    }
}
