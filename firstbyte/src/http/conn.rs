//! One accepted connection: socket options, the TLS handshake (server block chosen from the
//! ClientHello's SNI before any certificate is sent), then HTTP/1.1 or HTTP/2 by ALPN.
//!
//! The connection keeps the [`Site`] (configuration generation) it was accepted under until it
//! ends; when a reload retires that generation, or the server drains, the connection finishes
//! its requests in flight and closes (hyper's graceful shutdown), as nginx's old workers do.
//!
//! Below everything sits `net::SocketStream`: `send_timeout` for every connection, and
//! `sendfile` for file bodies on plain HTTP/1.1 (hyper writes the head, the socket layer sends
//! the file; see `net::stream`). On TLS the chain is socket → `tls::stream::TlsStream`
//! (rustls driven directly: record policy, batched writes, tickets held for the first
//! response) → hyper. HTTP/2 connections end with GOAWAY after `keepalive_requests`
//! requests (HTTP/1.1 says `Connection: close` on the last response).
//!
//! The task stays small while a connection idles: the handshake runs in a box freed when it
//! ends, and the stream and hyper's connection are boxed. An idle HTTP/1.1 connection holds
//! no hyper connection at all: between requests it is taken apart and built again when the
//! next request's first byte arrives ([`serve_h1`]), so its ~19 KB of buffers are freed. An HTTP/2 connection over TLS is
//! served by firstbyte's own layer (`http::h2`: streams inside the connection's task, one
//! write per turn); h2c runs hyper's, its streams spawned as tasks.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::reqvars::{ConnFacts, TlsFacts};
use crate::conf::model::ServerConf;
use crate::conf::vhosts::AddrServers;
use crate::net::{IoControl, SocketStream};
use crate::server::{Shared, Site};
use crate::tls::stream::Turns;

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
    /// What the socket under an HTTP/1.1 connection has seen of hyper (see [`parkable`]).
    h1: H1Watch,
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
    fn new() -> Self {
        Self::since(Instant::now())
    }

    /// A connection accepted at `born`.
    fn since(born: Instant) -> Self {
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
    fn input(&self) {
        if self.inflight() == 0 && self.head_ms.load(Ordering::Relaxed) == NO_HEAD {
            let now = self.born.elapsed().as_millis() as u64;
            let _ =
                self.head_ms
                    .compare_exchange(NO_HEAD, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Requests whose response is not finished.
    fn inflight(&self) -> u64 {
        self.inflight.load(Ordering::Relaxed)
    }

    fn idle_since(&self) -> Option<Instant> {
        if self.inflight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(self.born + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }

    /// When the idle timer fires; `None` while a request is in flight.
    fn deadline(&self, served: bool, first: Duration, keepalive: Duration) -> Option<Instant> {
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

/// Resolves when the connection has been idle past its timer (see [`Activity`]).
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
pub(crate) async fn finish_graceful<F: std::future::Future>(c: F, idle: bool) {
    if idle {
        let _ = tokio::time::timeout(Duration::from_secs(1), c).await;
    } else {
        let _ = c.await;
    }
}

/// Counts a connection as active while it lives.
struct ActiveGuard(Arc<Shared>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.stats.active.fetch_sub(1, Ordering::Relaxed);
    }
}

fn apply_socket_options(fd: RawFd, server: &ServerConf) {
    let nodelay = server.default_location.tcp_nodelay;
    if let Err(e) = crate::net::set_nodelay(fd, nodelay) {
        crate::fblog!(Alert, "setsockopt(TCP_NODELAY) failed ({e})");
    }
    if let Some(n) = server.socket.notsent_lowat {
        if let Err(e) = crate::net::set_notsent_lowat(fd, n) {
            crate::fblog!(Alert, "setsockopt(TCP_NOTSENT_LOWAT) failed ({e})");
        }
    }
    if let Some(cc) = &server.socket.congestion {
        if let Err(e) = crate::net::set_congestion(fd, cc) {
            crate::fblog!(Alert, "setsockopt(TCP_CONGESTION, \"{cc}\") failed ({e})");
        }
    }
}

/// Serves one accepted connection to its end.
pub async fn handle(
    site: Arc<Site>,
    shared: Arc<Shared>,
    socket: usize,
    stream: TcpStream,
    peer: SocketAddr,
    listen: SocketAddr,
) {
    let accepted = Instant::now();
    shared.stats.accepts.fetch_add(1, Ordering::Relaxed);
    shared.stats.handled.fetch_add(1, Ordering::Relaxed);
    shared.stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(shared.clone());
    let id = shared.stats.accepts.load(Ordering::Relaxed);
    // A listener on one address is the connection's local address: no `getsockname` (nginx
    // asks the kernel only for wildcard listeners too).
    let local = if listen.ip().is_unspecified() {
        match stream.local_addr() {
            Ok(a) => a,
            Err(_) => return,
        }
    } else {
        listen
    };
    let fd = stream.as_raw_fd();
    let addr = site.vhosts.addr_servers(socket, local);
    let default = addr.default_server().clone();
    apply_socket_options(fd, &default);
    let hs_timeout = default.client_header_timeout;
    let facts = ConnFacts {
        peer: Some(peer),
        local: Some(local),
        id,
        tls: None,
        record_policy: "static",
    };

    let send_timeout = default.default_location.send_timeout;
    if !addr.ssl() {
        let http2 = addr.http2() || default.http2;
        let io = Arc::new(IoControl::new(send_timeout, true));
        let stream = SocketStream::new(stream, io.clone(), Some(peer));
        let conn = Arc::new(Conn::new(
            site.clone(),
            shared,
            socket,
            local,
            facts,
            fd,
            io,
        ));
        serve_http(
            conn,
            stream,
            if http2 { Proto::Auto } else { Proto::H1 },
            default,
            Turns::default(),
        )
        .await;
        return;
    }

    // The handshake's state (ClientHello, rustls' handshake, its timers) lives in a box
    // that is freed when it ends: the long-lived task keeps only what serving needs.
    let Some((tls, conn, proto, server, turns)) = Box::pin(accept_tls(
        &site,
        shared,
        socket,
        stream,
        peer,
        local,
        fd,
        facts,
        send_timeout,
        (accepted, hs_timeout),
    ))
    .await
    else {
        return;
    };
    serve_http(conn, tls, proto, server, turns).await;
}

/// A TLS connection after its handshake, ready for HTTP.
/// The stream is boxed so the serving task holds a pointer, not the rustls connection.
type TlsReady = (
    Box<crate::tls::stream::TlsStream<SocketStream<TcpStream>, crate::record::SocketInfo>>,
    Arc<Conn>,
    Proto,
    Arc<ServerConf>,
    Turns,
);

/// The TLS part of [`handle`]: ClientHello, server block by SNI, handshake. `None` when the
/// connection ends here (the reason is logged). `timer` is the accept's time and
/// `client_header_timeout`: one deadline for the whole handshake, and the first request's
/// header timer runs on from the same accept (nginx's one read timer).
#[allow(clippy::too_many_arguments)]
async fn accept_tls(
    site: &Arc<Site>,
    shared: Arc<Shared>,
    socket: usize,
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    fd: RawFd,
    mut facts: ConnFacts,
    send_timeout: Duration,
    timer: (Instant, Duration),
) -> Option<TlsReady> {
    let (accepted, hs_timeout) = timer;
    let hs_deadline = tokio::time::Instant::from_std(accepted + hs_timeout);
    let addr = site.vhosts.addr_servers(socket, local);
    let default = addr.default_server().clone();
    let release = crate::tls::stream::Release::new();
    // Kernel TLS will make `sendfile` possible here too (the seam: `IoControl::new`'s flag).
    let io = Arc::new(IoControl::new(send_timeout, false));
    let mut stream = SocketStream::new(stream, io.clone(), Some(peer));
    let handshake_failed = |e: &dyn std::fmt::Display| {
        crate::fblog!(
            Info,
            "SSL_do_handshake() failed ({e}) while SSL handshaking, client: {}",
            peer.ip()
        );
    };
    let timed_out = || {
        crate::fblog!(
            Info,
            "client timed out while SSL handshaking, client: {}",
            peer.ip()
        );
    };
    let hello = match tokio::time::timeout_at(
        hs_deadline,
        crate::tls::stream::read_client_hello(&mut stream),
    )
    .await
    {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            handshake_failed(&e);
            return None;
        }
        Err(_) => {
            timed_out();
            return None;
        }
    };
    let sni = hello
        .client_hello()
        .server_name()
        .map(str::to_ascii_lowercase);
    // The block whose config makes the handshake (the SNI's, or the default's when the SNI's
    // has no certificate): its client checks are the connection's.
    let sni_block = addr.find(sni.as_deref()).clone();
    let server = if site.tls_for(&sni_block).is_some() {
        sni_block
    } else {
        default.clone()
    };
    let Some(cfg) = site.tls_for(&server).cloned() else {
        crate::fblog!(
            Error,
            "no \"ssl_certificate\" is defined for server \"{}\", client: {}",
            sni.as_deref().unwrap_or(""),
            peer.ip()
        );
        return None;
    };
    let tls_conn = match hello.into_connection(cfg) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let mut out = Vec::new();
            let _ = alert.write_all(&mut out);
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &out).await;
            handshake_failed(&e);
            return None;
        }
    };
    // Boxed: the handshake's state is freed when it ends instead of widening the task.
    let handshake = Box::pin(crate::tls::stream::handshake(
        stream,
        tls_conn,
        server.record.policy(),
        crate::record::SocketInfo(Some(fd)),
        release.clone(),
    ));
    let tls = match tokio::time::timeout_at(hs_deadline, handshake).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            handshake_failed(&e);
            return None;
        }
        Err(_) => {
            timed_out();
            return None;
        }
    };
    let sc = tls.connection();
    let alpn = sc
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    facts.tls = Some(TlsFacts {
        protocol: sc
            .protocol_version()
            .map(crate::tls::protocol_name)
            .unwrap_or(""),
        cipher: sc
            .negotiated_cipher_suite()
            .map(|s| crate::tls::cipher_name(s.suite()))
            .unwrap_or(""),
        group: sc
            .negotiated_key_exchange_group()
            .map(|g| crate::tls::group_name(g.name()))
            .unwrap_or(""),
        alpn: alpn.clone(),
        resumed: matches!(sc.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        server_name: sni,
        client: server.tls.as_ref().and_then(|t| {
            crate::tls::peer::verify(
                t.verify_client,
                site.client_verifier_for(&server),
                sc.peer_certificates(),
                rustls::pki_types::UnixTime::now(),
            )
        }),
    });
    facts.record_policy = tls.policy().name();
    let conn = Arc::new(Conn {
        data_chunk: (alpn == "h2")
            .then(|| h2_data_chunk(server.record.full_size()))
            .flatten(),
        first_response: release,
        sni_server: Some(server.clone()),
        activity: Activity::since(accepted),
        ..Conn::new(site.clone(), shared, socket, local, facts, fd, io)
    });
    // No flush batching (`TlsStream::batch_flushes`): `http::h2` writes each turn's frames
    // in one write itself.
    let proto = if alpn == "h2" { Proto::H2 } else { Proto::H1 };
    let turns = Turns::default();
    Some((Box::new(tls), conn, proto, server, turns))
}

