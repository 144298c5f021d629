//! Slow and silent clients are closed at their timers, nginx's meanings:
//!
//! - `client_header_timeout` bounds, from the accept, the TLS handshake and the first request's
//!   header together (nginx sets one read timer at accept and never moves it before the first
//!   request); on a keep-alive connection, the header of a later request from its first byte;
//! - `client_body_timeout` is the longest wait between two reads of a request body (408);
//! - on HTTP/2, a connection with no request in progress, whatever frames it sends, is idle.
//!
//! Every bound is wide (seconds against hundreds of milliseconds of slack) and every check also
//! asserts the connection was not cut long before its timer.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rustls_pki_types::ServerName;

use support::*;

/// `client_header_timeout` of the test config.
const HEADER: Duration = Duration::from_secs(2);
/// `client_body_timeout` of the test config.
const BODY: Duration = Duration::from_secs(1);

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    client_header_timeout 2s;
    client_body_timeout 1s;
    keepalive_timeout 30s;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        location /up { proxy_pass http://127.0.0.1:{upstream}; }
    }
}
"#;

/// A running server whose directory is removed when it is dropped.
struct Cleaned(Option<Server>);

impl Drop for Cleaned {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let dir = s.dir.clone();
            drop(s);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A server on a TLS port whose `/up` goes to an upstream that reads and never answers.
fn server(tag: &str) -> (Cleaned, u16) {
    let up_port = silent_upstream();
    let conf = CONF.replace("{upstream}", &up_port.to_string());
    let (s, ports) = Server::start(tag, &conf, 1);
    (Cleaned(Some(s)), ports[0])
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection with its handshake done; also returns when the TCP connect was made.
fn tls(port: u16, alpn: &[u8]) -> (Tls, Instant) {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let accepted = Instant::now();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(rust_client_config(&[alpn]), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).expect("handshake");
    }
    assert_eq!(s.conn.alpn_protocol(), Some(alpn));
    (s, accepted)
}

/// Feeds `feed(i)` (if any) to `s` every 100 ms tick `i` and reads what comes back, until
/// the server closes (EOF, reset, or a failed write) or `limit` passes. Returns when the
/// close was seen (measured from `from`) and what was read before it.
fn until_closed<S: Read + Write>(
    s: &mut S,
    set_timeout: impl Fn(&S, Duration),
    from: Instant,
    limit: Duration,
    mut feed: impl FnMut(usize) -> Option<Vec<u8>>,
) -> (Option<Duration>, Vec<u8>) {
    set_timeout(s, Duration::from_millis(100));
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    for i in 0.. {
        if from.elapsed() > limit {
            return (None, got);
        }
        if let Some(bytes) = feed(i) {
            if s.write_all(&bytes).and_then(|()| s.flush()).is_err() {
                return (Some(from.elapsed()), got);
            }
        }
        let tick = Instant::now();
        loop {
            match s.read(&mut buf) {
                Ok(0) => return (Some(from.elapsed()), got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(_) => return (Some(from.elapsed()), got),
            }
            if tick.elapsed() >= Duration::from_millis(100) {
                break;
            }
        }
    }
    unreachable!()
}

fn tcp_timeout(s: &TcpStream, t: Duration) {
    s.set_read_timeout(Some(t)).unwrap();
}

fn tls_timeout(s: &Tls, t: Duration) {
    s.sock.set_read_timeout(Some(t)).unwrap();
}

/// Asserts `closed` is within [0.8 × `timer`, `timer` + `slack`].
fn assert_closed_at(what: &str, closed: Option<Duration>, timer: Duration, slack: Duration) {
    let t = closed.unwrap_or_else(|| panic!("{what}: not closed"));
    assert!(
        t >= timer.mul_f64(0.8) && t <= timer + slack,
        "{what}: closed after {t:?} (timer {timer:?})"
    );
}

/// The first flight of a TLS 1.3 client: a real ClientHello.
fn client_hello() -> Vec<u8> {
    let name = ServerName::try_from("localhost").unwrap();
    let mut c = rustls::ClientConnection::new(rust_client_config(&[b"http/1.1"]), name).unwrap();
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).unwrap();
    }
    assert!(out.len() > 100 && out[0] == 0x16, "a handshake record");
    out
}

