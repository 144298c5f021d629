//! `Range` and the conditional headers of a static file response: `parse_range`,
//! `preconditions` (`If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`)
//! and `if_range_matches`. Besides never panicking:
//! - a range served lies within the file: `start <= end < len`, so the body's length
//!   `end - start + 1` is at most `len` and cannot overflow; several parts each lie within the
//!   file and add up to at most its length;
//! - a single well-formed `bytes=a-b`, `bytes=a-` or `bytes=-n` gets exactly nginx's answer;
//! - only `If-Match`/`If-Unmodified-Since` can fail a request (412), only
//!   `If-None-Match`/`If-Modified-Since` can make it 304; the file's own entity tag in
//!   `If-None-Match` is a 304, and a lone `If-Modified-Since` is a 304 exactly when the file is
//!   not newer;
//! - `If-Range` with the file's own strong entity tag, or its exact date, matches.

#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use firstbyte::fuzzing::header::{
    HeaderName, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, RANGE,
};
use firstbyte::fuzzing::{
    if_range_matches, parse_range, preconditions, ByteRange, HeaderMap, HeaderValue, Precondition,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// The last second `httpdate` can format (31 Dec 9999 23:59:59).
const MAX_DATE: i64 = 253_402_300_799;

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    // A file's length is an `off_t`: at most 2^63 - 1.
    let len = number(u)?.min(i64::MAX as u64);
    let value: String = u.arbitrary()?;
    check_range(&value, len);
    well_formed_range(u, len)?;
    conditionals(u, len)
}

/// A length or position: mostly small, sometimes anything (edges included).
fn number(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0..=3)? {
        0 => u64::from(u.arbitrary::<u8>()?),
        1 => u64::from(u.arbitrary::<u32>()?),
        2 => u64::MAX - u64::from(u.arbitrary::<u8>()?),
        _ => u.arbitrary()?,
    })
}

fn check_range(value: &str, len: u64) -> ByteRange {
    let r = parse_range(value, len);
    match &r {
        ByteRange::Part { start, end } => {
            assert!(start <= end, "{value:?} of {len}: {start}-{end}");
            assert!(*end < len, "{value:?} of {len}: {start}-{end}");
            assert!(end - start < len);
        }
        // Several parts: each within the file, their total at most the file.
        ByteRange::Multi(spans) => {
            assert!(spans.len() >= 2, "{value:?}");
            let mut total: u64 = 0;
            for s in spans {
                assert!(s.start < s.end && s.end <= len, "{value:?} of {len}: {s:?}");
                total += s.end - s.start;
            }
            assert!(total <= len, "{value:?} of {len}");
        }
        _ => {}
    }
    r
}

/// nginx's answer to one well-formed element, `FIRST-LAST` with `last = None` for `FIRST-`:
/// numbers past 2^63 - 1 are 416; an element selecting nothing is 416, or a 200 when it starts
/// at 0 (an empty file).
fn expected(first: u64, last: Option<u64>, len: u64) -> ByteRange {
    const MAX: u64 = i64::MAX as u64;
    if first > MAX || last.is_some_and(|l| l > MAX) {
        return ByteRange::Unsatisfiable;
    }
    let end = match last {
        Some(l) if l < len => l + 1,
        _ => len,
    };
    if first < end {
        ByteRange::Part {
            start: first,
            end: end - 1,
        }
    } else if first == 0 {
        ByteRange::Full
    } else {
        ByteRange::Unsatisfiable
    }
}

fn well_formed_range(u: &mut Unstructured<'_>, len: u64) -> Result<()> {
    let (a, b) = (number(u)?, number(u)?);
    let (value, want) = match u.int_in_range(0..=2)? {
        0 => (format!("bytes={a}-{b}"), expected(a, Some(b), len)),
        1 => (format!("bytes={a}-"), expected(a, None, len)),
        _ => (
            format!("bytes=-{b}"),
            if b > i64::MAX as u64 {
                ByteRange::Unsatisfiable
            } else {
                expected(len.saturating_sub(b), None, len)
            },
        ),
    };
    assert_eq!(check_range(&value, len), want, "{value:?} of {len}");
    Ok(())
}