/// A future run by [`StreamSet`].
type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// hyper's executor for one HTTP/2 connection: instead of a tokio task per stream (a spawn,
/// a task allocation, a future copy and a cross-task wake per request), the stream futures
/// live in the connection's own task and are polled by [`StreamSet::drive`] right after the
/// connection, only when woken. Responses produced in one turn are then written in the
/// next together (see `tls::stream::TlsStream::batch_flushes`).
#[derive(Clone, Default)]
pub struct StreamSet(Arc<SetShared>);

/// One place in a [`StreamSet`].
enum Slot {
    Free,
    /// Taken out for a poll (the lock is not held while a stream runs: a stream may start
    /// another, e.g. an upgraded CONNECT stream).
    Running,
    /// A future with its waker (made once per stream, not per poll).
    Parked(StreamFuture, Arc<SlotWaker>, Waker),
}

#[derive(Default)]
struct SetShared {
    slots: Mutex<Vec<Slot>>,
    /// Slots woken since the last drive (a slot may appear twice; polling is idempotent).
    ready: Mutex<Vec<usize>>,
    /// The connection task's waker.
    task: Mutex<Option<Waker>>,
    /// Signalled when a stream starts (the send watchdog sleeps while there is none).
    started: Notify,
}

/// Wakes one slot: queues it and wakes the connection task.
struct SlotWaker {
    set: Arc<SetShared>,
    slot: usize,
    queued: AtomicBool,
    /// The stream's response progress, for `send_timeout` (see `send_watch`).
    progress: Arc<super::send_watch::Progress>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            lock(&self.set.ready).push(self.slot);
        }
        if let Some(w) = lock(&self.set.task).as_ref() {
            w.wake_by_ref();
        }
    }
}

