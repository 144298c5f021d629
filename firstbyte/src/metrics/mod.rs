//! Process-wide counters for the `metrics` location (Prometheus' text format, through the
//! `prometheus-client` crate's registry and encoders).
//!
//! They live in statics, so they outlive configuration generations as `stub_status`'s do.
//! What each response counts (one call, [`ResponseDone::end`]) goes to its thread's own shard
//! (`local`: no locked instruction, no cache line shared between threads), added up at a
//! scrape. Per-connection counts are a relaxed atomic add on a handle made at start (the label
//! values — TLS version, group, handshake kind — are resolved once); only rare events (a
//! failed handshake, a failed upstream try, a certificate load) go through a family's map.

mod hist;
mod local;

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

pub use hist::Hist;

type L1 = [(&'static str, &'static str); 1];
type L2 = [(&'static str, &'static str); 2];

/// `protocol` label values, by [`proto`] index.
const PROTOCOLS: [&str; 3] = ["h1", "h2", "h3"];
/// `status` label values: the status class.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
/// TLS versions firstbyte speaks.
const VERSIONS: [&str; 2] = ["TLSv1.2", "TLSv1.3"];
/// Key-exchange groups (nginx's/OpenSSL's names, as `$ssl_curve`) with handles made at start.
const GROUPS: [&str; 6] = [
    "x25519",
    "prime256v1",
    "secp384r1",
    "secp521r1",
    "X25519MLKEM768",
    "SecP256r1MLKEM768",
];

/// Which cache a lookup went to.
#[derive(Debug, Clone, Copy)]
pub enum Cache {
    /// The objects a configuration load parsed or took from the previous load
    /// (`ssl_object_cache_inheritable`).
    Object = 0,
    /// `ssl_certificate_cache`: certificates named with variables, at handshake time.
    Certificate = 1,
}

/// A family whose usual label values got their handles at start.
#[derive(Debug)]
struct Named {
    family: Family<L1, Counter>,
    key: &'static str,
    made: Vec<(&'static str, Counter)>,
}

impl Named {
    fn new(key: &'static str, values: &[&'static str]) -> Self {
        let family = Family::<L1, Counter>::default();
        let made = values
            .iter()
            .map(|&v| (v, family.get_or_create(&[(key, v)]).clone()))
            .collect();
        Self { family, key, made }
    }

    #[inline]
    fn inc(&self, value: &'static str) {
        match self.made.iter().find(|(v, _)| *v == value) {
            Some((_, c)) => {
                c.inc();
            }
            None => {
                self.family.get_or_create(&[(self.key, value)]).inc();
            }
        }
    }
}

