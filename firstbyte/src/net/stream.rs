//! The socket under every connection: enforces `send_timeout`, and on plain-HTTP/1.1
//! connections sends file bodies with `sendfile(2)`, from the page cache to the socket with no
//! copy through user space.
//!
//! hyper owns the writes of an HTTP/1.1 connection, so the file cannot be handed to it. It is
//! smuggled through instead:
//!
//! 1. A file body on a `sendfile on` connection does not read its file. For each frame it
//!    pushes a [`FileRange`] onto the connection's [`IoControl`] queue and yields a *marker*: a
//!    slice of one process-wide zeroed region ([`marker`]) of the same length. hyper counts and
//!    frames it like any other data and writes it after the head, with `writev` (its queue
//!    strategy keeps each frame's bytes as they are).
//! 2. [`SocketStream::poll_write_vectored`] sees the head's bytes (written with `writev`) and
//!    then a slice whose address lies inside the marker region: instead of writing zeros it
//!    sends that many bytes of the next queued range with `sendfile`. The head is always on
//!    the socket first: the marker follows it in the same ordered stream of slices.
//! 3. With `tcp_nopush on`, `TCP_CORK` is set before the head of a response whose file follows
//!    and cleared once its last range is sent, as nginx does on Linux: head and file leave in
//!    full segments.
//!
//! Marker bytes never reach the wire: a marker with no queued range is an error that closes
//! the connection. The marker region is one untouched `calloc`: virtual memory only.
//!
//! TLS connections keep the read-and-encrypt path, unless kernel TLS takes their records
//! (`tls::ktls`): their socket then accepts `sendfile` too. Until the switch, such a
//! connection's reads stop at record boundaries ([`IoControl::set_record_reads`]).
//!
//! `send_timeout` (nginx's meaning: the longest wait for the client to accept data, between two
//! successive writes) is a [`StallTimer`] armed when a write finds the socket full and disarmed
//! by any progress. The same timer gives `client_body_timeout` on request bodies.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Bytes one marker frame stands for, and so the most one `sendfile` call is asked to send:
/// 2 MiB, nginx's `sendfile_max_chunk` default (one fast client cannot hold a thread long).
pub const MARKER_LEN: usize = 2 * 1024 * 1024;

/// The zeroed region marker frames point into (allocated once, never written or read).
fn marker_region() -> &'static [u8] {
    static REGION: OnceLock<&'static [u8]> = OnceLock::new();
    REGION.get_or_init(|| Box::leak(vec![0u8; MARKER_LEN].into_boxed_slice()))
}

/// A marker frame standing for `n` bytes of a queued file range (at most [`MARKER_LEN`]).
pub fn marker(n: usize) -> Bytes {
    Bytes::from_static(&marker_region()[..n.min(MARKER_LEN)])
}

/// Whether `s` is (part of) a marker frame.
pub fn is_marker(s: &[u8]) -> bool {
    let region = marker_region();
    let base = region.as_ptr() as usize;
    let p = s.as_ptr() as usize;
    !s.is_empty() && p >= base && p < base + region.len()
}

/// A range of a file to send with `sendfile`, queued by a file body.
#[derive(Debug)]
pub struct FileRange {
    /// The open file.
    pub file: Arc<File>,
    /// Where the range starts.
    pub offset: u64,
    /// Bytes left to send.
    pub len: u64,
    /// The response's last range: `TCP_CORK` is cleared once it is sent.
    pub last: bool,
    /// `tcp_nopush on`: cork the head and the file together.
    pub nopush: bool,
}

/// What the request layer and the socket layer of one connection share: the current
/// `send_timeout` and the queue of file ranges to `sendfile`.
#[derive(Debug)]
pub struct IoControl {
    send_timeout_ms: AtomicU64,
    /// When a read from the socket last delivered bytes: nanoseconds since [`epoch`], plus
    /// one (0: never).
    read_ns: AtomicU64,
    /// Reads made for many connections at once (a QUIC endpoint's UDP socket): when set,
    /// [`last_read`](Self::last_read) is its clock's instead of `read_ns`.
    shared_reads: Option<Arc<ReadClock>>,
    sendfile: bool,
    record_reads: std::sync::atomic::AtomicBool,
    ranges: Mutex<VecDeque<FileRange>>,
}

