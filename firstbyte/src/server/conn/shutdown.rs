//! When a connection stops serving: idle past its timer, its last request reached (HTTP/2's
//! `keepalive_requests`), its configuration retired by a reload, or the server draining.
//! Every serving loop waits on the same four through [`Shutdown::until_shutdown`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::http::conn::Conn;
use crate::server::{Shared, Site};

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
/// drain signals. It holds what sends them: the connection's configuration generation (a
/// retired one lives, certificates, keys and configs, until its last connection ends) and
/// the process state.
pub(super) struct Shutdown {
    _site: Arc<Site>,
    _shared: Arc<Shared>,
    retired: watch::Receiver<bool>,
    draining: watch::Receiver<bool>,
    /// `client_header_timeout`: until the first request, and from a later request's first byte.
    first: Duration,
    /// `keepalive_timeout`: between requests.
    keepalive: Duration,
}

impl Shutdown {
    /// The retire signal of `site`, the drain signal of `shared`, and the idle timers.
    pub(super) fn new(
        site: Arc<Site>,
        shared: Arc<Shared>,
        first: Duration,
        keepalive: Duration,
    ) -> Self {
        Self {
            retired: site.retired(),
            draining: shared.draining(),
            _site: site,
            _shared: shared,
            first,
            keepalive,
        }
    }

    /// Resolves when the connection should stop, with the reason.
    pub(super) async fn until_shutdown(&mut self, conn: &Conn) -> Stop {
        tokio::select! {
            _ = idle(conn, self.first, self.keepalive) => Stop::Idle,
            _ = conn.goaway_requested() => Stop::LastRequest,
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
        let served = conn.served();
        match conn.activity().deadline(served, first, keepalive) {
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

/// Resolves once the site was retired by a reload and the connection has started a request.
/// A connection accepted just before the reload has not sent its request yet: closing it then
/// would fail that request, so it serves one on the configuration it was accepted under first.
async fn retired_and_started(conn: &Conn, retired: &mut watch::Receiver<bool>) {
    if retired.wait_for(|r| *r).await.is_err() {
        return std::future::pending().await;
    }
    while !conn.served() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection of a site whose every answer is `return 200 "ok"` ([`crate::server::test_conn`]),
/// with what its shutdown watches (for tests).
#[cfg(test)]
pub(super) fn test_conn(first: Duration, keepalive: Duration) -> (Arc<Conn>, Shutdown) {
    let (site, shared, conn, _) = crate::server::test_conn();
    let stop = Shutdown::new(site, shared, first, keepalive);
    (Arc::new(conn), stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolves `until_shutdown` within `within`, or `None`.
    async fn stop_within(stop: &mut Shutdown, conn: &Conn, within: Duration) -> Option<Stop> {
        tokio::time::timeout(within, stop.until_shutdown(conn))
            .await
            .ok()
    }

    /// Each signal gives its own reason: a reload retires the connection only once it has
    /// started a request; HTTP/2's last request, the drain and the idle timer at once.
    #[tokio::test]
    async fn until_shutdown_says_why() {
        let (minute, short) = (Duration::from_secs(60), Duration::from_millis(50));
        let wait = Duration::from_secs(5);

        let (conn, mut stop) = test_conn(minute, minute);
        stop._site.retire();
        assert_eq!(stop_within(&mut stop, &conn, short * 2).await, None);
        conn.count_request();
        assert_eq!(
            stop_within(&mut stop, &conn, wait).await,
            Some(Stop::Retired)
        );

        let (conn, mut stop) = test_conn(minute, minute);
        conn.request_goaway();
        assert_eq!(
            stop_within(&mut stop, &conn, wait).await,
            Some(Stop::LastRequest)
        );

        let (conn, mut stop) = test_conn(minute, minute);
        stop._shared.draining.send_replace(true);
        assert_eq!(
            stop_within(&mut stop, &conn, wait).await,
            Some(Stop::Draining)
        );

        let (conn, mut stop) = test_conn(short, minute);
        assert_eq!(stop_within(&mut stop, &conn, wait).await, Some(Stop::Idle));
    }
}
