//! The resumed-TCP client: TLS 1.3 session resumption, with or without early data (0-RTT).
//!
//! Each fetch is two connections with a session store of their own: first an unrecorded
//! `HEAD` of the target on a full handshake, which leaves the server's session tickets in the
//! store, then the measured `GET` that offers one of them. With early data on
//! (`rust-h2-0rtt`, `rust-h1-0rtt`) and a ticket that allows it, the request is written as
//! early data right behind the ClientHello (tokio-rustls' early-data mode: writes go into
//! early data until its limit, and are sent again after the handshake if the server rejects
//! them). The store is fresh for every fetch, so a ticket never crosses from one server or
//! condition to another (they share the server address).
//!
//! What really happened is read from rustls when the handshake completes, not assumed:
//! `handshake_kind()` (resumed or full) and `is_early_data_accepted()`, and whether any bytes
//! were written as early data at all (a ticket without early-data permission, as from a
//! server with `ssl_early_data off`, sends none). Times as [`super::rust`]: connect, TLS
//! done (the handshake's completion, also when the request left before it), first byte, end.
//! TLS 1.3 only (resumption with early data is TLS 1.3's).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::rust::read_response;
use super::{bounded, ms, Fetched, Fetcher, Handshake, Target};

/// The resumed-TCP client.
pub struct ResumedClient {
    runtime: tokio::runtime::Runtime,
    http2: bool,
    early: bool,
}

impl ResumedClient {
    /// A client speaking HTTP/2 (`http2`) or HTTP/1.1, sending its request as early data
    /// when the ticket allows (`early`).
    pub fn new(http2: bool, early: bool) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self {
            runtime,
            http2,
            early,
        })
    }
}

/// TLS 1.3, the given ALPN, a session store of its own, early data on or off.
pub fn client_config(http2: bool, early: bool) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(crate::tls::AnyCert::new(provider))
        .with_no_client_auth();
    config.resumption = Resumption::store(Arc::new(ClientSessionMemoryCache::new(8)));
    config.enable_early_data = early;
    config.alpn_protocols = vec![if http2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    Ok(config)
}

impl Fetcher for ResumedClient {
    fn fetch(&mut self, target: &Target) -> Fetched {
        let config = match client_config(self.http2, self.early) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                return Fetched {
                    error: Some(format!("TLS config: {e}")),
                    ..Fetched::default()
                }
            }
        };
        let (http2, early, target) = (self.http2, self.early, target.clone());
        bounded(&self.runtime, async move {
            let prime = exchange(config.clone(), http2, early, &target, http::Method::HEAD).await;
            if let Some(e) = prime.error {
                return Fetched {
                    error: Some(format!("first connection (for a ticket): {e}")),
                    ..Fetched::default()
                };
            }
            exchange(config, http2, early, &target, http::Method::GET).await
        })
    }
}

/// What the handshake was, recorded by [`Watched`] when it completes.
#[derive(Debug, Default)]
struct Seen {
    /// ms from the start when the handshake completed.
    done_ms: Option<f64>,
    /// Bytes written as early data (accepted by rustls before the handshake completed).
    early_bytes: usize,
    /// What rustls said at completion.
    resumed: bool,
    early_accepted: bool,
}

/// A TLS stream that notes when its handshake completes and how (for [`Seen`]).
struct Watched {
    inner: TlsStream<TcpStream>,
    seen: Arc<Mutex<Seen>>,
    t0: Instant,
}

