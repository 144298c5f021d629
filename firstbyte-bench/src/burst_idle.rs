//! `firstbyte-bench burst-idle [--quick] [--out DIR] [--idle N] [--seconds S]
//! [--variant LABEL=PATH ...] [--nginx]`: does the memory a burst of idle connections took come
//! back once they close?
//!
//! For each variant (a firstbyte binary under a label, e.g. one per allocator build; default
//! one, `firstbyte` = the release binary) and, with `--nginx`, Debian's nginx: the server starts
//! (one worker, pinned to CPU 1; this process and its clients on CPU 0), is warmed with
//! [`WARM_HANDSHAKES`] full handshakes with a request each, and left [`SETTLE`] to settle; the
//! process tree's `Pss` and `RSS` are the *start*. Then `--idle` (default 10,000) TLS 1.3
//! connections are opened and left idle (a full handshake and one HTTP/1.1 keep-alive request
//! each, as `idle-load` does) and the tree is sampled (*open*); all of them are closed at once
//! and the tree is sampled every second for `--seconds` (default 75). The curve of each server
//! goes to `curve-LABEL.csv` (seconds since the close, phase, Pss, RSS, the server's open
//! descriptors); `summary.md` and `results.json` give, per server, start, open, the peak, the
//! values 1, 10 and 60 s after the close and each one's ratio to the start.
//!
//! Memory is not timing: the figures hold on a loaded machine too (they depend on what the
//! server allocated, not on when it ran), so this bench is valid on the shared machine.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::{positive, Common};
use crate::loopback::servers::{self, Kind, Paths, Running};
use crate::loopback::{client, procfs, report};

/// The CPU of the harness and its clients.
const CLIENT_CPU: usize = 0;
/// The CPU of every server thread.
const SERVER_CPU: usize = 1;
/// Handshakes in flight while the idle connections are opened.
const OPEN_CONCURRENCY: usize = 64;
/// Warm-up: full handshakes with one `Connection: close` request each, so the start sample
/// counts a server that has done its first handshakes, not a fresh one.
const WARM_HANDSHAKES: usize = 500;
/// Pause after the warm-up before the start sample.
const SETTLE: Duration = Duration::from_secs(2);
/// The seconds after the close the summary reports.
pub const MARKS: [u64; 3] = [1, 10, 60];

/// Options of `firstbyte-bench burst-idle`, as given.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Idle TLS connections opened in the burst [default: 10000, or 2000 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    idle: Option<usize>,
    /// Seconds sampled after the close [default: 75, or 12 with --quick].
    #[arg(long, value_name = "S", value_parser = positive)]
    seconds: Option<usize>,
    /// A firstbyte binary to measure, under a label (repeat for several; default
    /// `firstbyte=` the release binary).
    #[arg(long, value_name = "LABEL=PATH", value_parser = variant)]
    variant: Vec<(String, PathBuf)>,
    /// Also measure Debian's nginx (one worker) the same way.
    #[arg(long)]
    nginx: bool,
}

/// Parses `LABEL=PATH`; the label names a CSV file, so it is letters, digits, `-`, `_`, `+`.
pub fn variant(text: &str) -> Result<(String, PathBuf), String> {
    let Some((label, path)) = text.split_once('=') else {
        return Err(format!("{text:?} is not LABEL=PATH"));
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_+".contains(c);
    if label.is_empty() || !label.chars().all(ok) || label == "nginx" {
        return Err(format!(
            "{label:?} is not a label (letters, digits, - _ +; not nginx)"
        ));
    }
    if path.is_empty() {
        return Err("empty path".into());
    }
    Ok((label.to_string(), PathBuf::from(path)))
}

/// What a run does: the arguments with the `--quick` defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Output directory (default `bench/out/burst-idle-<UTC stamp>/`).
    pub out: Option<PathBuf>,
    /// Idle connections in the burst.
    pub idle: usize,
    /// Seconds sampled after the close.
    pub seconds: usize,
    /// firstbyte binaries by label (empty: the release binary as `firstbyte`).
    pub variants: Vec<(String, PathBuf)>,
    /// Whether nginx is measured too.
    pub nginx: bool,
}

