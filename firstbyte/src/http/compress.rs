//! Dynamic compression of responses: nginx's gzip filter and the brotli filter module
//! (google/ngx_brotli), with their rules and their defaults.
//!
//! Data flow: once the response head is known, [`decide`] (or its short form [`choose`])
//! looks at the request (method, version, `Accept-Encoding`, `Via`), the response head
//! (status, `Content-Type`, `Content-Encoding`, length) and the location's [`Compression`]
//! settings, and picks a coding or none. [`compress`] then rewrites the head (no
//! `Content-Length`, no `Accept-Ranges`, `Content-Encoding`, `Vary`, a weak `ETag`) and wraps the
//! body in a streaming encoder: each input frame is compressed and flushed at once, so the
//! first bytes of a slow upstream reach the client before its last ones exist, and nothing
//! holds the whole body. [`apply`] does both, and adds `Vary` to the responses that could have
//! been compressed but were not, as nginx does.
//!
//! nginx's rules kept here: only statuses 200, 403 and 404 (so 206 and 304 never); a `HEAD`
//! response gets the head a `GET` would (`Content-Encoding`, no `Content-Length`), its length
//! read from `Content-Length`; never a response that already has a `Content-Encoding`; `text/html` always
//! and the `*_types` besides (`*` = any); not below `gzip_min_length` when the length is known;
//! gzip only for HTTP/1.1 and later (nginx's `gzip_http_version 1.1` default) and not for
//! requests that came through a proxy (`Via` present: nginx's `gzip_proxied off` default);
//! `Vary: Accept-Encoding` only with `gzip_vary on` (the brotli module uses the same switch).
//! A client accepts a coding only by naming it with a q-value above 0; `*` does not count,
//! as in nginx. When both are allowed, br wins (the brotli module's precedence).

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{
    HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    ETAG, VARY,
};
use http::{HeaderMap, Method, Response, StatusCode, Version};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;

use super::body::Body;
use crate::conf::model::{Compression, GzipProxied};

/// Brotli window: 2^22 bytes (4 MiB), the brotli library's own default and the largest
/// plain window; smaller when the body's length is known, as the brotli module does.
pub const BROTLI_MAX_WINDOW_BITS: u32 = 22;

/// Smallest brotli window (2^10 bytes): the format's minimum.
const BROTLI_MIN_WINDOW_BITS: u32 = 10;

/// Size of the brotli writer's internal buffer: 4 KiB, the brotli crate's usual choice.
const BROTLI_BUFFER: usize = 4096;

/// A content coding firstbyte produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `gzip` (flate2).
    Gzip,
    /// `br` (the `brotli` crate).
    Brotli,
}

impl Encoding {
    /// The token used in `Content-Encoding`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
        }
    }
}

/// The codings a client accepts, from its `Accept-Encoding` headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepted {
    /// `gzip` (or `x-gzip`) is named with q > 0.
    pub gzip: bool,
    /// `br` is named with q > 0.
    pub br: bool,
}

/// Parses a q-value (`0`, `0.5`, `1`, `1.000`); anything malformed counts as 0, as nginx does.
fn qvalue(s: &str) -> f32 {
    let s = s.trim();
    let ok = s.len() <= 5
        && matches!(s.as_bytes().first(), Some(b'0' | b'1'))
        && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !ok {
        return 0.0;
    }
    s.parse::<f32>().ok().filter(|q| *q <= 1.0).unwrap_or(0.0)
}

/// Reads every `Accept-Encoding` header of a request. A coding counts when it is named and
/// its q-value (default 1) is above 0; `*` is not taken to mean gzip or br (nginx's reading).
pub fn accepted(headers: &HeaderMap) -> Accepted {
    let mut gzip: Option<f32> = None;
    let mut br: Option<f32> = None;
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let mut q = 1.0;
            for param in parts {
                if let Some((k, v)) = param.split_once('=') {
                    if k.trim().eq_ignore_ascii_case("q") {
                        q = qvalue(v);
                    }
                }
            }
            let slot =
                if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                    &mut gzip
                } else if coding.eq_ignore_ascii_case("br") {
                    &mut br
                } else {
                    continue;
                };
            *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
        }
    }
    Accepted {
        gzip: gzip.is_some_and(|q| q > 0.0),
        br: br.is_some_and(|q| q > 0.0),
    }
}

/// nginx's `ngx_http_gzip_ok`: the client accepts gzip and may get a compressed response
/// ([`client_ok`]). `gzip_static on` uses the same test (with no response head yet).
pub fn gzip_ok(req: &HeaderMap, resp: &HeaderMap, conf: &Compression) -> bool {
    accepted(req).gzip && client_ok(req, resp, conf)
}

