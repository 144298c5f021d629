//! A QUIC endpoint's UDP socket that notes when its reads deliver datagrams: the arrival
//! bound of its connections' requests (`net::ReadClock`), so the open-file check made after
//! a burst of datagrams was read answers every request they carried, as the check made after
//! a TCP read answers the requests that read brought.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

use crate::net::ReadClock;

/// `inner`, with each read that delivers datagrams noted on `reads` before quinn sees them.
#[derive(Debug)]
pub(super) struct Stamped {
    inner: Arc<dyn AsyncUdpSocket>,
    reads: Arc<ReadClock>,
}

impl Stamped {
    pub(super) fn new(inner: Arc<dyn AsyncUdpSocket>, reads: Arc<ReadClock>) -> Self {
        Self { inner, reads }
    }
}

impl AsyncUdpSocket for Stamped {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
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
