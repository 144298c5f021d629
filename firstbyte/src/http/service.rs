//! The request pipeline: one request in, one response out, nginx's phases in order.
//!
//! Host → server block; `$uri` normalized; server-level `return`; location match; `internal`,
//! `allow`/`deny`, body size; location `return`; `stub_status` / `connection_info`;
//! `try_files`; static files. A status with an `error_page` becomes an internal redirect
//! (once: nginx's `recursive_error_pages off`). Then `add_header`, compression, `Server`,
//! `Date`, and the access log once the body has been sent.
//!
//! Everything up to the content phase is synchronous. A location with `proxy_pass` is the one
//! place the pipeline awaits: the phases decide [`Step::Proxy`], and `handle` then builds the
//! upstream request (the client's body streamed through, never read here) and awaits
//! `proxy::forward`. The static path runs the same code as before inside the same future: no
//! extra allocation or boxing per static request.
//!
//! Connection-level duties decided here, per request: `sendfile` for a file body on plain
//! HTTP/1.x (see `net::stream`), the location's `send_timeout` for the socket layer,
//! `client_body_timeout` on a proxied request body (a stalled body answers 408), the HTTP/2
//! GOAWAY after `keepalive_requests`, and nginx's 421 for a Host whose server block asks for
//! other client-certificate checks than the handshake (chosen by SNI) made ([`misdirected`]).

use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body::{Frame, SizeHint};

use super::body::{Body, LimitBody, StallBody};
use super::conn::Conn;
use super::pages::status_page;
use super::reqvars::RequestVars;
use super::{compress, static_files, uri};
use crate::conf::model::{
    AccessLog, AccessRule, DocRoot, LocationConf, LogEscape, Net, ServerConf, TryFallback,
};
use crate::conf::vars::ComplexValue;

/// Internal redirects allowed per request before a 500 (nginx: 10).
const MAX_REDIRECTS: u8 = 10;

/// What the pipeline hands back to hyper.
pub type HttpResponse = Response<ResponseBody>;

/// Serves one request. `B` is the request body (hyper's `Incoming`), streamed to an upstream
/// by `proxy_pass` and otherwise dropped.
pub async fn serve<B>(conn: Arc<Conn>, req: Request<B>) -> Result<HttpResponse, Infallible>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let busy = Busy::new(conn);
    let conn = &busy.0;
    let mut resp = handle(conn, req).await;
    if let Some(n) = conn.data_chunk {
        resp.body_mut().inner.set_chunk(n);
    }
    conn.first_response.release();
    // HTTP/2: the stream's send_timeout watch starts now (see `send_watch`).
    if let Some(p) = super::send_watch::current() {
        p.response_ready(conn.io.send_timeout());
        resp.body_mut().progress = Some(p);
    }
    resp.body_mut().busy = Some(busy);
    Ok(resp)
}

/// A request in flight: counted in its connection's activity (the idle timer) and in
/// stub_status "Writing" from its start until its response body is done or dropped. A guard,
/// so that a request whose future hyper drops before it answers (an HTTP/2 stream the
/// client reset while it waited on an upstream) is uncounted too.
struct Busy(Arc<Conn>);

impl Busy {
    fn new(conn: Arc<Conn>) -> Self {
        conn.activity.begin();
        conn.shared.stats.writing.fetch_add(1, Ordering::Relaxed);
        Busy(conn)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.activity.end();
        self.0.shared.stats.writing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The request's state as it moves through the phases.
struct Req<'a> {
    conn: &'a Conn,
    method: Method,
    headers: &'a HeaderMap,
    request_uri: &'a str,
    uri: String,
    args: Option<String>,
    protocol: &'static str,
    version: http::Version,
    host: String,
    server: Arc<ServerConf>,
    captures: Vec<Option<String>>,
    internal: bool,
    redirects: u8,
    document_root: Option<String>,
    request_filename: Option<String>,
    start: Instant,
    nreq: u64,
}

impl Req<'_> {
    fn vars(&self) -> RequestVars<'_> {
        RequestVars {
            conn: &self.conn.facts,
            method: self.method.as_str(),
            request_uri: self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: self.headers,
            host: &self.host,
            server_name: server_name(&self.server),
            document_root: self.document_root.as_deref(),
            request_filename: self.request_filename.as_deref(),
            status: 0,
            response_headers: None,
            body_bytes_sent: 0,
            start: self.start,
            connection_requests: self.nreq,
            captures: &self.captures,
        }
    }

    fn eval(&self, v: &ComplexValue) -> String {
        match v.as_static() {
            Some(s) => s.to_string(),
            None => v.eval(&self.vars()),
        }
    }
}

fn server_name(s: &ServerConf) -> &str {
    use crate::conf::model::ServerName;
    match s.server_names.first() {
        Some(ServerName::Exact(n)) => n,
        Some(ServerName::LeadingWildcard(n)) => n,
        Some(ServerName::TrailingWildcard(n)) => n,
        _ => "",
    }
}

