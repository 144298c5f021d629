//! The emulated link's plumbing: two fresh network namespaces, a TUN device in each, and
//! addresses from the benchmarking range 198.18.0.0/15 (RFC 2544).
//!
//! [`Link::create`] picks a free /30 (an abstract-socket lock per subnet, starting from one
//! derived from the PID, so concurrent runs never share addresses or device names), then for
//! each side starts a short-lived thread that `unshare`s a new network namespace, creates the
//! TUN device there, configures it with `ip`, and hands back a descriptor of the namespace.
//! Nothing is named or mounted: the namespaces live exactly as long as those descriptors, the
//! TUN descriptors and the processes started inside them. When the emulator exits, even by
//! SIGKILL, the kernel removes the devices and the namespaces (children die with it through
//! `PR_SET_PDEATHSIG`, see `child.rs`).
//!
//! Traffic only flows between the two namespaces: each holds just `lo` and its TUN device,
//! with no route anywhere else. IPv6 is disabled in both so that router solicitations and
//! the like do not appear in the counters.

use std::fs;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Command, Stdio};

use thiserror::Error;

use crate::sys;

/// Number of /30 subnets in 198.18.0.0/15.
pub const SUBNETS: u32 = 1 << 15;

/// Subnets tried before giving up: 256 concurrent runs is far beyond this 2-core machine.
const SUBNET_ATTEMPTS: u32 = 256;

/// TUN transmit queue, packets: the default 500 caused hundreds of TCP retransmits at
/// 250 Mbit/s on this machine; 10,000 gave none (measured with the prototype).
pub const TUN_TXQUEUELEN: u32 = 10_000;

/// Tries to take the host-wide lock around changing `tcp_allowed_congestion_control`:
/// 1,000 × 10 ms, since the holder only keeps it for a few sysctl writes.
const CC_LOCK_ATTEMPTS: u32 = 1_000;

/// Why the link could not be set up.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LinkError {
    /// A system call failed (the message says which step).
    #[error("{step} failed: {source}")]
    Os {
        /// What was being done.
        step: &'static str,
        /// The error.
        source: io::Error,
    },
    /// Every subnet tried is in use by other runs.
    #[error("no free /30 in 198.18.0.0/15 after {0} tries")]
    NoFreeSubnet(u32),
    /// Creating the TUN device failed.
    #[error(
        "cannot create TUN device \"{dev}\" (is /dev/net/tun there, and are we root?): {source}"
    )]
    Tun {
        /// Device name.
        dev: String,
        /// The error.
        source: io::Error,
    },
    /// `ip` failed.
    #[error("\"ip {args}\" failed: {message}")]
    Ip {
        /// The batch given to `ip`.
        args: String,
        /// Its stderr, or why it could not run.
        message: String,
    },
    /// The congestion control algorithm is not available.
    #[error("congestion control \"{0}\" is not available (see net.ipv4.tcp_available_congestion_control)")]
    UnknownCc(String),
    /// Setting the congestion control failed.
    #[error("cannot set net.ipv4.tcp_congestion_control to \"{name}\": {source}")]
    Cc {
        /// Algorithm name.
        name: String,
        /// The error.
        source: io::Error,
    },
    /// A helper thread died.
    #[error("namespace setup thread panicked")]
    ThreadPanicked,
}

/// One end of the link.
#[derive(Debug)]
pub struct Side {
    /// The network namespace (`/proc/thread-self/ns/net` of the thread that created it).
    pub ns: OwnedFd,
    /// The TUN device's descriptor, non-blocking: read what this side sends, write what it
    /// receives.
    pub tun: OwnedFd,
    /// This side's address.
    pub addr: Ipv4Addr,
    /// The TUN device's name.
    pub dev: String,
}

/// Both ends of the link, and the lock on its subnet.
#[derive(Debug)]
pub struct Link {
    /// The server side.
    pub server: Side,
    /// The client side.
    pub client: Side,
    /// The lock on the /30 in 198.18.0.0/15, held for the link's life.
    _lock: OwnedFd,
}

