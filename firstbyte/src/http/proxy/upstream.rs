//! Connections to upstream servers: connect (TCP, then TLS for `https://`), the HTTP/1 or
//! HTTP/2 (`h2`) handshake through hyper's `client::conn`, the keepalive pool, and the body
//! wrappers that enforce `proxy_read_timeout` and hand a finished connection back to the
//! pool. Writes run under `proxy_send_timeout` ([`SendTimeout`], `send_timeout`).
//!
//! The pool is a list of idle `SendRequest`s per (peer address, TLS config, protocol), at most
//! `keepalive N` per key (nginx's per-worker cache). A connection goes back only after its
//! response body ended and hyper says it is ready for another request; a closed one is
//! dropped at checkout.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

pub use super::send_timeout::{is_send_timeout, SendTimeout, SharedTimeout};
use super::vars::TryCounts;
use crate::conf::model::PeerAddr;
use tokio::time::{sleep, Instant as TokioInstant, Sleep};

/// The request body type sent upstream (the client's body, streamed).
pub type ReqBody = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

/// A connection to an upstream, ready for a request, with the `proxy_send_timeout` its
/// writes run under: a pooled connection takes the timeout of the location that reuses it.
pub struct Sender {
    send: super::h2::Conn,
    send_timeout: SharedTimeout,
    /// Where the connection counts its bytes: the try that uses it now.
    counts: Tracker,
    /// Requests done over the connection (`keepalive_requests`).
    requests: u32,
    /// When it was made (`keepalive_time`).
    born: std::time::Instant,
    /// Since when it has been idle in the pool (`keepalive_timeout`).
    idle_since: std::time::Instant,
}

/// An upstream's `keepalive N`, `keepalive_requests`, `keepalive_timeout`, `keepalive_time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// `keepalive N`: idle connections kept (0: no pool).
    pub max: usize,
    /// A connection goes back to the pool only while it has done fewer requests.
    pub requests: u32,
    /// An idle connection is not used after this long.
    pub timeout: Duration,
    /// A connection goes back to the pool only while it is younger.
    pub time: Duration,
}

impl Keepalive {
    /// No pool.
    pub const OFF: Keepalive = Keepalive {
        max: 0,
        requests: 1000,
        timeout: Duration::from_secs(60),
        time: Duration::from_secs(3600),
    };

    /// The upstream block's settings.
    pub fn of(u: &crate::conf::model::Upstream) -> Keepalive {
        Keepalive {
            max: u.keepalive.unwrap_or(0),
            requests: u.keepalive_requests,
            timeout: u.keepalive_timeout,
            time: u.keepalive_time,
        }
    }
}

/// The counts of the try a connection serves now (swapped when a pooled one is reused).
type Tracker = Arc<Mutex<Arc<TryCounts>>>;

impl Sender {
    /// The bytes read and written from now on count for `counts`.
    pub fn track(&self, counts: Arc<TryCounts>) {
        if let Ok(mut c) = self.counts.lock() {
            *c = counts;
        }
    }

    /// Sets the send timeout for the requests that follow.
    pub fn set_send_timeout(&self, timeout: Duration) {
        self.send_timeout.set(timeout);
    }
}

impl std::ops::Deref for Sender {
    type Target = super::h2::Conn;
    fn deref(&self) -> &Self::Target {
        &self.send
    }
}

impl std::ops::DerefMut for Sender {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.send
    }
}

/// What identifies interchangeable connections: the peer, the route's TLS config (0 for
/// plain), the evaluated client certificate paths when they come from variables, and the
/// `upstream` block (its balancer): each block has its own `keepalive` cache, as nginx.
/// The last: HTTP/2 (a connection speaks one protocol).
pub type PoolKey = (PeerAddr, usize, Option<Arc<str>>, usize, bool);

/// Why connecting failed, in nginx's words (`... while connecting to upstream`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The TCP connect failed.
    #[error("connect() failed ({}) while connecting to upstream", crate::log::OsError(.0))]
    Connect(io::Error),
    /// `proxy_connect_timeout` passed.
    #[error("upstream timed out (110: Connection timed out) while connecting to upstream")]
    TimedOut,
    /// The TLS handshake failed.
    #[error("SSL_do_handshake() failed ({0}) while SSL handshaking to upstream")]
    Tls(io::Error),
    /// hyper's HTTP/1 handshake failed.
    #[error("upstream handshake failed ({0}) while connecting to upstream")]
    Http(hyper::Error),
    /// `proxy_bind`'s address could not be set (nginx: 500, not the upstream's fault).
    #[error("{0}")]
    Local(String),
}

