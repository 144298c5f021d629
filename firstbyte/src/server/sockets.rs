//! Listening sockets: which ones a site names ([`SocketKey`]), binding them ([`bind_sockets`]),
//! and the bound result ([`Bound`]) that the runtime (or, started as root, the broker) hands
//! to the accept loops. A port can have a TCP socket and a UDP one (`listen 443 ssl` beside
//! `listen 443 quic`): the key is the address and the transport.

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use super::{LoadError, Site};

/// A listening socket's identity: its address, and whether it is QUIC's UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SocketKey {
    /// The bound address.
    pub addr: SocketAddr,
    /// UDP for QUIC (`listen ... quic`), else TCP.
    pub quic: bool,
}

impl fmt::Display for SocketKey {
    /// `ADDR` for TCP, `ADDR quic` for UDP (how the broker names sockets on its channel).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.quic {
            write!(f, "{} quic", self.addr)
        } else {
            write!(f, "{}", self.addr)
        }
    }
}

impl std::str::FromStr for SocketKey {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (a, quic) = match s.strip_suffix(" quic") {
            Some(a) => (a, true),
            None => (s, false),
        };
        Ok(SocketKey {
            addr: a.parse().map_err(|_| ())?,
            quic,
        })
    }
}

/// A bound socket, ready for its accept loop or QUIC endpoint.
#[derive(Debug)]
pub enum Bound {
    /// A listening TCP socket.
    Tcp(std::net::TcpListener),
    /// A UDP socket for QUIC.
    Udp(std::net::UdpSocket),
}

impl Bound {
    /// The socket as a descriptor (to pass to another process).
    pub fn into_fd(self) -> OwnedFd {
        match self {
            Bound::Tcp(l) => l.into(),
            Bound::Udp(u) => u.into(),
        }
    }

    /// The socket `key` names, from a descriptor the broker bound and passed.
    pub fn from_fd(key: SocketKey, fd: OwnedFd) -> Bound {
        let raw = fd.into_raw_fd();
        // SAFETY: `raw` is an open socket of the kind `key` says, owned by nobody else now.
        unsafe {
            if key.quic {
                Bound::Udp(std::net::UdpSocket::from_raw_fd(raw))
            } else {
                Bound::Tcp(std::net::TcpListener::from_raw_fd(raw))
            }
        }
    }
}

/// Sockets bound for a site, by key.
pub type Fresh = Vec<(SocketKey, Bound)>;

/// Binds every socket `site` names (at start, before the process gives up root).
pub fn bind_all(site: &Site) -> Result<Fresh, LoadError> {
    bind_sockets(site, |_| false)
}

/// Binds the sockets `site` names except those `open` says are open.
pub fn bind_sockets(site: &Site, open: impl Fn(&SocketKey) -> bool) -> Result<Fresh, LoadError> {
    let mut fresh = Vec::new();
    for s in site.vhosts().sockets() {
        let key = SocketKey {
            addr: s.addr,
            quic: s.quic,
        };
        if open(&key) {
            continue;
        }
        let bound = if s.quic {
            crate::net::bind_udp(s.addr, s.reuseport, s.ipv6only, s.tuning).map(Bound::Udp)
        } else {
            crate::net::bind_listener(&crate::net::ListenOpts {
                addr: s.addr,
                reuseport: s.reuseport,
                backlog: s.backlog,
                fastopen: s.fastopen,
                deferred: s.deferred,
                ipv6only: s.ipv6only,
                tuning: s.tuning,
            })
            .map(Bound::Tcp)
        }
        .map_err(|e| bind_error(key, &e))?;
        fresh.push((key, bound));
    }
    Ok(fresh)
}

/// nginx's words for a failed bind.
pub fn bind_error(key: SocketKey, e: &std::io::Error) -> LoadError {
    LoadError::Other(format!(
        "bind() to {}{} failed ({})",
        key.addr,
        if key.quic { " (udp)" } else { "" },
        crate::log::OsError(e)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_their_text() {
        for k in [
            SocketKey {
                addr: "0.0.0.0:443".parse().unwrap(),
                quic: false,
            },
            SocketKey {
                addr: "[::1]:8443".parse().unwrap(),
                quic: true,
            },
        ] {
            assert_eq!(k.to_string().parse::<SocketKey>(), Ok(k));
        }
        assert_eq!("x quic".parse::<SocketKey>(), Err(()));
    }
}
