//! `$upstream_addr`, `$upstream_status` and the `$upstream_*_time` variables: one entry per
//! server a request tried, joined with ", " as nginx writes them (`ngx_http_upstream_addr_variable`
//! and friends).
//!
//! Times are seconds with milliseconds (`0.012`), `-` where the try did not get that far.
//! `$upstream_response_time` of the last try runs until the variable is read: in the access
//! log (written once the response is sent) that is nginx's "until the response was read".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes one try moved: counted by the connection (`received`, `sent`: everything read
/// from and written to the upstream, `$upstream_bytes_received` / `_sent`) and by the
/// response body (`body`: `$upstream_response_length`), while the response streams.
#[derive(Debug, Default)]
pub struct TryCounts {
    /// Bytes read from the upstream.
    pub received: AtomicU64,
    /// Bytes written to the upstream.
    pub sent: AtomicU64,
    /// Response body bytes.
    pub body: AtomicU64,
    /// The response's trailer section, once the body has ended with one
    /// (`$upstream_trailer_NAME`, `proxy_pass_trailers`).
    pub trailers: std::sync::Mutex<Option<http::HeaderMap>>,
}

impl TryCounts {
    fn load(&self, which: &AtomicU64) -> String {
        let _ = self;
        which.load(Ordering::Relaxed).to_string()
    }
}

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
    /// Its byte counts.
    counts: Arc<TryCounts>,
    /// The response header as the upstream sent it (`$upstream_http_*`, `$upstream_cookie_*`).
    headers: Option<http::HeaderMap>,
}

/// The servers a request tried, in order.
#[derive(Debug, Clone, Default)]
pub struct UpstreamVars {
    tries: Vec<Try>,
    /// `$proxy_host` of the request's `proxy_pass` (evaluated, for one with variables).
    pub proxy_host: Option<String>,
    /// `$upstream_cache_status` (`proxy_cache`).
    pub cache_status: Option<&'static str>,
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
            counts: Arc::default(),
            headers: None,
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

    /// The current try's byte counts (a fresh set when no try began).
    pub fn counts(&self) -> Arc<TryCounts> {
        self.tries
            .last()
            .map_or_else(Arc::default, |t| t.counts.clone())
    }

    /// The current try's response header, as the upstream sent it.
    pub fn response_headers(&mut self, h: &http::HeaderMap) {
        if let Some(t) = self.tries.last_mut() {
            t.headers = Some(h.clone());
        }
    }

