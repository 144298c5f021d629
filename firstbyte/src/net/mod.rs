//! Sockets: listening sockets with nginx's `listen` options, per-connection options
//! (`TCP_NODELAY`, `TCP_NOTSENT_LOWAT`, `TCP_CONGESTION`), and `TCP_INFO`.
//!
//! Every function takes the numbers it needs and returns an `io::Result`; the runtime decides
//! what a failure means (a config error at load, a log line for one connection).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

pub mod proxy_protocol;
mod records;
mod stream;

#[cfg(test)]
pub use stream::is_marker;
pub use stream::{
    marker, FileRange, IoControl, ReadClock, ReadReady, Sendfile, SocketStream, StallTimer,
    MARKER_LEN,
};

/// `listen`'s `sndbuf=`, `rcvbuf=` and `so_keepalive=`: set on the listening socket, from
/// which Linux copies them to every connection it accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketTuning {
    /// `SO_SNDBUF`.
    pub sndbuf: Option<u32>,
    /// `SO_RCVBUF`.
    pub rcvbuf: Option<u32>,
    /// `SO_KEEPALIVE` and its timers.
    pub keepalive: Option<KeepAlive>,
}

/// `so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// `SO_KEEPALIVE` on or off.
    pub on: bool,
    /// `TCP_KEEPIDLE`, seconds.
    pub idle: Option<u32>,
    /// `TCP_KEEPINTVL`, seconds.
    pub interval: Option<u32>,
    /// `TCP_KEEPCNT`.
    pub count: Option<u32>,
}

