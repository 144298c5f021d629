//! The reverse proxy: `proxy_pass` to HTTP and HTTPS upstreams.
//!
//! At load, [`Proxies::build`] makes one [`Route`] per location with `proxy_pass`: its peers,
//! the round-robin state it shares with every location naming the same `upstream`
//! (`balance`), and its TLS client config (`tls::client_config`, files through the load's
//! object store). Per request, the pipeline (`http::pipeline`) evaluates the upstream URI and headers
//! (`headers`) and calls [`forward`]: pick a peer, take an idle connection from the pool or
//! connect (`upstream`), send the request with the client's body (read whole before, `stored`,
//! or streamed), and wait for the
//! response header within `proxy_read_timeout`. A failed attempt (connect error, timeout, a
//! status `proxy_next_upstream` lists) counts against the peer's `max_fails` and goes to the
//! next peer when `next::go_next` allows; when none is left the answer is 502 (504 for a
//! timeout), or the last upstream's own answer for a status, and the reason is logged in
//! nginx's words. The
//! response body streams to the client as it arrives (`proxy_buffering off`, firstbyte's
//! default) or is read as fast as the upstream sends into `proxy_buffers` and then a temp
//! file (`on`, nginx's default; `spool`). A `101 Switching Protocols`
//! answer to an upgrade joins the two connections (WebSocket, `tunnel`).

mod balance;
mod build;
mod client_cert;
mod cookies;
pub(crate) mod dns;
mod dynamic;
pub mod fastcgi;
pub mod h2;
pub mod headers;
pub mod next;
mod resolve;
mod send_timeout;
mod spool;
pub mod store;
mod stored;
mod trailers;
mod tunnel;
mod upstream;
mod vars;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;

pub use balance::{ip_hash_key, Attempt, Balancer};
pub use client_cert::{
    paths as client_cert_paths, ClientCertCounts, ClientCertPaths, DynamicClient,
};
pub use cookies::rewrite_headers as rewrite_cookies;
pub use dynamic::NoRoute;
pub use spool::Spool;
pub use stored::{Capture, RequestBody, SharedBody, Stored, StoredBody, TeeBody, Watch};
pub use trailers::{EarlyHints, PassHints, PassTrailers};
pub use tunnel::{ClientUpgrade, TunnelEnd};
pub use upstream::{connect, ConnectError, Keepalive, LocalBind, Pool, ReqBody, UpstreamTls};
pub use vars::UpstreamVars;

use super::body::{is_client_body_error, Body};
use crate::conf::model::{BalanceMethod, NextUpstream, PeerAddr, ProxyConf, SizeValue};

/// One location's way to its upstream.
pub struct Route {
    /// The location's proxy settings.
    pub conf: Arc<ProxyConf>,
    balancer: Arc<Mutex<Balancer>>,
    tls: Option<UpstreamTls>,
    /// `proxy_ssl_certificate` with variables: the client config is chosen per request.
    dynamic: Option<Arc<DynamicClient>>,
    /// `keepalive N` of the upstream (0: no pool) and its limits.
    keepalive: Keepalive,
    /// The upstream's balancing method (what key a request brings).
    pub method: BalanceMethod,
    /// `proxy_pass` with variables: what [`Route::for_url`] chooses from.
    dynamic_pass: Option<Arc<dynamic::DynamicRoutes>>,
}

/// Every route of one load, and its connection pool.
#[derive(Default)]
pub struct Proxies {
    routes: HashMap<usize, Arc<Route>>,
    /// Idle upstream connections.
    pub pool: Arc<Pool>,
    /// Idle FastCGI connections.
    pub fastcgi_pool: Arc<fastcgi::Pool>,
    /// The `server NAME resolve` lines of the load's upstreams, resolved at run time once
    /// [`Proxies::start_resolving`] starts them.
    resolving: Vec<resolve::Job>,
    /// A location has `early_hints`.
    early_hints: bool,
}

impl Proxies {
    /// Starts re-resolving the `server NAME resolve` lines (inside the runtime, once the
    /// load serves); the tasks end when `retired` turns true or its sender goes.
    pub fn start_resolving(&self, retired: &tokio::sync::watch::Receiver<bool>) {
        resolve::start(&self.resolving, retired);
    }
}

