//! The caches of open files that static responses are served from.
//!
//! Two kinds, one type:
//! - **Revalidating** (no `open_file_cache`, nginx's default `off`): one process-wide cache
//!   that may keep a descriptor, but checks it at every use with one `stat(2)` of the path;
//!   the descriptor and its metadata are reused only when device, inode, size, mtime and ctime
//!   (with nanoseconds) are all unchanged, otherwise the file is opened again. A response is
//!   then the one a fresh open would give (same inode: same bytes and metadata; a `chmod`,
//!   `chown`, link count or content change moves ctime, so the file is opened again and may
//!   be refused). Under `disable_symlinks on|if_not_owner` a `stat` cannot vouch for the
//!   component walk, so every request opens (walks) the path. Failures are never kept.
//! - **nginx's** (`open_file_cache max=N [inactive=TIME]`, one per directive): an entry is
//!   trusted for the location's `open_file_cache_valid` without looking at the disk; after
//!   that the path is checked (same inode: the descriptor stays and size and dates are
//!   refreshed; otherwise it is opened again). A path keeps its descriptor once used
//!   `open_file_cache_min_uses` times (until then every request opens it); with
//!   `open_file_cache_errors on` failed lookups are kept too. At most `max` entries, the least
//!   recently used dropped first; one unused for `inactive` is dropped.
//!
//! Entries are per path and `disable_symlinks` policy; one checked with another `from=`
//! offset is checked again before it is used.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::conf::model::{DisableSymlinks, LocationConf};
use crate::conf::open_file_cache::OpenFileCacheConf;

use super::open_file::{open_path, FileKind, FileMeta, OpenFile, SymlinkCheck};

/// Paths the revalidating cache keeps: 256, a quarter of the common soft `RLIMIT_NOFILE` of
/// 1024, so the cache never takes the descriptors connections need.
pub const DEFAULT_MAX_ENTRIES: usize = 256;

/// How long the revalidating cache keeps a descriptor nobody asks for (so a deleted file's
/// space is given back soon after).
pub const DEFAULT_INACTIVE: Duration = Duration::from_secs(10);

/// What a location asks of a lookup (its `disable_symlinks` and `open_file_cache_*`).
#[derive(Debug, Clone, Copy)]
pub struct Lookup {
    /// `disable_symlinks`, as it applies to the path.
    pub symlinks: SymlinkCheck,
    /// `open_file_cache_valid`.
    pub valid: Duration,
    /// `open_file_cache_min_uses`.
    pub min_uses: u32,
    /// `open_file_cache_errors`.
    pub errors: bool,
    /// An instant at or after the request arrived (its connection's last read), if known:
    /// firstbyte's default mode reuses a check made after it.
    pub received: Option<Instant>,
}

impl Lookup {
    /// The location's settings, with its `disable_symlinks` as `check` applies it.
    pub fn of(loc: &LocationConf, check: SymlinkCheck) -> Self {
        Lookup {
            symlinks: check,
            valid: loc.open_file_cache_valid,
            min_uses: loc.open_file_cache_min_uses,
            errors: loc.open_file_cache_errors,
            received: None,
        }
    }