/// What one pass through a location decided.
enum Out {
    /// A finished response.
    Response(Response<Body>),
    /// A status to answer, through `error_page` if one applies.
    Status(u16),
    /// Continue with another URI (`try_files` fallback, index, error page).
    Internal { uri: String, args: Option<String> },
    /// Continue in a named location.
    Named(String),
    /// Hand the request to the location's `proxy_pass`.
    Proxy,
}

/// What the synchronous phases decided.
enum Step {
    /// A response.
    Done(Response<Body>),
    /// Proxy with the location's settings (the location comes with the step).
    Proxy(Arc<crate::conf::model::ProxyConf>),
}

fn protocol_of(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        http::Version::HTTP_09 => "HTTP/0.9",
        _ => "HTTP/1.1",
    }
}

async fn handle<B>(conn: &Conn, req: Request<B>) -> HttpResponse
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let start = Instant::now();
    let nreq = conn.requests.fetch_add(1, Ordering::Relaxed) + 1;
    conn.shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    // HTTP/2: the stream that reaches the server's `keepalive_requests` asks for GOAWAY as it
    // starts, as nginx decides when it creates the stream, so streams a client resets before
    // their responses (rapid reset) count too. The location's own value applies again when the
    // response is ready.
    if req.version() == http::Version::HTTP_2 {
        let server = conn
            .sni_server
            .as_ref()
            .unwrap_or_else(|| conn.addr_servers().default_server());
        if nreq >= u64::from(server.default_location.keepalive_requests) {
            conn.last_request.notify_one();
        }
    }
    let (parts, body) = req.into_parts();
    let http::request::Parts {
        method,
        uri: parts_uri,
        version,
        headers: mut parts_headers,
        mut extensions,
        ..
    } = parts;
    // nginx reads the headers under the server the connection found before Host (SNI's, or
    // the address's default): its underscores_in_headers and ignore_invalid_headers apply.
    let header_server = conn
        .sni_server
        .as_ref()
        .unwrap_or_else(|| conn.addr_servers().default_server());
    if header_server.ignore_invalid_headers {
        drop_invalid_headers(
            &mut parts_headers,
            header_server.underscores_in_headers,
            conn,
        );
    }
    let parts = PartsRef {
        uri: &parts_uri,
        version,
        headers: &parts_headers,
    };
    let protocol = protocol_of(parts.version);
    let request_uri = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let addr = conn.addr_servers();

    // Host: HTTP/2's :authority, else the Host header; HTTP/1.1 requires one.
    let host_raw = parts
        .uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            parts
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        });
    let host = match host_raw.as_deref().map(crate::conf::vhosts::normalize_host) {
        Some(Ok(h)) => Some(h.into_owned()),
        Some(Err(_)) => None,
        None if parts.version == http::Version::HTTP_11 => None,
        None => Some(String::new()),
    };
    let server = match &host {
        Some(h) if !h.is_empty() => addr.find(Some(h.as_str())).clone(),
        _ => match &conn.sni_server {
            Some(s) => s.clone(),
            None => addr.find(None).clone(),
        },
    };
    let sni = conn
        .facts
        .tls
        .as_ref()
        .and_then(|t| t.server_name.as_deref());
    let misdirect = match &conn.sni_server {
        Some(hs_server) => misdirected(sni, hs_server, &server),
        None => false,
    };
    let mut r = Req {
        conn,
        method,
        headers: parts.headers,
        request_uri,
        uri: String::new(),
        args: None,
        protocol,
        version: parts.version,
        host: host.clone().unwrap_or_default(),
        server,
        captures: Vec::new(),
        internal: false,
        redirects: 0,
        document_root: None,
        request_filename: None,
        start,
        nreq,
    };
    if r.host.is_empty() {
        r.host = server_name(&r.server).to_string();
    }

    let (path, query) = uri::split_target(request_uri);
    let refusal = client_refusal(&r);
    let (step, loc) = match (host, uri::normalize_path(path), refusal) {
        (Some(_), _, _) if misdirect => {
            crate::fblog!(
                Info,
                "client attempted to request the server name different from the one that was negotiated, client: {}, server: {}, host: \"{}\"",
                conn.facts.peer.map(|p| p.ip().to_string()).unwrap_or_default(),
                server_name(&r.server),
                r.host
            );
            let loc = r.server.default_location.clone();
            let (resp, loc) = error(&mut r, 421, loc);
            (Step::Done(resp), loc)
        }
        (Some(_), _, Some(code)) => {
            crate::fblog!(
                Info,
                "{}, client: {}, server: {}",
                if code == 496 {
                    "client sent no required SSL certificate while reading client request headers"
                } else {
                    "client SSL certificate verify error while reading client request headers"
                },
                conn.facts
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_default(),
                server_name(&r.server),
            );
            let loc = r.server.default_location.clone();
            let (resp, loc) = error(&mut r, code, loc);
            (Step::Done(resp), loc)
        }
        (Some(_), Ok(u), None) => {
            r.uri = u;
            r.args = query.map(str::to_string);
            run(&mut r)
        }
        _ => (
            Step::Done(status_response(400)),
            r.server.default_location.clone(),
        ),
    };
    let (resp, loc) = match step {
        Step::Done(resp) => (resp, loc),
        Step::Proxy(conf) => {
            let timed_out = Arc::new(AtomicBool::new(false));
            let too_large = Arc::new(AtomicBool::new(false));
            let body = StallBody::new(body, loc.client_body_timeout, timed_out.clone());
            let body = LimitBody::new(body, loc.client_max_body_size, too_large.clone());
            // Boxed: the proxy state is large and rare; the common request future stays small.
            match Box::pin(proxy(&r, &loc, &conf, body, &mut extensions)).await {
                Ok(resp) => (resp, loc),
                Err(_) if too_large.load(Ordering::Relaxed) => {
                    crate::fblog!(
                        Error,
                        "client intended to send too large body: more than {} bytes, client: {}, request: \"{} {}\"",
                        loc.client_max_body_size,
                        conn.facts.peer.map(|p| p.ip().to_string()).unwrap_or_default(),
                        r.method,
                        r.request_uri
                    );
                    error(&mut r, 413, loc)
                }
                // nginx: "the request is terminated with the 408 (Request Time-out) error".
                Err(_) if timed_out.load(Ordering::Relaxed) => {
                    crate::fblog!(
                        Info,
                        "client timed out (110: Connection timed out) while reading client request body, client: {}, request: \"{} {}\"",
                        conn.facts.peer.map(|p| p.ip().to_string()).unwrap_or_default(),
                        r.method,
                        r.request_uri
                    );
                    error(&mut r, 408, loc)
                }
                Err(code) => error(&mut r, code, loc),
            }
        }
    };
    finish(&r, resp, &loc, parts.headers)
}

