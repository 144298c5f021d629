//! Reverse proxy limits end to end: `client_max_body_size` on the bytes that arrive (chunked
//! HTTP/1.1, HTTP/2 without a length), the timeouts on reused keepalive connections, HTTP/2
//! resets while a request waits on its upstream, request bodies over `proxy_http_version
//! 1.0`, upstream framing, WebSocket tunnels, and `proxy_buffering on` with temp files.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use support::*;

fn conf(dir: &std::path::Path, port: u16, location: &str, extra: &str) -> String {
    format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {extra}\n server {{ listen 127.0.0.1:{port}; http2 on;\n location / {{ {location} }}\n location = /status {{ stub_status; }}\n }}\n}}\n",
        d = dir.display()
    )
}

fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// What an upstream received of one request body: raw bytes after the head, and whether the
/// request was complete (the chunked terminator or the declared length).
#[derive(Debug, Default, Clone)]
struct Received {
    head: String,
    bytes: Vec<u8>,
    complete: bool,
}

/// An upstream that reads one request with its body (chunked or Content-Length), records it,
/// and answers 200 "ok" only once the body is complete.
fn recording_upstream() -> (u16, Arc<Mutex<Vec<Received>>>) {
    let seen: Arc<Mutex<Vec<Received>>> = Arc::default();
    let log = seen.clone();
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let lower = head.to_ascii_lowercase();
        let length: Option<usize> = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok());
        let chunked = lower.contains("transfer-encoding: chunked");
        let idx = {
            let mut v = log.lock().expect("lock");
            v.push(Received {
                head: head.clone(),
                ..Received::default()
            });
            v.len() - 1
        };
        let mut buf = [0u8; 65536];
        let complete = loop {
            let done = {
                let v = log.lock().expect("lock");
                let b = &v[idx].bytes;
                if chunked {
                    b.ends_with(b"\r\n0\r\n\r\n") || b == b"0\r\n\r\n"
                } else {
                    b.len() >= length.unwrap_or(0)
                }
            };
            if done {
                break true;
            }
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break false,
                Ok(n) => log.lock().expect("lock")[idx]
                    .bytes
                    .extend_from_slice(&buf[..n]),
            }
        };
        log.lock().expect("lock")[idx].complete = complete;
        if complete {
            let mut w = s;
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    (port, seen)
}

/// Sends a chunked POST of `total` bytes in 16 KB chunks from a thread (write errors end it:
/// the server may answer and close first) and returns the response text.
fn chunked_post(port: u16, path: &str, total: usize) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).ok();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).expect("head");
    let mut w = s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 16 << 10];
        let mut sent = 0;
        while sent < total {
            let n = chunk.len().min(total - sent);
            let frame = [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat();
            if w.write_all(&frame).is_err() {
                return;
            }
            sent += n;
        }
        let _ = w.write_all(b"0\r\n\r\n");
    });
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    drop(s);
    let _ = writer.join();
    String::from_utf8_lossy(&out).into_owned()
}

/// A request body of `frames` frames of 16 KB with no length (HTTP/2: no content-length).
struct Unsized {
    frames: usize,
}

impl http_body::Body for Unsized {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.frames == 0 {
            return Poll::Ready(None);
        }
        this.frames -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'b'; 16 << 10])))))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// An h2c connection (prior knowledge) to 127.0.0.1:`port`.
async fn h2c(port: u16) -> hyper::client::conn::http2::SendRequest<Unsized> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    send
}

/// A chunked HTTP/1.1 body over `client_max_body_size` (default 1m), streamed
/// (`proxy_request_buffering off`), is answered 413 and the upstream never gets the excess
/// nor a complete request; one under it passes whole. (Buffered, the upstream gets nothing:
/// tests/request_buffering.rs.)
#[test]
fn chunked_body_over_client_max_body_size_is_413() {
    let (up, seen) = recording_upstream();
    let dir = tempdir("limits-chunked");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1; proxy_request_buffering off;"
        ),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);

    let small = chunked_post(port, "/small", 100 << 10);
    assert!(small.starts_with("HTTP/1.1 200"), "{small}");
    assert!(small.ends_with("ok"), "{small}");

    let big = chunked_post(port, "/big", 3 << 20);
    assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    std::thread::sleep(Duration::from_millis(300));
    let v = seen.lock().expect("lock").clone();
    let r = v
        .iter()
        .find(|r| r.head.starts_with("POST /big"))
        .expect("the big request reached the upstream");
    assert!(!r.complete, "the upstream got a complete request");
    assert!(
        r.bytes.len() <= (1 << 20) + (16 << 10),
        "the upstream got {} bytes (limit 1 MiB)",
        r.bytes.len()
    );
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("client intended to send too large body"),
        "{log}"
    );
}

