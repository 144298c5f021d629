//! From histograms to the report: one rule per setting, each giving `observed {avg, max,
//! p95_approx, p99_approx}`, a `recommendation` (`OK`, `REDUCE`, `INCREASE`), a
//! `suggested_value` and a `reason`; the `nginx_config.snippet` of the suggested values (only
//! directives stock nginx has: anything firstbyte-only goes in advisory text); the
//! `record_policy` section. Pure: [`Observed`] in, JSON out.
//!
//! The rules compare with nginx's defaults (the snippet is for an nginx or firstbyte `http`
//! block that does not set them yet):
//! - `proxy_buffer_size` (4k): the whole upstream response header must fit, or nginx answers
//!   502 "upstream sent too big header"; so the largest header seen decides, rounded up to a
//!   power of two, at least 4k.
//! - `proxy_buffers` (`8 4k`): room for the p95 upstream body in memory; 4k buffers up to
//!   128k, 16k buffers past it, at most 1m; and always more than nginx's check needs
//!   (`proxy_busy_buffers_size`, twice the larger buffer, below all buffers but one).
//! - `proxy_read_timeout` (60s): the smallest of 5s, 10s, 30s, 60s, 120s, 300s, 600s at least
//!   four times the p99 time to the upstream's header and 1.5 times the slowest seen.
//! - `client_body_buffer_size` (16k): the p95 request body rounded up to a power of two, at
//!   least 8k, at most 1m.
//! - `ssl_buffer_size` (16k), the seed's rule: p95 response body ≤ 4k → REDUCE to 4k; else 16k.
//!   Bimodal traffic (p95 within one record, at least 1% above 64 KiB) adds `dyn_rec_advisory`.
//! - keepalive: the share of requests that reused a connection, client and upstream.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::hist::Summary;
use super::policy::{self, PolicyView};
use super::{Advisor, POLICIES, SIZE_CLASSES};

/// Everything the report is made from, read from the [`Advisor`] at one moment.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Responses observed since the last reset.
    pub sample_size: u64,
    /// Since the process started.
    pub uptime: Duration,
    /// Since the last reset (or start).
    pub window: Duration,
    /// Upstream response header sizes, bytes.
    pub upstream_header: Summary,
    /// Upstream response body sizes, bytes.
    pub upstream_body: Summary,
    /// Time to the upstream's header, µs.
    pub upstream_time: Summary,
    /// Request body sizes, bytes.
    pub request_body: Summary,
    /// TLS response body sizes, bytes.
    pub tls_body: Summary,
    /// Requests on a reused client connection.
    pub client_reused: u64,
    /// Proxied requests.
    pub upstream_requests: u64,
    /// ... on a pooled connection.
    pub upstream_reused: u64,
    /// Per record policy.
    pub policies: [PolicyView; 3],
    /// The policy `apply` put in force.
    pub applied: Option<usize>,
}

impl Observed {
    /// Reads the advisor now.
    pub fn of(a: &Advisor, now: Instant) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        let (uptime, window) = a.ages(now);
        let policies = std::array::from_fn(|i| {
            let p = &a.policies[i];
            PolicyView {
                responses: p.responses.load(Relaxed),
                lossy: p.lossy.load(Relaxed),
                retrans: p.retrans.load(Relaxed),
                rtt: p.rtt_us.summary(),
                cwnd: p.cwnd.summary(),
                ttfb: std::array::from_fn(|c| p.ttfb_us[c].summary()),
                ttlb: std::array::from_fn(|c| p.ttlb_us[c].summary()),
            }
        });
        Self {
            sample_size: a.samples.load(Relaxed),
            uptime,
            window,
            upstream_header: a.upstream_header.summary(),
            upstream_body: a.upstream_body.summary(),
            upstream_time: a.upstream_time.summary(),
            request_body: a.request_body.summary(),
            tls_body: a.tls_body.summary(),
            client_reused: a.client_reused.load(Relaxed),
            upstream_requests: a.upstream_requests.load(Relaxed),
            upstream_reused: a.upstream_reused.load(Relaxed),
            policies,
            applied: a.applied_index(),
        }
    }
}

/// `OK`, `REDUCE` or `INCREASE`, by how `suggested` compares with `current`.
fn verdict(suggested: u64, current: u64) -> &'static str {
    match suggested.cmp(&current) {
        std::cmp::Ordering::Less => "REDUCE",
        std::cmp::Ordering::Equal => "OK",
        std::cmp::Ordering::Greater => "INCREASE",
    }
}