impl IoControl {
    /// Control for a new connection. `sendfile`: whether its socket carries the response
    /// bytes as they are (plain TCP; kernel TLS later), so file bodies may use `sendfile`.
    pub fn new(send_timeout: Duration, sendfile: bool) -> Self {
        Self {
            send_timeout_ms: AtomicU64::new(duration_ms(send_timeout)),
            read_ns: AtomicU64::new(0),
            shared_reads: None,
            sendfile,
            record_reads: std::sync::atomic::AtomicBool::new(false),
            // Two ranges cover a response and a pipelined one behind it: no growth after.
            ranges: Mutex::new(if sendfile {
                VecDeque::with_capacity(2)
            } else {
                VecDeque::new()
            }),
        }
    }

    /// Control for a connection whose bytes arrive by reads made for many connections (a
    /// QUIC endpoint's datagrams): `reads` is noted by whoever reads them.
    pub fn with_shared_reads(send_timeout: Duration, reads: Arc<ReadClock>) -> Self {
        Self {
            shared_reads: Some(reads),
            ..Self::new(send_timeout, false)
        }
    }

    /// When a read from the socket last delivered bytes. A request read from this connection
    /// arrived at or before it (a later read only moves it on), so what the file system showed
    /// after this instant includes everything the client did before sending the request.
    pub fn last_read(&self) -> Option<Instant> {
        match &self.shared_reads {
            Some(c) => c.last(),
            None => stamp_instant(self.read_ns.load(Ordering::Relaxed)),
        }
    }

    fn note_read(&self) {
        self.read_ns.store(stamp_now(), Ordering::Relaxed);
    }

    /// Whether file bodies on this connection may be sent with `sendfile`.
    pub fn sendfile_capable(&self) -> bool {
        self.sendfile
    }

    /// Reads stop at TLS record boundaries while `on` (see `net::records`): set before the
    /// ClientHello of a connection that may switch to kernel TLS, cleared after the switch
    /// or the decision not to.
    pub fn set_record_reads(&self, on: bool) {
        self.record_reads.store(on, Ordering::Relaxed);
    }

    /// Sets `send_timeout` (the request's location decides it; zero: none).
    pub fn set_send_timeout(&self, d: Duration) {
        self.send_timeout_ms
            .store(duration_ms(d), Ordering::Relaxed);
    }

