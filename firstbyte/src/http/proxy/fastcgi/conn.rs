//! A connection to a FastCGI server (TCP or a unix socket), read record by record within
//! `fastcgi_read_timeout` and written within `fastcgi_send_timeout`, and the pool of idle
//! ones (`fastcgi_keep_conn on` with `keepalive N`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::codec::{self, Decoder, Record};
use crate::conf::model::PeerAddr;
use crate::http::proxy::ConnectError;

/// A connection to a FastCGI server.
pub struct Conn {
    pub(super) io: Stream,
    pub(super) dec: Decoder,
}

pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl Conn {
    /// Whether an idle connection is still open: nothing to read and no end of stream (the
    /// server closes idle connections when its worker exits).
    pub(super) fn alive(&self) -> bool {
        let mut b = [0u8; 1];
        let r = match &self.io {
            Stream::Tcp(s) => s.try_read(&mut b),
            Stream::Unix(s) => s.try_read(&mut b),
        };
        matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// The next record, each read within `timeout`.
    pub(super) async fn record(&mut self, timeout: Duration) -> Result<Record, ReadError> {
        loop {
            if let Some(r) = self.dec.record().map_err(ReadError::Decode)? {
                return Ok(r);
            }
            let buf = self.dec.buffer();
            buf.reserve(16 << 10);
            match tokio::time::timeout(timeout, self.io.read_buf(buf)).await {
                Err(_) => return Err(ReadError::Timeout),
                Ok(Err(e)) => return Err(ReadError::Io(e)),
                Ok(Ok(0)) => return Err(ReadError::Closed),
                Ok(Ok(_)) => {}
            }
        }
    }

    pub(super) async fn write(&mut self, data: &[u8], timeout: Duration) -> Result<(), SendError> {
        match tokio::time::timeout(timeout, self.io.write_all(data)).await {
            Err(_) => Err(SendError::Timeout),
            Ok(Err(e)) => Err(SendError::Io(e)),
            Ok(Ok(())) => Ok(()),
        }
    }
}

pub(super) async fn connect(addr: &PeerAddr, timeout: Duration) -> Result<Conn, ConnectError> {
    let work = async {
        Ok::<_, io::Error>(match addr {
            PeerAddr::Tcp(a) => {
                let s = TcpStream::connect(a).await?;
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
            PeerAddr::Unix(p) => Stream::Unix(UnixStream::connect(p).await?),
        })
    };
    match tokio::time::timeout(timeout, work).await {
        Err(_) => Err(ConnectError::TimedOut),
        Ok(Err(e)) => Err(ConnectError::Connect(e)),
        Ok(Ok(io)) => Ok(Conn {
            io,
            dec: Decoder::default(),
        }),
    }
}

/// Idle FastCGI connections (`fastcgi_keep_conn on` and `keepalive N`), by peer.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<PeerAddr, Vec<Conn>>>,
}

impl Pool {
    pub(super) fn checkout(&self, peer: &PeerAddr) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.get_mut(peer)?;
        while let Some(c) = list.pop() {
            if c.alive() {
                return Some(c);
            }
        }
        None
    }

    pub(super) fn put(&self, peer: PeerAddr, conn: Conn, max: usize) {
        if let Ok(mut idle) = self.idle.lock() {
            let list = idle.entry(peer).or_default();
            if list.len() >= max {
                list.remove(0);
            }
            list.push(conn);
        }
    }
}

/// Why reading from the FastCGI server failed.
#[derive(Debug)]
pub(super) enum ReadError {
    Timeout,
    Io(io::Error),
    Closed,
    Decode(codec::DecodeError),
}

#[derive(Debug)]
pub(super) enum SendError {
    Timeout,
    Io(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn records_over_a_socket_pair() {
        let (a, mut b) = UnixStream::pair().expect("pair");
        let mut conn = Conn {
            io: Stream::Unix(a),
            dec: Decoder::default(),
        };
        let mut out = Vec::new();
        codec::stream(&mut out, codec::STDERR, 1, b"warn\n");
        codec::stream(&mut out, codec::STDOUT, 1, b"Status: 201\r\n\r\nhi");
        b.write_all(&out).await.expect("write");
        let r = conn.record(Duration::from_secs(5)).await.expect("record");
        assert_eq!((r.kind, &r.content[..]), (codec::STDERR, &b"warn\n"[..]));
        let r = conn.record(Duration::from_secs(5)).await.expect("record");
        assert_eq!(r.kind, codec::STDOUT);
        assert!(conn.alive());
        drop(b);
        assert!(matches!(
            conn.record(Duration::from_secs(5)).await,
            Err(ReadError::Closed)
        ));
        assert!(!conn.alive());
    }
}