fn ptr<T>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as *const u8 as usize
}

type Shared = (Arc<Mutex<Balancer>>, Keepalive);

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
        peer: Option<&PeerAddr>,
        uri: &str,
    ) -> String {
        let upstream = match peer {
            // nginx: `http://unix:/path:/uri` for a unix socket.
            Some(PeerAddr::Unix(path)) => {
                format!(", upstream: \"{scheme}://unix:{}:{uri}\"", path.display())
            }
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
    /// The client's body failed (too large, stalled): the caller knows which and answers
    /// 413 or 408; 400 otherwise. Not the upstream's fault: nothing is logged against it.
    ClientBody,
    /// 500: firstbyte's side failed: this request's `proxy_ssl_certificate` (with
    /// variables) could not be loaded, or `proxy_bind`'s address could not be set.
    Internal,
}

impl Failure {
    /// The status to answer.
    pub fn status(self) -> u16 {
        match self {
            Failure::BadGateway => 502,
            Failure::Timeout => 504,
            Failure::ClientBody => 400,
            Failure::Internal => 500,
        }
    }
}

/// Sends `req` (upstream URI and headers already set) over `route` and returns the response
/// for the client. `on_upgrade` is the client side of an upgrade request.
pub async fn forward(
    route: &Route,
    pool: &Arc<Pool>,
    mut req: Request<ReqBody>,
    on_upgrade: Option<ClientUpgrade>,
    log: &LogContext<'_>,
    balance_key: Vec<u8>,
    up: &mut UpstreamVars,
) -> Result<Response<Body>, Failure> {
    // One turn to the scheduler before any upstream work: an HTTP/2 stream the client reset
    // right after its HEADERS is dropped by hyper at this first `Pending` (it checks for a
    // reset only while the request's future is pending), so no upstream connection is opened
    // or taken from the pool for it only to be thrown away.
    tokio::task::yield_now().await;
    let conf = &route.conf;
    // `proxy_store`: carried to `respond` on the response.
    let store_slot = req.extensions_mut().remove::<store::Slot>();
    let scheme = if conf.tls { "https" } else { "http" };
    // The request target (an HTTP/2 request's URI is absolute: its path is what is logged).
    let uri = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().to_string(), |p| p.to_string());
    let proto = h2::Proto::of(conf);
    let cfg_key = route.tls.as_ref().map_or(0, |t| ptr(&t.config));
    // A variable client certificate: this request's config (cached or read now).
    let mut cert_key: Option<Arc<str>> = None;
    let mut request_tls: Option<UpstreamTls> = None;
    if let (Some(d), Some(t)) = (&route.dynamic, &route.tls) {
        let Some(paths) = req.extensions_mut().remove::<ClientCertPaths>() else {
            crate::fblog!(
                Error,
                "{}",
                log.line(
                    &"no evaluated \"proxy_ssl_certificate\" for the request",
                    scheme,
                    None,
                    &uri
                )
            );
            return Err(Failure::BadGateway);
        };
        match d.config(&paths, Instant::now()) {
            Ok(config) => {
                cert_key = Some(paths.joined().into());
                request_tls = Some(UpstreamTls {
                    config,
                    name: t.name.clone(),
                });
            }
            Err(e) => {
                crate::fblog!(
                    Error,
                    "{}",
                    log.line(
                        &format!("{e} while SSL handshaking to upstream"),
                        scheme,
                        None,
                        &uri
                    )
                );
                return Err(Failure::Internal);
            }
        }
    }
    let tls = request_tls.as_ref().or(route.tls.as_ref());
    let local = req.extensions_mut().remove::<LocalBind>();
    let hints = req.extensions_mut().remove::<PassHints>();
    // What a retry needs to send the request again: its head, and its body when it was read
    // whole (`Resend`); a streamed one is sent at most once (`next::go_next` knows).
    let resend = req.extensions_mut().remove::<Resend>();
    let has_body = !http_body::Body::is_end_stream(req.body()) && resend.is_none();
    let head = (
        req.method().clone(),
        req.uri().clone(),
        req.version(),
        req.headers().clone(),
    );
    let rebuild = || {
        let body = match &resend {
            Some(Resend(s)) => request_body(StoredBody::new(s.clone())),
            None => request_body(http_body_util::Empty::<Bytes>::new()),
        };
        let mut r = Request::new(body);
        *r.method_mut() = head.0.clone();
        *r.uri_mut() = head.1.clone();
        *r.version_mut() = head.2;
        *r.headers_mut() = head.3.clone();
        r
    };
    let mut req = Some(req);
    let mut attempt = Attempt::new(balance_key);
    let tries = route.tries();
    let started = Instant::now();
    let mut last = Failure::BadGateway;
    loop {
        let (i, guard, addr) = route.next_peer(&mut attempt, up, last, log, scheme, &uri)?;
        let tries_left = tries.saturating_sub(attempt.tries());
        let Some(mut this) = req.take().or_else(|| (!has_body).then(rebuild)) else {
            return Err(last);
        };
        if let Some(h) = &hints {
            h.register(&mut this);
        }
        // The upstream block too: nginx keeps a cache per `upstream`.
        let key = (
            addr.clone(),
            cfg_key,
            cert_key.clone(),
            ptr(&route.balancer),
            proto != h2::Proto::H1,
        );
        let mut pooled = None;
        if route.keepalive.max > 0 {
            pooled = pool.checkout(&key, route.keepalive.timeout);
        }
        let (sender, sent) = match pooled {
            Some(mut s) => {
                up.connected(Instant::now());
                up.reused();
                s.track(up.counts());
                s.set_send_timeout(conf.send_timeout);
                // A pooled connection the upstream closed meanwhile gives the request back.
                let r = tokio::time::timeout(conf.read_timeout, s.try_send_request(this)).await;
                match r {
                    Ok(Err(mut e)) => match e.take_message() {
                        Some(m) => {
                            // Not this server's fault, and not a try: again, afresh.
                            req = Some(m);
                            attempt.untry();
                            up.forget();
                            continue;
                        }
                        None => (s, Sent::Failed(e.into_error())),
                    },
                    Ok(Ok(resp)) => (s, Sent::Response(resp)),
                    Err(_) => (s, Sent::HeaderTimeout),
                }
            }
            None => match connect(
                &addr,
                tls,
                conf.connect_timeout,
                conf.send_timeout,
                local.as_ref(),
                proto,
            )
            .await
            {
                Ok(mut s) => {
                    up.connected(Instant::now());
                    s.track(up.counts());
                    let r = tokio::time::timeout(conf.read_timeout, s.send_request(this)).await;
                    match r {
                        Ok(Ok(resp)) => (s, Sent::Response(resp)),
                        Ok(Err(e)) => (s, Sent::Failed(e)),
                        Err(_) => (s, Sent::HeaderTimeout),
                    }
                }
                Err(e @ ConnectError::Local(_)) => {
                    // nginx: a socket that cannot take the local address is no upstream's
                    // fault and goes to no next one.
                    crate::fblog!(Error, "{}", log.line(&e, scheme, Some(&addr), &uri));
                    up.end(500, Instant::now());
                    return Err(Failure::Internal);
                }
                Err(e) => {
                    crate::fblog!(Error, "{}", log.line(&e, scheme, Some(&addr), &uri));
                    crate::metrics::upstream_failure(if e.is_timeout() {
                        "connect_timeout"
                    } else {
                        "connect_error"
                    });
                    let outcome = if e.is_timeout() {
                        last = Failure::Timeout;
                        next::Outcome::Timeout
                    } else {
                        last = Failure::BadGateway;
                        next::Outcome::Error
                    };
                    // Nothing was sent: the request (and its body) is still whole.
                    req = Some(this);
                    up.end(last.status(), Instant::now());
                    route.failed(i);
                    drop(guard);
                    let facts = next::Request {
                        method: &head.0,
                        sent: false,
                        has_body: false,
                    };
                    if !next::go_next(
                        conf.next_upstream,
                        conf.next_upstream_timeout,
                        outcome,
                        facts,
                        tries_left,
                        started.elapsed(),
                    ) {
                        return Err(last);
                    }
                    continue;
                }
            },
        };
        let facts = next::Request {
            method: &head.0,
            sent: true,
            has_body,
        };
        let outcome = match sent {
            Sent::Response(resp) if headers::invalid_framing(resp.headers()).is_some() => {
                let reason = headers::invalid_framing(resp.headers()).unwrap_or_default();
                let reason = format!("{reason} while reading response header from upstream");
                crate::fblog!(Error, "{}", log.line(&reason, scheme, Some(&addr), &uri));
                crate::metrics::upstream_failure("invalid_header");
                last = Failure::BadGateway;
                next::Outcome::InvalidHeader
            }
            Sent::Response(mut resp) => {
                headers::drop_repeated(resp.headers_mut());
                let status = resp.status().as_u16();
                up.header(status, Instant::now());
                up.header_bytes(header_bytes(&resp));
                up.response_headers(resp.headers());
                let outcome = next::Outcome::Status(status);
                if NextUpstream::status_bit(status).is_some()
                    && next::go_next(
                        conf.next_upstream,
                        conf.next_upstream_timeout,
                        outcome,
                        facts,
                        tries_left,
                        started.elapsed(),
                    )
                {
                    if outcome.is_failure() {
                        crate::metrics::upstream_failure("status");
                        route.failed(i);
                    }
                    up.end(status, Instant::now());
                    last = Failure::BadGateway;
                    continue;
                }
                if let Some(s) = &store_slot {
                    resp.extensions_mut().insert(s.clone());
                }
                return respond(
                    route,
                    pool,
                    (i, key, sender, guard, up.counts()),
                    resp,
                    on_upgrade,
                    log,
                    &uri,
                )
                .await;
            }
            Sent::Failed(e) if is_client_body_error(&e) => return Err(Failure::ClientBody),
            Sent::Failed(e) => {
                let (reason, failure) = send_failure(&e);
                crate::fblog!(Error, "{}", log.line(&reason, scheme, Some(&addr), &uri));
                last = failure;
                let (outcome, label) = if failure == Failure::Timeout {
                    (next::Outcome::Timeout, "timeout")
                } else if e.is_parse() {
                    (next::Outcome::InvalidHeader, "invalid_header")
                } else {
                    (next::Outcome::Error, "error")
                };
                crate::metrics::upstream_failure(label);
                outcome
            }
            Sent::HeaderTimeout => {
                crate::metrics::upstream_failure("read_timeout");
                last = header_timeout(log, scheme, &addr, &uri);
                next::Outcome::Timeout
            }
        };
        drop(sender);
        route.failed(i);
        drop(guard);
        up.end(last.status(), Instant::now());
        if !next::go_next(
            conf.next_upstream,
            conf.next_upstream_timeout,
            outcome,
            facts,
            tries_left,
            started.elapsed(),
        ) {
            return Err(last);
        }
    }
}

