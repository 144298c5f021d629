//! The five measures of issue 6, two HTTP/2 lines of issue 15, and how one run of each is
//! taken against a started server.
//!
//! A run samples the server's process tree ([`procfs::sample`]) before and after the load and
//! turns the difference into per-operation figures:
//! 1. `handshake`: the in-crate non-resuming client ([`client::handshakes`]) → server CPU µs
//!    per full TLS 1.3 handshake (with its one request), and the (client-bound) rate.
//! 2. `h2_1k`: `h2load -n N -c 32 -m 10` on `/1k` → server CPU µs per request, and req/s.
//! 3. `bulk_1g`: one `curl --http1.1` download of `/1g` to `/dev/null` → GB/s and server
//!    CPU-s per GiB; `bulk_1g_h2`: the same over one HTTP/2 connection (`curl --http2`).
//! 4. `idle_mem`: 1,000 HTTP/1.1 connections opened (handshake + one request) and left idle
//!    → Pss and RSS growth per connection, KiB; `idle_mem_h2`: 1,000 HTTP/2 connections
//!    (ALPN h2, preface and SETTINGS exchanged both ways, [`super::h2idle`]), no request.
//! 5. `ttfb`: N sequential `curl --http2` fetches of `/1k` → `time_starttransfer −
//!    time_appconnect` (handshake done → first byte), median and max, and stalls ≥ 30 ms.
//! 6. `h3_1k`: the `h2_1k` load over HTTP/3 (32 connections, 10 requests in flight on each,
//!    the in-crate quinn client of [`super::h3load`]) → server CPU µs per request, and req/s
//!    (client-bound); firstbyte and Caddy only.
//! 7. Browser-like requests (issue 29; taken in [`super::browser`]): `h1_req`, `h2_req`,
//!    `h3_req` (the page's real paths at 1 KiB each, Chromium's headers: request cost) and
//!    `h1_page`, `h2_page`, `h3_page` (the same paths at their real sizes: server CPU µs per
//!    request and CPU-s per GiB). `h2_1k` and `h3_1k` stay as a floor: a 3-character literal
//!    path and no headers, a request no browser sends.
//!
//! The output parsers of h2load and curl are pure functions with tests.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustls::ClientConfig;

use super::page::Set;
use super::procfs;
use super::servers::Running;
use super::stats;

/// One of the measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Full TLS 1.3 handshake, new connection per request.
    Handshake,
    /// HTTP/2, 1 KiB file, keep-alive, h2load.
    H2,
    /// One HTTP/1.1 connection, 1 GiB file.
    Bulk,
    /// One HTTP/2 connection, 1 GiB file.
    BulkH2,
    /// Memory per idle HTTP/1.1 TLS connection.
    IdleMemory,
    /// Memory per idle HTTP/2 TLS connection.
    IdleMemoryH2,
    /// New HTTP/2 connection, handshake done → first byte.
    Ttfb,
    /// HTTP/3, 1 KiB file, keep-alive, the in-crate QUIC load.
    H3,
    /// Browser-like requests for the page's paths, every file 1 KiB (request cost).
    Req(Proto),
    /// Browser-like requests for the page at its real sizes (page mix).
    Page(Proto),
}

/// The HTTP version of a browser-like measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1 (`h2load --h1`, one request at a time per connection).
    H1,
    /// HTTP/2 (`h2load`, ten streams per connection).
    H2,
    /// HTTP/3 (the in-crate quinn client, ten streams per connection).
    H3,
}

impl Measure {
    /// Every measure, in the order they run and are reported.
    pub const ALL: [Measure; 14] = [
        Measure::Handshake,
        Measure::H2,
        Measure::Req(Proto::H1),
        Measure::Req(Proto::H2),
        Measure::Req(Proto::H3),
        Measure::Page(Proto::H1),
        Measure::Page(Proto::H2),
        Measure::Page(Proto::H3),
        Measure::Bulk,
        Measure::BulkH2,
        Measure::IdleMemory,
        Measure::IdleMemoryH2,
        Measure::Ttfb,
        Measure::H3,
    ];

