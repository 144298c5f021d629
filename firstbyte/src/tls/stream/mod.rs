//! firstbyte's own TLS stream: rustls' `ServerConnection` driven directly over the socket,
//! with the record-size policy and the first-response hold built in.
//!
//! Owning the connection (rather than wrapping tokio-rustls) decides three things that set
//! the first byte's time and the bulk rate:
//!
//! - **Records.** Plaintext is gathered into records as nginx does with `ssl_buffer_size`: the
//!   policy ([`RecordPolicy`]) chooses each record's size when its first byte arrives; small
//!   writes (headers, then body) share a record; a flush closes the open record at once; a
//!   write of a whole record while none is open goes to rustls with no copy. rustls' buffer
//!   limit is lifted, so every record is encrypted whole — never cut by back-pressure.
//! - **Batching.** Encrypted records wait in rustls' queue and leave on flush with one
//!   `writev` (rustls hands up to 64 records at once), not one syscall per record; above
//!   [`PUSH_AT`] queued bytes they are pushed without waiting for a flush, so memory stays
//!   bounded and a long body keeps the socket busy.
//! - **The first flight.** The handshake writes every flight as soon as rustls makes it —
//!   ServerHello through Finished in one write whatever the certificate chain size. When a
//!   TLS 1.3 handshake completes, rustls queues the session tickets: they are *not* written
//!   then. They wait (at most [`MAX_HOLD`]) for the first response, signalled through
//!   [`Release`], and leave in the same `writev` as its first records, so a 10 KB answer fits
//!   the initial congestion window. TLS 1.2's last flight (tickets, ChangeCipherSpec,
//!   Finished) is part of the handshake and is always written at once.
//! - **A protocol that speaks first** (HTTP/2, [`TlsStream::speak_first`]) gets no hold: the
//!   tickets leave with its SETTINGS. It writes each turn's frames in one write itself.
//!
//! Every one of these decisions is made by plain code in [`plan`] (a `WritePlan`, told the
//! time, the bytes, the release and `TCP_INFO`, answering what to emit and until when to
//! hold), unit-tested without sockets; this file is the I/O shell around it, with one timer
//! armed at the deadline the plan returns.