impl Watched {
    fn check(&mut self) {
        let conn = self.inner.get_ref().1;
        if conn.is_handshaking() {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.done_ms.is_none() {
            seen.done_ms = Some(ms(self.t0));
            seen.resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            seen.early_accepted = conn.is_early_data_accepted();
        }
    }

    fn note_write(&mut self, was_handshaking: bool, n: usize) {
        // While the handshake is under way, tokio-rustls completes a write only by taking
        // it as early data; a write that first had to finish the handshake (no early-data
        // room left) went after it.
        if was_handshaking && n > 0 && self.inner.get_ref().1.is_handshaking() {
            self.seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .early_bytes += n;
        }
        self.check();
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.check();
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let before = self.inner.get_ref().1.is_handshaking();
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.note_write(before, n);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let before = self.inner.get_ref().1.is_handshaking();
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.note_write(before, n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.check();
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The handshake a connection had, from what [`Watched`] saw.
fn classify(seen: &Seen) -> Handshake {
    if seen.early_bytes > 0 {
        if seen.early_accepted {
            Handshake::EarlyAccepted
        } else {
            Handshake::EarlyRejected
        }
    } else if seen.resumed {
        Handshake::Resumed
    } else {
        Handshake::Full
    }
}

/// One connection: TCP, TLS (resuming from the config's store when it holds a ticket), one
/// request of `method`, the body read to its end.
async fn exchange(
    tls: Arc<ClientConfig>,
    http2: bool,
    early: bool,
    target: &Target,
    method: http::Method,
) -> Fetched {
    let mut f = Fetched::default();
    let t0 = Instant::now();
    let tcp = match TcpStream::connect(target.addr).await {
        Ok(s) => s,
        Err(e) => {
            return Fetched {
                error: Some(format!("connect: {e}")),
                ..f
            }
        }
    };
    f.connect_ms = ms(t0);
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(target.addr.ip().into());
    // In early-data mode `connect` returns once the ClientHello is out when the ticket
    // allows early data; otherwise after the handshake, as usual.
    let stream = match tokio_rustls::TlsConnector::from(tls)
        .early_data(early)
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
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut watched = Watched {
        inner: stream,
        seen: seen.clone(),
        t0,
    };
    watched.check();
    let io = TokioIo::new(watched);
    let result = if http2 {
        let uri = target.url();
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await {
            Err(e) => Err(format!("HTTP/2 handshake: {e}")),
            Ok((mut sender, conn)) => {
                let request = async move {
                    let req = http::Request::builder()
                        .method(method)
                        .uri(uri)
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
    } else {
        match hyper::client::conn::http1::handshake(io).await {
            Err(e) => Err(format!("HTTP/1.1 handshake: {e}")),
            Ok((mut sender, conn)) => {
                let request = async move {
                    let req = http::Request::builder()
                        .method(method)
                        .uri(target.path.as_str())
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
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    let handshake = seen.done_ms.map(|_| classify(&seen));
    f.appconnect_ms = seen.done_ms.unwrap_or(0.0);
    match result {
        Ok(r) => Fetched {
            ttfb_ms: r.ttfb_ms,
            total_ms: r.total_ms,
            http_version: if http2 { "2".into() } else { "1.1".into() },
            status: r.status,
            body_bytes: r.body_bytes,
            error: r.error,
            handshake,
            ..f
        },
        Err(e) => Fetched {
            error: Some(e),
            handshake,
            ..f
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::testserver;
    use super::*;

    /// Over TCP: a ticket that allows early data offered to a server that does not know it:
    /// the request went as early data, was rejected, sent again after the handshake and
    /// answered; a ticket from a server with early data off: resumed, nothing sent early.
    #[test]
    fn rejected_early_data_and_tickets_without_it_are_reported() {
        let mut c = ResumedClient::new(false, true).expect("client");
        let (early, other, off) = c.runtime.block_on(async {
            (
                testserver::h1(true).await,
                testserver::h1(true).await,
                testserver::h1(false).await,
            )
        });
        let target = |addr| Target {
            addr,
            path: "/x".into(),
        };
        let f = c.fetch(&target(off));
        assert_eq!(
            (f.handshake, f.status, f.body_bytes),
            (Some(Handshake::Resumed), 200, 2),
            "{f:?}"
        );
        let config = Arc::new(client_config(false, true).expect("config"));
        let f = c.runtime.block_on(async move {
            let prime = exchange(
                config.clone(),
                false,
                true,
                &target(early),
                http::Method::HEAD,
            )
            .await;
            assert_eq!(
                (prime.status, prime.handshake),
                (200, Some(Handshake::Full)),
                "{prime:?}"
            );
            exchange(config, false, true, &target(other), http::Method::GET).await
        });
        assert_eq!(
            (f.handshake, f.status, f.body_bytes),
            (Some(Handshake::EarlyRejected), 200, 2),
            "{f:?}"
        );
        assert!(
            f.connect_ms <= f.appconnect_ms && f.appconnect_ms <= f.ttfb_ms,
            "{f:?}"
        );
    }

    #[test]
    fn config_resumes_tls13_and_early_data_is_the_callers() {
        let c = client_config(true, true).expect("config");
        assert!(c.enable_early_data);
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec()]);
        assert!(!format!("{:?}", c.resumption).contains("NoClientSessionStorage"));
        let c = client_config(false, false).expect("config");
        assert!(!c.enable_early_data);
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn classification_follows_what_rustls_saw() {
        let s = |early_bytes, resumed, early_accepted| Seen {
            done_ms: Some(1.0),
            early_bytes,
            resumed,
            early_accepted,
        };
        assert_eq!(classify(&s(0, false, false)), Handshake::Full);
        assert_eq!(classify(&s(0, true, false)), Handshake::Resumed);
        assert_eq!(classify(&s(90, true, true)), Handshake::EarlyAccepted);
        assert_eq!(classify(&s(90, false, false)), Handshake::EarlyRejected);
        assert_eq!(classify(&s(90, true, false)), Handshake::EarlyRejected);
    }

    #[test]
    fn refused_connection_fails_on_the_first_connection() {
        let mut c = ResumedClient::new(true, true).expect("client");
        let t = Target {
            addr: "127.0.0.1:1".parse().expect("addr"),
            path: "/".into(),
        };
        let f = c.fetch(&t);
        assert_eq!((f.status, f.handshake), (0, None));
        assert!(
            f.error
                .as_deref()
                .unwrap_or("")
                .starts_with("first connection"),
            "{f:?}"
        );
    }
}