/// What sending the request over one connection gave.
enum Sent {
    Response(Response<hyper::body::Incoming>),
    Failed(hyper::Error),
    HeaderTimeout,
}

/// One connection to a peer as the balancer counts it (`least_conn`): released when the
/// attempt fails or the response body is done.
pub(crate) struct ConnGuard {
    balancer: Arc<Mutex<Balancer>>,
    index: usize,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if let Ok(mut b) = self.balancer.lock() {
            b.release(self.index);
        }
    }
}

impl Route {
    /// How many servers one request may try: the group's (`down` ones aside), at most
    /// `proxy_next_upstream_tries` (`fastcgi_next_upstream_tries`) when that is set.
    fn tries(&self) -> usize {
        let tries = self.balancer.lock().map_or(1, |b| b.tries());
        match self.conf.next_upstream_tries {
            0 => tries,
            n => tries.min(n as usize),
        }
    }

    /// The next server for `attempt`: its id, its connection as the balancer counts it, and
    /// its address, whose try begins in `up`. When none is left (nginx's "no live upstreams")
    /// that is logged and counted, the group's name is recorded as the last try, and the
    /// answer is `last` — or 502 when nothing was tried.
    pub(crate) fn next_peer(
        &self,
        attempt: &mut Attempt,
        up: &mut UpstreamVars,
        last: Failure,
        log: &LogContext<'_>,
        scheme: &str,
        uri: &str,
    ) -> Result<(usize, ConnGuard, PeerAddr), Failure> {
        // The peer's id and address, read under the lock that picked it: a resolved line's
        // peers may change meanwhile.
        let pick = self.balancer.lock().ok().and_then(|mut b| {
            let i = b.pick(Instant::now(), attempt)?;
            Some((b.id(i), b.addr(i).cloned()))
        });
        let Some((i, addr)) = pick else {
            crate::fblog!(
                Error,
                "{}",
                log.line(
                    &"no live upstreams while connecting to upstream",
                    scheme,
                    None,
                    uri
                )
            );
            crate::metrics::upstream_failure("no_live_upstreams");
            // nginx records the group's name as the address of this last "try".
            up.begin(self.conf.host.clone(), Instant::now());
            up.end(502, Instant::now());
            return Err(if attempt.tries() == 0 {
                Failure::BadGateway
            } else {
                last
            });
        };
        let guard = ConnGuard {
            balancer: self.balancer.clone(),
            index: i,
        };
        let addr = addr.ok_or(Failure::BadGateway)?;
        up.begin(addr.to_string(), Instant::now());
        Ok((i, guard, addr))
    }

