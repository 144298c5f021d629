//! Ports for the servers the tests start: each handed out once per machine at a time, and
//! never from the kernel's ephemeral range.
//!
//! A test picks a port, then starts `firstbyte` on it and waits until the port accepts. Two
//! races used to sit in that gap. The kernel hands ports of its ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768-60999 by default) to every `bind(port 0)` (the
//! tests' upstreams) and every outgoing connection; a port picked there could be taken by one
//! of them before the server bound it, so the server failed to bind and the wait, seeing the
//! port accept, talked to someone else's listener. And ports came from a window chosen by the
//! process id modulo 200, so two test processes running at once (two worktrees, two
//! `cargo test`s) could share a window and start servers on the same port.
//!
//! Now the ports lie below the ephemeral range (or above it when there is no room below), and
//! a port is claimed with an `flock` on a file of its own under the temporary directory, held
//! until the process ends: another process skips a claimed port, and this process never hands
//! out one port twice.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// The kernel's ephemeral range, as `/proc/sys/net/ipv4/ip_local_port_range` says (Linux's
/// default when unreadable).
pub fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

/// The ports the tests take theirs from, given the ephemeral range: 10000 up to its start,
/// or, when that leaves fewer than 2000, the ports above its end.
pub fn test_range((low, high): (u16, u16)) -> (u16, u16) {
    if low >= 12000 {
        (10000, low - 1)
    } else {
        (high.saturating_add(1).max(1024), 65535)
    }
}

/// Claims held by this process: the lock files (their `flock`s end with the process) and the
/// next port to try.
struct Claims {
    held: Vec<File>,
    next: Option<u32>,
}

static CLAIMS: Mutex<Claims> = Mutex::new(Claims {
    held: Vec::new(),
    next: None,
});

/// Takes `port` for this process: an exclusive `flock` on its file in `dir`, kept; false when
/// another process holds it. Without a usable directory, the bind probe alone decides.
fn claim(dir: &std::path::Path, port: u16, held: &mut Vec<File>) -> bool {
    let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
    else {
        return true;
    };
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    held.push(f);
    true
}

/// A port no other test process holds, that this process has not handed out before, and that
/// nothing was bound to a moment ago (on 127.0.0.1 and ::1).
pub fn free_port() -> u16 {
    let (lo, hi) = test_range(ephemeral_range());
    let span = u32::from(hi - lo) + 1;
    let dir = std::env::temp_dir().join("fbtest-ports");
    if std::fs::create_dir_all(&dir).is_ok() {
        // Shared by every user's tests on the machine.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777));
    }
    let mut c = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    // Processes start at different places, so they seldom meet on the same files.
    let mut next = c.next.unwrap_or(std::process::id() * 101 % span);
    for _ in 0..span {
        let p = lo + (next % span) as u16;
        next = (next + 1) % span;
        if TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("::1", p)).is_ok()
            && claim(&dir, p, &mut c.held)
        {
            c.next = Some(next);
            return p;
        }
    }
    panic!("no free port left in {lo}-{hi}");
}

/// The inodes of the TCP sockets listening on `port` (any address, IPv4 or IPv6), from
/// `/proc/net/tcp` and `/proc/net/tcp6`.
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            let local_port = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) {
                if let Ok(ino) = f[9].parse() {
                    out.push(ino);
                }
            }
        }
    }
    out
}

/// Whether process `pid` holds a socket listening on TCP `port`: `None` when its descriptors
/// cannot be read. A port that accepts connections may be someone else's (a server that
/// failed to bind, while another socket took the port): only this says the listener is ours.
pub fn holds_listener(pid: u32, port: u16) -> Option<bool> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let listening = listening_inodes(port);
    Some(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|l| {
                l.to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|ino| listening.contains(&ino))
    }))
}
