//! nginx's autoindex module: a directory listing for a request ending in `/` whose directory
//! has no `index` file (the static module decides that and hands the directory over), in
//! `autoindex_format` `html`, `xml`, `json` or `jsonp`, byte for byte as nginx renders them.
//!
//! - Entries: every name in the directory but those starting with `.`; each is `stat`ed
//!   (a symlink shows as what it points to; a dangling one as itself, `other` in XML and
//!   JSON); one that cannot be read for permission is left out. Directories come first, then
//!   the rest, each group by the bytes of the name.
//! - HTML: `<a href>` holds the name percent-encoded (all but letters, digits, `-`, `.`, `_`,
//!   `~`: so `a:b` cannot become a scheme), the text the name HTML-escaped and cut to 50
//!   characters (`..&gt;` past them; characters are UTF-8 ones when the location's `charset`
//!   is `utf-8`, else bytes), directories with a trailing `/`; then the date (`dd-Mon-yyyy
//!   hh:mm`, UTC unless `autoindex_localtime`) and the size (bytes, or with
//!   `autoindex_exact_size off` rounded to `K`, `M`, `G`; `-` for a directory). The title
//!   is `$uri`, HTML-escaped.
//! - XML: `text/xml; charset=utf-8`, names HTML-escaped, `mtime` ISO 8601 UTC, `size` for
//!   regular files. JSON: `application/json`, names JSON-escaped, `mtime` an HTTP date,
//!   `size` for regular files. JSONP: `application/javascript`, `/* callback */\r\nNAME([...]);`
//!   where NAME is the `callback` argument (letters, digits, `_`, `.`, up to 128: else 400);
//!   without a callback, plain JSON.
//! - HEAD: the same status and headers, no body. Other methods never get here (405).

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};

use crate::conf::model::{AutoindexFormat, LocationConf};
use crate::http::body::Body;
use crate::log::OsError;

/// Characters of a name shown in the HTML listing before it is cut.
const NAME_LEN: usize = 50;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// A listing request, as the pipeline hands it over.
pub struct Listing<'a> {
    /// GET or HEAD.
    pub method: &'a Method,
    /// The normalised `$uri` (ends with `/`): the HTML title.
    pub uri: &'a str,
    /// The query string (`callback` for `jsonp`).
    pub args: Option<&'a str>,
    /// The directory, mapped from `root`/`alias`.
    pub dir: &'a Path,
    /// The location's settings.
    pub loc: &'a LocationConf,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The name's bytes, as the file system holds them.
    pub name: Vec<u8>,
    /// A directory (or a symlink to one).
    pub dir: bool,
    /// A regular file (or a symlink to one).
    pub file: bool,
    /// Modification time, Unix seconds.
    pub mtime: i64,
    /// Size in bytes.
    pub size: u64,
}

/// Answers the listing of `l.dir`; `Err` is the status for `error_page` (404 for a missing
/// directory, 403 for one that cannot be read, 400 for a bad `callback`, 500 otherwise).
pub fn serve(l: &Listing<'_>) -> Result<Response<Body>, StatusCode> {
    let mut format = l.loc.autoindex_format;
    let mut callback = "";
    if format == AutoindexFormat::Jsonp {
        callback = jsonp_callback(l.args).ok_or(StatusCode::BAD_REQUEST)?;
        if callback.is_empty() {
            format = AutoindexFormat::Json;
        }
    }
    let dir = open_dir(l.dir)?;
    let ctype = match format {
        AutoindexFormat::Html => "text/html",
        AutoindexFormat::Json => "application/json",
        AutoindexFormat::Jsonp => "application/javascript",
        AutoindexFormat::Xml => "text/xml; charset=utf-8",
    };
    // HEAD: the directory is opened (its errors are the same), not read.
    let body = if *l.method == Method::HEAD {
        Body::Empty
    } else {
        let entries = read_dir(dir, l.dir)?;
        let bytes = match format {
            AutoindexFormat::Html => {
                let utf8 = l
                    .loc
                    .charset
                    .as_deref()
                    .is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
                let offset = if l.loc.autoindex_localtime {
                    local_offset()
                } else {
                    0
                };
                html(l.uri, &entries, utf8, offset, l.loc.autoindex_exact_size)
            }
            AutoindexFormat::Json => json(&entries, None),
            AutoindexFormat::Jsonp => json(&entries, Some(callback)),
            AutoindexFormat::Xml => xml(&entries),
        };
        Body::full(bytes)
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    Ok(resp)
}

/// The `callback` argument when it is a valid name (`Some("")` when there is none), as
/// nginx's `ngx_http_autoindex_jsonp_callback`.
fn jsonp_callback(args: Option<&str>) -> Option<&str> {
    let Some(cb) = args.and_then(|a| {
        a.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            k.eq_ignore_ascii_case("callback").then_some(v)
        })
    }) else {
        return Some("");
    };
    if cb.len() > 128 {
        crate::fblog!(Info, "client sent too long callback name: \"{cb}\"");
        return None;
    }
    if !cb
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
    {
        crate::fblog!(Info, "client sent invalid callback name: \"{cb}\"");
        return None;
    }
    Some(cb)
}