impl SocketTuning {
    /// Applies the options to `fd`.
    pub fn apply(&self, sock: &Socket) -> io::Result<()> {
        if let Some(n) = self.sndbuf {
            sock.set_send_buffer_size(n as usize)?;
        }
        if let Some(n) = self.rcvbuf {
            sock.set_recv_buffer_size(n as usize)?;
        }
        if let Some(k) = self.keepalive {
            sock.set_keepalive(k.on)?;
            let fd = sock.as_raw_fd();
            for (opt, v) in [
                (libc::TCP_KEEPIDLE, k.idle),
                (libc::TCP_KEEPINTVL, k.interval),
                (libc::TCP_KEEPCNT, k.count),
            ] {
                if let Some(v) = v {
                    set_int(
                        fd,
                        libc::IPPROTO_TCP,
                        opt,
                        i32::try_from(v).unwrap_or(i32::MAX),
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// What a listening socket needs (from `listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenOpts {
    /// Address to bind.
    pub addr: SocketAddr,
    /// `SO_REUSEPORT`.
    pub reuseport: bool,
    /// `listen(2)` backlog.
    pub backlog: i32,
    /// `TCP_FASTOPEN` queue length.
    pub fastopen: Option<u32>,
    /// `TCP_DEFER_ACCEPT`: accept a connection only once data has arrived on it.
    pub deferred: bool,
    /// `IPV6_V6ONLY` (IPv6 only).
    pub ipv6only: bool,
    /// `sndbuf=`, `rcvbuf=`, `so_keepalive=`.
    pub tuning: SocketTuning,
}

/// Binds and listens, non-blocking, with `SO_REUSEADDR` (as nginx) so a restart never waits on
/// `TIME_WAIT`.
pub fn bind_listener(o: &ListenOpts) -> io::Result<std::net::TcpListener> {
    let domain = Domain::for_address(o.addr);
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if o.reuseport {
        sock.set_reuse_port(true)?;
    }
    if o.addr.is_ipv6() {
        sock.set_only_v6(o.ipv6only)?;
    }
    if let Some(q) = o.fastopen {
        set_int(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN,
            q as i32,
        )?;
    }
    if o.deferred {
        // 1 second, as nginx: how long the kernel keeps a silent connection out of the accept
        // queue (a connection that stays silent is then accepted and meets
        // `ssl_handshake_timeout`). A TLS client speaks first, so the ClientHello is there
        // at accept and the first read finds it: no read that returns EAGAIN, no extra
        // round through epoll per connection.
        set_int(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            1,
        )?;
    }
    o.tuning.apply(&sock)?;
    sock.set_nonblocking(true)?;
    sock.bind(&o.addr.into())?;
    sock.listen(o.backlog)?;
    Ok(sock.into())
}

/// Binds and listens on a UNIX-domain stream socket at `path` (`listen unix:PATH`),
/// non-blocking, with `sndbuf=`/`rcvbuf=` (the TCP-only options do not apply). The file is
/// made mode 0666 after `bind`, as nginx does (`chmod`), so any local user may connect: guard
/// access with the directory's permissions.
///
/// A file already at `path` that is a socket nobody listens on (left by a process that did
/// not end cleanly) is removed and the bind tried again; anything else there (a live
/// socket, a regular file) fails with `EADDRINUSE`, as nginx.
pub fn bind_unix(
    path: &std::path::Path,
    backlog: i32,
    tuning: SocketTuning,
) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let addr = socket2::SockAddr::unix(path)?;
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    if let Some(n) = tuning.sndbuf {
        sock.set_send_buffer_size(n as usize)?;
    }
    if let Some(n) = tuning.rcvbuf {
        sock.set_recv_buffer_size(n as usize)?;
    }
    sock.set_nonblocking(true)?;
    if let Err(e) = sock.bind(&addr) {
        let stale = e.kind() == io::ErrorKind::AddrInUse
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
            && unix_socket_is_dead(&addr);
        if !stale {
            return Err(e);
        }
        crate::fblog!(Notice, "removing stale socket {}", path.display());
        std::fs::remove_file(path)?;
        sock.bind(&addr)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// Whether nobody listens on the UNIX-domain socket at `addr`: a connect is refused. A
/// non-blocking connect never waits; a full backlog (`EAGAIN`) counts as alive.
fn unix_socket_is_dead(addr: &socket2::SockAddr) -> bool {
    let Ok(probe) = Socket::new(Domain::UNIX, Type::STREAM, None) else {
        return false;
    };
    if probe.set_nonblocking(true).is_err() {
        return false;
    }
    matches!(probe.connect(addr), Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED))
}

/// Binds a UDP socket for QUIC (`listen ... quic`), non-blocking, with `SO_REUSEADDR` and, when
/// asked, `SO_REUSEPORT`. QUIC endpoints receive on it (quinn sets its own socket options:
/// GSO/GRO, ECN, path MTU discovery); `sndbuf=`/`rcvbuf=` apply as on TCP.
pub fn bind_udp(
    addr: SocketAddr,
    reuseport: bool,
    ipv6only: bool,
    tuning: SocketTuning,
) -> io::Result<std::net::UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_address(true)?;
    if reuseport {
        sock.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        sock.set_only_v6(ipv6only)?;
    }
    tuning.apply(&sock)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// Whether the kernel lets servers use TCP Fast Open (`net.ipv4.tcp_fastopen` has bit 2).
pub fn fastopen_server_enabled() -> Option<bool> {
    let v = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen").ok()?;
    let n: u32 = v.trim().parse().ok()?;
    Some(n & 2 != 0)
}

fn set_int(fd: RawFd, level: i32, opt: i32, val: i32) -> io::Result<()> {
    // SAFETY: fd is an open socket owned by the caller; the pointer and length describe `val`.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &val as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_int(fd: RawFd, level: i32, opt: i32) -> io::Result<i32> {
    let mut val: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: fd is an open socket; the pointers describe `val` and `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            &mut val as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        Ok(val)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `TCP_NODELAY` on or off.
pub fn set_nodelay(fd: RawFd, on: bool) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as i32)
}

/// Reads `TCP_NODELAY`.
pub fn nodelay(fd: RawFd) -> io::Result<bool> {
    Ok(get_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)
}

/// `TCP_NOTSENT_LOWAT` in bytes.
pub fn set_notsent_lowat(fd: RawFd, bytes: u32) -> io::Result<()> {
    set_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        bytes.min(i32::MAX as u32) as i32,
    )
}

/// Reads `TCP_NOTSENT_LOWAT`.
pub fn notsent_lowat(fd: RawFd) -> io::Result<u32> {
    Ok(get_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT)? as u32)
}

/// `TCP_CORK` (nginx's `tcp_nopush` on Linux).
pub fn set_cork(fd: RawFd, on: bool) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_CORK, on as i32)
}

/// Per-socket congestion control (`TCP_CONGESTION`), e.g. `bbr`.
pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: fd is an open socket; the pointer and length describe `name`'s bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads the socket's congestion control name.
pub fn congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: fd is an open socket; the pointers describe `buf` and `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let s = &buf[..(len as usize).min(buf.len())];
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    Ok(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// Checks that the kernel accepts `name` as a congestion control for a new socket (config
/// validation: a name the kernel refuses is a config error).
pub fn check_congestion(name: &str) -> io::Result<()> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    set_congestion(sock.as_raw_fd(), name)
}

/// The `TCP_INFO` fields firstbyte uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Segments sent but not yet acknowledged.
    pub unacked: u32,
    /// Total retransmitted segments.
    pub total_retrans: u32,
    /// Slow-start threshold, segments.
    pub snd_ssthresh: u32,
    /// Receive-space estimate, bytes (`$tcpinfo_rcv_space`).
    pub rcv_space: u32,
}

/// Reads `TCP_INFO` (only while the socket is open).
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain data; zeroed is a valid value.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: fd is an open socket; the pointers describe `ti` and `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut ti as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: ti.tcpi_rtt,
        rttvar_us: ti.tcpi_rttvar,
        snd_cwnd: ti.tcpi_snd_cwnd,
        snd_mss: ti.tcpi_snd_mss,
        unacked: ti.tcpi_unacked,
        total_retrans: ti.tcpi_total_retrans,
        snd_ssthresh: ti.tcpi_snd_ssthresh,
        rcv_space: ti.tcpi_rcv_space,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_options_apply() {
        let l = bind_listener(&ListenOpts {
            addr: "127.0.0.1:0".parse().unwrap(),
            reuseport: true,
            backlog: 16,
            fastopen: Some(8),
            deferred: false,
            ipv6only: true,
            tuning: SocketTuning::default(),
        })
        .unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(addr).unwrap();
        let fd = c.as_raw_fd();
        set_nodelay(fd, true).unwrap();
        assert!(nodelay(fd).unwrap());
        set_notsent_lowat(fd, 16384).unwrap();
        assert_eq!(notsent_lowat(fd).unwrap(), 16384);
        set_congestion(fd, "reno").unwrap();
        assert_eq!(congestion(fd).unwrap(), "reno");
        assert!(check_congestion("no-such-cc").is_err());
        let info = tcp_info(fd).unwrap();
        assert!(info.snd_mss > 0 && info.snd_cwnd > 0);
    }

    /// `deferred`: the listener hands out no connection that has sent nothing; the first
    /// bytes make it acceptable (what the server's first read then finds).
    #[test]
    fn deferred_listener_accepts_once_data_arrived() {
        use std::io::Write;
        let l = bind_listener(&ListenOpts {
            addr: "127.0.0.1:0".parse().unwrap(),
            reuseport: false,
            backlog: 16,
            fastopen: None,
            deferred: true,
            ipv6only: true,
            tuning: SocketTuning::default(),
        })
        .unwrap();
        let v = get_int(l.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT).unwrap();
        assert!(v > 0, "TCP_DEFER_ACCEPT set: {v}");
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let e = l
            .accept()
            .expect_err("a silent connection is not accepted yet");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        c.write_all(b"\x16\x03\x01").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match l.accept() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "never accepted");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
}
