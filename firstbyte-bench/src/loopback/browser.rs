//! The browser-like measures (issue 29): requests for a real page's paths with Chromium's
//! headers, over HTTP/1.1, HTTP/2 and HTTP/3.
//!
//! - `h1_req`, `h2_req`, `h3_req` (request cost): the page's 50 paths under `/r/`
//!   ([`super::page`]), every file 1,024 bytes, so the row measures the request path
//!   (parsing a Huffman-coded path and 13 headers with a 317-byte cookie, mapping the path to
//!   a file, answering) and not bulk bytes → server CPU µs per request, req/s, kernel share.
//! - `h1_page`, `h2_page`, `h3_page` (page mix): the same paths at their real sizes
//!   (1 KiB–200 KiB, ~37 KB on average) → server CPU µs per request and server CPU-s per GiB
//!   of bodies delivered, req/s.
//!
//! Loads: HTTP/1.1 `h2load --h1 -i LIST -c 32 -m 1` (browsers do not pipeline; each of the 32
//! connections has one request in flight); HTTP/2 `h2load -i LIST -c 32 -m 10` (the `h2_1k`
//! load); HTTP/3 the in-crate quinn client ([`super::h3load`]), 32 connections, 10 streams
//! each, walking the same list. Every request carries [`super::chromium::HEADERS`]. A run is
//! [`page::whole_pages`] requests (each connection fetches the page a whole number of times)
//! so its body bytes are known ([`page::expected_bytes`]); the run fails unless every request
//! succeeded over the protocol asked for and the body bytes match exactly ([`check_h2load`],
//! [`super::h3load::check`]).

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::measures::{parse_h2load, run_tool, Ctx, H2load, Proto, Sizes};
use super::page::{self, Set};
use super::servers::Running;
use super::{chromium, procfs};

/// Connections of every browser-like load (h2load `-c`).
pub const CONNECTIONS: usize = 32;

/// Requests in flight per connection: 1 over HTTP/1.1 (no pipelining), 10 otherwise.
pub fn streams(proto: Proto) -> usize {
    match proto {
        Proto::H1 => 1,
        Proto::H2 | Proto::H3 => 10,
    }
}

/// Requests of one run of `set`: the run size rounded up to whole pages per connection.
pub fn requests(set: Set, sizes: &Sizes) -> usize {
    let at_least = match set {
        Set::Req => sizes.h2_requests,
        Set::Page => sizes.page_requests,
    };
    page::whole_pages(at_least, CONNECTIONS)
}

/// The h2load command of an HTTP/1.1 or HTTP/2 browser-like run: `requests` requests over
/// the URI list `list` with Chromium's headers (the referer names `port`).
pub fn h2load_argv(proto: Proto, list: &Path, requests: usize, port: u16) -> Vec<String> {
    let mut argv: Vec<String> = [
        "h2load",
        "-n",
        &requests.to_string(),
        "-c",
        &CONNECTIONS.to_string(),
        "-m",
        &streams(proto).to_string(),
    ]
    .map(String::from)
    .to_vec();
    if proto == Proto::H1 {
        argv.push("--h1".into());
    }
    argv.extend(["--tls13-ciphers", "TLS_AES_128_GCM_SHA256", "-i"].map(String::from));
    argv.push(list.display().to_string());
    argv.extend(chromium::h2load_args(port));
    argv
}

/// The ALPN protocol h2load must report for `proto`.
fn alpn(proto: Proto) -> &'static str {
    match proto {
        Proto::H1 => "http/1.1",
        Proto::H2 | Proto::H3 => "h2",
    }
}

/// Checks an h2load run: the protocol and suite asked for, every one of `requests`
/// succeeded, and exactly `bytes` of bodies received.
pub fn check_h2load(h: &H2load, proto: Proto, requests: usize, bytes: u64) -> Result<()> {
    if h.protocol != alpn(proto) {
        bail!("h2load spoke {:?}, not {}", h.protocol, alpn(proto));
    }
    if h.cipher != "TLS_AES_128_GCM_SHA256" {
        bail!("h2load negotiated {:?}", h.cipher);
    }
    if h.failed != 0 || h.succeeded != requests as u64 {
        bail!(
            "h2load: {} of {requests} requests succeeded, {} failed",
            h.succeeded,
            h.failed
        );
    }
    if h.data_bytes != Some(bytes) {
        bail!("h2load received {:?} body bytes, not {bytes}", h.data_bytes);
    }
    Ok(())
}

/// The figures of a run: `cpu` server CPU-s for `requests` requests and `bytes` body bytes
/// at `per_s` requests/s.
pub fn figures(
    set: Set,
    cpu: f64,
    requests: usize,
    bytes: u64,
    per_s: f64,
) -> Vec<(&'static str, f64)> {
    let mut f = vec![("cpu_us", cpu * 1e6 / requests as f64), ("per_s", per_s)];
    if set == Set::Page {
        f.push(("cpu_s_gib", cpu / (bytes as f64 / (1u64 << 30) as f64)));
    }
    f
}

