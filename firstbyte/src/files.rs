//! What a configuration load reads from the file system, through one door.
//!
//! The configuration loader (main file, `include`s and their globs) and the TLS object store
//! (certificates, keys, password files, ticket keys, CA files) read files only through
//! [`read`], [`stamp`] and [`glob`]; log files are opened through [`open_log`]. By default they
//! go to the disk. Two other modes, per thread, exist for privilege separation (see
//! `broker`):
//!
//! - [`recording`]: the privileged broker loads a configuration from disk and keeps a
//!   [`Snapshot`] of everything the load read (contents, stamps, glob results, and the log
//!   files it opened, as descriptors);
//! - [`replaying`]: the unprivileged server builds the same configuration from that snapshot,
//!   without touching the disk. A path the snapshot lacks is an error, never a disk read.
//!
//! A snapshot crosses the socket between the two as bytes ([`Snapshot::encode`]) plus the log
//! descriptors, in the order of [`Snapshot::log_paths`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of an open file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of `path` now, if it can be read (through the current file source).
    pub fn current(path: &Path) -> Option<Self> {
        stamp(path)
    }
}

/// A failed read as recorded: the OS error number if there was one, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    errno: Option<i32>,
    text: String,
}

impl Failure {
    fn of(e: &io::Error) -> Self {
        Self {
            errno: e.raw_os_error(),
            text: e.to_string(),
        }
    }

    fn error(&self) -> io::Error {
        match self.errno {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::other(self.text.clone()),
        }
    }
}

/// Everything one load read, for another process to build the same load from.
#[derive(Debug, Default)]
pub struct Snapshot {
    files: HashMap<PathBuf, Result<(Vec<u8>, FileStamp), Failure>>,
    stamps: HashMap<PathBuf, Option<FileStamp>>,
    globs: HashMap<String, Result<Vec<PathBuf>, String>>,
    logs: Vec<(PathBuf, Result<File, Failure>)>,
}

enum Mode {
    Record(Snapshot),
    Replay(Snapshot),
}

thread_local! {
    static MODE: RefCell<Option<Mode>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's reads going to the disk and recorded; returns the recording.
pub fn recording<T>(f: impl FnOnce() -> T) -> (T, Snapshot) {
    let prev = MODE.with(|m| m.replace(Some(Mode::Record(Snapshot::default()))));
    let out = f();
    let mode = MODE.with(|m| m.replace(prev));
    match mode {
        Some(Mode::Record(s)) => (out, s),
        _ => (out, Snapshot::default()),
    }
}

/// Runs `f` with this thread's reads answered from `snap` only.
pub fn replaying<T>(snap: Snapshot, f: impl FnOnce() -> T) -> T {
    let prev = MODE.with(|m| m.replace(Some(Mode::Replay(snap))));
    let out = f();
    MODE.with(|m| m.replace(prev));
    out
}

fn missing(path: &Path) -> io::Error {
    io::Error::other(format!(
        "\"{}\" is not in what the privileged process read",
        path.display()
    ))
}

/// Reads a whole file of at most `max` bytes, with the stamp of the very file read.
pub fn read(path: &Path, max: u64) -> io::Result<(Vec<u8>, FileStamp)> {
    read_with(path, max, false)
}

/// [`read`] for a configuration file (the main file, an `include`): only a regular file. A
/// device, FIFO or socket has no size to trust: `/dev/zero` would be read up to `max` and a
/// FIFO would block the load forever (nginx reads `st_size` bytes, so it reads nothing of
/// them); such a path is a mistake, refused before anything is read.
pub fn read_config(path: &Path, max: u64) -> io::Result<(Vec<u8>, FileStamp)> {
    read_with(path, max, true)
}

/// Why a file whose metadata says `is_file` and `len` may not be read whole under `max`.
pub fn refusal(is_file: bool, len: u64, max: u64, regular_only: bool) -> Option<String> {
    if regular_only && !is_file {
        Some("not a regular file".into())
    } else if len > max {
        Some(format!("file is larger than {max} bytes"))
    } else {
        None
    }
}

fn read_with(path: &Path, max: u64, regular_only: bool) -> io::Result<(Vec<u8>, FileStamp)> {
    let replayed = MODE.with(|m| match &*m.borrow() {
        Some(Mode::Replay(s)) => Some(match s.files.get(path) {
            Some(Ok((b, st))) => Ok((b.clone(), *st)),
            Some(Err(f)) => Err(f.error()),
            None => Err(missing(path)),
        }),
        _ => None,
    });
    if let Some(r) = replayed {
        return r;
    }
    let r = read_disk(path, max, regular_only);
    MODE.with(|m| {
        if let Some(Mode::Record(s)) = &mut *m.borrow_mut() {
            let rec = match &r {
                Ok((b, st)) => Ok((b.clone(), *st)),
                Err(e) => Err(Failure::of(e)),
            };
            s.files.insert(path.to_path_buf(), rec);
        }
    });
    r
}

fn read_disk(path: &Path, max: u64, regular_only: bool) -> io::Result<(Vec<u8>, FileStamp)> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: opening a FIFO does not wait for a writer (the check below refuses it);
    // a regular file ignores the flag.
    let flags = if regular_only { libc::O_NONBLOCK } else { 0 };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = file.metadata()?;
    if regular_only && meta.is_dir() {
        // As reading it would say (nginx's words for a directory).
        return Err(io::Error::from_raw_os_error(libc::EISDIR));
    }
    if let Some(why) = refusal(meta.is_file(), meta.len(), max, regular_only) {
        return Err(io::Error::other(why));
    }
    let too_big = || io::Error::other(format!("file is larger than {max} bytes"));
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.by_ref()
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big());
    }
    Ok((bytes, FileStamp::of(&meta)))
}