/// A poisoned lock (a panic while it was held) still holds consistent data here: every
/// change under it is one push, take or assignment.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<F> hyper::rt::Executor<F> for StreamSet
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        let mut slots = lock(&self.0.slots);
        let slot = slots
            .iter()
            .position(|s| matches!(s, Slot::Free))
            .unwrap_or_else(|| {
                slots.push(Slot::Free);
                slots.len() - 1
            });
        let flag = Arc::new(SlotWaker {
            set: self.0.clone(),
            slot,
            queued: AtomicBool::new(true),
            progress: Arc::default(),
        });
        let waker = Waker::from(flag.clone());
        slots[slot] = Slot::Parked(Box::pin(fut), flag, waker);
        drop(slots);
        lock(&self.0.ready).push(slot);
        if let Some(w) = lock(&self.0.task).as_ref() {
            w.wake_by_ref();
        }
        self.0.started.notify_one();
    }
}

impl StreamSet {
    /// `conn`, with the set's streams polled after it on every poll.
    pub fn drive<F: Future + Unpin>(&self, conn: F) -> Driven<'_, F> {
        Driven { set: self, conn }
    }

    /// Futures in the set.
    pub fn len(&self) -> usize {
        lock(&self.0.slots)
            .iter()
            .filter(|s| !matches!(s, Slot::Free))
            .count()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Polls every woken stream once; whether any was polled.
    fn run_ready(&self, cx: &Context<'_>) -> bool {
        {
            let mut task = lock(&self.0.task);
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let ready = std::mem::take(&mut *lock(&self.0.ready));
        if ready.is_empty() {
            return false;
        }
        for slot in ready {
            let (mut fut, flag, waker) = {
                let mut slots = lock(&self.0.slots);
                let Some(place) = slots.get_mut(slot) else {
                    continue;
                };
                match std::mem::replace(place, Slot::Running) {
                    Slot::Parked(f, flag, waker) => (f, flag, waker),
                    other => {
                        *place = other;
                        continue;
                    }
                }
            };
            // Cleared before the poll: a wake during or after it queues the slot again.
            flag.queued.store(false, Ordering::Release);
            let done = super::send_watch::enter(&flag.progress, || {
                fut.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_ready()
            });
            lock(&self.0.slots)[slot] = if done {
                Slot::Free
            } else {
                Slot::Parked(fut, flag, waker)
            };
        }
        true
    }
}

impl StreamSet {
    /// Drops the streams whose response has waited on the client for its whole
    /// `send_timeout` (h2 then resets them); returns how many, and the earliest deadline of
    /// the others.
    fn drop_stalled(&self, now: u64) -> (usize, Option<u64>) {
        let mut dropped = Vec::new();
        let mut next: Option<u64> = None;
        {
            let mut slots = lock(&self.0.slots);
            for place in slots.iter_mut() {
                let Slot::Parked(_, flag, _) = place else {
                    continue;
                };
                if flag.progress.stalled_at(now) {
                    dropped.push(std::mem::replace(place, Slot::Free));
                } else if let Some(d) = flag.progress.deadline() {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
            }
        }
        // Dropped outside the lock: a stream's drop may wake others.
        let n = dropped.len();
        drop(dropped);
        (n, next)
    }

    /// The send watchdog of one HTTP/2 connection: sleeps while no stream exists, else until
    /// the earliest deadline (at most a second later: deadlines move as streams progress),
    /// and drops stalled streams. Never returns.
    pub async fn watch_sends(&self, peer: Option<SocketAddr>) {
        loop {
            if self.is_empty() {
                self.0.started.notified().await;
                continue;
            }
            let now = super::send_watch::now_ms();
            let (dropped, next) = self.drop_stalled(now);
            if dropped > 0 {
                crate::fblog!(
                    Info,
                    "client timed out (110: Connection timed out) while sending response to client, client: {}, streams reset: {dropped}",
                    peer.map(|p| p.ip().to_string()).unwrap_or_default()
                );
                // The connection polls again: h2 sends the resets.
                if let Some(w) = lock(&self.0.task).as_ref() {
                    w.wake_by_ref();
                }
            }
            let wait = next.map_or(1000, |d| d.saturating_sub(now).clamp(10, 1000));
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }
}

/// A connection future driven together with its [`StreamSet`].
pub struct Driven<'a, F> {
    set: &'a StreamSet,
    conn: F,
}

impl<F: Future + Unpin> Future for Driven<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if let Poll::Ready(out) = Pin::new(&mut this.conn).poll(cx) {
            return Poll::Ready(out);
        }
        // Streams opened or woken: run them, then let the connection take their frames in
        // this same turn.
        if this.set.run_ready(cx) {
            return Pin::new(&mut this.conn).poll(cx);
        }
        Poll::Pending
    }
}

