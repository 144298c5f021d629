//! `error_log` in http, server and location blocks: a request's error lines go to the log
//! of the location that handles it (inherited inward), with that log's level, and not to
//! the main level's.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

fn read(f: &Path) -> String {
    std::fs::read_to_string(f).unwrap_or_default()
}

/// Waits until `f` holds `needle` (5 s at most) and returns its text.
fn wait_for(f: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = read(f);
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn request_errors_go_to_their_locations_error_log() {
    let conf = r#"
pid off;
error_log {dir}/main.log info;
events {}
http {
    access_log off;
    error_log {dir}/http.log;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        error_log {dir}/server.log;
        location /loc/ {
            error_log {dir}/loc.log warn;
            location /loc/inner/ { }
        }
        location /quiet/ { error_log {dir}/quiet.log crit; }
        location /twice/ { error_log {dir}/twice1.log; error_log {dir}/twice2.log; }
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/html;
    }
}
"#;
    let (s, p) = Server::start("error-log-levels", conf, 2);
    // Every log file exists from the start, written to or not (nginx opens them at load).
    for f in [
        "http.log",
        "server.log",
        "loc.log",
        "quiet.log",
        "twice1.log",
        "twice2.log",
    ] {
        assert!(s.dir.join(f).exists(), "{f} not opened at load");
    }
    let get = |port: u16, path: &str| {
        let (code, _, _) = curl_i(&[&format!("http://127.0.0.1:{port}{path}")]);
        assert_eq!(code, 404, "{path}");
    };
    get(p[0], "/srv-missing");
    get(p[0], "/loc/loc-missing");
    get(p[0], "/loc/inner/inner-missing");
    get(p[0], "/quiet/quiet-missing");
    get(p[0], "/twice/twice-missing");
    get(p[1], "/http-missing");
    let server = wait_for(&s.dir.join("server.log"), "srv-missing");
    assert!(
        server.contains("[error]")
            && server.contains("/html/srv-missing\" failed (2: No such file"),
        "{server}"
    );
    let loc = wait_for(&s.dir.join("loc.log"), "inner-missing");
    assert!(loc.contains("loc-missing"), "{loc}");
    assert!(
        loc.contains("inner-missing"),
        "inherited by the inner location: {loc}"
    );
    let http = wait_for(&s.dir.join("http.log"), "http-missing");
    assert!(http.contains("http-missing"), "{http}");
    for f in ["twice1.log", "twice2.log"] {
        let t = wait_for(&s.dir.join(f), "twice-missing");
        assert!(t.contains("twice-missing"), "{f}: {t}");
    }
    // The lines of the requests above went only to their own logs.
    let main = read(&s.dir.join("main.log"));
    for name in [
        "srv-missing",
        "loc-missing",
        "inner-missing",
        "quiet-missing",
        "twice-missing",
        "http-missing",
    ] {
        assert!(!main.contains(name), "{name} in main.log: {main}");
    }
    assert!(!server.contains("loc-missing") && !server.contains("http-missing"));
    assert!(!http.contains("srv-missing"));
    // `crit` is above the missing file's `error`: nothing.
    assert_eq!(read(&s.dir.join("quiet.log")), "");
}
