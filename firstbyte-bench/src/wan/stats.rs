//! Percentiles and their bootstrap confidence intervals.
//!
//! Quantiles interpolate linearly between order statistics (Hyndman & Fan type 7, R's and
//! numpy's default; the median of an even sample is the mean of the middle two, as Python's
//! `statistics.median` the seed used). The confidence interval is the percentile bootstrap:
//! resample the sample with replacement `BOOTSTRAP_RESAMPLES` times with a seeded generator,
//! take the statistic of each resample, and report its 2.5th and 97.5th percentiles. Same
//! sample and seed, same interval.

use super::rng::SplitMix64;

/// Resamples per interval: 2,000 keeps the Monte Carlo error of a 95% interval's ends small
/// next to its width (Efron & Tibshirani suggest ≥ 1,000 for percentile intervals).
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The q-quantile (0 ≤ q ≤ 1) of a sorted sample; `None` when empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// A sample sorted ascending (NaNs, which a parsed results file never holds, sort last).
pub fn sorted(sample: &[f64]) -> Vec<f64> {
    let mut v = sample.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// A point estimate with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The statistic of the sample itself.
    pub value: f64,
    /// Lower end of the 95% bootstrap interval.
    pub lo: f64,
    /// Upper end of the 95% bootstrap interval.
    pub hi: f64,
}

impl Estimate {
    /// Whether the two intervals do not overlap (a difference beyond noise).
    pub fn separated_from(&self, other: &Estimate) -> bool {
        self.hi < other.lo || other.hi < self.lo
    }
}

/// Estimates of several quantiles of one sample, each with a bootstrap 95% interval; the
/// resamples are shared between the quantiles (one sort per resample). `None` when empty.
pub fn quantiles_with_ci(sample: &[f64], qs: &[f64], seed: u64) -> Option<Vec<Estimate>> {
    let base = sorted(sample);
    let values: Vec<f64> = qs
        .iter()
        .map(|&q| quantile_sorted(&base, q))
        .collect::<Option<_>>()?;
    let n = base.len();
    let mut rng = SplitMix64::new(seed);
    let mut boot: Vec<Vec<f64>> = vec![Vec::with_capacity(BOOTSTRAP_RESAMPLES); qs.len()];
    let mut resample = vec![0.0; n];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for slot in resample.iter_mut() {
            *slot = base[rng.below(n as u64) as usize];
        }
        resample.sort_by(|a, b| a.total_cmp(b));
        for (i, &q) in qs.iter().enumerate() {
            boot[i].push(quantile_sorted(&resample, q).unwrap_or(f64::NAN));
        }
    }
    Some(
        values
            .into_iter()
            .zip(boot)
            .map(|(value, b)| {
                let b = sorted(&b);
                Estimate {
                    value,
                    lo: quantile_sorted(&b, 0.025).unwrap_or(value),
                    hi: quantile_sorted(&b, 0.975).unwrap_or(value),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type7_quantiles() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&s, 0.5), Some(2.5));
        assert_eq!(quantile_sorted(&s, 0.0), Some(1.0));
        assert_eq!(quantile_sorted(&s, 1.0), Some(4.0));
        assert_eq!(quantile_sorted(&[5.0], 0.95), Some(5.0));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((quantile_sorted(&hundred, 0.95).expect("q") - 95.05).abs() < 1e-9);
    }

    fn sample(n: usize, seed: u64) -> Vec<f64> {
        // A skewed, latency-like sample: a floor plus an exponential-ish tail.
        let mut r = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let u = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                305.0 - 50.0 * (1.0 - u).ln()
            })
            .collect()
    }

    #[test]
    fn ci_contains_the_estimate_is_seeded_and_shrinks_with_n() {
        let small = sample(50, 1);
        let a = quantiles_with_ci(&small, &[0.5, 0.95, 0.99], 9).expect("estimates");
        let b = quantiles_with_ci(&small, &[0.5, 0.95, 0.99], 9).expect("estimates");
        assert_eq!(a, b, "same seed, same intervals");
        for e in &a {
            assert!(e.lo <= e.value && e.value <= e.hi, "{e:?}");
        }
        assert!(a[0].lo < a[0].hi);
        let big = sample(2000, 1);
        let c = quantiles_with_ci(&big, &[0.5], 9).expect("estimates");
        assert!(
            c[0].hi - c[0].lo < (a[0].hi - a[0].lo) / 2.0,
            "{c:?} vs {a:?}"
        );
        assert!(quantiles_with_ci(&[], &[0.5], 1).is_none());
    }

    #[test]
    fn separation() {
        let a = Estimate {
            value: 1.0,
            lo: 0.5,
            hi: 1.5,
        };
        let b = Estimate {
            value: 3.0,
            lo: 2.0,
            hi: 4.0,
        };
        let c = Estimate {
            value: 1.4,
            lo: 1.2,
            hi: 2.5,
        };
        assert!(a.separated_from(&b));
        assert!(!a.separated_from(&c));
    }
}
