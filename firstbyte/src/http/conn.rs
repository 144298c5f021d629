//! What requests know of their connection ([`Conn`]): its configuration generation, its
//! addresses and TLS facts, its counters, and the activity its idle timer reads
//! ([`Activity`]). The runtime that accepts and serves connections is `server::conn`.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::builtin::QuicProbe;
use super::reqvars::ConnFacts;
use super::{Shared, Site};
use crate::conf::model::ServerConf;
use crate::conf::vhosts::AddrServers;
use crate::net::IoControl;
use crate::tls::stream::Release;

/// What a request knows about its connection. The runtime makes it at accept; requests read
/// it and change it only through its methods (counters, the GOAWAY request, the first
/// response's release, the socket's `send_timeout`).
pub struct Conn {
    /// The configuration generation the connection was accepted under.
    site: Arc<Site>,
    /// Process-wide state (statistics, open-file cache).
    shared: Arc<Shared>,
    /// Index of the listening socket in `site.vhosts.sockets()`.
    socket: usize,
    /// Local address (chooses the address's server set on wildcard sockets).
    local: SocketAddr,
    /// Facts for variables and the built-in page.
    facts: ConnFacts,
    /// Requests started on this connection.
    requests: AtomicU64,
    /// Activity for the idle timer: requests in flight and when the last one ended.
    activity: Activity,
    /// Bytes per frame of file bodies, when not [`crate::http::body::FILE_CHUNK`] (HTTP/2 over
    /// TLS: one record minus the frame header).
    data_chunk: Option<usize>,
    /// Tells the socket layer the first response is ready (it then sends the held TLS 1.3
    /// tickets together with it; see `tls::stream`).
    first_response: Release,
    /// The server block chosen by SNI, on TLS connections.
    sni_server: Option<Arc<ServerConf>>,
    /// Shared with the socket layer: `send_timeout` and the `sendfile` queue.
    io: Arc<IoControl>,
    /// Signalled when an HTTP/2 connection has served `keepalive_requests` requests: the
    /// connection then says GOAWAY and finishes the streams in flight.
    last_request: Notify,
    /// What the socket under an HTTP/1.1 connection has seen of hyper (see `server::conn::h1`).
    h1: H1Watch,
    /// Counted as "Reading" in `stub_status`: a request head is arriving (see [`Conn::input`]).
    reading: std::sync::atomic::AtomicBool,
    /// The QUIC transport's state, on HTTP/3 connections (for the connection-info page).
    quic: Option<Arc<dyn QuicProbe>>,
    /// What the tuning advisor last read of this connection's `TCP_INFO`, and when.
    tcp_marks: crate::http::tuning::TcpMarks,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.end_reading();
    }
}

/// What a TLS handshake settled for a connection's requests (see [`Conn::with_tls`]).
pub struct TlsSettled {
    /// The server block whose config made the handshake (chosen by SNI).
    pub server: Arc<ServerConf>,
    /// Bytes per DATA frame of file bodies, when HTTP/2 frames are fitted to records.
    pub data_chunk: Option<usize>,
    /// The socket layer's hold on TLS 1.3 tickets until the first response.
    pub first_response: Release,
    /// When the connection was accepted: its first request's header timer runs from then.
    pub accepted: Instant,
}

impl Conn {
    /// A connection's state as accepted: no request yet, plain-text defaults (no SNI server,
    /// default file chunks); a TLS connection adds what its handshake settled
    /// ([`Conn::with_tls`]).
    pub fn new(
        site: Arc<Site>,
        shared: Arc<Shared>,
        socket: usize,
        local: SocketAddr,
        facts: ConnFacts,
        io: Arc<IoControl>,
    ) -> Conn {
        Conn {
            site,
            shared,
            socket,
            local,
            facts,
            requests: AtomicU64::new(0),
            activity: Activity::new(),
            data_chunk: None,
            first_response: Release::new(),
            sni_server: None,
            io,
            last_request: Notify::new(),
            h1: H1Watch::default(),
            reading: std::sync::atomic::AtomicBool::new(false),
            quic: None,
            tcp_marks: Default::default(),
        }
    }