/// Opens the directory; the error is nginx's status for it (logged as nginx does).
fn open_dir(dir: &Path) -> Result<std::fs::ReadDir, StatusCode> {
    std::fs::read_dir(dir).map_err(|e| {
        let (status, crit) = match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => {
                (StatusCode::NOT_FOUND, false)
            }
            Some(libc::EACCES) => (StatusCode::FORBIDDEN, false),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, true),
        };
        let (path, e) = (dir.display(), OsError(&e));
        if crit {
            crate::fblog!(Crit, "opendir() \"{path}\" failed ({e})");
        } else {
            crate::fblog!(Error, "opendir() \"{path}\" failed ({e})");
        }
        status
    })
}

/// The entries of `dir` (open as `rd`), sorted as nginx lists them.
pub fn read_dir(rd: std::fs::ReadDir, dir: &Path) -> Result<Vec<Entry>, StatusCode> {
    let mut entries = Vec::new();
    for de in rd {
        let de = de.map_err(|e| crit("readdir", dir, &e))?;
        let name = de.file_name().as_bytes().to_vec();
        if name.first() == Some(&b'.') {
            continue;
        }
        let path = de.path();
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) => {
                // A dangling (or looping) symlink: listed as the link itself.
                std::fs::symlink_metadata(&path).map_err(|e| crit("lstat", &path, &e))?
            }
            Err(e) => {
                let status = crit("stat", &path, &e);
                if e.raw_os_error() == Some(libc::EACCES) {
                    continue;
                }
                return Err(status);
            }
        };
        entries.push(Entry {
            name,
            dir: meta.is_dir(),
            file: meta.is_file(),
            mtime: meta.mtime(),
            size: meta.size(),
        });
    }
    entries.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    Ok(entries)
}

fn crit(call: &str, path: &Path, e: &io::Error) -> StatusCode {
    crate::fblog!(
        Crit,
        "{call}() \"{}\" failed ({})",
        path.display(),
        OsError(e)
    );
    StatusCode::INTERNAL_SERVER_ERROR
}

/// The local time zone's offset from UTC now, in seconds (nginx applies the current offset
/// to every entry).
fn local_offset() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let Ok(t) = libc::time_t::try_from(now) else {
        return 0;
    };
    // SAFETY: `tm` is plain data; localtime_r only writes into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return 0;
    }
    tm.tm_gmtoff
}

/// A civil UTC time: (year, month 1-12, day, hour, minute, second, weekday 0 = Sunday).
fn civil(secs: i64) -> (i64, usize, u32, u32, u32, u32, usize) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let wday = (days + 4).rem_euclid(7) as usize;
    let (h, m, s) = (
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    );
    (year, month, day, h, m, s, wday)
}

/// nginx's `ngx_escape_html`: `<`, `>`, `&` and `"`.
pub fn escape_html(out: &mut Vec<u8>, s: &[u8]) {
    for &c in s {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(c),
        }
    }
}

/// nginx's `NGX_ESCAPE_URI_COMPONENT`: all but letters, digits, `-`, `.`, `_`, `~`.
pub fn escape_uri_component(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        }
    }
}

/// nginx's `ngx_escape_json`: `"` and `\` backslashed, control characters as `\n`-style
/// escapes or `\u00XX`.
pub fn escape_json(out: &mut Vec<u8>, s: &[u8]) {
    for &c in s {
        match c {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f => out.extend_from_slice(format!("\\u{c:04X}").as_bytes()),
            _ => out.push(c),
        }
    }
}

