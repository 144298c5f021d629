//! `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME] | off`: the open
//! files of `access_log` paths with variables, kept between requests (nginx's
//! `ngx_open_file_cache` as the log module uses it).
//!
//! An entry per path, least recently used first out: a path used `min_uses` times keeps its
//! file open; one unused for `inactive` is closed; `valid` after its open, the path is opened
//! again (a rotated file is then followed). With `max` entries, a new path closes the least
//! recently used. A path that fails to open leaves no entry. Locations that inherit the
//! directive share one cache, as nginx's inherited configuration shares it.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::args::param;
use super::cx::Cx;
use super::error::ConfError;
use super::parse::Directive;
use super::units;

/// One `open_log_file_cache` and the files it holds.
pub struct LogFileCache {
    /// `max=N`: the most paths it keeps.
    pub max: usize,
    /// `inactive=TIME`: an entry unused this long is dropped (nginx: 10s).
    pub inactive: Duration,
    /// `min_uses=N`: uses within `inactive` before the file stays open (nginx: 1).
    pub min_uses: u32,
    /// `valid=TIME`: how long an open file is used before its path is opened again (nginx: 60s).
    pub valid: Duration,
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for LogFileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogFileCache")
            .field("max", &self.max)
            .field("inactive", &self.inactive)
            .field("min_uses", &self.min_uses)
            .field("valid", &self.valid)
            .finish_non_exhaustive()
    }
}

/// Equal limits (the files held do not count).
impl PartialEq for LogFileCache {
    fn eq(&self, o: &Self) -> bool {
        (self.max, self.inactive, self.min_uses, self.valid)
            == (o.max, o.inactive, o.min_uses, o.valid)
    }
}

#[derive(Default)]
struct Entries {
    by_path: HashMap<Arc<Path>, Entry>,
    /// Paths by their last use (a counter), least recent first.
    order: BTreeMap<u64, Arc<Path>>,
    tick: u64,
}

struct Entry {
    file: Option<Arc<File>>,
    uses: u32,
    used: Instant,
    opened: Instant,
    tick: u64,
}

impl Entries {
    fn remove_first(&mut self) {
        if let Some((_, p)) = self.order.pop_first() {
            self.by_path.remove(&p);
        }
    }

    /// Drops the entries unused for `inactive`.
    fn expire(&mut self, now: Instant, inactive: Duration) {
        while let Some((_, p)) = self.order.first_key_value() {
            match self.by_path.get(p) {
                Some(e) if now.duration_since(e.used) <= inactive => break,
                _ => self.remove_first(),
            }
        }
    }
}

