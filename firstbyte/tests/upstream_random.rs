//! `zone` and `random [two [least_conn]]` in `upstream {}`, and `$request_port` /
//! `$is_request_port`, end to end.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::*;

/// An upstream answering 200 with `name` as the body (after 2 s when the path is `/slow`);
/// the port and its request count.
fn named(name: &'static str) -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        h.fetch_add(1, Ordering::SeqCst);
        if head.starts_with("GET /slow") {
            std::thread::sleep(Duration::from_millis(2000));
        }
        let mut w = s;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
            name.len()
        );
    });
    (port, hits)
}

/// An upstream that reads a request and closes without answering (an error for the proxy);
/// the port and its request count.
fn closer() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_some() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, hits)
}

fn front(http: &str, location: &str) -> (Server, u16) {
    let dir = tempdir("upstream-random");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {http}\n server {{ listen 127.0.0.1:{port};\n location / {{ {location} }}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

fn ask(port: u16, req: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (status, _, body) = parse_response(&buf);
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn get(port: u16, path: &str) -> (u16, String) {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

/// `firstbyte -t` on `http` inside `http {}`, line 2 of `t.conf`: (ok, stderr, file).
fn check(http: &str) -> (bool, String, String) {
    let dir = tempdir("upstream-zone-conf");
    let file = dir.join("t.conf");
    std::fs::write(
        &file,
        format!("events {{}}\nhttp {{ {http}\n server {{ listen 127.0.0.1:1; }} }}\n"),
    )
    .expect("write");
    let out = firstbyte(&["-t", "-c", &file.display().to_string()]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        file.display().to_string(),
    )
}

#[test]
fn zone_is_accepted_with_nginx_checks() {
    // One zone shared by two groups, the size given once (nginx's upstream_zone.t).
    let (ok, err, _) = check(
        "upstream u { zone z 1m; server 127.0.0.1:1; }\n upstream v { zone z; random; server 127.0.0.1:2; }",
    );
    assert!(ok, "{err}");
    for (conf, want) in [
        ("upstream u { zone z 16k; server 127.0.0.1:1; }", "zone \"z\" is too small"),
        ("upstream u { zone z 1q; server 127.0.0.1:1; }", "invalid zone size \"1q\""),
        ("upstream u { zone z 1m 2m; server 127.0.0.1:1; }", "invalid number of arguments in \"zone\" directive"),
        (
            "upstream u { zone z 1m; server 127.0.0.1:1; } upstream v { zone z 2m; server 127.0.0.1:1; }",
            "the size 2097152 of shared memory zone \"z\" conflicts with already declared size 1048576",
        ),
        ("upstream u { zone z; server 127.0.0.1:1; }", "zero size shared memory zone \"z\""),
        (
            "limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s; upstream u { zone z 1m; server 127.0.0.1:1; }",
            "the shared memory zone \"z\" is already declared for a different use",
        ),
        ("zone z 1m;", "\"zone\" directive is not allowed here"),
    ] {
        let (ok, err, file) = check(conf);
        assert!(!ok, "{conf} loaded");
        assert!(err.contains(&format!("{want} in {file}:2")), "{conf}: {err}");
    }
}

#[test]
fn random_arguments_as_nginx() {
    for (conf, want) in [
        (
            "upstream u { random three; server 127.0.0.1:1; }",
            "invalid parameter \"three\"",
        ),
        (
            "upstream u { random two most_conn; server 127.0.0.1:1; }",
            "invalid parameter \"most_conn\"",
        ),
        (
            "upstream u { random two least_conn x; server 127.0.0.1:1; }",
            "invalid number of arguments in \"random\" directive",
        ),
        (
            "upstream u { random; server 127.0.0.1:1; server 127.0.0.1:2 backup; }",
            "invalid parameter \"backup\" of server \"127.0.0.1:2\"",
        ),
    ] {
        let (ok, err, file) = check(conf);
        assert!(!ok, "{conf} loaded");
        assert!(
            err.contains(&format!("{want} in {file}:2")),
            "{conf}: {err}"
        );
    }
    let (ok, err, _) = check("upstream u { random two least_conn; server 127.0.0.1:1; }");
    assert!(ok, "{err}");
}

#[test]
fn v_reports_the_zone_and_random_modules() {
    let out = firstbyte(&["-V"]);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("configure arguments:"), "{text}");
    // nginx's harness: present unless `--without-...` appears anywhere.
    assert!(
        !text.contains("--without-http_upstream_zone_module"),
        "{text}"
    );
    assert!(
        !text.contains("--without-http_upstream_random_module"),
        "{text}"
    );
}

#[test]
fn random_spreads_by_weight_and_skips_down_and_failed_servers() {
    let (a, _) = named("a");
    let (b, _) = named("b");
    let (c, c_hits) = named("c");
    let (_s, port) = front(
        &format!(
            "upstream u {{ zone u 64k; random; server 127.0.0.1:{a} weight=3; server 127.0.0.1:{b}; server 127.0.0.1:{c} down; }}"
        ),
        "proxy_pass http://u;",
    );
    let mut counts = [0usize; 2];
    for _ in 0..80 {
        let (status, body) = get(port, "/");
        assert_eq!(status, 200);
        match body.as_str() {
            "a" => counts[0] += 1,
            "b" => counts[1] += 1,
            other => panic!("answered by {other:?}"),
        }
    }
    assert_eq!(
        c_hits.load(Ordering::SeqCst),
        0,
        "a down server is never used"
    );
    // Expected 60:20; a fair draw is outside these bounds with a probability below 1e-6.
    assert!(counts[1] > 0 && counts[0] > counts[1], "{counts:?}");

    // A server that fails is retried elsewhere and then rests for fail_timeout.
    let (d, d_hits) = closer();
    let (e, _) = named("e");
    let (_s2, port2) = front(
        &format!("upstream u {{ random two; server 127.0.0.1:{d}; server 127.0.0.1:{e}; }}"),
        "proxy_pass http://u;",
    );
    for _ in 0..10 {
        assert_eq!(get(port2, "/"), (200, "e".to_string()));
    }
    assert!(
        d_hits.load(Ordering::SeqCst) <= 1,
        "the failed server rests"
    );
}

#[test]
fn random_two_least_conn_prefers_the_idle_server() {
    let (a, a_hits) = named("a");
    let (b, b_hits) = named("b");
    let (_s, port) = front(
        &format!(
            "upstream u {{ random two least_conn; server 127.0.0.1:{a}; server 127.0.0.1:{b}; }}"
        ),
        "proxy_pass http://u;",
    );
    let slow = std::thread::spawn(move || get(port, "/slow"));
    for _ in 0..200 {
        if a_hits.load(Ordering::SeqCst) + b_hits.load(Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let busy = if a_hits.load(Ordering::SeqCst) == 1 {
        "a"
    } else {
        "b"
    };
    for _ in 0..6 {
        let (status, body) = get(port, "/");
        assert_eq!(status, 200);
        assert_ne!(
            body, busy,
            "a request went to the server holding a connection"
        );
    }
    let (status, body) = slow.join().expect("slow");
    assert_eq!((status, body.as_str()), (200, busy));
}

#[test]
fn request_port_is_the_port_of_the_host_that_chose_the_server() {
    let (_s, port) = front("", "return 200 \"[$is_request_port$request_port]\";");
    let cases = [
        ("GET / HTTP/1.0\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:8080\r\n\r\n", "[:8080]"),
        ("GET / HTTP/1.0\r\nHost: [::1]:9\r\n\r\n", "[:9]"),
        ("GET / HTTP/1.0\r\nHost: [::1]\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:0\r\n\r\n", "[]"),
        // The request line's host comes first, as nginx.
        (
            "GET http://localhost:8081/ HTTP/1.0\r\nHost: localhost:9000\r\n\r\n",
            "[:8081]",
        ),
        (
            "GET http://localhost/ HTTP/1.1\r\nHost: localhost:9000\r\nConnection: close\r\n\r\n",
            "[]",
        ),
    ];
    for (req, want) in cases {
        assert_eq!(ask(port, req), (200, want.to_string()), "{req:?}");
    }
}
