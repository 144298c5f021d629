//! What an upstream sends besides its response header that goes on to the client:
//! `proxy_pass_trailers`, the trailer section of a chunked upstream response, passed after
//! the body (nginx's `ngx_http_upstream_process_trailers`; the upstream body keeps what it
//! read in its try's counts, where `$upstream_trailer_NAME` reads it, and the response
//! carries [`PassTrailers`] to say they go on, and which); and `early_hints`, its
//! `103 Early Hints` ([`PassHints`]).

use http::header::HeaderMap;

use crate::conf::model::ProxyConf;

/// The upstream's fields that go to the client, as from its header: no hop-by-hop field,
/// nor `proxy_hide_header`'s, nor one hidden by default that `proxy_pass_header` does not
/// pass.
#[derive(Debug, Clone)]
struct Fields {
    hide: Vec<String>,
    pass: Vec<String>,
}

impl Fields {
    /// Whether field `name` (lowercase) goes to the client.
    fn passes(&self, name: &str) -> bool {
        !(super::headers::hop_by_hop(name)
            || name == "content-length"
            || super::headers::hidden(name, &self.hide, &self.pass))
    }

    /// The fields of `map` that go to the client, in their order.
    fn filter(&self, map: &HeaderMap) -> HeaderMap {
        let mut out = HeaderMap::new();
        for (name, value) in map {
            if self.passes(name.as_str()) {
                out.append(name.clone(), value.clone());
            }
        }
        out
    }
}

/// A request extension from the connection: where the fields of a `103 Early Hints` go to
/// be sent before the final response.
#[derive(Clone)]
pub enum EarlyHints {
    /// HTTP/2 or HTTP/3: the stream's queue, which its connection sends from.
    Queue(tokio::sync::mpsc::UnboundedSender<HeaderMap>),
    /// HTTP/1.x: written on the connection before hyper's next bytes; `waker` wakes its task.
    H1 {
        /// The connection.
        conn: std::sync::Arc<crate::http::conn::Conn>,
        /// Its task's waker.
        waker: std::task::Waker,
        /// HTTP/1.0 gets none (nginx: 1.1 and later).
        http11: bool,
    },
}

impl std::fmt::Debug for EarlyHints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EarlyHints::Queue(_) => "EarlyHints::Queue",
            EarlyHints::H1 { .. } => "EarlyHints::H1",
        })
    }
}

impl EarlyHints {
    /// For an HTTP/1.x request on `conn` whose task `waker` wakes.
    pub fn h1(conn: std::sync::Arc<crate::http::conn::Conn>, waker: std::task::Waker) -> Self {
        EarlyHints::H1 {
            conn,
            waker,
            http11: true,
        }
    }

    /// Not for HTTP/1.0 (set once the request's version is known).
    pub fn for_version(mut self, v: http::Version) -> Option<Self> {
        if let EarlyHints::H1 { http11, .. } = &mut self {
            *http11 = v == http::Version::HTTP_11;
            if !*http11 {
                return None;
            }
        }
        Some(self)
    }

    /// Sends a 103 with `fields`.
    fn send(&self, fields: HeaderMap) {
        match self {
            EarlyHints::Queue(q) => {
                let _ = q.send(fields);
            }
            EarlyHints::H1 {
                conn,
                waker,
                http11,
            } => {
                let w = conn.h1();
                // Only while hyper holds no byte of an earlier response (everything it wrote
                // was flushed, which it does before it waits): the 103 goes before its next
                // bytes, which are then this response's head. Else it is dropped: a hint.
                if !*http11 || w.unflushed.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                let mut b = w.early.lock().unwrap_or_else(|e| e.into_inner());
                b.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n");
                for (name, value) in &fields {
                    title_case(name.as_str(), &mut b);
                    b.extend_from_slice(b": ");
                    b.extend_from_slice(value.as_bytes());
                    b.extend_from_slice(b"\r\n");
                }
                b.extend_from_slice(b"\r\n");
                drop(b);
                w.early_due
                    .store(true, std::sync::atomic::Ordering::Release);
                waker.wake_by_ref();
            }
        }
    }
}

/// `link` as `Link`: hyper's (and nginx's usual) case for a field name on HTTP/1.x.
fn title_case(name: &str, out: &mut Vec<u8>) {
    let mut upper = true;
    for b in name.bytes() {
        out.push(if upper { b.to_ascii_uppercase() } else { b });
        upper = b == b'-';
    }
}

/// An upstream request extension: the upstream's `103 Early Hints` go on (`early_hints`).
#[derive(Debug, Clone)]
pub struct PassHints {
    to: EarlyHints,
    fields: Fields,
    /// `proxy_buffer_size`: the most bytes of 103s one try passes, as nginx.
    limit: usize,
}

impl PassHints {
    /// To `to`, the fields `conf` passes.
    pub fn new(conf: &ProxyConf, to: EarlyHints) -> PassHints {
        PassHints {
            to,
            fields: Fields {
                hide: conf.hide_headers.clone(),
                pass: conf.pass_headers.clone(),
            },
            limit: conf.buffers.buffer_size,
        }
    }

