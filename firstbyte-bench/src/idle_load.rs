//! `firstbyte-bench idle-load [--quick] [--out DIR] [--rounds N] [--idle N] [--requests N]`:
//! do many idle TLS connections slow the busy ones?
//!
//! One firstbyte (release, `worker_processes 1`, pinned to CPU 1) serves `/1k`. The harness
//! (pinned to CPU 0, as h2load, which inherits it) runs the same h2load load
//! (`-n REQUESTS -c 16 -m 10`, HTTP/2 over TLS 1.3, `--log-file`) in interleaved conditions:
//! A, without idle connections, then B, with `--idle` (default 10,000) TLS 1.3 connections open
//! and idle (each a full handshake and one HTTP/1.1 keep-alive request, then nothing, held by
//! this process), then the idle connections are closed and the next round starts with A again.
//! Per run: request latency p50/p99/max from h2load's per-request log (type-7 quantiles),
//! requests/s, server CPU per request (from `/proc`, all threads); per round, the server's
//! `Pss` growth per idle connection. The report gives the medians over rounds of A and B, the
//! ratio of the medians and the median of the per-round ratios (B/A, paired: a shared
//! machine drifts between rounds).
//!
//! File descriptors: the configuration sets no `worker_rlimit_nofile` (firstbyte takes it, as
//! nginx), so the server inherits this process's limit, which is raised to its hard limit at
//! start; the run stops with an error if that is too low for `--idle`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::{positive, Common};
use crate::loopback::servers::{Kind, Paths, Running};
use crate::loopback::{client, procfs, report, stats};
use crate::progress::Progress;

/// The CPU of the harness, h2load and the idle connections' holder.
const CLIENT_CPU: usize = 0;
/// The CPU of every server thread.
const SERVER_CPU: usize = 1;
/// h2load connections and streams per connection (the loopback bench's `-c 32 -m 10` halved:
/// one server core).
const H2_CONNECTIONS: usize = 16;
const H2_STREAMS: usize = 10;
/// Handshakes in flight while the idle connections are opened.
const OPEN_CONCURRENCY: usize = 64;

/// Options of `firstbyte-bench idle-load`, as given.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// A/B rounds [default: 10, or 2 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    rounds: Option<usize>,
    /// Idle TLS connections in condition B [default: 10000, or 2000 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    idle: Option<usize>,
    /// h2load requests per run [default: 30000, or 10000 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    requests: Option<usize>,
}

/// What a run does: the arguments with the `--quick` defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Fewer, shorter rounds.
    pub quick: bool,
    /// Output directory (default `bench/out/idle-load-<UTC stamp>/`).
    pub out: Option<PathBuf>,
    /// A/B rounds (default 10; quick 2).
    pub rounds: usize,
    /// Idle connections in condition B (default 10,000; quick 2,000).
    pub idle: usize,
    /// h2load requests per run (default 30,000; quick 10,000).
    pub requests: usize,
}

impl From<Args> for Options {
    fn from(a: Args) -> Self {
        let quick = a.common.quick;
        let pick =
            |set: Option<usize>, q: usize, full: usize| set.unwrap_or(if quick { q } else { full });
        Options {
            quick,
            out: a.common.out,
            // 10 rounds: on a shared 2-core machine one run's p99 swings ±30%; five rounds
            // left the medians' ratio anywhere from 0.95 to 1.05.
            rounds: pick(a.rounds, 2, 10),
            idle: pick(a.idle, 2_000, 10_000),
            requests: pick(a.requests, 10_000, 30_000),
        }
    }
}

/// firstbyte's config: the loopback bench's TLS settings, room for the idle connections, and
/// timers longer than the run (idle connections must stay open through condition B).
pub fn render(paths: &Paths, port: u16, idle: usize) -> String {
    let p = |x: &Path| x.display().to_string();
    format!(
        "worker_processes 1;\ndaemon off;\npid {work}/firstbyte.pid;\n\
         error_log {work}/error.log error;\n\
         events {{ worker_connections {conns}; }}\n\
         http {{\n    access_log off;\n    default_type application/octet-stream;\n\
         \x20   keepalive_requests 1000000;\n    keepalive_timeout 600s;\n\
         \x20   client_header_timeout 600s;\n\
         \x20   server {{\n        listen 127.0.0.1:{port} ssl backlog=4096;\n        http2 on;\n\
         \x20       server_name localhost;\n\
         \x20       ssl_certificate {cert};\n        ssl_certificate_key {key};\n\
         \x20       ssl_protocols TLSv1.3;\n\
         \x20       ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;\n\
         \x20       ssl_ecdh_curve X25519;\n        root {root};\n    }}\n}}\n",
        work = p(&paths.work),
        conns = idle + 1000,
        cert = p(&paths.cert),
        key = p(&paths.key),
        root = p(&paths.docroot),
    )
}

