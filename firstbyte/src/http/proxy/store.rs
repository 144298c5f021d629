//! `proxy_store`: a 200 response is written to a temp file in `proxy_temp_path` as it goes
//! to the client (nginx's `ngx_http_upstream_store`), then renamed to its place once its body
//! came whole: `root`/`alias` + the URI for `on`, or the evaluated string. Not on a body that
//! failed or came short of its `Content-Length`; the temp file is removed then.
//!
//! The destination is split in two: a trusted directory (the evaluated `root`/`alias`, or the
//! literal start of the string up to its last `/` before any variable), used as written, and
//! the rest, which comes from the request. The rest is walked one component at a time under
//! the trusted directory with `openat(O_NOFOLLOW)`, its missing directories made with
//! `mkdirat` (nginx's `create_path`), and the file renamed into the last one with `renameat`:
//! no `.`/`..` component and no symlink in the request's part is followed, so a request
//! cannot place a file outside the trusted directory (nginx relies on its URI normalisation
//! alone and follows symlinks).
//!
//! The destination of a string with variables is known only once the response header came
//! (its `$upstream_*` can be in it), and a body can end before that: [`Slot`] holds a complete
//! file until its destination is set, and removes it if none ever is.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// Where a stored response goes: `trusted` as it is, then `rest`, checked component by
/// component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// A directory the configuration names (made, symlinks followed, if missing).
    pub trusted: PathBuf,
    /// `/`-separated components from the request, the last one the file's name.
    pub rest: String,
}

impl Target {
    /// Splits `path`, whose first `literal` bytes come from the configuration, at the last
    /// `/` among those, or right after them when a `/` follows (`/data/www$uri`: `/data/www`
    /// is trusted).
    pub fn split(path: &str, literal: usize) -> Target {
        let literal = literal.min(path.len());
        let head = match path.as_bytes().get(literal) {
            Some(b'/') if literal > 0 => &path[..=literal],
            _ => &path[..literal],
        };
        match head.rfind('/') {
            Some(0) => Target {
                trusted: PathBuf::from("/"),
                rest: path[1..].to_string(),
            },
            Some(i) => Target {
                trusted: PathBuf::from(&path[..i]),
                rest: path[i + 1..].to_string(),
            },
            None => Target {
                trusted: PathBuf::from("."),
                rest: path.to_string(),
            },
        }
    }
}

/// A complete temp file waiting for its destination.
struct Done {
    file: File,
    tmp: PathBuf,
    mtime: Option<SystemTime>,
}