    /// The current `send_timeout`.
    pub fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms.load(Ordering::Relaxed))
    }

    /// Queues a range; its marker frame must follow it to the socket.
    pub fn push_range(&self, r: FileRange) {
        self.lock().push_back(r);
    }

    /// Ranges queued and not yet sent.
    pub fn queued(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<FileRange>> {
        // A panic elsewhere cannot leave the queue half-updated: every change is one call.
        self.ranges.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What to do with the slices of one vectored write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePlan {
    /// Write the first `n` slices as they are (none of them a marker).
    Plain(usize),
    /// The first non-empty slice is a marker of this many bytes: send file bytes instead.
    File(usize),
    /// Nothing to write.
    Empty,
}

/// Splits a vectored write at the first marker: plain bytes go out before file bytes.
pub fn plan<B: std::ops::Deref<Target = [u8]>>(bufs: &[B]) -> WritePlan {
    let Some(first) = bufs.iter().position(|b| !b.is_empty()) else {
        return WritePlan::Empty;
    };
    if is_marker(&bufs[first]) {
        return WritePlan::File(bufs[first].len());
    }
    let n = bufs[first..]
        .iter()
        .position(|b| is_marker(b))
        .map_or(bufs.len(), |i| first + i);
    WritePlan::Plain(n)
}

/// The longest a stalled operation may wait: armed when an operation finds no progress
/// possible, disarmed by progress, expired when the limit passes with no progress between.
#[derive(Default)]
pub struct StallTimer {
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    armed: bool,
}

impl StallTimer {
    /// Progress was made: the next stall starts a new wait.
    pub fn progress(&mut self) {
        self.armed = false;
    }

    /// The operation is stalled; `true` once it has been stalled for `limit` (zero: never).
    /// Registers `cx` to be woken when the limit passes.
    pub fn expired(&mut self, cx: &mut Context<'_>, limit: Duration) -> bool {
        if limit.is_zero() {
            return false;
        }
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + limit;
            match &mut self.sleep {
                Some(s) => s.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        self.sleep
            .as_mut()
            .is_some_and(|s| s.as_mut().poll(cx).is_ready())
    }
}

use std::future::Future;

/// A socket that can send a file range without copying it.
pub trait Sendfile {
    /// Sends up to `count` bytes of `file` from `offset`; `Pending` while the socket is full.
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: RawFd,
        offset: u64,
        count: usize,
    ) -> Poll<io::Result<usize>>;

    /// The socket's descriptor (for `TCP_CORK`), when it has one.
    fn raw_fd(&self) -> Option<RawFd>;
}

impl Sendfile for TcpStream {
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: RawFd,
        offset: u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        let out = self.as_raw_fd();
        loop {
            ready!(self.poll_write_ready(cx))?;
            match self.try_io(Interest::WRITABLE, || sendfile(out, file, offset, count)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }
}

fn sendfile(out: RawFd, file: RawFd, offset: u64, count: usize) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // SAFETY: both descriptors are open for the call's duration (the socket is owned by the
    // caller, the file by an `Arc<File>` in the queued range); `off` is a valid off_t.
    let n = unsafe { libc::sendfile(out, file, &mut off, count) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The socket wrapper (see the module docs).
pub struct SocketStream<S> {
    inner: S,
    ctl: Arc<IoControl>,
    timer: StallTimer,
    corked: bool,
    peer: Option<SocketAddr>,
    cut: super::records::RecordCut,
}

impl<S> SocketStream<S> {
    /// Wraps `inner`; `ctl` is shared with the connection's requests.
    pub fn new(inner: S, ctl: Arc<IoControl>, peer: Option<SocketAddr>) -> Self {
        Self {
            inner,
            ctl,
            timer: StallTimer::default(),
            corked: false,
            peer,
            cut: Default::default(),
        }
    }

    /// The wrapped socket, for a connection that moves on (kernel TLS).
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The wrapped socket.
    #[cfg(test)]
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// A socket that can say it has input without reading it.
pub trait ReadReady {
    /// `Ready` once a read would not block (data or EOF).
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

impl ReadReady for TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }
}

impl<S: ReadReady> SocketStream<S> {
    /// Waits until the socket is readable (data or EOF) without reading: an idle
    /// keep-alive connection waits here with no read buffer (see `server::conn::h1`).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_read_ready(cx)
    }
}

impl<S: AsyncWrite + Sendfile + Unpin> SocketStream<S> {
    /// Corks before the head when the file that follows asks for `tcp_nopush`.
    fn cork_for_next_range(&mut self) {
        let nopush = self.ctl.lock().front().is_some_and(|r| r.nopush);
        if nopush {
            set_cork(self.inner.raw_fd(), &mut self.corked, true);
        }
    }

    fn poll_file(&mut self, cx: &mut Context<'_>, marker_len: usize) -> Poll<io::Result<usize>> {
        let Self {
            inner, ctl, corked, ..
        } = self;
        let mut q = ctl.lock();
        let Some(front) = q.front_mut() else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "file body frame without a file range",
            )));
        };
        if front.nopush {
            set_cork(inner.raw_fd(), corked, true);
        }
        let count = marker_len.min(usize::try_from(front.len).unwrap_or(usize::MAX));
        let sent = ready!(inner.poll_sendfile(cx, front.file.as_raw_fd(), front.offset, count))?;
        crate::fblog!(Debug, "sendfile: {sent} of {count} @{}", front.offset);
        if sent == 0 {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            )));
        }
        front.offset += sent as u64;
        front.len -= sent as u64;
        if front.len == 0 {
            let last = front.last;
            q.pop_front();
            if last {
                set_cork(inner.raw_fd(), corked, false);
            }
        }
        Poll::Ready(Ok(sent))
    }

    fn write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = match plan(bufs) {
            WritePlan::Empty => Poll::Ready(Ok(0)),
            WritePlan::File(n) => self.poll_file(cx, n),
            WritePlan::Plain(n) => {
                if n < bufs.len() {
                    self.cork_for_next_range();
                }
                Pin::new(&mut self.inner).poll_write_vectored(cx, &bufs[..n])
            }
        };
        match r {
            Poll::Pending => {
                if self.timer.expired(cx, self.ctl.send_timeout()) {
                    crate::fblog!(
                        Info,
                        "client timed out (110: Connection timed out) while sending response to client, client: {}",
                        self.peer.map(|p| p.ip().to_string()).unwrap_or_default()
                    );
                    return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
                }
                Poll::Pending
            }
            done => {
                self.timer.progress();
                done
            }
        }
    }
}

/// `TCP_CORK` on or off, once per change.
fn set_cork(fd: Option<RawFd>, corked: &mut bool, on: bool) {
    if *corked == on {
        return;
    }
    crate::fblog!(Debug, "tcp_nopush: TCP_CORK {}", u8::from(on));
    if let Some(fd) = fd {
        if let Err(e) = super::set_cork(fd, on) {
            crate::fblog!(
                Alert,
                "setsockopt(TCP_CORK) failed ({})",
                crate::log::OsError(&e)
            );
        }
    }
    *corked = on;
}

