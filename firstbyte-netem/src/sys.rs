//! Thin safe wrappers over the Linux calls the emulator needs (namespaces, TUN, ppoll,
//! signalfd, pidfd, abstract-socket locks). Every `unsafe` block of the crate that is not
//! about process creation lives here, each with its `SAFETY` reason.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Turns a `-1` return into the thread's `errno`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Wraps a fresh descriptor returned by a syscall.
fn owned(ret: libc::c_int) -> io::Result<OwnedFd> {
    let fd = check(ret)?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Moves the calling thread into a new, empty network namespace.
pub fn unshare_net() -> io::Result<()> {
    // SAFETY: plain syscall; it only changes the calling thread's namespace.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// Moves the calling thread into the network namespace `ns` refers to.
pub fn setns_net(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a valid descriptor; only affects the calling thread.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Opens a path read-only with `O_CLOEXEC` (for `/proc/thread-self/ns/net`).
pub fn open_readonly(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    owned(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })
}

/// `struct ifreq` as TUNSETIFF reads it: a name and flags, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates a (non-persistent) TUN device named `name` in the calling thread's network
/// namespace: raw IP packets, no packet-info header. It vanishes when the descriptor closes.
pub fn create_tun(name: &str) -> io::Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ || name.is_empty() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let path = c"/dev/net/tun";
    // SAFETY: valid C string; the result is checked.
    let fd = owned(unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `req` matches in layout and size.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReqFlags) })?;
    Ok(fd)
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a valid descriptor with integer arguments.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// Reads once; `Ok(None)` when a non-blocking descriptor has nothing.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(err),
    }
}

/// Writes one packet (one `write`, as a TUN device wants).
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Waits up to `timeout_ns` for `fd` to become readable (nanosecond timer, see
/// [`set_timer_slack_ns`]). Returns whether it is readable; signals count as a timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ns: u64) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask change.
    let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if n < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    Ok(n > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Waits up to `timeout_ms` (−1: forever) until any of `fds` is readable; returns one flag
/// per descriptor.
pub fn wait_any(fds: &[BorrowedFd<'_>], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(pfds.iter().map(|p| n > 0 && p.revents != 0).collect())
}

/// Sets the calling thread's timer slack (how late the kernel may fire its timers), ns.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments; failure only leaves the default 50 us slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// Gives the calling thread real-time priority `priority` under SCHED_FIFO.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid sched_param; 0 means the calling thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

/// How long the calling thread has waited on a run queue (runnable, not running) since it
/// started, ns: `/proc/thread-self/schedstat`'s second field. None where schedstats are off.
pub fn thread_run_delay_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Time the hypervisor gave this machine's CPUs to someone else since boot (the `steal`
/// column of `/proc/stat`'s `cpu` line, all CPUs summed), ns. None on a kernel without it.
pub fn steal_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = text
        .lines()
        .next()?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&hz| hz > 0)?;
    Some(ticks.saturating_mul(1_000_000_000 / hz))
}

/// The signals the emulator handles itself: interrupt, terminate, hang-up.
pub const HANDLED_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks [`HANDLED_SIGNALS`] in the calling thread (and in threads it starts afterwards) and
/// returns a non-blocking signalfd that receives them.
pub fn block_signals_to_fd() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; sigemptyset initializes it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t for these calls.
    unsafe {
        libc::sigemptyset(&mut set);
        for sig in HANDLED_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
    }
    // SAFETY: valid set; the old mask is not needed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: -1 asks for a new signalfd for `set`.
    owned(unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) })
}

/// Takes one pending signal from a signalfd, if any.
pub fn take_signal(fd: BorrowedFd<'_>) -> Option<libc::c_int> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: `info` is valid for writes of `size` bytes.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            size,
        )
    };
    (n as usize == size).then_some(info.ssi_signo as libc::c_int)
}

/// A descriptor that becomes readable when process `pid` exits.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    owned(ret as libc::c_int)
}

/// Sends `sig` to process `pid`; errors (e.g. it already exited) are ignored.
pub fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: plain syscall; a stale pid is impossible while we have not reaped our child.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Takes a machine-wide lock named `name` by binding an abstract Unix socket: `Ok(None)` if
/// another process holds it. The kernel releases it when the socket closes, even on SIGKILL,
/// and it leaves no file behind. (Abstract names are per network namespace: call it from the
/// host's.)
pub fn abstract_lock(name: &str) -> io::Result<Option<OwnedFd>> {
    // SAFETY: plain syscall with integer arguments.
    let fd =
        owned(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() + 1 > addr.sun_path.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // sun_path[0] stays 0: the abstract namespace.
    for (dst, &src) in addr.sun_path[1..].iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len();
    // SAFETY: `addr` is a valid sockaddr_un and `len` does not exceed its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(Some(fd));
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EADDRINUSE) {
        Ok(None)
    } else {
        Err(err)
    }
}

/// The raw number of a borrowed descriptor (for `pre_exec` closures, which cannot borrow).
pub fn raw(fd: BorrowedFd<'_>) -> RawFd {
    fd.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn abstract_lock_is_exclusive_and_released_on_close() {
        let name = format!("firstbyte-netem-test/{}", std::process::id());
        let first = abstract_lock(&name).ok().flatten();
        assert!(first.is_some());
        assert!(matches!(abstract_lock(&name), Ok(None)));
        drop(first);
        assert!(matches!(abstract_lock(&name), Ok(Some(_))));
    }

    #[test]
    fn wait_readable_times_out_on_an_idle_pipe() {
        let mut fds = [0; 2];
        // SAFETY: valid array of two ints.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just created and are owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let start = std::time::Instant::now();
        assert!(!wait_readable(r.as_fd(), 2_000_000).unwrap_or(true));
        assert!(start.elapsed() >= std::time::Duration::from_millis(2));
        assert_eq!(write(w.as_fd(), b"x").ok(), Some(1));
        assert!(wait_readable(r.as_fd(), 1_000_000_000).unwrap_or(false));
        let mut buf = [0u8; 4];
        assert_eq!(read(r.as_fd(), &mut buf).ok(), Some(Some(1)));
    }
}