/// Whether this client may get a compressed response, whatever it accepts: its `User-Agent`
/// is not in `gzip_disable`, and a request that came through a proxy (`Via`) passes
/// `gzip_proxied` ([`proxied_ok`]).
pub fn client_ok(req: &HeaderMap, resp: &HeaderMap, conf: &Compression) -> bool {
    let ua = req
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    !conf.gzip_disable.refuses(ua) && proxied_ok(req, resp, conf.gzip_proxied)
}

/// `gzip_proxied`, nginx's rules in nginx's order: not proxied (no `Via`): yes; `off`: no;
/// `any`: yes; `auth` and an `Authorization`: yes; an `Expires`: yes only with `expired` and
/// a time not after `Date` (or now); a `Cache-Control`: yes only for a listed `no-cache`,
/// `no-store` or `private` in it; else no with `no_last_modified` and a `Last-Modified`, or
/// with `no_etag` and an `ETag`; else yes.
pub fn proxied_ok(req: &HeaderMap, resp: &HeaderMap, p: GzipProxied) -> bool {
    if !req.contains_key(http::header::VIA) {
        return true;
    }
    if p.has(GzipProxied::OFF) {
        return false;
    }
    if p.has(GzipProxied::ANY)
        || (p.has(GzipProxied::AUTH) && req.contains_key(http::header::AUTHORIZATION))
    {
        return true;
    }
    let time = |name| {
        resp.get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
    };
    if resp.contains_key(http::header::EXPIRES) {
        let Some(expires) = time(http::header::EXPIRES) else {
            return false;
        };
        let date = time(http::header::DATE).unwrap_or_else(std::time::SystemTime::now);
        return p.has(GzipProxied::EXPIRED) && expires <= date;
    }
    if resp.contains_key(http::header::CACHE_CONTROL) {
        let has = |token: &str| {
            resp.get_all(http::header::CACHE_CONTROL).iter().any(|v| {
                v.to_str().is_ok_and(|v| {
                    v.split(',')
                        .any(|t| t.trim().split('=').next() == Some(token))
                })
            })
        };
        return (p.has(GzipProxied::NO_CACHE) && has("no-cache"))
            || (p.has(GzipProxied::NO_STORE) && has("no-store"))
            || (p.has(GzipProxied::PRIVATE) && has("private"));
    }
    !(p.has(GzipProxied::NO_LAST_MODIFIED) && resp.contains_key(http::header::LAST_MODIFIED)
        || p.has(GzipProxied::NO_ETAG) && resp.contains_key(http::header::ETAG))
}

/// Whether a `Content-Type` is one of `types`: `text/html` always, `*` any, compared without
/// parameters and case.
pub fn type_matches(content_type: Option<&HeaderValue>, types: &[String]) -> bool {
    if types.iter().any(|t| t == "*") {
        return true;
    }
    let Some(base) = content_type
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
    else {
        return false;
    };
    base.eq_ignore_ascii_case("text/html") || types.iter().any(|t| t.eq_ignore_ascii_case(base))
}

/// `charset`: `content_type` with `; charset=NAME` when its type is in `types` and it names
/// no charset (or names one and `replace`, `override_charset on`); `None`: leave it.
pub fn with_charset(
    content_type: Option<&HeaderValue>,
    charset: &str,
    types: &[String],
    replace: bool,
) -> Option<HeaderValue> {
    if !type_matches(content_type, types) {
        return None;
    }
    let v = content_type?.to_str().ok()?;
    let mut parts = v.split(';');
    let base = parts.next().unwrap_or("").trim();
    let named = v.split(';').skip(1).any(|p| {
        p.trim()
            .get(..8)
            .is_some_and(|k| k.eq_ignore_ascii_case("charset="))
    });
    if named && !replace {
        return None;
    }
    let mut out = String::with_capacity(v.len() + charset.len() + 10);
    out.push_str(base);
    for p in parts {
        let p = p.trim();
        if p.get(..8)
            .is_some_and(|k| k.eq_ignore_ascii_case("charset="))
            || p.is_empty()
        {
            continue;
        }
        out.push_str("; ");
        out.push_str(p);
    }
    out.push_str("; charset=");
    out.push_str(charset);
    HeaderValue::from_str(&out).ok()
}

/// What the compression filters decided for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The coding to apply, if any.
    pub encoding: Option<Encoding>,
    /// Whether the response gets `Vary: Accept-Encoding`: `gzip_vary on` and the response was
    /// eligible for a coding, whether or not this client accepted it (nginx's rule: a cache
    /// must know that another client could get another body).
    pub vary: bool,
}

/// The request facts the filters look at.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// A `HEAD` response gets the `GET` response's head and stays without a body.
    pub method: &'a Method,
    /// gzip needs HTTP/1.1 or later (nginx's `gzip_http_version 1.1` default).
    pub version: Version,
    /// `Accept-Encoding` and `Via` are read.
    pub headers: &'a HeaderMap,
}