/// The same over HTTP/2 with no content-length, streamed.
#[test]
fn h2_body_without_length_over_client_max_body_size_is_413() {
    let (up, seen) = recording_upstream();
    let dir = tempdir("limits-h2");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1; proxy_request_buffering off;"
        ),
        "client_max_body_size 512k;",
    );
    let _srv = Server::start_in(&dir, &c, port);
    let rt = runtime();
    let statuses = rt.block_on(async move {
        let mut send = h2c(port).await;
        let mut out = Vec::new();
        // 160 KB passes; 3 MB (192 frames) does not.
        for (path, frames) in [("/small", 10), ("/big", 192)] {
            let req = http::Request::post(format!("http://127.0.0.1:{port}{path}"))
                .body(Unsized { frames })
                .expect("request");
            let resp = tokio::time::timeout(Duration::from_secs(15), send.send_request(req))
                .await
                .expect("an answer within 15 s");
            out.push(resp.map(|r| r.status().as_u16()).unwrap_or(0));
            send = h2c(port).await;
        }
        out
    });
    assert_eq!(statuses, vec![200, 413]);
    std::thread::sleep(Duration::from_millis(300));
    let v = seen.lock().expect("lock").clone();
    let small = v
        .iter()
        .find(|r| r.head.starts_with("POST /small"))
        .expect("small");
    assert!(small.complete);
    let big = v
        .iter()
        .find(|r| r.head.starts_with("POST /big"))
        .expect("the big request reached the upstream");
    assert!(!big.complete, "the upstream got a complete request");
    assert!(
        big.bytes.len() <= (512 << 10) + (16 << 10),
        "the upstream got {} bytes (limit 512 KiB)",
        big.bytes.len()
    );
}

/// `proxy_read_timeout` holds on a reused keepalive connection: the upstream answers the
/// first request (keep-alive) and never answers the second on the same connection; nginx
/// answers 504 after the timeout (2 s here), never waits forever.
#[test]
fn read_timeout_applies_to_a_reused_keepalive_connection() {
    let (up, accepted) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if read_head(&mut r).is_none() {
            return;
        }
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
        // The second request: read, then stall (hold the connection open) for 30 s at most.
        let _ = read_head(&mut r);
        std::thread::sleep(Duration::from_secs(30));
    });
    let dir = tempdir("limits-ka-timeout");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_read_timeout 2s;",
        &format!("upstream backend {{ server 127.0.0.1:{up}; keepalive 2; }}"),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let get = || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).ok();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let first = get();
    assert!(
        first.starts_with("HTTP/1.1 200") && first.ends_with("first"),
        "{first}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let second = get();
    let took = t.elapsed();
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second request reused the connection"
    );
    assert!(
        second.starts_with("HTTP/1.1 504"),
        "after {took:?}: {second:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("upstream timed out (110: Connection timed out) while reading response header from upstream"),
        "{log}"
    );
}

/// `proxy_send_timeout` holds on a reused keepalive connection too: the upstream answers the
/// first request, then stops reading (a small receive buffer fills); a large second request
/// body on that connection ends in 504 "while sending request to upstream".
#[test]
fn send_timeout_applies_to_a_reused_keepalive_connection() {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("addr");
    sock.bind(&any.into()).expect("bind");
    sock.listen(16).expect("listen");
    let l: TcpListener = sock.into();
    let up = l.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut w = s;
                if read_head(&mut r).is_some() {
                    let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
                    // Never read again; hold the connection for 30 s at most.
                    std::thread::sleep(Duration::from_secs(30));
                }
            });
        }
    });
    let dir = tempdir("limits-ka-send");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_send_timeout 1s; proxy_read_timeout 30s;",
        &format!("upstream backend {{ server 127.0.0.1:{up}; keepalive 2; }} client_max_body_size 0;"),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(String::from_utf8_lossy(&out).ends_with("first"));
    std::thread::sleep(Duration::from_millis(200));

    const BODY: usize = 64 << 20;
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {BODY}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("head");
    let mut w = s.try_clone().expect("clone");
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..BODY / chunk.len() {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let t = Instant::now();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&out);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the second request reused the connection"
    );
    assert!(text.starts_with("HTTP/1.1 504"), "after {took:?}: {text}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("while sending request to upstream"), "{log}");
}

