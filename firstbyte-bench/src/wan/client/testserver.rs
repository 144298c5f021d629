//! In-process servers for the resuming clients' unit tests: an HTTP/3 server (quinn + h3)
//! and an HTTP/1.1-over-TLS server (tokio-rustls), each with a session cache of its own, so
//! that a ticket one issued is unknown to another: the way to make a server reject 0-RTT.
//! Every response is 200 with a 2-byte body (none for HEAD).

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// TLS 1.3 server config for `alpn`, with its own session cache; `early` allows 0-RTT
/// (QUIC's all-or-nothing size when `quic`).
fn tls(alpn: &[u8], early: bool, quic: bool) -> Arc<rustls::ServerConfig> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("rcgen");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(ck.cert.der().to_vec())], key)
        .expect("certificate");
    tls.alpn_protocols = vec![alpn.to_vec()];
    tls.max_early_data_size = match (early, quic) {
        (false, _) => 0,
        (true, true) => u32::MAX,
        (true, false) => 16384,
    };
    Arc::new(tls)
}

/// Starts an HTTP/3 server on 127.0.0.1 (call inside the runtime that will drive it).
pub fn h3(early: bool) -> SocketAddr {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls(b"h3", early, true))
        .expect("QUIC server config");
    let config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let ep = quinn::Endpoint::server(config, SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind the QUIC server");
    let addr = ep.local_addr().expect("address");
    tokio::spawn(async move {
        while let Some(incoming) = ep.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok(mut h3c) = h3::server::builder()
                    .build::<_, bytes::Bytes>(h3_quinn::Connection::new(conn))
                    .await
                else {
                    return;
                };
                while let Ok(Some(resolver)) = h3c.accept().await {
                    tokio::spawn(async move {
                        let Ok((req, mut stream)) = resolver.resolve_request().await else {
                            return;
                        };
                        let head = http::Response::builder().status(200).body(());
                        let Ok(head) = head else { return };
                        let _ = stream.send_response(head).await;
                        if req.method() != http::Method::HEAD {
                            let _ = stream.send_data(bytes::Bytes::from_static(b"ok")).await;
                        }
                        let _ = stream.finish().await;
                    });
                }
            });
        }
    });
    addr
}

/// Starts an HTTP/1.1-over-TLS server on 127.0.0.1 (call inside the runtime that will drive
/// it). It never reads early data (tokio-rustls' server does not hand it over): the tests use
/// it to issue tickets that allow early data (`early`), and, as another server with its own
/// cache, to reject them.
pub async fn h1(early: bool) -> SocketAddr {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls(b"http/1.1", early, false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = if got.starts_with(b"HEAD ") { "" } else { "ok" };
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{body}"
                );
                let _ = tls.write_all(resp.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}
