//! `$upstream_addr`, `$upstream_status` and the `$upstream_*_time` variables: one entry per
//! server a request tried, joined with ", " as nginx writes them (`ngx_http_upstream_addr_variable`
//! and friends).
//!
//! Times are seconds with milliseconds (`0.012`), `-` where the try did not get that far.
//! `$upstream_response_time` of the last try runs until the variable is read: in the access
//! log (written once the response is sent) that is nginx's "until the response was read".

use std::time::{Duration, Instant};

/// One server tried.
#[derive(Debug, Clone)]
struct Try {
    addr: String,
    start: Instant,
    status: Option<u16>,
    connect: Option<Duration>,
    header: Option<Duration>,
    end: Option<Instant>,
    /// Response header bytes (status line and fields), for the tuning advisor.
    header_bytes: u64,
    /// Sent on a pooled connection.
    reused: bool,
}

/// The servers a request tried, in order.
#[derive(Debug, Clone, Default)]
pub struct UpstreamVars {
    tries: Vec<Try>,
    /// `$proxy_host` of the request's `proxy_pass` (evaluated, for one with variables).
    pub proxy_host: Option<String>,
}

fn secs(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

impl UpstreamVars {
    /// A try of `addr` begins at `now`.
    pub fn begin(&mut self, addr: String, now: Instant) {
        self.tries.push(Try {
            addr,
            start: now,
            status: None,
            connect: None,
            header: None,
            end: None,
            header_bytes: 0,
            reused: false,
        });
    }

    /// The current try did not count (a pooled connection the server had closed).
    pub fn forget(&mut self) {
        self.tries.pop();
    }

    /// The current try connected at `now`.
    pub fn connected(&mut self, now: Instant) {
        if let Some(t) = self.tries.last_mut() {
            t.connect = Some(now.saturating_duration_since(t.start));
        }
    }

    /// The current try got a response header with `status` at `now`.
    pub fn header(&mut self, status: u16, now: Instant) {
        if let Some(t) = self.tries.last_mut() {
            let d = now.saturating_duration_since(t.start);
            crate::metrics::upstream_header(d);
            t.status = Some(status);
            t.header = Some(d);
        }
    }

    /// The current try ended at `now` (failed, or moved on); `status` is what nginx records
    /// for it (502, 504) when it had none.
    pub fn end(&mut self, status: u16, now: Instant) {
        if let Some(t) = self.tries.last_mut() {
            t.status.get_or_insert(status);
            t.end = Some(now);
        }
    }

    /// The request was abandoned at `now` (the client closed): the current try ends, with
    /// no status.
    pub fn close(&mut self, now: Instant) {
        if let Some(t) = self.tries.last_mut() {
            t.end.get_or_insert(now);
        }
    }

    /// The current try went on a pooled (kept-alive) connection.
    pub fn reused(&mut self) {
        if let Some(t) = self.tries.last_mut() {
            t.reused = true;
        }
    }

    /// The current try's response header was `n` bytes.
    pub fn header_bytes(&mut self, n: u64) {
        if let Some(t) = self.tries.last_mut() {
            t.header_bytes = n;
        }
    }

    /// For the tuning advisor: the last try's time to its header, header bytes, and whether
    /// it went on a pooled connection; `None` when no try got a header.
    pub fn answered(&self) -> Option<(Duration, u64, bool)> {
        let t = self.tries.last()?;
        Some((t.header?, t.header_bytes, t.reused))
    }

    /// Whether no server was tried.
    pub fn is_empty(&self) -> bool {
        self.tries.is_empty()
    }

    /// The value of `$name` (None: not one of these, or no server tried), read at `now`; with
    /// no `now` (the response is still being read), a try that has not ended has no response
    /// time (`-`, as nginx before the request is finalized).
    pub fn get(&self, name: &str, now: Option<Instant>) -> Option<String> {
        if self.tries.is_empty() {
            return None;
        }
        let each =
            |f: &dyn Fn(&Try) -> String| self.tries.iter().map(f).collect::<Vec<_>>().join(", ");
        let time = |d: Option<Duration>| d.map_or_else(|| "-".to_string(), secs);
        Some(match name {
            "upstream_addr" => each(&|t| t.addr.clone()),
            "upstream_status" => {
                each(&|t| t.status.map_or_else(|| "-".to_string(), |s| s.to_string()))
            }
            "upstream_connect_time" => each(&|t| time(t.connect)),
            "upstream_header_time" => each(&|t| time(t.header)),
            "upstream_response_time" => each(&|t| match t.end.or(now) {
                Some(end) => secs(end.saturating_duration_since(t.start)),
                None => "-".to_string(),
            }),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_per_try_as_nginx_writes_them() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut v = UpstreamVars::default();
        assert_eq!(v.get("upstream_addr", Some(t0)), None);
        v.begin("127.0.0.1:8081".into(), t0);
        v.end(502, t0 + ms(3));
        v.begin("127.0.0.1:8082".into(), t0 + ms(3));
        v.connected(t0 + ms(4));
        v.header(200, t0 + ms(15));
        let now = Some(t0 + ms(1250));
        assert_eq!(
            v.get("upstream_addr", now).as_deref(),
            Some("127.0.0.1:8081, 127.0.0.1:8082")
        );
        assert_eq!(v.get("upstream_status", now).as_deref(), Some("502, 200"));
        assert_eq!(
            v.get("upstream_connect_time", now).as_deref(),
            Some("-, 0.001")
        );
        assert_eq!(
            v.get("upstream_header_time", now).as_deref(),
            Some("-, 0.012")
        );
        assert_eq!(
            v.get("upstream_response_time", now).as_deref(),
            Some("0.003, 1.247")
        );
        assert_eq!(v.get("upstream_other", now), None);
        // While the response is read (add_header): the open try has no response time yet.
        assert_eq!(
            v.get("upstream_response_time", None).as_deref(),
            Some("0.003, -")
        );
    }
}