    /// The last try's response header field `name` (lowercase, `-` for `_`), nginx's
    /// `$upstream_http_NAME`: repeated fields joined with ", " (every one, as nginx).
    fn http(&self, name: &str) -> Option<String> {
        let h = self.tries.last()?.headers.as_ref()?;
        let name = name.replace('_', "-");
        let vals: Vec<String> = h
            .get_all(name.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        (!vals.is_empty()).then(|| vals.join(", "))
    }

    /// `$upstream_cookie_NAME`: the value of cookie `name` in the last try's first
    /// `Set-Cookie` that sets it, as `ngx_http_parse_set_cookie_lines` reads it: the name
    /// (any case) at the start of the field, spaces, `=`, spaces, then up to the first `;`.
    fn cookie(&self, name: &str) -> Option<String> {
        let h = self.tries.last()?.headers.as_ref()?;
        h.get_all(http::header::SET_COOKIE)
            .iter()
            .find_map(|v| set_cookie_value(v.as_bytes(), name.as_bytes()))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The last try's trailer section (None: none came, or not yet).
    pub fn last_trailers(&self) -> Option<http::HeaderMap> {
        self.tries.last()?.counts.trailers.lock().ok()?.clone()
    }

    /// `$upstream_trailer_NAME`: as `$upstream_http_NAME`, of the last try's trailers.
    fn trailer(&self, name: &str) -> Option<String> {
        let h = self.last_trailers()?;
        let name = name.replace('_', "-");
        let vals: Vec<String> = h
            .get_all(name.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        (!vals.is_empty()).then(|| vals.join(", "))
    }

    /// The last try's response header (None: no try got one).
    pub fn last_headers(&self) -> Option<&http::HeaderMap> {
        self.tries.last()?.headers.as_ref()
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
        if name == "upstream_cache_status" {
            return self.cache_status.map(str::to_string);
        }
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
            "upstream_response_length" => each(&|t| t.counts.load(&t.counts.body)),
            "upstream_bytes_received" => each(&|t| t.counts.load(&t.counts.received)),
            "upstream_bytes_sent" => each(&|t| t.counts.load(&t.counts.sent)),
            _ => {
                if let Some(n) = name.strip_prefix("upstream_http_") {
                    return self.http(n);
                }
                if let Some(n) = name.strip_prefix("upstream_cookie_") {
                    return self.cookie(n);
                }
                if let Some(n) = name.strip_prefix("upstream_trailer_") {
                    return self.trailer(n);
                }
                return None;
            }
        })
    }
}

/// The value a `Set-Cookie` field gives cookie `name`, if it sets that one.
fn set_cookie_value<'a>(field: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    if name.len() >= field.len() || !field[..name.len()].eq_ignore_ascii_case(name) {
        return None;
    }
    let mut rest = &field[name.len()..];
    while let [b' ', tail @ ..] = rest {
        rest = tail;
    }
    let mut rest = rest.strip_prefix(b"=")?;
    while let [b' ', tail @ ..] = rest {
        rest = tail;
    }
    let end = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
    Some(&rest[..end])
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
        assert_eq!(
            v.get("upstream_response_length", now).as_deref(),
            Some("0, 0")
        );
        v.counts().body.fetch_add(23, Ordering::Relaxed);
        v.counts().received.fetch_add(68, Ordering::Relaxed);
        assert_eq!(
            v.get("upstream_response_length", now).as_deref(),
            Some("0, 23")
        );
        assert_eq!(
            v.get("upstream_bytes_received", now).as_deref(),
            Some("0, 68")
        );
    }

    #[test]
    fn upstream_header_and_cookie_values() {
        let t0 = Instant::now();
        let now = Some(t0);
        let mut v = UpstreamVars::default();
        v.begin("a".into(), t0);
        let mut h = http::HeaderMap::new();
        h.append("x-len", http::HeaderValue::from_static("5"));
        h.append("set-cookie", http::HeaderValue::from_static("a=1"));
        h.append(
            "set-cookie",
            http::HeaderValue::from_static("TC = x y ; Path=/"),
        );
        h.append("set-cookie", http::HeaderValue::from_static("tc=second"));
        v.response_headers(&h);
        assert_eq!(v.get("upstream_http_x_len", now).as_deref(), Some("5"));
        assert_eq!(v.get("upstream_http_x_none", now), None);
        assert_eq!(v.get("upstream_cookie_tc", now).as_deref(), Some("x y "));
        assert_eq!(v.get("upstream_cookie_a", now).as_deref(), Some("1"));
        assert_eq!(v.get("upstream_cookie_b", now), None);
    }

    #[test]
    fn set_cookie_as_nginx_parses_it() {
        let c = |f: &str| set_cookie_value(f.as_bytes(), b"tc").map(|v| v.to_vec());
        let s = |v: &str| Some(v.as_bytes().to_vec());
        assert_eq!(c("tc"), None, "not longer than the name");
        assert_eq!(c("tc="), s(""));
        assert_eq!(c("tc=;"), s(""));
        assert_eq!(c("tc=x"), s("x"));
        assert_eq!(c("tc\t=\tcontent"), None);
        assert_eq!(c("tc==;abc"), s("="));
        assert_eq!(c("=tc=content"), None);
        assert_eq!(c("tc=first,tc=second"), s("first,tc=second"));
        assert_eq!(c("tc=first;tc=second"), s("first"));
        assert_eq!(c("tcx=1"), None);
    }
}
