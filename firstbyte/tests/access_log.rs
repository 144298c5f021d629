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