    /// Bytes arrived on an HTTP/1.1 connection: with no request in flight they begin the next
    /// request's head, which starts its `client_header_timeout` and counts as "Reading" in
    /// `stub_status` until the request reaches the pipeline (nginx counts from the request's
    /// first byte until its head is read).
    pub(crate) fn input(&self) {
        if self.activity.input() && !self.reading.swap(true, Ordering::Relaxed) {
            self.shared.stats.reading.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What the tuning advisor last read of this connection's `TCP_INFO`, and when.
    pub(crate) fn tcp_marks(&self) -> &crate::http::tuning::TcpMarks {
        &self.tcp_marks
    }

    fn end_reading(&self) {
        if self.reading.swap(false, Ordering::Relaxed) {
            self.shared.stats.reading.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The connection after its TLS handshake.
    pub fn with_tls(mut self, tls: TlsSettled) -> Conn {
        self.data_chunk = tls.data_chunk;
        self.first_response = tls.first_response;
        self.sni_server = Some(tls.server);
        self.activity = Activity::since(tls.accepted);
        self
    }

    /// A QUIC connection after its handshake: the server block chosen by SNI, and what reads
    /// the transport's state.
    pub fn with_quic(mut self, server: Arc<ServerConf>, probe: Arc<dyn QuicProbe>) -> Conn {
        self.sni_server = Some(server);
        self.quic = Some(probe);
        self
    }

    /// The QUIC transport's state, on HTTP/3 connections.
    pub fn quic(&self) -> Option<&dyn QuicProbe> {
        self.quic.as_deref()
    }

    /// The servers listening on this connection's address.
    pub fn addr_servers(&self) -> &AddrServers {
        self.site.vhosts.addr_servers(self.socket, self.local)
    }

    /// The server block whose settings apply before the Host is known: the one chosen by SNI
    /// on TLS, else the address's default.
    pub fn first_server(&self) -> &Arc<ServerConf> {
        self.sni_server
            .as_ref()
            .unwrap_or_else(|| self.addr_servers().default_server())
    }

    /// The server block chosen by SNI, on TLS connections.
    pub fn sni_server(&self) -> Option<&Arc<ServerConf>> {
        self.sni_server.as_ref()
    }

    /// The configuration generation the connection was accepted under.
    pub fn site(&self) -> &Arc<Site> {
        &self.site
    }

    /// Process-wide state (statistics, open-file cache).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Facts for variables and the built-in page.
    pub fn facts(&self) -> &ConnFacts {
        &self.facts
    }

    /// The client's IP address as logs print it (`unix:` on a UNIX-domain socket, "" when
    /// unknown).
    pub fn client_ip(&self) -> String {
        self.facts.remote_addr().unwrap_or_default()
    }

    /// The TCP socket's descriptor (for `TCP_INFO`), valid while the connection lives; -1
    /// for a connection without one (QUIC).
    pub fn fd(&self) -> RawFd {
        self.facts.socket.unwrap_or(-1)
    }

    /// Shared with the socket layer: `send_timeout` and the `sendfile` queue.
    pub fn io(&self) -> &Arc<IoControl> {
        &self.io
    }

    /// Bytes per frame of file bodies, when not the default.
    pub fn data_chunk(&self) -> Option<usize> {
        self.data_chunk
    }

    /// A response is ready: the socket layer may send the TLS 1.3 tickets it held.
    pub fn release_first_response(&self) {
        self.first_response.release();
    }

    /// Counts a request started on this connection (and in `stub_status`); its number on
    /// the connection, from 1.
    pub fn count_request(&self) -> u64 {
        self.shared.stats.requests.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether a request has started on this connection.
    pub fn served(&self) -> bool {
        self.requests.load(Ordering::Relaxed) > 0
    }

    /// A request's response is being made: busy for the idle timer, "Writing" in
    /// `stub_status`, until [`Conn::end_response`].
    pub fn begin_response(&self) {
        self.end_reading();
        self.activity.begin();
        self.shared.stats.writing.fetch_add(1, Ordering::Relaxed);
    }

    /// A response was sent (or abandoned).
    pub fn end_response(&self) {
        self.end_response_at(Instant::now());
    }

    /// [`end_response`](Self::end_response) with the time already read (`now`).
    pub fn end_response_at(&self, now: Instant) {
        self.activity.end(now);
        self.shared.stats.writing.fetch_sub(1, Ordering::Relaxed);
    }

    /// HTTP/2: the connection has served its `keepalive_requests`; it says GOAWAY and
    /// finishes the streams in flight.
    pub fn request_goaway(&self) {
        self.last_request.notify_one();
    }

    /// Resolves when [`Conn::request_goaway`] was called.
    pub(crate) async fn goaway_requested(&self) {
        self.last_request.notified().await
    }

    /// Activity for the idle timer.
    pub(crate) fn activity(&self) -> &Activity {
        &self.activity
    }

    /// What the socket under an HTTP/1.1 connection has seen of hyper.
    pub(crate) fn h1(&self) -> &H1Watch {
        &self.h1
    }

    /// A background update (`proxy_cache_background_update`) started by a request of this
    /// connection: until the hold is dropped, an HTTP/1.x connection that ends after its
    /// response waits before it closes (see [`Background`]).
    pub fn hold_for_background(&self) -> BackgroundHold {
        let b = self.h1.background.get_or_init(Default::default).clone();
        b.running.fetch_add(1, Ordering::AcqRel);
        BackgroundHold(b)
    }
}

/// The background updates a connection's requests started and that still run. nginx's
/// background update is a subrequest of the client's request, which is finalized only when
/// it ends: a connection that closes after its response (`Connection: close`) closes once
/// the update is done, so the client that read to the end finds the update stored. An
/// HTTP/1.x connection's shutdown waits for [`Background::poll_done`].
#[derive(Default)]
pub struct Background {
    running: std::sync::atomic::AtomicUsize,
    waker: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Background {
    /// Ready when no background update of the connection runs.
    pub(crate) fn poll_done(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.running.load(Ordering::Acquire) == 0 {
            return std::task::Poll::Ready(());
        }
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        // An update that ended between the check and the waker's store woke nobody.
        if self.running.load(Ordering::Acquire) == 0 {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

/// One running background update of a connection ([`Conn::hold_for_background`]).
pub struct BackgroundHold(Arc<Background>);

impl Drop for BackgroundHold {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            let w = self
                .0
                .waker
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(w) = w {
                w.wake();
            }
        }
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
    /// The `keepalive_timeout` of the location that answered the last HTTP/1.x request, in
    /// milliseconds (nginx's keep-alive handler takes the request's location's); [`NO_HEAD`]:
    /// the connection's own.
    keepalive_ms: AtomicU64,
    /// Bytes read from the socket since the last request ended (HTTP/1.x): the raw size of
    /// a bodiless request head that was not pipelined (`$request_length`).
    read_since_end: AtomicU64,
}

/// [`Activity::head_ms`] when no head has begun.
const NO_HEAD: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self::since(Instant::now())
    }

    /// How long ago the connection was accepted (`keepalive_time`).
    pub(crate) fn age(&self) -> Duration {
        self.born.elapsed()
    }

    /// [`age`](Self::age) at `now` (a time already read).
    pub(crate) fn age_at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.born)
    }

    /// A connection accepted at `born`.
    fn since(born: Instant) -> Self {
        Self {
            born,
            inflight: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            head_ms: AtomicU64::new(NO_HEAD),
            keepalive_ms: AtomicU64::new(NO_HEAD),
            read_since_end: AtomicU64::new(0),
        }
    }

    /// The answering location's `keepalive_timeout`: the wait for the next request after this
    /// one (HTTP/1.x).
    pub(crate) fn set_keepalive(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(NO_HEAD - 1).max(1);
        self.keepalive_ms.store(ms, Ordering::Relaxed);
    }

    /// A request started.
    fn begin(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's response was sent (or abandoned).
    fn end(&self, now: Instant) {
        self.last_ms.store(
            now.saturating_duration_since(self.born).as_millis() as u64,
            Ordering::Relaxed,
        );
        self.head_ms.store(NO_HEAD, Ordering::Relaxed);
        self.read_since_end.store(0, Ordering::Relaxed);
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    /// `n` bytes were read from an HTTP/1.x socket.
    pub(crate) fn read(&self, n: usize) {
        self.read_since_end.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes read since the last request ended.
    pub(crate) fn read_since_end(&self) -> u64 {
        self.read_since_end.load(Ordering::Relaxed)
    }

    /// Bytes arrived: with no request in flight, they begin the next request's head (the
    /// first such byte starts its `client_header_timeout`). True when they did.
    pub(crate) fn input(&self) -> bool {
        if self.inflight() == 0 && self.head_ms.load(Ordering::Relaxed) == NO_HEAD {
            let now = self.born.elapsed().as_millis() as u64;
            return self
                .head_ms
                .compare_exchange(NO_HEAD, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        }
        false
    }

    /// Whether a byte arrived with no request in flight since the last request ended: false
    /// for a request whose head was read before the previous response ended (pipelined).
    pub(crate) fn head_begun(&self) -> bool {
        self.head_ms.load(Ordering::Relaxed) != NO_HEAD
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
        let keepalive = match self.keepalive_ms.load(Ordering::Relaxed) {
            NO_HEAD => keepalive,
            ms => Duration::from_millis(ms),
        };
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
    /// hyper's graceful shutdown was asked (set before it is): responses built from now on
    /// carry no `Connection: keep-alive`, so hyper's own `Connection: close` stands alone.
    pub(crate) shutting_down: AtomicBool,
    /// The response the service just answered, whose head hyper writes next: the header
    /// names to write in their own case ([`HeaderCase`]).
    pub(crate) head_case: std::sync::Mutex<Option<Vec<Box<str>>>>,
    /// `head_case` holds a value: the writes of a body check this flag, not the lock.
    pub(crate) head_pending: AtomicBool,
    /// `100 Continue` is owed before the response: the request expects it and its body,
    /// empty, is read (hyper sends it itself for a body it reads that is not empty).
    pub(crate) continue_due: AtomicBool,
    /// `103 Early Hints` owed (`early_hints`): whole interim responses in `early`, written
    /// before hyper's next bytes, at its next write or flush.
    pub(crate) early_due: AtomicBool,
    pub(crate) early: std::sync::Mutex<Vec<u8>>,
    /// Request heads handed to the service so far (the next one's sequence number - 1).
    pub(crate) requests: AtomicU64,
    /// Refusals the connection layer found in heads as received, oldest first (see
    /// [`H1Watch::refusal`]); empty on nearly every connection.
    pub(crate) verdicts: std::sync::Mutex<std::collections::VecDeque<Verdict>>,
    /// Background updates started by the connection's requests (made by the first).
    pub(crate) background: std::sync::OnceLock<Arc<Background>>,
}

/// Whether `raw`, a request target as received, is the one hyper parsed into `uri`.
fn same_target(raw: &str, uri: &http::Uri) -> bool {
    // The `http` crate drops a fragment.
    let raw = raw.split('#').next().unwrap_or_default();
    if raw.starts_with('/') {
        uri.path_and_query().map(|p| p.as_str()) == Some(raw)
    } else {
        *uri == *raw
    }
}

/// A request extension: the HTTP/1.1 head as received frames its body in a way nginx refuses
/// before any location runs (a second `Content-Length`, `Content-Length` beside `chunked`,
/// a coding other than `chunked`, a malformed chunked body); hyper normalised the head, so
/// the pipeline cannot see it there. Answered with `status` and the connection closes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FramingRefusal {
    /// The status answered: 400, or 501 for an unknown coding.
    pub status: u16,
    /// nginx's error-log text (with its "while reading ..." context).
    pub reason: String,
}

/// A refusal for the `seq`th request head of a connection; `method` (and request target),
/// when given, must match the request hyper parsed there. None: by sequence alone (a head
/// the connection layer rewrote, which must be refused, or a body found malformed).
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    pub(crate) seq: u64,
    pub(crate) method: Option<(Box<str>, Box<str>)>,
    pub(crate) refusal: FramingRefusal,
}

/// A response extension: header names (from `add_header`) that an HTTP/1.x head writes in
/// this case, as nginx does, rather than in hyper's title case.
#[derive(Debug, Clone, Default)]
pub struct HeaderCase(pub Vec<Box<str>>);

impl H1Watch {
    /// The refusal recorded for the next request head the service gets (`method`, `target`
    /// as hyper parsed them); counts the head. A verdict whose method or target differs
    /// from the request's is dropped: it never lands on another request.
    pub(crate) fn refusal(&self, method: &str, target: &http::Uri) -> Option<FramingRefusal> {
        let seq = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let mut q = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        while q.front().is_some_and(|v| v.seq < seq) {
            q.pop_front();
        }
        if q.front().is_none_or(|v| v.seq != seq) {
            return None;
        }
        let v = q.pop_front()?;
        match &v.method {
            Some((m, t)) if **m != *method || !same_target(t, target) => None,
            _ => Some(v.refusal),
        }
    }

    /// A new hyper connection starts with nothing read or written.
    pub(crate) fn reset(&self) {
        self.read_blocked.store(false, Ordering::Relaxed);
        self.unflushed.store(false, Ordering::Relaxed);
        self.continue_due.store(false, Ordering::Relaxed);
        if self.early_due.swap(false, Ordering::Relaxed) {
            self.early.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
}

/// After a graceful shutdown was asked: an idle connection gets a second to say GOAWAY,
/// one with requests in flight finishes them.
pub(crate) async fn finish_graceful<F: std::future::Future>(c: F, idle: bool) {
    if idle {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), c).await;
    } else {
        let _ = c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict lands only on the request head it was found in: by sequence number, and
    /// only when that request's method and target are the ones the verdict names.
    #[test]
    fn verdicts_land_on_their_own_request() {
        let w = H1Watch::default();
        let v = |seq, m: Option<(&str, &str)>, status| Verdict {
            seq,
            method: m.map(|(m, t)| (m.into(), t.into())),
            refusal: FramingRefusal {
                status,
                reason: String::new(),
            },
        };
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        {
            let mut q = w.verdicts.lock().unwrap();
            q.push_back(v(2, Some(("GET", "/a?x")), 400));
            q.push_back(v(3, Some(("GET", "/b")), 501));
            q.push_back(v(4, None, 400));
            q.push_back(v(5, Some(("GET", "http://h/c")), 400));
            q.push_back(v(6, Some(("GET", "/d?q#f")), 400));
        }
        assert_eq!(w.refusal("GET", &uri("/a?x")), None, "request 1");
        assert_eq!(w.refusal("GET", &uri("/a?x")).map(|r| r.status), Some(400));
        assert_eq!(w.refusal("POST", &uri("/b")), None, "another method");
        assert_eq!(w.refusal("PUT", &uri("/z")).map(|r| r.status), Some(400));
        assert_eq!(
            w.refusal("GET", &uri("http://h/c")).map(|r| r.status),
            Some(400)
        );
        assert_eq!(
            w.refusal("GET", &uri("/d?q#f")).map(|r| r.status),
            Some(400),
            "a fragment, which the `http` crate drops"
        );
        assert!(w.verdicts.lock().unwrap().is_empty());
        assert_eq!(w.refusal("GET", &uri("/")), None);
    }

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
        a.end(Instant::now());
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
        a.end(Instant::now());
        assert_eq!(a.head_ms.load(Ordering::Relaxed), NO_HEAD);
    }
}
