//! Static files, as nginx's static, index and gzip_static modules serve them.
//!
//! Data flow: the pipeline normalises the request path (`uri::normalize_path`), picks the
//! location, evaluates its `root`/`alias` and maps `$uri` to a file path with [`map_path`].
//! [`serve`] then decides everything about the file response from the request head, the
//! location and what the file system says (through an [`OpenFileCache`], from `open_file_cache`):
//! a response with a [`Body::file`] body, a redirect for a directory named without its
//! trailing slash, or a bare status for the pipeline's `error_page` handling. It never reads
//! the file itself: the body reads it with `pread` while it is sent.
//!
//! nginx's behaviour kept here:
//! - `GET` and `HEAD` only (anything else: 405); `HEAD` has the same head and no body.
//! - `Content-Type` from `types` by the lower-cased extension of the file name (the text after
//!   its last `.`), else `default_type`; `ETag` `"<mtime hex>-<size hex>"`, `Last-Modified`,
//!   `Accept-Ranges: bytes`, `Content-Length`.
//! - Conditionals in RFC 9110's order: `If-Match` / `If-Unmodified-Since` → 412;
//!   `If-None-Match` (weak comparison, `*`, lists) → 304; `If-Modified-Since` (only without
//!   `If-None-Match`) → 304 when the file's mtime is at or before the date (`if_modified_since
//!   before`, the default here; nginx's default `exact` wants the exact date; `off`).
//!   A 304 keeps `ETag`, `Last-Modified` and `Vary` and drops the content headers.
//! - `Range: bytes=` as nginx's range filter (`http::range`): one range → 206 with
//!   `Content-Range`; several → 206 `multipart/byteranges` streamed from the file (the whole
//!   file with 200 past `max_ranges` or nginx's size bounds); a malformed or unsatisfiable
//!   set → 416 with `Content-Range: bytes */LEN`; `If-Range` (an ETag, compared strongly, or
//!   the exact `Last-Modified` date). `Accept-Ranges: bytes` on a 200 unless `max_ranges 0`.
//! - `charset` / `source_charset` (`http::charset`) before the ranges, as nginx's filter
//!   order: the parts' `Content-Type` names the charset and the bytes are recoded as read.
//! - A directory: without a trailing slash → redirect to `$uri/`; with it → the first `index`
//!   entry that exists (a regular file is served, a directory redirected to), else the
//!   directory's listing with `autoindex on` ([`FileOutcome::Autoindex`]), else 403
//!   ("directory index of ... is forbidden"). Index entries with variables and absolute
//!   ones (`/index.html`) need the pipeline's internal redirect and are skipped here.
//! - Missing → 404; permission denied or a refused symlink → 403; not a regular file (fifo,
//!   device, socket) → 404, as nginx's "is not a regular file".
//! - `gzip_static on`: `FILE.gz` with `Content-Encoding: gzip` when the client accepts gzip
//!   (and no `Via`, nginx's `gzip_proxied off`); `always`: `FILE.gz` whatever the client says.
//!   A firstbyte extension: `FILE.br` first, with `Content-Encoding: br`, when the client
//!   accepts br. The variant may exist without the original. Length, `ETag` and
//!   `Last-Modified` come from the compressed file; the type from the original name. With
//!   `gzip_vary on`, `Vary: Accept-Encoding` goes on every response for which a variant exists.
//! - `disable_symlinks on`: every component of the path is opened with `openat` and
//!   `O_NOFOLLOW`, from `/` (or from the end of `from=`) down, and any symlink is refused (the
//!   last component: 403; a directory on the way, opened with `O_DIRECTORY`: 404, as nginx);
//!   `if_not_owner`: a symlink is followed only when it and its target have the same owner.
//!   The check is race-free: each step opens relative to the directory descriptor the
//!   previous step opened (`http::open_file`).

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{
    HeaderValue, ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED,
    RANGE, VARY,
};
use http::{HeaderMap, Method, Response, StatusCode};

use super::body::Body;
use super::charset;
use super::compress::{accepted, gzip_ok};
use super::range;
pub use super::range::{parse_range, ByteRange};
use super::uri::encode_path;
use crate::conf::model::IfModifiedSince;
use crate::conf::model::{DocRoot, GzipStatic, LocationConf};

pub use super::open_file::{FileKind, FileMeta, OpenFile};
pub use super::open_file_cache::OpenFileCache;

/// A request for a file, as the pipeline hands it over.
pub struct FileRequest<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The request headers (conditionals, `Range`, `Accept-Encoding`).
    pub headers: &'a HeaderMap,
    /// The normalised `$uri`.
    pub uri: &'a str,
    /// The file system path, already mapped from `root`/`alias` ([`map_path`]).
    pub path: &'a Path,
    /// The location's settings.
    pub loc: &'a LocationConf,
    /// The location's `disable_symlinks from=` value, evaluated for this request.
    pub symlinks_from: Option<&'a str>,
    /// The `Last-Modified` that `add_header` will give the response, which `If-Range`
    /// compares (nginx's headers filter runs before its range filter): `None`, the file's;
    /// `Some(None)`, none (removed, or not a date).
    pub if_range_date: Option<Option<i64>>,
    /// An instant at or after the request arrived (its connection's last read), if known: a
    /// file check made after it may serve this request too.
    pub received: Option<std::time::Instant>,
}

/// What [`serve`] decided.
pub enum FileOutcome {
    /// A response to send as it is: 200, 206, 304 or 416 (the 416 has an empty body and
    /// `Content-Range: bytes */LEN`).
    Response(Response<Body>),
    /// A directory named without its trailing slash: answer 301 with this `Location` path
    /// (`$uri/`, percent-encoded; the pipeline adds scheme and host as it does for its other
    /// redirects, and `?$args` as nginx does).
    Redirect(String),
    /// An error status (404, 403, 405, 412, 500) for the pipeline's `error_page` handling.
    Status(StatusCode),
    /// A directory (`$uri` ends with `/`) with no `index` file, in a location with
    /// `autoindex on`: the pipeline answers with its listing (`http::autoindex`), which
    /// needs the query string.
    Autoindex,
    /// An `index` entry that applies: an internal redirect to this URI, as nginx's index
    /// module makes (`$uri` becomes `/dir/index.html` and the locations are searched again).
    Internal(String),
}

impl std::fmt::Debug for FileOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileOutcome::Response(r) => f
                .debug_struct("Response")
                .field("status", &r.status())
                .field("headers", r.headers())
                .finish_non_exhaustive(),
            FileOutcome::Redirect(l) => f.debug_tuple("Redirect").field(l).finish(),
            FileOutcome::Status(s) => f.debug_tuple("Status").field(s).finish(),
            FileOutcome::Autoindex => f.write_str("Autoindex"),
            FileOutcome::Internal(u) => f.debug_tuple("Internal").field(u).finish(),
        }
    }
}