/// The `q` quantile (0..=1) of sorted values, type 7 (linear between order statistics).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Request times from h2load's `--log-file` (start µs, status, duration µs per line): the
/// durations in ms, and the number of lines whose status was not 2xx.
pub fn parse_log(text: &str) -> Result<(Vec<f64>, usize)> {
    let mut ms = Vec::new();
    let mut bad = 0;
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let (Some(status), Some(us)) = (
            f.get(1).and_then(|s| s.trim().parse::<i64>().ok()),
            f.get(2).and_then(|s| s.trim().parse::<f64>().ok()),
        ) else {
            bail!("h2load log line {}: {line:?}", i + 1);
        };
        if !(200..300).contains(&status) {
            bad += 1;
        }
        ms.push(us / 1000.0);
    }
    Ok((ms, bad))
}

/// One h2load run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Run {
    /// Round number.
    pub round: usize,
    /// Idle connections open during the run.
    pub idle: usize,
    /// Requests logged.
    pub requests: usize,
    /// Median request time, ms.
    pub p50_ms: f64,
    /// 99th percentile request time, ms.
    pub p99_ms: f64,
    /// Slowest request, ms.
    pub max_ms: f64,
    /// Requests per second (requests / h2load's wall time).
    pub per_s: f64,
    /// Server CPU per request, µs.
    pub cpu_us: f64,
}

/// One round's memory: the server's `Pss` before and with the idle connections.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Memory {
    /// Round number.
    pub round: usize,
    /// KiB before opening.
    pub pss_before_kib: u64,
    /// KiB with the idle connections open.
    pub pss_idle_kib: u64,
    /// Seconds to open them.
    pub open_s: f64,
}

/// Medians over rounds and the ratios, from the runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Verdict {
    /// Median p99 without idle connections, ms.
    pub p99_a_ms: f64,
    /// Median p99 with them, ms.
    pub p99_b_ms: f64,
    /// `p99_b_ms / p99_a_ms`.
    pub ratio_of_medians: f64,
    /// Median over rounds of B/A of the same round.
    pub median_paired_ratio: f64,
    /// Median p50 without / with, ms.
    pub p50_a_ms: f64,
    /// Median p50 with idle connections, ms.
    pub p50_b_ms: f64,
    /// Median server CPU per request without / with, µs.
    pub cpu_a_us: f64,
    /// Median server CPU per request with idle connections, µs.
    pub cpu_b_us: f64,
}

/// Reduces the runs (A: `idle == 0`, B: the others) to medians and ratios.
pub fn verdict(runs: &[Run]) -> Option<Verdict> {
    let med = |b: bool, f: fn(&Run) -> f64| -> Option<f64> {
        let v: Vec<f64> = runs.iter().filter(|r| (r.idle > 0) == b).map(f).collect();
        stats::summarize(&v).map(|s| s.median)
    };
    let paired: Vec<f64> = runs
        .iter()
        .filter(|r| r.idle == 0)
        .filter_map(|a| {
            let b = runs.iter().find(|b| b.idle > 0 && b.round == a.round)?;
            stats::ratio(b.p99_ms, a.p99_ms)
        })
        .collect();
    let (p99_a_ms, p99_b_ms) = (med(false, |r| r.p99_ms)?, med(true, |r| r.p99_ms)?);
    Some(Verdict {
        p99_a_ms,
        p99_b_ms,
        ratio_of_medians: stats::ratio(p99_b_ms, p99_a_ms)?,
        median_paired_ratio: stats::summarize(&paired)?.median,
        p50_a_ms: med(false, |r| r.p50_ms)?,
        p50_b_ms: med(true, |r| r.p50_ms)?,
        cpu_a_us: med(false, |r| r.cpu_us)?,
        cpu_b_us: med(true, |r| r.cpu_us)?,
    })
}

