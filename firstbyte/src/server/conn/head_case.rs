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
    if names.is_empty() {
        return patch_known(buf, out);
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

/// [`patch_head`] with only [`NGINX_NAMES`] to restore: hyper title-cases every name
/// (`title_case_headers`), so they come as `Etag` and `Www-Authenticate` at a line's start.
/// One pass over the capitals `E` and `W` finds them, instead of every line being cut out and
/// compared; a candidate counts only before the head's empty line and when its line is whole
/// (as in the general scan, a line cut off by the end of `buf` keeps hyper's case).
fn patch_known(buf: &[u8], mut out: Option<Vec<u8>>) -> Option<Vec<u8>> {
    const HYPER: [&[u8]; 2] = [b"Etag:", b"Www-Authenticate:"];
    for at in memchr::memchr2_iter(b'E', b'W', buf) {
        let k = usize::from(buf[at] == b'W');
        if at < 2 || &buf[at - 2..at] != b"\r\n" || !buf[at..].starts_with(HYPER[k]) {
            continue;
        }
        // Past the head's end (its empty line comes before): the body's bytes.
        if memchr::memmem::find(&buf[..at], b"\r\n\r\n").is_some() || find_crlf(buf, at).is_none() {
            break;
        }
        let want = NGINX_NAMES[k].as_bytes();
        out.get_or_insert_with(|| buf.to_vec())[at..at + want.len()].copy_from_slice(want);
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
    fn known_names_alone_as_the_general_scan() {
        let heads: [&[u8]; 7] = [
            b"HTTP/1.1 200 OK\r\nServer: x\r\nEtag: \"x\"\r\nWww-Authenticate: Basic\r\n\r\nEtag: body\r\n",
            b"HTTP/1.0 200 OK\r\nEtag: \"x\"\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX-Etag: a\r\nEtagx: b\r\n\r\n",
            b"HTTP/1.1 401 OK\r\nWww-Authenticate: a\r\nWww-Authenticate: b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: x\r\nEta",
            b"HTTP/1.1 200 OK\r\nServer: x\r\nEtag: \"cut",
            b"HTTP/1.1 200 OK\r\n\r\n\r\nEtag: after the head",
        ];
        for h in heads {
            let general = {
                let extra: Vec<Box<str>> = vec!["X-Never-Sent".into()];
                patch_head(h, &extra)
            };
            assert_eq!(
                patch_head(h, &[]),
                general,
                "{}",
                String::from_utf8_lossy(h)
            );
        }
        let p = patch_head(heads[0], &[]).unwrap();
        assert_eq!(
            &p[..],
            &b"HTTP/1.1 200 OK\r\nServer: x\r\nETag: \"x\"\r\nWWW-Authenticate: Basic\r\n\r\nEtag: body\r\n"[..]
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