/// (a) A TCP connection that never sends a byte; (b) a ClientHello sent a byte at a time,
/// never finished: both closed at `client_header_timeout`.
#[test]
fn silent_and_dribbling_handshakes_close_at_the_header_timeout() {
    let (_server, port) = server("slow-hs");
    let hello = client_hello();
    let silent = std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let from = Instant::now();
        until_closed(&mut s, tcp_timeout, from, Duration::from_secs(8), |_| None)
    });
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let from = Instant::now();
    let (t, got) = until_closed(&mut s, tcp_timeout, from, Duration::from_secs(8), |i| {
        hello.get(i..i + 1).map(<[u8]>::to_vec)
    });
    assert!(got.is_empty(), "the server answered half a ClientHello");
    assert_closed_at(
        "ClientHello byte by byte",
        t,
        HEADER,
        Duration::from_millis(1500),
    );
    let (t, got) = silent.join().unwrap();
    assert!(got.is_empty());
    assert_closed_at("silent connection", t, HEADER, Duration::from_millis(1500));
}

/// A ClientHello finished just before the timer, then silence: the handshake does not get
/// a second `client_header_timeout` of its own (nginx's one timer from the accept).
#[test]
fn handshake_has_one_timer_from_the_accept() {
    let (_server, port) = server("slow-hs-one");
    let hello = client_hello();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let from = Instant::now();
    // Nine pieces 200 ms apart: the ClientHello is whole after 1.6 s of the 2 s.
    let piece = hello.len().div_ceil(9);
    let (t, got) = until_closed(&mut s, tcp_timeout, from, Duration::from_secs(8), |i| {
        (i % 2 == 0 && i / 2 < 9).then(|| {
            let k = i / 2 * piece;
            hello[k.min(hello.len())..(k + piece).min(hello.len())].to_vec()
        })
    });
    assert!(!got.is_empty(), "the server answered the ClientHello");
    let t = t.expect("closed");
    assert!(
        t >= HEADER.mul_f64(0.8) && t < HEADER + Duration::from_secs(1),
        "closed after {t:?}: the handshake had more than client_header_timeout from the accept"
    );
}

