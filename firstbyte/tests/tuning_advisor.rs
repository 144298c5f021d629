//! The tuning advisor end to end: synthetic traffic of known distributions (static files of
//! chosen sizes over TLS: all small, all large, bimodal; a fast and a slow upstream) and the
//! exact recommendations each gives in `tuning_advisor_status`'s JSON; `?reset` between them;
//! a server with `tuning_advisor off` is not observed; every snippet passes `firstbyte -t` and
//! Debian's `nginx -t`.

mod support;

use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    tuning_advisor on;
    upstream fast {
        server 127.0.0.1:{fast};
        keepalive 8;
    }
    server {
        listen 127.0.0.1:{port0};
        listen 127.0.0.1:{port1} ssl;
        http2 on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
        location = /tuning-advisor {
            tuning_advisor_status;
            allow 127.0.0.1;
            deny all;
        }
        location /fast/ {
            proxy_pass http://fast;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location /slow/ { proxy_pass http://127.0.0.1:{slow}; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        tuning_advisor off;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
    }
}
"#;

/// Content-Length of a request head (0 when none).
fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// An upstream answering every request on a connection after `delay`, with a header padded by
/// `pad` bytes and a body of `body` bytes.
fn serving_upstream(delay: Duration, pad: usize, body: usize) -> u16 {
    upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        while let Some(head) = read_head(&mut r) {
            let mut req_body = vec![0u8; content_length(&head)];
            if r.read_exact(&mut req_body).is_err() {
                return;
            }
            std::thread::sleep(delay);
            let pad = if pad > 0 {
                format!("X-Pad: {}\r\n", "p".repeat(pad))
            } else {
                String::new()
            };
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n{pad}\r\n");
            if w.write_all(head.as_bytes()).is_err() || w.write_all(&vec![b'b'; body]).is_err() {
                return;
            }
        }
    })
    .0
}

/// The advisor's JSON (from the plain port); `reset` clears it first.
fn report(port: u16, reset: bool) -> Value {
    let q = if reset { "?reset" } else { "" };
    let out = curl(&[&format!("http://127.0.0.1:{port}/tuning-advisor{q}")]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout).into_owned()
        )
    })
}

/// GETs `paths` over one TLS connection (HTTP/1.1 keep-alive).
fn fetch_tls(port: u16, paths: &[&str]) {
    fetch_tls_as("--http1.1", port, paths)
}

/// GETs `paths` over one TLS connection, HTTP/1.1 or HTTP/2 (`--http1.1`, `--http2`).
fn fetch_tls_as(version: &str, port: u16, paths: &[&str]) {
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("https://127.0.0.1:{port}{p}"))
        .collect();
    let mut args = vec![version, "-o", "/dev/null"];
    for u in &urls {
        args.push(u);
    }
    // curl's `-o` names the first URL's output; the rest go to stdout, which is captured.
    let out = curl(&args);
    assert!(out.status.success(), "curl: {:?}", out.status);
}

