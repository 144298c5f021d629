//! `firstbyte-bench sslcache [--quick] [--out DIR] [--rounds N] ...`: the SSL object cache
//! bench of issue 5, after the seed's test of nginx 1.27.2–1.27.4.
//!
//! Data flow: [`main`] takes the options ([`Args`], parsed by clap in `crate::cli`), makes the certificate files
//! once ([`fixtures`]), then takes four measures, each written to the output directory and
//! summed up in one table ([`report`]):
//! 1. `-t` — one server with N locations each with `proxy_ssl_certificate` at 0, 10, 50 and
//!    100% uniqueness, and M servers each with its own certificate: firstbyte and Debian's
//!    nginx on the same config file, interleaved (the order flips every round), wall time
//!    and peak RSS from `wait4(2)`, medians over the rounds.
//! 2. Instructions — the same configs under `valgrind --tool=callgrind` (perf has no
//!    counters here), once per server and config, at sizes small enough for valgrind (nginx
//!    at 10,000 unique SSL contexts takes too long under it); the sizes are in the table.
//! 3. Reloads — firstbyte serving the M-server config: SIGHUP to the "reconfiguration done"
//!    notice with nothing changed, with one certificate replaced (new inode), and with every
//!    file touched (a reload that parses everything again: the cold cost on the same path).
//! 4. Handshakes — one firstbyte with a static certificate on one port and
//!    `ssl_certificate $ssl_server_name` + `ssl_certificate_cache` on another; a rustls
//!    client that never resumes, batches interleaved, server CPU per handshake from
//!    `/proc/PID/task/*/schedstat`. Server on CPU 1, client on CPU 0.

mod fixtures;
mod handshakes;
mod measure;
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

use crate::cli::{positive, Common};
use crate::progress::Progress;

use report::{HandshakeRow, ReloadRow, Report, TestRow};

/// Uniqueness percentages of the seed's test.
const UNIQUENESS: [u32; 4] = [0, 10, 50, 100];
/// Debian's nginx.
const NGINX: &str = "/usr/sbin/nginx";
/// The CPU the handshake client runs on; the server runs on [`SERVER_CPU`].
const CLIENT_CPU: usize = 0;
/// The CPU of the handshake bench's server.
const SERVER_CPU: usize = 1;
/// SNI names the dynamic-certificate server sees (four files in its cache).
const NAMES: usize = 4;

/// Command-line options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Output directory (default `bench/out/sslcache-<UTC stamp>/`).
    pub out: Option<PathBuf>,
    /// Rounds per measure (default 5; quick 2).
    pub rounds: usize,
    /// Locations of the `-t` location configs (default 10,000, the seed's).
    pub locations: usize,
    /// Servers of the `-t` server config and of the reloads (default 1,000).
    pub servers: usize,
    /// Locations under callgrind (default 1,000).
    pub callgrind_locations: usize,
    /// Servers under callgrind (default 1,000).
    pub callgrind_servers: usize,
    /// Skip callgrind.
    pub no_callgrind: bool,
    /// Handshakes per batch (default 3,000; quick 500).
    pub handshakes: usize,
    /// Concurrent client connections (default 4).
    pub concurrency: usize,
    /// Only the handshake comparison (static vs `$ssl_server_name` certificates).
    pub handshakes_only: bool,
}

/// Options of `firstbyte-bench sslcache`, as given; `None` takes the default of
/// [`Args::options`].
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Rounds per measure [default: 5, or 2 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    rounds: Option<usize>,
    /// Locations of the `-t` location configs [default: 10000 (the seed's), or 1000 with
    /// --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    locations: Option<usize>,
    /// Servers of the `-t` server config and of the reloads [default: 1000, or 200 with
    /// --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    servers: Option<usize>,
    /// Locations under callgrind [default: 1000, or 200 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    callgrind_locations: Option<usize>,
    /// Servers under callgrind [default: 1000, or 100 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    callgrind_servers: Option<usize>,
    /// Skip the callgrind measures.
    #[arg(long)]
    no_callgrind: bool,
    /// Handshakes per batch [default: 3000, or 500 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    handshakes: Option<usize>,
    /// Concurrent client connections of the handshake bench.
    #[arg(long, value_name = "N", default_value = "4", value_parser = positive)]
    concurrency: usize,
    /// Only the handshake comparison (static vs `$ssl_server_name` certificates).
    #[arg(long)]
    handshakes_only: bool,
}

