//! Fit the first response into the initial window: hold the TLS 1.3 session tickets (and an
//! HTTP/2 server preface) until the first response is ready, then send them together.
//!
//! A TLS 1.3 server sends its NewSessionTicket messages the moment the handshake completes.
//! Written on their own they leave as one small packet; an HTTP/2 server's SETTINGS frame
//! makes another; then the response follows. Each small packet takes a slot of the initial
//! congestion window (10 segments), so a 10 KB response that would fit needs one more round
//! trip (nginx: 11 packets). [`HoldStream`] sits between rustls and the socket and watches the
//! TLS records written:
//!
//! - Writes that carry any handshake-layer record (ServerHello, TLS 1.2's flights, alerts) pass
//!   at once, whole: the server's handshake flight is never held, whatever the chain size.
//! - Once the flight has passed, writes made only of application-data records (TLS 1.3
//!   tickets, and anything the application writes before its first response) are held.
//! - The application calls [`Release::release`] when its first response is ready; the next
//!   flush sends everything held in one write, ahead of the response, and the stream becomes
//!   a plain pass-through (one branch per call) for the rest of the connection.
//! - Nothing is held longer than [`MAX_HOLD`]: a slow first response (a proxied upstream, a
//!   request body that needs an HTTP/2 WINDOW_UPDATE) gets its tickets and preface on time.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest anything is held: 10 ms, far below a WAN round trip (what holding saves) and
/// far above the time a static response takes to produce (what it waits for).
pub const MAX_HOLD: Duration = Duration::from_millis(10);

/// TLS record content type of application data (and of every TLS 1.3 encrypted record).
const APPLICATION_DATA: u8 = 23;

/// Lets the application say its first response is ready.
#[derive(Debug, Clone, Default)]
pub struct Release(Arc<AtomicBool>);