/// When a socket read for many connections last delivered bytes (a QUIC endpoint's UDP
/// socket: every datagram of every connection comes through it). A request carried by a
/// datagram read at or before it — every request a connection has seen so far, since the
/// reader notes the read before handing the datagrams on — so, as with
/// [`IoControl::last_read`], what the file system showed after this instant includes
/// everything the client did before sending the request.
#[derive(Debug, Default)]
pub struct ReadClock(AtomicU64);

impl ReadClock {
    /// A read just delivered bytes.
    pub fn note(&self) {
        self.0.fetch_max(stamp_now(), Ordering::Release);
    }

    /// The last noted read, if any.
    pub fn last(&self) -> Option<Instant> {
        stamp_instant(self.0.load(Ordering::Acquire))
    }
}

/// Now as a stamp: nanoseconds since [`epoch`], plus one (0: never).
fn stamp_now() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
}

fn stamp_instant(n: u64) -> Option<Instant> {
    match n {
        0 => None,
        n => Some(epoch() + Duration::from_nanos(n - 1)),
    }
}

/// The instant [`IoControl::last_read`] counts from.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl<S: AsyncRead + Unpin> AsyncRead for SocketStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.ctl.record_reads.load(Ordering::Relaxed) {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            if buf.filled().len() > before {
                this.ctl.note_read();
            }
            return Poll::Ready(Ok(()));
        }
        let mut part = buf.take(this.cut.room());
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut part))?;
        let n = part.filled().len();
        let start = buf.filled().len();
        // SAFETY: the read initialized these `n` bytes of `buf`'s unfilled part (`part`
        // shares its memory).
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        this.cut.consumed(&buf.filled()[start..]);
        if n > 0 {
            this.ctl.note_read();
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Sendfile + Unpin> AsyncWrite for SocketStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write_slices(cx, bufs)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::io::Write;
    use std::time::Instant;

    /// A connection whose reads are made for many (QUIC) answers with the shared clock: none
    /// before a read, then the last read's time, which only moves on.
    #[test]
    fn shared_reads_bound_every_connection_of_the_socket() {
        let clock = Arc::new(ReadClock::default());
        let a = IoControl::with_shared_reads(Duration::from_secs(1), clock.clone());
        let b = IoControl::with_shared_reads(Duration::from_secs(1), clock.clone());
        assert_eq!(a.last_read(), None);
        let before = Instant::now();
        clock.note();
        let first = a.last_read().expect("noted");
        assert!(first >= before - Duration::from_millis(1) && first <= Instant::now());
        assert_eq!(
            b.last_read(),
            Some(first),
            "one clock for the socket's connections"
        );
        clock.note();
        assert!(a.last_read().unwrap() >= first);
        assert!(!a.sendfile_capable());
    }

    /// A socket that appends what it is given to `wire`, reading sendfile ranges with pread;
    /// `full`: every write is `Pending` (a client that stopped reading).
    #[derive(Default)]
    struct Wire {
        wire: Vec<u8>,
        writes: usize,
        sendfiles: usize,
        full: bool,
    }

    impl AsyncWrite for Wire {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(b)])
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.full {
                return Poll::Pending;
            }
            this.writes += 1;
            let mut n = 0;
            for b in bufs {
                assert!(!is_marker(b), "a marker reached the wire");
                this.wire.extend_from_slice(b);
                n += b.len();
            }
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl Sendfile for Wire {
        fn poll_sendfile(
            &mut self,
            _: &mut Context<'_>,
            file: RawFd,
            offset: u64,
            count: usize,
        ) -> Poll<io::Result<usize>> {
            if self.full {
                return Poll::Pending;
            }
            // At most 7 bytes per call: the caller must cope with short sends.
            let mut buf = vec![0u8; count.min(7)];
            // SAFETY: `file` is open (the queued range holds it); `buf` is valid for its length.
            let n = unsafe {
                libc::pread(
                    file,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    offset as libc::off_t,
                )
            };
            if n < 0 {
                return Poll::Ready(Err(io::Error::last_os_error()));
            }
            self.sendfiles += 1;
            self.wire.extend_from_slice(&buf[..n as usize]);
            Poll::Ready(Ok(n as usize))
        }
        fn raw_fd(&self) -> Option<RawFd> {
            None
        }
    }

    fn temp_file(tag: &str, data: &[u8]) -> Arc<File> {
        let p = std::env::temp_dir().join(format!("fb-stream-{tag}-{}", std::process::id()));
        File::create(&p).unwrap().write_all(data).unwrap();
        let f = File::open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        Arc::new(f)
    }

    /// Writes every slice the way hyper does: vectored, advancing past what was taken.
    async fn write_all<S: AsyncWrite + Sendfile + Unpin>(
        s: &mut SocketStream<S>,
        mut parts: Vec<Bytes>,
    ) -> io::Result<()> {
        while !parts.is_empty() {
            let n = poll_fn(|cx| {
                let slices: Vec<IoSlice<'_>> = parts.iter().map(|b| IoSlice::new(b)).collect();
                Pin::new(&mut *s).poll_write_vectored(cx, &slices)
            })
            .await?;
            let mut left = n;
            while left > 0 {
                let first = &mut parts[0];
                let k = left.min(first.len());
                let _ = first.split_to(k);
                left -= k;
                if first.is_empty() {
                    parts.remove(0);
                }
            }
        }
        Ok(())
    }

    #[test]
    fn plans_split_at_the_first_marker() {
        let head: &[u8] = b"HTTP/1.1 200 OK\r\n\r\n";
        let m = marker(100);
        assert!(is_marker(&m) && is_marker(&m[50..]) && !is_marker(head));
        assert_eq!(plan(&[head, head]), WritePlan::Plain(2));
        assert_eq!(plan(&[head, &m, head]), WritePlan::Plain(1));
        assert_eq!(plan(&[&[][..], &m[10..]]), WritePlan::File(90));
        assert_eq!(plan::<&[u8]>(&[&[][..]]), WritePlan::Empty);
        assert_eq!(marker(MARKER_LEN + 5).len(), MARKER_LEN);
    }

    #[tokio::test]
    async fn markers_become_file_bytes_in_order_after_the_head() {
        let data: Vec<u8> = (0..200u8).collect();
        let file = temp_file("order", &data);
        let ctl = Arc::new(IoControl::new(Duration::from_secs(60), true));
        let mut s = SocketStream::new(Wire::default(), ctl.clone(), None);
        // Two responses, the second pipelined behind the first: ranges are consumed in order.
        let range = |offset, len, last| FileRange {
            file: file.clone(),
            offset,
            len,
            last,
            nopush: true,
        };
        ctl.push_range(range(10, 20, false));
        ctl.push_range(range(30, 5, true));
        ctl.push_range(range(100, 50, true));
        let parts = vec![
            Bytes::from_static(b"HEAD1"),
            marker(20),
            marker(5),
            Bytes::from_static(b"HEAD2"),
            marker(50),
        ];
        write_all(&mut s, parts).await.unwrap();
        let want = [&b"HEAD1"[..], &data[10..35], b"HEAD2", &data[100..150]].concat();
        assert_eq!(s.get_ref().wire, want);
        assert_eq!(ctl.queued(), 0);
        assert!(
            s.get_ref().sendfiles >= 75 / 7,
            "short sends were continued"
        );
        assert!(!s.corked, "uncorked after the last range");
    }

    #[tokio::test]
    async fn a_marker_without_a_range_never_sends_zeros() {
        let ctl = Arc::new(IoControl::new(Duration::from_secs(60), true));
        let mut s = SocketStream::new(Wire::default(), ctl, None);
        let e = write_all(&mut s, vec![Bytes::from_static(b"H"), marker(10)])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(s.get_ref().wire, b"H");
    }

    #[tokio::test]
    async fn send_timeout_closes_a_stalled_write() {
        let ctl = Arc::new(IoControl::new(Duration::from_millis(100), false));
        let wire = Wire {
            full: true,
            ..Wire::default()
        };
        let mut s = SocketStream::new(wire, ctl.clone(), None);
        let start = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            write_all(&mut s, vec![Bytes::from_static(b"x")]),
        )
        .await
        .expect("timed out by send_timeout, not by the test");
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        let t = start.elapsed();
        assert!(
            t >= Duration::from_millis(100) && t < Duration::from_secs(3),
            "{t:?}"
        );
        // Zero: no limit.
        ctl.set_send_timeout(Duration::ZERO);
        let r = tokio::time::timeout(
            Duration::from_millis(300),
            write_all(&mut s, vec![Bytes::from_static(b"x")]),
        )
        .await;
        assert!(r.is_err(), "send_timeout 0 must not close");
    }

    #[tokio::test]
    async fn stall_timer_restarts_after_progress() {
        let mut t = StallTimer::default();
        let limit = Duration::from_millis(150);
        poll_fn(|cx| {
            assert!(!t.expired(cx, limit));
            Poll::Ready(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        t.progress();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // 200 ms since the first stall, 100 ms since progress: not expired.
        poll_fn(|cx| {
            assert!(!t.expired(cx, limit));
            Poll::Ready(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        poll_fn(|cx| {
            assert!(t.expired(cx, limit));
            Poll::Ready(())
        })
        .await;
    }
}