/// A size as the seed shows it: `1.8k`, `23.4k`, `1.2m`.
pub fn show_size(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.1}m", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1}k", b / 1024.0)
    }
}

/// A size as a directive argument: `4k`, `1m`, `512`.
pub fn size_arg(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{}m", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{}k", b >> 10)
    } else {
        b.to_string()
    }
}

/// A time in µs as the report shows it: `12ms`, `1.5s`.
pub fn show_time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.1}s", us / 1e6)
    } else {
        format!("{:.0}ms", us / 1e3)
    }
}

fn sizes(s: &Summary) -> Value {
    json!({
        "avg": show_size(s.avg),
        "max": show_size(s.max as f64),
        "p95_approx": show_size(s.p95 as f64),
        "p99_approx": show_size(s.p99 as f64),
    })
}

fn times(s: &Summary) -> Value {
    json!({
        "avg": show_time(s.avg),
        "max": show_time(s.max as f64),
        "p95_approx": show_time(s.p95 as f64),
        "p99_approx": show_time(s.p99 as f64),
    })
}

/// One setting's entry; `line` is its snippet line, when there is evidence for one.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// `observed`.
    pub observed: Value,
    /// `OK`, `REDUCE`, `INCREASE`.
    pub recommendation: &'static str,
    /// In the directive's syntax.
    pub suggested_value: String,
    /// Why, with the numbers.
    pub reason: String,
    /// `NAME VALUE;` for the snippet (None: no data, or not an http-block directive).
    pub line: Option<String>,
}

impl Setting {
    fn json(&self) -> Value {
        json!({
            "observed": self.observed,
            "recommendation": self.recommendation,
            "suggested_value": self.suggested_value,
            "reason": self.reason,
        })
    }

    fn no_data(default: &str, what: &str) -> Self {
        Self {
            observed: json!({}),
            recommendation: "OK",
            suggested_value: default.into(),
            reason: format!("no {what} observed yet; nginx's default stands"),
            line: None,
        }
    }
}

fn pow2_at_least(v: u64, floor: u64) -> u64 {
    v.max(floor).next_power_of_two()
}

/// `proxy_buffer_size` from upstream header sizes.
pub fn proxy_buffer_size(h: &Summary) -> Setting {
    if h.count == 0 {
        return Setting::no_data("4k", "upstream responses");
    }
    let need = pow2_at_least(h.max, 4096).min(1 << 20);
    let v = size_arg(need);
    let reason = if need == 4096 {
        format!(
            "every upstream response header seen fits in 4k (largest {}, p95 {})",
            show_size(h.max as f64),
            show_size(h.p95 as f64)
        )
    } else {
        format!(
            "the largest upstream response header seen is {} (p95 {}): a header larger than proxy_buffer_size fails with 502 \"upstream sent too big header\"",
            show_size(h.max as f64),
            show_size(h.p95 as f64)
        )
    };
    Setting {
        observed: sizes(h),
        recommendation: verdict(need, 4096),
        line: Some(format!("proxy_buffer_size {v};")),
        suggested_value: v,
        reason,
    }
}

/// `proxy_buffers` from upstream body sizes; `buffer_size` is the suggested
/// `proxy_buffer_size` (nginx's check on `proxy_busy_buffers_size` involves it).
pub fn proxy_buffers(b: &Summary, buffer_size: u64) -> Setting {
    if b.count == 0 {
        return Setting::no_data("8 4k", "upstream responses");
    }
    let total = pow2_at_least(b.p95, 32 << 10).min(1 << 20);
    let size: u64 = if total <= 128 << 10 { 4096 } else { 16 << 10 };
    let mut n = total / size;
    // nginx: proxy_busy_buffers_size (default twice the larger buffer) must be less than the
    // size of all proxy_buffers minus one buffer.
    let busy = 2 * buffer_size.max(size);
    let least = busy / size + 2;
    let raised = n < least;
    n = n.max(least);
    let v = format!("{n} {}", size_arg(size));
    let current = 8 * 4096;
    let suggested_total = n * size;
    let mut reason = if b.p95 <= 32 << 10 {
        format!(
            "95% of upstream bodies fit in the default 32k (p95 {})",
            show_size(b.p95 as f64)
        )
    } else if b.p95 > 1 << 20 {
        format!(
            "p95 upstream body is {}: past 1m in memory, the rest goes to a temp file (or proxy_buffering off)",
            show_size(b.p95 as f64)
        )
    } else {
        format!(
            "p95 upstream body is {}: {v} holds it in memory instead of a temp file",
            show_size(b.p95 as f64)
        )
    };
    if raised {
        reason.push_str(&format!(
            "; {n} buffers so that proxy_busy_buffers_size ({}) stays below all buffers but one",
            size_arg(busy)
        ));
    }
    Setting {
        observed: sizes(b),
        recommendation: verdict(suggested_total, current),
        line: Some(format!("proxy_buffers {v};")),
        suggested_value: v,
        reason,
    }
}

