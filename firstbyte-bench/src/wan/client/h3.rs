//! The built-in HTTP/3 client: quinn + h3 over rustls with the aws-lc-rs provider.
//!
//! Every fetch is a cold connection from the client's one UDP endpoint: a full QUIC
//! handshake (resumption disabled), one GET, the body read to its end, the connection
//! closed. Times: "connect" when the server's first flight has arrived (quinn hands over its
//! handshake data: one round trip, like a SYN-ACK), "appconnect" when the handshake is
//! complete, first byte when the response head arrives, total at the body's end. The
//! certificate is not verified, the handshake signature is (as `rust`).
//!
//! `rust-h3-0rtt` ([`H3Client::resuming`]): each fetch first makes an unrecorded HEAD on a
//! full handshake with a session store of its own (fresh per fetch, so no ticket crosses
//! from one server to another), then the measured connection offers the ticket and, when it
//! allows early data, opens HTTP/3 and sends the GET in 0-RTT (`Connecting::into_0rtt`). The
//! sample records whether the server accepted it (`ZeroRttAccepted`): `0rtt`, or
//! `0rtt-rejected` (the request is then sent again on the same connection once the handshake
//! is done, as a browser does), or `no-0rtt` when quinn had no 0-RTT keys. With 0-RTT the
//! client waits for neither the server's first flight nor the handshake: both "connect" and
//! "appconnect" are the handshake's completion (at most the first byte's time).

use std::sync::Arc;
use std::time::Instant;

use bytes::Buf;

use super::{bounded, ms, Fetched, Fetcher, Handshake, Target};

/// The built-in HTTP/3 client.
pub struct H3Client {
    runtime: tokio::runtime::Runtime,
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
    /// `rust-h3-0rtt`: a ticket from a first connection, then the request in 0-RTT.
    resuming: bool,
}

impl H3Client {
    /// A cold client with its UDP endpoint bound (to the unspecified address of IPv4).
    pub fn new() -> std::io::Result<Self> {
        Self::with(false)
    }

    /// The 0-RTT client (`rust-h3-0rtt`).
    pub fn resuming() -> std::io::Result<Self> {
        Self::with(true)
    }