/// The stamp of `path` now, if it can be read.
pub fn stamp(path: &Path) -> Option<FileStamp> {
    let replayed = MODE.with(|m| match &*m.borrow() {
        Some(Mode::Replay(s)) => Some(match (s.stamps.get(path), s.files.get(path)) {
            (Some(st), _) => *st,
            (None, Some(Ok((_, st)))) => Some(*st),
            _ => None,
        }),
        _ => None,
    });
    if let Some(r) = replayed {
        return r;
    }
    let st = std::fs::metadata(path).ok().map(|m| FileStamp::of(&m));
    MODE.with(|m| {
        if let Some(Mode::Record(s)) = &mut *m.borrow_mut() {
            s.stamps.insert(path.to_path_buf(), st);
        }
    });
    st
}

/// The files `pattern` matches, sorted, directories left out; `*` does not match a leading
/// dot, as glob(3) (editor backups, `.swp` files). `Err`: the pattern is invalid.
pub fn glob(pattern: &str) -> Result<Vec<PathBuf>, String> {
    let replayed = MODE.with(|m| match &*m.borrow() {
        Some(Mode::Replay(s)) => Some(
            s.globs
                .get(pattern)
                .cloned()
                .unwrap_or_else(|| Err(format!("\"{pattern}\" was not expanded"))),
        ),
        _ => None,
    });
    if let Some(r) = replayed {
        return r;
    }
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let r = glob::glob_with(pattern, options)
        .map(|paths| {
            let mut v: Vec<PathBuf> = paths
                .filter_map(Result::ok)
                .filter(|p| !p.is_dir())
                .collect();
            v.sort();
            v
        })
        .map_err(|e| e.msg.to_string());
    MODE.with(|m| {
        if let Some(Mode::Record(s)) = &mut *m.borrow_mut() {
            s.globs.insert(pattern.to_string(), r.clone());
        }
    });
    r
}

/// Opens a log file for append with `open` (disk), or takes the descriptor the privileged
/// process opened (replay).
pub fn open_log(path: &Path, open: impl FnOnce(&Path) -> io::Result<File>) -> io::Result<File> {
    let replayed = MODE.with(|m| match &*m.borrow() {
        Some(Mode::Replay(s)) => Some(match s.logs.iter().find(|(p, _)| p == path) {
            Some((_, Ok(f))) => f.try_clone(),
            Some((_, Err(f))) => Err(f.error()),
            None => Err(missing(path)),
        }),
        _ => None,
    });
    if let Some(r) = replayed {
        return r;
    }
    let r = open(path);
    MODE.with(|m| {
        if let Some(Mode::Record(s)) = &mut *m.borrow_mut() {
            if !s.logs.iter().any(|(p, _)| p == path) {
                let rec = match &r {
                    Ok(f) => f.try_clone().map_err(|e| Failure::of(&e)),
                    Err(e) => Err(Failure::of(e)),
                };
                s.logs.push((path.to_path_buf(), rec));
            }
        }
    });
    r
}

