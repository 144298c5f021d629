//! `firstbyte-bench run PLAN.toml [--quick] [--out DIR] [--lanes N]`: the controlled WAN benchmark.
//!
//! Data flow: the plan file (`plan`) is checked and saved into DIR (a run refuses to resume
//! into a directory holding another plan); `servers` writes the files, certificates and one
//! firstbyte and one nginx config with a `server {}` per condition; then ONE
//! `firstbyte-netem` invocation carries the whole run: the servers start in its server
//! namespace pinned to the server CPU, and this same program, re-run as
//! `run --worker --out DIR`, is its client command (`runner`), pinned to the client CPU,
//! making every request of the seeded shuffle as a cold connection (`client`) and appending
//! rows to `results.csv` (`results`). Afterwards `summary` computes percentiles with
//! bootstrap intervals (`stats`) into `summary.md` (also printed) and `svg` draws `plot.svg`.
//! An interrupted run resumes by running the same command again: same plan and seed, same
//! order, rows already present skipped. A plan with `[[link]]` tables instead of `[network]`
//! runs once per link, into `DIR/<link name>/`, and `DIR/summary.md` joins their summaries.
//! `--lanes N` runs N emulators per link at once, each with its own servers and a worker
//! taking its share of the jobs (`lanes`), and the links of such a plan at the same time.

mod client;
mod glance;
mod lanes;
mod plan;
mod results;
mod rng;
mod runner;
mod servers;
mod stats;
mod summary;
mod svg;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::Common;
use lanes::Lane;
use plan::{Plan, ServerKind};

/// Options of `firstbyte-bench run`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct Args {
    /// The plan file (bench/README.md, "The plan file").
    #[arg(value_name = "PLAN.toml", required_unless_present = "worker")]
    plan: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    /// Summarize the rows already in --out (e.g. of a run still going); run nothing.
    #[arg(long, requires = "out")]
    report: bool,
    /// Run each link's jobs through N emulated links at once (lanes), and the links of a
    /// `[[link]]` plan at the same time: lane L of N (each its own firstbyte-netem, servers
    /// and client) takes the jobs with seq % N == L. Without it: one emulator, one link after
    /// another. Idle-heavy (warm) plans finish ~N times sooner; bench/README.md says up to
    /// which N results stay the same on this machine.
    #[arg(long, value_name = "N", value_parser = crate::cli::positive)]
    lanes: Option<usize>,
    /// The worker's lane, 0..N (internal).
    #[arg(long, hide = true, requires = "worker")]
    lane: Option<usize>,
    /// The request loop, run inside the emulator as its client command (internal).
    #[arg(long, hide = true, requires = "out", conflicts_with = "report")]
    worker: bool,
}

/// `YYYYMMDD-HHMMSS` in UTC from Unix seconds (Howard Hinnant's civil-from-days).
fn utc_stamp(unix_s: u64) -> String {
    let days = (unix_s / 86400) as i64;
    let secs = unix_s % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

/// The saved run description: the plan text and whether it is a quick run.
fn run_marker(quick: bool) -> String {
    format!("quick = {quick}\n")
}

fn command_line(cmd: &str, args: &[&str]) -> String {
    match Command::new(cmd).args(args).output() {
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().unwrap_or("").trim().to_string()
        }
        Err(e) => format!("({cmd}: {e})"),
    }
}

/// Facts about the machine and the programs, for the results' record.
fn machine_facts(bins: &servers::Binaries) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.to_string())
        })
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "# Machine facts\n\n- kernel: {}\n- cpu: {}\n- cpus: {cpus}\n- curl: {}\n- nginx: {}\n- caddy: {}\n- firstbyte: {} ({})\n- firstbyte git: {}\n- netem: {}\n",
        command_line("uname", &["-srvm"]),
        cpu.split(':').nth(1).unwrap_or("").trim(),
        command_line("curl", &["--version"]),
        command_line(&bins.nginx.display().to_string(), &["-v"]),
        command_line(&bins.caddy.display().to_string(), &["version"]),
        command_line(&bins.firstbyte.display().to_string(), &["-v"]),
        bins.firstbyte.display(),
        command_line("git", &["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short", "HEAD"]),
        bins.netem.display(),
    )
}