/// An upstream that reads request heads and never answers; counts heads read and connections
/// the proxy closed (EOF). Each connection is held 30 s at most.
fn silent_upstream() -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let heads = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (h, c) = (heads.clone(), closed.clone());
    let (port, accepted) = upstream(move |s| {
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        let mut r = BufReader::new(s);
        if read_head(&mut r).is_some() {
            h.fetch_add(1, Ordering::SeqCst);
        }
        let mut buf = [0u8; 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) => {
                    c.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    (port, accepted, heads, closed)
}

/// stub_status's "Writing" figure, read over a new HTTP/1.1 connection.
fn writing(port: u16) -> Option<u64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let at = out.find("Writing: ")? + "Writing: ".len();
    out[at..].split_whitespace().next()?.parse().ok()
}

/// An h2 (crate) client connection over plain TCP, its connection task spawned.
async fn h2_client(port: u16) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.expect("ready")
}

/// HTTP/2 streams reset while their requests wait on an upstream release what they held:
/// stub_status "Writing" is back to 1 (the status request itself) and the upstream sees each
/// of its connections closed; nothing is left counted as in flight.
#[test]
fn h2_resets_while_waiting_on_upstream_release_everything() {
    const N: usize = 5;
    let (up, accepted, heads, closed) = silent_upstream();
    let dir = tempdir("limits-h2-reset");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up}; proxy_read_timeout 30s;"),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);
    let rt = runtime();
    rt.block_on(async {
        let mut send = h2_client(port).await;
        let mut streams = Vec::new();
        for i in 0..N {
            let req = http::Request::get(format!("http://127.0.0.1:{port}/slow{i}"))
                .body(())
                .expect("request");
            let (resp, stream) = send.send_request(req, true).expect("send");
            streams.push((resp, stream));
            send = send.ready().await.expect("ready");
        }
        // Every request reached the upstream and waits there.
        let deadline = Instant::now() + Duration::from_secs(10);
        while heads.load(Ordering::SeqCst) < N && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(heads.load(Ordering::SeqCst), N, "requests waiting upstream");
        for (_, stream) in &mut streams {
            stream.send_reset(h2::Reason::CANCEL);
        }
        // Keep the client connection open while the server cleans up.
        let deadline = Instant::now() + Duration::from_secs(10);
        while closed.load(Ordering::SeqCst) < N && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let w = tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(5), || writing(port) == Some(1));
            writing(port)
        })
        .await
        .expect("join");
        assert_eq!(w, Some(1), "stub_status Writing after {N} resets");
        drop(send);
    });
    assert_eq!(accepted.load(Ordering::SeqCst), N);
    assert_eq!(
        closed.load(Ordering::SeqCst),
        N,
        "upstream connections closed"
    );
}

/// A stream reset in the same flight as its HEADERS opens no upstream connection.
#[test]
fn h2_stream_reset_at_once_opens_no_upstream_connection() {
    let (up, accepted, _, _) = silent_upstream();
    let dir = tempdir("limits-h2-reset-early");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up}; proxy_read_timeout 30s;"),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);
    let rt = runtime();
    rt.block_on(async {
        let mut send = h2_client(port).await;
        for i in 0..10 {
            let req = http::Request::get(format!("http://127.0.0.1:{port}/gone{i}"))
                .body(())
                .expect("request");
            // No await between the two: both frames leave in one write.
            let (_resp, mut stream) = send.send_request(req, true).expect("send");
            stream.send_reset(h2::Reason::CANCEL);
            send = send.ready().await.expect("ready");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(send);
    });
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "upstream connections opened"
    );
    assert_eq!(writing(port), Some(1));
}

