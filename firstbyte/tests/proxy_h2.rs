//! `proxy_http_version 2`: HTTP/2 to upstreams, against an HTTP/2 upstream built here on
//! hyper's server (h2c with prior knowledge, and TLS with ALPN `h2`): what goes up (method,
//! `:authority`, headers without the connection-specific ones, the body, buffered or
//! streamed), keepalive reuse, and the refusals (an upstream that picks HTTP/1.1 by ALPN or
//! does not speak HTTP/2, a malformed HTTP/2 response: 502, and the server goes on).

mod support;

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use support::*;

/// A response body of the frames given (data, then maybe trailers).
struct Frames(std::collections::VecDeque<Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        // Exact unless trailers follow: the upstream then sends `content-length`.
        if self.0.iter().any(|f| f.is_trailers()) {
            return http_body::SizeHint::default();
        }
        let n: usize = self
            .0
            .iter()
            .filter_map(|f| f.data_ref())
            .map(|d| d.len())
            .sum();
        http_body::SizeHint::with_exact(n as u64)
    }
}

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    scheme: String,
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An upstream on 127.0.0.1: its port, connections accepted, requests seen.
struct Up {
    port: u16,
    conns: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Up {
    fn last(&self) -> Seen {
        self.seen
            .lock()
            .expect("seen")
            .last()
            .cloned()
            .expect("a request reached the upstream")
    }
}

/// A TLS server config for `localhost` offering `alpn`.
fn tls_config(alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(certs().cert("localhost"))
            .expect("cert file")
            .map(|c| c.expect("cert"))
            .collect();
    let key = PrivateKeyDer::from_pem_file(certs().key("localhost")).expect("key");
    let mut c = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// An upstream served by hyper: HTTP/2 (`h2`) or HTTP/1.1, through TLS when `tls` is given.
/// It answers 200 with `x-conn` (the connection's number), `x-lower`, and a body naming the
/// method, path and request body it got; under `/tr`, with a trailer `x-up: 1` (announced).
fn hyper_upstream(tls: Option<Arc<rustls::ServerConfig>>, h2: bool) -> Up {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let port = l.local_addr().expect("addr").port();
    let conns = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (c2, s2) = (conns.clone(), seen.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).expect("listener");
            while let Ok((s, _)) = l.accept().await {
                let n = c2.fetch_add(1, Ordering::SeqCst) + 1;
                let seen = s2.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes().to_vec())
                                .unwrap_or_default();
                            let text = format!(
                                "{} {} [{}]",
                                parts.method,
                                parts.uri.path(),
                                String::from_utf8_lossy(&body)
                            );
                            seen.lock().expect("seen").push(Seen {
                                method: parts.method.to_string(),
                                scheme: parts.uri.scheme_str().unwrap_or("").to_string(),
                                authority: parts
                                    .uri
                                    .authority()
                                    .map(|a| a.to_string())
                                    .unwrap_or_default(),
                                path: parts.uri.path().to_string(),
                                headers: parts
                                    .headers
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_string(),
                                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                                        )
                                    })
                                    .collect(),
                                body,
                            });
                            let mut frames =
                                std::collections::VecDeque::from([Frame::data(Bytes::from(text))]);
                            let mut resp = Response::builder()
                                .header("x-conn", n.to_string())
                                .header("x-lower", "yes");
                            if parts.uri.path().starts_with("/tr") {
                                let mut t = http::HeaderMap::new();
                                t.insert("x-up", http::HeaderValue::from_static("1"));
                                t.insert("x-secret", http::HeaderValue::from_static("s"));
                                frames.push_back(Frame::trailers(t));
                                resp = resp.header("trailer", "x-up, x-secret");
                            }
                            let resp = resp.body(Frames(frames)).expect("response");
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    match (tls, h2) {
                        (None, true) => {
                            let b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                            let _ = b.serve_connection(TokioIo::new(s), svc).await;
                        }
                        (Some(cfg), true) => {
                            let Ok(t) = tokio_rustls::TlsAcceptor::from(cfg).accept(s).await else {
                                return;
                            };
                            // Only a client that offered `h2` by ALPN is served.
                            if t.get_ref().1.alpn_protocol() != Some(b"h2".as_slice()) {
                                return;
                            }
                            let b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                            let _ = b.serve_connection(TokioIo::new(t), svc).await;
                        }
                        (None, false) => {
                            let b = hyper::server::conn::http1::Builder::new();
                            let _ = b.serve_connection(TokioIo::new(s), svc).await;
                        }
                        (Some(cfg), false) => {
                            let Ok(t) = tokio_rustls::TlsAcceptor::from(cfg).accept(s).await else {
                                return;
                            };
                            let b = hyper::server::conn::http1::Builder::new();
                            let _ = b.serve_connection(TokioIo::new(t), svc).await;
                        }
                    }
                });
            }
        });
    });
    Up { port, conns, seen }
}

