//! `postpone_output`: a streamed body's small pieces joined into writes of at least that many
//! bytes.
//!
//! nginx's write filter sends nothing while less than `postpone_output` bytes are waiting,
//! unless the chain ends the response or asks for a flush. Each body frame firstbyte hands to
//! the connection is a write, and on TLS a flush that closes the open record: a proxied
//! upstream read in small pieces (or a compressor's output) would go out as as many small
//! writes and records. [`Postpone`] joins the pieces that are ready together until they reach
//! the size, so what the record policy sizes and `TCP_NOTSENT_LOWAT` paces is fuller writes.
//!
//! What it never does is wait: when the source has no piece ready, what is held goes out
//! (nginx's unbuffered proxying flushes each read the same way), and the end of the body
//! always takes the last piece with it. A piece that is already large goes as it is, uncopied.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

/// Pieces at least this large are never copied into the joined buffer: they go as they are
/// (after what was held).
const COPY_MAX: usize = 16 * 1024;

/// A body whose data frames are joined to at least `min` bytes while more is ready.
pub struct Postpone<B> {
    inner: B,
    min: usize,
    held: BytesMut,
    /// A frame that follows the held bytes out (a large piece, or the trailers).
    next: Option<Frame<Bytes>>,
    done: bool,
}

impl<B> Postpone<B> {
    /// `inner` with its pieces joined to at least `min` bytes (`min` > 0).
    pub fn new(inner: B, min: u64) -> Self {
        Postpone {
            inner,
            min: usize::try_from(min).unwrap_or(usize::MAX).max(1),
            held: BytesMut::new(),
            next: None,
            done: false,
        }
    }

    /// Bytes taken from the inner body and not yet given out.
    fn pending(&self) -> u64 {
        let next = match &self.next {
            Some(f) => f.data_ref().map_or(0, Bytes::len),
            None => 0,
        };
        (self.held.len() + next) as u64
    }

    /// The held bytes as one frame.
    fn release(&mut self) -> Frame<Bytes> {
        Frame::data(self.held.split().freeze())
    }
}

impl<B> http_body::Body for Postpone<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if let Some(f) = this.next.take() {
            return Poll::Ready(Some(Ok(f)));
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let data = match frame.into_data() {
                        Ok(d) => d,
                        Err(trailers) => {
                            if this.held.is_empty() {
                                return Poll::Ready(Some(Ok(trailers)));
                            }
                            this.next = Some(trailers);
                            return Poll::Ready(Some(Ok(this.release())));
                        }
                    };
                    if data.is_empty() {
                        continue;
                    }
                    if this.held.is_empty() && data.len() >= this.min {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    if data.len() >= COPY_MAX {
                        this.next = Some(Frame::data(data));
                        return Poll::Ready(Some(Ok(this.release())));
                    }
                    this.held.extend_from_slice(&data);
                    if this.held.len() >= this.min {
                        return Poll::Ready(Some(Ok(this.release())));
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    if this.held.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(this.release())));
                }
                // Nothing more ready: what is held goes now, not when more comes.
                Poll::Pending if !this.held.is_empty() => {
                    return Poll::Ready(Some(Ok(this.release())));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && self.next.is_none() && (self.done || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.done {
            return SizeHint::with_exact(self.pending());
        }
        let inner = self.inner.size_hint();
        let pending = self.pending();
        let mut h = SizeHint::new();
        h.set_lower(inner.lower().saturating_add(pending));
        if let Some(u) = inner.upper() {
            h.set_upper(u.saturating_add(pending));
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::VecDeque;

    /// A body that gives its frames one by one, with `Pending` where a `None` stands.
    struct Script {
        steps: VecDeque<Option<Frame<Bytes>>>,
    }

    impl http_body::Body for Script {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            match self.steps.pop_front() {
                None => Poll::Ready(None),
                Some(Some(f)) => Poll::Ready(Some(Ok(f))),
                Some(None) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
        }
    }

    fn data(s: &str) -> Option<Frame<Bytes>> {
        Some(Frame::data(Bytes::copy_from_slice(s.as_bytes())))
    }

    /// The frames `body` gives, data as text, trailers as `[trailers]`.
    async fn frames(mut body: Postpone<Script>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(f) = body.frame().await {
            let f = f.unwrap();
            match f.into_data() {
                Ok(d) => out.push(String::from_utf8(d.to_vec()).unwrap()),
                Err(_) => out.push("[trailers]".into()),
            }
        }
        out
    }

    #[tokio::test]
    async fn ready_pieces_are_joined_to_the_size() {
        let steps = ["ab", "cd", "ef", "gh", "ij"].map(data).into();
        let got = frames(Postpone::new(Script { steps }, 4)).await;
        assert_eq!(got, ["abcd", "efgh", "ij"]);
    }

    #[tokio::test]
    async fn held_bytes_go_when_the_source_waits() {
        let steps = vec![data("ab"), None, data("cd"), data("ef"), None, data("g")].into();
        let got = frames(Postpone::new(Script { steps }, 100)).await;
        assert_eq!(got, ["ab", "cdef", "g"]);
    }

    #[tokio::test]
    async fn large_pieces_pass_and_trailers_follow_the_held_bytes() {
        let big = "x".repeat(COPY_MAX);
        let mut t = http::HeaderMap::new();
        t.insert("x-t", http::HeaderValue::from_static("1"));
        let steps = vec![
            data("abcdefgh"),
            data("a"),
            data(&big),
            data("b"),
            Some(Frame::trailers(t)),
        ]
        .into();
        let got = frames(Postpone::new(Script { steps }, 4)).await;
        assert_eq!(got, ["abcdefgh".to_string(), "a".into(), big, "b".into(), "[trailers]".into()]);
    }

    #[tokio::test]
    async fn the_size_hint_counts_what_is_held() {
        let body = http_body_util::Full::new(Bytes::from_static(b"abc"));
        let p = Postpone::new(body, 10);
        assert_eq!(http_body::Body::size_hint(&p).exact(), Some(3));
        let got: Vec<u8> = p.collect().await.unwrap().to_bytes().to_vec();
        assert_eq!(got, b"abc");
    }
}