/// The link section of the summary, from the emulator's last `--stats-json`.
fn link_section(out: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("netem-") && n.ends_with(".json"))
    });
    files.sort();
    let mut s = String::from("## Link (emulator counters, per session of the run)\n\n");
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        s.push_str(&format!(
            "- {}: {:.0} s",
            f.file_name().and_then(|n| n.to_str()).unwrap_or(""),
            v["elapsed_s"].as_f64().unwrap_or(0.0)
        ));
        for dir in ["client_to_server", "server_to_client"] {
            let d = &v[dir];
            s.push_str(&format!(
                "; {dir}: {} packets, {} lost, {} queue drops, lateness p99 {} µs max {} µs",
                d["packets_in"],
                d["dropped_loss"],
                d["dropped_queue"],
                d["lateness"]["p99_us"],
                d["lateness"]["max_us"]
            ));
        }
        s.push('\n');
    }
    s
}

/// How the plan's clients use connections, for the summary's header.
fn connections(plan: &Plan) -> String {
    let mut cold = "Cold connections (new TCP + full TLS handshake per request)".to_string();
    if plan
        .clients
        .iter()
        .any(|c| c.intended() != client::Handshake::Cold)
    {
        cold.push_str(
            "; a resuming client's sample (`-resumed`, `-0rtt`) is a pair of connections: an \
             unrecorded HEAD for a session ticket, then the measured GET offering it. Column \
             `handshake` of results.csv says what each sample really had; samples with another \
             handshake than their client's (a rejected 0-RTT, a ticket not taken) are in columns \
             of their own, `CLIENT:HANDSHAKE`",
        );
    }
    if !plan.clients.iter().any(|c| c.is_warm()) {
        return cold;
    }
    let gaps: Vec<String> = plan
        .gaps
        .iter()
        .map(|g| format!("{}s", g.as_secs_f64()))
        .collect();
    format!(
        "{cold}; a warm client's job is one connection: a cold request, then one more after each \
         idle gap ({}) on the same connection, in the columns `CLIENT@GAP` (times from sending that \
         request, connect and handshake 0)",
        gaps.join(", ")
    )
}

