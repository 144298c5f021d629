//! The `metrics` location, scraped by a parser nobody here wrote (the `prometheus_client`
//! Python package's, in both the text format 0.0.4 and OpenMetrics): every family parses, and
//! the counters move as known traffic says they must. And the libraries' diagnostics (rustls)
//! reach `error_log ... debug`, and only then.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        listen 127.0.0.1:{port1} ssl;
        listen 127.0.0.1:{port1} quic;
        http2 on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
        location = /metrics { metrics; }
        location /up { proxy_pass http://127.0.0.1:{upstream}; }
        location /dead { proxy_pass http://127.0.0.1:{dead}; }
    }
    # Certificates named by the SNI, through ssl_certificate_cache.
    server {
        listen 127.0.0.1:{port2} ssl;
        ssl_certificate {certs}/$ssl_server_name.crt;
        ssl_certificate_key {certs}/$ssl_server_name.key;
        ssl_certificate_cache max=10;
        root {dir}/html;
    }
}
"#;

/// The Python venv with prometheus-client that `scripts/test` makes (`target/tools/prometheus`).
fn python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/prometheus/bin/python");
    assert!(
        p.exists(),
        "{} is missing: bash scripts/test installs prometheus-client there",
        p.display()
    );
    p
}

/// The Python venv with aioquic that `scripts/test` makes (`target/tools/aioquic`).
fn aioquic_python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/aioquic/bin/python");
    assert!(
        p.exists(),
        "{} is missing: bash scripts/test installs aioquic there",
        p.display()
    );
    p
}

/// Sample name and sorted labels → value.
type Samples = BTreeMap<(String, Vec<(String, String)>), f64>;