static STARTED_AS_ROOT: AtomicBool = AtomicBool::new(false);

/// Records that the process started as root: a load in the unprivileged server must take
/// the defaults a root load takes (`listen` 80, not 8000), as the broker's load did.
pub fn set_started_as_root() {
    STARTED_AS_ROOT.store(true, Ordering::Relaxed);
}

/// Whether the process started as root (see [`set_started_as_root`]).
pub fn started_as_root() -> bool {
    STARTED_AS_ROOT.load(Ordering::Relaxed)
}

impl Snapshot {
    /// Paths of the log files opened, in the order their descriptors travel.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        self.logs.iter().map(|(p, _)| p.clone()).collect()
    }

    /// The log descriptors that opened, in [`Snapshot::log_paths`] order (failures skipped).
    pub fn log_files(&self) -> Vec<&File> {
        self.logs
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .collect()
    }

    /// Every file read, with the result (for tests and the broker's checks).
    #[cfg(test)]
    pub fn paths_read(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = self.files.keys().map(PathBuf::as_path).collect();
        v.sort();
        v
    }

    /// The snapshot as bytes, log descriptors excepted (they travel beside, in order; a log
    /// that failed to open travels as its error).
    pub fn encode(&self, w: &mut crate::wire::Writer) {
        w.u32(self.files.len() as u32);
        for (p, r) in &self.files {
            w.path(p);
            match r {
                Ok((b, st)) => {
                    w.u8(1);
                    w.bytes(b);
                    stamp_put(w, st);
                }
                Err(f) => {
                    w.u8(0);
                    failure_put(w, f);
                }
            }
        }
        w.u32(self.stamps.len() as u32);
        for (p, st) in &self.stamps {
            w.path(p);
            match st {
                Some(st) => {
                    w.u8(1);
                    stamp_put(w, st);
                }
                None => w.u8(0),
            }
        }
        w.u32(self.globs.len() as u32);
        for (pat, r) in &self.globs {
            w.str(pat);
            match r {
                Ok(v) => {
                    w.u8(1);
                    w.u32(v.len() as u32);
                    for p in v {
                        w.path(p);
                    }
                }
                Err(e) => {
                    w.u8(0);
                    w.str(e);
                }
            }
        }
        w.u32(self.logs.len() as u32);
        for (p, r) in &self.logs {
            w.path(p);
            match r {
                Ok(_) => w.u8(1),
                Err(f) => {
                    w.u8(0);
                    failure_put(w, f);
                }
            }
        }
    }

    /// Reads [`Snapshot::encode`]'s bytes; `fds` are the log descriptors that came beside,
    /// in order.
    pub fn decode(
        r: &mut crate::wire::Reader<'_>,
        fds: &mut impl Iterator<Item = File>,
    ) -> io::Result<Self> {
        let mut s = Snapshot::default();
        for _ in 0..r.u32()? {
            let p = r.path()?;
            let v = if r.u8()? == 1 {
                let b = r.bytes()?.to_vec();
                Ok((b, stamp_get(r)?))
            } else {
                Err(failure_get(r)?)
            };
            s.files.insert(p, v);
        }
        for _ in 0..r.u32()? {
            let p = r.path()?;
            let v = if r.u8()? == 1 {
                Some(stamp_get(r)?)
            } else {
                None
            };
            s.stamps.insert(p, v);
        }
        for _ in 0..r.u32()? {
            let pat = r.str()?.to_string();
            let v = if r.u8()? == 1 {
                let n = r.u32()?;
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(r.path()?);
                }
                Ok(v)
            } else {
                Err(r.str()?.to_string())
            };
            s.globs.insert(pat, v);
        }
        for _ in 0..r.u32()? {
            let p = r.path()?;
            let v = if r.u8()? == 1 {
                Ok(fds
                    .next()
                    .ok_or_else(|| io::Error::other("a log descriptor is missing"))?)
            } else {
                Err(failure_get(r)?)
            };
            s.logs.push((p, v));
        }
        Ok(s)
    }
}

