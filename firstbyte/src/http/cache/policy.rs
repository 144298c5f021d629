//! Whether and how long a response may be cached, as nginx decides it
//! (`ngx_http_upstream_process_accel_expires`, `_cache_control`, `_expires`, `Set-Cookie`,
//! `Vary`, then `proxy_cache_valid`): pure, times in Unix seconds.

use http::HeaderMap;

use crate::conf::cache::ValidRule;

/// Why a response is not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoStore {
    /// `X-Accel-Expires: 0`, `Cache-Control: no-cache|no-store|private|max-age=0`, a past
    /// `Expires`.
    Upstream,
    /// `Set-Cookie`.
    Cookie,
    /// `Vary: *`.
    VaryAll,
    /// No time from the upstream and no `proxy_cache_valid` for the status.
    NoValidity,
}

/// Until when (Unix seconds) a response of `status` with the upstream's `headers` is fresh,
/// or why it is not stored. `ignore` holds `proxy_ignore_headers`, lower-cased.
pub fn validity(
    status: u16,
    headers: &HeaderMap,
    ignore: &[String],
    rules: &[ValidRule],
    now: u64,
) -> Result<u64, NoStore> {
    let ignored = |n: &str| ignore.iter().any(|i| i == n);
    let text = |n: &str| -> Vec<String> {
        headers
            .get_all(n)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    if !ignored("set-cookie") && headers.contains_key(http::header::SET_COOKIE) {
        return Err(NoStore::Cookie);
    }
    if !ignored("vary")
        && text("vary")
            .iter()
            .any(|v| v.split(',').any(|p| p.trim() == "*"))
    {
        return Err(NoStore::VaryAll);
    }
    let mut valid: Option<u64> = None;
    let accel = if ignored("x-accel-expires") {
        None
    } else {
        text("x-accel-expires").into_iter().next()
    };
    if let Some(v) = accel {
        let v = v.trim();
        if let Some(at) = v.strip_prefix('@') {
            match at.parse::<u64>() {
                Ok(t) => valid = Some(t),
                Err(_) => return Err(NoStore::Upstream),
            }
        } else {
            match v.parse::<u64>() {
                Ok(0) | Err(_) => return Err(NoStore::Upstream),
                Ok(n) => valid = Some(now.saturating_add(n)),
            }
        }
    }
    if valid.is_none() && !ignored("cache-control") {
        for v in text("cache-control") {
            for d in v.split(',').map(str::trim) {
                let (name, arg) = d.split_once('=').unwrap_or((d, ""));
                let name = name.trim().to_ascii_lowercase();
                match name.as_str() {
                    "no-cache" | "no-store" | "private" => return Err(NoStore::Upstream),
                    "max-age" | "s-maxage" => {
                        let n: u64 = arg
                            .trim()
                            .trim_matches('"')
                            .parse()
                            .map_err(|_| NoStore::Upstream)?;
                        if n == 0 {
                            return Err(NoStore::Upstream);
                        }
                        // s-maxage wins over max-age (nginx takes the one it meets last
                        // of the two; both are shared-cache lifetimes here).
                        if valid.is_none() || name == "s-maxage" {
                            valid = Some(now.saturating_add(n));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if valid.is_none() && !ignored("expires") {
        if let Some(v) = text("expires").into_iter().next() {
            match httpdate::parse_http_date(v.trim()) {
                Ok(t) => {
                    let t = t
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    if t < now {
                        return Err(NoStore::Upstream);
                    }
                    valid = Some(t);
                }
                Err(_) => return Err(NoStore::Upstream),
            }
        }
    }
    if let Some(v) = valid {
        return Ok(v);
    }
    rule_time(status, rules)
        .map(|d| now.saturating_add(d))
        .ok_or(NoStore::NoValidity)
}

/// `proxy_cache_valid`'s time for `status`: the first rule naming it, else an `any` rule.
pub fn rule_time(status: u16, rules: &[ValidRule]) -> Option<u64> {
    rules
        .iter()
        .find(|r| r.codes.contains(&status))
        .or_else(|| rules.iter().find(|r| r.any))
        .map(|r| r.time.as_secs())
        .filter(|t| *t > 0)
}

/// The upstream's `Cache-Control: stale-while-revalidate=N` and `stale-if-error=N`, as nginx
/// reads them (each field in turn, a later one's value replacing an earlier one's; the first
/// gives both times, the second the error one); a value that is not a number makes the
/// response not stored. Nothing when `proxy_ignore_headers` holds `Cache-Control`.
pub fn stale_extensions(
    headers: &HeaderMap,
    ignore: &[String],
) -> Result<super::store::Stale, NoStore> {
    let mut out = super::store::Stale::default();
    if ignore.iter().any(|i| i == "cache-control") {
        return Ok(out);
    }
    for v in headers.get_all(http::header::CACHE_CONTROL) {
        let v = v.as_bytes();
        if let Some(n) = extension(v, b"stale-while-revalidate=")? {
            out.updating = n;
            out.error = n;
        }
        if let Some(n) = extension(v, b"stale-if-error=")? {
            out.error = n;
        }
    }
    Ok(out)
}

/// The delta-seconds after `name` (found anywhere in `v`, any case, as nginx's
/// `ngx_strlcasestrn`): digits up to `,`, `;`, a space or the end, saturating.
fn extension(v: &[u8], name: &[u8]) -> Result<Option<u64>, NoStore> {
    let Some(at) = v
        .windows(name.len())
        .position(|w| w.eq_ignore_ascii_case(name))
    else {
        return Ok(None);
    };
    let mut n: u64 = 0;
    for &c in &v[at + name.len()..] {
        if matches!(c, b',' | b';' | b' ') {
            break;
        }
        if !c.is_ascii_digit() {
            return Err(NoStore::Upstream);
        }
        n = n.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    // nginx's time_t ceiling.
    Ok(Some(n.min(i64::MAX as u64)))
}

/// The field names a response's `Vary` lists (lower-cased, all its `Vary` fields).
pub fn vary_names(headers: &HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in headers.get_all(http::header::VARY) {
        for n in String::from_utf8_lossy(v.as_bytes()).split(',') {
            let n = n.trim().to_ascii_lowercase();
            if !n.is_empty() && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// What a request gives the `Vary` fields `names`: each name and its values, whitespace
/// and empty elements dropped, several fields of a name joined (nginx's normalization).
pub fn variant(names: &[String], req: &HeaderMap) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(b':');
        let mut first = true;
        for v in req.get_all(n.as_str()) {
            for t in v.as_bytes().split(|b| *b == b',') {
                let t = t.trim_ascii();
                if t.is_empty() {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(t);
            }
        }
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The key of a variant that is not the main entry's.
pub fn variant_key(key: &[u8], variant: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k.extend_from_slice(variant);
    k
}

/// A `proxy_cache_bypass` / `proxy_no_cache` value holds: non-empty and not `0`.
pub fn holds(v: &str) -> bool {
    !v.is_empty() && v != "0"
}

/// `proxy_cache_max_range_offset`: whether a `Range` value starts at `max` or later, or is a
/// suffix range (nginx's `ngx_http_upstream_cache_check_range`; anything but `bytes=` is no
/// range).
pub fn range_beyond(range: &[u8], max: u64) -> bool {
    let Some(rest) = range
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case(b"bytes="))
        .map(|_| &range[6..])
    else {
        return false;
    };
    let rest = rest.trim_ascii_start();
    if rest.first() == Some(&b'-') {
        return true;
    }
    let digits: Vec<u8> = rest
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    let offset = std::str::from_utf8(&digits)
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    offset >= max
}

/// The key's MD5.
pub fn hash_key(key: &[u8]) -> [u8; 16] {
    use md5::{Digest, Md5};
    Md5::digest(key).into()
}

/// The hex file name of a hash.
pub fn hex(hash: &[u8; 16]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file of a hash under `levels`, relative to the zone's path: `c/29/b7f54b2df7773722d382f4809d65029c`
/// for `1:2` (nginx's layout: the levels from the end of the name). Only hex characters and
/// `/` can appear, so the file cannot be outside the zone's directory.
pub fn rel_path(hash: &[u8; 16], levels: &[u8]) -> String {
    let name = hex(hash);
    let mut end = name.len();
    let mut parts = Vec::new();
    for l in levels {
        let l = usize::from(*l);
        parts.push(&name[end - l..end]);
        end -= l;
    }
    parts.push(&name);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stale_extensions_as_nginx_reads_them() {
        let none: Vec<String> = Vec::new();
        let st = |pairs: &[(&str, &str)]| stale_extensions(&h(pairs), &none);
        let s = st(&[("cache-control", "max-age=1, Stale-While-Revalidate=30")]).unwrap();
        assert_eq!((s.updating, s.error), (30, 30));
        let s = st(&[
            ("cache-control", "stale-if-error=7"),
            ("cache-control", "stale-while-revalidate=3"),
        ])
        .unwrap();
        assert_eq!((s.updating, s.error), (3, 3));
        let s = st(&[(
            "cache-control",
            "stale-while-revalidate=3, stale-if-error=70",
        )])
        .unwrap();
        assert_eq!((s.updating, s.error), (3, 70));
        let s = st(&[("cache-control", "stale-if-error=99999999999999999999999")]).unwrap();
        assert_eq!((s.updating, s.error), (0, i64::MAX as u64));
        assert_eq!(
            st(&[("cache-control", "stale-if-error=1x")]),
            Err(NoStore::Upstream)
        );
        let ignore = vec!["cache-control".to_string()];
        let s = stale_extensions(
            &h(&[("cache-control", "stale-while-revalidate=3")]),
            &ignore,
        )
        .unwrap();
        assert_eq!(s, super::super::store::Stale::default());
    }

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (n, v) in pairs {
            m.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    fn rules(spec: &[(&[u16], bool, u64)]) -> Vec<ValidRule> {
        spec.iter()
            .map(|(c, any, t)| ValidRule {
                codes: c.to_vec(),
                any: *any,
                time: Duration::from_secs(*t),
            })
            .collect()
    }

    const NOW: u64 = 1_000_000;

    #[test]
    fn nothing_cached_without_a_time() {
        assert_eq!(
            validity(200, &h(&[]), &[], &[], NOW),
            Err(NoStore::NoValidity)
        );
        let r = rules(&[(&[200, 301, 302], false, 60)]);
        assert_eq!(validity(200, &h(&[]), &[], &r, NOW), Ok(NOW + 60));
        assert_eq!(
            validity(404, &h(&[]), &[], &r, NOW),
            Err(NoStore::NoValidity)
        );
        let r = rules(&[(&[404], false, 10), (&[], true, 5)]);
        assert_eq!(validity(404, &h(&[]), &[], &r, NOW), Ok(NOW + 10));
        assert_eq!(validity(500, &h(&[]), &[], &r, NOW), Ok(NOW + 5));
    }

    #[test]
    fn upstream_times_come_first() {
        let r = rules(&[(&[], true, 5)]);
        let cc = h(&[("cache-control", "public, max-age=100")]);
        assert_eq!(validity(200, &cc, &[], &r, NOW), Ok(NOW + 100));
        let both = h(&[("cache-control", "max-age=100, s-maxage=30")]);
        assert_eq!(validity(200, &both, &[], &r, NOW), Ok(NOW + 30));
        let accel = h(&[("x-accel-expires", "7"), ("cache-control", "max-age=100")]);
        assert_eq!(validity(200, &accel, &[], &r, NOW), Ok(NOW + 7));
        let at = h(&[("x-accel-expires", "@2000000")]);
        assert_eq!(validity(200, &at, &[], &r, NOW), Ok(2_000_000));
        let ignored = vec!["x-accel-expires".to_string()];
        assert_eq!(validity(200, &accel, &ignored, &r, NOW), Ok(NOW + 100));
        let exp = h(&[("expires", "Thu, 01 Jan 2099 00:00:00 GMT")]);
        assert_eq!(validity(200, &exp, &[], &r, NOW), Ok(4_070_908_800));
        let past = h(&[("expires", "Thu, 01 Jan 1970 00:00:01 GMT")]);
        assert_eq!(validity(200, &past, &[], &r, NOW), Err(NoStore::Upstream));
        let ignored = vec!["expires".to_string()];
        assert_eq!(validity(200, &past, &ignored, &r, NOW), Ok(NOW + 5));
    }

    #[test]
    fn what_the_upstream_forbids() {
        let r = rules(&[(&[], true, 60)]);
        for cc in [
            "no-cache",
            "no-store",
            "private",
            "max-age=0",
            "Private, max-age=10",
        ] {
            let m = h(&[("cache-control", cc)]);
            assert_eq!(
                validity(200, &m, &[], &r, NOW),
                Err(NoStore::Upstream),
                "{cc}"
            );
        }
        let ignored = vec!["cache-control".to_string()];
        let m = h(&[("cache-control", "private")]);
        assert_eq!(validity(200, &m, &ignored, &r, NOW), Ok(NOW + 60));
        assert_eq!(
            validity(200, &h(&[("x-accel-expires", "0")]), &[], &r, NOW),
            Err(NoStore::Upstream)
        );
        let c = h(&[("set-cookie", "a=b")]);
        assert_eq!(validity(200, &c, &[], &r, NOW), Err(NoStore::Cookie));
        let ignored = vec!["set-cookie".to_string()];
        assert_eq!(validity(200, &c, &ignored, &r, NOW), Ok(NOW + 60));
        let v = h(&[("vary", "Accept, *")]);
        assert_eq!(validity(200, &v, &[], &r, NOW), Err(NoStore::VaryAll));
    }

    #[test]
    fn range_offsets() {
        assert!(!range_beyond(b"bytes=1-", 2));
        assert!(range_beyond(b"bytes=3-", 2));
        assert!(range_beyond(b"bytes=-1", 2));
        assert!(range_beyond(b"bytes=0-0", 0));
        assert!(!range_beyond(b"items=9-", 2));
    }

    #[test]
    fn predicates_and_paths() {
        assert!(!holds(""));
        assert!(!holds("0"));
        assert!(holds("1"));
        assert!(holds("00"));
        let hash = hash_key(b"http://127.0.0.1:8081/t.html");
        let name = hex(&hash);
        assert_eq!(name.len(), 32);
        let p = rel_path(&hash, &[1, 2]);
        assert_eq!(p, format!("{}/{}/{}", &name[31..], &name[29..31], name));
        assert_eq!(rel_path(&hash, &[]), name);
        let mut req = HeaderMap::new();
        req.append("accept-encoding", "foo,,  ,bar , ".parse().unwrap());
        let names = vary_names(&h(&[("vary", ",, Accept-encoding , ,"), ("vary", "X")]));
        assert_eq!(names, vec!["accept-encoding", "x"]);
        assert_eq!(variant(&names, &req), b"accept-encoding:foo,bar\r\nx:\r\n");
        let mut other = HeaderMap::new();
        other.append("accept-encoding", "foobar".parse().unwrap());
        assert_ne!(variant(&names, &req), variant(&names, &other));
        // md5("") as nginx names it.
        assert_eq!(hex(&hash_key(b"")), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