impl Args {
    /// The options with the (`--quick`) defaults filled in.
    pub fn options(self) -> Options {
        let q = self.common.quick;
        let pick = |set: Option<usize>, quick: usize, full: usize| {
            set.unwrap_or(if q { quick } else { full })
        };
        Options {
            out: self.common.out,
            rounds: pick(self.rounds, 2, 5),
            locations: pick(self.locations, 1_000, 10_000),
            servers: pick(self.servers, 200, 1_000),
            callgrind_locations: pick(self.callgrind_locations, 200, 1_000),
            callgrind_servers: pick(self.callgrind_servers, 100, 1_000),
            no_callgrind: self.no_callgrind,
            handshakes: pick(self.handshakes, 500, 3_000),
            concurrency: self.concurrency,
            handshakes_only: self.handshakes_only,
        }
    }
}

/// `-t` configs per size: the baseline, one per uniqueness, the server config.
const CASES: usize = UNIQUENESS.len() + 2;

/// The run's steps by phase, for the progress line (pure).
pub fn phases(o: &Options) -> Vec<(&'static str, usize)> {
    if o.handshakes_only {
        return vec![("handshakes", 2 * o.rounds)];
    }
    let mut p = vec![("-t", CASES * 2 * o.rounds)];
    if !o.no_callgrind {
        p.push(("callgrind", CASES * 2));
    }
    p.push(("reloads", o.rounds));
    p.push(("handshakes", 2 * o.rounds));
    if !o.no_callgrind {
        p.push(("callgrind reload", 1));
    }
    p
}

/// Entry point of `firstbyte-bench sslcache`.
pub fn main(args: Args) -> i32 {
    let o = args.options();
    // The command line as given, for the report.
    let given: Vec<String> = std::env::args().skip(2).collect();
    match run(&o, &given) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("firstbyte-bench sslcache: {e:#}");
            1
        }
    }
}

fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The firstbyte binary: `FB_BENCH_FIRSTBYTE`, else the one beside this binary, else
/// `target/release/firstbyte`.
fn firstbyte_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("FB_BENCH_FIRSTBYTE") {
        return p.into();
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("firstbyte")));
    match beside {
        Some(p) if p.exists() => p,
        _ => workspace_dir().join("target/release/firstbyte"),
    }
}

fn utc_stamp() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    out.trim().to_string()
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The two servers of the `-t` comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// This repository's server.
    Firstbyte,
    /// Debian's nginx 1.22 (no SSL object cache).
    Nginx,
}

impl Kind {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Firstbyte => "firstbyte",
            Kind::Nginx => "nginx",
        }
    }

    fn test_argv(self, fb: &Path, conf: &Path, work: &Path) -> Vec<String> {
        let c = conf.display().to_string();
        match self {
            Kind::Firstbyte => vec![fb.display().to_string(), "-t".into(), "-c".into(), c],
            Kind::Nginx => vec![
                NGINX.into(),
                "-t".into(),
                "-p".into(),
                format!("{}/", work.display()),
                "-e".into(),
                format!("{}/nginx-early.log", work.display()),
                "-c".into(),
                c,
            ],
        }
    }
}

/// One `-t` config: its label, file, and the counts it stands for.
struct Case {
    label: String,
    conf: PathBuf,
    references: usize,
    unique: usize,
}

fn write_cases(
    work: &Path,
    certs: &Path,
    locations: usize,
    servers: usize,
    tag: &str,
) -> Result<Vec<Case>> {
    let port = free_port()?;
    let conf = work.join(format!("{tag}-locations-none.conf"));
    std::fs::write(
        &conf,
        fixtures::locations_conf(work, certs, port, locations, None),
    )?;
    let mut cases = vec![Case {
        label: format!("{locations} locations, no certificate (baseline)"),
        conf,
        references: 0,
        unique: 0,
    }];
    for pct in UNIQUENESS {
        let conf = work.join(format!("{tag}-locations-{pct}.conf"));
        std::fs::write(
            &conf,
            fixtures::locations_conf(work, certs, port, locations, Some(pct)),
        )?;
        cases.push(Case {
            label: format!("{locations} locations, {pct}% unique"),
            conf,
            references: locations,
            unique: fixtures::unique_count(locations, pct),
        });
    }
    let conf = work.join(format!("{tag}-servers.conf"));
    std::fs::write(&conf, fixtures::servers_conf(work, certs, port, servers))?;
    cases.push(Case {
        label: format!("{servers} servers, own certificate each"),
        conf,
        references: servers,
        unique: servers,
    });
    Ok(cases)
}

