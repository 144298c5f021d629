//! `firstbyte-bench loopback [--quick] [--out DIR] [--runs N] [--only MEASURE,...]
//! [--servers NAME,...]`: firstbyte beside Debian's nginx and h2o on loopback (issue 6), and
//! beside Debian's Caddy over HTTP/3 (issue 11; the HTTP/3 measures `h3_1k`, `h3_req` and
//! `h3_page` are firstbyte and Caddy only, every other measure firstbyte, nginx and h2o:
//! `servers::Kind::runs`). Browser-like requests (issue 29): [`browser`], [`page`],
//! [`chromium`].
//!
//! Data flow: [`main`] takes the options ([`Args`], parsed by clap in `crate::cli`), pins itself (the client
//! side: the in-crate TLS client, h2load, curl) to CPU 0, makes the shared fixtures (one
//! ECDSA P-256 certificate, `/1k`, a sparse `/1g` and the page of [`page::ASSETS`], at its
//! real sizes and at 1 KiB under `/r/`), then for each measure walks the
//! interleaved order ([`stats::interleave`]: firstbyte, nginx, h2o, firstbyte, ...): it starts
//! a fresh server from its equivalent config ([`servers`]) pinned to CPU 1, warms it with 20
//! requests, finds its process tree, takes one run ([`measures::run`]: server CPU and memory
//! from `/proc` around a load), and stops it. A fresh process per run keeps one run's heap
//! (freed buffers an allocator keeps) out of the next run's memory figure. The values go to
//! `results.json`, `summary.md` and `machine.md` ([`report`]) in the output directory, with
//! each server's config and logs under `servers/`. A progress line with an ETA follows the
//! runs on stderr (`crate::progress`).

mod browser;
mod chromium;
pub(crate) mod client;
mod h2idle;
mod h3load;
mod measures;
mod page;
pub(crate) mod procfs;
pub(crate) mod report;
pub(crate) mod servers;
pub(crate) mod stats;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use crate::cli::Common;
use crate::progress::Progress;

use measures::{Ctx, Measure, Sizes};
use report::Value;
use servers::{Kind, Paths, Running};

/// The CPU the client side runs on.
const CLIENT_CPU: usize = 0;
/// The CPU every server (all its processes and threads) runs on.
const SERVER_CPU: usize = 1;
/// Size of the bulk file: 1 GiB, as issue 6's table.
const BULK_BYTES: u64 = 1 << 30;

/// Options of `firstbyte-bench loopback`, as given.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Runs per server per measure [default: 5, or 2 with --quick].
    #[arg(long, value_name = "N", value_parser = crate::cli::positive)]
    runs: Option<usize>,
    /// Measures to take (default all), comma-separated.
    #[arg(long, value_name = "MEASURE,...", value_delimiter = ',')]
    only: Vec<Measure>,
    /// Servers to run, comma-separated (firstbyte alone is handy for profiling).
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        default_value = "firstbyte,nginx,h2o,caddy"
    )]
    servers: Vec<Kind>,
}

/// What a run does: the arguments with the `--quick` defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Fewer and shorter runs.
    pub quick: bool,
    /// Output directory (default `bench/out/loopback-<UTC stamp>/`).
    pub out: Option<PathBuf>,
    /// Runs per server per measure (default 5, quick 2).
    pub runs: usize,
    /// Measures to take (default all).
    pub only: Vec<Measure>,
    /// Servers to run (default all four; each measure runs those of them that take part).
    pub servers: Vec<Kind>,
}

impl From<Args> for Options {
    fn from(a: Args) -> Self {
        Options {
            quick: a.common.quick,
            out: a.common.out,
            // 5: issue 6 asks for median with min–max over at least 5 runs.
            runs: a.runs.unwrap_or(if a.common.quick { 2 } else { 5 }),
            only: a.only,
            servers: a.servers,
        }
    }
}

/// Run sizes: full runs are long enough that each costs the server ≥ ~0.2 s of CPU.
pub fn sizes(quick: bool) -> Sizes {
    if quick {
        Sizes {
            handshakes: 1000,
            handshake_concurrency: 16,
            h2_requests: 20_000,
            // Two pages per connection: ~120 MB of bodies.
            page_requests: 3_200,
            idle_connections: 1000,
            ttfb_fetches: 10,
        }
    } else {
        Sizes {
            handshakes: 5000,
            handshake_concurrency: 16,
            // Issue 6's h2load load: -n 100000 -c 32 -m 10.
            h2_requests: 100_000,
            // Ten pages per connection: ~600 MB of bodies.
            page_requests: 16_000,
            idle_connections: 1000,
            ttfb_fetches: 50,
        }
    }
}

