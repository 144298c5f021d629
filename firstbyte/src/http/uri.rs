//! Request paths: from the bytes of a request target to nginx's `$uri`, and back to a
//! `Location` header.
//!
//! The pipeline splits the target into path and query ([`split_target`]), turns the path into
//! the normalised `$uri` ([`normalize_path`]) that locations match and `root`/`alias` map to
//! files, and percent-encodes a `$uri` again when it goes back out in a redirect
//! ([`encode_path`]).
//!
//! Normalisation follows nginx's `ngx_http_parse_complex_uri` with `merge_slashes on`:
//! percent-escapes are decoded first (`%2e` and `%2f`/`%2F` included), then repeated slashes
//! are merged and `.`/`..` segments resolved. A `..` that would climb above `/` is refused, so
//! a mapped file path can never escape `root` or `alias`. Where nginx keeps raw bytes,
//! firstbyte refuses a path that is not UTF-8 once decoded (`$uri` is a `String` here): the
//! caller answers 400, as for every other [`UriError`].

use percent_encoding::{AsciiSet, CONTROLS};

/// Why a request path was refused; the caller answers 400 ("client sent invalid request").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// The path does not start with `/` (nor is it empty).
    #[error("client sent invalid request: the path does not start with \"/\"")]
    NotAbsolute,
    /// A `%` not followed by two hexadecimal digits.
    #[error("client sent invalid request: invalid percent-escape in the path")]
    InvalidEscape,
    /// A NUL byte, raw or as `%00`.
    #[error("client sent invalid request: NUL in the path")]
    Nul,
    /// A `..` segment that would climb above `/`.
    #[error("client sent invalid request: the path climbs above \"/\"")]
    AboveRoot,
    /// The decoded path is not UTF-8.
    #[error("client sent invalid request: the decoded path is not UTF-8")]
    NotUtf8,
}

/// Splits a request target into its path and its query (the text after the first `?`,
/// without it; `Some("")` for a bare `?`).
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    }
}

/// A URI an upstream names (`X-Accel-Redirect`), checked as nginx's
/// `ngx_http_parse_unsafe_uri`: split at the first `?`, the path unescaped (an invalid
/// escape stays as written), and refused (None) when empty, with a NUL, or with a `..`
/// segment anywhere. The path is not otherwise normalized.
pub fn unsafe_uri(target: &str) -> Option<(String, Option<String>)> {
    let (path, args) = split_target(target);
    if path.is_empty() {
        return None;
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) => hex(h).zip(hex(l)).map(|(h, l)| (h << 4) | l),
            _ => None,
        };
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    let path = String::from_utf8(out).ok()?;
    if path.contains('\0') || path.split('/').any(|seg| seg == "..") {
        return None;
    }
    Some((path, args.map(str::to_string)))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn percent_decode(raw: &str) -> Result<Vec<u8>, UriError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = match bytes[i] {
            b'%' => {
                let hi = bytes.get(i + 1).copied().and_then(hex);
                let lo = bytes.get(i + 2).copied().and_then(hex);
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(UriError::InvalidEscape);
                };
                i += 3;
                (hi << 4) | lo
            }
            b => {
                i += 1;
                b
            }
        };
        if b == 0 {
            return Err(UriError::Nul);
        }
        out.push(b);
    }
    Ok(out)
}

/// Turns the path of a request target (no query) into nginx's `$uri`: percent-decoded,
/// slashes merged, `.` and `..` resolved.
///
/// A trailing `/`, `/.` or `/..` leaves a trailing slash (`/a/b/..` → `/a/`), as nginx does.
/// An empty path is `/`. Runs in time linear in the input.
pub fn normalize_path(raw: &str) -> Result<String, UriError> {
    // Most paths are already in normal form: copy them as they are, without decoding into a
    // buffer and collecting segments (two allocations per request fewer).
    if is_normal(raw) {
        return Ok(raw.to_owned());
    }
    normalize_slow(raw)
}

/// Whether `raw` is its own normal form: absolute, no escape and no NUL, and no empty, `.` or
/// `..` segment except the empty one after a trailing slash.
fn is_normal(raw: &str) -> bool {
    if !raw.starts_with('/') || raw.bytes().any(|b| b == b'%' || b == 0) {
        return false;
    }
    let mut segs = raw.split('/').skip(1).peekable();
    while let Some(seg) = segs.next() {
        match seg {
            "." | ".." => return false,
            "" if segs.peek().is_some() => return false,
            _ => {}
        }
    }
    true
}

