//! Running the client and server commands inside the namespaces, so that none outlives us.
//!
//! Each command is started through a small init: the emulator re-executes itself as
//! `firstbyte-netem __init MODE -- ARGV...`, with a `pre_exec` hook that enters the side's
//! network namespace, asks for SIGKILL when the emulator dies (`PR_SET_PDEATHSIG`), and
//! unshares a PID namespace. That re-executed process (the *keeper*) forks the namespace's
//! PID 1 (the *init*), which forks and execs the command and reaps everything under it.
//!
//! Why: a shell command may fork daemons (nginx does by default) that no death signal
//! reaches. When a PID namespace's init dies, the kernel kills every process in it, so
//! SIGKILL of the emulator → SIGKILL of the keeper → SIGKILL of the init → the whole tree
//! is gone, and with it the last references to the network namespace.
//!
//! Modes: `main` (the client) — init exits as soon as the command itself exits, with its
//! status; `all` (the server) — init exits when every process in the namespace is gone, so a
//! daemonizing server keeps running. SIGTERM/SIGINT/SIGHUP to the keeper are forwarded to
//! the init, which sends them to every process in its namespace.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sys;

/// The hidden first argument that makes the binary act as the keeper/init.
pub const INIT_ARG: &str = "__init";

/// Exit code for "the command could not be run", as shells use it.
const EXIT_CANNOT_EXEC: i32 = 126;

/// Exit code for "command not found", as shells use it.
const EXIT_NOT_FOUND: i32 = 127;

/// When the init leaves its namespace (and so kills what is left in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// When the command itself exits (the client).
    Main,
    /// When no process is left in the namespace (the server).
    All,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Main => "main",
            Mode::All => "all",
        }
    }
}

/// Starts `argv` in network namespace `ns` under a keeper and a PID-namespace init, with
/// `env` added to the environment. The returned child is the keeper: its exit status is the
/// command's (128 + signal if a signal killed it).
pub fn spawn_in_ns(
    ns: BorrowedFd<'_>,
    mode: Mode,
    argv: &[OsString],
    env: &[(&str, String)],
) -> io::Result<Child> {
    let ns_fd = sys::raw(ns);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("firstbyte-netem")
        .arg(INIT_ARG)
        .arg(mode.as_str())
        .arg("--")
        .args(argv);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if mode == Mode::All {
        // The terminal's input belongs to the client.
        cmd.stdin(Stdio::null());
    }
    // SAFETY: the hook runs in the forked child before exec and only makes async-signal-safe
    // syscalls (setns, prctl, getppid, unshare) on integers and a descriptor it inherited.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(ns_fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The emulator may have died before the prctl took effect.
            if libc::getppid() != parent {
                return Err(io::Error::other("emulator exited"));
            }
            if libc::unshare(libc::CLONE_NEWPID) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The emulator blocks SIGINT/SIGTERM/SIGHUP (they go to its signalfd); std does
            // not reset the mask for us, and the commands must see those signals.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd.spawn()
}

/// The shell's convention for an exit status: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Host PID of the init, for the keeper's signal forwarding (0: not started).
static INIT_PID: AtomicI32 = AtomicI32::new(0);

/// Keeper's handler: pass the signal on to the init.
extern "C" fn forward_to_init(sig: libc::c_int) {
    let pid = INIT_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Init's handler: pass the signal to every other process in the PID namespace.
extern "C" fn broadcast(sig: libc::c_int) {
    // SAFETY: kill is async-signal-safe; -1 from a namespace's init reaches all its members.
    unsafe { libc::kill(-1, sig) };
}

/// Installs `handler` for the handled signals.
fn install(handler: extern "C" fn(libc::c_int)) {
    for sig in sys::HANDLED_SIGNALS {
        // SAFETY: sigaction is plain data; the handler only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Waits for any child (`pid` −1) or one; retries on EINTR. Returns (pid, raw status) or
/// `None` when there is no child left.
fn wait_for(pid: libc::pid_t) -> Option<(libc::pid_t, libc::c_int)> {
    loop {
        let mut status = 0;
        // SAFETY: valid pointer to an int.
        let got = unsafe { libc::waitpid(pid, &mut status, 0) };
        if got > 0 {
            return Some((got, status));
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Exit code for a raw wait status.
fn code_of(status: libc::c_int) -> i32 {
    exit_code(ExitStatus::from_raw(status))
}

/// Entry point of `firstbyte-netem __init MODE -- ARGV...` (the keeper). Never returns.
pub fn init_main(args: &[OsString]) -> ! {
    let mode = match args.first().and_then(|m| m.to_str()) {
        Some("main") => Mode::Main,
        Some("all") => Mode::All,
        _ => {
            eprintln!("firstbyte-netem: {INIT_ARG} is internal");
            std::process::exit(2);
        }
    };
    let argv: Vec<OsString> = args.iter().skip(2).cloned().collect();
    if argv.is_empty() || args.get(1).is_some_and(|a| a != "--") {
        eprintln!("firstbyte-netem: {INIT_ARG} is internal");
        std::process::exit(2);
    }
    // A pipe whose write end only the keeper holds: the init sees it hang up if the keeper
    // died before the init's own death signal was armed.
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        std::process::exit(EXIT_CANNOT_EXEC);
    }
    // SAFETY: both descriptors were just created and are owned here.
    let (alive_r, alive_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    install(forward_to_init);
    // SAFETY: this process is single-threaded (freshly exec'd), so fork is safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        std::process::exit(EXIT_CANNOT_EXEC);
    }
    if pid == 0 {
        drop(alive_w);
        run_init(mode, &argv, alive_r.as_raw_fd());
    }
    drop(alive_r);
    INIT_PID.store(pid, Ordering::Relaxed);
    let code = wait_for(pid).map_or(1, |(_, status)| code_of(status));
    drop(alive_w);
    std::process::exit(code)
}

/// PID 1 of the new PID namespace: start the command, reap, exit per `mode`.
fn run_init(mode: Mode, argv: &[OsString], alive: libc::c_int) -> ! {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    let mut pfd = libc::pollfd {
        fd: alive,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut pfd, 1, 0) };
    if pfd.revents & libc::POLLHUP != 0 {
        // The keeper is already gone.
        std::process::exit(1);
    }
    install(broadcast);
    // SAFETY: single-threaded process, fork is safe.
    let main_pid = unsafe { libc::fork() };
    if main_pid < 0 {
        std::process::exit(EXIT_CANNOT_EXEC);
    }
    if main_pid == 0 {
        if mode == Mode::All {
            // Its own session: a terminal's Ctrl-C reaches the emulator, which stops it.
            // SAFETY: plain syscall.
            unsafe { libc::setsid() };
        }
        // Command::exec restores default signal dispositions and mask for the command.
        let err = Command::new(&argv[0]).args(&argv[1..]).exec();
        eprintln!(
            "firstbyte-netem: cannot run {:?}: {err}",
            argv[0].to_string_lossy()
        );
        let code = if err.kind() == io::ErrorKind::NotFound {
            EXIT_NOT_FOUND
        } else {
            EXIT_CANNOT_EXEC
        };
        std::process::exit(code);
    }
    let mut main_code = 1;
    while let Some((pid, status)) = wait_for(-1) {
        if pid == main_pid {
            main_code = code_of(status);
            if mode == Mode::Main {
                break;
            }
        }
    }
    std::process::exit(main_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 128 + 9);
        assert_eq!(code_of(0), 0);
    }

    #[test]
    fn modes_have_stable_names() {
        assert_eq!(Mode::Main.as_str(), "main");
        assert_eq!(Mode::All.as_str(), "all");
    }
}