/// Entry point of the `loopback` subcommand; returns the exit code.
pub fn main(args: Args) -> i32 {
    let opts = Options::from(args);
    match run(&opts) {
        Ok(0) => 0,
        Ok(errors) => {
            eprintln!("firstbyte-bench loopback: {errors} run(s) failed; see summary.md");
            1
        }
        Err(e) => {
            eprintln!("firstbyte-bench loopback: {e:#}");
            1
        }
    }
}

pub(crate) fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The firstbyte binary: `FB_BENCH_FIRSTBYTE` (as the WAN bench), else the one beside this
/// binary (a release bench runs a release server), else `target/release/firstbyte`.
pub(crate) fn firstbyte_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("FB_BENCH_FIRSTBYTE") {
        return PathBuf::from(path);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("firstbyte")));
    match beside {
        Some(path) if path.exists() => path,
        _ => workspace_dir().join("target/release/firstbyte"),
    }
}

/// Raises the open-file limit to its hard limit (1,000 idle connections and more).
pub(crate) fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Shared fixtures: certificate, key, document root with `/1k` and the sparse `/1g`.
fn fixtures(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf, Vec<u8>)> {
    let (cert_path, key_path, docroot, der) = small_fixtures(dir)?;
    let big = docroot.join("1g");
    let f = std::fs::File::create(&big)?;
    // Sparse: no disk space or write time; reads come from the page cache once warmed.
    f.set_len(BULK_BYTES)?;
    drop(f);
    warm_page_cache(&big)?;
    page::write(&docroot).context("page fixture")?;
    Ok((cert_path, key_path, docroot, der))
}

/// Certificate (ECDSA P-256 for `localhost` and 127.0.0.1), key, and a document root with
/// `/1k`: what every bench server needs; returns the paths and the certificate's DER.
pub(crate) fn small_fixtures(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf, Vec<u8>)> {
    let docroot = dir.join("www");
    std::fs::create_dir_all(&docroot)?;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
    let cert = params.self_signed(&key)?;
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    std::fs::write(docroot.join("1k"), vec![b'x'; 1024])?;
    Ok((cert_path, key_path, docroot, cert.der().to_vec()))
}

