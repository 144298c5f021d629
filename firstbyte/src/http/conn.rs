//! One accepted connection: socket options, the TLS handshake (server block chosen from the
//! ClientHello's SNI before any certificate is sent), then HTTP/1.1 or HTTP/2 by ALPN.
//!
//! The connection keeps the [`Site`] (configuration generation) it was accepted under until it
//! ends; when a reload retires that generation, or the server drains, the connection finishes
//! its requests in flight and closes (hyper's graceful shutdown), as nginx's old workers do.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::reqvars::{ConnFacts, TlsFacts};
use crate::conf::model::ServerConf;
use crate::conf::vhosts::AddrServers;
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
    /// tickets together with it; see `net::HoldStream`).
    pub first_response: crate::net::Release,
    /// The server block chosen by SNI, on TLS connections.
    pub sni_server: Option<Arc<ServerConf>>,
}

impl Conn {
    /// The servers listening on this connection's address.
    pub fn addr_servers(&self) -> &AddrServers {
        self.site.vhosts.addr_servers(self.socket, self.local)
    }
}

/// Requests in flight on a connection, and when it was last busy: what the idle timer
/// (`client_header_timeout` before the first request, `keepalive_timeout` after) reads.
pub struct Activity {
    born: Instant,
    inflight: AtomicU64,
    /// Milliseconds since `born` when the last request ended.
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            born: Instant::now(),
            inflight: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
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
        self.inflight.fetch_sub(1, Ordering::Relaxed);
    }

    fn idle_since(&self) -> Option<Instant> {
        if self.inflight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(self.born + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// Resolves when the connection has had no request in flight for `first` (before any request)
/// or `keepalive` (after one).
async fn idle(conn: &Conn, first: Duration, keepalive: Duration) {
    loop {
        let served = conn.requests.load(Ordering::Relaxed) > 0;
        let limit = if served { keepalive } else { first };
        match conn.activity.idle_since() {
            Some(since) if since.elapsed() >= limit => return,
            Some(since) => tokio::time::sleep_until((since + limit).into()).await,
            // Busy: look again later; a response in flight is bounded by send_timeout.
            None => tokio::time::sleep(limit.max(Duration::from_millis(100))).await,
        }
    }
}

/// After a graceful shutdown was asked: an idle connection gets a second to say GOAWAY,
/// one with requests in flight finishes them.
async fn finish_graceful<F: std::future::Future>(c: F, idle: bool) {
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
) {
    shared.stats.accepts.fetch_add(1, Ordering::Relaxed);
    shared.stats.handled.fetch_add(1, Ordering::Relaxed);
    shared.stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(shared.clone());
    let id = shared.stats.accepts.load(Ordering::Relaxed);
    let Ok(local) = stream.local_addr() else {
        return;
    };
    let fd = stream.as_raw_fd();
    let addr = site.vhosts.addr_servers(socket, local);
    let default = addr.default_server().clone();
    apply_socket_options(fd, &default);
    let hs_timeout = default.client_header_timeout;
    let mut facts = ConnFacts {
        peer: Some(peer),
        local: Some(local),
        id,
        tls: None,
        record_policy: "static",
    };

    if !addr.ssl() {
        let http2 = addr.http2() || default.http2;
        let conn = Arc::new(Conn {
            site: site.clone(),
            shared,
            socket,
            local,
            facts,
            fd,
            requests: AtomicU64::new(0),
            activity: Activity::new(),
            data_chunk: None,
            first_response: crate::net::Release::new(),
            sni_server: None,
        });
        serve_http(
            conn,
            stream,
            if http2 { Proto::Auto } else { Proto::H1 },
            default,
        )
        .await;
        return;
    }

    let release = crate::net::Release::new();
    let stream = crate::net::HoldStream::new(stream, release.clone());
    let acceptor =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = match tokio::time::timeout(hs_timeout, acceptor).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            crate::fblog!(
                Info,
                "SSL_do_handshake() failed ({e}) while SSL handshaking, client: {}",
                peer.ip()
            );
            return;
        }
        Err(_) => {
            crate::fblog!(
                Info,
                "client timed out while SSL handshaking, client: {}",
                peer.ip()
            );
            return;
        }
    };
    let sni = start
        .client_hello()
        .server_name()
        .map(str::to_ascii_lowercase);
    let server = addr.find(sni.as_deref()).clone();
    let Some(cfg) = site
        .tls_for(&server)
        .or_else(|| site.tls_for(&default))
        .cloned()
    else {
        crate::fblog!(
            Error,
            "no \"ssl_certificate\" is defined for server \"{}\", client: {}",
            sni.as_deref().unwrap_or(""),
            peer.ip()
        );
        return;
    };
    let tls = match tokio::time::timeout(hs_timeout, start.into_stream(cfg)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            crate::fblog!(
                Info,
                "SSL_do_handshake() failed ({e}) while SSL handshaking, client: {}",
                peer.ip()
            );
            return;
        }
        Err(_) => {
            crate::fblog!(
                Info,
                "client timed out while SSL handshaking, client: {}",
                peer.ip()
            );
            return;
        }
    };
    let sc = tls.get_ref().1;
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
    });
    let mut policy = server.record.policy();
    if sc.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
        policy.set_record_overhead(crate::record::TLS13_RECORD_OVERHEAD);
    }
    facts.record_policy = policy.name();
    let conn = Arc::new(Conn {
        site: site.clone(),
        shared,
        socket,
        local,
        facts,
        fd,
        requests: AtomicU64::new(0),
        activity: Activity::new(),
        data_chunk: (alpn == "h2").then(|| server.record.full_size() - H2_FRAME_HEADER),
        first_response: release,
        sni_server: Some(server.clone()),
    });
    let proto = if alpn == "h2" { Proto::H2 } else { Proto::H1 };
    let io = crate::record::RecordStream::new(tls, policy, Some(fd));
    serve_http(conn, io, proto, server).await;
}