/// Whether nginx takes a header name as valid: letters, digits and `-`, and `_` with
/// `underscores_in_headers on`. Anything else hyper let through (`.`, `~`, `!`, ...) is invalid.
pub fn valid_header_name(name: &str, underscores: bool) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || (b == b'_' && underscores))
}

/// `ignore_invalid_headers on` (nginx's default): invalid headers are dropped before anything
/// reads them, so `X_Real_IP` never reaches an upstream beside `X-Real-IP` (applications
/// that map both to `HTTP_X_REAL_IP` would take either).
fn drop_invalid_headers(h: &mut HeaderMap, underscores: bool, conn: &Conn) {
    if h.keys().all(|k| valid_header_name(k.as_str(), underscores)) {
        return;
    }
    let old = std::mem::take(h);
    let mut name = None;
    for (k, v) in old {
        // `None` continues the previous name's values.
        if let Some(k) = k {
            name = Some(k);
        }
        let Some(k) = &name else { continue };
        if valid_header_name(k.as_str(), underscores) {
            h.append(k.clone(), v);
        } else {
            crate::fblog!(
                Info,
                "client sent invalid header line: \"{}\", client: {}",
                k.as_str(),
                conn.facts
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_default()
            );
        }
    }
}

/// The request line's parts the pipeline borrows.
struct PartsRef<'a> {
    uri: &'a http::Uri,
    version: http::Version,
    headers: &'a HeaderMap,
}

/// Builds the upstream request and forwards it; `Err` is the status to answer.
async fn proxy<B>(
    r: &Req<'_>,
    loc: &Arc<LocationConf>,
    conf: &Arc<crate::conf::model::ProxyConf>,
    body: B,
    extensions: &mut http::Extensions,
) -> Result<Response<Body>, u16>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use super::proxy::{self as px, headers as ph};
    let site = &r.conn.site;
    let Some(route) = site.proxies.route(conf) else {
        return Err(502);
    };
    let remote = r.conn.facts.peer.map(|p| p.ip().to_string());
    let target = ph::upstream_uri(
        conf,
        &loc.prefix,
        r.internal,
        r.request_uri,
        &r.uri,
        r.args.as_deref(),
    );
    let (headers, client_cert) = {
        let forwarded_for = ph::add_x_forwarded_for(r.headers, remote.as_deref());
        let inner = r.vars();
        let vars = ph::ProxyVars {
            inner: &inner,
            proxy_host: &conf.host,
            forwarded_for: &forwarded_for,
        };
        let cert = px::client_cert_paths(&conf.ssl, &vars);
        (ph::request_headers(conf, r.headers, &vars), cert)
    };
    let version = if conf.http11 {
        http::Version::HTTP_11
    } else {
        http::Version::HTTP_10
    };
    let mut headers = headers;
    let mut body = px::request_body(body);
    // A body of unknown length (chunked, or HTTP/2 without content-length) is never dropped:
    // hyper would send none over HTTP/1.0, or for a GET of unknown length.
    if !headers.contains_key(header::CONTENT_LENGTH) && !http_body::Body::is_end_stream(&body) {
        if conf.http11 {
            headers.insert(
                header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
        } else {
            // HTTP/1.0 has no chunked: read the body whole (client_max_body_size bounds it)
            // and send its length, as nginx. Memory holds nginx's client_body_buffer_size
            // (16k on x86_64), the rest goes to an unlinked temp file in proxy_temp_path.
            use http_body_util::BodyExt;
            let b = &conf.buffers;
            let mut spool = px::Spool::new(
                16 << 10,
                b.temp_path.clone(),
                u64::MAX,
                b.temp_file_write_size,
            );
            while let Some(f) = body.frame().await {
                if let Ok(d) = f.map_err(|_| 400u16)?.into_data() {
                    spool.push(d).map_err(|_| 500u16)?;
                }
            }
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(spool.len()));
            body = px::SpoolBody(spool).boxed_unsync();
        }
    }
    let mut req = Request::new(body);
    *req.method_mut() = r.method.clone();
    *req.version_mut() = version;
    *req.uri_mut() = target.parse().map_err(|_| 500u16)?;
    *req.headers_mut() = headers;
    if let Some(c) = client_cert {
        req.extensions_mut().insert(c);
    }
    let upgrade = if req.headers().contains_key(header::UPGRADE) {
        extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .map(|on| px::ClientUpgrade {
                on,
                shared: r.conn.shared.clone(),
            })
    } else {
        None
    };
    let request_line = format!("{} {} {}", r.method, r.request_uri, r.protocol);
    let log = px::LogContext {
        client: remote.as_deref().unwrap_or(""),
        server: server_name(&r.server),
        request_line: &request_line,
        host: &r.host,
    };
    px::forward(route, &site.proxies.pool, req, upgrade, &log)
        .await
        .map_err(|f| f.status())
}

