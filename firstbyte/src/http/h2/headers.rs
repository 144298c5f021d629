//! Header blocks: a request's HPACK block decoded (`hpack`) and checked against RFC 9113
//! §8.2–8.3 into an `http::request::Parts`, and a response head encoded.
//!
//! The decoder hands each field to a callback; the decoded size (RFC 9113 §6.5.2: name +
//! value + 32 per field) is summed there, and past the limit fields are no longer kept (the
//! block is still decoded to its end: the dynamic table must stay in step with the client's).
//!
//! The encoder is simple: `:status` from the static table where it is there, names from the
//! static table, values as literals "without indexing" and without Huffman coding. It never
//! adds to the dynamic table, so the client's table size setting never matters.

use std::ops::Range;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri};

use super::hpack::Decoder;
use crate::http::contract;

/// Why a request's header block was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// The block does not decode: a connection error COMPRESSION_ERROR (RFC 9113 §4.3).
    Compression,
    /// A malformed request (RFC 9113 §8.1.1): a stream error PROTOCOL_ERROR.
    Malformed,
    /// Over the header list limit: answered 431.
    TooLarge,
}

/// Marks (in a request's extensions) an `:authority` or `host` value that cannot be a host
/// (no URI authority, a control character): the pipeline answers 400 through the server's
/// `error_page 400`, as nginx does for an invalid `:authority` or `Host`, rather than the
/// stream error a malformed request gets.
#[derive(Debug, Clone, Copy)]
pub struct InvalidHostField;

/// A decoded request head.
#[derive(Debug)]
pub struct RequestHead {
    pub parts: http::request::Parts,
    /// The `content-length` the request declares.
    pub content_length: Option<u64>,
    /// The size of the header block as received (HEADERS and CONTINUATION fragments, without
    /// padding or priority), for `$request_length` as nginx counts it over HTTP/2.
    pub head_length: u64,
}

/// Where each pseudo-header's value sits in [`Gather::buf`].
#[derive(Default)]
struct Pseudo {
    method: Option<Range<usize>>,
    scheme: Option<Range<usize>>,
    authority: Option<Range<usize>>,
    path: Option<Range<usize>>,
}

/// The capacity [`Gather::buf`] starts with: room for a browser's request (Chromium's
/// thirteen fields and a 300-byte cookie decode to ~900 bytes) without regrowth. A block of
/// indexed fields is far shorter than what it decodes to, so the block's length is no guide.
const BUF_START: usize = 1024;

/// What the callback gathers. Every value (pseudo-headers, fields, the joined cookie) is
/// copied once, into `buf`; the header map is built at the end, its values slices of `buf`
/// frozen (one allocation per request for all values, not one per value), its names from
/// the worker's table of names seen ([`super::names`]).
#[derive(Default)]
struct Gather {
    pseudo: Pseudo,
    buf: Vec<u8>,
    fields: Vec<(HeaderName, Range<usize>)>,
    /// The first `cookie` crumb, and any more (joined at the end, RFC 9113 §8.2.3).
    cookie: Option<Range<usize>>,
    more_cookies: Vec<Range<usize>>,
    content_length: Option<u64>,
    size: usize,
    too_large: bool,
    malformed: bool,
    regular_seen: bool,
}

/// A gathered block, its values checked.
struct Gathered {
    pseudo: Pseudo,
    buf: Bytes,
    headers: HeaderMap,
    content_length: Option<u64>,
    /// A `host` value that is no header value (a control character).
    bad_host: bool,
}