/// `proxy_read_timeout` from times to the upstream's header (µs).
pub fn proxy_read_timeout(t: &Summary) -> Setting {
    if t.count == 0 {
        return Setting::no_data("60s", "upstream responses");
    }
    let need = (t.p99.saturating_mul(4)).max(t.max.saturating_mul(3) / 2);
    let ladder = [5u64, 10, 30, 60, 120, 300, 600];
    let secs = ladder
        .iter()
        .copied()
        .find(|s| s * 1_000_000 >= need)
        .unwrap_or(600);
    let v = format!("{secs}s");
    Setting {
        observed: times(t),
        recommendation: verdict(secs, 60),
        reason: format!(
            "upstream headers arrived within {} at p99 (slowest {}): {v} is at least 4x the p99 and 1.5x the slowest",
            show_time(t.p99 as f64),
            show_time(t.max as f64)
        ),
        line: Some(format!("proxy_read_timeout {v};")),
        suggested_value: v,
    }
}

/// `client_body_buffer_size` from request body sizes.
pub fn client_body_buffer_size(b: &Summary) -> Setting {
    if b.count == 0 {
        return Setting::no_data("16k", "request bodies");
    }
    let need = pow2_at_least(b.p95, 8 << 10).min(1 << 20);
    let v = size_arg(need);
    Setting {
        observed: sizes(b),
        recommendation: verdict(need, 16 << 10),
        reason: format!(
            "95% of request bodies fit in {v} (p95 {}, largest {}); larger ones go to a temp file",
            show_size(b.p95 as f64),
            show_size(b.max as f64)
        ),
        line: Some(format!("client_body_buffer_size {v};")),
        suggested_value: v,
    }
}

/// What a full-size record costs where it matters, measured (issue 17's run).
const IDLE: &str = "in nginx every record is ssl_buffer_size, and a 16k record after an idle gap can wait a round trip for the restarted window (100 KB after 1.5 s idle at 100 ms RTT: 201 ms to first byte against 101 ms, bench/results/2026-11-26-records); firstbyte's default (ssl_dyn_rec_enable adaptive) starts such responses with one-segment records, and ssl_buffer_size only caps its records";

/// `ssl_buffer_size` from TLS response body sizes (the seed's rule), and the bimodal advisory.
pub fn ssl_buffer_size(b: &Summary) -> (Setting, Option<String>) {
    if b.count == 0 {
        return (Setting::no_data("16k", "TLS responses"), None);
    }
    let p95 = show_size(b.p95 as f64);
    let above_record = b.above_16k as f64 / b.count as f64;
    let (rec, v, reason) = if b.p95 <= 4096 {
        (
            "REDUCE",
            "4k",
            format!("p95 response body fits in 4k ({p95}); static 4k matches Cloudflare's production setting and reduces TLS head-of-line blocking on lossy links without a patched binary"),
        )
    } else if above_record > 0.5 {
        (
            "OK",
            "16k",
            format!("{:.0}% of response bodies are larger than one 16k record (p95 {p95}): full records; {IDLE}", above_record * 100.0),
        )
    } else {
        (
            "OK",
            "16k",
            format!("p95 response body is {p95}, above 4k: 4k records would split most responses into several records; {:.0}% are larger than one 16k record; {IDLE}", above_record * 100.0),
        )
    };
    let tail = b.above_64k as f64 / b.count as f64;
    let advisory = (b.p95 <= 16 << 10 && b.above_64k > 0 && tail >= 0.01).then(|| {
        format!(
            "bimodal: p95 response body is {p95} but {:.1}% of responses are larger than 64k; nginx-mod (Cloudflare's patch): ssl_dyn_rec_enable on; ssl_dyn_rec_size_lo 1369; ssl_dyn_rec_size_hi 16384; ssl_dyn_rec_threshold 10; ssl_dyn_rec_timeout 5s; firstbyte reads the same directives, and its default, ssl_dyn_rec_enable adaptive, sizes records from the congestion window. Stock nginx has none of them: they are not in the snippet",
            tail * 100.0
        )
    });
    (
        Setting {
            observed: sizes(b),
            recommendation: rec,
            suggested_value: v.into(),
            reason,
            line: Some(format!("ssl_buffer_size {v};")),
        },
        advisory,
    )
}

