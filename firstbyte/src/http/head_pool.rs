//! Response header maps kept for reuse, per thread. A static response's map is sized for
//! its headers and `finish`'s (12 entries: 1.3 KB, past the allocator's per-thread cache, so
//! allocating and freeing one per response cost ~1,200 instructions); the HTTP/2 layer gives
//! each response's map back once its head is encoded, and the next static response takes it.
//! Maps handed to hyper (HTTP/1.x) or h3 are dropped there as before.

use std::cell::RefCell;

use http::HeaderMap;

/// Entries a static response's map is made with.
pub const STATIC_CAPACITY: usize = 12;

/// Maps kept per thread at most (a connection's streams in flight answer in one turn).
const KEEP: usize = 16;

thread_local! {
    static POOL: RefCell<Vec<HeaderMap>> = const { RefCell::new(Vec::new()) };
}

/// An empty map with room for [`STATIC_CAPACITY`] entries.
pub fn take() -> HeaderMap {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| HeaderMap::with_capacity(STATIC_CAPACITY))
}

/// A response's map whose head was sent: kept, emptied, if it is the size [`take`] hands out
/// (a larger one is freed, so the pool never holds more than `KEEP` small maps).
pub fn give(mut map: HeaderMap) {
    if fits(&map) {
        map.clear();
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < KEEP {
                p.push(map);
            }
        });
    }
}

/// Whether `map` has the capacity of a fresh [`take`] (no more: a map that grew is freed).
/// (`http` sizes a map made for 12 entries at exactly 12: the test below holds it to that.)
fn fits(map: &HeaderMap) -> bool {
    map.capacity() == STATIC_CAPACITY
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{ETAG, SERVER};
    use http::HeaderValue;

    #[test]
    fn maps_come_back_empty_and_only_of_the_static_size() {
        let mut m = take();
        let cap = m.capacity();
        assert_eq!(cap, STATIC_CAPACITY);
        m.insert(ETAG, HeaderValue::from_static("\"x\""));
        give(m);
        let again = take();
        assert!(again.is_empty(), "given back emptied");
        assert_eq!(again.capacity(), cap);
        // A map that grew, or a small one, is not kept.
        let mut big = HeaderMap::with_capacity(100);
        big.insert(SERVER, HeaderValue::from_static("x"));
        give(big);
        give(HeaderMap::new());
        assert_eq!(take().capacity(), cap);
        assert_eq!(POOL.with(|p| p.borrow().len()), 0);
        for _ in 0..KEEP + 5 {
            give(HeaderMap::with_capacity(STATIC_CAPACITY));
        }
        assert_eq!(POOL.with(|p| p.borrow().len()), KEEP);
        POOL.with(|p| p.borrow_mut().clear());
    }
}
