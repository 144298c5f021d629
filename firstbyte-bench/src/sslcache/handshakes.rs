//! Full TLS handshakes per second: `ssl_certificate $ssl_server_name` with
//! `ssl_certificate_cache` against a static certificate, on one firstbyte, in one run.
//!
//! The client is rustls with `Resumption::disabled()` (every handshake is full; the server
//! has no tickets or session cache either), `concurrency` connections at a time, each doing a
//! handshake and one `GET /` with `Connection: close`, then closing. SNI names rotate over
//! `names` so the dynamic server's cache holds several entries. The caller interleaves the
//! two ports round by round and reads the server's on-CPU time around each batch.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client config that never resumes.
pub fn client_config() -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(crate::tls::AnyCert::unchecked(provider))
        .with_no_client_auth();
    c.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(c))
}

/// One batch's result.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Handshakes (with their request) that succeeded.
    pub ok: usize,
    /// Wall time of the batch.
    pub wall: Duration,
}

/// Runs `count` handshakes to `addr`, `concurrency` at a time, SNI rotating over `names`.
pub async fn batch(
    config: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    names: &[String],
    count: usize,
    concurrency: usize,
) -> Result<Batch> {
    let next = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let names: Arc<Vec<ServerName<'static>>> = Arc::new(
        names
            .iter()
            .map(|n| ServerName::try_from(n.clone()).context("server name"))
            .collect::<Result<_>>()?,
    );
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (next, ok, names) = (next.clone(), ok.clone(), names.clone());
        let connector = tokio_rustls::TlsConnector::from(config.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                let name = names[i % names.len()].clone();
                if one(&connector, addr, name).await.is_ok() {
                    ok.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.context("client task")?;
    }
    let b = Batch {
        ok: ok.load(Ordering::Relaxed),
        wall: t.elapsed(),
    };
    if b.ok == 0 {
        bail!("no handshake to {addr} succeeded");
    }
    Ok(b)
}

async fn one(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    name: ServerName<'static>,
) -> Result<()> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await?;
    let mut buf = Vec::with_capacity(256);
    tls.read_to_end(&mut buf).await.ok();
    if !buf.starts_with(b"HTTP/1.1 200") {
        bail!("bad response");
    }
    Ok(())
}