    /// Counts a failure of peer `i` (its id) against its `max_fails`.
    fn failed(&self, i: usize) {
        if let Ok(mut b) = self.balancer.lock() {
            b.failed(i, Instant::now());
        }
    }
}

/// `proxy_read_timeout` passed before the response header: logged, 504 (the caller counts
/// it against `max_fails`, nginx's `proxy_next_upstream timeout`).
fn header_timeout(log: &LogContext<'_>, scheme: &str, peer: &PeerAddr, uri: &str) -> Failure {
    crate::fblog!(
        Error,
        "{}",
        log.line(
            &"upstream timed out (110: Connection timed out) while reading response header from upstream",
            scheme,
            Some(peer),
            uri
        )
    );
    Failure::Timeout
}

/// The log reason and answer for a request that failed on its way to the upstream or while
/// waiting for the response header: `proxy_send_timeout` passing while the upstream did not
/// take the request is nginx's 504 "while sending request to upstream".
fn send_failure(e: &hyper::Error) -> (String, Failure) {
    if upstream::is_send_timeout(e) {
        (
            "upstream timed out (110: Connection timed out) while sending request to upstream"
                .to_string(),
            Failure::Timeout,
        )
    } else {
        (
            format!("upstream prematurely closed connection while reading response header from upstream ({e})"),
            Failure::BadGateway,
        )
    }
}

