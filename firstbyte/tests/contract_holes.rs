//! The request contract's four holes, each over the protocols it concerned (see
//! `http::contract`): `$http_host` empty over HTTP/2 and HTTP/3 when only `:authority` came;
//! a method token nginx refuses (lower-case `delete`) served over HTTP/1.1 and HTTP/3; an
//! HTTP/3 body whose length or framing is not the one declared reaching an upstream; and a
//! GET with a body in TLS early data served over HTTP/2 and HTTP/3.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes};
use support::{curl_i, read_head, rust_client_config, upstream, Server};

/// What the upstream received: each request's head and body.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An upstream that records each request (its body read by `Content-Length`, or a chunked
/// body to its last chunk) and answers `200 up`.
fn recording_upstream() -> (u16, Seen, Arc<AtomicUsize>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let (port, accepted) = upstream(move |c| {
        let mut r = BufReader::new(c);
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let lower = head.to_ascii_lowercase();
        let mut body = Vec::new();
        if let Some(l) = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            body.resize(l, 0);
            if r.read_exact(&mut body).is_err() {
                // Cut short: recorded as far as it came.
                body.clear();
            }
        } else if lower.contains("transfer-encoding: chunked") {
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                body.extend_from_slice(line.as_bytes());
                if line == "\r\n" && body.ends_with(b"0\r\n\r\n") {
                    break;
                }
                line.clear();
            }
        }
        s.lock().unwrap().push((head, body));
        let mut c = r.into_inner();
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nup");
    });
    (port, seen, accepted)
}

const CONF: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    ssl_session_cache shared:holes:1m;
    ssl_early_data on;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        http2 on;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location /hh/ { return 200 "host=[$http_host]\n"; }
        location /adm/ {
            if ($http_host ~ "^a\.test") { return 403; }
            return 200 "open\n";
        }
        location /up/ {
            proxy_set_header Host $http_host;
            proxy_pass http://127.0.0.1:{up};
        }
        location /m/ {
            if ($request_method = DELETE) { return 403; }
            proxy_pass http://127.0.0.1:{up};
        }
        location /body/ { proxy_pass http://127.0.0.1:{up}; }
        location /nobuf/ {
            proxy_request_buffering off;
            proxy_read_timeout 120s;
            proxy_pass http://127.0.0.1:{up};
        }
        location / { return 200 "early=$ssl_early_data\n"; }
    }
}
"#;