/// Every family, and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    active: Gauge,
    idle: Gauge,
    handshakes: [Counter; 2],
    quic_handshakes: Counter,
    handshake_failures: Family<L2, Counter>,
    versions: Named,
    groups: Named,
    upstream_header: Hist,
    upstream_failures: Family<L1, Counter>,
    reloads: [Counter; 2],
    cache: [[Counter; 2]; 2],
    expiry: Family<[(&'static str, String); 1], Gauge>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn get() -> &'static Metrics {
    &METRICS
}

/// The index of a request's protocol in the per-protocol handles.
#[inline]
pub fn proto(v: http::Version) -> usize {
    match v {
        http::Version::HTTP_2 => 1,
        http::Version::HTTP_3 => 2,
        _ => 0,
    }
}

impl Metrics {
    fn new() -> Self {
        let mut r = Registry::default();
        // Requests, their durations and TTFB, body bytes: per-thread shards (local.rs).
        r.register_collector(Box::new(local::PerResponse));
        let conns = Family::<L1, Gauge>::default();
        let active = conns.get_or_create(&[("state", "active")]).clone();
        let idle = conns.get_or_create(&[("state", "idle")]).clone();
        r.register(
            "firstbyte_connections",
            "Open client connections (active: all of them, as stub_status; idle: those with no request in progress, stub_status' Waiting)",
            conns,
        );
        let hs = Family::<L1, Counter>::default();
        let handshakes = ["full", "resumed"].map(|k| hs.get_or_create(&[("kind", k)]).clone());
        r.register(
            "firstbyte_tls_handshakes",
            "TLS handshakes completed over TCP: full, or resumed (a session ticket or ID)",
            hs,
        );
        let quic_handshakes = Counter::default();
        r.register(
            "firstbyte_quic_handshakes",
            "QUIC handshakes completed (QUIC does not tell whether they resumed)",
            quic_handshakes.clone(),
        );
        let handshake_failures = Family::<L2, Counter>::default();
        r.register(
            "firstbyte_tls_handshake_failures",
            "TLS handshakes that failed, by transport (tcp, quic) and reason",
            handshake_failures.clone(),
        );
        let versions = Named::new("version", &VERSIONS);
        r.register(
            "firstbyte_tls_versions",
            "TLS handshakes completed, by protocol version",
            versions.family.clone(),
        );
        let groups = Named::new("group", &GROUPS);
        r.register(
            "firstbyte_tls_groups",
            "TLS handshakes completed over TCP, by key-exchange group",
            groups.family.clone(),
        );
        let upstream_header = Hist::default();
        r.register_with_unit(
            "firstbyte_upstream_header",
            "From the start of a try until the upstream's response header ($upstream_header_time)",
            Unit::Seconds,
            upstream_header.clone(),
        );
        let upstream_failures = Family::<L1, Counter>::default();
        r.register(
            "firstbyte_upstream_failures",
            "Upstream tries that failed, by reason",
            upstream_failures.clone(),
        );
        let rl = Family::<L1, Counter>::default();
        let reloads = ["ok", "failed"].map(|o| rl.get_or_create(&[("result", o)]).clone());
        r.register(
            "firstbyte_reloads",
            "Configuration reloads (SIGHUP), by result",
            rl,
        );
        let c = Family::<L2, Counter>::default();
        let cache = ["object", "certificate"].map(|k| {
            ["hit", "miss"].map(|h| c.get_or_create(&[("cache", k), ("result", h)]).clone())
        });
        r.register(
            "firstbyte_ssl_cache_lookups",
            "TLS object lookups: object (a configuration load's certificates, keys and CA files, reused or parsed) and certificate (ssl_certificate_cache at handshake time)",
            c,
        );
        let expiry = Family::<[(&'static str, String); 1], Gauge>::default();
        r.register_with_unit(
            "firstbyte_ssl_certificate_not_after_timestamp",
            "When each loaded certificate expires (its notAfter, seconds since the epoch)",
            Unit::Seconds,
            expiry.clone(),
        );
        Self {
            registry: r,
            active,
            idle,
            handshakes,
            quic_handshakes,
            handshake_failures,
            versions,
            groups,
            upstream_header,
            upstream_failures,
            reloads,
            cache,
            expiry,
        }
    }

    /// The exposition: OpenMetrics when `openmetrics`, else Prometheus' text format 0.0.4.
    /// `active` and `idle` are the connection counts now.
    pub fn encode(&self, openmetrics: bool, active: u64, idle: u64) -> String {
        self.active.set(i64::try_from(active).unwrap_or(i64::MAX));
        self.idle.set(i64::try_from(idle).unwrap_or(i64::MAX));
        let mut out = String::with_capacity(16 << 10);
        let r = if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        };
        // Writing to a String cannot fail; an encoder error would be a bug in a name.
        if r.is_err() {
            crate::fblog!(Alert, "metrics: encoding failed");
        }
        out
    }
}

/// What a response's end counts, made when its head is ready.
#[derive(Debug, Clone, Copy)]
pub struct ResponseDone {
    proto: u8,
    class: u8,
    start: Instant,
    ttfb: Duration,
}

impl ResponseDone {
    /// A response with `status` to a request over `version` that started at `start`; its
    /// head was ready at `now` (read once by the caller for its other uses too).
    #[inline]
    pub fn new_at(version: http::Version, status: u16, start: Instant, now: Instant) -> Self {
        Self {
            proto: proto(version) as u8,
            class: (status / 100).clamp(1, 5) as u8 - 1,
            start,
            ttfb: now.saturating_duration_since(start),
        }
    }

    /// From the request's start until the response head was ready.
    pub fn ttfb(&self) -> Duration {
        self.ttfb
    }

    /// The response is over (body sent, or the client went away) at `now`, after `sent` body
    /// bytes.
    #[inline]
    pub fn end_at(&self, sent: u64, now: Instant) {
        local::count(
            usize::from(self.proto),
            usize::from(self.class),
            self.ttfb,
            now.saturating_duration_since(self.start),
            sent,
        );
    }
}

/// A TLS handshake over TCP completed.
pub fn tls_handshake(resumed: bool, version: &'static str, group: &'static str) {
    let m = get();
    m.handshakes[usize::from(resumed)].inc();
    m.versions.inc(version);
    if !group.is_empty() {
        m.groups.inc(group);
    }
}

/// A QUIC handshake completed (always TLS 1.3).
pub fn quic_handshake() {
    let m = get();
    m.quic_handshakes.inc();
    m.versions.inc("TLSv1.3");
}

/// A handshake over `transport` (`tcp`, `quic`) failed for `reason`.
pub fn tls_failure(transport: &'static str, reason: &'static str) {
    get()
        .handshake_failures
        .get_or_create(&[("transport", transport), ("reason", reason)])
        .inc();
}

/// The reason label of a failed TLS handshake's error.
pub fn rustls_reason(e: &rustls::Error) -> &'static str {
    use rustls::Error as E;
    match e {
        E::PeerIncompatible(_) => "peer_incompatible",
        E::NoApplicationProtocol => "no_application_protocol",
        E::AlertReceived(_) => "alert_received",
        E::InvalidCertificate(_) | E::NoCertificatesPresented => "bad_certificate",
        E::DecryptError => "decrypt_error",
        E::PeerMisbehaved(_) => "peer_misbehaved",
        E::InvalidMessage(_)
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. }
        | E::PeerSentOversizedRecord => "invalid_message",
        _ => "other",
    }
}

/// The reason label of a handshake's I/O error (a rustls error inside, or the connection's).
pub fn io_reason(e: &std::io::Error) -> &'static str {
    if let Some(r) = e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()) {
        return rustls_reason(r);
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "client_closed",
        std::io::ErrorKind::InvalidData => "invalid_message",
        _ => "io_error",
    }
}