/// [`normalize_path`] for a path that needs work: decoding, merging, `.` and `..`.
fn normalize_slow(raw: &str) -> Result<String, UriError> {
    if raw.is_empty() {
        return Ok("/".to_string());
    }
    if !raw.starts_with('/') {
        return Err(UriError::NotAbsolute);
    }
    let decoded = String::from_utf8(percent_decode(raw)?).map_err(|_| UriError::NotUtf8)?;
    let mut segments: Vec<&str> = Vec::new();
    let mut trailing_slash = false;
    // The first piece is the empty text before the leading '/'.
    for seg in decoded.split('/').skip(1) {
        trailing_slash = matches!(seg, "" | "." | "..");
        match seg {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(UriError::AboveRoot);
                }
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if trailing_slash || segments.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Bytes escaped in a path sent back out: controls, space, the delimiters `"#%<>?`, the
/// characters RFC 3986 leaves out of paths (`` ` ``, `{}`, `\`, `^`, `|`), and every non-ASCII
/// byte (the set always escapes those).
const PATH_ESCAPE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|');

/// Percent-encodes a `$uri` for a `Location` header, so that it decodes back to the same `$uri`.
pub fn encode_path(path: &str) -> String {
    percent_encoding::utf8_percent_encode(path, PATH_ESCAPE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_uris_as_nginx() {
        let ok = |t: &str| unsafe_uri(t).map(|(p, a)| (p, a.unwrap_or_default()));
        assert_eq!(
            ok("/index.html"),
            Some(("/index.html".into(), String::new()))
        );
        assert_eq!(ok("/foo?bar"), Some(("/foo".into(), "bar".into())));
        assert_eq!(ok("/foo%20bar"), Some(("/foo bar".into(), String::new())));
        assert_eq!(ok("/a%zz"), Some(("/a%zz".into(), String::new())));
        for bad in [
            "",
            "?x",
            "..",
            "../foo",
            "/foo/..",
            "/foo/.%2e",
            "/a/../b",
            "/a%00",
        ] {
            assert_eq!(unsafe_uri(bad), None, "{bad}");
        }
        assert!(unsafe_uri("/a..b/..c").is_some());
    }

    fn n(s: &str) -> Result<String, UriError> {
        normalize_path(s)
    }

    /// The fast path gives what the full normalisation gives, on paths it takes and on
    /// paths it must refuse to take.
    #[test]
    fn fast_path_agrees_with_the_full_normalisation() {
        for p in [
            "/",
            "/a",
            "/a/",
            "/a/b.html",
            "/a//b",
            "//",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/./a",
            "/a/../b",
            "/%2e%2e/x",
            "/a%2Fb",
            "/%00",
            "/a\0b",
            "a",
            "",
            "/a/b/",
            "/.a/..b/...",
            "/a b",
            "/é/ü",
            "/a/./",
            "/a//",
            "/%41",
        ] {
            assert_eq!(normalize_path(p), normalize_slow(p), "{p:?}");
        }
        assert!(is_normal("/a/b/") && is_normal("/") && is_normal("/.a/..b/..."));
        assert!(!is_normal("/a//b") && !is_normal("/a/.") && !is_normal("/%41"));
    }

    #[test]
    fn plain_paths_are_kept() {
        assert_eq!(n("/").unwrap(), "/");
        assert_eq!(n("/index.html").unwrap(), "/index.html");
        assert_eq!(n("/a/b/").unwrap(), "/a/b/");
        assert_eq!(n("").unwrap(), "/");
    }

    #[test]
    fn climbing_above_root_is_refused() {
        assert_eq!(n("/../etc/passwd"), Err(UriError::AboveRoot));
        assert_eq!(n("/.."), Err(UriError::AboveRoot));
        assert_eq!(n("/a/../../etc/passwd"), Err(UriError::AboveRoot));
        assert_eq!(n("/a/%2e%2e/%2e%2e/etc/passwd"), Err(UriError::AboveRoot));
        assert_eq!(n("/a/%2E%2E/%2e./etc/passwd"), Err(UriError::AboveRoot));
        assert_eq!(n("/a%2f..%2f..%2fetc/passwd"), Err(UriError::AboveRoot));
        assert_eq!(n("/a%2F..%2F..%2Fetc/passwd"), Err(UriError::AboveRoot));
    }

    #[test]
    fn dot_segments_resolve_inside_root() {
        assert_eq!(n("/a/%2e%2e/etc/passwd").unwrap(), "/etc/passwd");
        assert_eq!(n("/a%2f..%2fb").unwrap(), "/b");
        assert_eq!(n("/./a//b/").unwrap(), "/a/b/");
        assert_eq!(n("/a/b/..").unwrap(), "/a/");
        assert_eq!(n("/a/b/.").unwrap(), "/a/b/");
        assert_eq!(n("/a/./b/../c").unwrap(), "/a/c");
        assert_eq!(n("/a/..").unwrap(), "/");
        assert_eq!(n("//a///b").unwrap(), "/a/b");
        // Not dot segments: names that merely contain dots.
        assert_eq!(n("/a/.../b").unwrap(), "/a/.../b");
        assert_eq!(n("/a/..b/.c").unwrap(), "/a/..b/.c");
    }

    #[test]
    fn bad_escapes_and_nul_are_refused() {
        assert_eq!(n("/%zz"), Err(UriError::InvalidEscape));
        assert_eq!(n("/a%"), Err(UriError::InvalidEscape));
        assert_eq!(n("/a%2"), Err(UriError::InvalidEscape));
        assert_eq!(n("/a%g0"), Err(UriError::InvalidEscape));
        assert_eq!(n("/a%00b"), Err(UriError::Nul));
        assert_eq!(n("/a\0b"), Err(UriError::Nul));
    }

    #[test]
    fn relative_paths_are_refused() {
        assert_eq!(n("a/b"), Err(UriError::NotAbsolute));
        assert_eq!(n("%2fa"), Err(UriError::NotAbsolute));
        assert_eq!(n("*"), Err(UriError::NotAbsolute));
    }

    #[test]
    fn decoding_and_utf8() {
        assert_eq!(n("/a%20b").unwrap(), "/a b");
        assert_eq!(n("/caf%C3%A9").unwrap(), "/café");
        assert_eq!(n("/café").unwrap(), "/café");
        assert_eq!(n("/%25zz").unwrap(), "/%zz");
        assert_eq!(n("/a+b").unwrap(), "/a+b");
        // Latin-1 é alone is not UTF-8.
        assert_eq!(n("/caf%E9"), Err(UriError::NotUtf8));
        assert_eq!(n("/%ff%fe"), Err(UriError::NotUtf8));
    }

    #[test]
    fn backslash_is_an_ordinary_character() {
        assert_eq!(n("/a\\..\\b").unwrap(), "/a\\..\\b");
        assert_eq!(n("/..\\etc").unwrap(), "/..\\etc");
        assert_eq!(n("/%5c..%5cetc").unwrap(), "/\\..\\etc");
    }

    #[test]
    fn very_long_input_is_handled() {
        let deep = "/a".repeat(100_000) + &"/..".repeat(100_000);
        assert_eq!(n(&deep).unwrap(), "/");
        let too_deep = "/a".repeat(100_000) + &"/..".repeat(100_001);
        assert_eq!(n(&too_deep), Err(UriError::AboveRoot));
        let slashes = "/".repeat(1_000_000) + "x";
        assert_eq!(n(&slashes).unwrap(), "/x");
    }

    #[test]
    fn split_target_cases() {
        assert_eq!(split_target("/a?b=1"), ("/a", Some("b=1")));
        assert_eq!(split_target("/a?"), ("/a", Some("")));
        assert_eq!(split_target("/a"), ("/a", None));
        assert_eq!(split_target("/a?b?c"), ("/a", Some("b?c")));
    }

    #[test]
    fn encode_round_trips() {
        for uri in [
            "/a b/c",
            "/100%/x?y#z",
            "/café/ü",
            "/a\\b",
            "/plain/path.html",
        ] {
            let enc = encode_path(uri);
            assert!(!enc.contains(' ') && !enc.contains('?') && !enc.contains('#'));
            assert!(enc.is_ascii());
            assert_eq!(n(&enc).unwrap(), uri);
        }
        assert_eq!(encode_path("/a b"), "/a%20b");
        assert_eq!(encode_path("/p/q.html"), "/p/q.html");
    }
}
