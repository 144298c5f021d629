//! The request pipeline: one request in, one response out, nginx's phases in order.
//!
//! Host → server block; `$uri` normalized; the server's rewrite directives; location match;
//! `internal`, body size; the location's rewrite directives (`set`, `if`, `rewrite`, `return`,
//! `break`; `last` or a changed URI finds the location again, ten times at most);
//! `allow`/`deny`; `stub_status` / `connection_info`; `try_files`; `index` with variables;
//! static files. A status with an `error_page` becomes an internal redirect
//! (once: nginx's `recursive_error_pages off`). Then `add_header`, compression, `Server`,
//! `Date`, and the access log once the body has been sent.
//!
//! Everything up to the content phase is synchronous. A location with `proxy_pass` is the one
//! place the pipeline awaits: the phases decide `Step::Proxy`, and `handle` then builds the
//! upstream request (the client's body read whole first or streamed through: `reqbody`) and awaits
//! `proxy::forward`. The static path runs the same code as before inside the same future: no
//! extra allocation or boxing per static request.
//!
//! Connection-level duties decided here, per request: `sendfile` for a file body on plain
//! HTTP/1.x (see `net::stream`), the location's `send_timeout` for the socket layer,
//! `client_body_timeout` on a proxied request body (a stalled body answers 408), the HTTP/2
//! GOAWAY after `keepalive_requests`, and nginx's 421 for a Host whose server block asks for
//! other client-certificate checks than the handshake (chosen by SNI) made ([`misdirected`])
//! or does not serve the protocol in use (`http3 off` over HTTP/3).
//!
//! Files: this one takes the request in and runs the steps; `phases` (rewrite directives,
//! location match, `internal`, access, `try_files`, static files, `error_page`) gives
//! a `Step`; `rewrite` (the request as the rewrite interpreter's `Env`); `access` (`allow`/`deny`, client certificates, 421); `headers` (invalid header
//! names); `forward` (the proxied request); `respond` (status pages, redirects, `stub_status`,
//! the headers every response gets, the body handed to hyper); `log` (the access log line).

mod access;
mod cache;
mod detach;
mod fastcgi;
mod forward;
mod guard;
mod headers;
mod log;
mod phases;
mod proxied;
mod ranges;
mod refresh;
mod reqbody;
mod respond;
mod rewrite;
mod ssi;
mod trailers;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header;
use http::{HeaderMap, Method, Request, Response};

use super::body::{Body, LimitBody, StallBody};
use super::conn::Conn;
use super::contract;
use super::reqvars::RequestVars;
use super::uri;
use crate::conf::model::{LocationConf, ProxyConf, ServerConf};
use crate::conf::vars::ComplexValue;
use access::client_refusal;
use phases::error;
use respond::finish;

pub use access::misdirected;
pub use headers::valid_header_name;
pub use log::log_escape;
pub use respond::ResponseBody;

/// Internal redirects allowed per request before a 500 (nginx: 10).
const MAX_REDIRECTS: u8 = 10;

/// What the pipeline hands back to hyper.
pub type HttpResponse = Response<ResponseBody>;

/// nginx's 444: the request gets no response; the connection (HTTP/1.x) or the stream
/// (HTTP/2, HTTP/3) is closed. The pipeline answers with this status and each protocol's
/// shell does the closing; the access log records 444.
pub const CLOSE: u16 = 444;

/// Serves one request. `B` is the request body (hyper's `Incoming`), streamed to an upstream
/// by `proxy_pass` and otherwise dropped. `head_length`: the size of the head as received,
/// when the protocol knows it (HTTP/2's header block), for `$request_length`; `None`: the
/// head's lines as written.
pub async fn serve<B>(
    conn: Arc<Conn>,
    req: Request<B>,
    head_length: Option<u64>,
) -> Result<HttpResponse, Infallible>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let busy = Busy::new(conn);
    let conn = &busy.0;
    // The request's error lines go to its server's or location's `error_log` once known
    // (a request slot for it only when some block has one).
    let mut resp = if conn.site().has_block_error_logs() {
        crate::log::request_scope(handle(conn, req, head_length)).await
    } else {
        handle(conn, req, head_length).await
    };
    if let Some(n) = conn.data_chunk() {
        resp.body_mut().inner.set_chunk(n);
    }
    conn.release_first_response();
    // HTTP/2: the stream's send_timeout watch starts now (see `send_watch`).
    if let Some(p) = super::send_watch::current() {
        p.response_ready(conn.io().send_timeout());
        resp.body_mut().progress = Some(p);
    }
    resp.body_mut().busy = Some(busy);
    Ok(resp)
}