/// The report in Markdown.
pub fn summary_markdown(opts: &Options, runs: &[Run], mem: &[Memory], v: &Verdict) -> String {
    let f = report::fmt_num;
    let mut s = format!(
        "# Idle connections under load\n\n\
         h2load `-n {} -c {H2_CONNECTIONS} -m {H2_STREAMS}` on `/1k` (HTTP/2, TLS 1.3), \
         {} rounds of A (no idle connection) and B ({} idle TLS 1.3 connections).\n\n\
         | | A: no idle | B: {} idle | B / A |\n|---|---|---|---|\n\
         | request p99, ms (median of rounds) | {} | {} | **{}** |\n\
         | request p99, median of per-round B/A | | | {} |\n\
         | request p50, ms | {} | {} | {} |\n\
         | server CPU per request, µs | {} | {} | {} |\n\n\
         Target: B's p99 within 10% of A's (ratio ≤ 1.10): **{}**.\n\n\
         | round | condition | requests | p50 ms | p99 ms | max ms | req/s | server CPU µs/req |\n\
         |---|---|---|---|---|---|---|---|\n",
        opts.requests,
        opts.rounds,
        opts.idle,
        opts.idle,
        f(v.p99_a_ms),
        f(v.p99_b_ms),
        f(v.ratio_of_medians),
        f(v.median_paired_ratio),
        f(v.p50_a_ms),
        f(v.p50_b_ms),
        f(v.p50_b_ms / v.p50_a_ms),
        f(v.cpu_a_us),
        f(v.cpu_b_us),
        f(v.cpu_b_us / v.cpu_a_us),
        if v.ratio_of_medians <= 1.10 && v.median_paired_ratio <= 1.10 {
            "met"
        } else {
            "missed"
        },
    );
    for r in runs {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.round,
            if r.idle == 0 { "A" } else { "B" },
            r.requests,
            f(r.p50_ms),
            f(r.p99_ms),
            f(r.max_ms),
            f(r.per_s),
            f(r.cpu_us),
        ));
    }
    s.push_str(
        "\n| round | Pss before, KiB | Pss with idle, KiB | KiB per idle connection | \
         open time, s |\n|---|---|---|---|---|\n",
    );
    for m in mem {
        let per = (m.pss_idle_kib as f64 - m.pss_before_kib as f64) / opts.idle as f64;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            m.round,
            m.pss_before_kib,
            m.pss_idle_kib,
            f(per),
            f(m.open_s)
        ));
    }
    s.push_str(
        "\nThe allocator keeps the heap the closed connections freed, so rounds after the first \
         open into it: round 1's growth is the cost of an idle connection.\n",
    );
    s
}

/// Entry point of the `idle-load` subcommand; returns the exit code.
pub fn main(args: Args) -> i32 {
    match run(&Options::from(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("firstbyte-bench idle-load: {e:#}");
            1
        }
    }
}

fn nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        0
    }
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// One h2load run against `url`, its log in `log`.
fn h2load(
    url: &str,
    requests: usize,
    log: &Path,
    pids: &[i32],
    round: usize,
    idle: usize,
) -> Result<Run> {
    // h2load appends to its log.
    let _ = std::fs::remove_file(log);
    let before = procfs::sample(pids)?;
    let start = Instant::now();
    let out = Command::new("h2load")
        .args(["-n", &requests.to_string()])
        .args(["-c", &H2_CONNECTIONS.to_string()])
        .args(["-m", &H2_STREAMS.to_string(), "-t", "1"])
        .arg("--log-file")
        .arg(log)
        .arg(url)
        .output()
        .context("run h2load")?;
    let wall = start.elapsed().as_secs_f64();
    let after = procfs::sample(pids)?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.contains("Application protocol: h2") {
        bail!("h2load failed ({}):\n{text}", out.status);
    }
    let (mut ms, bad) = parse_log(&std::fs::read_to_string(log)?)?;
    if bad > 0 || ms.len() != requests {
        bail!(
            "h2load: {} of {requests} requests logged, {bad} not 2xx:\n{text}",
            ms.len()
        );
    }
    ms.sort_by(f64::total_cmp);
    let cpu = procfs::cpu_seconds(&before, &after, procfs::clock_ticks_per_second());
    Ok(Run {
        round,
        idle,
        requests: ms.len(),
        p50_ms: quantile(&ms, 0.5).unwrap_or(f64::NAN),
        p99_ms: quantile(&ms, 0.99).unwrap_or(f64::NAN),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        per_s: ms.len() as f64 / wall,
        cpu_us: cpu * 1e6 / ms.len() as f64,
    })
}

