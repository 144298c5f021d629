//! Responses the pipeline builds: nginx's status pages, redirects with an absolute
//! `Location`, `stub_status`; then what every response gets on its way out ([`finish`]:
//! `add_header`, compression, `Server`, `Date`, keep-alive, `send_timeout`, `sendfile`, the
//! access log) and the body handed to hyper ([`ResponseBody`]).

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body::{Frame, SizeHint};

use super::log::LogOnDone;
use super::{server_name, Busy, HttpResponse, Req};
use crate::conf::model::{Expires, LocationConf};
use crate::http::body::{Body, BoxBody};
use crate::http::compress;
use crate::http::conn::Conn;
use crate::http::pages::status_page;

/// nginx's page for a status.
pub fn status_response(code: u16) -> Response<Body> {
    let status = StatusCode::from_u16(crate::http::pages::wire_status(code))
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

pub(super) fn redirect_response(code: u16, location: &str) -> Response<Body> {
    let mut r = status_response(code);
    match HeaderValue::from_str(location) {
        Ok(v) => {
            r.headers_mut().insert(header::LOCATION, v);
        }
        Err(_) => return status_response(500),
    }
    r
}

pub(super) fn stub_status(conn: &Conn) -> Response<Body> {
    let s = &conn.shared().stats;
    let (active, reading, writing) = s.connections();
    let text = format!(
        "Active connections: {active} \nserver accepts handled requests\n {} {} {} \nReading: {reading} Writing: {writing} Waiting: {} \n",
        s.accepts.load(Ordering::Relaxed),
        s.handled.load(Ordering::Relaxed),
        s.requests.load(Ordering::Relaxed),
        active.saturating_sub(writing + reading),
    );
    let mut r = Response::new(Body::full(text));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The `metrics` location: the process's counters, as OpenMetrics when the scraper asks for
/// it (Prometheus does), else Prometheus' text format 0.0.4.
pub(super) fn metrics(conn: &Conn, headers: &HeaderMap) -> Response<Body> {
    let openmetrics = headers.get_all(header::ACCEPT).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.contains("application/openmetrics-text"))
    });
    let s = &conn.shared().stats;
    let active = s.active.load(Ordering::Relaxed);
    let busy = s.writing.load(Ordering::Relaxed) + s.reading.load(Ordering::Relaxed);
    let text = crate::metrics::get().encode(openmetrics, active, active.saturating_sub(busy));
    let mut r = Response::new(Body::full(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if openmetrics {
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        } else {
            "text/plain; version=0.0.4; charset=utf-8"
        }),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The `Location` of a redirect firstbyte makes (a directory's trailing slash, `return 30x`
/// with a path), as nginx: with `absolute_redirect on`, `scheme://host[:port]` + the path,
/// where the host is the request's validated Host (never the raw header) or, with
/// `server_name_in_redirect on` or no Host, the server's first name; the port is the one the
/// connection came to (`port_in_redirect`), left out when it is the scheme's own.
pub(super) fn absolute(r: &Req, path: &str) -> String {
    // nginx completes only a Location that starts with "/" (`return 302 text` stays `text`).
    if !path.starts_with('/') {
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
    let tls = r.conn.facts().tls.is_some();
    let name = server_name(&r.server);
    // nginx: the server's name with `server_name_in_redirect`, else the request's host, else
    // (none, or an invalid one answered through `error_page`) the local address.
    let local;
    let host = if loc.server_name_in_redirect {
        name
    } else if r.host_given {
        r.host.as_str()
    } else {
        local = r.conn.facts().local.map(|a| a.ip().to_string());
        local.as_deref().unwrap_or(name)
    };
    let port = r
        .conn
        .facts()
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

/// Whether hyper writes `name` as it is (title case: `X-Uri`), so it needs no
/// [`crate::http::conn::HeaderCase`] entry.
fn is_title_case(name: &str) -> bool {
    name.split('-').all(|w| {
        let mut b = w.bytes();
        b.next().is_none_or(|c| !c.is_ascii_lowercase()) && b.all(|c| !c.is_ascii_uppercase())
    })
}

pub(super) fn add_header_applies(code: u16) -> bool {
    crate::http::expires::applies(code)
}

/// The size of an HTTP/1.1 response head as hyper writes it: the status line (with the
/// reason phrase set, or the status's own), each field, the blank line.
fn head_bytes<B>(resp: &Response<B>) -> u64 {
    let reason = match resp.extensions().get::<hyper::ext::ReasonPhrase>() {
        Some(p) => p.as_bytes().len(),
        None => resp.status().canonical_reason().map_or(0, str::len),
    };
    let fields: usize = resp
        .headers()
        .iter()
        .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
        .sum();
    // "HTTP/1.1 101 " + reason + CRLF, the fields, CRLF.
    (13 + reason + 2 + fields + 2) as u64
}

/// The size of an HTTP/1.x response head as hyper writes it: [`head_bytes`] and the fields
/// hyper adds: the framing when none is set (`Content-Length` from the body's exact size,
/// else `Transfer-Encoding: chunked` to an HTTP/1.1 request; chunks' own framing is not
/// counted), and to HTTP/1.1 `Connection: close` when the head has no `Connection` (firstbyte
/// says `keep-alive` whenever hyper keeps the connection: see [`explicit_keep_alive`]).
fn h1_head_bytes<B: http_body::Body>(resp: &Response<B>, version: http::Version) -> u64 {
    let mut n = head_bytes(resp);
    if version == http::Version::HTTP_11 && !resp.headers().contains_key(header::CONNECTION) {
        n += "Connection: close\r\n".len() as u64;
    }
    let status = resp.status().as_u16();
    let framed = resp.headers().contains_key(header::CONTENT_LENGTH)
        || resp.headers().contains_key(header::TRANSFER_ENCODING);
    if !framed && status >= 200 && status != 204 && status != 304 {
        match resp.body().size_hint().exact() {
            // "Content-Length: N\r\n"
            Some(len) => n += 16 + len.to_string().len() as u64 + 2,
            None if version == http::Version::HTTP_11 => {
                n += "Transfer-Encoding: chunked\r\n".len() as u64
            }
            None => {}
        }
    }
    n
}

/// Headers every response gets, compression, keep-alive, and the access log.
pub(super) fn finish(
    r: &mut Req,
    mut resp: Response<Body>,
    loc: &Arc<LocationConf>,
    req_headers: &HeaderMap,
) -> HttpResponse {
    let code = resp.status().as_u16();
    // nginx's status line wording (`HTTP/1.1 405 Not Allowed`); HTTP/2 and 3 carry none.
    if let Some(p) = crate::http::pages::status_line_reason(resp.status().as_u16()) {
        resp.extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(p.as_bytes()));
    }
    // nginx's headers filter: `expires` first, then `add_header`.
    if loc.expires != Expires::Off && add_header_applies(code) {
        let now = i64::try_from(crate::log::now().secs).unwrap_or(i64::MAX);
        let e = match &loc.expires {
            Expires::Var { modified, value } => {
                let v = r.eval(value);
                match crate::conf::parse_expires(*modified, &v) {
                    Ok(e) => e,
                    Err(_) => {
                        // nginx fails the response here; firstbyte logs it and leaves the
                        // headers alone.
                        crate::fblog!(Error, "invalid \"expires\" value \"{v}\"");
                        Expires::Off
                    }
                }
            }
            e => e.clone(),
        };
        crate::http::expires::apply(e, now, resp.headers_mut());
    }
    if code == 401 {
        if let Some(v) = r.guard.as_ref().and_then(|g| g.www_authenticate.clone()) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        for v in r.www_authenticate.get().into_iter().flatten() {
            resp.headers_mut()
                .append(header::WWW_AUTHENTICATE, v.clone());
        }
    }
    if !loc.add_header.is_empty() {
        let applies = add_header_applies(code);
        let mut case = Vec::new();
        for h in &loc.add_header {
            if h.always || applies {
                // `$sent_http_NAME` sees the fields added so far, as nginx.
                let v = match h.value.as_static() {
                    Some(s) => s.to_string(),
                    None => {
                        let mut vars = r.vars();
                        vars.response_headers = Some(resp.headers());
                        h.value.eval(&vars)
                    }
                };
                // nginx writes a trailing newline of the value as it is; HTTP forbids it
                // in a header value, so it is cut (any other CR or LF drops the header).
                let v = v.trim_end_matches(['\r', '\n']);
                let Ok(n) = header::HeaderName::from_bytes(h.name.as_bytes()) else {
                    continue;
                };
                // nginx's own ETag and Last-Modified are replaced, and removed by an
                // empty value (`ngx_http_set_response_header`).
                let single = n == header::ETAG || n == header::LAST_MODIFIED;
                if single {
                    resp.headers_mut().remove(&n);
                }
                if v.is_empty() {
                    continue;
                }
                if let Ok(v) = HeaderValue::from_str(v) {
                    if !single && !is_title_case(&h.name) {
                        case.push(h.name.clone().into_boxed_str());
                    }
                    resp.headers_mut().append(n, v);
                }
            }
        }
        if !case.is_empty() {
            // Beside the upstream's names an HTTP/2 upstream sent (`proxy::h2`).
            let ext = resp.extensions_mut();
            match ext.get_mut::<crate::http::conn::HeaderCase>() {
                Some(had) => had.0.extend(case),
                None => {
                    ext.insert(crate::http::conn::HeaderCase(case));
                }
            }
        }
    }
    let pass = resp
        .extensions_mut()
        .remove::<crate::http::proxy::PassTrailers>();
    let plan = super::trailers::Plan::of(r, loc, code, pass);
    if let Some(p) = &plan {
        // Chunked over HTTP/1.1 (hyper sends the fields the `Trailer` field names).
        let h = resp.headers_mut();
        h.remove(header::CONTENT_LENGTH);
        if matches!(r.version, http::Version::HTTP_11) && !p.names.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&p.names.join(", ")) {
                h.insert(header::TRAILER, v);
            }
        }
    }
    if loc.ssi {
        resp = super::ssi::apply(r, resp, loc);
    }
    // A subrequest's body goes to the page that included it: no compression, connection
    // duties or log line of its own.
    if r.sub.is_some() {
        let (parts, body) = resp.into_parts();
        return Response::from_parts(parts, ResponseBody::plain(body));
    }
    let accel = resp
        .extensions_mut()
        .remove::<crate::http::charset::AccelCharset>();
    if (loc.charset.is_some() || accel.is_some())
        && resp
            .extensions()
            .get::<crate::http::charset::Applied>()
            .is_none()
    {
        resp = apply_charset(resp, loc, accel.as_ref().map(|a| a.0.as_str()));
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
    if let Some(alt) = &r.server.alt_svc {
        if r.version != http::Version::HTTP_3 && !h.contains_key(header::ALT_SVC) {
            h.insert(header::ALT_SVC, alt.clone());
        }
    }
    // A proxied response keeps the upstream's own when `proxy_pass_header` lets it through,
    // and has none when the upstream sent none.
    let absent = resp
        .extensions_mut()
        .remove::<crate::http::proxy::headers::PassedAbsent>()
        .unwrap_or_default();
    let h = resp.headers_mut();
    if !h.contains_key(header::SERVER) && !absent.server {
        h.insert(header::SERVER, HeaderValue::from_static("firstbyte"));
    }
    if !h.contains_key(header::DATE) && !absent.date {
        h.insert(header::DATE, crate::log::now().http_date.clone());
    }
    // One clock read for `keepalive_time` and the metrics' time to first byte.
    let now = std::time::Instant::now();
    let last = r.nreq >= u64::from(loc.keepalive_requests)
        || r.conn.activity().age_at(now) >= loc.keepalive_time;
    if r.version == http::Version::HTTP_3 {
        // No connection-level headers in HTTP/3 (RFC 9114 §4.2); a `close` asked for above
        // (a refused request) means nothing on a multiplexed connection.
        h.remove(header::CONNECTION);
    } else if r.version == http::Version::HTTP_2 {
        if last || loc.keepalive_timeout.idle.is_zero() {
            r.conn.request_goaway();
        }
    } else if loc.keepalive_timeout.idle.is_zero()
        || last
        || loc.keepalive_disable.applies(
            r.method == http::Method::POST,
            r.headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
        )
    {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    } else if !h.contains_key(header::CONNECTION) {
        // The connection waits this location's keepalive_timeout for the next request.
        r.conn.activity().set_keepalive(loc.keepalive_timeout.idle);
        if explicit_keep_alive(r.version, r.headers, r.conn) {
            h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
            if let Some(t) = loc.keepalive_timeout.header {
                let v = format!("timeout={}", t.as_secs());
                if let Ok(v) = HeaderValue::from_str(&v) {
                    h.insert(HeaderName::from_static("keep-alive"), v);
                }
            }
        }
    }
    r.conn.io().set_send_timeout(loc.send_timeout);
    // HTTP/2 frames its DATA itself: sendfile is for HTTP/1.x on a socket that carries the
    // bytes as they are (plain TCP now, kernel TLS later).
    let size = |v: &crate::conf::model::SizeValue| {
        v.get(|c| r.eval(c)).unwrap_or_else(|s| {
            crate::fblog!(Error, "invalid size \"{s}\"");
            0
        })
    };
    if loc.postpone_output > 0
        && matches!(resp.body(), Body::Stream(_))
        && resp
            .extensions()
            .get::<crate::http::postpone::Unbuffered>()
            .is_none()
    {
        let body = std::mem::take(resp.body_mut());
        let joined = crate::http::postpone::Postpone::new(body, loc.postpone_output);
        *resp.body_mut() = Body::Stream(BoxBody::new(joined));
    }
    let rate = match r.limit_rate {
        Some(n) => n,
        None => size(&loc.limit_rate),
    };
    if rate > 0 {
        let pace = crate::http::rate::Pace {
            rate,
            after: size(&loc.limit_rate_after),
        };
        let body = std::mem::take(resp.body_mut());
        *resp.body_mut() = Body::Stream(BoxBody::new(crate::http::rate::RateBody::new(body, pace)));
    } else if loc.sendfile
        && plan.is_none()
        && r.conn.io().sendfile_capable()
        && matches!(r.version, http::Version::HTTP_11 | http::Version::HTTP_10)
    {
        resp.body_mut().set_sendfile(r.conn.io(), loc.tcp_nopush);
    }
    // The response head is ready: TTFB, read once for the metrics and the access log.
    let done = crate::metrics::ResponseDone::new_at(r.version, code, r.start, now);
    let mut log = LogOnDone::of(
        r,
        loc,
        code,
        req_headers,
        resp.headers(),
        done.ttfb(),
        r.upstream.get().cloned(),
    );
    // `add_trailer`'s values are taken when the body has ended, from the variables as they
    // stand now and the body's bytes then.
    let mut trailers = plan.map(|p| {
        match super::trailers::Pending::new(r, &p, || {
            LogOnDone::snapshot(
                r,
                loc,
                code,
                (req_headers, resp.headers()),
                done.ttfb(),
                r.upstream.get().cloned(),
            )
        }) {
            Some(p) => Section::Fields(Box::new(p)),
            None => Section::Empty,
        }
    });
    let head = matches!(r.version, http::Version::HTTP_10 | http::Version::HTTP_11)
        .then(|| h1_head_bytes(&resp, r.version));
    // `$bytes_sent` counts the response head on HTTP/1.x, as nginx (HTTP/2 and HTTP/3: the
    // body's bytes; their heads are compressed per connection). nginx's `$limit_rate`: the
    // rate in force (the location's, or the one `set $limit_rate` or an upstream's
    // `X-Accel-Limit-Rate` gave).
    let logged = [
        log.as_deref_mut(),
        match &mut trailers {
            Some(Section::Fields(p)) => Some(p.vars_mut()),
            _ => None,
        },
    ];
    for l in logged.into_iter().flatten() {
        l.limit_rate = rate;
        if let Some(n) = head {
            l.head_bytes = n;
        }
    }
    // An upgraded connection is logged when its tunnel closes, with the bytes it sent the
    // client (nginx: `$body_bytes_sent` the tunnel's, `$bytes_sent` with the 101 head).
    if let Some(end) = resp
        .extensions_mut()
        .remove::<crate::http::proxy::TunnelEnd>()
    {
        if let (Some(mut l), Some(rx)) = (log.take(), end.take()) {
            l.head_bytes = head_bytes(&resp);
            tokio::spawn(async move {
                let n = rx.await.unwrap_or(0);
                l.write(n);
            });
        }
    }
    let watch = crate::http::tuning::Watch::start(crate::http::tuning::Head {
        conn: r.conn,
        // The status page's own answers are not traffic.
        mode: if loc.tuning_advisor_status {
            crate::advisor::AdvisorMode::Off
        } else {
            r.server.tuning_advisor
        },
        start: r.start,
        request_headers: req_headers,
        nreq: r.nreq,
        upstream: r.upstream.get(),
    });
    let (parts, body) = resp.into_parts();
    Response::from_parts(
        parts,
        ResponseBody {
            inner: body,
            sent: 0,
            trailers,
            log,
            done: Some(done),
            watch,
            busy: None,
            progress: None,
            // limit_conn's counts are held until the response body is done.
            _limit_conn: r.guard.take(),
            h2_chunk: loc
                .http2_chunk_size
                .map(|c| usize::try_from(c).unwrap_or(usize::MAX)),
        },
    )
}

/// Whether an HTTP/1.x response that keeps the connection says so (`Connection: keep-alive`),
/// as nginx does. Only when hyper will keep it too: hyper appends `close` to a `Connection`
/// header when it ends a connection itself (its graceful shutdown, a request body dropped
/// unread, a client's `close`), and `keep-alive, close` would hide the close from clients
/// that look for `Connection: close`. HTTP/1.0 keeps a connection only when the client asked.
fn explicit_keep_alive(
    version: http::Version,
    req: &HeaderMap,
    conn: &crate::http::conn::Conn,
) -> bool {
    let h1 = conn.h1();
    if h1.shutting_down.load(Ordering::Relaxed)
        || h1.open_bodies.load(Ordering::Relaxed) > 0
        || h1.abandoned.load(Ordering::Relaxed)
    {
        return false;
    }
    let (mut close, mut keep_alive) = (false, false);
    for token in req
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
    {
        let t = token.trim_ascii();
        close |= t.eq_ignore_ascii_case(b"close");
        keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
    }
    match version {
        http::Version::HTTP_11 => !close,
        http::Version::HTTP_10 => keep_alive && !close,
        _ => false,
    }
}

/// A response's trailer section.
enum Section {
    /// None of its fields: an HTTP/1.1 response chunked for `add_trailer` whose client did
    /// not ask for trailers ends with an empty section, as nginx's.
    Empty,
    /// `add_trailer`'s fields, evaluated when the body ends.
    Fields(Box<super::trailers::Pending>),
}

/// The body handed to hyper: counts bytes and writes the access log when done.
pub struct ResponseBody {
    pub(super) inner: Body,
    sent: u64,
    /// `add_trailer`'s section, sent once the body has ended.
    trailers: Option<Section>,
    log: Option<Box<LogOnDone>>,
    /// What the `metrics` count when the response ends.
    done: Option<crate::metrics::ResponseDone>,
    /// The tuning advisor's watch over this response (`tuning_advisor on`).
    watch: Option<crate::http::tuning::Watch>,
    /// The connection whose request this answers: marked idle again when the body is done.
    pub(super) busy: Option<Busy>,
    /// The HTTP/2 stream's progress for `send_timeout`.
    pub(super) progress: Option<Arc<crate::http::send_watch::Progress>>,
    /// limit_conn counts held until the body is done (None for most requests).
    pub(super) _limit_conn: Option<Box<super::guard::GuardState>>,
    /// `http2_chunk_size`: the most body bytes per HTTP/2 DATA frame.
    pub h2_chunk: Option<usize>,
}

impl ResponseBody {
    /// The body inside, taken out.
    pub(super) fn take_inner(mut self) -> Body {
        std::mem::take(&mut self.inner)
    }

    /// Whether the next bytes can be read straight into a caller's buffer
    /// ([`ResponseBody::read_into`]): a file body that is read, with bytes left.
    pub fn reads_into(&self) -> bool {
        self.inner.reads_into()
    }

    /// [`Body::read_into`]: up to `max` bytes appended to `out` (HTTP/2 reads a file into
    /// the DATA frame itself), counted for the access log as a polled frame's are. `None`:
    /// poll the frames instead. The caller reports `send_timeout`'s progress (HTTP/2: once a
    /// turn, `Progress::touch`), as a file read never waits on its source.
    pub fn read_into(&mut self, out: &mut Vec<u8>, max: usize) -> Option<std::io::Result<usize>> {
        let r = self.inner.read_into(out, max)?;
        if let Ok(n) = &r {
            self.sent += *n as u64;
        }
        Some(r)
    }

    /// A body with no access log (connection-level answers).
    pub fn plain(inner: Body) -> Self {
        Self {
            inner,
            sent: 0,
            trailers: None,
            log: None,
            done: None,
            watch: None,
            busy: None,
            progress: None,
            _limit_conn: None,
            h2_chunk: None,
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(l) = self.log.take() {
            l.write(self.sent);
        }
        // One clock read for the metrics' total time and the connection's idle start.
        let now = (self.done.is_some() || self.busy.is_some()).then(std::time::Instant::now);
        if let (Some(d), Some(now)) = (&self.done, now) {
            d.end_at(self.sent, now);
        }
        if let (Some(w), Some(busy)) = (self.watch.take(), &self.busy) {
            w.done(self.sent, &busy.0);
        }
        // After the log line: the request ends (uncounted) once it is logged.
        if let Some(mut busy) = self.busy.take() {
            busy.1 = now;
        }
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
        let mut p = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = p {
            if let Some(Section::Fields(t)) = this.trailers.take() {
                let t = t.eval(this.sent);
                if !t.is_empty() {
                    p = Poll::Ready(Some(Ok(Frame::trailers(t))));
                }
            }
        }
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
        self.trailers.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.trailers.is_some() {
            // No length: HTTP/1.1 chunks, so the trailer section has a place.
            let mut h = SizeHint::new();
            h.set_lower(self.inner.size_hint().lower());
            return h;
        }
        self.inner.size_hint()
    }
}

/// nginx's charset filter on a response the static module did not make: `; charset=NAME`, and
/// the body recoded when `source_charset` (or the response's own charset, with
/// `override_charset`) differs and a `charset_map` joins them. `accel`: the upstream's
/// `X-Accel-Charset`, the destination in `charset`'s place.
fn apply_charset(
    mut resp: Response<Body>,
    loc: &LocationConf,
    accel: Option<&str>,
) -> Response<Body> {
    let encoded = resp.headers().contains_key(header::CONTENT_ENCODING);
    let status = resp.status().as_u16();
    let Some(plan) = crate::http::charset::plan_with(
        loc,
        resp.headers().get(header::CONTENT_TYPE),
        encoded,
        status,
        accel,
    ) else {
        return resp;
    };
    if let Some(v) = plan.content_type {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    let Some(table) = plan.recode else {
        return resp;
    };
    let (parts, body) = resp.into_parts();
    let body = match body {
        Body::File(_) => {
            let mut b = body;
            b.set_recode(table);
            b
        }
        Body::Full(Some(bytes)) => {
            let mut v = bytes.to_vec();
            table.apply(&mut v);
            Body::full(v)
        }
        Body::Stream(s) => {
            use http_body_util::BodyExt;
            Body::Stream(
                s.map_frame(move |f| {
                    f.map_data(|d| {
                        let mut v = d.to_vec();
                        table.apply(&mut v);
                        bytes::Bytes::from(v)
                    })
                })
                .boxed_unsync(),
            )
        }
        other => other,
    };
    Response::from_parts(parts, body)
}
