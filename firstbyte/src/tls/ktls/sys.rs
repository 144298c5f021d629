//! The kernel side of kernel TLS: the start-up probe, the switch of one connection, and the
//! socket that serves it afterwards ([`KtlsSocket`]: `sendmsg` of alerts, `sendfile` sized by
//! the record policy; for TLS 1.2 `recvmsg` with the record type in a control message, for
//! TLS 1.3 plain reads opened in user space by [`rx::Reader`]).

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use rustls::crypto::tls13::OkmBlock;
use rustls::{ConnectionTrafficSecrets, ServerConnection};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;

use super::rx::{self, Fail, Step};
use super::{
    crypto_info, post_handshake, raw_crypto_info, records_of, send_size, KernelCipher,
    KernelVersion, PostHandshake, Support, Zerocopy, CLOSE_NOTIFY, CONTENT_ALERT, CONTENT_DATA,
};
use crate::record::{RecordPolicy, SocketInfo, TcpInfoSource};

// linux/tls.h, linux/tcp.h (the libc crate has not every one of them).
const SOL_TLS: libc::c_int = 282;
const TCP_ULP: libc::c_int = 31;
const TLS_TX: libc::c_int = 1;
const TLS_RX: libc::c_int = 2;
const TLS_TX_ZEROCOPY_RO: libc::c_int = 3;
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;

fn setsockopt(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a live buffer of the given length for the call's duration.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setsockopt(TCP_ULP, "tls")`: the socket takes the `tls` upper-layer protocol. Until keys
/// are installed it still sends and receives plain bytes.
pub fn attach_ulp(fd: RawFd) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, TCP_ULP, b"tls")
}

/// What this kernel takes, probed once (on the first call) on loopback socket pairs; the
/// result is logged once: a `[warn]` when kernel TLS cannot be used, a `[notice]` with the
/// ciphers when it can.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let s = probe();
        match s.warning() {
            Some(w) => crate::fblog!(Warn, "{w}"),
            None => crate::fblog!(Notice, "{}", s.summary()),
        }
        s
    })
}

fn probe() -> Support {
    let pair = || -> io::Result<(std::net::TcpStream, std::net::TcpStream)> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let c = std::net::TcpStream::connect(l.local_addr()?)?;
        let (s, _) = l.accept()?;
        Ok((c, s))
    };
    match pair().and_then(|(c, _s)| attach_ulp(c.as_raw_fd())) {
        Ok(()) => {}
        Err(e) => {
            return Support::NoModule(format!(
                "setsockopt(TCP_ULP, \"tls\") failed ({})",
                crate::log::OsError(&e)
            ))
        }
    }
    let mut have = Vec::new();
    for v in KernelVersion::ALL {
        for c in KernelCipher::ALL {
            let key = vec![0u8; if c == KernelCipher::Aes128Gcm { 16 } else { 32 }];
            let Ok(info) = raw_crypto_info(v, c, &key, &[0; 12], 0) else {
                continue;
            };
            // TLS 1.3 needs `TLS_TX` only: its records from the client are opened in user space.
            let ok = pair().and_then(|(c, _s)| {
                let fd = c.as_raw_fd();
                attach_ulp(fd)?;
                setsockopt(fd, SOL_TLS, TLS_TX, &info)?;
                match v {
                    KernelVersion::Tls12 => setsockopt(fd, SOL_TLS, TLS_RX, &info),
                    KernelVersion::Tls13 => Ok(()),
                }
            });
            if ok.is_ok() {
                have.push((v, c));
            }
        }
    }
    Support::Ciphers(have)
}

/// `setsockopt(SOL_TLS, TLS_TX_ZEROCOPY_RO, 1)` on a socket whose `TLS_TX` is set.
fn set_tx_zerocopy(fd: RawFd) -> io::Result<()> {
    setsockopt(fd, SOL_TLS, TLS_TX_ZEROCOPY_RO, &1u32.to_ne_bytes())
}

