//! `proxy_force_ranges on`: nginx's range filter on a proxied response that did not come from
//! the cache (the cache serves its own ranges), whether or not the upstream sent
//! `Accept-Ranges`.
//!
//! As `ngx_http_range_header_filter` with `single_range` set (nginx's rule for an upstream's
//! answer): a 200 with a known length; `max_ranges 0` turns it off; a `Range` that does not
//! start `bytes=` is ignored; `If-Range` is an entity tag (it ends in `"`) compared exactly
//! with the response's `ETag`, or a date equal to its `Last-Modified`; one range gives a 206
//! of that part, several the whole response, none satisfiable a 416. A response left whole
//! says `Accept-Ranges: bytes`, in place of the upstream's own.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use super::Req;
use crate::conf::model::LocationConf;
use crate::http::body::Body;
use crate::http::range::{parse, ByteRange};

/// The response after the range filter, for `r` in `loc`.
pub(super) fn force(r: &Req<'_>, loc: &LocationConf, mut resp: Response<Body>) -> Response<Body> {
    // The upstream's own is not passed: the filter says it when it applies.
    resp.headers_mut().remove(header::ACCEPT_RANGES);
    if resp.status() != StatusCode::OK
        || r.version == http::Version::HTTP_09
        || loc.max_ranges == Some(0)
    {
        return resp;
    }
    let Some(len) = resp
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return resp;
    };
    let range = r
        .headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() >= 7 && v.as_bytes()[..6].eq_ignore_ascii_case(b"bytes="));
    let asked = match range {
        Some(v) if if_range_holds(r.headers, resp.headers()) => parse(v, len, Some(1)),
        _ => ByteRange::Full,
    };
    match asked {
        ByteRange::Part { start, end } => {
            let h = resp.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
            *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
            let body = std::mem::take(resp.body_mut());
            let part = crate::http::cache::Slice::new(body, start, end);
            *resp.body_mut() = Body::Stream(part.boxed_unsync());
            resp
        }
        ByteRange::Unsatisfiable => {
            let mut out = Response::new(Body::Empty);
            *out.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                out.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            out.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
            out
        }
        ByteRange::Full | ByteRange::Multi(_) => {
            resp.headers_mut()
                .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            resp
        }
    }
}

/// nginx's `If-Range` test: absent, or an entity tag (ends in `"`) equal byte for byte to
/// the response's `ETag`, or a date equal to its `Last-Modified`.
fn if_range_holds(req: &HeaderMap, resp: &HeaderMap) -> bool {
    let Some(v) = req.get(header::IF_RANGE) else {
        return true;
    };
    let v = v.as_bytes();
    if v.len() >= 2 && v.ends_with(b"\"") {
        return resp.get(header::ETAG).is_some_and(|e| e.as_bytes() == v);
    }
    let date = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| httpdate::parse_http_date(s.trim()).ok())
    };
    match (
        date(v),
        resp.get(header::LAST_MODIFIED)
            .and_then(|m| date(m.as_bytes())),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert(*n, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn if_range_is_an_exact_tag_or_the_same_date() {
        let resp = map(&[
            ("etag", "\"59a5401c-8\""),
            ("last-modified", "Mon, 28 Sep 1970 06:00:00 GMT"),
        ]);
        assert!(if_range_holds(&map(&[]), &resp));
        assert!(if_range_holds(
            &map(&[("if-range", "\"59a5401c-8\"")]),
            &resp
        ));
        assert!(!if_range_holds(
            &map(&[("if-range", "W/\"59a5401c-8\"")]),
            &resp
        ));
        assert!(!if_range_holds(&map(&[("if-range", "\"other\"")]), &resp));
        let same = map(&[("if-range", "Mon, 28 Sep 1970 06:00:00 GMT")]);
        assert!(if_range_holds(&same, &resp));
        let later = map(&[("if-range", "Mon, 28 Sep 1970 06:00:01 GMT")]);
        assert!(!if_range_holds(&later, &resp));
        // No `Last-Modified` to compare a date with: the whole response.
        assert!(!if_range_holds(&same, &map(&[("etag", "\"x\"")])));
        assert!(!if_range_holds(&map(&[("if-range", "junk")]), &resp));
    }
}