/// Maps `$uri` to a file path: `root` + `$uri`, or `alias` + (`$uri` without the location's
/// prefix); in a regex location the evaluated `alias` is the whole path, as nginx does.
///
/// `root_value` is the evaluated `root`/`alias` value. `None` means the mapping would climb
/// out of the document root (a `..` that is not in `root_value` itself: nginx's classic
/// `location /img { alias /data/images/; }` + `/img../secret` escape, or a `..` captured into
/// a regex `alias`); the pipeline answers 404.
pub fn map_path(loc: &LocationConf, uri: &str, root_value: &str) -> Option<PathBuf> {
    let rest = match &loc.root {
        DocRoot::Root(_) => uri,
        // A regex location's alias is the whole path, captures from the URI included: it
        // may hold no `..` at all.
        DocRoot::Alias(_) if loc.alias_whole => {
            return (parent_dirs(root_value) == 0).then(|| root_value.into());
        }
        DocRoot::Alias(_) => uri.strip_prefix(loc.prefix.as_str()).unwrap_or(uri),
    };
    // The request may not climb above the root: no more `..` segments in the joined path
    // than the root itself has. Most paths have no `..` at all and skip the counting.
    let mut joined = String::with_capacity(root_value.len() + rest.len());
    joined.push_str(root_value);
    joined.push_str(rest);
    if joined.contains("..") && parent_dirs(&joined) > parent_dirs(root_value) {
        return None;
    }
    Some(joined.into())
}

/// A `try_files` candidate's path: as [`map_path`], except that a regex location's own
/// `alias` gets the candidate appended (nginx's `add_uri_to_alias`: `location ~ \.php$ {
/// alias /srv/app; try_files $uri =404; }` tries `/srv/app$uri`). Neither the alias (with
/// its captures) nor the candidate may climb with `..`.
pub fn map_try_path(loc: &LocationConf, cand: &str, root_value: &str) -> Option<PathBuf> {
    if !(loc.alias_whole && matches!(loc.root, DocRoot::Alias(_))) {
        return map_path(loc, cand, root_value);
    }
    let joined = format!("{root_value}{cand}");
    (parent_dirs(&joined) == 0).then(|| joined.into())
}

/// `..` segments in `p` (what `Path::components` calls `ParentDir`), counted without
/// building components.
fn parent_dirs(p: &str) -> usize {
    p.split('/').filter(|s| *s == "..").count()
}

/// Serves a file request (see the module overview for the rules).
pub fn serve(req: &FileRequest<'_>, cache: &OpenFileCache) -> FileOutcome {
    if *req.method != Method::GET && *req.method != Method::HEAD {
        return FileOutcome::Status(StatusCode::METHOD_NOT_ALLOWED);
    }
    if req.uri.ends_with('/') {
        return serve_index(req, cache);
    }
    serve_path(req, req.path, req.uri, cache)
}

/// Serves `path` (a variant of it first, with `gzip_static`); `uri` names it in a redirect.
fn serve_path(req: &FileRequest<'_>, path: &Path, uri: &str, cache: &OpenFileCache) -> FileOutcome {
    let (variant, vary) = precompressed(req, path, cache);
    let (file, encoding) = match variant {
        Some((f, enc)) => (f, Some(enc)),
        None => match cache.open(path, req.loc, req.symlinks_from, req.received) {
            Ok(f) => (f, None),
            Err(e) => return FileOutcome::Status(status_for(&e)),
        },
    };
    match file.meta.kind {
        FileKind::Dir => FileOutcome::Redirect(encode_path(uri) + "/"),
        FileKind::Other => FileOutcome::Status(StatusCode::NOT_FOUND),
        FileKind::File => respond(req, path, &file, encoding, vary),
    }
}

/// `$uri` ends with `/`: the index module's rules.
fn serve_index(req: &FileRequest<'_>, cache: &OpenFileCache) -> FileOutcome {
    let mut dir_tested = false;
    for entry in &req.loc.index {
        // Entries with variables are the pipeline's job.
        let Some(name) = entry.as_static() else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        if name.starts_with('/') {
            return FileOutcome::Internal(name.to_string());
        }
        let candidate = req.path.join(name);
        match cache.open(&candidate, req.loc, req.symlinks_from, req.received) {
            Ok(_) => return FileOutcome::Internal(format!("{}{}", req.uri, name)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if !dir_tested {
                    if let Some(status) = test_dir(req, cache) {
                        return FileOutcome::Status(status);
                    }
                    dir_tested = true;
                }
            }
            Err(e) => return FileOutcome::Status(status_for(&e)),
        }
    }
    if !dir_tested {
        if let Some(status) = test_dir(req, cache) {
            return FileOutcome::Status(status);
        }
    }
    if req.loc.autoindex {
        return FileOutcome::Autoindex;
    }
    FileOutcome::Status(StatusCode::FORBIDDEN)
}

/// The error status when the request's path is not a usable directory.
fn test_dir(req: &FileRequest<'_>, cache: &OpenFileCache) -> Option<StatusCode> {
    match cache.open(req.path, req.loc, req.symlinks_from, req.received) {
        Ok(f) if f.meta.kind == FileKind::Dir => None,
        Ok(_) => Some(StatusCode::NOT_FOUND),
        Err(e) => Some(status_for(&e)),
    }
}