impl From<Args> for Options {
    fn from(a: Args) -> Self {
        let quick = a.common.quick;
        Options {
            out: a.common.out,
            idle: a.idle.unwrap_or(if quick { 2_000 } else { 10_000 }),
            seconds: a.seconds.unwrap_or(if quick { 12 } else { 75 }),
            variants: a.variant,
            nginx: a.nginx,
        }
    }
}

/// One sample of the server's process tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Seconds since the idle connections were closed (negative before).
    pub t_s: f64,
    /// `start`, `open` or `after`.
    pub phase: &'static str,
    /// Sum of `Pss` over the tree, KiB.
    pub pss_kib: u64,
    /// Sum of `VmRSS` over the tree, KiB.
    pub rss_kib: u64,
    /// Descriptors the server's processes hold.
    pub fds: usize,
}

/// A value and its ratio to the start value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mark {
    /// What is reported: `start`, `open`, `peak`, `+1s`, `+10s`, `+60s`.
    pub name: &'static str,
    /// Pss, KiB.
    pub pss_kib: u64,
    /// RSS, KiB.
    pub rss_kib: u64,
    /// `pss_kib / start's pss_kib`.
    pub pss_ratio: f64,
    /// `rss_kib / start's rss_kib`.
    pub rss_ratio: f64,
}

/// The figures of one server's curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curve {
    /// The server's label.
    pub label: String,
    /// Idle connections opened.
    pub idle: usize,
    /// Seconds to open them.
    pub open_s: f64,
    /// The marks in order: start, open, peak, then one per [`MARKS`] second reached.
    pub marks: Vec<Mark>,
    /// Pss growth per idle connection while open, KiB.
    pub open_kib_each: f64,
}

/// The marks of a curve: `points` holds one `start`, one `open` and the `after` samples in
/// time order. A `+Ns` mark is the first `after` sample at or past N s; marks past the last
/// sample are left out. `None` without a start or an open sample, or with a zero start.
pub fn marks(points: &[Point]) -> Option<Vec<Mark>> {
    let start = points.iter().find(|p| p.phase == "start")?;
    let open = points.iter().find(|p| p.phase == "open")?;
    if start.pss_kib == 0 || start.rss_kib == 0 {
        return None;
    }
    let mark = |name: &'static str, p: &Point| Mark {
        name,
        pss_kib: p.pss_kib,
        rss_kib: p.rss_kib,
        pss_ratio: p.pss_kib as f64 / start.pss_kib as f64,
        rss_ratio: p.rss_kib as f64 / start.rss_kib as f64,
    };
    let peak = points.iter().max_by_key(|p| p.pss_kib)?;
    let mut out = vec![mark("start", start), mark("open", open), mark("peak", peak)];
    let names = ["+1s", "+10s", "+60s"];
    for (s, name) in MARKS.iter().zip(names) {
        let at = points
            .iter()
            .find(|p| p.phase == "after" && p.t_s >= *s as f64 - 0.05);
        if let Some(p) = at {
            out.push(mark(name, p));
        }
    }
    Some(out)
}

/// The curve as CSV.
pub fn csv(points: &[Point]) -> String {
    let mut s = String::from("t_s,phase,pss_kib,rss_kib,fds\n");
    for p in points {
        s.push_str(&format!(
            "{:.2},{},{},{},{}\n",
            p.t_s, p.phase, p.pss_kib, p.rss_kib, p.fds
        ));
    }
    s
}

