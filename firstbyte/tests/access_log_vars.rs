//! `access_log` paths with variables (a file per request, `open_log_file_cache`), and the
//! log variables `$binary_remote_addr` and `$pipe`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// Sends `raw` on a new connection and reads until the server closes it.
fn exchange(port: u16, raw: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(port: u16, target: &str) -> String {
    exchange(
        port,
        &format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

/// The file's text once it has `lines` lines (5 s at most; lines are written as each
/// response ends, just after the client may have read it).
fn wait_lines(f: &Path, lines: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        if text.lines().count() >= lines || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `f` holds `needle` (5 s at most) and returns its text.
fn wait_for(f: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A path with variables names a file per request; a value that would climb out of the
/// directory (`..`) is refused even where the path would resolve; a location whose root
/// does not exist writes nothing (nginx tests the root first); `$binary_remote_addr` is
/// the address's 4 bytes, escaped.
#[test]
fn variable_path_writes_a_file_per_request_and_refuses_dot_dot() {
    // `user root`: the files are opened per request by the serving user (nginx's workers);
    // this directory is root's when the tests run as root.
    let conf = r#"
user root;
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format t '$uri:$arg_name';
    log_format binary $binary_remote_addr;
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir};
        location /v { access_log {dir}/logs/v_$arg_name t; return 200 "v"; }
        location /noroot { root {dir}/missing; access_log {dir}/logs/nr_$arg_name t; return 200 "n"; }
        location /bin { access_log {dir}/bin.log binary; return 200 "b"; }
    }
}
"#;
    let dir = tempdir("access-log-vars");
    // `logs/v_/` exists, so `v_/../../escaped` would resolve to `{dir}/escaped`.
    std::fs::create_dir_all(dir.join("logs/v_")).unwrap();
    let port = free_port();
    let _s = Server::start_in(&dir, &render(conf, &dir, &[port]), port);
    for q in [
        "/v?name=a",
        "/v?name=b",
        "/v?name=a",
        "/v?name=/../../escaped",
        "/v?name=/..",
        "/noroot?name=x",
        "/bin",
    ] {
        let r = get(port, q);
        assert!(r.starts_with("HTTP/1.1 200"), "{q}: {r}");
    }
    assert_eq!(
        wait_lines(&dir.join("logs/v_a"), 2),
        "/v:a\n/v:a\n",
        "one file per value"
    );
    assert_eq!(wait_lines(&dir.join("logs/v_b"), 1), "/v:b\n");
    assert_eq!(
        wait_lines(&dir.join("bin.log"), 1),
        "\\x7F\\x00\\x00\\x01\n"
    );
    let err = wait_for(&dir.join("error.log"), "existence failed");
    assert!(
        err.contains(&format!(
            "testing \"{}/missing\" existence failed (2: No such file or directory)",
            dir.display()
        )),
        "{err}"
    );
    assert!(err.contains("/logs/v_/../../escaped\" refused"), "{err}");
    assert!(!dir.join("escaped").exists(), "`..` left the directory");
    assert!(!dir.join("logs/nr_x").exists(), "written without a root");
    // Nothing but the files above was made.
    let mut made: Vec<String> = std::fs::read_dir(dir.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made, ["v_", "v_a", "v_b"]);
    assert_eq!(std::fs::read_dir(dir.join("logs/v_")).unwrap().count(), 0);
}

/// `open_log_file_cache max=3 min_uses=2`: a path used twice keeps its file open (written
/// after its directory moved away), one used once does not, and a fourth path closes the
/// least recently used (access_log.t's sequence).
#[test]
fn open_log_file_cache_keeps_files_used_min_uses_times() {
    // `user root`: the files are opened per request by the serving user (nginx's workers);
    // this directory is root's when the tests run as root.
    let conf = r#"
user root;
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format t '$uri';
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir};
        location /cache {
            open_log_file_cache max=3 inactive=20s valid=1m min_uses=2;
            access_log {dir}/d/c_$arg_n t;
            return 200 "c";
        }
    }
}
"#;
    let dir = tempdir("access-log-cache");
    std::fs::create_dir_all(dir.join("d")).unwrap();
    let port = free_port();
    let _s = Server::start_in(&dir, &render(conf, &dir, &[port]), port);
    let n = |name: &str| {
        let r = get(port, &format!("/cache?n={name}"));
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    };
    for name in ["lru", "lru", "once", "first", "first", "second", "second"] {
        n(name);
    }
    // Each line is written before the next request is read (HTTP/1.1, one connection each,
    // the line written as the response ends): wait for the last.
    wait_lines(&dir.join("d/c_second"), 2);
    std::fs::rename(dir.join("d"), dir.join("moved")).unwrap();
    for name in ["lru", "once", "first", "second"] {
        n(name);
    }
    let err = wait_for(&dir.join("error.log"), "c_once\" failed");
    std::fs::rename(dir.join("moved"), dir.join("d")).unwrap();
    let count = |name: &str| {
        std::fs::read_to_string(dir.join("d").join(name))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!(wait_lines(&dir.join("d/c_first"), 3).lines().count(), 3);
    assert_eq!(wait_lines(&dir.join("d/c_second"), 3).lines().count(), 3);
    assert_eq!(count("c_lru"), 2, "closed as least recently used");
    assert_eq!(count("c_once"), 1, "not kept below min_uses");
    assert!(
        err.contains("[crit]") && err.contains("c_lru\" failed"),
        "{err}"
    );
}