    fn with(resuming: bool) -> std::io::Result<Self> {
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
            resuming,
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
    quic_config(tls_config()?)
}

fn quic_config(tls: rustls::ClientConfig) -> Result<quinn::ClientConfig, String> {
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    Ok(quinn::ClientConfig::new(Arc::new(quic)))
}

/// [`tls_config`] with a session store of its own and early data on: the 0-RTT client's.
fn resuming_tls_config() -> Result<rustls::ClientConfig, String> {
    let mut tls = tls_config()?;
    tls.resumption = rustls::client::Resumption::store(Arc::new(
        rustls::client::ClientSessionMemoryCache::new(8),
    ));
    tls.enable_early_data = true;
    Ok(tls)
}

impl Fetcher for H3Client {
    fn fetch(&mut self, target: &Target) -> Fetched {
        if !self.resuming {
            let fut = fetch_once(&self.endpoint, self.config.clone(), target.clone());
            return bounded(&self.runtime, fut);
        }
        let config = match resuming_tls_config().and_then(quic_config) {
            Ok(c) => c,
            Err(e) => {
                return Fetched {
                    error: Some(format!("TLS config: {e}")),
                    ..Fetched::default()
                }
            }
        };
        let fut = fetch_resumed(&self.endpoint, config, target.clone());
        bounded(&self.runtime, fut)
    }
}

/// The unrecorded first connection (a HEAD, for the ticket), then the measured one.
async fn fetch_resumed(
    ep: &quinn::Endpoint,
    config: quinn::ClientConfig,
    target: Target,
) -> Fetched {
    if let Err(e) = prime(ep, config.clone(), &target).await {
        return Fetched {
            error: Some(format!("first connection (for a ticket): {e}")),
            ..Fetched::default()
        };
    }
    fetch_early(ep, config, target).await
}

/// A HEAD on a full handshake: leaves the server's tickets in `config`'s session store.
async fn prime(
    ep: &quinn::Endpoint,
    config: quinn::ClientConfig,
    target: &Target,
) -> Result<(), String> {
    let name = target.addr.ip().to_string();
    let conn = ep
        .connect_with(config, target.addr, &name)
        .map_err(|e| format!("connect: {e}"))?
        .await
        .map_err(|e| format!("QUIC handshake: {e}"))?;
    let r = request(conn.clone(), target, http::Method::HEAD, Instant::now()).await;
    conn.close(0u32.into(), b"");
    r.map(|_| ())
}

/// The measured GET, in 0-RTT when `config`'s store holds a ticket that allows it.
async fn fetch_early(ep: &quinn::Endpoint, config: quinn::ClientConfig, target: Target) -> Fetched {
    let name = target.addr.ip().to_string();
    let t0 = Instant::now();
    let connecting = match ep.connect_with(config, target.addr, &name) {
        Ok(c) => c,
        Err(e) => {
            return Fetched {
                error: Some(format!("connect: {e}")),
                ..Fetched::default()
            }
        }
    };
    let (conn, accepted) = match connecting.into_0rtt() {
        Ok(pair) => pair,
        Err(connecting) => {
            // No 0-RTT keys: an ordinary handshake, then the request.
            let f = fetch_connecting(connecting, target, t0).await;
            let handshake = f.error.is_none().then_some(Handshake::NoEarly);
            return Fetched { handshake, ..f };
        }
    };
    let accepted = tokio::spawn(async move {
        let ok = accepted.await;
        (ok, ms(t0))
    });
    let first = request(conn.clone(), &target, http::Method::GET, t0).await;
    let (ok, done_ms) = match accepted.await {
        Ok(v) => v,
        Err(e) => {
            conn.close(0u32.into(), b"");
            return Fetched {
                error: Some(format!("handshake task: {e}")),
                ..Fetched::default()
            };
        }
    };
    let (result, handshake) = if ok {
        (first, Handshake::EarlyAccepted)
    } else {
        // Rejected: quinn dropped the 0-RTT streams; HTTP/3 starts again, now in 1-RTT.
        match first {
            Ok(r) => (Ok(r), Handshake::EarlyRejected),
            Err(_) => (
                request(conn.clone(), &target, http::Method::GET, t0).await,
                Handshake::EarlyRejected,
            ),
        }
    };
    conn.close(0u32.into(), b"");
    let mut f = Fetched {
        handshake: Some(handshake),
        ..Fetched::default()
    };
    match result {
        Ok(r) => {
            // The handshake's completion and the first byte are seen by two tasks: the
            // handshake is never later than the response it carries keys for.
            f.appconnect_ms = done_ms.min(r.0);
            f.connect_ms = f.appconnect_ms;
            Fetched {
                ttfb_ms: r.0,
                total_ms: r.1,
                http_version: "3".into(),
                status: r.2,
                body_bytes: r.3,
                ..f
            }
        }
        Err(e) => Fetched {
            error: Some(e),
            connect_ms: done_ms,
            appconnect_ms: done_ms,
            ..f
        },
    }
}

async fn fetch_once(ep: &quinn::Endpoint, config: quinn::ClientConfig, target: Target) -> Fetched {
    let t0 = Instant::now();
    // An IP address as the name: no SNI is sent, as the TCP clients of the bench.
    let name = target.addr.ip().to_string();
    match ep.connect_with(config, target.addr, &name) {
        Ok(connecting) => fetch_connecting(connecting, target, t0).await,
        Err(e) => Fetched {
            error: Some(format!("connect: {e}")),
            ..Fetched::default()
        },
    }
}

/// A GET on a connection being made, timed from `t0`.
async fn fetch_connecting(
    mut connecting: quinn::Connecting,
    target: Target,
    t0: Instant,
) -> Fetched {
    let mut f = Fetched::default();
    let fail = |f: Fetched, e: String| Fetched {
        error: Some(e),
        ..f
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
    let result = request(conn.clone(), &target, http::Method::GET, t0).await;
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

/// A request on a new HTTP/3 connection: (ttfb ms, total ms, status, body bytes).
async fn request(
    conn: quinn::Connection,
    target: &Target,
    method: http::Method,
    t0: Instant,
) -> Result<(f64, f64, u16, u64), String> {
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| format!("HTTP/3 setup: {e}"))?;
    let drive = async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    };
    let exchange = async move {
        let req = http::Request::builder()
            .method(method)
            .uri(target.url())
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
    use super::super::testserver;
    use super::*;

    /// Each sample says what the server did with its 0-RTT request: accepted (the server
    /// that issued the ticket), rejected (another server: the request is sent again and
    /// answered), or not possible (a ticket that allows no early data).
    #[test]
    fn zero_rtt_is_reported_as_the_server_decides() {
        let mut c = H3Client::resuming().expect("client");
        let (early, other, off) = c.runtime.block_on(async {
            (
                testserver::h3(true),
                testserver::h3(true),
                testserver::h3(false),
            )
        });
        let target = |addr| Target {
            addr,
            path: "/x".into(),
        };
        let f = c.fetch(&target(early));
        assert_eq!(
            (f.handshake, f.status, f.body_bytes),
            (Some(Handshake::EarlyAccepted), 200, 2),
            "{f:?}"
        );
        assert!(
            f.connect_ms <= f.ttfb_ms && f.appconnect_ms <= f.ttfb_ms,
            "{f:?}"
        );
        let f = c.fetch(&target(off));
        assert_eq!(
            (f.handshake, f.status),
            (Some(Handshake::NoEarly), 200),
            "{f:?}"
        );
        // A ticket from one server offered to another: 0-RTT rejected, the GET sent again.
        let config = resuming_tls_config().and_then(quic_config).expect("config");
        let ep = c.endpoint.clone();
        let f = c.runtime.block_on(async move {
            prime(&ep, config.clone(), &target(early))
                .await
                .expect("ticket");
            fetch_early(&ep, config, target(other)).await
        });
        assert_eq!(
            (f.handshake, f.status, f.body_bytes),
            (Some(Handshake::EarlyRejected), 200, 2),
            "{f:?}"
        );
    }

    #[test]
    fn config_is_cold_tls13_h3() {
        let t = tls_config().expect("config");
        assert_eq!(t.alpn_protocols, vec![b"h3".to_vec()]);
        assert!(!t.enable_early_data);
        assert!(format!("{:?}", t.resumption).contains("NoClientSessionStorage"));
        client_config().expect("usable for QUIC");
        H3Client::new().expect("endpoint binds");
        let r = resuming_tls_config().expect("config");
        assert!(r.enable_early_data);
        assert!(!format!("{:?}", r.resumption).contains("NoClientSessionStorage"));
        quic_config(r).expect("usable for QUIC");
        assert!(H3Client::resuming().expect("endpoint binds").resuming);
    }
}