/// Bytes of an HTTP/2 frame header (RFC 9113 §4.1).
const H2_FRAME_HEADER: usize = 9;

/// Records smaller than this are not worth fitting DATA frames into: a frame then spans
/// several records, and frames stay the default size (1 KB = a few frame headers' worth).
const MIN_FITTED_RECORD: usize = 1024;

/// HTTP/2 DATA payload per frame so that frame header + payload fill one record of
/// `record` bytes; `None` (the default chunk) when records are smaller than
/// [`MIN_FITTED_RECORD`] — any `ssl_buffer_size` nginx accepts works, down to 1 byte.
fn h2_data_chunk(record: usize) -> Option<usize> {
    (record >= MIN_FITTED_RECORD).then(|| record - H2_FRAME_HEADER)
}

/// Which HTTP to speak.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    H1,
    H2,
    /// Plain-text with `http2 on`: HTTP/1.1, or HTTP/2 when the client sends the h2 preface.
    Auto,
}

/// `turns` counts the HTTP/2 connection's polls for a TLS stream in batching mode
/// (`TlsStream::batch_flushes`).
/// Resolves once the site was retired by a reload and the connection has started a request.
/// A connection accepted just before the reload has not sent its request yet: closing it then
/// would fail that request, so it serves one on the configuration it was accepted under first.
async fn retired_and_started(conn: &Conn, retired: &mut tokio::sync::watch::Receiver<bool>) {
    if retired.wait_for(|r| *r).await.is_err() {
        return std::future::pending().await;
    }
    while conn.requests.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn serve_http<I>(conn: Arc<Conn>, io: I, proto: Proto, server: Arc<ServerConf>, turns: Turns)
where
    I: AsyncRead + AsyncWrite + WaitInput + Unpin + Send + 'static,
{
    let mut retired = conn.site.retired();
    let mut draining = conn.shared.draining();
    let svc_conn = conn.clone();
    let svc = hyper::service::service_fn(move |req| super::service::serve(svc_conn.clone(), req));
    let loc = &server.default_location;
    let keepalive = !loc.keepalive_timeout.is_zero();
    let keepalive_timeout = loc.keepalive_timeout.max(Duration::from_millis(1));
    // hyper's header timer would also run while a keep-alive connection idles; the idle timer
    // here gives nginx's meaning instead: client_header_timeout until the first request,
    // keepalive_timeout between requests.
    let first = server.client_header_timeout;
    match proto {
        Proto::H1 => {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new())
                .keep_alive(keepalive)
                .title_case_headers(true)
                .header_read_timeout(None)
                .max_buf_size(64 * 1024);
            if conn.io.sendfile_capable() {
                // Keep each body frame as its own slice: `sendfile` markers must reach the
                // socket layer as they are. (On TLS the record layer gathers slices into
                // records itself.)
                b.writev(true);
            }
            let timers = H1Timers {
                first,
                keepalive: keepalive_timeout,
                park_after: PARK_AFTER,
            };
            serve_h1(&conn, &b, io, timers, &mut retired, &mut draining).await;
        }
        Proto::H2 => {
            // Boxed: an HTTP/1.1 connection's task does not carry this arm's state. firstbyte's
            // own HTTP/2 layer (`http::h2`); `turns` is unused: it writes once per turn itself.
            let _ = turns;
            Box::pin(async move {
                let stop = async {
                    tokio::select! {
                        _ = idle(&conn, first, keepalive_timeout) => true,
                        _ = conn.last_request.notified() => false,
                        _ = retired_and_started(&conn, &mut retired) => false,
                        _ = draining.wait_for(|d| *d) => false,
                    }
                };
                super::h2::serve(conn.clone(), io, &server, stop).await;
            })
            .await;
        }
        Proto::Auto => {
            // Boxed: an HTTP/1.1 connection's task does not carry this arm's state.
            Box::pin(async move {
                let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                b.http1()
                    .timer(TokioTimer::new())
                    .keep_alive(keepalive)
                    .title_case_headers(true)
                    .header_read_timeout(None)
                    .writev(true);
                b.http2().timer(TokioTimer::new());
                super::h2limits::apply_h2_limits!(b.http2(), &server);
                let c = b.serve_connection_with_upgrades(TokioIo::new(io), svc);
                // Boxed: only the protocol in use is allocated, and the task stays small.
                let mut c = Box::pin(c);
                let idle_out = tokio::select! {
                    _ = &mut c => return,
                    _ = idle(&conn, first, keepalive_timeout) => true,
                    _ = conn.last_request.notified() => false,
                    _ = retired_and_started(&conn, &mut retired) => false,
                    _ = draining.wait_for(|d| *d) => false,
                };
                c.as_mut().graceful_shutdown();
                finish_graceful(c, idle_out).await;
            })
            .await;
        }
    }
}

