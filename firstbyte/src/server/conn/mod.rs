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
//! next request's first byte arrives ([`h1::serve_h1`]), so its ~19 KB of buffers are freed.
//! An HTTP/2 connection over TLS runs its streams inside its own task ([`h2::StreamSet`], no
//! spawn per request) and its TLS stream puts flushes off to the task's next turn, so the
//! responses of one turn leave in one `writev`.
//!
//! One file per job: `accept` (TLS handshake, server block by SNI), `h1` (HTTP/1.1, parked
//! between requests), `h2` (HTTP/2, its streams in the connection's task), `shutdown` (the
//! one wait for idle, last request, reload and drain); this file picks the protocol. What
//! requests read of their connection is `http::conn::Conn`.

mod accept;
mod h1;
mod h2;
mod shutdown;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tls::stream::BatchWrite;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::conf::model::ServerConf;
use crate::http::conn::Conn;
use crate::http::reqvars::ConnFacts;
use crate::net::{IoControl, SocketStream};
use crate::server::{Shared, Site};
use h1::WaitInput;
use shutdown::{Shutdown, Stop};

/// Counts a connection as active while it lives.
/// Counts a connection in `stub_status`'s active ones while it lives.
pub(super) struct ActiveGuard(pub(super) Arc<Shared>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.http.stats.active.fetch_sub(1, Ordering::Relaxed);
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
    shared.http.stats.accepts.fetch_add(1, Ordering::Relaxed);
    shared.http.stats.handled.fetch_add(1, Ordering::Relaxed);
    shared.http.stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(shared.clone());
    let id = shared.http.stats.accepts.load(Ordering::Relaxed);
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
    let addr = site.vhosts().addr_servers(socket, local);
    let default = addr.default_server().clone();
    apply_socket_options(fd, &default);
    let hs_timeout = default.client_header_timeout;
    let mut facts = ConnFacts {
        peer: Some(peer),
        local: Some(local),
        id,
        tls: None,
        record_policy: "static",
        proxy_protocol: None,
    };

    if addr.proxy_protocol() {
        match accept::read_proxy_protocol(&stream, peer, accepted + hs_timeout).await {
            Ok(p) => facts.proxy_protocol = p,
            Err(()) => return,
        }
    }
    let send_timeout = default.default_location.send_timeout;
    if !addr.ssl() {
        let http2 = addr.http2() || default.http2;
        let io = Arc::new(IoControl::new(send_timeout, true));
        let stream = SocketStream::new(stream, io.clone(), Some(peer));
        let conn = Arc::new(Conn::new(
            site.http().clone(),
            shared.http.clone(),
            socket,
            local,
            facts,
            fd,
            io,
        ));
        let proto = if http2 { Proto::Auto } else { Proto::H1 };
        let stop = (site, shared);
        serve_http(conn, stream, proto, default, stop).await;
        return;
    }

    // The handshake's state (ClientHello, rustls' handshake, its timers) lives in a box
    // that is freed when it ends: the long-lived task keeps only what serving needs.
    let Some((tls, conn, proto, server)) = Box::pin(accept::accept_tls(
        &site,
        &shared,
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
    match tls {
        accept::Secured::User(tls) => serve_http(conn, tls, proto, server, (site, shared)).await,
        // Unboxed: a plain-HTTP connection's socket lives in its task the same way.
        accept::Secured::Kernel(k) => serve_http(conn, *k, proto, server, (site, shared)).await,
    }
}

/// Which HTTP to speak.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    H1,
    H2,
    /// Plain-text with `http2 on`: HTTP/1.1, or HTTP/2 when the client sends the h2 preface.
    Auto,
}

/// Serves HTTP on `io` to the connection's end; `stop` is the generation
/// the connection was accepted under and the process state (see [`Shutdown`]).
async fn serve_http<I>(
    conn: Arc<Conn>,
    io: I,
    proto: Proto,
    server: Arc<ServerConf>,
    stop: (Arc<Site>, Arc<Shared>),
) where
    I: AsyncRead + BatchWrite + WaitInput + Send + 'static,
{
    let loc = &server.default_location;
    let keepalive = !loc.keepalive_timeout.is_zero();
    let keepalive_timeout = loc.keepalive_timeout.max(Duration::from_millis(1));
    // hyper's header timer would also run while a keep-alive connection idles; the idle timer
    // here gives nginx's meaning instead: client_header_timeout until the first request,
    // keepalive_timeout between requests.
    let (site, shared) = stop;
    let stop = Shutdown::new(
        site,
        shared,
        server.client_header_timeout,
        keepalive_timeout,
    );
    match proto {
        Proto::H1 => {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new())
                .keep_alive(keepalive)
                .title_case_headers(true)
                .header_read_timeout(None)
                .max_buf_size(read_buf_max(&server));
            if conn.io().sendfile_capable() {
                // Keep each body frame as its own slice: `sendfile` markers must reach the
                // socket layer as they are. (On TLS the record layer gathers slices into
                // records itself.)
                b.writev(true);
            }
            h1::serve_h1(&conn, &b, io, h1::PARK_AFTER, stop).await;
        }
        // Boxed: an HTTP/1.1 connection's task does not carry this arm's state.
        Proto::H2 => Box::pin(h2::serve_h2(conn, io, server, stop)).await,
        Proto::Auto => Box::pin(serve_auto(conn, io, server, keepalive, stop)).await,
    }
}

/// hyper's HTTP/1.1 read buffer, its bound on a request head (past it: 431): 64 KiB, or
/// room for all of nginx's header buffers when they are larger, so that the pipeline's
/// `large_client_header_buffers` check answers as nginx below it.
fn read_buf_max(server: &ServerConf) -> usize {
    let (n, size) = server.large_client_header_buffers;
    let first = usize::try_from(server.client_header_buffer_size).unwrap_or(usize::MAX);
    n.saturating_mul(size).saturating_add(first).max(64 * 1024)
}

/// Plain-text HTTP with `http2 on`: hyper-util's server picks HTTP/1.1 or HTTP/2 by the
/// client's first bytes.
async fn serve_auto<I>(
    conn: Arc<Conn>,
    io: I,
    server: Arc<ServerConf>,
    keepalive: bool,
    mut stop: Shutdown,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_conn = conn.clone();
    let svc =
        hyper::service::service_fn(move |req| crate::http::pipeline::serve(svc_conn.clone(), req));
    let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .keep_alive(keepalive)
        .title_case_headers(true)
        .header_read_timeout(None)
        .max_buf_size(read_buf_max(&server))
        .writev(true);
    b.http2().timer(TokioTimer::new());
    crate::http::h2limits::apply_h2_limits!(b.http2(), &server);
    let c = b.serve_connection_with_upgrades(TokioIo::new(io), svc);
    // Boxed: only the protocol in use is allocated, and the task stays small.
    let mut c = Box::pin(c);
    let stopped = tokio::select! {
        _ = &mut c => return,
        why = stop.until_shutdown(&conn) => why,
    };
    c.as_mut().graceful_shutdown();
    shutdown::finish_graceful(c, stopped == Stop::Idle).await;
}
