//! hq-interop (`http3_hq on`): HTTP/0.9 over QUIC, the QUIC interop runner's protocol. A
//! connection whose client chose ALPN `hq-interop` carries one request per bidirectional
//! stream: the client sends `GET /path` and a line end, the server answers with the
//! response body alone and ends the stream. Requests go through the same pipeline as every
//! other protocol's (locations, access rules, logs) as HTTP/0.9 requests; as nginx, an error
//! is its error page's body, a 444 resets the stream.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use crate::http::conn::Conn;

/// The ALPN token of HTTP/0.9 over QUIC (the interop runner's, nginx's `NGX_HTTP_V3_HQ_PROTO`).
pub(super) const ALPN: &[u8] = b"hq-interop";

/// HTTP/3's H3_REQUEST_REJECTED, the code a 444 or a failed body resets the stream with
/// (hq has no codes of its own; nginx uses HTTP/3's).
const RESET: u32 = 0x10b;

/// What a stream's bytes so far say of its request line.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// No line end yet: read more.
    More,
    /// `GET target`, and the line's length with its end (`$request_length`).
    Get(String, usize),
    /// A line nginx answers with this status (as HTTP/0.9: the error page's body alone) and
    /// logs with this reason.
    Refuse(u16, &'static str),
    /// The stream ended before a line did: nothing to answer (nginx: "client prematurely
    /// closed connection").
    Closed,
}

/// Whether a server block with `http3` and `http3_hq` as given takes a client that offers
/// the ALPN protocols `offered` (`None`: no ALPN extension, taken as HTTP/3 as before ALPN
/// mattered). As nginx, whose ALPN choice follows the SNI's block: a block that speaks none
/// of the protocols offered refuses the handshake.
pub(super) fn serves<'a>(
    http3: bool,
    hq: bool,
    offered: Option<impl Iterator<Item = &'a [u8]>>,
) -> bool {
    match offered {
        None => http3,
        Some(mut protocols) => protocols.any(|p| (http3 && p == b"h3") || (hq && p == ALPN)),
    }
}

const TOO_LONG: &str = "client sent too long URI";
const INVALID: &str = "client sent invalid request";

/// Reads `buf` (the stream's bytes so far; `fin` once it has ended) as an HTTP/0.9 request
/// line of at most `limit` bytes: `GET`, one space, an origin-form target, LF or CRLF.
pub(super) fn request_line(buf: &[u8], fin: bool, limit: usize) -> Line {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limit {
            Line::Refuse(414, TOO_LONG)
        } else if fin {
            Line::Closed
        } else {
            Line::More
        };
    };
    if end > limit {
        return Line::Refuse(414, TOO_LONG);
    }
    let line = buf[..end].strip_suffix(b"\r").unwrap_or(&buf[..end]);
    let Ok(line) = std::str::from_utf8(line) else {
        return Line::Refuse(400, INVALID);
    };
    let mut words = line.split(' ');
    let (Some(method), Some(target), None) = (words.next(), words.next(), words.next()) else {
        // No target, or a version: HTTP/1.x heads are not taken over hq.
        return Line::Refuse(400, INVALID);
    };
    // nginx: "client sent invalid method in HTTP/0.9 request".
    if method != "GET" {
        return Line::Refuse(400, "client sent invalid method in HTTP/0.9 request");
    }
    if !target.starts_with('/') || http::Uri::try_from(target).is_err() {
        return Line::Refuse(400, INVALID);
    }
    Line::Get(target.to_string(), end + 1)
}