/// Bytes of an HTTP/2 frame header (RFC 9113 §4.1).
const H2_FRAME_HEADER: usize = 9;

/// Which HTTP to speak.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    H1,
    H2,
    /// Plain-text with `http2 on`: HTTP/1.1, or HTTP/2 when the client sends the h2 preface.
    Auto,
}

async fn serve_http<I>(conn: Arc<Conn>, io: I, proto: Proto, server: Arc<ServerConf>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut retired = conn.site.retired();
    let mut draining = conn.shared.draining();
    let svc_conn = conn.clone();
    let svc = hyper::service::service_fn(move |req| super::service::serve(svc_conn.clone(), req));
    let io = TokioIo::new(io);
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
            let c = b.serve_connection(io, svc).with_upgrades();
            tokio::pin!(c);
            tokio::select! {
                _ = &mut c => return,
                _ = idle(&conn, first, keepalive_timeout) => return,
                _ = retired.wait_for(|r| *r) => {}
                _ = draining.wait_for(|d| *d) => {}
            }
            c.as_mut().graceful_shutdown();
            let _ = c.await;
        }
        Proto::H2 => {
            let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            b.timer(TokioTimer::new());
            let c = b.serve_connection(io, svc);
            tokio::pin!(c);
            let idle_out = tokio::select! {
                _ = &mut c => return,
                _ = idle(&conn, first, keepalive_timeout) => true,
                _ = retired.wait_for(|r| *r) => false,
                _ = draining.wait_for(|d| *d) => false,
            };
            c.as_mut().graceful_shutdown();
            finish_graceful(c, idle_out).await;
        }
        Proto::Auto => {
            let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            b.http1()
                .timer(TokioTimer::new())
                .keep_alive(keepalive)
                .title_case_headers(true)
                .header_read_timeout(None);
            b.http2().timer(TokioTimer::new());
            let c = b.serve_connection_with_upgrades(io, svc);
            tokio::pin!(c);
            let idle_out = tokio::select! {
                _ = &mut c => return,
                _ = idle(&conn, first, keepalive_timeout) => true,
                _ = retired.wait_for(|r| *r) => false,
                _ = draining.wait_for(|d| *d) => false,
            };
            c.as_mut().graceful_shutdown();
            finish_graceful(c, idle_out).await;
        }
    }
}
