//! When a connection stops serving: idle past its timer, its last request reached (HTTP/2's
//! `keepalive_requests`), its configuration retired by a reload, or the server draining.
//! Every serving loop waits on the same four through [`Shutdown::until_shutdown`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::http::conn::Conn;

/// Why a connection stops serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Idle past `client_header_timeout` or `keepalive_timeout` (see [`Activity`]).
    ///
    /// [`Activity`]: crate::http::conn::Activity
    Idle,
    /// An HTTP/2 connection served `keepalive_requests` requests: GOAWAY.
    LastRequest,
    /// A reload retired the configuration the connection was accepted under (and the
    /// connection has started a request).
    Retired,
    /// The server drains (stop, quit or binary upgrade).
    Draining,
}

/// What one connection watches to know when to stop: its idle timers and the reload and
/// drain signals.
pub(super) struct Shutdown {
    retired: watch::Receiver<bool>,
    draining: watch::Receiver<bool>,
    /// `client_header_timeout`: until the first request, and from a later request's first byte.
    first: Duration,
    /// `keepalive_timeout`: between requests.
    keepalive: Duration,
}

impl Shutdown {
    /// The signals of `conn`'s site and process, with its idle timers.
    pub(super) fn new(conn: &Conn, first: Duration, keepalive: Duration) -> Self {
        Self {
            retired: conn.site.retired(),
            draining: conn.shared.draining(),
            first,
            keepalive,
        }
    }

    /// Resolves when the connection should stop, with the reason.
    pub(super) async fn until_shutdown(&mut self, conn: &Conn) -> Stop {
        tokio::select! {
            _ = idle(conn, self.first, self.keepalive) => Stop::Idle,
            _ = conn.last_request.notified() => Stop::LastRequest,
            _ = retired_and_started(conn, &mut self.retired) => Stop::Retired,
            _ = self.draining.wait_for(|d| *d) => Stop::Draining,
        }
    }
}

/// Resolves when the connection has been idle past its timer (see [`Activity`]).
///
/// [`Activity`]: crate::http::conn::Activity
async fn idle(conn: &Conn, first: Duration, keepalive: Duration) {
    loop {
        let served = conn.requests.load(Ordering::Relaxed) > 0;
        match conn.activity.deadline(served, first, keepalive) {
            Some(at) if Instant::now() >= at => return,
            Some(at) => tokio::time::sleep_until(at.into()).await,
            // Busy: look again later; a response in flight is bounded by send_timeout.
            None => {
                let limit = if served { keepalive } else { first };
                tokio::time::sleep(limit.max(Duration::from_millis(100))).await
            }
        }
    }
}

/// After a graceful shutdown was asked: an idle connection gets a second to say GOAWAY,
/// one with requests in flight finishes them.
pub(super) async fn finish_graceful<F: std::future::Future>(c: F, idle: bool) {
    if idle {
        let _ = tokio::time::timeout(Duration::from_secs(1), c).await;
    } else {
        let _ = c.await;
    }
}

/// Resolves once the site was retired by a reload and the connection has started a request.
/// A connection accepted just before the reload has not sent its request yet: closing it then
/// would fail that request, so it serves one on the configuration it was accepted under first.
async fn retired_and_started(conn: &Conn, retired: &mut watch::Receiver<bool>) {
    if retired.wait_for(|r| *r).await.is_err() {
        return std::future::pending().await;
    }
    while conn.requests.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