fn reuse(requests: u64, reused: u64) -> Value {
    let ratio = if requests == 0 {
        0.0
    } else {
        reused as f64 / requests as f64
    };
    json!({
        "requests": requests,
        "reused": reused,
        "reuse_ratio": (ratio * 1000.0).round() / 1000.0,
    })
}

/// Keepalive reuse, client and upstream.
pub fn keepalive(o: &Observed) -> Value {
    let mut m = Map::new();
    if o.sample_size > 0 {
        let ratio = o.client_reused as f64 / o.sample_size as f64;
        let reason = if ratio >= 0.5 {
            format!("{:.0}% of requests came on a connection that had carried one before: keep-alive works", ratio * 100.0)
        } else {
            format!("only {:.0}% of requests reused a connection: the clients open one per request (a longer keepalive_timeout does not change that)", ratio * 100.0)
        };
        m.insert(
            "client".into(),
            json!({
                "observed": reuse(o.sample_size, o.client_reused),
                "recommendation": "OK",
                "suggested_value": "75s",
                "reason": reason,
            }),
        );
    }
    if o.upstream_requests > 0 {
        let ratio = o.upstream_reused as f64 / o.upstream_requests as f64;
        let (rec, reason) = if ratio >= 0.5 {
            (
                "OK",
                format!(
                    "{:.0}% of upstream requests went on a kept-alive connection",
                    ratio * 100.0
                ),
            )
        } else {
            (
                "INCREASE",
                format!("only {:.0}% of {} upstream requests reused a connection: add keepalive 32; to the upstream block, with proxy_http_version 1.1; and proxy_set_header Connection \"\"; where it is proxied", ratio * 100.0, o.upstream_requests),
            )
        };
        m.insert(
            "upstream".into(),
            json!({
                "observed": reuse(o.upstream_requests, o.upstream_reused),
                "recommendation": rec,
                "suggested_value": "32",
                "reason": reason,
            }),
        );
    }
    Value::Object(m)
}

fn ms(us: u64) -> f64 {
    (us as f64 / 100.0).round() / 10.0
}

/// The `record_policy` section.
pub fn record_policy(o: &Observed) -> Value {
    let mut per = Map::new();
    for (i, v) in o.policies.iter().enumerate() {
        if v.responses == 0 {
            continue;
        }
        let mut classes = Map::new();
        for (c, name) in SIZE_CLASSES.iter().enumerate() {
            let (f, l) = (&v.ttfb[c], &v.ttlb[c]);
            if l.count == 0 {
                continue;
            }
            classes.insert(
                (*name).into(),
                json!({
                    "responses": l.count,
                    "ttfb_ms": {"p50": ms(f.p50), "p95": ms(f.p95)},
                    "ttlb_ms": {"p50": ms(l.p50), "p95": ms(l.p95)},
                }),
            );
        }
        per.insert(
            POLICIES[i].into(),
            json!({
                "responses": v.responses,
                "rtt_ms": {"p50": ms(v.rtt.p50), "p95": ms(v.rtt.p95), "max": ms(v.rtt.max)},
                "cwnd_at_first_byte": {"avg": (v.cwnd.avg * 10.0).round() / 10.0, "p50": v.cwnd.p50},
                "responses_with_retransmissions": v.lossy,
                "retransmitted_segments": v.retrans,
                "by_size": classes,
            }),
        );
    }
    let (favours, reason) = policy::favour(&o.policies, o.tls_body.p50);
    json!({
        "notes": "size classes: small up to 16k (one record), medium up to 256k, large above; ttfb: until the response head was ready; ttlb: until the last byte was written to the connection (not its delivery); retransmissions: segments TCP sent again on the connection since the advisor last looked at it (a response's own losses mostly show on the connection's next response)",
        "observed": per,
        "favours": favours,
        "reason": reason,
        "applied": o.applied.map(|i| POLICIES[i]),
        "directive": format!("ssl_dyn_rec_enable {} (firstbyte; not in the snippet)", match favours {
            "adaptive" => "adaptive",
            "dynamic" => "on",
            _ => "off",
        }),
    })
}

