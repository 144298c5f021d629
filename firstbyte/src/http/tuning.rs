//! The tuning advisor's side in the request path: [`Watch`] is taken when a response head is
//! ready (time to first byte, `TCP_INFO`) and counts the response into the process's
//! [`Advisor`](crate::advisor::Advisor) when its body is done; [`status`] answers
//! `tuning_advisor_status`. Nothing is taken for a server with `tuning_advisor off`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Response};

use crate::advisor::{AdvisorMode, Sample, TcpSample, UpstreamSample};
use crate::http::body::Body;
use crate::http::conn::Conn;

/// One response being watched, from its first byte to its last.
pub struct Watch {
    apply: bool,
    start: Instant,
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
        let tls = facts.tls.is_some() && facts.socket.is_some();
        // TCP_INFO (two system calls) and the clock for at most `LOOKS_PER_SECOND` responses
        // a second: every response of a server up to that rate, a sample above it (the
        // others count in the size and keep-alive histograms only).
        let mut tcp = None;
        let mut ttfb_us = 0;
        if tls {
            let now = Instant::now();
            if h.conn.shared().advisor.claim_look(now) {
                tcp = facts.socket.and_then(|fd| crate::net::tcp_info(fd).ok());
                ttfb_us = micros(now.saturating_duration_since(h.start));
            }
        }
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
        let marks = h.conn.tcp_marks();
        Some(Self {
            apply: h.mode == AdvisorMode::Apply,
            start: h.start,
            sample: Sample {
                body_bytes: 0,
                request_body_bytes,
                tls,
                policy: if tls {
                    crate::advisor::policy_index(facts.record_policy)
                } else {
                    None
                },
                ttfb_us,
                ttlb_us: 0,
                client_reused: h.nreq > 1,
                tcp: tcp.map(|t| TcpSample {
                    rtt_us: t.rtt_us,
                    cwnd: t.snd_cwnd,
                    retrans: marks.retrans_since(t.total_retrans),
                }),
                upstream,
            },
        })
    }

    /// The body is done (or dropped) after `sent` bytes on `conn`: count the response.
    pub fn done(mut self, sent: u64, conn: &Conn) {
        let s = &mut self.sample;
        s.body_bytes = sent;
        if let Some(t) = &mut s.tcp {
            s.ttlb_us = micros(self.start.elapsed());
            if let Some(end) = conn
                .facts()
                .socket
                .and_then(|fd| crate::net::tcp_info(fd).ok())
            {
                t.retrans += conn.tcp_marks().retrans_since(end.total_retrans);
            }
        }
        if let Some(sw) = conn.shared().advisor.observe(&self.sample, self.apply) {
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

/// What the advisor last read of one connection's `TCP_INFO`.
#[derive(Debug, Default)]
pub struct TcpMarks {
    /// `total_retrans` at the last read.
    retrans: AtomicU32,
}

impl TcpMarks {
    /// Segments retransmitted on the connection since the advisor last read them (at the first
    /// or the last byte of one of its responses; for its first, since it opened), given
    /// `total_retrans` now. A response's own segments are mostly still in flight when its
    /// last byte is written, so their retransmissions count toward the next response read:
    /// per connection, every retransmission is counted once.
    fn retrans_since(&self, total: u32) -> u32 {
        total.saturating_sub(self.retrans.fetch_max(total, Ordering::Relaxed))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_counted_once() {
        let m = TcpMarks::default();
        assert_eq!(m.retrans_since(3), 3);
        assert_eq!(m.retrans_since(3), 0);
        assert_eq!(m.retrans_since(5), 2);
        // An older reading (a concurrent stream's) counts nothing twice.
        assert_eq!(m.retrans_since(4), 0);
    }
}
