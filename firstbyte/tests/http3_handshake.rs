//! QUIC handshakes at the edges: a client that never answers gets at most three times what it
//! sent (RFC 9000 §8.1) on every configuration, counted over seconds of retransmissions; a
//! ClientHello in two datagrams (an X25519MLKEM768 key share, as Chrome's) with
//! `ssl_early_data on` gets its response, fresh and resumed in 0-RTT, from the server block its
//! SNI names; `$ssl_session_reused` and `$ssl_cipher` over HTTP/3; and a request stream whose
//! request was read is stopped with H3_NO_ERROR.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use support::{AnyCert, Server};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A quinn client accepting any certificate: ALPN h3, key shares X25519MLKEM768 first (`pq`:
/// a ClientHello in two datagrams) or X25519 only (one), offering `decompressors`, with
/// 0-RTT enabled (used when a ticket allows it).
fn client(
    pq: bool,
    decompressors: &[&'static dyn rustls::compress::CertDecompressor],
) -> quinn::Endpoint {
    use rustls::crypto::aws_lc_rs::kx_group;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = if pq {
        vec![kx_group::X25519MLKEM768, kx_group::X25519]
    } else {
        vec![kx_group::X25519]
    };
    let provider = Arc::new(provider);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.cert_decompressors = decompressors.to_vec();
    tls.enable_early_data = true;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

// ---------------------------------------------------------------------------------------
// Anti-amplification

/// The datagrams of a quinn client's first flight: it connects to a socket of ours that
/// never answers, and what arrives in the first moment (its ClientHello: one datagram, or two
/// with the post-quantum key share) is kept.
async fn captured_first_flight(ep: &quinn::Endpoint) -> Vec<Vec<u8>> {
    let trap = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let connecting = ep
        .connect(trap.local_addr().unwrap(), "localhost")
        .expect("connect");
    let mut buf = vec![0u8; 65536];
    let mut flight = Vec::new();
    let (n, _) = tokio::time::timeout(Duration::from_secs(10), trap.recv_from(&mut buf))
        .await
        .expect("the client's Initial")
        .unwrap();
    flight.push(buf[..n].to_vec());
    // The rest of the same flight follows at once; the client's first retransmission comes
    // only after its probe timeout (about a second).
    while let Ok(r) =
        tokio::time::timeout(Duration::from_millis(300), trap.recv_from(&mut buf)).await
    {
        flight.push(buf[..r.unwrap().0].to_vec());
    }
    drop(connecting);
    ep.close(0u32.into(), b"");
    flight
}

/// Sends `flight` from a fresh socket to `port` and never answers: the bytes that come back in
/// `over` (the server's first flight and its retransmissions), datagram by datagram.
async fn answers_to(flight: &[Vec<u8>], port: u16, over: Duration) -> Vec<usize> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    for d in flight {
        sock.send(d).await.unwrap();
    }
    let end = tokio::time::Instant::now() + over;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(Ok(n)) = tokio::time::timeout_at(end, sock.recv(&mut buf)).await {
        got.push(n);
    }
    got
}

/// A server on `port` in `dir` with `cert` (a chain of `support::ca_shaped_chains`) and
/// `extra` directives in its `http` block.
fn amp_server(dir: &Path, cert: &str, extra: &str) -> (Server, u16) {
    let port = support::free_port();
    let conf = support::render(
        &format!(
            r#"
error_log {{dir}}/error.log info;
events {{}}
http {{
    access_log off;
    {extra}
    server {{
        listen 127.0.0.1:{{port0}} ssl;
        listen 127.0.0.1:{{port0}} quic;
        server_name localhost;
        ssl_certificate {{dir}}/{cert}.crt;
        ssl_certificate_key {{dir}}/{cert}.key;
    }}
}}
"#
        ),
        dir,
        &[port],
    );
    (Server::start_in(dir, &conf, port), port)
}

/// RFC 9000 §8.1: before a client's address is validated, the server sends at most three
/// times the bytes it received from it. A real client's first flight is sent once from a
/// socket that then never answers; every byte that comes back over four seconds (the first
/// flight and each retransmission) is counted, on configurations whose first flight is larger
/// than the limit: `ssl_early_data on`, a three-certificate RSA chain sent whole, the same
/// compressed; with a ClientHello of one datagram (the tightest budget) and of two.
#[test]
fn an_address_that_never_answers_gets_at_most_three_times_what_it_sent() {
    use rustls::compress::BROTLI_DECOMPRESSOR;
    let dir = support::tempdir("h3hs-amp");
    support::ca_shaped_chains(&dir);
    let rt = rt();
    let _in = rt.enter();
    let cases: [(
        &str,
        &str,
        &str,
        &[&'static dyn rustls::compress::CertDecompressor],
    ); 3] = [
        (
            "builtin",
            "ssl_early_data on; ssl_session_cache shared:amp:1m;",
            "ssl_early_data on",
            &[],
        ),
        ("rsa3", "", "rsa3 uncompressed", &[]),
        (
            "rsa3",
            "ssl_certificate_compression on; ssl_early_data on; ssl_session_cache shared:amp:1m;",
            "rsa3 brotli, ssl_early_data on",
            &[BROTLI_DECOMPRESSOR],
        ),
    ];
    let mut report = Vec::new();
    let mut over = Vec::new();
    for (cert, extra, label, offer) in cases {
        let sdir = dir.join(label.replace([' ', ','], "_"));
        std::fs::create_dir_all(&sdir).unwrap();
        for f in ["builtin", "rsa3"] {
            for ext in ["crt", "key"] {
                std::fs::copy(
                    dir.join(format!("{f}.{ext}")),
                    sdir.join(format!("{f}.{ext}")),
                )
                .unwrap();
            }
        }
        let (mut server, port) = amp_server(&sdir, cert, extra);
        for pq in [false, true] {
            let flight = rt.block_on(captured_first_flight(&client(pq, offer)));
            let sent: usize = flight.iter().map(Vec::len).sum();
            assert_eq!(flight.len(), if pq { 2 } else { 1 }, "{label}: {flight:?}");
            let back = rt.block_on(answers_to(&flight, port, Duration::from_secs(4)));
            let got: usize = back.iter().sum();
            let line = format!(
                "{label} ({}): sent {} datagram(s) {sent} B; back {} datagram(s) {got} B ({back:?}), limit {} B",
                if pq { "X25519MLKEM768" } else { "X25519" },
                flight.len(),
                back.len(),
                3 * sent
            );
            eprintln!("{line}");
            assert!(!back.is_empty(), "no answer at all: {line}");
            if got > 3 * sent {
                over.push(line.clone());
            }
            report.push(line);
        }
        server.signal(libc::SIGTERM);
        server.wait_exit(Duration::from_secs(10));
    }
    assert!(
        over.is_empty(),
        "over the limit:\n{}\n\nall:\n{}",
        over.join("\n"),
        report.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// A ClientHello in two datagrams, with early data on

/// A UDP relay to `port` for one client: it forwards both ways and counts the client's
/// Initial datagrams before the server's first answer (its ClientHello's, and a
/// retransmission if the server took a probe timeout to answer). With `hold`, client
/// datagrams that open with a Handshake packet (its Finished) wait until [`Relay::release`]:
/// what the server answers meanwhile it answers before its handshake completes.
struct Relay {
    addr: SocketAddr,
    first_flight: Arc<std::sync::Mutex<(usize, bool)>>,
    release: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(port: u16, hold: bool) -> Relay {
        let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let back = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        back.connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        let addr = front.local_addr().unwrap();
        let first_flight = Arc::new(std::sync::Mutex::new((0, false)));
        let release = Arc::new(tokio::sync::Notify::new());
        let (tally, released) = (first_flight.clone(), release.clone());
        let task = tokio::spawn(async move {
            let mut client = None;
            let mut held: Option<Vec<Vec<u8>>> = hold.then(Vec::new);
            let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
            let released = released.notified();
            tokio::pin!(released);
            loop {
                tokio::select! {
                    r = front.recv_from(&mut a) => {
                        let Ok((n, from)) = r else { return };
                        client = Some(from);
                        {
                            // Datagrams opening with an Initial packet (long header, type 0).
                            let mut t = tally.lock().unwrap();
                            if !t.1 && a[0] & 0x80 != 0 && (a[0] >> 4) & 3 == 0 {
                                t.0 += 1;
                            }
                        }
                        // After the server's first flight, the client's Initial (its ACK) and
                        // Handshake packets (its Finished) come in one datagram, opening with
                        // a long header (0x80) of type Initial (0) or Handshake (2); its 0-RTT
                        // packets are type 1.
                        let answered = tally.lock().unwrap().1;
                        let finished = answered && a[0] & 0x80 != 0 && (a[0] >> 4) & 3 != 1;
                        match &mut held {
                            Some(h) if finished || !h.is_empty() => h.push(a[..n].to_vec()),
                            _ => {
                                let _ = back.send(&a[..n]).await;
                            }
                        }
                    }
                    r = back.recv(&mut b) => {
                        let Ok(n) = r else { return };
                        tally.lock().unwrap().1 = true;
                        if let Some(c) = client {
                            let _ = front.send_to(&b[..n], c).await;
                        }
                    }
                    _ = &mut released, if held.is_some() => {
                        for d in held.take().unwrap_or_default() {
                            let _ = back.send(&d).await;
                        }
                    }
                }
            }
        });
        Relay {
            addr,
            first_flight,
            release,
            task,
        }
    }

    /// The client's Initial datagrams before the server's first answer.
    fn client_hello_datagrams(&self) -> usize {
        self.first_flight.lock().unwrap().0
    }

    /// Lets held datagrams (and all later ones) through.
    fn release(&self) {
        self.release.notify_one();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client TLS config trusting the tests' CA (so a wrong certificate for the name fails):
/// X25519MLKEM768 first when `pq`, the `suites` given (all when empty), early data enabled;
/// its session store is kept by every endpoint made with it.
fn verifying_tls(
    pq: bool,
    suites: &[rustls::SupportedCipherSuite],
) -> Arc<quinn::crypto::rustls::QuicClientConfig> {
    use rustls::crypto::aws_lc_rs::kx_group;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(support::certs().ca()).expect("read CA");
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.expect("CA parses")).expect("CA added");
    }
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = if pq {
        vec![kx_group::X25519MLKEM768, kx_group::X25519]
    } else {
        vec![kx_group::X25519]
    };
    if !suites.is_empty() {
        provider.cipher_suites = suites.to_vec();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = true;
    Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client"))
}

/// A client endpoint of its own (a new source port) with `tls`.
fn endpoint(tls: &Arc<quinn::crypto::rustls::QuicClientConfig>) -> quinn::Endpoint {
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(tls.clone()));
    ep
}

/// GET `path` over `conn` with h3: status and body.
async fn h3_get(conn: quinn::Connection, host: &str, path: &str) -> Result<(u16, String), String> {
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| e.to_string())?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let req = http::Request::get(format!("https://{host}{path}"))
        .body(())
        .unwrap();
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
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
    drive.abort();
    Ok((
        resp.status().as_u16(),
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

/// One connection through a relay to `port` for `sni`: the response to GET /, whether 0-RTT
/// was used and accepted, and the datagrams of the client's ClientHello.
async fn one_connection(
    tls: &Arc<quinn::crypto::rustls::QuicClientConfig>,
    port: u16,
    sni: &str,
    zero_rtt: bool,
) -> (Result<(u16, String), String>, bool, usize) {
    // A 0-RTT request is answered before the client's Finished reaches the server.
    let relay = Relay::start(port, zero_rtt).await;
    let ep = endpoint(tls);
    let connecting = ep.connect(relay.addr, sni).expect("connect");
    // Liveness only: a hung connection fails here, a working one answers in milliseconds.
    let limit = Duration::from_secs(20);
    let (result, early) = if zero_rtt {
        let (conn, accepted) = connecting.into_0rtt().expect("a ticket that allows 0-RTT");
        let r = tokio::time::timeout(limit, h3_get(conn.clone(), sni, "/")).await;
        relay.release();
        let accepted = tokio::time::timeout(limit, accepted).await.unwrap_or(false);
        conn.close(0u32.into(), b"");
        (r, accepted)
    } else {
        let conn = match tokio::time::timeout(limit, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return (
                    Err(format!("handshake: {e}")),
                    false,
                    relay.client_hello_datagrams(),
                )
            }
            Err(_) => {
                return (
                    Err("handshake timed out".into()),
                    false,
                    relay.client_hello_datagrams(),
                )
            }
        };
        let r = tokio::time::timeout(limit, h3_get(conn.clone(), sni, "/")).await;
        conn.close(0u32.into(), b"");
        (r, false)
    };
    let result = result.unwrap_or_else(|_| Err("no response in 20 s".into()));
    ep.wait_idle().await;
    (result, early, relay.client_hello_datagrams())
}

const TWO_SERVERS: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log {dir}/access.log;
    ssl_session_cache shared:hs:1m;
    ssl_early_data on;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location / { return 200 "a sni=$ssl_server_name early=$ssl_early_data\n"; }
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name b.test;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        location / { return 200 "b sni=$ssl_server_name early=$ssl_early_data\n"; }
    }
}
"#;

/// With `ssl_early_data on`, a client whose ClientHello spans two datagrams (X25519MLKEM768
/// first, as Chrome) gets its response, on a fresh connection and on a resumed one whose
/// request rides in 0-RTT; and from the server block its SNI names (not the address's
/// default), with that block's certificate (the client checks it against the name).
#[test]
fn a_two_datagram_client_hello_is_answered_with_early_data_on() {
    let (server, ports) = Server::start("h3hs-pq", TWO_SERVERS, 1);
    let port = ports[0];
    let rt = rt();
    let _in = rt.enter();
    for sni in ["b.test", "a.test"] {
        let tls = verifying_tls(true, &[]);
        let (fresh, _, datagrams) = rt.block_on(one_connection(&tls, port, sni, false));
        // Exactly 2 in the amplification test above, for the same key shares.
        assert!(datagrams >= 2, "{sni}: the ClientHello spans two datagrams");
        let host = &sni[..1];
        assert_eq!(
            fresh,
            Ok((200, format!("{host} sni={sni} early=\n"))),
            "{sni}, fresh\n{}",
            server.stderr_text()
        );
        let (resumed, accepted, datagrams) = rt.block_on(one_connection(&tls, port, sni, true));
        assert!(
            datagrams >= 2,
            "{sni}: the resumed ClientHello spans two datagrams too"
        );
        assert!(accepted, "{sni}: 0-RTT accepted");
        assert_eq!(
            resumed,
            Ok((200, format!("{host} sni={sni} early=1\n"))),
            "{sni}, resumed\n{}",
            server.stderr_text()
        );
    }
}

// ---------------------------------------------------------------------------------------
// STOP_SENDING on request streams

/// A GET for `authority` / as an HTTP/3 HEADERS frame, QPACK with the static table only.
fn get_headers(authority: &str) -> Vec<u8> {
    // Required Insert Count 0, Base 0; :method GET (17), :scheme https (23), :path / (1)
    // indexed; :authority (0) a literal with a static name reference.
    let mut block = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23, 0xc0 | 1, 0x50];
    block.push(authority.len() as u8);
    block.extend_from_slice(authority.as_bytes());
    let mut frame = vec![0x01, block.len() as u8];
    frame.extend(block);
    frame
}

/// A request stream whose body the server did not read is stopped with H3_NO_ERROR (0x100),
/// not 0 (quinn's when a stream is dropped unread): one the client left open (a GET without
/// its FIN) and one it finished, which is stopped too or acknowledged first.
#[test]
fn an_unread_request_body_is_stopped_with_h3_no_error() {
    let conf = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location / { return 200 "ok\n"; }
    }
}
"#;
    let (server, ports) = Server::start("h3hs-stop", conf, 1);
    let rt = rt();
    let _in = rt.enter();
    let ep = endpoint(&verifying_tls(false, &[]));
    rt.block_on(async {
        let addr = SocketAddr::from(([127, 0, 0, 1], ports[0]));
        let conn = ep
            .connect(addr, "a.test")
            .unwrap()
            .await
            .expect("handshake");
        // The client's control stream: its type and an empty SETTINGS frame.
        let mut control = conn.open_uni().await.unwrap();
        control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
        let limit = Duration::from_secs(20);
        for finish in [false, true] {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            send.write_all(&get_headers("a.test")).await.unwrap();
            if finish {
                send.finish().unwrap();
            }
            // The response arrives whole (HEADERS and DATA, then the stream's end).
            let resp = tokio::time::timeout(limit, recv.read_to_end(4096))
                .await
                .expect("a response in time")
                .expect("a response");
            assert!(
                resp.ends_with(b"ok\n"),
                "{resp:?}\n{}",
                server.stderr_text()
            );
            let stopped = tokio::time::timeout(limit, send.stopped())
                .await
                .expect("stopped or acknowledged in time");
            if finish {
                // Acknowledged (None), or at most stopped with H3_NO_ERROR.
                assert!(
                    matches!(stopped, Ok(None)) || stopped == Ok(Some(0x100u32.into())),
                    "finished request: {stopped:?}"
                );
            } else {
                assert_eq!(
                    stopped,
                    Ok(Some(0x100u32.into())),
                    "unfinished request\n{}",
                    server.stderr_text()
                );
            }
        }
        conn.close(0u32.into(), b"");
    });
}