/// How long an HTTP/1.1 connection waits between requests before its hyper connection is
/// taken apart: 5 ms. A client sending its requests back to back on a keep-alive connection
/// (a load tool on a LAN) comes back within it and pays no rebuild, which cost 10–20% more
/// CPU per request (wrk, 32 connections) when every response parked at once; a client a WAN
/// round trip away parks between requests, as nginx frees its buffers then. Longer graces
/// cost memory after bursts: with 1,000 connections opened in a burst, 50 ms left 15.0 KiB
/// per idle connection resident and 5 ms 11.4 KiB (10.6 parking at once), the freed buffers
/// staying in the heap.
const PARK_AFTER: Duration = Duration::from_millis(5);

/// The idle timers of an HTTP/1.1 connection (see [`idle`]), and [`PARK_AFTER`].
#[derive(Clone, Copy)]
struct H1Timers {
    first: Duration,
    keepalive: Duration,
    park_after: Duration,
}

/// How an HTTP/1.1 connection's hyper turn ended.
enum H1Turn {
    /// The connection is over (closed, failed, or upgraded and handed off).
    Done,
    /// hyper waits between requests: take it apart.
    Park,
    /// A reload retired the site, or the server drains.
    Shutdown,
}

/// Serves HTTP/1.1 on `io`, holding hyper's connection only while a request is in progress.
///
/// An idle keep-alive connection costs what its buffers cost: hyper's HTTP/1.1 connection
/// holds an 8 KB read buffer, an 8 KB head buffer, the last response's header map and the
/// service future's box (about 19 KB) for as long as it lives. So between requests — hyper
/// blocked on a read with nothing in flight, everything written and flushed (see
/// [`parkable`]) — the connection is taken apart (`into_parts`): the socket, the bytes read
/// but not parsed, and the service are kept; the rest is freed. The task then waits for
/// input with no buffer ([`WaitInput`]) and builds a new hyper connection when it comes, as
/// nginx frees a keep-alive connection's buffers and allocates them again per request.
/// The first request waits the same way: no hyper connection before its first byte.
async fn serve_h1<I>(
    conn: &Arc<Conn>,
    b: &hyper::server::conn::http1::Builder,
    io: I,
    timers: H1Timers,
    retired: &mut tokio::sync::watch::Receiver<bool>,
    draining: &mut tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + WaitInput + Unpin + Send + 'static,
{
    use tokio::io::AsyncWriteExt;
    let svc_conn = conn.clone();
    let mut svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let c = svc_conn.clone();
        let req = req.map(|body| ReqBody::new(body, &c));
        super::service::serve(c, req)
    });
    let mut io = Watched {
        io,
        prefix: bytes::Bytes::new(),
        conn: conn.clone(),
    };
    loop {
        // Parked: no hyper connection until input arrives.
        let input = std::future::poll_fn(|cx| io.io.poll_input(cx));
        let closing = tokio::select! {
            r = input => {
                if r.is_err() {
                    return;
                }
                false
            }
            _ = idle(conn, timers.first, timers.keepalive) => return,
            _ = retired_and_started(conn, retired) => true,
            _ = draining.wait_for(|d| *d) => true,
        };
        if closing {
            // What hyper's graceful shutdown does to an idle connection: close it.
            let _ = tokio::time::timeout(Duration::from_secs(1), io.shutdown()).await;
            return;
        }
        io.conn.h1.reset();
        // Boxed: the task stays small; freed when the connection parks.
        let mut c = Box::new(b.serve_connection(TokioIo::new(io), svc).with_upgrades());
        // The grace timer: `park_after` from the end of the last request (or from now, before
        // the first); the connection parks when it fires with hyper still waiting.
        let mut grace: Option<(Instant, Pin<Box<tokio::time::Sleep>>)> = None;
        let start = Instant::now();
        let turn = std::future::poll_fn(|cx| match Pin::new(&mut *c).poll(cx) {
            Poll::Ready(_) => Poll::Ready(H1Turn::Done),
            Poll::Pending if parkable(conn.h1.moves(conn.activity.inflight())) => {
                let since = conn.activity.idle_since().unwrap_or(start).max(start);
                let deadline = since + timers.park_after;
                let (at, t) = grace.get_or_insert_with(|| {
                    (
                        deadline,
                        Box::pin(tokio::time::sleep_until(deadline.into())),
                    )
                });
                if *at != deadline {
                    *at = deadline;
                    t.as_mut().reset(deadline.into());
                }
                match t.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(H1Turn::Park),
                    Poll::Pending => Poll::Pending,
                }
            }
            Poll::Pending => Poll::Pending,
        });
        let turn = tokio::select! {
            t = turn => t,
            _ = idle(conn, timers.first, timers.keepalive) => return,
            _ = retired_and_started(conn, retired) => H1Turn::Shutdown,
            _ = draining.wait_for(|d| *d) => H1Turn::Shutdown,
        };
        match turn {
            H1Turn::Done => return,
            H1Turn::Shutdown => {
                let mut c = Pin::new(&mut *c);
                c.as_mut().graceful_shutdown();
                let _ = c.await;
                return;
            }
            H1Turn::Park => {
                let Some(parts) = (*c).into_parts() else {
                    return;
                };
                conn.h1.parks.fetch_add(1, Ordering::Relaxed);
                io = parts.io.into_inner();
                // `read_buf` shares hyper's whole read buffer: keep a copy of what it holds
                // (at most an incomplete request head), so the buffer itself is freed.
                io.prefix = if parts.read_buf.is_empty() {
                    bytes::Bytes::new()
                } else {
                    bytes::Bytes::copy_from_slice(&parts.read_buf)
                };
                svc = parts.service;
            }
        }
    }
}