fn rec(v: &Value, key: &str) -> (String, String) {
    (
        v[key]["recommendation"].as_str().unwrap_or("?").to_string(),
        v[key]["suggested_value"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
    )
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

/// Runs `firstbyte -t` and Debian's `nginx -t` on an http block holding `snippet` and a
/// server with a proxied location (where nginx checks the proxy buffers against each other);
/// their exit statuses and error output.
fn check(dir: &Path, snippet: &str) -> [(bool, String); 2] {
    let d = dir.join(format!("check-{}", snippet.len()));
    std::fs::create_dir_all(d.join("tmp")).expect("mkdir");
    std::fs::write(d.join("snippet.conf"), snippet).expect("snippet");
    // nginx run as an ordinary user needs every temp path under the prefix; firstbyte has
    // no FastCGI, uwsgi or SCGI and refuses their directives. `-t` binds nothing.
    let port = free_port();
    let conf = |extra: &str| {
        format!("pid nginx.pid;\nerror_log error.log;\nevents {{}}\nhttp {{\n    client_body_temp_path tmp;\n    proxy_temp_path tmp;\n{extra}    access_log off;\n    include snippet.conf;\n    server {{\n        listen 127.0.0.1:{port};\n        location / {{ proxy_pass http://127.0.0.1:9; }}\n    }}\n}}\n")
    };
    std::fs::write(d.join("firstbyte.conf"), conf("")).expect("conf");
    std::fs::write(
        d.join("nginx.conf"),
        conf("    fastcgi_temp_path tmp;\n    uwsgi_temp_path tmp;\n    scgi_temp_path tmp;\n"),
    )
    .expect("conf");
    let prefix = format!("{}/", d.display());
    let run = |cmd: &Path, conf: &str| {
        let out = Command::new(cmd)
            .args(["-t", "-p", &prefix, "-c", conf, "-e", "error.log"])
            .output()
            .unwrap_or_else(|e| panic!("{} -t: {e}", cmd.display()));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let r = [
        run(&bin(), "firstbyte.conf"),
        run(Path::new("nginx"), "nginx.conf"),
    ];
    let _ = std::fs::remove_dir_all(&d);
    r
}

/// `firstbyte -t` and `nginx -t` both accept `snippet` in an http block.
fn both_accept(dir: &Path, snippet: &str) {
    let [fb, ng] = check(dir, snippet);
    assert!(fb.0, "firstbyte -t refused {snippet:?}: {}", fb.1);
    assert!(ng.0, "nginx -t refused {snippet:?}: {}", ng.1);
}

/// The check can fail: a 32k `proxy_buffer_size` beside nginx's default `proxy_buffers 8 4k`
/// leaves `proxy_busy_buffers_size` (64k) above all buffers but one (28k); both refuse it.
#[test]
fn the_snippet_check_catches_inconsistent_buffers() {
    let dir = tempdir("tuning-advisor-check");
    let [fb, ng] = check(&dir, "proxy_buffer_size 32k;\nproxy_buffers 8 4k;");
    assert!(
        !fb.0 && fb.1.contains("proxy_busy_buffers_size"),
        "{}",
        fb.1
    );
    assert!(
        !ng.0 && ng.1.contains("proxy_busy_buffers_size"),
        "{}",
        ng.1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recommendations_follow_the_traffic() {
    let fast = serving_upstream(Duration::ZERO, 0, 1000);
    let slow = serving_upstream(Duration::from_millis(1500), 20_000, 100_000);
    let conf = CONF
        .replace("{fast}", &fast.to_string())
        .replace("{slow}", &slow.to_string());
    let (server, ports) = Server::start("tuning-advisor", &conf, 3);
    let (plain, tls, off) = (ports[0], ports[1], ports[2]);
    let html = server.dir.join("html");
    std::fs::write(html.join("small.bin"), vec![b's'; 1000]).expect("small");
    std::fs::write(html.join("large.bin"), vec![b'l'; 200_000]).expect("large");

    // Nothing yet; the status page's own answers are not counted.
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 0, "{r:#}");
    assert_eq!(report(plain, false)["sample_size"], 0);
    assert_eq!(r["nginx_config"]["snippet"], "");

    // All small: REDUCE to 4k.
    fetch_tls(tls, &["/small.bin"; 100]);
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 100, "{r:#}");
    assert_eq!(rec(&r, "ssl_buffer_size"), pair("REDUCE", "4k"), "{r:#}");
    assert_eq!(r["ssl_buffer_size"]["observed"]["p95_approx"], "1.0k");
    assert_eq!(r["ssl_buffer_size"]["observed"]["max"], "1.0k");
    assert!(r.get("dyn_rec_advisory").is_none(), "{r:#}");
    assert_eq!(r["nginx_config"]["snippet"], "ssl_buffer_size 4k;");
    assert_eq!(r["nginx_config"]["apply_to"], "http or server block");
    assert_eq!(r["keepalive"]["client"]["observed"]["reused"], 99);
    assert_eq!(rec(&r, "proxy_buffer_size"), pair("OK", "4k"));
    assert!(r["proxy_buffer_size"]["reason"]
        .as_str()
        .is_some_and(|s| s.starts_with("no upstream responses observed")));
    // What only firstbyte sees: the connection under each response.
    let st = &r["record_policy"]["observed"]["adaptive"];
    assert_eq!(st["responses"], 100, "{r:#}");
    assert_eq!(st["by_size"]["small"]["responses"], 100);
    assert!(st["cwnd_at_first_byte"]["p50"]
        .as_u64()
        .is_some_and(|c| c >= 1));
    assert_eq!(r["record_policy"]["favours"], "adaptive");
    both_accept(
        &server.dir,
        r["nginx_config"]["snippet"].as_str().unwrap_or(""),
    );

    // A server with `tuning_advisor off` is not observed.
    fetch_tls(off, &["/small.bin"; 5]);
    assert_eq!(report(plain, false)["sample_size"], 100);

    // The same over HTTP/2 (firstbyte's own HTTP/2 layer): every stream is counted.
    report(plain, true);
    fetch_tls_as("--http2", tls, &["/small.bin"; 20]);
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 20, "{r:#}");
    assert_eq!(rec(&r, "ssl_buffer_size"), pair("REDUCE", "4k"), "{r:#}");
    assert_eq!(r["ssl_buffer_size"]["observed"]["max"], "1.0k");
    assert_eq!(r["record_policy"]["observed"]["adaptive"]["responses"], 20);

    // All large: 16k stays.
    assert_eq!(report(plain, true)["sample_size"], 0, "reset");
    fetch_tls(tls, &["/large.bin"; 20]);
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 20, "{r:#}");
    assert_eq!(rec(&r, "ssl_buffer_size"), pair("OK", "16k"), "{r:#}");
    assert_eq!(r["ssl_buffer_size"]["observed"]["p95_approx"], "195.3k");
    assert!(r.get("dyn_rec_advisory").is_none());
    assert_eq!(
        r["record_policy"]["observed"]["adaptive"]["by_size"]["medium"]["responses"],
        20
    );
    assert_eq!(r["nginx_config"]["snippet"], "ssl_buffer_size 16k;");

    // Bimodal: 96 small, 4 large: REDUCE, and the advisory for patched nginx.
    report(plain, true);
    let mut paths = vec!["/small.bin"; 96];
    paths.extend(["/large.bin"; 4]);
    fetch_tls(tls, &paths);
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 100, "{r:#}");
    assert_eq!(rec(&r, "ssl_buffer_size"), pair("REDUCE", "4k"), "{r:#}");
    let adv = r["dyn_rec_advisory"].as_str().unwrap_or("");
    assert!(
        adv.starts_with(
            "bimodal: p95 response body is 1.0k but 4.0% of responses are larger than 64k"
        ),
        "{adv}"
    );
    assert!(!r["nginx_config"]["snippet"]
        .as_str()
        .unwrap_or("")
        .contains("dyn_rec"));

    // A fast upstream over kept-alive connections (plain HTTP: no ssl_buffer_size).
    report(plain, true);
    let urls: Vec<String> = (0..50)
        .map(|i| format!("http://127.0.0.1:{plain}/fast/{i}"))
        .collect();
    let mut args = vec!["-o", "/dev/null"];
    args.extend(urls.iter().map(String::as_str));
    assert!(curl(&args).status.success());
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 50, "{r:#}");
    assert_eq!(rec(&r, "proxy_buffer_size"), pair("OK", "4k"), "{r:#}");
    assert_eq!(rec(&r, "proxy_buffers"), pair("OK", "8 4k"));
    assert_eq!(rec(&r, "proxy_read_timeout"), pair("REDUCE", "5s"));
    assert_eq!(r["keepalive"]["upstream"]["recommendation"], "OK", "{r:#}");
    assert_eq!(r["keepalive"]["upstream"]["observed"]["requests"], 50);
    assert_eq!(rec(&r, "ssl_buffer_size"), pair("OK", "16k"));
    assert_eq!(
        r["nginx_config"]["snippet"],
        "proxy_buffer_size 4k;\nproxy_buffers 8 4k;\nproxy_read_timeout 5s;"
    );
    assert_eq!(
        r["nginx_config"]["apply_to"],
        "http, server, or location block"
    );
    both_accept(
        &server.dir,
        r["nginx_config"]["snippet"].as_str().unwrap_or(""),
    );

    // A slow upstream (1.5 s) with 20 KB headers and 100 KB bodies, new connections each
    // time, and 2000-byte request bodies.
    report(plain, true);
    let body = server.dir.join("body.txt");
    std::fs::write(&body, vec![b'q'; 2000]).expect("body");
    let at = format!("@{}", body.display());
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let url = format!("http://127.0.0.1:{plain}/slow/{i}");
            let at = at.clone();
            std::thread::spawn(move || curl(&["-o", "/dev/null", "--data-binary", &at, &url]))
        })
        .collect();
    for t in threads {
        let out = t.join().expect("curl thread");
        assert!(out.status.success());
    }
    let r = report(plain, false);
    assert_eq!(r["sample_size"], 6, "{r:#}");
    assert_eq!(
        rec(&r, "proxy_buffer_size"),
        pair("INCREASE", "32k"),
        "{r:#}"
    );
    assert_eq!(rec(&r, "proxy_buffers"), pair("INCREASE", "32 4k"));
    assert_eq!(rec(&r, "proxy_read_timeout"), pair("REDUCE", "10s"));
    assert_eq!(rec(&r, "client_body_buffer_size"), pair("REDUCE", "8k"));
    assert_eq!(r["client_body_buffer_size"]["observed"]["max"], "2.0k");
    assert_eq!(r["keepalive"]["upstream"]["recommendation"], "INCREASE");
    assert_eq!(
        r["nginx_config"]["snippet"],
        "proxy_buffer_size 32k;\nproxy_buffers 32 4k;\nproxy_read_timeout 10s;\nclient_body_buffer_size 8k;"
    );
    both_accept(
        &server.dir,
        r["nginx_config"]["snippet"].as_str().unwrap_or(""),
    );
    let _ = std::fs::remove_dir_all(&server.dir);
}