/// nginx's mapping of open errors to statuses.
fn status_for(e: &io::Error) -> StatusCode {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => StatusCode::NOT_FOUND,
        // A socket file cannot be opened: "not a regular file", as for a fifo.
        Some(libc::ENXIO) => StatusCode::NOT_FOUND,
        Some(libc::EACCES | libc::EPERM | libc::ELOOP | libc::EMLINK) => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `gzip_static` choice: the variant to send, if any, and whether the response varies
/// (`gzip_vary on` and some variant exists).
fn precompressed(
    req: &FileRequest<'_>,
    path: &Path,
    cache: &OpenFileCache,
) -> (Option<(Arc<OpenFile>, &'static str)>, bool) {
    let mode = req.loc.gzip_static;
    if mode == GzipStatic::Off {
        return (None, false);
    }
    let vary = req.loc.compression.gzip_vary;
    let br_ok = accepted(req.headers).br;
    let gzip_ok =
        mode == GzipStatic::Always || gzip_ok(req.headers, &HeaderMap::new(), &req.loc.compression);
    let mut exists = false;
    for (suffix, encoding, ok) in [(".br", "br", br_ok), (".gz", "gzip", gzip_ok)] {
        if !ok && !vary {
            continue;
        }
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        if let Ok(f) = cache.open(Path::new(&name), req.loc, req.symlinks_from, req.received) {
            if f.meta.kind == FileKind::File {
                exists = true;
                if ok {
                    return (Some((f, encoding)), vary);
                }
            }
        }
    }
    (None, vary && exists)
}

/// The response for a regular file (already open).
fn respond(
    req: &FileRequest<'_>,
    path: &Path,
    file: &OpenFile,
    encoding: Option<&'static str>,
    vary: bool,
) -> FileOutcome {
    let meta = &file.meta;
    let cached = file.headers();
    // `etag off`: none sent, and none to match (only `*` does, as nginx).
    let etag = if req.loc.etag {
        cached.etag.as_str()
    } else {
        ""
    };
    // Sized for a file response's headers plus `finish`'s (Server, Date): no regrowth; a map
    // an earlier response's HTTP/2 head gave back when there is one.
    let mut headers = crate::http::head_pool::take();
    if let (Some(v), true) = (&cached.etag_value, req.loc.etag) {
        headers.insert(ETAG, v.clone());
    }
    if let Some(v) = &cached.last_modified {
        headers.insert(LAST_MODIFIED, v.clone());
    }
    if vary {
        headers.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    match preconditions_with(req.headers, etag, meta.mtime, req.loc.if_modified_since) {
        Precondition::Failed => return FileOutcome::Status(StatusCode::PRECONDITION_FAILED),
        Precondition::NotModified => {
            return FileOutcome::Response(response(StatusCode::NOT_MODIFIED, headers, Body::Empty))
        }
        Precondition::Proceed => {}
    }
    let ctype = content_type(req.loc, path);
    let mut ctype_value = cached.content_type(ctype);
    // nginx's charset filter runs before its range filter: the parts name the charset too.
    let mut recode = None;
    if let Some(plan) = charset::plan(req.loc, ctype_value.as_ref(), encoding.is_some(), 200) {
        if plan.content_type.is_some() {
            ctype_value = plan.content_type;
        }
        recode = plan.recode;
    }
    if let Some(v) = &ctype_value {
        headers.insert(CONTENT_TYPE, v.clone());
    }
    if let Some(enc) = encoding {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(enc));
    }
    let len = meta.len;
    // `max_ranges 0`: no ranges, and none offered. Nor for a page the SSI filter will run
    // (nginx's SSI filter turns ranges off before its range filter sees them).
    let ssi_page = req.loc.ssi
        && encoding.is_none()
        && crate::http::ssi::type_applies(Some(ctype), &req.loc.ssi_types);
    let ranges_on = req.loc.max_ranges != Some(0) && !ssi_page;
    let mut range = match req.headers.get(RANGE).and_then(|v| v.to_str().ok()) {
        Some(r) if ranges_on => range::parse(r, len, req.loc.max_ranges),
        _ => ByteRange::Full,
    };
    if range != ByteRange::Full {
        if let Some(if_range) = req.headers.get(IF_RANGE) {
            let date = req.if_range_date.unwrap_or(Some(meta.mtime));
            if !date.is_some_and(|d| if_range_matches(if_range, etag, d)) {
                range = ByteRange::Full;
            }
        }
    }
    let head_only = *req.method == Method::HEAD;
    let (status, start, count) = match range {
        ByteRange::Full => {
            if ranges_on {
                headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            }
            (StatusCode::OK, 0, len)
        }
        ByteRange::Part { start, end } => {
            let v = format!("bytes {start}-{end}/{len}");
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.insert(CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
        ByteRange::Multi(spans) => {
            let ct = ctype_value.as_ref().and_then(|v| v.to_str().ok());
            let m = range::multipart(&spans, len, ct, range::boundary());
            m.set_headers(&mut headers);
            let body = if head_only {
                Body::Empty
            } else {
                range::MultipartBody::body(Arc::clone(&file.file), m, recode)
            };
            return FileOutcome::Response(charset_done(
                req.loc,
                response(StatusCode::PARTIAL_CONTENT, headers, body),
            ));
        }
        ByteRange::Unsatisfiable => {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                h.insert(CONTENT_RANGE, v);
            }
            h.insert(CONTENT_LENGTH, HeaderValue::from(0u64));
            let r = response(StatusCode::RANGE_NOT_SATISFIABLE, h, Body::Empty);
            return FileOutcome::Response(r);
        }
    };
    let length = if count == len {
        cached.content_length.clone()
    } else {
        HeaderValue::from(count)
    };
    headers.insert(CONTENT_LENGTH, length);
    let body = if head_only || count == 0 {
        Body::Empty
    } else {
        let mut b = Body::file(Arc::clone(&file.file), start, count);
        if let Some(t) = recode {
            b.set_recode(t);
        }
        b
    };
    FileOutcome::Response(charset_done(req.loc, response(status, headers, body)))
}

/// Marks a response whose charset the static module already settled (the pipeline's charset
/// step leaves it alone). That step runs only where `charset` is set (a static response
/// carries no upstream's `X-Accel-Charset`), in the location that served the file: elsewhere
/// no mark is needed, and none is made (an extension map allocated per response).
fn charset_done(loc: &LocationConf, mut r: Response<Body>) -> Response<Body> {
    if loc.charset.is_some() {
        r.extensions_mut().insert(charset::Applied);
    }
    r
}

fn response(status: StatusCode, headers: HeaderMap, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// `content_type` for a URI (nginx's `ngx_http_set_content_type` with `r->exten`: a
/// `return`'s text is typed by the URI's extension too).
pub fn uri_content_type<'a>(loc: &'a LocationConf, uri: &str) -> &'a str {
    let last = uri.rsplit('/').next().unwrap_or_default();
    content_type(loc, Path::new(last))
}

/// `types` by the lower-cased extension (the text after the last `.` of the file name),
/// else `default_type`.
fn content_type<'a>(loc: &'a LocationConf, path: &Path) -> &'a str {
    let name = path.file_name().map(OsStr::as_bytes).unwrap_or_default();
    let ext = match name.iter().rposition(|&b| b == b'.') {
        Some(i) => &name[i + 1..],
        None => return &loc.default_type,
    };
    let Ok(ext) = std::str::from_utf8(ext) else {
        return &loc.default_type;
    };
    // Most extensions are lower-case already: looked up as they are, without a copy.
    let found = if ext.bytes().any(|b| b.is_ascii_uppercase()) {
        loc.types.get(&ext.to_ascii_lowercase())
    } else {
        loc.types.get(ext)
    };
    found.unwrap_or(&loc.default_type)
}

/// The outcome of the conditional headers.
#[doc(hidden)] // public for the fuzz targets only (`crate::fuzzing`)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Send the file (or its range).
    Proceed,
    /// 304.
    NotModified,
    /// 412.
    Failed,
}

/// RFC 9110 §13.2.2's order, for a `GET`/`HEAD` of an existing file.
#[doc(hidden)]
pub fn preconditions(headers: &HeaderMap, etag: &str, mtime: i64) -> Precondition {
    preconditions_with(headers, etag, mtime, IfModifiedSince::Before)
}