async fn respond(
    route: &Route,
    pool: &Arc<Pool>,
    (peer_index, key, sender, conn, counts): (
        usize,
        upstream::PoolKey,
        upstream::Sender,
        ConnGuard,
        Arc<vars::TryCounts>,
    ),
    mut resp: Response<hyper::body::Incoming>,
    on_upgrade: Option<ClientUpgrade>,
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
            // The client did not ask to switch: as nginx, the 101 goes to it as a head with
            // no body, and the connection ends there (nothing is joined). An HTTP/2 or
            // HTTP/3 client gets a 502 instead (the caller's business: no 101 there).
            let (mut parts, _) = resp.into_parts();
            parts.version = http::Version::default();
            headers::response_headers(conf, &mut parts.headers, false);
            parts.headers.insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return Ok(Response::from_parts(parts, Body::Empty));
        };
        let up = hyper::upgrade::on(&mut resp);
        let end = tunnel::spawn(client, up, conf.read_timeout);
        let (mut parts, _) = resp.into_parts();
        parts.extensions.insert(end);
        parts.version = http::Version::default();
        headers::response_headers(conf, &mut parts.headers, true);
        return Ok(Response::from_parts(parts, Body::Empty));
    }
    let store = resp
        .extensions_mut()
        .remove::<store::Slot>()
        .filter(|_| resp.status() == StatusCode::OK)
        .map(|slot| store::Store {
            slot,
            temp_dir: conf.buffers.temp_path.clone(),
            length: header_value(&resp, http::header::CONTENT_LENGTH)
                .and_then(|v| v.trim().parse().ok()),
            mtime: header_value(&resp, http::header::LAST_MODIFIED)
                .and_then(|v| httpdate::parse_http_date(v.trim()).ok()),
        });
    let (mut parts, incoming) = resp.into_parts();
    let from_h2 = parts.version == http::Version::HTTP_2;
    // The client's protocol, not the upstream's, goes on the status line.
    parts.version = http::Version::default();
    headers::response_headers(conf, &mut parts.headers, false);
    if from_h2 {
        parts.extensions.insert(h2::lower_case(&parts.headers));
    }
    let peer = key.0.clone();
    let back =
        (route.keepalive.max > 0 && conf.http_version.persistent()).then(|| upstream::Return {
            pool: pool.clone(),
            key,
            sender,
            keepalive: route.keepalive,
        });
    let body = upstream::UpstreamBody::new(incoming, conf.read_timeout, back)
        .hold(conn)
        .count(counts);
    let body = match store {
        Some(s) => store::StoreBody::new(body, s),
        None => store::StoreBody::plain(body),
    };
    let scheme = if conf.tls { "https" } else { "http" };
    let tail = || log.line(&"", scheme, Some(&peer), uri);
    let body = match (&conf.limit_rate, conf.buffering) {
        (SizeValue::Fixed(0), false) => body.boxed_unsync(),
        (SizeValue::Fixed(0), true) => spool::buffered(body, &conf.buffers, tail()).boxed_unsync(),
        // `proxy_limit_rate`: the upstream is read no faster than the rate.
        (SizeValue::Fixed(rate), buffering) => {
            let pace = crate::http::rate::Pace {
                rate: *rate,
                after: 0,
            };
            let paced = crate::http::rate::RateBody::new(body, pace);
            if buffering {
                spool::buffered(paced, &conf.buffers, tail()).boxed_unsync()
            } else {
                paced.boxed_unsync()
            }
        }
        // With variables: the rate is evaluated where the request's variables (this
        // response's `$upstream_http_*` among them) are, and nothing is read before it.
        (SizeValue::Var(_), buffering) => {
            let (paced, later) = crate::http::rate::RateLater::pair(body);
            parts.extensions.insert(later);
            if buffering {
                spool::buffered(paced, &conf.buffers, tail()).boxed_unsync()
            } else {
                paced.boxed_unsync()
            }
        }
    };
    if !conf.buffering {
        parts.extensions.insert(crate::http::postpone::Unbuffered);
    }
    Ok(Response::from_parts(parts, Body::Stream(body)))
}

/// A request extension: the body was read whole (`proxy_request_buffering on`), so each
/// server tried gets it again.
#[derive(Clone)]
pub struct Resend(pub Arc<Stored>);

/// The client's request body as the upstream request's body.
pub fn request_body<B>(body: B) -> ReqBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    body.map_err(|e| std::io::Error::other(e.into()))
        .boxed_unsync()
}

/// The text of a response's field `name`.
fn header_value<B>(resp: &http::Response<B>, name: http::header::HeaderName) -> Option<&str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

/// An HTTP/1.1 response head's size as it came: `HTTP/1.1 200 OK\r\n`, `Name: value\r\n`
/// each, the final CRLF (hyper keeps no reason phrase or spacing: nginx's figure for the
/// status line is approximate by a few bytes).
fn header_bytes<B>(resp: &http::Response<B>) -> u64 {
    let fields: usize = resp
        .headers()
        .iter()
        .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
        .sum();
    (17 + fields + 2) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_statuses() {
        assert_eq!(Failure::BadGateway.status(), 502);
        assert_eq!(Failure::Timeout.status(), 504);
        assert_eq!(Failure::ClientBody.status(), 400);
        assert_eq!(Failure::Internal.status(), 500);
    }
}
