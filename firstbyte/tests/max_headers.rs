//! `max_headers`: the most header lines one request may have, as nginx 1.29.3 counts them.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

fn start(server: &str) -> (Server, u16) {
    let dir = tempdir("max-headers");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), "hello").unwrap();
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port};\n root {d}/html;\n {server}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// A request with `lines` after the Host line: the raw answer.
fn ask(port: u16, lines: &[String]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let mut req = String::from("GET / HTTP/1.1\r\nHost: localhost\r\n");
    for l in lines {
        req.push_str(l);
        req.push_str("\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn blah(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("X-Blah: {i}")).collect()
}

#[test]
fn more_header_lines_than_max_headers_are_refused() {
    let (s, port) = start("max_headers 5;");
    // Host, three X-Blah and Connection: five lines.
    let r = ask(port, &blah(3));
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.ends_with("hello"), "{r}");
    // Six: nginx's 494, answered 400 with its page, and the connection closes.
    let r = ask(port, &blah(4));
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(r.contains("Request Header Or Cookie Too Large"), "{r}");
    assert!(r.contains("Connection: close"), "{r}");
    let log = std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("client sent too many header lines"), "{log}");
    // Invalid lines that `ignore_invalid_headers` drops do not count.
    let mut lines = blah(3);
    lines.push("X~Bad: 1".into());
    lines.push("X.Bad: 2".into());
    let r = ask(port, &lines);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[test]
fn a_flood_of_header_lines_is_refused_by_default() {
    // nginx's default is 1000; HTTP/1.x heads past 100 lines are refused first, by the
    // HTTP/1 parser (431): stricter, never served.
    let (_s, port) = start("");
    let r = ask(port, &blah(90));
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    for n in [200, 1500] {
        let r = ask(port, &blah(n));
        assert!(
            r.starts_with("HTTP/1.1 431") || r.starts_with("HTTP/1.1 400"),
            "{n}: {r}"
        );
    }
}

#[test]
fn http2_counts_no_cookie_field() {
    let (_s, port) = start("http2 on; max_headers 3;");
    let url = format!("http://127.0.0.1:{port}/");
    let get = |extra: &[&str]| {
        let mut a = vec![
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ];
        for h in extra {
            a.push("-H");
            a.push(h);
        }
        a.push(&url);
        String::from_utf8_lossy(&curl(&a).stdout).into_owned()
    };
    // curl sends user-agent and accept: with one more, three fields.
    assert_eq!(get(&["X-A: 1"]), "200");
    assert_eq!(get(&["X-A: 1", "X-B: 2"]), "400");
    // Cookies do not count in HTTP/2 (nginx joins them apart from the header list).
    assert_eq!(
        get(&["X-A: 1", "Cookie: a=1", "Cookie: b=2", "Cookie: c=3"]),
        "200"
    );
}
