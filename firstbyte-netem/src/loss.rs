//! Packet loss models: none, Bernoulli, and Gilbert–Elliott (netem's `gemodel`).
//!
//! A [`LossSpec`] is what the command line asked for; a [`LossModel`] is one direction's
//! running state built from it. For each packet the scheduler asks [`LossModel::lose`] with the
//! direction's random generator and gets a yes or no; nothing here knows about time or sockets.
//!
//! Gilbert–Elliott is a two-state Markov chain evaluated once per packet: in the good state a
//! packet is delivered with probability `k`, in the bad state with probability `h`; after the
//! packet the chain moves good→bad with probability `p` and bad→good with probability `r`
//! (netem decides loss with the parameter of the state the packet arrived in, as here).

use crate::rng::Rng;

/// The loss process asked for on the command line (probabilities in `[0, 1]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossSpec {
    /// Every packet is delivered.
    None,
    /// Each packet is lost independently with probability `p` (`--loss P%`).
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert–Elliott bursts (`--loss-model gilbert:p,r[,h,k]`).
    Gilbert {
        /// P(good → bad) per packet.
        p: f64,
        /// P(bad → good) per packet.
        r: f64,
        /// P(deliver) in the bad state; 0 by default (every packet in a burst is lost).
        h: f64,
        /// P(deliver) in the good state; 1 by default (no loss outside bursts).
        k: f64,
    },
}

impl LossSpec {
    /// Long-run fraction of packets lost (the chain's stationary loss rate).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => p,
            LossSpec::Gilbert { p, r, h, k } => {
                if p + r == 0.0 {
                    // The chain never leaves the good state it starts in.
                    return 1.0 - k;
                }
                let bad = p / (p + r);
                (1.0 - bad) * (1.0 - k) + bad * (1.0 - h)
            }
        }
    }
}

/// One direction's loss process with its state (for Gilbert–Elliott: good or bad).
#[derive(Debug, Clone)]
pub struct LossModel {
    spec: LossSpec,
    in_bad_state: bool,
}

impl LossModel {
    /// A fresh model; Gilbert–Elliott starts in the good state, as netem's does.
    pub fn new(spec: LossSpec) -> Self {
        LossModel {
            spec,
            in_bad_state: false,
        }
    }

    /// Decides the fate of the next packet: true if it is lost.
    pub fn lose(&mut self, rng: &mut Rng) -> bool {
        match self.spec {
            LossSpec::None => false,
            LossSpec::Bernoulli { p } => rng.chance(p),
            LossSpec::Gilbert { p, r, h, k } => {
                let deliver = if self.in_bad_state { h } else { k };
                let lost = !rng.chance(deliver);
                let flip = if self.in_bad_state { r } else { p };
                if rng.chance(flip) {
                    self.in_bad_state = !self.in_bad_state;
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `n` packets and returns (loss rate, mean length of runs of consecutive losses).
    fn simulate(spec: LossSpec, n: usize, seed: u64) -> (f64, f64) {
        let mut model = LossModel::new(spec);
        let mut rng = Rng::seeded(seed);
        let (mut lost, mut runs, mut in_run) = (0usize, 0usize, false);
        for _ in 0..n {
            let l = model.lose(&mut rng);
            if l {
                lost += 1;
                if !in_run {
                    runs += 1;
                }
            }
            in_run = l;
        }
        let burst = if runs == 0 {
            0.0
        } else {
            lost as f64 / runs as f64
        };
        (lost as f64 / n as f64, burst)
    }

    #[test]
    fn no_loss_loses_nothing() {
        assert_eq!(simulate(LossSpec::None, 10_000, 1).0, 0.0);
    }

    #[test]
    fn bernoulli_rate_within_binomial_bounds() {
        // n = 1e6, p = 0.1: sigma = 0.0003; the bound is over 10 sigma, and the seed is fixed.
        let (rate, burst) = simulate(LossSpec::Bernoulli { p: 0.1 }, 1_000_000, 3);
        assert!((rate - 0.1).abs() < 0.003, "rate {rate}");
        // Independent losses: mean run length 1/(1-p) = 1.11.
        assert!((burst - 1.0 / 0.9).abs() < 0.02, "burst {burst}");
    }

    #[test]
    fn simple_gilbert_matches_stationary_figures() {
        // p = 1%, r = 25%: stationary loss p/(p+r) = 3.85%, bursts of mean length 1/r = 4.
        let spec = LossSpec::Gilbert {
            p: 0.01,
            r: 0.25,
            h: 0.0,
            k: 1.0,
        };
        assert!((spec.mean_loss() - 0.01 / 0.26).abs() < 1e-12);
        for seed in [1, 2, 3] {
            let (rate, burst) = simulate(spec, 2_000_000, seed);
            assert!((rate - spec.mean_loss()).abs() < 0.004, "rate {rate}");
            assert!((burst - 4.0).abs() < 0.2, "burst {burst}");
        }
    }

    #[test]
    fn general_gilbert_elliott_mean_loss() {
        // Partial loss in both states: 1-k = 2% when good, 1-h = 70% when bad.
        let spec = LossSpec::Gilbert {
            p: 0.05,
            r: 0.2,
            h: 0.3,
            k: 0.98,
        };
        let expected = 0.8 * 0.02 + 0.2 * 0.7;
        assert!((spec.mean_loss() - expected).abs() < 1e-12);
        let (rate, burst) = simulate(spec, 2_000_000, 9);
        assert!((rate - expected).abs() < 0.005, "rate {rate}");
        // Bursty: loss runs are longer than independent losses at the same rate would give.
        assert!(burst > 1.0 / (1.0 - expected) + 0.3, "burst {burst}");
    }

    #[test]
    fn gilbert_stuck_in_good_state() {
        let spec = LossSpec::Gilbert {
            p: 0.0,
            r: 0.0,
            h: 0.0,
            k: 1.0,
        };
        assert_eq!(spec.mean_loss(), 0.0);
        assert_eq!(simulate(spec, 10_000, 5).0, 0.0);
    }
}