/// Takes one run of the `proto` measure on `set` against `server` (process tree `pids`).
pub fn run(
    proto: Proto,
    set: Set,
    server: &Running,
    pids: &[i32],
    ctx: &Ctx,
) -> Result<Vec<(&'static str, f64)>> {
    let requests = requests(set, &ctx.sizes);
    let bytes = page::expected_bytes(set, requests);
    let port = server.addr.port();
    let (before, after, per_s) = if proto == Proto::H3 {
        let targets = super::h3load::Targets {
            paths: page::requests(set),
            headers: chromium::headers(&port.to_string()),
        };
        let before = procfs::sample(pids)?;
        let load = ctx.runtime.block_on(super::h3load::load(
            server.addr,
            &targets,
            requests,
            CONNECTIONS,
            streams(proto),
        ))?;
        let after = procfs::sample(pids)?;
        super::h3load::check(&load, requests, bytes)?;
        (before, after, load.ok as f64 / load.elapsed.as_secs_f64())
    } else {
        let list = ctx.fixture_dir.join(match set {
            Set::Req => "req.uris",
            Set::Page => "page.uris",
        });
        std::fs::write(
            &list,
            page::uri_list(&format!("https://127.0.0.1:{port}"), set),
        )
        .with_context(|| format!("write {}", list.display()))?;
        let argv = h2load_argv(proto, &list, requests, port);
        let before = procfs::sample(pids)?;
        let out = run_tool(&argv)?;
        let after = procfs::sample(pids)?;
        let h = parse_h2load(&out).with_context(|| format!("unreadable h2load output:\n{out}"))?;
        check_h2load(&h, proto, requests, bytes)
            .with_context(|| format!("h2load output:\n{out}"))?;
        (before, after, h.per_s)
    };
    let cpu = procfs::cpu_seconds(&before, &after, ctx.ticks);
    let mut f = figures(set, cpu, requests, bytes, per_s);
    if set == Set::Req {
        f.extend(procfs::sys_percent(&before, &after).map(|p| ("sys_pct", p)));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1_OUT: &str = "starting benchmark...
spawning thread #0: 32 total client(s). 1600 total requests
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: http/1.1
progress: 10% done

finished in 1.02s, 1568.63 req/s, 57.02MB/s
requests: 1600 total, 1600 started, 1600 done, 1600 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 1600 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 58.16MB (60985984) total, 1.21MB (1265600) headers (space savings 0.00%), 57.88MB (60694528) data
";

    fn sizes(h2_requests: usize, page_requests: usize) -> Sizes {
        Sizes {
            handshakes: 1,
            handshake_concurrency: 1,
            h2_requests,
            page_requests,
            idle_connections: 1,
            ttfb_fetches: 1,
        }
    }

    #[test]
    fn h2load_output_of_a_page_run_is_checked_to_the_byte() {
        let h = parse_h2load(H1_OUT).expect("parses");
        assert_eq!(h.data_bytes, Some(60_694_528));
        assert_eq!(h.protocol, "http/1.1");
        let bytes = page::expected_bytes(Set::Page, 1600);
        assert_eq!(bytes, 60_694_528);
        check_h2load(&h, Proto::H1, 1600, bytes).expect("a whole run");
        assert!(check_h2load(&h, Proto::H2, 1600, bytes).is_err(), "not h2");
        assert!(check_h2load(&h, Proto::H1, 1601, bytes).is_err(), "short");
        assert!(
            check_h2load(&h, Proto::H1, 1600, bytes + 1).is_err(),
            "bytes"
        );
        let mut no_traffic = h.clone();
        no_traffic.data_bytes = None;
        assert!(check_h2load(&no_traffic, Proto::H1, 1600, bytes).is_err());
        let mut failed = h;
        failed.failed = 1;
        assert!(check_h2load(&failed, Proto::H1, 1600, bytes).is_err());
    }

    #[test]
    fn http1_runs_one_request_per_connection_and_http2_ten() {
        let list = Path::new("/t/page.uris");
        let a = h2load_argv(Proto::H1, list, 1600, 8443);
        assert_eq!(
            a[..8],
            ["h2load", "-n", "1600", "-c", "32", "-m", "1", "--h1"]
        );
        let i = a.iter().position(|x| x == "-i").expect("-i");
        assert_eq!(a[i + 1], "/t/page.uris");
        assert!(a.contains(&"referer: https://127.0.0.1:8443/".to_string()));
        assert_eq!(
            a.iter().filter(|x| *x == "-H").count(),
            chromium::HEADERS.len()
        );
        let b = h2load_argv(Proto::H2, list, 3200, 1);
        assert_eq!(b[1..7], ["-n", "3200", "-c", "32", "-m", "10"]);
        assert!(!b.contains(&"--h1".to_string()));
    }

    #[test]
    fn runs_are_whole_pages() {
        let s = sizes(100_000, 16_000);
        assert_eq!(requests(Set::Req, &s), 100_800);
        assert_eq!(requests(Set::Page, &s), 16_000);
        assert_eq!(requests(Set::Page, &sizes(1, 3_000)), 3_200);
    }

    #[test]
    fn page_rows_add_cpu_per_gib() {
        let f = figures(Set::Page, 2.0, 1000, 1 << 30, 500.0);
        assert_eq!(
            f,
            [("cpu_us", 2000.0), ("per_s", 500.0), ("cpu_s_gib", 2.0)]
        );
        let f = figures(Set::Req, 0.01, 1000, 1024 * 1000, 9.0);
        assert_eq!(f, [("cpu_us", 10.0), ("per_s", 9.0)]);
    }
}
