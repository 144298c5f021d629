//! Which TLS record policy the observed traffic favours (the report's `record_policy`), and
//! when `tuning_advisor apply` switches a server's policy by itself. Both pure.
//!
//! The evidence is what only the server sees under each response: `TCP_INFO` at the first byte
//! (RTT, congestion window) and at the last (segments retransmitted in between), and the time
//! to the first and the last byte per policy and per response-size class.
//!
//! `apply`'s rule, with a margin beyond noise: a response "saw loss" when a segment was
//! retransmitted during it; with `n` responses of which a fraction `p` saw loss, `p ± 2σ`
//! (`σ = √(p(1−p)/n)`) bounds it. A server configured with `static` or `dynamic` records is
//! switched to adaptive when the lower bound exceeds 5% and the median response is not large
//! (≤ 256 KiB: small records help responses that fit in a few round trips; a large transfer is
//! bound by the window, not the record). The switch is undone — the configured policy stands
//! again — when the upper bound falls below 1%. A server configured with `adaptive` (the
//! default) is never switched: the record-sizing run (`bench/results/2026-11-26-records`) found
//! adaptive never behind the best fixed policy beyond noise on any link, so there is nothing
//! to switch to. Nothing is decided before [`MIN_SAMPLES`] responses since the last switch, so
//! a switch never follows from a handful of responses, and the gap between 1% and 5% keeps it
//! from flapping.

use super::hist::Summary;
use super::{POLICIES, SIZE_CLASSES};

/// Responses needed (since the last switch) before `apply` decides anything.
pub const MIN_SAMPLES: u64 = 200;

/// `apply` looks at its evidence every this many responses.
pub const CHECK_EVERY: u64 = 32;

/// Lower bound of the lossy fraction above which small records pay.
pub const LOSSY: f64 = 0.05;

/// Upper bound of the lossy fraction below which full records lose nothing.
pub const CLEAN: f64 = 0.01;

/// Median body above which records do not matter (the transfer is window-bound).
pub const LARGE_BODY: u64 = 256 << 10;

/// What `apply` decides from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence {
    /// Responses since the last switch.
    pub responses: u64,
    /// ... during which a segment was retransmitted.
    pub lossy: u64,
    /// Median TLS response body, bytes.
    pub body_p50: u64,
}

/// A switch of record policy, with its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    /// Policy before ([`POLICIES`] index).
    pub from: usize,
    /// Policy after.
    pub to: usize,
    /// Why, with the numbers.
    pub reason: String,
}

