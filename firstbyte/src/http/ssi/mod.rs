//! nginx's SSI filter (`ssi on`): the commands in a response body run as it streams through.
//!
//! [`parse`] cuts the body's chunks into text and commands; [`SsiBody`] is the filtered body:
//! it runs each command in order (`echo`, `set`, `if`/`elif`/`else`/`endif`, `config`,
//! `include`, `block`/`endblock`) and splices an `include`'s answer in its place. An include
//! is a subrequest the pipeline runs on the same task ([`Env::include`]); its answer is sent
//! in its place, in order. While one include is being waited for, the page is read on and the
//! includes after it are started side by side, as nginx does (at most 16 ahead and 64 KB of
//! text kept behind it); `wait=yes` and `set=` stop the page until that include is done, so a
//! command after it sees what it set.

pub mod parse;
mod run;

use std::future::Future;
use std::pin::Pin;

pub use run::SsiBody;

/// A subrequest's answer: its status and body.
pub type SubAnswer = (u16, crate::http::body::Body);
/// A subrequest under way.
pub type SubFuture = Pin<Box<dyn Future<Output = SubAnswer> + Send>>;

/// What the filter needs from the request it runs in.
pub trait Env: Send + Sync {
    /// The request variable `$name` (lower-case), None when it is not found.
    fn var(&self, name: &str) -> Option<String>;
    /// The request's `$uri`, for an include's relative path.
    fn uri(&self) -> &str;
    /// Starts a subrequest for `uri` (decoded, safe) and `args`; Err when the depth or count
    /// bound is reached.
    fn include(&self, uri: String, args: Option<String>) -> Result<SubFuture, &'static str>;
}

/// The filter's settings (from the location).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `ssi_silent_errors`.
    pub silent_errors: bool,
    /// `ssi_value_length`.
    pub value_length: usize,
}

/// nginx's default `errmsg`.
pub const ERRMSG: &str = "[an error occurred while processing the directive]";
/// nginx's default `timefmt`.
pub const TIMEFMT: &str = "%A, %d-%b-%Y %H:%M:%S %Z";

/// Whether `content_type` is one of `types` (`text/html` always; `*`: all).
pub fn type_applies(content_type: Option<&str>, types: &[String]) -> bool {
    let Some(ct) = content_type else {
        return false;
    };
    let mime = ct.split(';').next().unwrap_or("").trim();
    mime.eq_ignore_ascii_case("text/html")
        || types
            .iter()
            .any(|t| t == "*" || t.eq_ignore_ascii_case(mime))
}

/// `strftime(fmt)` of `secs` in UTC (`gmt`) or the local zone.
pub fn format_time(secs: i64, fmt: &str, gmt: bool) -> String {
    let Ok(cfmt) = std::ffi::CString::new(fmt) else {
        return String::new();
    };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: `tm` is plain data filled by gmtime_r/localtime_r; strftime writes at most
    // `buf.len()` bytes into `buf` and returns how many.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let ok = if gmt {
            !libc::gmtime_r(&t, &mut tm).is_null()
        } else {
            !libc::localtime_r(&t, &mut tm).is_null()
        };
        if !ok {
            return String::new();
        }
        let mut buf = vec![0u8; 256];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm);
        buf.truncate(n);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// nginx's NGX_ESCAPE_HTML: what `echo encoding="url"` escapes.
fn url_escaped(b: u8) -> bool {
    b <= 0x20
        || b >= 0x7f
        || matches!(
            b,
            b'"' | b'#' | b'%' | b'\'' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
        )
}

/// `echo`'s encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// As it is.
    None,
    /// nginx's URL escaping (`%3C`).
    Url,
    /// HTML entities (`&lt;`).
    Entity,
}

/// `value` as `echo` writes it.
pub fn encode(value: &str, enc: Encoding) -> String {
    match enc {
        Encoding::None => value.to_string(),
        Encoding::Url => {
            let mut s = String::with_capacity(value.len());
            for &b in value.as_bytes() {
                if url_escaped(b) {
                    s.push_str(&format!("%{b:02X}"));
                } else {
                    s.push(b as char);
                }
            }
            s
        }
        Encoding::Entity => {
            let mut s = String::with_capacity(value.len());
            for c in value.chars() {
                match c {
                    '<' => s.push_str("&lt;"),
                    '>' => s.push_str("&gt;"),
                    '&' => s.push_str("&amp;"),
                    '"' => s.push_str("&quot;"),
                    c => s.push(c),
                }
            }
            s
        }
    }
}

/// nginx's `ngx_http_parse_unsafe_uri` for an include: `%XX` decoded (`%3F` stays in the
/// path), `?` splits the
/// arguments, and a path that climbs out (`..` segment) or holds a NUL is refused.
pub fn split_include(uri: &str) -> Result<(String, Option<String>), &'static str> {
    let (path, args) = match uri.split_once('?') {
        Some((p, a)) => (p, Some(a.to_string())),
        None => (uri, None),
    };
    let decoded = percent_encoding::percent_decode_str(path).collect::<Vec<u8>>();
    if decoded.contains(&0) {
        return Err("unsafe URI");
    }
    let decoded = String::from_utf8(decoded).map_err(|_| "unsafe URI")?;
    if decoded.split('/').any(|seg| seg == "..") {
        return Err("unsafe URI");
    }
    Ok((decoded, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_as_nginx() {
        assert_eq!(encode("<test>", Encoding::Url), "%3Ctest%3E");
        assert_eq!(encode("<test>", Encoding::Entity), "&lt;test&gt;");
        assert_eq!(encode("<test>", Encoding::None), "<test>");
        assert_eq!(encode("a b&\"", Encoding::Entity), "a b&amp;&quot;");
    }

    #[test]
    fn include_uris() {
        assert_eq!(
            split_include("/tes%741.html?test=test"),
            Ok(("/test1.html".into(), Some("test=test".into())))
        );
        assert_eq!(
            split_include("/test1.html%3ftest=test"),
            Ok(("/test1.html?test=test".into(), None))
        );
        assert!(split_include("/a/../../etc/passwd").is_err());
        assert!(split_include("/a/%2e%2e/b").is_err());
        assert!(split_include("/a%00b").is_err());
    }

    #[test]
    fn types() {
        assert!(type_applies(Some("text/html; charset=utf-8"), &[]));
        assert!(!type_applies(Some("text/plain"), &[]));
        assert!(type_applies(Some("text/plain"), &["text/plain".into()]));
        assert!(type_applies(Some("image/png"), &["*".into()]));
        assert!(!type_applies(None, &["*".into()]));
    }

    #[test]
    fn time_format() {
        assert_eq!(format_time(0, "%Y-%m-%d %H", true), "1970-01-01 00");
        assert_eq!(
            format_time(0, TIMEFMT, true),
            "Thursday, 01-Jan-1970 00:00:00 GMT"
        );
    }
}