impl Release {
    /// A fresh signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// The first response is ready: the next flush sends what is held.
    pub fn release(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn released(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Where the writer is in the TLS record stream (records can straddle writes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Records {
    /// Bytes of the current record's body still to come.
    body_left: usize,
    /// Header bytes seen of a header split across writes.
    header: [u8; 5],
    header_len: usize,
}

impl Records {
    /// Whether `bytes` starts on a record boundary and holds only whole application-data
    /// records.
    fn only_whole_app_data(&self, bytes: &[&[u8]]) -> bool {
        if self.body_left != 0 || self.header_len != 0 {
            return false;
        }
        let mut probe = *self;
        let mut any = false;
        for b in bytes {
            let mut i = 0;
            while i < b.len() {
                if probe.body_left > 0 {
                    let n = probe.body_left.min(b.len() - i);
                    probe.body_left -= n;
                    i += n;
                    continue;
                }
                probe.header[probe.header_len] = b[i];
                probe.header_len += 1;
                i += 1;
                if probe.header_len == 5 {
                    if probe.header[0] != APPLICATION_DATA {
                        return false;
                    }
                    any = true;
                    probe.body_left =
                        usize::from(u16::from_be_bytes([probe.header[3], probe.header[4]]));
                    probe.header_len = 0;
                }
            }
        }
        any && probe.body_left == 0 && probe.header_len == 0
    }

    /// Advances past `n` bytes of `bytes` (what the socket accepted); returns whether a
    /// non-application record header was among them.
    fn advance(&mut self, bytes: &[&[u8]], mut n: usize) -> bool {
        let mut handshake = false;
        for b in bytes {
            let take = n.min(b.len());
            let mut i = 0;
            while i < take {
                if self.body_left > 0 {
                    let k = self.body_left.min(take - i);
                    self.body_left -= k;
                    i += k;
                    continue;
                }
                self.header[self.header_len] = b[i];
                self.header_len += 1;
                i += 1;
                if self.header_len == 5 {
                    handshake |= self.header[0] != APPLICATION_DATA;
                    self.body_left =
                        usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                    self.header_len = 0;
                }
            }
            n -= take;
            if n == 0 {
                break;
            }
        }
        handshake
    }
}

enum State {
    /// Before the handshake flight: everything passes, records are tracked.
    Watching { records: Records, flight_sent: bool },
    /// Holding application-data records until release or the deadline.
    Holding {
        held: Vec<u8>,
        sent: usize,
        /// Where the first bytes written after the release begin (the response).
        response_at: Option<usize>,
        deadline: Pin<Box<tokio::time::Sleep>>,
    },
    /// Pass-through for the rest of the connection.
    Passing,
}

/// A socket wrapper that holds post-handshake TLS records until the first response (see the
/// module docs).
pub struct HoldStream<S> {
    inner: S,
    state: State,
    release: Release,
}

impl<S> HoldStream<S> {
    /// Wraps `inner`; `release` is shared with the HTTP layer.
    pub fn new(inner: S, release: Release) -> Self {
        Self {
            inner,
            state: State::Watching {
                records: Records::default(),
                flight_sent: false,
            },
            release,
        }
    }

    /// A wrapper that never holds (TLS 1.2-only servers, tests).
    pub fn passing(inner: S) -> Self {
        Self {
            inner,
            state: State::Passing,
            release: Release::new(),
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        match &self.state {
            State::Holding { held, sent, .. } => held.len() - sent,
            _ => 0,
        }
    }
}

impl<S: AsyncWrite + Unpin> HoldStream<S> {
    /// Writes out what is held; `Ready(Ok)` once all of it is with the socket.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let State::Holding { held, sent, .. } = &mut self.state {
            while *sent < held.len() {
                match Pin::new(&mut self.inner).poll_write(cx, &held[*sent..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *sent += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            self.state = State::Passing;
        }
        Poll::Ready(Ok(()))
    }

    fn write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        match &mut self.state {
            State::Passing => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
            State::Holding {
                held, response_at, ..
            } => {
                if response_at.is_none() && self.release.released() {
                    *response_at = Some(held.len());
                }
                for b in bufs {
                    held.extend_from_slice(b);
                }
                Poll::Ready(Ok(total))
            }
            State::Watching {
                records,
                flight_sent,
            } => {
                let slices: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
                if *flight_sent && !self.release.released() && records.only_whole_app_data(&slices)
                {
                    let mut held = Vec::with_capacity(total.max(1024));
                    for b in &slices {
                        held.extend_from_slice(b);
                    }
                    self.state = State::Holding {
                        held,
                        sent: 0,
                        response_at: None,
                        deadline: Box::pin(tokio::time::sleep(MAX_HOLD)),
                    };
                    // Arm the deadline's waker on this task.
                    if let State::Holding { deadline, .. } = &mut self.state {
                        let _ = deadline.as_mut().poll(cx);
                    }
                    return Poll::Ready(Ok(total));
                }
                let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
                if let Poll::Ready(Ok(n)) = &r {
                    if records.advance(&slices, *n) {
                        *flight_sent = true;
                    }
                    if self.release.released() && *flight_sent {
                        self.state = State::Passing;
                    }
                }
                r
            }
        }
    }

    /// Releases on a flush once response bytes (written after [`Release::release`]) are held
    /// — a flush before them (a writer emptying its pipe ahead of the first record) keeps
    /// holding — or when the deadline passed.
    fn poll_release(&mut self, cx: &mut Context<'_>, flushing: bool) -> Poll<io::Result<()>> {
        let due = match &mut self.state {
            State::Holding {
                held,
                response_at,
                deadline,
                ..
            } => {
                let response_held = response_at.is_some_and(|at| held.len() > at);
                (flushing && response_held) || deadline.as_mut().poll(cx).is_ready()
            }
            _ => false,
        };
        if due {
            self.poll_drain(cx)
        } else {
            Poll::Ready(Ok(()))
        }
    }
}

use std::future::Future;

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for HoldStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // The deadline is checked whenever the connection waits for input, which is where an
        // idle HTTP/2 connection sits while a slow first response is produced.
        if let Poll::Ready(Err(e)) = this.poll_release(cx, false) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HoldStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_release(cx, true) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        if matches!(this.state, State::Holding { .. }) {
            // Held on purpose: the caller's flush is satisfied; the bytes go with the response.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn record(kind: u8, len: usize) -> Vec<u8> {
        let mut v = vec![kind, 3, 3, (len >> 8) as u8, len as u8];
        v.extend(std::iter::repeat_n(0xAB, len));
        v
    }

    #[test]
    fn record_classification() {
        let r = Records::default();
        let app = record(23, 100);
        let hs = record(22, 50);
        assert!(r.only_whole_app_data(&[&app]));
        assert!(r.only_whole_app_data(&[&app[..3], &app[3..]]));
        assert!(!r.only_whole_app_data(&[&app[..50]]), "partial record");
        assert!(!r.only_whole_app_data(&[&hs]));
        assert!(!r.only_whole_app_data(&[&app, &hs]));
        let mut t = Records::default();
        assert!(t.advance(&[&hs], hs.len()));
        assert_eq!(
            (t.body_left, t.header_len),
            (0, 0),
            "aligned after a whole record"
        );
        // Half a record written: not aligned afterwards.
        assert!(!t.advance(&[&app], 40));
        assert!(!t.only_whole_app_data(&[&app]));
        assert!(!t.advance(&[&app[40..]], app.len() - 40));
        assert!(t.only_whole_app_data(&[&app]));
    }

    /// A socket that records each write call.
    #[derive(Default)]
    struct Sink {
        writes: Vec<Vec<u8>>,
    }
    impl AsyncWrite for Sink {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().writes.push(b.to_vec());
            Poll::Ready(Ok(b.len()))
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let v: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = v.len();
            self.get_mut().writes.push(v);
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn tickets_wait_for_the_first_response() {
        let release = Release::new();
        let mut s = HoldStream::new(Sink::default(), release.clone());
        let flight = [record(22, 90), record(20, 1), record(23, 700)].concat();
        s.write_all(&flight).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.inner.writes.len(), 1, "the flight passes at once, whole");
        let tickets = record(23, 400);
        s.write_all(&tickets).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.inner.writes.len(), 1, "tickets held");
        let settings = record(23, 40);
        s.write_all(&settings).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.held(), 450);
        release.release();
        s.flush().await.unwrap();
        assert_eq!(s.held(), 450, "a flush before the response keeps holding");
        let response = record(23, 10_000);
        s.write_all(&response).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(
            s.inner.writes.len(),
            2,
            "tickets, preface and response in one write"
        );
        assert_eq!(s.inner.writes[1], [tickets, settings, response].concat());
        s.write_all(&record(23, 5)).await.unwrap();
        assert_eq!(s.inner.writes.len(), 3, "pass-through afterwards");
    }

    #[tokio::test]
    async fn nothing_is_held_past_the_deadline() {
        let mut s = HoldStream::new(Sink::default(), Release::new());
        s.write_all(&record(22, 10)).await.unwrap();
        s.write_all(&record(23, 10)).await.unwrap();
        assert_eq!(s.held(), 15);
        // The deadline is a lower bound: after it, a flush must send what was held.
        tokio::time::sleep(MAX_HOLD + Duration::from_millis(5)).await;
        s.flush().await.unwrap();
        assert_eq!(s.held(), 0);
        assert_eq!(s.inner.writes.len(), 2);
    }

    #[tokio::test]
    async fn a_tls12_final_flight_is_never_held() {
        let mut s = HoldStream::new(Sink::default(), Release::new());
        s.write_all(&record(22, 300)).await.unwrap();
        // NewSessionTicket (22), ChangeCipherSpec (20), Finished (22, encrypted).
        let fin = [record(22, 200), record(20, 1), record(22, 40)].concat();
        s.write_all(&fin).await.unwrap();
        assert_eq!(s.inner.writes.len(), 2);
        assert_eq!(s.held(), 0);
    }
}
