//! The reverse proxy: `proxy_pass` to HTTP and HTTPS upstreams.
//!
//! At load, [`Proxies::build`] makes one [`Route`] per location with `proxy_pass`: its peers,
//! the round-robin state it shares with every location naming the same `upstream`
//! (`balance`), and its TLS client config (`tls::client_config`, files through the load's
//! object store). Per request, the pipeline (`service`) evaluates the upstream URI and headers
//! (`headers`) and calls [`forward`]: pick a peer, take an idle connection from the pool or
//! connect (`upstream`), send the request with the client's body streamed, and wait for the
//! response header within `proxy_read_timeout`. A connect error or timeout marks the peer
//! failed and tries the next one (nginx's `proxy_next_upstream error timeout`); when none is
//! left the answer is 502 (504 for a timeout) and the reason is logged in nginx's words. The
//! response body streams to the client as it arrives (`proxy_buffering off`, firstbyte's
//! default) or is read whole first (`on`, nginx's default). A `101 Switching Protocols`
//! answer to an upgrade joins the two connections (WebSocket).

mod balance;
pub mod headers;
mod upstream;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

pub use balance::Balancer;
pub use upstream::{connect, os_text, ConnectError, Pool, ReqBody, UpstreamTls};

use super::body::Body;
use crate::conf::model::{HttpConf, LocationConf, Locations, ProxyConf, ProxyTarget};
use crate::tls::{ObjectStore, TlsError};

/// One location's way to its upstream.
pub struct Route {
    /// The location's proxy settings.
    pub conf: Arc<ProxyConf>,
    peers: Arc<Vec<SocketAddr>>,
    balancer: Arc<Mutex<Balancer>>,
    tls: Option<UpstreamTls>,
    /// `keepalive N` of the upstream (0: no pool).
    keepalive: usize,
}

/// Every route of one load, and its connection pool.
#[derive(Default)]
pub struct Proxies {
    routes: HashMap<usize, Arc<Route>>,
    /// Idle upstream connections.
    pub pool: Arc<Pool>,
}

fn ptr<T>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as *const u8 as usize
}

impl Proxies {
    /// Routes for every proxying location of `http`; TLS files go through `store`.
    pub fn build(http: &HttpConf, store: &mut ObjectStore) -> Result<Proxies, TlsError> {
        let mut b = Builder {
            out: Proxies::default(),
            balancers: HashMap::new(),
            configs: HashMap::new(),
        };
        for s in &http.servers {
            b.location(&s.default_location, store)?;
            b.locations(&s.locations, store)?;
        }
        Ok(b.out)
    }

    /// The route of a location's proxy settings.
    pub fn route(&self, conf: &Arc<ProxyConf>) -> Option<&Arc<Route>> {
        self.routes.get(&ptr(conf))
    }

    /// How many routes (proxying locations) the load has.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether no location proxies.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

type Shared = (Arc<Vec<SocketAddr>>, Arc<Mutex<Balancer>>, usize);

struct Builder {
    out: Proxies,
    /// Balancers by upstream block, so locations naming one upstream share its state.
    balancers: HashMap<usize, Shared>,
    /// Client configs made so far, by their settings (as their debug text, which covers every
    /// field): equal settings share one config and its session cache.
    configs: HashMap<String, Arc<rustls::ClientConfig>>,
}

impl Builder {
    fn locations(&mut self, l: &Locations, store: &mut ObjectStore) -> Result<(), TlsError> {
        for c in l.exact.values().chain(l.named.values()) {
            self.location(c, store)?;
        }
        for c in &l.prefix {
            self.location(&c.conf, store)?;
        }
        for c in &l.regex {
            self.location(&c.conf, store)?;
        }
        Ok(())
    }

