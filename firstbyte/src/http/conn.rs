//! What requests know of their connection ([`Conn`]): its configuration generation, its
//! addresses and TLS facts, its counters, and the activity its idle timer reads
//! ([`Activity`]). The runtime that accepts and serves connections is `server::conn`.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::reqvars::ConnFacts;
use crate::conf::model::ServerConf;
use crate::conf::vhosts::AddrServers;
use crate::net::IoControl;
use crate::server::{Shared, Site};

/// What a request needs to know about its connection.
pub struct Conn {
    /// The configuration generation the connection was accepted under.
    pub site: Arc<Site>,
    /// Process-wide state (statistics, open-file cache, TLS session state).
    pub shared: Arc<Shared>,
    /// Index of the listening socket in `site.vhosts.sockets()`.
    pub socket: usize,
    /// Local address (chooses the address's server set on wildcard sockets).
    pub local: SocketAddr,
    /// Facts for variables and the built-in page.
    pub facts: ConnFacts,
    /// The socket's descriptor (for `TCP_INFO`), valid while the connection lives.
    pub fd: RawFd,
    /// Requests started on this connection.
    pub requests: AtomicU64,
    /// Activity for the idle timer: requests in flight and when the last one ended.
    pub activity: Activity,
    /// Bytes per frame of file bodies, when not [`crate::http::body::FILE_CHUNK`] (HTTP/2 over
    /// TLS: one record minus the frame header).
    pub data_chunk: Option<usize>,
    /// Tells the socket layer the first response is ready (it then sends the held TLS 1.3
    /// tickets together with it; see `tls::stream`).
    pub first_response: crate::tls::stream::Release,
    /// The server block chosen by SNI, on TLS connections.
    pub sni_server: Option<Arc<ServerConf>>,
    /// Shared with the socket layer: `send_timeout` and the `sendfile` queue.
    pub io: Arc<IoControl>,
    /// Signalled when an HTTP/2 connection has served `keepalive_requests` requests: the
    /// connection then says GOAWAY and finishes the streams in flight.
    pub last_request: Notify,
    /// What the socket under an HTTP/1.1 connection has seen of hyper (see `server::conn::h1`).
    pub(crate) h1: H1Watch,
}

impl Conn {
    /// A connection's state as accepted: no request yet, plain-text defaults (no SNI server,
    /// default file chunks); the TLS path sets its own fields over these.
    pub(crate) fn new(
        site: Arc<Site>,
        shared: Arc<Shared>,
        socket: usize,
        local: SocketAddr,
        facts: ConnFacts,
        fd: RawFd,
        io: Arc<IoControl>,
    ) -> Conn {
        Conn {
            site,
            shared,
            socket,
            local,
            facts,
            fd,
            requests: AtomicU64::new(0),
            activity: Activity::new(),
            data_chunk: None,
            first_response: crate::tls::stream::Release::new(),
            sni_server: None,
            io,
            last_request: Notify::new(),
            h1: H1Watch::default(),
        }
    }

    /// The servers listening on this connection's address.
    pub fn addr_servers(&self) -> &AddrServers {
        self.site.vhosts.addr_servers(self.socket, self.local)
    }
}

/// Requests in flight on a connection, and when it was last busy: what the idle timer reads.
///
/// nginx's timers: `client_header_timeout` from the accept until the first request (the TLS
/// handshake included: nginx sets one read timer at accept), `keepalive_timeout` from the end
/// of the last request, and, once the first byte of a later request's head arrives,
/// `client_header_timeout` from that byte (nginx's keep-alive handler deletes the keep-alive
/// timer when data comes and the header reader sets its own).
pub struct Activity {
    born: Instant,
    inflight: AtomicU64,
    /// Milliseconds since `born` when the last request ended.
    last_ms: AtomicU64,
    /// Milliseconds since `born` when a byte of the next request's head arrived with no
    /// request in flight; [`NO_HEAD`] since the last request ended.
    head_ms: AtomicU64,
}

/// [`Activity::head_ms`] when no head has begun.
const NO_HEAD: u64 = u64::MAX;

impl Activity {
    pub(crate) fn new() -> Self {
        Self::since(Instant::now())
    }

    /// A connection accepted at `born`.
    pub(crate) fn since(born: Instant) -> Self {
        Self {
            born,
            inflight: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            head_ms: AtomicU64::new(NO_HEAD),
        }
    }

