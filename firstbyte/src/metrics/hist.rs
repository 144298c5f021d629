//! A histogram of durations made of atomics: observing is a bucket search over a dozen
//! integers and three relaxed `fetch_add`s, with no lock (the `prometheus-client` crate's own
//! histogram takes a mutex per observation). It encodes through the crate as a classic
//! histogram.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds in microseconds: 100 µs to 60 s, the spread of a request's or an upstream's
/// time from a cached file on loopback to a slow backend over a long path.
const BOUNDS_US: [u64; 17] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 60_000_000,
];

#[derive(Debug, Default)]
struct Inner {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    counts: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

/// A histogram of durations, in seconds on the wire. Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct Hist(Arc<Inner>);

impl Hist {
    /// Counts one duration.
    #[inline]
    pub fn observe(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.0.counts[i].fetch_add(1, Relaxed);
        self.0.sum_us.fetch_add(us, Relaxed);
    }

    /// (sum in seconds, count, per-bucket counts with their upper bounds in seconds).
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut buckets = Vec::with_capacity(BOUNDS_US.len() + 1);
        let mut count = 0;
        for (i, c) in self.0.counts.iter().enumerate() {
            let n = c.load(Relaxed);
            count += n;
            let le = BOUNDS_US.get(i).map_or(f64::INFINITY, |&b| b as f64 / 1e6);
            buckets.push((le, n));
        }
        (self.0.sum_us.load(Relaxed) as f64 / 1e6, count, buckets)
    }
}

impl TypedMetric for Hist {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Hist {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_buckets() {
        let h = Hist::default();
        h.observe(Duration::from_micros(999));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(100));
        let (sum, count, b) = h.snapshot();
        assert_eq!(count, 4);
        assert!((sum - 100.004999).abs() < 1e-9, "{sum}");
        assert_eq!(b[0], (0.0001, 0));
        assert_eq!(b[3], (0.001, 2), "<= 1 ms, the bound included");
        assert_eq!(b[4], (0.0025, 0));
        assert_eq!(b[5], (0.005, 1));
        assert_eq!(b.last(), Some(&(f64::INFINITY, 1)));
        assert_eq!(b.len(), BOUNDS_US.len() + 1);
    }
}
