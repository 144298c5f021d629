//! The `dynamic` policy: Cloudflare's dynamic TLS records for nginx, exactly.
//!
//! Per connection the patch keeps two numbers: records written so far and the time of the
//! last write. Before each record (`ngx_ssl_send_chain`): if the time since the last write is
//! more than `ssl_dyn_rec_timeout`, the record is `size_lo` and the count restarts at 0;
//! otherwise more than `threshold × 2` records sent → `ssl_buffer_size`, more than
//! `threshold` → `size_hi`, else `size_lo`. After each write (`ngx_ssl_write`) the count goes
//! up by one and the time is noted. A fresh connection has never written, so it starts idle.
//! With the defaults, records 1–41 are 1369 bytes, 42–81 are 4229, and 82 on are full size.
//! `size_lo` and `size_hi` are capped at `ssl_buffer_size` (the patch's merge step), and an
//! `ssl_dyn_rec_timeout` of 0 turns the whole mechanism off ("If dyn_rec_timeout is 0, we
//! assume dyn_rec is off"): every record is then `ssl_buffer_size`.

use std::time::{Duration, Instant};

use super::{clamp_size, RecordSettings};
use crate::net::TcpInfo;

/// Cloudflare's dynamic record sizing for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dynamic {
    full: usize,
    lo: usize,
    hi: usize,
    threshold: u64,
    /// Zero: dynamic records off.
    timeout: Duration,
    records_sent: u64,
    last_write: Option<Instant>,
}

impl Dynamic {
    /// The policy for these settings (`ssl_dyn_rec_enable` itself is not looked at).
    pub fn new(settings: &RecordSettings) -> Self {
        let full = settings.full_size();
        Self {
            full,
            lo: clamp_size(settings.ssl_dyn_rec_size_lo).min(full),
            hi: clamp_size(settings.ssl_dyn_rec_size_hi).min(full),
            threshold: u64::from(settings.ssl_dyn_rec_threshold),
            timeout: settings.ssl_dyn_rec_timeout,
            records_sent: 0,
            last_write: None,
        }
    }

    /// The next record's size; restarts the count if the connection was idle.
    pub fn next_size(&mut self, now: Instant, _tcp: Option<&TcpInfo>) -> usize {
        if self.timeout.is_zero() {
            return self.full;
        }
        let idle = match self.last_write {
            None => true,
            Some(t) => now.saturating_duration_since(t) > self.timeout,
        };
        if idle {
            self.records_sent = 0;
            self.lo
        } else if self.records_sent > self.threshold.saturating_mul(2) {
            self.full
        } else if self.records_sent > self.threshold {
            self.hi
        } else {
            self.lo
        }
    }

    /// Counts the record and notes the time of the write.
    pub fn on_record(&mut self, now: Instant, _plaintext_len: usize) {
        self.records_sent = self.records_sent.saturating_add(1);
        self.last_write = Some(now);
    }

    /// Never: the patch counts records and needs no `getsockopt`.
    pub fn wants_tcp_info(&self) -> bool {
        false
    }

