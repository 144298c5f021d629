//! Keeps a TLS 1.3 connection's client traffic secret for [`Reader`](super::Reader), which
//! derives the next one when the client sends a KeyUpdate. rustls' buffered connection
//! hands over keys (`dangerous_extract_secrets`), not the secret they come from; its one
//! door to the secret is the `KeyLog`, called synchronously inside the handshake step that
//! derives it. [`SecretLog`] (in the `ServerConfig` only with `Options KTLS`) takes only
//! `CLIENT_TRAFFIC_SECRET_0`, and only while [`capture`] runs on the same thread — around
//! each step of one connection's handshake — so the secret goes to that connection alone.
//! It is never written anywhere else (no key log file, no log line), and is zeroed when
//! dropped (`OkmBlock`).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::crypto::tls13::OkmBlock;

/// The one label kept.
const LABEL: &str = "CLIENT_TRAFFIC_SECRET_0";

enum Slot {
    Off,
    Armed,
    Got(OkmBlock),
}

thread_local! {
    static SLOT: RefCell<Slot> = const { RefCell::new(Slot::Off) };
}

/// The `KeyLog` of a config with kernel TLS: hands `CLIENT_TRAFFIC_SECRET_0` to the
/// [`capture`] running on this thread, if any; everything else is dropped.
#[derive(Debug)]
pub struct SecretLog;

impl rustls::KeyLog for SecretLog {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        if label != LABEL || secret.len() > OkmBlock::MAX_LEN {
            return;
        }
        SLOT.with(|s| {
            let mut s = s.borrow_mut();
            if matches!(*s, Slot::Armed) {
                *s = Slot::Got(OkmBlock::new(secret));
            }
        });
    }

    fn will_log(&self, label: &str) -> bool {
        label == LABEL
    }
}

/// Disarms the slot however `f` ends (a panic included).
struct Disarm;

impl Drop for Disarm {
    fn drop(&mut self) {
        SLOT.with(|s| *s.borrow_mut() = Slot::Off);
    }
}

/// Runs `f` (one synchronous step of a handshake) with the slot armed; a secret logged
/// meanwhile goes into `into`.
pub fn capture<R>(into: &mut Option<OkmBlock>, f: impl FnOnce() -> R) -> R {
    SLOT.with(|s| *s.borrow_mut() = Slot::Armed);
    let guard = Disarm;
    let r = f();
    if let Slot::Got(secret) = SLOT.with(|s| std::mem::replace(&mut *s.borrow_mut(), Slot::Off)) {
        *into = Some(secret);
    }
    drop(guard);
    r
}

/// A future whose every poll runs under [`capture`]: a handshake's, for the secret logged
/// while a later flight (after a HelloRetryRequest) is processed.
pub struct Captured<F> {
    fut: F,
    /// The secret, once logged.
    pub secret: Option<OkmBlock>,
}

impl<F: Future + Unpin> Captured<F> {
    /// Wraps `fut`; `secret` is what an earlier step captured.
    pub fn new(fut: F, secret: Option<OkmBlock>) -> Self {
        Self { fut, secret }
    }
}

impl<F: Future + Unpin> Future for Captured<F> {
    type Output = (F::Output, Option<OkmBlock>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let fut = Pin::new(&mut this.fut);
        match capture(&mut this.secret, || fut.poll(cx)) {
            Poll::Ready(out) => Poll::Ready((out, this.secret.take())),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;

    /// A handshake future that logs the secret in its second poll (a later flight's, as after
    /// a HelloRetryRequest): the wrapper hands it out with the output.
    #[test]
    fn a_wrapped_future_keeps_a_secret_logged_in_any_poll() {
        struct Second(u8);
        impl Future for Second {
            type Output = u8;
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u8> {
                self.0 += 1;
                if self.0 < 2 {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                SecretLog.log(LABEL, &[0; 32], &[3; 32]);
                Poll::Ready(7)
            }
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut f = Captured::new(Second(0), None);
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        match Pin::new(&mut f).poll(&mut cx) {
            Poll::Ready((7, Some(s))) => assert_eq!(s.as_ref(), &[3; 32]),
            _ => panic!("no secret"),
        }
        // A secret from an earlier step (the ClientHello's) is handed out too.
        let mut f = Captured::new(std::future::ready(1), Some(OkmBlock::new(&[4; 32])));
        match Pin::new(&mut f).poll(&mut cx) {
            Poll::Ready((1, Some(s))) => assert_eq!(s.as_ref(), &[4; 32]),
            _ => panic!("the earlier secret was lost"),
        }
    }

    #[test]
    fn only_the_client_secret_and_only_while_armed() {
        let log = SecretLog;
        assert!(log.will_log(LABEL));
        assert!(!log.will_log("SERVER_TRAFFIC_SECRET_0"));
        assert!(!log.will_log("CLIENT_HANDSHAKE_TRAFFIC_SECRET"));
        // Not armed: dropped.
        log.log(LABEL, &[0; 32], &[7; 32]);
        let mut got = None;
        capture(&mut got, || {});
        assert!(got.is_none(), "a secret logged outside capture was kept");
        capture(&mut got, || {
            log.log("SERVER_TRAFFIC_SECRET_0", &[0; 32], &[1; 32]);
            log.log(LABEL, &[0; 32], &[9; 48]);
        });
        assert_eq!(got.as_ref().map(|s| s.as_ref().to_vec()), Some(vec![9; 48]));
        // Disarmed after: a later log goes nowhere.
        log.log(LABEL, &[0; 32], &[5; 32]);
        let mut again = None;
        capture(&mut again, || {});
        assert!(again.is_none());
        // A panic inside disarms too.
        let r = std::panic::catch_unwind(|| {
            let mut x = None;
            capture(&mut x, || panic!("inside"));
        });
        assert!(r.is_err());
        assert!(
            SLOT.with(|s| matches!(*s.borrow(), Slot::Off)),
            "left armed after a panic"
        );
    }
}