/// firstbyte-netem, built beside the server binary (`cargo build` of the workspace).
fn netem_bin() -> std::path::PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_firstbyte")).with_file_name("firstbyte-netem");
    assert!(
        p.exists(),
        "{} is missing: build the workspace (cargo build -p firstbyte-netem)",
        p.display()
    );
    p
}

/// `tuning_advisor apply` over an emulated lossy link (3% loss each way): after a few hundred
/// 20 KB responses on the configured static policy, most of which saw a retransmission, the
/// server switches itself to adaptive records, says so at `notice` with its reason, and a new
/// connection's connection-info page shows the new policy.
#[test]
fn apply_switches_to_adaptive_records_on_a_lossy_link() {
    let dir = tempdir("tuning-advisor-apply");
    std::fs::create_dir_all(dir.join("html")).expect("mkdir");
    std::fs::write(dir.join("html/f.bin"), vec![b'f'; 20_000]).expect("file");
    // The server namespace's address is known only inside it: listen on the wildcard.
    let conf = render(
        r#"
error_log {dir}/error.log info;
pid {dir}/firstbyte.pid;
events {}
http {
    access_log off;
    tuning_advisor apply;
    server {
        listen 8443 ssl;
        listen 8080;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        ssl_dyn_rec_enable off;
        root {dir}/html;
        location = /info { connection_info; }
        location = /tuning-advisor { tuning_advisor_status; }
    }
}
"#,
        &dir,
        &[],
    );
    std::fs::write(dir.join("firstbyte.conf"), conf).expect("conf");
    let server = format!(
        "exec '{}' -c '{}' -g 'daemon off;'",
        bin().display(),
        dir.join("firstbyte.conf").display()
    );
    // 300 responses on one kept-alive connection, then the connection-info page on a new one,
    // then the report.
    let client = "curl -sk --http1.1 --max-time 300 -o /dev/null \"https://$FB_SERVER_ADDR:8443/f.bin?[1-300]\" \
        && curl -sk --max-time 30 \"https://$FB_SERVER_ADDR:8443/info?format=json\" \
        && echo && echo ---- \
        && curl -s --max-time 30 \"http://$FB_SERVER_ADDR:8080/tuning-advisor\"";
    let out = Command::new(netem_bin())
        .args(["--delay", "2ms", "--loss", "3%", "--seed", "7"])
        .args(["--server", &server, "--wait-port", "8443"])
        .args(["--", "sh", "-c", client])
        .output()
        .expect("run firstbyte-netem");
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "netem/curl failed ({}): {}\nserver log: {log}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (info, report) = stdout.split_once("\n----\n").expect("two answers");
    let info: Value = serde_json::from_str(info.trim()).expect("connection-info JSON");
    let report: Value = serde_json::from_str(report.trim()).expect("report JSON");
    let switch = log
        .lines()
        .find(|l| l.contains("tuning advisor: record policy"))
        .unwrap_or_else(|| panic!("no switch in the log: {log}\n{report:#}"));
    // The switch and its reason (with --nocapture).
    eprintln!("{switch}");
    assert!(switch.contains("[notice]"), "{switch}");
    assert!(
        switch.contains("record policy \"static\" -> \"adaptive\": "),
        "{switch}"
    );
    assert!(
        switch.contains("responses saw a retransmission"),
        "{switch}"
    );
    assert_eq!(
        log.matches("tuning advisor: record policy").count(),
        1,
        "one switch: {log}"
    );
    assert_eq!(info["record_policy"], "adaptive", "{info:#}");
    assert_eq!(report["record_policy"]["applied"], "adaptive", "{report:#}");
    let st = &report["record_policy"]["observed"]["static"];
    assert_eq!(st["responses"], 300, "{report:#}");
    assert!(
        st["responses_with_retransmissions"].as_u64().unwrap_or(0) > 30,
        "{report:#}"
    );
    eprintln!("{:#}", report["record_policy"]);
    // Nothing else changed: the buffer advice is the same as without `apply`.
    assert_eq!(rec(&report, "ssl_buffer_size"), pair("OK", "16k"));
    let _ = std::fs::remove_dir_all(&dir);
}
