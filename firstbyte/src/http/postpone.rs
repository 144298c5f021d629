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
//! Pieces read together do not reach it together: a proxied body's come through the upstream
//! connection's task one at a time. So while less than the size is held and the source has
//! nothing ready, the held bytes wait for more — but never longer than [`HOLD`] (nginx holds
//! them until more comes, however long). The end of the body always takes the last piece with
//! it at once. A piece that is already large goes as it is, uncopied. An unbuffered upstream
//! body ([`Unbuffered`]: `proxy_buffering off`, firstbyte's default) is never held: nginx
//! flushes each of its reads, and its first bytes should reach the client at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Frame, SizeHint};

/// A response extension: an upstream body sent as it is read (`proxy_buffering off`,
/// `fastcgi_buffering off`). nginx flushes each such read, so `postpone_output` never holds
/// it; nor does firstbyte, whose proxying is unbuffered by default.
#[derive(Debug, Clone, Copy)]
pub struct Unbuffered;

/// The longest held bytes wait for more.
pub const HOLD: Duration = Duration::from_millis(1);

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
    /// When the held bytes go even if no more come.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
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
            deadline: None,
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
        self.deadline = None;
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
                    // The last piece goes at once: the end waits for nothing.
                    if this.held.len() >= this.min || this.inner.is_end_stream() {
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
                // Nothing ready: the held bytes wait for more, up to `HOLD`.
                Poll::Pending if !this.held.is_empty() => {
                    let deadline = this
                        .deadline
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(HOLD)));
                    if deadline.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
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

    /// A body that gives its frames one by one. A `None` step is `Pending`: woken at once
    /// (more is on its way), or, after the step list's `Stall`, never (the source waits).
    struct Script {
        steps: VecDeque<Option<Frame<Bytes>>>,
        stall_at: Option<usize>,
        polled: usize,
    }

    impl Script {
        fn new(steps: Vec<Option<Frame<Bytes>>>) -> Self {
            Script {
                steps: steps.into(),
                stall_at: None,
                polled: 0,
            }
        }
    }

    impl http_body::Body for Script {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.stall_at == Some(self.steps.len()) {
                // Stalled for two polls: the first, and the one the hold's end makes.
                self.polled += 1;
                if self.polled <= 2 {
                    return Poll::Pending;
                }
                self.stall_at = None;
            }
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
        let got = frames(Postpone::new(Script::new(steps), 4)).await;
        assert_eq!(got, ["abcd", "efgh", "ij"]);
    }

    #[tokio::test]
    async fn pieces_that_come_soon_are_joined_and_the_end_takes_the_rest() {
        let steps = vec![
            data("ab"),
            None,
            data("cd"),
            None,
            None,
            data("ef"),
            data("g"),
        ];
        let got = frames(Postpone::new(Script::new(steps), 100)).await;
        assert_eq!(got, ["abcdefg"]);
    }

    #[tokio::test(start_paused = true)]
    async fn held_bytes_wait_no_longer_than_the_hold() {
        // The source stalls after "ab" (nothing wakes it): "ab" goes when the hold ends.
        let mut script = Script::new(vec![data("ab"), data("cd")]);
        script.stall_at = Some(1);
        let start = tokio::time::Instant::now();
        let mut body = Postpone::new(script, 100);
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"ab");
        assert_eq!(start.elapsed(), HOLD);
        let rest = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&rest[..], b"cd");
        assert!(body.frame().await.is_none());
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
        ];
        let got = frames(Postpone::new(Script::new(steps), 4)).await;
        assert_eq!(
            got,
            [
                "abcdefgh".to_string(),
                "a".into(),
                big,
                "b".into(),
                "[trailers]".into()
            ]
        );
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
