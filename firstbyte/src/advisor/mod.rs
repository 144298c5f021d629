//! The tuning advisor (`tuning_advisor`, `tuning_advisor_status`): a passive observer of every
//! response that builds histograms of header sizes, body sizes and times, and turns them into
//! recommendations for nginx's buffer directives (the JSON of GetPageSpeed's ngx_http_tuning,
//! same names) plus what only firstbyte sees: the TCP connection under each response
//! (`TCP_INFO` at the first and the last byte) and how each TLS record policy fared.
//!
//! Layout: [`hist`] (fixed-memory atomic histograms), [`rules`] (histograms → the report, pure),
//! [`policy`] (the `record_policy` section and the switch decision of `tuning_advisor apply`,
//! pure). This file holds the process-wide state ([`Advisor`]): recording is a handful of
//! relaxed atomic adds per response, nothing allocated.
//!
//! Place in the import order: below `conf` (which parses [`AdvisorMode`]) and above `record`
//! (whose [`DynRecMode`] names the policies); no I/O, no clock of its own.

pub mod hist;
pub mod policy;
pub mod rules;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hist::Histogram;

use crate::record::DynRecMode;

/// `tuning_advisor off | on | apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdvisorMode {
    /// Nothing observed (the default).
    #[default]
    Off,
    /// Observe; recommend on `tuning_advisor_status`.
    On,
    /// Observe, and switch the server's record policy when the evidence is clear.
    Apply,
}

/// Responses per second whose `TCP_INFO` is read (at the first and the last byte); the
/// others count in the size and keep-alive histograms only. A sample of 1,000 a second is
/// plenty for the `record_policy` figures and costs ~0.1% of a CPU.
pub const LOOKS_PER_SECOND: u64 = 1000;

/// Response-size classes of the `record_policy` section.
pub const SIZE_CLASSES: [&str; 3] = ["small", "medium", "large"];

/// The size class of a response body: ≤ 16 KiB (one record), ≤ 256 KiB, larger.
pub fn size_class(bytes: u64) -> usize {
    match bytes {
        0..=16_384 => 0,
        16_385..=262_144 => 1,
        _ => 2,
    }
}

/// The record policies, in the order of [`DynRecMode`]'s values (`static`, `dynamic`, `adaptive`).
pub const POLICIES: [&str; 3] = ["static", "dynamic", "adaptive"];

/// Index of a record policy's name (`RecordPolicy::name`); `None` for QUIC or plain HTTP.
pub fn policy_index(name: &str) -> Option<usize> {
    POLICIES.iter().position(|p| *p == name)
}

fn mode_of(i: usize) -> DynRecMode {
    match i {
        1 => DynRecMode::On,
        2 => DynRecMode::Adaptive,
        _ => DynRecMode::Off,
    }
}

/// `TCP_INFO` figures of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpSample {
    /// Smoothed RTT at the first byte, µs.
    pub rtt_us: u32,
    /// Congestion window at the first byte, segments.
    pub cwnd: u32,
    /// Segments retransmitted between the first and the last byte.
    pub retrans: u32,
}

/// What one response leaves for the advisor (plain numbers, gathered by the HTTP layer).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Response body bytes sent.
    pub body_bytes: u64,
    /// Request body bytes (`Content-Length`; 0 when none).
    pub request_body_bytes: u64,
    /// The request came over TLS on TCP (its records are `ssl_buffer_size`'s business).
    pub tls: bool,
    /// The connection's record policy ([`POLICIES`] index), on TLS over TCP.
    pub policy: Option<usize>,
    /// Time to first byte (response head ready), µs.
    pub ttfb_us: u64,
    /// Time to last byte (body done), µs.
    pub ttlb_us: u64,
    /// Not the connection's first request.
    pub client_reused: bool,
    /// `TCP_INFO`, on TCP.
    pub tcp: Option<TcpSample>,
    /// Proxied: what the upstream that answered did.
    pub upstream: Option<UpstreamSample>,
}

/// The upstream part of a [`Sample`].
#[derive(Debug, Clone, Copy, Default)]
pub struct UpstreamSample {
    /// Response header bytes (status line and fields, as on the wire).
    pub header_bytes: u64,
    /// Time to the upstream's response header, µs.
    pub header_us: u64,
    /// The request went on a pooled (kept-alive) connection.
    pub reused: bool,
}

/// Histograms of one record policy.
#[derive(Debug, Default)]
pub struct PolicyStats {
    /// Smoothed RTT at first byte, µs.
    pub rtt_us: Histogram,
    /// Congestion window at first byte, segments.
    pub cwnd: Histogram,
    /// Responses with TCP figures.
    pub responses: AtomicU64,
    /// Responses during which a segment was retransmitted.
    pub lossy: AtomicU64,
    /// Segments retransmitted during responses.
    pub retrans: AtomicU64,
    /// Time to first byte, µs, per size class.
    pub ttfb_us: [Histogram; 3],
    /// Time to last byte, µs, per size class.
    pub ttlb_us: [Histogram; 3],
}