/// Runs the phases, following internal redirects.
fn run(r: &mut Req) -> (Step, Arc<LocationConf>) {
    let (resp, loc) = run_phases(r);
    match resp {
        Ok(resp) => (Step::Done(resp), loc),
        Err(()) => match &loc.proxy {
            Some(p) => (Step::Proxy(p.clone()), loc),
            None => (Step::Done(status_response(500)), loc),
        },
    }
}

/// The phases; `Err(())`: proxy with the returned location.
fn run_phases(r: &mut Req) -> (Result<Response<Body>, ()>, Arc<LocationConf>) {
    let server = r.server.clone();
    // Server-level `return` runs before any location is chosen (nginx's server rewrite phase).
    if let Some(ret) = &server.default_location.ret {
        match do_return(r, ret) {
            Out::Response(resp) => return (Ok(resp), server.default_location.clone()),
            Out::Status(code) => return ok(error(r, code, server.default_location.clone())),
            _ => {}
        }
    }
    let mut named: Option<String> = None;
    loop {
        if r.redirects > MAX_REDIRECTS {
            crate::fblog!(
                Error,
                "rewrite or internal redirection cycle while processing \"{}\"",
                r.uri
            );
            return (Ok(status_response(500)), server.default_location.clone());
        }
        let loc = match named.take() {
            Some(n) => match server.locations.named(&n) {
                Some(l) => l.clone(),
                None => return (Ok(status_response(500)), server.default_location.clone()),
            },
            None => match server.locations.find(&r.uri) {
                Some(m) => {
                    r.captures = m.captures;
                    m.conf.clone()
                }
                None => server.default_location.clone(),
            },
        };
        match in_location(r, &loc) {
            Out::Response(resp) => return (Ok(resp), loc),
            Out::Status(code) => return ok(error(r, code, loc)),
            Out::Proxy => return (Err(()), loc),
            Out::Internal { uri, args } => {
                r.redirects += 1;
                r.internal = true;
                r.uri = uri;
                r.args = args;
            }
            Out::Named(n) => {
                r.redirects += 1;
                r.internal = true;
                named = Some(n);
            }
        }
    }
}

fn ok(
    (resp, loc): (Response<Body>, Arc<LocationConf>),
) -> (Result<Response<Body>, ()>, Arc<LocationConf>) {
    (Ok(resp), loc)
}

/// Answers `code`, through the location's `error_page` when one names it.
fn error(r: &mut Req, code: u16, loc: Arc<LocationConf>) -> (Response<Body>, Arc<LocationConf>) {
    let page = loc
        .error_page
        .iter()
        .find(|p| p.codes.contains(&code))
        .cloned();
    let Some(page) = page else {
        return (status_response(code), loc);
    };
    let target = r.eval(&page.uri);
    if target.starts_with("http://") || target.starts_with("https://") {
        let c = match page.response {
            Some(Some(c)) if (301..=308).contains(&c) => c,
            _ => 302,
        };
        return (redirect_response(c, &target), loc);
    }
    // The page is fetched with GET (HEAD stays HEAD), and only one level deep.
    if r.method != Method::HEAD {
        r.method = Method::GET;
    }
    r.internal = true;
    r.redirects += 1;
    let mut inner = Req {
        conn: r.conn,
        method: r.method.clone(),
        headers: r.headers,
        request_uri: r.request_uri,
        uri: String::new(),
        args: None,
        protocol: r.protocol,
        version: r.version,
        host: r.host.clone(),
        server: r.server.clone(),
        captures: Vec::new(),
        internal: true,
        redirects: r.redirects,
        document_root: None,
        request_filename: None,
        start: r.start,
        nreq: r.nreq,
    };
    let server = r.server.clone();
    let (page_loc, out) = if let Some(name) = target.strip_prefix('@') {
        match server.locations.named(name) {
            Some(l) => (l.clone(), in_location(&mut inner, l)),
            None => return (status_response(code), loc),
        }
    } else {
        let (p, q) = uri::split_target(&target);
        let Ok(u) = uri::normalize_path(p) else {
            return (status_response(code), loc);
        };
        inner.uri = u;
        inner.args = q.map(str::to_string);
        let l = match server.locations.find(&inner.uri) {
            Some(m) => {
                inner.captures = m.captures;
                m.conf.clone()
            }
            None => server.default_location.clone(),
        };
        let out = in_location(&mut inner, &l);
        (l, out)
    };
    match out {
        Out::Response(mut resp) => {
            let status = match page.response {
                Some(Some(c)) => c,
                Some(None) => resp.status().as_u16(),
                None => code,
            };
            *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(resp.status());
            (resp, page_loc)
        }
        // recursive_error_pages off: a failing error page gives the original status's page.
        _ => (status_response(code), loc),
    }
}

