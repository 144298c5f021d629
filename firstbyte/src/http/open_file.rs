//! Opening files for responses.
//!
//! Data flow: `static_files` asks an `OpenFileCache` (`open_file_cache`) for a path under the
//! location's settings; the cache answers from memory when it may and otherwise checks or
//! opens the file with [`open_path`], which returns the descriptor and its metadata (or the
//! `errno` that `static_files` maps to 404/403/500).
//!
//! Every open is non-blocking (a fifo cannot stall the connection's task) and close-on-exec.
//! Under `disable_symlinks on|if_not_owner` the path is walked one component at a time with
//! `openat` relative to the previous component's `O_PATH` descriptor (`O_NOFOLLOW`, or an
//! owner check), so no symlink is crossed unchecked and nothing can be swapped in between the
//! check and the use; `from=` leaves a leading part of the path unchecked ([`SymlinkCheck`]).
//! `try_files` and the rewrite module's file tests look through [`stat_path`], which applies
//! the same walk.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use http::HeaderValue;

use crate::conf::model::{DisableSymlinks, LocationConf};

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

/// How one lookup applies `disable_symlinks` (nginx's `of.disable_symlinks` and
/// `of.disable_symlinks_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymlinkCheck {
    /// The policy.
    pub mode: DisableSymlinks,
    /// Bytes at the start of the path that are opened as they are, symlinks followed, before
    /// the checked walk goes on from there (the `/` at this offset); 0: the whole path is
    /// checked.
    pub from: usize,
}

impl From<DisableSymlinks> for SymlinkCheck {
    fn from(mode: DisableSymlinks) -> Self {
        SymlinkCheck { mode, from: 0 }
    }
}

impl SymlinkCheck {
    /// nginx's `ngx_http_set_disable_symlinks`: `from` is the evaluated `from=` value. A
    /// path that does not start with it is checked whole; one equal to it is not checked;
    /// otherwise the check starts at the `/` after it (or at its own trailing `/`). A
    /// prefix that ends inside a component (`from=/srv/a`, path `/srv/ab/f`) checks the
    /// whole path.
    pub fn for_path(mode: DisableSymlinks, from: Option<&str>, path: &[u8]) -> Self {
        let mut c = SymlinkCheck::from(mode);
        let Some(from) = from.map(str::as_bytes) else {
            return c;
        };
        if mode == DisableSymlinks::Off || from.is_empty() || !path.starts_with(from) {
            return c;
        }
        if from.len() == path.len() {
            c.mode = DisableSymlinks::Off;
        } else if path[from.len()] == b'/' {
            c.from = from.len();
        } else if path[from.len() - 1] == b'/' {
            c.from = from.len() - 1;
        }
        c
    }

    /// How `loc`'s `disable_symlinks` applies to `path`, `from` being its evaluated `from=`.
    pub fn at(loc: &LocationConf, from: Option<&str>, path: &Path) -> Self {
        Self::for_path(loc.disable_symlinks.mode, from, path.as_os_str().as_bytes())
    }
}

fn refused() -> io::Error {
    io::Error::from_raw_os_error(libc::ELOOP)
}