/// The advisor's process-wide state: created once, kept across reloads.
#[derive(Debug)]
pub struct Advisor {
    started: Instant,
    since: Mutex<Instant>,
    /// Responses observed.
    pub samples: AtomicU64,
    /// Upstream response header sizes, bytes.
    pub upstream_header: Histogram,
    /// Upstream response body sizes, bytes.
    pub upstream_body: Histogram,
    /// Time to the upstream's header, µs.
    pub upstream_time: Histogram,
    /// Request body sizes (requests with a body), bytes.
    pub request_body: Histogram,
    /// Response body sizes on TLS connections, bytes.
    pub tls_body: Histogram,
    /// Requests on a connection that had carried one before.
    pub client_reused: AtomicU64,
    /// Proxied requests.
    pub upstream_requests: AtomicU64,
    /// ... on a pooled upstream connection.
    pub upstream_reused: AtomicU64,
    /// Per record policy ([`POLICIES`]).
    pub policies: [PolicyStats; 3],
    /// `tuning_advisor apply`: the policy chosen (0: none, the configured one stands; else
    /// [`POLICIES`] index + 1).
    applied: AtomicU8,
    /// The server's configured policy ([`POLICIES`] index), as its responses showed while no
    /// switch was in force.
    configured: AtomicU8,
    /// The evidence window of `apply` (since the last switch): responses, lossy responses.
    window: [AtomicU64; 2],
    /// The second (since `started`) of the `TCP_INFO` budget, and the reads in it.
    looks: [AtomicU64; 2],
}

impl Default for Advisor {
    fn default() -> Self {
        Self::new(Instant::now())
    }
}

