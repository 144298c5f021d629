//! The request contract: what a request must satisfy before any phase runs, whichever
//! protocol brought it (nginx's rules in `ngx_http_parse.c`, `ngx_http_request.c`, its
//! HTTP/2 and HTTP/3 request code; RFC 9113 §8.2–8.3 and RFC 9114 §4.1.2–4.3 where nginx is
//! silent). Pure decisions on bytes, lengths and flags; each front end only translates its
//! wire into their inputs:
//!
//! - every protocol, through the pipeline (`http::pipeline`), with what its front end
//!   handed over: [`method_token`], [`method_refusal`] (TRACE, CONNECT), [`host`],
//!   [`valid_header_name`] (`ignore_invalid_headers`), [`duplicate_unique`] and
//!   [`replay_safe`]; over HTTP/1.x [`framing_refusal`] too, and the connection's scanner
//!   (`server::conn::h1_scan`) reads lengths with [`content_length`];
//! - HTTP/2 (`http::h2`): its decoder asks [`method_token`], [`connection_specific`] and
//!   [`content_length`] per field, makes `:authority` the `Host` header
//!   ([`authority_as_host`]), and its connection counts each stream's DATA with a
//!   [`BodyLength`];
//! - HTTP/3 (`server::quic`): the same field rules on the head h3 decoded ([`refused_field`],
//!   [`declared_length`]), `:authority` as `Host`, and a [`BodyLength`] on the stream's DATA.
//!
//! What differs by protocol stays an input (`http::Version`, whether `:authority` came, the
//! body as the front end knows it: [`BodyKnown`]), never a copy of a rule.

use std::borrow::Cow;

use http::{header, HeaderMap, HeaderValue, Method, Version};

/// Whether `m` is a method nginx takes: upper-case letters, `_` and `-` only, on every
/// protocol (`ngx_http_parse_request_line`, `ngx_http_v2_parse_method`,
/// `ngx_http_v3_parse_method`). Anything else (a lower-case `delete`) is no method: 400.
pub fn method_token(m: &[u8]) -> bool {
    !m.is_empty()
        && m.iter()
            .all(|&c| c.is_ascii_uppercase() || c == b'_' || c == b'-')
}

/// nginx's refusal of a method before any location: TRACE (405, "client sent TRACE
/// method"), CONNECT (405; 400 over HTTP/1.x when its target names no port). `port`: the
/// request target's port, if it has one.
pub fn method_refusal(method: &Method, version: Version, port: Option<u16>) -> Option<u16> {
    if *method == Method::TRACE {
        return Some(405);
    }
    if *method != Method::CONNECT {
        return None;
    }
    Some(if port.is_none() && version < Version::HTTP_2 {
        400
    } else {
        405
    })
}

/// Whether nginx takes a header name as valid: letters, digits and `-`, and `_` with
/// `underscores_in_headers on`. Anything else hyper let through (`.`, `~`, `!`, ...) is invalid.
pub fn valid_header_name(name: &str, underscores: bool) -> bool {
    // One table look-up per byte (every request's every name passes here).
    let bad = if underscores {
        NAME_BAD
    } else {
        NAME_BAD | NAME_US
    };
    !name.is_empty() && name.bytes().all(|b| NAME_BYTE[usize::from(b)] & bad == 0)
}

/// [`NAME_BYTE`]: a byte no name has.
const NAME_BAD: u8 = 1;
/// [`NAME_BYTE`]: `_`, in a name only with `underscores_in_headers on`.
const NAME_US: u8 = 2;

/// What each byte is in a header name, for [`valid_header_name`].
const NAME_BYTE: [u8; 256] = {
    let mut t = [NAME_BAD; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' {
            t[b] = 0;
        } else if c == b'_' {
            t[b] = NAME_US;
        }
        b += 1;
    }
    t
};

/// Request fields nginx takes once (`ngx_http_process_unique_header_line`): two of one
/// are refused with 400 (two lengths or codings are how requests are smuggled).
const UNIQUE: &[header::HeaderName] = &[
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::IF_RANGE,
    header::TRANSFER_ENCODING,
    header::EXPECT,
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
];