/// nginx's `ngx_openat_file_owner`: opens `name` following a symlink, then refuses it
/// (`ELOOP`) unless what was opened has the owner of the directory entry itself (the link,
/// or the file when it is none). Compared whatever the entry is now, as it may have been
/// swapped between the two calls.
fn openat_owner(dir: RawFd, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let file = openat(dir, name, flags)?;
    let cname = CString::new(name.as_bytes()).map_err(|_| enoent())?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `cname` is NUL-terminated, `st` is a writable stat buffer, `dir` is AT_FDCWD
    // or a descriptor the caller keeps open.
    let rc = unsafe {
        libc::fstatat(
            dir,
            cname.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat returned 0, so it filled `st`.
    let entry_uid = unsafe { st.assume_init() }.st_uid;
    if file.metadata()?.uid() != entry_uid {
        return Err(refused());
    }
    Ok(file)
}

/// `openat` under a policy: `on` never follows a symlink (`O_NOFOLLOW`: `ELOOP` for the
/// last component, `ENOTDIR` with `O_DIRECTORY`, as nginx's 403 and 404); `if_not_owner`
/// follows one only to a target of the same owner.
fn openat_checked(
    dir: RawFd,
    name: &OsStr,
    flags: libc::c_int,
    mode: DisableSymlinks,
) -> io::Result<File> {
    match mode {
        DisableSymlinks::Off => openat(dir, name, flags),
        DisableSymlinks::On => openat(dir, name, flags | libc::O_NOFOLLOW),
        DisableSymlinks::IfNotOwner => openat_owner(dir, name, flags),
    }
}

/// Opens the last component for reading; a directory the process may search but not read is
/// opened with `O_PATH` (it is only looked at, never read).
fn open_last(dir: RawFd, name: &OsStr, mode: DisableSymlinks) -> io::Result<OpenFile> {
    let file = match openat_checked(dir, name, OPEN_READ, mode) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            openat_checked(dir, name, libc::O_PATH | libc::O_DIRECTORY, mode).map_err(|_| e)?
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

/// Opens `path` under a `disable_symlinks` check, as nginx's `ngx_open_file_wrapper`: with
/// `on|if_not_owner`, the leading `from` part as it is, then each directory from there (or
/// from `/`) relative to the previous one's `O_PATH` descriptor, so nothing can be swapped
/// in between the check and the use. `.` and `..` are opened as names, as nginx does. A
/// path ending in `/` names a directory: its last component is walked as one and then
/// opened as `.` (a file named so is `ENOTDIR`, 404).
pub fn open_path(path: &Path, check: impl Into<SymlinkCheck>) -> io::Result<OpenFile> {
    let check = check.into();
    if check.mode == DisableSymlinks::Off {
        return open_last(libc::AT_FDCWD, path.as_os_str(), DisableSymlinks::Off);
    }
    let bytes = path.as_os_str().as_bytes();
    let search = libc::O_PATH | libc::O_DIRECTORY | libc::O_NONBLOCK;
    let (mut dir, mut rest) = if check.from > 0 && bytes.get(check.from) == Some(&b'/') {
        let lead = OsStr::from_bytes(&bytes[..check.from]);
        (
            Some(openat(libc::AT_FDCWD, lead, search)?),
            &bytes[check.from + 1..],
        )
    } else if bytes.first() == Some(&b'/') {
        (
            Some(openat(libc::AT_FDCWD, OsStr::new("/"), search)?),
            &bytes[1..],
        )
    } else {
        (None, bytes)
    };
    let at = |d: &Option<File>| d.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
    while let Some(i) = rest.iter().position(|&b| b == b'/') {
        let name = &rest[..i];
        rest = &rest[i + 1..];
        if !name.is_empty() {
            let next = openat_checked(at(&dir), OsStr::from_bytes(name), search, check.mode)?;
            dir = Some(next);
        }
    }
    if rest.is_empty() {
        return open_last(at(&dir), OsStr::new("."), DisableSymlinks::Off);
    }
    open_last(at(&dir), OsStr::from_bytes(rest), check.mode)
}

/// What `try_files` and `if (-f|-d|-e|-x ...)` learn of `path`: its `stat` when symlinks
/// are followed, as nginx; under `disable_symlinks on|if_not_owner` the same checked walk as
/// a response (so a refused symlink, or an unreadable file, is not there).
pub fn stat_path(path: &Path, check: SymlinkCheck) -> io::Result<std::fs::Metadata> {
    if check.mode == DisableSymlinks::Off {
        return std::fs::metadata(path);
    }
    open_path(path, check)?.file.metadata()
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

    #[test]
    fn from_prefix_follows_nginx_rules() {
        use DisableSymlinks::{IfNotOwner, Off, On};
        let at = |from: Option<&str>, path: &str| SymlinkCheck::for_path(On, from, path.as_bytes());
        let c = |mode, from| SymlinkCheck { mode, from };
        assert_eq!(at(None, "/srv/www/f"), c(On, 0));
        assert_eq!(at(Some(""), "/srv/www/f"), c(On, 0));
        // Checked after the prefix, from its `/` (or its own trailing `/`).
        assert_eq!(at(Some("/srv/www"), "/srv/www/f"), c(On, 8));
        assert_eq!(at(Some("/srv/www/"), "/srv/www/f"), c(On, 8));
        // The path itself: not checked.
        assert_eq!(at(Some("/srv/www"), "/srv/www"), c(Off, 0));
        // Not a prefix, longer than the path, or ending inside a component: checked whole.
        assert_eq!(at(Some("/srv/other"), "/srv/www/f"), c(On, 0));
        assert_eq!(at(Some("/srv/www/f/g"), "/srv/www/f"), c(On, 0));
        assert_eq!(at(Some("/srv/ww"), "/srv/www/f"), c(On, 0));
        // `/` as the prefix: the whole path, from `/`.
        assert_eq!(at(Some("/"), "/f"), c(On, 0));
        let owner = SymlinkCheck::for_path(IfNotOwner, Some("/a"), b"/a/b");
        assert_eq!(owner, c(IfNotOwner, 2));
        assert_eq!(SymlinkCheck::for_path(Off, Some("/a"), b"/a/b"), c(Off, 0));
    }

    #[test]
    fn checked_walk_starts_after_from_and_honours_a_trailing_slash() {
        use std::os::unix::fs::symlink;
        let d = TempDir::new("walk");
        let f = d.file("real.txt", b"x");
        std::fs::create_dir(d.0.join("dir")).unwrap();
        d.file("dir/in.txt", b"in");
        symlink(d.0.join("dir"), d.0.join("dirlink")).unwrap();
        symlink(&f, d.0.join("filelink")).unwrap();
        let path = |s: &str| d.0.join(s);
        let errno = |p: &Path, c: SymlinkCheck| open_path(p, c).unwrap_err().raw_os_error();
        let on = SymlinkCheck::from(DisableSymlinks::On);
        // A symlinked directory on the way: ENOTDIR; a symlink at the end: ELOOP.
        assert_eq!(errno(&path("dirlink/in.txt"), on), Some(libc::ENOTDIR));
        assert_eq!(errno(&path("filelink"), on), Some(libc::ELOOP));
        // From the end of `dirlink`: the link is opened as it is, the rest is checked.
        let p = path("dirlink/in.txt");
        let from = d.0.join("dirlink");
        let c =
            SymlinkCheck::for_path(DisableSymlinks::On, from.to_str(), p.as_os_str().as_bytes());
        assert_eq!(open_path(&p, c).unwrap().meta.len, 2);
        // A trailing `/`: a file is ENOTDIR under every policy; a directory opens.
        for mode in [
            DisableSymlinks::Off,
            DisableSymlinks::On,
            DisableSymlinks::IfNotOwner,
        ] {
            let p = PathBuf::from(format!("{}/", f.display()));
            assert_eq!(errno(&p, mode.into()), Some(libc::ENOTDIR), "{mode:?}");
            let p = PathBuf::from(format!("{}/", d.0.join("dir").display()));
            assert_eq!(open_path(&p, mode).unwrap().meta.kind, FileKind::Dir);
        }
        let owner = SymlinkCheck::from(DisableSymlinks::IfNotOwner);
        let p = PathBuf::from(format!("{}/", path("filelink").display()));
        assert_eq!(errno(&p, owner), Some(libc::ENOTDIR));
        // `.` and `..` are walked as names; the test via stat_path sees the same.
        let p = path("dir/../dir/./in.txt");
        assert_eq!(open_path(&p, on).unwrap().meta.len, 2);
        assert!(stat_path(&p, on).unwrap().is_file());
        assert!(stat_path(&path("filelink"), on).is_err());
        assert!(stat_path(&path("filelink"), DisableSymlinks::Off.into()).is_ok());
    }
}
