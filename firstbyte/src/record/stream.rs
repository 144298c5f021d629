//! [`RecordStream`]: the write path that applies a record-size policy.
//!
//! It sits between the HTTP layer (hyper's HTTP/1.1 or h2's frames) and the TLS stream
//! (tokio-rustls' `server::TlsStream<TcpStream>`), and gathers plaintext into records as nginx
//! does with `ssl_buffer_size`:
//!
//! - When a record starts (its first byte arrives), the policy decides its size N, reading
//!   `TCP_INFO` through a [`TcpInfoSource`] only if the policy wants it.
//! - Small writes (headers, then body) are copied into one buffer until it holds N bytes;
//!   many small writes become one record, not many tiny ones.
//! - A full record goes to the TLS stream as exactly one `poll_write` of N bytes; through
//!   tokio-rustls each such write becomes one TLS record. It is sent at the next write (or
//!   flush), and no more bytes are taken until it has gone.
//! - `poll_flush` (the end of a response, or a streaming body that pauses) sends the partial
//!   record at once, so nothing waits for more data; the next write starts a new record.
//! - A write that holds at least one whole record while nothing is buffered goes straight
//!   through, N bytes of the caller's slice, with no copy.
//! - Before each record the TLS stream is flushed, so its own buffer is empty and takes the
//!   whole record: a socket that pushes back delays records rather than cutting them. Should
//!   an inner stream still take only part of a record, the rest follows in later writes: no
//!   byte is lost or repeated, though that record then leaves as two.
//!
//! Vectored writes are gathered the same way, so `is_write_vectored()` is `true`: the iovecs
//! never reach rustls (which would join them into 16 KB records); each inner write is still one
//! record of at most N bytes, and hyper and h2 avoid a copy into their own buffers.
//! Reads pass through untouched.

use std::io::{self, IoSlice};
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{clamp_size, RecordPolicy, MAX_RECORD_SIZE};
use crate::net::TcpInfo;

/// Where a [`RecordStream`] gets `TCP_INFO` for policies that want it.
pub trait TcpInfoSource {
    /// The connection's `TCP_INFO` now, or `None` if there is none (not TCP, or the read
    /// failed).
    fn tcp_info(&mut self) -> Option<TcpInfo>;
}

/// `TCP_INFO` from a socket's file descriptor (`None`: no TCP socket under the stream).
/// The descriptor must stay open as long as the stream: it is the TCP socket the inner TLS
/// stream owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketInfo(pub Option<RawFd>);

impl TcpInfoSource for SocketInfo {
    fn tcp_info(&mut self) -> Option<TcpInfo> {
        crate::net::tcp_info(self.0?).ok()
    }
}

/// Any closure works as a source (tests script `TCP_INFO` sequences this way).
impl<F: FnMut() -> Option<TcpInfo>> TcpInfoSource for F {
    fn tcp_info(&mut self) -> Option<TcpInfo> {
        self()
    }
}

/// A writer that cuts plaintext into records of the sizes its [`RecordPolicy`] chooses,
/// wrapping a TLS stream `S`. See the module docs.
#[derive(Debug)]
pub struct RecordStream<S, T = SocketInfo> {
    inner: S,
    source: T,
    policy: RecordPolicy,
    /// Plaintext of the record being gathered (capacity one maximal record, allocated when
    /// first needed).
    buf: Vec<u8>,
    /// How much of `buf` the inner stream has taken (a record part-way out).
    sent: usize,
    /// The size decided for the record now open; `None` before its first byte.
    limit: Option<usize>,
}

impl<S> RecordStream<S, SocketInfo> {
    /// Wraps `inner`; `fd` is the TCP socket under it, for `TCP_INFO`.
    pub fn new(inner: S, policy: RecordPolicy, fd: Option<RawFd>) -> Self {
        Self::with_source(inner, policy, SocketInfo(fd))
    }
}