/// The first unique field sent twice: its name as nginx writes it, and the two values.
/// A head where no name repeats (nearly every request) is answered without a lookup.
pub fn duplicate_unique(h: &HeaderMap) -> Option<(String, String, String)> {
    if h.len() == h.keys_len() {
        return None;
    }
    UNIQUE.iter().find_map(|name| {
        let mut all = h.get_all(name).iter();
        let (first, second) = (all.next()?, all.next()?);
        let shown = name
            .as_str()
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next().map_or(String::new(), |f| {
                    f.to_ascii_uppercase().to_string() + c.as_str()
                })
            })
            .collect::<Vec<_>>()
            .join("-");
        let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        Some((shown, text(first), text(second)))
    })
}

/// Header fields that are HTTP/1.1 connection matters and make an HTTP/2 or HTTP/3 message
/// malformed (RFC 9113 §8.2.2, RFC 9114 §4.2; nginx answers 400 to each over HTTP/2): not
/// taken in requests, not sent in responses, nor to an HTTP/2 upstream. `te` is one too
/// unless it says `trailers` ([`connection_specific`]).
pub const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Whether `name` (lower case) is one of [`CONNECTION_SPECIFIC`].
pub fn connection_specific_name(name: &[u8]) -> bool {
    CONNECTION_SPECIFIC.iter().any(|n| n.as_bytes() == name)
}

/// Whether a request field `name: value` (name in lower case) makes an HTTP/2 or HTTP/3
/// request malformed: a [`CONNECTION_SPECIFIC`] field, or `te` other than `trailers`.
pub fn connection_specific(name: &[u8], value: &[u8]) -> bool {
    connection_specific_name(name) || (name == b"te" && !value.eq_ignore_ascii_case(b"trailers"))
}

/// A `content-length` value: ASCII digits only, no sign, no space, no list; None when it is
/// not one (nginx's `ngx_atoof` refuses the same: "client sent invalid Content-Length").
pub fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Why nginx refuses an HTTP/1.x request's framing (request smuggling's ground), before any
/// location: `Content-Length` beside `Transfer-Encoding`, or
/// `Transfer-Encoding` twice (nginx's unique header); None when it is sound.
pub fn framing_refusal(h: &HeaderMap) -> Option<String> {
    let mut te = h.get_all(header::TRANSFER_ENCODING).iter();
    let first = te.next()?;
    if let Some(second) = te.next() {
        return Some(format!(
            "client sent duplicate header line: \"Transfer-Encoding: {}\", previous value: \"Transfer-Encoding: {}\"",
            String::from_utf8_lossy(second.as_bytes()),
            String::from_utf8_lossy(first.as_bytes())
        ));
    }
    h.contains_key(header::CONTENT_LENGTH).then(|| {
        "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time"
            .to_string()
    })
}

/// Why an HTTP/2 or HTTP/3 head is malformed (a stream error: RFC 9113 §8.1.1, RFC 9114
/// §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// A [`connection_specific`] field.
    ConnectionSpecific,
    /// A `content-length` that is no length, or two that differ.
    ContentLength,
}

/// The first field of `headers` an HTTP/2 or HTTP/3 request must not carry.
pub fn refused_field(headers: &HeaderMap) -> Option<Malformed> {
    headers
        .iter()
        .any(|(n, v)| connection_specific(n.as_str().as_bytes(), v.as_bytes()))
        .then_some(Malformed::ConnectionSpecific)
}

/// The length an HTTP/2 or HTTP/3 head declares: every `content-length` a valid length, and
/// the same one (RFC 9110 §8.6 allows repeats of one value; a second line is still nginx's
/// 400 "duplicate header line", the pipeline's).
pub fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, Malformed> {
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        let l = content_length(v.as_bytes()).ok_or(Malformed::ContentLength)?;
        if length.is_some_and(|prev| prev != l) {
            return Err(Malformed::ContentLength);
        }
        length = Some(l);
    }
    Ok(length)
}

/// A request body that did not add up to its `content-length` (more DATA than declared, or
/// the stream ended short): the request is malformed, answered 400 when the service reads
/// the body, else a stream error; its body never reaches an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthMismatch;

impl std::fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body length not equal to content-length")
    }
}

impl std::error::Error for LengthMismatch {}

/// The DATA of an HTTP/2 or HTTP/3 request counted against its declared length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLength {
    declared: Option<u64>,
    received: u64,
}

impl BodyLength {
    /// A body of `declared` bytes (None: any length).
    pub fn new(declared: Option<u64>) -> Self {
        BodyLength {
            declared,
            received: 0,
        }
    }