fn run(o: &Options, args: &[String]) -> Result<()> {
    let fb = firstbyte_bin();
    if !fb.exists() {
        bail!(
            "no firstbyte binary at {} (cargo build --release -p firstbyte)",
            fb.display()
        );
    }
    let out = match &o.out {
        Some(d) => d.clone(),
        None => workspace_dir().join(format!("bench/out/sslcache-{}", utc_stamp())),
    };
    // Absolute: the configs name files by this path, relative to their own directory.
    let out = if out.is_relative() {
        std::env::current_dir()?.join(out)
    } else {
        out
    };
    let work = out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let certs = std::env::temp_dir().join("firstbyte-sslcache-certs");
    let need = o
        .locations
        .max(o.servers)
        .max(o.callgrind_locations)
        .max(o.callgrind_servers);
    eprintln!(
        "sslcache: certificates ({need} ECDSA P-256 pairs) in {}",
        certs.display()
    );
    fixtures::ensure_pairs(&certs, need)?;

    let mut report = Report::new(args, &fb, o);
    let mut progress = Progress::new("sslcache", &phases(o));
    if o.handshakes_only {
        report.handshakes = handshake_bench(o, &fb, &work, &mut progress)?;
        let table = report.table();
        println!("{table}");
        report.write(&out, &table)?;
        eprintln!("sslcache: results in {}", out.display());
        return Ok(());
    }
    // 1. -t, interleaved.
    let cases = write_cases(&work, &certs, o.locations, o.servers, "t")?;
    for case in &cases {
        let mut row = TestRow::new(&case.label, case.references, case.unique);
        for round in 0..o.rounds {
            let order = if round % 2 == 0 {
                [Kind::Firstbyte, Kind::Nginx]
            } else {
                [Kind::Nginx, Kind::Firstbyte]
            };
            for kind in order {
                let argv = kind.test_argv(&fb, &case.conf, &work);
                let r = measure::run_test(&argv, &work.join(format!("{}-t.log", kind.name())))?;
                eprintln!(
                    "sslcache: -t {:9} {:40} {:8.1} ms {:7} KiB",
                    kind.name(),
                    case.label,
                    r.wall.as_secs_f64() * 1e3,
                    r.maxrss_kib
                );
                row.push(kind, r);
                progress.step("-t");
            }
        }
        report.tests.push(row);
    }
    // 2. Instructions.
    if !o.no_callgrind {
        let cases = write_cases(
            &work,
            &certs,
            o.callgrind_locations,
            o.callgrind_servers,
            "cg",
        )?;
        for (i, case) in cases.iter().enumerate() {
            let mut pair = Vec::new();
            for kind in [Kind::Firstbyte, Kind::Nginx] {
                let argv = kind.test_argv(&fb, &case.conf, &work);
                let t = std::time::Instant::now();
                let n = measure::callgrind(&argv, &work, &format!("{}-{i}", kind.name()))?;
                eprintln!(
                    "sslcache: callgrind {:9} {:40} {:>15} Ir ({:.0} s)",
                    kind.name(),
                    case.label,
                    n,
                    t.elapsed().as_secs_f64()
                );
                pair.push(n);
                progress.step("callgrind");
            }
            report
                .instructions
                .push((case.label.clone(), case.unique, pair[0], pair[1]));
        }
    }
    // 3. Reloads.
    report.reloads = reloads(o, &fb, &work, &certs, &mut progress)?;

    // 4. Handshakes.
    report.handshakes = handshake_bench(o, &fb, &work, &mut progress)?;
    report.cold_reference = report
        .tests
        .last()
        .map(|r| r.median_wall(Kind::Firstbyte))
        .unwrap_or_default();
    report.cold_cpu = report
        .tests
        .last()
        .map(|r| r.median_cpu(Kind::Firstbyte))
        .unwrap_or_default();
    // 5. Instructions of a no-change reload, against a cold `-t` of the same config.
    if !o.no_callgrind {
        report.reload_instructions = Some(reload_instructions(o, &fb, &work)?);
        progress.step("callgrind reload");
    }
    let table = report.table();
    println!("{table}");
    report.write(&out, &table)?;
    eprintln!("sslcache: results in {}", out.display());
    Ok(())
}

