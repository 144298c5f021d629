//! `proxy_http_version 2`: HTTP/2 to upstreams, as nginx 1.29's `ngx_http_proxy_v2_module`.
//!
//! The framing is hyper's (`client::conn::http2`, over the h2 crate); this module holds what
//! differs from HTTP/1: the connection's settings (nginx's: no HPACK dynamic table for the
//! upstream's headers, no push), the request's pseudo-headers (`Host` becomes `:authority`,
//! `:scheme` is the upstream's), the connection-specific headers RFC 9113 §8.2.2 forbids, and
//! ALPN `h2` for an `https://` upstream. A plain `http://` upstream gets the connection
//! preface at once (prior knowledge, h2c), as nginx.
//!
//! As nginx, a connection carries one stream at a time: it goes back to the `keepalive`
//! cache once the response ended, and the next request takes it whole (the pool does not
//! share it between requests at once).

use std::sync::Arc;

use http::header::{self, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2, TrySendError};
use hyper_util::rt::TokioExecutor;

use super::upstream::ReqBody;
use crate::conf::model::ProxyConf;

/// The protocol a new upstream connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.0 or 1.1 (the request's version says which).
    H1,
    /// HTTP/2, refusing a response header list larger than `max_header_list` bytes
    /// (RFC 9113's count: names, values and 32 per field).
    H2 {
        /// SETTINGS_MAX_HEADER_LIST_SIZE.
        max_header_list: u32,
    },
}

/// The smallest header list an HTTP/2 upstream may send (`proxy_buffer_size` may allow more).
const MIN_HEADER_LIST: usize = 64 * 1024;

impl Proto {
    /// The location's: HTTP/2 for `proxy_http_version 2`, with room for a response header
    /// of `proxy_buffer_size` (nginx's limit there) or 64k, whichever is larger.
    pub fn of(conf: &ProxyConf) -> Proto {
        Proto::new(conf.http_version.is_h2(), conf.buffers.buffer_size)
    }

    /// HTTP/2 when `h2`, with room for `buffer_size` bytes of response header (64k at least).
    pub fn new(h2: bool, buffer_size: usize) -> Proto {
        if h2 {
            let max = buffer_size.max(MIN_HEADER_LIST);
            Proto::H2 {
                max_header_list: u32::try_from(max).unwrap_or(u32::MAX),
            }
        } else {
            Proto::H1
        }
    }
}

/// A connection's request side: HTTP/1 or HTTP/2.
pub enum Conn {
    /// HTTP/1.x.
    H1(http1::SendRequest<ReqBody>),
    /// HTTP/2.
    H2(http2::SendRequest<ReqBody>),
}

impl Conn {
    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        match self {
            Conn::H1(s) => s.is_closed(),
            Conn::H2(s) => s.is_closed(),
        }
    }

    /// Whether a request may go now.
    pub fn is_ready(&self) -> bool {
        match self {
            Conn::H1(s) => s.is_ready(),
            Conn::H2(s) => s.is_ready(),
        }
    }

    /// Waits until a request may go (HTTP/1: the previous response was read to its end).
    pub async fn ready(&mut self) -> hyper::Result<()> {
        match self {
            Conn::H1(s) => s.ready().await,
            Conn::H2(s) => s.ready().await,
        }
    }

    /// Sends `req`; the response head.
    pub async fn send_request(
        &mut self,
        req: Request<ReqBody>,
    ) -> hyper::Result<Response<Incoming>> {
        match self {
            Conn::H1(s) => s.send_request(req).await,
            Conn::H2(s) => s.send_request(req).await,
        }
    }

    /// Sends `req`; a connection that could not take it gives it back in the error.
    pub async fn try_send_request(
        &mut self,
        req: Request<ReqBody>,
    ) -> Result<Response<Incoming>, TrySendError<Request<ReqBody>>> {
        match self {
            Conn::H1(s) => s.try_send_request(req).await,
            Conn::H2(s) => s.try_send_request(req).await,
        }
    }
}

/// The HTTP/2 handshake over `io` (the preface goes at once: prior knowledge) with nginx's
/// settings: a header table of 0 (the upstream may not index its response headers), no
/// push; the connection's task is spawned.
pub(super) async fn handshake<T>(
    io: T,
    max_header_list: u32,
) -> hyper::Result<http2::SendRequest<ReqBody>>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = http2::Builder::new(TokioExecutor::new())
        .header_table_size(0)
        .max_header_list_size(max_header_list)
        .handshake(io)
        .await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            crate::fblog!(Debug, "upstream http2 connection ended: {e}");
        }
    });
    Ok(send)
}