fn allowed(rules: &[AccessRule], peer: Option<std::net::IpAddr>) -> bool {
    for rule in rules {
        let hit = match (rule.net, peer) {
            (Net::All, _) => true,
            (Net::Cidr(net, bits), Some(ip)) => cidr_contains(net, bits, ip),
            (Net::Cidr(..), None) => false,
        };
        if hit {
            return rule.allow;
        }
    }
    true
}

fn cidr_contains(net: std::net::IpAddr, bits: u8, ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let ip = match (net, ip) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => return false,
        },
        _ => ip,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits.min(32))
            };
            (u32::from(n) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits.min(128))
            };
            (u128::from(n) & mask) == (u128::from(a) & mask)
        }
        _ => false,
    }
}

/// One pass through a location.
fn in_location(r: &mut Req, loc: &Arc<LocationConf>) -> Out {
    if loc.internal && !r.internal {
        return Out::Status(404);
    }
    if !allowed(&loc.access, r.conn.facts.peer.map(|p| p.ip())) {
        crate::fblog!(
            Error,
            "access forbidden by rule, client: {}, server: {}, request: \"{} {}\"",
            r.conn
                .facts
                .peer
                .map(|p| p.ip().to_string())
                .unwrap_or_default(),
            server_name(&r.server),
            r.method,
            r.request_uri
        );
        return Out::Status(403);
    }
    if loc.client_max_body_size > 0 {
        let len = r
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if len > loc.client_max_body_size {
            return Out::Status(413);
        }
    }
    if let Some(ret) = &loc.ret {
        return do_return(r, ret);
    }
    if loc.stub_status {
        return Out::Response(stub_status(r.conn));
    }
    if loc.proxy.is_some() {
        return Out::Proxy;
    }
    if loc.connection_info {
        return Out::Response(super::builtin::connection_info(
            r.conn,
            r.headers,
            r.args.as_deref(),
            r.protocol,
        ));
    }
    let root = match &loc.root {
        DocRoot::Root(v) | DocRoot::Alias(v) => r.eval(v),
    };
    r.document_root = Some(root.clone());
    if let Some(tf) = &loc.try_files {
        for f in &tf.files {
            let cand = r.eval(f);
            let Some(path) = static_files::map_path(loc, &cand, &root) else {
                continue;
            };
            let is_dir_cand = cand.ends_with('/');
            match std::fs::metadata(&path) {
                Ok(m) if is_dir_cand && m.is_dir() => {
                    r.uri = cand;
                    return serve_static(r, loc, path);
                }
                Ok(m) if !is_dir_cand && m.is_file() => {
                    r.uri = cand;
                    return serve_static(r, loc, path);
                }
                _ => {}
            }
        }
        return match &tf.fallback {
            TryFallback::Code(c) => Out::Status(*c),
            TryFallback::Named(n) => Out::Named(n.clone()),
            TryFallback::Uri(v) => {
                let target = r.eval(v);
                let (p, q) = uri::split_target(&target);
                match uri::normalize_path(p) {
                    Ok(u) => Out::Internal {
                        uri: u,
                        args: q.map(str::to_string).or_else(|| r.args.clone()),
                    },
                    Err(_) => Out::Status(500),
                }
            }
        };
    }
    match static_files::map_path(loc, &r.uri, &root) {
        Some(path) => serve_static(r, loc, path),
        None => Out::Status(404),
    }
}

fn serve_static(r: &mut Req, loc: &Arc<LocationConf>, path: PathBuf) -> Out {
    r.request_filename = Some(path.to_string_lossy().into_owned());
    let fr = static_files::FileRequest {
        method: &r.method,
        headers: r.headers,
        uri: &r.uri,
        path: &path,
        loc,
    };
    match static_files::serve(&fr, &r.conn.shared.files) {
        static_files::FileOutcome::Response(resp) => Out::Response(resp),
        static_files::FileOutcome::Redirect(to) => {
            let abs = absolute(r, &to);
            Out::Response(redirect_response(301, &abs))
        }
        static_files::FileOutcome::Status(s) => {
            if s == StatusCode::NOT_FOUND {
                crate::fblog!(
                    Error,
                    "open() \"{}\" failed (2: No such file or directory), client: {}, server: {}, request: \"{} {}\"",
                    path.display(),
                    r.conn.facts.peer.map(|p| p.ip().to_string()).unwrap_or_default(),
                    server_name(&r.server),
                    r.method,
                    r.request_uri
                );
            }
            Out::Status(s.as_u16())
        }
    }
}

