//! Connection timers, nginx's meaning: `client_header_timeout` bounds the wait for the first
//! request, `keepalive_timeout` the idle time between requests. Bounds are wide (seconds
//! against hundreds of milliseconds of slack) so they never flake.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    client_header_timeout 1s;
    keepalive_timeout 3s;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
    }
}
"#;

fn request(s: &mut TcpStream) -> std::io::Result<String> {
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf)?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Waits until the server closes `s`; returns how long that took.
fn time_to_close(s: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => Some(start.elapsed()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(start.elapsed()),
        _ => None,
    }
}

#[test]
fn header_and_keepalive_timeouts() {
    let (_server, ports) = Server::start("timeouts", CONF, 1);
    let port = ports[0];

    // No request at all: closed after client_header_timeout (1 s), not keepalive_timeout (3 s).
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let t = time_to_close(&mut silent, Duration::from_secs(6)).expect("silent connection closed");
    assert!(
        t >= Duration::from_millis(800) && t < Duration::from_millis(2500),
        "{t:?}"
    );

    // After a request: still open after 2 s idle (more than client_header_timeout)...
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert!(request(&mut s).unwrap().starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        request(&mut s).unwrap().starts_with("HTTP/1.1 200"),
        "keep-alive cut early"
    );
    // ...and closed once keepalive_timeout (3 s) has passed since the last response.
    let t = time_to_close(&mut s, Duration::from_secs(8)).expect("idle connection closed");
    assert!(
        t >= Duration::from_millis(2500) && t < Duration::from_millis(4500),
        "{t:?}"
    );
}