    fn location(&mut self, loc: &LocationConf, store: &mut ObjectStore) -> Result<(), TlsError> {
        if let Some(p) = &loc.proxy {
            let (peers, balancer, keepalive) = match &p.target {
                ProxyTarget::Upstream(u) => self
                    .balancers
                    .entry(ptr(u))
                    .or_insert_with(|| {
                        (
                            Arc::new(u.servers.iter().map(|s| s.addr).collect()),
                            Arc::new(Mutex::new(Balancer::new(&u.servers))),
                            u.keepalive.unwrap_or(0),
                        )
                    })
                    .clone(),
                ProxyTarget::Addrs(a) => (
                    Arc::new(a.clone()),
                    Arc::new(Mutex::new(Balancer::equal(a.len()))),
                    0,
                ),
            };
            let tls = if p.tls {
                let key = format!("{:?}", p.ssl);
                let config = match self.configs.get(&key) {
                    Some(c) => c.clone(),
                    None => {
                        let c = crate::tls::client_config(&p.ssl, None, store)?;
                        self.configs.insert(key, c.clone());
                        c
                    }
                };
                Some(UpstreamTls {
                    config,
                    name: crate::tls::upstream_server_name(&p.ssl, &p.host)?,
                })
            } else {
                None
            };
            let route = Route {
                conf: p.clone(),
                peers,
                balancer,
                tls,
                keepalive,
            };
            self.out.routes.insert(ptr(p), Arc::new(route));
        }
        self.locations(&loc.locations, store)
    }
}

/// Words for the log line of a failed proxied request (`, client: ..., upstream: ...`).
pub struct LogContext<'a> {
    /// `$remote_addr`.
    pub client: &'a str,
    /// `$server_name`.
    pub server: &'a str,
    /// `$request`'s parts.
    pub request_line: &'a str,
    /// `$host`.
    pub host: &'a str,
}

impl LogContext<'_> {
    fn line(
        &self,
        reason: &dyn std::fmt::Display,
        scheme: &str,
        peer: Option<SocketAddr>,
        uri: &str,
    ) -> String {
        let upstream = match peer {
            Some(p) => format!(", upstream: \"{scheme}://{p}{uri}\""),
            None => String::new(),
        };
        format!(
            "{reason}, client: {}, server: {}, request: \"{}\"{upstream}, host: \"{}\"",
            self.client, self.server, self.request_line, self.host
        )
    }
}

/// What a proxied request ended in when it got no upstream response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 502 Bad Gateway.
    BadGateway,
    /// 504 Gateway Time-out.
    Timeout,
}

impl Failure {
    /// The status to answer.
    pub fn status(self) -> u16 {
        match self {
            Failure::BadGateway => 502,
            Failure::Timeout => 504,
        }
    }
}

/// Sends `req` (upstream URI and headers already set) over `route` and returns the response
/// for the client. `on_upgrade` is the client side of an upgrade request.
pub async fn forward(
    route: &Route,
    pool: &Arc<Pool>,
    mut req: Request<ReqBody>,
    on_upgrade: Option<hyper::upgrade::OnUpgrade>,
    log: &LogContext<'_>,
) -> Result<Response<Body>, Failure> {
    let conf = &route.conf;
    let scheme = if conf.tls { "https" } else { "http" };
    let uri = req.uri().to_string();
    let cfg_key = route.tls.as_ref().map_or(0, |t| ptr(&t.config));
    let mut tried: Vec<usize> = Vec::new();
    let mut last = Failure::BadGateway;
    let (peer_index, peer, key, mut sender) = loop {
        let pick = route
            .balancer
            .lock()
            .ok()
            .and_then(|mut b| b.pick(Instant::now(), &tried));
        let Some(i) = pick else {
            if tried.is_empty() {
                crate::fblog!(
                    Error,
                    "{}",
                    log.line(
                        &"no live upstreams while connecting to upstream",
                        scheme,
                        None,
                        &uri
                    )
                );
            }
            return Err(last);
        };
        tried.push(i);
        let Some(&addr) = route.peers.get(i) else {
            return Err(Failure::BadGateway);
        };
        let key = (addr, cfg_key);
        if route.keepalive > 0 {
            if let Some(mut s) = pool.checkout(key) {
                // A pooled connection the upstream closed meanwhile gives the request back.
                match s.try_send_request(req).await {
                    Ok(resp) => {
                        return respond(route, pool, (i, key, s), resp, on_upgrade, log, &uri)
                            .await;
                    }
                    Err(mut e) => match e.take_message() {
                        Some(m) => {
                            req = m;
                            tried.pop();
                            continue;
                        }
                        None => {
                            crate::fblog!(
                                Error,
                                "{}",
                                log.line(
                                    &format!("upstream prematurely closed connection while reading response header from upstream ({})", e.into_error()),
                                    scheme,
                                    Some(addr),
                                    &uri
                                )
                            );
                            return Err(Failure::BadGateway);
                        }
                    },
                }
            }
        }
        match connect(addr, route.tls.as_ref(), conf.connect_timeout).await {
            Ok(s) => break (i, addr, key, s),
            Err(e) => {
                crate::fblog!(Error, "{}", log.line(&e, scheme, Some(addr), &uri));
                if let Ok(mut b) = route.balancer.lock() {
                    b.failed(i, Instant::now());
                }
                last = if e.is_timeout() {
                    Failure::Timeout
                } else {
                    Failure::BadGateway
                };
            }
        }
    };
    let sent = tokio::time::timeout(conf.read_timeout, sender.send_request(req)).await;
    let resp = match sent {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            crate::fblog!(
                Error,
                "{}",
                log.line(
                    &format!("upstream prematurely closed connection while reading response header from upstream ({e})"),
                    scheme,
                    Some(peer),
                    &uri
                )
            );
            return Err(Failure::BadGateway);
        }
        Err(_) => {
            crate::fblog!(
                Error,
                "{}",
                log.line(
                    &"upstream timed out (110: Connection timed out) while reading response header from upstream",
                    scheme,
                    Some(peer),
                    &uri
                )
            );
            if let Ok(mut b) = route.balancer.lock() {
                b.failed(peer_index, Instant::now());
            }
            return Err(Failure::Timeout);
        }
    };
    respond(
        route,
        pool,
        (peer_index, key, sender),
        resp,
        on_upgrade,
        log,
        &uri,
    )
    .await
}