/// The whole report.
pub fn report(o: &Observed) -> Value {
    let pbs = proxy_buffer_size(&o.upstream_header);
    let pbs_bytes = if pbs.line.is_some() {
        pow2_at_least(o.upstream_header.max, 4096).min(1 << 20)
    } else {
        4096
    };
    let pb = proxy_buffers(&o.upstream_body, pbs_bytes);
    let prt = proxy_read_timeout(&o.upstream_time);
    let cbb = client_body_buffer_size(&o.request_body);
    let (sbs, advisory) = ssl_buffer_size(&o.tls_body);
    let lines: Vec<&str> = [&pbs, &pb, &prt, &cbb, &sbs]
        .iter()
        .filter_map(|s| s.line.as_deref())
        .collect();
    let apply_to = if sbs.line.is_some() {
        // nginx takes ssl_buffer_size in http and server blocks only.
        "http or server block"
    } else {
        "http, server, or location block"
    };
    let secs = o.window.as_secs_f64();
    let rps = if secs > 0.0 {
        ((o.sample_size as f64 / secs) * 100.0).round() / 100.0
    } else {
        0.0
    };
    let mut m = Map::new();
    m.insert("sample_size".into(), json!(o.sample_size));
    m.insert("uptime_seconds".into(), json!(o.uptime.as_secs()));
    m.insert("requests_per_second".into(), json!(rps));
    m.insert("proxy_buffer_size".into(), pbs.json());
    m.insert("proxy_buffers".into(), pb.json());
    m.insert("proxy_read_timeout".into(), prt.json());
    m.insert("client_body_buffer_size".into(), cbb.json());
    m.insert("keepalive".into(), keepalive(o));
    m.insert("ssl_buffer_size".into(), sbs.json());
    if let Some(a) = advisory {
        m.insert("dyn_rec_advisory".into(), json!(a));
    }
    m.insert("record_policy".into(), record_policy(o));
    m.insert(
        "nginx_config".into(),
        json!({ "snippet": lines.join("\n"), "apply_to": apply_to }),
    );
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advisor::hist::Histogram;

    /// A summary of `n` values `v` for each `(v, n)`.
    fn dist(parts: &[(u64, usize)]) -> Summary {
        let h = Histogram::default();
        for &(v, n) in parts {
            for _ in 0..n {
                h.record(v);
            }
        }
        h.summary()
    }

    fn rec(s: &Setting) -> (&str, &str) {
        (s.recommendation, s.suggested_value.as_str())
    }

    #[test]
    fn ssl_buffer_size_all_small_all_large_bimodal() {
        let (s, adv) = ssl_buffer_size(&dist(&[(1000, 100)]));
        assert_eq!(rec(&s), ("REDUCE", "4k"));
        assert_eq!(s.line.as_deref(), Some("ssl_buffer_size 4k;"));
        assert!(adv.is_none());
        // Exactly 4k is within 4k.
        assert_eq!(
            rec(&ssl_buffer_size(&dist(&[(4096, 10)])).0),
            ("REDUCE", "4k")
        );
        let (s, adv) = ssl_buffer_size(&dist(&[(200_000, 100)]));
        assert_eq!(rec(&s), ("OK", "16k"));
        assert!(
            s.reason.starts_with("100% of response bodies are larger"),
            "{}",
            s.reason
        );
        assert!(
            s.reason.contains("bench/results/2026-11-26-records"),
            "{}",
            s.reason
        );
        assert!(adv.is_none());
        // 96% at 1k, 4% at 200k: p95 small, a tail above 64k.
        let (s, adv) = ssl_buffer_size(&dist(&[(1000, 96), (200_000, 4)]));
        assert_eq!(rec(&s), ("REDUCE", "4k"));
        let adv = adv.expect("bimodal");
        assert!(
            adv.starts_with(
                "bimodal: p95 response body is 1.0k but 4.0% of responses are larger than 64k"
            ),
            "{adv}"
        );
        // Mid-size: OK at 16k, no advisory.
        let (s, adv) = ssl_buffer_size(&dist(&[(10_000, 100)]));
        assert_eq!(rec(&s), ("OK", "16k"));
        assert!(adv.is_none());
        assert_eq!(rec(&ssl_buffer_size(&Summary::default()).0), ("OK", "16k"));
    }

    #[test]
    fn proxy_rules() {
        // Small headers and bodies.
        let s = proxy_buffer_size(&dist(&[(300, 100)]));
        assert_eq!(rec(&s), ("OK", "4k"));
        let s = proxy_buffer_size(&dist(&[(300, 99), (20_000, 1)]));
        assert_eq!(rec(&s), ("INCREASE", "32k"));
        assert_eq!(
            rec(&proxy_buffers(&dist(&[(1000, 100)]), 4096)),
            ("OK", "8 4k")
        );
        let s = proxy_buffers(&dist(&[(100_000, 100)]), 4096);
        assert_eq!(rec(&s), ("INCREASE", "32 4k"));
        let s = proxy_buffers(&dist(&[(500_000, 100)]), 4096);
        assert_eq!(rec(&s), ("INCREASE", "32 16k"));
        assert_eq!(
            rec(&proxy_buffers(&dist(&[(50 << 20, 100)]), 4096)),
            ("INCREASE", "64 16k")
        );
        // A 32k proxy_buffer_size needs 18 buffers of 4k for nginx's busy-buffers check.
        let s = proxy_buffers(&dist(&[(1000, 100)]), 32 << 10);
        assert_eq!(rec(&s), ("INCREASE", "18 4k"));
        // Fast and slow upstreams (µs).
        assert_eq!(
            rec(&proxy_read_timeout(&dist(&[(2_000, 100)]))),
            ("REDUCE", "5s")
        );
        assert_eq!(
            rec(&proxy_read_timeout(&dist(&[(1_500_000, 100)]))),
            ("REDUCE", "10s")
        );
        assert_eq!(
            rec(&proxy_read_timeout(&dist(&[(20_000_000, 100)]))),
            ("INCREASE", "120s")
        );
        assert_eq!(
            rec(&proxy_read_timeout(&dist(&[(10_000, 99), (50_000_000, 1)]))),
            ("INCREASE", "120s")
        );
        assert_eq!(
            rec(&proxy_read_timeout(&dist(&[(10_000_000, 100)]))),
            ("OK", "60s")
        );
    }

    #[test]
    fn client_body() {
        assert_eq!(
            rec(&client_body_buffer_size(&dist(&[(2000, 100)]))),
            ("REDUCE", "8k")
        );
        assert_eq!(
            rec(&client_body_buffer_size(&dist(&[(12_000, 100)]))),
            ("OK", "16k")
        );
        assert_eq!(
            rec(&client_body_buffer_size(&dist(&[(100_000, 100)]))),
            ("INCREASE", "128k")
        );
        assert!(client_body_buffer_size(&Summary::default()).line.is_none());
    }

    #[test]
    fn report_shape_and_snippet() {
        let o = Observed {
            sample_size: 200,
            uptime: Duration::from_secs(100),
            window: Duration::from_secs(50),
            upstream_header: dist(&[(300, 100)]),
            upstream_body: dist(&[(1000, 100)]),
            upstream_time: dist(&[(2000, 100)]),
            tls_body: dist(&[(1000, 200)]),
            client_reused: 150,
            upstream_requests: 100,
            upstream_reused: 10,
            ..Observed::default()
        };
        let r = report(&o);
        assert_eq!(r["sample_size"], 200);
        assert_eq!(r["uptime_seconds"], 100);
        assert_eq!(r["requests_per_second"], 4.0);
        assert_eq!(r["ssl_buffer_size"]["recommendation"], "REDUCE");
        assert_eq!(r["ssl_buffer_size"]["observed"]["p95_approx"], "1.0k");
        assert_eq!(r["proxy_buffer_size"]["observed"]["max"], "0.3k");
        assert_eq!(r["keepalive"]["client"]["observed"]["reuse_ratio"], 0.75);
        assert_eq!(r["keepalive"]["upstream"]["recommendation"], "INCREASE");
        assert!(r.get("dyn_rec_advisory").is_none());
        assert_eq!(
            r["nginx_config"]["snippet"],
            "proxy_buffer_size 4k;\nproxy_buffers 8 4k;\nproxy_read_timeout 5s;\nssl_buffer_size 4k;"
        );
        assert_eq!(r["nginx_config"]["apply_to"], "http or server block");
        assert_eq!(r["record_policy"]["favours"], "adaptive");
    }
}