/// One request over a new connection; the whole response.
fn http(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(request.as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(port: u16, path: &str) -> String {
    http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

fn status(resp: &str) -> u16 {
    resp.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn body(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    upstream pooled {
        server 127.0.0.1:{port1};
        keepalive 4;
    }
    server {
        listen 127.0.0.1:{port0};
        proxy_http_version 2;
        location / {
            proxy_pass http://127.0.0.1:{port1};
        }
        location /host/ {
            proxy_pass http://127.0.0.1:{port1};
            proxy_set_header Host backend.example;
            proxy_set_header Connection "keep-alive, x-listed";
            proxy_set_header X-Listed dropped;
            proxy_set_header Keep-Alive 300;
            proxy_set_header Proxy-Connection keep-alive;
            proxy_set_header Upgrade websocket;
            proxy_set_header TE gzip;
            proxy_set_header X-Kept kept;
        }
        location /trailers/ {
            proxy_pass http://127.0.0.1:{port1};
            proxy_set_header TE trailers;
        }
        location /trpass/ {
            proxy_pass http://127.0.0.1:{port1};
            proxy_pass_trailers on;
            proxy_hide_header X-Secret;
        }
        location /trdrop/ {
            proxy_pass http://127.0.0.1:{port1};
        }
        location /put/ {
            proxy_pass http://127.0.0.1:{port1};
            proxy_method PUT;
        }
        location /stream/ {
            proxy_pass http://127.0.0.1:{port1};
            proxy_request_buffering off;
        }
        location /pool/ {
            proxy_pass http://pooled;
        }
        location /tls/ {
            proxy_pass https://127.0.0.1:{port2};
        }
        location /tls-h1/ {
            proxy_pass https://127.0.0.1:{port3};
        }
        location /tls-noalpn/ {
            proxy_pass https://127.0.0.1:{port4};
        }
        location /plain-h1/ {
            proxy_pass http://127.0.0.1:{port5};
        }
        location /bad/ {
            proxy_pass http://127.0.0.1:{port6};
        }
    }
}
"#;

/// Ports 1..=6 are upstreams made by the caller; the server is started on port 0.
fn start(ups: &[u16]) -> (Server, u16) {
    let dir = tempdir("proxy-h2");
    let mut ports = vec![free_port()];
    ports.extend_from_slice(ups);
    let conf = render(CONF, &dir, &ports);
    (Server::start_in(&dir, &conf, ports[0]), ports[0])
}

/// An upstream that answers an HTTP/2 request's HEADERS with a header block of its own
/// (`block`, HPACK-encoded; END_STREAM), in HEADERS and CONTINUATION frames of 16 KiB.
fn raw_h2_upstream(block: Vec<u8>) -> u16 {
    upstream(move |mut c| {
        let mut preface = [0u8; 24];
        if c.read_exact(&mut preface).is_err() {
            return;
        }
        let mut out = vec![0, 0, 0, 4, 0, 0, 0, 0, 0]; // SETTINGS, empty
        let chunks: Vec<&[u8]> = block.chunks(16384).collect();
        for (i, part) in chunks.iter().enumerate() {
            let kind = if i == 0 { 1 } else { 9 }; // HEADERS, CONTINUATION
            let mut flags = if i == 0 { 1 } else { 0 }; // END_STREAM
            if i + 1 == chunks.len() {
                flags |= 4; // END_HEADERS
            }
            let n = part.len();
            out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags]);
            out.extend_from_slice(&[0, 0, 0, 1]);
            out.extend_from_slice(part);
        }
        // Wait for the request's HEADERS before answering.
        let mut buf = [0u8; 4096];
        let _ = c.set_read_timeout(Some(Duration::from_millis(300)));
        let _ = c.read(&mut buf);
        let _ = c.write_all(&out);
        while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
    })
    .0
}

/// An HPACK literal field without indexing, new name (RFC 7541 §6.2.2), lengths as integers
/// with a 7-bit prefix, no Huffman.
fn literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    fn int(out: &mut Vec<u8>, mut n: usize) {
        if n < 127 {
            out.push(n as u8);
            return;
        }
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push((n % 128 + 128) as u8);
            n /= 128;
        }
        out.push(n as u8);
    }
    let mut out = vec![0x00];
    int(&mut out, name.len());
    out.extend_from_slice(name);
    int(&mut out, value.len());
    out.extend_from_slice(value);
    out
}

