//! The connection whose handshake step runs on this thread.
//!
//! rustls calls the ticketer, the session cache and the key log synchronously inside a step
//! of a handshake — processing the ClientHello, or one poll of the rest of it — and tells
//! them nothing of the connection. The accept path makes the connection's [`HandshakeCx`]
//! the thread's current one around each step ([`HandshakeCx::run`],
//! [`HandshakeCx::polling`]): one thread-local slot, the context moved in before the step
//! and back out after it (a panic included), where the wrappers find what they keep for the
//! connection — its `$ssl_session_id` state ([`super::session_id`]) and, with kernel TLS,
//! the client's traffic secret ([`super::ktls::rx::capture`]). Outside a step (QUIC's
//! handshakes, driven by quinn) there is no current context and the wrappers keep nothing.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::crypto::tls13::OkmBlock;

use super::session_id;

/// What one connection's handshake keeps from rustls' callbacks.
#[derive(Default)]
pub struct HandshakeCx {
    /// `$ssl_session_id`: the tickets and cache entries this handshake opens or issues.
    pub ids: session_id::Handshake,
    /// The client's TLS 1.3 traffic secret (`CLIENT_TRAFFIC_SECRET_0`), once the key log
    /// gave it: only a config with kernel TLS logs it. Zeroed when dropped.
    pub secret: Option<OkmBlock>,
}

impl fmt::Debug for HandshakeCx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeCx")
            .field("ids", &self.ids)
            .field("secret", &self.secret.as_ref().map(|_| "<kept>"))
            .finish()
    }
}

thread_local! {
    /// The context of the handshake step running on this thread, if the caller said so.
    static CURRENT: RefCell<Option<HandshakeCx>> = const { RefCell::new(None) };
}

/// Moves the current context back into its owner, and the previous one back into the
/// slot, however the step ends.
struct Restore<'a> {
    owner: &'a mut HandshakeCx,
    previous: Option<HandshakeCx>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let previous = self.previous.take();
        if let Some(cx) = CURRENT.with(|c| c.replace(previous)) {
            *self.owner = cx;
        }
    }
}

impl HandshakeCx {
    /// Runs `f` (one step of the handshake) with this context as the thread's current one.
    pub fn run<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let cx = std::mem::take(self);
        let previous = CURRENT.with(|c| c.replace(Some(cx)));
        let _restore = Restore {
            owner: self,
            previous,
        };
        f()
    }

    /// `fut`, every poll of it a step run with this context current.
    pub fn polling<F: Future + Unpin>(&mut self, fut: F) -> Polling<'_, F> {
        Polling { cx: self, fut }
    }
}

/// A future polled inside [`HandshakeCx::run`].
pub struct Polling<'a, F> {
    cx: &'a mut HandshakeCx,
    fut: F,
}

impl<F: Future + Unpin> Future for Polling<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let fut = &mut this.fut;
        this.cx.run(|| Pin::new(fut).poll(cx))
    }
}

/// `f` on the current context; `None` outside a step. `f` must not start another step.
pub(crate) fn with_current<R>(f: impl FnOnce(&mut HandshakeCx) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow_mut().as_mut().map(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_secret() -> Option<Vec<u8>> {
        with_current(|cx| cx.secret.as_ref().map(|s| s.as_ref().to_vec())).flatten()
    }

    #[test]
    fn a_step_sees_its_own_context_and_keeps_what_it_wrote() {
        assert!(with_current(|_| ()).is_none(), "no step: no context");
        let mut a = HandshakeCx::default();
        a.run(|| {
            with_current(|cx| cx.secret = Some(OkmBlock::new(&[1; 32]))).unwrap();
            // A step of another connection inside (never done, but safe): its own context.
            let mut b = HandshakeCx::default();
            b.run(|| assert_eq!(current_secret(), None));
            assert_eq!(
                current_secret(),
                Some(vec![1; 32]),
                "restored after the inner step"
            );
        });
        assert_eq!(
            a.secret.as_ref().map(|s| s.as_ref().to_vec()),
            Some(vec![1; 32])
        );
        assert!(with_current(|_| ()).is_none(), "cleared after the step");
    }

    #[test]
    fn a_panicking_step_still_gives_back_its_context() {
        let mut a = HandshakeCx::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.run(|| {
                with_current(|cx| cx.secret = Some(OkmBlock::new(&[2; 32])));
                panic!("inside");
            })
        }));
        assert!(r.is_err());
        assert!(with_current(|_| ()).is_none(), "left current after a panic");
        assert!(a.secret.is_some(), "what the step wrote is kept");
    }

    #[test]
    fn every_poll_of_a_wrapped_future_is_a_step() {
        /// Writes the secret in its second poll (a later flight's, as after a
        /// HelloRetryRequest).
        struct Second(u8);
        impl Future for Second {
            type Output = u8;
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u8> {
                self.0 += 1;
                assert!(with_current(|_| ()).is_some(), "polled outside a step");
                if self.0 < 2 {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                with_current(|c| c.secret = Some(OkmBlock::new(&[3; 32])));
                Poll::Ready(7)
            }
        }
        let mut hs = HandshakeCx::default();
        let mut wcx = Context::from_waker(std::task::Waker::noop());
        {
            let mut f = hs.polling(Second(0));
            assert!(Pin::new(&mut f).poll(&mut wcx).is_pending());
            assert!(with_current(|_| ()).is_none(), "current between polls");
            assert_eq!(Pin::new(&mut f).poll(&mut wcx), Poll::Ready(7));
        }
        assert_eq!(
            hs.secret.as_ref().map(|s| s.as_ref().to_vec()),
            Some(vec![3; 32])
        );
    }
}
