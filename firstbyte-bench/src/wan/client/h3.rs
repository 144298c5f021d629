//! The built-in HTTP/3 client: quinn + h3 over rustls with the aws-lc-rs provider.
//!
//! Every fetch is a cold connection from the client's one UDP endpoint: a full QUIC
//! handshake (resumption disabled), one GET, the body read to its end, the connection
//! closed. Times: "connect" when the server's first flight has arrived (quinn hands over its
//! handshake data: one round trip, like a SYN-ACK), "appconnect" when the handshake is
//! complete, first byte when the response head arrives, total at the body's end. The
//! certificate is not verified, the handshake signature is (as `rust`).

use std::sync::Arc;
use std::time::Instant;

use bytes::Buf;

use super::{bounded, ms, Fetched, Fetcher, Target};

/// The built-in HTTP/3 client.
pub struct H3Client {
    runtime: tokio::runtime::Runtime,
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
}

impl H3Client {
    /// A client with its UDP endpoint bound (to the unspecified address of IPv4).
    pub fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let config = client_config().map_err(std::io::Error::other)?;
        let endpoint = {
            let _rt = runtime.enter();
            quinn::Endpoint::client("0.0.0.0:0".parse().expect("address"))?
        };
        Ok(Self {
            runtime,
            endpoint,
            config,
        })
    }
}

/// TLS 1.3 with ALPN h3, no resumption, any certificate (the signature is checked).
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(crate::tls::AnyCert::new(provider))
        .with_no_client_auth();
    tls.resumption = rustls::client::Resumption::disabled();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    Ok(tls)
}

/// [`tls_config`] for QUIC.
pub fn client_config() -> Result<quinn::ClientConfig, String> {
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls_config()?)
        .map_err(|e| e.to_string())?;
    Ok(quinn::ClientConfig::new(Arc::new(quic)))
}

impl Fetcher for H3Client {
    fn fetch(&mut self, target: &Target) -> Fetched {
        let fut = fetch_once(&self.endpoint, self.config.clone(), target.clone());
        bounded(&self.runtime, fut)
    }
}

async fn fetch_once(ep: &quinn::Endpoint, config: quinn::ClientConfig, target: Target) -> Fetched {
    let mut f = Fetched::default();
    let t0 = Instant::now();
    let fail = |f: Fetched, e: String| Fetched {
        error: Some(e),
        ..f
    };
    // An IP address as the name: no SNI is sent, as the TCP clients of the bench.
    let name = target.addr.ip().to_string();
    let mut connecting = match ep.connect_with(config, target.addr, &name) {
        Ok(c) => c,
        Err(e) => return fail(f, format!("connect: {e}")),
    };
    if let Err(e) = connecting.handshake_data().await {
        return fail(f, format!("QUIC handshake: {e}"));
    }
    f.connect_ms = ms(t0);
    let conn = match connecting.await {
        Ok(c) => c,
        Err(e) => return fail(f, format!("QUIC handshake: {e}")),
    };
    f.appconnect_ms = ms(t0);
    let result = request(conn.clone(), &target, t0).await;
    conn.close(0u32.into(), b"");
    match result {
        Ok(r) => Fetched {
            ttfb_ms: r.0,
            total_ms: r.1,
            http_version: "3".into(),
            status: r.2,
            body_bytes: r.3,
            ..f
        },
        Err(e) => fail(f, e),
    }
}

/// GET on a new HTTP/3 connection: (ttfb ms, total ms, status, body bytes).
async fn request(
    conn: quinn::Connection,
    target: &Target,
    t0: Instant,
) -> Result<(f64, f64, u16, u64), String> {
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| format!("HTTP/3 setup: {e}"))?;
    let drive = async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    };
    let exchange = async move {
        let req = http::Request::get(target.url())
            .body(())
            .map_err(|e| e.to_string())?;
        let mut stream = send
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        stream.finish().await.map_err(|e| format!("request: {e}"))?;
        let resp = stream
            .recv_response()
            .await
            .map_err(|e| format!("response: {e}"))?;
        let ttfb = ms(t0);
        let mut bytes = 0u64;
        while let Some(chunk) = stream.recv_data().await.map_err(|e| format!("body: {e}"))? {
            bytes += chunk.remaining() as u64;
        }
        Ok::<_, String>((ttfb, ms(t0), resp.status().as_u16(), bytes))
    };
    tokio::select! {
        r = exchange => r,
        _ = drive => Err("the connection closed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_cold_tls13_h3() {
        let t = tls_config().expect("config");
        assert_eq!(t.alpn_protocols, vec![b"h3".to_vec()]);
        assert!(!t.enable_early_data);
        assert!(format!("{:?}", t.resumption).contains("NoClientSessionStorage"));
        client_config().expect("usable for QUIC");
        H3Client::new().expect("endpoint binds");
    }
}
