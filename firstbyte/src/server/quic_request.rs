//! An HTTP/3 request's head and body as the request contract (`http::contract`) takes them:
//! the head h3 decoded is checked for the fields HTTP/3 forbids and its declared length,
//! `:authority` becomes its `Host` when it sent none, and its body is counted against that
//! length as it is read. A request in early data that is a GET or HEAD without a length has
//! its stream read to its end first (one DATA frame at most), so that the early-data rule
//! knows whether a body came.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};

use crate::http::conn::Conn;
use crate::http::contract;

/// A request stream's two halves as h3 gives them.
type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;
type SendHalf = h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// The request's head, its body and the stream's sending half; None when the head is
/// malformed (the stream is reset with H3_MESSAGE_ERROR: RFC 9114 §4.1.2, as HTTP/2 resets
/// such a stream). `early`: the request came in TLS early data.
pub(super) async fn head(
    conn: &Conn,
    req: http::Request<()>,
    mut stream: Stream,
    early: bool,
) -> Option<(http::request::Parts, RecvBody, SendHalf)> {
    let (mut parts, ()) = req.into_parts();
    // A connection-specific field or a `content-length` that is no length (RFC 9114 §4.2).
    let declared = match contract::refused_field(&parts.headers)
        .map_or_else(|| contract::declared_length(&parts.headers), Err)
    {
        Ok(l) => l,
        Err(why) => {
            crate::fblog!(
                Info,
                "client sent a malformed HTTP/3 request ({}), client: {}",
                match why {
                    contract::Malformed::ConnectionSpecific => "a connection-specific field",
                    contract::Malformed::ContentLength => "an invalid \"content-length\"",
                },
                conn.client_ip()
            );
            stream.stop_stream(h3::error::Code::H3_MESSAGE_ERROR);
            stream.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
            return None;
        }
    };
    // `:authority` is the `Host` of a request that sent none (h3 puts either in the URI).
    if let Some(a) = parts.uri.authority() {
        if !parts.headers.contains_key(http::header::HOST) {
            if let Ok(v) = http::HeaderValue::from_str(a.as_str()) {
                contract::authority_as_host(&mut parts.headers, v);
            }
        }
    }
    let (send, recv) = stream.split();
    let mut body = RecvBody {
        recv,
        length: contract::BodyLength::new(declared),
        ahead: None,
        done: false,
        polled: false,
    };
    let safe_method = parts.method == http::Method::GET || parts.method == http::Method::HEAD;
    if early && safe_method && declared.unwrap_or(0) == 0 {
        let limit = conn.first_server().default_location.client_body_timeout;
        let _ = tokio::time::timeout(limit, body.read_ahead()).await;
    }
    Some((parts, body, send))
}

/// A request body read from its HTTP/3 stream, its DATA counted against its declared
/// `content-length` (the request contract's [`contract::BodyLength`]): more, or a stream
/// that ends short, fails the body (400 to a service that reads it) and stops the client's
/// sending (H3_MESSAGE_ERROR).
pub(super) struct RecvBody {
    recv: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    length: contract::BodyLength,
    /// The first frame, read ahead of the service (see [`RecvBody::read_ahead`]).
    ahead: Option<Result<Bytes, BoxError>>,
    done: bool,
    /// Whether it was ever polled (see its `Drop`).
    polled: bool,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl RecvBody {
    /// Reads the first DATA frame or the stream's end before the service starts.
    async fn read_ahead(&mut self) {
        use http_body::Body as _;
        let first = std::future::poll_fn(|cx| Pin::new(&mut *self).poll_frame(cx)).await;
        if let Some(r) = first {
            self.ahead = Some(r.map(|f| f.into_data().unwrap_or_default()));
        }
    }

    /// The body is malformed: the client stops sending it.
    fn malformed(&mut self) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        self.done = true;
        self.recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        Poll::Ready(Some(Err(Box::new(contract::LengthMismatch))))
    }
}

impl http_body::Body for RecvBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(r) = self.ahead.take() {
            return Poll::Ready(Some(r.map(http_body::Frame::data)));
        }
        if self.done {
            return Poll::Ready(None);
        }
        self.polled = true;
        match std::task::ready!(self.recv.poll_recv_data(cx)) {
            Ok(Some(mut b)) => {
                let bytes = b.copy_to_bytes(b.remaining());
                if self.length.feed(bytes.len()).is_err() {
                    return self.malformed();
                }
                Poll::Ready(Some(Ok(http_body::Frame::data(bytes))))
            }
            Ok(None) => {
                if self.length.end().is_err() {
                    return self.malformed();
                }
                self.done = true;
                Poll::Ready(None)
            }
            Err(e) => {
                self.done = true;
                Poll::Ready(Some(Err(Box::new(e))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.ahead.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match (&self.ahead, self.done, self.length.left()) {
            (Some(_), _, _) => http_body::SizeHint::default(),
            (None, true, _) => http_body::SizeHint::with_exact(0),
            (None, false, Some(left)) => http_body::SizeHint::with_exact(left),
            (None, false, None) => http_body::SizeHint::default(),
        }
    }
}

/// A body the service did not read asks the client to stop sending with H3_NO_ERROR (RFC 9114
/// §4.1.2: a complete response before the whole request), instead of the 0 quinn says when an
/// unread stream is dropped (no HTTP/3 code). quinn sends it even when the request's end is
/// already in (a GET's FIN): a stream is stopped unless it was read to its end.
///
/// A body polled and left unfinished keeps quinn's 0: once polled, h3-quinn may hold quinn's
/// stream inside a pending read, where its `stop_sending` would panic.
impl Drop for RecvBody {
    fn drop(&mut self) {
        if !self.polled {
            self.recv.stop_sending(h3::error::Code::H3_NO_ERROR);
        }
    }
}