/// The `Location` of a redirect firstbyte makes (a directory's trailing slash, `return 30x`
/// with a path), as nginx: with `absolute_redirect on`, `scheme://host[:port]` + the path,
/// where the host is the request's validated Host (never the raw header) or, with
/// `server_name_in_redirect on` or no Host, the server's first name; the port is the one the
/// connection came to (`port_in_redirect`), left out when it is the scheme's own.
fn absolute(r: &Req, path: &str) -> String {
    if path.starts_with("http://") || path.starts_with("https://") {
        return path.to_string();
    }
    let loc = r
        .server
        .locations
        .find(&r.uri)
        .map(|m| m.conf.clone())
        .unwrap_or_else(|| r.server.default_location.clone());
    if !loc.absolute_redirect {
        return path.to_string();
    }
    let tls = r.conn.facts.tls.is_some();
    let name = server_name(&r.server);
    let host = if loc.server_name_in_redirect || r.host.is_empty() {
        name
    } else {
        r.host.as_str()
    };
    let port = r
        .conn
        .facts
        .local
        .map(|a| a.port())
        .filter(|&p| loc.port_in_redirect && !(tls && p == 443) && (tls || p != 80));
    redirect_target(tls, host, port, path)
}

/// `scheme://host[:port]path`, with an IPv6 literal in brackets.
fn redirect_target(tls: bool, host: &str, port: Option<u16>, path: &str) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    match port {
        Some(p) => format!("{scheme}://{host}:{p}{path}"),
        None => format!("{scheme}://{host}{path}"),
    }
}

