//! The warm-connection client: one TLS connection, a sequence of requests with idle gaps.
//!
//! Record sizing matters most on a connection the kernel has restarted after idle (issue 17):
//! a cold connection starts every policy in slow start, but on a warm one a static 16 KB
//! record can need more than the restarted window to arrive. `fetch_series` opens one
//! connection (as [`super::rust`]: hyper over tokio-rustls, HTTP/2 or HTTP/1.1 by ALPN, no
//! resumption), GETs the target, then for each gap waits that long with nothing in flight and
//! GETs it again on the same connection. The first response is timed from the start of the
//! connection, as a cold fetch; each later one from the moment its request is sent (its
//! `connect_ms` and `appconnect_ms` are 0): time to the first response byte, and to the last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;

use super::rust::{read_response, runtime_and_config};
use super::{ms, Fetched, Fetcher, Target, REQUEST_TIMEOUT_S};

/// The warm-connection client.
pub struct WarmClient {
    runtime: tokio::runtime::Runtime,
    tls: Arc<ClientConfig>,
    http2: bool,
}

impl WarmClient {
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

impl Fetcher for WarmClient {
    /// One request on its own connection (the series with no gap).
    fn fetch(&mut self, target: &Target) -> Fetched {
        self.fetch_series(target, &[]).remove(0)
    }

    fn fetch_series(&mut self, target: &Target, gaps: &[Duration]) -> Vec<Fetched> {
        // Each request may take REQUEST_TIMEOUT_S; the gaps come on top.
        let limit = Duration::from_secs(REQUEST_TIMEOUT_S) * (gaps.len() as u32 + 1)
            + gaps.iter().sum::<Duration>();
        let fut = series(self.tls.clone(), self.http2, target.clone(), gaps.to_vec());
        let mut got = self
            .runtime
            .block_on(async move { tokio::time::timeout(limit, fut).await })
            .unwrap_or_else(|_| {
                vec![Fetched {
                    error: Some(format!("timed out after {} s", limit.as_secs())),
                    ..Fetched::default()
                }]
            });
        complete(&mut got, gaps.len() + 1);
        got
    }
}

/// Pads a series cut short by a failure to `len` entries, each failed with the reason.
fn complete(got: &mut Vec<Fetched>, len: usize) {
    let why = got
        .iter()
        .rev()
        .find_map(|f| f.error.clone())
        .unwrap_or_else(|| "connection ended".into());
    while got.len() < len {
        got.push(Fetched {
            error: Some(format!("not sent: an earlier request failed ({why})")),
            ..Fetched::default()
        });
    }
}

/// Sends one request on an open connection: the sender of either protocol.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Sender {
    async fn get(&mut self, target: &Target, t0: Instant) -> Fetched {
        let (sent, version) = match self {
            Sender::H1(s) => {
                let req = http::Request::get(target.path.as_str())
                    .header(http::header::HOST, target.addr.to_string())
                    .body(Empty::<Bytes>::new());
                match req {
                    Ok(req) => (s.send_request(req).await, "1.1"),
                    Err(e) => return failed(format!("request: {e}")),
                }
            }
            Sender::H2(s) => match http::Request::get(target.url()).body(Empty::<Bytes>::new()) {
                Ok(req) => (s.send_request(req).await, "2"),
                Err(e) => return failed(format!("request: {e}")),
            },
        };
        match read_response(sent, t0).await {
            Ok(r) => Fetched {
                ttfb_ms: r.ttfb_ms,
                total_ms: r.total_ms,
                http_version: version.into(),
                status: r.status,
                body_bytes: r.body_bytes,
                error: r.error,
                ..Fetched::default()
            },
            Err(e) => failed(e),
        }
    }
}

fn failed(e: String) -> Fetched {
    Fetched {
        error: Some(e),
        ..Fetched::default()
    }
}

async fn series(
    tls: Arc<ClientConfig>,
    http2: bool,
    target: Target,
    gaps: Vec<Duration>,
) -> Vec<Fetched> {
    let t0 = Instant::now();
    let tcp = match tokio::net::TcpStream::connect(target.addr).await {
        Ok(s) => s,
        Err(e) => return vec![failed(format!("connect: {e}"))],
    };
    let connect_ms = ms(t0);
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(target.addr.ip().into());
    let stream = match tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            return vec![Fetched {
                connect_ms,
                ..failed(format!("TLS handshake: {e}"))
            }]
        }
    };
    let appconnect_ms = ms(t0);
    let io = TokioIo::new(stream);
    let (mut sender, conn) = if http2 {
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await {
            Ok((s, c)) => (Sender::H2(s), tokio::spawn(async move { c.await.err() })),
            Err(e) => return vec![failed(format!("HTTP/2 handshake: {e}"))],
        }
    } else {
        match hyper::client::conn::http1::handshake(io).await {
            Ok((s, c)) => (Sender::H1(s), tokio::spawn(async move { c.await.err() })),
            Err(e) => return vec![failed(format!("HTTP/1.1 handshake: {e}"))],
        }
    };
    let mut out = Vec::with_capacity(gaps.len() + 1);
    let first = sender.get(&target, t0).await;
    let ok = first.error.is_none();
    out.push(Fetched {
        connect_ms,
        appconnect_ms,
        ..first
    });
    if ok {
        for gap in gaps {
            tokio::time::sleep(gap).await;
            let f = sender.get(&target, Instant::now()).await;
            let stop = f.error.is_some();
            out.push(f);
            if stop {
                break;
            }
        }
    }
    drop(sender);
    // The connection task ends once the sender is gone (HTTP/2 sends GOAWAY, HTTP/1.1 closes).
    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_series_is_padded_with_the_reason() {
        let mut got = vec![failed("connect: refused".into())];
        complete(&mut got, 3);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|f| f.status == 0));
        assert!(got[2]
            .error
            .as_deref()
            .unwrap()
            .contains("connect: refused"));
    }

    #[test]
    fn refused_connection_fails_every_position() {
        let mut c = WarmClient::new(false).expect("client");
        let t = Target {
            addr: "127.0.0.1:1".parse().expect("addr"),
            path: "/".into(),
        };
        let got = c.fetch_series(&t, &[Duration::from_millis(1), Duration::from_millis(1)]);
        assert_eq!(got.len(), 3);
        assert!(got[0].error.as_deref().unwrap().starts_with("connect"));
        assert!(got[1..].iter().all(|f| f.status == 0 && f.error.is_some()));
    }
}
