//! A fixed-memory, log-bucketed histogram of `u64` values with atomic counters: recording is a
//! few relaxed atomic adds, nothing is allocated, and any number of threads may record at once.
//!
//! Buckets: four per power of two (so a bucket's bounds are within 25% of each other), each
//! holding the values in `(lo, hi]`; a quantile is reported as the `hi` of the bucket it falls
//! in, so "p95 ≤ 4096" is read exactly when 95% of the values are ≤ 4096 (4096 is a bucket
//! bound, as is every power of two).

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets: 0; then 1, 2, 3, 4 (one each); then four per power of two up to 2^62.
pub const BUCKETS: usize = 1 + 4 + 4 * 61;

/// The bucket of a value.
pub fn bucket(v: u64) -> usize {
    if v == 0 {
        return 0;
    }
    let w = v - 1;
    if w < 4 {
        return 1 + w as usize;
    }
    let e = 63 - w.leading_zeros() as usize; // ≥ 2
    let sub = ((w >> (e - 2)) & 3) as usize;
    (5 + (e - 2) * 4 + sub).min(BUCKETS - 1)
}

/// The largest value of a bucket (its inclusive upper bound).
pub fn upper(i: usize) -> u64 {
    match i {
        0 => 0,
        1..=4 => i as u64,
        _ => {
            let k = i - 5;
            let e = k / 4 + 2;
            let sub = (k % 4) as u64;
            (5 + sub) << (e - 2)
        }
    }
}

/// Counts of values by bucket, their sum and their maximum.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram({:?})", self.summary())
    }
}

impl Histogram {
    /// Counts one value.
    pub fn record(&self, v: u64) {
        self.buckets[bucket(v)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        // The maximum rarely moves: read it before writing.
        if v > self.max.load(Ordering::Relaxed) {
            self.max.fetch_max(v, Ordering::Relaxed);
        }
    }

    /// Forgets every value.
    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.sum.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }

    /// What the values look like now.
    pub fn summary(&self) -> Summary {
        let mut counts = [0u64; BUCKETS];
        for (c, b) in counts.iter_mut().zip(&self.buckets) {
            *c = b.load(Ordering::Relaxed);
        }
        Summary::from_counts(
            &counts,
            self.sum.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        )
    }
}

/// A histogram's figures at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Values counted.
    pub count: u64,
    /// Their mean.
    pub avg: f64,
    /// The largest.
    pub max: u64,
    /// Upper bound of the bucket holding the median.
    pub p50: u64,
    /// ... the 95th percentile.
    pub p95: u64,
    /// ... the 99th percentile.
    pub p99: u64,
    /// Values above 64 KiB (for the bimodal rule; meaningful for sizes).
    pub above_64k: u64,
    /// Values above 16 KiB, one full TLS record.
    pub above_16k: u64,
}

impl Summary {
    /// From bucket counts, the sum and the maximum.
    pub fn from_counts(counts: &[u64; BUCKETS], sum: u64, max: u64) -> Self {
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return Self::default();
        }
        let q = |num: u64| {
            // The smallest bucket whose cumulative count reaches ceil(count * num / 100).
            let need = (count * num).div_ceil(100).max(1);
            let mut acc = 0;
            for (i, c) in counts.iter().enumerate() {
                acc += c;
                if acc >= need {
                    // Never above the largest value seen.
                    return upper(i).min(max);
                }
            }
            max
        };
        let above = |limit: u64| counts[bucket(limit) + 1..].iter().sum();
        Self {
            count,
            avg: sum as f64 / count as f64,
            max,
            p50: q(50),
            p95: q(95),
            p99: q(99),
            above_64k: above(64 << 10),
            above_16k: above(16 << 10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bounds_hold() {
        let mut last = 0;
        for i in 1..BUCKETS {
            assert!(upper(i) > upper(i - 1), "bucket {i}");
        }
        for v in [
            0u64,
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8,
            9,
            1000,
            1024,
            1025,
            4096,
            4097,
            65536,
            1 << 40,
        ] {
            let b = bucket(v);
            assert!(upper(b) >= v, "{v} in bucket {b} (upper {})", upper(b));
            assert!(b == 0 || upper(b - 1) < v, "{v}");
            assert!(b >= last);
            last = b;
        }
        // Powers of two are bucket bounds: 4096 is in the bucket ending at 4096.
        assert_eq!(upper(bucket(4096)), 4096);
        assert_eq!(upper(bucket(4097)), 5120);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles() {
        let h = Histogram::default();
        for _ in 0..95 {
            h.record(1000);
        }
        for _ in 0..5 {
            h.record(100_000);
        }
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50, 1024);
        assert_eq!(s.p95, 1024);
        assert_eq!(s.p99, 100_000);
        assert_eq!(s.max, 100_000);
        assert_eq!(s.above_64k, 5);
        assert_eq!(s.above_16k, 5);
        assert!((s.avg - 5950.0).abs() < 1e-9);
        h.reset();
        assert_eq!(h.summary(), Summary::default());
    }
}
