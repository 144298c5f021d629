//! `send_timeout` for HTTP/2 streams: a response that makes no progress for `send_timeout`
//! because the client does not let it (flow control) is reset, as nginx does.
//!
//! On HTTP/1.1 a stalled client blocks the socket, and the socket layer's timer
//! (`net::stream`) sees it. On HTTP/2 a client can keep the socket moving and starve one
//! stream instead: a zero flow-control window, never a WINDOW_UPDATE. hyper then never asks
//! the response body for data, so the response — its open file, its buffers, its place in
//! the connection's stream table — is pinned for as long as the client likes.
//!
//! Each stream of a connection (see `conn::StreamSet`) has a [`Progress`]: when its response
//! body last handed hyper data, and whether it is now waiting for the client (the body gave
//! data and hyper has not asked again) or for its own source (a proxied body waiting on its
//! upstream, which `proxy_read_timeout` bounds instead). The response body finds its stream's
//! `Progress` through [`current`], set while the stream is polled. A watchdog in the
//! connection's task asks [`Progress::stalled_at`] of every stream and drops the stalled ones;
//! dropping a stream's future makes h2 reset it (RST_STREAM CANCEL) and frees what it held.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Milliseconds on a process-wide clock (since its first use).
pub fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One stream's sending progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// [`now_ms`] when the response body last handed over data (or was made).
    last_ms: AtomicU64,
    /// The body handed over data and was not asked again since: what follows waits on the
    /// client. False while the body waits on its own source, and before a response exists.
    waiting_peer: AtomicBool,
    /// The response's `send_timeout` in milliseconds; 0: none.
    timeout_ms: AtomicU64,
}

impl Progress {
    /// A response exists (its head is with hyper) with this `send_timeout`; its body waits to
    /// be asked for data.
    pub fn response_ready(&self, send_timeout: Duration) {
        self.timeout_ms
            .store(send_timeout.as_millis() as u64, Ordering::Relaxed);
        self.touch(true);
    }

    /// The body was polled: `gave_data` when it handed hyper a frame (progress; next wait is
    /// on the client), false when it waits on its source.
    pub fn touch(&self, gave_data: bool) {
        if gave_data {
            self.last_ms.store(now_ms(), Ordering::Relaxed);
        }
        self.waiting_peer.store(gave_data, Ordering::Relaxed);
    }

    /// Whether the stream has waited on the client for its whole `send_timeout` at `now`.
    pub fn stalled_at(&self, now: u64) -> bool {
        stalled(
            self.waiting_peer.load(Ordering::Relaxed),
            self.last_ms.load(Ordering::Relaxed),
            self.timeout_ms.load(Ordering::Relaxed),
            now,
        )
    }

    /// When the stream would be stalled if nothing moves, for the watchdog's next look.
    pub fn deadline(&self) -> Option<u64> {
        let t = self.timeout_ms.load(Ordering::Relaxed);
        (self.waiting_peer.load(Ordering::Relaxed) && t > 0)
            .then(|| self.last_ms.load(Ordering::Relaxed).saturating_add(t))
    }
}

/// The decision: waiting on the client, a timeout set, and no progress for that long.
pub fn stalled(waiting_peer: bool, last_ms: u64, timeout_ms: u64, now: u64) -> bool {
    waiting_peer && timeout_ms > 0 && now.saturating_sub(last_ms) >= timeout_ms
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Progress>>> = const { RefCell::new(None) };
}

/// The progress of the stream being polled on this thread, if a `StreamSet` polls one.
pub fn current() -> Option<Arc<Progress>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Runs `f` (a stream's poll) with `p` as [`current`].
pub fn enter<R>(p: &Arc<Progress>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Arc<Progress>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    let prev = CURRENT.with(|c| c.borrow_mut().replace(p.clone()));
    let _reset = Reset(prev);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_only_when_waiting_on_the_client_past_the_timeout() {
        assert!(!stalled(true, 1000, 500, 1499));
        assert!(stalled(true, 1000, 500, 1500));
        assert!(!stalled(false, 1000, 500, 9999), "waiting on its source");
        assert!(!stalled(true, 1000, 0, 9999), "send_timeout 0: none");
        assert!(!stalled(true, 2000, 500, 1000), "clock before the stamp");
    }

    #[test]
    fn progress_moves_the_deadline() {
        let p = Progress::default();
        assert_eq!(p.deadline(), None, "no response yet");
        p.response_ready(Duration::from_millis(100));
        let d = p.deadline().expect("deadline");
        assert!(d >= 100);
        p.touch(false);
        assert_eq!(p.deadline(), None, "waiting on its source");
        assert!(!p.stalled_at(u64::MAX));
        p.touch(true);
        assert!(p.deadline().expect("deadline") >= d);
        assert!(p.stalled_at(u64::MAX));
    }

    #[test]
    fn current_is_set_only_inside_enter() {
        let p = Arc::new(Progress::default());
        assert!(current().is_none());
        let inner = enter(&p, || {
            let q = Arc::new(Progress::default());
            enter(&q, || assert!(Arc::ptr_eq(&current().unwrap(), &q)));
            current()
        });
        assert!(
            Arc::ptr_eq(&inner.unwrap(), &p),
            "restored after a nested enter"
        );
        assert!(current().is_none());
    }
}
