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

/// `keepalive_time`: the first response after it closes the connection (`Connection: close`);
/// `$connection_time` counts from the accept.
#[test]
fn keepalive_time_closes_the_connection_after_its_time() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    keepalive_time 1s;
    server {
        listen 127.0.0.1:{port0};
        location / { return 200 "t=$connection_time\n"; }
    }
}
"#;
    let (_s, ports) = Server::start("keepalive-time", conf, 1);
    let mut sock = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut ask = || {
        sock.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("\nt=")
            || !got.ends_with(b"\n")
            || !String::from_utf8_lossy(&got).contains("\r\n\r\n")
        {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    let first = ask();
    assert!(
        !first.to_ascii_lowercase().contains("connection: close"),
        "{first}"
    );
    assert!(first.contains("t=0."), "{first}");
    std::thread::sleep(Duration::from_millis(1200));
    let second = ask();
    assert!(
        second.to_ascii_lowercase().contains("connection: close"),
        "{second}"
    );
    let t: f64 = second
        .rsplit("t=")
        .next()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{second}"));
    assert!(t >= 1.2, "{second}");
}