/// The summary in Markdown: one table per measure (Pss, RSS), one row per server.
pub fn summary_markdown(opts: &Options, curves: &[Curve]) -> String {
    let f = report::fmt_num;
    let mut s = format!(
        "# Memory after a burst of idle connections\n\n\
         {} idle TLS 1.3 connections (full handshake + one HTTP/1.1 keep-alive request each) \
         opened at once, then all closed; the server's process tree sampled every second for \
         {} s. Figures in MiB; the ratio to the start in parentheses. Target: within 10 % of \
         the start a minute after the close.\n",
        opts.idle, opts.seconds
    );
    for (what, pick) in [
        (
            "Pss",
            (|m: &Mark| (m.pss_kib, m.pss_ratio)) as fn(&Mark) -> (u64, f64),
        ),
        ("RSS", |m: &Mark| (m.rss_kib, m.rss_ratio)),
    ] {
        s.push_str(&format!(
            "\n## {what}\n\n| server | start | open | peak | +1 s | +10 s | +60 s | \
             KiB per idle connection (Pss) | open time, s |\n|---|---|---|---|---|---|---|---|---|\n"
        ));
        for c in curves {
            let cell = |name: &str| {
                c.marks
                    .iter()
                    .find(|m| m.name == name)
                    .map_or("—".into(), |m| {
                        let (kib, r) = pick(m);
                        format!("{} ({})", f(kib as f64 / 1024.0), f(r))
                    })
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                c.label,
                cell("start"),
                cell("open"),
                cell("peak"),
                cell("+1s"),
                cell("+10s"),
                cell("+60s"),
                f(c.open_kib_each),
                f(c.open_s),
            ));
        }
    }
    s
}

/// nginx's loopback config with room for `idle` connections.
pub fn nginx_config(paths: &Paths, port: u16, idle: usize) -> String {
    let room = idle + 1000;
    servers::render(Kind::Nginx, paths, port)
        .replace(
            "worker_connections 4096;",
            &format!("worker_connections {room};"),
        )
        .replace(
            "worker_rlimit_nofile 8192;",
            &format!("worker_rlimit_nofile {};", room * 2),
        )
}

