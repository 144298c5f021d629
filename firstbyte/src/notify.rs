//! systemd's readiness protocol (`sd_notify(3)`), for `Type=notify` units: `READY=1` once
//! the server listens, `RELOADING=1` with `MONOTONIC_USEC=` before a reload and `READY=1`
//! after it, `STOPPING=1` when it starts to stop.
//!
//! The protocol is one datagram per state change to the unix socket named by
//! `$NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`). Without that
//! variable (not started by systemd) every call here does nothing. The socket is connected
//! once, at start, while the process may still be root: the serving process gives up root and
//! every capability later, and a connected datagram socket needs no permission check per send.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::OnceLock;

static SOCKET: OnceLock<Option<UnixDatagram>> = OnceLock::new();

/// Where `$NOTIFY_SOCKET` points.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// A socket file.
    Path(std::path::PathBuf),
    /// A Linux abstract socket (the name without its leading `@`/NUL).
    Abstract(Vec<u8>),
}

/// Reads `$NOTIFY_SOCKET`'s value. Other forms (systemd ≥ 254's `vsock:`) and empty values
/// are not ours to handle: no notification is sent, as when the variable is unset.
fn parse_target(value: &[u8]) -> Option<Target> {
    use std::os::unix::ffi::OsStrExt;
    match value.first()? {
        b'/' => Some(Target::Path(std::ffi::OsStr::from_bytes(value).into())),
        b'@' if value.len() > 1 => Some(Target::Abstract(value[1..].to_vec())),
        _ => None,
    }
}

fn connect(target: &Target) -> std::io::Result<UnixDatagram> {
    let sock = UnixDatagram::unbound()?;
    match target {
        Target::Path(p) => sock.connect(p)?,
        Target::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            sock.connect_addr(&SocketAddr::from_abstract_name(name)?)?
        }
    }
    // A full queue on systemd's side must never stall the server: a lost notice is better.
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// Connects to `$NOTIFY_SOCKET` when it is set (call once, early, before privileges drop).
/// A socket that cannot be reached is reported once and then ignored.
pub fn init() {
    SOCKET.get_or_init(|| {
        let value = std::env::var_os("NOTIFY_SOCKET")?;
        use std::os::unix::ffi::OsStrExt;
        let target = parse_target(value.as_bytes())?;
        match connect(&target) {
            Ok(s) => Some(s),
            Err(e) => {
                crate::log::stderr(
                    crate::conf::model::LogLevel::Warn,
                    format!(
                        "cannot reach NOTIFY_SOCKET {:?} ({}): systemd will not be told the state",
                        value,
                        crate::log::OsError(&e)
                    ),
                );
                None
            }
        }
    });
}

fn send(message: &str) {
    if let Some(Some(sock)) = SOCKET.get() {
        if let Err(e) = sock.send(message.as_bytes()) {
            crate::fblog!(
                Warn,
                "sd_notify \"{}\" failed ({})",
                message.lines().next().unwrap_or(""),
                crate::log::OsError(&e)
            );
        }
    }
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC` with.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}

fn reloading_message(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}\n")
}

/// A `STATUS=` line carries one line of text: newlines would start other assignments.
fn ready_message(status: Option<&str>) -> String {
    match status {
        None => "READY=1\n".to_string(),
        Some(s) => format!("READY=1\nSTATUS={}\n", s.replace(['\n', '\r'], " ")),
    }
}

/// The server listens and serves (at start, and after a reload with its outcome).
pub fn ready(status: Option<&str>) {
    send(&ready_message(status));
}

/// A reload starts now (systemd ≥ 253 wants the time to tell this reload from an older one).
pub fn reloading() {
    send(&reloading_message(monotonic_usec()));
}

/// The server is stopping (graceful drain or immediate stop).
pub fn stopping() {
    send("STOPPING=1\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_sd_notify_reads_them() {
        assert_eq!(
            parse_target(b"/run/systemd/notify"),
            Some(Target::Path("/run/systemd/notify".into()))
        );
        assert_eq!(
            parse_target(b"@/org/freedesktop/systemd1/notify/42"),
            Some(Target::Abstract(
                b"/org/freedesktop/systemd1/notify/42".to_vec()
            ))
        );
        for ignored in [&b""[..], b"@", b"relative/path", b"vsock:2:1234"] {
            assert_eq!(parse_target(ignored), None, "{ignored:?}");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            reloading_message(1_234_567),
            "RELOADING=1\nMONOTONIC_USEC=1234567\n"
        );
        assert_eq!(ready_message(None), "READY=1\n");
        assert_eq!(
            ready_message(Some("reload failed:\nbad")),
            "READY=1\nSTATUS=reload failed: bad\n"
        );
        let a = monotonic_usec();
        let b = monotonic_usec();
        assert!(a > 0 && b >= a);
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("firstbyte-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        let tx = connect(&parse_target(format!("@{name}").as_bytes()).unwrap()).unwrap();
        tx.send(ready_message(None).as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}