/// An upstream response with both Transfer-Encoding and Content-Length: two readers could
/// frame it two ways (request smuggling), so it is refused with 502, as nginx ("upstream
/// sent "Content-Length" and "Transfer-Encoding" headers at the same time"); none of it
/// reaches the client.
#[test]
fn upstream_content_length_beside_transfer_encoding_is_a_502() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        while read_head(&mut r).is_some() {
            let _ = w.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            );
        }
    });
    let dir = tempdir("limits-te-cl");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1;"),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let (code, headers, body) = parse_response(&out);
    assert_eq!(code, 502);
    assert_ne!(
        header(&headers, "content-length"),
        Some("100"),
        "{headers:?}"
    );
    assert!(
        !String::from_utf8_lossy(&body).contains("hello"),
        "the upstream's body is not relayed"
    );
}

/// A WebSocket upstream: answers the upgrade with 101 and echoes until EOF.
fn echo_ws_upstream() -> u16 {
    let (port, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = w.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        );
        let mut buf = [0u8; 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 || w.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    port
}

const WS_LOCATION: &str = "proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\";";

/// Opens a tunnel through the proxy; returns the client socket after the 101.
fn open_tunnel(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    )
    .expect("write");
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let head = read_head(&mut r).expect("101 head");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    (s, r)
}

fn echo(s: &mut TcpStream, r: &mut BufReader<TcpStream>, msg: &[u8]) -> bool {
    if s.write_all(msg).is_err() {
        return false;
    }
    let mut buf = vec![0u8; msg.len()];
    r.read_exact(&mut buf).is_ok() && buf == msg
}

/// Whether the server answers a new connection (it closes one over worker_connections at once).
fn answered(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    if s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200")
}

/// A tunnel counts toward worker_connections while it lives: with 2 allowed, a tunnel and an
/// idle connection leave no room for a third; once the tunnel ends there is room again.
#[test]
fn websocket_tunnel_counts_toward_worker_connections() {
    let up = echo_ws_upstream();
    let dir = tempdir("limits-ws-count");
    let port = free_port();
    let c = format!(
        "worker_processes 1;\npid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{ worker_connections 2; }}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port};\n location /ws {{ proxy_pass http://127.0.0.1:{up}; {WS_LOCATION} }}\n location = /status {{ stub_status; }}\n }}\n}}\n",
        d = dir.display()
    );
    let _srv = Server::start_in(&dir, &c, port);
    std::thread::sleep(Duration::from_millis(200));
    let (mut ws, mut wr) = open_tunnel(port);
    assert!(echo(&mut ws, &mut wr, b"ping-1"));
    let idle = TcpStream::connect(("127.0.0.1", port)).expect("idle connection");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !answered(port),
        "a third connection was served beside a tunnel and an idle connection"
    );
    assert!(echo(&mut ws, &mut wr, b"ping-2"), "the tunnel still works");
    drop(ws);
    drop(wr);
    drop(idle);
    assert!(
        wait_until(Duration::from_secs(5), || answered(port)),
        "room again once the tunnel ended"
    );
}

/// A tunnel idle in both directions for proxy_read_timeout is closed; traffic in either
/// direction keeps it open past that.
#[test]
fn websocket_tunnel_obeys_proxy_read_timeout() {
    let up = echo_ws_upstream();
    let dir = tempdir("limits-ws-idle");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up}; {WS_LOCATION} proxy_read_timeout 1s;"),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);
    let (mut ws, mut wr) = open_tunnel(port);
    // 2.5 s of traffic every 300 ms: longer than the timeout, never idle that long.
    for i in 0..8 {
        assert!(
            echo(&mut ws, &mut wr, format!("m{i}").as_bytes()),
            "message {i}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let t = Instant::now();
    let mut buf = [0u8; 16];
    let n = wr.read(&mut buf);
    let took = t.elapsed();
    assert!(
        matches!(n, Ok(0)),
        "the idle tunnel was closed: {n:?} after {took:?}"
    );
    assert!(took < Duration::from_secs(6), "closed after {took:?}");
    std::thread::sleep(Duration::from_millis(100));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("while proxying upgraded connection"), "{log}");
}

