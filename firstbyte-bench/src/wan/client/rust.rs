//! The built-in client: hyper 1.x over tokio-rustls with the aws-lc-rs provider.
//!
//! One current-thread tokio runtime lives as long as the client; each `fetch` opens a TCP
//! connection, does a full TLS handshake (resumption disabled, so never a resumed session),
//! sends one GET over HTTP/2 or HTTP/1.1 (chosen by ALPN), reads the body, and closes the
//! connection before returning, so no connection outlives its request. Times are taken at
//! the same points as curl's: TCP connected, TLS done, response head received (hyper hands
//! over the response when its first bytes have been parsed), body done.
//!
//! The certificate is not verified (the bench's certificates are self-made), but the
//! handshake signature is, with the provider's algorithms, so the server does the same work
//! as for a browser.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;

use super::{bounded, ms, Fetched, Fetcher, Target};

/// The built-in client.
pub struct RustClient {
    runtime: tokio::runtime::Runtime,
    tls: Arc<ClientConfig>,
    http2: bool,
}

impl RustClient {
    /// A client speaking HTTP/2 (`http2`) or HTTP/1.1.
    pub fn new(http2: bool) -> std::io::Result<Self> {
        let (runtime, tls) = runtime_and_config(http2)?;
        Ok(Self {
            runtime,
            tls,
            http2,
        })
    }
}

/// The client's own current-thread runtime and its TLS config ([`client_config`]).
pub(super) fn runtime_and_config(
    http2: bool,
) -> std::io::Result<(tokio::runtime::Runtime, Arc<ClientConfig>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = client_config(http2).map_err(std::io::Error::other)?;
    Ok((runtime, Arc::new(tls)))
}

/// A TLS 1.3 + 1.2 client config with no session resumption and the given ALPN.
pub fn client_config(http2: bool) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .dangerous()
        .with_custom_certificate_verifier(crate::tls::AnyCert::new(provider))
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = vec![if http2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    Ok(config)
}

impl Fetcher for RustClient {
    fn fetch(&mut self, target: &Target) -> Fetched {
        let fut = fetch_once(self.tls.clone(), self.http2, target.clone());
        bounded(&self.runtime, fut)
    }
}

async fn fetch_once(tls: Arc<ClientConfig>, http2: bool, target: Target) -> Fetched {
    let mut f = Fetched::default();
    let t0 = Instant::now();
    let tcp = match tokio::net::TcpStream::connect(target.addr).await {
        Ok(s) => s,
        Err(e) => {
            return Fetched {
                error: Some(format!("connect: {e}")),
                ..f
            }
        }
    };
    f.connect_ms = ms(t0);
    // As curl does; the request is one small write either way.
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(target.addr.ip().into());
    let stream = match tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            return Fetched {
                error: Some(format!("TLS handshake: {e}")),
                ..f
            }
        }
    };
    f.appconnect_ms = ms(t0);
    let io = TokioIo::new(stream);
    let result = if http2 {
        let uri = target.url();
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await {
            Err(e) => Err(format!("HTTP/2 handshake: {e}")),
            Ok((mut sender, conn)) => {
                let request = async move {
                    let req = http::Request::get(uri).body(Empty::<Bytes>::new());
                    let req = req.map_err(|e| e.to_string())?;
                    let out = read_response(sender.send_request(req).await, t0).await;
                    drop(sender);
                    out
                };
                let (out, _) = tokio::join!(request, conn);
                out
            }
        }
    } else {
        match hyper::client::conn::http1::handshake(io).await {
            Err(e) => Err(format!("HTTP/1.1 handshake: {e}")),
            Ok((mut sender, conn)) => {
                let request = async move {
                    let req = http::Request::get(target.path.as_str())
                        .header(http::header::HOST, target.addr.to_string())
                        .body(Empty::<Bytes>::new());
                    let req = req.map_err(|e| e.to_string())?;
                    let out = read_response(sender.send_request(req).await, t0).await;
                    drop(sender);
                    out
                };
                let (out, _) = tokio::join!(request, conn);
                out
            }
        }
    };
    match result {
        Ok(r) => Fetched {
            ttfb_ms: r.ttfb_ms,
            total_ms: r.total_ms,
            http_version: if http2 { "2".into() } else { "1.1".into() },
            status: r.status,
            body_bytes: r.body_bytes,
            error: r.error,
            ..f
        },
        Err(e) => Fetched {
            error: Some(e),
            ..f
        },
    }
}

/// A response read to its end, times in ms from `t0`.
pub(super) struct Response {
    pub ttfb_ms: f64,
    pub total_ms: f64,
    pub status: u16,
    pub body_bytes: u64,
    pub error: Option<String>,
}

/// Waits for the response head (TTFB), then reads the body to its end (total).
pub(super) async fn read_response(
    sent: Result<http::Response<hyper::body::Incoming>, hyper::Error>,
    t0: Instant,
) -> Result<Response, String> {
    let resp = sent.map_err(|e| format!("request: {e}"))?;
    let ttfb_ms = ms(t0);
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut body_bytes = 0u64;
    let mut error = None;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    body_bytes += data.len() as u64;
                }
            }
            Err(e) => {
                error = Some(format!("body: {e}"));
                break;
            }
        }
    }
    let status = if error.is_some() { 0 } else { status };
    Ok(Response {
        ttfb_ms,
        total_ms: ms(t0),
        status,
        body_bytes,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_cold_and_offers_the_right_alpn() {
        let h2 = client_config(true).expect("config");
        assert_eq!(h2.alpn_protocols, vec![b"h2".to_vec()]);
        let h1 = client_config(false).expect("config");
        assert_eq!(h1.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(!h2.enable_early_data);
        assert!(
            format!("{:?}", h2.resumption).contains("Disabled")
                || format!("{:?}", h2.resumption).contains("disabled")
                || format!("{:?}", h2.resumption).contains("store: NoClientSessionStorage"),
            "{:?}",
            h2.resumption
        );
    }

    #[test]
    fn refused_connection_is_a_failed_fetch() {
        // Port 1 on loopback is closed: connect fails at once, no panic, status 0.
        let mut c = RustClient::new(true).expect("client");
        let t = Target {
            addr: "127.0.0.1:1".parse().expect("addr"),
            path: "/".into(),
        };
        let f = c.fetch(&t);
        assert_eq!(f.status, 0);
        assert!(
            f.error.as_deref().unwrap_or("").starts_with("connect"),
            "{f:?}"
        );
    }
}