/// A malformed response: `:status: 200` (indexed 8) with `connection: keep-alive`, which
/// RFC 9113 §8.2.2 forbids.
fn malformed_upstream() -> u16 {
    let mut block = vec![0x88];
    block.extend(literal(b"connection", b"keep-alive"));
    raw_h2_upstream(block)
}

/// A response header of `size` bytes in one field (`x-big`), after `:status: 200`.
fn big_header_upstream(size: usize) -> u16 {
    let mut block = vec![0x88];
    block.extend(literal(b"x-big", &vec![b'a'; size]));
    raw_h2_upstream(block)
}

#[test]
fn h2c_request_goes_up_whole() {
    let up = hyper_upstream(None, true);
    let (_s, port) = start(&[up.port, 1, 1, 1, 1, 1]);

    // GET: method, scheme, :authority ($proxy_host), path and query.
    let r = get(port, "/a/b?c=d");
    assert_eq!(status(&r), 200, "{r}");
    assert_eq!(body(&r), "GET /a/b []");
    let seen = up.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.scheme, "http");
    assert_eq!(seen.authority, format!("127.0.0.1:{}", up.port));
    assert_eq!(seen.path, "/a/b");
    assert!(seen.header("host").is_none(), "{seen:?}");
    // The upstream's names as it sent them (lower case), as nginx passes them.
    assert!(r.contains("\r\nx-lower: yes\r\n"), "{r}");

    // POST with a body read whole first: its length goes up with it.
    let r = http(
        port,
        "POST /post HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(body(&r), "POST /post [hello]", "{r}");
    let seen = up.last();
    assert_eq!(seen.body, b"hello");
    assert_eq!(seen.header("content-length"), Some("5"));

    // A chunked body streamed (`proxy_request_buffering off`): DATA frames, no chunked.
    let r = http(
        port,
        "POST /stream/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    assert_eq!(body(&r), "POST /stream/x [abcdefg]", "{r}");
    let seen = up.last();
    assert!(seen.header("transfer-encoding").is_none(), "{seen:?}");

    // proxy_method.
    let r = get(port, "/put/it");
    assert_eq!(body(&r), "PUT /put/it []", "{r}");
}

#[test]
fn connection_specific_fields_are_not_sent() {
    let up = hyper_upstream(None, true);
    let (_s, port) = start(&[up.port, 1, 1, 1, 1, 1]);
    let r = get(port, "/host/x");
    assert_eq!(status(&r), 200, "{r}");
    let seen = up.last();
    // Host becomes :authority.
    assert_eq!(seen.authority, "backend.example");
    assert!(seen.header("host").is_none(), "{seen:?}");
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "upgrade",
        "te",
        "transfer-encoding",
        "x-listed",
    ] {
        assert!(seen.header(name).is_none(), "{name} went up: {seen:?}");
    }
    assert_eq!(seen.header("x-kept"), Some("kept"));

    // `TE: trailers` is the one TE HTTP/2 allows.
    let r = get(port, "/trailers/x");
    assert_eq!(status(&r), 200, "{r}");
    assert_eq!(up.last().header("te"), Some("trailers"));
}

