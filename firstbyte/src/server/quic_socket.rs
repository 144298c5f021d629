//! A QUIC endpoint's UDP socket that notes when its reads deliver datagrams: the arrival
//! bound of its connections' requests (`net::ReadClock`), so the open-file check made after
//! a burst of datagrams was read answers every request they carried, as the check made after
//! a TCP read answers the requests that read brought. It also holds the anti-amplification
//! limit per remote address (`quic_amplification`): every datagram read is counted, and one
//! to an unvalidated address that would take it past 3x is dropped.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use super::quic_amplification::{proves_address, Budgets, CAPACITY};
use crate::net::ReadClock;

/// The anti-amplification accounts of one socket, shared with its accept loop (which tells
/// addresses validated by a token).
#[derive(Debug)]
pub(super) struct Amplification {
    budgets: Mutex<Budgets>,
    /// The key of the server's connection IDs (`quic_keys::CidGenerator`'s).
    cid_key: Arc<AtomicU64>,
}

impl Amplification {
    /// Validated addresses are kept `idle` after their last datagram (the idle timeout).
    pub(super) fn new(cid_key: Arc<AtomicU64>, idle: Duration) -> Arc<Self> {
        Arc::new(Self {
            budgets: Mutex::new(Budgets::new(CAPACITY, idle + IDLE_MARGIN)),
            cid_key,
        })
    }

    fn budgets(&self) -> MutexGuard<'_, Budgets> {
        // The accounts stay consistent whatever panicked while they were held.
        self.budgets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// quinn took an address-validation token (Retry or NEW_TOKEN) from `addr`.
    pub(super) fn validated(&self, addr: SocketAddr) {
        self.budgets().validate(addr);
    }

    /// A reload's idle timeout (see [`Budgets::keep_validated_for`]).
    pub(super) fn idle_timeout(&self, idle: Duration) {
        self.budgets().keep_validated_for(idle + IDLE_MARGIN);
    }

    fn own_cid(&self, cid: &[u8]) -> bool {
        use quinn::ConnectionIdGenerator;
        let key = self.cid_key.load(Ordering::Relaxed);
        quinn_proto::HashedConnectionIdGenerator::from_key(key)
            .validate(&quinn::ConnectionId::new(cid))
            .is_ok()
    }
}

/// Past the idle timeout, a validated address is kept a while longer (the peer's idle timer
/// runs from its own last packet, three probe timeouts at least).
const IDLE_MARGIN: Duration = Duration::from_secs(60);

/// `inner`, with each read that delivers datagrams noted on `reads` before quinn sees them,
/// and the anti-amplification limit held on what is sent.
#[derive(Debug)]
pub(super) struct Stamped {
    inner: Arc<dyn AsyncUdpSocket>,
    reads: Arc<ReadClock>,
    amplification: Arc<Amplification>,
}

impl Stamped {
    pub(super) fn new(
        inner: Arc<dyn AsyncUdpSocket>,
        reads: Arc<ReadClock>,
        amplification: Arc<Amplification>,
    ) -> Self {
        Self {
            inner,
            reads,
            amplification,
        }
    }

    /// Counts each datagram of the `n` buffers just read (several per buffer with GRO).
    fn count(&self, bufs: &[IoSliceMut<'_>], meta: &[RecvMeta], n: usize) {
        let now = Instant::now();
        let amp = &self.amplification;
        let mut budgets = amp.budgets();
        for (buf, m) in bufs.iter().zip(meta).take(n) {
            let data = buf.get(..m.len).unwrap_or(buf);
            for datagram in data.chunks(m.stride.max(1)) {
                let proves = proves_address(datagram, |cid| amp.own_cid(cid));
                budgets.received(m.addr, datagram.len(), proves, now);
            }
        }
    }
}

impl AsyncUdpSocket for Stamped {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let len = transmit.contents.len();
        let segment = transmit.segment_size.unwrap_or(len).max(1);
        let segments = len.div_ceil(segment);
        let sizes = (0..segments).map(|i| segment.min(len - i * segment));
        let fit = self
            .amplification
            .budgets()
            .take(transmit.destination, sizes);
        if fit == 0 {
            // Dropped as if lost on the way: quinn sends it again once the client sent more.
            return Ok(());
        }
        let r = if fit >= segments {
            self.inner.try_send(transmit)
        } else {
            let part = Transmit {
                destination: transmit.destination,
                ecn: transmit.ecn,
                contents: &transmit.contents[..fit * segment],
                segment_size: (fit > 1).then_some(segment),
                src_ip: transmit.src_ip,
            };
            self.inner.try_send(&part)
        };
        if r.is_err() {
            let counted = if fit >= segments { len } else { fit * segment };
            self.amplification
                .budgets()
                .unsend(transmit.destination, counted);
        }
        r
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let r = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = r {
            if n > 0 {
                self.reads.note();
                self.count(bufs, meta, n);
            }
        }
        r
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
