//! `proxy_send_timeout` under TLS and hyper, on an upstream connection's stream: nginx's
//! meaning, the longest time a write may wait for the upstream to take bytes. A write that
//! stays pending that long fails with `TimedOut`, which the request sees as "upstream timed
//! out ... while sending request to upstream" (504). A slow client body is not the
//! upstream's fault: no write is pending then, so no timer runs.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{sleep, Sleep};

/// A timeout shared by a [`super::upstream::Sender`] and the [`SendTimeout`] under its connection, in
/// milliseconds (nginx's resolution).
#[derive(Debug, Clone, Default)]
pub struct SharedTimeout(Arc<std::sync::atomic::AtomicU64>);

impl SharedTimeout {
    /// A timeout of `d`.
    pub fn new(d: Duration) -> Self {
        let t = Self::default();
        t.set(d);
        t
    }

    /// Sets it to `d`.
    pub fn set(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// The message of the error a [`SendTimeout`] gives.
const SEND_TIMED_OUT: &str = "proxy_send_timeout expired";

/// A stream whose writes fail with `TimedOut` once one has waited `timeout` for the peer
/// (`proxy_send_timeout`). Reads pass through.
pub struct SendTimeout<S> {
    inner: S,
    timeout: SharedTimeout,
    /// Set while a write (or flush) is pending: when it started waiting.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> SendTimeout<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, timeout: SharedTimeout) -> Self {
        Self {
            inner,
            timeout,
            timer: None,
        }
    }

    /// Runs the timer of a write that returned `r`.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(v) => {
                self.timer = None;
                Poll::Ready(v)
            }
            Poll::Pending => {
                let timeout = self.timeout.get();
                let t = self.timer.get_or_insert_with(|| Box::pin(sleep(timeout)));
                if t.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        SEND_TIMED_OUT,
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for SendTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for SendTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Whether hyper's error `e` comes from a [`SendTimeout`] that expired.
pub fn is_send_timeout(e: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::TimedOut && io.to_string() == SEND_TIMED_OUT {
                return true;
            }
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pooled connection's writes run under the timeout set last (the reusing location's
    /// `proxy_send_timeout`), not the one it was opened with.
    #[tokio::test]
    async fn send_timeout_follows_the_shared_value() {
        use tokio::io::AsyncWriteExt;
        let (a, _peer_never_reads) = tokio::io::duplex(64);
        let shared = SharedTimeout::new(Duration::from_secs(60));
        let mut s = SendTimeout::new(a, shared.clone());
        shared.set(Duration::from_millis(200));
        assert_eq!(shared.get(), Duration::from_millis(200));
        // Opened with 60 s: a build that ignored the change would still be waiting at 20 s.
        let r = tokio::time::timeout(Duration::from_secs(20), s.write_all(&[0u8; 1024])).await;
        let e = r
            .expect("the write timed out on the value set last")
            .expect_err("the peer never reads");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
