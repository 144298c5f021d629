//! Request header names as nginx validates them (`ignore_invalid_headers`,
//! `underscores_in_headers`: the rule is the request contract's, the dropping and its log
//! lines are here), and the head's size against nginx's header buffers.

use http::{header, HeaderMap};

use crate::http::conn::Conn;
pub use crate::http::contract::valid_header_name;

/// `ignore_invalid_headers on` (nginx's default): invalid headers are dropped before anything
/// reads them, so `X_Real_IP` never reaches an upstream beside `X-Real-IP` (applications
/// that map both to `HTTP_X_REAL_IP` would take either).
pub(super) fn drop_invalid_headers(h: &mut HeaderMap, underscores: bool, conn: &Conn) {
    if h.keys().all(|k| valid_header_name(k.as_str(), underscores)) {
        return;
    }
    let old = std::mem::take(h);
    let mut name = None;
    for (k, v) in old {
        // `None` continues the previous name's values.
        if let Some(k) = k {
            name = Some(k);
        }
        let Some(k) = &name else { continue };
        if valid_header_name(k.as_str(), underscores) {
            h.append(k.clone(), v);
        } else {
            crate::fblog!(
                Info,
                "client sent invalid header line: \"{}\", client: {}",
                k.as_str(),
                conn.client_ip()
            );
        }
    }
}

/// What of a request head did not fit nginx's header buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadTooLarge {
    /// The request line (414, "client sent too long URI").
    RequestLine,
    /// A header line, or the head as a whole (nginx's 494, answered as 400 "Request Header Or
    /// Cookie Too Large").
    Header,
}

/// Whether a request head fits nginx's buffers: its lines (each with its CRLF: the request
/// line, the header lines, the final empty line) fill `client_header_buffer_size` first, then
/// up to NUMBER large buffers of SIZE, in order, a line never split across buffers
/// (`ngx_http_alloc_large_header_buffer`: a line that does not fit where it starts moves to
/// the next buffer; one longer than SIZE fits none).
pub fn head_fits(
    client_header_buffer: usize,
    (number, size): (usize, usize),
    request_line: usize,
    header_lines: impl Iterator<Item = usize>,
) -> Result<(), HeadTooLarge> {
    let mut room = client_header_buffer;
    let mut large_left = number;
    let mut place = |len: usize| -> bool {
        if len <= room {
            room -= len;
            return true;
        }
        if len > size || large_left == 0 {
            return false;
        }
        large_left -= 1;
        room = size - len;
        true
    };
    if !place(request_line) {
        return Err(HeadTooLarge::RequestLine);
    }
    for len in header_lines.chain(std::iter::once(2)) {
        if !place(len) {
            return Err(HeadTooLarge::Header);
        }
    }
    Ok(())
}

/// The lengths of an HTTP/1.x request head as its lines were most likely written: `METHOD
/// TARGET HTTP/1.1` and `Name: value`, each with CRLF (hyper keeps neither the spacing nor
/// the bytes; a client that writes `Name:value` gets one byte per line of grace).
pub fn head_lines<'a>(
    method: &http::Method,
    uri: &http::Uri,
    headers: &'a HeaderMap,
) -> (usize, impl Iterator<Item = usize> + 'a) {
    let pq = uri.path_and_query().map_or(0, |p| p.as_str().len());
    let target = match (uri.scheme_str(), uri.authority()) {
        (Some(s), Some(a)) => s.len() + 3 + a.as_str().len() + pq,
        (None, Some(a)) => a.as_str().len(),
        _ => pq,
    };
    let request_line = method.as_str().len() + 1 + target + 1 + "HTTP/1.1\r\n".len();
    let lines = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + 2 + v.len() + 2);
    (request_line, lines)
}

/// `$request_length` of an HTTP/1.x head: nginx counts the bytes received, which differ from
/// the head as written again (`length`, CRLF line ends, `NAME: VALUE`) when a client ends
/// lines with a bare LF or leaves out the space. `read` (the bytes the socket delivered
/// since the previous request ended) is that head exactly when the request came alone
/// (`alone`: not pipelined, no body); it is taken when it is no longer than `length` and
/// short by at most two bytes per line, else `length` stands.
pub(super) fn raw_head_length(length: u64, fields: usize, read: u64, alone: bool) -> u64 {
    let lines = fields as u64 + 2;
    if alone && read <= length && read >= length.saturating_sub(2 * lines) {
        read
    } else {
        length
    }
}

/// The request has no body to read: neither `Transfer-Encoding` nor a `Content-Length`
/// other than 0.
pub(super) fn bodiless(h: &HeaderMap) -> bool {
    !h.contains_key(header::TRANSFER_ENCODING)
        && h.get(header::CONTENT_LENGTH)
            .is_none_or(|v| v.as_bytes() == b"0")
}

#[cfg(test)]
mod head_tests {
    use super::*;

    fn fits(cbs: usize, bufs: (usize, usize), rl: usize, h: &[usize]) -> Result<(), HeadTooLarge> {
        head_fits(cbs, bufs, rl, h.iter().copied())
    }

    #[test]
    fn lines_fill_buffers_as_nginx() {
        // Everything in the 1k client header buffer.
        assert_eq!(fits(1024, (4, 8192), 500, &[500, 22]), Ok(()));
        // A request line of exactly SIZE fits a large buffer; one byte more is 414.
        assert_eq!(fits(1024, (4, 8192), 8192, &[]), Ok(()));
        assert_eq!(
            fits(1024, (4, 8192), 8193, &[]),
            Err(HeadTooLarge::RequestLine)
        );
        // The same for a header line: 494 (400).
        assert_eq!(fits(1024, (4, 8192), 100, &[8192]), Ok(()));
        assert_eq!(
            fits(1024, (4, 8192), 100, &[8193]),
            Err(HeadTooLarge::Header)
        );
        // Lines do not split: four 5k lines take four buffers, a fifth finds none.
        assert_eq!(fits(1024, (4, 8192), 100, &[5000; 4]), Ok(()));
        assert_eq!(
            fits(1024, (4, 8192), 100, &[5000; 5]),
            Err(HeadTooLarge::Header)
        );
        // The final CRLF needs room too, in the buffer the last line is in.
        assert_eq!(fits(10, (1, 100), 10, &[100]), Err(HeadTooLarge::Header));
        assert_eq!(fits(10, (1, 102), 10, &[100]), Ok(()));
        // A large client_header_buffer_size holds a request line past SIZE.
        assert_eq!(fits(16384, (4, 8192), 10000, &[]), Ok(()));
    }

    #[test]
    fn head_lines_count_the_written_form() {
        let uri: http::Uri = "/a?b".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("host", "x".parse().unwrap());
        let (rl, lines) = head_lines(&http::Method::GET, &uri, &h);
        assert_eq!(rl, "GET /a?b HTTP/1.1\r\n".len());
        assert_eq!(lines.collect::<Vec<_>>(), ["host: x\r\n".len()]);
        let uri: http::Uri = "http://h:1/p".parse().unwrap();
        let (rl, _) = head_lines(&http::Method::GET, &uri, &h);
        assert_eq!(rl, "GET http://h:1/p HTTP/1.1\r\n".len());
    }
}