fn start(tag: &str) -> (Server, u16, Seen, Arc<AtomicUsize>) {
    let (up, seen, accepted) = recording_upstream();
    let conf = CONF.replace("{up}", &up.to_string());
    let (server, ports) = Server::start(tag, &conf, 1);
    (server, ports[0], seen, accepted)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A QUIC client endpoint that trusts the tests' CA, speaks h3 and may resume with 0-RTT.
fn quic_client() -> quinn::Endpoint {
    let mut tls = (*rust_client_config(&[b"h3"])).clone();
    tls.enable_early_data = true;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// HTTP/3 over `conn`; the driver runs in its own task.
async fn h3_over(conn: quinn::Connection) -> SendRequest {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3 client");
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    send
}

async fn h3_connect(ep: &quinn::Endpoint, port: u16) -> SendRequest {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let conn = ep
        .connect(addr, "a.test")
        .expect("connect")
        .await
        .expect("handshake");
    h3_over(conn).await
}

/// One HTTP/3 request: `method` to `path` on authority `a.test`, with `headers` and the body
/// `data` (sent as one DATA frame if not empty). The status and body, or the stream's error.
async fn h3_request(
    send: &mut SendRequest,
    method: &[u8],
    path: &str,
    headers: &[(&str, &str)],
    data: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let mut req = http::Request::builder()
        .method(http::Method::from_bytes(method).unwrap())
        .uri(format!("https://a.test{path}"));
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let req = req.body(()).unwrap();
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    if !data.is_empty() {
        stream
            .send_data(Bytes::copy_from_slice(data))
            .await
            .map_err(|e| e.to_string())?;
    }
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            body.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    Ok((resp.status().as_u16(), body))
}

/// Hole 1: over HTTP/2 and HTTP/3 a request that names its host only in `:authority` has it
/// as its `Host` header, as nginx's HTTP/2 ("compatibility for $http_host"): `$http_host`
/// is set, an `if` on it holds, and `proxy_set_header Host $http_host` sends it.
#[test]
fn authority_is_the_host_header_over_http2_and_http3() {
    let (server, port, seen, _) = start("holes-host");
    let base = format!("https://a.test:{port}");
    let resolve = format!("a.test:{port}:127.0.0.1");
    for proto in ["--http1.1", "--http2"] {
        let (status, _, body) = curl_i(&[proto, "--resolve", &resolve, &format!("{base}/hh/")]);
        assert_eq!(status, 200, "{proto}");
        assert_eq!(
            String::from_utf8_lossy(&body),
            format!("host=[a.test:{port}]\n"),
            "{proto}"
        );
        let (status, _, _) = curl_i(&[proto, "--resolve", &resolve, &format!("{base}/adm/")]);
        assert_eq!(status, 403, "{proto}: the `if` on $http_host holds");
        let (status, _, _) = curl_i(&[proto, "--resolve", &resolve, &format!("{base}/up/")]);
        assert_eq!(status, 200, "{proto}");
    }
    rt().block_on(async {
        let ep = quic_client();
        let mut h3 = h3_connect(&ep, port).await;
        let (status, body) = h3_request(&mut h3, b"GET", "/hh/", &[], b"")
            .await
            .expect("h3 /hh/");
        assert_eq!(status, 200);
        assert_eq!(String::from_utf8_lossy(&body), "host=[a.test]\n");
        let (status, _) = h3_request(&mut h3, b"GET", "/adm/", &[], b"")
            .await
            .expect("h3 /adm/");
        assert_eq!(status, 403, "HTTP/3: the `if` on $http_host holds");
        let (status, _) = h3_request(&mut h3, b"GET", "/up/", &[], b"")
            .await
            .expect("h3 /up/");
        assert_eq!(status, 200);
    });
    let seen = seen.lock().unwrap();
    let hosts: Vec<String> = seen
        .iter()
        .map(|(h, _)| {
            h.lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
                .map(|l| l[5..].trim().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    assert_eq!(
        hosts,
        [
            format!("a.test:{port}"),
            format!("a.test:{port}"),
            "a.test".into()
        ],
        "{}",
        server.stderr_text()
    );
}

/// A TLS connection to the server speaking HTTP/1.1 (SNI a.test).
fn tls_http1(port: u16) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let conn = rustls::ClientConnection::new(
        rust_client_config(&[b"http/1.1"]),
        "a.test".try_into().unwrap(),
    )
    .expect("client");
    rustls::StreamOwned::new(conn, sock)
}

/// Hole 2: a method nginx does not take as one (lower case) is 400 before any location, on
/// HTTP/1.1 and HTTP/3, and never reaches the upstream; over HTTP/2 the stream is reset.
#[test]
fn a_lower_case_method_is_refused_on_every_protocol() {
    let (server, port, seen, accepted) = start("holes-method");
    let mut s = tls_http1(port);
    s.write_all(b"delete /m/x HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 "), "HTTP/1.1: {text}");
    // The upper-case method still meets the location's `if`.
    let mut s = tls_http1(port);
    s.write_all(b"DELETE /m/x HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 403 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let out = support::curl(&[
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        "delete",
        "--resolve",
        &format!("a.test:{port}:127.0.0.1"),
        &format!("https://a.test:{port}/m/x"),
    ]);
    let code = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && code != "200",
        "HTTP/2: the stream is reset, got {code}"
    );
    rt().block_on(async {
        let ep = quic_client();
        let mut h3 = h3_connect(&ep, port).await;
        let r = h3_request(&mut h3, b"delete", "/m/x", &[], b"").await;
        assert_eq!(r.map(|r| r.0), Ok(400), "HTTP/3");
    });
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the upstream got {:?}\n{}",
        seen.lock().unwrap(),
        server.stderr_text()
    );
}