impl<S, T: TcpInfoSource> RecordStream<S, T> {
    /// Wraps `inner`, reading `TCP_INFO` from `source`.
    pub fn with_source(inner: S, policy: RecordPolicy, source: T) -> Self {
        Self {
            inner,
            source,
            policy,
            buf: Vec::new(),
            sent: 0,
            limit: None,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped stream, mutably (writing to it directly bypasses the record buffer).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The policy (its [`name`](RecordPolicy::name) is what the built-in page shows).
    pub fn policy(&self) -> &RecordPolicy {
        &self.policy
    }

    /// The policy, mutably (e.g. to lower the adaptive overhead once TLS 1.3 is known).
    pub fn policy_mut(&mut self) -> &mut RecordPolicy {
        &mut self.policy
    }

    /// Plaintext taken but not yet handed to the inner stream, bytes.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// The wrapped stream; bytes still [`buffered`](Self::buffered) are dropped, so flush
    /// first.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The open record's size, deciding it (clock and `TCP_INFO` read here) if none is open.
    fn decide(&mut self) -> usize {
        if let Some(limit) = self.limit {
            return limit;
        }
        let tcp = if self.policy.wants_tcp_info() {
            self.source.tcp_info()
        } else {
            None
        };
        let limit = clamp_size(self.policy.next_size(Instant::now(), tcp.as_ref()));
        self.limit = Some(limit);
        limit
    }

    /// Closes the open record: `len` bytes went to the inner stream.
    fn finish_record(&mut self, len: usize) {
        self.policy.on_record(Instant::now(), len);
        self.limit = None;
    }

    /// Whether the buffer takes no more bytes: full, or part-way out.
    fn sealed(&self) -> bool {
        self.sent > 0 || self.limit.is_some_and(|l| self.buf.len() >= l)
    }

    /// Copies from `bufs` into the open record, up to `limit`; returns the bytes taken (a
    /// prefix of the concatenated slices).
    fn gather(&mut self, bufs: &[IoSlice<'_>], limit: usize) -> usize {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(MAX_RECORD_SIZE);
        }
        let mut taken = 0;
        for b in bufs {
            let room = limit.saturating_sub(self.buf.len());
            let k = b.len().min(room);
            self.buf.extend_from_slice(&b[..k]);
            taken += k;
            if k < b.len() {
                break;
            }
        }
        taken
    }
}

impl<S: AsyncWrite + Unpin, T: TcpInfoSource> RecordStream<S, T> {
    /// Hands the buffered record to the inner stream until all of it is taken.
    fn poll_push(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(poll_record(&mut self.inner, cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if !self.buf.is_empty() {
            let len = self.buf.len();
            self.buf.clear();
            self.sent = 0;
            self.finish_record(len);
        }
        Poll::Ready(Ok(()))
    }

    /// One write of the concatenation of `bufs`.
    fn poll_write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let Some(first) = bufs.iter().find(|b| !b.is_empty()) else {
            return Poll::Ready(Ok(0));
        };
        if self.sealed() {
            ready!(self.poll_push(cx))?;
        }
        let limit = self.decide();
        if self.buf.is_empty() && first.len() >= limit {
            // A whole record in the caller's slice: no copy.
            let n = ready!(poll_record(&mut self.inner, cx, &first[..limit]))?;
            if n > 0 {
                self.finish_record(n);
            }
            return Poll::Ready(Ok(n));
        }
        Poll::Ready(Ok(self.gather(bufs, limit)))
    }
}

/// Hands one record (or what is left of one) to `inner` as a single `poll_write`, after a
/// flush: the TLS stream's own buffer (rustls keeps at most 64 KB of ciphertext) is then
/// empty and takes the whole record, so back-pressure from the socket delays records instead
/// of cutting them.
fn poll_record<S: AsyncWrite + Unpin>(
    inner: &mut S,
    cx: &mut Context<'_>,
    record: &[u8],
) -> Poll<io::Result<usize>> {
    ready!(Pin::new(&mut *inner).poll_flush(cx))?;
    Pin::new(inner).poll_write(cx, record)
}

impl<S: AsyncWrite + Unpin, T: TcpInfoSource + Unpin> AsyncWrite for RecordStream<S, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slices(cx, bufs)
    }

    /// True: iovecs are gathered here into records, never passed on (see the module docs).
    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_push(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_push(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + Unpin, T: Unpin> AsyncRead for RecordStream<S, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Read as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::record::{DynRecMode, RecordSettings};

    /// xorshift64*: deterministic randomness for the chaos tests.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
        }
    }

    /// An inner stream that logs each write; with `chaos`, it returns `Pending` (waking at
    /// once) a third of the time and takes random short writes.
    struct Mock {
        rng: Rng,
        chaos: bool,
        got: Vec<u8>,
        writes: Vec<usize>,
        shut: bool,
    }

    impl Mock {
        fn tidy() -> Self {
            Self::new(1, false)
        }

        fn new(seed: u64, chaos: bool) -> Self {
            Self {
                rng: Rng(seed.max(1)),
                chaos,
                got: Vec::new(),
                writes: Vec::new(),
                shut: false,
            }
        }

        fn stall(&mut self, cx: &mut Context<'_>) -> bool {
            if self.chaos && self.rng.below(3) == 0 {
                cx.waker().wake_by_ref();
                return true;
            }
            false
        }
    }

    impl AsyncWrite for Mock {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.stall(cx) {
                return Poll::Pending;
            }
            let n = if this.chaos && this.rng.below(2) == 0 {
                1 + this.rng.below(buf.len())
            } else {
                buf.len()
            };
            this.got.extend_from_slice(&buf[..n]);
            this.writes.push(n);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            if self.get_mut().stall(cx) {
                return Poll::Pending;
            }
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if this.stall(cx) {
                return Poll::Pending;
            }
            this.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    fn policy(mode: DynRecMode, buffer: usize) -> RecordPolicy {
        RecordSettings {
            ssl_buffer_size: buffer,
            ssl_dyn_rec_enable: mode,
            ..RecordSettings::default()
        }
        .policy()
    }

    fn no_info() -> Option<TcpInfo> {
        None
    }

    fn stream(
        mode: DynRecMode,
        buffer: usize,
        inner: Mock,
    ) -> RecordStream<Mock, fn() -> Option<TcpInfo>> {
        RecordStream::with_source(
            inner,
            policy(mode, buffer),
            no_info as fn() -> Option<TcpInfo>,
        )
    }

    /// `total` bytes cut into `sizes` in order; the last piece is what is left.
    fn cut(total: usize, sizes: impl IntoIterator<Item = usize>) -> Vec<usize> {
        let mut left = total;
        let mut v = Vec::new();
        for s in sizes {
            if left == 0 {
                break;
            }
            v.push(s.min(left));
            left -= s.min(left);
        }
        v
    }

    fn dynamic_defaults() -> impl Iterator<Item = usize> {
        std::iter::repeat_n(1369, 41)
            .chain(std::iter::repeat_n(4229, 40))
            .chain(std::iter::repeat(16_384))
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Writes all of `parts` with vectored writes.
    async fn write_all_vectored<W: AsyncWrite + Unpin>(
        w: &mut W,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let mut parts: VecDeque<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        while !parts.is_empty() {
            let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            let mut n = w.write_vectored(&slices).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            while n > 0 {
                let Some(front) = parts.front_mut() else {
                    break;
                };
                if n >= front.len() {
                    n -= front.len();
                    parts.pop_front();
                } else {
                    *front = &front[n..];
                    n = 0;
                }
            }
        }
        Ok(())
    }

    #[tokio::test]
    async fn small_writes_coalesce_and_flush_closes_the_record() {
        let mut s = stream(DynRecMode::Off, 16_384, Mock::tidy());
        s.write_all(&[b'h'; 150]).await.unwrap();
        s.write_all(&[b'b'; 50]).await.unwrap();
        assert_eq!(s.buffered(), 200);
        assert!(
            s.get_ref().writes.is_empty(),
            "nothing leaves before the flush"
        );
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![200]);
        s.write_all(&[b'x'; 100]).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![200, 100]);
        assert_eq!(s.buffered(), 0);
    }

    #[tokio::test]
    async fn records_leave_as_single_writes_of_the_policy_size() {
        let mut s = stream(DynRecMode::Off, 4096, Mock::tidy());
        for _ in 0..100 {
            s.write_all(&[1; 100]).await.unwrap();
        }
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![4096, 4096, 1808]);
        assert_eq!(s.get_ref().got, vec![1; 10_000]);
    }