/// What the link needs to know from the command line.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// MTU of both TUN devices.
    pub mtu: u32,
    /// Congestion control for the server namespace.
    pub cc: String,
}

/// The (server, client) addresses of subnet `index`: .1 and .2 of its /30.
pub fn subnet_addrs(index: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0)) + (index % SUBNETS) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

/// The subnet a process starts looking at: spread by PID so concurrent runs rarely probe
/// the same locks.
pub fn first_subnet(pid: u32) -> u32 {
    pid % SUBNETS
}

/// TUN device names for subnet `index`: `fbn<index>s` (server) and `fbn<index>c` (client).
pub fn device_names(index: u32) -> (String, String) {
    (format!("fbn{index}s"), format!("fbn{index}c"))
}

impl Link {
    /// Builds both namespaces and devices. Must be called from a thread in the host's network
    /// namespace.
    pub fn create(config: &LinkConfig) -> Result<Link, LinkError> {
        let (subnet, lock) = lock_subnet()?;
        let (server_addr, client_addr) = subnet_addrs(subnet);
        let (server_dev, client_dev) = device_names(subnet);
        let server = new_side(&server_dev, server_addr, config.mtu)?;
        let client = new_side(&client_dev, client_addr, config.mtu)?;
        set_congestion_control(server.ns.as_fd(), &config.cc)?;
        Ok(Link {
            server,
            client,
            _lock: lock,
        })
    }
}

/// Locks the first free /30, starting from one derived from the PID.
fn lock_subnet() -> Result<(u32, OwnedFd), LinkError> {
    let start = first_subnet(std::process::id());
    for attempt in 0..SUBNET_ATTEMPTS {
        let index = (start + attempt) % SUBNETS;
        let (server, _) = subnet_addrs(index);
        let name = format!("firstbyte-netem/{server}/30");
        let lock = sys::abstract_lock(&name).map_err(|source| LinkError::Os {
            step: "locking a subnet",
            source,
        })?;
        if let Some(fd) = lock {
            return Ok((index, fd));
        }
    }
    Err(LinkError::NoFreeSubnet(SUBNET_ATTEMPTS))
}

/// Runs `f` on a new thread inside the network namespace `ns`.
pub fn in_netns<T: Send>(ns: BorrowedFd<'_>, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                sys::setns_net(ns)?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

/// Creates one side on a helper thread that moves into a new network namespace.
fn new_side(dev: &str, addr: Ipv4Addr, mtu: u32) -> Result<Side, LinkError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let os = |step| move |source| LinkError::Os { step, source };
                sys::unshare_net().map_err(os("unshare(CLONE_NEWNET) (needs root)"))?;
                let ns = sys::open_readonly("/proc/thread-self/ns/net")
                    .map_err(os("opening /proc/thread-self/ns/net"))?;
                for conf in ["all", "default"] {
                    // Absent when the kernel has no IPv6: nothing to disable then.
                    let _ = write_sysctl(&format!("net/ipv6/conf/{conf}/disable_ipv6"), "1");
                }
                let tun = sys::create_tun(dev).map_err(|source| LinkError::Tun {
                    dev: dev.to_string(),
                    source,
                })?;
                run_ip(&[
                    "link set dev lo up".to_string(),
                    format!("link set dev {dev} mtu {mtu} txqueuelen {TUN_TXQUEUELEN} up"),
                    format!("addr add {addr}/30 dev {dev}"),
                ])?;
                sys::set_nonblocking(tun.as_fd()).map_err(os("setting O_NONBLOCK"))?;
                Ok(Side {
                    ns,
                    tun,
                    addr,
                    dev: dev.to_string(),
                })
            })
            .join()
            .unwrap_or(Err(LinkError::ThreadPanicked))
    })
}

/// Writes a sysctl of the calling thread's network namespace (`name` like `net/ipv4/x`).
fn write_sysctl(name: &str, value: &str) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/sys/{name}"))?;
    file.write_all(value.as_bytes())
}

