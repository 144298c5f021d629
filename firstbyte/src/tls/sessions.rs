//! Stateful session storage (`ssl_session_cache`) with nginx's `ssl_session_timeout`.
//!
//! rustls' `ServerSessionMemoryCache` bounds the count but not the age of sessions; a
//! [`TimedSessions`] puts the store time in front of each value and refuses values older than
//! this server's timeout, so servers with different timeouts can share one cache (from
//! [`TlsShared`](super::TlsShared)). Stateful storage is also what rustls needs to accept
//! 0-RTT data later: `max_early_data_size` stays 0 until then.

use std::fmt;
use std::sync::Arc;

use rustls::server::{ServerSessionMemoryCache, StoresServerSessions};

use super::context::SessionContext;
use super::tickets::unix_now;

/// Length of the store-time prefix.
const STAMP_LEN: usize = 8;

/// A shared session cache seen through one server's timeout.
pub struct TimedSessions {
    cache: Arc<ServerSessionMemoryCache>,
    timeout: u64,
    /// In front of every key: a session is found only in the context that stored it.
    context: SessionContext,
    clock: fn() -> u64,
}

impl fmt::Debug for TimedSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedSessions")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TimedSessions {
    /// Wraps `cache`; sessions older than `timeout_secs` are not resumed.
    pub fn new(cache: Arc<ServerSessionMemoryCache>, timeout_secs: u64) -> Self {
        Self {
            cache,
            timeout: timeout_secs,
            context: SessionContext::default(),
            clock: unix_now,
        }
    }

    /// Binds this view's sessions to a server block's [`SessionContext`].
    pub fn with_context(mut self, context: SessionContext) -> Self {
        self.context = context;
        self
    }

    /// Splits a stored value and checks its age at `now`.
    fn fresh(&self, stored: Vec<u8>, now: u64) -> Option<Vec<u8>> {
        let stamp: [u8; STAMP_LEN] = stored.get(..STAMP_LEN)?.try_into().ok()?;
        let at = u64::from_be_bytes(stamp);
        (at <= now && now - at <= self.timeout).then(|| stored[STAMP_LEN..].to_vec())
    }

    fn put_at(&self, key: Vec<u8>, value: Vec<u8>, now: u64) -> bool {
        let mut stored = Vec::with_capacity(STAMP_LEN + value.len());
        stored.extend_from_slice(&now.to_be_bytes());
        stored.extend_from_slice(&value);
        self.cache.put(self.context.prefix(&key), stored)
    }
}

impl StoresServerSessions for TimedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.put_at(key, value, (self.clock)())
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.cache.get(&self.context.prefix(key))?, (self.clock)())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.cache.take(&self.context.prefix(key))?, (self.clock)())
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_sessions_are_not_resumed() {
        let cache = ServerSessionMemoryCache::new(4);
        let short = TimedSessions::new(cache.clone(), 10);
        let long = TimedSessions::new(cache, 100);
        assert!(short.put_at(b"k".to_vec(), b"v".to_vec(), 1000));
        let stored = short
            .cache
            .get(&short.context.prefix(b"k"))
            .expect("stored");
        assert_eq!(
            short.fresh(stored.clone(), 1010).as_deref(),
            Some(&b"v"[..])
        );
        assert!(short.fresh(stored.clone(), 1011).is_none());
        assert!(long.fresh(stored.clone(), 1050).is_some());
        assert!(short.fresh(stored, 999).is_none());
        assert!(
            short.fresh(vec![1, 2], 1000).is_none(),
            "short values are refused"
        );
    }

    #[test]
    fn cache_size_bounds_sessions() {
        let s = TimedSessions::new(ServerSessionMemoryCache::new(2), 300);
        for k in 0u8..3 {
            assert!(s.put(vec![k], vec![k]));
        }
        assert!(s.get(&[0]).is_none(), "oldest evicted");
        assert_eq!(s.get(&[2]), Some(vec![2]));
        assert_eq!(s.take(&[1]), Some(vec![1]));
        assert!(s.get(&[1]).is_none());
    }

    /// A session stored by one server block is not found by another context sharing the
    /// cache (a block without client certificates vs one that requires them).
    #[test]
    fn sessions_are_found_only_in_their_context() {
        let cache = ServerSessionMemoryCache::new(8);
        let a = TimedSessions::new(cache.clone(), 300).with_context(SessionContext([1; 16]));
        let b = TimedSessions::new(cache.clone(), 300).with_context(SessionContext([2; 16]));
        let a2 = TimedSessions::new(cache, 300).with_context(SessionContext([1; 16]));
        assert!(a.put(b"id".to_vec(), b"session".to_vec()));
        assert!(b.get(b"id").is_none());
        assert!(b.take(b"id").is_none());
        assert_eq!(a2.get(b"id").as_deref(), Some(&b"session"[..]));
        assert_eq!(a2.take(b"id").as_deref(), Some(&b"session"[..]));
    }
}
