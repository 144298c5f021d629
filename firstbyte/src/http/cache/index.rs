//! A zone's in-memory index: what keys it knows, how often they were asked for
//! (`proxy_cache_min_uses`), the size of each stored file, and their order of last use, so
//! `max_size`, the zone's size and `inactive` can remove the least recently used. Pure:
//! times come in as seconds, files are removed by the caller.

use std::collections::{BTreeMap, HashMap};

/// A key's MD5.
pub type Hash = [u8; 16];

#[derive(Debug, Clone)]
struct Node {
    seq: u64,
    last: u64,
    uses: u32,
    /// Bytes of its stored file, if it has one.
    size: Option<u64>,
}

/// The index of one zone.
#[derive(Debug)]
pub struct Index {
    map: HashMap<Hash, Node>,
    order: BTreeMap<u64, Hash>,
    seq: u64,
    total: u64,
    max_size: u64,
    max_entries: usize,
    inactive: u64,
}

impl Index {
    /// An empty index; `max_size` 0: no limit on bytes.
    pub fn new(max_size: u64, max_entries: usize, inactive: u64) -> Self {
        Index {
            map: HashMap::new(),
            order: BTreeMap::new(),
            seq: 0,
            total: 0,
            max_size,
            max_entries: max_entries.max(1),
            inactive,
        }
    }

    fn bump(&mut self, hash: &Hash, now: u64) -> &mut Node {
        self.seq += 1;
        let seq = self.seq;
        let node = self.map.entry(*hash).or_insert(Node {
            seq,
            last: now,
            uses: 0,
            size: None,
        });
        self.order.remove(&node.seq);
        node.seq = seq;
        node.last = now;
        self.order.insert(seq, *hash);
        node
    }

    /// A request asks for `hash` at `now`: its count of uses so far, this one included.
    /// Returns that count and the hashes whose files must go (the zone is full).
    pub fn used(&mut self, hash: &Hash, now: u64) -> (u32, Vec<Hash>) {
        let node = self.bump(hash, now);
        node.uses = node.uses.saturating_add(1);
        let uses = node.uses;
        (uses, self.evict(Some(hash), now))
    }

    /// The stored file's size, if the index knows one.
    pub fn size(&self, hash: &Hash) -> Option<u64> {
        self.map.get(hash).and_then(|n| n.size)
    }

    /// `hash`'s file of `size` bytes was stored (or found on disk) at `now`. Returns the
    /// hashes whose files must go to keep within `max_size` and the zone.
    pub fn stored(&mut self, hash: &Hash, size: u64, now: u64) -> Vec<Hash> {
        let node = self.bump(hash, now);
        let old = node.size.replace(size).unwrap_or(0);
        self.total = self.total - old + size;
        self.evict(Some(hash), now)
    }

    /// Forgets `hash` (its file was removed or found invalid).
    pub fn remove(&mut self, hash: &Hash) {
        if let Some(n) = self.map.remove(hash) {
            self.order.remove(&n.seq);
            self.total -= n.size.unwrap_or(0);
        }
    }

    /// Bytes of stored files the index counts.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Removes entries not used for `inactive` seconds, then the least recently used while
    /// the bytes pass `max_size` or the entries the zone; `keep` stays.
    fn evict(&mut self, keep: Option<&Hash>, now: u64) -> Vec<Hash> {
        let mut out = Vec::new();
        let over =
            |s: &Self| (s.max_size > 0 && s.total > s.max_size) || s.map.len() > s.max_entries;
        while let Some((&seq, &hash)) = self.order.iter().next() {
            let Some(node) = self.map.get(&hash) else {
                // Never: the order names only indexed keys.
                self.order.remove(&seq);
                continue;
            };
            let stale = node.last.saturating_add(self.inactive) <= now && self.inactive > 0;
            if !(stale || over(self)) || Some(&hash) == keep {
                break;
            }
            let had_file = node.size.is_some();
            self.remove(&hash);
            if had_file {
                out.push(hash);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> Hash {
        [n; 16]
    }

    #[test]
    fn uses_count_per_key() {
        let mut i = Index::new(0, 100, 600);
        assert_eq!(i.used(&h(1), 0).0, 1);
        assert_eq!(i.used(&h(1), 1).0, 2);
        assert_eq!(i.used(&h(2), 1).0, 1);
    }

    #[test]
    fn max_size_removes_least_recently_used() {
        let mut i = Index::new(100, 100, 600);
        assert!(i.stored(&h(1), 40, 0).is_empty());
        assert!(i.stored(&h(2), 40, 1).is_empty());
        // 1 is used again: 2 is now the oldest.
        i.used(&h(1), 2);
        assert_eq!(i.stored(&h(3), 40, 3), vec![h(2)]);
        assert_eq!(i.total(), 80);
        // Larger than everything: all others go, it stays (the caller checks max_size first).
        assert_eq!(i.stored(&h(4), 100, 4), vec![h(1), h(3)]);
        assert_eq!(i.size(&h(4)), Some(100));
    }

    #[test]
    fn inactive_entries_go() {
        let mut i = Index::new(0, 100, 10);
        i.stored(&h(1), 5, 0);
        i.stored(&h(2), 5, 5);
        assert_eq!(i.stored(&h(3), 5, 12), vec![h(1)]);
        assert_eq!(i.size(&h(1)), None);
        assert_eq!(i.total(), 10);
    }

    #[test]
    fn the_zone_holds_so_many_keys() {
        let mut i = Index::new(0, 2, 600);
        i.stored(&h(1), 1, 0);
        i.used(&h(2), 1);
        // A key without a file goes without a file to remove.
        assert_eq!(i.stored(&h(3), 1, 2), vec![h(1)]);
        assert_eq!(i.used(&h(4), 3).1, Vec::<Hash>::new());
        assert_eq!(i.size(&h(3)), Some(1));
    }
}
