//! A request body on an HTTP/2 stream, as the service reads it: the DATA the connection has
//! received for the stream, queued, with the bytes the service has taken counted so that the
//! connection returns that much flow-control credit (WINDOW_UPDATE) on its next turn. At
//! most one stream window (`h2limits::INITIAL_STREAM_WINDOW`) is ever queued.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// The stream was reset before its request body ended.
#[derive(Debug)]
pub struct StreamReset;

impl std::fmt::Display for StreamReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HTTP/2 stream reset before the request body ended")
    }
}

impl std::error::Error for StreamReset {}

/// The body's DATA did not add up to its `content-length` (nginx's 400): the request
/// contract's error, shared with HTTP/3.
pub use crate::http::contract::LengthMismatch as BadLength;

/// What the connection and the body share.
#[derive(Default)]
pub struct Queue {
    chunks: VecDeque<Bytes>,
    /// Bytes queued.
    queued: usize,
    /// Bytes the service took since the connection last asked.
    consumed: usize,
    end: bool,
    reset: bool,
    bad_length: bool,
    /// The service has read from the body.
    polled: bool,
    waker: Option<Waker>,
}

/// The connection's handle on a stream's body queue.
pub type Shared = Arc<Mutex<Queue>>;

fn lock(q: &Shared) -> std::sync::MutexGuard<'_, Queue> {
    q.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds received data (and the body's end).
pub fn push(q: &Shared, data: Bytes, end: bool) {
    let mut g = lock(q);
    g.queued += data.len();
    if !data.is_empty() {
        g.chunks.push_back(data);
    }
    g.end |= end;
    if let Some(w) = g.waker.take() {
        w.wake();
    }
}

/// The stream is gone: the body fails unless it had ended.
pub fn reset(q: &Shared) {
    let mut g = lock(q);
    g.reset = true;
    if let Some(w) = g.waker.take() {
        w.wake();
    }
}

/// The body's length was wrong: it fails after what was queued.
pub fn bad_length(q: &Shared) {
    let mut g = lock(q);
    g.bad_length = true;
    if let Some(w) = g.waker.take() {
        w.wake();
    }
}

/// The body's length was wrong and the service never read from it: its answer is a
/// PROTOCOL_ERROR reset instead (nothing will report the error).
pub fn unread_bad_length(q: &Shared) -> bool {
    let g = lock(q);
    g.bad_length && !g.polled
}

/// Whether the service has read from the body.
pub fn was_read(q: &Shared) -> bool {
    lock(q).polled
}

/// Bytes taken by the service since the last call.
pub fn take_consumed(q: &Shared) -> usize {
    std::mem::take(&mut lock(q).consumed)
}

/// Bytes received and never taken (given back when the stream ends).
pub fn unread(q: &Shared) -> usize {
    let g = lock(q);
    g.queued + g.consumed
}

/// The request body handed to the service.
pub struct RecvBody {
    queue: Option<Shared>,
    length: Option<u64>,
    /// The body's end was read: until then a body the HEADERS announced is not ended, even
    /// an empty one whose END_STREAM came at once (nginx sends it as `Content-Length: 0`).
    done: bool,
}

impl RecvBody {
    /// A body read from `queue` (`None`: the request had none), of `length` bytes if the
    /// request says.
    pub fn new(queue: Option<Shared>, length: Option<u64>) -> Self {
        RecvBody {
            queue,
            length,
            done: false,
        }
    }
}

impl http_body::Body for RecvBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let Some(q) = &this.queue else {
            return Poll::Ready(None);
        };
        let mut g = lock(q);
        g.polled = true;
        if let Some(c) = g.chunks.pop_front() {
            g.queued -= c.len();
            g.consumed += c.len();
            return Poll::Ready(Some(Ok(Frame::data(c))));
        }
        if g.bad_length {
            return Poll::Ready(Some(Err(Box::new(BadLength))));
        }
        if g.end {
            drop(g);
            this.done = true;
            return Poll::Ready(None);
        }
        if g.reset {
            return Poll::Ready(Some(Err(Box::new(StreamReset))));
        }
        if !g.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            g.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.queue.is_none() || self.done
    }

    fn size_hint(&self) -> SizeHint {
        match (self.length, &self.queue) {
            (_, None) => SizeHint::with_exact(0),
            (Some(l), _) => SizeHint::with_exact(l),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[test]
    fn data_flows_and_consumption_is_counted() {
        let q: Shared = Arc::default();
        let mut b = RecvBody::new(Some(q.clone()), Some(5));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(Pin::new(&mut b).poll_frame(&mut cx).is_pending());
        push(&q, Bytes::from_static(b"abc"), false);
        push(&q, Bytes::from_static(b"de"), true);
        assert_eq!(unread(&q), 5);
        let Poll::Ready(Some(Ok(f))) = Pin::new(&mut b).poll_frame(&mut cx) else {
            panic!("data");
        };
        assert_eq!(f.into_data().unwrap(), "abc");
        assert_eq!(take_consumed(&q), 3);
        assert_eq!(take_consumed(&q), 0);
        assert!(!b.is_end_stream());
        assert!(Pin::new(&mut b).poll_frame(&mut cx).is_ready());
        assert!(!b.is_end_stream(), "ended once its end is read");
        assert!(matches!(
            Pin::new(&mut b).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
    }

    #[test]
    fn an_empty_announced_body_is_a_body_and_a_bad_length_fails() {
        let q: Shared = Arc::default();
        let mut b = RecvBody::new(Some(q.clone()), None);
        let mut cx = Context::from_waker(Waker::noop());
        push(&q, Bytes::new(), true);
        assert!(
            !b.is_end_stream(),
            "HEADERS without END_STREAM: a body, if empty"
        );
        assert!(matches!(
            Pin::new(&mut b).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
        assert!(b.is_end_stream());
        let q: Shared = Arc::default();
        let mut b = RecvBody::new(Some(q.clone()), Some(10));
        push(&q, Bytes::from_static(b"0123"), false);
        bad_length(&q);
        assert!(matches!(
            Pin::new(&mut b).poll_frame(&mut cx),
            Poll::Ready(Some(Ok(_)))
        ));
        let Poll::Ready(Some(Err(e))) = Pin::new(&mut b).poll_frame(&mut cx) else {
            panic!("bad length");
        };
        assert!(crate::http::body::is_client_body_error(e.as_ref()));
    }

    #[test]
    fn a_reset_fails_an_unfinished_body() {
        let q: Shared = Arc::default();
        let mut b = RecvBody::new(Some(q.clone()), None);
        let mut cx = Context::from_waker(Waker::noop());
        push(&q, Bytes::from_static(b"a"), false);
        reset(&q);
        assert!(matches!(
            Pin::new(&mut b).poll_frame(&mut cx),
            Poll::Ready(Some(Ok(_)))
        ));
        assert!(matches!(
            Pin::new(&mut b).poll_frame(&mut cx),
            Poll::Ready(Some(Err(_)))
        ));
        let empty = RecvBody::new(None, None);
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));
    }
}