fn touch(path: &Path) -> Result<()> {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.set_modified(SystemTime::now())?;
    Ok(())
}

fn reloads(
    o: &Options,
    fb: &Path,
    work: &Path,
    certs: &Path,
    progress: &mut Progress,
) -> Result<Vec<ReloadRow>> {
    let dir = work.join("reload");
    std::fs::create_dir_all(&dir)?;
    // A private copy of the files: the reloads change them.
    for i in 0..o.servers {
        let (c, k) = fixtures::pair(certs, i);
        let (dc, dk) = fixtures::pair(&dir, i);
        std::fs::copy(&c, &dc)?;
        std::fs::copy(&k, &dk)?;
    }
    let (port, argv) = reload_server(o, fb, &dir, "servers.conf")?;
    let t = std::time::Instant::now();
    let server =
        measure::Running::start(&argv, port, &dir.join("error.log"), &dir.join("stderr.log"))?;
    let start = t.elapsed();
    let mut rows = vec![
        ReloadRow::new("start to listening (cold)"),
        ReloadRow::new("reload, nothing changed"),
        ReloadRow::new("reload, one certificate replaced"),
        ReloadRow::new("reload, every file touched"),
    ];
    rows[0].times.push(start);
    // A reload's CPU: every thread's, read 200 ms after "reconfiguration done" so that the
    // old site's teardown (on a blocking thread, after the notice) is counted too.
    let timed = |row: &mut ReloadRow| -> Result<()> {
        let before = measure::cpu_ns(server.pid())?;
        row.times.push(server.reload()?);
        std::thread::sleep(Duration::from_millis(200));
        let after = measure::cpu_ns(server.pid())?;
        row.cpu
            .push(Duration::from_nanos(after.saturating_sub(before)));
        row.cache_line = server.last_cache_line();
        Ok(())
    };
    for round in 0..o.rounds {
        timed(&mut rows[1])?;
        // One certificate replaced by a copy (new inode, as a deploy does).
        let (c, _) = fixtures::pair(&dir, round % o.servers);
        let tmp = dir.join("replace.tmp");
        std::fs::copy(&c, &tmp)?;
        std::fs::rename(&tmp, &c)?;
        timed(&mut rows[2])?;
        for i in 0..o.servers {
            let (c, k) = fixtures::pair(&dir, i);
            touch(&c)?;
            touch(&k)?;
        }
        timed(&mut rows[3])?;
        eprintln!(
            "sslcache: reload round {round}: none {:.1} ms, one {:.1} ms, all {:.1} ms",
            rows[1].times[round].as_secs_f64() * 1e3,
            rows[2].times[round].as_secs_f64() * 1e3,
            rows[3].times[round].as_secs_f64() * 1e3
        );
        progress.step("reloads");
    }
    Ok(rows)
}

/// Writes `dir/name`, the server config of the reloads on a free port, and returns the port
/// and the command line that runs it.
fn reload_server(o: &Options, fb: &Path, dir: &Path, name: &str) -> Result<(u16, Vec<String>)> {
    let port = free_port()?;
    let conf = dir.join(name);
    std::fs::write(&conf, fixtures::servers_conf(dir, dir, port, o.servers))?;
    let argv = vec![
        fb.display().to_string(),
        "-c".into(),
        conf.display().to_string(),
    ];
    Ok((port, argv))
}

/// Instructions of one no-change reload of the reload config (the average of 3 under
/// callgrind), and of a cold `-t` of the same config.
fn reload_instructions(o: &Options, fb: &Path, work: &Path) -> Result<(u64, u64)> {
    let dir = work.join("reload");
    let (port, argv) = reload_server(o, fb, &dir, "servers-cg.conf")?;
    let t = std::time::Instant::now();
    let reload = measure::callgrind_reloads(&argv, port, &dir.join("error.log"), work, 3)?;
    let mut test = argv.clone();
    test.insert(1, "-t".into());
    let cold = measure::callgrind(&test, work, "reload-cold")?;
    eprintln!(
        "sslcache: callgrind no-change reload {reload} Ir, cold -t {cold} Ir ({:.0} s)",
        t.elapsed().as_secs_f64()
    );
    Ok((reload, cold))
}