/// (c) Slowloris on HTTP/1.1 after the handshake: a header line every 500 ms, forever. The
/// first request's header is bounded by `client_header_timeout` from the accept; a later
/// request's header on a keep-alive connection by `client_header_timeout` from its first byte
/// (not by `keepalive_timeout`, 30 s here).
#[test]
fn slowloris_headers_close_at_the_header_timeout() {
    let (_server, port) = server("slowloris");
    let lines = |i: usize| -> Option<Vec<u8>> {
        match i {
            0 => Some(b"GET / HTTP/1.1\r\nHost: localhost\r\n".to_vec()),
            i if i % 5 == 0 => Some(format!("X-Slow-{i}: x\r\n").into_bytes()),
            _ => None,
        }
    };
    let first = std::thread::spawn(move || {
        let (mut s, accepted) = tls(port, b"http/1.1");
        let (t, got) = until_closed(&mut s, tls_timeout, accepted, Duration::from_secs(8), lines);
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        t
    });

    let (mut s, _) = tls(port, b"http/1.1");
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&head).contains("hello from firstbyte") {
        let n = s.read(&mut b).expect("first response");
        assert!(n > 0, "closed before the first response");
        head.extend_from_slice(&b[..n]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    // Idle a while (the connection parks), then the second request's header dribbles in.
    std::thread::sleep(Duration::from_millis(300));
    let from = Instant::now();
    let (t, got) = until_closed(&mut s, tls_timeout, from, Duration::from_secs(8), lines);
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert_closed_at(
        "keep-alive slowloris",
        t,
        HEADER,
        Duration::from_millis(1500),
    );
    assert_closed_at(
        "first-request slowloris",
        first.join().unwrap(),
        HEADER,
        Duration::from_millis(1500),
    );
}

/// (d) A request body that stalls: 408 after `client_body_timeout`, on HTTP/1.1 over TLS.
#[test]
fn stalled_body_gets_408_at_the_body_timeout() {
    let (_server, port) = server("slow-body");
    let (mut s, _) = tls(port, b"http/1.1");
    s.write_all(b"POST /up/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n0123")
        .unwrap();
    let from = Instant::now();
    // Ten more bytes, 500 ms apart (each within the timer), then nothing.
    let (t, got) = until_closed(&mut s, tls_timeout, from, Duration::from_secs(10), |i| {
        (i % 5 == 0 && i < 50).then(|| b"a".to_vec())
    });
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let t = t.expect("closed");
    // The last byte went at 4.5 s: the timer runs from there.
    assert!(
        t >= Duration::from_millis(4500) + BODY.mul_f64(0.8)
            && t <= Duration::from_millis(4500) + BODY + Duration::from_millis(1500),
        "closed after {t:?}"
    );
}

/// (d) on HTTP/2: a stalled request body gets 408 on its stream.
#[tokio::test]
async fn stalled_h2_body_gets_408_at_the_body_timeout() {
    use http_body_util::BodyExt;
    let (_server, port) = server("slow-body-h2");
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(rust_client_config(&[b"h2"]))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let req = http::Request::post("https://localhost/up/x")
        .header("content-length", "1000")
        .body(ChannelBody(rx))
        .unwrap();
    tx.send(bytes::Bytes::from_static(b"0123")).await.unwrap();
    let from = Instant::now();
    let resp = tokio::time::timeout(Duration::from_secs(8), send.send_request(req))
        .await
        .expect("an answer in time")
        .expect("a response");
    let t = from.elapsed();
    assert_eq!(resp.status(), 408);
    let _ = resp.into_body().collect().await;
    assert!(
        t >= BODY.mul_f64(0.8) && t <= BODY + Duration::from_millis(1500),
        "answered after {t:?}"
    );
    drop(tx);
}

/// A request body fed from a channel (it stalls while nothing is sent).
struct ChannelBody(tokio::sync::mpsc::Receiver<bytes::Bytes>);

impl http_body::Body for ChannelBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// An HTTP/2 frame: type, flags, stream, payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// (e) HTTP/2 connections with no request: the preface and then nothing; a HEADERS frame
/// without END_HEADERS and never a CONTINUATION; PINGs only. Each is closed at
/// `client_header_timeout` (plus the second hyper's graceful close waits for the client).
#[test]
fn idle_and_unfinished_h2_connections_close() {
    let (_server, port) = server("slow-h2");
    let settings = frame(0x4, 0, 0, &[]);
    let mut start = PREFACE.to_vec();
    start.extend_from_slice(&settings);
    // :method GET, :scheme https, :path / (static table), then the block stops.
    let headers = frame(0x1, 0x1, 1, &[0x82, 0x87, 0x84]);
    let ping = frame(0x6, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    type Feed = Box<dyn FnMut(usize) -> Option<Vec<u8>> + Send>;
    let cases: Vec<(&str, Feed)> = vec![
        ("preface only", {
            let start = start.clone();
            Box::new(move |i| (i == 0).then(|| start.clone()))
        }),
        ("HEADERS without END_HEADERS", {
            let (start, headers) = (start.clone(), headers.clone());
            Box::new(move |i| (i == 0).then(|| [start.clone(), headers.clone()].concat()))
        }),
        ("PINGs only", {
            let (start, ping) = (start.clone(), ping.clone());
            Box::new(move |i| match i {
                0 => Some(start.clone()),
                i if i % 3 == 0 => Some(ping.clone()),
                _ => None,
            })
        }),
    ];
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(what, feed)| {
            std::thread::spawn(move || {
                let (mut s, accepted) = tls(port, b"h2");
                let (t, _) =
                    until_closed(&mut s, tls_timeout, accepted, Duration::from_secs(10), feed);
                (what, t)
            })
        })
        .collect();
    for r in runs {
        let (what, t) = r.join().unwrap();
        assert_closed_at(what, t, HEADER, Duration::from_millis(2500));
    }
}