/// `$pipe`: `p` for a request whose head arrived with the previous one's, `.` otherwise
/// (the first request, and one sent after the previous response was read).
#[test]
fn pipe_marks_pipelined_requests() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format pipe '$uri $pipe';
    access_log {dir}/pipe.log pipe;
    server {
        listen 127.0.0.1:{port0};
        location / { return 200 "ok"; }
    }
}
"#;
    let (s, p) = Server::start("access-log-pipe", conf, 1);
    let r = exchange(
        p[0],
        "GET /1 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /2 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /3 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.matches("HTTP/1.1 200").count(), 3, "{r}");
    assert_eq!(wait_lines(&s.dir.join("pipe.log"), 3), "/1 .\n/2 p\n/3 p\n");
    // One request at a time on a keep-alive connection: none pipelined.
    let mut c = TcpStream::connect(("127.0.0.1", p[0])).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (i, last) in [("4", false), ("5", true)] {
        let close = if last { "Connection: close\r\n" } else { "" };
        c.write_all(format!("GET /{i} HTTP/1.1\r\nHost: localhost\r\n{close}\r\n").as_bytes())
            .unwrap();
        // Read the whole response (Content-Length: 2) before the next request.
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&got).ends_with("\r\n\r\nok") {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
    }
    assert_eq!(
        wait_lines(&s.dir.join("pipe.log"), 5),
        "/1 .\n/2 p\n/3 p\n/4 .\n/5 .\n"
    );
}

/// A path with variables cannot be buffered (nginx's message).
#[test]
fn buffered_variable_path_is_refused() {
    let dir = tempdir("access-log-vars-buf");
    let conf = format!(
        "pid off;\nevents {{}}\nhttp {{ server {{ listen 127.0.0.1:1; access_log {}/l_$host combined buffer=4k; }} }}\n",
        dir.display()
    );
    std::fs::write(dir.join("f.conf"), conf).unwrap();
    let out = firstbyte(&["-t", "-c", &dir.join("f.conf").display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("buffered logs cannot have variables in name"),
        "{err}"
    );
}

/// `$bytes_sent` on HTTP/1.x: the bytes the client read, head included (a `return`, a
/// static file, a 404 page; HTTP/1.0 and 1.1; kept alive or closed).
#[test]
fn bytes_sent_counts_the_http1_head() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format b '$uri $bytes_sent $body_bytes_sent';
    access_log {dir}/b.log b;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location /r { return 200 OK; }
    }
}
"#;
    let (s, p) = Server::start("access-log-bytes", conf, 1);
    let one = [
        "GET /r HTTP/1.0\nHost: localhost\n\n",
        "GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "HEAD /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET /missing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    ];
    let mut want = String::new();
    for raw in one {
        let got = exchange(p[0], raw);
        let path = raw.split(' ').nth(1).unwrap();
        let body = got.split_once("\r\n\r\n").map_or(0, |(_, b)| b.len());
        want.push_str(&format!("{path} {} {body}\n", got.len()));
    }
    // Two on one connection, the first kept alive: the sum is what the client read.
    let got = exchange(
        p[0],
        "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\nGET /r HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let log = wait_lines(&s.dir.join("b.log"), one.len() + 2);
    assert!(log.starts_with(&want), "{log}\nwant:\n{want}");
    let sum: usize = log
        .lines()
        .skip(one.len())
        .map(|l| l.split(' ').nth(1).unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(sum, got.len(), "{log}");
}

/// `$request_length` of an HTTP/1.x head is the bytes received: a head with bare-LF line
/// ends or no space after a colon counts as sent, as nginx; pipelined heads and heads with
/// a body count as written again (CRLF, `NAME: VALUE`), as before.
#[test]
fn request_length_counts_the_head_as_received() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        location / { return 200 "$request_length\n"; }
    }
}
"#;
    let (_s, p) = Server::start("request-length", conf, 1);
    let body = |r: &str| {
        r.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap()
    };
    for raw in [
        "GET /a HTTP/1.0\nHost: localhost\n\n",
        "GET /a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost:localhost\nConnection: close\r\n\n",
    ] {
        assert_eq!(
            body(&exchange(p[0], raw)),
            format!("{}\n", raw.len()),
            "{raw:?}"
        );
    }
    // Two heads in one write: each as written again (CRLF; 36 and 55 bytes).
    let two = exchange(
        p[0],
        "GET /a HTTP/1.1\nHost: localhost\n\nGET /b HTTP/1.1\nHost: localhost\nConnection: close\n\n",
    );
    assert!(
        two.contains("\r\n\r\n36\n") && two.ends_with("\r\n\r\n55\n"),
        "{two}"
    );
}