/// What the socket under an HTTP/1.1 connection has seen hyper do, and the request bodies
/// hyper may still be reading: the inputs of [`parkable`].
#[derive(Default)]
struct H1Watch {
    /// hyper's last read found nothing (it waits for input).
    read_blocked: AtomicBool,
    /// hyper wrote since its last completed flush.
    unflushed: AtomicBool,
    /// hyper shut the socket down.
    closing: AtomicBool,
    /// Request bodies not read to their end.
    open_bodies: AtomicU64,
    /// A request body was dropped before its end: hyper drains it or stops reading, so
    /// this connection is never parked again.
    abandoned: AtomicBool,
    /// Times the connection was parked.
    parks: AtomicU64,
}

impl H1Watch {
    /// A new hyper connection starts with nothing read or written.
    fn reset(&self) {
        self.read_blocked.store(false, Ordering::Relaxed);
        self.unflushed.store(false, Ordering::Relaxed);
    }

    fn moves(&self, inflight: u64) -> H1Moves {
        H1Moves {
            read_blocked: self.read_blocked.load(Ordering::Relaxed),
            unflushed: self.unflushed.load(Ordering::Relaxed),
            closing: self.closing.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
            open_bodies: self.open_bodies.load(Ordering::Relaxed),
            inflight,
        }
    }
}

/// A snapshot of an HTTP/1.1 connection for the parking decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct H1Moves {
    read_blocked: bool,
    unflushed: bool,
    closing: bool,
    abandoned: bool,
    open_bodies: u64,
    inflight: u64,
}

/// Whether hyper's HTTP/1.1 connection (which has just returned `Pending`) is between
/// requests, so that taking it apart loses nothing:
///
/// - its last read found nothing: whatever it holds unparsed is an incomplete request head
///   (returned by `into_parts` and given back to the next connection), never a whole one,
///   since hyper parses before it reads again and reads only with an empty buffer while a
///   response is written;
/// - no response is unfinished (every response body was dropped, so hyper has encoded its
///   end) and everything hyper wrote was flushed (hyper flushes the socket only once its
///   own buffer is empty);
/// - no request body is being read, and none was abandoned (hyper may still be draining it);
/// - hyper is not closing the connection.
fn parkable(m: H1Moves) -> bool {
    m.read_blocked
        && !m.unflushed
        && !m.closing
        && !m.abandoned
        && m.open_bodies == 0
        && m.inflight == 0
}

/// A stream an idle HTTP/1.1 connection waits on with no read buffer.
trait WaitInput {
    /// `Ready` when a read would return data or EOF at once (or the stream failed).
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>>;
}

impl WaitInput for SocketStream<TcpStream> {
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_read_ready(cx)
    }
}

impl<IO, T> WaitInput for Box<crate::tls::stream::TlsStream<IO, T>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    T: crate::record::TcpInfoSource + Unpin,
{
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        (**self).poll_input(cx)
    }
}