/// Serves `quic`'s hq streams until the client closes the connection or `stop` resolves
/// (a reload retired the site, or the server drains); then the connection closes once its
/// requests are answered. `handshaken`/`early_used` mark requests taken from 0-RTT data.
pub(super) async fn serve(
    conn: Arc<Conn>,
    quic: quinn::Connection,
    early: (Arc<AtomicBool>, Arc<AtomicBool>),
    stop: impl std::future::Future<Output = ()>,
    send_timeout: Duration,
) {
    let mut requests = tokio::task::JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    let mut closing = false;
    loop {
        tokio::select! {
            s = quic.accept_bi(), if !closing => match s {
                Ok((send, recv)) => {
                    requests.spawn(request(conn.clone(), send, recv, early.clone()));
                }
                Err(_) => break,
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {
                if closing && requests.is_empty() {
                    break;
                }
            }
            _ = &mut stop, if !closing => {
                closing = true;
                if requests.is_empty() {
                    break;
                }
            }
        }
    }
    while requests.join_next().await.is_some() {}
    if closing {
        super::quic::linger(&quic, send_timeout).await;
        quic.close(0u32.into(), b"");
    }
}

/// One stream: the request line, the pipeline, the body.
async fn request(
    conn: Arc<Conn>,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    (handshaken, early_used): (Arc<AtomicBool>, Arc<AtomicBool>),
) {
    let limit = conn
        .sni_server()
        .map_or(8 << 10, |s| s.large_client_header_buffers.1);
    let mut buf = Vec::new();
    let line = loop {
        let fin = match recv.read_chunk(limit + 2, true).await {
            Ok(Some(chunk)) => {
                buf.extend_from_slice(&chunk.bytes);
                false
            }
            Ok(None) => true,
            Err(_) => return,
        };
        match request_line(&buf, fin, limit) {
            Line::More => continue,
            Line::Closed => return,
            l => break l,
        }
    };
    // Nothing more is read: a body or a second line is not HTTP/0.9.
    let _ = recv.stop(0u32.into());
    let (target, length, refused) = match line {
        Line::Get(target, length) => (target, length, None),
        // The pipeline answers the refusal, so it is logged and has its error page.
        Line::Refuse(status, reason) => ("/".to_string(), buf.len(), Some((status, reason))),
        Line::More | Line::Closed => return,
    };
    let mut req = http::Request::new(http_body_util::Empty::<Bytes>::new());
    *req.version_mut() = http::Version::HTTP_09;
    if let Ok(uri) = http::Uri::try_from(target) {
        *req.uri_mut() = uri;
    }
    if let Some((status, reason)) = refused {
        req.extensions_mut()
            .insert(crate::http::conn::FramingRefusal {
                status,
                reason: reason.to_string(),
            });
    }
    if !handshaken.load(Ordering::Acquire) {
        req.extensions_mut()
            .insert(crate::http::pipeline::EarlyData);
        early_used.store(true, Ordering::Relaxed);
    }
    let resp = match crate::http::pipeline::serve(conn, req, Some(length as u64)).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    if resp.status().as_u16() == crate::http::pipeline::CLOSE {
        let _ = send.reset(RESET.into());
        return;
    }
    let mut body = Box::pin(resp.into_body());
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            let _ = send.reset(RESET.into());
            return;
        };
        if let Ok(data) = frame.into_data() {
            if !data.is_empty() && send.write_chunk(data).await.is_err() {
                return;
            }
        }
    }
    // The response is done (and logged) here, not when the client acknowledges it: quinn
    // keeps sending a finished stream's data after its handle is dropped.
    drop(body);
    let _ = send.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_lines() {
        assert_eq!(
            request_line(b"GET /a/b.txt\r\n", true, 100),
            Line::Get("/a/b.txt".into(), 14)
        );
        assert_eq!(
            request_line(b"GET /x?y=1\n", false, 100),
            Line::Get("/x?y=1".into(), 11)
        );
        assert_eq!(request_line(b"GET /a", false, 100), Line::More);
        assert_eq!(request_line(b"GET /a", true, 100), Line::Closed);
        assert_eq!(request_line(b"", true, 100), Line::Closed);
    }

    #[test]
    fn blocks_take_the_protocols_they_speak() {
        let offer = |p: &'static [&'static [u8]]| Some(p.iter().copied());
        assert!(serves(true, false, offer(&[b"h3"])));
        assert!(!serves(false, true, offer(&[b"h3"])));
        assert!(serves(false, true, offer(&[b"h3", b"hq-interop"])));
        assert!(!serves(true, false, offer(&[b"hq-interop"])));
        assert!(!serves(false, false, offer(&[b"h3", b"hq-interop"])));
        assert!(serves(true, false, None::<std::iter::Empty<&[u8]>>));
        assert!(!serves(false, true, None::<std::iter::Empty<&[u8]>>));
    }

    /// The status a refused line gets.
    fn refused(buf: &[u8]) -> Option<u16> {
        match request_line(buf, true, 100) {
            Line::Refuse(s, _) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn refusals() {
        assert_eq!(refused(b"POST /a\r\n"), Some(400));
        assert_eq!(refused(b"HEAD /a\r\n"), Some(400));
        assert_eq!(refused(b"GET / HTTP/1.1\r\n"), Some(400));
        assert_eq!(refused(b"GET\r\n"), Some(400));
        assert_eq!(refused(b"GET a\r\n"), Some(400));
        assert_eq!(refused(b"GET /\xff\r\n"), Some(400));
        assert_eq!(refused(&[b'a'; 101]), Some(414));
        let mut long = b"GET /".to_vec();
        long.extend([b'a'; 200]);
        long.extend(b"\r\n");
        assert_eq!(refused(&long), Some(414));
        assert_eq!(refused(b"GET /ok\r\n"), None);
    }
}