/// Hole 3: over HTTP/3 a body that is not what the head declares — more DATA than its
/// `content-length`, a stream that ends short, a chunked coding, an upgrade — is refused
/// (400, or the stream's H3_MESSAGE_ERROR) and never reaches the upstream whole or framed
/// another way; a sound body still goes through.
#[test]
fn http3_bodies_must_match_their_head() {
    let (server, port, seen, _) = start("holes-h3-body");
    rt().block_on(async {
        let ep = quic_client();
        let mut h3 = h3_connect(&ep, port).await;
        let ok = h3_request(
            &mut h3,
            b"POST",
            "/body/a",
            &[("content-length", "5")],
            b"hello",
        )
        .await;
        assert_eq!(ok, Ok((200, b"up".to_vec())));
        let long = h3_request(
            &mut h3,
            b"POST",
            "/body/b",
            &[("content-length", "5")],
            &[b'x'; 40],
        )
        .await;
        assert!(
            long.as_ref().is_err() || long.as_ref().is_ok_and(|r| r.0 == 400),
            "{long:?}"
        );
        // The stream ends 95 bytes short; the body streams to the upstream as it comes.
        let short = tokio::time::timeout(
            Duration::from_secs(30),
            h3_request(
                &mut h3,
                b"POST",
                "/nobuf/c",
                &[("content-length", "100")],
                b"hello",
            ),
        )
        .await
        .expect("answered, the upstream not held to proxy_read_timeout");
        assert!(
            short.as_ref().is_err() || short.as_ref().is_ok_and(|r| r.0 == 400),
            "{short:?}"
        );
        let chunked = h3_request(
            &mut h3,
            b"POST",
            "/body/d",
            &[("transfer-encoding", "chunked")],
            b"5\r\nhello\r\n0\r\n\r\n",
        )
        .await;
        assert!(
            chunked.is_err(),
            "a malformed head is a stream error: {chunked:?}"
        );
        let upgrade = h3_request(
            &mut h3,
            b"GET",
            "/body/e",
            &[("upgrade", "websocket"), ("connection", "upgrade")],
            b"",
        )
        .await;
        assert!(
            upgrade.is_err(),
            "a malformed head is a stream error: {upgrade:?}"
        );
        let te = h3_request(&mut h3, b"GET", "/body/f", &[("te", "gzip")], b"").await;
        assert!(te.is_err(), "a malformed head is a stream error: {te:?}");
    });
    let seen = seen.lock().unwrap();
    let paths: Vec<(String, Vec<u8>)> = seen
        .iter()
        .map(|(h, b)| (h.lines().next().unwrap_or("").to_string(), b.clone()))
        .collect();
    // The sound body, whole; the short one, streamed, cut off before its 100 bytes.
    let whole: Vec<&(String, Vec<u8>)> = paths.iter().filter(|(_, b)| !b.is_empty()).collect();
    assert_eq!(
        whole,
        [&("POST /body/a HTTP/1.0".to_string(), b"hello".to_vec())],
        "{paths:?}\n{}",
        server.stderr_text()
    );
    assert!(
        paths
            .iter()
            .all(|(l, _)| l.starts_with("POST /body/a ") || l.starts_with("POST /nobuf/c ")),
        "{paths:?}"
    );
}

/// A TLS 1.3 client offering `h2` that resumes with early data.
fn early_h2_config() -> Arc<rustls::ClientConfig> {
    let mut c = (*rust_client_config(&[b"h2"])).clone();
    c.enable_early_data = true;
    Arc::new(c)
}

/// An HTTP/2 frame head.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The client's preface, SETTINGS and a GET on stream 1: with END_STREAM on its HEADERS when
/// `body` is None, else followed by one DATA frame ending the stream.
fn h2_get(path: &str, body: Option<&[u8]>) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    let block = loona_hpack::Encoder::new().encode([
        (&b":method"[..], &b"GET"[..]),
        (b":scheme", b"https"),
        (b":authority", b"a.test"),
        (b":path", path.as_bytes()),
    ]);
    let end_stream = if body.is_none() { 0x1 } else { 0 };
    out.extend(frame(0x1, 0x4 | end_stream, 1, &block));
    if let Some(b) = body {
        out.extend(frame(0x0, 0x1, 1, b));
    }
    out
}