impl Gather {
    fn field(&mut self, name: &[u8], value: &[u8], trailers: bool, max: usize) {
        self.size += name.len() + value.len() + 32;
        if self.size > max {
            self.too_large = true;
        }
        if self.too_large || self.malformed {
            return;
        }
        if let Some(p) = name.strip_prefix(b":") {
            if trailers || self.regular_seen {
                self.malformed = true;
                return;
            }
            let slot = match p {
                b"method" => &mut self.pseudo.method,
                b"scheme" => &mut self.pseudo.scheme,
                b"authority" => &mut self.pseudo.authority,
                b"path" => &mut self.pseudo.path,
                _ => {
                    self.malformed = true;
                    return;
                }
            };
            if slot.is_some() {
                self.malformed = true;
                return;
            }
            let start = self.buf.len();
            self.buf.extend_from_slice(value);
            *slot = Some(start..self.buf.len());
            return;
        }
        self.regular_seen = true;
        if contract::connection_specific(name, value) {
            self.malformed = true;
            return;
        }
        // Uppercase or otherwise invalid names are malformed (RFC 9113 §8.2.1).
        let Some(n) = super::names::lowercase(name) else {
            self.malformed = true;
            return;
        };
        if n == http::header::CONTENT_LENGTH {
            match (contract::content_length(value), self.content_length) {
                (Some(l), None) => self.content_length = Some(l),
                (Some(l), Some(prev)) if l == prev => return,
                _ => {
                    self.malformed = true;
                    return;
                }
            }
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(value);
        let r = start..self.buf.len();
        if n == http::header::COOKIE {
            match self.cookie {
                None => self.cookie = Some(r),
                Some(_) => self.more_cookies.push(r),
            }
            return;
        }
        self.fields.push((n, r));
    }

    /// The header map of the fields gathered, in order, the cookie crumbs joined into one
    /// `cookie` after them. A value that is no header value makes the request malformed, but
    /// in `host` (an invalid host, answered 400 later, the field left out).
    fn finish(mut self) -> Result<Gathered, HeadError> {
        if self.too_large {
            return Err(HeadError::TooLarge);
        }
        if self.malformed {
            return Err(HeadError::Malformed);
        }
        let cookie = self.cookie.take().map(|first| {
            if self.more_cookies.is_empty() {
                return first;
            }
            let start = self.buf.len();
            self.buf.extend_from_within(first);
            for r in std::mem::take(&mut self.more_cookies) {
                self.buf.extend_from_slice(b"; ");
                self.buf.extend_from_within(r);
            }
            start..self.buf.len()
        });
        let buf = Bytes::from(self.buf);
        // Room for the `host` the pipeline may add from `:authority`.
        let mut headers = HeaderMap::with_capacity(self.fields.len() + 2);
        let mut bad_host = false;
        for (n, r) in self.fields {
            match HeaderValue::from_maybe_shared(buf.slice(r)) {
                Ok(v) => {
                    headers.append(n, v);
                }
                Err(_) if n == http::header::HOST => bad_host = true,
                Err(_) => return Err(HeadError::Malformed),
            }
        }
        if let Some(r) = cookie {
            let v =
                HeaderValue::from_maybe_shared(buf.slice(r)).map_err(|_| HeadError::Malformed)?;
            headers.insert(http::header::COOKIE, v);
        }
        Ok(Gathered {
            pseudo: self.pseudo,
            buf,
            headers,
            content_length: self.content_length,
            bad_host,
        })
    }
}

/// Decodes a header block with `decoder`, `max` decoded bytes allowed.
fn gather(
    decoder: &mut Decoder,
    block: &[u8],
    trailers: bool,
    max: usize,
) -> Result<Gather, HeadError> {
    let mut g = Gather {
        buf: Vec::with_capacity(BUF_START.max(block.len() * 2)),
        fields: Vec::with_capacity(24),
        ..Gather::default()
    };
    decoder
        .decode(block, |n, v| g.field(n, v, trailers, max))
        .map_err(|_| HeadError::Compression)?;
    Ok(g)
}

/// Decodes and checks a request's header block.
pub fn decode_request(
    decoder: &mut Decoder,
    block: &[u8],
    max: usize,
) -> Result<RequestHead, HeadError> {
    let mut g = gather(decoder, block, false, max)?.finish()?;
    let p = g.pseudo;
    let buf = g.buf;
    // nginx's methods: upper-case letters, `_` and `-` only (a lower-case `get` is no
    // method). Over HTTP/2 such a head is malformed: the stream is reset (PROTOCOL_ERROR)
    // rather than answered 400 as over HTTP/1.1 and HTTP/3.
    let method_bytes = &buf[p.method.ok_or(HeadError::Malformed)?];
    if !contract::method_token(method_bytes) {
        return Err(HeadError::Malformed);
    }
    let method = Method::from_bytes(method_bytes).map_err(|_| HeadError::Malformed)?;
    let mut bad_host = g.bad_host;
    let mut uri = http::uri::Parts::default();
    if method == Method::CONNECT && p.scheme.is_none() && p.path.is_none() {
        // RFC 9113 §8.5: :authority only. (A CONNECT with a :path, as nginx takes it, goes
        // on as any request; the pipeline answers 405 to both.)
        let a = buf.slice(p.authority.ok_or(HeadError::Malformed)?);
        uri.authority =
            Some(http::uri::Authority::from_maybe_shared(a).map_err(|_| HeadError::Malformed)?);
    } else {
        let (Some(scheme), Some(path)) = (p.scheme, p.path) else {
            return Err(HeadError::Malformed);
        };
        if path.is_empty() {
            return Err(HeadError::Malformed);
        }
        if let Some(a) = p.authority {
            // An `:authority` that is no URI authority (empty, a backslash) is an invalid host:
            // 400, not a malformed request.
            match http::uri::Authority::from_maybe_shared(buf.slice(a.clone())) {
                Ok(auth) => {
                    // `:authority` is the request's `Host` when it sent none (the request
                    // contract's; the bytes are shared, not copied).
                    if !g.headers.contains_key(http::header::HOST) {
                        if let Ok(v) = HeaderValue::from_maybe_shared(buf.slice(a)) {
                            contract::authority_as_host(&mut g.headers, v);
                        }
                    }
                    uri.scheme = Some(
                        http::uri::Scheme::try_from(&buf[scheme])
                            .map_err(|_| HeadError::Malformed)?,
                    );
                    uri.authority = Some(auth);
                }
                Err(_) => bad_host = true,
            }
        }
        uri.path_and_query = Some(
            http::uri::PathAndQuery::from_maybe_shared(buf.slice(path))
                .map_err(|_| HeadError::Malformed)?,
        );
    }
    let uri = Uri::from_parts(uri).map_err(|_| HeadError::Malformed)?;
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = http::Version::HTTP_2;
    parts.headers = g.headers;
    if bad_host {
        parts.extensions.insert(InvalidHostField);
    }
    Ok(RequestHead {
        parts,
        content_length: g.content_length,
        head_length: block.len() as u64,
    })
}

/// Decodes and checks a trailer block (no pseudo-headers, RFC 9113 §8.1); the fields are not
/// kept (the service reads request bodies as data only).
pub fn decode_trailers(decoder: &mut Decoder, block: &[u8], max: usize) -> Result<(), HeadError> {
    let mut g = gather(decoder, block, true, max)?;
    if g.malformed {
        return Err(HeadError::Malformed);
    }
    // Fields past the limit are not kept, and not refused: those before it are checked.
    g.too_large = false;
    g.finish().map(|_| ())
}

/// The static table's index of a response header name (RFC 7541 Appendix A).
fn static_name(name: &str) -> Option<usize> {
    Some(match name {
        "accept-ranges" => 18,
        "access-control-allow-origin" => 20,
        "age" => 21,
        "allow" => 22,
        "cache-control" => 24,
        "content-disposition" => 25,
        "content-encoding" => 26,
        "content-language" => 27,
        "content-length" => 28,
        "content-location" => 29,
        "content-range" => 30,
        "content-type" => 31,
        "date" => 33,
        "etag" => 34,
        "expires" => 36,
        "last-modified" => 44,
        "link" => 45,
        "location" => 46,
        "proxy-authenticate" => 48,
        "refresh" => 52,
        "retry-after" => 53,
        "server" => 54,
        "set-cookie" => 55,
        "strict-transport-security" => 56,
        "vary" => 59,
        "via" => 60,
        "www-authenticate" => 61,
        _ => return None,
    })
}

/// An HPACK integer with an `n`-bit prefix, `first` holding the bits above it (RFC 7541 §5.1).
fn put_int(out: &mut Vec<u8>, mut v: usize, n: u32, first: u8) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A string literal without Huffman coding.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, s.len(), 7, 0);
    out.extend_from_slice(s);
}