fn summary_header(plan: &Plan, plan_path: &Path, quick: bool) -> String {
    let conds: Vec<String> = plan
        .conditions
        .iter()
        .map(|c| {
            format!(
                "- `{}` ({}, port {}): `{}`; clients {}",
                c.name,
                c.server.name(),
                c.port,
                c.config.trim(),
                c.clients
                    .iter()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    format!(
        "# WAN bench: {}\n\n{}\n\nn = {} per cell{}, seed {}, clients {}, sizes {}. Link: `firstbyte-netem {}`. \
         TLS: `ssl_protocols {}`, certificate `{}`. {}, \
         shuffled order, servers on CPU {} and client on CPU {}. Baseline: `{}`.\n\nConditions:\n\n{}\n",
        plan_path.display(),
        plan.description.trim(),
        plan.n,
        if quick { " (--quick)" } else { "" },
        plan.seed,
        plan.clients.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        plan.sizes.iter().map(|&s| plan::size_label(s)).collect::<Vec<_>>().join(", "),
        plan.network.netem_args().join(" "),
        plan.tls.protocols,
        plan.tls.chain,
        connections(plan),
        plan.server_cpu,
        plan.client_cpu,
        plan.conditions[plan.baseline].name,
        conds.join("\n")
    )
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("firstbyte-bench: {msg}");
    1
}

/// Prepares the servers and runs the remaining requests through one emulator per lane, all
/// at once; returns the worst exit code of the emulators and the certificate chain's size,
/// or the exit code of a failure.
fn execute(
    plan: &Plan,
    out: &Path,
    results_path: &Path,
    lanes: usize,
) -> Result<(i32, usize), i32> {
    let bins = servers::Binaries::locate();
    let mut missing = Vec::new();
    if plan.uses(ServerKind::Firstbyte) && !bins.firstbyte.is_file() {
        missing.push(format!(
            "{} (cargo build --release -p firstbyte, or set FB_BENCH_FIRSTBYTE)",
            bins.firstbyte.display()
        ));
    }
    if plan.uses(ServerKind::Nginx) && !bins.nginx.is_file() {
        missing.push(format!(
            "{} (apt-get install nginx, or set FB_BENCH_NGINX)",
            bins.nginx.display()
        ));
    }
    if plan.uses(ServerKind::Caddy) && !bins.caddy.is_file() {
        missing.push(format!(
            "{} (apt-get install caddy, or set FB_BENCH_CADDY)",
            bins.caddy.display()
        ));
    }
    if !bins.netem.is_file() {
        missing.push(format!(
            "{} (cargo build --release -p firstbyte-netem, or set FB_BENCH_NETEM)",
            bins.netem.display()
        ));
    }
    if plan.clients.iter().any(|c| c.needs_curl())
        && Command::new("curl").arg("--version").output().is_err()
    {
        missing.push("curl (apt-get install curl)".into());
    }
    if !missing.is_empty() {
        return Err(fail(format!("missing: {}", missing.join("; "))));
    }
    let prepared = match servers::prepare(plan, out, &bins, lanes) {
        Ok(p) => p,
        Err(e) => return Err(fail(e)),
    };
    let _ = std::fs::write(out.join("facts.md"), machine_facts(&bins));
    // The header and a torn last line are settled here, before any lane appends.
    if let Err(e) = results::Writer::open(results_path) {
        return Err(fail(e));
    }
    let rows = match results::read(results_path) {
        Ok(r) => r,
        Err(e) => return Err(fail(e)),
    };
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return Err(fail(format!("cannot find this program: {e}"))),
    };
    let mut children = Vec::new();
    for (lane, server_cmd) in Lane::all(lanes).into_iter().zip(&prepared.server_cmds) {
        let todo = runner::remaining_in_lane(plan, &rows, lane).len();
        if todo == 0 {
            continue;
        }
        let done = rows.iter().filter(|r| lane.takes_seq(r.seq)).count();
        let mut cmd = Command::new(&bins.netem);
        cmd.args(plan.network.netem_args())
            .arg("--seed")
            .arg(lane.netem_seed(plan.seed, done).to_string())
            .arg("--stats-json")
            .arg(out.join(lane.stats_name(done)))
            .arg("--server")
            .arg(server_cmd)
            .arg("--wait-port")
            .arg(plan.conditions[0].port.to_string())
            .arg("--")
            .arg(&me)
            .args(["run", "--worker", "--out"])
            .arg(out)
            .args(lane.worker_args());
        let tag = if lanes > 1 {
            format!(" (lane {} of {lanes})", lane.index)
        } else {
            String::new()
        };
        eprintln!(
            "firstbyte-bench: {todo} requests through {}{tag}",
            bins.netem.display()
        );
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                eprintln!("firstbyte-bench: {}: {e}", bins.netem.display());
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(1);
            }
        }
    }
    let mut code = 0;
    for mut child in children {
        let c = match child.wait() {
            Ok(s) => s.code().unwrap_or(1),
            Err(_) => 1,
        };
        if c != 0 && code == 0 {
            code = c;
        }
    }
    if code != 0 {
        eprintln!(
            "firstbyte-bench: the run stopped (exit {code}); run the same command again to resume"
        );
    }
    Ok((code, prepared.chain_bytes))
}