/// hyper's socket on an HTTP/1.1 connection: the stream, the bytes an earlier hyper
/// connection read but did not parse (read first), and a record of hyper's moves in
/// [`H1Watch`].
struct Watched<I> {
    io: I,
    prefix: bytes::Bytes,
    conn: Arc<Conn>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
            this.conn.h1.read_blocked.store(false, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.conn
            .h1
            .read_blocked
            .store(r.is_pending(), Ordering::Relaxed);
        if buf.filled().len() > before {
            this.conn.activity.input();
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.conn.h1.unflushed.store(true, Ordering::Relaxed);
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.conn.h1.unflushed.store(true, Ordering::Relaxed);
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            this.conn.h1.unflushed.store(false, Ordering::Relaxed);
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.conn.h1.closing.store(true, Ordering::Relaxed);
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// A request body on an HTTP/1.1 connection, counted open (in [`H1Watch`]) until its end:
/// hyper is not parked while it may still be reading one.
struct ReqBody {
    inner: hyper::body::Incoming,
    open: Option<Arc<Conn>>,
}

impl ReqBody {
    fn new(inner: hyper::body::Incoming, conn: &Arc<Conn>) -> Self {
        use http_body::Body as _;
        let open = (!inner.is_end_stream()).then(|| {
            conn.h1.open_bodies.fetch_add(1, Ordering::Relaxed);
            conn.clone()
        });
        Self { inner, open }
    }
}

impl http_body::Body for ReqBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let r = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        let ended = match &r {
            None => true,
            Some(Ok(_)) => this.inner.is_end_stream(),
            // hyper stops reading after a body error; the drop below marks it abandoned.
            Some(Err(_)) => false,
        };
        if ended {
            if let Some(c) = this.open.take() {
                c.h1.open_bodies.fetch_sub(1, Ordering::Relaxed);
            }
        }
        Poll::Ready(r)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ReqBody {
    fn drop(&mut self) {
        if let Some(c) = self.open.take() {
            c.h1.abandoned.store(true, Ordering::Relaxed);
            c.h1.open_bodies.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::IoSlice;
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
    use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Event {
        Read(usize),
        Write(usize),
    }

    /// A socket that logs its read and write calls (a write takes every slice, as writev).
    struct LoggingSocket {
        inner: DuplexStream,
        log: Arc<Mutex<Vec<Event>>>,
    }

    impl LoggingSocket {
        fn push(&self, e: Event) {
            self.log.lock().unwrap().push(e);
        }
    }

    impl AsyncRead for LoggingSocket {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            let before = buf.filled().len();
            let r = Pin::new(&mut this.inner).poll_read(cx, buf);
            let n = buf.filled().len() - before;
            if n > 0 {
                this.push(Event::Read(n));
            }
            r
        }
    }

    impl AsyncWrite for LoggingSocket {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(b)])
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            // The duplex buffer (1 MiB) takes any flight whole.
            let r = Pin::new(&mut this.inner).poll_write(cx, &all);
            if let Poll::Ready(Ok(n)) = r {
                this.push(Event::Write(n));
            }
            r
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    impl crate::net::Sendfile for LoggingSocket {
        fn poll_sendfile(
            &mut self,
            _: &mut Context<'_>,
            _: RawFd,
            _: u64,
            _: usize,
        ) -> Poll<std::io::Result<usize>> {
            Poll::Ready(Err(std::io::ErrorKind::Unsupported.into()))
        }
        fn raw_fd(&self) -> Option<RawFd> {
            None
        }
    }

    /// Accepts any server certificate; checks handshake signatures.
    #[derive(Debug)]
    struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

    impl ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    /// Streams run inside the driving task: each is polled when woken, finished ones free
    /// their slot, and a stream may start another while it runs.
    #[tokio::test]
    async fn stream_set_runs_streams_in_the_driving_task() {
        let set = StreamSet::default();
        let done = Arc::new(AtomicU64::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let d = done.clone();
        hyper::rt::Executor::execute(&set, async move {
            let _ = rx.await;
            d.fetch_add(1, Ordering::Relaxed);
        });
        let (d, inner_set) = (done.clone(), set.clone());
        hyper::rt::Executor::execute(&set, async move {
            let d2 = d.clone();
            hyper::rt::Executor::execute(&inner_set, async move {
                d2.fetch_add(10, Ordering::Relaxed);
            });
            d.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(set.len(), 2);
        let mut conn = Box::pin(std::future::pending::<()>());
        let r = tokio::time::timeout(Duration::from_millis(20), set.drive(&mut conn)).await;
        assert!(r.is_err(), "the connection is still pending");
        assert_eq!(
            done.load(Ordering::Relaxed),
            11,
            "second stream and its child ran"
        );
        assert_eq!(set.len(), 1, "only the waiting stream is left");
        tx.send(()).unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(20), set.drive(&mut conn)).await;
        assert_eq!(done.load(Ordering::Relaxed), 12, "woken stream finished");
        assert!(set.is_empty());
        let mut finished = Box::pin(async { 7 });
        assert_eq!(set.drive(&mut finished).await, 7);
    }

    /// The server's first flight (ServerHello..Finished in TLS 1.3, ServerHello..
    /// ServerHelloDone in TLS 1.2) with a certificate over 6 KB goes to the socket in one
    /// write call, through the connection's real stack (`TlsStream` over `SocketStream`).
    #[tokio::test]
    async fn first_flight_leaves_in_one_write() {
        let names: Vec<String> = (0..400)
            .map(|i| format!("host-{i:03}.first-flight.test"))
            .collect();
        let ck = rcgen::generate_simple_self_signed(names).unwrap();
        let cert = ck.cert.der().clone();
        assert!(cert.len() > 6 * 1024, "chain is {} bytes", cert.len());
        let provider = crate::tls::provider();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let key = PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der());
            let server = Arc::new(
                ServerConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(vec![cert.clone()], key.into())
                    .unwrap(),
            );
            let client = Arc::new(
                ClientConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCert(provider.clone())))
                    .with_no_client_auth(),
            );
            let (client_io, server_io) = tokio::io::duplex(1 << 20);
            let log = Arc::new(Mutex::new(Vec::new()));
            let sock = LoggingSocket {
                inner: server_io,
                log: log.clone(),
            };
            let io = Arc::new(IoControl::new(Duration::from_secs(60), false));
            let mut stream = SocketStream::new(sock, io, None);
            let server_side = async {
                let accepted = crate::tls::stream::read_client_hello(&mut stream)
                    .await
                    .expect("client hello");
                let conn = accepted
                    .into_connection(server)
                    .map_err(|(e, _)| e)
                    .expect("server connection");
                crate::tls::stream::handshake(
                    stream,
                    conn,
                    crate::record::RecordSettings::default().policy(),
                    crate::record::SocketInfo(None),
                    crate::tls::stream::Release::new(),
                )
                .await
                .expect("server handshake")
            };
            let name = ServerName::try_from("host-001.first-flight.test").unwrap();
            let client_side = tokio_rustls::TlsConnector::from(client).connect(name, client_io);
            let (_s, c) = tokio::join!(server_side, client_side);
            c.expect("client handshake");

            let log = log.lock().unwrap().clone();
            let first = log
                .iter()
                .position(|e| matches!(e, Event::Write(_)))
                .expect("server wrote");
            let next_read = log[first..]
                .iter()
                .position(|e| matches!(e, Event::Read(_)))
                .map_or(log.len(), |i| first + i);
            let flight = &log[first..next_read];
            assert_eq!(flight.len(), 1, "{version:?}: flight in pieces: {log:?}");
            assert!(
                matches!(flight[0], Event::Write(n) if n > cert.len()),
                "{version:?}: {log:?}"
            );
        }
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

    #[test]
    fn data_frames_fit_records_only_when_records_are_big_enough() {
        assert_eq!(h2_data_chunk(16384), Some(16375));
        assert_eq!(h2_data_chunk(1024), Some(1015));
        for tiny in [1, 8, 9, 10, 1023] {
            assert_eq!(h2_data_chunk(tiny), None, "{tiny}");
        }
    }

    #[test]
    fn parks_only_between_requests() {
        let idle = H1Moves {
            read_blocked: true,
            ..H1Moves::default()
        };
        assert!(parkable(idle));
        for busy in [
            H1Moves {
                read_blocked: false,
                ..idle
            },
            H1Moves {
                unflushed: true,
                ..idle
            },
            H1Moves {
                closing: true,
                ..idle
            },
            H1Moves {
                abandoned: true,
                ..idle
            },
            H1Moves {
                open_bodies: 1,
                ..idle
            },
            H1Moves {
                inflight: 1,
                ..idle
            },
        ] {
            assert!(!parkable(busy), "{busy:?}");
        }
    }

    /// A duplex stream that can wait for input: one byte of lookahead.
    struct Peekable {
        inner: DuplexStream,
        ahead: Option<u8>,
    }

    impl WaitInput for Peekable {
        fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            if self.ahead.is_some() {
                return Poll::Ready(Ok(()));
            }
            let mut b = [0u8; 1];
            let mut rb = ReadBuf::new(&mut b);
            std::task::ready!(Pin::new(&mut self.inner).poll_read(cx, &mut rb))?;
            if !rb.filled().is_empty() {
                self.ahead = Some(b[0]);
            }
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncRead for Peekable {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            if let Some(b) = this.ahead.take() {
                buf.put_slice(&[b]);
                return Poll::Ready(Ok(()));
            }
            Pin::new(&mut this.inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Peekable {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write(cx, b)
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    /// A connection of a site whose every answer is `return 200 "ok"`.
    fn test_conn() -> Arc<Conn> {
        let text =
            "error_log stderr;\nevents {}\nhttp { access_log off;\n server { listen 127.0.0.1:1; \
                    location / { return 200 \"ok\"; } } }\n";
        let dir = std::env::temp_dir();
        let config = crate::conf::load_str(text, &dir.join("park.conf"), &dir).expect("config");
        let shared = Arc::new(Shared::new().expect("shared"));
        let site = Arc::new(crate::server::Site::build(config, &shared, None).expect("site"));
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let facts = ConnFacts {
            peer: None,
            local: Some(local),
            id: 1,
            tls: None,
            record_policy: "static",
        };
        let io = Arc::new(IoControl::new(Duration::from_secs(60), false));
        Arc::new(Conn::new(site, shared, 0, local, facts, -1, io))
    }

    /// Reads until `n` responses ("ok" bodies) have arrived.
    async fn responses(c: &mut DuplexStream, n: usize) -> String {
        let mut got = String::new();
        let mut buf = [0u8; 4096];
        while got.matches("\r\n\r\nok").count() < n {
            let k = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
                .await
                .expect("response in time")
                .unwrap();
            assert!(k > 0, "closed after {got:?}");
            got.push_str(&String::from_utf8_lossy(&buf[..k]));
        }
        got
    }

    /// `serve_h1` on an in-memory pipe: the connection, the client's end, the serving task.
    fn start_h1(park_after: Duration) -> (Arc<Conn>, DuplexStream, tokio::task::JoinHandle<()>) {
        let conn = test_conn();
        let (client, server) = tokio::io::duplex(1 << 16);
        let io = Peekable {
            inner: server,
            ahead: None,
        };
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new());
        let (mut retired, mut draining) = (conn.site.retired(), conn.shared.draining());
        let timers = H1Timers {
            first: Duration::from_secs(60),
            keepalive: Duration::from_secs(60),
            park_after,
        };
        let c2 = conn.clone();
        let task = tokio::spawn(async move {
            serve_h1(&c2, &b, io, timers, &mut retired, &mut draining).await;
        });
        (conn, client, task)
    }

    /// A connection with requests one after another keeps its hyper connection: it parks
    /// only after `park_after` without a request.
    #[tokio::test]
    async fn busy_http1_does_not_park_within_the_grace() {
        let (conn, mut client, task) = start_h1(Duration::from_millis(300));
        let get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        // 600 ms of requests 60 ms apart: longer than the grace, which each request renews.
        for _ in 0..10 {
            client.write_all(get.as_bytes()).await.unwrap();
            responses(&mut client, 1).await;
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        assert_eq!(
            conn.h1.parks.load(Ordering::Relaxed),
            0,
            "parked between busy requests"
        );
        // Idle past the grace: parked once.
        let deadline = Instant::now() + Duration::from_secs(5);
        while conn.h1.parks.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(conn.h1.parks.load(Ordering::Relaxed), 1, "parks once idle");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("closed at EOF")
            .unwrap();
    }

    /// Between requests hyper's connection is taken apart and built again when input
    /// comes; pipelined requests, a head split across a park and a request body read to its
    /// end all still get their answers.
    #[tokio::test]
    async fn idle_http1_parks_and_resumes() {
        let (conn, mut client, task) = start_h1(Duration::from_millis(5));
        let settle = || tokio::time::sleep(Duration::from_millis(30));
        let parks = |c: &Conn| c.h1.parks.load(Ordering::Relaxed);
        settle().await;
        assert_eq!(parks(&conn), 0, "no hyper connection before the first byte");

        let get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        client.write_all(get.as_bytes()).await.unwrap();
        responses(&mut client, 1).await;
        settle().await;
        assert_eq!(parks(&conn), 1, "parked after the response");

        client.write_all(get.repeat(3).as_bytes()).await.unwrap();
        responses(&mut client, 3).await;
        settle().await;
        assert_eq!(parks(&conn), 2, "pipelined requests, then one park");

        client.write_all(&get.as_bytes()[..7]).await.unwrap();
        settle().await;
        assert_eq!(parks(&conn), 3, "parked holding half a request head");
        client.write_all(&get.as_bytes()[7..]).await.unwrap();
        responses(&mut client, 1).await;

        client
            .write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody")
            .await
            .unwrap();
        responses(&mut client, 1).await;
        client.write_all(get.as_bytes()).await.unwrap();
        responses(&mut client, 1).await;
        settle().await;
        assert_eq!(conn.h1.open_bodies.load(Ordering::Relaxed), 0);
        assert!(!task.is_finished(), "the connection lives on");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("closed at EOF")
            .unwrap();
    }
}
