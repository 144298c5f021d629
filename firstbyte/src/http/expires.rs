//! `expires`: the `Expires` and `Cache-Control` a response gets, as nginx's headers filter
//! (`ngx_http_set_expires`). [`headers`] decides from the setting, the time and the
//! response's `Last-Modified`; [`apply`] puts them on a response.

use std::time::{Duration, UNIX_EPOCH};

use http::header::{CACHE_CONTROL, EXPIRES, LAST_MODIFIED};
use http::{HeaderMap, HeaderValue};

use crate::conf::model::Expires;

/// nginx's `expires epoch` date.
const EPOCH: &str = "Thu, 01 Jan 1970 00:00:01 GMT";
/// nginx's `expires max` date and age (10 years).
const MAX: &str = "Thu, 31 Dec 2037 23:55:55 GMT";
const MAX_AGE: &str = "max-age=315360000";

/// Whether `expires` (and `add_header` without `always`) applies to a response of `code`.
pub fn applies(code: u16) -> bool {
    matches!(
        code,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    )
}

/// `(Expires, Cache-Control)` for `e` at `now` (Unix seconds); `last_modified`: the
/// response's, if any; `next_daily`: the next time a time of day (seconds after local
/// midnight) comes after `now`. `None` for `off`.
pub fn headers(
    e: Expires,
    now: i64,
    last_modified: Option<i64>,
    next_daily: impl FnOnce(i64) -> i64,
) -> Option<(String, String)> {
    let (when, max_age, negative) = match e {
        // Variables are read by the caller (`Expires::Var` never reaches here).
        Expires::Off | Expires::Var { .. } => return None,
        Expires::Epoch => return Some((EPOCH.into(), "no-cache".into())),
        Expires::Max => return Some((MAX.into(), MAX_AGE.into())),
        Expires::Daily(t) => {
            let when = next_daily(t);
            (when, when - now, false)
        }
        Expires::Modified(t) if last_modified.is_some() => {
            let when = last_modified.unwrap_or(now) + t;
            (when, when - now, t < 0)
        }
        Expires::Access(t) | Expires::Modified(t) => (now + t, t, t < 0),
    };
    let cc = if negative || max_age < 0 {
        "no-cache".to_string()
    } else {
        format!("max-age={max_age}")
    };
    Some((http_date(when), cc))
}

/// An HTTP date; times before 1970 show as the epoch.
fn http_date(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
    httpdate::fmt_http_date(t)
}

/// The next `secs` after local midnight after `now`, as nginx's `ngx_next_time` (today's if
/// still ahead, else tomorrow's); `now` itself if the C library cannot tell.
#[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
pub fn next_daily(now: i64, secs: i64) -> i64 {
    // time_t is i64 here; the conversion keeps 32-bit targets honest.
    let t: libc::time_t = match now.try_into() {
        Ok(t) => t,
        Err(_) => return now,
    };
    // SAFETY: `tm` is plain data; localtime_r and mktime only read and write it.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return now;
        }
        tm.tm_hour = (secs / 3600) as libc::c_int;
        tm.tm_min = (secs % 3600 / 60) as libc::c_int;
        tm.tm_sec = (secs % 60) as libc::c_int;
        tm.tm_isdst = -1;
        let next = libc::mktime(&mut tm);
        if next != -1 && i64::from(next) > now {
            return i64::from(next);
        }
        tm.tm_mday += 1;
        tm.tm_isdst = -1;
        match libc::mktime(&mut tm) {
            -1 => now,
            n => i64::from(n),
        }
    }
}

/// Sets `Expires` and `Cache-Control` on `h` (replacing any) per `e` at `now`.
pub fn apply(e: Expires, now: i64, h: &mut HeaderMap) {
    let last_modified = h
        .get(LAST_MODIFIED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_secs()).ok());
    let Some((exp, cc)) = headers(e, now, last_modified, |t| next_daily(now, t)) else {
        return;
    };
    if let (Ok(exp), Ok(cc)) = (HeaderValue::from_str(&exp), HeaderValue::from_str(&cc)) {
        h.insert(EXPIRES, exp);
        h.insert(CACHE_CONTROL, cc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000; // Tue, 14 Nov 2023 22:13:20 GMT

    fn h(e: Expires, lm: Option<i64>) -> Option<(String, String)> {
        headers(e, NOW, lm, |t| NOW + 1000 + t)
    }

    #[test]
    fn forms_as_nginx() {
        assert_eq!(h(Expires::Off, None), None);
        assert_eq!(
            h(Expires::Epoch, None),
            Some((EPOCH.into(), "no-cache".into()))
        );
        assert_eq!(
            h(Expires::Max, None),
            Some((MAX.into(), "max-age=315360000".into()))
        );
        assert_eq!(
            h(Expires::Access(2048), None),
            Some((
                "Tue, 14 Nov 2023 22:47:28 GMT".into(),
                "max-age=2048".into()
            ))
        );
        let (exp, cc) = h(Expires::Access(-2048), None).unwrap();
        assert_eq!(
            (exp.as_str(), cc.as_str()),
            ("Tue, 14 Nov 2023 21:39:12 GMT", "no-cache")
        );
        // modified: from Last-Modified; the age counts from now.
        let (exp, cc) = h(Expires::Modified(2048), Some(NOW - 48)).unwrap();
        assert_eq!(
            (exp.as_str(), cc.as_str()),
            ("Tue, 14 Nov 2023 22:46:40 GMT", "max-age=2000")
        );
        // ... already past: no-cache; without Last-Modified: as access.
        assert_eq!(
            h(Expires::Modified(10), Some(NOW - 100)).unwrap().1,
            "no-cache"
        );
        assert_eq!(h(Expires::Modified(2048), None).unwrap().1, "max-age=2048");
        // daily: the next time of day; the age is until then.
        assert_eq!(h(Expires::Daily(33), None).unwrap().1, "max-age=1033");
    }

    #[test]
    fn next_daily_is_ahead_and_within_a_day() {
        for t in [0, 33, 15 * 3600 + 30 * 60 + 33, 86_399] {
            let n = next_daily(NOW, t);
            assert!(n > NOW && n <= NOW + 86_400 + 3600, "{t}: {n}");
        }
    }

    #[test]
    fn replaces_existing_headers() {
        let mut m = HeaderMap::new();
        m.append(CACHE_CONTROL, HeaderValue::from_static("private"));
        m.append(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        apply(Expires::Max, NOW, &mut m);
        let cc: Vec<_> = m.get_all(CACHE_CONTROL).iter().collect();
        assert_eq!(cc, ["max-age=315360000"]);
        assert_eq!(m.get(EXPIRES).unwrap(), MAX);
    }
}