    /// The key used in results.json.
    pub fn key(self) -> &'static str {
        match self {
            Measure::Handshake => "handshake",
            Measure::H2 => "h2_1k",
            Measure::Bulk => "bulk_1g",
            Measure::BulkH2 => "bulk_1g_h2",
            Measure::IdleMemory => "idle_mem",
            Measure::IdleMemoryH2 => "idle_mem_h2",
            Measure::Ttfb => "ttfb",
            Measure::H3 => "h3_1k",
            Measure::Req(Proto::H1) => "h1_req",
            Measure::Req(Proto::H2) => "h2_req",
            Measure::Req(Proto::H3) => "h3_req",
            Measure::Page(Proto::H1) => "h1_page",
            Measure::Page(Proto::H2) => "h2_page",
            Measure::Page(Proto::H3) => "h3_page",
        }
    }

    /// Whether the measure runs over HTTP/3 (firstbyte against Caddy).
    pub fn is_h3(self) -> bool {
        matches!(
            self,
            Measure::H3 | Measure::Req(Proto::H3) | Measure::Page(Proto::H3)
        )
    }

    /// Whether the measure runs h2load.
    pub fn uses_h2load(self) -> bool {
        matches!(
            self,
            Measure::H2
                | Measure::Req(Proto::H1 | Proto::H2)
                | Measure::Page(Proto::H1 | Proto::H2)
        )
    }
}

/// `--only` takes the keys of [`Measure::key`].
impl clap::ValueEnum for Measure {
    fn value_variants<'a>() -> &'a [Self] {
        &Measure::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.key()))
    }
}

/// A reported figure of a measure.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The measure it belongs to.
    pub measure: Measure,
    /// Key in results.json.
    pub key: &'static str,
    /// Row label in summary.md.
    pub label: &'static str,
    /// Whether a smaller value is better (CPU, memory, latency).
    pub lower_is_better: bool,
}

const fn m(measure: Measure, key: &'static str, label: &'static str, lower: bool) -> Metric {
    Metric {
        measure,
        key,
        label,
        lower_is_better: lower,
    }
}

/// Every figure, in report order.
#[rustfmt::skip]
pub const METRICS: [Metric; 38] = [
    m(Measure::Handshake, "cpu_us", "full TLS 1.3 handshake: server CPU µs each", true),
    m(Measure::Handshake, "per_s", "full handshakes/s (client-bound on 2 cores)", false),
    m(Measure::Handshake, "sys_pct", "full handshake: kernel share of server CPU, %", true),
    m(Measure::H2, "cpu_us", "HTTP/2 `/1k` floor, keep-alive: server CPU µs per request", true),
    m(Measure::H2, "per_s", "HTTP/2 `/1k` floor, keep-alive: requests/s", false),
    m(Measure::H2, "sys_pct", "HTTP/2 `/1k` floor: kernel share of server CPU, %", true),
    m(Measure::Req(Proto::H1), "cpu_us", "HTTP/1.1 browser request (1 KiB): server CPU µs per request", true),
    m(Measure::Req(Proto::H1), "per_s", "HTTP/1.1 browser request (1 KiB): requests/s", false),
    m(Measure::Req(Proto::H1), "sys_pct", "HTTP/1.1 browser request: kernel share of server CPU, %", true),
    m(Measure::Req(Proto::H2), "cpu_us", "HTTP/2 browser request (1 KiB): server CPU µs per request", true),
    m(Measure::Req(Proto::H2), "per_s", "HTTP/2 browser request (1 KiB): requests/s", false),
    m(Measure::Req(Proto::H2), "sys_pct", "HTTP/2 browser request: kernel share of server CPU, %", true),
    m(Measure::Req(Proto::H3), "cpu_us", "HTTP/3 browser request (1 KiB): server CPU µs per request", true),
    m(Measure::Req(Proto::H3), "per_s", "HTTP/3 browser request (1 KiB): requests/s (client-bound)", false),
    m(Measure::Req(Proto::H3), "sys_pct", "HTTP/3 browser request: kernel share of server CPU, %", true),
    m(Measure::Page(Proto::H1), "cpu_us", "HTTP/1.1 page mix: server CPU µs per request", true),
    m(Measure::Page(Proto::H1), "cpu_s_gib", "HTTP/1.1 page mix: server CPU-s per GiB delivered", true),
    m(Measure::Page(Proto::H1), "per_s", "HTTP/1.1 page mix: requests/s", false),
    m(Measure::Page(Proto::H2), "cpu_us", "HTTP/2 page mix: server CPU µs per request", true),
    m(Measure::Page(Proto::H2), "cpu_s_gib", "HTTP/2 page mix: server CPU-s per GiB delivered", true),
    m(Measure::Page(Proto::H2), "per_s", "HTTP/2 page mix: requests/s", false),
    m(Measure::Page(Proto::H3), "cpu_us", "HTTP/3 page mix: server CPU µs per request", true),
    m(Measure::Page(Proto::H3), "cpu_s_gib", "HTTP/3 page mix: server CPU-s per GiB delivered", true),
    m(Measure::Page(Proto::H3), "per_s", "HTTP/3 page mix: requests/s (client-bound)", false),
    m(Measure::Bulk, "gb_s", "1 GiB over one TLS 1.3 connection, HTTP/1.1: GB/s", false),
    m(Measure::Bulk, "cpu_s_gib", "1 GiB, HTTP/1.1: server CPU-s per GiB", true),
    m(Measure::BulkH2, "gb_s", "1 GiB over one TLS 1.3 connection, HTTP/2: GB/s", false),
    m(Measure::BulkH2, "cpu_s_gib", "1 GiB, HTTP/2: server CPU-s per GiB", true),
    m(Measure::IdleMemory, "pss_kib", "idle HTTP/1.1 TLS connection (1,000 open): Pss KiB each", true),
    m(Measure::IdleMemory, "rss_kib", "idle HTTP/1.1 TLS connection (1,000 open): RSS KiB each", true),
    m(Measure::IdleMemoryH2, "pss_kib", "idle HTTP/2 TLS connection (1,000 open): Pss KiB each", true),
    m(Measure::IdleMemoryH2, "rss_kib", "idle HTTP/2 TLS connection (1,000 open): RSS KiB each", true),
    m(Measure::Ttfb, "median_ms", "new HTTP/2 conn, handshake → first byte: median ms", true),
    m(Measure::Ttfb, "max_ms", "new HTTP/2 conn, handshake → first byte: max ms", true),
    m(Measure::Ttfb, "stalls", "first bytes ≥ 30 ms (stalls) per run", true),
    m(Measure::H3, "cpu_us", "HTTP/3 `/1k` floor, keep-alive: server CPU µs per request", true),
    m(Measure::H3, "per_s", "HTTP/3 `/1k` floor, keep-alive: requests/s (client-bound)", false),
    m(Measure::H3, "sys_pct", "HTTP/3 `/1k` floor: kernel share of server CPU, %", true),
];

