//! `stub_status` counts what the connections are doing, as nginx: "Reading" while a request
//! head is arriving, "Writing" per request being answered (HTTP/1.1 and HTTP/2 streams),
//! "Waiting" for the idle rest — and every count returns to its baseline when the
//! connections end.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    proxy_read_timeout 60s;
    server {
        listen 127.0.0.1:{port0};
        listen 127.0.0.1:{port1} ssl;
        http2 on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location = /status { stub_status; }
        location /up { proxy_pass http://127.0.0.1:{upstream}; }
    }
}
"#;

/// (active, reading, writing, waiting) as `stub_status` says.
fn counts(port: u16) -> (u64, u64, u64, u64) {
    let out = curl(&["--http1.1", &format!("http://127.0.0.1:{port}/status")]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let num = |key: &str| -> u64 {
        let at = text.find(key).unwrap_or_else(|| panic!("{key} in {text}")) + key.len();
        text[at..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {text}"))
    };
    (
        num("Active connections:"),
        num("Reading:"),
        num("Writing:"),
        num("Waiting:"),
    )
}

/// Polls until `stub_status` says `want`; panics with the last answer after 10 s.
fn until(port: u16, want: (u64, u64, u64, u64)) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = counts(port);
    while got != want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        got = counts(port);
    }
    assert_eq!(got, want, "(active, reading, writing, waiting)");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn reading_writing_and_waiting_are_counted_and_return_to_zero() {
    let up = silent_upstream();
    let conf = CONF.replace("{upstream}", &up.to_string());
    let (_server, ports) = Server::start("stub-status", &conf, 2);
    let (plain, tls) = (ports[0], ports[1]);
    // Only the status request itself: one connection, writing.
    until(plain, (1, 0, 1, 0));

    // An idle connection (waiting), one sending half a head (reading), one whose request
    // waits on the upstream (writing), and an HTTP/2 stream that does the same (writing).
    let idle = TcpStream::connect(("127.0.0.1", plain)).unwrap();
    let mut half = TcpStream::connect(("127.0.0.1", plain)).unwrap();
    half.write_all(b"GET /up/h HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut busy = TcpStream::connect(("127.0.0.1", plain)).unwrap();
    busy.write_all(b"GET /up/a HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let h2 = Killed(
        Command::new("curl")
            .args(["-sk", "--http2", "--max-time", "30"])
            .arg(format!("https://127.0.0.1:{tls}/up/b"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("curl"),
    );
    until(plain, (5, 1, 3, 1));

    // The head completes and waits on the upstream too: reading becomes writing.
    half.write_all(b"\r\n").unwrap();
    until(plain, (5, 0, 4, 1));

    drop((idle, busy, half, h2));
    until(plain, (1, 0, 1, 0));
}