/// [`preconditions`], `If-Modified-Since` compared as `if_modified_since` says.
pub(crate) fn preconditions_with(
    headers: &HeaderMap,
    etag: &str,
    mtime: i64,
    ims: IfModifiedSince,
) -> Precondition {
    if headers.contains_key(IF_MATCH) {
        if !etag_list_matches(headers, IF_MATCH, etag, false) {
            return Precondition::Failed;
        }
    } else if let Some(date) = header_date(headers, IF_UNMODIFIED_SINCE) {
        if mtime > date {
            return Precondition::Failed;
        }
    }
    if headers.contains_key(IF_NONE_MATCH) {
        if etag_list_matches(headers, IF_NONE_MATCH, etag, true) {
            return Precondition::NotModified;
        }
    } else if let Some(date) = header_date(headers, IF_MODIFIED_SINCE) {
        let not_modified = match ims {
            IfModifiedSince::Off => false,
            IfModifiedSince::Exact => mtime == date,
            IfModifiedSince::Before => mtime <= date,
        };
        if not_modified {
            return Precondition::NotModified;
        }
    }
    Precondition::Proceed
}

/// A date header as seconds since the epoch; `None` when absent or malformed (then ignored).
fn header_date(headers: &HeaderMap, name: http::header::HeaderName) -> Option<i64> {
    let v = headers.get(name)?.to_str().ok()?;
    system_secs(httpdate::parse_http_date(v.trim()).ok()?)
}

fn system_secs(t: SystemTime) -> Option<i64> {
    i64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()
}

/// Whether `etag` is in the lists of every `name` header (`*` matches). `weak`: RFC 9110's
/// weak comparison (a `W/` prefix is ignored); otherwise strong (a weak tag never matches).
fn etag_list_matches(
    headers: &HeaderMap,
    name: http::header::HeaderName,
    etag: &str,
    weak: bool,
) -> bool {
    let ours = etag.strip_prefix("W/").unwrap_or(etag);
    headers.get_all(name).iter().any(|v| {
        let Ok(list) = v.to_str() else { return false };
        if list.trim() == "*" {
            return true;
        }
        EntityTags(list).any(|(is_weak, tag)| (weak || !is_weak) && tag == ours)
    })
}

/// Iterates the entity tags of a list: `(is_weak, "opaque")`, quotes kept; commas inside
/// quotes are part of the tag. Stops at the first malformed element.
struct EntityTags<'a>(&'a str);

impl<'a> Iterator for EntityTags<'a> {
    type Item = (bool, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.0.trim_start_matches([' ', '\t', ',']);
        let (weak, s) = match s.strip_prefix("W/") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let body = s.strip_prefix('"')?;
        let end = body.find('"')?;
        let tag = &s[..end + 2];
        self.0 = &s[end + 2..];
        Some((weak, tag))
    }
}