/// Runs `ip -batch -` with these commands, in the calling thread's network namespace.
fn run_ip(commands: &[String]) -> Result<(), LinkError> {
    let batch = commands.join("\n") + "\n";
    let err = |message: String| LinkError::Ip {
        args: format!("-batch - <<< {:?}", commands.join("; ")),
        message,
    };
    let mut last_error = String::from("not found");
    for program in ["ip", "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"] {
        let spawned = Command::new(program)
            .args(["-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                last_error = e.to_string();
                continue;
            }
        };
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(batch.as_bytes())
                .map_err(|e| err(e.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|e| err(e.to_string()))?;
        if out.status.success() {
            return Ok(());
        }
        return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Err(err(format!(
        "{last_error} (install iproute2: apt-get install -y iproute2)"
    )))
}

/// Sets `net.ipv4.tcp_congestion_control` in namespace `ns`.
///
/// Outside the host's namespace the kernel only lets a namespace default to an algorithm in
/// the host-wide `net.ipv4.tcp_allowed_congestion_control` (here "reno bbr": cubic is
/// loaded but restricted). So when the kernel says EPERM, this adds the algorithm to the host's
/// list, sets it in the namespace, and puts the list back as it was, under a host-wide lock so
/// concurrent runs do not undo each other. The namespace keeps its default afterwards.
fn set_congestion_control(ns: BorrowedFd<'_>, name: &str) -> Result<(), LinkError> {
    let set = || write_sysctl("net/ipv4/tcp_congestion_control", name);
    let cc_err = |source: io::Error| match source.raw_os_error() {
        Some(libc::ENOENT) => LinkError::UnknownCc(name.to_string()),
        _ => LinkError::Cc {
            name: name.to_string(),
            source,
        },
    };
    let first = in_netns(ns, set).map_err(cc_err)?;
    match first {
        Ok(()) => return Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(e) => return Err(cc_err(e)),
    }
    let _lock = take_cc_lock()?;
    let allowed_path = "net/ipv4/tcp_allowed_congestion_control";
    let allowed = fs::read_to_string(format!("/proc/sys/{allowed_path}"))
        .map_err(cc_err)?
        .trim()
        .to_string();
    let widened = !allowed.split_whitespace().any(|a| a == name);
    if widened {
        write_sysctl(allowed_path, &format!("{allowed} {name}")).map_err(cc_err)?;
    }
    let result = in_netns(ns, set).and_then(|r| r);
    if widened {
        write_sysctl(allowed_path, &allowed).map_err(cc_err)?;
    }
    result.map_err(cc_err)
}

/// Takes the host-wide lock around changes to `tcp_allowed_congestion_control`.
fn take_cc_lock() -> Result<OwnedFd, LinkError> {
    for _ in 0..CC_LOCK_ATTEMPTS {
        match sys::abstract_lock("firstbyte-netem/tcp_allowed_congestion_control") {
            Ok(Some(fd)) => return Ok(fd),
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(source) => {
                return Err(LinkError::Os {
                    step: "locking tcp_allowed_congestion_control",
                    source,
                })
            }
        }
    }
    Err(LinkError::Os {
        step: "locking tcp_allowed_congestion_control",
        source: io::Error::from(io::ErrorKind::TimedOut),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_cover_the_benchmarking_range() {
        assert_eq!(
            subnet_addrs(0),
            (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))
        );
        assert_eq!(
            subnet_addrs(1),
            (Ipv4Addr::new(198, 18, 0, 5), Ipv4Addr::new(198, 18, 0, 6))
        );
        assert_eq!(
            subnet_addrs(SUBNETS - 1),
            (
                Ipv4Addr::new(198, 19, 255, 253),
                Ipv4Addr::new(198, 19, 255, 254)
            )
        );
        // Wraps instead of leaving the range.
        assert_eq!(subnet_addrs(SUBNETS), subnet_addrs(0));
    }

    #[test]
    fn device_names_fit_ifnamsiz() {
        let (s, c) = device_names(SUBNETS - 1);
        assert_eq!((s.as_str(), c.as_str()), ("fbn32767s", "fbn32767c"));
        assert!(s.len() < libc::IFNAMSIZ);
        assert!(first_subnet(4_000_000) < SUBNETS);
    }
}
