//! Where a policy gets `TCP_INFO`: the connection's socket, or anything that can script it
//! (tests).

use std::os::fd::RawFd;

use crate::net::TcpInfo;

/// Where the TLS stream gets `TCP_INFO` for policies that want it.
pub trait TcpInfoSource {
    /// The connection's `TCP_INFO` now, or `None` if there is none (not TCP, or the read
    /// failed).
    fn tcp_info(&mut self) -> Option<TcpInfo>;
}

/// `TCP_INFO` from a socket's file descriptor (`None`: no TCP socket under the stream).
/// The descriptor must stay open as long as the stream: it is the TCP socket under it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_and_sockets_are_sources() {
        let mut n = 0;
        let mut f = || {
            n += 1;
            Some(TcpInfo {
                snd_cwnd: n,
                ..TcpInfo::default()
            })
        };
        assert_eq!(f.tcp_info().map(|t| t.snd_cwnd), Some(1));
        assert_eq!(SocketInfo(None).tcp_info(), None);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        use std::os::fd::AsRawFd;
        assert!(SocketInfo(Some(c.as_raw_fd()))
            .tcp_info()
            .is_some_and(|t| t.snd_mss > 0));
    }
}
