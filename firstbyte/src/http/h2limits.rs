//! The limits every HTTP/2 connection is served with (TLS `h2`, and plain `h2c` with `http2
//! on`), by firstbyte's own HTTP/2 layer (`http::h2`). Each says its unit, its value and why.
//!
//! Together they bound what one connection can make the server hold or do: streams open at
//! once, header bytes per request, buffered request and response data, and the streams a client
//! can open and reset (CVE-2023-44487, "rapid reset") or get the server to reset for protocol
//! errors (CVE-2025-8671, "MadeYouReset") before the connection is closed with GOAWAY
//! `ENHANCE_YOUR_CALM`. `keepalive_requests` (default 1000) ends every HTTP/2 connection with
//! GOAWAY after that many requests besides.

use crate::conf::model::ServerConf;

/// Bytes of headers one request may carry, decoded (RFC 9113 §6.5.2: names + values + 32 per
/// field), advertised as SETTINGS_MAX_HEADER_LIST_SIZE; a larger request is refused (431).
/// NUMBER x SIZE of the server's `large_client_header_buffers`, the request header limit
/// nginx has applied to HTTP/2 since 1.19.7: 32 KiB by default (`4 8k`; hyper's default is
/// 16 KiB).
pub fn max_header_list_size(server: &ServerConf) -> u32 {
    let (n, size) = server.large_client_header_buffers;
    u32::try_from(n.saturating_mul(size)).unwrap_or(u32::MAX)
}

/// Streams a client may reset before the server has taken them up (opened and reset in the
/// same burst of input), counted at once, after which the connection ends with GOAWAY
/// `ENHANCE_YOUR_CALM`: 20, the value h2 chose for its CVE-2023-44487 fix. The server takes a
/// stream up as soon as it has read the burst that opened it, so only a client sending more
/// than 20 open-and-reset pairs in one burst reaches it; one that paces its resets is served
/// (each reset stream counts as a request) until `keepalive_requests`.
pub const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;

/// Streams the server may reset on one connection because the client broke the protocol on
/// them (a bad WINDOW_UPDATE, DATA past `content-length`, ...), after which the connection
/// ends with GOAWAY `ENHANCE_YOUR_CALM` (CVE-2025-8671): 128, one full set of concurrent
/// streams. A well-behaved client causes none; hyper's default (1024) exceeds the 1000
/// requests a connection serves by default, so it would never act.
pub const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 128;

/// The connection's output high-water mark, 128 KiB (eight full 16 KiB TLS records, enough to
/// keep the socket fed): once this many frame bytes wait unwritten, for all streams together,
/// no stream adds response data and the client's input is not read until the socket takes
/// them (`h2::serve`). It bounds the connection, not each stream: a stream holds besides only
/// the piece of its body it is sending.
pub const MAX_SEND_BUF_SIZE: usize = 128 * 1024;

/// Request-body bytes a client may send on one stream before the server reads them
/// (SETTINGS_INITIAL_WINDOW_SIZE) by default, 1 MiB: one upload can use the whole connection
/// window. `http2_body_preread_size` sets it (see [`stream_window`]).
pub const INITIAL_STREAM_WINDOW: u32 = 1024 * 1024;

/// The stream window of `server`'s connections: `http2_body_preread_size`, at most 2^31 − 1
/// (RFC 9113 §6.9.2); the connection window is never smaller than it.
pub fn stream_window(server: &ServerConf) -> u32 {
    u32::try_from(server.http2_body_preread_size.min(0x7fff_ffff)).unwrap_or(0x7fff_ffff)
}

/// Request-body bytes a client may send on the whole connection before the server reads them,
/// 1 MiB: the most unread request data one connection holds in memory (a 100 ms round trip
/// still allows 10 MB/s of upload). Also hyper's default.
pub const INITIAL_CONNECTION_WINDOW: u32 = 1024 * 1024;

// One upload may use the whole connection window; the error-reset limit acts before the 1000
// requests (`keepalive_requests`) a connection serves by default.
const _: () = assert!(INITIAL_STREAM_WINDOW <= INITIAL_CONNECTION_WINDOW);
const _: () = assert!(MAX_LOCAL_ERROR_RESET_STREAMS < 1000);

/// Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS):
/// `http2_max_concurrent_streams`, 128 by default as nginx (hyper's default is 200). More are
/// refused with RST_STREAM `REFUSED_STREAM`.
pub fn max_concurrent_streams(server: &ServerConf) -> u32 {
    server.http2_max_concurrent_streams
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(extra: &str) -> std::sync::Arc<ServerConf> {
        let text = format!("events {{}}\nhttp {{ {extra}\n server {{ listen 127.0.0.1:1; }} }}\n",);
        let dir = std::env::temp_dir();
        let c = crate::conf::load_str(&text, &dir.join("h2limits.conf"), &dir).expect("config");
        c.http.expect("http block").servers[0].clone()
    }

    #[test]
    fn concurrent_streams_default_and_directive() {
        assert_eq!(max_concurrent_streams(&server("")), 128);
        assert_eq!(
            max_concurrent_streams(&server("http2_max_concurrent_streams 32;")),
            32
        );
    }

    #[test]
    fn stream_window_is_the_preread_size() {
        assert_eq!(stream_window(&server("")), INITIAL_STREAM_WINDOW);
        assert_eq!(
            stream_window(&server("http2_body_preread_size 64k;")),
            65536
        );
        assert_eq!(
            stream_window(&server("http2_body_preread_size 4g;")),
            0x7fff_ffff
        );
        let c = crate::http::h2::serve::config(&server("http2_body_preread_size 4m;"), None);
        assert_eq!((c.stream_window, c.conn_window), (4 << 20, 4 << 20));
    }
}