/// Whether this kernel takes `TLS_TX_ZEROCOPY_RO` (`Options KTLSTxZerocopySendfile`), probed
/// once (on the first call: at the first configuration load that asks for it) on a loopback
/// socket with `TLS_TX` set; a failure other than the kernel not knowing the option is logged
/// once.
pub fn zerocopy() -> &'static Zerocopy {
    static ZEROCOPY: OnceLock<Zerocopy> = OnceLock::new();
    ZEROCOPY.get_or_init(|| {
        let z = probe_zerocopy();
        match &z {
            Zerocopy::Available => crate::fblog!(Debug, "kernel TLS takes TLS_TX_ZEROCOPY_RO"),
            Zerocopy::Unsupported(why) => crate::fblog!(
                Debug,
                "{why}: \"KTLSTxZerocopySendfile\" is ignored, sendfile copies"
            ),
            Zerocopy::Failed(why) => crate::fblog!(
                Notice,
                "{why}: \"ssl_conf_command Options KTLSTxZerocopySendfile\" is ignored, sendfile copies"
            ),
        }
        z
    })
}

fn probe_zerocopy() -> Zerocopy {
    let Support::Ciphers(have) = support() else {
        return Zerocopy::Unsupported("no kernel TLS".into());
    };
    let Some(&(v, c)) = have.first() else {
        return Zerocopy::Unsupported("no kernel TLS cipher".into());
    };
    let key = vec![0u8; if c == KernelCipher::Aes128Gcm { 16 } else { 32 }];
    let r = (|| -> io::Result<()> {
        let info = raw_crypto_info(v, c, &key, &[0; 12], 0)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let s = std::net::TcpStream::connect(l.local_addr()?)?;
        let _peer = l.accept()?;
        let fd = s.as_raw_fd();
        attach_ulp(fd)?;
        setsockopt(fd, SOL_TLS, TLS_TX, &info)?;
        set_tx_zerocopy(fd)
    })();
    let errno = r
        .as_ref()
        .map_err(|e| e.raw_os_error().unwrap_or(0))
        .copied();
    Zerocopy::of(errno, || {
        let e = r.unwrap_err();
        format!(
            "setsockopt(TLS_TX_ZEROCOPY_RO) failed ({})",
            crate::log::OsError(&e)
        )
    })
}

/// `FIRSTBYTE_KTLS_H2=1` in the environment: HTTP/2 connections switch to kernel TLS too (their
/// frames written through the kernel's records, no `sendfile`). A measuring switch for
/// `firstbyte-bench ktls --h2`, not a setting: by that bench HTTP/2 stays in user space.
pub fn h2_in_kernel() -> bool {
    static H2: OnceLock<bool> = OnceLock::new();
    *H2.get_or_init(|| std::env::var_os("FIRSTBYTE_KTLS_H2").is_some_and(|v| v == "1"))
}

/// Why a switch failed after rustls gave up its state (the connection is lost; rare: the
/// probe said the kernel takes this cipher).
#[derive(Debug)]
pub struct SwitchError(pub String);

