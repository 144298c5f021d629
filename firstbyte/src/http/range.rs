//! `Range: bytes=` for static files, as nginx's range filter decides it: the parse and the plan
//! of the parts (pure, from the header and the file's size), and the `multipart/byteranges`
//! body that streams the parts from the open file.
//!
//! nginx's rules (`ngx_http_range_parse`), kept here:
//! - the header must start with `bytes=` (any case) and have something after it, else it is
//!   ignored (200 with the whole file);
//! - each element is `FIRST-LAST`, `FIRST-` or `-SUFFIX`, spaces allowed around the numbers
//!   and the `-`, elements separated by `,`; anything else (a letter, a missing `-` or `,`,
//!   a trailing `,`, a number past 2^63 - 1) is 416;
//! - `LAST` past the end is cut to the end; an element that selects nothing (`FIRST` at or past
//!   the end, `LAST` < `FIRST`, `-0`) is dropped, except one starting at 0 (only possible on an
//!   empty file), which makes the whole request a 200;
//! - no element left: 416 with `Content-Range: bytes */LEN`; one: 206 with `Content-Range`;
//! - several: 206 `multipart/byteranges`, in the order asked, overlaps and all, unless their
//!   total exceeds the file (200: the whole file is cheaper), or they are more than
//!   `max_ranges` (200). Without `max_ranges`, the total plus 256 bytes per part may not
//!   exceed the file plus 4096 (200 otherwise): thousands of tiny ranges cost a client no more
//!   than the whole file would. `max_ranges 0` turns ranges off.

use std::fs::File;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

use super::body::{pread_uninit, Recode, FILE_CHUNK};

/// Bytes `start..end` of the file (`end` exclusive, `start < end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// What a `Range` header asks of a file of a given length.
#[doc(hidden)] // public for the fuzz targets only (`crate::fuzzing`)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteRange {
    /// The whole file, 200 (no usable range, or a set nginx declines to split).
    Full,
    /// One part: bytes `start..=end`, 206 with `Content-Range`.
    Part {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// Several parts in the order asked: 206 `multipart/byteranges`.
    Multi(Vec<Span>),
    /// 416.
    Unsatisfiable,
}

/// The largest number nginx takes in a range (`off_t`'s maximum).
const MAX_OFF: u64 = i64::MAX as u64;

/// [`parse`] with no `max_ranges` set.
#[doc(hidden)]
pub fn parse_range(value: &str, len: u64) -> ByteRange {
    parse(value, len, None)
}