/// Decides whether and how to compress a response.
///
/// `size_hint` is the body's length when known; `None` falls back to the response's
/// `Content-Length` header (and to "unknown" without one).
pub fn decide(
    req: &RequestInfo<'_>,
    resp: &http::response::Parts,
    size_hint: Option<u64>,
    conf: &Compression,
) -> Decision {
    let none = Decision {
        encoding: None,
        vary: false,
    };
    if !conf.gzip && !conf.brotli {
        return none;
    }
    if !matches!(
        resp.status,
        StatusCode::OK | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
    ) {
        return none;
    }
    if resp
        .headers
        .get(CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().is_empty())
    {
        return none;
    }
    let len = size_hint.or_else(|| {
        resp.headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    if len.is_some_and(|l| l < conf.gzip_min_length) {
        return none;
    }
    let ctype = resp.headers.get(CONTENT_TYPE);
    let br_eligible = conf.brotli && type_matches(ctype, &conf.brotli_types);
    let gzip_eligible = conf.gzip && type_matches(ctype, &conf.gzip_types);
    if !br_eligible && !gzip_eligible {
        return none;
    }
    let accepts = accepted(req.headers);
    let client = client_ok(req.headers, &resp.headers, conf);
    let encoding = if !client {
        None
    } else if br_eligible && accepts.br {
        Some(Encoding::Brotli)
    } else if gzip_eligible
        && (req.version >= Version::HTTP_11
            || (conf.gzip_http10 && req.version == Version::HTTP_10))
        && accepts.gzip
    {
        Some(Encoding::Gzip)
    } else {
        None
    };
    Decision {
        encoding,
        vary: conf.gzip_vary,
    }
}

/// The coding to apply to a response, if any, from the request headers alone: [`decide`]
/// for a `GET` over HTTP/1.1 or later, without the `Vary` part. The caller skips `HEAD`
/// requests itself; [`decide`] and [`apply`] also apply nginx's `gzip_http_version` rule.
pub fn choose(
    req_headers: &HeaderMap,
    resp: &http::response::Parts,
    size_hint: Option<u64>,
    conf: &Compression,
) -> Option<Encoding> {
    let req = RequestInfo {
        method: &Method::GET,
        version: Version::HTTP_11,
        headers: req_headers,
    };
    decide(&req, resp, size_hint, conf).encoding
}

/// Adds `Vary: Accept-Encoding` unless a `Vary` already names it (or is `*`).
pub fn add_vary(headers: &mut HeaderMap) {
    let present = headers.get_all(VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|t| t.trim() == "*" || t.trim().eq_ignore_ascii_case("accept-encoding"))
        })
    });
    if !present {
        headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// A strong `ETag` becomes weak (`W/"..."`); a malformed one is dropped (nginx's
/// `ngx_http_weak_etag`).
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(ETAG) else {
        return;
    };
    let b = etag.as_bytes();
    if b.starts_with(b"W/") {
        return;
    }
    if b.starts_with(b"\"") {
        let mut weak = Vec::with_capacity(b.len() + 2);
        weak.extend_from_slice(b"W/");
        weak.extend_from_slice(b);
        if let Ok(v) = HeaderValue::from_bytes(&weak) {
            headers.insert(ETAG, v);
            return;
        }
    }
    headers.remove(ETAG);
}

/// Compresses a response: rewrites its head and streams its body through the encoder
/// (gzip at `gzip_comp_level`, brotli at `brotli_comp_level` with up to a 2^22 window).
pub fn compress(resp: Response<Body>, enc: Encoding, conf: &Compression) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    let len = body.size_hint().exact().or_else(|| {
        parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    head_as_compressed(&mut parts.headers, enc, conf);
    let encoder = Encoder::new(enc, conf, len);
    let body = CompressBody {
        inner: body,
        encoder: Some(encoder),
        trailers: None,
    };
    Response::from_parts(parts, Body::Stream(body.boxed_unsync()))
}

/// The head of a response compressed with `enc`: no length, no ranges, `Content-Encoding`,
/// `Vary` (with `gzip_vary`), a weak `ETag`.
fn head_as_compressed(headers: &mut HeaderMap, enc: Encoding, conf: &Compression) {
    headers.remove(CONTENT_LENGTH);
    headers.remove(ACCEPT_RANGES);
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(enc.as_str()));
    if conf.gzip_vary {
        add_vary(headers);
    }
    weaken_etag(headers);
}

/// The whole filter: [`decide`], then [`compress`] or, for an eligible response this client
/// did not accept, only `Vary`.
pub fn apply(req: &RequestInfo<'_>, resp: Response<Body>, conf: &Compression) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    let head = *req.method == Method::HEAD;
    // A HEAD response has no body: its length is the one its head announces.
    let hint = if head { None } else { body.size_hint().exact() };
    let decision = decide(req, &parts, hint, conf);
    match decision.encoding {
        Some(enc) if head => {
            head_as_compressed(&mut parts.headers, enc, conf);
            Response::from_parts(parts, body)
        }
        Some(enc) => compress(Response::from_parts(parts, body), enc, conf),
        None => {
            if decision.vary {
                add_vary(&mut parts.headers);
            }
            Response::from_parts(parts, body)
        }
    }
}