/// The resident memory of process `pid`, in KiB.
fn vm_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `proxy_buffering on` with a 64 MB response and a client that pauses: the upstream is read
/// to its end while the client waits (the response goes to a temp file past the buffers), the
/// process's memory stays far below the response size, the client gets every byte, and the
/// temp directory is empty afterwards (the file was unlinked when made).
#[test]
fn buffered_response_spills_to_an_unlinked_temp_file() {
    const SIZE: usize = 64 << 20;
    let upstream_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = upstream_done.clone();
    let (up, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ =
            w.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\n\r\n").as_bytes());
        let chunk: Vec<u8> = (0..(1usize << 20)).map(|i| (i % 251) as u8).collect();
        for _ in 0..SIZE / chunk.len() {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
        done.store(true, Ordering::SeqCst);
    });
    let dir = tempdir("limits-buffering");
    let temp = dir.join("ptemp");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_buffering on; proxy_temp_path {};",
            temp.display()
        ),
        "",
    );
    let srv = Server::start_in(&dir, &c, port);
    let pid = srv.child.id();
    let base = vm_rss_kib(pid).expect("VmRSS");
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    // The head and about 1 MB, then a pause with the client reading nothing.
    let mut r = BufReader::with_capacity(1 << 16, s);
    let head = read_head(&mut r).expect("head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut got: u64 = 0;
    let mut buf = vec![0u8; 1 << 16];
    let check = |data: &[u8], at: u64| {
        for (i, b) in data.iter().enumerate() {
            let pos = (at as usize + i) % (1 << 20);
            assert_eq!(*b, (pos % 251) as u8, "byte {}", at as usize + i);
        }
    };
    while got < 1 << 20 {
        let n = r.read(&mut buf).expect("read");
        assert!(n > 0);
        check(&buf[..n], got);
        got += n as u64;
    }
    let mut peak = 0;
    let paused = wait_until(Duration::from_secs(20), || {
        peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
        upstream_done.load(Ordering::SeqCst)
    });
    assert!(
        paused,
        "the upstream was not read to its end while the client paused"
    );
    peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
    loop {
        let n = r.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        check(&buf[..n], got);
        got += n as u64;
        peak = peak.max(vm_rss_kib(pid).unwrap_or(0));
    }
    assert_eq!(got, SIZE as u64, "every byte arrived");
    let grew = peak.saturating_sub(base);
    eprintln!("VmRSS {base} KiB before, peak {peak} KiB during a 64 MiB buffered response");
    assert!(
        grew < 24 << 10,
        "resident memory grew by {grew} KiB (from {base}) for a 64 MiB response"
    );
    std::thread::sleep(Duration::from_millis(100));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("an upstream response is buffered to a temporary file"),
        "{log}"
    );
    let left: Vec<_> = std::fs::read_dir(&temp)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the temp dir: {left:?}");
}

/// A chunked request body over `proxy_http_version 1.0` (the default) reaches the upstream
/// whole with its Content-Length (HTTP/1.0 has no chunked); one over the limit is still 413.
#[test]
fn chunked_body_over_http10_is_buffered_and_sent_with_its_length() {
    let (up, seen) = recording_upstream();
    let dir = tempdir("limits-http10");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_temp_path {}/ptemp;",
            dir.display()
        ),
        "",
    );
    let _srv = Server::start_in(&dir, &c, port);
    // 300 KB: past the 16k kept in memory, so the temp file is used too.
    let total = 300 << 10;
    let resp = chunked_post(port, "/ten", total);
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.ends_with("ok"),
        "{resp}"
    );
    let v = seen.lock().expect("lock").clone();
    let r = v
        .iter()
        .find(|r| r.head.starts_with("POST /ten"))
        .expect("request");
    assert!(r.head.starts_with("POST /ten HTTP/1.0\r\n"), "{}", r.head);
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains(&format!("content-length: {total}\r\n")),
        "{}",
        r.head
    );
    assert!(r.complete);
    assert_eq!(r.bytes.len(), total);
    assert!(r.bytes.iter().all(|&b| b == b'a'));
    let big = chunked_post(port, "/big", 3 << 20);
    assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    let left: Vec<_> = std::fs::read_dir(dir.join("ptemp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the temp dir: {left:?}");
}