/// A request in flight: counted in its connection's activity (the idle timer) and in
/// stub_status "Writing" from its start until its response body is done or dropped. A guard,
/// so that a request whose future hyper drops before it answers (an HTTP/2 stream the
/// client reset while it waited on an upstream) is uncounted too.
/// The second field: when the response ended, if its owner read the time already.
struct Busy(Arc<Conn>, Option<Instant>);

impl Busy {
    fn new(conn: Arc<Conn>) -> Self {
        conn.begin_response();
        Busy(conn, None)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        match self.1 {
            Some(now) => self.0.end_response_at(now),
            None => self.0.end_response(),
        }
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
    /// `$request_port` (0: none).
    request_port: u16,
    /// The request named a valid host (`:authority` or `Host`); else `host` is the server's
    /// name, and redirects name the local address instead, as nginx.
    host_given: bool,
    server: Arc<ServerConf>,
    captures: Vec<Option<String>>,
    internal: bool,
    redirects: u8,
    document_root: Option<String>,
    request_filename: Option<PathBuf>,
    start: Instant,
    nreq: u64,
    /// `$pipe`: an HTTP/1.x request whose head was read before the previous response ended.
    pipelined: bool,
    /// For `$request_length`.
    head_length: u64,
    /// What auth_basic, real IP and the limits left (None for a location without them).
    guard: Option<Box<guard::GuardState>>,
    /// `set`, `map`, `split_clients` values (None when the configuration defines none).
    user: Option<Box<super::rewrite::uservars::UserVars>>,
    /// The location whose rewrite directives run (for `$request_filename` there).
    rewrite_loc: Option<Arc<crate::conf::model::LocationConf>>,
    /// False once the location's rewrite directives changed the URI and stayed (`break`):
    /// `proxy_pass` then sends the whole URI (nginx's `valid_location`).
    valid_location: bool,
    /// The `Location` of a `return`/`rewrite` redirect that an `error_page` took over: a
    /// page that is no redirect itself goes out with it (nginx keeps `headers_out.location`).
    err_location: Option<http::HeaderValue>,
    /// `set $limit_rate`: the rate for this request, over the location's `limit_rate`.
    limit_rate: Option<u64>,
    /// Received in TLS early data (0-RTT): see [`EarlyData`].
    early_data: bool,
    /// The servers `proxy_pass` tried, once it ran (`$upstream_addr`, ...).
    upstream: std::sync::OnceLock<crate::http::proxy::UpstreamVars>,
    /// The client's body went to an upstream already (proxied again after its
    /// `X-Accel-Redirect`): none is sent, nor its length.
    body_used: bool,
    /// An intercepted upstream 401's `WWW-Authenticate` fields, for the error page's answer
    /// (nginx, ticket #485).
    www_authenticate: std::sync::OnceLock<Vec<http::HeaderValue>>,
    /// The current location's `fastcgi_split_path_info` and `fastcgi_index`.
    fastcgi: Option<Arc<crate::conf::model::FastcgiVars>>,
    /// The body `proxy_pass` or `fastcgi_pass` read or streamed, once it did.
    request_body: std::sync::OnceLock<crate::http::proxy::RequestBody>,
    /// The connection as shared, for the SSI filter's subrequests.
    arc: Option<&'a Arc<Conn>>,
    /// An SSI include's subrequest: its depth and its client request's count.
    sub: Option<ssi::Sub>,
}

/// A request extension the connection layer adds to a request that arrived in TLS early data
/// (0-RTT), before the handshake completed: it may be a replay, so only a request that is
/// safe to replay is served from it (RFC 8470; `425 Too Early` otherwise), `$ssl_early_data`
/// is `1`, and a proxied request carries `Early-Data: 1`.
#[derive(Debug, Clone, Copy)]
pub struct EarlyData;

impl Req<'_> {
    fn vars(&self) -> RequestVars<'_> {
        RequestVars {
            conn: self.conn.facts(),
            method: self.method.as_str(),
            request_uri: self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: self.headers,
            head_length: self.head_length,
            host: &self.host,
            request_port: self.request_port,
            server_name: server_name(&self.server),
            document_root: self.document_root.as_deref(),
            request_filename: self.request_filename.as_deref().and_then(Path::to_str),
            early_data: self.early_data,
            status: 0,
            response_headers: None,
            body_bytes_sent: 0,
            head_bytes: 0,
            start: self.start,
            ttfb: None,
            stats: Some(&self.conn.shared().stats),
            connection_requests: self.nreq,
            pipelined: self.pipelined,
            captures: &self.captures,
            user: self.user.as_deref(),
            upstream: self.upstream.get(),
            fastcgi: self.fastcgi.as_deref(),
            guard: self.guard.as_ref().map(|g| &g.vars),
            limit_rate: self.limit_rate.unwrap_or(0),
            request_body: self.request_body.get(),
        }
    }

    /// The client's address: the real one once `set_real_ip_from` took it, else the
    /// connection's peer (nginx's `c->sockaddr` after its realip module).
    fn client_addr(&self) -> Option<std::net::SocketAddr> {
        self.guard
            .as_ref()
            .and_then(|g| g.vars.real_peer)
            .or(self.conn.facts().peer)
    }

    /// `$remote_addr` as text: the real address `set_real_ip_from` took, else the
    /// connection's (`unix:` on a UNIX-domain socket).
    fn remote_addr(&self) -> Option<String> {
        self.client_addr()
            .map(|p| p.ip().to_string())
            .or_else(|| self.conn.facts().remote_addr())
    }

    fn eval(&self, v: &ComplexValue) -> String {
        match v.as_static() {
            Some(s) => s.to_string(),
            None => v.eval(&self.vars()),
        }
    }
}

