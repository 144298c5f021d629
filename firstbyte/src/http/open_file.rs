//! Opening files for responses, and a small cache of open files.
//!
//! Data flow: `static_files` asks an [`OpenFileCache`] for a path under the location's
//! `disable_symlinks` policy; the cache answers from memory while an entry is fresh and
//! otherwise checks or opens the file with [`open_path`], which returns the descriptor and its
//! metadata (or the `errno` that `static_files` maps to 404/403/500).
//!
//! Every open is non-blocking (a fifo cannot stall the connection's task) and close-on-exec.
//! Under `disable_symlinks on|if_not_owner` the path is walked one component at a time with
//! `openat` relative to the previous component's `O_PATH` descriptor, with `O_NOFOLLOW`, so
//! no symlink is crossed unchecked and nothing can be swapped in between the check and the use.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, UNIX_EPOCH};

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
    fn of(m: &std::fs::Metadata) -> Self {
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

// The open file cache.

/// How long a cached open is trusted before the file is checked again: 1 s, so an edited
/// file shows within a second while a hot file costs one `stat` per second instead of an
/// `open` per request. (nginx's `open_file_cache_valid` default is 60 s.)
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(1);

/// Paths kept: 256, a quarter of the common soft `RLIMIT_NOFILE` of 1024, so the cache never
/// takes the descriptors connections need.
pub const DEFAULT_MAX_ENTRIES: usize = 256;

/// A small cache of open files by path (and `disable_symlinks` policy), so that a hot file is
/// not opened per request.
///
/// An entry is used as it is for `validity`; after that, the next lookup checks it: under
/// `disable_symlinks off` with a `stat` of the path (same device, inode, size, mtime and
/// ctime: the descriptor is kept), otherwise (and when the file changed) by opening again.
/// So a changed file is never described by stale metadata, nor a replaced one served from
/// its old inode, for longer than `validity`. Failed opens are cached too (for the same
/// time), which makes `gzip_static` probes for absent `.gz` files cheap. Beyond
/// `max_entries` paths the least recently used eighth is dropped.
#[derive(Debug)]
pub struct OpenFileCache {
    inner: Option<Mutex<CacheInner>>,
    validity: Duration,
    max_entries: usize,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// Per path (its bytes: hashing a `Path` walks its components, several times the cost),
    /// one slot per `disable_symlinks` policy.
    map: HashMap<Box<[u8]>, [Option<Entry>; 3]>,
    /// Use counter, for recency.
    clock: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    /// The open file, or the errno of the failed open.
    result: Result<Arc<OpenFile>, i32>,
    /// When it was opened or last checked.
    checked: Instant,
    /// `clock` at the last use.
    used: u64,
}

fn slot(symlinks: DisableSymlinks) -> usize {
    match symlinks {
        DisableSymlinks::Off => 0,
        DisableSymlinks::On => 1,
        DisableSymlinks::IfNotOwner => 2,
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Default for OpenFileCache {
    fn default() -> Self {
        Self::new(DEFAULT_VALIDITY)
    }
}

impl OpenFileCache {
    /// A cache of at most [`DEFAULT_MAX_ENTRIES`] paths, each trusted for `validity`.
    pub fn new(validity: Duration) -> Self {
        Self::with_capacity(DEFAULT_MAX_ENTRIES, validity)
    }

    /// A cache of at most `max_entries` paths, each trusted for `validity`.
    pub fn with_capacity(max_entries: usize, validity: Duration) -> Self {
        OpenFileCache {
            inner: Some(Mutex::new(CacheInner::default())),
            validity,
            max_entries: max_entries.max(1),
        }
    }

    /// No caching: every lookup opens the file.
    pub fn disabled() -> Self {
        OpenFileCache {
            inner: None,
            validity: Duration::ZERO,
            max_entries: 1,
        }
    }

    /// Number of paths cached.
    pub fn len(&self) -> usize {
        self.lock().map_or(0, |g| g.map.len())
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> Option<MutexGuard<'_, CacheInner>> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.inner
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Opens `path` under `symlinks`, from the cache when it may.
    pub fn open(&self, path: &Path, symlinks: DisableSymlinks) -> io::Result<Arc<OpenFile>> {
        self.open_at(path, symlinks, Instant::now())
    }

    /// [`open`](Self::open) at a given time (for tests and callers that have the time).
    pub fn open_at(
        &self,
        path: &Path,
        symlinks: DisableSymlinks,
        now: Instant,
    ) -> io::Result<Arc<OpenFile>> {
        let Some(mut guard) = self.lock() else {
            return open_path(path, symlinks).map(Arc::new);
        };
        let i = slot(symlinks);
        guard.clock += 1;
        let clock = guard.clock;
        let cached = guard
            .map
            .get_mut(path.as_os_str().as_bytes())
            .and_then(|s| s[i].as_mut())
            .map(|e| {
                e.used = clock;
                e.clone()
            });
        drop(guard);
        if let Some(e) = cached {
            if now.saturating_duration_since(e.checked) < self.validity {
                return e.result.map_err(io::Error::from_raw_os_error);
            }
            if let (Ok(old), DisableSymlinks::Off) = (&e.result, symlinks) {
                let same = std::fs::metadata(path).is_ok_and(|m| FileMeta::of(&m) == old.meta);
                if same {
                    let old = Arc::clone(old);
                    self.store(path, i, Ok(Arc::clone(&old)), now);
                    return Ok(old);
                }
            }
        }
        let opened = open_path(path, symlinks).map(Arc::new);
        let result = opened.as_ref().map(Arc::clone).map_err(errno);
        self.store(path, i, result, now);
        opened
    }

    fn store(&self, path: &Path, i: usize, result: Result<Arc<OpenFile>, i32>, now: Instant) {
        let Some(mut g) = self.lock() else { return };
        let used = g.clock;
        let entry = Entry {
            result,
            checked: now,
            used,
        };
        if let Some(s) = g.map.get_mut(path.as_os_str().as_bytes()) {
            s[i] = Some(entry);
            return;
        }
        if g.map.len() >= self.max_entries {
            evict(&mut g.map, self.max_entries);
        }
        let mut s: [Option<Entry>; 3] = [None, None, None];
        s[i] = Some(entry);
        g.map.insert(path.as_os_str().as_bytes().into(), s);
    }
}

/// Drops the least recently used eighth (at least one) of the paths.
fn evict(map: &mut HashMap<Box<[u8]>, [Option<Entry>; 3]>, max_entries: usize) {
    let recency = |s: &[Option<Entry>; 3]| s.iter().flatten().map(|e| e.used).max().unwrap_or(0);
    let mut uses: Vec<u64> = map.values().map(recency).collect();
    let drop_n = (max_entries / 8).max(1).min(uses.len());
    if drop_n == 0 {
        return;
    }
    let (_, cutoff, _) = uses.select_nth_unstable(drop_n - 1);
    let cutoff = *cutoff;
    map.retain(|_, s| recency(s) > cutoff);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory under the system temp dir, removed at the end of the test.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("fb-open-{}-{tag}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn file(&self, name: &str, data: &[u8]) -> PathBuf {
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
    fn cache_reuses_within_validity_and_revalidates_after() {
        let d = TempDir::new("cache");
        let p = d.file("f.txt", b"one");
        let cache = OpenFileCache::with_capacity(16, Duration::from_secs(1));
        let t0 = Instant::now();
        let off = DisableSymlinks::Off;
        let a = cache.open_at(&p, off, t0).unwrap();
        let b = cache
            .open_at(&p, off, t0 + Duration::from_millis(500))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b), "same descriptor within the window");
        // Unchanged after the window: stat only, same descriptor.
        let c = cache
            .open_at(&p, off, t0 + Duration::from_millis(1500))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        // Replaced (new inode): within the window the old entry stands...
        let tmp = d.file("f.txt.new", b"second version");
        std::fs::rename(&tmp, &p).unwrap();
        let e = cache
            .open_at(&p, off, t0 + Duration::from_millis(1600))
            .unwrap();
        assert_eq!(e.meta.len, 3);
        // ...and past it the new file is opened.
        let f = cache
            .open_at(&p, off, t0 + Duration::from_millis(2600))
            .unwrap();
        assert_eq!(f.meta.len, 14);
        assert!(!Arc::ptr_eq(&a, &f));
        // Edited in place: new metadata past the window.
        std::fs::write(&p, b"third, longer version").unwrap();
        let g = cache
            .open_at(&p, off, t0 + Duration::from_millis(3700))
            .unwrap();
        assert_eq!(g.meta.len, 21);
    }

    #[test]
    fn cache_remembers_failures_for_the_window() {
        let d = TempDir::new("cache-neg");
        let p = d.0.join("later.txt");
        let cache = OpenFileCache::with_capacity(16, Duration::from_secs(1));
        let t0 = Instant::now();
        let off = DisableSymlinks::Off;
        assert!(cache.open_at(&p, off, t0).is_err());
        std::fs::write(&p, b"now").unwrap();
        let e = cache
            .open_at(&p, off, t0 + Duration::from_millis(10))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(
            cache
                .open_at(&p, off, t0 + Duration::from_secs(2))
                .unwrap()
                .meta
                .len,
            3
        );
        // Policies are cached apart: a symlinked path open under `off` is refused under `on`.
        let link = d.0.join("link.txt");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(cache.open_at(&link, off, t0).is_ok());
        let e = cache.open_at(&link, DisableSymlinks::On, t0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn cache_is_bounded_and_keeps_recent_entries() {
        let d = TempDir::new("cache-lru");
        let cache = OpenFileCache::with_capacity(8, Duration::from_secs(60));
        let t = Instant::now();
        let off = DisableSymlinks::Off;
        let hot = d.file("hot", b"h");
        cache.open_at(&hot, off, t).unwrap();
        for i in 0..50 {
            let p = d.file(&format!("f{i}"), b"x");
            cache.open_at(&p, off, t).unwrap();
            cache.open_at(&hot, off, t).unwrap();
            assert!(cache.len() <= 8, "{} entries", cache.len());
        }
        // The hot file survived every eviction: still the same descriptor.
        let before = cache.open_at(&hot, off, t).unwrap();
        std::fs::remove_file(&hot).unwrap();
        let after = cache.open_at(&hot, off, t).unwrap();
        assert!(Arc::ptr_eq(&before, &after));
        assert!(OpenFileCache::disabled().is_empty());
    }
}
