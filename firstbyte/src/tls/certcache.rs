//! The cache behind `ssl_certificate_cache` and `proxy_ssl_certificate_cache`: certificates
//! named with variables, loaded at handshake (or request) time and kept for a while.
//!
//! Plain code: every call takes the time and, when asked, the file's current stamp (mtime,
//! inode...) through a closure, and answers what to do, so tests need no files, sockets or
//! sleeps. An entry unused for `inactive` is gone; after `valid` since it was loaded, the
//! next lookup compares stamps (nginx 1.27.4's revalidation): unchanged means another
//! `valid` period, changed or unreadable means load again. At `max` entries the least
//! recently used one makes room.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The limits of one cache (`max=N inactive=T valid=T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most entries.
    pub max: usize,
    /// Dropped after this long unused.
    pub inactive: Duration,
    /// Revalidated after this long since loading.
    pub valid: Duration,
}

struct Entry<T, S> {
    value: T,
    stamp: S,
    loaded: Instant,
    used: Instant,
    tick: u64,
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<T> {
    /// A usable entry.
    Hit(T),
    /// Nothing usable: load the file and [`CertCache::insert`] it.
    Miss,
}

/// Entries by key (the evaluated path), with their file stamps of type `S`.
pub struct CertCache<T, S> {
    limits: CacheLimits,
    entries: HashMap<String, Entry<T, S>>,
    tick: u64,
}

impl<T: Clone, S: PartialEq> CertCache<T, S> {
    /// An empty cache.
    pub fn new(limits: CacheLimits) -> Self {
        Self {
            limits,
            entries: HashMap::new(),
            tick: 0,
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache is empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Looks `key` up at `now`; `stamp_now` is called only when the entry is due for
    /// revalidation (`None`: the file's metadata cannot be read).
    pub fn get(
        &mut self,
        key: &str,
        now: Instant,
        stamp_now: impl FnOnce() -> Option<S>,
    ) -> Lookup<T> {
        let Some(e) = self.entries.get_mut(key) else {
            return Lookup::Miss;
        };
        if now.saturating_duration_since(e.used) > self.limits.inactive {
            self.entries.remove(key);
            return Lookup::Miss;
        }
        if now.saturating_duration_since(e.loaded) >= self.limits.valid {
            match stamp_now() {
                Some(s) if s == e.stamp => e.loaded = now,
                _ => {
                    self.entries.remove(key);
                    return Lookup::Miss;
                }
            }
        }
        self.tick += 1;
        e.used = now;
        e.tick = self.tick;
        Lookup::Hit(e.value.clone())
    }

    /// Stores a freshly loaded `value` with the stamp it was loaded under, dropping inactive
    /// entries and then the least recently used one if the cache is full.
    pub fn insert(&mut self, key: String, value: T, stamp: S, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.limits.max {
            let inactive = self.limits.inactive;
            self.entries
                .retain(|_, e| now.saturating_duration_since(e.used) <= inactive);
            if self.entries.len() >= self.limits.max {
                let lru = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.tick)
                    .map(|(k, _)| k.clone());
                if let Some(k) = lru {
                    self.entries.remove(&k);
                }
            }
        }
        self.tick += 1;
        self.entries.insert(
            key,
            Entry {
                value,
                stamp,
                loaded: now,
                used: now,
                tick: self.tick,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> CacheLimits {
        CacheLimits {
            max,
            inactive: Duration::from_secs(10),
            valid: Duration::from_secs(60),
        }
    }

    fn never() -> Option<u32> {
        panic!("stamp read before valid= expired")
    }

    #[test]
    fn lru_eviction_at_max() {
        let t = Instant::now();
        let mut c: CertCache<&str, u32> = CertCache::new(limits(2));
        c.insert("a".into(), "A", 1, t);
        c.insert("b".into(), "B", 1, t);
        // Use a, so b is the least recently used.
        assert_eq!(
            c.get("a", t + Duration::from_secs(1), never),
            Lookup::Hit("A")
        );
        c.insert("c".into(), "C", 1, t + Duration::from_secs(2));
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("b", t + Duration::from_secs(2), never), Lookup::Miss);
        assert_eq!(
            c.get("a", t + Duration::from_secs(2), never),
            Lookup::Hit("A")
        );
        assert_eq!(
            c.get("c", t + Duration::from_secs(2), never),
            Lookup::Hit("C")
        );
    }

    #[test]
    fn revalidation_after_valid() {
        let t = Instant::now();
        let mut c: CertCache<&str, u32> = CertCache::new(CacheLimits {
            max: 10,
            inactive: Duration::from_secs(100),
            valid: Duration::from_secs(60),
        });
        c.insert("a".into(), "A", 7, t);
        assert_eq!(
            c.get("a", t + Duration::from_secs(59), never),
            Lookup::Hit("A")
        );
        // Due: same stamp keeps it for another period.
        assert_eq!(
            c.get("a", t + Duration::from_secs(60), || Some(7)),
            Lookup::Hit("A")
        );
        assert_eq!(
            c.get("a", t + Duration::from_secs(119), never),
            Lookup::Hit("A")
        );
        // Due again: the file changed.
        assert_eq!(
            c.get("a", t + Duration::from_secs(120), || Some(8)),
            Lookup::Miss
        );
        assert!(c.is_empty());
        // Unreadable metadata counts as changed.
        c.insert("b".into(), "B", 1, t);
        assert_eq!(
            c.get("b", t + Duration::from_secs(61), || None),
            Lookup::Miss
        );
    }

    #[test]
    fn inactive_entries_expire() {
        let t = Instant::now();
        let mut c: CertCache<&str, u32> = CertCache::new(limits(1));
        c.insert("a".into(), "A", 1, t);
        assert_eq!(c.get("a", t + Duration::from_secs(11), never), Lookup::Miss);
        c.insert("a".into(), "A", 1, t);
        // A full cache whose only entry went inactive makes room without evicting a live one.
        c.insert("b".into(), "B", 1, t + Duration::from_secs(30));
        assert_eq!(c.len(), 1);
        assert_eq!(
            c.get("b", t + Duration::from_secs(31), never),
            Lookup::Hit("B")
        );
    }
}
