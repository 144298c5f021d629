//! An HTTP/1.x response head as nginx writes it: hyper answers an HTTP/1.0 request with an
//! `HTTP/1.0` status line and title-cases header names (`Etag`, `X-Uri`); nginx's status line
//! is always `HTTP/1.1` and its header names keep their case (`ETag`, `WWW-Authenticate`, and
//! `add_header`'s names as written). The head is patched in place as hyper writes it: the
//! same length, only the version digit and the letters' case change.

/// nginx's names whose case is not hyper's title case.
const NGINX_NAMES: [&str; 2] = ["ETag", "WWW-Authenticate"];

/// `buf` with its status line's version and its header names as nginx writes them, or `None`
/// when `buf` does not start a response head (or nothing changes). `names`: header names in
/// the case to write (from `add_header`); lines cut off at the end of `buf` keep their case.
pub(super) fn patch_head(buf: &[u8], names: &[Box<str>]) -> Option<Vec<u8>> {
    if !buf.starts_with(b"HTTP/1.") {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    if buf.starts_with(b"HTTP/1.0 ") {
        out.get_or_insert_with(|| buf.to_vec())[7] = b'1';
    }
    // Skip the status line.
    let Some(mut at) = find_crlf(buf, 0).map(|e| e + 2) else {
        return out;
    };
    while at < buf.len() {
        let Some(end) = find_crlf(buf, at) else { break };
        if end == at {
            break; // the empty line: the head's end
        }
        let line = &buf[at..end];
        if let Some(colon) = memchr::memchr(b':', line) {
            let name = &line[..colon];
            let want = NGINX_NAMES
                .iter()
                .copied()
                .chain(names.iter().map(|n| &**n))
                .find(|n| n.len() == name.len() && n.as_bytes().eq_ignore_ascii_case(name));
            if let Some(w) = want {
                if w.as_bytes() != name {
                    out.get_or_insert_with(|| buf.to_vec())[at..at + colon]
                        .copy_from_slice(w.as_bytes());
                }
            }
        }
        at = end + 2;
    }
    out
}

/// Where the first CRLF at or after `from` starts: memchr finds each LF (this runs on every
/// HTTP/1.x response head).
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let lf = at + memchr::memchr(b'\n', buf.get(at..)?)?;
        if lf > from && buf[lf - 1] == b'\r' {
            return Some(lf - 1);
        }
        at = lf + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_and_names_as_nginx() {
        let head = b"HTTP/1.0 200 OK\r\nEtag: \"x\"\r\nX-Uri: /\r\nWww-Authenticate: Basic\r\n\r\nbody X-Uri: y";
        let names: Vec<Box<str>> = vec!["X-URI".into()];
        let p = patch_head(head, &names).unwrap();
        assert_eq!(
            &p[..],
            &b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\nX-URI: /\r\nWWW-Authenticate: Basic\r\n\r\nbody X-Uri: y"[..]
        );
    }

    #[test]
    fn crlf_found_as_a_pair() {
        assert_eq!(find_crlf(b"ab\r\ncd", 0), Some(2));
        assert_eq!(
            find_crlf(b"ab\r\ncd\r\n", 3),
            Some(6),
            "a CR before `from` is not taken"
        );
        assert_eq!(
            find_crlf(b"a\nb\rc\r\n", 0),
            Some(5),
            "a lone LF or CR is no line end"
        );
        assert_eq!(find_crlf(b"\n\r\n", 0), Some(1));
        assert_eq!(find_crlf(b"abc\r", 0), None);
        assert_eq!(find_crlf(b"abc", 7), None);
        assert_eq!(find_crlf(b"", 0), None);
    }

    #[test]
    fn leaves_other_bytes_alone() {
        assert_eq!(
            patch_head(b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", &[]),
            None
        );
        assert_eq!(patch_head(b"some body HTTP/1.0 ", &[]), None);
        // A name cut off by the end of the write keeps hyper's case; no panic.
        let p = patch_head(b"HTTP/1.0 200 OK\r\nEta", &[]).unwrap();
        assert_eq!(&p[..], b"HTTP/1.1 200 OK\r\nEta");
        assert_eq!(patch_head(b"HTTP/1.", &[]), None);
    }
}