    /// nginx's defaults under a `disable_symlinks` policy.
    pub fn defaults(symlinks: impl Into<SymlinkCheck>) -> Self {
        Lookup {
            symlinks: symlinks.into(),
            valid: Duration::from_secs(60),
            min_uses: 1,
            errors: false,
            received: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Open per lookup.
    Off,
    /// Keep descriptors, `stat` at every use.
    Revalidate,
    /// nginx's `open_file_cache`.
    Nginx,
}

/// A cache of open files (see the module overview).
#[derive(Debug)]
pub struct OpenFileCache {
    mode: Mode,
    max: usize,
    inactive: Duration,
    inner: Mutex<Lru>,
}

/// Entries by path and policy, and their order of use.
#[derive(Debug, Default)]
struct Lru {
    /// Per path (its bytes: hashing a `Path` walks its components, several times the cost),
    /// one slot per `disable_symlinks` policy.
    map: HashMap<Box<[u8]>, [Option<Entry>; 3]>,
    /// Entries by their last use (a counter), least recent first, with the time of that use
    /// (the entry's `accessed`: `expire` reads it without hashing the path).
    order: BTreeMap<u64, (Box<[u8]>, usize, Instant)>,
    tick: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    /// The open file, or the errno of the failed open.
    result: Result<Arc<OpenFile>, i32>,
    /// The `from=` offset it was checked with (nginx's `disable_symlinks_from`).
    from: usize,
    /// The descriptor may be used without opening again (nginx closes it after the request
    /// while the path has been used fewer than `min_uses` times).
    keep: bool,
    /// When it was opened or last checked.
    created: Instant,
    /// When it was last used.
    accessed: Instant,
    /// Lookups of it.
    uses: u32,
    /// Its key in `order`.
    tick: u64,
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

impl Lru {
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Marks the entry used now and returns a copy of it.
    fn touch(&mut self, key: &[u8], i: usize, now: Instant) -> Option<Entry> {
        let last = self.tick;
        let e = self.map.get_mut(key)?[i].as_mut()?;
        e.uses = e.uses.saturating_add(1);
        e.accessed = now;
        if e.tick == last {
            // Already the most recently used (the common case of one hot file): its place in
            // `order` stays, only the time of use moves.
            let copy = e.clone();
            if let Some(used) = self.order.get_mut(&last) {
                used.2 = now;
            }
            return Some(copy);
        }
        self.tick += 1;
        let tick = self.tick;
        let old = std::mem::replace(&mut e.tick, tick);
        let copy = e.clone();
        if let Some((k, j, _)) = self.order.remove(&old) {
            self.order.insert(tick, (k, j, now));
        }
        Some(copy)
    }

    /// The entry was found unchanged by a check that began at `at`.
    fn checked(&mut self, key: &[u8], i: usize, at: Instant) {
        if let Some(e) = self.map.get_mut(key).and_then(|s| s[i].as_mut()) {
            e.created = at;
        }
    }

    fn remove(&mut self, key: &[u8], i: usize) {
        let Some(slots) = self.map.get_mut(key) else {
            return;
        };
        if let Some(e) = slots[i].take() {
            self.order.remove(&e.tick);
        }
        if slots.iter().all(Option::is_none) {
            self.map.remove(key);
        }
    }

    /// Sets the entry's result (keeping its use count), or adds it, dropping the least
    /// recently used entry first when `max` are held.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        key: &[u8],
        i: usize,
        result: Result<Arc<OpenFile>, i32>,
        from: usize,
        keep: bool,
        now: Instant,
        max: usize,
    ) {
        if let Some(e) = self.map.get_mut(key).and_then(|s| s[i].as_mut()) {
            e.result = result;
            e.from = from;
            e.keep = keep;
            e.created = now;
            return;
        }
        if self.len() >= max {
            if let Some((tick, (k, j, _))) = self.order.pop_first() {
                self.drop_slot(&k, j, tick);
            }
        }
        self.tick += 1;
        let tick = self.tick;
        let entry = Entry {
            result,
            from,
            keep,
            created: now,
            accessed: now,
            uses: 1,
            tick,
        };
        self.order.insert(tick, (key.into(), i, now));
        self.map
            .entry(key.into())
            .or_insert_with(|| [None, None, None])[i] = Some(entry);
    }

    /// Drops the entries unused for longer than `inactive`.
    fn expire(&mut self, now: Instant, inactive: Duration) {
        while let Some((&tick, &(_, _, accessed))) = self.order.first_key_value() {
            if now.saturating_duration_since(accessed) <= inactive {
                break;
            }
            if let Some((_, (k, i, _))) = self.order.pop_first() {
                self.drop_slot(&k, i, tick);
            }
        }
    }

    /// Empties slot `i` of `key` if it holds the entry last used at `tick`.
    fn drop_slot(&mut self, key: &[u8], i: usize, tick: u64) {
        let Some(slots) = self.map.get_mut(key) else {
            return;
        };
        if slots[i].as_ref().is_some_and(|e| e.tick == tick) {
            slots[i] = None;
        }
        if slots.iter().all(Option::is_none) {
            self.map.remove(key);
        }
    }
}

impl Default for OpenFileCache {
    fn default() -> Self {
        Self::revalidating()
    }
}

/// The cache of an `open_file_cache` directive, made at its first use.
pub fn configured(c: &OpenFileCacheConf) -> Option<&OpenFileCache> {
    let state = c
        .state
        .get_or_init(|| Arc::new(OpenFileCache::nginx(c.max, c.inactive)));
    state.downcast_ref::<OpenFileCache>()
}

impl OpenFileCache {
    fn with_mode(mode: Mode, max: usize, inactive: Duration) -> Self {
        OpenFileCache {
            mode,
            max: max.max(1),
            inactive,
            inner: Mutex::new(Lru::default()),
        }
    }

    /// firstbyte's default: descriptors kept while a `stat` finds the file unchanged.
    pub fn revalidating() -> Self {
        Self::with_mode(Mode::Revalidate, DEFAULT_MAX_ENTRIES, DEFAULT_INACTIVE)
    }

    /// nginx's `open_file_cache max=MAX inactive=INACTIVE`.
    pub fn nginx(max: usize, inactive: Duration) -> Self {
        Self::with_mode(Mode::Nginx, max, inactive)
    }

    /// No caching: every lookup opens the file.
    pub fn disabled() -> Self {
        Self::with_mode(Mode::Off, 1, Duration::ZERO)
    }

    /// Entries held (per path and `disable_symlinks` policy).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Lru> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens `path` as `loc` asks, from the cache when it may; `from` is the request's
    /// evaluated `disable_symlinks from=` value.
    /// `received`: an instant at or after the request arrived (the connection's last read),
    /// if known.
    pub fn open(
        &self,
        path: &Path,
        loc: &LocationConf,
        from: Option<&str>,
        received: Option<Instant>,
    ) -> io::Result<Arc<OpenFile>> {
        let check = SymlinkCheck::at(loc, from, path);
        let mut l = Lookup::of(loc, check);
        l.received = received;
        self.open_at(path, &l, Instant::now())
    }

    /// [`open`](Self::open) with explicit settings and time (for tests and callers that have
    /// the time).
    pub fn open_at(&self, path: &Path, l: &Lookup, now: Instant) -> io::Result<Arc<OpenFile>> {
        match self.mode {
            Mode::Off => open_path(path, l.symlinks).map(Arc::new),
            Mode::Revalidate => self.revalidate(path, l.symlinks, l.received, now),
            Mode::Nginx => self.nginx_lookup(path, l, now),
        }
    }

    fn revalidate(
        &self,
        path: &Path,
        symlinks: SymlinkCheck,
        received: Option<Instant>,
        now: Instant,
    ) -> io::Result<Arc<OpenFile>> {
        if symlinks.mode != DisableSymlinks::Off {
            return open_path(path, symlinks).map(Arc::new);
        }
        let key = path.as_os_str().as_bytes();
        let cached = {
            let mut g = self.lock();
            g.expire(now, self.inactive);
            g.touch(key, 0, now)
        };
        if let Some(Entry {
            result: Ok(old),
            created,
            ..
        }) = cached
        {
            // Checked (or opened) after the request arrived: whatever the client did before
            // sending it, that look at the file system saw (the requests multiplexed or
            // pipelined in one read share one `stat`).
            if received.is_some_and(|r| created >= r) {
                return Ok(old);
            }
            let checking = Instant::now();
            if std::fs::metadata(path).is_ok_and(|m| FileMeta::of(&m) == old.meta) {
                self.lock().checked(key, 0, checking);
                return Ok(old);
            }
        }
        let opened = open_path(path, symlinks).map(Arc::new);
        let mut g = self.lock();
        match &opened {
            Ok(f) => g.put(key, 0, Ok(Arc::clone(f)), 0, true, now, self.max),
            Err(_) => g.remove(key, 0),
        }
        opened
    }

    fn nginx_lookup(&self, path: &Path, l: &Lookup, now: Instant) -> io::Result<Arc<OpenFile>> {
        let key = path.as_os_str().as_bytes();
        let i = slot(l.symlinks.mode);
        let found = {
            let mut g = self.lock();
            g.expire(now, self.inactive);
            g.touch(key, i, now)
        };
        let uses = found.as_ref().map_or(1, |e| e.uses);
        let opened = match &found {
            // Never checked, or checked from another `from=` offset: walk it now.
            None => open_path(path, l.symlinks).map(Arc::new),
            Some(e) if e.from != l.symlinks.from => open_path(path, l.symlinks).map(Arc::new),
            Some(e) => {
                // Used fewer than `min_uses` times: nginx closed the descriptor after the
                // last request and opens the file again (a directory keeps no descriptor
                // and is trusted as it is).
                let reopen = matches!(&e.result, Ok(f) if !e.keep && f.meta.kind != FileKind::Dir);
                if !reopen && now.saturating_duration_since(e.created) < l.valid {
                    return e.result.clone().map_err(io::Error::from_raw_os_error);
                }
                match &e.result {
                    Ok(old) if !reopen => recheck(path, old, l.symlinks),
                    _ => open_path(path, l.symlinks).map(Arc::new),
                }
            }
        };
        let mut g = self.lock();
        match &opened {
            Err(_) if !l.errors => g.remove(key, i),
            _ => {
                let result = opened.as_ref().map(Arc::clone).map_err(errno);
                let from = l.symlinks.from;
                g.put(key, i, result, from, uses >= l.min_uses, now, self.max);
            }
        }
        opened
    }
}

/// nginx's check of a kept file past `valid`: the path's inode still the descriptor's keeps
/// the descriptor with the path's current metadata; another file is opened; a failure is
/// the answer.
fn recheck(path: &Path, old: &Arc<OpenFile>, symlinks: SymlinkCheck) -> io::Result<Arc<OpenFile>> {
    if symlinks.mode != DisableSymlinks::Off || old.meta.kind != FileKind::File {
        return open_path(path, symlinks).map(Arc::new);
    }
    let meta = FileMeta::of(&std::fs::metadata(path)?);
    if meta == old.meta {
        Ok(Arc::clone(old))
    } else if meta.kind == FileKind::File && old.same_inode(&meta) {
        Ok(Arc::new(old.with_meta(meta)))
    } else {
        open_path(path, symlinks).map(Arc::new)
    }
}

#[cfg(test)]
mod tests;
