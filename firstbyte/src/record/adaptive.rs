//! The `adaptive` policy (ours): each record sized from the live connection's `TCP_INFO`.
//!
//! The cost a record's size adds is waiting: the client decrypts nothing of a record until
//! its last segment arrives. A record that needs more of the congestion window than is open
//! waits a whole round trip for ACKs; one that spans k segments turns one lost segment into
//! k − 1 held-back ones. Counting records (Cloudflare's ramp) guesses at the window; the
//! kernel knows it. So, before each record:
//!
//! - **Fresh or idle → one segment.** The first record of a connection, and the first after an
//!   idle period, carries one segment's payload: `snd_mss` − the record overhead. Idle means
//!   nothing was written for longer than the RTO estimate (`rtt + 4 × rttvar`, at least
//!   Linux's 200 ms) with nothing in flight — the point where the kernel restarts the window
//!   to at most 10 segments (RFC 5681 §4.1, `tcp_slow_start_after_idle`; the kernel applies
//!   it only at the next send, so `TCP_INFO` read before it still shows the old window) — or
//!   for longer than `ssl_dyn_rec_timeout` when that is shorter (0: the RTO rule alone).
//! - **Otherwise a quarter of the window.** A record spans `max(1, snd_cwnd / 4)` whole
//!   segments: `k × snd_mss − overhead` bytes, at most `ssl_buffer_size`. Four records fit in
//!   every window, so under ACK clocking a record leaves the sender within about a quarter of
//!   a round trip, never needs more than one flight, and a loss holds back at most a quarter
//!   window of already-received bytes. A small or collapsed window (initial, after loss or an
//!   RTO) gives one-segment records; from 48 segments (about 70 KB, close to where H2O's
//!   latency optimisation turns itself off at 64 KB) a 16 KB record (12 segments) fits four
//!   times, so bulk transfers run on full records and pay no overhead. On loopback the MSS is
//!   ~64 KB and every record is full size at once.
//!
//! `snd_cwnd − unacked` is not used for the size: bytes queued behind data already in flight
//! wait for it anyway (TCP delivers in order), so shrinking the record would only add
//! overhead. `unacked` does decide idleness (the kernel restarts only an empty pipe).
//!
//! The overhead defaults to 29 bytes, the largest of the AEAD suites firstbyte offers (TLS 1.2
//! AES-GCM); on a TLS 1.3 connection the runtime may lower it to 22 with
//! [`Adaptive::set_record_overhead`]. Cloudflare's 61 covers OpenSSL's CBC suites, which rustls
//! lacks. `snd_mss` already excludes the TCP options in use (timestamps).
//!
//! Once records are full size, `TCP_INFO` is re-read every [`TCP_INFO_REFRESH_RECORDS`]
//! records instead of every record, so bulk transfers pay one `getsockopt` per 128 KB. With no
//! `TCP_INFO` at all (not a TCP socket, or the read fails) the policy runs Cloudflare's
//! algorithm on the same settings.

use std::time::{Duration, Instant};

use super::{Dynamic, RecordSettings, MAX_RECORD_OVERHEAD};
use crate::net::TcpInfo;

/// Records per congestion window once past one-segment records: each record spans
/// `snd_cwnd / 4` segments, so it leaves within about a quarter of a round trip.
pub const RECORDS_PER_WINDOW: u32 = 4;

/// While records are full size, `TCP_INFO` is read before every 8th record only (one
/// `getsockopt` per 128 KB), enough to see a window collapse within a few records.
pub const TCP_INFO_REFRESH_RECORDS: u32 = 8;

/// Linux's minimum RTO (`TCP_RTO_MIN`, 200 ms): no idle period shorter than this restarts the
/// window.
const MIN_RTO: Duration = Duration::from_millis(200);

/// The RTO before any RTT sample, 1 s (RFC 6298 §2.1).
const INITIAL_RTO: Duration = Duration::from_secs(1);

/// Adaptive record sizing for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adaptive {
    full: usize,
    overhead: usize,
    /// `ssl_dyn_rec_timeout`; zero: the RTO rule alone.
    timeout: Duration,
    /// Cloudflare's ramp, used while no `TCP_INFO` has been seen.
    fallback: Dynamic,
    /// The latest usable `TCP_INFO`.
    info: Option<TcpInfo>,
    /// Whether `info` was read for the record being decided.
    info_fresh: bool,
    /// Records decided since `info` was read.
    since_info: u32,
    last_write: Option<Instant>,
    /// The last record decided was full size on an open window.
    at_full: bool,
}