use std::future::Future;
use std::io::{self, IoSlice, Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::server::{Accepted, Acceptor};
use rustls::ServerConnection;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::record::{RecordPolicy, TcpInfoSource, MAX_RECORD_SIZE};

mod plan;

use plan::{Chunk, Send, WritePlan};

/// The longest the TLS 1.3 tickets wait for the first response: 10 ms, far below a WAN round
/// trip (what waiting saves) and far above the time a static response takes to produce (what
/// it waits for). A slow first response (a proxied upstream) gets its tickets on time.
pub const MAX_HOLD: Duration = Duration::from_millis(10);

/// Encrypted bytes queued before they are pushed to the socket without a flush: 64 KB, four
/// full records — one `writev` per 64 KB of a long body.
pub const PUSH_AT: usize = 64 * 1024;

/// Lets the HTTP layer say its first response is ready.
#[derive(Debug, Clone, Default)]
pub struct Release(Arc<AtomicBool>);

impl Release {
    /// A fresh signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// The first response is ready: the next flush after it has written sends what is held.
    pub fn release(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn released(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Open while a TLS 1.3 handshake that accepted early data (0-RTT) waits for the client's
/// Finished. The stream is handed out then (see [`handshake`]): a request taken while the gate
/// is open may be a replay — nobody has proven to be the client yet — so the HTTP layer serves
/// only what is safe to replay (RFC 8470). A request dispatched after the Finished was read
/// is the authenticated client's even if its bytes came as early data: a replayed ClientHello
/// never gets that far. nginx decides the same way (`SSL_in_early_data` when the request is
/// processed).
#[derive(Debug, Clone)]
pub struct EarlyGate(Arc<AtomicBool>);

impl EarlyGate {
    fn open() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    /// Whether the handshake still waits for the client's Finished.
    pub fn handshaking(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn close(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// `std::io` view of an async reader for rustls' `read_tls` (Pending → `WouldBlock`).
struct SyncRead<'a, 'b, IO> {
    io: &'a mut IO,
    cx: &'a mut Context<'b>,
}

impl<IO: AsyncRead + Unpin> Read for SyncRead<'_, '_, IO> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// `std::io` view of an async writer for rustls' `write_tls` (vectored: one `writev` for
/// everything queued).
struct SyncWrite<'a, 'b, IO> {
    io: &'a mut IO,
    cx: &'a mut Context<'b>,
}

impl<IO: AsyncWrite + Unpin> Write for SyncWrite<'_, '_, IO> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes everything rustls has queued; `Ready(Ok)` when the queue is empty.
fn poll_write_tls<IO: AsyncWrite + Unpin>(
    conn: &mut ServerConnection,
    io: &mut IO,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    while conn.wants_write() {
        match conn.write_tls(&mut SyncWrite { io, cx }) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
    Poll::Ready(Ok(()))
}

/// Reads once from `io` into rustls and processes what arrived. `Ready(Ok(false))` at EOF.
fn poll_read_tls<IO: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut ServerConnection,
    io: &mut IO,
    cx: &mut Context<'_>,
) -> Poll<io::Result<bool>> {
    let n = match conn.read_tls(&mut SyncRead { io, cx }) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
        Err(e) => return Poll::Ready(Err(e)),
    };
    process(conn, io, cx)?;
    Poll::Ready(Ok(n > 0))
}

/// Processes what rustls has read; on a TLS error tells the peer why (the alert rustls
/// queued), best effort, then fails.
fn process<IO: AsyncWrite + Unpin>(
    conn: &mut ServerConnection,
    io: &mut IO,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    conn.process_new_packets().map(drop).map_err(|e| {
        let _ = poll_write_tls(conn, io, cx);
        io::Error::new(io::ErrorKind::InvalidData, e)
    })
}

/// Copies received plaintext into `buf` without initializing its unfilled part first (the
/// caller's buffer, hyper's 8 KB read buffer, is then touched only as far as data arrives:
/// no memset per read, no resident pages for an idle connection's empty buffer). `Ok` with
/// nothing copied is a clean close (or a full `buf`); `WouldBlock` when nothing is
/// decrypted yet.
fn read_plain(conn: &mut ServerConnection, buf: &mut ReadBuf<'_>) -> io::Result<()> {
    use std::io::BufRead;
    let mut reader = conn.reader();
    let mut got = false;
    while buf.remaining() > 0 {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(_) if got => break,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len().min(buf.remaining());
        buf.put_slice(&chunk[..n]);
        reader.consume(n);
        got = true;
    }
    Ok(())
}

/// Reads the ClientHello. The caller chooses a config from it and calls [`handshake`].
pub async fn read_client_hello<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
) -> io::Result<Accepted> {
    let mut acceptor = Acceptor::default();
    std::future::poll_fn(|cx| loop {
        match acceptor.read_tls(&mut SyncRead { io, cx }) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => return Poll::Ready(Ok(accepted)),
            Ok(None) => continue,
            Err((e, mut alert)) => {
                let mut out = Vec::new();
                let _ = alert.write_all(&mut out);
                let _ = Pin::new(&mut *io).poll_write(cx, &out);
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
        }
    })
    .await
}

/// Completes the handshake on `conn` (from `Accepted::into_connection`) and returns the
/// stream. Every handshake flight is written whole as soon as it exists; TLS 1.3 tickets are
/// left queued for the first response, or for the first flush once the caller chooses
/// [`TlsStream::speak_first`].
///
/// When the server accepted early data (0-RTT: `max_early_data_size` set, a resumed TLS 1.3
/// client that sent some), the stream is returned as soon as the server's flight is out:
/// its reads yield the early data, its writes leave at once (0.5-RTT data), and its
/// [`EarlyGate`] stays open until the client's Finished arrives.
pub async fn handshake<IO, T>(
    mut io: IO,
    mut conn: ServerConnection,
    policy: RecordPolicy,
    source: T,
    release: Release,
) -> io::Result<TlsStream<IO, T>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    T: TcpInfoSource,
{
    std::future::poll_fn(|cx| {
        while conn.is_handshaking() {
            if conn.wants_write() {
                std::task::ready!(poll_write_tls(&mut conn, &mut io, cx))?;
                continue;
            }
            if conn.early_data().is_some() {
                // 0-RTT accepted and the server's flight is out: serve the early data now —
                // after processing what came with the ClientHello (its early data records sit
                // read but undecrypted, and the client may send nothing more before an answer).
                process(&mut conn, &mut io, cx)?;
                if !conn.wants_write() {
                    break;
                }
                continue;
            }
            if !std::task::ready!(poll_read_tls(&mut conn, &mut io, cx))? {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::UnexpectedEof)));
            }
        }
        Poll::Ready(Ok::<(), io::Error>(()))
    })
    .await?;
    let gate = conn.is_handshaking().then(EarlyGate::open);
    let tls13 = conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
    if !tls13 {
        // TLS 1.2's final flight is the handshake's: the client waits for it.
        std::future::poll_fn(|cx| poll_write_tls(&mut conn, &mut io, cx)).await?;
        io.flush().await?;
    }
    // Records are encrypted whole; queued ciphertext is bounded by PUSH_AT instead.
    conn.set_buffer_limit(None);
    let plan = WritePlan::new(policy, Instant::now(), tls13, conn.wants_write());
    let mut stream = TlsStream {
        io,
        conn,
        plan,
        source,
        plain: Vec::new(),
        timer: None,
        release,
        eof: false,
        close_sent: false,
        early: gate.map(|g| Early {
            gate: g,
            data: Vec::new(),
            read: 0,
            hs: None,
        }),
    };
    stream.take_early();
    Ok(stream)
}

/// A 0-RTT connection's early data and the gate that says whether its handshake is done.
struct Early {
    gate: EarlyGate,
    /// Early data taken from rustls, not yet read.
    data: Vec<u8>,
    /// How much of `data` has been read.
    read: usize,
    /// The handshake's context while it is not done ([`TlsStream::carry_handshake`]).
    hs: Option<super::handshake_cx::HandshakeCx>,
}

impl Early {
    fn unread(&self) -> &[u8] {
        &self.data[self.read..]
    }
}

/// A server TLS connection after its handshake (see the module docs). The decisions are
/// its [`WritePlan`]'s; this shell moves the bytes and keeps the one timer.
pub struct TlsStream<IO, T> {
    io: IO,
    conn: ServerConnection,
    plan: WritePlan,
    source: T,
    /// Plaintext of the record being gathered.
    plain: Vec<u8>,
    /// The timer at the plan's deadline (the tickets' hold), armed when first waited on.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    release: Release,
    eof: bool,
    close_sent: bool,
    /// Set when the handshake accepted early data (0-RTT).
    early: Option<Early>,
}

impl<IO, T> TlsStream<IO, T> {
    /// For a connection whose handshake is not done (0-RTT): the handshake's context
    /// (`super::handshake_cx`), current while the rest of the handshake is read, so the
    /// tickets issued at its end carry the connection's id. Otherwise nothing to keep.
    pub fn carry_handshake(&mut self, hs: super::handshake_cx::HandshakeCx) {
        if let Some(early) = &mut self.early {
            early.hs = Some(hs);
        }
    }
}

impl<IO, T> TlsStream<IO, T> {
    /// For a connection that accepted early data (0-RTT): the gate that is open until its
    /// handshake completes.
    pub fn early_gate(&self) -> Option<&EarlyGate> {
        self.early.as_ref().map(|e| &e.gate)
    }

    /// Moves the early data rustls holds into the stream's own buffer, read before anything
    /// that follows the handshake (rustls keeps the two apart), and closes the gate once the
    /// handshake is done.
    fn take_early(&mut self) {
        let Some(early) = &mut self.early else {
            return;
        };
        if let Some(mut from) = self.conn.early_data() {
            if early.read == early.data.len() {
                early.data.clear();
                early.read = 0;
            }
            // Never fails: rustls' buffer reads like a slice.
            let _ = from.read_to_end(&mut early.data);
        }
        if !self.conn.is_handshaking() {
            early.gate.close();
            early.hs = None;
        }
    }

    /// The rustls connection (version, suite, ALPN, SNI, resumption).
    pub fn connection(&self) -> &ServerConnection {
        &self.conn
    }

    /// The record policy (its name is what the built-in page shows).
    pub fn policy(&self) -> &RecordPolicy {
        self.plan.policy()
    }

    /// Takes the stream apart for kernel TLS (`tls::ktls`), before its first read or write:
    /// the socket and the rustls connection, whose queue may still hold the TLS 1.3 tickets.
    pub fn into_parts(self) -> (IO, ServerConnection) {
        (self.io, self.conn)
    }

    /// Whether the TLS 1.3 tickets are still held.
    #[cfg(test)]
    pub fn holding(&self) -> bool {
        self.plan.holding()
    }

    /// For a protocol that speaks first and writes each turn's output in one write itself
    /// (firstbyte's HTTP/2): the TLS 1.3 tickets are not held for the first response but
    /// leave with the first flush, as nginx and h2o send theirs; flushes are not put off.
    /// Call it before the stream's first read or write.
    pub fn speak_first(&mut self) {
        self.plan.speak_first();
        self.timer = None;
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource> TlsStream<IO, T> {
    /// Hands `bytes` (one record) to rustls.
    fn emit(conn: &mut ServerConnection, bytes: &[u8]) -> io::Result<()> {
        // With the buffer limit lifted rustls takes everything; ≤ 16 KB is one record.
        conn.writer().write_all(bytes)
    }

    /// Closes the open record, if any.
    fn emit_open(&mut self) -> io::Result<()> {
        if self
            .plan
            .close_open(Instant::now(), self.release.released())
            .is_none()
        {
            return Ok(());
        }
        let r = Self::emit(&mut self.conn, &self.plain);
        self.plain.clear();
        r
    }

    /// Writes rustls' queue to the socket unless the plan holds it; a hold arms the timer at
    /// its deadline (which wakes this task) and ends when the timer fires.
    fn poll_send(&mut self, cx: &mut Context<'_>, flushing: bool) -> Poll<io::Result<()>> {
        if let Send::Hold(deadline) = self.plan.send(flushing) {
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Ready(Ok(()));
            }
            self.plan.on_deadline();
        }
        self.timer = None;
        std::task::ready!(poll_write_tls(&mut self.conn, &mut self.io, cx))?;
        self.plan.on_sent();
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> AsyncRead for TlsStream<IO, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.before_read(cx)?;
        loop {
            if let Some(early) = &mut this.early {
                let unread = early.unread();
                if !unread.is_empty() {
                    let n = unread.len().min(buf.remaining());
                    buf.put_slice(&unread[..n]);
                    early.read += n;
                    return Poll::Ready(Ok(()));
                }
            }
            match read_plain(&mut this.conn, buf) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: EOF, as most servers treat it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            std::task::ready!(this.poll_more(cx))?;
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> TlsStream<IO, T> {
    /// Waits until plaintext can be read, or the peer has closed, without taking any: an
    /// idle keep-alive connection waits here while the HTTP layer above it holds no read
    /// buffer (`http::conn` parks HTTP/1.1 that way). `Ready(Ok)` then means the next
    /// `poll_read` returns data or EOF at once; `Ready(Err)` is a failed connection.
    pub fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        use std::io::BufRead;
        self.before_read(cx)?;
        loop {
            if self.early.as_ref().is_some_and(|e| !e.unread().is_empty()) {
                return Poll::Ready(Ok(()));
            }
            match self.conn.reader().fill_buf() {
                // Data, or close_notify (an empty chunk).
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if self.eof {
                return Poll::Ready(Ok(()));
            }
            std::task::ready!(self.poll_more(cx))?;
        }
    }

    /// What a read does before it waits: held tickets meet their deadline.
    fn before_read(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.plan.holding() {
            if let Poll::Ready(Err(e)) = self.poll_send(cx, false) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reads once from the socket into rustls (noting EOF), and answers post-handshake
    /// messages (a KeyUpdate) if the queue is not held.
    fn poll_more(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let (conn, io) = (&mut self.conn, &mut self.io);
        let read = match self.early.as_mut().and_then(|e| e.hs.as_mut()) {
            Some(hs) => hs.run(|| poll_read_tls(conn, io, cx)),
            None => poll_read_tls(conn, io, cx),
        };
        if !std::task::ready!(read)? {
            self.eof = true;
        }
        self.take_early();
        if self.conn.wants_write() && !self.plan.holding() {
            if let Poll::Ready(Err(e)) = poll_write_tls(&mut self.conn, &mut self.io, cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> TlsStream<IO, T> {
    /// Writes `bufs`; `flush_next`: the caller flushes right after, so a record the flush
    /// would close may end with them (no gathering copy).
    fn write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        flush_next: bool,
    ) -> Poll<io::Result<usize>> {
        // Back-pressure: with a large queue, the socket must take some before more is accepted.
        if self.plan.must_push() {
            std::task::ready!(self.poll_send(cx, false))?;
        }
        let released = self.release.released();
        let now = Instant::now();
        self.plan
            .on_write(released, bufs.iter().map(|b| b.len()).sum());
        let mut taken = 0;
        for (i, b) in bufs.iter().enumerate() {
            let last = flush_next && i + 1 == bufs.len();
            let mut b: &[u8] = b;
            while !b.is_empty() {
                let chunk = if last {
                    self.plan
                        .next_chunk_before_flush(now, released, b.len(), &mut self.source)
                } else {
                    self.plan
                        .next_chunk(now, released, b.len(), &mut self.source)
                };
                match chunk {
                    Chunk::Record(n) => {
                        // A whole record in the caller's slice: no copy.
                        Self::emit(&mut self.conn, &b[..n])?;
                        taken += n;
                        b = &b[n..];
                    }
                    Chunk::Gather { n, closes } => {
                        if self.plain.capacity() == 0 {
                            self.plain.reserve_exact(MAX_RECORD_SIZE);
                        }
                        self.plain.extend_from_slice(&b[..n]);
                        taken += n;
                        b = &b[n..];
                        if closes {
                            let r = Self::emit(&mut self.conn, &self.plain);
                            self.plain.clear();
                            r?;
                        }
                    }
                }
            }
            if self.plan.must_push() {
                break;
            }
        }
        Poll::Ready(Ok(taken))
    }
}

/// A stream that can be told a flush follows a write (see [`BatchWrite::poll_write_batch`]).
pub(crate) trait BatchWrite: AsyncWrite + Unpin {
    /// Writes `buf` knowing the caller flushes once all of it is written: a TLS stream then
    /// ends its record with the batch instead of copying the batch aside until the flush.
    fn poll_write_batch(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(self).poll_write(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> BatchWrite for TlsStream<IO, T> {
    fn poll_write_batch(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write_slices(cx, &[IoSlice::new(buf)], true)
    }
}

impl<S: BatchWrite + ?Sized> BatchWrite for Box<S> {
    fn poll_write_batch(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        (**self).poll_write_batch(cx, buf)
    }
}

impl BatchWrite for crate::net::SocketStream<tokio::net::TcpStream> {}
// Tests serve HTTP/2 over in-memory pipes.
#[cfg(test)]
impl BatchWrite for tokio::io::DuplexStream {}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> AsyncWrite for TlsStream<IO, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, &[IoSlice::new(buf)], false)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, bufs, false)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().flush_now(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.emit_open()?;
        this.plan.shutdown();
        this.timer = None;
        if !this.close_sent {
            this.conn.send_close_notify();
            this.close_sent = true;
        }
        std::task::ready!(poll_write_tls(&mut this.conn, &mut this.io, cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, T: TcpInfoSource + Unpin> TlsStream<IO, T> {
    /// Closes the open record and writes everything queued.
    fn flush_now(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.emit_open()?;
        if self.poll_send(cx, true)?.is_pending() {
            return Poll::Pending;
        }
        // Nothing is gathered between flushes: give the record buffer back, so an idle
        // connection holds no plaintext buffer (a keep-alive connection idles after a flush).
        if self.plain.capacity() > 0 {
            self.plain = Vec::new();
        }
        if self.plan.holding() {
            // Held on purpose: the tickets (and anything written before the first response)
            // leave with the response.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{DynRecMode, RecordSettings};
    use crate::tls::testutil::{any_server_cert, client_config, ecdsa_pem, provider};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// The server's socket: records every write call's bytes.
    struct Tap {
        inner: DuplexStream,
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl AsyncRead for Tap {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Tap {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let r = Pin::new(&mut this.inner).poll_write(cx, buf);
            if let Poll::Ready(Ok(n)) = &r {
                this.writes.lock().unwrap().push(buf[..*n].to_vec());
            }
            r
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            self.poll_write(cx, &all)
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    fn server_config() -> Arc<rustls::ServerConfig> {
        let (cert, key) = ecdsa_pem(&["localhost"]);
        let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap(),
        )
    }

    fn no_tcp_info() -> Option<crate::net::TcpInfo> {
        None
    }

    type Server = TlsStream<Tap, fn() -> Option<crate::net::TcpInfo>>;

    /// A connected pair: our server stream and a tokio-rustls client.
    async fn pair(
        version: &'static rustls::SupportedProtocolVersion,
        settings: RecordSettings,
        release: Release,
    ) -> (
        Server,
        tokio_rustls::client::TlsStream<DuplexStream>,
        Arc<Mutex<Vec<Vec<u8>>>>,
    ) {
        let (c, s) = tokio::io::duplex(1 << 22);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let tap = Tap {
            inner: s,
            writes: writes.clone(),
        };
        let client_cfg = Arc::new(client_config(provider(), &[version], any_server_cert()));
        let client = tokio::spawn(async move {
            tokio_rustls::TlsConnector::from(client_cfg)
                .connect(ServerName::try_from("localhost").unwrap(), c)
                .await
                .unwrap()
        });
        let mut tap = tap;
        let accepted = read_client_hello(&mut tap).await.unwrap();
        let conn = accepted
            .into_connection(server_config())
            .map_err(|(e, _)| e)
            .unwrap();
        let server = handshake(
            tap,
            conn,
            settings.policy(),
            no_tcp_info as fn() -> _,
            release,
        )
        .await
        .unwrap();
        (server, client.await.unwrap(), writes)
    }

    /// Application-data records (type 23) in `bytes` after the handshake: their lengths.
    fn app_records(bytes: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut i = 0;
        while i + 5 <= bytes.len() {
            let len = usize::from(u16::from_be_bytes([bytes[i + 3], bytes[i + 4]]));
            if bytes[i] == 23 {
                out.push(len);
            }
            i += 5 + len;
        }
        out
    }

    #[tokio::test]
    async fn a_megabyte_of_odd_writes_arrives_intact() {
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let (mut server, mut client, _) =
                pair(version, RecordSettings::nginx(), Release::new()).await;
            let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
            let sent = data.clone();
            let writer = tokio::spawn(async move {
                let mut i = 0;
                let mut step = 1;
                while i < sent.len() {
                    let n = step.min(sent.len() - i);
                    server.write_all(&sent[i..i + n]).await.unwrap();
                    if step % 3 == 0 {
                        server.flush().await.unwrap();
                    }
                    i += n;
                    step = step * 7 % 40_000 + 1;
                }
                server.shutdown().await.unwrap();
            });
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            assert!(
                got == data,
                "{version:?}: {} of {} bytes",
                got.len(),
                data.len()
            );
        }
    }

    #[tokio::test]
    async fn records_follow_the_policy() {
        let settings = RecordSettings {
            ssl_buffer_size: 4096,
            ..RecordSettings::nginx()
        };
        let (mut server, mut client, writes) =
            pair(&rustls::version::TLS12, settings, Release::new()).await;
        let before = writes.lock().unwrap().len();
        server.write_all(&vec![1u8; 100_000]).await.unwrap();
        server.flush().await.unwrap();
        let mut buf = vec![0u8; 100_000];
        client.read_exact(&mut buf).await.unwrap();
        let wire: Vec<u8> = writes.lock().unwrap()[before..].concat();
        let recs = app_records(&wire);
        // TLS 1.2 AES-GCM: length = plaintext + 24.
        assert!(recs.iter().all(|&l| l <= 4096 + 24), "{recs:?}");
        assert_eq!(recs.iter().map(|l| l - 24).sum::<usize>(), 100_000);
        let calls = writes.lock().unwrap().len() - before;
        assert!(
            calls <= 3,
            "25 records should leave in few writes, took {calls}"
        );

        let dynamic = RecordSettings {
            ssl_dyn_rec_enable: DynRecMode::On,
            ..RecordSettings::nginx()
        };
        let (mut server, mut client, writes) =
            pair(&rustls::version::TLS12, dynamic, Release::new()).await;
        let before = writes.lock().unwrap().len();
        server.write_all(&vec![2u8; 300_000]).await.unwrap();
        server.flush().await.unwrap();
        let mut buf = vec![0u8; 300_000];
        client.read_exact(&mut buf).await.unwrap();
        let wire: Vec<u8> = writes.lock().unwrap()[before..].concat();
        let plain: Vec<usize> = app_records(&wire).iter().map(|l| l - 24).collect();
        assert!(plain[..41].iter().all(|&p| p == 1369), "{:?}", &plain[..45]);
        assert!(
            plain[41..81].iter().all(|&p| p == 4229),
            "{:?}",
            &plain[38..85]
        );
        assert_eq!(plain[81], 16384);
    }

    #[tokio::test]
    async fn small_writes_share_a_record() {
        let (mut server, mut client, writes) = pair(
            &rustls::version::TLS12,
            RecordSettings::nginx(),
            Release::new(),
        )
        .await;
        let before = writes.lock().unwrap().len();
        server
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 200\r\n\r\n")
            .await
            .unwrap();
        server.write_all(&[b'x'; 200]).await.unwrap();
        server.flush().await.unwrap();
        let mut buf = vec![0u8; 240];
        client.read_exact(&mut buf).await.unwrap();
        let wire: Vec<u8> = writes.lock().unwrap()[before..].concat();
        assert_eq!(app_records(&wire).len(), 1);
    }

    #[tokio::test]
    async fn tls13_tickets_leave_with_the_first_response() {
        let release = Release::new();
        let (mut server, mut client, writes) = pair(
            &rustls::version::TLS13,
            RecordSettings::nginx(),
            release.clone(),
        )
        .await;
        assert!(server.holding(), "tickets are held after the handshake");
        let after_handshake = writes.lock().unwrap().len();
        // An HTTP/2 server preface before the response: held too.
        server.write_all(b"settings").await.unwrap();
        server.flush().await.unwrap();
        assert_eq!(
            writes.lock().unwrap().len(),
            after_handshake,
            "nothing written before the response"
        );
        release.release();
        server.write_all(&vec![3u8; 10_000]).await.unwrap();
        server.flush().await.unwrap();
        assert!(!server.holding());
        let w = writes.lock().unwrap().clone();
        assert_eq!(
            w.len(),
            after_handshake + 1,
            "tickets, preface and response in one write"
        );
        // The tickets (one record: rustls sends a flight's messages together), the preface
        // (8 + 17 bytes), then the response: its first record within one segment (no
        // TCP_INFO here: 1369 bytes), the rest by the policy (16k).
        let recs = app_records(&w[after_handshake]);
        assert_eq!(recs.len(), 4, "{recs:?}");
        assert_eq!(
            &recs[1..],
            [8 + 17, 1369 + 17, 10_000 - 1369 + 17],
            "{recs:?}"
        );
        let mut buf = vec![0u8; 10_008];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf[..8], b"settings");
    }

    #[tokio::test]
    async fn held_tickets_meet_their_deadline() {
        let (mut server, _client, writes) = pair(
            &rustls::version::TLS13,
            RecordSettings::nginx(),
            Release::new(),
        )
        .await;
        let after_handshake = writes.lock().unwrap().len();
        // The server waits for a request that does not come: the deadline sends the tickets.
        let mut b = [0u8; 1];
        let _ = tokio::time::timeout(MAX_HOLD * 3, server.read(&mut b)).await;
        assert!(!server.holding());
        assert_eq!(writes.lock().unwrap().len(), after_handshake + 1);
    }

    /// A protocol that speaks first (HTTP/2): the tickets are not held for the first
    /// response; they leave with the first flush, in the same write as what it sends.
    #[tokio::test]
    async fn speaking_first_sends_the_tickets_with_the_first_flush() {
        let (mut server, mut client, writes) = pair(
            &rustls::version::TLS13,
            RecordSettings::nginx(),
            Release::new(),
        )
        .await;
        assert!(server.holding(), "held until the protocol is known");
        server.speak_first();
        assert!(
            !server.holding(),
            "no hold for a protocol that speaks first"
        );
        let after_handshake = writes.lock().unwrap().len();
        server.write_all(b"settings").await.unwrap();
        assert_eq!(writes.lock().unwrap().len(), after_handshake, "gathered");
        server.flush().await.unwrap();
        let w = writes.lock().unwrap().clone();
        assert_eq!(
            w.len(),
            after_handshake + 1,
            "tickets and preface: one write"
        );
        assert_eq!(
            app_records(&w[after_handshake]).len(),
            2,
            "tickets, preface"
        );
        let mut buf = [0u8; 8];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"settings");
    }

    #[tokio::test]
    async fn tls12_final_flight_is_not_held() {
        let (server, _client, _) = pair(
            &rustls::version::TLS12,
            RecordSettings::nginx(),
            Release::new(),
        )
        .await;
        // The client's handshake completed in `pair`: it got the server's Finished at once.
        assert!(!server.holding());
    }

    #[tokio::test]
    async fn poll_input_waits_for_plaintext_without_taking_it() {
        let (mut server, mut client, _) = pair(
            &rustls::version::TLS13,
            RecordSettings::nginx(),
            Release::new(),
        )
        .await;
        let waiting =
            std::future::poll_fn(|cx| Poll::Ready(server.poll_input(cx).is_pending())).await;
        assert!(waiting, "no input yet");
        client.write_all(b"hello").await.unwrap();
        client.flush().await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| server.poll_input(cx)),
        )
        .await
        .expect("input arrives")
        .unwrap();
        let mut b = [0u8; 5];
        server.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"hello", "the input is still there to read");
        drop(client);
        tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| server.poll_input(cx)),
        )
        .await
        .expect("EOF is input too")
        .unwrap();
    }
}
