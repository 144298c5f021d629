//! The state behind `limit_req_zone` and `limit_conn_zone`, as pure code: times come in as
//! milliseconds, decisions go out; no clock, no socket.
//!
//! [`bucket`] is nginx's leaky bucket (`ngx_http_limit_req_lookup`): per key, the excess in
//! milli-requests over the rate and when it was last counted. Each request adds 1000 and the
//! bucket drains `rate` milli-requests per second; a request whose excess would pass
//! `burst` is refused; one whose excess passes `delay` waits `(excess - delay) / rate`.
//!
//! A zone holds at most as many keys as its size buys ([`ReqTable`], [`ConnTable`]). nginx
//! allocates each state from the zone's slab memory; firstbyte counts states instead, at
//! nginx's documented sizes: a limit_req state is 64 bytes ("one megabyte zone can keep
//! about 16 thousand 64-byte states"), a limit_conn state 32 bytes ("about 32 thousand
//! 32-byte states"). A full limit_req zone drops its least recently used state for a new key,
//! as nginx's forced expiry; a full limit_conn zone refuses new keys (its states are live
//! connections and cannot be dropped).

use std::collections::{BTreeMap, HashMap};

/// Bytes of zone per limit_req state (nginx's documented figure).
pub const REQ_STATE_BYTES: u64 = 64;
/// Bytes of zone per limit_conn state (nginx's documented figure).
pub const CONN_STATE_BYTES: u64 = 32;

/// One key's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Milli-requests over the rate.
    pub excess: u64,
    /// When it was last counted (ms, any fixed origin).
    pub last: u64,
}

/// What a request's limit decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Serve now.
    Pass,
    /// Serve after this many milliseconds.
    Delay(u64),
    /// Refuse.
    Reject,
}

/// A limit's parameters in nginx's units: `rate` milli-requests per second (> 0), `burst`
/// and `delay` in milli-requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Milli-requests per second.
    pub rate: u64,
    /// Most excess allowed (`burst=N` × 1000).
    pub burst: u64,
    /// Excess served without delay (`delay=N` × 1000; `nodelay`: all of `burst`).
    pub delay: u64,
}

/// The leaky bucket: `state` is the key's bucket (None: a new key), `now` in ms. Returns the
/// verdict, the excess it saw, and the bucket to store when the request is let through.
pub fn bucket(now: u64, state: Option<Bucket>, r: Rate) -> (Verdict, u64, Bucket) {
    let Some(b) = state else {
        // A new key starts empty: its first request passes.
        return (
            Verdict::Pass,
            0,
            Bucket {
                excess: 0,
                last: now,
            },
        );
    };
    // A clock that went back counts as no time (nginx: "ms < 0 → 0").
    let ms = now.saturating_sub(b.last);
    let drained = r.rate.saturating_mul(ms) / 1000;
    // Signed in nginx (`excess - drained + 1000`, floored at 0).
    let excess = b.excess.saturating_add(1000).saturating_sub(drained);
    let stored = Bucket {
        excess,
        last: if ms > 0 { now } else { b.last },
    };
    let verdict = if excess > r.burst {
        Verdict::Reject
    } else if excess > r.delay {
        Verdict::Delay((excess - r.delay).saturating_mul(1000) / r.rate.max(1))
    } else {
        Verdict::Pass
    };
    (verdict, excess, stored)
}

/// A limit_req zone's buckets, least recently used first out.
#[derive(Debug, Default)]
pub struct ReqTable {
    capacity: usize,
    map: HashMap<Box<[u8]>, (Bucket, u64)>,
    lru: BTreeMap<u64, Box<[u8]>>,
    tick: u64,
}

impl ReqTable {
    /// A table for a zone of `bytes`.
    pub fn new(bytes: u64) -> Self {
        ReqTable {
            capacity: usize::try_from(bytes / REQ_STATE_BYTES).unwrap_or(usize::MAX),
            ..Default::default()
        }
    }

    /// The bucket of `key`, if held.
    pub fn get(&self, key: &[u8]) -> Option<Bucket> {
        self.map.get(key).map(|(b, _)| *b)
    }

    /// Stores `key`'s bucket as the most recently used; drops the least recently used key
    /// when the zone is full. False: nothing could be stored (a zone of no capacity).
    pub fn put(&mut self, key: &[u8], b: Bucket) -> bool {
        self.tick += 1;
        let tick = self.tick;
        if let Some((slot, t)) = self.map.get_mut(key) {
            self.lru.remove(t);
            *slot = b;
            *t = tick;
            self.lru.insert(tick, key.into());
            return true;
        }
        if self.map.len() >= self.capacity {
            let Some((_, old)) = self.lru.pop_first() else {
                return false;
            };
            self.map.remove(&old);
        }
        let key: Box<[u8]> = key.into();
        self.lru.insert(tick, key.clone());
        self.map.insert(key, (b, tick));
        true
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// Why a limit_conn zone refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnRefusal {
    /// The key has its `limit_conn` number already.
    Limit,
    /// The zone holds as many keys as it can.
    Full,
}

/// A limit_conn zone's counts of requests in progress per key.
#[derive(Debug, Default)]
pub struct ConnTable {
    capacity: usize,
    map: HashMap<Box<[u8]>, u32>,
}

impl ConnTable {
    /// A table for a zone of `bytes`.
    pub fn new(bytes: u64) -> Self {
        ConnTable {
            capacity: usize::try_from(bytes / CONN_STATE_BYTES).unwrap_or(usize::MAX),
            map: HashMap::new(),
        }
    }