/// A first byte this late after the handshake is a stall (a delayed ACK is ~40 ms; a healthy
/// loopback first byte is well under 1 ms).
pub const STALL_MS: f64 = 30.0;

/// How big each run is.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Full handshakes per run.
    pub handshakes: usize,
    /// Concurrent connections of the handshake client.
    pub handshake_concurrency: usize,
    /// h2load `-n` of `h2_1k` and `h3_1k`; the `*_req` measures round it up to whole pages.
    pub h2_requests: usize,
    /// Requests of a `*_page` run (rounded up to whole pages per connection).
    pub page_requests: usize,
    /// Idle connections held open.
    pub idle_connections: usize,
    /// curl fetches per TTFB run.
    pub ttfb_fetches: usize,
}

/// What a measure run needs besides the server.
pub struct Ctx {
    /// Runtime of the in-crate client (current-thread, on the client CPU).
    pub runtime: tokio::runtime::Runtime,
    /// The non-resuming client config (ALPN `http/1.1`).
    pub tls: Arc<ClientConfig>,
    /// The same offering ALPN `h2`.
    pub tls_h2: Arc<ClientConfig>,
    /// Run sizes.
    pub sizes: Sizes,
    /// Size of `/1g` in bytes.
    pub bulk_bytes: u64,
    /// Clock ticks per second for `/proc/PID/stat`.
    pub ticks: u64,
    /// Where the h2load URI lists of the browser-like measures are written.
    pub fixture_dir: std::path::PathBuf,
}

/// h2load's summary figures.
#[derive(Debug, Clone, PartialEq)]
pub struct H2load {
    /// Requests per second from the `finished in` line.
    pub per_s: f64,
    /// Succeeded requests.
    pub succeeded: u64,
    /// Failed + errored requests.
    pub failed: u64,
    /// The `Application protocol:` line.
    pub protocol: String,
    /// The `Cipher:` line.
    pub cipher: String,
    /// Response body bytes (the `data` figure of the `traffic:` line).
    pub data_bytes: Option<u64>,
}