/// Scrapes `/metrics` in one format and parses it with prometheus_client: (families by name
/// with their type, samples). Panics with the text when the parser refuses it.
fn scrape(port: u16, openmetrics: bool) -> (BTreeMap<String, String>, Samples) {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let mut args = vec!["--http1.1", "-D", "/dev/stderr"];
    if openmetrics {
        args.extend([
            "-H",
            "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        ]);
    }
    args.push(&url);
    let out = curl(&args);
    let text = String::from_utf8(out.stdout).expect("utf-8 exposition");
    let head = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
    let want = if openmetrics {
        "content-type: application/openmetrics-text; version=1.0.0"
    } else {
        "content-type: text/plain; version=0.0.4"
    };
    assert!(head.contains(want), "{head}");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/prom-parse.py");
    let mut child = Command::new(python())
        .arg(script)
        .args(openmetrics.then_some("om"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let res = child.wait_with_output().expect("python");
    assert!(
        res.status.success(),
        "prometheus_client refused the exposition (openmetrics: {openmetrics}):\n{}\n{text}",
        String::from_utf8_lossy(&res.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&res.stdout).expect("json");
    let mut families = BTreeMap::new();
    let mut samples = Samples::new();
    for f in parsed.as_array().expect("families") {
        let name = f["name"].as_str().expect("name").to_string();
        families.insert(name, f["type"].as_str().expect("type").to_string());
        for s in f["samples"].as_array().expect("samples") {
            let mut labels: Vec<(String, String)> = s[1]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            labels.sort();
            samples.insert(
                (s[0].as_str().expect("sample").to_string(), labels),
                s[2].as_f64().expect("value"),
            );
        }
    }
    (families, samples)
}

/// A sample's value (0 when absent: a family's label set appears once counted).
fn v(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    s.get(&(name.to_string(), l)).copied().unwrap_or(0.0)
}

/// The sum of a sample over every label set.
fn total(s: &Samples, name: &str) -> f64 {
    s.iter()
        .filter(|((n, _), _)| n == name)
        .map(|(_, v)| *v)
        .sum()
}

/// Scrapes (text format) until `ok` holds; panics with the last samples after 10 s.
fn until(port: u16, what: &str, ok: impl Fn(&Samples) -> bool) -> Samples {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = scrape(port, false);
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: {s:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// notAfter of a PEM certificate, in seconds since the epoch (through openssl and date).
fn not_after(cert: &std::path::Path) -> f64 {
    let out = run(
        "sh",
        &[
            "-c",
            &format!(
                "date -u -d \"$(openssl x509 -noout -enddate -in '{}' | cut -d= -f2)\" +%s",
                cert.display()
            ),
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("notAfter")
}

const FAMILIES: [(&str, &str); 15] = [
    ("firstbyte_http_requests", "counter"),
    ("firstbyte_http_request_duration_seconds", "histogram"),
    ("firstbyte_http_ttfb_seconds", "histogram"),
    ("firstbyte_http_response_body_bytes", "counter"),
    ("firstbyte_connections", "gauge"),
    ("firstbyte_tls_handshakes", "counter"),
    ("firstbyte_quic_handshakes", "counter"),
    ("firstbyte_tls_handshake_failures", "counter"),
    ("firstbyte_tls_versions", "counter"),
    ("firstbyte_tls_groups", "counter"),
    ("firstbyte_upstream_header_seconds", "histogram"),
    ("firstbyte_upstream_failures", "counter"),
    ("firstbyte_reloads", "counter"),
    ("firstbyte_ssl_cache_lookups", "counter"),
    (
        "firstbyte_ssl_certificate_not_after_timestamp_seconds",
        "gauge",
    ),
];

#[test]
fn prometheus_client_parses_every_family_and_counts_known_traffic() {
    let (up, _) = upstream(|s| {
        let mut s = s;
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        if read_head(&mut r).is_some() {
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    // A port nobody listens on: connect() is refused.
    let dead = free_port();
    let conf = CONF
        .replace("{upstream}", &up.to_string())
        .replace("{dead}", &dead.to_string());
    let (server, ports) = Server::start("metrics", &conf, 3);
    let (plain, tls, by_name) = (ports[0], ports[1], ports[2]);
    let index_len = std::fs::metadata(server.dir.join("html/index.html"))
        .unwrap()
        .len() as f64;

    let (_, before) = scrape(plain, false);
    // The certificate's expiry, as openssl reads it.
    let cert = certs().cert("a.test");
    assert_eq!(
        v(
            &before,
            "firstbyte_ssl_certificate_not_after_timestamp_seconds",
            &[("certificate", &cert.display().to_string())]
        ),
        not_after(&cert)
    );
    // The first load parsed the certificate and its key: misses, no hits.
    let object = |s: &Samples, r: &str| {
        v(
            s,
            "firstbyte_ssl_cache_lookups_total",
            &[("cache", "object"), ("result", r)],
        )
    };
    assert!(object(&before, "miss") >= 2.0, "{before:#?}");
    assert_eq!(object(&before, "hit"), 0.0);

    // Three requests on one HTTP/2 connection (one full handshake), one 404 over HTTP/1.1,
    // one proxied (an upstream header time), one whose upstream refuses (502).
    let base = format!("https://127.0.0.1:{tls}");
    let out = curl(&[
        "-k",
        "--http2",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &format!("{base}/"),
        &format!("{base}/index.html"),
        &format!("{base}/"),
    ]);
    assert!(out.status.success(), "{out:?}");
    // Two connections from one client: a full handshake, then a resumed one.
    let out = curl(&[
        "-k",
        "--http1.1",
        "-H",
        "Connection: close",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &format!("{base}/"),
        &format!("{base}/"),
    ]);
    assert!(out.status.success(), "{out:?}");
    // A certificate named by the SNI: loaded (a miss), then taken from the cache (a hit).
    for _ in 0..2 {
        let resolve = format!("a.test:{by_name}:127.0.0.1");
        let url = format!("https://a.test:{by_name}/");
        let out = curl(&["-k", "--resolve", &resolve, "-o", "/dev/null", &url]);
        assert!(out.status.success(), "{out:?}");
    }
    // One request over HTTP/3 (aioquic).
    let h3 = Command::new(aioquic_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/h3-get.py"))
        .args(["--ca", certs().ca().to_str().unwrap()])
        .args(["--resolve", &format!("a.test:{tls}:127.0.0.1")])
        .arg(format!("https://a.test:{tls}/"))
        .output()
        .expect("run aioquic");
    let h3_out = String::from_utf8_lossy(&h3.stdout);
    assert!(
        h3.status.success() && h3_out.starts_with("200 "),
        "{h3_out}{}",
        String::from_utf8_lossy(&h3.stderr)
    );
    assert_eq!(
        curl_i(&["--http1.1", &format!("http://127.0.0.1:{plain}/missing")]).0,
        404
    );
    assert_eq!(
        curl_i(&["--http1.1", &format!("http://127.0.0.1:{plain}/up/x")]).0,
        200
    );
    assert_eq!(
        curl_i(&["--http1.1", &format!("http://127.0.0.1:{plain}/dead/x")]).0,
        502
    );
    // Not a TLS record at all on the TLS port: a failed handshake.
    let mut junk = TcpStream::connect(("127.0.0.1", tls)).unwrap();
    junk.write_all(b"\x01\x02 not TLS, not HTTP\r\n\r\n")
        .unwrap();
    let _ = junk.read(&mut [0u8; 64]);
    drop(junk);
    // Plain HTTP on the TLS port: nginx's 400 page, counted as a failed handshake of its own.
    let mut plain_http = TcpStream::connect(("127.0.0.1", tls)).unwrap();
    plain_http
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain_http.read_to_end(&mut answer);
    assert!(
        answer.starts_with(b"HTTP/1.1 400 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    let req = |s: &Samples, p: &str, c: &str| {
        v(
            s,
            "firstbyte_http_requests_total",
            &[("protocol", p), ("status", c)],
        )
    };
    let fail = |s: &Samples| {
        v(
            s,
            "firstbyte_tls_handshake_failures_total",
            &[("transport", "tcp"), ("reason", "invalid_message")],
        )
    };
    let plain_http_fail = |s: &Samples| {
        v(
            s,
            "firstbyte_tls_handshake_failures_total",
            &[("transport", "tcp"), ("reason", "plain_http")],
        )
    };
    // A response is counted when the server lets go of its body, which may be a moment after
    // the client has it all: wait for every count.
    let after = until(plain, "the traffic counted", |s| {
        fail(s) == fail(&before) + 1.0
            && plain_http_fail(s) == plain_http_fail(&before) + 1.0
            && req(s, "h2", "2xx") == req(&before, "h2", "2xx") + 3.0
            && req(s, "h3", "2xx") == req(&before, "h3", "2xx") + 1.0
            && req(s, "h1", "4xx") == req(&before, "h1", "4xx") + 1.0
            && req(s, "h1", "5xx") == req(&before, "h1", "5xx") + 1.0
    });
    assert_eq!(req(&after, "h2", "2xx"), req(&before, "h2", "2xx") + 3.0);
    assert_eq!(req(&after, "h1", "4xx"), req(&before, "h1", "4xx") + 1.0);
    assert_eq!(req(&after, "h1", "5xx"), req(&before, "h1", "5xx") + 1.0);
    assert_eq!(req(&after, "h3", "2xx"), req(&before, "h3", "2xx") + 1.0);
    let count = |s: &Samples, name: &str, p: &str| v(s, name, &[("protocol", p)]);
    for h in [
        "firstbyte_http_request_duration_seconds_count",
        "firstbyte_http_ttfb_seconds_count",
    ] {
        assert_eq!(count(&after, h, "h2"), count(&before, h, "h2") + 3.0, "{h}");
    }
    assert_eq!(
        count(&after, "firstbyte_http_response_body_bytes_total", "h2"),
        count(&before, "firstbyte_http_response_body_bytes_total", "h2") + 3.0 * index_len
    );
    // Over TCP: the HTTP/2 connection, the two HTTP/1.1 ones (one resumed), the two by name.
    let hs = |s: &Samples, k: &str| v(s, "firstbyte_tls_handshakes_total", &[("kind", k)]);
    assert_eq!(hs(&after, "full"), hs(&before, "full") + 4.0);
    assert_eq!(hs(&after, "resumed"), hs(&before, "resumed") + 1.0);
    let quic = |s: &Samples| v(s, "firstbyte_quic_handshakes_total", &[]);
    assert_eq!(quic(&after), quic(&before) + 1.0);
    let tls13 = |s: &Samples| v(s, "firstbyte_tls_versions_total", &[("version", "TLSv1.3")]);
    assert_eq!(tls13(&after), tls13(&before) + 6.0);
    // A TLS 1.3 resumption exchanges keys too (psk_dhe_ke): five groups over TCP.
    assert_eq!(
        total(&after, "firstbyte_tls_groups_total"),
        total(&before, "firstbyte_tls_groups_total") + 5.0
    );
    let by_name = |s: &Samples, r: &str| {
        v(
            s,
            "firstbyte_ssl_cache_lookups_total",
            &[("cache", "certificate"), ("result", r)],
        )
    };
    assert_eq!(by_name(&after, "miss"), by_name(&before, "miss") + 1.0);
    assert_eq!(by_name(&after, "hit"), by_name(&before, "hit") + 1.0);
    assert_eq!(
        v(&after, "firstbyte_upstream_header_seconds_count", &[]),
        v(&before, "firstbyte_upstream_header_seconds_count", &[]) + 1.0
    );
    assert_eq!(
        v(
            &after,
            "firstbyte_upstream_failures_total",
            &[("reason", "connect_error")]
        ),
        v(
            &before,
            "firstbyte_upstream_failures_total",
            &[("reason", "connect_error")]
        ) + 1.0
    );
    // The scrape itself is a connection, answering.
    assert!(v(&after, "firstbyte_connections", &[("state", "active")]) >= 1.0);

    // A reload with the files unchanged: counted ok, the certificate and key reused (hits),
    // the counters kept.
    let reloads = |s: &Samples, r: &str| v(s, "firstbyte_reloads_total", &[("result", r)]);
    server.signal(libc::SIGHUP);
    let reloaded = until(plain, "the reload counted", |s| reloads(s, "ok") == 1.0);
    assert!(object(&reloaded, "hit") >= 2.0, "{reloaded:#?}");
    assert!(req(&reloaded, "h2", "2xx") >= req(&after, "h2", "2xx"));
    // A broken configuration: counted failed; the old one keeps serving.
    let good = std::fs::read_to_string(&server.conf).unwrap();
    std::fs::write(
        &server.conf,
        good.replace("events {}", "events {} bogus_directive;"),
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    let failed = until(plain, "the failed reload counted", |s| {
        reloads(s, "failed") == 1.0
    });
    assert_eq!(reloads(&failed, "ok"), 1.0);
    // Both formats parse, and every family is there with its type (each has samples by now:
    // a family with no label set counted yet is left out, as the crate does).
    let (om_families, _) = scrape(plain, true);
    let (text_families, _) = scrape(plain, false);
    for (name, kind) in FAMILIES {
        for families in [&om_families, &text_families] {
            assert_eq!(
                families.get(name).map(String::as_str),
                Some(kind),
                "{name} in {families:?}"
            );
        }
    }
}

const LOG_CONF: &str = r#"
pid off;
error_log {dir}/error.log {level};
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
    }
}
"#;

/// The error log's lines from rustls (`rustls::...: message`, through `log`) and from quinn
/// (`quinn...`, through tracing's `log` feature) after one request over TLS and one over QUIC.
fn library_lines(level: &str) -> (Vec<String>, Vec<String>) {
    let (server, ports) = Server::start(
        &format!("metrics-log-{level}"),
        &LOG_CONF.replace("{level}", level),
        1,
    );
    let out = curl(&["-k", &format!("https://127.0.0.1:{}/", ports[0])]);
    assert!(out.status.success(), "{out:?}");
    let h3 = Command::new(aioquic_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/h3-get.py"))
        .args(["--ca", certs().ca().to_str().unwrap()])
        .args(["--resolve", &format!("a.test:{}:127.0.0.1", ports[0])])
        .arg(format!("https://a.test:{}/", ports[0]))
        .output()
        .expect("run aioquic");
    assert!(h3.status.success(), "{h3:?}");
    // Both requests were answered: their handshakes' lines are written.
    let text = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
    let lines = |what: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(what))
            .map(str::to_string)
            .collect()
    };
    (lines(": rustls::"), lines(": quinn"))
}

#[test]
fn library_diagnostics_reach_the_error_log_at_debug_only() {
    let (rustls, quinn) = library_lines("debug");
    assert!(!rustls.is_empty(), "no rustls line at debug");
    assert!(!quinn.is_empty(), "no quinn line at debug");
    for l in rustls.iter().chain(&quinn) {
        assert!(l.contains(" [debug] "), "written at debug: {l}");
    }
    assert_eq!(library_lines("info"), (Vec::new(), Vec::new()));
}