/// Moves one connection's record layer into the kernel. `ulp` must have been attached
/// ([`attach_ulp`]) — the step that can fail while rustls still has the connection. Writes
/// what rustls still has queued (TLS 1.3 session tickets) first, then takes the keys and
/// their sequence numbers: both directions to the kernel for TLS 1.2, only ours for TLS 1.3,
/// whose client records [`rx::Reader`] opens (following KeyUpdates from `secret`, the
/// client's traffic secret [`rx::capture`] kept; without it a KeyUpdate ends the connection
/// at the client's next record). Returns the kernel socket, with any plaintext rustls had
/// already decrypted (none when the handshake's reads stopped at its last record) to be read
/// first.
/// With `zerocopy` (`Options KTLSTxZerocopySendfile`, and [`zerocopy`] found the kernel takes
/// it) `TLS_TX_ZEROCOPY_RO` is set too; should that fail here, `sendfile` copies (logged).
pub async fn switch(
    mut tcp: TcpStream,
    mut conn: ServerConnection,
    version: KernelVersion,
    policy: RecordPolicy,
    zerocopy: bool,
    secret: Option<OkmBlock>,
) -> Result<KtlsSocket, SwitchError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| SwitchError(format!("{what} ({e})"));
    let mut queued = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut queued)
            .map_err(|e| fail("writing the session tickets", &e))?;
    }
    tcp.write_all(&queued)
        .await
        .map_err(|e| fail("writing the session tickets", &e))?;
    let mut early = Vec::new();
    {
        use std::io::Read;
        match conn.reader().read_to_end(&mut early) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(fail("reading buffered plaintext", &e)),
        }
    }
    let suite = conn.negotiated_cipher_suite().and_then(|s| s.tls13());
    let secrets = conn
        .dangerous_extract_secrets()
        .map_err(|e| fail("dangerous_extract_secrets()", &e))?;
    let fd = tcp.as_raw_fd();
    let (tx_seq, tx) = &secrets.tx;
    let tx = crypto_info(version, tx, *tx_seq).map_err(|_| SwitchError("cipher".into()))?;
    let (rx_seq, rx) = secrets.rx;
    let user = match (version, suite) {
        (KernelVersion::Tls12, _) => {
            let rx = crypto_info(version, &rx, rx_seq).map_err(|_| SwitchError("cipher".into()))?;
            setsockopt(fd, SOL_TLS, TLS_RX, &rx).map_err(|e| fail("setsockopt(TLS_RX)", &e))?;
            None
        }
        (KernelVersion::Tls13, Some(suite)) => {
            let (key, iv) = match rx {
                ConnectionTrafficSecrets::Aes128Gcm { key, iv }
                | ConnectionTrafficSecrets::Aes256Gcm { key, iv }
                | ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (key, iv),
                _ => return Err(SwitchError("cipher".into())),
            };
            Some(Box::new(rx::Reader::new(suite, key, iv, rx_seq, secret)))
        }
        (KernelVersion::Tls13, None) => return Err(SwitchError("no TLS 1.3 suite".into())),
    };
    setsockopt(fd, SOL_TLS, TLS_TX, &tx).map_err(|e| fail("setsockopt(TLS_TX)", &e))?;
    crate::fblog!(Debug, "BIO_get_ktls_send(): 1");
    if user.is_some() {
        crate::fblog!(
            Debug,
            "BIO_get_ktls_recv(): 0 (TLSv1.3 records from the client are decrypted in user space)"
        );
    } else {
        crate::fblog!(Debug, "BIO_get_ktls_recv(): 1");
    }
    let zerocopy = zerocopy
        && match set_tx_zerocopy(fd) {
            Ok(()) => true,
            Err(e) => {
                crate::fblog!(
                    Info,
                    "setsockopt(TLS_TX_ZEROCOPY_RO) failed ({}), sendfile copies",
                    crate::log::OsError(&e)
                );
                false
            }
        };
    Ok(KtlsSocket {
        zerocopy,
        inner: tcp,
        policy,
        early,
        early_at: 0,
        rx: Rx::Open,
        user,
        close_sent: false,
        tx_refused: None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rx {
    Open,
    /// close_notify (or the peer's FIN): EOF from now on.
    Closed,
    /// The client's records ended the connection (logged once): an error from now on.
    Failed,
}

/// A socket whose records the kernel makes (and, for TLS 1.2, opens).
pub struct KtlsSocket {
    /// `TLS_TX_ZEROCOPY_RO` is set: `sendfile` hands the file's pages on without a copy.
    zerocopy: bool,
    inner: TcpStream,
    policy: RecordPolicy,
    early: Vec<u8>,
    early_at: usize,
    rx: Rx,
    /// TLS 1.3: the client's records, opened in user space.
    user: Option<Box<rx::Reader>>,
    close_sent: bool,
    /// Why nothing more may be sent (after a fatal alert, or a KeyUpdate we cannot answer).
    tx_refused: Option<&'static str>,
}

/// One `recvmsg` into `buf`: its length and the record type (data unless the kernel says).
fn recv_record(fd: RawFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<(usize, u8)> {
    // CMSG_SPACE(1) is 24 on 64-bit Linux; room for one.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at `iov` (into `buf`) and `control`, both live for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut kind = CONTENT_DATA;
    // SAFETY: the kernel filled `msg`'s control area; CMSG_* walk it within its length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_TLS && (*c).cmsg_type == TLS_GET_RECORD_TYPE {
                kind = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, kind))
}

/// One `sendmsg` of a record of type `kind` (an alert) through the kernel.
fn send_record(fd: RawFd, kind: u8, body: &[u8]) -> io::Result<usize> {
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: body.as_ptr() as *mut libc::c_void,
        iov_len: body.len(),
    };
    // SAFETY: as in `recv_record`; the control message is built within `control`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = SOL_TLS;
        (*c).cmsg_type = TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as usize;
        *libc::CMSG_DATA(c) = kind;
        let n = libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL);
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl KtlsSocket {
    /// Whether `sendfile` goes without the kernel's copy (`TLS_TX_ZEROCOPY_RO` is set).
    pub fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// The record size the policy wants next.
    fn next_record(&mut self) -> usize {
        let tcp = if self.policy.wants_tcp_info() {
            SocketInfo(Some(self.inner.as_raw_fd())).tcp_info()
        } else {
            None
        };
        self.policy.next_size(Instant::now(), tcp.as_ref())
    }

    fn on_sent(&mut self, sent: usize, record: usize) {
        let now = Instant::now();
        for r in records_of(sent, record) {
            self.policy.on_record(now, r);
        }
    }

    /// Handles a non-data record; `Some` ends the read with that result.
    fn on_control(&mut self, kind: u8, body: &[u8]) -> Option<io::Result<()>> {
        match post_handshake(kind, body) {
            PostHandshake::CloseNotify => {
                crate::fblog!(Debug, "kTLS: close_notify received");
                self.rx = Rx::Closed;
                Some(Ok(()))
            }
            PostHandshake::Alert(d) => {
                Some(Err(io::Error::other(format!("peer sent TLS alert {d}"))))
            }
            PostHandshake::Handshake(t) => {
                crate::fblog!(Debug, "kTLS: handshake message {t} ignored");
                None
            }
            // The kernel opens TLS 1.2 records only, which has no KeyUpdate.
            PostHandshake::KeyUpdate { .. } | PostHandshake::Invalid => Some(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unexpected TLS record",
            ))),
        }
    }

    /// The client's records end the connection: logs why once, sends the fatal alert
    /// RFC 8446 names (or close_notify, for a KeyUpdate we cannot answer) through the
    /// kernel if the socket takes it now, and refuses every later send.
    fn refuse(&mut self, f: &Fail) -> io::Error {
        crate::fblog!(Info, "kTLS: {f}, closing the connection");
        let alert = match (f.alert(), f) {
            (Some(d), _) => Some([2, d]),
            (None, Fail::UpdateRequested) => Some(CLOSE_NOTIFY),
            (None, _) => None,
        };
        if let (Some(a), false) = (alert, self.close_sent) {
            // Best effort: the socket does not block, and the connection ends either way.
            let _ = send_record(self.inner.as_raw_fd(), CONTENT_ALERT, &a);
            self.close_sent = true;
        }
        self.rx = Rx::Failed;
        self.tx_refused = Some("the TLS connection ended on the client's record");
        io::Error::new(io::ErrorKind::InvalidData, f.to_string())
    }

    /// A TLS 1.3 read: the client's records through [`rx::Reader`].
    fn poll_read_user(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let Some(r) = self.user.as_deref_mut() else {
                return Poll::Ready(Ok(()));
            };
            match r.step() {
                Step::Data => {
                    let p = r.plaintext();
                    let n = p.len().min(buf.remaining());
                    buf.put_slice(&p[..n]);
                    r.consume(n);
                    return Poll::Ready(Ok(()));
                }
                Step::More => {
                    let mut spare = ReadBuf::new(r.spare());
                    ready!(Pin::new(&mut self.inner).poll_read(cx, &mut spare))?;
                    let n = spare.filled().len();
                    if n == 0 {
                        // The client's FIN (without close_notify, as the kernel path reads it).
                        self.rx = Rx::Closed;
                        return Poll::Ready(Ok(()));
                    }
                    r.filled(n);
                }
                Step::KeyUpdate { followed: true } => crate::fblog!(
                    Debug,
                    "kTLS: the client updated its keys (KeyUpdate): reading on under the new keys"
                ),
                Step::KeyUpdate { followed: false } => crate::fblog!(
                    Info,
                    "kTLS: the client updated its keys (KeyUpdate) but its traffic secret was not kept: the connection ends at its next record"
                ),
                Step::Closed => {
                    crate::fblog!(Debug, "kTLS: close_notify received");
                    self.rx = Rx::Closed;
                    return Poll::Ready(Ok(()));
                }
                Step::Fail(f) => return Poll::Ready(Err(self.refuse(&f))),
            }
        }
    }

    fn refused(&self) -> Option<io::Error> {
        self.tx_refused
            .map(|why| io::Error::new(io::ErrorKind::BrokenPipe, why))
    }
}