/// Parses h2load's output.
pub fn parse_h2load(text: &str) -> Option<H2load> {
    let mut per_s = None;
    let (mut succeeded, mut failed) = (None, 0u64);
    let (mut protocol, mut cipher) = (String::new(), String::new());
    let mut data_bytes = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("finished in ") {
            per_s = rest
                .split(", ")
                .find_map(|part| part.strip_suffix(" req/s"))
                .and_then(|v| v.parse::<f64>().ok());
        } else if let Some(rest) = line.strip_prefix("requests: ") {
            for part in rest.split(", ") {
                let mut words = part.split_whitespace();
                let (Some(n), Some(word)) = (words.next(), words.next()) else {
                    continue;
                };
                let n: u64 = n.parse().ok()?;
                match word {
                    "succeeded" => succeeded = Some(n),
                    "failed" | "errored" => failed += n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("Application protocol:") {
            protocol = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("Cipher:") {
            cipher = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("traffic: ") {
            // "30.52MB (32000800) total, 3.05MB (3200800) headers (space savings 0.00%),
            // 27.47MB (28800000) data"
            data_bytes = rest.split(", ").find_map(|part| {
                let (_, after) = part.split_once('(')?;
                let (n, word) = after.split_once(')')?;
                (word.trim() == "data").then(|| n.parse().ok())?
            });
        }
    }
    Some(H2load {
        per_s: per_s?,
        succeeded: succeeded?,
        failed,
        protocol,
        cipher,
        data_bytes,
    })
}

/// Parses the whitespace-separated floats curl printed with `-w`.
pub fn parse_floats(text: &str) -> Option<Vec<f64>> {
    text.split_whitespace().map(|t| t.parse().ok()).collect()
}

/// Reduces per-fetch first-byte times (ms) to (median, max, stalls).
pub fn ttfb_figures(ms: &[f64]) -> Option<(f64, f64, f64)> {
    let s = stats::summarize(ms)?;
    let stalls = ms.iter().filter(|&&x| x >= STALL_MS).count();
    Some((s.median, s.max, stalls as f64))
}

/// Size and seconds of a bulk download from curl's `-w "%{size_download} %{time_total}
/// %{http_version}"`, checked: the whole file, over the HTTP version asked for.
pub fn bulk_figures(out: &str, want_bytes: u64, want_version: f64) -> Result<(f64, f64)> {
    let f = parse_floats(out).with_context(|| format!("curl -w output: {out:?}"))?;
    let &[size, secs, version] = f.as_slice() else {
        bail!("curl -w output: {out:?}");
    };
    if version != want_version {
        bail!("curl used HTTP/{version}, not HTTP/{want_version}");
    }
    if size as u64 != want_bytes || secs <= 0.0 {
        bail!("curl downloaded {size} of {want_bytes} bytes");
    }
    Ok((size, secs))
}

pub(super) fn run_tool(argv: &[String]) -> Result<String> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("run {}", argv[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(super) fn url(server: &Running, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", server.addr.port())
}

fn curl_tls_args() -> Vec<String> {
    [
        "curl",
        "-sSk",
        "--tlsv1.3",
        "--tls13-ciphers",
        "TLS_AES_128_GCM_SHA256",
        "--curves",
        "X25519",
        "-o",
        "/dev/null",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The h2load command of the h2 measure.
pub fn h2load_argv(url: &str, requests: usize) -> Vec<String> {
    let n = requests.to_string();
    let args = [
        "h2load",
        "-n",
        &n,
        "-c",
        "32",
        "-m",
        "10",
        "--tls13-ciphers",
        "TLS_AES_128_GCM_SHA256",
        url,
    ];
    args.iter().map(|s| s.to_string()).collect()
}

/// Takes one run of `measure` against `server` (process tree `pids`); returns (metric key,
/// value) pairs.
pub fn run(
    measure: Measure,
    server: &Running,
    pids: &[i32],
    ctx: &Ctx,
) -> Result<Vec<(&'static str, f64)>> {
    let sz = ctx.sizes;
    match measure {
        Measure::Handshake => {
            let before = procfs::sample(pids)?;
            let load = ctx.runtime.block_on(super::client::handshakes(
                server.addr,
                ctx.tls.clone(),
                "/1k",
                sz.handshakes,
                sz.handshake_concurrency,
            ))?;
            let after = procfs::sample(pids)?;
            if load.resumed != 0 {
                bail!("{} of {} handshakes were resumed", load.resumed, load.done);
            }
            let cpu = procfs::cpu_seconds(&before, &after, ctx.ticks);
            let mut figures = vec![
                ("cpu_us", cpu * 1e6 / load.done as f64),
                ("per_s", load.done as f64 / load.elapsed.as_secs_f64()),
            ];
            figures.extend(procfs::sys_percent(&before, &after).map(|p| ("sys_pct", p)));
            Ok(figures)
        }
        Measure::H2 => {
            let argv = h2load_argv(&url(server, "/1k"), sz.h2_requests);
            let before = procfs::sample(pids)?;
            let out = run_tool(&argv)?;
            let after = procfs::sample(pids)?;
            let h =
                parse_h2load(&out).with_context(|| format!("unreadable h2load output:\n{out}"))?;
            if h.protocol != "h2" || h.failed != 0 || h.succeeded != sz.h2_requests as u64 {
                bail!(
                    "h2load: protocol {:?}, {} failed:\n{out}",
                    h.protocol,
                    h.failed
                );
            }
            if h.cipher != "TLS_AES_128_GCM_SHA256" {
                bail!("h2load negotiated {:?}", h.cipher);
            }
            let cpu = procfs::cpu_seconds(&before, &after, ctx.ticks);
            let mut figures = vec![
                ("cpu_us", cpu * 1e6 / h.succeeded as f64),
                ("per_s", h.per_s),
            ];
            figures.extend(procfs::sys_percent(&before, &after).map(|p| ("sys_pct", p)));
            Ok(figures)
        }
        Measure::Bulk | Measure::BulkH2 => {
            let (flag, version) = if measure == Measure::Bulk {
                ("--http1.1", 1.1)
            } else {
                ("--http2", 2.0)
            };
            let mut argv = curl_tls_args();
            argv.extend(
                [flag, "-w", "%{size_download} %{time_total} %{http_version}"].map(String::from),
            );
            argv.push(url(server, "/1g"));
            let before = procfs::sample(pids)?;
            let out = run_tool(&argv)?;
            let after = procfs::sample(pids)?;
            let (size, secs) = bulk_figures(&out, ctx.bulk_bytes, version)?;
            let cpu = procfs::cpu_seconds(&before, &after, ctx.ticks);
            Ok(vec![
                ("gb_s", size / secs / 1e9),
                ("cpu_s_gib", cpu / (size / (1u64 << 30) as f64)),
            ])
        }
        Measure::IdleMemory | Measure::IdleMemoryH2 => {
            let before = procfs::sample(pids)?;
            let open = if measure == Measure::IdleMemory {
                ctx.runtime.block_on(super::client::open_idle(
                    server.addr,
                    ctx.tls.clone(),
                    "/1k",
                    sz.idle_connections,
                    16,
                ))?
            } else {
                ctx.runtime.block_on(super::client::open_idle_h2(
                    server.addr,
                    ctx.tls_h2.clone(),
                    sz.idle_connections,
                    16,
                ))?
            };
            // Let the server finish each response and go idle.
            std::thread::sleep(Duration::from_millis(500));
            let after = procfs::sample(pids)?;
            let n = open.len() as f64;
            drop(open);
            Ok(vec![
                (
                    "pss_kib",
                    after.pss_kib.saturating_sub(before.pss_kib) as f64 / n,
                ),
                (
                    "rss_kib",
                    after.rss_kib.saturating_sub(before.rss_kib) as f64 / n,
                ),
            ])
        }
        Measure::H3 => {
            let requests = sz.h2_requests;
            let before = procfs::sample(pids)?;
            let targets = super::h3load::Targets {
                paths: vec![("/1k".to_string(), 1024)],
                headers: Vec::new(),
            };
            let load = ctx.runtime.block_on(super::h3load::load(
                server.addr,
                &targets,
                requests,
                32,
                10,
            ))?;
            let after = procfs::sample(pids)?;
            super::h3load::check(&load, requests, requests as u64 * 1024)?;
            let cpu = procfs::cpu_seconds(&before, &after, ctx.ticks);
            let mut figures = vec![
                ("cpu_us", cpu * 1e6 / load.ok as f64),
                ("per_s", load.ok as f64 / load.elapsed.as_secs_f64()),
            ];
            figures.extend(procfs::sys_percent(&before, &after).map(|p| ("sys_pct", p)));
            Ok(figures)
        }
        Measure::Req(proto) => super::browser::run(proto, Set::Req, server, pids, ctx),
        Measure::Page(proto) => super::browser::run(proto, Set::Page, server, pids, ctx),
        Measure::Ttfb => {
            let mut argv = curl_tls_args();
            argv.extend(
                ["--http2", "-w", "%{time_appconnect} %{time_starttransfer}"].map(String::from),
            );
            argv.push(url(server, "/1k"));
            let mut ms = Vec::with_capacity(sz.ttfb_fetches);
            for _ in 0..sz.ttfb_fetches {
                let out = run_tool(&argv)?;
                match parse_floats(&out).as_deref() {
                    Some(&[app, first]) => ms.push((first - app) * 1e3),
                    _ => bail!("curl -w output: {out:?}"),
                }
            }
            let (median, max, stalls) = ttfb_figures(&ms).context("no fetches")?;
            Ok(vec![
                ("median_ms", median),
                ("max_ms", max),
                ("stalls", stalls),
            ])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H2LOAD: &str = "starting benchmark...
spawning thread #0: 32 total client(s). 100000 total requests
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
progress: 10% done

finished in 412.06ms, 242681.12 req/s, 262.80MB/s
requests: 100000 total, 100000 started, 100000 done, 99998 succeeded, 1 failed, 1 errored, 0 timeout
status codes: 100000 2xx, 0 3xx, 0 4xx, 0 5xx
";

    #[test]
    fn h2load_summary_lines() {
        let h = parse_h2load(H2LOAD).expect("parses");
        assert_eq!(h.per_s, 242_681.12);
        assert_eq!((h.succeeded, h.failed), (99_998, 2));
        assert_eq!(h.protocol, "h2");
        assert_eq!(h.cipher, "TLS_AES_128_GCM_SHA256");
        assert_eq!(h.data_bytes, None, "no traffic line");
        assert!(parse_h2load("finished in 1s, 5 req/s, 1MB/s\n").is_none());
        let with_traffic = format!(
            "{H2LOAD}traffic: 1.04MB (1093440) total, 35.28KB (36126) headers (space savings \
             92.73%), 1000.00KB (1024000) data\n"
        );
        let h = parse_h2load(&with_traffic).expect("parses");
        assert_eq!(h.data_bytes, Some(1_024_000));
    }

    #[test]
    fn curl_write_out_floats() {
        assert_eq!(
            parse_floats("1073741824 0.512345\n"),
            Some(vec![1_073_741_824.0, 0.512345])
        );
        assert_eq!(parse_floats("0.001 x"), None);
    }

    #[test]
    fn bulk_downloads_are_whole_and_over_the_version_asked() {
        let gib = 1u64 << 30;
        assert_eq!(
            bulk_figures("1073741824 0.5 2\n", gib, 2.0).expect("whole"),
            (gib as f64, 0.5)
        );
        assert!(bulk_figures("1073741824 0.5 1.1", gib, 1.1).is_ok());
        assert!(
            bulk_figures("1073741824 0.5 1.1", gib, 2.0).is_err(),
            "fell back to HTTP/1.1"
        );
        assert!(bulk_figures("1000 0.5 2", gib, 2.0).is_err(), "short");
        assert!(bulk_figures("1073741824 0 2", gib, 2.0).is_err(), "no time");
        assert!(
            bulk_figures("1073741824 0.5", gib, 2.0).is_err(),
            "no version"
        );
    }

    #[test]
    fn ttfb_counts_stalls_at_30_ms() {
        let (median, max, stalls) = ttfb_figures(&[0.1, 0.2, 41.0, 30.0, 0.15]).expect("values");
        assert_eq!((median, max, stalls), (0.2, 41.0, 2.0));
        assert!(ttfb_figures(&[]).is_none());
    }

    #[test]
    fn metrics_cover_every_measure_with_unique_keys() {
        for measure in Measure::ALL {
            assert!(METRICS.iter().any(|m| m.measure == measure), "{measure:?}");
        }
        for (i, a) in METRICS.iter().enumerate() {
            for b in &METRICS[i + 1..] {
                assert!(a.measure != b.measure || a.key != b.key);
            }
        }
    }

    #[test]
    fn h2load_runs_the_issue_load() {
        let argv = h2load_argv("https://127.0.0.1:1/1k", 100_000);
        assert_eq!(argv[1..7], ["-n", "100000", "-c", "32", "-m", "10"]);
        assert_eq!(
            argv.last().map(String::as_str),
            Some("https://127.0.0.1:1/1k")
        );
    }
}