impl ConnectError {
    /// Whether this is a timeout (504) rather than an error (502).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ConnectError::TimedOut)
    }
}

/// TLS to an upstream: the config and the name checked (and sent when SNI is on).
#[derive(Clone)]
pub struct UpstreamTls {
    /// The rustls client config.
    pub config: Arc<rustls::ClientConfig>,
    /// The name.
    pub name: ServerName<'static>,
}

/// `proxy_bind`: the local address of connections to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalBind {
    /// The address (port 0: any).
    pub addr: std::net::SocketAddr,
    /// `transparent`: `IP_TRANSPARENT` (`IPV6_TRANSPARENT`).
    pub transparent: bool,
}

/// A TCP connection to `to` from `local`, as nginx's `ngx_event_connect_peer`: the socket
/// made transparent when asked, `IP_BIND_ADDRESS_NO_PORT` when no port is given (the port is
/// chosen at connect, so one local address serves many upstreams), bound, then connected.
async fn connect_from(
    to: std::net::SocketAddr,
    local: &LocalBind,
) -> Result<TcpStream, ConnectError> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::AsRawFd;
    let bad = |what: String, e: io::Error| {
        ConnectError::Local(format!("{what} failed ({})", crate::log::OsError(&e)))
    };
    let sock = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| bad("socket()".into(), e))?;
    let on: libc::c_int = 1;
    let set = |level: libc::c_int, name: libc::c_int| -> io::Result<()> {
        // SAFETY: `on` outlives the call and its size is given; the descriptor is open.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                level,
                name,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    if local.transparent {
        let r = if local.addr.is_ipv4() {
            set(libc::SOL_IP, libc::IP_TRANSPARENT)
                .map_err(|e| bad("setsockopt(IP_TRANSPARENT)".into(), e))
        } else {
            set(libc::SOL_IPV6, libc::IPV6_TRANSPARENT)
                .map_err(|e| bad("setsockopt(IPV6_TRANSPARENT)".into(), e))
        };
        r?;
    }
    if local.addr.port() == 0 && local.addr.is_ipv4() {
        // nginx ignores a failure here too: the bind then takes a port at once.
        let _ = set(libc::SOL_IP, libc::IP_BIND_ADDRESS_NO_PORT);
    }
    sock.bind(&local.addr.into())
        .map_err(|e| bad(format!("bind({})", local.addr), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| bad("ioctl(FIONBIO)".into(), e))?;
    let std: std::net::TcpStream = sock.into();
    tokio::net::TcpSocket::from_std_stream(std)
        .connect(to)
        .await
        .map_err(ConnectError::Connect)
}

/// Connects to `addr` within `timeout`, with TLS when `tls` is given, and spawns the
/// connection's task (upgrades allowed, for WebSocket). Writes that wait longer than
/// `send_timeout` fail the connection. `proto` is HTTP/1 or HTTP/2 (`proxy_http_version`).
pub async fn connect(
    addr: &PeerAddr,
    tls: Option<&UpstreamTls>,
    timeout: Duration,
    send_timeout: Duration,
    local: Option<&LocalBind>,
    proto: super::h2::Proto,
) -> Result<Sender, ConnectError> {
    let work = async {
        let shared = SharedTimeout::new(send_timeout);
        match addr {
            PeerAddr::Tcp(a) => {
                let tcp = match local {
                    Some(l) => connect_from(*a, l).await?,
                    None => TcpStream::connect(a).await.map_err(ConnectError::Connect)?,
                };
                let _ = tcp.set_nodelay(true);
                over(SendTimeout::new(tcp, shared.clone()), tls, shared, proto).await
            }
            PeerAddr::Unix(path) => {
                let unix = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(ConnectError::Connect)?;
                over(SendTimeout::new(unix, shared.clone()), tls, shared, proto).await
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::TimedOut),
    }
}

/// HTTP/1 or HTTP/2 over `io`, through TLS when `tls` is given (offering ALPN `h2` for
/// HTTP/2, as nginx).
async fn over<S>(
    io: S,
    tls: Option<&UpstreamTls>,
    shared: SharedTimeout,
    proto: super::h2::Proto,
) -> Result<Sender, ConnectError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    match tls {
        None => handshake(io, shared, proto).await,
        Some(t) => {
            let config = match proto {
                super::h2::Proto::H1 => t.config.clone(),
                super::h2::Proto::H2 { .. } => super::h2::alpn_config(&t.config),
            };
            let c = tokio_rustls::TlsConnector::from(config);
            let s = c
                .connect(t.name.clone(), io)
                .await
                .map_err(ConnectError::Tls)?;
            // rustls refuses a protocol it did not offer: an upstream that wants only another
            // one fails the handshake; one without ALPN gets HTTP/2 anyway, as from nginx.
            handshake(s, shared, proto).await
        }
    }
}

async fn handshake<S>(
    io: S,
    send_timeout: SharedTimeout,
    proto: super::h2::Proto,
) -> Result<Sender, ConnectError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let counts = Tracker::default();
    let io = Counting {
        inner: io,
        counts: counts.clone(),
    };
    if let super::h2::Proto::H2 { max_header_list } = proto {
        let sender = super::h2::handshake(TokioIo::new(io), max_header_list)
            .await
            .map_err(ConnectError::Http)?;
        let now = std::time::Instant::now();
        return Ok(Sender {
            send: super::h2::Conn::H2(sender),
            send_timeout,
            counts,
            requests: 0,
            born: now,
            idle_since: now,
        });
    }
    // The upstream's header-name case is kept (hyper records it in the response's
    // extensions, which the client's response keeps), so `X-URI` reaches the client as nginx
    // passes it rather than title-cased.
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .handshake(TokioIo::new(io))
        .await
        .map_err(ConnectError::Http)?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let now = std::time::Instant::now();
    Ok(Sender {
        send: super::h2::Conn::H1(sender),
        send_timeout,
        counts,
        requests: 0,
        born: now,
        idle_since: now,
    })
}