    /// `n` more bytes arrived: Err once they pass the declared length.
    pub fn feed(&mut self, n: usize) -> Result<(), LengthMismatch> {
        self.received = self.received.saturating_add(n as u64);
        match self.declared {
            Some(d) if self.received > d => Err(LengthMismatch),
            _ => Ok(()),
        }
    }

    /// The body ended: Err when it is short of the declared length.
    pub fn end(&self) -> Result<(), LengthMismatch> {
        match self.declared {
            Some(d) if self.received != d => Err(LengthMismatch),
            _ => Ok(()),
        }
    }

    /// The declared length.
    pub fn declared(&self) -> Option<u64> {
        self.declared
    }

    /// Bytes still due (None: no length declared).
    pub fn left(&self) -> Option<u64> {
        self.declared.map(|d| d.saturating_sub(self.received))
    }
}

/// What the front end knows of a request's body when the head is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKnown {
    /// None follows: END_STREAM on the head, a stream read to its end, no framing on
    /// HTTP/1.1, or a declared length of 0.
    Empty,
    /// A declared length of this many bytes (more than 0).
    Length(u64),
    /// A body may follow (chunked on HTTP/1.1, DATA without a length on HTTP/2 and HTTP/3).
    Unknown,
}

impl BodyKnown {
    /// From a body's own hints (hyper's `Incoming`, the HTTP/2 and HTTP/3 bodies): ended,
    /// or its exact size.
    pub fn of<B: http_body::Body>(body: &B) -> Self {
        if body.is_end_stream() {
            return BodyKnown::Empty;
        }
        match body.size_hint().exact() {
            Some(0) => BodyKnown::Empty,
            Some(n) => BodyKnown::Length(n),
            None => BodyKnown::Unknown,
        }
    }
}

/// Whether a request that came in TLS early data may be answered (RFC 8470): GET or HEAD
/// with a body known to be empty. Anything else gets 425 Too Early.
pub fn replay_safe(method: &Method, body: BodyKnown) -> bool {
    (*method == Method::GET || *method == Method::HEAD) && body == BodyKnown::Empty
}

/// Why a request's host is refused (400), in nginx's words for the error log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRefusal {
    /// Two `Host` fields.
    Duplicate,
    /// `:authority` and `Host` differ (HTTP/2, HTTP/3).
    Differ,
    /// HTTP/1.1 without `Host`.
    MissingHttp11,
    /// HTTP/2 or HTTP/3 with neither `:authority` nor `Host`.
    Neither,
    /// Not a host name (nginx's `ngx_http_validate_host`), or not UTF-8.
    Invalid,
}

impl HostRefusal {
    /// The error log's words.
    pub fn reason(self) -> &'static str {
        match self {
            HostRefusal::Duplicate => "client sent duplicate host header",
            HostRefusal::Differ => {
                "client sent \":authority\" and \"Host\" headers with different values"
            }
            HostRefusal::MissingHttp11 => "client sent HTTP/1.1 request without \"Host\" header",
            HostRefusal::Neither => "client sent neither \":authority\" nor \"Host\" header",
            HostRefusal::Invalid => "client sent invalid host header",
        }
    }
}

/// A request's host as its front end gives it.
#[derive(Debug, Clone, Copy)]
pub struct HostInput<'a> {
    /// The protocol the request came over.
    pub version: Version,
    /// The request target's authority: HTTP/1.x's absolute form, HTTP/2's `:authority`,
    /// HTTP/3's `:authority` (or its `Host`, which h3 puts there).
    pub authority: Option<&'a str>,
    /// The request's fields (its `Host` lines).
    pub headers: &'a HeaderMap,
    /// The front end found a host field that can be no host (HTTP/2's decoder: an
    /// `:authority` that is no URI authority, a `host` value with a control character).
    pub invalid_field: bool,
}

/// A request's host, once accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host<'a> {
    /// Normalized (lower case, no port or trailing dot); empty when the request named none
    /// (HTTP/1.0 without `Host`): the address's default server then.
    pub name: Cow<'a, str>,
    /// As the request wrote it (for `$request_port`).
    pub raw: Option<&'a str>,
}