fn stamp_put(w: &mut crate::wire::Writer, s: &FileStamp) {
    for v in [s.dev, s.ino, s.len] {
        w.u64(v);
    }
    for v in [s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1] {
        w.u64(v as u64);
    }
}

fn stamp_get(r: &mut crate::wire::Reader<'_>) -> io::Result<FileStamp> {
    Ok(FileStamp {
        dev: r.u64()?,
        ino: r.u64()?,
        len: r.u64()?,
        mtime: (r.u64()? as i64, r.u64()? as i64),
        ctime: (r.u64()? as i64, r.u64()? as i64),
    })
}

fn failure_put(w: &mut crate::wire::Writer, f: &Failure) {
    w.u64(f.errno.map(|n| n as u32 as u64).unwrap_or(u64::MAX));
    w.str(&f.text);
}

fn failure_get(r: &mut crate::wire::Reader<'_>) -> io::Result<Failure> {
    let n = r.u64()?;
    Ok(Failure {
        errno: (n != u64::MAX).then_some(n as u32 as i32),
        text: r.str()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_file_is_a_regular_file_within_the_limit() {
        assert_eq!(refusal(true, 10, 64, true), None);
        assert_eq!(refusal(true, 64, 64, true), None);
        assert_eq!(
            refusal(true, 65, 64, true).as_deref(),
            Some("file is larger than 64 bytes")
        );
        // A device reports size 0: refused for what it is, not for its size.
        assert_eq!(
            refusal(false, 0, 64, true).as_deref(),
            Some("not a regular file")
        );
        // Other readers (certificates, keys) keep reading what they are given.
        assert_eq!(refusal(false, 0, 64, false), None);
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_as_configuration() {
        let e = read_config(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let e = read_config(Path::new("/dev/null"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let dir = std::env::temp_dir().join(format!("fb-files-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Returns at once (no writer is waited for).
        let e = read_config(&fifo, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        let e = read_config(&dir, 1 << 20).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EISDIR));
        std::fs::write(dir.join("ok.conf"), "events {}\n").unwrap();
        assert_eq!(
            read_config(&dir.join("ok.conf"), 1 << 20).unwrap().0,
            b"events {}\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_recorded_load_replays_without_the_disk() {
        let d = std::env::temp_dir().join(format!("fb-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.conf"), "one").unwrap();
        std::fs::write(d.join("b.conf"), "two").unwrap();
        let pattern = format!("{}/*.conf", d.display());
        let ((), snap) = recording(|| {
            assert_eq!(read(&d.join("a.conf"), 100).unwrap().0, b"one");
            assert!(read(&d.join("nope"), 100).is_err());
            assert_eq!(glob(&pattern).unwrap().len(), 2);
            assert!(stamp(&d.join("b.conf")).is_some());
            assert!(read(&d.join("b.conf"), 2).is_err(), "over the limit");
        });
        let mut w = crate::wire::Writer::default();
        snap.encode(&mut w);
        let bytes = w.into_bytes();
        let snap = Snapshot::decode(
            &mut crate::wire::Reader::new(&bytes),
            &mut std::iter::empty(),
        )
        .unwrap();
        // The disk changes; the replay answers what was read.
        std::fs::remove_dir_all(&d).unwrap();
        replaying(snap, || {
            let (b, st) = read(&d.join("a.conf"), 100).unwrap();
            assert_eq!(b, b"one");
            assert_eq!(stamp(&d.join("a.conf")), Some(st));
            assert!(stamp(&d.join("b.conf")).is_some());
            assert_eq!(
                read(&d.join("nope"), 100).unwrap_err().raw_os_error(),
                Some(libc::ENOENT)
            );
            assert_eq!(glob(&pattern).unwrap().len(), 2);
            let other = read(Path::new("/etc/hostname"), 100).unwrap_err();
            assert!(other.to_string().contains("not in what"), "{other}");
            assert!(glob("/etc/*").is_err());
        });
        // Outside the replay: the disk again.
        assert!(read(&d.join("a.conf"), 100).is_err());
    }
}