/// A stream that counts the bytes read and written (after TLS: nginx's figures are the
/// HTTP bytes) into the try that uses the connection now.
struct Counting<S> {
    inner: S,
    counts: Tracker,
}

impl<S> Counting<S> {
    fn add(&self, n: usize, sent: bool) {
        if n == 0 {
            return;
        }
        if let Ok(c) = self.counts.lock() {
            let which = if sent { &c.sent } else { &c.received };
            which.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counting<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            this.add(buf.filled().len().saturating_sub(before), false);
        }
        r
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counting<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.add(n, true);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.add(n, true);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Idle upstream connections of one load.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<PoolKey, Vec<Sender>>>,
    /// Connections handed out from the pool (for tests and stats).
    reused: std::sync::atomic::AtomicU64,
}

impl Pool {
    /// An idle, still-open connection for `key`.
    /// One idle longer than `timeout` is closed, as nginx's `keepalive_timeout` would have.
    pub fn checkout(&self, key: &PoolKey, timeout: Duration) -> Option<Sender> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.get_mut(key)?;
        while let Some(s) = list.pop() {
            if !s.is_closed() && s.is_ready() && s.idle_since.elapsed() <= timeout {
                self.reused
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Some(s);
            }
        }
        None
    }

    /// Keeps `sender`, which has just finished a request, for the next request to `key`: if
    /// fewer than `k.max` are idle there, it has done fewer than `keepalive_requests` and is
    /// younger than `keepalive_time` (nginx's checks when it frees a connection).
    pub fn put(&self, key: PoolKey, mut sender: Sender, k: Keepalive) {
        sender.requests = sender.requests.saturating_add(1);
        if sender.requests >= k.requests || sender.born.elapsed() > k.time {
            return;
        }
        sender.idle_since = std::time::Instant::now();
        if let Ok(mut idle) = self.idle.lock() {
            let list = idle.entry(key).or_default();
            list.retain(|s| !s.is_closed() && s.idle_since.elapsed() <= k.timeout);
            if list.len() < k.max {
                list.push(sender);
            }
        }
    }