// ---------------------------------------------------------------------------------------
// TLS variables

/// `$ssl_session_reused` and `$ssl_cipher` over HTTP/3, as over TCP: `.` then `r` when the
/// next connection resumes the session, and OpenSSL's name of the suite the client got (its
/// first choice; QUIC's Initial packets need AES-128-GCM offered too).
#[test]
fn ssl_session_reused_and_ssl_cipher_over_http3() {
    let conf = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_session_cache shared:vars:1m;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location / { return 200 "$ssl_session_reused $ssl_cipher\n"; }
    }
}
"#;
    use rustls::crypto::aws_lc_rs::cipher_suite as cs;
    let (server, ports) = Server::start("h3hs-vars", conf, 1);
    let rt = rt();
    let _in = rt.enter();
    for (suite, name) in [
        (cs::TLS13_AES_128_GCM_SHA256, "TLS_AES_128_GCM_SHA256"),
        (
            cs::TLS13_CHACHA20_POLY1305_SHA256,
            "TLS_CHACHA20_POLY1305_SHA256",
        ),
        (cs::TLS13_AES_256_GCM_SHA384, "TLS_AES_256_GCM_SHA384"),
    ] {
        let tls = verifying_tls(false, &[suite, cs::TLS13_AES_128_GCM_SHA256]);
        for reused in [".", "r"] {
            let (r, _, _) = rt.block_on(one_connection(&tls, ports[0], "a.test", false));
            assert_eq!(
                r,
                Ok((200, format!("{reused} {name}\n"))),
                "{}",
                server.stderr_text()
            );
        }
    }
}
