//! HTTP/2 limits against the real binary, with the `h2` crate's client: rapid reset
//! (CVE-2023-44487) ends the attacking connection with GOAWAY `ENHANCE_YOUR_CALM` while
//! another connection is still served, resets paced to dodge that limit still meet
//! `keepalive_requests`, and the SETTINGS the server sends carry
//! `http2_max_concurrent_streams` and the 32 KiB header list limit
//! (`firstbyte/src/http/h2limits.rs`).

mod support;

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use support::*;

/// h2's limit on streams reset before the server took them up, as set in
/// `http::h2limits::MAX_PENDING_ACCEPT_RESET_STREAMS`.
const PENDING_RESET_LIMIT: usize = 20;

/// `keepalive_requests` is set far above what the test sends: only the reset limit can end the
/// attacking connection.
const CONF: &str = r#"
pid off;
error_log {dir}/error.log warn;
events {}
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        location /r { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        http2 on;
        http2_max_concurrent_streams 32;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        http2 on;
        keepalive_requests 50;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location /slow { proxy_pass http://127.0.0.1:{port3}; }
    }
}
"#;

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn tls(port: u16) -> Tls {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let tls = tokio_rustls::TlsConnector::from(rust_client_config(&[b"h2"]))
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("TLS handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    tls
}

/// An HTTP/2 client on `io`; its connection runs in a task whose result is returned.
async fn client<T>(
    io: T,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.expect("h2 handshake");
    (send, tokio::spawn(conn))
}

fn get(port: u16, path: &str) -> http::Request<()> {
    http::Request::get(format!("https://localhost:{port}{path}"))
        .body(())
        .expect("request")
}

/// GET `path`: the status, or the error.
async fn fetch(
    send: &mut h2::client::SendRequest<Bytes>,
    port: u16,
    path: &str,
) -> Result<u16, h2::Error> {
    let (resp, _) = send.send_request(get(port, path), true)?;
    let resp = resp.await?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    Ok(status)
}

/// Streams opened and reset per burst: more than the limit, so one burst is enough.
const BURST: usize = 2 * PENDING_RESET_LIMIT + 10;

/// A stream that, while corked, gathers writes, and sends them together at the first write or
/// flush after it is uncorked: the client's frames reach the server in one burst (one TLS
/// record) rather than one write per stream, as an attacker sends them.
struct Corked {
    inner: Tls,
    corked: Arc<AtomicBool>,
    buf: Vec<u8>,
    sent: usize,
}

impl Corked {
    /// Writes out what was gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Corked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Corked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.corked.load(Ordering::Relaxed) || !this.buf.is_empty() {
            // Gathered, and written after what is already waiting.
            this.buf.extend_from_slice(data);
            return Poll::Ready(Ok(data.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.corked.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// Opens streams and resets each at once, [`BURST`] per burst, until the server ends the
/// connection or `max` streams were reset; returns how many were reset and the connection's
/// end. After each burst, `normal` (another connection) asks for `/r` and must be answered, and
/// a PING makes a round trip: its PONG means the server read the whole burst and kept the
/// connection.
async fn rapid_reset(
    port: u16,
    max: usize,
    normal: &mut h2::client::SendRequest<Bytes>,
) -> (usize, Result<(), h2::Error>) {
    let corked = Arc::new(AtomicBool::new(false));
    let io = Corked {
        inner: tls(port).await,
        corked: corked.clone(),
        buf: Vec::new(),
        sent: 0,
    };
    let (mut send, mut conn) = h2::client::handshake(io).await.expect("h2 handshake");
    let mut ping = conn.ping_pong().expect("ping_pong");
    let conn = tokio::spawn(conn);
    // One ordinary request first: the server's SETTINGS are in, the connection works.
    assert_eq!(
        fetch(&mut send, port, "/r").await.expect("first request"),
        200
    );
    let mut resets = 0;
    'attack: while resets < max {
        corked.store(true, Ordering::Relaxed);
        for _ in 0..BURST {
            let ready = std::future::poll_fn(|cx| send.poll_ready(cx)).await;
            let Ok((_resp, mut stream)) =
                ready.and_then(|()| send.send_request(get(port, "/r"), true))
            else {
                break 'attack;
            };
            stream.send_reset(Reason::CANCEL);
            resets += 1;
        }
        corked.store(false, Ordering::Relaxed);
        let pong = ping.ping(h2::Ping::opaque());
        assert_eq!(fetch(normal, port, "/r").await.expect("meanwhile"), 200);
        let pong = tokio::time::timeout(Duration::from_secs(10), pong);
        match pong
            .await
            .expect("a PONG or the connection's end within 10 s")
        {
            Ok(_) => {}
            Err(_) => break,
        }
    }
    corked.store(false, Ordering::Relaxed);
    drop(send);
    let end = tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("the connection ends once the client stops")
        .expect("connection task");
    (resets, end)
}

/// A client that opens streams and resets them at once gets GOAWAY `ENHANCE_YOUR_CALM`
/// within a few bursts; a client on another connection is answered before, during and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_ends_the_connection_and_others_are_served() {
    let (server, ports) = Server::start("h2-rapid-reset", CONF, 4);
    let port = ports[0];
    let (mut normal, normal_conn) = client(tls(port).await).await;
    assert_eq!(fetch(&mut normal, port, "/r").await.expect("before"), 200);

    // 20 bursts: the server closes after the first burst holding more than
    // PENDING_RESET_LIMIT pairs, which should be the first.
    let max = 20 * BURST;
    let (resets, end) = rapid_reset(port, max, &mut normal).await;
    println!("rapid reset: connection ended after {resets} resets: {end:?}");
    assert!(
        resets < max,
        "{max} streams opened and reset, the connection still open"
    );
    let err = end.expect_err("the server ended the connection");
    assert!(
        err.is_go_away() && err.is_remote() && err.reason() == Some(Reason::ENHANCE_YOUR_CALM),
        "GOAWAY ENHANCE_YOUR_CALM expected: {err:?}"
    );
    assert_eq!(fetch(&mut normal, port, "/r").await.expect("after"), 200);
    drop(normal);
    let _ = normal_conn.await;
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// A client that paces its resets (each stream reset only after the server has started it, so
/// h2's burst limit never counts it) on a location that has not answered yet (an upstream that
/// never does) still meets `keepalive_requests`: GOAWAY after 50 streams.
#[tokio::test]
async fn paced_resets_meet_keepalive_requests() {
    let (server, ports) = Server::start("h2-paced-reset", CONF, 4);
    let port = ports[2];
    // The upstream: connections complete in the listen backlog and are never answered.
    let _upstream = std::net::TcpListener::bind(("127.0.0.1", ports[3])).expect("upstream");
    let (mut send, mut conn) = h2::client::handshake(tls(port).await)
        .await
        .expect("h2 handshake");
    let mut ping = conn.ping_pong().expect("ping_pong");
    let conn = tokio::spawn(conn);
    let max = 2 * 50;
    let mut resets = 0;
    while resets < max {
        let ready = std::future::poll_fn(|cx| send.poll_ready(cx)).await;
        let Ok((_resp, mut stream)) =
            ready.and_then(|()| send.send_request(get(port, "/slow"), true))
        else {
            break;
        };
        // The PONG comes back once the server has read the HEADERS and started the stream.
        let pong = tokio::time::timeout(Duration::from_secs(10), ping.ping(h2::Ping::opaque()));
        if pong.await.expect("a PONG or the connection's end").is_err() {
            break;
        }
        stream.send_reset(Reason::CANCEL);
        resets += 1;
    }
    drop(send);
    let end = tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("the connection ends")
        .expect("connection task");
    println!("paced resets: connection ended after {resets} streams: {end:?}");
    assert!(resets < max, "{max} streams reset, no GOAWAY");
    assert!(
        resets >= 49,
        "GOAWAY after {resets} streams, before keepalive_requests"
    );
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// The server's SETTINGS carry `http2_max_concurrent_streams` (128 by default, 32 where set),
/// and a request's headers may reach 32 KiB decoded (nginx's `large_client_header_buffers 4
/// 8k`; hyper's default would refuse 20 KiB) but not more.
#[tokio::test]
async fn settings_carry_the_limits() {
    let (server, ports) = Server::start("h2-settings", CONF, 4);
    for (port, streams) in [(ports[0], 128), (ports[1], 32)] {
        let (mut send, conn) = client(tls(port).await).await;
        assert_eq!(fetch(&mut send, port, "/r").await.expect("request"), 200);
        assert_eq!(send.current_max_send_streams(), streams, "port {port}");
        drop(send);
        let _ = conn.await;
    }

    let port = ports[0];
    // `bytes` of header values in fields of 7 KiB at most: one field past a
    // `large_client_header_buffers` buffer (8k) is refused on its own, as nginx does.
    let with_header = |bytes: usize| {
        let mut req = get(port, "/r");
        for i in 0..bytes.div_ceil(7 * 1024) {
            let n = (bytes - i * 7 * 1024).min(7 * 1024);
            req.headers_mut().insert(
                http::HeaderName::from_bytes(format!("x-large-{i}").as_bytes()).expect("name"),
                http::HeaderValue::from_str(&"a".repeat(n)).expect("value"),
            );
        }
        req
    };
    let (mut send, conn) = client(tls(port).await).await;
    let (resp, _) = send
        .send_request(with_header(20 * 1024), true)
        .expect("send");
    assert_eq!(resp.await.expect("20 KiB of headers").status(), 200);
    let (resp, _) = send
        .send_request(with_header(40 * 1024), true)
        .expect("send");
    match resp.await {
        Ok(r) => assert_eq!(r.status(), 431, "40 KiB of headers"),
        Err(e) => assert_eq!(e.reason(), Some(Reason::REFUSED_STREAM), "{e:?}"),
    }
    drop(send);
    let _ = conn.await;
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}