fn pin_self(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity get valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn handshake_bench(
    o: &Options,
    fb: &Path,
    work: &Path,
    progress: &mut Progress,
) -> Result<Vec<HandshakeRow>> {
    let dir = work.join("handshakes");
    std::fs::create_dir_all(&dir)?;
    fixtures::write_pair(&dir, "c0", "static.test")?;
    let names: Vec<String> = (0..NAMES).map(|i| format!("n{i}.test")).collect();
    for n in &names {
        fixtures::write_pair(&dir, n, n)?;
    }
    let (sp, dp) = (free_port()?, free_port()?);
    let conf = dir.join("handshakes.conf");
    std::fs::write(&conf, fixtures::handshake_conf(&dir, &dir, sp, dp))?;
    let argv = vec![
        "taskset".to_string(),
        "-c".into(),
        SERVER_CPU.to_string(),
        fb.display().to_string(),
        "-c".into(),
        conf.display().to_string(),
    ];
    let server =
        measure::Running::start(&argv, dp, &dir.join("error.log"), &dir.join("stderr.log"))?;
    // taskset execs firstbyte: same pid.
    let pid = server.pid();
    pin_self(CLIENT_CPU);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = handshakes::client_config()?;
    let addr = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
    let mut rows = vec![
        HandshakeRow::new("static ssl_certificate"),
        HandshakeRow::new("ssl_certificate $ssl_server_name + cache"),
    ];
    rt.block_on(async {
        // Warm-up: fills the cache and the allocator.
        for p in [sp, dp] {
            handshakes::batch(&config, addr(p), &names, 200, o.concurrency).await?;
        }
        for round in 0..o.rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let port = [sp, dp][which];
                let before = measure::cpu_ns(pid)?;
                let b = handshakes::batch(&config, addr(port), &names, o.handshakes, o.concurrency)
                    .await?;
                let cpu = measure::cpu_ns(pid)?.saturating_sub(before);
                rows[which].push(b.ok, b.wall, Duration::from_nanos(cpu));
                eprintln!(
                    "sslcache: handshakes {:42} {:7.0}/s  {:5.1} µs server CPU each",
                    rows[which].label,
                    b.ok as f64 / b.wall.as_secs_f64(),
                    cpu as f64 / 1e3 / b.ok.max(1) as f64
                );
                progress.step("handshakes");
            }
        }
        anyhow::Ok(())
    })?;
    drop(server);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        match crate::cli::parse(&[&["sslcache"], list].concat())? {
            crate::cli::Command::Sslcache(a) => Ok(a.options()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options() {
        let o = parse(&[]).expect("defaults");
        assert_eq!((o.locations, o.servers, o.rounds), (10_000, 1_000, 5));
        assert_eq!((o.handshakes, o.concurrency), (3_000, 4));
        let q = parse(&["--quick", "--rounds", "3", "--out", "/x"]).expect("quick");
        assert_eq!((q.locations, q.rounds, q.handshakes), (1_000, 3, 500));
        assert_eq!(q.out, Some(PathBuf::from("/x")));
        assert!(parse(&["--handshakes-only"]).expect("flag").handshakes_only);
        assert!(!parse(&[]).expect("defaults").handshakes_only);
        assert_eq!(
            parse(&["--servers", "10_000"]).expect("count").servers,
            10_000
        );
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            &["--rounds", "0"][..],
            &["--concurrency", "0"],
            &["--locations", "ten"],
            &["--servers", "firstbyte"],
            &["--handshakes"],
            &["--bogus"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn phases_count_every_step() {
        let o = parse(&["--rounds", "3"]).expect("valid");
        assert_eq!(
            phases(&o),
            [
                ("-t", 36),
                ("callgrind", 12),
                ("reloads", 3),
                ("handshakes", 6),
                ("callgrind reload", 1)
            ]
        );
        let o = parse(&["--rounds", "3", "--no-callgrind"]).expect("valid");
        assert_eq!(phases(&o).iter().map(|p| p.1).sum::<usize>(), 36 + 3 + 6);
        let o = parse(&["--handshakes-only"]).expect("valid");
        assert_eq!(phases(&o), [("handshakes", 10)]);
    }
}
