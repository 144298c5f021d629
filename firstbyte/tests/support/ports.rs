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
//! Now the ports lie below the ephemeral range (or above it when there is no room below), this
//! process walks them in order (one port is handed out twice only after the whole range), and
//! a port is claimed with an `flock` on a file of its own under the temporary directory, so
//! that another test process skips it. A claim is held until [`HELD`] later ones (or the end of
//! the process): long enough for its server to have bound the port, after which the bind
//! probe sees the port taken; not so long that the descriptors add up. The lock files stay
//! (empty, one per port ever claimed, so at most one per port of the range): removing one
//! while another process opens it would let two processes lock two different files.

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

/// Claims (lock files) a process holds at once; the oldest is let go for a new one.
const HELD: usize = 64;

/// Claims held by this process: the lock files (their `flock`s end when dropped, at the latest
/// with the process) and the next port to try.
struct Claims {
    held: std::collections::VecDeque<File>,
    next: Option<u32>,
}

static CLAIMS: Mutex<Claims> = Mutex::new(Claims {
    held: std::collections::VecDeque::new(),
    next: None,
});

/// Takes `port` for this process: an exclusive `flock` on its file in `dir`, kept; false when
/// another process holds it. Without a usable directory, the bind probe alone decides.
fn claim(dir: &std::path::Path, port: u16, held: &mut std::collections::VecDeque<File>) -> bool {
    let path = dir.join(port.to_string());
    // Another user's file (the directory is shared) opens read-only, which flock takes too.
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .or_else(|_| File::open(&path));
    let Ok(f) = opened else {
        return true;
    };
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    if held.len() >= HELD {
        held.pop_front();
    }
    held.push_back(f);
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