fn run(opts: &Options) -> Result<()> {
    procfs::pin(0, CLIENT_CPU)?;
    crate::loopback::raise_nofile();
    let need = opts.idle as u64 + 1000;
    if nofile_limit() < need {
        bail!(
            "RLIMIT_NOFILE is {} (hard limit reached); {need} are needed for --idle {}: \
             raise the hard limit (ulimit -Hn) or lower --idle",
            nofile_limit(),
            opts.idle
        );
    }
    let firstbyte = crate::loopback::firstbyte_bin();
    if !firstbyte.exists() {
        bail!(
            "{} is missing: cargo build --release -p firstbyte",
            firstbyte.display()
        );
    }
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = opts.out.clone().unwrap_or_else(|| {
        crate::loopback::workspace_dir()
            .join("bench/out")
            .join(format!("idle-load-{}", report::utc_stamp(started)))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let out = std::fs::canonicalize(&out)?;
    let (cert, key, docroot, cert_der) =
        crate::loopback::small_fixtures(&std::env::temp_dir().join("firstbyte-bench-idle-load"))
            .context("fixtures")?;
    let paths = Paths {
        cert,
        key,
        docroot,
        work: out.join("server"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = client::config(cert_der)?;
    let mut server =
        Running::start_with(Kind::Firstbyte, &paths, &firstbyte, SERVER_CPU, |port| {
            render(&paths, port, opts.idle)
        })?;
    let pids = procfs::tree(server.pid)?;
    procfs::pin_all(&pids, SERVER_CPU)?;
    let url = format!("https://127.0.0.1:{}/1k", server.addr.port());
    let log = out.join("h2load.log");
    // Warm-up: the server's first handshakes and allocations, h2load's too.
    h2load(&url, opts.requests.min(5000), &log, &pids, 0, 0).context("warm-up")?;
    let base_fds = open_fds(server.pid);
    let (mut runs, mut mem) = (Vec::new(), Vec::new());
    let mut progress = Progress::new(
        "idle-load",
        &[("A", opts.rounds), ("B with idle connections", opts.rounds)],
    );
    for round in 1..=opts.rounds {
        let a = h2load(&url, opts.requests, &log, &pids, round, 0)?;
        eprintln!(
            "round {round} A: p99 {:.3} ms, {:.0} req/s",
            a.p99_ms, a.per_s
        );
        runs.push(a);
        progress.step("A");

        let pss_before_kib = procfs::sample(&pids)?.pss_kib;
        let t = Instant::now();
        let idle = runtime
            .block_on(client::open_idle(
                server.addr,
                tls.clone(),
                "/1k",
                opts.idle,
                OPEN_CONCURRENCY,
            ))
            .context("open the idle connections")?;
        let open_s = t.elapsed().as_secs_f64();
        // Let the server park them (HTTP/1.1 parks 5 ms after a response).
        std::thread::sleep(Duration::from_millis(500));
        let pss_idle_kib = procfs::sample(&pids)?.pss_kib;
        mem.push(Memory {
            round,
            pss_before_kib,
            pss_idle_kib,
            open_s,
        });

        let b = h2load(&url, opts.requests, &log, &pids, round, idle.len())?;
        eprintln!(
            "round {round} B: p99 {:.3} ms, {:.0} req/s ({} idle open in {open_s:.1} s)",
            b.p99_ms,
            b.per_s,
            idle.len()
        );
        runs.push(b);
        if open_fds(server.pid) < base_fds + opts.idle {
            bail!("the server closed idle connections during the run");
        }

        drop(idle);
        let deadline = Instant::now() + Duration::from_secs(60);
        while open_fds(server.pid) > base_fds + 8 {
            if Instant::now() > deadline {
                bail!(
                    "the server still holds {} descriptors",
                    open_fds(server.pid)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        progress.step("B with idle connections");
    }
    server.stop();
    let _ = std::fs::remove_file(&log);
    let v = verdict(&runs).context("no runs")?;
    let args: Vec<String> = std::env::args().collect();
    let ws = crate::loopback::workspace_dir().display().to_string();
    let machine = format!(
        "\n## Machine and command\n\n- date (UTC): {}\n- command: `{}`\n- firstbyte: `{}`, \
         workspace commit {}\n- kernel: {}\n- h2load: {}\n- load average (1 min) at the end: {}\n",
        report::utc_stamp(started),
        args.join(" "),
        firstbyte.display(),
        crate::loopback::tool_version(&["git", "-C", &ws, "rev-parse", "--short", "HEAD"]),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim(),
        crate::loopback::tool_version(&["h2load", "--version"]),
        crate::loopback::load_average().map_or("?".into(), |l| format!("{l:.2}")),
    );
    let md = summary_markdown(opts, &runs, &mem, &v) + &machine;
    report::write_outputs(
        &out,
        &md,
        &serde_json::json!({ "runs": runs, "memory": mem, "verdict": v }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        match crate::cli::parse(&[&["idle-load"], list].concat())? {
            crate::cli::Command::IdleLoad(a) => Ok(a.into()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_quick_and_overrides() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.rounds, o.idle, o.requests), (10, 10_000, 30_000));
        let o = parse(&["--quick"]).unwrap();
        assert_eq!((o.rounds, o.idle, o.requests), (2, 2_000, 10_000));
        let o = parse(&["--quick", "--idle", "10_000", "--rounds", "3"]).unwrap();
        assert_eq!((o.rounds, o.idle, o.requests), (3, 10_000, 10_000));
        for bad in [
            &["--idle"][..],
            &["--idle", "0"],
            &["--rounds", "x"],
            &["--requests", "1e4"],
            &["--what"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn config_has_room_and_long_timers() {
        let paths = Paths {
            cert: "/b/c.pem".into(),
            key: "/b/k.pem".into(),
            docroot: "/b/www".into(),
            work: "/b/w".into(),
        };
        let c = render(&paths, 8443, 10_000);
        for want in [
            "worker_processes 1;",
            "worker_connections 11000;",
            "keepalive_timeout 600s;",
            "client_header_timeout 600s;",
            "listen 127.0.0.1:8443 ssl backlog=4096;",
            "http2 on;",
            "ssl_protocols TLSv1.3;",
            "root /b/www;",
        ] {
            assert!(c.contains(want), "lacks {want:?}:\n{c}");
        }
    }

    #[test]
    fn type7_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.5));
        assert!((quantile(&v, 0.99).unwrap() - 99.01).abs() < 1e-9);
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[3.0], 0.99), Some(3.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn h2load_log_lines() {
        let (ms, bad) =
            parse_log("1700000000000000\t200\t1500\n1700000000000100\t404\t250\n").unwrap();
        assert_eq!(ms, vec![1.5, 0.25]);
        assert_eq!(bad, 1);
        assert!(parse_log("garbage\n").is_err());
        assert_eq!(parse_log("").unwrap().0.len(), 0);
    }

    fn run(round: usize, idle: usize, p99: f64) -> Run {
        Run {
            round,
            idle,
            requests: 100,
            p50_ms: p99 / 2.0,
            p99_ms: p99,
            max_ms: p99 * 2.0,
            per_s: 1000.0,
            cpu_us: if idle > 0 { 11.0 } else { 10.0 },
        }
    }

    #[test]
    fn verdict_medians_and_paired_ratios() {
        let runs = [
            run(1, 0, 2.0),
            run(1, 10, 2.2),
            run(2, 0, 4.0),
            run(2, 10, 4.0),
            run(3, 0, 3.0),
            run(3, 10, 3.0),
        ];
        let v = verdict(&runs).unwrap();
        assert_eq!((v.p99_a_ms, v.p99_b_ms), (3.0, 3.0));
        assert_eq!(v.ratio_of_medians, 1.0);
        assert_eq!(v.median_paired_ratio, 1.0);
        assert_eq!((v.cpu_a_us, v.cpu_b_us), (10.0, 11.0));
        assert!(verdict(&runs[..1]).is_none(), "no B");
        let md = summary_markdown(
            &parse(&[]).unwrap(),
            &runs,
            &[Memory {
                round: 1,
                pss_before_kib: 1000,
                pss_idle_kib: 101_000,
                open_s: 2.0,
            }],
            &v,
        );
        assert!(md.contains("| 1 | 1000 | 101000 | 10.00 | 2.000 |"), "{md}");
        assert!(md.contains("**met**"), "{md}");
    }
}
