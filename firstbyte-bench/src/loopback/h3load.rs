//! The HTTP/3 load of the `h3_1k`, `h3_req` and `h3_page` measures: the h2 measure's shape
//! (`h2load -n N -c 32 -m 10`: keep-alive connections, ten requests in flight on each) over
//! QUIC, from an in-crate client (Debian's h2load has no HTTP/3).
//!
//! quinn + h3 with the aws-lc-rs provider, TLS 1.3 with AES-128-GCM and X25519 only (as the
//! other measures ask of every server), ALPN h3, no resumption; the certificate is not
//! verified (the server's CPU is measured; the client only has to keep up), nor the
//! handshake signature. All connections share one UDP endpoint. Each connection runs
//! `streams` workers, each sending GETs one after another until the run's count is reached.
//! Request number `i` of the run (a shared counter) asks for target `i mod len` of the list
//! it is given, as `h2load -i` walks its URI list, with the extra headers given (Chromium's
//! for the browser-like measures, none for `h3_1k`); every response must be a 200 with
//! exactly that target's body length ([`LoadResult::bad`] counts the others), and the run's
//! body bytes are summed ([`LoadResult::bytes`]) for [`check`] to compare with the total
//! expected.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Buf;

/// What a load run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadResult {
    /// Requests answered 200 with the expected body.
    pub ok: usize,
    /// Requests that failed or were answered otherwise.
    pub bad: usize,
    /// Body bytes received over the whole run.
    pub bytes: u64,
    /// Wall time of the load.
    pub elapsed: Duration,
}

/// TLS 1.3, AES-128-GCM, X25519, ALPN h3, no resumption, no certificate check.
pub fn tls_config() -> Result<rustls::ClientConfig> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.cipher_suites =
        vec![rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256];
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let provider = Arc::new(provider);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(crate::tls::AnyCert::unchecked(provider))
        .with_no_client_auth();
    tls.resumption = rustls::client::Resumption::disabled();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    Ok(tls)
}

/// What to request: (path, expected body length) cycled through, and headers sent with each.
pub struct Targets {
    /// Paths and their body lengths.
    pub paths: Vec<(String, u64)>,
    /// Extra request headers (name, value).
    pub headers: Vec<(&'static str, String)>,
}

/// `requests` GETs of `targets` over `connections` HTTP/3 connections with `streams`
/// requests in flight on each.
pub async fn load(
    addr: SocketAddr,
    targets: &Targets,
    requests: usize,
    connections: usize,
    streams: usize,
) -> Result<LoadResult> {
    if targets.paths.is_empty() {
        bail!("HTTP/3 load: no paths");
    }
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls_config()?)
        .map_err(|e| anyhow!("QUIC client config: {e}"))?;
    let config = quinn::ClientConfig::new(Arc::new(quic));
    let endpoint = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0)))
        .context("bind the QUIC client")?;
    let urls: Arc<Vec<(http::Uri, u64)>> = Arc::new(
        targets
            .paths
            .iter()
            .map(|(path, body)| {
                let url = format!("https://localhost:{}{path}", addr.port());
                Ok((url.parse::<http::Uri>()?, *body))
            })
            .collect::<Result<_>>()?,
    );
    let mut headers = http::HeaderMap::new();
    for (name, value) in &targets.headers {
        headers.append(
            http::HeaderName::from_bytes(name.as_bytes())?,
            http::HeaderValue::from_str(value)?,
        );
    }
    let headers = Arc::new(headers);
    let issued = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let bad = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Connect every connection first: the load is requests on open connections, as h2load's.
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        let conn = endpoint
            .connect_with(config.clone(), addr, "localhost")?
            .await
            .context("QUIC handshake")?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| anyhow!("HTTP/3 setup: {e}"))?;
        let drive = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        conns.push((conn, send, drive));
    }
    let started = Instant::now();
    let mut workers = Vec::new();
    for (_, send, _) in &conns {
        for _ in 0..streams {
            let mut send = send.clone();
            let (issued, ok, bad, bytes) = (issued.clone(), ok.clone(), bad.clone(), bytes.clone());
            let (urls, headers) = (urls.clone(), headers.clone());
            workers.push(tokio::spawn(async move {
                loop {
                    let i = issued.fetch_add(1, Ordering::Relaxed);
                    if i >= requests {
                        break;
                    }
                    let (url, body) = &urls[i % urls.len()];
                    match get(&mut send, url, &headers).await {
                        Ok((200, n)) if n == *body => {
                            bytes.fetch_add(n, Ordering::Relaxed);
                            ok.fetch_add(1, Ordering::Relaxed)
                        }
                        _ => bad.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    for w in workers {
        w.await.context("load worker")?;
    }
    let elapsed = started.elapsed();
    for (conn, send, drive) in conns {
        drop(send);
        conn.close(0u32.into(), b"");
        drive.abort();
    }
    endpoint.wait_idle().await;
    Ok(LoadResult {
        ok: ok.load(Ordering::Relaxed),
        bad: bad.load(Ordering::Relaxed),
        bytes: bytes.load(Ordering::Relaxed),
        elapsed,
    })
}

/// One GET: (status, body bytes).
async fn get(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    url: &http::Uri,
    headers: &http::HeaderMap,
) -> Result<(u16, u64)> {
    let mut req = http::Request::get(url.clone()).body(())?;
    *req.headers_mut() = headers.clone();
    let mut stream = send.send_request(req).await?;
    stream.finish().await?;
    let resp = stream.recv_response().await?;
    let mut n = 0u64;
    while let Some(chunk) = stream.recv_data().await? {
        n += chunk.remaining() as u64;
    }
    Ok((resp.status().as_u16(), n))
}

/// Checks a load run: every request answered with its whole body, none bad, and `bytes`
/// body bytes in all.
pub fn check(r: &LoadResult, requests: usize, bytes: u64) -> Result<()> {
    if r.bad != 0 || r.ok != requests {
        bail!(
            "HTTP/3 load: {} of {requests} requests answered 200 with the whole body, {} not",
            r.ok,
            r.bad
        );
    }
    if r.bytes != bytes {
        bail!("HTTP/3 load: {} body bytes, not {bytes}", r.bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_the_measures_suite_and_group_without_resumption() {
        let t = tls_config().expect("config");
        assert_eq!(t.alpn_protocols, vec![b"h3".to_vec()]);
        assert_eq!(t.crypto_provider().cipher_suites.len(), 1);
        assert_eq!(t.crypto_provider().kx_groups.len(), 1);
        assert!(format!("{:?}", t.resumption).contains("NoClientSessionStorage"));
        quinn::crypto::rustls::QuicClientConfig::try_from(t).expect("usable for QUIC");
    }

    #[test]
    fn a_short_or_failed_run_is_refused() {
        let r = |ok, bad| LoadResult {
            ok,
            bad,
            bytes: ok as u64 * 10,
            elapsed: Duration::from_secs(1),
        };
        assert!(check(&r(100, 0), 100, 1000).is_ok());
        assert!(check(&r(99, 1), 100, 990).is_err());
        assert!(check(&r(99, 0), 100, 990).is_err());
        assert!(check(&r(100, 0), 100, 1001).is_err(), "bytes short");
    }
}
