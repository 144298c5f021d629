//! What firstbyte does to a proxied response on its way to the client, as nginx's filters do:
//! `postpone_output` (small pieces joined), `proxy_force_ranges` (byte ranges without the
//! upstream's `Accept-Ranges`), `proxy_pass_header Date`/`Server` with an upstream that sends
//! neither, and an upstream's `X-Accel-Charset`.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

/// An upstream that answers every request on a connection with `answer` (then closes);
/// `answer` is written in one `write`.
fn canned(answer: &'static str) -> u16 {
    upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if read_head(&mut r).is_some() {
            let _ = w.write_all(answer.as_bytes());
        }
    })
    .0
}

/// An upstream that answers with the request head it got as the body.
fn mirror() -> u16 {
    upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if let Some(head) = read_head(&mut r) {
            let a = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                head.len()
            );
            let _ = w.write_all(a.as_bytes());
        }
    })
    .0
}

fn front(http: &str, server: &str) -> (Server, u16) {
    let dir = tempdir("proxy-filters");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n proxy_cache_path {d}/cache keys_zone=z:1m;\n {http}\n server {{ listen 127.0.0.1:{port};\n {server}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// Sends a raw request; the whole raw answer.
fn raw(port: u16, req: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}

/// GET `path` with `extra` header lines: (status, headers, body).
fn get(port: u16, path: &str, extra: &str) -> (u16, Vec<(String, String)>, String) {
    let buf = raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n"),
    );
    let (status, headers, body) = parse_response(&buf);
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn error_log(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default()
}

/// The sizes of the chunks of a chunked body, and the body they make.
fn chunks(body: &str) -> (Vec<usize>, String) {
    let (mut sizes, mut data) = (Vec::new(), String::new());
    let mut rest = body;
    loop {
        let (line, after) = rest.split_once("\r\n").expect("chunk size line");
        let n = usize::from_str_radix(line.trim(), 16).expect("chunk size");
        if n == 0 {
            return (sizes, data);
        }
        sizes.push(n);
        data.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
}

/// 40 chunks of 10 bytes, in one write: the proxy reads them together.
const SMALL_CHUNKS: &str =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
a\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\na\r\n0123456789\r\n\
0\r\n\r\n";

#[test]
fn postpone_output_joins_the_small_pieces_that_are_ready() {
    let up = canned(SMALL_CHUNKS);
    let (_s, port) = front(
        "",
        &format!(
            "location /joined {{ proxy_pass http://127.0.0.1:{up}/; proxy_buffering on; postpone_output 100; }}
             location /unbuffered {{ proxy_pass http://127.0.0.1:{up}/; postpone_output 100; }}
             location /each {{ proxy_pass http://127.0.0.1:{up}/; postpone_output 0; }}"
        ),
    );
    let whole = "0123456789".repeat(40);
    // `postpone_output 0`: each of the upstream's pieces is a write (a chunk) of its own.
    let (status, h, body) = get(port, "/each", "");
    assert_eq!(status, 200);
    assert_eq!(header(&h, "transfer-encoding"), Some("chunked"));
    let (sizes, data) = chunks(&body);
    assert_eq!(data, whole);
    assert_eq!(sizes, vec![10; 40]);
    // 100: pieces joined (they come through the upstream connection's task one by one, and
    // wait up to 1 ms for the next: on a loaded machine some may go alone, never all of
    // them); every byte there, the last piece included.
    let (status, _, body) = get(port, "/joined", "");
    assert_eq!(status, 200);
    let (sizes, data) = chunks(&body);
    assert_eq!(data, whole);
    assert!(sizes.len() < 40, "{sizes:?}");
    assert!(sizes.iter().any(|&n| n >= 100), "{sizes:?}");
    // Unbuffered (`proxy_buffering off`, the default): each read goes as it comes, as nginx
    // flushes it.
    let (status, _, body) = get(port, "/unbuffered", "");
    assert_eq!(status, 200);
    let (sizes, data) = chunks(&body);
    assert_eq!(data, whole);
    assert_eq!(sizes, vec![10; 40]);
}

#[test]
fn postpone_output_is_checked_as_a_size() {
    let dir = tempdir("proxy-filters-conf");
    let conf = dir.join("bad.conf");
    std::fs::write(
        &conf,
        "events {}\nhttp { server { listen 127.0.0.1:1; postpone_output lots; } }\n",
    )
    .unwrap();
    let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("[emerg]") && err.contains("postpone_output"),
        "{err}"
    );
    assert!(err.contains("bad.conf:2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

const EIGHT: &str = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Type: text/plain\r\n\
ETag: \"e1\"\r\nLast-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nAccept-Ranges: none\r\n\
Connection: close\r\n\r\nSEE-THIS";

#[test]
fn proxy_force_ranges_serves_ranges_of_a_proxied_response() {
    let up = canned(EIGHT);
    let (_s, port) = front(
        "",
        &format!(
            "location /on/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_force_ranges on; }}
             location /off/ {{ proxy_pass http://127.0.0.1:{up}/; }}
             location /none/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_force_ranges on; max_ranges 0; }}"
        ),
    );
    let (status, h, body) = get(port, "/on/t", "Range: bytes=4-\r\n");
    assert_eq!(status, 206);
    assert_eq!(body, "THIS");
    assert_eq!(header(&h, "content-range"), Some("bytes 4-7/8"));
    assert_eq!(header(&h, "content-length"), Some("4"));
    let (status, _, body) = get(port, "/on/t", "Range: bytes=-2\r\n");
    assert_eq!((status, body.as_str()), (206, "IS"));
    // If-Range: the same tag or date, the part; another, the whole.
    let (status, _, body) = get(port, "/on/t", "Range: bytes=0-2\r\nIf-Range: \"e1\"\r\n");
    assert_eq!((status, body.as_str()), (206, "SEE"));
    let lm = "If-Range: Mon, 28 Sep 1970 06:00:00 GMT\r\n";
    let (status, _, body) = get(port, "/on/t", &format!("Range: bytes=0-2\r\n{lm}"));
    assert_eq!((status, body.as_str()), (206, "SEE"));
    let (status, h, body) = get(port, "/on/t", "Range: bytes=0-2\r\nIf-Range: \"e2\"\r\n");
    assert_eq!((status, body.as_str()), (200, "SEE-THIS"));
    // The upstream's own `Accept-Ranges` is replaced.
    assert_eq!(header(&h, "accept-ranges"), Some("bytes"));
    // Several ranges of an upstream's answer: the whole (nginx's single range).
    let (status, _, body) = get(port, "/on/t", "Range: bytes=0-0,2-3\r\n");
    assert_eq!((status, body.as_str()), (200, "SEE-THIS"));
    let (status, h, _) = get(port, "/on/t", "Range: bytes=100-\r\n");
    assert_eq!(status, 416);
    assert_eq!(header(&h, "content-range"), Some("bytes */8"));
    // Off (the default), or `max_ranges 0`: the upstream's answer as it is.
    let (status, h, body) = get(port, "/off/t", "Range: bytes=4-\r\n");
    assert_eq!((status, body.as_str()), (200, "SEE-THIS"));
    assert_eq!(header(&h, "accept-ranges"), Some("none"));
    let (status, h, body) = get(port, "/none/t", "Range: bytes=4-\r\n");
    assert_eq!((status, body.as_str()), (200, "SEE-THIS"));
    assert_eq!(header(&h, "accept-ranges"), None);
}

#[test]
fn passed_date_and_server_absent_upstream_leave_none() {
    let bare = canned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    let dated = canned(
        "HTTP/1.1 200 OK\r\nDate: passed\r\nServer: passed\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    );
    let (_s, port) = front(
        "",
        &format!(
            "location /bare/ {{ proxy_pass http://127.0.0.1:{bare}/; proxy_pass_header Date; proxy_pass_header Server; }}
             location /dated/ {{ proxy_pass http://127.0.0.1:{dated}/; proxy_pass_header Date; proxy_pass_header Server; }}
             location /own/ {{ proxy_pass http://127.0.0.1:{bare}/; }}
             location /hidden/ {{ proxy_pass http://127.0.0.1:{dated}/; }}"
        ),
    );
    let (status, h, body) = get(port, "/bare/", "");
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert_eq!(header(&h, "date"), None, "{h:?}");
    assert_eq!(header(&h, "server"), None, "{h:?}");
    let (_, h, _) = get(port, "/dated/", "");
    assert_eq!(header(&h, "date"), Some("passed"));
    assert_eq!(header(&h, "server"), Some("passed"));
    // Not passed: firstbyte's own, whatever the upstream sent.
    for path in ["/own/", "/hidden/"] {
        let (_, h, _) = get(port, path, "");
        assert_eq!(header(&h, "server"), Some("firstbyte"), "{path}");
        let date = header(&h, "date").unwrap_or("");
        assert!(date.ends_with(" GMT"), "{path}: {date}");
    }
}

const ACCEL: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=B\r\n\
X-Accel-Charset: A\r\nContent-Length: 10\r\nConnection: close\r\n\r\nX000XXXXXX";

#[test]
fn an_upstreams_x_accel_charset_recodes_the_response() {
    let up = canned(ACCEL);
    let (s, port) = front(
        "charset_map B A { 58 59; }",
        &format!(
            "location /to/ {{ proxy_pass http://127.0.0.1:{up}/; }}
             location /ignored/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_ignore_headers X-Accel-Charset; }}
             location /passed/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_pass_header X-Accel-Charset; }}
             location /cached/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_cache z; proxy_cache_valid 200 1m; }}"
        ),
    );
    let (status, h, body) = get(port, "/to/t", "");
    assert_eq!((status, body.as_str()), (200, "Y000YYYYYY"));
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=A"));
    assert_eq!(header(&h, "x-accel-charset"), None);
    let (_, h, body) = get(port, "/ignored/t", "");
    assert_eq!(body, "X000XXXXXX");
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=B"));
    let (_, h, body) = get(port, "/passed/t", "");
    assert_eq!(body, "Y000YYYYYY");
    assert_eq!(header(&h, "x-accel-charset"), Some("A"));
    // Stored with the response: a hit is recoded too, before its range.
    let (_, _, body) = get(port, "/cached/t", "");
    assert_eq!(body, "Y000YYYYYY");
    let (status, h, body) = get(port, "/cached/t", "Range: bytes=0-1\r\n");
    assert_eq!((status, body.as_str()), (206, "Y0"));
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=A"));
    assert_eq!(header(&h, "x-accel-charset"), None);
    assert!(!error_log(&s).contains("to override"));
}

#[test]
fn an_unknown_x_accel_charset_changes_nothing() {
    let up = canned(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=B\r\nX-Accel-Charset: Z\r\n\
Content-Length: 3\r\nConnection: close\r\n\r\nXXX",
    );
    let (s, port) = front(
        "charset_map B A { 58 59; }",
        &format!("location / {{ proxy_pass http://127.0.0.1:{up}/; }}"),
    );
    let (status, h, body) = get(port, "/", "");
    assert_eq!((status, body.as_str()), (200, "XXX"));
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=B"));
    assert!(
        error_log(&s).contains("unknown charset \"Z\" to override"),
        "{}",
        error_log(&s)
    );
}

#[test]
fn a_clients_x_accel_charset_is_not_the_upstreams() {
    // The request's field goes to the upstream as any other; only the upstream's answer counts.
    let up = mirror();
    let (_s, port) = front(
        "charset_map B A { 58 59; }",
        &format!("location / {{ proxy_pass http://127.0.0.1:{up}/; }}"),
    );
    let (status, h, body) = get(port, "/X", "X-Accel-Charset: A\r\n");
    assert_eq!(status, 200);
    assert!(body.starts_with("GET /X "), "{body}");
    assert!(
        header(&h, "content-type").is_none_or(|c| !c.contains("charset")),
        "{h:?}"
    );
}

#[test]
fn free_ports_are_distinct_and_outside_the_ephemeral_range() {
    // The front servers' ports: an upstream's `bind(0)` or an outgoing connection never takes
    // one (the kernel's range), and none comes twice (300 ports, more than the 100 of the
    // window per process that used to wrap around).
    let (low, high) = ephemeral_range();
    let ports: Vec<u16> = (0..300).map(|_| free_port()).collect();
    for p in &ports {
        assert!(*p < low || *p > high, "{p} is in {low}-{high}");
    }
    let mut uniq = ports.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq.len(), ports.len(), "a port came twice: {ports:?}");
    assert_eq!(test_range((32768, 60999)), (10000, 32767));
    assert_eq!(test_range((1024, 60999)), (61000, 65535));
}

#[test]
fn a_server_that_cannot_bind_is_not_taken_for_another_listener() {
    // Another socket holds the port (as an upstream's bind(0) could, between free_port and the
    // server's bind): the server fails to bind and exits; waiting for it must say so, not
    // return because the port accepts (the request would then go to that other listener).
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = other.local_addr().expect("addr").port();
    let dir = tempdir("proxy-filters-taken");
    let conf = format!(
        "pid off;\nerror_log stderr;\nevents {{}}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port}; return 200; }}\n}}\n"
    );
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Server::start_in(&dir, &conf, port)
    }));
    let err = match started {
        Ok(_) => panic!("the server was taken as listening on a port another socket holds"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(
        err.contains("exited early") && err.contains("bind()"),
        "{err}"
    );
    drop(other);
}
