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
pub(super) const BOUNDS_US: [u64; 17] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 60_000_000,
];

/// Buckets of a histogram, `+Inf` included.
pub(super) const BUCKETS: usize = BOUNDS_US.len() + 1;

/// The bucket of a duration of `us` microseconds.
#[inline]
pub(super) fn bucket(us: u64) -> usize {
    BOUNDS_US.partition_point(|&b| b < us)
}

/// Per-bucket counts with their upper bounds in seconds, as the encoder takes them.
pub(super) fn with_bounds(counts: &[u64; BUCKETS]) -> Vec<(f64, u64)> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let le = BOUNDS_US.get(i).map_or(f64::INFINITY, |&b| b as f64 / 1e6);
            (le, n)
        })
        .collect()
}

#[derive(Debug, Default)]
struct Inner {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    counts: [AtomicU64; BUCKETS],
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
        self.0.counts[bucket(us)].fetch_add(1, Relaxed);
        self.0.sum_us.fetch_add(us, Relaxed);
    }

    /// (sum in seconds, count, per-bucket counts with their upper bounds in seconds).
    pub fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let counts = self.0.counts.each_ref().map(|c| c.load(Relaxed));
        (
            self.0.sum_us.load(Relaxed) as f64 / 1e6,
            counts.iter().sum(),
            with_bounds(&counts),
        )
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
