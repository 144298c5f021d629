//! A small TLS client that never resumes a session: the load for the full-handshake measure,
//! and the holder of the idle connections for the memory measure.
//!
//! h2load and wrk resume sessions when they reconnect (FACTS.md: 95–99 % resumed), so they
//! cannot measure full handshakes. This client is rustls with the aws-lc-rs provider,
//! `Resumption::disabled()` (no session storage, so no ticket and no session id is ever
//! offered), TLS 1.3 only, AES-128-GCM and X25519 only. It pins the server's certificate
//! instead of building a chain (the server's CPU is what is measured; the client only has to
//! keep up) but still checks the handshake signature. Every connection records rustls'
//! [`HandshakeKind`], so a run proves it saw no resumption. Each connection sends one
//! HTTP/1.1 GET and reads the response to its `Content-Length` ([`parse_response`], pure);
//! the HTTP/2 idle connections do the preface exchange instead ([`super::h2idle`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{aws_lc_rs, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, HandshakeKind, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Accepts exactly one certificate (by its DER bytes) and checks handshake signatures.
#[derive(Debug)]
struct PinnedCert {
    der: Vec<u8>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.der.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// The client config: TLS 1.3, AES-128-GCM, X25519, no resumption, ALPN `http/1.1`, trusting
/// only the certificate `cert_der`.
pub fn config(cert_der: Vec<u8>) -> Result<Arc<ClientConfig>> {
    let mut provider = aws_lc_rs::default_provider();
    provider.cipher_suites = vec![aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256];
    provider.kx_groups = vec![aws_lc_rs::kx_group::X25519];
    let verifier = PinnedCert {
        der: cert_der,
        algs: provider.signature_verification_algorithms,
    };
    let mut cfg = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 with the aws-lc-rs provider")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    cfg.resumption = Resumption::disabled();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// How far a buffer holds an HTTP/1.1 response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Incomplete,
    /// The whole response: its status and total length (head + body).
    Complete {
        /// Status code.
        status: u16,
        /// Bytes of head and body.
        len: usize,
    },
    /// Not a response this client can read (no status, no `Content-Length`).
    Invalid,
}

/// Reads an HTTP/1.1 response head and its `Content-Length` from `buf`.
pub fn parse_response(buf: &[u8]) -> Parsed {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > 64 * 1024 {
            Parsed::Invalid
        } else {
            Parsed::Incomplete
        };
    };
    let Ok(head) = std::str::from_utf8(&buf[..end]) else {
        return Parsed::Invalid;
    };
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| {
            l.strip_prefix("HTTP/1.1 ")
                .or_else(|| l.strip_prefix("HTTP/1.0 "))
        })
        .and_then(|l| l.get(..3))
        .and_then(|c| c.parse::<u16>().ok());
    let length = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    match (status, length) {
        (Some(status), Some(body)) => {
            let len = end + 4 + body;
            if buf.len() >= len {
                Parsed::Complete { status, len }
            } else {
                Parsed::Incomplete
            }
        }
        _ => Parsed::Invalid,
    }
}

/// The GET request for `path` (`close`: ask the server to close after the response).
pub fn request(path: &str, close: bool) -> Vec<u8> {
    let conn = if close { "close" } else { "keep-alive" };
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: {conn}\r\n\r\n").into_bytes()
}

/// Connects, handshakes, sends `req` and reads one whole 200 response.
/// Returns the stream and whether the handshake was a resumption.
async fn fetch(
    addr: SocketAddr,
    connector: &TlsConnector,
    req: &[u8],
) -> Result<(TlsStream<TcpStream>, bool)> {
    let tcp = TcpStream::connect(addr).await.context("connect")?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost")?;
    let mut tls = connector
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let resumed = tls.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed);
    tls.write_all(req).await?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match parse_response(&buf) {
            Parsed::Complete { status: 200, .. } => return Ok((tls, resumed)),
            Parsed::Complete { status, .. } => bail!("status {status}"),
            Parsed::Invalid => bail!("unreadable response"),
            Parsed::Incomplete => {}
        }
        let n = tls.read(&mut chunk).await?;
        if n == 0 {
            bail!("connection closed before the whole response");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// What a handshake load did.
#[derive(Debug, Clone, Copy)]
pub struct LoadReport {
    /// Connections that completed (handshake + request + response).
    pub done: usize,
    /// Of those, how many were resumed (must be 0).
    pub resumed: usize,
    /// Wall time of the whole load.
    pub elapsed: Duration,
}

/// Makes `total` connections, `concurrency` at a time, each a full handshake and one request
/// for `path` with `Connection: close`. Stops at the first error.
pub async fn handshakes(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    path: &str,
    total: usize,
    concurrency: usize,
) -> Result<LoadReport> {
    let connector = TlsConnector::from(cfg);
    let next = Arc::new(AtomicUsize::new(0));
    let resumed = Arc::new(AtomicUsize::new(0));
    let req: Arc<[u8]> = request(path, true).into();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (connector, next, resumed, req) = (
            connector.clone(),
            next.clone(),
            resumed.clone(),
            req.clone(),
        );
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let (_tls, was_resumed) = fetch(addr, &connector, &req).await?;
                if was_resumed {
                    resumed.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), anyhow::Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| anyhow!("client task: {e}"))??;
    }
    Ok(LoadReport {
        done: total,
        resumed: resumed.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
    })
}