/// Decides a request's host: the target's authority first, else `Host`; nginx's refusals
/// for two `Host` fields, `:authority` and `Host` that differ, HTTP/1.1 without a host,
/// HTTP/2 or HTTP/3 with neither, and a host `normalize_host` refuses.
pub fn host(input: HostInput<'_>) -> Result<Host<'_>, HostRefusal> {
    let mut hosts = input.headers.get_all(header::HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(HostRefusal::Duplicate);
    }
    if input.invalid_field {
        return Err(HostRefusal::Invalid);
    }
    let header = match first {
        Some(h) => Some(std::str::from_utf8(h.as_bytes()).map_err(|_| HostRefusal::Invalid)?),
        None => None,
    };
    let framed = matches!(input.version, Version::HTTP_2 | Version::HTTP_3);
    match (input.authority, header) {
        (Some(a), Some(h)) if framed && a != h => return Err(HostRefusal::Differ),
        (Some(a), _) if !framed && !crate::conf::vhosts::absolute_form_host_ok(a) => {
            return Err(HostRefusal::Invalid)
        }
        (None, None) if framed => return Err(HostRefusal::Neither),
        // nginx wants the `Host` field of every HTTP/1.1 request, an absolute-form target's
        // authority notwithstanding ("client sent HTTP/1.1 request without \"Host\" header").
        (_, None) if input.version == Version::HTTP_11 => return Err(HostRefusal::MissingHttp11),
        _ => {}
    }
    let raw = input.authority.or(header);
    let name = match raw {
        Some(r) => crate::conf::vhosts::normalize_host(r).map_err(|_| HostRefusal::Invalid)?,
        None => Cow::Borrowed(""),
    };
    Ok(Host { name, raw })
}

/// HTTP/2 and HTTP/3: a request that named its host only in `:authority` gets it as its
/// `Host` header too (nginx's HTTP/2, "compatibility for $http_host"; firstbyte does the
/// same over HTTP/3), so `$http_host`, an `if` on it and `proxy_set_header Host $http_host`
/// see the host the request names. A request with a `Host` keeps it.
pub fn authority_as_host(headers: &mut HeaderMap, authority: HeaderValue) {
    if !headers.contains_key(header::HOST) {
        headers.insert(header::HOST, authority);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_nginx_tokens() {
        for m in ["GET", "DELETE", "PROPFIND", "VERSION-CONTROL", "X_Y"] {
            assert!(method_token(m.as_bytes()), "{m}");
        }
        for m in ["delete", "Get", "GET1", "G.T", "", "GE T", "GÉT"] {
            assert!(!method_token(m.as_bytes()), "{m}");
        }
    }

    #[test]
    fn trace_and_connect_are_refused_before_any_location() {
        let v11 = Version::HTTP_11;
        assert_eq!(method_refusal(&Method::TRACE, v11, None), Some(405));
        assert_eq!(method_refusal(&Method::CONNECT, v11, Some(443)), Some(405));
        assert_eq!(method_refusal(&Method::CONNECT, v11, None), Some(400));
        for v in [Version::HTTP_2, Version::HTTP_3] {
            assert_eq!(method_refusal(&Method::CONNECT, v, None), Some(405));
            assert_eq!(method_refusal(&Method::TRACE, v, None), Some(405));
        }
        assert_eq!(method_refusal(&Method::GET, v11, None), None);
    }

    #[test]
    fn unique_request_fields_once() {
        let mut h = HeaderMap::new();
        h.append("content-length", http::HeaderValue::from_static("0"));
        h.append("cookie", http::HeaderValue::from_static("a"));
        h.append("cookie", http::HeaderValue::from_static("b"));
        assert_eq!(duplicate_unique(&h), None, "repeatable fields pass");
        h.append("content-length", http::HeaderValue::from_static("0"));
        assert_eq!(
            duplicate_unique(&h),
            Some(("Content-Length".into(), "0".into(), "0".into()))
        );
    }

    #[test]
    fn header_names_as_nginx_validates_them() {
        assert!(valid_header_name("x-real-ip", false));
        assert!(!valid_header_name("x_real_ip", false));
        assert!(valid_header_name("x_real_ip", true));
        assert!(!valid_header_name("x.real", true));
        assert!(!valid_header_name("x~y", true));
        assert!(!valid_header_name("", true));
        // The table against the rule, byte by byte.
        for b in 0..=255u8 {
            let name = format!("a{}", b as char);
            let rule = |us: bool| b.is_ascii_alphanumeric() || b == b'-' || (b == b'_' && us);
            if b.is_ascii() {
                assert_eq!(valid_header_name(&name, false), rule(false), "{b}");
                assert_eq!(valid_header_name(&name, true), rule(true), "{b}");
            } else {
                // Any byte past ASCII (here in a two-byte character) is invalid.
                assert!(!valid_header_name(&name, true), "{b}");
            }
        }
        assert!(!valid_header_name("", true));
    }

    #[test]
    fn connection_specific_fields_and_te() {
        for n in CONNECTION_SPECIFIC {
            assert!(connection_specific(n.as_bytes(), b"x"), "{n}");
        }
        assert!(connection_specific(b"te", b"gzip"));
        assert!(!connection_specific(b"te", b"trailers"));
        assert!(!connection_specific(b"te", b"Trailers"));
        assert!(!connection_specific(b"accept", b"*/*"));
        let mut h = HeaderMap::new();
        h.insert("accept", HeaderValue::from_static("*/*"));
        h.insert("te", HeaderValue::from_static("trailers"));
        assert_eq!(refused_field(&h), None);
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        assert_eq!(refused_field(&h), Some(Malformed::ConnectionSpecific));
        let mut h = HeaderMap::new();
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        assert_eq!(refused_field(&h), Some(Malformed::ConnectionSpecific));
    }

    #[test]
    fn framing_nginx_refuses() {
        let mut h = HeaderMap::new();
        assert_eq!(framing_refusal(&h), None);
        h.insert(header::CONTENT_LENGTH, "5".parse().expect("value"));
        assert_eq!(framing_refusal(&h), None);
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().expect("value"));
        assert!(framing_refusal(&h).is_some_and(|w| w.contains("at the same time")));
        h.remove(header::CONTENT_LENGTH);
        assert_eq!(framing_refusal(&h), None);
        h.append(header::TRANSFER_ENCODING, "chunked".parse().expect("value"));
        assert!(framing_refusal(&h).is_some_and(|w| w.contains("duplicate header line")));
    }

    #[test]
    fn content_lengths_are_digits_and_one_value() {
        assert_eq!(content_length(b"0"), Some(0));
        assert_eq!(content_length(b"0012"), Some(12));
        assert_eq!(content_length(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1,1",
            b"0x10",
            b"18446744073709551616",
        ] {
            assert_eq!(content_length(bad), None, "{bad:?}");
        }
        let mut h = HeaderMap::new();
        assert_eq!(declared_length(&h), Ok(None));
        h.append("content-length", HeaderValue::from_static("5"));
        assert_eq!(declared_length(&h), Ok(Some(5)));
        h.append("content-length", HeaderValue::from_static("5"));
        assert_eq!(declared_length(&h), Ok(Some(5)));
        h.append("content-length", HeaderValue::from_static("6"));
        assert_eq!(declared_length(&h), Err(Malformed::ContentLength));
        let mut h = HeaderMap::new();
        h.append("content-length", HeaderValue::from_static("5x"));
        assert_eq!(declared_length(&h), Err(Malformed::ContentLength));
    }

    #[test]
    fn body_length_counts_against_the_declared_one() {
        let mut l = BodyLength::new(Some(5));
        assert_eq!(l.feed(3), Ok(()));
        assert_eq!(l.left(), Some(2));
        assert_eq!(l.end(), Err(LengthMismatch), "short");
        assert_eq!(l.feed(2), Ok(()));
        assert_eq!(l.end(), Ok(()));
        assert_eq!(l.feed(1), Err(LengthMismatch), "past it");
        // 40 bytes of DATA against a declared 5, in one frame.
        assert_eq!(BodyLength::new(Some(5)).feed(40), Err(LengthMismatch));
        // Nothing declared: any length; a declared 0 takes no byte.
        let mut any = BodyLength::new(None);
        assert_eq!(any.feed(usize::MAX), Ok(()));
        assert_eq!(any.feed(usize::MAX), Ok(()));
        assert_eq!(any.end(), Ok(()));
        assert_eq!(any.left(), None);
        let mut zero = BodyLength::new(Some(0));
        assert_eq!(zero.end(), Ok(()));
        assert_eq!(zero.feed(0), Ok(()));
        assert_eq!(zero.feed(1), Err(LengthMismatch));
    }

    /// A body that says what it is.
    struct Hint(bool, Option<u64>);

    impl http_body::Body for Hint {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
            std::task::Poll::Ready(None)
        }
        fn is_end_stream(&self) -> bool {
            self.0
        }
        fn size_hint(&self) -> http_body::SizeHint {
            self.1.map_or_else(
                http_body::SizeHint::default,
                http_body::SizeHint::with_exact,
            )
        }
    }

    #[test]
    fn early_data_serves_only_bodiless_get_and_head() {
        // Each front end's input: END_STREAM on the head (or no framing), a length, DATA
        // that may follow.
        assert_eq!(BodyKnown::of(&Hint(true, None)), BodyKnown::Empty);
        assert_eq!(BodyKnown::of(&Hint(false, Some(0))), BodyKnown::Empty);
        assert_eq!(BodyKnown::of(&Hint(false, Some(17))), BodyKnown::Length(17));
        assert_eq!(BodyKnown::of(&Hint(false, None)), BodyKnown::Unknown);
        assert!(replay_safe(&Method::GET, BodyKnown::Empty));
        assert!(replay_safe(&Method::HEAD, BodyKnown::Empty));
        assert!(
            !replay_safe(&Method::GET, BodyKnown::Unknown),
            "DATA may follow"
        );
        assert!(!replay_safe(&Method::GET, BodyKnown::Length(17)));
        assert!(!replay_safe(&Method::POST, BodyKnown::Empty));
        assert!(!replay_safe(&Method::OPTIONS, BodyKnown::Empty));
    }

    fn decide(
        version: Version,
        authority: Option<&str>,
        hosts: &[&[u8]],
        invalid: bool,
    ) -> Result<(String, Option<String>), HostRefusal> {
        let mut h = HeaderMap::new();
        for v in hosts {
            h.append(header::HOST, HeaderValue::from_bytes(v).unwrap());
        }
        host(HostInput {
            version,
            authority,
            headers: &h,
            invalid_field: invalid,
        })
        .map(|h| (h.name.into_owned(), h.raw.map(str::to_string)))
    }

    #[test]
    fn hosts_as_nginx_decides_them() {
        use HostRefusal::*;
        let (v10, v11, v2, v3) = (
            Version::HTTP_10,
            Version::HTTP_11,
            Version::HTTP_2,
            Version::HTTP_3,
        );
        let ok = |n: &str, raw: &str| Ok((n.to_string(), Some(raw.to_string())));
        assert_eq!(
            decide(v11, None, &[b"A.test:8443"], false),
            ok("a.test", "A.test:8443")
        );
        assert_eq!(decide(v11, None, &[], false), Err(MissingHttp11));
        assert_eq!(decide(v10, None, &[], false), Ok((String::new(), None)));
        assert_eq!(decide(v11, None, &[b"a", b"b"], false), Err(Duplicate));
        assert_eq!(decide(v2, Some("a"), &[b"a", b"a"], false), Err(Duplicate));
        assert_eq!(decide(v11, None, &[b"a..b"], false), Err(Invalid));
        assert_eq!(decide(v11, None, &[b"\xff"], false), Err(Invalid));
        // HTTP/1.1's absolute form wins over Host (RFC 9112 §3.2.2), checked as nginx's
        // request line parser does.
        assert_eq!(
            decide(v11, Some("b.test"), &[b"a.test"], false),
            ok("b.test", "b.test")
        );
        assert_eq!(
            decide(v11, Some("b/test"), &[b"a.test"], false),
            Err(Invalid)
        );
        for v in [v2, v3] {
            assert_eq!(
                decide(v, Some("a.test"), &[], false),
                ok("a.test", "a.test")
            );
            assert_eq!(decide(v, None, &[b"a.test"], false), ok("a.test", "a.test"));
            assert_eq!(
                decide(v, Some("a.test"), &[b"a.test"], false),
                ok("a.test", "a.test")
            );
            assert_eq!(decide(v, Some("a.test"), &[b"b.test"], false), Err(Differ));
            assert_eq!(decide(v, None, &[], false), Err(Neither));
            assert_eq!(decide(v, None, &[], true), Err(Invalid));
        }
        assert!(Differ.reason().contains("different values"));
    }

    #[test]
    fn authority_becomes_the_host_header_only_without_one() {
        let mut h = HeaderMap::new();
        authority_as_host(&mut h, HeaderValue::from_static("a.test"));
        assert_eq!(h["host"], "a.test");
        authority_as_host(&mut h, HeaderValue::from_static("b.test"));
        assert_eq!(h.get_all("host").iter().count(), 1);
        assert_eq!(h["host"], "a.test");
    }
}