impl AsyncRead for KtlsSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.early_at < this.early.len() {
            let n = buf.remaining().min(this.early.len() - this.early_at);
            buf.put_slice(&this.early[this.early_at..this.early_at + n]);
            this.early_at += n;
            if this.early_at == this.early.len() {
                this.early = Vec::new();
                this.early_at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        match this.rx {
            Rx::Closed => return Poll::Ready(Ok(())),
            Rx::Failed => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the TLS connection ended on the client's record",
                )))
            }
            Rx::Open if buf.remaining() == 0 => return Poll::Ready(Ok(())),
            Rx::Open if this.user.is_some() => return this.poll_read_user(cx, buf),
            Rx::Open => {}
        }
        let fd = this.inner.as_raw_fd();
        loop {
            if this.rx == Rx::Closed {
                return Poll::Ready(Ok(()));
            }
            ready!(this.inner.poll_read_ready(cx))?;
            // Control records are a few bytes; a tiny caller buffer reads through a stash.
            let mut small = [MaybeUninit::<u8>::uninit(); 64];
            let direct = buf.remaining() >= small.len();
            // SAFETY: `recv_record` only writes into the unfilled part; the bytes it reports
            // are then marked initialized.
            let target = if direct {
                unsafe { buf.unfilled_mut() }
            } else {
                &mut small[..]
            };
            let r = this
                .inner
                .try_io(Interest::READABLE, || recv_record(fd, target));
            let (n, kind) = match r {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if direct {
                // SAFETY: the kernel wrote `n` bytes at the start of the unfilled part.
                unsafe { buf.assume_init(n) };
            }
            if kind == CONTENT_DATA {
                if n == 0 {
                    this.rx = Rx::Closed;
                    return Poll::Ready(Ok(()));
                }
                if direct {
                    buf.advance(n);
                } else {
                    // SAFETY: the kernel wrote the first `n` bytes of `small`.
                    let got = unsafe { std::slice::from_raw_parts(small.as_ptr().cast::<u8>(), n) };
                    let k = n.min(buf.remaining());
                    buf.put_slice(&got[..k]);
                    this.early = got[k..].to_vec();
                    this.early_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let body = if direct {
                buf.initialize_unfilled_to(n)[..n].to_vec()
            } else {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts(small.as_ptr().cast::<u8>(), n) }.to_vec()
            };
            if let Some(r) = this.on_control(kind, &body) {
                return Poll::Ready(r);
            }
        }
    }
}