/// A streaming encoder writing into a buffer that is drained after each frame.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
}

impl Encoder {
    fn new(enc: Encoding, conf: &Compression, len: Option<u64>) -> Self {
        match enc {
            Encoding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(conf.gzip_comp_level.clamp(1, 9)),
            )),
            Encoding::Brotli => {
                let mut bits = BROTLI_MAX_WINDOW_BITS;
                if let Some(len) = len.filter(|l| *l > 0) {
                    bits = BROTLI_MIN_WINDOW_BITS;
                    while bits < BROTLI_MAX_WINDOW_BITS && len > 1u64 << bits {
                        bits += 1;
                    }
                }
                Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                    Vec::new(),
                    BROTLI_BUFFER,
                    conf.brotli_comp_level.min(11),
                    bits,
                )))
            }
        }
    }

    /// Compresses `data`, flushes, and returns what the encoder produced.
    fn write_flush(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        let out = match self {
            Encoder::Gzip(e) => {
                e.write_all(data)?;
                e.flush()?;
                std::mem::take(e.get_mut())
            }
            Encoder::Brotli(e) => {
                e.write_all(data)?;
                e.flush()?;
                std::mem::take(e.get_mut())
            }
        };
        Ok(Bytes::from(out))
    }

    /// Compresses the last `data` and ends the stream: one piece, with no flush point
    /// between them (as nginx's gzip of a last buffer).
    fn write_finish(mut self, data: &[u8]) -> std::io::Result<Bytes> {
        match &mut self {
            Encoder::Gzip(e) => e.write_all(data)?,
            Encoder::Brotli(e) => e.write_all(data)?,
        }
        self.finish()
    }

    /// Ends the stream and returns its last bytes.
    fn finish(self) -> std::io::Result<Bytes> {
        let out = match self {
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Brotli(e) => e.into_inner(),
        };
        Ok(Bytes::from(out))
    }
}

/// A body compressed frame by frame.
struct CompressBody {
    inner: Body,
    /// `None` once the stream is finished.
    encoder: Option<Encoder>,
    /// Trailers of the inner body, sent after the last compressed bytes.
    trailers: Option<HeaderMap>,
}

