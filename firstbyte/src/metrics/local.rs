//! The per-response counters, sharded by thread: each thread that ends responses writes its
//! own shard (a plain load and store of a relaxed atomic, no locked instruction, no cache line
//! shared with another writer), and a scrape adds the shards up. A thread that exits hands
//! its shard, counts kept, to the next thread that needs one.
//!
//! Encoded through the `prometheus-client` crate as a [`Collector`]: the families
//! `firstbyte_http_requests` (by protocol and status class), `firstbyte_http_request_duration`
//! and `firstbyte_http_ttfb` (histograms by protocol) and `firstbyte_http_response_body`
//! (bytes by protocol).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::hist::{bucket, with_bounds, BUCKETS};
use super::{CLASSES, PROTOCOLS};

const P: usize = PROTOCOLS.len();
const C: usize = CLASSES.len();

#[derive(Debug, Default)]
struct HistCells {
    counts: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

/// One thread's counts.
#[derive(Debug, Default)]
struct Shard {
    requests: [[AtomicU64; C]; P],
    bytes: [AtomicU64; P],
    duration: [HistCells; P],
    ttfb: [HistCells; P],
}

/// Adds to a cell only this thread writes.
#[inline]
fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

#[inline]
fn observe(h: &HistCells, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    bump(&h.counts[bucket(us)], 1);
    bump(&h.sum_us, us);
}

/// Every shard ever made (a scrape adds them all up), and those of exited threads.
static ALL: Mutex<Vec<Arc<Shard>>> = Mutex::new(Vec::new());
static FREE: Mutex<Vec<Arc<Shard>>> = Mutex::new(Vec::new());

/// A thread's hold on its shard; gives it back when the thread exits.
struct Held(Arc<Shard>);

impl Held {
    fn new() -> Self {
        if let Some(s) = FREE.lock().ok().and_then(|mut f| f.pop()) {
            return Held(s);
        }
        let s = Arc::new(Shard::default());
        if let Ok(mut all) = ALL.lock() {
            all.push(s.clone());
        }
        Held(s)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut f) = FREE.lock() {
            f.push(self.0.clone());
        }
    }
}

thread_local! {
    static LOCAL: Held = Held::new();
}

/// Counts one response: protocol `p`, status class `c`, its TTFB and duration, `sent` bytes.
#[inline]
pub(super) fn count(p: usize, c: usize, ttfb: Duration, duration: Duration, sent: u64) {
    // During the thread's teardown (a body dropped by a thread-local destructor) the shard
    // may be gone: that response goes uncounted.
    let _ = LOCAL.try_with(|h| {
        let s = &h.0;
        bump(&s.requests[p][c], 1);
        bump(&s.bytes[p], sent);
        observe(&s.ttfb[p], ttfb);
        observe(&s.duration[p], duration);
    });
}

/// A histogram's per-bucket counts and its sum in microseconds.
pub(super) type HistTotals = ([u64; BUCKETS], u64);

/// The shards added up.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Totals {
    pub(super) requests: [[u64; C]; P],
    pub(super) bytes: [u64; P],
    pub(super) duration: [HistTotals; P],
    pub(super) ttfb: [HistTotals; P],
}

pub(super) fn totals() -> Totals {
    sum(&ALL.lock().map(|a| a.clone()).unwrap_or_default())
}

/// The calling thread's own shard (tests: no other thread writes it, so its deltas are exact
/// while other tests count responses in parallel).
#[cfg(test)]
pub(super) fn this_thread() -> Totals {
    LOCAL.with(|h| sum(std::slice::from_ref(&h.0)))
}

fn sum(shards: &[Arc<Shard>]) -> Totals {
    let mut t = Totals::default();
    let add = |into: &mut HistTotals, h: &HistCells| {
        for (i, c) in h.counts.iter().enumerate() {
            into.0[i] += c.load(Relaxed);
        }
        into.1 += h.sum_us.load(Relaxed);
    };
    for s in shards {
        for p in 0..P {
            for c in 0..C {
                t.requests[p][c] += s.requests[p][c].load(Relaxed);
            }
            t.bytes[p] += s.bytes[p].load(Relaxed);
            add(&mut t.duration[p], &s.duration[p]);
            add(&mut t.ttfb[p], &s.ttfb[p]);
        }
    }
    t
}

/// The per-response families, encoded at each scrape from [`totals`].
#[derive(Debug)]
pub(super) struct PerResponse;

impl Collector for PerResponse {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let t = totals();
        {
            let mut m = enc.encode_descriptor(
                "firstbyte_http_requests",
                "Requests answered, by protocol (h1, h2, h3) and status class",
                None,
                MetricType::Counter,
            )?;
            for (p, proto) in PROTOCOLS.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    let labels = [("protocol", *proto), ("status", *class)];
                    m.encode_family(&labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&t.requests[p][c], None)?;
                }
            }
        }
        let hists: [(&str, &str, &[HistTotals; P]); 2] = [
            (
                "firstbyte_http_request_duration",
                "From the request's start until its response body was sent (or the client went away)",
                &t.duration,
            ),
            (
                "firstbyte_http_ttfb",
                "From the request's start until its response head was ready ($ttfb)",
                &t.ttfb,
            ),
        ];
        for (name, help, h) in hists {
            let mut m =
                enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
            for (p, proto) in PROTOCOLS.iter().enumerate() {
                let (counts, sum_us) = &h[p];
                let labels = [("protocol", *proto)];
                m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                    *sum_us as f64 / 1e6,
                    counts.iter().sum(),
                    &with_bounds(counts),
                    None,
                )?;
            }
        }
        let mut m = enc.encode_descriptor(
            "firstbyte_http_response_body",
            "Response body bytes sent",
            Some(&Unit::Bytes),
            MetricType::Counter,
        )?;
        for (p, proto) in PROTOCOLS.iter().enumerate() {
            let labels = [("protocol", *proto)];
            m.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&t.bytes[p], None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_of_several_threads_add_up_and_outlive_them() {
        // Other tests of this binary count responses in parallel: each thread checks its own
        // shard exactly, the sum only grows.
        let before = totals();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let mine = this_thread();
                    count(2, 4, Duration::from_micros(50), Duration::from_millis(2), 7);
                    let t = this_thread();
                    assert_eq!(t.requests[2][4], mine.requests[2][4] + 1);
                    assert_eq!(t.bytes[2], mine.bytes[2] + 7);
                    // 50 µs: the first bucket; 2 ms: the one up to 2.5 ms.
                    assert_eq!(t.ttfb[2].0[0], mine.ttfb[2].0[0] + 1);
                    assert_eq!(
                        t.duration[2].0[bucket(2_000)],
                        mine.duration[2].0[bucket(2_000)] + 1
                    );
                    assert_eq!(t.duration[2].1, mine.duration[2].1 + 2_000);
                });
            }
        });
        let after = totals();
        assert!(after.requests[2][4] >= before.requests[2][4] + 3);
        assert!(after.bytes[2] >= before.bytes[2] + 21);
        // The threads are gone and their shards, counts kept, wait in FREE: a new thread
        // takes one back instead of making one.
        let known: Vec<usize> = ALL
            .lock()
            .unwrap()
            .iter()
            .map(|s| Arc::as_ptr(s) as usize)
            .collect();
        let got = std::thread::spawn(|| LOCAL.with(|h| Arc::as_ptr(&h.0) as usize))
            .join()
            .unwrap();
        assert!(known.contains(&got), "a fresh shard was made");
    }
}