fn http_date(secs: i64) -> String {
    let secs = secs.clamp(0, MAX_DATE) as u64;
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

fn conditionals(u: &mut Unstructured<'_>, len: u64) -> Result<()> {
    let mtime: i64 = match u.int_in_range(0..=2)? {
        0 => u.int_in_range(0..=MAX_DATE)?,
        1 => u.int_in_range(1_700_000_000..=1_800_000_000)?,
        _ => u.arbitrary()?,
    };
    // The server's own form, `"<mtime hex>-<size hex>"`, or anything.
    let realistic = u.arbitrary::<bool>()?;
    let etag = if realistic {
        format!("\"{mtime:x}-{len:x}\"")
    } else {
        u.arbitrary::<String>()?
    };
    let names: [HeaderName; 6] = [
        IF_MATCH,
        IF_NONE_MATCH,
        IF_MODIFIED_SINCE,
        IF_UNMODIFIED_SINCE,
        IF_RANGE,
        RANGE,
    ];
    let mut headers = HeaderMap::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let name = u.choose(&names)?.clone();
        let value = match u.int_in_range(0..=4)? {
            0 => etag.clone(),
            1 => format!("W/{etag}"),
            2 => http_date(mtime.saturating_add(i64::from(u.arbitrary::<i8>()?))),
            3 => format!("\"x\", {etag}"),
            _ => u.arbitrary::<String>()?,
        };
        if let Ok(v) = HeaderValue::from_bytes(value.as_bytes()) {
            headers.append(name, v);
        }
    }

    let outcome = preconditions(&headers, &etag, mtime);
    let has = |n: &HeaderName| headers.contains_key(n);
    if !has(&IF_MATCH) && !has(&IF_UNMODIFIED_SINCE) {
        assert_ne!(outcome, Precondition::Failed, "{headers:?}");
        let own_tag = headers
            .get_all(IF_NONE_MATCH)
            .iter()
            .any(|v| v.as_bytes() == etag.as_bytes());
        if realistic && own_tag {
            assert_eq!(outcome, Precondition::NotModified, "{headers:?}");
        }
        if !has(&IF_NONE_MATCH) {
            let ims = headers
                .get_all(IF_MODIFIED_SINCE)
                .iter()
                .collect::<Vec<_>>();
            if let [one] = ims[..] {
                if let Some(date) = one
                    .to_str()
                    .ok()
                    .and_then(|s| httpdate::parse_http_date(s.trim()).ok())
                {
                    // A date before 1970 is ignored, as a malformed one.
                    let want = match date.duration_since(UNIX_EPOCH) {
                        Ok(d) if mtime <= d.as_secs() as i64 => Precondition::NotModified,
                        _ => Precondition::Proceed,
                    };
                    assert_eq!(outcome, want, "{headers:?} mtime {mtime}");
                }
            }
        }
    }
    if !has(&IF_NONE_MATCH) && !has(&IF_MODIFIED_SINCE) {
        assert_ne!(outcome, Precondition::NotModified, "{headers:?}");
    }
    if headers.is_empty() {
        assert_eq!(outcome, Precondition::Proceed);
    }

    for v in headers.get_all(IF_RANGE) {
        let matched = if_range_matches(v, &etag, mtime);
        if realistic && v.as_bytes() == etag.as_bytes() {
            assert!(matched, "If-Range {v:?} vs {etag}");
        }
        if (0..=MAX_DATE).contains(&mtime) && v.as_bytes() == http_date(mtime).as_bytes() {
            assert!(matched, "If-Range {v:?} vs {mtime}");
        }
    }
    Ok(())
}