impl LogFileCache {
    /// A cache with these limits and nothing in it.
    pub fn new(max: usize, inactive: Duration, min_uses: u32, valid: Duration) -> Self {
        Self {
            max,
            inactive,
            min_uses,
            valid,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// Paths it holds an entry for (open or not).
    pub fn len(&self) -> usize {
        self.lock().by_path.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `bytes` to `path`: through the file the cache holds, or a file `open` opens
    /// (kept when the path has been used `min_uses` times). The open's error when it fails.
    pub fn write(
        &self,
        path: &Path,
        bytes: &[u8],
        open: impl FnOnce(&Path) -> std::io::Result<File>,
    ) -> std::io::Result<()> {
        let now = Instant::now();
        let file = {
            let mut g = self.lock();
            g.expire(now, self.inactive);
            g.tick += 1;
            let tick = g.tick;
            let cached = match g.by_path.get_mut(path) {
                Some(e) => {
                    e.uses = e.uses.saturating_add(1);
                    e.used = now;
                    let old = std::mem::replace(&mut e.tick, tick);
                    let f = e
                        .file
                        .as_ref()
                        .filter(|_| now.duration_since(e.opened) < self.valid)
                        .cloned();
                    if let Some(p) = g.order.remove(&old) {
                        g.order.insert(tick, p);
                    }
                    Some(f)
                }
                None => None,
            };
            match cached {
                Some(Some(f)) => f,
                Some(None) => match open(path) {
                    Ok(f) => {
                        let f = Arc::new(f);
                        if let Some(e) = g.by_path.get_mut(path) {
                            e.opened = now;
                            e.file = (e.uses >= self.min_uses).then(|| f.clone());
                        }
                        f
                    }
                    Err(err) => {
                        if let Some(e) = g.by_path.remove(path) {
                            g.order.remove(&e.tick);
                        }
                        return Err(err);
                    }
                },
                None => {
                    let f = Arc::new(open(path)?);
                    if g.by_path.len() >= self.max {
                        g.remove_first();
                    }
                    let key: Arc<Path> = Arc::from(path);
                    g.order.insert(tick, key.clone());
                    g.by_path.insert(
                        key,
                        Entry {
                            file: (self.min_uses <= 1).then(|| f.clone()),
                            uses: 1,
                            used: now,
                            opened: now,
                            tick,
                        },
                    );
                    f
                }
            }
        };
        (&*file).write_all(bytes)
    }
}

/// `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME] | off`.
pub(crate) fn parse(d: &Directive, _: &mut Cx) -> Result<Option<Arc<LogFileCache>>, ConfError> {
    if d.args.len() == 1 && d.args[0] == "off" {
        return Ok(None);
    }
    let (mut max, mut inactive, mut min_uses, mut valid) =
        (None, Duration::from_secs(10), 1u32, Duration::from_secs(60));
    for a in &d.args {
        let bad = || {
            ConfError::other(
                format!("invalid \"open_log_file_cache\" parameter \"{a}\""),
                &d.pos,
            )
        };
        if let Some(v) = a.strip_prefix("max=") {
            max = Some(v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad)?);
        } else if let Some(v) = a.strip_prefix("inactive=") {
            inactive = units::time(v).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("min_uses=") {
            min_uses = v.parse().map_err(|_| bad())?;
        } else if let Some(v) = a.strip_prefix("valid=") {
            valid = units::time(v).ok_or_else(bad)?;
        } else if a == "off" {
            return Err(param(d, a));
        } else {
            return Err(bad());
        }
    }
    let max = max.ok_or_else(|| {
        ConfError::other(
            "\"open_log_file_cache\" must have \"max\" parameter".to_string(),
            &d.pos,
        )
    })?;
    Ok(Some(Arc::new(LogFileCache::new(
        max, inactive, min_uses, valid,
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(p: &Path) -> std::io::Result<File> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    }

    /// access_log.t's sequence: max=3 min_uses=2; then the directory moves away, and only
    /// the paths whose files stayed open are still written.
    #[test]
    fn keeps_files_used_min_uses_times_and_closes_the_least_recent() {
        let dir = std::env::temp_dir().join(format!("fb-logcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        let c = LogFileCache::new(3, Duration::from_secs(20), 2, Duration::from_secs(60));
        let p = |n: &str| dir.join("d").join(n);
        for n in ["lru", "lru", "once", "first", "first", "second", "second"] {
            c.write(&p(n), b"/\n", open).unwrap();
        }
        assert_eq!(c.len(), 3);
        std::fs::rename(dir.join("d"), dir.join("moved")).unwrap();
        for (n, ok) in [
            ("lru", false),
            ("once", false),
            ("first", true),
            ("second", true),
        ] {
            assert_eq!(c.write(&p(n), b"/\n", open).is_ok(), ok, "{n}");
        }
        let lines = |n: &str| {
            std::fs::read_to_string(dir.join("moved").join(n))
                .unwrap()
                .lines()
                .count()
        };
        assert_eq!(
            [lines("lru"), lines("once"), lines("first"), lines("second")],
            [2, 1, 3, 3]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn inactive_entries_are_dropped() {
        let dir = std::env::temp_dir().join(format!("fb-logcache-i-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = LogFileCache::new(10, Duration::ZERO, 1, Duration::from_secs(60));
        c.write(&dir.join("a"), b"x\n", open).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        c.write(&dir.join("b"), b"x\n", open).unwrap();
        // `a` was unused longer than `inactive` (0): gone; `b` just used.
        assert_eq!(c.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
