//! The tuning advisor's side in the request path: [`Watch`] is taken when a response head is
//! ready (time to first byte, `TCP_INFO`) and counts the response into the process's
//! [`Advisor`](crate::advisor::Advisor) when its body is done; [`status`] answers
//! `tuning_advisor_status`. Nothing is taken for a server with `tuning_advisor off`.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Response};

use crate::advisor::{AdvisorMode, Sample, TcpSample, UpstreamSample};
use crate::http::body::Body;
use crate::http::conn::Conn;
use crate::http::site::Shared;

/// One response being watched, from its first byte to its last.
pub struct Watch {
    shared: Arc<Shared>,
    apply: bool,
    start: Instant,
    socket: Option<RawFd>,
    /// The connection's mark of `total_retrans` (see [`retrans_since`]).
    retrans_seen: Arc<AtomicU32>,
    sample: Sample,
}

/// What the pipeline knows when the response head is ready.
pub struct Head<'a> {
    /// The connection.
    pub conn: &'a Conn,
    /// The server's `tuning_advisor`.
    pub mode: AdvisorMode,
    /// When the request started.
    pub start: Instant,
    /// The request's headers (for its body's size).
    pub request_headers: &'a HeaderMap,
    /// The request's number on its connection (1: the first).
    pub nreq: u64,
    /// What `proxy_pass` tried, when it ran.
    pub upstream: Option<&'a crate::http::proxy::UpstreamVars>,
}

impl Watch {
    /// Starts watching a response whose head is ready now; `None` with `tuning_advisor off`.
    pub fn start(h: Head<'_>) -> Option<Self> {
        if h.mode == AdvisorMode::Off {
            return None;
        }
        let facts = h.conn.facts();
        let tcp = facts.socket.and_then(|fd| crate::net::tcp_info(fd).ok());
        let request_body_bytes = h
            .request_headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let upstream = h
            .upstream
            .and_then(|u| u.answered())
            .map(|(t, bytes, reused)| UpstreamSample {
                header_bytes: bytes,
                header_us: u64::try_from(t.as_micros()).unwrap_or(u64::MAX),
                reused,
            });
        let tls = facts.tls.is_some() && facts.socket.is_some();
        Some(Self {
            shared: h.conn.shared().clone(),
            apply: h.mode == AdvisorMode::Apply,
            start: h.start,
            socket: facts.socket,
            retrans_seen: h.conn.retrans_seen().clone(),
            sample: Sample {
                body_bytes: 0,
                request_body_bytes,
                tls,
                policy: if tls {
                    crate::advisor::policy_index(facts.record_policy)
                } else {
                    None
                },
                ttfb_us: micros(h.start.elapsed()),
                ttlb_us: 0,
                client_reused: h.nreq > 1,
                tcp: tcp.map(|t| TcpSample {
                    rtt_us: t.rtt_us,
                    cwnd: t.snd_cwnd,
                    retrans: retrans_since(h.conn.retrans_seen(), t.total_retrans),
                }),
                upstream,
            },
        })
    }

    /// The body is done (or dropped) after `sent` bytes: count the response.
    pub fn done(mut self, sent: u64) {
        let s = &mut self.sample;
        s.body_bytes = sent;
        s.ttlb_us = micros(self.start.elapsed());
        if let Some(t) = &mut s.tcp {
            if let Some(end) = self.socket.and_then(|fd| crate::net::tcp_info(fd).ok()) {
                t.retrans += retrans_since(&self.retrans_seen, end.total_retrans);
            }
        }
        if let Some(sw) = self.shared.advisor.observe(&self.sample, self.apply) {
            crate::fblog!(
                Notice,
                "tuning advisor: record policy \"{}\" -> \"{}\": {}",
                crate::advisor::POLICIES[sw.from],
                crate::advisor::POLICIES[sw.to],
                sw.reason
            );
        }
    }
}

/// Segments retransmitted on a connection since the advisor last looked (at the first or the
/// last byte of any of its responses; for its first response, since it opened), given
/// `TCP_INFO`'s `total_retrans` now. A response's own segments are mostly still in flight
/// when its last byte is written, so their retransmissions count toward the connection's next
/// response: per connection, every retransmission is counted once.
fn retrans_since(seen: &AtomicU32, total: u32) -> u32 {
    total.saturating_sub(seen.fetch_max(total, Ordering::Relaxed))
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// `tuning_advisor_status`: the report as JSON; `?reset` clears the histograms first.
pub fn status(conn: &Conn, args: Option<&str>) -> Response<Body> {
    let advisor = &conn.shared().advisor;
    let now = Instant::now();
    if args.is_some_and(|a| {
        a.split('&')
            .any(|kv| kv == "reset" || kv.starts_with("reset="))
    }) {
        advisor.reset(now);
        crate::fblog!(Notice, "tuning advisor: histograms reset");
    }
    let mut text = serde_json::to_string_pretty(&advisor.report(now)).unwrap_or_default();
    text.push('\n');
    let mut r = Response::new(Body::full(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