    /// `"dynamic"`.
    pub fn name(&self) -> &'static str {
        "dynamic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(lo: usize, hi: usize, threshold: u32, timeout: Duration) -> RecordSettings {
        RecordSettings {
            ssl_dyn_rec_size_lo: lo,
            ssl_dyn_rec_size_hi: hi,
            ssl_dyn_rec_threshold: threshold,
            ssl_dyn_rec_timeout: timeout,
            ..RecordSettings::default()
        }
    }

    /// Sizes of `n` records written back to back, `gap` apart, starting at `t`.
    fn run(p: &mut Dynamic, t: &mut Instant, n: usize, gap: Duration) -> Vec<usize> {
        (0..n)
            .map(|_| {
                *t += gap;
                let size = p.next_size(*t, None);
                p.on_record(*t, size);
                size
            })
            .collect()
    }

    fn expected(
        lo: usize,
        n_lo: usize,
        hi: usize,
        n_hi: usize,
        full: usize,
        n_full: usize,
    ) -> Vec<usize> {
        let mut v = vec![lo; n_lo];
        v.extend(vec![hi; n_hi]);
        v.extend(vec![full; n_full]);
        v
    }

    #[test]
    fn default_sequence_is_41_lo_40_hi_then_full() {
        let mut p = Dynamic::new(&RecordSettings::default());
        let mut t = Instant::now();
        let sizes = run(&mut p, &mut t, 200, Duration::from_millis(10));
        assert_eq!(sizes, expected(1369, 41, 4229, 40, 16_384, 119));
        assert_eq!(p.name(), "dynamic");
        assert!(!p.wants_tcp_info());
    }

    #[test]
    fn tuned_sequence_is_11_lo_then_full() {
        // lo 1369, hi 16384, threshold 10, timeout 5s: records 1–11 lo, 12–21 hi (= full), then full.
        let mut p = Dynamic::new(&settings(1369, 16_384, 10, Duration::from_secs(5)));
        let mut t = Instant::now();
        let sizes = run(&mut p, &mut t, 40, Duration::from_secs(4));
        assert_eq!(sizes, expected(1369, 11, 16_384, 10, 16_384, 19));
        // 5 s exactly is not "longer than" the timeout; 5 s + 1 ms is.
        t += Duration::from_secs(5);
        assert_eq!(p.next_size(t, None), 16_384);
        t += Duration::from_millis(5001);
        assert_eq!(p.next_size(t, None), 1369);
    }

    #[test]
    fn idle_longer_than_timeout_restarts_the_ramp() {
        let mut p = Dynamic::new(&RecordSettings::default());
        let mut t = Instant::now();
        let first = run(&mut p, &mut t, 100, Duration::from_millis(1));
        assert_eq!(first[99], 16_384);
        // 1 s exactly is not idle yet.
        let again = run(&mut p, &mut t, 1, Duration::from_secs(1));
        assert_eq!(again, vec![16_384]);
        // 1.001 s is: the count restarts at 0, so 41 lo records follow again.
        let after_idle = run(&mut p, &mut t, 90, Duration::from_millis(1001));
        assert_eq!(after_idle, vec![1369; 90], "each write idles again");
        let mut p2 = Dynamic::new(&RecordSettings::default());
        let mut t2 = Instant::now();
        run(&mut p2, &mut t2, 100, Duration::from_millis(1));
        t2 += Duration::from_secs(2);
        let ramp = run(&mut p2, &mut t2, 90, Duration::from_millis(1));
        assert_eq!(ramp, expected(1369, 41, 4229, 40, 16_384, 9));
    }

    #[test]
    fn sizes_are_capped_at_the_buffer_size() {
        let mut p = Dynamic::new(&RecordSettings {
            ssl_buffer_size: 4096,
            ..RecordSettings::default()
        });
        let mut t = Instant::now();
        let sizes = run(&mut p, &mut t, 90, Duration::from_millis(1));
        assert_eq!(sizes, expected(1369, 41, 4096, 40, 4096, 9));
        let mut p = Dynamic::new(&RecordSettings {
            ssl_buffer_size: 1000,
            ..RecordSettings::default()
        });
        assert_eq!(
            run(&mut p, &mut t, 3, Duration::from_millis(1)),
            vec![1000; 3]
        );
    }

    #[test]
    fn zero_timeout_turns_dynamic_records_off() {
        let mut p = Dynamic::new(&settings(1369, 4229, 40, Duration::ZERO));
        let mut t = Instant::now();
        assert_eq!(
            run(&mut p, &mut t, 50, Duration::from_secs(3)),
            vec![16_384; 50]
        );
    }

    #[test]
    fn huge_threshold_does_not_overflow() {
        let mut p = Dynamic::new(&settings(1369, 4229, u32::MAX, Duration::from_secs(1)));
        let mut t = Instant::now();
        assert_eq!(
            run(&mut p, &mut t, 5, Duration::from_millis(1)),
            vec![1369; 5]
        );
    }
}