async fn respond(
    route: &Route,
    pool: &Arc<Pool>,
    (peer_index, key, sender): (usize, upstream::PoolKey, upstream::Sender),
    mut resp: Response<hyper::body::Incoming>,
    on_upgrade: Option<hyper::upgrade::OnUpgrade>,
    log: &LogContext<'_>,
    uri: &str,
) -> Result<Response<Body>, Failure> {
    let conf = &route.conf;
    if let Ok(mut b) = route.balancer.lock() {
        b.succeeded(peer_index);
    }
    let switching = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
    if switching {
        let Some(client) = on_upgrade else {
            return Err(Failure::BadGateway);
        };
        let up = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            if let (Ok(c), Ok(u)) = (client.await, up.await) {
                let mut c = TokioIo::new(c);
                let mut u = TokioIo::new(u);
                let _ = tokio::io::copy_bidirectional(&mut c, &mut u).await;
            }
        });
        let (mut parts, _) = resp.into_parts();
        parts.version = http::Version::default();
        headers::response_headers(conf, &mut parts.headers, true);
        return Ok(Response::from_parts(parts, Body::Empty));
    }
    let (mut parts, incoming) = resp.into_parts();
    // The client's protocol, not the upstream's, goes on the status line.
    parts.version = http::Version::default();
    headers::response_headers(conf, &mut parts.headers, false);
    let back = (route.keepalive > 0 && conf.http11).then(|| upstream::Return {
        pool: pool.clone(),
        key,
        sender,
        max: route.keepalive,
    });
    let body = upstream::UpstreamBody::new(incoming, conf.read_timeout, back);
    if conf.buffering {
        return match body.collect().await {
            Ok(c) => Ok(Response::from_parts(parts, Body::full(c.to_bytes()))),
            Err(e) => {
                crate::fblog!(
                    Error,
                    "{}",
                    log.line(
                        &format!(
                            "upstream prematurely closed connection while reading upstream ({e})"
                        ),
                        if conf.tls { "https" } else { "http" },
                        Some(key.0),
                        uri
                    )
                );
                Err(Failure::BadGateway)
            }
        };
    }
    Ok(Response::from_parts(
        parts,
        Body::Stream(body.boxed_unsync()),
    ))
}

/// The client's request body as the upstream request's body.
pub fn request_body<B>(body: B) -> ReqBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    body.map_err(|e| std::io::Error::other(e.into()))
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_statuses() {
        assert_eq!(Failure::BadGateway.status(), 502);
        assert_eq!(Failure::Timeout.status(), 504);
    }
}