fn server_name(s: &ServerConf) -> &str {
    &s.server_name
}

/// What the synchronous phases decided: answer, or hand the request to `proxy_pass`.
enum Step {
    /// A response.
    Done(Response<Body>),
    /// Proxy with the location's settings (the location comes with the step).
    Proxy(Arc<ProxyConf>),
}

fn protocol_of(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        // nginx's `$server_protocol` of an HTTP/0.9 line (hq over QUIC): none given, empty.
        http::Version::HTTP_09 => "",
        _ => "HTTP/1.1",
    }
}

/// A refusal before any location runs (nginx's answers while it reads the head): `code`
/// from the server's default location, through its `error_page`; `close`: the connection
/// ends after it.
fn refuse(r: &mut Req<'_>, code: u16, close: bool) -> (Step, Arc<LocationConf>) {
    let loc = r.server.default_location.clone();
    let (mut resp, loc) = error(r, code, loc);
    if close {
        resp.headers_mut()
            .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    (Step::Done(resp), loc)
}

async fn handle<B>(conn: &Arc<Conn>, req: Request<B>, received: Option<u64>) -> HttpResponse
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let start = Instant::now();
    // An SSI subrequest is not a request of the connection's own.
    let sub = req.extensions().get::<ssi::Sub>().cloned();
    let nreq = match &sub {
        Some(s) => s.nreq,
        None => conn.count_request(),
    };
    // `$pipe`: on HTTP/1.x no byte arrived between the previous response's end and this
    // request's head, so the head was already read (nginx: bytes left in its buffer when the
    // previous request ended).
    let pipelined = nreq > 1
        && matches!(
            req.version(),
            http::Version::HTTP_10 | http::Version::HTTP_11
        )
        && !conn.activity().head_begun();
    // What the socket delivered since the previous request ended: this head as received,
    // when nothing else came with it (see `$request_length` below).
    let read_since_end = conn.activity().read_since_end();
    // HTTP/2: the stream that reaches the server's `keepalive_requests` asks for GOAWAY as it
    // starts, as nginx decides when it creates the stream, so streams a client resets before
    // their responses (rapid reset) count too. The location's own value applies again when the
    // response is ready.
    if req.version() == http::Version::HTTP_2
        && nreq >= u64::from(conn.first_server().default_location.keepalive_requests)
    {
        conn.request_goaway();
    }
    let (parts, body) = req.into_parts();
    // What the front end knows of the body now: the early-data rule's input.
    let body_known = contract::BodyKnown::of(&body);
    let http::request::Parts {
        method,
        uri: parts_uri,
        version,
        headers: mut parts_headers,
        mut extensions,
        ..
    } = parts;
    let early_data = extensions.get::<EarlyData>().is_some()
        || conn.facts().tls.as_ref().is_some_and(|t| t.in_early_data());
    // nginx reads the headers under the server the connection found before Host (SNI's, or
    // the address's default): its underscores_in_headers and ignore_invalid_headers apply.
    let header_server = conn.first_server();
    // HTTP/1.x: the head must fit `client_header_buffer_size` and `large_client_header_buffers`
    // as nginx reads it (HTTP/2's bound is SETTINGS_MAX_HEADER_LIST_SIZE, in h2limits).
    // `$request_length`: HTTP/2's header block as it came, else the head's lines as written
    // (the limits below read the same lines).
    let (head_length, too_large) = match received {
        Some(l) => (l, None),
        None => {
            let (line, lines) = headers::head_lines(&method, &parts_uri, &parts_headers);
            let (length, too_large) = match version {
                http::Version::HTTP_2 | http::Version::HTTP_3 => {
                    ((line + lines.sum::<usize>() + 2) as u64, None)
                }
                _ => {
                    let first = usize::try_from(header_server.client_header_buffer_size)
                        .unwrap_or(usize::MAX);
                    // One walk of the lines gives both, unless the head does not fit (the
                    // walk stops there): then the length is counted again.
                    let mut fields = 0;
                    let fits = headers::head_fits(
                        first,
                        header_server.large_client_header_buffers,
                        line,
                        lines.inspect(|&l| fields += l),
                    );
                    match fits {
                        Ok(()) => ((line + fields + 2) as u64, None),
                        Err(e) => {
                            let all = headers::head_lines(&method, &parts_uri, &parts_headers).1;
                            ((line + all.sum::<usize>() + 2) as u64, Some(e))
                        }
                    }
                }
            };
            let length = headers::raw_head_length(
                length,
                parts_headers.len(),
                read_since_end,
                !pipelined && version != http::Version::HTTP_3 && headers::bodiless(&parts_headers),
            );
            (length, too_large)
        }
    };
    // HTTP/2 and HTTP/3: a field name or value longer than a `large_client_header_buffers`
    // buffer is refused as the same line is over HTTP/1.1 (nginx: "client sent too large
    // header field", a connection error there; a 400 here, through `error_page`).
    let too_large = too_large.or_else(|| match version {
        http::Version::HTTP_2 | http::Version::HTTP_3 => {
            let size = header_server.large_client_header_buffers.1;
            parts_headers
                .iter()
                .any(|(n, v)| n.as_str().len() > size || v.len() > size)
                .then_some(headers::HeadTooLarge::Header)
        }
        _ => None,
    });
    if header_server.ignore_invalid_headers {
        headers::drop_invalid_headers(
            &mut parts_headers,
            header_server.underscores_in_headers,
            conn,
        );
    }
    // nginx's `max_headers`: the lines kept (HTTP/2 and HTTP/3 count no `cookie` field).
    // Nor the `host` the front end made of `:authority` (nginx constructs it after counting;
    // one that only repeats `:authority` is taken for it).
    let too_many = {
        let not_lines = match version {
            http::Version::HTTP_2 | http::Version::HTTP_3 => {
                let made_host = match (parts_headers.get(header::HOST), parts_uri.authority()) {
                    (Some(h), Some(a)) => h.as_bytes() == a.as_str().as_bytes(),
                    _ => false,
                };
                parts_headers.get_all(header::COOKIE).iter().count() + usize::from(made_host)
            }
            _ => 0,
        };
        parts_headers.len() - not_lines > header_server.max_headers as usize
    };
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

    // Host: the target's authority (HTTP/1.x absolute form, `:authority`), else `Host`;
    // nginx's refusals (the request contract's). A Host that is not UTF-8 is refused (nginx
    // takes bytes past 0x7f; firstbyte is stricter there).
    let host_check = contract::host(contract::HostInput {
        version,
        authority: parts.uri.authority().map(|a| a.as_str()),
        headers: parts.headers,
        invalid_field: extensions
            .get::<super::h2::headers::InvalidHostField>()
            .is_some(),
    });
    // nginx's unique request fields: a second one is refused (400) on every protocol.
    let duplicate = contract::duplicate_unique(parts.headers);
    // HTTP/1.1: framing refused in the head as received (the connection layer's verdict).
    let mut framing = extensions.remove::<crate::http::conn::FramingRefusal>();
    let (host, host_raw, host_refusal) = match host_check {
        Ok(h) => (Some(h.name.into_owned()), h.raw, None),
        Err(e) => (None, None, Some(e)),
    };
    let server = match &host {
        Some(h) if !h.is_empty() => addr.find(Some(h.as_str())).clone(),
        _ => match conn.sni_server() {
            Some(s) => s.clone(),
            None => addr.find(None).clone(),
        },
    };
    // The server's `error_log` takes the request's error lines until a location is chosen.
    crate::log::set_request_log(conn.site().error_log(&server.default_location.error_log));
    let sni = conn
        .facts()
        .tls
        .as_ref()
        .and_then(|t| t.server_name.as_deref());
    let misdirect = match conn.sni_server() {
        Some(hs_server) => misdirected(sni, hs_server, &server),
        None => false,
    };
    // The Host's block does not speak the protocol in use (nginx's 421 for `http3 off`).
    let disabled = (parts.version == http::Version::HTTP_2 && !server.http2 && !addr.http2())
        || (parts.version == http::Version::HTTP_3 && !server.http3)
        || (parts.version == http::Version::HTTP_09 && !server.http3_hq);
    let mut r = Req {
        conn,
        method,
        headers: parts.headers,
        request_uri,
        uri: String::new(),
        args: None,
        protocol,
        version: parts.version,
        host: String::new(),
        request_port: match (&host, host_raw) {
            (Some(_), Some(raw)) => crate::http::reqvars::host_port(raw),
            _ => 0,
        },
        host_given: false,
        server,
        captures: Vec::new(),
        redirects: 0,
        document_root: None,
        request_filename: None,
        start,
        nreq,
        pipelined,
        head_length,
        early_data,
        guard: None,
        user: None,
        rewrite_loc: None,
        fastcgi: None,
        valid_location: true,
        err_location: None,
        limit_rate: None,
        upstream: std::sync::OnceLock::new(),
        body_used: false,
        request_body: std::sync::OnceLock::new(),
        www_authenticate: std::sync::OnceLock::new(),
        arc: Some(conn),
        internal: sub.is_some(),
        sub,
    };
    r.user = super::rewrite::uservars::UserVars::new(&r.server.vars);
    if let (Some(h), Some(u)) = (host.as_deref(), r.user.as_mut()) {
        // A regex `server_name`'s named groups: the first of the server's regexes that
        // matches the host (the one that chose the server) sets them.
        if let Some((nc, c)) = r
            .server
            .name_captures
            .iter()
            .find_map(|nc| Some((nc, nc.regex.captures(h)?)))
        {
            for &(group, slot) in &nc.slots {
                let v = c.get(group).map_or("", |m| m.as_str()).to_string();
                u.set(slot, v);
            }
        }
    }
    let host_ok = host.is_some();
    r.host_given = host.as_deref().is_some_and(|h| !h.is_empty());
    r.host = match host {
        Some(h) if !h.is_empty() => h,
        _ => server_name(&r.server).to_string(),
    };

    let (path, query) = uri::split_target(request_uri);
    let refusal = client_refusal(&r);
    let method_refused = contract::method_refusal(&r.method, version, parts.uri.port_u16());
    // HTTP/1.x only: HTTP/2's decoder and HTTP/3's front end refuse any Transfer-Encoding
    // as malformed, so there is nothing to look up.
    let framed_twice = if r.version < http::Version::HTTP_2 {
        contract::framing_refusal(r.headers)
    } else {
        None
    };
    let (step, loc) = match (host_ok, uri::normalize_path(path), refusal) {
        // No method by nginx's rules (a lower-case `delete`): 400 before any location, as a
        // request line nginx cannot parse; the connection closes (HTTP/2's decoder resets
        // such a stream before it gets here).
        _ if !contract::method_token(r.method.as_str().as_bytes()) => {
            crate::fblog!(
                Info,
                "client sent invalid method while reading client request line, client: {}, server: {}",
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, 400, true)
        }
        _ if early_data && !contract::replay_safe(&r.method, body_known) => {
            crate::fblog!(
                Info,
                "a \"{}\" request in early data refused (425), client: {}, server: {}",
                r.method,
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, 425, false)
        }
        // nginx refuses TRACE (405, "client sent TRACE method") and CONNECT (405; 400 when the
        // target names no port) before any location runs.
        _ if method_refused.is_some() => {
            let code = method_refused.unwrap_or(405);
            crate::fblog!(
                Info,
                "client sent {} method while reading client request headers, client: {}, server: {}",
                r.method,
                conn.client_ip(),
                server_name(&r.server),
            );
            // Refused while reading the head: nginx closes the connection after it.
            refuse(&mut r, code, true)
        }
        _ if too_large.is_some() => {
            let (code, what) = match too_large {
                Some(headers::HeadTooLarge::RequestLine) => (414, "client sent too long URI"),
                _ => (494, "client sent too long header line"),
            };
            crate::fblog!(
                Info,
                "{what} while reading client request headers, client: {}, server: {}",
                conn.client_ip(),
                server_name(&r.server),
            );
            // nginx ends the connection after these (`r->keepalive = 0`).
            refuse(&mut r, code, true)
        }
        _ if too_many => {
            crate::fblog!(
                Info,
                "client sent too many header lines while reading client request headers, client: {}, server: {}",
                conn.client_ip(),
                server_name(&r.server),
            );
            // nginx ends the connection after it (`lingering_close`).
            refuse(&mut r, 494, true)
        }
        _ if duplicate.is_some() => {
            let (name, first, second) = duplicate.unwrap_or_default();
            crate::fblog!(
                Info,
                "client sent duplicate header line: \"{name}: {second}\", previous value: \"{name}: {first}\" while reading client request headers, client: {}, server: {}",
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, 400, true)
        }
        // What hyper normalised away (see `server::conn::h1_scan`): a second
        // Content-Length, Content-Length beside chunked, an unknown coding (501), a
        // malformed chunked body; refused as nginx, and the connection closes.
        _ if framing.is_some() => {
            let f = framing.take().unwrap_or_default();
            crate::fblog!(
                Info,
                "{}, client: {}, server: {}",
                f.reason,
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, f.status, true)
        }
        // Request smuggling's ground: nginx refuses a body framed two ways, or a
        // Transfer-Encoding given twice, before any location runs, and closes.
        _ if framed_twice.is_some() => {
            crate::fblog!(
                Info,
                "{} while reading client request headers, client: {}, server: {}",
                framed_twice.unwrap_or_default(),
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, 400, true)
        }
        (true, _, _) if misdirect || disabled => {
            crate::fblog!(
                Info,
                "client attempted to request the server name {}, client: {}, server: {}, host: \"{}\"",
                if misdirect {
                    "different from the one that was negotiated"
                } else {
                    "for which the negotiated protocol is disabled"
                },
                conn.client_ip(),
                server_name(&r.server),
                r.host
            );
            refuse(&mut r, 421, false)
        }
        (true, _, Some(code)) => {
            crate::fblog!(
                Info,
                "{}, client: {}, server: {}",
                if code == 496 {
                    "client sent no required SSL certificate while reading client request headers"
                } else {
                    "client SSL certificate verify error while reading client request headers"
                },
                conn.client_ip(),
                server_name(&r.server),
            );
            refuse(&mut r, code, false)
        }
        (true, Ok(u), None) => {
            r.uri = u;
            r.args = query.map(str::to_string);
            let out = phases::run(&mut r);
            // limit_req's delay, before the content is sent or the upstream asked. Boxed:
            // a timer is large and rare; the common request future stays small.
            if let Some(d) = r.guard.as_mut().and_then(|g| g.delay.take()) {
                Box::pin(tokio::time::sleep(d)).await;
            }
            out
        }
        _ => {
            if let Some(why) = host_refusal {
                crate::fblog!(
                    Info,
                    "{} while reading client request headers, client: {}, server: {}",
                    why.reason(),
                    conn.client_ip(),
                    server_name(&r.server),
                );
            }
            // Through the server's `error_page 400`, as nginx, which then closes the connection.
            let loc = r.server.default_location.clone();
            let (mut resp, loc) = error(&mut r, 400, loc);
            resp.headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            (Step::Done(resp), loc)
        }
    };
    let (resp, loc) = match step {
        Step::Done(resp) => (resp, loc),
        // Boxed: the proxy state is large and rare; the common request future stays small
        // (it is moved whole into its box per request).
        Step::Proxy(conf) => {
            Box::pin(proxied::proxied(&mut r, conf, loc, body, &mut extensions)).await
        }
    };
    finish(&mut r, resp, &loc, parts.headers)
}

/// The request line's parts the pipeline borrows.
struct PartsRef<'a> {
    uri: &'a http::Uri,
    version: http::Version,
    headers: &'a HeaderMap,
}