#[test]
fn keepalive_reuses_the_connection_one_stream_at_a_time() {
    let up = hyper_upstream(None, true);
    let (_s, port) = start(&[up.port, 1, 1, 1, 1, 1]);
    for i in 0..3 {
        let r = get(port, &format!("/pool/{i}"));
        assert_eq!(status(&r), 200, "{r}");
        assert!(r.contains("\r\nx-conn: 1\r\n"), "request {i}: {r}");
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), 1);
    // Without `keepalive`, each request has its own connection.
    let before = up.conns.load(Ordering::SeqCst);
    for _ in 0..2 {
        assert_eq!(status(&get(port, "/x")), 200);
    }
    assert_eq!(up.conns.load(Ordering::SeqCst), before + 2);
}

#[test]
fn tls_with_alpn_h2_and_the_refusals() {
    let h2 = hyper_upstream(Some(tls_config(&[b"h2"])), true);
    let h1 = hyper_upstream(Some(tls_config(&[b"http/1.1"])), false);
    let none = hyper_upstream(Some(tls_config(&[])), false);
    let plain_h1 = hyper_upstream(None, false);
    let bad = malformed_upstream();
    let (s, port) = start(&[1, h2.port, h1.port, none.port, plain_h1.port, bad]);

    let r = get(port, "/tls/x");
    assert_eq!(status(&r), 200, "{r}");
    assert_eq!(body(&r), "GET /tls/x []");
    let seen = h2.last();
    assert_eq!(seen.scheme, "https");

    // An upstream that chooses HTTP/1.1 by ALPN, one with no ALPN that speaks only HTTP/1.1
    // (it gets the HTTP/2 preface anyway, as from nginx), an h2c request to an HTTP/1.1
    // server, and a malformed HTTP/2 response: 502 each, nothing reaches a handler.
    for path in ["/tls-h1/x", "/tls-noalpn/x", "/plain-h1/x", "/bad/x"] {
        let r = get(port, path);
        assert_eq!(status(&r), 502, "{path}: {r}");
    }
    assert!(h1.seen.lock().expect("seen").is_empty());
    assert!(none.seen.lock().expect("seen").is_empty());
    assert!(plain_h1.seen.lock().expect("seen").is_empty());

    // The server goes on.
    assert_eq!(status(&get(port, "/tls/again")), 200);
    let log = std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("[error]"), "failures are logged: {log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// `proxy_pass_trailers`: on, the upstream's trailer section reaches a client that takes
/// trailers (HTTP/1.1 `TE: trailers`, with the upstream's `Trailer` naming them), less the
/// fields `proxy_hide_header` hides; off (nginx's default), it is dropped.
#[test]
fn upstream_trailers_pass_only_when_asked() {
    let up = hyper_upstream(None, true);
    let (_s, port) = start(&[up.port, 1, 1, 1, 1, 1]);
    let req = |path: &str| {
        http(
            port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: localhost\r\nTE: trailers\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    let r = req("/trpass/x");
    assert_eq!(status(&r), 200, "{r}");
    // (hyper writes trailer names title-cased.)
    assert!(
        r.to_ascii_lowercase().contains("\r\n0\r\nx-up: 1\r\n\r\n"),
        "{r}"
    );
    assert!(!r.to_ascii_lowercase().contains("x-secret: s"), "{r}");
    let r = req("/trdrop/x");
    assert_eq!(status(&r), 200, "{r}");
    assert!(r.contains("GET /trdrop/x []"), "{r}");
    assert!(!r.contains("x-up"), "{r}");
}

/// An upstream's response header list is bounded (SETTINGS_MAX_HEADER_LIST_SIZE: 64k, or
/// `proxy_buffer_size` when larger): one past it is a 502, not memory; one within passes.
#[test]
fn response_header_list_is_bounded() {
    let small = big_header_upstream(40_000);
    let big = big_header_upstream(100_000);
    // The locations of ports 5 and 6 (`/plain-h1/`, `/bad/`) are plain h2c ones.
    let (_s, port) = start(&[1, 1, 1, 1, small, big]);
    let r = get(port, "/plain-h1/x");
    assert_eq!(status(&r), 200, "{}", &r[..r.len().min(300)]);
    assert!(r.contains("x-big: aaaa"));
    let r = get(port, "/bad/x");
    assert_eq!(status(&r), 502, "{}", &r[..r.len().min(300)]);
}
