//! HTTP/1.1 on one connection, holding hyper's connection only while a request is in
//! progress: between requests it is taken apart ("parked") and built again when the next
//! request's first byte arrives ([`serve_h1`]). [`parkable`] decides when that loses nothing,
//! from what the socket has seen hyper do ([`H1Watch`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::h1_scan::HeadScan;
use super::shutdown::{Shutdown, Stop};
use crate::http::conn::{Conn, H1Watch};
use crate::net::SocketStream;

/// How long an HTTP/1.1 connection waits between requests before its hyper connection is
/// taken apart: 5 ms. A client sending its requests back to back on a keep-alive connection
/// (a load tool on a LAN) comes back within it and pays no rebuild, which cost 10–20% more
/// CPU per request (wrk, 32 connections) when every response parked at once; a client a WAN
/// round trip away parks between requests, as nginx frees its buffers then. Longer graces
/// cost memory after bursts: with 1,000 connections opened in a burst, 50 ms left 15.0 KiB
/// per idle connection resident and 5 ms 11.4 KiB (10.6 parking at once), the freed buffers
/// staying in the heap.
pub(super) const PARK_AFTER: Duration = Duration::from_millis(5);

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
/// `park_after`: [`PARK_AFTER`] but in tests. `max_head`: hyper's `max_buf_size`, the bound
/// on a request head (see [`HeadScan`]).
pub(super) async fn serve_h1<I>(
    conn: &Arc<Conn>,
    b: &hyper::server::conn::http1::Builder,
    io: I,
    park_after: Duration,
    max_head: usize,
    mut stop: Shutdown,
) where
    I: AsyncRead + AsyncWrite + WaitInput + Unpin + Send + 'static,
{
    use tokio::io::AsyncWriteExt;
    let svc_conn = conn.clone();
    let mut svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let c = svc_conn.clone();
        // The framing nginx refuses in the head as received (hyper normalised it).
        let refusal = c.h1().refusal(req.method().as_str(), req.uri());
        let mut req = req.map(|body| ReqBody::new(body, &c));
        let refused = refusal.is_some();
        if let Some(r) = refusal {
            req.extensions_mut().insert(r);
        }
        async move {
            // The connection task's waker (hyper polls the service there): a 103 from the
            // upstream wakes it to be written.
            if c.site().proxies.early_hints() {
                let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
                req.extensions_mut()
                    .insert(crate::http::proxy::EarlyHints::h1(c.clone(), waker));
            }
            let Ok(mut resp) = crate::http::pipeline::serve(c.clone(), req, None).await;
            if refused {
                // Whatever answered it, the body's framing is unknown: the connection ends
                // after the response (RFC 9112 §6.1, §6.3).
                resp.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            let names = resp
                .extensions_mut()
                .remove::<crate::http::conn::HeaderCase>()
                .map(|h| h.0)
                .unwrap_or_default();
            *c.h1().head_case.lock().unwrap_or_else(|e| e.into_inner()) = Some(names);
            c.h1().head_pending.store(true, Ordering::Release);
            // nginx's 444: no response at all; a service error makes hyper close the
            // connection without writing one.
            if resp.status().as_u16() == crate::http::pipeline::CLOSE {
                return Err(CloseWithoutResponse);
            }
            Ok(resp)
        }
    });
    let mut io = Watched {
        io,
        prefix: bytes::Bytes::new(),
        conn: conn.clone(),
        interim: bytes::Bytes::new(),
        scan: HeadScan::new(max_head),
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
            why = stop.until_shutdown(conn) => match why {
                Stop::Idle => return,
                Stop::LastRequest | Stop::Retired | Stop::Draining => true,
            },
        };
        if closing {
            // What hyper's graceful shutdown does to an idle connection: close it.
            let _ = tokio::time::timeout(Duration::from_secs(1), io.shutdown()).await;
            return;
        }
        io.conn.h1().reset();
        // Boxed: the task stays small; freed when the connection parks.
        let mut c = Box::new(b.serve_connection(TokioIo::new(io), svc).with_upgrades());
        // The grace timer: `park_after` from the end of the last request (or from now, before
        // the first); the connection parks when it fires with hyper still waiting.
        let mut grace: Option<(Instant, Pin<Box<tokio::time::Sleep>>)> = None;
        let start = Instant::now();
        let turn = std::future::poll_fn(|cx| match Pin::new(&mut *c).poll(cx) {
            Poll::Ready(_) => Poll::Ready(H1Turn::Done),
            Poll::Pending if parkable(moves(conn.h1(), conn.activity().inflight())) => {
                let since = conn.activity().idle_since().unwrap_or(start).max(start);
                let deadline = since + park_after;
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
            why = stop.until_shutdown(conn) => match why {
                Stop::Idle => return,
                Stop::LastRequest | Stop::Retired | Stop::Draining => H1Turn::Shutdown,
            },
        };
        match turn {
            H1Turn::Done => return,
            H1Turn::Shutdown => {
                conn.h1().shutting_down.store(true, Ordering::Relaxed);
                let mut c = Pin::new(&mut *c);
                c.as_mut().graceful_shutdown();
                let _ = c.await;
                return;
            }
            H1Turn::Park => {
                let Some(parts) = (*c).into_parts() else {
                    return;
                };
                conn.h1().parks.fetch_add(1, Ordering::Relaxed);
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

/// What `w` has seen, with the requests in flight.
fn moves(w: &H1Watch, inflight: u64) -> H1Moves {
    H1Moves {
        read_blocked: w.read_blocked.load(Ordering::Relaxed),
        unflushed: w.unflushed.load(Ordering::Relaxed),
        closing: w.closing.load(Ordering::Relaxed),
        abandoned: w.abandoned.load(Ordering::Relaxed),
        open_bodies: w.open_bodies.load(Ordering::Relaxed),
        inflight,
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

/// The service's "error" for nginx's 444: close without a response.
#[derive(Debug)]
struct CloseWithoutResponse;

impl std::fmt::Display for CloseWithoutResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("444: connection closed without a response")
    }
}

impl std::error::Error for CloseWithoutResponse {}

/// A stream an idle HTTP/1.1 connection waits on with no read buffer.
pub(super) trait WaitInput {
    /// `Ready` when a read would return data or EOF at once (or the stream failed).
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>>;
}

impl<S: crate::net::ReadReady> WaitInput for SocketStream<S> {
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
    /// Interim responses (`100 Continue`, `103 Early Hints`) written before hyper's next
    /// bytes.
    interim: bytes::Bytes,
    /// The request stream as received, for the framing hyper normalises away.
    scan: HeadScan,
}

impl<I: AsyncWrite + Unpin> Watched<I> {
    /// Writes an owed `100 Continue` or `103 Early Hints` first; Ready once nothing is owed.
    fn poll_interim(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let w = self.conn.h1();
        let mut owed = Vec::new();
        if w.continue_due.load(Ordering::Relaxed) && w.continue_due.swap(false, Ordering::Relaxed) {
            owed.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        if w.early_due.load(Ordering::Acquire) && w.early_due.swap(false, Ordering::Acquire) {
            owed.append(&mut w.early.lock().unwrap_or_else(|e| e.into_inner()));
        }
        if !owed.is_empty() {
            let mut all = self.interim.to_vec();
            all.append(&mut owed);
            self.interim = all.into();
        }
        while !self.interim.is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, &self.interim) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => bytes::Buf::advance(&mut self.interim, n),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<I> Watched<I> {
    /// The pending response head's names: taken by the first write after the service
    /// answered (which starts that head, or else the head goes as hyper wrote it).
    fn take_head_case(&self) -> Option<Vec<Box<str>>> {
        if !self.conn.h1().head_pending.swap(false, Ordering::Acquire) {
            return None;
        }
        self.conn
            .h1()
            .head_case
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// A write that did not happen gives them back for its retry.
    fn put_head_case(&self, names: Vec<Box<str>>) {
        *self
            .conn
            .h1()
            .head_case
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(names);
        self.conn.h1().head_pending.store(true, Ordering::Release);
    }
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
            this.conn.h1().read_blocked.store(false, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.conn
            .h1()
            .read_blocked
            .store(r.is_pending(), Ordering::Relaxed);
        if buf.filled().len() > before {
            this.conn.input();
            this.conn.activity().read(buf.filled().len() - before);
            let conn = &this.conn;
            this.scan.feed(&mut buf.filled_mut()[before..], &mut |v| {
                conn.h1()
                    .verdicts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(v)
            });
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
        this.conn.h1().unflushed.store(true, Ordering::Relaxed);
        std::task::ready!(this.poll_interim(cx))?;
        if let Some(names) = this.take_head_case() {
            if let Some(p) = super::head_case::patch_head(buf, &names) {
                let r = Pin::new(&mut this.io).poll_write(cx, &p);
                if r.is_pending() {
                    this.put_head_case(names);
                }
                return r;
            }
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.conn.h1().unflushed.store(true, Ordering::Relaxed);
        std::task::ready!(this.poll_interim(cx))?;
        if let (Some(names), Some(first)) = (this.take_head_case(), bufs.first()) {
            if let Some(p) = super::head_case::patch_head(first, &names) {
                let mut v: Vec<std::io::IoSlice<'_>> = Vec::with_capacity(bufs.len());
                v.push(std::io::IoSlice::new(&p));
                v.extend_from_slice(&bufs[1..]);
                let r = Pin::new(&mut this.io).poll_write_vectored(cx, &v);
                if r.is_pending() {
                    this.put_head_case(names);
                }
                return r;
            }
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // hyper flushes whenever its task wakes: a 103 queued while the service works goes
        // out here, before the response.
        std::task::ready!(this.poll_interim(cx))?;
        let r = Pin::new(&mut this.io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            this.conn.h1().unflushed.store(false, Ordering::Relaxed);
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.conn.h1().closing.store(true, Ordering::Relaxed);
        // nginx closes after the background updates its requests started (see
        // `http::conn::Background`); each ends with its upstream exchange.
        if let Some(b) = this.conn.h1().background.get() {
            std::task::ready!(b.poll_done(cx));
        }
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
            conn.h1().open_bodies.fetch_add(1, Ordering::Relaxed);
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
                c.h1().open_bodies.fetch_sub(1, Ordering::Relaxed);
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
            c.h1().abandoned.store(true, Ordering::Relaxed);
            c.h1().open_bodies.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioTimer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadBuf};

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
        let minute = Duration::from_secs(60);
        let (conn, stop) = super::super::shutdown::test_conn(minute, minute);
        let (client, server) = tokio::io::duplex(1 << 16);
        let io = Peekable {
            inner: server,
            ahead: None,
        };
        let mut b = hyper::server::conn::http1::Builder::new();
        b.timer(TokioTimer::new());
        let c2 = conn.clone();
        let task = tokio::spawn(async move {
            serve_h1(&c2, &b, io, park_after, 64 * 1024, stop).await;
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
            conn.h1().parks.load(Ordering::Relaxed),
            0,
            "parked between busy requests"
        );
        // Idle past the grace: parked once.
        let deadline = Instant::now() + Duration::from_secs(5);
        while conn.h1().parks.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            conn.h1().parks.load(Ordering::Relaxed),
            1,
            "parks once idle"
        );
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
        let parks = |c: &Conn| c.h1().parks.load(Ordering::Relaxed);
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
        assert_eq!(conn.h1().open_bodies.load(Ordering::Relaxed), 0);
        assert!(!task.is_finished(), "the connection lives on");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("closed at EOF")
            .unwrap();
    }
}
