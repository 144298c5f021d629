//! Giving the heap back after a burst of connections closes.
//!
//! glibc's malloc keeps what a program frees: a freed chunk goes back to its arena's free
//! lists, and only the arena's top (the end of the heap) is returned to the kernel, when it
//! passes `M_TRIM_THRESHOLD`. 10,000 idle TLS connections that open in a burst and close
//! leave their memory free in the middle of the heap, between the allocations that outlive
//! them: the process keeps it resident, ~100 MB an operator sees as a leak. `malloc_trim(0)`
//! walks every arena and hands back (`MADV_DONTNEED`) every whole free page, wherever it is.
//! It costs a walk of the free lists under the arena lock, so it runs once per burst, not
//! per close: [`TrimPolicy`] decides when, from the count of open connections sampled every
//! [`TICK`] (plain code, unit-tested below); [`run`] is the shell that samples and trims.
//!
//! A build with another allocator (`--features jemalloc` or `mimalloc`) does not trim: those
//! allocators give memory back by themselves (see bench/results/2026-12-02-burst-idle/).

use std::time::{Duration, Instant};

/// How often the open-connection count is sampled.
pub const TICK: Duration = Duration::from_secs(1);

/// Connections that must have closed (from the highest count since the last trim) before a
/// trim is worth it: 64 idle TLS connections are ~1 MB of heap.
pub const MIN_DROP: u64 = 64;

/// A trim waits until the count has stopped falling for this long, so a burst of closes
/// gets one trim at its end.
pub const QUIET: Duration = Duration::from_secs(1);

/// ... but no longer than this after the count started falling (connections timing out
/// one by one over a minute get a trim every 10 s).
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// When to trim, from samples of the open-connection count.
#[derive(Debug, Clone, Default)]
pub struct TrimPolicy {
    /// The highest count since the last trim.
    peak: u64,
    /// The previous sample.
    last: u64,
    /// When the count first fell since the last trim.
    falling_since: Option<Instant>,
    /// When the count last fell.
    last_fall: Option<Instant>,
}

impl TrimPolicy {
    /// A policy that has seen no connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the sample `active` (open connections) at `now`; `true`: trim now. A trim is
    /// due once at least [`MIN_DROP`] connections have closed since the peak, and either the
    /// count has not fallen for [`QUIET`] or it started falling [`MAX_WAIT`] ago. After a
    /// `true` the peak starts again from `active`.
    pub fn observe(&mut self, now: Instant, active: u64) -> bool {
        self.peak = self.peak.max(active);
        if active < self.last {
            self.last_fall = Some(now);
            self.falling_since.get_or_insert(now);
        }
        self.last = active;
        if self.peak - active < MIN_DROP {
            return false;
        }
        let (Some(first), Some(latest)) = (self.falling_since, self.last_fall) else {
            return false;
        };
        let due = now.duration_since(latest) >= QUIET || now.duration_since(first) >= MAX_WAIT;
        if due {
            self.peak = active;
            self.falling_since = None;
            self.last_fall = None;
        }
        due
    }
}

/// Samples `active` every [`TICK`] and trims the heap when [`TrimPolicy`] says so; runs for
/// the life of the process. Does nothing in a build whose allocator is not glibc's.
pub async fn run(active: impl Fn() -> u64) {
    if !trims() {
        return;
    }
    let mut policy = TrimPolicy::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let n = active();
        if policy.observe(Instant::now(), n) {
            let t = Instant::now();
            let released = trim();
            crate::fblog!(
                Debug,
                "malloc_trim: {n} connections open, memory released: {released}, {} µs",
                t.elapsed().as_micros()
            );
        }
    }
}

/// Whether this build's allocator is glibc's, the one that needs [`trim`].
const fn trims() -> bool {
    cfg!(all(
        target_os = "linux",
        target_env = "gnu",
        not(feature = "jemalloc"),
        not(feature = "mimalloc")
    ))
}

/// `malloc_trim(0)`: whether memory was handed back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim takes no pointer and may be called at any time; it locks each
    // arena while it walks it.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds counts one per second from `t0`; returns the seconds at which it trimmed.
    fn trims_at(counts: &[u64]) -> Vec<usize> {
        let t0 = Instant::now();
        let mut p = TrimPolicy::new();
        counts
            .iter()
            .enumerate()
            .filter(|(i, &n)| p.observe(t0 + Duration::from_secs(*i as u64), n))
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn one_trim_after_a_burst_of_closes_stops() {
        // 10,000 open, closing over two seconds, then quiet: one trim, a second after the
        // last fall.
        let mut c = vec![0, 5000, 10_000, 10_000, 4000, 12, 12, 12, 12, 12];
        assert_eq!(trims_at(&c), [6]);
        // All closed at once.
        c = vec![10_000, 10_000, 0, 0, 0, 0];
        assert_eq!(trims_at(&c), [3]);
    }

    #[test]
    fn small_drops_and_churn_never_trim() {
        assert!(trims_at(&[100, 40, 40, 40, 40]).is_empty(), "60 < MIN_DROP");
        // A steady 1,000 with connections coming and going.
        let churn: Vec<u64> = (0..120).map(|i| 1000 + (i % 7) * 8).collect();
        assert!(trims_at(&churn).is_empty());
        // Growth alone never trims.
        let growth: Vec<u64> = (0..60).map(|i| i * 500).collect();
        assert!(trims_at(&growth).is_empty());
        assert!(trims_at(&[]).is_empty());
    }

    #[test]
    fn a_slow_decline_trims_every_max_wait() {
        // 100 connections close every second for 30 s: never quiet, so a trim each MAX_WAIT.
        let slow: Vec<u64> = (0..31).map(|i| 10_000 - i * 100).collect();
        assert_eq!(trims_at(&slow), [11, 22]);
    }

    #[test]
    fn the_peak_restarts_after_a_trim() {
        // Trim at 2; then the count climbs back to 500 and falls by only 50: no second trim.
        let c = [1000, 0, 0, 0, 0, 500, 500, 450, 450, 450, 450];
        assert_eq!(trims_at(&c), [2]);
        // A second burst trims again.
        let c = [1000, 0, 0, 0, 2000, 2000, 100, 100, 100];
        assert_eq!(trims_at(&c), [2, 7]);
    }
}
