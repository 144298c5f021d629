//! A fixed-size log-linear histogram for lateness, so percentiles need no per-packet storage.
//!
//! Values (ns) below 128 get a bucket each; above, every power of two is split into 64
//! buckets, so a bucket is at most 1/64 (1.6%) wide relative to its values. The forwarding
//! thread records how late each packet left; the report reads percentiles at exit. A run of
//! hours costs the same 30 KB as a run of seconds.

/// Sub-buckets per power of two above the linear range.
const SUB_BUCKETS: u64 = 64;

/// Values below this get exact buckets.
const LINEAR_LIMIT: u64 = 2 * SUB_BUCKETS;

/// Buckets needed to cover all of `u64`.
const BUCKETS: usize = ((64 - 5) * SUB_BUCKETS) as usize;

/// Counts of values in log-linear buckets, plus exact count, sum and maximum.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            sum: 0,
            max: 0,
        }
    }
}

/// The bucket holding `value`.
fn bucket_of(value: u64) -> usize {
    if value < LINEAR_LIMIT {
        return value as usize;
    }
    let exponent = 63 - u64::from(value.leading_zeros());
    let shift = exponent - 6;
    (shift * SUB_BUCKETS + (value >> shift)) as usize
}

/// The largest value that falls in bucket `index`.
fn bucket_high(index: usize) -> u64 {
    let i = index as u64;
    if i < LINEAR_LIMIT {
        return i;
    }
    let shift = i / SUB_BUCKETS - 1;
    let mantissa = i % SUB_BUCKETS + SUB_BUCKETS;
    let low = mantissa << shift;
    low.saturating_add((1u64 << shift) - 1)
}

impl Histogram {
    /// Counts one value.
    pub fn record(&mut self, value: u64) {
        if let Some(c) = self.counts.get_mut(bucket_of(value)) {
            *c += 1;
        }
        self.total += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest value recorded (0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The mean of the recorded values (0 if none).
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// An upper bound for the `q` quantile (`q` in `[0, 1]`): the top of the bucket holding
    /// the value of rank ⌈q·n⌉, never above the maximum. 0 if nothing was recorded.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (index, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(index).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut previous_high = None;
        for index in 0..BUCKETS {
            let high = bucket_high(index);
            if let Some(p) = previous_high {
                assert!(high > p, "bucket {index} does not grow");
                // The bucket's lowest value maps back to it.
                assert_eq!(bucket_of(p + 1), index);
            }
            assert_eq!(bucket_of(high), index);
            previous_high = Some(high);
        }
        assert_eq!(previous_high, Some(u64::MAX));
        // Relative width at most 1/64.
        for v in [200u64, 1_000, 123_456, 9_876_543_210] {
            let high = bucket_high(bucket_of(v));
            assert!(
                high >= v && (high - v) as f64 <= v as f64 / 64.0,
                "{v} -> {high}"
            );
        }
    }

    #[test]
    fn quantiles_of_a_uniform_range() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 100_000);
        assert_eq!(h.max(), 100_000);
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.02, "p50 {p50}");
        assert!((p99 - 99_000.0).abs() / 99_000.0 < 0.02, "p99 {p99}");
        assert_eq!(h.quantile(1.0), 100_000);
        assert!((h.mean() - 50_000.5).abs() < 1e-6);
    }

    #[test]
    fn tail_is_seen() {
        let mut h = Histogram::default();
        for _ in 0..989 {
            h.record(100);
        }
        for _ in 0..11 {
            h.record(5_000_000);
        }
        assert_eq!(h.quantile(0.5), 100);
        assert!(h.quantile(0.99) >= 5_000_000);
    }

    #[test]
    fn empty_histogram() {
        let h = Histogram::default();
        assert_eq!(h.quantile(0.99), 0);
        assert_eq!(h.mean(), 0.0);
    }
}