    /// Makes `req` (one try's request) pass its response's 103s on.
    pub(super) fn register<B>(&self, req: &mut http::Request<B>) {
        let me = self.clone();
        let seen = std::sync::atomic::AtomicUsize::new(0);
        hyper::ext::on_informational(req, move |res| {
            if res.status() == http::StatusCode::EARLY_HINTS {
                // nginx's count: the 103 heads as they came, status line and final CRLF.
                let size = res
                    .headers()
                    .iter()
                    .map(|(n, v)| n.as_str().len() + v.len() + 4)
                    .sum::<usize>()
                    + 28;
                let total = seen.fetch_add(size, std::sync::atomic::Ordering::Relaxed) + size;
                if total > me.limit {
                    crate::fblog!(Info, "upstream sent too big early hints");
                    return;
                }
                let h = me.fields.filter(res.headers());
                if !h.is_empty() {
                    me.to.send(h);
                }
            }
        });
    }
}

/// A response extension: `proxy_pass_trailers on` for a chunked upstream response.
#[derive(Debug, Clone)]
pub struct PassTrailers {
    fields: Fields,
    /// What the upstream's `Trailer` field announced, of the fields that pass (lowercase):
    /// an HTTP/1.1 response's own `Trailer` field names them.
    pub announced: Vec<String>,
}

impl PassTrailers {
    /// For an upstream response with header `upstream` (as it came) under `conf`: None
    /// unless `proxy_pass_trailers` is on and the body can carry trailers (a chunked HTTP/1.1
    /// body, or any over `proxy_http_version 2`).
    pub fn of(conf: &ProxyConf, upstream: &HeaderMap) -> Option<PassTrailers> {
        Self::with(
            conf.pass_trailers,
            (&conf.hide_headers, &conf.pass_headers),
            upstream,
            conf.http_version.is_h2(),
        )
    }

    /// [`PassTrailers::of`] with `proxy_pass_trailers`, `proxy_hide_header` and
    /// `proxy_pass_header` given.
    fn with(
        on: bool,
        (hide, pass): (&[String], &[String]),
        upstream: &HeaderMap,
        h2: bool,
    ) -> Option<PassTrailers> {
        let chunked = upstream
            .get(http::header::TRANSFER_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"chunked"));
        if !on || !(chunked || h2) {
            return None;
        }
        let mut p = PassTrailers {
            fields: Fields {
                hide: hide.to_vec(),
                pass: pass.to_vec(),
            },
            announced: Vec::new(),
        };
        for name in upstream
            .get_all(http::header::TRAILER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|s| s.split(','))
        {
            let n = name.trim().to_ascii_lowercase();
            if !n.is_empty() && p.fields.passes(&n) && !p.announced.contains(&n) {
                p.announced.push(n);
            }
        }
        Some(p)
    }

    /// The fields of `trailers` that go to the client, in their order.
    pub fn filter(&self, trailers: &HeaderMap) -> HeaderMap {
        self.fields.filter(trailers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `proxy_hide_header X-Secret; proxy_pass_header X-Accel-Kept;`
    fn of(on: bool, upstream: &HeaderMap) -> Option<PassTrailers> {
        PassTrailers::with(
            on,
            (&["x-secret".into()], &["x-accel-kept".into()]),
            upstream,
            false,
        )
    }

    fn head(fields: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in fields {
            h.append(
                http::header::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn only_chunked_responses_with_the_directive() {
        let chunked = head(&[("transfer-encoding", "chunked"), ("trailer", "X-Sum")]);
        assert!(of(false, &chunked).is_none());
        assert!(of(true, &head(&[("content-length", "3")])).is_none());
        let p = of(true, &chunked).expect("passed");
        assert_eq!(p.announced, ["x-sum"]);
        // An HTTP/2 upstream's body is framed, never chunked: any may end in trailers.
        let h2 = |on| PassTrailers::with(on, (&[], &[]), &head(&[("content-length", "3")]), true);
        assert!(h2(true).is_some());
        assert!(h2(false).is_none());
    }

    #[test]
    fn hop_by_hop_and_hidden_fields_stay_out() {
        let up = head(&[
            ("transfer-encoding", "chunked"),
            (
                "trailer",
                "X-Sum, Connection, X-Secret, Server, X-Accel-Kept",
            ),
        ]);
        let p = of(true, &up).expect("passed");
        assert_eq!(p.announced, ["x-sum", "x-accel-kept"]);
        let t = head(&[
            ("x-sum", "1"),
            ("connection", "close"),
            ("transfer-encoding", "gzip"),
            ("content-length", "9"),
            ("x-secret", "s"),
            ("server", "up"),
            ("x-accel-redirect", "/x"),
            ("x-accel-kept", "k"),
            ("x-sum", "2"),
        ]);
        let out = p.filter(&t);
        let got: Vec<_> = out
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        assert_eq!(got, ["x-sum: 1", "x-sum: 2", "x-accel-kept: k"]);
    }
}