fn do_return(r: &mut Req, ret: &crate::conf::model::Return) -> Out {
    let code = ret.code;
    let value = ret.value.as_ref().map(|v| r.eval(v));
    if matches!(code, 301 | 302 | 303 | 307 | 308) {
        let to = value.unwrap_or_default();
        return Out::Response(redirect_response(code, &absolute(r, &to)));
    }
    match value {
        Some(text) => {
            let mut resp = Response::new(Body::full(text));
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            let ct = r
                .server
                .locations
                .find(&r.uri)
                .map(|m| m.conf.default_type.clone())
                .unwrap_or_else(|| r.server.default_location.default_type.clone());
            if let Ok(v) = HeaderValue::from_str(&ct) {
                resp.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            Out::Response(resp)
        }
        None if code >= 400 => Out::Status(code),
        None => {
            let mut resp = Response::new(Body::Empty);
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            Out::Response(resp)
        }
    }
}

/// nginx's page for a status.
pub fn status_response(code: u16) -> Response<Body> {
    let status = StatusCode::from_u16(super::pages::wire_status(code))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if matches!(code, 204 | 304) || code < 200 {
        let mut r = Response::new(Body::Empty);
        *r.status_mut() = status;
        return r;
    }
    let mut r = Response::new(Body::full(status_page(code)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
    r
}

fn redirect_response(code: u16, location: &str) -> Response<Body> {
    let mut r = status_response(code);
    match HeaderValue::from_str(location) {
        Ok(v) => {
            r.headers_mut().insert(header::LOCATION, v);
        }
        Err(_) => return status_response(500),
    }
    r
}

fn stub_status(conn: &Conn) -> Response<Body> {
    let s = &conn.shared.stats;
    let active = s.active.load(Ordering::Relaxed);
    let writing = s.writing.load(Ordering::Relaxed);
    let text = format!(
        "Active connections: {active} \nserver accepts handled requests\n {} {} {} \nReading: 0 Writing: {writing} Waiting: {} \n",
        s.accepts.load(Ordering::Relaxed),
        s.handled.load(Ordering::Relaxed),
        s.requests.load(Ordering::Relaxed),
        active.saturating_sub(writing),
    );
    let mut r = Response::new(Body::full(text));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// nginx's 421 Misdirected Request, for client certificates: on a TLS connection whose
/// handshake was made with `hs_server`'s settings (the block chosen by SNI), a request whose
/// Host chose `host_server` is refused when that server checks client certificates
/// (`ssl_verify_client` other than off) and the handshake did not make the same checks
/// (`ssl_verify_client` or `ssl_client_certificate` differ), or there was no SNI at all:
/// otherwise a client could pass the handshake of a server without client checks (or connect
/// by IP address) and then ask a protected one.
///
/// nginx 1.22 refuses whenever the Host (not equal to the SNI name) selects a server with
/// `ssl_verify_client` other than off, even the SNI's own server block, and without SNI
/// answers 400 ("No required SSL certificate was sent") when no certificate came. firstbyte
/// refuses only when the requirements differ (the same block, or one with the same checks,
/// was verified by the handshake already), and always without SNI.
pub fn misdirected(
    sni: Option<&str>,
    hs_server: &Arc<ServerConf>,
    host_server: &Arc<ServerConf>,
) -> bool {
    if Arc::ptr_eq(hs_server, host_server)
        || client_checks(host_server) == crate::conf::model::VerifyClient::Off
    {
        return false;
    }
    sni.is_none()
        || (client_checks(host_server), client_ca(host_server))
            != (client_checks(hs_server), client_ca(hs_server))
}

/// nginx's check of every request to a server with `ssl_verify_client`: 495 for a
/// certificate that failed verification, 496 for none where one is required.
fn client_refusal(r: &Req) -> Option<u16> {
    let tls = r.conn.facts.tls.as_ref()?;
    let verify = tls
        .client
        .as_ref()
        .map_or(crate::tls::peer::ClientVerify::None, |c| c.verify.clone());
    crate::tls::peer::refusal(client_checks(&r.server), &verify)
}

fn client_checks(s: &ServerConf) -> crate::conf::model::VerifyClient {
    s.tls
        .as_ref()
        .map_or(crate::conf::model::VerifyClient::Off, |t| t.verify_client)
}

fn client_ca(s: &ServerConf) -> Option<&std::path::Path> {
    s.tls.as_ref().and_then(|t| t.client_certificate.as_deref())
}

fn add_header_applies(code: u16) -> bool {
    matches!(
        code,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// Headers every response gets, compression, keep-alive, and the access log.
fn finish(
    r: &Req,
    mut resp: Response<Body>,
    loc: &Arc<LocationConf>,
    req_headers: &HeaderMap,
) -> HttpResponse {
    let code = resp.status().as_u16();
    if !loc.add_header.is_empty() {
        let applies = add_header_applies(code);
        for h in &loc.add_header {
            if h.always || applies {
                let v = r.eval(&h.value);
                if v.is_empty() {
                    continue;
                }
                if let (Ok(n), Ok(v)) = (
                    header::HeaderName::from_bytes(h.name.as_bytes()),
                    HeaderValue::from_str(&v),
                ) {
                    resp.headers_mut().append(n, v);
                }
            }
        }
    }
    if loc.compression.gzip || loc.compression.brotli {
        let info = compress::RequestInfo {
            method: &r.method,
            version: r.version,
            headers: req_headers,
        };
        resp = compress::apply(&info, resp, &loc.compression);
    }
    let h = resp.headers_mut();
    // A proxied response keeps the upstream's own when `proxy_pass_header` lets it through.
    if !h.contains_key(header::SERVER) {
        h.insert(header::SERVER, HeaderValue::from_static("firstbyte"));
    }
    if !h.contains_key(header::DATE) {
        h.insert(header::DATE, crate::log::now().http_date.clone());
    }
    let last = r.nreq >= u64::from(loc.keepalive_requests);
    if r.version == http::Version::HTTP_2 {
        if last {
            r.conn.last_request.notify_one();
        }
    } else if loc.keepalive_timeout.is_zero() || last {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    r.conn.io.set_send_timeout(loc.send_timeout);
    // HTTP/2 frames its DATA itself: sendfile is for HTTP/1.x on a socket that carries the
    // bytes as they are (plain TCP now, kernel TLS later).
    if loc.sendfile
        && r.conn.io.sendfile_capable()
        && matches!(r.version, http::Version::HTTP_11 | http::Version::HTTP_10)
    {
        resp.body_mut().set_sendfile(&r.conn.io, loc.tcp_nopush);
    }
    let log = match &loc.access_log {
        AccessLog::Off => None,
        AccessLog::Logs(targets) if targets.is_empty() => None,
        AccessLog::Logs(_) => Some(Box::new(LogOnDone {
            conn_facts: r.conn.facts.clone(),
            site: r.conn.site.clone(),
            loc: loc.clone(),
            method: r.method.to_string(),
            request_uri: r.request_uri.to_string(),
            uri: r.uri.clone(),
            args: r.args.clone(),
            protocol: r.protocol,
            headers: req_headers.clone(),
            host: r.host.clone(),
            server_name: server_name(&r.server).to_string(),
            status: code,
            response_headers: resp.headers().clone(),
            start: r.start,
            nreq: r.nreq,
        })),
    };
    let (parts, body) = resp.into_parts();
    Response::from_parts(
        parts,
        ResponseBody {
            inner: body,
            sent: 0,
            log,
            busy: None,
            progress: None,
        },
    )
}

/// What the access log needs once the body is sent.
struct LogOnDone {
    conn_facts: super::reqvars::ConnFacts,
    site: Arc<crate::server::Site>,
    loc: Arc<LocationConf>,
    method: String,
    request_uri: String,
    uri: String,
    args: Option<String>,
    protocol: &'static str,
    headers: HeaderMap,
    host: String,
    server_name: String,
    status: u16,
    response_headers: HeaderMap,
    start: Instant,
    nreq: u64,
}

impl LogOnDone {
    fn write(&self, sent: u64) {
        let AccessLog::Logs(targets) = &self.loc.access_log else {
            return;
        };
        let vars = RequestVars {
            conn: &self.conn_facts,
            method: &self.method,
            request_uri: &self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: &self.headers,
            host: &self.host,
            server_name: &self.server_name,
            document_root: None,
            request_filename: None,
            status: self.status,
            response_headers: Some(&self.response_headers),
            body_bytes_sent: sent,
            start: self.start,
            connection_requests: self.nreq,
            captures: &[],
        };
        for t in targets {
            let mut line = t.format.value.eval_log(&vars, t.format.escape, log_escape);
            line.push('\n');
            self.site.write_access_log(&t.target, line.as_bytes());
        }
    }
}

/// Escapes a variable's value for a log line (`escape=default|json|none`).
pub fn log_escape(mode: LogEscape, v: &str, out: &mut String) {
    match mode {
        LogEscape::None => out.push_str(v),
        LogEscape::Default => {
            for b in v.bytes() {
                if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
                    out.push_str(&format!("\\x{b:02X}"));
                } else {
                    out.push(b as char);
                }
            }
        }
        LogEscape::Json => {
            for c in v.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
        }
    }
}

/// The body handed to hyper: counts bytes and writes the access log when done.
pub struct ResponseBody {
    inner: Body,
    sent: u64,
    log: Option<Box<LogOnDone>>,
    /// The connection whose request this answers: marked idle again when the body is done.
    busy: Option<Busy>,
    /// The HTTP/2 stream's progress for `send_timeout`.
    progress: Option<Arc<super::send_watch::Progress>>,
}

impl ResponseBody {
    /// A body with no access log (connection-level answers).
    pub fn plain(inner: Body) -> Self {
        Self {
            inner,
            sent: 0,
            log: None,
            busy: None,
            progress: None,
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(l) = self.log.take() {
            l.write(self.sent);
        }
        // After the log line: the request ends (uncounted) once it is logged.
        drop(self.busy.take());
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        let p = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &p {
            if let Some(d) = f.data_ref() {
                this.sent += d.len() as u64;
            }
        }
        if let Some(progress) = &this.progress {
            progress.touch(matches!(p, Poll::Ready(Some(Ok(_)))));
        }
        p
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_rules() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(cidr_contains(ip("10.1.0.0"), 16, ip("10.1.200.3")));
        assert!(!cidr_contains(ip("10.1.0.0"), 16, ip("10.2.0.1")));
        assert!(cidr_contains(ip("127.0.0.1"), 32, ip("::ffff:127.0.0.1")));
        assert!(cidr_contains(ip("2001:db8::"), 32, ip("2001:db8:1::1")));
        let rules = vec![
            AccessRule {
                allow: true,
                net: Net::Cidr(ip("127.0.0.1"), 32),
            },
            AccessRule {
                allow: false,
                net: Net::All,
            },
        ];
        assert!(allowed(&rules, Some(ip("127.0.0.1"))));
        assert!(!allowed(&rules, Some(ip("192.0.2.1"))));
        assert!(allowed(&[], Some(ip("192.0.2.1"))));
    }

    #[test]
    fn misdirected_when_host_asks_for_other_client_checks() {
        let conf = crate::conf::load_str(
            r#"
events {}
http {
    server { listen 127.0.0.1:8443 ssl; server_name a.test; ssl_certificate x.crt; ssl_certificate_key x.key; }
    server { listen 127.0.0.1:8443 ssl; server_name b.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client on; ssl_client_certificate ca.crt; }
    server { listen 127.0.0.1:8443 ssl; server_name c.test d.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client on; ssl_client_certificate ca.crt; }
    server { listen 127.0.0.1:8443 ssl; server_name e.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client optional; ssl_client_certificate other-ca.crt; }
}
"#,
            std::path::Path::new("/tmp/misdirected.conf"),
            std::path::Path::new("/tmp"),
        )
        .expect("config");
        let servers = &conf.http.as_ref().expect("http").servers;
        let (a, b, c, e) = (&servers[0], &servers[1], &servers[2], &servers[3]);
        // Handshake without client checks, Host needing them: refused.
        assert!(misdirected(Some("a.test"), a, b));
        // Different CA or mode than the handshake checked: refused.
        assert!(misdirected(Some("b.test"), b, e));
        assert!(misdirected(Some("e.test"), e, b));
        // Same checks (same mode and CA), the same block, or a Host with no checks: served.
        assert!(!misdirected(Some("b.test"), b, c));
        assert!(!misdirected(Some("c.test"), c, c));
        assert!(!misdirected(Some("b.test"), b, a));
        // No SNI (a client connecting by IP address): a server that checks clients is
        // reached only if the handshake was its own.
        assert!(misdirected(None, a, b));
        assert!(!misdirected(None, b, b));
        assert!(!misdirected(None, b, a));
    }

    #[test]
    fn header_names_as_nginx_validates_them() {
        assert!(valid_header_name("x-real-ip", false));
        assert!(!valid_header_name("x_real_ip", false));
        assert!(valid_header_name("x_real_ip", true));
        assert!(!valid_header_name("x.real", true));
        assert!(!valid_header_name("x~y", true));
        assert!(!valid_header_name("", true));
    }

    #[test]
    fn default_log_escape() {
        let mut s = String::new();
        log_escape(LogEscape::Default, "a\"b\\c\x01é", &mut s);
        assert_eq!(s, "a\\x22b\\x5Cc\\x01\\xC3\\xA9");
        let mut j = String::new();
        log_escape(LogEscape::Json, "a\"\n", &mut j);
        assert_eq!(j, "a\\\"\\n");
    }
}
