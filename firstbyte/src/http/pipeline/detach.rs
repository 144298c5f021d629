//! `proxy_ignore_client_abort on` / `fastcgi_ignore_client_abort on`: the exchange with the
//! upstream does not end because the client left. It runs in a task of its own (a request
//! future dropped when the client closes the connection or resets the stream no longer
//! cancels it), and a response body the client stops reading is read to its end and
//! discarded, so the upstream always sees its whole response taken, as with nginx.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::http::body::{Body, BoxBody};
use crate::http::proxy::{Failure, UpstreamVars};

/// What an upstream exchange gives back: the response (or why not) and its `$upstream_*`.
pub(super) type Exchange = (Result<Response<Body>, Failure>, UpstreamVars);

/// Runs `exchange` in its own task and waits for it. `client_failed` resolving first (the
/// client's streamed body broke) ends the exchange: that is the client's error, 400.
pub(super) async fn run<F, W>(exchange: F, client_failed: Option<W>) -> Exchange
where
    F: Future<Output = Exchange> + Send + 'static,
    W: Future<Output = ()>,
{
    let mut task = tokio::spawn(async move {
        let (res, up) = exchange.await;
        (res.map(|r| r.map(drain_on_drop)), up)
    });
    let joined = match client_failed {
        Some(w) => tokio::select! {
            j = &mut task => j,
            () = w => {
                task.abort();
                return (Err(Failure::ClientBody), UpstreamVars::default());
            }
        },
        None => task.await,
    };
    // The task panicked or was cancelled at shutdown: nothing came back from the upstream.
    joined.unwrap_or_else(|_| (Err(Failure::BadGateway), UpstreamVars::default()))
}

/// The body, read to its end (and discarded) if it is dropped before.
fn drain_on_drop(body: Body) -> Body {
    if body.is_end_stream() {
        return body;
    }
    Body::Stream(BoxBody::new(DrainOnDrop { inner: Some(body) }))
}

/// A response body that reads what is left of itself in a task when dropped unfinished.
struct DrainOnDrop {
    /// `None` once it ended (or failed).
    inner: Option<Body>,
}

impl http_body::Body for DrainOnDrop {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.inner = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        let Some(mut body) = self.inner.take() else {
            return;
        };
        if body.is_end_stream() {
            return;
        }
        // The upstream body's own read timeout (`proxy_read_timeout`) bounds the wait.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { while let Some(Ok(_)) = body.frame().await {} });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A body of `left` one-byte frames that counts the frames read.
    struct Counted {
        left: usize,
        read: Arc<AtomicUsize>,
    }

    impl http_body::Body for Counted {
        type Data = bytes::Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            self.left -= 1;
            self.read.fetch_add(1, Ordering::SeqCst);
            Poll::Ready(Some(Ok(Frame::data(bytes::Bytes::from_static(b"x")))))
        }
    }

    fn counted(n: usize, read: Arc<AtomicUsize>) -> Body {
        Body::Stream(BoxBody::new(Counted { left: n, read }))
    }

    #[tokio::test]
    async fn an_unfinished_body_is_read_to_its_end_when_dropped() {
        let read = Arc::new(AtomicUsize::new(0));
        let mut b = drain_on_drop(counted(5, read.clone()));
        let first = b.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "x");
        assert_eq!(read.load(Ordering::SeqCst), 1);
        drop(b);
        for _ in 0..100 {
            if read.load(Ordering::SeqCst) == 5 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(read.load(Ordering::SeqCst), 5, "the rest was drained");
    }

    #[tokio::test]
    async fn the_exchange_survives_its_waiter() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let exchange = async move {
            let _ = rx.await;
            d.fetch_add(1, Ordering::SeqCst);
            (Ok(Response::new(Body::full("ok"))), UpstreamVars::default())
        };
        // The waiter is dropped (the client left) before the upstream answers...
        let waiter = run(exchange, None::<std::future::Pending<()>>);
        let _ = tokio::time::timeout(std::time::Duration::from_millis(10), waiter).await;
        tx.send(()).unwrap();
        for _ in 0..100 {
            if done.load(Ordering::SeqCst) == 1 {
                break;
            }
            tokio::task::yield_now().await;
        }
        // ...and the exchange still ran to its end.
        assert_eq!(done.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_broken_client_body_ends_it_with_400() {
        let exchange = async {
            std::future::pending::<()>().await;
            (Err(Failure::BadGateway), UpstreamVars::default())
        };
        let (res, _) = run(exchange, Some(std::future::ready(()))).await;
        assert_eq!(res.err().map(Failure::status), Some(400));
    }
}