/// Encodes a response head into `out`: `:status`, then `headers` (without the connection
/// headers HTTP/2 forbids), then `content-length` when given.
/// Encodes a trailer section (no pseudo-header) into `out`, as [`encode_response`] does
/// its fields.
pub fn encode_trailers(out: &mut Vec<u8>, trailers: &HeaderMap) {
    for (name, value) in trailers {
        let n = name.as_str();
        if contract::connection_specific_name(n.as_bytes()) {
            continue;
        }
        match static_name(n) {
            Some(i) => put_int(out, i, 4, 0),
            None => {
                out.push(0);
                put_str(out, n.as_bytes());
            }
        }
        put_str(out, value.as_bytes());
    }
}

pub fn encode_response(
    out: &mut Vec<u8>,
    status: u16,
    headers: &HeaderMap,
    content_length: Option<u64>,
) {
    match status {
        200 => out.push(0x88),
        204 => out.push(0x89),
        206 => out.push(0x8a),
        304 => out.push(0x8b),
        400 => out.push(0x8c),
        404 => out.push(0x8d),
        500 => out.push(0x8e),
        s => {
            // Literal without indexing, name :status (index 8).
            out.push(0x08);
            let digits = [
                b'0' + (s / 100 % 10) as u8,
                b'0' + (s / 10 % 10) as u8,
                b'0' + (s % 10) as u8,
            ];
            put_str(out, &digits);
        }
    }
    for (name, value) in headers {
        let n = name.as_str();
        if contract::connection_specific_name(n.as_bytes()) {
            continue;
        }
        match static_name(n) {
            Some(i) => put_int(out, i, 4, 0),
            None => {
                out.push(0);
                put_str(out, n.as_bytes());
            }
        }
        put_str(out, value.as_bytes());
    }
    if let Some(l) = content_length {
        put_int(out, 28, 4, 0);
        let mut digits = [0u8; 20];
        put_str(out, decimal(l, &mut digits));
    }
}