    /// How many requests went out on a pooled connection.
    pub fn reused(&self) -> u64 {
        self.reused.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Where a connection goes back when its response is done.
pub struct Return {
    /// The pool.
    pub pool: Arc<Pool>,
    /// Its key.
    pub key: PoolKey,
    /// The connection.
    pub sender: Sender,
    /// The upstream's `keepalive*` settings.
    pub keepalive: Keepalive,
}

impl Return {
    fn give_back(self) {
        let Return {
            pool,
            key,
            mut sender,
            keepalive,
        } = self;
        tokio::spawn(async move {
            // hyper marks the connection ready once it has read the response's end.
            if tokio::time::timeout(Duration::from_secs(1), sender.ready())
                .await
                .is_ok_and(|r| r.is_ok())
            {
                pool.put(key, sender, keepalive);
            }
        });
    }
}

/// The upstream's response body: `proxy_read_timeout` between frames, and the connection
/// back to the pool at the end.
pub struct UpstreamBody {
    inner: Incoming,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
    back: Option<Return>,
    /// The try's counts: data bytes go to `body` (`$upstream_response_length`).
    counts: Option<Arc<TryCounts>>,
    /// Held while the response is read: `least_conn` counts the connection until then.
    _conn: Option<super::ConnGuard>,
}

impl UpstreamBody {
    /// Wraps `inner`.
    pub fn new(inner: Incoming, timeout: Duration, back: Option<Return>) -> Self {
        Self {
            inner,
            timeout,
            timer: Box::pin(sleep(timeout)),
            back,
            counts: None,
            _conn: None,
        }
    }

    /// Counts the body's bytes into `counts`.
    pub(super) fn count(mut self, counts: Arc<TryCounts>) -> Self {
        self.counts = Some(counts);
        self
    }

    /// Keeps `conn` (the balancer's count of this connection) until the body is dropped.
    pub(super) fn hold(mut self, conn: super::ConnGuard) -> Self {
        self._conn = Some(conn);
        self
    }
}

impl UpstreamBody {
    /// Starts the `proxy_read_timeout` wait again (after a pause that was the client's doing).
    pub fn rearm(&mut self) {
        self.timer
            .as_mut()
            .reset(TokioInstant::now() + self.timeout);
    }
}

impl UpstreamBody {
    /// Whether the response is whole: ended, or all its `Content-Length` read (an HTTP/2
    /// upstream may send END_STREAM in an empty DATA frame after that; the stream is reset
    /// then, and the connection stays good for the next).
    fn whole(&self) -> bool {
        self.inner.is_end_stream() || self.inner.size_hint().exact() == Some(0)
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        if self.whole() {
            if let Some(b) = self.back.take() {
                b.give_back();
            }
        }
    }
}

impl http_body::Body for UpstreamBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let mut p = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &p {
            if f.is_trailers() {
                // The trailer section stays here (nginx's `headers_in.trailers`): what goes
                // on to the client is the pipeline's choice (`proxy_pass_trailers`).
                if let Poll::Ready(Some(Ok(f))) = p {
                    if let (Some(c), Ok(t)) = (&this.counts, f.into_trailers()) {
                        if let Ok(mut slot) = c.trailers.lock() {
                            *slot = Some(t);
                        }
                    }
                }
                p = Pin::new(&mut this.inner).poll_frame(cx);
            }
        }
        match p {
            Poll::Ready(Some(Ok(f))) => {
                if let (Some(c), Some(d)) = (&this.counts, f.data_ref()) {
                    c.body
                        .fetch_add(d.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                this.timer
                    .as_mut()
                    .reset(TokioInstant::now() + this.timeout);
                // hyper's server stops polling a body whose length says it is done.
                if this.inner.is_end_stream() {
                    if let Some(b) = this.back.take() {
                        b.give_back();
                    }
                }
                Poll::Ready(Some(Ok(f)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.back = None;
                crate::fblog!(
                    Error,
                    "upstream prematurely closed connection while reading upstream ({e})"
                );
                Poll::Ready(Some(Err(io::Error::other(e))))
            }
            Poll::Ready(None) => {
                if let Some(b) = this.back.take() {
                    b.give_back();
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                if this.timer.as_mut().poll(cx).is_ready() {
                    this.back = None;
                    crate::fblog!(
                        Error,
                        "upstream timed out (110: Connection timed out) while reading upstream"
                    );
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "upstream timed out",
                    ))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_in_nginx_words() {
        let e = ConnectError::Connect(io::Error::from_raw_os_error(111));
        assert_eq!(
            e.to_string(),
            "connect() failed (111: Connection refused) while connecting to upstream"
        );
        assert!(ConnectError::TimedOut.is_timeout());
        assert!(!e.is_timeout());
    }

    #[tokio::test]
    async fn refused_connect_fails_fast() {
        // Port 1 on loopback: nothing listens there in a test environment.
        let t = std::time::Instant::now();
        let r = connect(
            &PeerAddr::Tcp("127.0.0.1:1".parse().expect("addr")),
            None,
            Duration::from_secs(5),
            Duration::from_secs(5),
            None,
            super::super::h2::Proto::H1,
        )
        .await;
        assert!(matches!(r, Err(ConnectError::Connect(_))));
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