/// `If-Range`: an entity tag compared strongly, or exactly the `Last-Modified` date.
#[doc(hidden)]
pub fn if_range_matches(value: &HeaderValue, etag: &str, mtime: i64) -> bool {
    let Ok(v) = value.to_str() else { return false };
    let v = v.trim();
    if v.starts_with('"') || v.starts_with("W/") {
        return v == etag;
    }
    httpdate::parse_http_date(v)
        .ok()
        .and_then(system_secs)
        .is_some_and(|d| d == mtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::DisableSymlinks;
    use crate::conf::model::{Locations, MimeTypes, Pos};
    use crate::conf::vars::ComplexValue;
    use http_body_util::BodyExt;
    use std::ffi::CString;
    use std::os::unix::fs::MetadataExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A directory under the system temp dir, removed at the end of the test.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p =
                std::env::temp_dir().join(format!("fb-static-{}-{tag}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn file(&self, name: &str, data: &[u8]) -> PathBuf {
            let p = self.0.join(name);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).unwrap();
            }
            std::fs::write(&p, data).unwrap();
            p
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn loc() -> LocationConf {
        let types: MimeTypes = [
            ("html", "text/html"),
            ("css", "text/css"),
            ("txt", "text/plain"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut l = crate::conf::locate::fixtures::location("/", Locations::default());
        l.prefix = "/".into();
        l.root = DocRoot::Root(ComplexValue::literal("/srv"));
        l.types = Arc::new(types);
        l.default_type = "application/octet-stream".into();
        l.pos = Pos {
            file: Arc::new(PathBuf::from("/etc/firstbyte/firstbyte.conf")),
            line: 1,
        };
        l
    }

    fn hdrs(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// Serves `uri` from `dir` (root = dir) with `l`, a method and headers.
    fn get_with(
        dir: &TempDir,
        l: &LocationConf,
        method: &Method,
        uri: &str,
        h: &[(&str, &str)],
    ) -> FileOutcome {
        let headers = hdrs(h);
        let path = map_path(l, uri, dir.0.to_str().unwrap()).unwrap();
        let req = FileRequest {
            method,
            headers: &headers,
            uri,
            path: &path,
            loc: l,
            symlinks_from: None,
            if_range_date: None,
            received: None,
        };
        serve(&req, &OpenFileCache::disabled())
    }

    fn get(dir: &TempDir, l: &LocationConf, uri: &str, h: &[(&str, &str)]) -> FileOutcome {
        get_with(dir, l, &Method::GET, uri, h)
    }

    fn resp(o: FileOutcome) -> Response<Body> {
        match o {
            FileOutcome::Response(r) => r,
            other => panic!("expected a response, got {other:?}"),
        }
    }

    fn status(o: &FileOutcome) -> StatusCode {
        match o {
            FileOutcome::Response(r) => r.status(),
            FileOutcome::Redirect(_) => StatusCode::MOVED_PERMANENTLY,
            FileOutcome::Status(s) => *s,
            FileOutcome::Autoindex => panic!("autoindex is off in these tests"),
            FileOutcome::Internal(u) => panic!("expected a status, got a redirect to {u}"),
        }
    }

    async fn body(r: Response<Body>) -> Vec<u8> {
        r.into_body().collect().await.unwrap().to_bytes().to_vec()
    }

    fn header<'a>(r: &'a Response<Body>, name: &str) -> &'a str {
        r.headers().get(name).map_or("", |v| v.to_str().unwrap())
    }

    #[tokio::test]
    async fn serves_a_file_with_nginx_headers() {
        let d = TempDir::new("basic");
        let p = d.file("a/Page.HTML", b"<p>hello</p>");
        let r = resp(get(&d, &loc(), "/a/Page.HTML", &[]));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, "content-type"), "text/html");
        assert_eq!(header(&r, "content-length"), "12");
        assert_eq!(header(&r, "accept-ranges"), "bytes");
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(header(&r, "etag"), format!("\"{:x}-c\"", m.mtime()));
        let lm = httpdate::parse_http_date(header(&r, "last-modified")).unwrap();
        assert_eq!(system_secs(lm), Some(m.mtime()));
        assert_eq!(body(r).await, b"<p>hello</p>");
    }

    #[tokio::test]
    async fn head_has_the_head_and_no_body() {
        let d = TempDir::new("head");
        d.file("f.txt", b"0123456789");
        let r = resp(get_with(&d, &loc(), &Method::HEAD, "/f.txt", &[]));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, "content-length"), "10");
        assert_eq!(header(&r, "content-type"), "text/plain");
        assert!(body(r).await.is_empty());
    }

    #[test]
    fn other_methods_are_405() {
        let d = TempDir::new("405");
        d.file("f.txt", b"x");
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let o = get_with(&d, &loc(), &m, "/f.txt", &[]);
            assert_eq!(status(&o), StatusCode::METHOD_NOT_ALLOWED, "{m}");
        }
    }

    #[test]
    fn content_types() {
        let l = loc();
        assert_eq!(content_type(&l, Path::new("/x/a.CSS")), "text/css");
        assert_eq!(content_type(&l, Path::new("/x/a.tar.txt")), "text/plain");
        assert_eq!(
            content_type(&l, Path::new("/x/README")),
            "application/octet-stream"
        );
        assert_eq!(
            content_type(&l, Path::new("/x/a.unknown")),
            "application/octet-stream"
        );
        assert_eq!(content_type(&l, Path::new("/x/.txt")), "text/plain");
        assert_eq!(
            content_type(&l, Path::new("/x/a.")),
            "application/octet-stream"
        );
    }

    #[test]
    fn missing_and_special_files() {
        let d = TempDir::new("missing");
        d.file("f.txt", b"x");
        assert_eq!(
            status(&get(&d, &loc(), "/nope.txt", &[])),
            StatusCode::NOT_FOUND
        );
        // A file used as a directory.
        assert_eq!(
            status(&get(&d, &loc(), "/f.txt/x", &[])),
            StatusCode::NOT_FOUND
        );
        // A fifo: opened without blocking, refused as "not a regular file".
        let fifo = CString::new(d.0.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: `fifo` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert_eq!(
            status(&get(&d, &loc(), "/fifo", &[])),
            StatusCode::NOT_FOUND
        );
        // A socket file cannot be opened at all: also 404.
        let _l = std::os::unix::net::UnixListener::bind(d.0.join("sock")).unwrap();
        assert_eq!(
            status(&get(&d, &loc(), "/sock", &[])),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn error_statuses() {
        let e = |n| status_for(&io::Error::from_raw_os_error(n));
        assert_eq!(e(libc::ENOENT), StatusCode::NOT_FOUND);
        assert_eq!(e(libc::ENOTDIR), StatusCode::NOT_FOUND);
        assert_eq!(e(libc::ENAMETOOLONG), StatusCode::NOT_FOUND);
        assert_eq!(e(libc::EACCES), StatusCode::FORBIDDEN);
        assert_eq!(e(libc::ELOOP), StatusCode::FORBIDDEN);
        assert_eq!(e(libc::EIO), StatusCode::INTERNAL_SERVER_ERROR);
    }

    /// Runs `f` with this thread's file system uid set to `nobody` when the tests run as root
    /// (root reads everything): Linux keeps the fsuid per thread and drops the DAC override
    /// capabilities while it is not 0.
    fn as_nobody<T>(f: impl FnOnce() -> T) -> T {
        struct Restore(u32);
        impl Drop for Restore {
            fn drop(&mut self) {
                // SAFETY: setfsuid only changes this thread's credentials.
                unsafe { libc::setfsuid(self.0) };
            }
        }
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        let _restore = (euid == 0).then(|| {
            // SAFETY: setfsuid only changes this thread's credentials; `Restore` puts them back.
            unsafe { libc::setfsuid(65534) };
            Restore(0)
        });
        f()
    }

    #[test]
    fn permission_denied_is_403() {
        use std::os::unix::fs::PermissionsExt;
        let d = TempDir::new("perm");
        let p = d.file("secret.txt", b"x");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let inner = d.file("closed/f.txt", b"x");
        let closed = inner.parent().unwrap().to_path_buf();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let searchable = d.0.join("searchable");
        std::fs::create_dir(&searchable).unwrap();
        std::fs::set_permissions(&searchable, std::fs::Permissions::from_mode(0o711)).unwrap();
        let l = loc();
        let mut strict = loc();
        strict.disable_symlinks = DisableSymlinks::On.into();
        as_nobody(|| {
            for l in [&l, &strict] {
                assert_eq!(
                    status(&get(&d, l, "/secret.txt", &[])),
                    StatusCode::FORBIDDEN
                );
                assert_eq!(
                    status(&get(&d, l, "/closed/f.txt", &[])),
                    StatusCode::FORBIDDEN
                );
                // A directory that may be searched but not read still redirects.
                match get(&d, l, "/searchable", &[]) {
                    FileOutcome::Redirect(to) => assert_eq!(to, "/searchable/"),
                    o => panic!("{o:?}"),
                }
                // ... and without an index it is 403, as any directory.
                let o = get(&d, l, "/searchable/", &[]);
                assert_eq!(status(&o), StatusCode::FORBIDDEN);
            }
        });
    }

    #[tokio::test]
    async fn directories_and_index() {
        let d = TempDir::new("dir");
        d.file("docs/index.html", b"index!");
        std::fs::create_dir_all(d.0.join("empty")).unwrap();
        std::fs::create_dir_all(d.0.join("with space")).unwrap();
        match get(&d, &loc(), "/docs", &[]) {
            FileOutcome::Redirect(l) => assert_eq!(l, "/docs/"),
            o => panic!("{o:?}"),
        }
        match get(&d, &loc(), "/with space", &[]) {
            FileOutcome::Redirect(l) => assert_eq!(l, "/with%20space/"),
            o => panic!("{o:?}"),
        }
        // The index file is an internal redirect (nginx's `$uri` becomes its URI).
        match get(&d, &loc(), "/docs/", &[]) {
            FileOutcome::Internal(u) => assert_eq!(u, "/docs/index.html"),
            o => panic!("{o:?}"),
        }
        let r = resp(get(&d, &loc(), "/docs/index.html", &[]));
        assert_eq!(header(&r, "content-type"), "text/html");
        assert_eq!(body(r).await, b"index!");
        assert_eq!(
            status(&get(&d, &loc(), "/empty/", &[])),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            status(&get(&d, &loc(), "/nodir/", &[])),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status(&get(&d, &loc(), "/docs/index.html/", &[])),
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn index_entries_in_order() {
        let d = TempDir::new("index");
        d.file("a/second.htm", b"2");
        d.file("a/third.txt", b"3");
        std::fs::create_dir_all(d.0.join("b/sub")).unwrap();
        let mut l = loc();
        l.index = vec![
            ComplexValue::parse("$host.html").unwrap(), // variables: skipped
            ComplexValue::literal("first.html"),
            ComplexValue::literal("second.htm"),
            ComplexValue::literal("third.txt"),
        ];
        match get(&d, &l, "/a/", &[]) {
            FileOutcome::Internal(u) => assert_eq!(u, "/a/second.htm"),
            o => panic!("{o:?}"),
        }
        // An absolute entry is a redirect at once, whether or not its file exists.
        l.index.insert(1, ComplexValue::literal("/abs.html"));
        match get(&d, &l, "/a/", &[]) {
            FileOutcome::Internal(u) => assert_eq!(u, "/abs.html"),
            o => panic!("{o:?}"),
        }
        l.index = vec![ComplexValue::literal("sub")];
        match get(&d, &l, "/b/", &[]) {
            FileOutcome::Internal(to) => assert_eq!(to, "/b/sub"),
            o => panic!("{o:?}"),
        }
        l.index = vec![];
        assert_eq!(status(&get(&d, &l, "/a/", &[])), StatusCode::FORBIDDEN);
        // With `autoindex on`, the listing takes the 403's place; a missing directory is
        // still 404, and an index file still wins.
        l.autoindex = true;
        assert!(matches!(get(&d, &l, "/a/", &[]), FileOutcome::Autoindex));
        assert_eq!(status(&get(&d, &l, "/nope/", &[])), StatusCode::NOT_FOUND);
        l.index = vec![ComplexValue::literal("sub")];
        match get(&d, &l, "/b/", &[]) {
            FileOutcome::Internal(to) => assert_eq!(to, "/b/sub"),
            o => panic!("{o:?}"),
        }
    }

    /// `if_modified_since`: `before` (default), `exact` (nginx's default), `off`.
    #[test]
    fn if_modified_since_modes() {
        let at = |secs: i64| {
            let mut h = HeaderMap::new();
            let t = UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
            h.insert(
                IF_MODIFIED_SINCE,
                HeaderValue::from_str(&httpdate::fmt_http_date(t)).unwrap(),
            );
            h
        };
        let (mtime, etag) = (1_700_000_000, "\"x\"");
        use IfModifiedSince::*;
        for (mode, same, later) in [
            (Before, Precondition::NotModified, Precondition::NotModified),
            (Exact, Precondition::NotModified, Precondition::Proceed),
            (Off, Precondition::Proceed, Precondition::Proceed),
        ] {
            assert_eq!(
                preconditions_with(&at(mtime), etag, mtime, mode),
                same,
                "{mode:?}"
            );
            assert_eq!(
                preconditions_with(&at(mtime + 60), etag, mtime, mode),
                later,
                "{mode:?}"
            );
            assert_eq!(
                preconditions_with(&at(mtime - 60), etag, mtime, mode),
                Precondition::Proceed,
                "{mode:?}"
            );
        }
    }

    #[test]
    fn conditionals() {
        let d = TempDir::new("cond");
        let p = d.file("f.txt", b"0123456789");
        let m = std::fs::metadata(&p).unwrap();
        let etag = format!("\"{:x}-a\"", m.mtime());
        let date =
            |secs: i64| httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs as u64));
        let l = loc();
        let st = |h: &[(&str, &str)]| status(&get(&d, &l, "/f.txt", h));

        // If-None-Match: exact, weak, list, star, miss.
        assert_eq!(st(&[("if-none-match", &etag)]), StatusCode::NOT_MODIFIED);
        assert_eq!(
            st(&[("if-none-match", &format!("W/{etag}"))]),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            st(&[("if-none-match", &format!("\"x,y\", {etag}"))]),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(st(&[("if-none-match", "*")]), StatusCode::NOT_MODIFIED);
        assert_eq!(st(&[("if-none-match", "\"other\"")]), StatusCode::OK);
        // If-Modified-Since: at or after mtime → 304; before → 200; garbage ignored.
        assert_eq!(
            st(&[("if-modified-since", &date(m.mtime()))]),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            st(&[("if-modified-since", &date(m.mtime() + 10))]),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            st(&[("if-modified-since", &date(m.mtime() - 1))]),
            StatusCode::OK
        );
        assert_eq!(st(&[("if-modified-since", "yesterday")]), StatusCode::OK);
        // If-None-Match wins over If-Modified-Since.
        let h = [
            ("if-none-match", "\"other\""),
            ("if-modified-since", &date(m.mtime())),
        ];
        assert_eq!(st(&h), StatusCode::OK);
        // If-Match: strong only; If-Unmodified-Since.
        assert_eq!(st(&[("if-match", &etag)]), StatusCode::OK);
        assert_eq!(st(&[("if-match", "*")]), StatusCode::OK);
        assert_eq!(
            st(&[("if-match", &format!("W/{etag}"))]),
            StatusCode::PRECONDITION_FAILED
        );
        assert_eq!(
            st(&[("if-match", "\"other\"")]),
            StatusCode::PRECONDITION_FAILED
        );
        assert_eq!(
            st(&[("if-unmodified-since", &date(m.mtime() - 1))]),
            StatusCode::PRECONDITION_FAILED
        );
        assert_eq!(
            st(&[("if-unmodified-since", &date(m.mtime()))]),
            StatusCode::OK
        );

        // A 304 keeps the validators and drops the content headers and body.
        let r = resp(get(&d, &l, "/f.txt", &[("if-none-match", &etag)]));
        assert_eq!(header(&r, "etag"), etag);
        assert!(r.headers().contains_key(LAST_MODIFIED));
        assert!(!r.headers().contains_key(CONTENT_LENGTH));
        assert!(!r.headers().contains_key(CONTENT_TYPE));
        assert!(!r.headers().contains_key(ACCEPT_RANGES));
    }

    #[test]
    fn entity_tag_lists() {
        let tags: Vec<_> = EntityTags(" \"a\", W/\"b,c\" ,\"d\"").collect();
        assert_eq!(
            tags,
            vec![(false, "\"a\""), (true, "\"b,c\""), (false, "\"d\"")]
        );
        assert_eq!(EntityTags("garbage").count(), 0);
        assert_eq!(EntityTags("\"unterminated").count(), 0);
    }

    #[tokio::test]
    async fn range_responses() {
        let d = TempDir::new("range");
        let p = d.file("f.txt", b"0123456789");
        let m = std::fs::metadata(&p).unwrap();
        let etag = format!("\"{:x}-a\"", m.mtime());
        let l = loc();
        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=2-5")]));
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(header(&r, "content-range"), "bytes 2-5/10");
        assert_eq!(header(&r, "content-length"), "4");
        assert_eq!(body(r).await, b"2345");

        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=-2")]));
        assert_eq!(body(r).await, b"89");

        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=20-")]));
        assert_eq!(r.status(), StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(header(&r, "content-range"), "bytes */10");

        // A 206 has no Accept-Ranges (nginx adds it only when it declines the range).
        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=1-1")]));
        assert!(!r.headers().contains_key(ACCEPT_RANGES));

        // Several: multipart/byteranges, in the order asked, the length known up front.
        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=8-,0-0,2-3")]));
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        let ct = header(&r, "content-type");
        let b = ct
            .strip_prefix("multipart/byteranges; boundary=")
            .unwrap()
            .to_string();
        assert_eq!(b.len(), 20);
        assert!(!r.headers().contains_key(CONTENT_RANGE));
        let len: usize = header(&r, "content-length").parse().unwrap();
        let got = body(r).await;
        assert_eq!(got.len(), len);
        let part = |range: &str, data: &str| {
            format!(
                "\r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes {range}/10\r\n\r\n{data}"
            )
        };
        let want = format!(
            "{}{}{}\r\n--{b}--\r\n",
            part("8-9", "89"),
            part("0-0", "0"),
            part("2-3", "23")
        );
        assert_eq!(String::from_utf8(got).unwrap(), want);
        // Their total past the file's size: the whole file.
        let r = resp(get(&d, &l, "/f.txt", &[("range", "bytes=0-9,0-0")]));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r).await, b"0123456789");
        // HEAD: the multipart head, no body.
        let r = resp(get_with(
            &d,
            &l,
            &Method::HEAD,
            "/f.txt",
            &[("range", "bytes=0-0,2-3")],
        ));
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_ne!(header(&r, "content-length"), "0");
        assert!(body(r).await.is_empty());

        // `max_ranges`: more than N ranges, the whole file; 0: no ranges, none offered.
        let mut two = loc();
        two.max_ranges = Some(2);
        let r = resp(get(&d, &two, "/f.txt", &[("range", "bytes=0-0,2-3")]));
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        let r = resp(get(&d, &two, "/f.txt", &[("range", "bytes=0-0,2-3,5-5")]));
        assert_eq!(r.status(), StatusCode::OK);
        let mut off = loc();
        off.max_ranges = Some(0);
        let r = resp(get(&d, &off, "/f.txt", &[("range", "bytes=0-0")]));
        assert_eq!(r.status(), StatusCode::OK);
        assert!(!r.headers().contains_key(ACCEPT_RANGES));

        // If-Range: matching ETag or date → range; anything else → whole file.
        let lm = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(m.mtime() as u64));
        for (v, want) in [
            (etag.as_str(), StatusCode::PARTIAL_CONTENT),
            (lm.as_str(), StatusCode::PARTIAL_CONTENT),
            ("\"stale\"", StatusCode::OK),
            ("Thu, 01 Jan 1970 00:00:00 GMT", StatusCode::OK),
        ] {
            let o = get(&d, &l, "/f.txt", &[("range", "bytes=0-1"), ("if-range", v)]);
            assert_eq!(status(&o), want, "{v}");
        }
        let weak = format!("W/{etag}");
        let o = get(
            &d,
            &l,
            "/f.txt",
            &[("range", "bytes=0-1"), ("if-range", &weak)],
        );
        assert_eq!(status(&o), StatusCode::OK);

        // HEAD of a range: the range's head, no body.
        let r = resp(get_with(
            &d,
            &l,
            &Method::HEAD,
            "/f.txt",
            &[("range", "bytes=0-2")],
        ));
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(header(&r, "content-length"), "3");
        assert!(body(r).await.is_empty());
    }

    #[tokio::test]
    async fn gzip_static() {
        let d = TempDir::new("gz");
        d.file("app.css", b"body { color: red }");
        let gz = d.file("app.css.gz", b"GZDATA");
        d.file("app.css.br", b"BR");
        d.file("only.css.gz", b"ONLYGZ");
        d.file("plain.css", b"plain");
        let mut l = loc();
        l.gzip_static = GzipStatic::On;
        l.compression.gzip_vary = true;

        let r = resp(get(&d, &l, "/app.css", &[("accept-encoding", "gzip")]));
        assert_eq!(header(&r, "content-encoding"), "gzip");
        assert_eq!(header(&r, "content-type"), "text/css");
        assert_eq!(header(&r, "vary"), "Accept-Encoding");
        assert_eq!(header(&r, "content-length"), "6");
        let m = std::fs::metadata(&gz).unwrap();
        assert_eq!(header(&r, "etag"), format!("\"{:x}-6\"", m.mtime()));
        assert_eq!(body(r).await, b"GZDATA");

        // br preferred when accepted.
        let r = resp(get(&d, &l, "/app.css", &[("accept-encoding", "gzip, br")]));
        assert_eq!(header(&r, "content-encoding"), "br");
        assert_eq!(body(r).await, b"BR");

        // q=0 and no header: the original, still with Vary.
        for h in [&[("accept-encoding", "gzip;q=0")][..], &[]] {
            let r = resp(get(&d, &l, "/app.css", h));
            assert_eq!(header(&r, "content-encoding"), "");
            assert_eq!(header(&r, "vary"), "Accept-Encoding");
            assert_eq!(body(r).await, b"body { color: red }");
        }
        // Through a proxy (Via), gzip is not used (nginx's gzip_proxied off).
        let r = resp(get(
            &d,
            &l,
            "/app.css",
            &[("accept-encoding", "gzip"), ("via", "1.1 x")],
        ));
        assert_eq!(header(&r, "content-encoding"), "");

        // No variant: no Vary.
        let r = resp(get(&d, &l, "/plain.css", &[("accept-encoding", "gzip")]));
        assert_eq!(header(&r, "vary"), "");
        assert_eq!(body(r).await, b"plain");

        // The variant alone is enough; without acceptance the original is missing: 404.
        let r = resp(get(&d, &l, "/only.css", &[("accept-encoding", "gzip")]));
        assert_eq!(body(r).await, b"ONLYGZ");
        assert_eq!(
            status(&get(&d, &l, "/only.css", &[])),
            StatusCode::NOT_FOUND
        );

        // always: .gz whatever the client says; br still only when accepted.
        l.gzip_static = GzipStatic::Always;
        let r = resp(get(&d, &l, "/app.css", &[]));
        assert_eq!(header(&r, "content-encoding"), "gzip");
        // off: never.
        l.gzip_static = GzipStatic::Off;
        let r = resp(get(&d, &l, "/app.css", &[("accept-encoding", "gzip, br")]));
        assert_eq!(header(&r, "content-encoding"), "");
        assert_eq!(header(&r, "vary"), "");
    }

    #[test]
    fn parent_dirs_counts_what_path_components_calls_parent() {
        use std::path::Component;
        for p in [
            "",
            "/",
            "..",
            "../",
            "/..",
            "a/../b",
            "a/..b",
            "..a/b",
            "a/b/..",
            "a//..//..",
            "/srv/./../x",
            "...",
            "a/.../b",
            "/data/images/../secret",
            "x..y/../..",
        ] {
            let want = Path::new(p)
                .components()
                .filter(|c| matches!(c, Component::ParentDir))
                .count();
            assert_eq!(parent_dirs(p), want, "{p:?}");
        }
    }

    #[test]
    fn map_path_root_and_alias() {
        let mut l = loc();
        assert_eq!(
            map_path(&l, "/a/b.html", "/srv/www"),
            Some(PathBuf::from("/srv/www/a/b.html"))
        );
        assert_eq!(
            map_path(&l, "/a", "../html"),
            Some(PathBuf::from("../html/a"))
        );
        l.root = DocRoot::Alias(ComplexValue::literal("/data/images/"));
        l.prefix = "/img/".into();
        assert_eq!(
            map_path(&l, "/img/x.png", "/data/images/"),
            Some(PathBuf::from("/data/images/x.png"))
        );
        assert_eq!(
            map_path(&l, "/img/", "/data/images/"),
            Some(PathBuf::from("/data/images/"))
        );
        // The classic escape: location without the slash, alias with it.
        l.prefix = "/img".into();
        assert_eq!(map_path(&l, "/img../secret", "/data/images/"), None);
        assert_eq!(
            map_path(&l, "/img/x.png", "/data/images/"),
            Some(PathBuf::from("/data/images//x.png"))
        );
        // Exact location with alias: the alias itself.
        l.prefix = "/favicon.ico".into();
        assert_eq!(
            map_path(&l, "/favicon.ico", "/data/f.ico"),
            Some(PathBuf::from("/data/f.ico"))
        );
        // Regex location: the evaluated alias is the path; a captured `..` is refused.
        l.name = "~ ^/x/(.*)$".into();
        l.prefix = String::new();
        l.alias_whole = true;
        assert_eq!(
            map_path(&l, "/x/a", "/data/a"),
            Some(PathBuf::from("/data/a"))
        );
        assert_eq!(map_path(&l, "/x..", "/data/.."), None);
        // try_files appends its candidate to a regex location's alias; no `..` in either.
        assert_eq!(
            map_try_path(&l, "/x/a.html", "/data"),
            Some(PathBuf::from("/data/x/a.html"))
        );
        assert_eq!(map_try_path(&l, "/../etc/passwd", "/data"), None);
        assert_eq!(map_try_path(&l, "/a", "/data/.."), None);
    }

    #[tokio::test]
    async fn symlinks_follow_policy() {
        use std::os::unix::fs::symlink;
        let d = TempDir::new("links");
        d.file("real/f.txt", b"real");
        symlink(d.0.join("real"), d.0.join("dirlink")).unwrap();
        symlink(d.0.join("real/f.txt"), d.0.join("filelink.txt")).unwrap();
        let mut l = loc();
        // off: followed.
        assert_eq!(
            body(resp(get(&d, &l, "/dirlink/f.txt", &[]))).await,
            b"real"
        );
        assert_eq!(body(resp(get(&d, &l, "/filelink.txt", &[]))).await, b"real");
        // on: refused anywhere in the path; plain paths still work.
        l.disable_symlinks = DisableSymlinks::On.into();
        // A symlinked directory on the way is not a directory (nginx's ENOTDIR: 404).
        assert_eq!(
            status(&get(&d, &l, "/dirlink/f.txt", &[])),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status(&get(&d, &l, "/filelink.txt", &[])),
            StatusCode::FORBIDDEN
        );
        assert_eq!(body(resp(get(&d, &l, "/real/f.txt", &[]))).await, b"real");
        assert_eq!(
            status(&get(&d, &l, "/real/none", &[])),
            StatusCode::NOT_FOUND
        );
        match get(&d, &l, "/real", &[]) {
            FileOutcome::Redirect(to) => assert_eq!(to, "/real/"),
            o => panic!("{o:?}"),
        }
        // if_not_owner: same owner is followed.
        l.disable_symlinks = DisableSymlinks::IfNotOwner.into();
        assert_eq!(
            body(resp(get(&d, &l, "/dirlink/f.txt", &[]))).await,
            b"real"
        );
        assert_eq!(body(resp(get(&d, &l, "/filelink.txt", &[]))).await, b"real");
        // A link owned by someone else (needs root to make).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let other = d.0.join("other.txt");
            symlink(d.0.join("real/f.txt"), &other).unwrap();
            std::os::unix::fs::lchown(&other, Some(65534), Some(65534)).unwrap();
            let otherdir = d.0.join("otherdir");
            symlink(d.0.join("real"), &otherdir).unwrap();
            std::os::unix::fs::lchown(&otherdir, Some(65534), Some(65534)).unwrap();
            assert_eq!(
                status(&get(&d, &l, "/other.txt", &[])),
                StatusCode::FORBIDDEN
            );
            assert_eq!(
                status(&get(&d, &l, "/otherdir/f.txt", &[])),
                StatusCode::FORBIDDEN
            );
            l.disable_symlinks = DisableSymlinks::Off.into();
            assert_eq!(body(resp(get(&d, &l, "/other.txt", &[]))).await, b"real");
        }
    }

    #[test]
    fn serve_uses_the_cache() {
        let d = TempDir::new("serve-cache");
        let p = d.file("f.txt", b"abc");
        let l = loc();
        let cache = OpenFileCache::default();
        let headers = HeaderMap::new();
        let req = FileRequest {
            method: &Method::GET,
            headers: &headers,
            uri: "/f.txt",
            path: &p,
            loc: &l,
            symlinks_from: None,
            if_range_date: None,
            received: None,
        };
        assert_eq!(status(&serve(&req, &cache)), StatusCode::OK);
        assert_eq!(cache.len(), 1);
        assert_eq!(status(&serve(&req, &cache)), StatusCode::OK);
        assert_eq!(cache.len(), 1);
    }

    /// `charset` + `source_charset`: the file's bytes recoded through the `charset_map`, its
    /// single ranges and multipart parts as well (8-bit tables keep every offset).
    #[tokio::test]
    async fn charset_recodes_ranges() {
        let d = TempDir::new("charset");
        d.file("t.html", b"X000XXXXXXX001XXXXXX");
        let c = crate::conf::testutil::ok(
            "http { charset_map B A { 58 59; } server { listen 127.0.0.1:8080; \
             charset A; source_charset B; } }",
        );
        let mut l = loc();
        l.charsets = c.http.unwrap().servers[0].default_location.charsets.clone();
        l.charset = Some("A".into());
        l.source_charset = Some("B".into());
        let r = resp(get(&d, &l, "/t.html", &[]));
        assert_eq!(header(&r, "content-type"), "text/html; charset=A");
        assert_eq!(body(r).await, b"Y000YYYYYYY001YYYYYY");
        let r = resp(get(&d, &l, "/t.html", &[("range", "bytes=10-13")]));
        assert_eq!(header(&r, "content-range"), "bytes 10-13/20");
        assert_eq!(body(r).await, b"Y001");
        let r = resp(get(&d, &l, "/t.html", &[("range", "bytes=0-1,-2")]));
        let text = String::from_utf8(body(r).await).unwrap();
        assert!(
            text.contains("Content-Type: text/html; charset=A\r\n"),
            "{text}"
        );
        assert!(text.contains("bytes 0-1/20\r\n\r\nY0\r\n"), "{text}");
        assert!(text.contains("bytes 18-19/20\r\n\r\nYY\r\n"), "{text}");
    }
}
