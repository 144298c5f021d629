//! Opening files for responses.
//!
//! Data flow: `static_files` asks an `OpenFileCache` (`open_file_cache`) for a path under the
//! location's settings; the cache answers from memory when it may and otherwise checks or
//! opens the file with [`open_path`], which returns the descriptor and its metadata (or the
//! `errno` that `static_files` maps to 404/403/500).
//!
//! Every open is non-blocking (a fifo cannot stall the connection's task) and close-on-exec.
//! Under `disable_symlinks on|if_not_owner` the path is walked one component at a time with
//! `openat` relative to the previous component's `O_PATH` descriptor, with `O_NOFOLLOW`, so
//! no symlink is crossed unchecked and nothing can be swapped in between the check and the use.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use http::HeaderValue;

use crate::conf::model::DisableSymlinks;

/// What kind of file a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Anything else (fifo, device, socket).
    Other,
}

/// What firstbyte keeps of a file's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Its kind.
    pub kind: FileKind,
    /// Size in bytes.
    pub len: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
    dev: u64,
    ino: u64,
}

impl FileMeta {
    /// The metadata of `m`.
    pub fn of(m: &std::fs::Metadata) -> Self {
        let ft = m.file_type();
        let kind = if ft.is_file() {
            FileKind::File
        } else if ft.is_dir() {
            FileKind::Dir
        } else {
            FileKind::Other
        };
        FileMeta {
            kind,
            len: m.len(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// An open file and its metadata as of the open (or the last revalidation).
#[derive(Debug)]
pub struct OpenFile {
    /// The descriptor, shared by every response that sends it (reads use `pread`). For a
    /// directory that could only be opened with `O_PATH`, it cannot be read.
    pub file: Arc<File>,
    /// Its metadata.
    pub meta: FileMeta,
    /// Header values made from `meta`, at the first response (see [`OpenFile::headers`]).
    headers: OnceLock<FileHeaders>,
}

impl OpenFile {
    /// The same descriptor described by `meta` (a revalidation found the same inode with
    /// other metadata): header values are made anew.
    pub fn with_meta(&self, meta: FileMeta) -> OpenFile {
        OpenFile {
            file: Arc::clone(&self.file),
            meta,
            headers: OnceLock::new(),
        }
    }

    /// Whether `m` names this open file: same device and inode.
    pub fn same_inode(&self, m: &FileMeta) -> bool {
        (self.meta.dev, self.meta.ino) == (m.dev, m.ino)
    }

    /// The response header values that depend only on the file's metadata, made once per
    /// open: a cached file then answers without formatting a date, an ETag or a length, nor
    /// allocating for them (a `HeaderValue` clone shares its bytes). A revalidation that
    /// finds the file changed opens it again, so these never describe stale metadata.
    pub fn headers(&self) -> &FileHeaders {
        self.headers.get_or_init(|| FileHeaders::of(&self.meta))
    }
}

/// Header values of a file's responses (see [`OpenFile::headers`]).
#[derive(Debug)]
pub struct FileHeaders {
    /// nginx's ETag, `"<mtime hex>-<size hex>"`.
    pub etag: String,
    /// `etag` as a header value.
    pub etag_value: Option<HeaderValue>,
    /// `Last-Modified`, an HTTP date.
    pub last_modified: Option<HeaderValue>,
    /// `Content-Length` of the whole file.
    pub content_length: HeaderValue,
    /// The first `Content-Type` asked for, with its value (the type depends on the
    /// location's `types`, not on the file alone; another type is made per response).
    content_type: OnceLock<(String, HeaderValue)>,
}

impl FileHeaders {
    fn of(meta: &FileMeta) -> Self {
        let etag = format!("\"{:x}-{:x}\"", meta.mtime.max(0), meta.len);
        let modified = UNIX_EPOCH + Duration::from_secs(meta.mtime.max(0) as u64);
        FileHeaders {
            etag_value: HeaderValue::from_str(&etag).ok(),
            etag,
            last_modified: HeaderValue::from_str(&httpdate::fmt_http_date(modified)).ok(),
            content_length: HeaderValue::from(meta.len),
            content_type: OnceLock::new(),
        }
    }

    /// `ctype` as a header value, shared when it is the file's usual type.
    pub fn content_type(&self, ctype: &str) -> Option<HeaderValue> {
        let (t, v) = match self.content_type.get() {
            Some(cached) => cached,
            None => {
                let v = HeaderValue::from_str(ctype).ok()?;
                self.content_type.get_or_init(|| (ctype.to_string(), v))
            }
        };
        if t == ctype {
            Some(v.clone())
        } else {
            HeaderValue::from_str(ctype).ok()
        }
    }
}

/// Flags of the last open: read-only, never blocking on a fifo, never becoming a controlling
/// terminal.
const OPEN_READ: libc::c_int = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;

fn enoent() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

/// `openat(dir, name, flags | O_CLOEXEC)`.
fn openat(dir: RawFd, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    // A NUL cannot name a file: the path does not exist.
    let name = CString::new(name.as_bytes()).map_err(|_| enoent())?;
    loop {
        // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is AT_FDCWD or a
        // descriptor the caller keeps open for the duration of the call.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd >= 0 {
            // SAFETY: `fd` was just returned by openat and nothing else owns it.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Opens the last component for reading; a directory the process may search but not read is
/// opened with `O_PATH` (it is only looked at, never read).
fn open_last(dir: RawFd, name: &OsStr, extra: libc::c_int) -> io::Result<OpenFile> {
    let file = match openat(dir, name, OPEN_READ | extra) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let f = openat(dir, name, libc::O_PATH | extra)?;
            if !f.metadata()?.is_dir() {
                return Err(e);
            }
            f
        }
        Err(e) => return Err(e),
    };
    let meta = FileMeta::of(&file.metadata()?);
    Ok(OpenFile {
        file: Arc::new(file),
        meta,
        headers: OnceLock::new(),
    })
}

/// Opens `path` under a `disable_symlinks` policy.
pub fn open_path(path: &Path, symlinks: DisableSymlinks) -> io::Result<OpenFile> {
    if symlinks == DisableSymlinks::Off {
        return open_last(libc::AT_FDCWD, path.as_os_str(), 0);
    }
    let names: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            Component::ParentDir => Some(OsStr::new("..")),
            _ => None,
        })
        .collect();
    let start = OsStr::new(if path.is_absolute() { "/" } else { "." });
    let Some((last, dirs)) = names.split_last() else {
        return open_last(libc::AT_FDCWD, start, 0);
    };
    let mut dir = openat(libc::AT_FDCWD, start, libc::O_PATH | libc::O_DIRECTORY)?;
    for name in dirs {
        let step = openat(dir.as_raw_fd(), name, libc::O_PATH | libc::O_NOFOLLOW)?;
        let link = step.metadata()?;
        dir = if link.file_type().is_symlink() {
            follow_if_allowed(dir.as_raw_fd(), name, &link, symlinks)?
        } else {
            step
        };
    }
    match open_last(dir.as_raw_fd(), last, libc::O_NOFOLLOW) {
        Err(e)
            if e.raw_os_error() == Some(libc::ELOOP) && symlinks == DisableSymlinks::IfNotOwner =>
        {
            let link =
                openat(dir.as_raw_fd(), last, libc::O_PATH | libc::O_NOFOLLOW)?.metadata()?;
            if !link.file_type().is_symlink() {
                return Err(e);
            }
            follow_if_allowed(dir.as_raw_fd(), last, &link, symlinks)?;
            open_last(dir.as_raw_fd(), last, 0)
        }
        r => r,
    }
}

/// A symlink met on the way: refused (`ELOOP`, hence 403) unless the policy is
/// `if_not_owner` and the link and its target have the same owner; then its target, opened
/// with `O_PATH`.
fn follow_if_allowed(
    dir: RawFd,
    name: &OsStr,
    link: &std::fs::Metadata,
    symlinks: DisableSymlinks,
) -> io::Result<File> {
    let refused = || io::Error::from_raw_os_error(libc::ELOOP);
    if symlinks != DisableSymlinks::IfNotOwner {
        return Err(refused());
    }
    let target = openat(dir, name, libc::O_PATH)?;
    if target.metadata()?.uid() != link.uid() {
        return Err(refused());
    }
    Ok(target)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory under the system temp dir, removed at the end of the test.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("fb-open-{}-{tag}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub(crate) fn file(&self, name: &str, data: &[u8]) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, data).unwrap();
            p
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn file_headers_are_made_once_from_the_metadata() {
        let d = TempDir::new("headers");
        let p = d.file("f.html", &[b'x'; 1234]);
        let f = open_path(&p, DisableSymlinks::Off).unwrap();
        let h = f.headers();
        let expect = format!("\"{:x}-{:x}\"", f.meta.mtime, 1234);
        assert_eq!(h.etag, expect);
        assert_eq!(h.etag_value.as_ref().unwrap(), expect.as_str());
        assert_eq!(h.content_length, "1234");
        let modified = UNIX_EPOCH + Duration::from_secs(f.meta.mtime as u64);
        let date = httpdate::fmt_http_date(modified);
        assert_eq!(h.last_modified.as_ref().unwrap(), date.as_str());
        assert!(std::ptr::eq(h, f.headers()), "made once");
        assert_eq!(h.content_type("text/html").unwrap(), "text/html");
        assert_eq!(h.content_type("text/html").unwrap(), "text/html");
        assert_eq!(h.content_type("text/plain").unwrap(), "text/plain");
        assert!(h.content_type("bad\nvalue").is_none());
    }
}
