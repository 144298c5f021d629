//! nginx's charset filter: `charset` names the response's charset in its `Content-Type`, and
//! with `source_charset` (or a charset the response names, under `override_charset on`) the
//! body is recoded through a `charset_map` table, byte for byte, so lengths and byte ranges
//! stay as they are.
//!
//! The decision ([`plan`]) follows `ngx_http_charset_header_filter`: no `Content-Type`, or a
//! type not in `charset_types` (when the response names no charset), or a charset already
//! named without `override_charset`: nothing. Source off or equal to the destination: only the
//! name. A response with a `Content-Encoding`: nothing (it cannot be recoded). No table between
//! the two: nothing, and an `[error]` line, as nginx.

use http::HeaderValue;

use super::compress::type_matches;
use crate::conf::model::LocationConf;

pub use crate::conf::charset::Recode;

/// What `charset` does to one response.
#[derive(Debug, Default)]
pub struct Plan {
    /// The new `Content-Type` (with `; charset=NAME`); `None`: unchanged (a redirect).
    pub content_type: Option<HeaderValue>,
    /// The body's recoding, if any.
    pub recode: Option<Recode>,
}

/// A response extension: the charset step already ran (the static module runs it before its
/// ranges, as nginx's filter order does).
#[derive(Debug, Clone, Copy)]
pub struct Applied;

/// A response extension: the charset a proxied response's upstream named in `X-Accel-Charset`
/// (not ignored by `proxy_ignore_headers`), to send it in.
#[derive(Debug, Clone)]
pub struct AccelCharset(pub String);

/// The `charset=` parameter of a `Content-Type` value, if it names one.
fn named_charset(v: &str) -> Option<&str> {
    v.split(';').skip(1).find_map(|p| {
        let p = p.trim();
        p.get(..8)
            .filter(|k| k.eq_ignore_ascii_case("charset="))
            .map(|_| p[8..].trim_matches('"'))
    })
}

/// `content_type` with its charset parameter replaced by `name`.
fn set_charset(content_type: &str, name: &str) -> Option<HeaderValue> {
    let mut parts = content_type.split(';');
    let mut out = String::with_capacity(content_type.len() + name.len() + 10);
    out.push_str(parts.next().unwrap_or("").trim());
    for p in parts.map(str::trim) {
        if p.is_empty()
            || p.get(..8)
                .is_some_and(|k| k.eq_ignore_ascii_case("charset="))
        {
            continue;
        }
        out.push_str("; ");
        out.push_str(p);
    }
    out.push_str("; charset=");
    out.push_str(name);
    HeaderValue::from_str(&out).ok()
}

/// What `loc`'s charset settings do to a response of `status` with `content_type`;
/// `encoded`: it has a `Content-Encoding`. `None`: nothing.
pub fn plan(
    loc: &LocationConf,
    content_type: Option<&HeaderValue>,
    encoded: bool,
    status: u16,
) -> Option<Plan> {
    plan_with(loc, content_type, encoded, status, None)
}

/// Whether nginx knows `name` as a charset here: one a `charset_map` joins, or this location's
/// `charset` or `source_charset`.
fn known(loc: &LocationConf, name: &str) -> bool {
    loc.charsets.knows(name)
        || [&loc.charset, &loc.source_charset]
            .into_iter()
            .flatten()
            .any(|c| c.eq_ignore_ascii_case(name))
}