impl Adaptive {
    /// The policy for these settings: `ssl_buffer_size` is the full size,
    /// `ssl_dyn_rec_timeout` caps the idle rule, the rest feeds the fallback.
    pub fn new(settings: &RecordSettings) -> Self {
        Self {
            full: settings.full_size(),
            overhead: MAX_RECORD_OVERHEAD,
            timeout: settings.ssl_dyn_rec_timeout,
            fallback: Dynamic::new(&RecordSettings {
                // The fallback ramps even when the timeout is 0 (which would turn it off).
                ssl_dyn_rec_timeout: if settings.ssl_dyn_rec_timeout.is_zero() {
                    super::DEFAULT_TIMEOUT
                } else {
                    settings.ssl_dyn_rec_timeout
                },
                ..*settings
            }),
            info: None,
            info_fresh: false,
            since_info: 0,
            last_write: None,
            at_full: false,
        }
    }

    /// Sets the TLS record overhead in bytes (22 once a connection is known to be TLS 1.3;
    /// default 29, see the module docs).
    pub fn set_record_overhead(&mut self, bytes: usize) {
        self.overhead = bytes;
    }

    /// The next record's size from `tcp` (or the last `TCP_INFO` seen when `tcp` is `None`).
    pub fn next_size(&mut self, now: Instant, tcp: Option<&TcpInfo>) -> usize {
        self.info_fresh = false;
        if let Some(t) = tcp.filter(|t| t.snd_mss > 0 && t.snd_cwnd > 0) {
            self.info = Some(*t);
            self.info_fresh = true;
            self.since_info = 0;
        }
        let Some(info) = self.info else {
            self.at_full = false;
            return self.fallback.next_size(now, None);
        };
        let idle = self.is_idle(now, &info);
        let size = record_size(&info, idle, self.full, self.overhead);
        self.at_full = !idle && size == self.full;
        size
    }

    /// Notes the write time (and keeps the fallback's count).
    pub fn on_record(&mut self, now: Instant, plaintext_len: usize) {
        self.last_write = Some(now);
        self.since_info = self.since_info.saturating_add(1);
        self.fallback.on_record(now, plaintext_len);
    }

    /// Yes, except while records are full size and the last reading is recent.
    pub fn wants_tcp_info(&self) -> bool {
        !self.at_full || self.since_info >= TCP_INFO_REFRESH_RECORDS
    }

    /// `"adaptive"`.
    pub fn name(&self) -> &'static str {
        "adaptive"
    }

    fn is_idle(&self, now: Instant, info: &TcpInfo) -> bool {
        let Some(last) = self.last_write else {
            return true;
        };
        // A stale reading's `unacked` says nothing about now; only a fresh one can veto.
        if self.info_fresh && info.unacked > 0 {
            return false;
        }
        let rto = rto_estimate(info);
        let limit = if self.timeout.is_zero() {
            rto
        } else {
            rto.min(self.timeout)
        };
        now.saturating_duration_since(last) > limit
    }
}

/// Linux's RTO as `TCP_INFO` shows it: `rtt + 4 × rttvar`, at least 200 ms; 1 s before any
/// sample.
fn rto_estimate(info: &TcpInfo) -> Duration {
    if info.rtt_us == 0 {
        return INITIAL_RTO;
    }
    let us = u64::from(info.rtt_us).saturating_add(4 * u64::from(info.rttvar_us));
    Duration::from_micros(us).max(MIN_RTO)
}