/// An upstream try got its response header after `d`.
pub fn upstream_header(d: Duration) {
    get().upstream_header.observe(d);
}

/// An upstream try failed for `reason`.
pub fn upstream_failure(reason: &'static str) {
    get()
        .upstream_failures
        .get_or_create(&[("reason", reason)])
        .inc();
}

/// A reload ended.
pub fn reload(ok: bool) {
    get().reloads[usize::from(!ok)].inc();
}

/// `hits` and `misses` in `cache`.
pub fn cache(cache: Cache, hits: u64, misses: u64) {
    let c = &get().cache[cache as usize];
    c[0].inc_by(hits);
    c[1].inc_by(misses);
}

/// The certificates the running configuration loaded: (name, notAfter in seconds since the
/// epoch). Replaces the previous configuration's.
pub fn certificates(list: &[(String, i64)]) {
    let f = &get().expiry;
    f.clear();
    for (name, not_after) in list {
        f.get_or_create(&[("certificate", name.clone())])
            .set(*not_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_count_by_protocol_and_class() {
        let m = get();
        // This thread's own counts: other tests count responses in parallel.
        let before = local::this_thread();
        let d = ResponseDone::new_at(http::Version::HTTP_11, 302, Instant::now(), Instant::now());
        d.end_at(10, Instant::now());
        d.end_at(5, Instant::now());
        let after = local::this_thread();
        assert_eq!(after.requests[0][2], before.requests[0][2] + 2);
        assert_eq!(after.bytes[0], before.bytes[0] + 15);
        let text = m.encode(false, 3, 1);
        assert!(
            text.contains("firstbyte_http_requests_total{protocol=\"h1\",status=\"3xx\"}"),
            "{text}"
        );
        assert!(
            text.contains("firstbyte_connections{state=\"idle\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE firstbyte_http_ttfb_seconds histogram"),
            "{text}"
        );
        let om = m.encode(true, 3, 1);
        assert!(om.ends_with("# EOF\n"), "{om}");
    }

    #[test]
    fn statuses_out_of_range_fall_in_the_nearest_class() {
        assert_eq!(
            ResponseDone::new_at(http::Version::HTTP_11, 999, Instant::now(), Instant::now()).class,
            4
        );
        assert_eq!(
            ResponseDone::new_at(http::Version::HTTP_11, 0, Instant::now(), Instant::now()).class,
            0
        );
        assert_eq!(
            ResponseDone::new_at(http::Version::HTTP_3, 200, Instant::now(), Instant::now()).proto,
            2
        );
    }

    /// `metrics` answers in its own location only (nginx's rule for content handlers such as
    /// `stub_status`), keeps its content handler in an `if` inside it, and is refused at
    /// http level with file and line.
    #[test]
    fn the_directive_is_per_location() {
        use crate::conf::testutil::{load_as, ok};
        let c = ok("events {}\nhttp {\n  server {\n    listen 127.0.0.1:8080;\n    \
             location = /metrics { metrics; if ($arg_x) { } }\n    location /m2 { metrics off; }\n    \
             location / { }\n  }\n}\n");
        let s = &c.http.as_ref().expect("http").servers[0];
        let on = |uri: &str| s.locations.find(uri).expect("location").conf.metrics;
        assert!(on("/metrics"));
        assert!(!on("/m2"));
        assert!(!on("/other"));
        assert!(!s.default_location.metrics);
        let e =
            load_as("events {}\nhttp {\n  metrics;\n}\n", true).expect_err("metrics at http level");
        assert_eq!(
            e.to_string(),
            "\"metrics\" directive is not allowed here in /t/x.conf:3"
        );
    }

    #[test]
    fn handshake_errors_have_reasons() {
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::PeerIncompatible(rustls::PeerIncompatible::NoCipherSuitesInCommon),
        );
        assert_eq!(io_reason(&e), "peer_incompatible");
        assert_eq!(
            io_reason(&std::io::ErrorKind::UnexpectedEof.into()),
            "client_closed"
        );
    }
}