    /// A request started.
    pub fn begin(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's response was sent (or abandoned).
    pub fn end(&self) {
        self.last_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.head_ms.store(NO_HEAD, Ordering::Relaxed);
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Bytes arrived: with no request in flight, they begin the next request's head (the
    /// first such byte starts its `client_header_timeout`).
    pub(crate) fn input(&self) {
        if self.inflight() == 0 && self.head_ms.load(Ordering::Relaxed) == NO_HEAD {
            let now = self.born.elapsed().as_millis() as u64;
            let _ =
                self.head_ms
                    .compare_exchange(NO_HEAD, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Requests whose response is not finished.
    pub(crate) fn inflight(&self) -> u64 {
        self.inflight.load(Ordering::Relaxed)
    }

    pub(crate) fn idle_since(&self) -> Option<Instant> {
        if self.inflight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(self.born + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }

    /// When the idle timer fires; `None` while a request is in flight.
    pub(crate) fn deadline(
        &self,
        served: bool,
        first: Duration,
        keepalive: Duration,
    ) -> Option<Instant> {
        let ms = idle_deadline_ms(
            IdleState {
                served,
                inflight: self.inflight(),
                last_ms: self.last_ms.load(Ordering::Relaxed),
                head_ms: self.head_ms.load(Ordering::Relaxed),
            },
            first,
            keepalive,
        )?;
        Some(self.born + Duration::from_millis(ms))
    }
}

/// A connection's activity, in milliseconds since it was accepted.
#[derive(Debug, Clone, Copy)]
struct IdleState {
    /// A request has started on it.
    served: bool,
    inflight: u64,
    last_ms: u64,
    head_ms: u64,
}

/// The idle timer's deadline in milliseconds since the accept (see [`Activity`]); `None`
/// while a request is in flight.
fn idle_deadline_ms(s: IdleState, first: Duration, keepalive: Duration) -> Option<u64> {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if s.inflight > 0 {
        return None;
    }
    Some(if !s.served {
        ms(first)
    } else if s.head_ms != NO_HEAD {
        s.head_ms.saturating_add(ms(first))
    } else {
        s.last_ms.saturating_add(ms(keepalive))
    })
}

/// What the socket under an HTTP/1.1 connection has seen hyper do, and the request bodies
/// hyper may still be reading: the inputs of `server::conn::h1`'s parking decision.
#[derive(Default)]
pub(crate) struct H1Watch {
    /// hyper's last read found nothing (it waits for input).
    pub(crate) read_blocked: AtomicBool,
    /// hyper wrote since its last completed flush.
    pub(crate) unflushed: AtomicBool,
    /// hyper shut the socket down.
    pub(crate) closing: AtomicBool,
    /// Request bodies not read to their end.
    pub(crate) open_bodies: AtomicU64,
    /// A request body was dropped before its end: hyper drains it or stops reading, so
    /// this connection is never parked again.
    pub(crate) abandoned: AtomicBool,
    /// Times the connection was parked.
    pub(crate) parks: AtomicU64,
}

impl H1Watch {
    /// A new hyper connection starts with nothing read or written.
    pub(crate) fn reset(&self) {
        self.read_blocked.store(false, Ordering::Relaxed);
        self.unflushed.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nginx's timers: the first request's header from the accept, keep-alive from the last
    /// response, a later request's header from its first byte, none while a request runs.
    #[test]
    fn idle_deadline_follows_nginx_timers() {
        let (first, keepalive) = (Duration::from_secs(2), Duration::from_secs(30));
        let at = |served, inflight, last_ms, head_ms| {
            idle_deadline_ms(
                IdleState {
                    served,
                    inflight,
                    last_ms,
                    head_ms,
                },
                first,
                keepalive,
            )
        };
        // Before any request, input or not: client_header_timeout from the accept.
        assert_eq!(at(false, 0, 0, NO_HEAD), Some(2_000));
        assert_eq!(at(false, 0, 0, 1_500), Some(2_000));
        // Busy.
        assert_eq!(at(true, 1, 100, NO_HEAD), None);
        // Idle after a request: keepalive_timeout from its end.
        assert_eq!(at(true, 0, 5_000, NO_HEAD), Some(35_000));
        // A later head began at 9 s: client_header_timeout from then, not keep-alive.
        assert_eq!(at(true, 0, 5_000, 9_000), Some(11_000));
    }

    /// A byte with no request in flight starts a head once; the end of a request clears it.
    #[test]
    fn input_marks_the_next_head_once() {
        let a = Activity::since(Instant::now() - Duration::from_secs(10));
        a.begin();
        a.input();
        assert_eq!(a.head_ms.load(Ordering::Relaxed), NO_HEAD, "body bytes");
        a.end();
        a.input();
        let head = a.head_ms.load(Ordering::Relaxed);
        assert!((10_000..20_000).contains(&head), "{head}");
        a.input();
        assert_eq!(
            a.head_ms.load(Ordering::Relaxed),
            head,
            "the first byte counts"
        );
        a.begin();
        a.end();
        assert_eq!(a.head_ms.load(Ordering::Relaxed), NO_HEAD);
    }
}