impl Drop for Done {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

#[derive(Default)]
struct State {
    dest: Option<Target>,
    done: Option<Done>,
    /// No destination will come (the request ended before it was known).
    cancelled: bool,
}

/// One request's store: the destination, set when it is known, and the complete file.
#[derive(Clone)]
pub struct Slot {
    state: Arc<Mutex<State>>,
    /// `proxy_store_access` (the file's mode; directories get `x` where there is `r`).
    access: u32,
}

impl Slot {
    /// A slot with no destination yet; `access`: the file's mode.
    pub fn new(access: u32) -> Slot {
        Slot {
            state: Arc::new(Mutex::new(State::default())),
            access,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The destination: a file already complete goes there now.
    pub fn set(&self, target: Target) {
        let done = {
            let mut s = self.lock();
            if s.cancelled {
                return;
            }
            s.dest = Some(target.clone());
            s.done.take()
        };
        if let Some(d) = done {
            self.place(d, &target);
        }
    }

    /// No destination will be set: a complete file is removed.
    pub fn cancel(&self) {
        let done = {
            let mut s = self.lock();
            s.cancelled = true;
            s.dest = None;
            s.done.take()
        };
        drop(done);
    }

    fn complete(&self, d: Done) {
        let dest = {
            let mut s = self.lock();
            match &s.dest {
                Some(t) => t.clone(),
                None if s.cancelled => return,
                None => {
                    s.done = Some(d);
                    return;
                }
            }
        };
        self.place(d, &dest);
    }

    fn place(&self, d: Done, target: &Target) {
        if let Err(e) = place(&d, target, self.access) {
            crate::fblog!(
                Crit,
                "rename() \"{}\" to \"{}/{}\" failed ({})",
                d.tmp.display(),
                target.trusted.display(),
                target.rest,
                crate::log::OsError(&e)
            );
        }
    }
}

fn cstr(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn retry<T: PartialOrd + Default>(mut f: impl FnMut() -> T) -> io::Result<T> {
    loop {
        let r = f();
        if r >= T::default() {
            return Ok(r);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The directory `name` under `dir`, made (mode `mode`, less the umask) when missing; a
/// symlink there is refused (`ELOOP`/`ENOTDIR`).
fn subdir(dir: RawFd, name: &[u8], mode: u32) -> io::Result<File> {
    let c = cstr(name)?;
    // SAFETY: `c` is NUL-terminated and outlives the call; `dir` is open.
    let made = retry(|| unsafe { libc::mkdirat(dir, c.as_ptr(), mode as libc::mode_t) });
    if let Err(e) = made {
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
    }
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: as above.
    let fd = retry(|| unsafe { libc::openat(dir, c.as_ptr(), flags) })?;
    // SAFETY: `fd` was just returned by openat and nothing else owns it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Moves the complete file `d` to `target` with mode `access` (see the module overview).
fn place(d: &Done, target: &Target, access: u32) -> io::Result<()> {
    let parts: Vec<&str> = target.rest.split('/').filter(|p| !p.is_empty()).collect();
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    };
    if target.rest.ends_with('/') {
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    // nginx's `ngx_dir_access`: `x` beside each `r`.
    let dir_mode = access | ((access & 0o444) >> 2);
    if !target.trusted.is_dir() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(dir_mode)
            .create(&target.trusted)?;
    }
    let root = cstr(target.trusted.as_os_str().as_bytes())?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: `root` is NUL-terminated and outlives the call.
    let fd = retry(|| unsafe { libc::open(root.as_ptr(), flags) })?;
    // SAFETY: `fd` was just returned by open and nothing else owns it.
    let mut dir = unsafe { File::from_raw_fd(fd) };
    for name in dirs {
        dir = subdir(dir.as_raw_fd(), name.as_bytes(), dir_mode)?;
    }
    d.file
        .set_permissions(std::fs::Permissions::from_mode(access))?;
    if let Some(t) = d.mtime {
        d.file.set_modified(t)?;
    }
    let from = cstr(d.tmp.as_os_str().as_bytes())?;
    let to = cstr(last.as_bytes())?;
    // SAFETY: both names are NUL-terminated and outlive the call; `dir` is open.
    let renamed = retry(|| unsafe {
        libc::renameat(libc::AT_FDCWD, from.as_ptr(), dir.as_raw_fd(), to.as_ptr())
    });
    match renamed {
        Ok(_) => Ok(()),
        // `proxy_temp_path` on another file system: copied beside the destination, then
        // renamed (nginx's `ngx_copy_file`).
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => copy_into(d, &dir, last, access),
        Err(e) => Err(e),
    }
}

fn copy_into(d: &Done, dir: &File, name: &str, access: u32) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let tmp_name = format!(".{name}.{}.store", std::process::id());
    let c = cstr(tmp_name.as_bytes())?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is NUL-terminated and outlives the call; `dir` is open.
    let fd = retry(|| unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600) })?;
    // SAFETY: `fd` was just returned by openat and nothing else owns it.
    let mut out = unsafe { File::from_raw_fd(fd) };
    let unlink = || {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
    };
    let copied = (|| {
        let mut buf = vec![0u8; 64 << 10];
        let mut at = 0u64;
        loop {
            let n = d.file.read_at(&mut buf, at)?;
            if n == 0 {
                break;
            }
            io::Write::write_all(&mut out, &buf[..n])?;
            at += n as u64;
        }
        out.set_permissions(std::fs::Permissions::from_mode(access))?;
        if let Some(t) = d.mtime {
            out.set_modified(t)?;
        }
        let to = cstr(name.as_bytes())?;
        // SAFETY: both names are NUL-terminated; `dir` is open.
        retry(|| unsafe {
            libc::renameat(dir.as_raw_fd(), c.as_ptr(), dir.as_raw_fd(), to.as_ptr())
        })
        .map(|_| ())
    })();
    if copied.is_err() {
        unlink();
    }
    copied
}

/// The temp file being written.
struct Writing {
    file: File,
    tmp: PathBuf,
    written: u64,
}

/// What a stored response's body needs besides itself.
pub struct Store {
    /// Where the file goes.
    pub slot: Slot,
    /// `proxy_temp_path`.
    pub temp_dir: PathBuf,
    /// The upstream's `Content-Length`: the file is complete only at that length.
    pub length: Option<u64>,
    /// The upstream's `Last-Modified`: the file's modification time.
    pub mtime: Option<SystemTime>,
}

/// An upstream response body that is also written to its store file (see the module
/// overview); with no store it only passes the body on.
pub struct StoreBody<B> {
    inner: B,
    writing: Option<Writing>,
    store: Option<Store>,
}

impl<B> StoreBody<B> {
    /// `inner` as it is.
    pub fn plain(inner: B) -> Self {
        StoreBody {
            inner,
            writing: None,
            store: None,
        }
    }

    /// `inner`, written to a new temp file in `store.temp_dir` as it is read; when that
    /// file cannot be made, the response is not stored (an error-log line).
    pub fn new(inner: B, store: Store) -> Self {
        match super::spool::named_temp_file(&store.temp_dir) {
            Ok((file, tmp)) => StoreBody {
                inner,
                writing: Some(Writing {
                    file,
                    tmp,
                    written: 0,
                }),
                store: Some(store),
            },
            Err(e) => {
                crate::fblog!(
                    Crit,
                    "open() a temp file in \"{}\" failed ({}) for proxy_store",
                    store.temp_dir.display(),
                    crate::log::OsError(&e)
                );
                Self::plain(inner)
            }
        }
    }

    fn write(&mut self, data: &[u8]) {
        let Some(w) = self.writing.as_mut() else {
            return;
        };
        if let Err(e) = io::Write::write_all(&mut w.file, data) {
            crate::fblog!(
                Crit,
                "write() \"{}\" failed ({})",
                w.tmp.display(),
                crate::log::OsError(&e)
            );
            self.abandon();
            return;
        }
        w.written += data.len() as u64;
    }

    fn abandon(&mut self) {
        if let Some(w) = self.writing.take() {
            let _ = std::fs::remove_file(&w.tmp);
        }
    }

    fn finish(&mut self) {
        let (Some(w), Some(s)) = (self.writing.take(), self.store.as_ref()) else {
            return;
        };
        if s.length.is_some_and(|n| n != w.written) {
            let _ = std::fs::remove_file(&w.tmp);
            return;
        }
        s.slot.complete(Done {
            file: w.file,
            tmp: w.tmp,
            mtime: s.mtime,
        });
    }
}

impl<B> Drop for StoreBody<B> {
    fn drop(&mut self) {
        self.abandon();
    }
}

impl<B> http_body::Body for StoreBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if this.writing.is_none() {
            return polled;
        }
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.write(data);
                }
                if this.inner.is_end_stream() {
                    this.finish();
                }
            }
            Poll::Ready(None) => this.finish(),
            Poll::Ready(Some(Err(_))) => this.abandon(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: super::spool::Upstream> super::spool::Upstream for StoreBody<B> {
    fn rearm(&mut self) {
        self.inner.rearm();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fb-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn done(temp: &Path, data: &[u8]) -> Done {
        let (mut file, tmp) = super::super::spool::named_temp_file(temp).expect("temp");
        io::Write::write_all(&mut file, data).expect("write");
        Done {
            file,
            tmp,
            mtime: None,
        }
    }

    #[test]
    fn split_keeps_the_configured_part_trusted() {
        let t = Target::split("/data/www/a/b.html", 9);
        assert_eq!(t.trusted, PathBuf::from("/data/www"));
        assert_eq!(t.rest, "a/b.html");
        let t = Target::split("/data/www/a/b.html", 10);
        assert_eq!(t.trusted, PathBuf::from("/data/www"));
        assert_eq!(t.rest, "a/b.html");
        let t = Target::split("/data/wwwx/b.html", 9);
        assert_eq!(t.trusted, PathBuf::from("/data"));
        assert_eq!(t.rest, "wwwx/b.html");
        let t = Target::split("/data/f_x/y", 7);
        assert_eq!(t.trusted, PathBuf::from("/data"));
        assert_eq!(t.rest, "f_x/y");
        let t = Target::split("/x", 0);
        assert_eq!(t.trusted, PathBuf::from("."));
        assert_eq!(t.rest, "/x");
    }

    #[test]
    fn placed_with_directories_and_mode() {
        let d = dir("place");
        let temp = d.join("temp");
        let root = d.join("root");
        let f = done(&temp, b"stored");
        let t = Target {
            trusted: root.clone(),
            rest: "/a/b/c.txt".into(),
        };
        place(&f, &t, 0o640).expect("placed");
        drop(f);
        let out = root.join("a/b/c.txt");
        assert_eq!(std::fs::read(&out).expect("read"), b"stored");
        assert_eq!(std::fs::metadata(&out).expect("m").mode() & 0o777, 0o640);
        assert_eq!(std::fs::read_dir(&temp).expect("temp").count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The request's part may not climb out or follow a symlink: a link planted under the
    /// root (to a directory outside it) is not crossed, and `..` is refused.
    #[test]
    fn no_escape_through_dotdot_or_symlinks() {
        let d = dir("escape");
        let temp = d.join("temp");
        let root = d.join("root");
        let outside = d.join("outside");
        std::fs::create_dir_all(&root).expect("root");
        std::fs::create_dir_all(&outside).expect("outside");
        std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
        for rest in [
            "/link/x.txt",
            "/../outside/y.txt",
            "/a/../../outside/z.txt",
            "/./w",
        ] {
            let f = done(&temp, b"evil");
            let t = Target {
                trusted: root.clone(),
                rest: rest.into(),
            };
            assert!(place(&f, &t, 0o600).is_err(), "{rest} placed");
        }
        assert_eq!(std::fs::read_dir(&outside).expect("outside").count(), 0);
        assert_eq!(std::fs::read_dir(&temp).expect("temp").count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_complete_before_its_destination_waits_for_it() {
        let d = dir("slot");
        let temp = d.join("temp");
        let slot = Slot::new(0o600);
        slot.complete(done(&temp, b"early"));
        assert_eq!(std::fs::read_dir(&temp).expect("temp").count(), 1);
        slot.set(Target {
            trusted: d.join("root"),
            rest: "f".into(),
        });
        assert_eq!(std::fs::read(d.join("root/f")).expect("read"), b"early");
        let cancelled = Slot::new(0o600);
        cancelled.complete(done(&temp, b"never"));
        cancelled.cancel();
        assert_eq!(std::fs::read_dir(&temp).expect("temp").count(), 0);
        // Cancelled after its destination was known (an `X-Accel-Redirect` answer).
        let late = Slot::new(0o600);
        late.set(Target {
            trusted: d.join("root"),
            rest: "late".into(),
        });
        late.cancel();
        late.complete(done(&temp, b"never"));
        assert!(!d.join("root/late").exists());
        assert_eq!(std::fs::read_dir(&temp).expect("temp").count(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }
}
