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
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
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
        tokio::time::timeout(Duration::from_millis(150), trap.recv_from(&mut buf)).await
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