/// [`plan`] for a response whose upstream named, in `X-Accel-Charset`, the charset to send it
/// in (`over`; nginx's `override_charset` of the response): that is the destination whatever
/// `charset`, `charset_types` and `override_charset` say, when it is a known charset; an
/// unknown one is an error line and nothing.
pub fn plan_with(
    loc: &LocationConf,
    content_type: Option<&HeaderValue>,
    encoded: bool,
    status: u16,
    over: Option<&str>,
) -> Option<Plan> {
    let ct = content_type?.to_str().ok()?;
    let own = named_charset(ct);
    let dst = match over.filter(|o| !o.is_empty()) {
        Some(o) if known(loc, o) => o,
        Some(o) => {
            crate::fblog!(Error, "unknown charset \"{o}\" to override");
            return None;
        }
        None => {
            let dst = loc.charset.as_deref()?;
            match own {
                Some(_) if !loc.override_charset => return None,
                None if !type_matches(content_type, &loc.charset_types) => return None,
                _ => {}
            }
            dst
        }
    };
    // nginx names no charset on a 301 or 302 (old browsers took it for the next page's).
    let named = || {
        if status == 301 || status == 302 {
            None
        } else {
            set_charset(ct, dst)
        }
    };
    let Some(src) = own.or(loc.source_charset.as_deref()) else {
        return Some(Plan {
            content_type: named(),
            recode: None,
        });
    };
    if src.eq_ignore_ascii_case(dst) {
        return Some(Plan {
            content_type: named(),
            recode: None,
        });
    }
    if encoded {
        return None;
    }
    match loc.charsets.get(src, dst) {
        Some(t) => Some(Plan {
            content_type: named(),
            recode: Some(t.clone()),
        }),
        None => {
            crate::fblog!(
                Error,
                "no \"charset_map\" between the charsets \"{src}\" and \"{dst}\""
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(conf: &str) -> std::sync::Arc<LocationConf> {
        let c = crate::conf::testutil::ok(&format!(
            "http {{ charset_map koi8-r windows-1251 {{ C1 E1; }} server {{ listen 127.0.0.1:8080; {conf} }} }}"
        ));
        c.http.unwrap().servers[0].default_location.clone()
    }

    fn ct(v: &str) -> HeaderValue {
        HeaderValue::from_str(v).unwrap()
    }

    fn named(p: &Plan) -> &str {
        p.content_type.as_ref().unwrap().to_str().unwrap()
    }

    #[test]
    fn names_the_charset_of_listed_types() {
        let l = loc("charset utf-8;");
        let p = plan(&l, Some(&ct("text/html")), false, 200).unwrap();
        assert_eq!(named(&p), "text/html; charset=utf-8");
        assert!(p.recode.is_none());
        assert!(plan(&l, Some(&ct("image/png")), false, 200).is_none());
        assert!(plan(&l, None, false, 200).is_none());
        // Already named: left alone unless `override_charset on`.
        assert!(plan(&l, Some(&ct("text/plain; charset=koi8-r")), false, 200).is_none());
        // A redirect gets none.
        let p = plan(&l, Some(&ct("text/html")), false, 301).unwrap();
        assert!(p.content_type.is_none());
        assert!(plan(&loc(""), Some(&ct("text/html")), false, 200).is_none());
    }

    #[test]
    fn recodes_through_the_map_either_way() {
        let l = loc("charset windows-1251; source_charset koi8-r;");
        let p = plan(&l, Some(&ct("text/html")), false, 200).unwrap();
        assert_eq!(named(&p), "text/html; charset=windows-1251");
        let mut b = *b"a\xc1";
        p.recode.unwrap().apply(&mut b);
        assert_eq!(&b, b"a\xe1");
        let l = loc("charset KOI8-R; source_charset windows-1251;");
        let p = plan(&l, Some(&ct("text/plain")), false, 200).unwrap();
        let mut b = *b"\xe1";
        p.recode.unwrap().apply(&mut b);
        assert_eq!(&b, b"\xc1");
        // Compressed: neither named nor recoded.
        assert!(plan(&l, Some(&ct("text/plain")), true, 200).is_none());
    }

    #[test]
    fn override_charset_recodes_what_the_response_names() {
        let l = loc("charset windows-1251; override_charset on;");
        let p = plan(&l, Some(&ct("text/plain; charset=koi8-r")), false, 200).unwrap();
        assert_eq!(named(&p), "text/plain; charset=windows-1251");
        assert!(p.recode.is_some());
        // A charset with no map: nothing (and an error line).
        assert!(plan(&l, Some(&ct("text/plain; charset=x-unknown")), false, 200).is_none());
    }

    #[test]
    fn an_upstreams_accel_charset_is_the_destination() {
        // No `charset` here: the upstream's `X-Accel-Charset` alone recodes and names.
        let l = loc("");
        let html = ct("text/html; charset=koi8-r");
        let p = plan_with(&l, Some(&html), false, 200, Some("windows-1251")).unwrap();
        assert_eq!(named(&p), "text/html; charset=windows-1251");
        let mut b = *b"a\xc1";
        p.recode.unwrap().apply(&mut b);
        assert_eq!(&b, b"a\xe1");
        // Any type, and over `charset` without `override_charset`.
        let l = loc("charset koi8-r;");
        let png = ct("image/png; charset=windows-1251");
        let p = plan_with(&l, Some(&png), false, 200, Some("KOI8-R")).unwrap();
        assert_eq!(named(&p), "image/png; charset=KOI8-R");
        assert!(p.recode.is_some());
        // The same charset: only named.
        let p = plan_with(&l, Some(&ct("text/html")), false, 200, Some("koi8-r")).unwrap();
        assert_eq!(named(&p), "text/html; charset=koi8-r");
        assert!(p.recode.is_none());
        // An unknown charset, or no type: nothing.
        assert!(plan_with(&l, Some(&html), false, 200, Some("x-none")).is_none());
        assert!(plan_with(&l, None, false, 200, Some("koi8-r")).is_none());
        // Compressed and needing a recode: nothing.
        assert!(plan_with(&loc(""), Some(&html), true, 200, Some("windows-1251")).is_none());
    }
}