/// One record's plaintext size: one segment's payload when `idle`, else
/// `max(1, cwnd / 4)` segments' payload; capped at `full`, at least 1.
fn record_size(info: &TcpInfo, idle: bool, full: usize, overhead: usize) -> usize {
    let mss = info.snd_mss as usize;
    let segments = if idle {
        1
    } else {
        (info.snd_cwnd / RECORDS_PER_WINDOW).max(1) as usize
    };
    segments
        .saturating_mul(mss)
        .saturating_sub(overhead)
        .clamp(1, full)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1500-byte MTU with TCP timestamps: MSS 1448; 1448 − 29 = 1419 bytes per segment.
    const MSS: u32 = 1448;
    const SEG: usize = 1448 - 29;

    fn info(cwnd: u32, unacked: u32) -> TcpInfo {
        TcpInfo {
            rtt_us: 100_000,
            rttvar_us: 10_000,
            snd_cwnd: cwnd,
            snd_mss: MSS,
            unacked,
            ..TcpInfo::default()
        }
    }

    fn segs(k: usize) -> usize {
        k * MSS as usize - 29
    }

    /// Decides and writes one record at `t`, reading `tcp` only if the policy asks.
    fn step(p: &mut Adaptive, t: Instant, tcp: &TcpInfo) -> usize {
        let arg = p.wants_tcp_info().then_some(tcp);
        let size = p.next_size(t, arg);
        p.on_record(t, size);
        size
    }

    #[test]
    fn fresh_connection_starts_with_one_segment_then_follows_the_window() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let mut t = Instant::now();
        assert!(p.wants_tcp_info());
        assert_eq!(p.name(), "adaptive");
        // Initial window 10: first record one segment, then 10 / 4 = 2 segments.
        assert_eq!(step(&mut p, t, &info(10, 0)), SEG);
        t += Duration::from_millis(1);
        assert_eq!(step(&mut p, t, &info(10, 1)), segs(2));
        // Slow start doubles the window each round trip.
        let mut sizes = Vec::new();
        for cwnd in [20, 40, 47, 48, 96, 200] {
            t += Duration::from_millis(100);
            sizes.push(step(&mut p, t, &info(cwnd, cwnd / 2)));
        }
        assert_eq!(
            sizes,
            vec![segs(5), segs(10), segs(11), 16_384, 16_384, 16_384]
        );
    }

    #[test]
    fn growing_window_never_shrinks_records_and_reaches_full_size() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let t0 = Instant::now();
        let mut last = 0;
        for (i, cwnd) in (10..=60).enumerate() {
            let size = step(&mut p, t0 + Duration::from_millis(i as u64), &info(cwnd, 5));
            assert!(size >= last, "cwnd {cwnd}: {size} < {last}");
            assert!(size <= 16_384);
            // Every record fits in a quarter of the window (or one segment).
            let quarter = (cwnd / 4).max(1) as usize * MSS as usize;
            assert!(size + 29 <= quarter, "cwnd {cwnd}: {size}");
            last = size;
        }
        assert_eq!(last, 16_384);
    }

    #[test]
    fn full_size_reads_tcp_info_only_every_8th_record() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let t = Instant::now();
        step(&mut p, t, &info(100, 0));
        assert_eq!(step(&mut p, t, &info(100, 50)), 16_384);
        let mut asked = Vec::new();
        for _ in 0..20 {
            asked.push(p.wants_tcp_info());
            step(&mut p, t, &info(100, 50));
        }
        let reads = asked.iter().filter(|&&a| a).count();
        assert_eq!(reads, 2, "{asked:?}");
        assert!(!asked[0] && asked[7], "{asked:?}");
    }

    #[test]
    fn loss_shrinks_records_with_the_window() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let mut t = Instant::now();
        step(&mut p, t, &info(100, 0));
        for _ in 0..20 {
            t += Duration::from_millis(10);
            assert_eq!(step(&mut p, t, &info(100, 90)), 16_384);
        }
        // Fast recovery halves the window: 50 / 4 = 12 segments is still a full record.
        // Seen at the next reading, at most 8 records later.
        let mut seen = Vec::new();
        for _ in 0..8 {
            t += Duration::from_millis(10);
            seen.push(step(&mut p, t, &info(50, 50)));
        }
        assert!(seen.iter().all(|&s| s == 16_384));
        // An RTO collapses it to 1 segment: records fall to one segment at the next reading.
        let mut seen = Vec::new();
        for _ in 0..9 {
            t += Duration::from_millis(10);
            seen.push(step(&mut p, t, &info(1, 40)));
        }
        assert_eq!(seen.last(), Some(&SEG), "{seen:?}");
        // From then on every record reads TCP_INFO and grows back with the window.
        t += Duration::from_millis(10);
        assert_eq!(step(&mut p, t, &info(2, 2)), SEG);
        t += Duration::from_millis(10);
        assert_eq!(step(&mut p, t, &info(20, 10)), segs(5));
    }

    #[test]
    fn idle_longer_than_the_rto_restarts_with_one_segment() {
        // rtt 100 ms + 4 × 10 ms = 140 ms < 200 ms minimum: the RTO is 200 ms.
        let settings = RecordSettings {
            ssl_dyn_rec_timeout: Duration::ZERO,
            ..RecordSettings::default()
        };
        let mut p = Adaptive::new(&settings);
        let mut t = Instant::now();
        step(&mut p, t, &info(100, 0));
        t += Duration::from_millis(1);
        assert_eq!(step(&mut p, t, &info(100, 0)), 16_384);
        // 200 ms is not longer than the RTO; the window is still open.
        t += Duration::from_millis(200);
        assert_eq!(step(&mut p, t, &info(100, 0)), 16_384);
        // 201 ms with nothing in flight: the kernel will restart the window.
        t += Duration::from_millis(201);
        assert_eq!(step(&mut p, t, &info(100, 0)), SEG);
        // The next record sees the restarted window (10 segments).
        t += Duration::from_millis(1);
        assert_eq!(step(&mut p, t, &info(10, 1)), segs(2));
        // Data still in flight after a gap (a fresh reading says so): no restart.
        t += Duration::from_millis(500);
        assert_eq!(step(&mut p, t, &info(100, 3)), 16_384);
    }

    #[test]
    fn idle_rule_uses_the_rtt_and_the_timeout() {
        // rtt 300 ms, rttvar 50 ms: RTO 500 ms; ssl_dyn_rec_timeout 5 s does not shorten it.
        let slow = TcpInfo {
            rtt_us: 300_000,
            rttvar_us: 50_000,
            ..info(100, 0)
        };
        let s = RecordSettings {
            ssl_dyn_rec_timeout: Duration::from_secs(5),
            ..RecordSettings::default()
        };
        let mut p = Adaptive::new(&s);
        let mut t = Instant::now();
        step(&mut p, t, &slow);
        t += Duration::from_millis(450);
        assert_eq!(step(&mut p, t, &slow), 16_384);
        t += Duration::from_millis(501);
        assert_eq!(step(&mut p, t, &slow), SEG);
        // A shorter ssl_dyn_rec_timeout (100 ms) counts as idle sooner.
        let s = RecordSettings {
            ssl_dyn_rec_timeout: Duration::from_millis(100),
            ..RecordSettings::default()
        };
        let mut p = Adaptive::new(&s);
        step(&mut p, t, &slow);
        t += Duration::from_millis(150);
        assert_eq!(step(&mut p, t, &slow), SEG);
    }

    #[test]
    fn stale_reading_still_detects_idle() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let mut t = Instant::now();
        step(&mut p, t, &info(100, 0));
        t += Duration::from_millis(1);
        step(&mut p, t, &info(100, 80));
        assert!(!p.wants_tcp_info());
        // The cached reading has 80 in flight, but it is old: 2 s later we assume a restart.
        t += Duration::from_secs(2);
        assert_eq!(p.next_size(t, None), SEG);
        assert!(p.wants_tcp_info());
    }

    #[test]
    fn without_tcp_info_it_runs_cloudflares_ramp() {
        let mut p = Adaptive::new(&RecordSettings::default());
        let t = Instant::now();
        let bogus = TcpInfo::default(); // mss 0, cwnd 0: unusable
        let sizes: Vec<usize> = (0..90)
            .map(|i| {
                let tcp = (i % 2 == 0).then_some(&bogus);
                let s = p.next_size(t, tcp);
                p.on_record(t, s);
                s
            })
            .collect();
        let mut want = vec![1369; 41];
        want.extend(vec![4229; 40]);
        want.extend(vec![16_384; 9]);
        assert_eq!(sizes, want);
        assert!(p.wants_tcp_info(), "keeps asking, in case it appears");
    }

    #[test]
    fn loopback_mss_gives_full_records_at_once() {
        let mut p = Adaptive::new(&RecordSettings {
            ssl_buffer_size: 4096,
            ..RecordSettings::default()
        });
        let lo = TcpInfo {
            snd_mss: 65_483,
            ..info(10, 0)
        };
        assert_eq!(step(&mut p, Instant::now(), &lo), 4096);
    }

    #[test]
    fn overhead_follows_the_protocol_and_extremes_do_not_overflow() {
        let mut p = Adaptive::new(&RecordSettings::default());
        p.set_record_overhead(crate::record::TLS13_RECORD_OVERHEAD);
        let t = Instant::now();
        assert_eq!(step(&mut p, t, &info(10, 0)), 1448 - 22);
        let huge = TcpInfo {
            snd_mss: u32::MAX,
            snd_cwnd: u32::MAX,
            rtt_us: u32::MAX,
            rttvar_us: u32::MAX,
            ..TcpInfo::default()
        };
        assert_eq!(step(&mut p, t, &huge), 16_384);
        let tiny = TcpInfo {
            snd_mss: 10,
            ..info(1, 0)
        };
        assert_eq!(p.next_size(t, Some(&tiny)), 1);
    }
}
