//! Upgraded connections (WebSocket): after a `101 Switching Protocols`, the client's and the
//! upstream's connections are joined and bytes are copied both ways until either side ends.
//!
//! As nginx: the tunnel is a client connection for `worker_connections` and stub_status'
//! "Active connections" while it lives ([`Slot`]: the client connection's own count ends when
//! hyper hands the socket over), and it is closed when neither side sent anything for
//! `proxy_read_timeout` (nginx re-arms the upstream read timer on every event in either
//! direction of `ngx_http_upstream_process_upgraded`; "upstream timed out ... while
//! proxying upgraded connection").

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::http::Shared;

/// The client side of an upgrade request, and the process state its tunnel counts in.
pub struct ClientUpgrade {
    /// hyper's handle on the client connection once the 101 is sent.
    pub on: OnUpgrade,
    /// Where the tunnel counts as an active connection.
    pub shared: Arc<Shared>,
}

/// One active connection in the process's count while it lives.
struct Slot(Arc<Shared>);

impl Slot {
    fn new(shared: Arc<Shared>) -> Self {
        shared.stats.active.fetch_add(1, Ordering::Relaxed);
        Slot(shared)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.stats.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// When a tunnel last moved a byte, in milliseconds since it started.
#[derive(Clone)]
struct Last {
    start: Instant,
    ms: Arc<AtomicU64>,
}

impl Last {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            ms: Arc::default(),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ms.store(ms, Ordering::Relaxed);
    }

    fn at(&self) -> Instant {
        self.start + Duration::from_millis(self.ms.load(Ordering::Relaxed))
    }
}

/// Whether an idle tunnel is to be closed: `timeout` after the last byte moved. `Err`: not
/// yet; the caller sleeps until the returned deadline and asks again.
fn expired(last: Instant, timeout: Duration, now: Instant) -> Result<(), Instant> {
    let deadline = last + timeout;
    if now >= deadline {
        Ok(())
    } else {
        Err(deadline)
    }
}

/// A stream that records when it read bytes, and counts what is written to it.
struct Watched<S> {
    inner: S,
    last: Last,
    written: Arc<AtomicU64>,
}

/// The end of a tunnel: resolves, once both sides are done, with the bytes it sent to the
/// client (the access log's `$body_bytes_sent` of the upgraded request, as nginx). Kept in
/// the 101 response's extensions until the access log takes it.
#[derive(Clone)]
pub struct TunnelEnd(pub Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Receiver<u64>>>>);

impl TunnelEnd {
    /// The receiver (None once taken).
    pub fn take(&self) -> Option<tokio::sync::oneshot::Receiver<u64>> {
        self.0.lock().ok()?.take()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.last.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Joins the client and the upstream once both sides are upgraded; runs on its own task.
/// The end it gives resolves when the tunnel closes.
pub fn spawn(client: ClientUpgrade, upstream: OnUpgrade, read_timeout: Duration) -> TunnelEnd {
    let slot = Slot::new(client.shared);
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _slot = slot;
        let to_client = Arc::new(AtomicU64::new(0));
        let _end = SendOnDrop(Some(tx), to_client.clone());
        let (Ok(c), Ok(u)) = (client.on.await, upstream.await) else {
            return;
        };
        let last = Last::new();
        let mut c = Watched {
            inner: TokioIo::new(c),
            last: last.clone(),
            written: to_client,
        };
        let mut u = Watched {
            inner: TokioIo::new(u),
            last: last.clone(),
            written: Arc::default(),
        };
        let idle = async {
            loop {
                match expired(last.at(), read_timeout, Instant::now()) {
                    Ok(()) => return,
                    Err(deadline) => tokio::time::sleep_until(deadline).await,
                }
            }
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut c, &mut u) => {}
            () = idle => {
                crate::fblog!(
                    Error,
                    "upstream timed out (110: Connection timed out) while proxying upgraded connection"
                );
            }
        }
    });
    TunnelEnd(Arc::new(std::sync::Mutex::new(Some(rx))))
}

/// Sends the count when the tunnel's task ends, however it ends.
struct SendOnDrop(Option<tokio::sync::oneshot::Sender<u64>>, Arc<AtomicU64>);

impl Drop for SendOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(self.1.load(Ordering::Relaxed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_deadline_follows_the_last_byte() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(expired(t0, s, t0), Err(t0 + s));
        assert_eq!(expired(t0, s, t0 + Duration::from_millis(999)), Err(t0 + s));
        assert_eq!(expired(t0, s, t0 + s), Ok(()));
        // A later byte moves the deadline.
        let later = t0 + Duration::from_millis(800);
        assert_eq!(expired(later, s, t0 + s), Err(later + s));
    }

    #[tokio::test]
    async fn reads_touch_the_clock() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (a, mut b) = tokio::io::duplex(64);
        let last = Last::new();
        let written = Arc::new(AtomicU64::new(0));
        let mut w = Watched {
            inner: a,
            last: last.clone(),
            written: written.clone(),
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        let before = last.at();
        b.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 1];
        w.read_exact(&mut buf).await.unwrap();
        assert!(last.at() > before, "a read moved the clock");
        // Writes do not (only bytes that arrive count, as nginx's read timer).
        let at = last.at();
        tokio::time::sleep(Duration::from_millis(30)).await;
        w.write_all(b"y").await.unwrap();
        assert_eq!(last.at(), at);
        assert_eq!(written.load(Ordering::Relaxed), 1, "writes are counted");
    }
}