/// Parses `Range` for a file of `len` bytes (see the module overview). `max_ranges`: the
/// directive's value (`None`: unset, nginx's unlimited with the size bound); 0 is the
/// caller's to handle (ranges off), and is treated here as 1.
pub fn parse(value: &str, len: u64, max_ranges: Option<u32>) -> ByteRange {
    let v = value.as_bytes();
    if v.len() < 7 || !v[..6].eq_ignore_ascii_case(b"bytes=") {
        return ByteRange::Full;
    }
    // Past the end reads as NUL, as nginx's parser sees the end of the header value.
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let skip_spaces = |mut i: usize| {
        while at(i) == b' ' {
            i += 1;
        }
        i
    };
    let number = |mut i: usize| -> Option<(u64, usize)> {
        let mut n: u64 = 0;
        while at(i).is_ascii_digit() {
            n = n.checked_mul(10)?.checked_add(u64::from(at(i) - b'0'))?;
            if n > MAX_OFF {
                return None;
            }
            i += 1;
        }
        Some((n, i))
    };
    let left = max_ranges.unwrap_or(u32::MAX).max(1);
    let mut spans: Vec<Span> = Vec::new();
    let mut size: u64 = 0;
    let mut p = 6;
    loop {
        p = skip_spaces(p);
        let (start, end);
        if at(p) != b'-' {
            if !at(p).is_ascii_digit() {
                return ByteRange::Unsatisfiable;
            }
            let Some((s, q)) = number(p) else {
                return ByteRange::Unsatisfiable;
            };
            p = skip_spaces(q);
            if at(p) != b'-' {
                return ByteRange::Unsatisfiable;
            }
            p = skip_spaces(p + 1);
            if at(p) == b',' || at(p) == 0 {
                (start, end) = (s, len);
            } else {
                let Some((e, q)) = digits(p, &at, &number) else {
                    return ByteRange::Unsatisfiable;
                };
                p = q;
                (start, end) = (s, if e >= len { len } else { e + 1 });
            }
        } else {
            let Some((n, q)) = digits(p + 1, &at, &number) else {
                return ByteRange::Unsatisfiable;
            };
            p = q;
            start = len.saturating_sub(n);
            end = len;
        }
        if start < end {
            spans.push(Span { start, end });
            // `size` never passes MAX_OFF, so this cannot underflow (a span may: a length
            // past 2^63 - 1 is no file's, but the parser must not panic on it).
            if end - start > MAX_OFF - size {
                return ByteRange::Unsatisfiable;
            }
            size += end - start;
            if spans.len() as u64 > u64::from(left) {
                return ByteRange::Full;
            }
        } else if start == 0 {
            return ByteRange::Full;
        }
        let sep = at(p);
        p += 1;
        if sep != b',' {
            break;
        }
    }
    match spans.len() {
        0 => ByteRange::Unsatisfiable,
        1 => ByteRange::Part {
            start: spans[0].start,
            end: spans[0].end - 1,
        },
        n => {
            if size > len {
                return ByteRange::Full;
            }
            if max_ranges.is_none() {
                let overhead = (n as u64).saturating_mul(256);
                if size.saturating_add(overhead) > len.saturating_add(4096) {
                    return ByteRange::Full;
                }
            }
            ByteRange::Multi(spans)
        }
    }
}

/// A number that must be there, then spaces, then `,` or the end: `(value, position)`.
fn digits(
    p: usize,
    at: &impl Fn(usize) -> u8,
    number: &impl Fn(usize) -> Option<(u64, usize)>,
) -> Option<(u64, usize)> {
    if !at(p).is_ascii_digit() {
        return None;
    }
    let (n, mut q) = number(p)?;
    while at(q) == b' ' {
        q += 1;
    }
    (at(q) == b',' || at(q) == 0).then_some((n, q))
}

/// The wire layout of a `multipart/byteranges` body, decided before anything is sent: each
/// part's head (boundary, `Content-Type`, `Content-Range`) and the closing boundary, so the
/// total length goes in `Content-Length` up front, as nginx does.
#[derive(Debug)]
pub struct Multipart {
    /// The `Content-Type` of the response: `multipart/byteranges; boundary=B`.
    pub content_type: String,
    /// Each part's head and its file span.
    pub parts: Vec<(Bytes, Span)>,
    /// `CRLF --B-- CRLF`.
    pub tail: Bytes,
    /// The body's length.
    pub len: u64,
}

impl Multipart {
    /// Sets the response's `Content-Type` (the boundary's) and `Content-Length`; a
    /// `Content-Range` of its own (an upstream's, stored with a cached response) goes: each
    /// part has its own, as nginx's range filter clears the response's.
    pub fn set_headers(&self, headers: &mut http::HeaderMap) {
        headers.remove(http::header::CONTENT_RANGE);
        if let Ok(v) = http::HeaderValue::from_str(&self.content_type) {
            headers.insert(http::header::CONTENT_TYPE, v);
        }
        headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(self.len),
        );
    }

    /// The same parts, read `offset` bytes further into the file (a body stored after a
    /// head of its own, as a proxy-cache file); the part heads keep the body's offsets.
    pub fn shifted(mut self, offset: u64) -> Self {
        for (_, span) in &mut self.parts {
            span.start += offset;
            span.end += offset;
        }
        self
    }
}