    #[tokio::test]
    async fn whole_records_skip_the_buffer() {
        let mut s = stream(DynRecMode::Off, 4096, Mock::tidy());
        let data = pattern(3 * 4096);
        s.write_all(&data).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![4096; 3]);
        assert_eq!(s.buf.capacity(), 0, "never copied");
        assert_eq!(s.get_ref().got, data);
    }

    #[tokio::test]
    async fn vectored_writes_are_gathered_into_records() {
        let mut s = stream(DynRecMode::Off, 16_384, Mock::tidy());
        assert!(s.is_write_vectored());
        let n = s
            .write_vectored(&[
                IoSlice::new(&[b'h'; 150]),
                IoSlice::new(&[]),
                IoSlice::new(&[b'b'; 50]),
            ])
            .await
            .unwrap();
        assert_eq!(n, 200);
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![200]);
        // Headers and a large body: the first record takes both, then whole records.
        let body = pattern(40_000);
        write_all_vectored(&mut s, &[&[b'h'; 200], &body])
            .await
            .unwrap();
        s.flush().await.unwrap();
        assert_eq!(s.get_ref().writes, vec![200, 16_384, 16_384, 7432]);
        assert!(s.get_ref().got[400..] == body[..]);
    }

    #[tokio::test]
    async fn dynamic_ramp_through_the_stream() {
        let mut s = stream(DynRecMode::On, 16_384, Mock::tidy());
        let data = pattern(1 << 20);
        s.write_all(&data).await.unwrap();
        s.shutdown().await.unwrap();
        assert!(s.get_ref().shut);
        assert_eq!(s.get_ref().writes, cut(1 << 20, dynamic_defaults()));
        assert_eq!(s.get_ref().got, data);
    }

    #[tokio::test]
    async fn shutdown_sends_the_partial_record_first() {
        let mut s = stream(DynRecMode::Off, 16_384, Mock::tidy());
        s.write_all(b"tail").await.unwrap();
        s.shutdown().await.unwrap();
        assert_eq!(s.get_ref().got, b"tail");
        assert!(s.get_ref().shut);
    }

    #[tokio::test]
    async fn tcp_info_is_read_only_when_the_policy_wants_it() {
        for (mode, want_reads) in [
            (DynRecMode::Off, false),
            (DynRecMode::On, false),
            (DynRecMode::Adaptive, true),
        ] {
            let reads = Arc::new(AtomicUsize::new(0));
            let r = reads.clone();
            let source = move || {
                r.fetch_add(1, Ordering::Relaxed);
                None
            };
            let mut s = RecordStream::with_source(Mock::tidy(), policy(mode, 16_384), source);
            s.write_all(&pattern(100_000)).await.unwrap();
            s.flush().await.unwrap();
            assert_eq!(reads.load(Ordering::Relaxed) > 0, want_reads, "{mode}");
            assert_eq!(s.policy().name(), policy(mode, 16_384).name());
        }
    }

    #[tokio::test]
    async fn short_and_pending_inner_writes_lose_nothing() {
        for seed in 1..=12u64 {
            let (mode, buffer) = [
                (DynRecMode::Off, 16_384),
                (DynRecMode::Off, 4096),
                (DynRecMode::On, 16_384),
                (DynRecMode::Adaptive, 16_384),
            ][seed as usize % 4];
            let mut s = stream(mode, buffer, Mock::new(seed, true));
            let mut rng = Rng(seed * 7919);
            let data = pattern(1 << 20);
            let mut at = 0;
            while at < data.len() {
                let n = (1 + rng.below(40_000)).min(data.len() - at);
                let chunk = &data[at..at + n];
                match rng.below(4) {
                    0 => {
                        let k = rng.below(n + 1);
                        write_all_vectored(&mut s, &[&chunk[..k], &chunk[k..]])
                            .await
                            .unwrap()
                    }
                    _ => s.write_all(chunk).await.unwrap(),
                }
                if rng.below(5) == 0 {
                    s.flush().await.unwrap();
                }
                at += n;
            }
            s.shutdown().await.unwrap();
            let inner = s.into_inner();
            assert!(
                inner.got == data,
                "seed {seed}: bytes lost, repeated or reordered"
            );
            assert!(
                inner.writes.iter().all(|&w| (1..=buffer).contains(&w)),
                "seed {seed}"
            );
            assert!(inner.shut);
        }
    }

    // ---- Through real TLS: tokio-rustls on the server, rustls on the client, records read
    // ---- off the wire one by one.

    enum Op {
        Write(Vec<u8>),
        Vectored(Vec<Vec<u8>>),
        Flush,
    }

    /// What the client saw: the plaintext length of each application-data record, in order,
    /// and the bytes.
    #[derive(Default)]
    struct Wire {
        records: Vec<usize>,
        data: Vec<u8>,
    }

    fn configs(tls12: bool) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
        let versions: &[&'static rustls::SupportedProtocolVersion] = if tls12 {
            &[&rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        let (chain, key) = crate::tls::self_signed(&["localhost"]).expect("certificate");
        let mut roots = RootCertStore::empty();
        roots.add(chain[0].clone()).expect("root");
        let server = ServerConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(versions)
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("server config");
        let client = ClientConfig::builder_with_provider(crate::tls::provider())
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    /// Reads the server's records one at a time off the wire, decrypting each; checks each
    /// application-data record's length field against its plaintext.
    async fn client<IO: AsyncRead + AsyncWrite + Unpin>(
        mut io: IO,
        config: Arc<ClientConfig>,
        tls12: bool,
    ) -> Wire {
        let name = ServerName::try_from("localhost").expect("name");
        let mut conn = ClientConnection::new(config, name).expect("client");
        let mut wire = Wire::default();
        loop {
            while conn.wants_write() {
                let mut out = Vec::new();
                conn.write_tls(&mut out).expect("write_tls");
                io.write_all(&out).await.expect("client send");
            }
            let mut record = vec![0u8; 5];
            match io.read_exact(&mut record).await {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                r => r.expect("header"),
            };
            let len = usize::from(u16::from_be_bytes([record[3], record[4]]));
            record.resize(5 + len, 0);
            io.read_exact(&mut record[5..]).await.expect("record body");
            let mut rd = &record[..];
            while !rd.is_empty() {
                conn.read_tls(&mut rd).expect("read_tls");
            }
            let state = conn.process_new_packets().expect("process");
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                assert_eq!(record[0], 23, "application data");
                let overhead = if tls12 { 24 } else { 17 };
                assert_eq!(len, n + overhead, "length field");
                let mut plain = vec![0u8; n];
                conn.reader().read_exact(&mut plain).expect("plaintext");
                wire.records.push(n);
                wire.data.extend_from_slice(&plain);
            }
            if state.peer_has_closed() {
                break;
            }
        }
        wire
    }

    async fn run<T: TcpInfoSource + Unpin>(
        policy: RecordPolicy,
        source: T,
        tls12: bool,
        script: Vec<Op>,
    ) -> Wire {
        let (server_config, client_config) = configs(tls12);
        // Room for everything: no back-pressure, so rustls never takes a partial record.
        let (c, s) = tokio::io::duplex(4 << 20);
        let server = async move {
            let tls = tokio_rustls::TlsAcceptor::from(server_config)
                .accept(s)
                .await
                .expect("handshake");
            let mut rs = RecordStream::with_source(tls, policy, source);
            for op in script {
                match op {
                    Op::Write(b) => rs.write_all(&b).await.expect("write"),
                    Op::Vectored(parts) => {
                        let parts: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                        write_all_vectored(&mut rs, &parts)
                            .await
                            .expect("write_vectored")
                    }
                    Op::Flush => rs.flush().await.expect("flush"),
                }
            }
            rs.shutdown().await.expect("shutdown");
        };
        let (_, wire) = tokio::join!(server, client(c, client_config, tls12));
        wire
    }

    async fn one_write(policy: RecordPolicy, len: usize) -> (Vec<u8>, Wire) {
        let data = pattern(len);
        let wire = run(policy, no_info, false, vec![Op::Write(data.clone())]).await;
        (data, wire)
    }

    #[tokio::test]
    async fn tls_static_16k_and_4k() {
        for (buffer, len) in [
            (16_384, 100 * 1024),
            (4096, 100 * 1024),
            (16_384, 10 * 1024),
        ] {
            let (data, wire) = one_write(policy(DynRecMode::Off, buffer), len).await;
            assert_eq!(
                wire.records,
                cut(len, std::iter::repeat(buffer)),
                "{buffer}"
            );
            assert!(wire.data == data);
        }
    }

    #[tokio::test]
    async fn tls_dynamic_defaults() {
        let (data, wire) = one_write(policy(DynRecMode::On, 16_384), 1 << 20).await;
        assert_eq!(wire.records, cut(1 << 20, dynamic_defaults()));
        assert_eq!(wire.records.len(), 41 + 40 + 50 + 1);
        assert!(wire.data == data);
    }

    #[tokio::test]
    async fn tls_dynamic_tuned() {
        let tuned = RecordSettings {
            ssl_dyn_rec_enable: DynRecMode::On,
            ssl_dyn_rec_size_lo: 1369,
            ssl_dyn_rec_size_hi: 16_384,
            ssl_dyn_rec_threshold: 10,
            ssl_dyn_rec_timeout: Duration::from_secs(5),
            ..RecordSettings::default()
        };
        let (data, wire) = one_write(tuned.policy(), 100 * 1024).await;
        let want = cut(
            100 * 1024,
            std::iter::repeat_n(1369, 11).chain(std::iter::repeat(16_384)),
        );
        assert_eq!(wire.records, want);
        assert!(wire.data == data);
    }

    #[tokio::test]
    async fn tls_adaptive_follows_mocked_tcp_info() {
        // Each reading shows 10 more segments of window (MSS 1448). The RTT is 10 s and the
        // timeout off, so a stall of this (shared) machine never looks like an idle period.
        let reads = Arc::new(AtomicUsize::new(0));
        let r = reads.clone();
        let source = move || {
            let k = r.fetch_add(1, Ordering::Relaxed) as u32 + 1;
            Some(TcpInfo {
                rtt_us: 10_000_000,
                rttvar_us: 10_000,
                snd_cwnd: 10 * k,
                snd_mss: 1448,
                unacked: 1,
                ..TcpInfo::default()
            })
        };
        let data = pattern(100 * 1024);
        let settings = RecordSettings {
            ssl_dyn_rec_enable: DynRecMode::Adaptive,
            ssl_dyn_rec_timeout: Duration::ZERO,
            ..RecordSettings::default()
        };
        let wire = run(
            settings.policy(),
            source,
            false,
            vec![Op::Write(data.clone())],
        )
        .await;
        // Fresh: one segment (1448 − 29); then cwnd/4 segments: 20 → 5, 30 → 7, 40 → 10,
        // 50 → 12 (≥ a full record).
        let seg = |k: usize| k * 1448 - 29;
        let head = [seg(1), seg(5), seg(7), seg(10)];
        let want = cut(
            100 * 1024,
            head.into_iter().chain(std::iter::repeat(16_384)),
        );
        assert_eq!(wire.records, want);
        // Full records re-read TCP_INFO only every 8th record.
        assert_eq!(reads.load(Ordering::Relaxed), 5);
        assert!(wire.data == data);
    }

    #[tokio::test]
    async fn tls_200_byte_response_is_one_record() {
        for tls12 in [false, true] {
            let script = vec![
                Op::Write(vec![b'h'; 150]),
                Op::Write(vec![b'b'; 50]),
                Op::Flush,
                Op::Vectored(vec![vec![b'H'; 120], vec![b'B'; 80]]),
                Op::Flush,
            ];
            let wire = run(policy(DynRecMode::Off, 16_384), no_info, tls12, script).await;
            assert_eq!(wire.records, vec![200, 200], "tls12: {tls12}");
            assert_eq!(&wire.data[..150], &[b'h'; 150][..]);
            assert_eq!(&wire.data[200..320], &[b'H'; 120][..]);
        }
    }

    #[tokio::test]
    async fn tls_random_writes_arrive_intact() {
        let data = pattern(1 << 20);
        let mut rng = Rng(42);
        let mut script = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let n = (1 + rng.below(30_000)).min(data.len() - at);
            let chunk = data[at..at + n].to_vec();
            if rng.below(3) == 0 {
                let k = rng.below(n + 1);
                script.push(Op::Vectored(vec![chunk[..k].to_vec(), chunk[k..].to_vec()]));
            } else {
                script.push(Op::Write(chunk));
            }
            if rng.below(6) == 0 {
                script.push(Op::Flush);
            }
            at += n;
        }
        let wire = run(policy(DynRecMode::On, 16_384), no_info, false, script).await;
        assert!(wire.data == data, "bytes lost, repeated or reordered");
        assert!(wire.records.iter().all(|&r| r <= 16_384));
        // The first 41 records are at most size_lo.
        assert!(wire.records[..41].iter().all(|&r| r <= 1369));
    }

    #[tokio::test]
    async fn tls_adaptive_reads_tcp_info_from_a_real_socket() {
        // Over loopback the MSS is ~64 KB, so one segment already holds a full record.
        let (server_config, client_config) = configs(false);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let data = pattern(200 * 1024);
        let sent = data.clone();
        let server = async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
            let tls = tokio_rustls::TlsAcceptor::from(server_config)
                .accept(tcp)
                .await
                .expect("handshake");
            let mut policy = policy(DynRecMode::Adaptive, 16_384);
            policy.set_record_overhead(crate::record::TLS13_RECORD_OVERHEAD);
            let mut rs = RecordStream::new(tls, policy, Some(fd));
            rs.write_all(&sent).await.expect("write");
            rs.shutdown().await.expect("shutdown");
            rs.policy().name()
        };
        let client = async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            client(tcp, client_config, false).await
        };
        let (name, wire) = tokio::join!(server, client);
        assert_eq!(name, "adaptive");
        assert_eq!(wire.records, cut(200 * 1024, std::iter::repeat(16_384)));
        assert!(wire.data == data);
    }
}