/// Reads frames from `conn` until stream 1's HEADERS: its `:status`. Sends nothing (the
/// client's Finished stays unsent while it is early data).
fn h2_status(conn: &mut rustls::ClientConnection, sock: &mut TcpStream) -> u16 {
    let mut got = Vec::new();
    let mut decoder = loona_hpack::Decoder::new();
    loop {
        let mut at = 0;
        while got.len() >= at + 9 {
            let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
            let end = at + 9 + len;
            if got.len() < end {
                break;
            }
            let (kind, stream) = (
                got[at + 3],
                u32::from_be_bytes(got[at + 5..at + 9].try_into().unwrap()) & 0x7fff_ffff,
            );
            if kind == 0x3 && stream == 1 {
                panic!("stream 1 reset");
            }
            if kind == 0x1 && stream == 1 {
                let fields = decoder.decode(&got[at + 9..end]).expect("HPACK");
                let status = fields
                    .iter()
                    .find(|(n, _)| n == b":status")
                    .map(|(_, v)| String::from_utf8_lossy(v).parse().unwrap())
                    .expect(":status");
                return status;
            }
            at = end;
        }
        let n = conn.read_tls(sock).expect("read from the server");
        assert!(n > 0, "server closed");
        conn.process_new_packets().expect("TLS");
        let mut chunk = [0u8; 4096];
        loop {
            match conn.reader().read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
    }
}

/// An HTTP/2 exchange in early data on a resumed connection: the `:status` of a GET to
/// `path` (with `body` as DATA), and whether the server took the early data.
fn h2_early(
    cfg: &Arc<rustls::ClientConfig>,
    port: u16,
    path: &str,
    body: Option<&[u8]>,
) -> (u16, bool) {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut conn =
        rustls::ClientConnection::new(cfg.clone(), "a.test".try_into().unwrap()).expect("client");
    let req = h2_get(path, body);
    let mut early = conn.early_data().expect("a ticket that allows early data");
    assert_eq!(early.write(&req).unwrap(), req.len());
    let mut wire = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut wire).unwrap();
    }
    sock.write_all(&wire).expect("first flight");
    let status = h2_status(&mut conn, &mut sock);
    (status, conn.is_early_data_accepted())
}

/// Hole 4: a request from TLS early data is served only if it is a GET or HEAD whose body is
/// known empty. Over HTTP/2 a GET may carry DATA without a `content-length`: 425.
#[test]
fn early_data_with_a_body_is_too_early_over_http2() {
    let (server, port, _, _) = start("holes-early-h2");
    let cfg = early_h2_config();
    // A full handshake leaves a ticket.
    let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut conn =
        rustls::ClientConnection::new(cfg.clone(), "a.test".try_into().unwrap()).expect("client");
    conn.writer().write_all(&h2_get("/full", None)).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).expect("handshake");
    }
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap();
    }
    assert_eq!(h2_status(&mut conn, &mut sock), 200);
    drop((conn, sock));
    let (status, accepted) = h2_early(&cfg, port, "/a", None);
    assert!(accepted, "0-RTT accepted");
    assert_eq!(status, 200, "a bodiless GET in early data is served");
    let (status, accepted) = h2_early(&cfg, port, "/b", Some(b"seventeen bytes!!"));
    assert!(accepted, "0-RTT accepted");
    assert_eq!(status, 425, "{}", server.stderr_text());
}

/// Hole 4 over HTTP/3: a 0-RTT GET with a body (no `content-length`) is 425; one without is
/// served from early data.
#[test]
fn early_data_with_a_body_is_too_early_over_http3() {
    let (server, port, _, _) = start("holes-early-h3");
    rt().block_on(async {
        let ep = quic_client();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        // A full handshake; its answer comes after the tickets.
        {
            let mut h3 = h3_connect(&ep, port).await;
            let r = h3_request(&mut h3, b"GET", "/full", &[], b"").await;
            assert_eq!(r.map(|r| r.0), Ok(200));
        }
        for (path, body, want) in [
            ("/a", &b""[..], 200u16),
            ("/b", &b"seventeen bytes!!"[..], 425),
        ] {
            let connecting = ep.connect(addr, "a.test").expect("connect");
            let (conn, accepted) = match connecting.into_0rtt() {
                Ok(c) => c,
                Err(_) => panic!("no 0-RTT: the ticket was not kept"),
            };
            let mut h3 = h3_over(conn).await;
            let r = h3_request(&mut h3, b"GET", path, &[], body).await;
            assert!(accepted.await, "0-RTT accepted");
            let (status, text) = r.expect("answered");
            assert_eq!(
                status,
                want,
                "{path}: {}\n{}",
                String::from_utf8_lossy(&text),
                server.stderr_text()
            );
            if want == 200 {
                assert_eq!(text, b"early=1\n");
            }
        }
    });
}