impl AsyncWrite for KtlsSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.refused() {
            return Poll::Ready(Err(e));
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let record = this.next_record();
        let allowed = send_size(record, total);
        let r = if allowed == total {
            Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
        } else {
            // One call per record: the first `allowed` bytes.
            let mut left = allowed;
            let mut cut = Vec::with_capacity(bufs.len());
            for b in bufs {
                if left == 0 {
                    break;
                }
                let n = b.len().min(left);
                cut.push(IoSlice::new(&b[..n]));
                left -= n;
            }
            Pin::new(&mut this.inner).poll_write_vectored(cx, &cut)
        };
        if let Poll::Ready(Ok(n)) = r {
            this.on_sent(n, record);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_sent {
            let fd = this.inner.as_raw_fd();
            loop {
                ready!(this.inner.poll_write_ready(cx))?;
                match this.inner.try_io(Interest::WRITABLE, || {
                    send_record(fd, CONTENT_ALERT, &CLOSE_NOTIFY)
                }) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                    Ok(_) => break,
                }
            }
            crate::fblog!(Debug, "kTLS: close_notify sent");
            this.close_sent = true;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl crate::net::Sendfile for KtlsSocket {
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: RawFd,
        offset: u64,
        count: usize,
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.refused() {
            return Poll::Ready(Err(e));
        }
        let record = self.next_record();
        let n = send_size(record, count);
        let sent = ready!(crate::net::Sendfile::poll_sendfile(
            &mut self.inner,
            cx,
            file,
            offset,
            n
        ))?;
        crate::fblog!(Debug, "SSL_sendfile: {sent}");
        self.on_sent(sent, record);
        Poll::Ready(Ok(sent))
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.inner.as_raw_fd())
    }
}

impl crate::net::ReadReady for KtlsSocket {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.early_at < self.early.len()
            || self.rx != Rx::Open
            || self.user.as_ref().is_some_and(|u| u.ready())
        {
            return Poll::Ready(Ok(()));
        }
        self.inner.poll_read_ready(cx)
    }
}

impl crate::tls::stream::BatchWrite for crate::net::SocketStream<KtlsSocket> {}