/// `config` offering ALPN `h2` only (nginx's `NGX_HTTP_V2_ALPN_PROTO` for an HTTP/2 upstream).
pub(super) fn alpn_config(config: &Arc<rustls::ClientConfig>) -> Arc<rustls::ClientConfig> {
    if config.alpn_protocols.len() == 1 && config.alpn_protocols[0] == b"h2" {
        return config.clone();
    }
    let mut c = (**config).clone();
    c.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(c)
}

/// Makes an upstream request built for HTTP/1 one for HTTP/2: `Host` (or, when it is unset
/// or empty, `proxy_host`) becomes `:authority` and the URI absolute with the upstream's
/// scheme; the connection-specific fields go, with the fields `Connection` names, and `TE`
/// unless it is `trailers`.
pub fn prepare<B>(req: &mut Request<B>, tls: bool, proxy_host: &str) -> Result<(), http::Error> {
    let headers = req.headers_mut();
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for n in crate::http::contract::CONNECTION_SPECIFIC {
        headers.remove(n);
    }
    let te_ok = |v: &HeaderValue| v.as_bytes().eq_ignore_ascii_case(b"trailers");
    if headers.get_all(header::TE).iter().any(|v| !te_ok(v)) {
        headers.remove(header::TE);
    }
    let host = headers.remove(header::HOST);
    let authority = host
        .as_ref()
        .filter(|h| !h.is_empty())
        .and_then(|h| Authority::try_from(h.as_bytes()).ok())
        .map_or_else(|| Authority::try_from(proxy_host), Ok)?;
    let path = req
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *req.uri_mut() = Uri::builder()
        .scheme(if tls { Scheme::HTTPS } else { Scheme::HTTP })
        .authority(authority)
        .path_and_query(path)
        .build()?;
    *req.version_mut() = http::Version::HTTP_2;
    Ok(())
}

/// Fields nginx's header filter writes in its own case whatever the upstream's.
const OWN_CASE: [&str; 9] = [
    "content-type",
    "content-length",
    "last-modified",
    "location",
    "date",
    "server",
    "transfer-encoding",
    "connection",
    "keep-alive",
];

/// An HTTP/2 upstream's field names as it sent them (lower case), for an HTTP/1.x client:
/// nginx passes the names as they came, where hyper would title-case them.
pub fn lower_case(headers: &http::HeaderMap) -> crate::http::conn::HeaderCase {
    let mut names: Vec<Box<str>> = Vec::new();
    for name in headers.keys() {
        let n = name.as_str();
        if !OWN_CASE.contains(&n) && n.bytes().any(|b| b.is_ascii_lowercase()) {
            names.push(n.into());
        }
    }
    crate::http::conn::HeaderCase(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut r = Request::builder().uri("/a/b?c=d");
        for (n, v) in headers {
            r = r.header(*n, *v);
        }
        r.body(()).expect("request")
    }

    #[test]
    fn host_becomes_authority_and_connection_fields_go() {
        let mut r = req(&[
            ("host", "example.com:8443"),
            ("connection", "close, x-private"),
            ("x-private", "1"),
            ("keep-alive", "300"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("te", "gzip"),
            ("x-kept", "yes"),
        ]);
        prepare(&mut r, true, "backend").expect("prepared");
        assert_eq!(r.uri().to_string(), "https://example.com:8443/a/b?c=d");
        assert_eq!(r.version(), http::Version::HTTP_2);
        let names: Vec<&str> = r.headers().keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["x-kept"]);
    }

    #[test]
    fn te_trailers_stays_and_empty_host_is_proxy_host() {
        let mut r = req(&[("te", "trailers"), ("host", "")]);
        prepare(&mut r, false, "127.0.0.1:8081").expect("prepared");
        assert_eq!(r.uri().to_string(), "http://127.0.0.1:8081/a/b?c=d");
        assert_eq!(r.headers()["te"], "trailers");
        assert!(r.headers().get("host").is_none());
    }

    #[test]
    fn header_list_room_follows_proxy_buffer_size() {
        assert_eq!(Proto::new(false, 4096), Proto::H1);
        let room = |n| Proto::H2 { max_header_list: n };
        assert_eq!(Proto::new(true, 4096), room(65536));
        assert_eq!(Proto::new(true, 65 * 1024), room(66560));
    }
}