/// Entry point of the `run` subcommand; returns the exit code.
pub fn main(args: Args) -> i32 {
    let Args {
        plan: plan_path,
        common: Common { quick, out },
        report,
        lanes,
        lane,
        worker,
    } = args;
    if worker {
        let lane = Lane {
            index: lane.unwrap_or(0),
            count: lanes.unwrap_or(1),
        };
        if lane.index >= lane.count {
            return fail(format!("--lane {} of --lanes {}", lane.index, lane.count));
        }
        let out = out.unwrap_or_default();
        let quick = std::fs::read_to_string(out.join("run.toml"))
            .map(|t| t == run_marker(true))
            .unwrap_or(false);
        let plan = match std::fs::read_to_string(out.join("plan.toml"))
            .map_err(|e| e.to_string())
            .and_then(|t| Plan::parse(&t, quick).map_err(|e| e.to_string()))
        {
            Ok(p) => p,
            Err(e) => return fail(format!("{}: {e}", out.join("plan.toml").display())),
        };
        return runner::worker(&plan, &out, lane);
    }
    let plan_path = plan_path.unwrap_or_default();
    let text = match std::fs::read_to_string(&plan_path) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: {e}", plan_path.display())),
    };
    let out = out.unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from("bench/out").join(utc_stamp(now))
    });
    let links = match plan::split_links(&text) {
        Ok(l) => l,
        Err(e) => return fail(format!("{}: {e}", plan_path.display())),
    };
    let Some(links) = links else {
        return run_plan(&text, &plan_path, &out, quick, report, lanes.unwrap_or(1));
    };
    // One run per link, each in its own directory (and resumable there): one after another,
    // or with --lanes all at once (links are independent emulators); then one summary: the
    // at-a-glance tables over every link, then each link's own.
    let codes: Vec<i32> = match lanes {
        Some(n) if !report => std::thread::scope(|s| {
            let runs: Vec<_> = links
                .iter()
                .map(|(name, sub)| {
                    eprintln!(
                        "firstbyte-bench: link \"{name}\" ({n} lane{})",
                        if n == 1 { "" } else { "s" }
                    );
                    let (dir, plan_path) = (out.join(name), &plan_path);
                    s.spawn(move || run_plan(sub, plan_path, &dir, quick, false, n))
                })
                .collect();
            runs.into_iter().map(|h| h.join().unwrap_or(1)).collect()
        }),
        _ => links
            .iter()
            .map(|(name, sub)| {
                eprintln!("firstbyte-bench: link \"{name}\"");
                run_plan(sub, &plan_path, &out.join(name), quick, report, 1)
            })
            .collect(),
    };
    let code = codes.iter().copied().find(|&c| c != 0).unwrap_or(0);
    let mut parts = String::new();
    let mut glance = Vec::new();
    for (name, sub) in &links {
        let dir = out.join(name);
        let part = std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default();
        parts.push_str(&format!(
            "# Link \"{name}\" ({name}/summary.md)\n\n{part}\n"
        ));
        if let (Ok(plan), Ok(rows)) = (
            Plan::parse(sub, quick),
            results::read(&dir.join("results.csv")),
        ) {
            glance.push(glance::LinkGroups {
                name: name.clone(),
                groups: summary::groups(&plan, &rows),
            });
        }
    }
    let md = format!(
        "# WAN bench over {} links: {}\n\n{}{parts}",
        links.len(),
        plan_path.display(),
        glance::render(&glance)
    );
    if let Err(e) = std::fs::write(out.join("summary.md"), md) {
        return fail(format!("{}: {e}", out.display()));
    }
    code
}

