//! Request bodies to `proxy_pass` as nginx handles them: `proxy_request_buffering on` (the
//! default) reads the body whole before the upstream is connected and sends it with its
//! `Content-Length`, again to the next server; `off` streams it; `$request_body` and
//! `$request_body_file`; `client_body_in_file_only`; `client_max_body_size` (413) in both
//! modes; `Expect: 100-continue`.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;

/// A request an upstream received: its head and its body (by its length, or chunked).
#[derive(Debug, Clone, Default)]
struct Got {
    head: String,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// Reads a request's body after its head: by Content-Length, or chunked.
fn read_body(r: &mut BufReader<TcpStream>, g: &Got) -> Option<Vec<u8>> {
    if let Some(n) = g.header("content-length") {
        let mut b = vec![0u8; n.parse().ok()?];
        r.read_exact(&mut b).ok()?;
        return Some(b);
    }
    let mut out = Vec::new();
    if g.header("transfer-encoding").is_some() {
        loop {
            let mut line = String::new();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                return Some(out);
            }
            out.extend_from_slice(&chunk[..size]);
        }
    }
    Some(out)
}

/// An upstream that records each request it reads whole and answers 200 `ok`.
fn recording() -> (u16, Arc<Mutex<Vec<Got>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let (port, _) = upstream(move |c| {
        let mut r = BufReader::new(c.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let mut g = Got {
            head,
            ..Got::default()
        };
        let Some(body) = read_body(&mut r, &g) else {
            return;
        };
        g.body = body;
        s.lock().expect("lock").push(g);
        let mut c = c;
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    });
    (port, seen)
}

fn start(tag: &str, up: u16, server: &str) -> (Server, u16) {
    start_with(tag, up, "", server)
}

fn start_with(tag: &str, up: u16, http: &str, server: &str) -> (Server, u16) {
    let template = format!(
        "pid {{dir}}/fb.pid;\nerror_log {{dir}}/error.log info;\nevents {{}}\nhttp {{\n \
         log_format body '$request_uri [$request_body]';\n \
         access_log {{dir}}/access.log body;\n \
         client_body_temp_path {{dir}}/body_temp;\n {http}\n \
         server {{ listen 127.0.0.1:{{port0}}; http2 on;\n \
         location /up/ {{ proxy_pass http://127.0.0.1:{up}/; }}\n {server}\n }}\n}}\n"
    );
    let (s, ports) = Server::start(tag, &template, 1);
    (s, ports[0])
}

/// One raw HTTP/1.1 exchange on a fresh connection (the server closes it).
fn raw(port: u16, req: &[u8]) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    c.write_all(req).expect("write");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn post(port: u16, path: &str, body: &[u8], extra: &str) -> String {
    send("POST", port, path, body, extra)
}

fn send(method: &str, port: u16, path: &str, body: &[u8], extra: &str) -> String {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(port, &req)
}

fn chunked(port: u16, path: &str, chunks: &[&[u8]]) -> String {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for c in chunks {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    raw(port, &req)
}

fn response_header(resp: &str, name: &str) -> Option<String> {
    let head = resp.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

#[test]
fn buffered_by_default_with_its_length_and_request_body_variables() {
    let (up, seen) = recording();
    let (s, port) = start(
        "reqbuf-on",
        up,
        &format!(
            "location /b/ {{ client_body_buffer_size 1k; add_header X-Body $request_body; \
             add_header X-Body-File $request_body_file; proxy_pass http://127.0.0.1:{up}/; }}\n \
             location /only/ {{ client_body_in_file_only on; add_header X-Body-File $request_body_file; \
             proxy_pass http://127.0.0.1:{up}/; }}"
        ),
    );
    // A chunked body goes to the upstream with its length, not chunked.
    let r = chunked(port, "/b/x", &[b"hello ", b"world"]);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(
        response_header(&r, "x-body").as_deref(),
        Some("hello world")
    );
    assert_eq!(response_header(&r, "x-body-file"), None, "in memory: {r}");
    {
        let g = seen.lock().expect("lock");
        let g = g.last().expect("a request");
        assert_eq!(
            g.header("content-length").as_deref(),
            Some("11"),
            "{}",
            g.head
        );
        assert_eq!(g.header("transfer-encoding"), None, "{}", g.head);
        assert_eq!(g.body, b"hello world");
    }
    // Past client_body_buffer_size: a temp file, named while the request lives, removed
    // after it; $request_body is empty.
    let big = vec![b'x'; 5000];
    let r = post(port, "/b/big", &big, "");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(response_header(&r, "x-body"), None, "{r}");
    let file = response_header(&r, "x-body-file").expect("a body file");
    assert!(
        file.starts_with(&s.dir.join("body_temp").display().to_string()),
        "{file}"
    );
    assert_eq!(seen.lock().expect("lock").last().expect("req").body, big);
    assert!(
        wait_until(|| !std::path::Path::new(&file).exists()),
        "the temp file is removed after the request"
    );
    // client_body_in_file_only on: the file stays, whole.
    let r = post(port, "/only/x", b"0123456789", "");
    let kept = response_header(&r, "x-body-file").expect("a body file");
    assert_eq!(std::fs::read(&kept).expect("kept file"), b"0123456789");
    assert_eq!(
        seen.lock().expect("lock").last().expect("req").body,
        b"0123456789"
    );
    // $request_body in the access log.
    let r = post(port, "/up/logged", b"a=1&b=2", "");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(
        wait_until(|| std::fs::read_to_string(s.dir.join("access.log"))
            .unwrap_or_default()
            .contains("/up/logged [a=1&b=2]")),
        "{}",
        std::fs::read_to_string(s.dir.join("access.log")).unwrap_or_default()
    );
}

fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

#[test]
fn streamed_with_off_and_request_body_while_it_fits() {
    let (up, seen) = recording();
    let (_s, port) = start(
        "reqbuf-off",
        up,
        &format!(
            "location /s/ {{ proxy_request_buffering off; proxy_http_version 1.1; \
             client_body_buffer_size 1k; add_header X-Body $request_body; \
             proxy_pass http://127.0.0.1:{up}/; }}"
        ),
    );
    // Chunked in, chunked out: nothing waits for the body's end.
    let r = chunked(port, "/s/x", &[b"hello ", b"world"]);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(
        response_header(&r, "x-body").as_deref(),
        Some("hello world")
    );
    {
        let g = seen.lock().expect("lock");
        let g = g.last().expect("a request");
        assert_eq!(
            g.header("transfer-encoding").as_deref(),
            Some("chunked"),
            "{}",
            g.head
        );
        assert_eq!(g.header("content-length"), None, "{}", g.head);
        assert_eq!(g.body, b"hello world");
    }
    // Larger than client_body_buffer_size: passed whole, but no $request_body.
    let big = vec![b'y'; 3000];
    let r = post(port, "/s/big", &big, "");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(response_header(&r, "x-body"), None, "{r}");
    assert_eq!(seen.lock().expect("lock").last().expect("req").body, big);
}

#[test]
fn streamed_body_reaches_the_upstream_before_it_ends() {
    // With off, the upstream has the head and the first bytes while the client still
    // holds the rest; with on (below) it has nothing.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let (up, accepted) = upstream(move |c| {
        let mut r = BufReader::new(c);
        let head = read_head(&mut r).unwrap_or_default();
        let mut first = [0u8; 5];
        let _ = r.read_exact(&mut first);
        let _ = tx
            .lock()
            .expect("lock")
            .send(format!("{head}{}", String::from_utf8_lossy(&first)));
    });
    let (_s, port) = start(
        "reqbuf-stream",
        up,
        &format!(
            "location /s/ {{ proxy_request_buffering off; proxy_pass http://127.0.0.1:{up}/; }}\n \
             location /b/ {{ client_body_timeout 60s; proxy_pass http://127.0.0.1:{up}/; }}"
        ),
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.write_all(b"POST /s/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n01234")
        .expect("write");
    let got = rx.recv_timeout(Duration::from_secs(20)).expect("streamed");
    assert!(got.starts_with("POST /x HTTP/1.0"), "{got}");
    assert!(got.ends_with("01234"), "{got}");
    drop(c);
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(before, 1);
    // Buffered: a client that stops mid-body holds no upstream connection. A second,
    // whole request then goes through: the only connection the upstream sees is its.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stalled
        .write_all(
            b"POST /b/stalled HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n01234",
        )
        .expect("write");
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.write_all(b"POST /b/whole HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n56789")
        .expect("write");
    let got = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("whole request");
    assert!(got.starts_with("POST /whole "), "{got}");
    assert!(got.ends_with("56789"), "{got}");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        before + 1,
        "the stalled request made no upstream connection"
    );
    assert!(rx.try_recv().is_err());
    drop(stalled);
}

#[test]
fn next_upstream_gets_the_body_again() {
    // The first server closes without an answer; a buffered body goes again to the second
    // (PUT: a POST once sent is retried only with `non_idempotent`, as nginx).
    let (dead, _) = upstream(drop);
    let (up, seen) = recording();
    let (_s, port) = start_with(
        "reqbuf-next",
        up,
        &format!("upstream group {{ server 127.0.0.1:{dead}; server 127.0.0.1:{up}; }}"),
        "location /n/ { proxy_pass http://group/; }",
    );
    let r = send("PUT", port, "/n/x", b"again", "");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let g = seen.lock().expect("lock");
    assert_eq!(g.last().expect("a request").body, b"again");
}

#[test]
fn too_large_is_413_in_both_modes() {
    let (up, _seen) = recording();
    let (buffered_up, buffered_accepted) = upstream(|_| {});
    let (_s, port) = start(
        "reqbuf-413",
        up,
        &format!(
            "client_max_body_size 100;\n \
             location /on/ {{ proxy_pass http://127.0.0.1:{buffered_up}/; }}\n \
             location /off/ {{ proxy_request_buffering off; proxy_http_version 1.1; \
             proxy_pass http://127.0.0.1:{up}/; }}"
        ),
    );
    let part = vec![b'z'; 60];
    for path in ["/on/x", "/off/x"] {
        let r = post(port, path, &[b'z'; 200], "");
        assert!(r.starts_with("HTTP/1.1 413"), "{path}: {r}");
        // Chunked: the limit is on the bytes as they arrive.
        let r = chunked(port, path, &[&part, &part]);
        assert!(r.starts_with("HTTP/1.1 413"), "{path} chunked: {r}");
    }
    // Buffered: the upstream was never connected for a refused body.
    assert_eq!(
        buffered_accepted.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[test]
fn expect_100_continue_for_an_empty_body() {
    let (up, _seen) = recording();
    let (_s, port) = start("reqbuf-expect", up, "");
    let r = post(port, "/up/x", b"", "Expect: 100-Continue\r\n");
    assert!(
        r.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"),
        "{r}"
    );
    let r = raw(
        port,
        b"POST /up/x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
    );
    // nginx's status line is HTTP/1.1 for an HTTP/1.0 request too; no interim answer.
    assert!(r.starts_with("HTTP/1.1 200"), "none for HTTP/1.0: {r}");
}