/// Opens `n` keep-alive connections, each after a full handshake and one request for `path`,
/// and returns them open (idle) for the caller to hold.
pub async fn open_idle(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    path: &str,
    n: usize,
    concurrency: usize,
) -> Result<Vec<TlsStream<TcpStream>>> {
    let connector = TlsConnector::from(cfg);
    let req: Arc<[u8]> = request(path, false).into();
    hold(n, concurrency, move || {
        let (connector, req) = (connector.clone(), req.clone());
        async move { Ok(fetch(addr, &connector, &req).await?.0) }
    })
    .await
}

/// Opens `n` HTTP/2 connections (`cfg` offering ALPN `h2`), each after a full handshake and
/// the preface exchange ([`super::h2idle`]), and returns them open (idle).
pub async fn open_idle_h2(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    n: usize,
    concurrency: usize,
) -> Result<Vec<TlsStream<TcpStream>>> {
    let connector = TlsConnector::from(cfg);
    hold(n, concurrency, move || {
        let connector = connector.clone();
        async move { super::h2idle::open(addr, &connector).await }
    })
    .await
}

/// Runs `open` `n` times, `concurrency` at a time, and collects the connections; stops at
/// the first error.
async fn hold<F, Fut>(n: usize, concurrency: usize, open: F) -> Result<Vec<TlsStream<TcpStream>>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<TlsStream<TcpStream>>> + Send + 'static,
{
    let mut held = Vec::with_capacity(n);
    let mut tasks = tokio::task::JoinSet::new();
    let mut started = 0;
    while held.len() < n {
        while started < n && tasks.len() < concurrency.max(1) {
            tasks.spawn(open());
            started += 1;
        }
        match tasks.join_next().await {
            Some(joined) => held.push(joined.map_err(|e| anyhow!("client task: {e}"))??),
            None => break,
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_response_by_content_length() {
        let r = b"HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length: 3\r\n\r\nabc";
        assert_eq!(
            parse_response(r),
            Parsed::Complete {
                status: 200,
                len: r.len()
            }
        );
        assert_eq!(parse_response(&r[..r.len() - 1]), Parsed::Incomplete);
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nServ"),
            Parsed::Incomplete
        );
    }

    #[test]
    fn other_statuses_and_garbage() {
        let r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            parse_response(r),
            Parsed::Complete {
                status: 404,
                len: r.len()
            }
        );
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Parsed::Invalid
        );
        assert_eq!(parse_response(b"SSH-2.0\r\n\r\n"), Parsed::Invalid);
        assert_eq!(parse_response(&[b'x'; 70_000]), Parsed::Invalid);
    }

    #[test]
    fn requests_say_close_or_keep_alive() {
        let r = String::from_utf8(request("/1k", true)).expect("ascii");
        assert!(r.starts_with("GET /1k HTTP/1.1\r\n") && r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
        assert!(String::from_utf8_lossy(&request("/", false)).contains("keep-alive"));
    }

    #[test]
    fn config_never_resumes() {
        let cfg = config(vec![1, 2, 3]).expect("config builds");
        assert!(cfg.alpn_protocols == vec![b"http/1.1".to_vec()]);
        assert_eq!(cfg.crypto_provider().cipher_suites.len(), 1);
        assert_eq!(cfg.crypto_provider().kx_groups.len(), 1);
    }
}
