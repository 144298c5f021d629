//! `access_log` inside a location writes its file: every location's log files are opened at
//! load, not only the server-level ones (they once were, and location lines were lost).

mod support;

use std::time::{Duration, Instant};

use support::*;

#[test]
fn location_access_log_is_written() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        access_log {dir}/server.log;
        location /x { access_log {dir}/x.log; return 200 "x"; }
        location /outer { location /outer/inner { access_log {dir}/inner.log; return 200 "i"; } }
        location / { return 200 "s"; }
    }
}
"#;
    let (s, p) = Server::start("access-log", conf, 1);
    for path in ["/x", "/outer/inner", "/"] {
        let out = curl(&[&format!("http://127.0.0.1:{}{path}", p[0])]);
        assert!(out.status.success());
    }
    for (file, path) in [
        ("x.log", "/x"),
        ("inner.log", "/outer/inner"),
        ("server.log", "GET / "),
    ] {
        let f = s.dir.join(file);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut text = String::new();
        while Instant::now() < deadline {
            text = std::fs::read_to_string(&f).unwrap_or_default();
            if text.contains(path) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(text.contains(path), "{file}: {text:?}");
    }
}

/// The variables operators log: `$request_id` (the same value in a header and the log line,
/// different per request), `$tcpinfo_*` from the socket, `$ttfb` no later than
/// `$request_time`.
#[test]
fn request_id_tcpinfo_and_ttfb_are_logged() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format ops '$request_id $tcpinfo_rtt $tcpinfo_rttvar $tcpinfo_snd_cwnd $tcpinfo_rcv_space $ttfb $request_time';
    access_log {dir}/ops.log ops;
    server {
        listen 127.0.0.1:{port0};
        location / { add_header X-Request-ID $request_id; return 200 "id=$request_id\n"; }
    }
}
"#;
    let (s, p) = Server::start("access-log-ops", conf, 1);
    let url = format!("http://127.0.0.1:{}/", p[0]);
    // Two requests on one connection.
    let out = curl(&["-i", &url, &url]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ids: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("id=")).collect();
    assert_eq!(ids.len(), 2, "{text}");
    assert_ne!(ids[0], ids[1], "one id per request");
    for id in &ids {
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert!(
            text.to_ascii_lowercase()
                .contains(&format!("x-request-id: {id}")),
            "{text}"
        );
    }
    let f = s.dir.join("ops.log");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = String::new();
    while Instant::now() < deadline && log.lines().count() < 2 {
        log = std::fs::read_to_string(&f).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, id) in lines.iter().zip(&ids) {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 7, "{line}");
        assert_eq!(f[0], *id, "the log's id is the response's");
        let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
        assert!(num(f[1]) > 0, "RTT in µs: {line}");
        num(f[2]);
        assert!(num(f[3]) >= 1, "cwnd in segments: {line}");
        assert!(num(f[4]) > 0, "receive space: {line}");
        let secs = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{line}"));
        assert!(secs(f[5]) <= secs(f[6]), "ttfb ≤ request_time: {line}");
    }
}

/// `access_log ... if=CONDITION`: a line only when the condition is neither empty nor `0`.
#[test]
fn access_log_if_writes_only_when_the_condition_holds() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format short '$request_uri';
    access_log {dir}/if.log short if=$arg_log;
    server {
        listen 127.0.0.1:{port0};
        location / { return 200 "x"; }
    }
}
"#;
    let (s, p) = Server::start("access-log-if", conf, 1);
    for q in ["/a?log=1", "/b", "/c?log=0", "/d?log=", "/e?log=yes"] {
        let out = curl(&[&format!("http://127.0.0.1:{}{q}", p[0])]);
        assert!(out.status.success());
    }
    let f = s.dir.join("if.log");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = String::new();
    while Instant::now() < deadline && !log.contains("/e?log=yes") {
        log = std::fs::read_to_string(&f).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["/a?log=1", "/e?log=yes"],
        "{log}"
    );
}
