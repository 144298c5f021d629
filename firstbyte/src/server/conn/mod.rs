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
//! between requests), `h1_scan` (the request framing nginx refuses, read from the bytes
//! as received, before hyper normalises the head), `h2` (HTTP/2, its streams in the
//! connection's task), `shutdown` (the
//! one wait for idle, last request, reload and drain); this file picks the protocol. What
//! requests read of their connection is `http::conn::Conn`.

mod accept;
mod h1;
mod h1_scan;
mod h2;
mod head_case;
mod shutdown;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tls::stream::BatchWrite;
use hyper_util::rt::TokioTimer;
use tokio::io::AsyncRead;
use tokio::net::TcpStream;

use crate::conf::model::ServerConf;
use crate::http::conn::Conn;
use crate::http::reqvars::ConnFacts;
use crate::net::{IoControl, SocketStream};
use crate::server::{Shared, Site};
use h1::WaitInput;
use shutdown::Shutdown;

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

/// Serves one accepted connection to its end. `peer` is `None` on a UNIX-domain socket
/// (`unix` is then its path, and `stream` wraps that socket: see `server::Acceptor`); the
/// TCP-only options (`TCP_NODELAY`, `TCP_NOTSENT_LOWAT`, congestion control, `TCP_CORK`,
/// `TCP_INFO`, kernel TLS) are then skipped.
pub async fn handle(
    site: Arc<Site>,
    shared: Arc<Shared>,
    socket: usize,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    listen: SocketAddr,
    unix: Option<Arc<str>>,
) {
    let accepted = Instant::now();
    shared.http.stats.accepts.fetch_add(1, Ordering::Relaxed);
    shared.http.stats.handled.fetch_add(1, Ordering::Relaxed);
    shared.http.stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = ActiveGuard(shared.clone());
    let id = shared.http.stats.accepts.load(Ordering::Relaxed);
    // A listener on one address is the connection's local address: no `getsockname` (nginx
    // asks the kernel only for wildcard listeners too).
    let tcp = unix.is_none();
    let local = if tcp && listen.ip().is_unspecified() {
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
    if tcp {
        apply_socket_options(fd, &default);
    }
    let hs_timeout = default.client_header_timeout;
    let mut facts = ConnFacts {
        peer,
        local: tcp.then_some(local),
        id,
        tls: None,
        record_policy: "static",
        proxy_protocol: None,
        proxy_protocol_tlvs: None,
        socket: tcp.then_some(fd),
        accepted: Some(accepted),
        unix,
    };

    if addr.proxy_protocol() {
        match accept::read_proxy_protocol(&stream, peer, accepted + hs_timeout).await {
            Ok((p, tlvs)) => {
                facts.proxy_protocol = p;
                facts.proxy_protocol_tlvs = tlvs;
            }
            Err(()) => return,
        }
    }
    let send_timeout = default.default_location.send_timeout;
    if !addr.ssl() {
        let http2 = addr.http2() || default.http2;
        // Plain text with `http2 on`: HTTP/2 when the client starts with the h2 preface
        // (prior knowledge), else HTTP/1.1; both on the same layers as over TLS.
        let proto = if !http2 {
            Proto::H1
        } else {
            match h2c_preface(&stream, accepted + hs_timeout).await {
                Some(true) => Proto::H2,
                Some(false) => Proto::H1,
                None => return,
            }
        };
        // `sendfile` (and the `TCP_CORK` around it) on TCP only.
        let io = Arc::new(IoControl::new(send_timeout, tcp));
        let stream = SocketStream::new(stream, io.clone(), peer);
        let conn = Arc::new(Conn::new(
            site.http().clone(),
            shared.http.clone(),
            socket,
            local,
            facts,
            io,
        ));
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
    let keepalive = !loc.keepalive_timeout.idle.is_zero();
    let keepalive_timeout = loc.keepalive_timeout.idle.max(Duration::from_millis(1));
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
                // Every response gets its `Date` in the pipeline (a proxied one may have none,
                // as nginx, with `proxy_pass_header Date`).
                .auto_date_header(false)
                .header_read_timeout(None)
                .max_buf_size(read_buf_max(&server));
            if conn.io().sendfile_capable() {
                // Keep each body frame as its own slice: `sendfile` markers must reach the
                // socket layer as they are. (On TLS the record layer gathers slices into
                // records itself.)
                b.writev(true);
            }
            h1::serve_h1(&conn, &b, io, h1::PARK_AFTER, read_buf_max(&server), stop).await;
        }
        // Boxed: an HTTP/1.1 connection's task does not carry this arm's state.
        Proto::H2 => Box::pin(h2::serve_h2(conn, io, server, stop)).await,
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

/// Whether a plain-text connection starts with HTTP/2's connection preface (h2c with prior
/// knowledge): peeks at its first bytes, without taking them, until they match the preface or
/// differ from it; `None` when the client sends nothing in time (or fails).
async fn h2c_preface(stream: &TcpStream, deadline: Instant) -> Option<bool> {
    let mut buf = [0u8; 24];
    loop {
        let n = tokio::time::timeout_at(deadline.into(), stream.peek(&mut buf))
            .await
            .ok()?
            .ok()?;
        if let Some(h2) = preface_verdict(&buf[..n]) {
            return Some(h2);
        }
        // Part of the preface so far: a peek would return the same bytes at once, so wait a
        // little for the rest (clients send it in one packet; nginx's tests split it).
        tokio::time::timeout_at(
            deadline.into(),
            tokio::time::sleep(Duration::from_millis(5)),
        )
        .await
        .ok()?;
    }
}

/// Some(true): `first` is HTTP/2's preface; Some(false): it cannot be (or the client closed:
/// empty); None: a prefix of it, wait for more.
fn preface_verdict(first: &[u8]) -> Option<bool> {
    let preface = crate::http::h2::frame::PREFACE;
    let n = first.len().min(preface.len());
    if first.is_empty() || first[..n] != preface[..n] {
        Some(false)
    } else if n == preface.len() {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::preface_verdict;

    #[test]
    fn h2c_is_told_by_the_whole_preface() {
        let p = crate::http::h2::frame::PREFACE;
        assert_eq!(preface_verdict(p), Some(true));
        assert_eq!(preface_verdict(&[p, b"\0\0\0\x04"].concat()), Some(true));
        // A prefix: wait for the rest (nginx's tests send "PRI * HTTP/2.0\r\n\r\n" first).
        assert_eq!(preface_verdict(&p[..18]), None);
        assert_eq!(preface_verdict(b"P"), None);
        // HTTP/1.1 requests, PUT and PATCH included, and an HTTP/1.1 "PRI" that is not h2.
        for h1 in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PUT /",
            b"PATCH /x HTTP/1.1",
            b"PRI / HTTP/1.1\r\n",
        ] {
            assert_eq!(
                preface_verdict(h1),
                Some(false),
                "{:?}",
                String::from_utf8_lossy(h1)
            );
        }
        assert_eq!(preface_verdict(b""), Some(false), "closed before a byte");
    }
}