    /// Counts one more for `key` unless it has `limit` already.
    pub fn acquire(&mut self, key: &[u8], limit: u32) -> Result<(), ConnRefusal> {
        if let Some(n) = self.map.get_mut(key) {
            if *n >= limit {
                return Err(ConnRefusal::Limit);
            }
            *n += 1;
            return Ok(());
        }
        if limit == 0 {
            return Err(ConnRefusal::Limit);
        }
        if self.map.len() >= self.capacity {
            return Err(ConnRefusal::Full);
        }
        self.map.insert(key.into(), 1);
        Ok(())
    }

    /// One fewer for `key` (the key is forgotten at zero).
    pub fn release(&mut self, key: &[u8]) {
        if let Some(n) = self.map.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.map.remove(key);
            }
        }
    }

    /// Requests counted for `key`.
    pub fn count(&self, key: &[u8]) -> u32 {
        self.map.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1r/s, no burst.
    const ONE_PER_SEC: Rate = Rate {
        rate: 1000,
        burst: 0,
        delay: 0,
    };

    fn run(r: Rate, times: &[u64]) -> Vec<Verdict> {
        let mut state = None;
        times
            .iter()
            .map(|&t| {
                let (v, _, b) = bucket(t, state, r);
                if v != Verdict::Reject {
                    state = Some(b);
                }
                v
            })
            .collect()
    }

    #[test]
    fn no_burst_lets_one_per_period_through() {
        use Verdict::*;
        assert_eq!(
            run(ONE_PER_SEC, &[0, 1, 500, 999, 1000, 1500, 2000]),
            [Pass, Reject, Reject, Reject, Pass, Reject, Pass]
        );
    }

    #[test]
    fn burst_queues_with_delay_and_nodelay_passes_it() {
        use Verdict::*;
        let burst = Rate {
            rate: 1000,
            burst: 2000,
            delay: 0,
        };
        // Excess 1000 → 1 s wait, 2000 → 2 s, then over the burst.
        assert_eq!(
            run(burst, &[0, 0, 0, 0]),
            [Pass, Delay(1000), Delay(2000), Reject]
        );
        let nodelay = Rate {
            delay: 2000,
            ..burst
        };
        assert_eq!(run(nodelay, &[0, 0, 0, 0]), [Pass, Pass, Pass, Reject]);
        // delay=1: the first excess request is free, the next waits.
        let two_stage = Rate {
            delay: 1000,
            ..burst
        };
        assert_eq!(
            run(two_stage, &[0, 0, 0, 0]),
            [Pass, Pass, Delay(1000), Reject]
        );
        // The bucket drains at the rate: 500 ms later half a request has leaked.
        assert_eq!(run(burst, &[0, 0, 500]), [Pass, Delay(1000), Delay(1500)]);
    }

    #[test]
    fn per_minute_rates_and_clock_steps() {
        use Verdict::*;
        // 1r/m = 16 milli-requests per second (1000 / 60, rounded down as nginx).
        let per_min = Rate {
            rate: 16,
            burst: 0,
            delay: 0,
        };
        assert_eq!(
            run(per_min, &[0, 30_000, 62_499, 62_500, 62_501]),
            [Pass, Reject, Reject, Pass, Reject]
        );
        // A clock that went back drains nothing and does not underflow.
        let (v, excess, b) = bucket(
            5,
            Some(Bucket {
                excess: 0,
                last: 1_000,
            }),
            ONE_PER_SEC,
        );
        assert_eq!((v, excess, b.last), (Reject, 1000, 1_000));
        // Huge gaps and huge rates saturate instead of overflowing.
        let (v, _, _) = bucket(
            u64::MAX,
            Some(Bucket {
                excess: u64::MAX,
                last: 0,
            }),
            Rate {
                rate: u64::MAX,
                burst: 0,
                delay: 0,
            },
        );
        assert_eq!(v, Reject, "excess saturates at 1000 > burst 0");
    }

    #[test]
    fn req_table_is_bounded_and_lru() {
        let mut t = ReqTable::new(3 * REQ_STATE_BYTES);
        let b = |e| Bucket { excess: e, last: 0 };
        assert!(t.put(b"a", b(1)) && t.put(b"b", b(2)) && t.put(b"c", b(3)));
        // Touch a: b is now the oldest and goes first.
        assert!(t.put(b"a", b(10)));
        assert!(t.put(b"d", b(4)));
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(b"b"), None);
        assert_eq!(t.get(b"a"), Some(b(10)));
        assert_eq!(t.get(b"d"), Some(b(4)));
        let mut none = ReqTable::new(REQ_STATE_BYTES - 1);
        assert!(!none.put(b"x", b(0)));
        // Many keys stay within the bound.
        let mut t = ReqTable::new(100 * REQ_STATE_BYTES);
        for i in 0..10_000u32 {
            t.put(&i.to_be_bytes(), b(0));
        }
        assert_eq!(t.len(), 100);
    }

    #[test]
    fn conn_table_counts_limits_and_fills() {
        let mut t = ConnTable::new(2 * CONN_STATE_BYTES);
        assert_eq!(t.acquire(b"a", 2), Ok(()));
        assert_eq!(t.acquire(b"a", 2), Ok(()));
        assert_eq!(t.acquire(b"a", 2), Err(ConnRefusal::Limit));
        assert_eq!(t.acquire(b"b", 1), Ok(()));
        assert_eq!(t.acquire(b"c", 1), Err(ConnRefusal::Full));
        t.release(b"b");
        assert_eq!(t.count(b"b"), 0);
        assert_eq!(t.acquire(b"c", 1), Ok(()));
        t.release(b"a");
        assert_eq!(t.acquire(b"a", 2), Ok(()));
        assert_eq!(t.acquire(b"z", 0), Err(ConnRefusal::Limit));
        t.release(b"nobody");
    }
}