/// The HTML listing. `utf8`: names are counted in UTF-8 characters (valid UTF-8 only, as
/// nginx); `offset`: seconds added to each mtime (`autoindex_localtime`).
pub fn html(uri: &str, entries: &[Entry], utf8: bool, offset: i64, exact: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + entries.len() * 160);
    b.extend_from_slice(b"<html>\r\n<head><title>Index of ");
    escape_html(&mut b, uri.as_bytes());
    b.extend_from_slice(b"</title></head>\r\n<body>\r\n<h1>Index of ");
    escape_html(&mut b, uri.as_bytes());
    b.extend_from_slice(b"</h1><hr><pre><a href=\"../\">../</a>\r\n");
    for e in entries {
        b.extend_from_slice(b"<a href=\"");
        escape_uri_component(&mut b, &e.name);
        if e.dir {
            b.push(b'/');
        }
        b.extend_from_slice(b"\">");
        let chars = utf8
            .then(|| std::str::from_utf8(&e.name).ok())
            .flatten()
            .map(|s| (s, s.chars().count()))
            .filter(|(_, n)| *n != e.name.len());
        let mut len = chars.map_or(e.name.len(), |(_, n)| n);
        let cut = len > NAME_LEN;
        let shown: &[u8] = match chars {
            Some((s, _)) => {
                let keep = if cut { NAME_LEN - 3 } else { NAME_LEN };
                let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
                &e.name[..end]
            }
            None => &e.name[..len.min(if cut { NAME_LEN - 3 } else { NAME_LEN })],
        };
        escape_html(&mut b, shown);
        if cut {
            b.extend_from_slice(b"..&gt;</a>");
        } else {
            if e.dir && len < NAME_LEN {
                b.push(b'/');
                len += 1;
            }
            b.extend_from_slice(b"</a>");
            b.resize(b.len() + (NAME_LEN - len), b' ');
        }
        let (y, mo, d, h, mi, ..) = civil(e.mtime + offset);
        let date = format!(" {d:02}-{}-{y} {h:02}:{mi:02} ", MONTHS[mo - 1]);
        b.extend_from_slice(date.as_bytes());
        let size = match (e.dir, exact) {
            (true, true) => "                  -".to_string(),
            (false, true) => format!("{:>19}", e.size),
            (true, false) => "      -".to_string(),
            (false, false) => rounded_size(e.size),
        };
        b.extend_from_slice(size.as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"</pre><hr></body>\r\n</html>\r\n");
    b
}

/// `autoindex_exact_size off`: bytes up to 9999, then K, M or G, rounded half up.
pub fn rounded_size(len: u64) -> String {
    const K: u64 = 1024;
    let (unit, scale) = if len >= K * K * K {
        (K * K * K, 'G')
    } else if len >= K * K {
        (K * K, 'M')
    } else if len > 9999 {
        (K, 'K')
    } else {
        return format!(" {len:>6}");
    };
    let mut n = len / unit;
    if len % unit >= unit / 2 {
        n += 1;
    }
    format!("{n:>6}{scale}")
}

/// The JSON listing, wrapped in `callback(...)` for JSONP.
pub fn json(entries: &[Entry], callback: Option<&str>) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + entries.len() * 100);
    if let Some(cb) = callback {
        b.extend_from_slice(b"/* callback */\r\n");
        b.extend_from_slice(cb.as_bytes());
        b.push(b'(');
    }
    b.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"\r\n{ \"name\":\"");
        escape_json(&mut b, &e.name);
        b.extend_from_slice(b"\", \"type\":\"");
        b.extend_from_slice(kind(e).as_bytes());
        b.extend_from_slice(b"\", \"mtime\":\"");
        let (y, mo, d, h, mi, s, wd) = civil(e.mtime);
        let date = format!(
            "{}, {d:02} {} {y:4} {h:02}:{mi:02}:{s:02} GMT",
            DAYS[wd],
            MONTHS[mo - 1]
        );
        b.extend_from_slice(date.as_bytes());
        if e.file {
            b.extend_from_slice(format!("\", \"size\":{}", e.size).as_bytes());
        } else {
            b.push(b'"');
        }
        b.extend_from_slice(b" }");
    }
    b.extend_from_slice(b"\r\n]");
    if callback.is_some() {
        b.extend_from_slice(b");");
    }
    b
}

/// The XML listing.
pub fn xml(entries: &[Entry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(40 + entries.len() * 100);
    b.extend_from_slice(b"<?xml version=\"1.0\"?>\r\n<list>\r\n");
    for e in entries {
        let kind = kind(e);
        let (y, mo, d, h, mi, s, _) = civil(e.mtime);
        let head = format!("<{kind} mtime=\"{y:4}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z");
        b.extend_from_slice(head.as_bytes());
        if e.file {
            b.extend_from_slice(format!("\" size=\"{}", e.size).as_bytes());
        }
        b.extend_from_slice(b"\">");
        escape_html(&mut b, &e.name);
        b.extend_from_slice(format!("</{kind}>\r\n").as_bytes());
    }
    b.extend_from_slice(b"</list>\r\n");
    b
}

fn kind(e: &Entry) -> &'static str {
    if e.dir {
        "directory"
    } else if e.file {
        "file"
    } else {
        "other"
    }
}

#[cfg(test)]
#[path = "autoindex_tests.rs"]
mod tests;