/// nginx's layout for `spans` of a file of `len` bytes whose own type is `content_type`
/// (none: no `Content-Type` line in the parts); `boundary` is 20 digits, as nginx's.
pub fn multipart(spans: &[Span], len: u64, content_type: Option<&str>, boundary: u64) -> Multipart {
    let b = format!("{boundary:020}");
    let head = match content_type {
        Some(ct) => format!("\r\n--{b}\r\nContent-Type: {ct}\r\nContent-Range: bytes "),
        None => format!("\r\n--{b}\r\nContent-Range: bytes "),
    };
    let tail = Bytes::from(format!("\r\n--{b}--\r\n"));
    let mut total = tail.len() as u64;
    let parts = spans
        .iter()
        .map(|s| {
            let h = format!("{head}{}-{}/{len}\r\n\r\n", s.start, s.end - 1);
            total += h.len() as u64 + (s.end - s.start);
            (Bytes::from(h), *s)
        })
        .collect();
    Multipart {
        content_type: format!("multipart/byteranges; boundary={b}"),
        parts,
        tail,
        len: total,
    }
}

/// A fresh boundary: random, so that no file's bytes can be made to look like one.
pub fn boundary() -> u64 {
    let mut b = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        // Unreachable with aws-lc's generator; a clock is still a boundary.
        return crate::log::now().secs;
    }
    // Any u64 has at most 20 digits.
    u64::from_le_bytes(b)
}

/// The body of a `multipart/byteranges` response: each part's head, then its bytes read from
/// the file in [`FILE_CHUNK`]s with `pread` (never the whole file at once), then the tail.
pub struct MultipartBody {
    file: Arc<File>,
    parts: std::vec::IntoIter<(Bytes, Span)>,
    /// The part being sent: its next offset and the bytes left.
    current: Option<(u64, u64)>,
    tail: Option<Bytes>,
    remaining: u64,
    recode: Option<Recode>,
}

impl MultipartBody {
    /// [`MultipartBody::new`] as a response body.
    pub fn body(file: Arc<File>, m: Multipart, recode: Option<Recode>) -> super::body::Body {
        let b = Self::new(file, m, recode);
        super::body::Body::Stream(http_body_util::BodyExt::boxed_unsync(b))
    }

    /// The body of `m` from `file`, its bytes recoded with `recode` when given (`charset`).
    pub fn new(file: Arc<File>, m: Multipart, recode: Option<Recode>) -> Self {
        Self {
            file,
            parts: m.parts.into_iter(),
            current: None,
            tail: Some(m.tail),
            remaining: m.len,
            recode,
        }
    }
}