impl http_body::Body for CompressBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        loop {
            let Some(encoder) = this.encoder.as_mut() else {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            };
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(f) => f,
            };
            let out = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => continue,
                    // The inner body's last bytes (it says it ended, and has no trailers):
                    // compressed and finished in one frame, not a flushed frame then the end.
                    Ok(data) if this.inner.is_end_stream() => this
                        .encoder
                        .take()
                        .map_or(Ok(Bytes::new()), |e| e.write_finish(&data)),
                    Ok(data) => encoder.write_flush(&data),
                    Err(frame) => match frame.into_trailers() {
                        Ok(t) => {
                            this.trailers = Some(t);
                            this.encoder
                                .take()
                                .map_or(Ok(Bytes::new()), Encoder::finish)
                        }
                        Err(_) => continue,
                    },
                },
                Some(Err(e)) => {
                    this.encoder = None;
                    return Poll::Ready(Some(Err(e)));
                }
                None => this
                    .encoder
                    .take()
                    .map_or(Ok(Bytes::new()), Encoder::finish),
            };
            match out {
                Ok(b) if b.is_empty() => continue,
                Ok(b) => return Poll::Ready(Some(Ok(Frame::data(b)))),
                Err(e) => {
                    this.encoder = None;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.encoder.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::io::Read;

    fn conf() -> Compression {
        Compression {
            gzip: true,
            gzip_http10: false,
            gzip_types: vec!["text/css".into(), "application/javascript".into()],
            gzip_comp_level: 1,
            gzip_min_length: 20,
            gzip_vary: true,
            gzip_proxied: GzipProxied(GzipProxied::OFF),
            gzip_disable: Default::default(),
            brotli: false,
            brotli_types: vec![],
            brotli_comp_level: 6,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn parts(status: u16, pairs: &[(&str, &str)]) -> http::response::Parts {
        let mut b = Response::builder().status(status);
        for (k, v) in pairs {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn get<'a>(h: &'a HeaderMap) -> RequestInfo<'a> {
        RequestInfo {
            method: &Method::GET,
            version: Version::HTTP_11,
            headers: h,
        }
    }

    fn pick(
        req: &RequestInfo<'_>,
        resp: &http::response::Parts,
        size_hint: Option<u64>,
        conf: &Compression,
    ) -> Option<Encoding> {
        decide(req, resp, size_hint, conf).encoding
    }

    const HTML: &[(&str, &str)] = &[("content-type", "text/html; charset=utf-8")];

    #[test]
    fn accept_encoding_parsing() {
        let a = |v: &str| accepted(&headers(&[("accept-encoding", v)]));
        assert_eq!(
            a("gzip, deflate, br"),
            Accepted {
                gzip: true,
                br: true
            }
        );
        assert_eq!(
            a("gzip;q=0, br"),
            Accepted {
                gzip: false,
                br: true
            }
        );
        assert_eq!(
            a("GZIP ; Q=0.5"),
            Accepted {
                gzip: true,
                br: false
            }
        );
        assert_eq!(a("gzip;q=0.000"), Accepted::default());
        assert!(a("gzip;q=0.001").gzip);
        assert_eq!(
            a("br;q=0.0, x-gzip"),
            Accepted {
                gzip: true,
                br: false
            }
        );
        assert_eq!(a("*"), Accepted::default());
        assert_eq!(a("identity"), Accepted::default());
        assert_eq!(a("gzip;q=abc"), Accepted::default());
        assert_eq!(a("gzip;q=2"), Accepted::default());
        assert_eq!(a("gzipx, xbr"), Accepted::default());
        // Two headers are one list.
        let two = headers(&[("accept-encoding", "gzip;q=0"), ("accept-encoding", "br")]);
        assert_eq!(
            accepted(&two),
            Accepted {
                gzip: false,
                br: true
            }
        );
        assert_eq!(accepted(&HeaderMap::new()), Accepted::default());
    }

    #[test]
    fn gzip_is_chosen_for_eligible_responses() {
        let h = headers(&[("accept-encoding", "gzip")]);
        let c = conf();
        assert_eq!(
            pick(&get(&h), &parts(200, HTML), Some(100), &c),
            Some(Encoding::Gzip)
        );
        assert_eq!(
            pick(&get(&h), &parts(404, HTML), Some(100), &c),
            Some(Encoding::Gzip)
        );
        assert_eq!(
            pick(&get(&h), &parts(403, HTML), None, &c),
            Some(Encoding::Gzip)
        );
        let css = &[("content-type", "TEXT/CSS")];
        assert_eq!(
            pick(&get(&h), &parts(200, css), None, &c),
            Some(Encoding::Gzip)
        );
    }

    #[test]
    fn choose_reads_the_request_headers() {
        let c = conf();
        let h = headers(&[("accept-encoding", "gzip")]);
        assert_eq!(
            choose(&h, &parts(200, HTML), Some(100), &c),
            Some(Encoding::Gzip)
        );
        let no = headers(&[("accept-encoding", "gzip;q=0")]);
        assert_eq!(choose(&no, &parts(200, HTML), Some(100), &c), None);
        assert_eq!(choose(&h, &parts(206, HTML), Some(100), &c), None);
    }

    #[test]
    fn charset_is_added_to_listed_types_that_name_none() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        let types: Vec<String> = crate::conf::model::CHARSET_TYPES
            .iter()
            .map(|t| t.to_string())
            .collect();
        let cs = |ct: Option<&str>, t: &[String], replace: bool| {
            with_charset(ct.map(v).as_ref(), "utf-8", t, replace)
                .map(|h| h.to_str().unwrap().to_string())
        };
        assert_eq!(
            cs(Some("text/html"), &types, false).as_deref(),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(
            cs(Some("text/plain;format=flowed"), &types, false).as_deref(),
            Some("text/plain; format=flowed; charset=utf-8")
        );
        assert_eq!(cs(Some("text/css"), &types, false), None, "not listed");
        assert_eq!(cs(None, &types, false), None, "no type");
        assert_eq!(
            cs(Some("text/plain; charset=koi8-r"), &types, false),
            None,
            "named: kept"
        );
        assert_eq!(
            cs(Some("text/plain; Charset=koi8-r"), &types, true).as_deref(),
            Some("text/plain; charset=utf-8"),
            "override_charset on"
        );
        let all = vec!["*".to_string()];
        assert_eq!(
            cs(Some("image/png"), &all, false).as_deref(),
            Some("image/png; charset=utf-8")
        );
        // text/html always, whatever the list.
        assert_eq!(
            cs(Some("text/html"), &[], false).as_deref(),
            Some("text/html; charset=utf-8")
        );
    }

    #[test]
    fn refusals() {
        let h = headers(&[("accept-encoding", "gzip")]);
        let c = conf();
        // Statuses other than 200/403/404 (206 and 304 included).
        for s in [206, 304, 500, 301, 201] {
            assert_eq!(pick(&get(&h), &parts(s, HTML), Some(100), &c), None, "{s}");
        }
        // HEAD: decided as GET (nginx-tests gzip.t "gzip head").
        let head = RequestInfo {
            method: &Method::HEAD,
            ..get(&h)
        };
        assert_eq!(
            pick(&head, &parts(200, HTML), Some(100), &c),
            Some(Encoding::Gzip)
        );
        let lengthy = &[("content-type", "text/html"), ("content-length", "100")];
        let r = apply(
            &head,
            Response::from_parts(parts(200, lengthy), Body::Empty),
            &c,
        );
        assert_eq!(r.headers()[CONTENT_ENCODING], "gzip");
        assert!(r.headers().get(CONTENT_LENGTH).is_none());
        assert!(
            matches!(r.body(), Body::Empty),
            "a HEAD response stays without a body"
        );
        // Already encoded.
        let enc = &[("content-type", "text/html"), ("content-encoding", "gzip")];
        assert_eq!(pick(&get(&h), &parts(200, enc), Some(100), &c), None);
        // Too short, from the hint or from Content-Length.
        assert_eq!(pick(&get(&h), &parts(200, HTML), Some(19), &c), None);
        let short = &[("content-type", "text/html"), ("content-length", "5")];
        assert_eq!(pick(&get(&h), &parts(200, short), None, &c), None);
        // Exactly the minimum is enough.
        assert_eq!(
            pick(&get(&h), &parts(200, HTML), Some(20), &c),
            Some(Encoding::Gzip)
        );
        // Types not listed, or no type.
        let png = &[("content-type", "image/png")];
        assert_eq!(pick(&get(&h), &parts(200, png), Some(100), &c), None);
        assert_eq!(pick(&get(&h), &parts(200, &[]), Some(100), &c), None);
        // q=0.
        let no = headers(&[("accept-encoding", "gzip;q=0")]);
        assert_eq!(pick(&get(&no), &parts(200, HTML), Some(100), &c), None);
        // HTTP/1.0 and proxied requests (nginx's gzip_http_version and gzip_proxied defaults).
        let old = RequestInfo {
            version: Version::HTTP_10,
            ..get(&h)
        };
        assert_eq!(pick(&old, &parts(200, HTML), Some(100), &c), None);
        // gzip_http_version 1.0: HTTP/1.0 requests are compressed too.
        let ten = Compression {
            gzip_http10: true,
            ..conf()
        };
        assert_eq!(
            pick(&old, &parts(200, HTML), Some(100), &ten),
            Some(Encoding::Gzip)
        );
        let via = headers(&[("accept-encoding", "gzip"), ("via", "1.1 cache")]);
        assert_eq!(pick(&get(&via), &parts(200, HTML), Some(100), &c), None);
        // Disabled.
        let off = Compression {
            gzip: false,
            ..conf()
        };
        assert_eq!(pick(&get(&h), &parts(200, HTML), Some(100), &off), None);
    }

    #[test]
    fn star_type_and_brotli_preference() {
        let h = headers(&[("accept-encoding", "gzip, br")]);
        let c = Compression {
            brotli: true,
            brotli_types: vec!["*".into()],
            ..conf()
        };
        let png = &[("content-type", "image/png")];
        assert_eq!(
            pick(&get(&h), &parts(200, png), Some(100), &c),
            Some(Encoding::Brotli)
        );
        assert_eq!(
            pick(&get(&h), &parts(200, HTML), Some(100), &c),
            Some(Encoding::Brotli)
        );
        // br refused by the client: gzip, for a type gzip takes.
        let gz = headers(&[("accept-encoding", "gzip, br;q=0")]);
        assert_eq!(
            pick(&get(&gz), &parts(200, HTML), Some(100), &c),
            Some(Encoding::Gzip)
        );
        assert_eq!(pick(&get(&gz), &parts(200, png), Some(100), &c), None);
        // Brotli ignores the HTTP/1.0 and Via rules of the gzip module.
        let old = RequestInfo {
            version: Version::HTTP_10,
            ..get(&h)
        };
        assert_eq!(
            pick(&old, &parts(200, HTML), Some(100), &c),
            Some(Encoding::Brotli)
        );
    }

    #[test]
    fn vary_follows_eligibility_not_acceptance() {
        let c = conf();
        let none = HeaderMap::new();
        let d = decide(&get(&none), &parts(200, HTML), Some(100), &c);
        assert_eq!(
            d,
            Decision {
                encoding: None,
                vary: true
            }
        );
        let png = &[("content-type", "image/png")];
        let d = decide(&get(&none), &parts(200, png), Some(100), &c);
        assert!(!d.vary);
        let novary = Compression {
            gzip_vary: false,
            ..conf()
        };
        assert!(!decide(&get(&none), &parts(200, HTML), Some(100), &novary).vary);

        let resp = Response::builder()
            .header("content-type", "text/html")
            .body(Body::full(vec![b'a'; 100]))
            .unwrap();
        let out = apply(&get(&none), resp, &c);
        assert_eq!(out.headers().get(VARY).unwrap(), "Accept-Encoding");
        assert!(out.headers().get(CONTENT_ENCODING).is_none());
    }

    #[test]
    fn add_vary_does_not_repeat() {
        let mut h = headers(&[("vary", "Origin, accept-encoding")]);
        add_vary(&mut h);
        assert_eq!(h.get_all(VARY).iter().count(), 1);
        let mut h = headers(&[("vary", "Origin")]);
        add_vary(&mut h);
        assert_eq!(h.get_all(VARY).iter().count(), 2);
    }

    fn html_response(body: Body, etag: &str) -> Response<Body> {
        Response::builder()
            .header("content-type", "text/html")
            .header("content-length", "12345")
            .header("accept-ranges", "bytes")
            .header("etag", etag)
            .body(body)
            .unwrap()
    }

    fn sample() -> Vec<u8> {
        (0..300_000u32)
            .flat_map(|i| format!("line {} of the sample\n", i % 977).into_bytes())
            .collect()
    }

    async fn collect(resp: Response<Body>) -> Vec<u8> {
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn gzip_round_trip_and_headers() {
        let data = sample();
        let resp = html_response(Body::full(data.clone()), "\"abc-1\"");
        let out = compress(resp, Encoding::Gzip, &conf());
        let h = out.headers();
        assert_eq!(h.get(CONTENT_ENCODING).unwrap(), "gzip");
        assert_eq!(h.get(VARY).unwrap(), "Accept-Encoding");
        assert_eq!(h.get(ETAG).unwrap(), "W/\"abc-1\"");
        assert!(h.get(CONTENT_LENGTH).is_none());
        assert!(h.get(ACCEPT_RANGES).is_none());
        let z = collect(out).await;
        assert!(z.len() < data.len() / 4);
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, data);
    }

    #[tokio::test]
    async fn brotli_round_trip() {
        let data = sample();
        let c = Compression {
            gzip_vary: false,
            ..conf()
        };
        let resp = html_response(Body::full(data.clone()), "W/\"weak\"");
        let out = compress(resp, Encoding::Brotli, &c);
        assert_eq!(out.headers().get(CONTENT_ENCODING).unwrap(), "br");
        assert!(out.headers().get(VARY).is_none());
        assert_eq!(out.headers().get(ETAG).unwrap(), "W/\"weak\"");
        let z = collect(out).await;
        let mut plain = Vec::new();
        brotli::Decompressor::new(&z[..], 4096)
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, data);
    }

    #[tokio::test]
    async fn malformed_etag_is_dropped_and_empty_body_is_valid() {
        let out = compress(html_response(Body::Empty, "bare"), Encoding::Gzip, &conf());
        assert!(out.headers().get(ETAG).is_none());
        let z = collect(out).await;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert!(plain.is_empty());
    }

    /// A body that yields its frames and then either ends or stays pending, like an upstream
    /// that has sent its first chunk and not yet the rest.
    struct Drip {
        frames: VecDeque<Frame<Bytes>>,
        end: bool,
    }

    impl http_body::Body for Drip {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            let this = self.get_mut();
            match this.frames.pop_front() {
                Some(f) => Poll::Ready(Some(Ok(f))),
                None if this.end => Poll::Ready(None),
                None => Poll::Pending,
            }
        }
    }

    fn first_frame(enc: Encoding) -> Bytes {
        let chunk = Bytes::from_static(b"<html><head><title>first chunk</title></head>");
        let drip = Drip {
            frames: VecDeque::from([Frame::data(chunk)]),
            end: false,
        };
        let inner = Body::Stream(drip.boxed_unsync());
        let resp = Response::builder()
            .header("content-type", "text/html")
            .body(inner)
            .unwrap();
        let mut body = compress(resp, enc, &conf()).into_body();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let first = match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => f.into_data().unwrap(),
            _ => panic!("no frame before the input ended"),
        };
        // Then the encoder waits for more input instead of inventing an end.
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
        first
    }

    #[test]
    fn a_last_frame_and_the_end_go_out_as_one() {
        // A body that knows it ends with its frame (a file's): one compressed frame, no
        // flush point before the end; a streaming body still gets each frame flushed.
        let inner = Body::Full(Some(Bytes::from_static(b"SEE-THIS")));
        let resp = Response::builder()
            .header("content-type", "text/html")
            .body(inner)
            .unwrap();
        let mut body = compress(resp, Encoding::Gzip, &conf()).into_body();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let one = match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => f.into_data().unwrap(),
            _ => panic!("no frame"),
        };
        assert!(body.is_end_stream());
        assert!(matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
        let mut d = flate2::read::GzDecoder::new(&one[..]);
        let mut out = Vec::new();
        d.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"SEE-THIS");
        // No empty stored block (a sync flush's 00 00 ff ff) in it.
        assert!(!one.windows(4).any(|w| w == [0, 0, 0xff, 0xff]));
    }

    #[test]
    fn streams_gzip_frame_by_frame() {
        let z = first_frame(Encoding::Gzip);
        let mut d = flate2::write::GzDecoder::new(Vec::new());
        d.write_all(&z).unwrap();
        d.flush().unwrap();
        assert_eq!(
            d.get_ref().as_slice(),
            b"<html><head><title>first chunk</title></head>"
        );
    }

    #[test]
    fn streams_brotli_frame_by_frame() {
        let z = first_frame(Encoding::Brotli);
        let mut d = brotli::DecompressorWriter::new(Vec::new(), 4096);
        d.write_all(&z).unwrap();
        d.flush().unwrap();
        assert_eq!(
            d.get_ref().as_slice(),
            b"<html><head><title>first chunk</title></head>"
        );
    }

    #[tokio::test]
    async fn trailers_follow_the_compressed_bytes() {
        let data = Bytes::from_static(b"some text that is long enough to compress");
        let mut t = HeaderMap::new();
        t.insert("x-check", HeaderValue::from_static("1"));
        let inner = Drip {
            frames: VecDeque::from([Frame::data(data.clone()), Frame::trailers(t)]),
            end: true,
        };
        let resp = Response::builder()
            .body(Body::Stream(inner.boxed_unsync()))
            .unwrap();
        let collected = compress(resp, Encoding::Gzip, &conf())
            .into_body()
            .collect()
            .await
            .unwrap();
        assert_eq!(collected.trailers().unwrap().get("x-check").unwrap(), "1");
        let z = collected.to_bytes();
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, data);
    }

    #[test]
    fn gzip_proxied_follows_nginx() {
        let via = headers(&[("via", "1.1 proxy")]);
        let auth = headers(&[("via", "1.1 proxy"), ("authorization", "Basic eA==")]);
        let none = HeaderMap::new();
        let p = |flags: u16| GzipProxied(flags);
        // Not proxied: always; proxied with `off` (the default): never.
        assert!(proxied_ok(&none, &none, p(GzipProxied::OFF)));
        assert!(!proxied_ok(&via, &none, p(GzipProxied::OFF)));
        assert!(proxied_ok(&via, &none, p(GzipProxied::ANY)));
        assert!(proxied_ok(&auth, &none, p(GzipProxied::AUTH)));
        assert!(
            !proxied_ok(&via, &none, p(GzipProxied::AUTH | GzipProxied::NO_ETAG))
                || proxied_ok(&via, &none, p(GzipProxied::NO_ETAG))
        );
        // Expires: only `expired`, and only a time not after Date.
        let past = headers(&[
            ("expires", "Thu, 01 Jan 1970 00:00:00 GMT"),
            ("date", "Tue, 24 Nov 2026 00:00:00 GMT"),
        ]);
        let future = headers(&[
            ("expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
            ("date", "Tue, 24 Nov 2026 00:00:00 GMT"),
        ]);
        assert!(proxied_ok(&via, &past, p(GzipProxied::EXPIRED)));
        assert!(!proxied_ok(&via, &future, p(GzipProxied::EXPIRED)));
        assert!(!proxied_ok(&via, &past, p(GzipProxied::NO_CACHE)));
        // Cache-Control: only a listed token.
        let cc = headers(&[("cache-control", "max-age=0, private")]);
        assert!(proxied_ok(&via, &cc, p(GzipProxied::PRIVATE)));
        assert!(!proxied_ok(&via, &cc, p(GzipProxied::NO_CACHE)));
        // Else: no_last_modified / no_etag refuse when the header is there.
        let lm = headers(&[("last-modified", "Tue, 24 Nov 2026 00:00:00 GMT")]);
        assert!(!proxied_ok(&via, &lm, p(GzipProxied::NO_LAST_MODIFIED)));
        assert!(proxied_ok(&via, &none, p(GzipProxied::NO_LAST_MODIFIED)));
        assert!(proxied_ok(&via, &lm, p(GzipProxied::NO_ETAG)));
    }

    #[test]
    fn gzip_disable_by_user_agent() {
        let pos = crate::conf::model::Pos {
            file: std::sync::Arc::new(std::path::PathBuf::from("/t.conf")),
            line: 1,
        };
        let d = crate::conf::model::GzipDisable {
            msie6: true,
            patterns: vec![
                crate::conf::rewrite::regex::Regex::compile("^curl/", true, &pos).unwrap(),
            ],
        };
        assert!(d.refuses(Some("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.0)")));
        assert!(!d.refuses(Some(
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
        )));
        assert!(!d.refuses(Some("Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)")));
        assert!(d.refuses(Some("CURL/8.0")), "case-insensitive");
        assert!(!d.refuses(Some("Wget/1.21")));
        assert!(!d.refuses(None));
        let mut c = conf();
        c.gzip_disable = d;
        let h = headers(&[("accept-encoding", "gzip"), ("user-agent", "curl/8.0")]);
        assert_eq!(pick(&get(&h), &parts(200, HTML), Some(100), &c), None);
    }
}
