//! Listening sockets: which ones a site names ([`SocketKey`]), binding them ([`bind_sockets`]),
//! and the bound result ([`Bound`]) that the runtime (or, started as root, the broker) hands
//! to the accept loops. A port can have a TCP socket and a UDP one (`listen 443 ssl` beside
//! `listen 443 quic`): the key is the address and the transport.

use std::fmt;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use super::{LoadError, Site};

/// A listening socket's identity: its address (or UNIX-domain path), and whether it is QUIC's
/// UDP socket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SocketKey {
    /// The bound address (a placeholder when `unix` is set).
    pub addr: SocketAddr,
    /// UDP for QUIC (`listen ... quic`), else TCP.
    pub quic: bool,
    /// `listen unix:PATH`: a UNIX-domain stream socket at PATH.
    pub unix: Option<Arc<str>>,
}

impl SocketKey {
    /// The key of a socket the configuration names.
    pub fn of(s: &crate::conf::vhosts::ListenSocket) -> SocketKey {
        SocketKey {
            addr: s.addr,
            quic: s.quic,
            unix: s.unix.clone(),
        }
    }
}

impl fmt::Display for SocketKey {
    /// `ADDR` for TCP, `ADDR quic` for UDP, `unix:PATH` for a UNIX-domain socket (how the
    /// broker names sockets on its channel, and how nginx writes them in messages).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.unix {
            write!(f, "unix:{p}")
        } else if self.quic {
            write!(f, "{} quic", self.addr)
        } else {
            write!(f, "{}", self.addr)
        }
    }
}

impl std::str::FromStr for SocketKey {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        if let Some(p) = s.strip_prefix("unix:") {
            return Ok(SocketKey {
                addr: UNIX_PLACEHOLDER,
                quic: false,
                unix: Some(Arc::from(p)),
            });
        }
        let (a, quic) = match s.strip_suffix(" quic") {
            Some(a) => (a, true),
            None => (s, false),
        };
        Ok(SocketKey {
            addr: a.parse().map_err(|_| ())?,
            quic,
            unix: None,
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
    /// A listening UNIX-domain stream socket.
    Unix(std::os::unix::net::UnixListener),
}

impl Bound {
    /// The socket as a descriptor (to pass to another process).
    pub fn into_fd(self) -> OwnedFd {
        match self {
            Bound::Tcp(l) => l.into(),
            Bound::Udp(u) => u.into(),
            Bound::Unix(u) => u.into(),
        }
    }

    /// The socket `key` names, from a descriptor the broker bound and passed.
    pub fn from_fd(key: &SocketKey, fd: OwnedFd) -> Bound {
        let raw = fd.into_raw_fd();
        // SAFETY: `raw` is an open socket of the kind `key` says, owned by nobody else now.
        unsafe {
            if key.unix.is_some() {
                Bound::Unix(std::os::unix::net::UnixListener::from_raw_fd(raw))
            } else if key.quic {
                Bound::Udp(std::net::UdpSocket::from_raw_fd(raw))
            } else {
                Bound::Tcp(std::net::TcpListener::from_raw_fd(raw))
            }
        }
    }
}

/// The address of a UNIX-domain socket's key, which has none (as `listen unix:` gives it).
const UNIX_PLACEHOLDER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// The paths of the UNIX-domain sockets `site` listens on.
pub fn unix_socket_paths(site: &Site) -> Vec<std::path::PathBuf> {
    site.vhosts()
        .sockets()
        .iter()
        .filter_map(|s| s.unix.as_deref().map(std::path::PathBuf::from))
        .collect()
}

/// Removes the file of a UNIX-domain listening socket that closes for good (a reload that no
/// longer names it, the end of the process), as nginx does: the next start binds afresh.
/// A reload says so at `warn`, as nginx. With a broker (started as root), the broker, which
/// bound it, removes the file instead (`unlink: false` here).
pub fn remove_socket_file(key: &SocketKey, reload: bool, unlink: bool) {
    let Some(path) = &key.unix else { return };
    if reload {
        crate::fblog!(Warn, "deleting socket {path}");
    }
    if !unlink {
        return;
    }
    if let Err(e) = std::fs::remove_file(&**path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            crate::fblog!(
                Emerg,
                "unlink() {path} failed ({})",
                crate::log::OsError(&e)
            );
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
        let key = SocketKey::of(s);
        if open(&key) {
            continue;
        }
        let bound = if let Some(path) = &s.unix {
            crate::net::bind_unix(std::path::Path::new(&**path), s.backlog, s.tuning)
                .map(Bound::Unix)
        } else if s.quic {
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
        .map_err(|e| bind_error(&key, &e))?;
        fresh.push((key, bound));
    }
    Ok(fresh)
}

/// nginx's words for a failed bind.
pub fn bind_error(key: &SocketKey, e: &std::io::Error) -> LoadError {
    LoadError::Other(format!(
        "bind() to {}{} failed ({})",
        key,
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
                unix: None,
            },
            SocketKey {
                addr: "[::1]:8443".parse().unwrap(),
                quic: true,
                unix: None,
            },
            SocketKey {
                addr: UNIX_PLACEHOLDER,
                quic: false,
                unix: Some("/run/fb/http.sock".into()),
            },
        ] {
            assert_eq!(k.to_string().parse::<SocketKey>(), Ok(k.clone()));
        }
        assert_eq!("x quic".parse::<SocketKey>(), Err(()));
    }
}