/// `v` in decimal, written at the end of `buf`.
fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut e = loona_hpack::Encoder::new();
        e.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    fn decode(fields: &[(&str, &str)]) -> Result<RequestHead, HeadError> {
        decode_request(&mut Decoder::new(4096), &block(fields), 32 * 1024)
    }

    const BASE: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "a.test"),
        (":path", "/x?y"),
    ];

    #[test]
    fn a_request_decodes_with_cookies_joined() {
        let mut f = BASE.to_vec();
        f.extend([("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")]);
        let h = decode(&f).expect("request");
        assert_eq!(h.parts.method, Method::GET);
        assert_eq!(h.parts.uri.authority().unwrap().as_str(), "a.test");
        assert_eq!(h.parts.uri.path_and_query().unwrap().as_str(), "/x?y");
        assert_eq!(h.parts.headers["cookie"], "a=1; b=2");
        assert_eq!(h.parts.version, http::Version::HTTP_2);
        // No :authority: the Host header decides later.
        let h = decode(&[(":method", "GET"), (":scheme", "https"), (":path", "/")]).unwrap();
        assert!(h.parts.uri.authority().is_none());
        assert!(h.parts.headers.get("host").is_none());
    }

    #[test]
    fn authority_is_the_host_header_when_none_came() {
        let h = decode(&BASE).expect("request");
        assert_eq!(h.parts.headers.get_all("host").iter().count(), 1);
        assert_eq!(h.parts.headers["host"], "a.test");
        // A Host of the request's own stays (the pipeline compares the two).
        let mut f = BASE.to_vec();
        f.push(("host", "b.test"));
        let h = decode(&f).expect("request");
        assert_eq!(h.parts.headers.get_all("host").iter().count(), 1);
        assert_eq!(h.parts.headers["host"], "b.test");
        // An :authority that is no authority is no Host either: the request is marked.
        let mut f = BASE.to_vec();
        f[2] = (":authority", "a b");
        let h = decode(&f).expect("request");
        assert!(h.parts.headers.get("host").is_none());
        assert!(h.parts.extensions.get::<InvalidHostField>().is_some());
    }

    #[test]
    fn methods_are_nginx_tokens() {
        let mut f = BASE.to_vec();
        f[0] = (":method", "delete");
        assert_eq!(decode(&f).err(), Some(HeadError::Malformed));
        f[0] = (":method", "DELETE");
        assert!(decode(&f).is_ok());
    }

    #[test]
    fn malformed_requests_are_refused() {
        let with = |extra: &[(&str, &str)]| {
            let mut f = BASE.to_vec();
            f.extend_from_slice(extra);
            decode(&f).err()
        };
        let m = Some(HeadError::Malformed);
        assert_eq!(with(&[("Accept", "x")]), m, "uppercase name");
        assert_eq!(with(&[("connection", "close")]), m);
        assert_eq!(with(&[("te", "gzip")]), m);
        assert_eq!(with(&[("te", "trailers")]), None);
        assert_eq!(with(&[(":path", "/again")]), m, "duplicate pseudo");
        assert_eq!(with(&[("accept", "x"), (":foo", "1")]), m);
        assert_eq!(with(&[(":status", "200")]), m);
        assert_eq!(with(&[("content-length", "1x")]), m);
        assert_eq!(with(&[("content-length", "3"), ("content-length", "4")]), m);
        assert_eq!(with(&[("x", "a\nb")]), m);
        assert_eq!(
            decode(&[(":method", "GET"), (":scheme", "https"), (":path", "")]).err(),
            m
        );
        assert_eq!(decode(&[(":method", "GET"), (":path", "/")]).err(), m);
        assert_eq!(decode(&[(":scheme", "https"), (":path", "/")]).err(), m);
        let h = decode(&[("accept", "x"), (":method", "GET")]);
        assert_eq!(h.err(), m, "pseudo after regular");
        let cl = with(&[("content-length", "12")]);
        assert_eq!(cl, None);
    }

    #[test]
    fn size_is_bounded_and_compression_errors_are_told_apart() {
        let mut f = BASE.to_vec();
        let big = "v".repeat(2000);
        f.push(("x-big", &big));
        let b = block(&f);
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode_request(&mut d, &b, 1024).err(),
            Some(HeadError::TooLarge)
        );
        assert!(decode_request(&mut d, &b, 4096).is_ok());
        // Index 0 and an index past both tables.
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode_request(&mut d, &[0x80], 4096).err(),
            Some(HeadError::Compression)
        );
        assert_eq!(
            decode_request(&mut d, &[0xff, 0x7f], 4096).err(),
            Some(HeadError::Compression)
        );
        // A table size update at the end of a block.
        assert_eq!(
            decode_request(&mut d, &[0x82, 0x20], 4096).err(),
            Some(HeadError::Compression)
        );
    }

    #[test]
    fn trailers_have_no_pseudo_headers() {
        let mut d = Decoder::new(4096);
        assert!(decode_trailers(&mut d, &block(&[("x-sum", "1")]), 4096).is_ok());
        assert_eq!(
            decode_trailers(&mut d, &block(&[(":method", "GET")]), 4096),
            Err(HeadError::Malformed)
        );
    }

    #[test]
    fn responses_encode_and_decode_back() {
        let mut h = HeaderMap::new();
        h.insert("server", HeaderValue::from_static("firstbyte"));
        h.insert("x-long-name-here", HeaderValue::from_static("v"));
        h.insert("connection", HeaderValue::from_static("close"));
        h.insert("content-type", HeaderValue::from_static("text/html"));
        for status in [200u16, 301, 404, 431] {
            let mut out = Vec::new();
            encode_response(&mut out, status, &h, Some(1234567));
            let got = loona_hpack::Decoder::new().decode(&out).expect("decodes");
            let got: Vec<(String, String)> = got
                .into_iter()
                .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
                .collect();
            let st = status.to_string();
            let want = [
                (":status", st.as_str()),
                ("server", "firstbyte"),
                ("x-long-name-here", "v"),
                ("content-type", "text/html"),
                ("content-length", "1234567"),
            ];
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, want);
        }
        // Integers past their prefix.
        let mut out = Vec::new();
        put_int(&mut out, 1337, 5, 0);
        assert_eq!(out, [31, 154, 10]);
    }
}