impl http_body::Body for MultipartBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if let Some((offset, left)) = this.current.as_mut() {
            let n = (*left).min(FILE_CHUNK as u64) as usize;
            let mut buf = BytesMut::with_capacity(n);
            return match pread_uninit(&this.file, &mut buf, n, *offset) {
                Ok(0) => Poll::Ready(Some(Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                )))),
                Ok(got) => {
                    *offset += got as u64;
                    *left -= got as u64;
                    if *left == 0 {
                        this.current = None;
                    }
                    if let Some(t) = &this.recode {
                        t.apply(&mut buf);
                    }
                    this.remaining -= got as u64;
                    Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
                }
                Err(e) => Poll::Ready(Some(Err(e))),
            };
        }
        if let Some((head, span)) = this.parts.next() {
            this.current = Some((span.start, span.end - span.start));
            this.remaining -= head.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        Poll::Ready(this.tail.take().map(|t| {
            this.remaining -= t.len() as u64;
            Ok(Frame::data(t))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use ByteRange::*;

    fn span(start: u64, end: u64) -> Span {
        Span { start, end }
    }

    #[test]
    fn single_ranges() {
        assert_eq!(parse_range("bytes=0-4", 10), Part { start: 0, end: 4 });
        assert_eq!(parse_range("bytes=5-", 10), Part { start: 5, end: 9 });
        assert_eq!(parse_range("bytes=-3", 10), Part { start: 7, end: 9 });
        assert_eq!(parse_range("bytes=-30", 10), Part { start: 0, end: 9 });
        assert_eq!(parse_range("bytes=8-100", 10), Part { start: 8, end: 9 });
        assert_eq!(parse_range("bytes= 1 - 2 ", 10), Part { start: 1, end: 2 });
        assert_eq!(parse_range("Bytes=1-1", 10), Part { start: 1, end: 1 });
        // Not `bytes=`, or nothing after it: not a range request.
        assert_eq!(parse_range("BYTES = 1-1", 10), Full);
        assert_eq!(parse_range("items=0-1", 10), Full);
        assert_eq!(parse_range("bytes=", 10), Full);
    }

    #[test]
    fn malformed_and_unsatisfiable() {
        for v in [
            "bytes=10-",
            "bytes=-0",
            "bytes=5-4",
            "bytes=abc",
            "bytes=10-alpha",
            "bytes=10",
            "bytes=10-11 12-",
            "bytes=1-2-3",
            "bytes=0-1,",
            "bytes=\t0-1",
            "bytes=99999999999999999999999-",
            "bytes=9223372036854775808-",
            "bytes=20-30, 40-50",
        ] {
            assert_eq!(parse_range(v, 10), Unsatisfiable, "{v}");
        }
        // The largest number nginx takes.
        assert_eq!(
            parse_range("bytes=0-9223372036854775807", 10),
            Part { start: 0, end: 9 }
        );
        // An element that selects nothing is dropped when another one does.
        assert_eq!(parse_range("bytes=0-1,5-4", 10), Part { start: 0, end: 1 });
        assert_eq!(
            parse_range("bytes=0-1, 40-50", 10),
            Part { start: 0, end: 1 }
        );
        // One from 0 on an empty file: the whole (empty) file.
        assert_eq!(parse_range("bytes=0-0", 0), Full);
        assert_eq!(parse_range("bytes=-5", 0), Full);
        assert_eq!(parse_range("bytes=1-", 0), Unsatisfiable);
    }

    #[test]
    fn several_ranges() {
        let len = 1000;
        assert_eq!(
            parse_range("bytes=0-9, -10, 10-19", len),
            Multi(vec![span(0, 10), span(990, 1000), span(10, 20)])
        );
        // An unsatisfiable element among satisfiable ones is dropped.
        assert_eq!(
            parse_range("bytes=0-9, -10, 100000-, 10-19", len),
            Multi(vec![span(0, 10), span(990, 1000), span(10, 20)])
        );
        // Overlapping and unsorted: served as asked.
        assert_eq!(
            parse_range("bytes=5-9,0-7", len),
            Multi(vec![span(5, 10), span(0, 8)])
        );
        // A total past the file: the whole file.
        assert_eq!(parse_range("bytes=0-10001, 0-0", len), Full);
    }

    #[test]
    fn max_ranges() {
        let len = 1000;
        assert!(matches!(parse("bytes=0-9, -10", len, Some(2)), Multi(_)));
        assert!(matches!(
            parse("bytes=0-9, -10, 10000-", len, Some(2)),
            Multi(_)
        ));
        assert_eq!(parse("bytes=0-9, -10, 10-19", len, Some(2)), Full);
        assert_eq!(parse("bytes=0-9", len, Some(1)), Part { start: 0, end: 9 });
        assert_eq!(parse("bytes=0-9,20-29", len, Some(1)), Full);
        // A malformed element within the limit is 416; past it, the limit decides first.
        assert_eq!(parse("bytes=0-9, -10, x", len, Some(2)), Unsatisfiable);
        assert_eq!(parse("bytes=0-9, -10, 1-2, x", len, Some(2)), Full);
    }

    /// A hostile client asks for thousands of one-byte ranges: without `max_ranges`, the
    /// per-part overhead bound turns that into a plain 200 of the file; the parse stops at the
    /// limit, so its work is bounded by the header's length.
    #[test]
    fn many_tiny_ranges_are_declined() {
        let many: String = (0..5000).map(|i| format!("{i}-{i},")).collect();
        let many = format!("bytes={}", many.trim_end_matches(','));
        assert_eq!(parse_range(&many, 1 << 20), Full);
        // 16 one-byte parts of a 1000-byte file: 16 + 16 * 256 > 1000 + 4096? No: served.
        let some: String = (0..16).map(|i| format!("{i}-{i},")).collect();
        let some = format!("bytes={}", some.trim_end_matches(','));
        assert!(matches!(parse_range(&some, 1000), Multi(v) if v.len() == 16));
        // 20: 20 + 5120 > 5096: declined.
        let more: String = (0..20).map(|i| format!("{i}-{i},")).collect();
        let more = format!("bytes={}", more.trim_end_matches(','));
        assert_eq!(parse_range(&more, 1000), Full);
        // With `max_ranges` set, only the count and the total bound it (nginx).
        assert!(matches!(parse(&more, 1000, Some(20)), Multi(v) if v.len() == 20));
        // The same byte asked for over and over cannot add up past the file.
        let same: String = (0..2000).map(|_| "0-99,").collect();
        let same = format!("bytes={}", same.trim_end_matches(','));
        assert_eq!(parse(&same, 1000, Some(5000)), Full);
    }

    #[test]
    fn layout_matches_nginx() {
        let m = multipart(
            &[span(0, 2), span(8, 10)],
            10,
            Some("text/plain; charset=A"),
            42,
        );
        assert_eq!(
            m.content_type,
            "multipart/byteranges; boundary=00000000000000000042"
        );
        let mut wire = Vec::new();
        for (h, s) in &m.parts {
            wire.extend_from_slice(h);
            wire.extend(std::iter::repeat_n(b'x', (s.end - s.start) as usize));
        }
        wire.extend_from_slice(&m.tail);
        assert_eq!(
            String::from_utf8(wire.clone()).unwrap(),
            "\r\n--00000000000000000042\r\nContent-Type: text/plain; charset=A\r\n\
             Content-Range: bytes 0-1/10\r\n\r\nxx\
             \r\n--00000000000000000042\r\nContent-Type: text/plain; charset=A\r\n\
             Content-Range: bytes 8-9/10\r\n\r\nxx\
             \r\n--00000000000000000042--\r\n"
        );
        assert_eq!(m.len, wire.len() as u64);
        let bare = multipart(&[span(0, 1), span(1, 2)], 2, None, 7);
        assert!(!String::from_utf8_lossy(&bare.parts[0].0).contains("Content-Type"));
    }

    #[test]
    fn boundaries_have_twenty_digits() {
        assert_eq!(format!("{:020}", u64::MAX).len(), 20);
        assert_eq!(format!("{:020}", boundary()).len(), 20);
        assert_ne!(boundary(), boundary());
    }

    #[tokio::test]
    async fn body_streams_the_parts_from_the_file() {
        let path = std::env::temp_dir().join(format!("fb-range-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        let m = multipart(&[span(8, 10), span(0, 3), span(1, 2)], 10, None, 1);
        let len = m.len;
        let body = MultipartBody::new(file, m, None);
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(len));
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(got.len() as u64, len);
        let text = String::from_utf8(got.to_vec()).unwrap();
        assert!(text.contains("bytes 8-9/10\r\n\r\n89\r\n"), "{text}");
        assert!(text.contains("bytes 0-2/10\r\n\r\n012\r\n"), "{text}");
        assert!(text.contains("bytes 1-1/10\r\n\r\n1\r\n"), "{text}");
        assert!(text.ends_with("\r\n--00000000000000000001--\r\n"));
    }
}