fn warm_page_cache(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// The servers of `servers` that take part in `measure`, in order.
fn servers_for(measure: Measure, servers: &[Kind]) -> Vec<Kind> {
    servers
        .iter()
        .copied()
        .filter(|k| k.runs(measure))
        .collect()
}

/// Checks the programs the chosen servers and measures need.
fn check_tools(firstbyte: &Path, servers: &[Kind], measures: &[Measure]) -> Result<()> {
    if !firstbyte.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p firstbyte` \
             (or point FB_BENCH_FIRSTBYTE at a binary)",
            firstbyte.display()
        );
    }
    let used = |k: Kind| servers.contains(&k) && measures.iter().any(|&m| k.runs(m));
    for (kind, tool, package) in [
        (Kind::Nginx, "/usr/sbin/nginx", "nginx"),
        (Kind::H2o, "/usr/bin/h2o", "h2o"),
        (Kind::Caddy, "/usr/bin/caddy", "caddy"),
    ] {
        if used(kind) && !Path::new(tool).exists() {
            bail!("{tool} is missing: apt-get install -y {package}");
        }
    }
    let mut tools = vec![("taskset", "util-linux")];
    if measures.iter().any(|m| m.uses_h2load()) {
        tools.push(("h2load", "nghttp2-client"));
    }
    if measures
        .iter()
        .any(|m| matches!(m, Measure::Bulk | Measure::BulkH2 | Measure::Ttfb))
    {
        tools.push(("curl", "curl"));
    }
    for (tool, package) in tools {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!("{tool} is missing: apt-get install -y {package}");
        }
    }
    Ok(())
}

/// Runs the whole bench; returns the number of failed runs.
fn run(opts: &Options) -> Result<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        bail!("needs 2 CPUs (server and client on different ones), found {cpus}");
    }
    procfs::pin(0, CLIENT_CPU)?;
    raise_nofile();
    let firstbyte = firstbyte_bin();
    let measures: Vec<Measure> = Measure::ALL
        .into_iter()
        .filter(|m| opts.only.is_empty() || opts.only.contains(m))
        .collect();
    check_tools(&firstbyte, &opts.servers, &measures)?;
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = opts.out.clone().unwrap_or_else(|| {
        workspace_dir()
            .join("bench/out")
            .join(format!("loopback-{}", report::utc_stamp(started)))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    // Absolute: servers resolve relative paths against their own prefix or config directory.
    let out = std::fs::canonicalize(&out)?;
    let fixture_dir = std::env::temp_dir().join("firstbyte-bench-loopback");
    let (cert, key, docroot, cert_der) = fixtures(&fixture_dir).context("fixtures")?;
    let tls = client::config(cert_der)?;
    let ctx = Ctx {
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        tls_h2: h2idle::config(&tls),
        tls,
        sizes: sizes(opts.quick),
        bulk_bytes: BULK_BYTES,
        ticks: procfs::clock_ticks_per_second(),
        fixture_dir: fixture_dir.clone(),
    };
    let phases: Vec<(&'static str, usize)> = measures
        .iter()
        .map(|&m| (m.key(), opts.runs * servers_for(m, &opts.servers).len()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut progress = Progress::new("loopback", &phases);
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for &measure in &measures {
        let servers = servers_for(measure, &opts.servers);
        if servers.is_empty() {
            continue;
        }
        for (run, si) in stats::interleave(servers.len(), opts.runs) {
            let kind = servers[si];
            let paths = Paths {
                cert: cert.clone(),
                key: key.clone(),
                docroot: docroot.clone(),
                work: out.join("servers").join(kind.name()),
            };
            match one_run(measure, kind, &paths, &firstbyte, &ctx) {
                Ok(mut figures) => {
                    // Kept in results.json (not the table): other work on a shared machine.
                    if let Some(load) = load_average() {
                        figures.push(("loadavg_1m", load));
                    }
                    let shown: Vec<String> = figures
                        .iter()
                        .map(|(k, v)| format!("{k}={}", report::fmt_num(*v)))
                        .collect();
                    eprintln!(
                        "{} run {run} {:9} {}",
                        measure.key(),
                        kind.name(),
                        shown.join(" ")
                    );
                    values.extend(figures.into_iter().map(|(metric, value)| Value {
                        measure: measure.key(),
                        metric,
                        server: kind,
                        run,
                        value,
                    }));
                }
                Err(e) => {
                    let msg = format!("{} run {run} {}: {e:#}", measure.key(), kind.name());
                    eprintln!("{msg}");
                    errors.push(msg);
                }
            }
            progress.step(measure.key());
        }
    }
    write_outputs(&out, opts, &values, &errors, started, &firstbyte)?;
    eprintln!("wrote {}", out.display());
    Ok(errors.len())
}

/// The 1-minute load average from `/proc/loadavg`.
pub(crate) fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn one_run(
    measure: Measure,
    kind: Kind,
    paths: &Paths,
    firstbyte: &Path,
    ctx: &Ctx,
) -> Result<Vec<(&'static str, f64)>> {
    let mut server = Running::start_with(kind, paths, firstbyte, SERVER_CPU, |port| {
        servers::render_for(measure, kind, paths, port)
    })?;
    ctx.runtime
        .block_on(client::handshakes(
            server.addr,
            ctx.tls.clone(),
            "/1k",
            20,
            4,
        ))
        .context("warm-up")?;
    let pids = procfs::tree(server.pid)?;
    procfs::pin_all(&pids, SERVER_CPU)?;
    let result = measures::run(measure, &server, &pids, ctx);
    server.stop();
    result
}

pub(crate) fn tool_version(argv: &[&str]) -> String {
    match Command::new(argv[0]).args(&argv[1..]).output() {
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().unwrap_or("").trim().to_string()
        }
        Err(e) => format!("unavailable ({e})"),
    }
}

fn machine_markdown(opts: &Options, started: u64, firstbyte: &Path) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown", |(_, m)| m.trim());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo.lines().next().unwrap_or("").to_string();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let lock = std::fs::read_to_string(workspace_dir().join("Cargo.lock")).unwrap_or_default();
    let lockv = |p: &str| report::lock_version(&lock, p).unwrap_or_else(|| "?".into());
    // Counted from cpuinfo: this process is pinned, so available_parallelism() says 1.
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let fb = firstbyte.display().to_string();
    let ws = workspace_dir().display().to_string();
    let mut commit = tool_version(&["git", "-C", &ws, "rev-parse", "HEAD"]);
    // Read-only: does the server crate differ from that commit?
    if !tool_version(&["git", "-C", &ws, "status", "--porcelain", "firstbyte"]).is_empty() {
        commit.push_str(" with uncommitted changes in firstbyte/");
    }
    let args: Vec<String> = std::env::args().collect();
    format!(
        "# Machine and command\n\n\
         - date (UTC): {}\n- command: `{}`{}\n- CPU: {model}, {cpus} CPUs; server pinned to CPU \
         {SERVER_CPU}, client (this harness, h2load, curl) to CPU {CLIENT_CPU}\n- {mem}\n\
         - kernel: {}\n- firstbyte: {} (`{fb}`, workspace commit {commit}; rustls {}, \
         aws-lc-rs {}, tokio {}, hyper {}, h2 {}, quinn {}, h3 {})\n- nginx: {}\n- h2o: {}\n- caddy: {}\n- h2load: {}\n\
         - curl: {}\n\n\
         Files: `/1k` (1,024 bytes), `/1g` (1 GiB sparse file, read once before the runs so \
         every server reads it from the page cache), and the page of the browser-like measures: \
         {} files, {} bytes in all, at their paths, and the same paths under `/r/` at 1,024 \
         bytes each. Certificate: ECDSA P-256 made at start (rcgen). Each server's config and \
         logs are in `servers/`.\n",
        report::utc_stamp(started),
        args.join(" "),
        if opts.quick {
            " (quick: fewer, shorter runs)"
        } else {
            ""
        },
        kernel.trim(),
        tool_version(&[&fb, "-v"]),
        lockv("rustls"),
        lockv("aws-lc-rs"),
        lockv("tokio"),
        lockv("hyper"),
        lockv("h2"),
        lockv("quinn"),
        lockv("h3"),
        tool_version(&["/usr/sbin/nginx", "-v"]),
        tool_version(&["/usr/bin/h2o", "--version"]),
        tool_version(&["/usr/bin/caddy", "version"]),
        tool_version(&["h2load", "--version"]),
        tool_version(&["curl", "--version"]),
        page::ASSETS.len(),
        page::page_bytes(),
    )
}

fn write_outputs(
    out: &Path,
    opts: &Options,
    values: &[Value],
    errors: &[String],
    started: u64,
    firstbyte: &Path,
) -> Result<()> {
    let s = sizes(opts.quick);
    let results = serde_json::json!({
        "started_utc": report::utc_stamp(started),
        "command": std::env::args().collect::<Vec<_>>(),
        "quick": opts.quick,
        "runs": opts.runs,
        "sizes": {
            "handshakes": s.handshakes,
            "handshake_concurrency": s.handshake_concurrency,
            "h2_requests": s.h2_requests,
            "req_requests": browser::requests(page::Set::Req, &s),
            "page_requests": browser::requests(page::Set::Page, &s),
            "page_bytes": page::page_bytes(),
            "idle_connections": s.idle_connections,
            "ttfb_fetches": s.ttfb_fetches,
            "bulk_bytes": BULK_BYTES,
        },
        "server_cpu": SERVER_CPU,
        "client_cpu": CLIENT_CPU,
        "values": values,
        "summaries": report::summaries(values),
        "errors": errors,
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    let mut md = format!(
        "# Loopback bench, {}\n\n{} runs per server per measure, servers interleaved run by run; \
         a fresh server process per run.\n\n",
        report::utc_stamp(started),
        opts.runs
    );
    md.push_str(&report::summary_markdown(values));
    let loads: Vec<f64> = values
        .iter()
        .filter(|v| v.metric == "loadavg_1m")
        .map(|v| v.value)
        .collect();
    if let Some(l) = stats::summarize(&loads) {
        md.push_str(&format!(
            "\n1-minute load average during the runs: {} ({}–{}); above ~2 on this 2-CPU \
             machine, other work shared the CPUs and rates (not CPU per operation) suffer most.\n",
            report::fmt_num(l.median),
            report::fmt_num(l.min),
            report::fmt_num(l.max)
        ));
    }
    let missing = report::missing_measures(values);
    if !missing.is_empty() && opts.only.is_empty() {
        md.push_str(&format!("\nNo values for: {}.\n", missing.join(", ")));
    }
    if !errors.is_empty() {
        md.push_str("\n## Failed runs\n\n");
        for e in errors {
            md.push_str(&format!("- {}\n", e.replace('\n', " ")));
        }
    }
    std::fs::write(out.join("summary.md"), md)?;
    std::fs::write(
        out.join("machine.md"),
        machine_markdown(opts, started, firstbyte),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Options, clap::Error> {
        match crate::cli::parse(&[&["loopback"], list].concat())? {
            crate::cli::Command::Loopback(a) => Ok(a.into()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_are_five_full_runs() {
        let o = parse(&[]).expect("no args");
        assert_eq!((o.quick, o.runs, o.out), (false, 5, None));
        assert_eq!(o.servers, Kind::ALL);
        assert!(o.only.is_empty());
        assert_eq!(sizes(false).h2_requests, 100_000);
    }

    #[test]
    fn quick_out_runs_only_and_servers() {
        let o = parse(&["--quick", "--out", "/x", "--only", "ttfb,h2_1k"]).expect("valid");
        assert_eq!((o.quick, o.runs), (true, 2));
        assert_eq!(o.out, Some(PathBuf::from("/x")));
        assert_eq!(o.only, [Measure::Ttfb, Measure::H2]);
        assert_eq!(parse(&["--runs", "7"]).expect("valid").runs, 7);
        assert_eq!(parse(&["--quick", "--runs", "7"]).expect("valid").runs, 7);
        let o = parse(&["--servers", "firstbyte"]).expect("valid");
        assert_eq!(o.servers, [Kind::Firstbyte]);
        let o = parse(&["--servers", "firstbyte,caddy", "--only", "h3_1k"]).expect("valid");
        assert_eq!(
            (o.servers.as_slice(), o.only.as_slice()),
            (
                [Kind::Firstbyte, Kind::Caddy].as_slice(),
                [Measure::H3].as_slice()
            )
        );
        assert_eq!(
            servers_for(Measure::H3, &Kind::ALL),
            [Kind::Firstbyte, Kind::Caddy]
        );
        assert_eq!(
            servers_for(Measure::H2, &Kind::ALL),
            [Kind::Firstbyte, Kind::Nginx, Kind::H2o]
        );
        let o = parse(&["--only", "bulk_1g_h2", "--only", "idle_mem_h2"]).expect("valid");
        assert_eq!(o.only, [Measure::BulkH2, Measure::IdleMemoryH2]);
        use measures::Proto;
        let o = parse(&["--only", "h1_req,h2_req,h3_req,h1_page,h2_page,h3_page"]).expect("valid");
        assert_eq!(
            o.only,
            [
                Measure::Req(Proto::H1),
                Measure::Req(Proto::H2),
                Measure::Req(Proto::H3),
                Measure::Page(Proto::H1),
                Measure::Page(Proto::H2),
                Measure::Page(Proto::H3)
            ]
        );
        assert_eq!(
            servers_for(Measure::Page(Proto::H3), &Kind::ALL),
            [Kind::Firstbyte, Kind::Caddy]
        );
        assert_eq!(
            servers_for(Measure::Req(Proto::H1), &Kind::ALL),
            [Kind::Firstbyte, Kind::Nginx, Kind::H2o]
        );
    }

    #[test]
    fn bad_arguments_are_refused_not_defaulted() {
        for bad in [
            &["--out"][..],
            &["--runs", "0"],
            &["--runs", "many"],
            &["--runs", "-3"],
            &["--only", "speed"],
            &["--only", "ttfb,speed"],
            &["--fast"],
            &["--servers", "apache"],
            &["--servers", "nginx,"],
            &["stray"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    #[test]
    fn every_measure_is_a_possible_value() {
        for m in Measure::ALL {
            let o = parse(&["--only", m.key()]).expect("a measure key");
            assert_eq!(o.only, [m]);
        }
    }
}