/// Runs (or resumes, or with `report` summarizes) one plan's text into `out`, through
/// `lanes` emulators at once.
fn run_plan(
    text: &str,
    plan_path: &Path,
    out: &Path,
    quick: bool,
    report: bool,
    lanes: usize,
) -> i32 {
    let plan = match Plan::parse(text, quick) {
        Ok(p) => p,
        Err(e) => return fail(format!("{}: {e}", plan_path.display())),
    };
    if let Err(e) = std::fs::create_dir_all(out) {
        return fail(format!("{}: {e}", out.display()));
    }
    // Configs and the worker name files by absolute path (servers run with another cwd).
    let out = match std::path::absolute(out) {
        Ok(p) => p,
        Err(e) => return fail(format!("{}: {e}", out.display())),
    };
    // A directory belongs to one plan: resuming with another would mix incomparable rows.
    let saved_plan = out.join("plan.toml");
    let saved_run = out.join("run.toml");
    match (
        std::fs::read_to_string(&saved_plan),
        std::fs::read_to_string(&saved_run),
    ) {
        (Ok(p), Ok(r)) if p != text || r != run_marker(quick) => {
            return fail(format!(
                "{} holds a run of another plan (or --quick setting); use another --out",
                out.display()
            ))
        }
        (Ok(_), Ok(_)) => eprintln!("firstbyte-bench: resuming the run in {}", out.display()),
        _ => {
            if let Err(e) = std::fs::write(&saved_plan, text)
                .and_then(|()| std::fs::write(&saved_run, run_marker(quick)))
            {
                return fail(format!("{}: {e}", out.display()));
            }
        }
    }
    let results_path = out.join("results.csv");
    let mut code = 0;
    let chain_bytes = if report {
        // Summarize the rows so far (e.g. of a run still going); run nothing.
        servers::chain_bytes(&out.join("work/tls/chain.pem")).ok()
    } else {
        match execute(&plan, &out, &results_path, lanes) {
            Ok((c, b)) => {
                code = c;
                Some(b)
            }
            Err(c) => return c,
        }
    };
    let rows = match results::read(&results_path) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let mut md = summary::render(
        &plan,
        &rows,
        &summary_header(&plan, plan_path, quick),
        chain_bytes,
    );
    md.push_str(&link_section(&out));
    if let Err(e) = std::fs::write(out.join("summary.md"), &md)
        .and_then(|()| std::fs::write(out.join("plot.svg"), svg::render(&plan, &rows)))
    {
        return fail(format!("{}: {e}", out.display()));
    }
    println!("{md}");
    eprintln!(
        "firstbyte-bench: {} rows; wrote {}/{{results.csv,summary.md,plot.svg}}",
        rows.len(),
        out.display()
    );
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Args, clap::Error> {
        match crate::cli::parse(&[&["run"], list].concat())? {
            crate::cli::Command::Run(a) => Ok(a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn args() {
        let a = parse(&["p.toml", "--quick", "--out", "o"]).expect("args");
        assert_eq!(
            a,
            Args {
                plan: Some("p.toml".into()),
                common: Common {
                    quick: true,
                    out: Some("o".into()),
                },
                worker: false,
                report: false,
                lanes: None,
                lane: None,
            }
        );
        assert_eq!(
            parse(&["p", "--lanes", "8", "--out", "o"])
                .expect("lanes")
                .lanes,
            Some(8)
        );
        assert!(parse(&["p", "--lanes", "0"]).is_err(), "at least one lane");
        assert!(
            parse(&["p", "--lane", "1"]).is_err(),
            "--lane is the worker's"
        );
        let w = parse(&["--worker", "--out", "o", "--lanes", "8", "--lane", "3"]).expect("w");
        assert_eq!((w.lanes, w.lane), (Some(8), Some(3)));
        assert!(parse(&[]).is_err(), "missing PLAN.toml");
        assert!(parse(&["--worker"]).is_err(), "--worker needs --out");
        assert!(parse(&["--worker", "--out", "o"]).expect("worker").worker);
        assert!(parse(&["p", "--bogus"]).is_err());
        assert!(parse(&["p", "q"]).is_err());
        assert!(parse(&["p", "--out"]).is_err(), "--out needs a value");
        let e = parse(&["p", "--report"]).expect_err("--report needs --out");
        assert_eq!(e.exit_code(), 2);
        assert!(
            parse(&["p", "--report", "--out", "o"])
                .expect("report")
                .report
        );
    }

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_795_312_649), "20261122-015729");
    }
}
