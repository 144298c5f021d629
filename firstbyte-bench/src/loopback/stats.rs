//! Statistics and run order for the loopback bench.
//!
//! Each measure is taken once per run per server, in an interleaved order ([`interleave`]:
//! A B C, A B C, ...) so that slow drifts of a shared machine hit every server alike. The
//! per-run values of one metric and server are then reduced to a [`Summary`]: median, min and
//! max. Ratios compare firstbyte's median with each peer's.

use serde::Serialize;

/// Median, min and max of a metric's per-run values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub n: usize,
}

/// Summarizes the finite values of `values`; `None` when there are none.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Summary {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

/// `ours / theirs`, or `None` when `theirs` is zero or either is not finite.
pub fn ratio(ours: f64, theirs: f64) -> Option<f64> {
    let r = ours / theirs;
    (theirs != 0.0 && r.is_finite()).then_some(r)
}

/// The run order: `runs` rounds, each visiting every server once in the given order.
/// Returns (run index, server index) pairs.
pub fn interleave(servers: usize, runs: usize) -> Vec<(usize, usize)> {
    (0..runs)
        .flat_map(|run| (0..servers).map(move |s| (run, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_medians() {
        let s = summarize(&[5.0, 1.0, 3.0]).expect("values");
        assert_eq!((s.median, s.min, s.max, s.n), (3.0, 1.0, 5.0, 3));
        let s = summarize(&[4.0, 1.0, 3.0, 2.0]).expect("values");
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
    }

    #[test]
    fn non_finite_values_are_dropped() {
        let s = summarize(&[f64::NAN, 2.0, f64::INFINITY]).expect("one finite value");
        assert_eq!((s.median, s.n), (2.0, 1));
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
    }

    #[test]
    fn ratios_guard_division() {
        assert_eq!(ratio(1.0, 2.0), Some(0.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }

    #[test]
    fn interleave_visits_every_server_each_round() {
        assert_eq!(
            interleave(3, 2),
            vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
        );
        assert!(interleave(3, 0).is_empty());
    }
}