/// Entry point of the `burst-idle` subcommand; returns the exit code.
pub fn main(args: Args) -> i32 {
    match run(&Options::from(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("firstbyte-bench burst-idle: {e:#}");
            1
        }
    }
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn point(pids: &[i32], t_s: f64, phase: &'static str) -> Result<Point> {
    let s = procfs::sample(pids)?;
    Ok(Point {
        t_s,
        phase,
        pss_kib: s.pss_kib,
        rss_kib: s.rss_kib,
        fds: pids.iter().map(|&p| open_fds(p)).sum(),
    })
}

/// One server's curve.
fn measure(
    label: &str,
    server: &Running,
    rt: &tokio::runtime::Runtime,
    tls: &std::sync::Arc<rustls::ClientConfig>,
    opts: &Options,
) -> Result<(Curve, Vec<Point>)> {
    let pids = procfs::tree(server.pid)?;
    procfs::pin_all(&pids, SERVER_CPU)?;
    let warm = rt
        .block_on(client::handshakes(
            server.addr,
            tls.clone(),
            "/1k",
            WARM_HANDSHAKES,
            16,
        ))
        .context("warm-up")?;
    if warm.done != WARM_HANDSHAKES {
        bail!("warm-up: {} of {WARM_HANDSHAKES} handshakes", warm.done);
    }
    std::thread::sleep(SETTLE);
    // The tree again: nginx's worker is there now for sure.
    let pids = procfs::tree(server.pid)?;
    let mut points = vec![point(&pids, f64::NAN, "start")?];
    let t = Instant::now();
    let idle = rt
        .block_on(client::open_idle(
            server.addr,
            tls.clone(),
            "/1k",
            opts.idle,
            OPEN_CONCURRENCY,
        ))
        .context("open the idle connections")?;
    let open_s = t.elapsed().as_secs_f64();
    // Let the server finish each response and go idle (HTTP/1.1 parks 5 ms after one).
    std::thread::sleep(Duration::from_millis(1000));
    let open = point(&pids, f64::NAN, "open")?;
    if open.fds < opts.idle {
        bail!(
            "{label}: {} descriptors open with {} idle connections",
            open.fds,
            opts.idle
        );
    }
    points.push(open);
    let closed = Instant::now();
    drop(idle);
    for i in 1..=opts.seconds {
        let due = closed + Duration::from_secs(i as u64);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let t_s = closed.elapsed().as_secs_f64();
        points.push(point(&pids, t_s, "after")?);
    }
    let start = points[0];
    let curve = Curve {
        label: label.to_string(),
        idle: opts.idle,
        open_s,
        marks: marks(&points).context("no start or open sample")?,
        open_kib_each: (open.pss_kib as f64 - start.pss_kib as f64) / opts.idle as f64,
    };
    eprintln!(
        "{label}: start {} KiB, open {} KiB, +{}s {} KiB",
        start.pss_kib,
        open.pss_kib,
        opts.seconds,
        points.last().map_or(0, |p| p.pss_kib)
    );
    Ok((curve, points))
}

fn run(opts: &Options) -> Result<()> {
    procfs::pin(0, CLIENT_CPU)?;
    crate::loopback::raise_nofile();
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = opts.out.clone().unwrap_or_else(|| {
        crate::loopback::workspace_dir()
            .join("bench/out")
            .join(format!("burst-idle-{}", report::utc_stamp(started)))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let out = std::fs::canonicalize(&out)?;
    let (cert, key, docroot, cert_der) =
        crate::loopback::small_fixtures(&std::env::temp_dir().join("firstbyte-bench-burst-idle"))
            .context("fixtures")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = client::config(cert_der)?;
    let mut variants = opts.variants.clone();
    if variants.is_empty() {
        variants.push(("firstbyte".into(), crate::loopback::firstbyte_bin()));
    }
    let mut servers: Vec<(String, Kind, PathBuf)> = variants
        .into_iter()
        .map(|(l, p)| (l, Kind::Firstbyte, p))
        .collect();
    if opts.nginx {
        servers.push(("nginx".into(), Kind::Nginx, PathBuf::new()));
    }
    let (mut curves, mut binaries) = (Vec::new(), Vec::new());
    for (label, kind, bin) in &servers {
        if *kind == Kind::Firstbyte && !bin.exists() {
            bail!("{} is missing", bin.display());
        }
        let paths = Paths {
            cert: cert.clone(),
            key: key.clone(),
            docroot: docroot.clone(),
            work: out.join("servers").join(label),
        };
        let mut server = Running::start_with(*kind, &paths, bin, SERVER_CPU, |port| {
            if *kind == Kind::Nginx {
                nginx_config(&paths, port, opts.idle)
            } else {
                crate::idle_load::render(&paths, port, opts.idle)
            }
        })?;
        let (curve, points) = measure(label, &server, &rt, &tls, opts)?;
        server.stop();
        std::fs::write(out.join(format!("curve-{label}.csv")), csv(&points))?;
        curves.push(curve);
        let shown = match kind {
            Kind::Nginx => "/usr/sbin/nginx".into(),
            _ => bin.display().to_string(),
        };
        binaries.push(format!("- {label}: `{shown}`"));
    }
    let args: Vec<String> = std::env::args().collect();
    let ws = crate::loopback::workspace_dir().display().to_string();
    let md = summary_markdown(opts, &curves)
        + &format!(
            "\n## Machine and command\n\n- date (UTC): {}\n- command: `{}`\n- workspace \
             commit {}\n- kernel: {}\n- load average (1 min) at the end: {} (memory is not \
             timing: the figures hold on a loaded machine)\n- binaries:\n{}\n",
            report::utc_stamp(started),
            args.join(" "),
            crate::loopback::tool_version(&["git", "-C", &ws, "rev-parse", "--short", "HEAD"]),
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim(),
            crate::loopback::load_average().map_or("?".into(), |l| format!("{l:.2}")),
            binaries.join("\n"),
        );
    report::write_outputs(&out, &md, &curves)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        match crate::cli::parse(&[&["burst-idle"], list].concat())? {
            crate::cli::Command::BurstIdle(a) => Ok(a.into()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_defaults_quick_and_variants() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.idle, o.seconds, o.nginx), (10_000, 75, false));
        assert!(o.variants.is_empty());
        let o = parse(&["--quick", "--nginx"]).unwrap();
        assert_eq!((o.idle, o.seconds, o.nginx), (2_000, 12, true));
        let o = parse(&[
            "--variant",
            "glibc=/a/fb",
            "--variant",
            "jemalloc=/b/fb",
            "--idle",
            "5_000",
        ])
        .unwrap();
        assert_eq!(o.idle, 5_000);
        assert_eq!(
            o.variants,
            vec![
                ("glibc".to_string(), PathBuf::from("/a/fb")),
                ("jemalloc".to_string(), PathBuf::from("/b/fb"))
            ]
        );
        for bad in [
            &["--variant", "nolabel"][..],
            &["--variant", "=/a"],
            &["--variant", "a/b=/x"],
            &["--variant", "nginx=/x"],
            &["--variant", "x="],
            &["--idle", "0"],
            &["--seconds", "x"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }

    fn p(t_s: f64, phase: &'static str, pss: u64) -> Point {
        Point {
            t_s,
            phase,
            pss_kib: pss,
            rss_kib: pss + 100,
            fds: 10,
        }
    }

    #[test]
    fn marks_pick_the_first_sample_at_each_second() {
        let mut pts = vec![p(f64::NAN, "start", 1000), p(f64::NAN, "open", 9000)];
        for s in 1..=61 {
            // 1.01, 2.01, ...: sampling is a little late; the peak comes after the close.
            let pss = if s == 1 { 9500 } else { 9000 - 130 * s as u64 };
            pts.push(p(s as f64 + 0.01, "after", pss));
        }
        let m = marks(&pts).unwrap();
        let names: Vec<_> = m.iter().map(|m| m.name).collect();
        assert_eq!(names, ["start", "open", "peak", "+1s", "+10s", "+60s"]);
        assert_eq!(m[0].pss_ratio, 1.0);
        assert_eq!((m[1].pss_kib, m[1].pss_ratio), (9000, 9.0));
        assert_eq!(m[2].pss_kib, 9500, "peak");
        assert_eq!(m[3].pss_kib, 9500);
        assert_eq!(m[4].pss_kib, 9000 - 1300);
        assert_eq!(m[5].pss_kib, 9000 - 7800);
        assert!((m[5].rss_ratio - 1300.0 / 1100.0).abs() < 1e-12);
        // A short run has no +60s mark.
        let short = marks(&pts[..13]).unwrap();
        assert_eq!(short.last().unwrap().name, "+10s");
        // No start or a zero start: nothing to compare with.
        assert!(marks(&pts[1..]).is_none());
        assert!(marks(&[p(0.0, "start", 0), p(0.0, "open", 5)]).is_none());
    }

    #[test]
    fn csv_and_summary() {
        let pts = vec![
            p(f64::NAN, "start", 2048),
            p(f64::NAN, "open", 4096),
            p(1.0, "after", 3072),
        ];
        let c = csv(&pts);
        assert!(c.starts_with("t_s,phase,pss_kib,rss_kib,fds\n"));
        assert!(c.contains("NaN,open,4096,4196,10\n"), "{c}");
        assert!(c.contains("1.00,after,3072,3172,10\n"), "{c}");
        let curve = Curve {
            label: "glibc".into(),
            idle: 2,
            open_s: 1.5,
            marks: marks(&pts).unwrap(),
            open_kib_each: 1024.0,
        };
        let md = summary_markdown(&parse(&["--idle", "2"]).unwrap(), &[curve]);
        assert!(
            md.contains("| glibc | 2.000 (1.000) | 4.000 (2.000) | 4.000 (2.000) | 3.000 (1.500) | — | — | 1024 | 1.500 |"),
            "{md}"
        );
        assert!(md.contains("## RSS"));
    }

    #[test]
    fn nginx_gets_room_for_the_burst() {
        let paths = Paths {
            cert: "/b/c.pem".into(),
            key: "/b/k.pem".into(),
            docroot: "/b/www".into(),
            work: "/b/w".into(),
        };
        let c = nginx_config(&paths, 8443, 10_000);
        assert!(c.contains("worker_connections 11000;"), "{c}");
        assert!(c.contains("worker_rlimit_nofile 22000;"), "{c}");
        assert!(!c.contains("4096;"), "{c}");
    }
}