impl Advisor {
    /// Empty histograms, started at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            started: now,
            since: Mutex::new(now),
            samples: AtomicU64::new(0),
            upstream_header: Histogram::default(),
            upstream_body: Histogram::default(),
            upstream_time: Histogram::default(),
            request_body: Histogram::default(),
            tls_body: Histogram::default(),
            client_reused: AtomicU64::new(0),
            upstream_requests: AtomicU64::new(0),
            upstream_reused: AtomicU64::new(0),
            policies: Default::default(),
            applied: AtomicU8::new(0),
            configured: AtomicU8::new(policy::ADAPTIVE as u8),
            window: Default::default(),
            looks: Default::default(),
        }
    }

    /// Counts one response. With `apply`, returns the switch it decided, if any, for the
    /// caller to log (the switch is in force when this returns).
    pub fn observe(&self, s: &Sample, apply: bool) -> Option<policy::Switch> {
        self.samples.fetch_add(1, Ordering::Relaxed);
        if s.client_reused {
            self.client_reused.fetch_add(1, Ordering::Relaxed);
        }
        if s.request_body_bytes > 0 {
            self.request_body.record(s.request_body_bytes);
        }
        if let Some(u) = &s.upstream {
            self.upstream_requests.fetch_add(1, Ordering::Relaxed);
            if u.reused {
                self.upstream_reused.fetch_add(1, Ordering::Relaxed);
            }
            self.upstream_header.record(u.header_bytes);
            self.upstream_time.record(u.header_us);
            self.upstream_body.record(s.body_bytes);
        }
        if s.tls {
            self.tls_body.record(s.body_bytes);
        }
        let (Some(p), Some(tcp)) = (s.policy, s.tcp) else {
            return None;
        };
        let ps = self.policies.get(p)?;
        let class = size_class(s.body_bytes);
        ps.responses.fetch_add(1, Ordering::Relaxed);
        ps.rtt_us.record(u64::from(tcp.rtt_us));
        ps.cwnd.record(u64::from(tcp.cwnd));
        ps.retrans
            .fetch_add(u64::from(tcp.retrans), Ordering::Relaxed);
        if tcp.retrans > 0 {
            ps.lossy.fetch_add(1, Ordering::Relaxed);
        }
        ps.ttfb_us[class].record(s.ttfb_us);
        ps.ttlb_us[class].record(s.ttlb_us);
        if !apply {
            return None;
        }
        let n = self.window[0].fetch_add(1, Ordering::Relaxed) + 1;
        let lossy = if tcp.retrans > 0 {
            self.window[1].fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.window[1].load(Ordering::Relaxed)
        };
        // The decision is cheap, but there is no need to take it every response.
        if n % policy::CHECK_EVERY != 0 {
            return None;
        }
        let applied = self.applied_index();
        if applied.is_none() {
            // No switch in force: every connection runs the configured policy.
            self.configured.store(p as u8, Ordering::Relaxed);
        }
        let configured = usize::from(self.configured.load(Ordering::Relaxed));
        let ev = policy::Evidence {
            responses: n,
            lossy,
            body_p50: self.tls_body.summary().p50,
        };
        let sw = policy::decide(configured, applied, &ev)?;
        // Back to the configured policy: no override.
        let to = if sw.to == configured {
            0
        } else {
            sw.to as u8 + 1
        };
        let from = self.applied.load(Ordering::Relaxed);
        if self
            .applied
            .compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        self.window[0].store(0, Ordering::Relaxed);
        self.window[1].store(0, Ordering::Relaxed);
        Some(sw)
    }

    fn applied_index(&self) -> Option<usize> {
        match self.applied.load(Ordering::Relaxed) {
            0 => None,
            i => Some(usize::from(i) - 1),
        }
    }

    /// The record policy `tuning_advisor apply` put in force, if it switched one.
    pub fn applied(&self) -> Option<DynRecMode> {
        self.applied_index().map(mode_of)
    }

    /// Drops the policy `apply` chose and its evidence window (a reload: the configured
    /// policies stand again).
    pub fn forget_switch(&self) {
        self.applied.store(0, Ordering::Relaxed);
        self.window[0].store(0, Ordering::Relaxed);
        self.window[1].store(0, Ordering::Relaxed);
    }

    /// Forgets every observation (`GET /tuning-advisor?reset`); a policy `apply` chose stays.
    pub fn reset(&self, now: Instant) {
        if let Ok(mut s) = self.since.lock() {
            *s = now;
        }
        self.samples.store(0, Ordering::Relaxed);
        for h in [
            &self.upstream_header,
            &self.upstream_body,
            &self.upstream_time,
            &self.request_body,
            &self.tls_body,
        ] {
            h.reset();
        }
        for c in [
            &self.client_reused,
            &self.upstream_requests,
            &self.upstream_reused,
            &self.window[0],
            &self.window[1],
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for p in &self.policies {
            p.rtt_us.reset();
            p.cwnd.reset();
            for c in [&p.responses, &p.lossy, &p.retrans] {
                c.store(0, Ordering::Relaxed);
            }
            for h in p.ttfb_us.iter().chain(&p.ttlb_us) {
                h.reset();
            }
        }
    }

    /// Whether a response whose head is ready `now` reads `TCP_INFO` (two system calls): yes
    /// for the first [`LOOKS_PER_SECOND`] responses of each second since the advisor started.
    /// Checked with a load first, so past the budget the shared counter is only read.
    pub fn claim_look(&self, now: Instant) -> bool {
        let sec = now.saturating_duration_since(self.started).as_secs();
        let cur = self.looks[0].load(Ordering::Relaxed);
        if cur != sec
            && self.looks[0]
                .compare_exchange(cur, sec, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.looks[1].store(0, Ordering::Relaxed);
        }
        self.looks[1].load(Ordering::Relaxed) < LOOKS_PER_SECOND
            && self.looks[1].fetch_add(1, Ordering::Relaxed) < LOOKS_PER_SECOND
    }

    /// Time since the process started, and since the last reset.
    pub fn ages(&self, now: Instant) -> (Duration, Duration) {
        let since = self.since.lock().map_or(self.started, |s| *s);
        (
            now.saturating_duration_since(self.started),
            now.saturating_duration_since(since),
        )
    }

    /// The report, as JSON (`tuning_advisor_status`).
    pub fn report(&self, now: Instant) -> serde_json::Value {
        rules::report(&rules::Observed::of(self, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy_sample(retrans: u32) -> Sample {
        Sample {
            body_bytes: 50_000,
            tls: true,
            policy: Some(0),
            tcp: Some(TcpSample {
                rtt_us: 100_000,
                cwnd: 10,
                retrans,
            }),
            ..Sample::default()
        }
    }

    #[test]
    fn tcp_info_budget_per_second() {
        let t0 = Instant::now();
        let a = Advisor::new(t0);
        let yes = (0..1500).filter(|_| a.claim_look(t0)).count();
        assert_eq!(yes, 1000);
        assert!(!a.claim_look(t0 + Duration::from_millis(999)));
        assert!(a.claim_look(t0 + Duration::from_millis(1000)));
    }

    #[test]
    fn apply_switches_once_on_clear_loss_and_reset_keeps_it() {
        let a = Advisor::new(Instant::now());
        let mut switches = Vec::new();
        for i in 0..1000u32 {
            // One response in five sees a retransmission: 20%.
            if let Some(s) = a.observe(&lossy_sample(u32::from(i % 5 == 0)), true) {
                switches.push((i, s));
            }
        }
        assert_eq!(switches.len(), 1, "{switches:?}");
        assert_eq!(switches[0].1.to, 2);
        assert_eq!(a.applied(), Some(DynRecMode::Adaptive));
        a.reset(Instant::now());
        assert_eq!(a.samples.load(Ordering::Relaxed), 0);
        assert_eq!(a.applied(), Some(DynRecMode::Adaptive));
        a.forget_switch();
        assert_eq!(a.applied(), None);
        // `on` observes but never switches.
        let b = Advisor::new(Instant::now());
        for _ in 0..1000 {
            assert!(b.observe(&lossy_sample(3), false).is_none());
        }
        assert_eq!(b.applied(), None);
    }
}