/// `p` and its 2σ bounds.
fn bounds(k: u64, n: u64) -> (f64, f64, f64) {
    if n == 0 {
        return (0.0, 0.0, 1.0);
    }
    let p = k as f64 / n as f64;
    let s = (p * (1.0 - p) / n as f64).sqrt();
    (p, (p - 2.0 * s).max(0.0), (p + 2.0 * s).min(1.0))
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The adaptive policy's [`POLICIES`] index.
pub const ADAPTIVE: usize = 2;

/// The switch `apply` makes on this evidence, if any: `configured` is the server's own policy,
/// `applied` the one an earlier switch put in force ([`POLICIES`] indexes).
pub fn decide(configured: usize, applied: Option<usize>, ev: &Evidence) -> Option<Switch> {
    if ev.responses < MIN_SAMPLES {
        return None;
    }
    let current = applied.unwrap_or(configured);
    let (p, lo, hi) = bounds(ev.lossy, ev.responses);
    if current != ADAPTIVE && lo > LOSSY && ev.body_p50 <= LARGE_BODY {
        return Some(Switch {
            from: current,
            to: ADAPTIVE,
            reason: format!(
                "{} of {} responses saw a retransmission (at least {} at 2 sigma, above {}) and the median response is {} bytes: a lost segment holds back a whole record, adaptive records follow the congestion window",
                pct(p), ev.responses, pct(lo), pct(LOSSY), ev.body_p50
            ),
        });
    }
    if current != configured && hi < CLEAN {
        return Some(Switch {
            from: current,
            to: configured,
            reason: format!(
                "{} of {} responses saw a retransmission (at most {} at 2 sigma, below {}): the configured policy stands again",
                pct(p), ev.responses, pct(hi), pct(CLEAN)
            ),
        });
    }
    None
}

/// One policy's figures, from the advisor's histograms.
#[derive(Debug, Clone, Default)]
pub struct PolicyView {
    /// Responses with TCP figures.
    pub responses: u64,
    /// Responses with a retransmission.
    pub lossy: u64,
    /// Segments retransmitted.
    pub retrans: u64,
    /// RTT at first byte, µs.
    pub rtt: Summary,
    /// Congestion window at first byte, segments.
    pub cwnd: Summary,
    /// Time to first byte, µs, per size class.
    pub ttfb: [Summary; 3],
    /// Time to last byte, µs, per size class.
    pub ttlb: [Summary; 3],
}

/// What the neutral verdicts cite: the record-sizing run behind the default.
const RUN: &str = "over emulated 100 ms links (unlimited, 10 and 2 Mbit/s, 0 and 1% loss; bench/results/2026-11-26-records) adaptive was never 5% behind the best fixed policy, and static 16k records cost a second round trip after an idle gap";

/// Responses per class needed to compare two policies.
pub const MIN_COMPARE: u64 = 30;

/// A comparison must beat the other policy's median by this much to count.
pub const MARGIN: f64 = 0.2;

fn ms(us: u64) -> f64 {
    (us as f64 / 100.0).round() / 10.0
}

/// Which policy the traffic favours, and why.
pub fn favour(views: &[PolicyView; 3], body_p50: u64) -> (&'static str, String) {
    // Policies seen side by side: compare time to last byte in the busiest shared class.
    let mut best_class = None;
    for c in 0..3 {
        let seen: Vec<usize> = (0..3)
            .filter(|&p| views[p].ttlb[c].count >= MIN_COMPARE)
            .collect();
        if seen.len() >= 2 {
            let n: u64 = seen.iter().map(|&p| views[p].ttlb[c].count).sum();
            if best_class.as_ref().is_none_or(|(_, m, _)| n > *m) {
                best_class = Some((c, n, seen));
            }
        }
    }
    if let Some((c, _, seen)) = best_class {
        let mut order = seen.clone();
        order.sort_by_key(|&p| views[p].ttlb[c].p50);
        let (a, b) = (order[0], order[1]);
        let (ta, tb) = (views[a].ttlb[c].p50, views[b].ttlb[c].p50);
        let figures = order
            .iter()
            .map(|&p| {
                format!(
                    "{} {} ms ({} responses)",
                    POLICIES[p],
                    ms(views[p].ttlb[c].p50),
                    views[p].ttlb[c].count
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        if (ta as f64) < (tb as f64) * (1.0 - MARGIN) {
            return (
                POLICIES[a],
                format!(
                    "{} responses: median time to last byte {figures}; {} is ahead by more than {:.0}%",
                    SIZE_CLASSES[c],
                    POLICIES[a],
                    MARGIN * 100.0
                ),
            );
        }
        return (
            "adaptive",
            format!(
                "{} responses: median time to last byte {figures}; no policy is ahead by more than {:.0}%, so the default (adaptive) stands",
                SIZE_CLASSES[c],
                MARGIN * 100.0
            ),
        );
    }
    // One policy seen: judge from the conditions.
    let n: u64 = views.iter().map(|v| v.responses).sum();
    let lossy: u64 = views.iter().map(|v| v.lossy).sum();
    if n == 0 {
        return (
            "adaptive",
            format!("no TLS response over TCP observed yet; the default (adaptive) stands: {RUN}"),
        );
    }
    let rtt = views
        .iter()
        .max_by_key(|v| v.responses)
        .map_or(0, |v| v.rtt.p50);
    let (p, lo, hi) = bounds(lossy, n);
    if n >= MIN_SAMPLES && lo > LOSSY && body_p50 <= LARGE_BODY {
        return (
            "adaptive",
            format!(
                "{} of {n} responses saw a retransmission (at least {} at 2 sigma), median RTT {} ms, median response {body_p50} bytes: small records near the congestion window keep a lost segment from holding back 16 KB",
                pct(p), pct(lo), ms(rtt)
            ),
        );
    }
    if body_p50 > LARGE_BODY {
        return (
            "adaptive",
            format!(
                "median response {body_p50} bytes: large transfers are bound by the congestion window, not the record size, and adaptive records are full size once the window is open ({} of {n} responses saw a retransmission, median RTT {} ms); the default (adaptive) stands",
                pct(p), ms(rtt)
            ),
        );
    }
    (
        "adaptive",
        format!(
            "{} of {n} responses saw a retransmission (at most {} at 2 sigma), median RTT {} ms: little loss, but a connection idle past its RTO restarts its window, where full records cost a round trip; the default (adaptive) stands: {RUN}",
            pct(p), pct(hi), ms(rtt)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advisor::hist::Histogram;

    fn ev(responses: u64, lossy: u64, body_p50: u64) -> Evidence {
        Evidence {
            responses,
            lossy,
            body_p50,
        }
    }

    #[test]
    fn switch_needs_samples_and_margin() {
        // Too few responses, however lossy.
        assert_eq!(decide(0, None, &ev(199, 100, 50_000)), None);
        // 20% lossy of 400: to adaptive.
        let s = decide(0, None, &ev(400, 80, 50_000)).expect("switch");
        assert_eq!((s.from, s.to), (0, 2));
        assert!(
            s.reason.starts_with("20.0% of 400 responses"),
            "{}",
            s.reason
        );
        // Configured dynamic: to adaptive too.
        assert_eq!(decide(1, None, &ev(400, 80, 50_000)).map(|s| s.to), Some(2));
        // 6% of 200: the lower bound (2.6%) is within noise of 5%: no switch.
        assert_eq!(decide(0, None, &ev(200, 12, 50_000)), None);
        // Lossy, but large responses: records do not matter.
        assert_eq!(decide(0, None, &ev(400, 80, 1 << 20)), None);
        // Adaptive stays while lossy, and in the 1–5% gap.
        assert_eq!(decide(0, Some(2), &ev(400, 80, 50_000)), None);
        assert_eq!(decide(0, Some(2), &ev(1000, 20, 50_000)), None);
        // Clean: back to the configured policy, static or dynamic.
        let s = decide(0, Some(2), &ev(1000, 0, 50_000)).expect("switch");
        assert_eq!((s.from, s.to), (2, 0));
        assert!(
            s.reason.ends_with("the configured policy stands again"),
            "{}",
            s.reason
        );
        assert_eq!(
            decide(1, Some(2), &ev(1000, 0, 50_000)).map(|s| s.to),
            Some(1)
        );
        // Configured static or dynamic and clean: nothing to do.
        assert_eq!(decide(0, None, &ev(1000, 0, 50_000)), None);
        assert_eq!(decide(1, None, &ev(1000, 0, 50_000)), None);
        // Configured adaptive (the default): never switched, lossy or clean.
        assert_eq!(decide(2, None, &ev(1000, 300, 50_000)), None);
        assert_eq!(decide(2, None, &ev(1000, 0, 50_000)), None);
    }

    fn times(v: u64, n: usize) -> Summary {
        let h = Histogram::default();
        for _ in 0..n {
            h.record(v);
        }
        h.summary()
    }

    #[test]
    fn favour_compares_side_by_side() {
        let mut views: [PolicyView; 3] = Default::default();
        views[0].responses = 100;
        views[0].ttlb[1] = times(400_000, 100);
        views[2].responses = 100;
        views[2].ttlb[1] = times(250_000, 100);
        let (p, why) = favour(&views, 50_000);
        assert_eq!(p, "adaptive");
        assert!(
            why.contains("adaptive 250 ms (100 responses), static 400 ms (100 responses)"),
            "{why}"
        );
        // Within the margin: the default.
        views[2].ttlb[1] = times(380_000, 100);
        let (p, why) = favour(&views, 50_000);
        assert_eq!(p, "adaptive");
        assert!(why.ends_with("so the default (adaptive) stands"), "{why}");
        // Static ahead beyond the margin: static.
        views[0].ttlb[1] = times(300_000, 100);
        assert_eq!(favour(&views, 50_000).0, "static");
    }

    #[test]
    fn favour_from_conditions() {
        let mut views: [PolicyView; 3] = Default::default();
        assert_eq!(favour(&views, 0).0, "adaptive");
        views[0].responses = 500;
        views[0].lossy = 100;
        views[0].rtt = times(100_000, 500);
        let (p, why) = favour(&views, 40_000);
        assert_eq!(p, "adaptive");
        assert!(why.contains("20.0% of 500"), "{why}");
        let (p, why) = favour(&views, 2 << 20);
        assert_eq!(p, "adaptive");
        assert!(why.contains("bound by the congestion window"), "{why}");
        views[0].lossy = 0;
        let (p, why) = favour(&views, 40_000);
        assert_eq!(p, "adaptive");
        assert!(why.contains("median RTT 100 ms"), "{why}");
        assert!(why.contains("bench/results/2026-11-26-records"), "{why}");
    }
}
