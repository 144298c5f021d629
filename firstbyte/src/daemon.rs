//! `daemon on`: detach from the terminal the classic way (fork, setsid, fork), with a
//! readiness pipe so the command that started firstbyte still exits 0 only once the server is
//! listening, and 1 (with the error on the terminal) if start-up failed — as nginx, which
//! binds before it detaches. Called before any thread exists.

use std::os::fd::RawFd;

/// Held by the detached process until it is serving.
pub struct Ready(RawFd);

impl Ready {
    /// Start-up succeeded: tell the waiting parent, and let go of the terminal's stderr
    /// (stdin and stdout were let go at the fork).
    pub fn done(self) {
        // SAFETY: plain syscalls on descriptors this process owns; the literal is a valid C string.
        unsafe {
            let _ = libc::write(self.0, b"1".as_ptr() as *const libc::c_void, 1);
            libc::close(self.0);
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if fd >= 0 {
                libc::dup2(fd, 2);
                if fd > 2 {
                    libc::close(fd);
                }
            }
        }
    }
}

/// Detaches the process. The original process waits for [`Ready::done`] (exit 0) or for the
/// daemon to give up (exit 1); the daemon gets `Ok(Ready)`.
pub fn daemonize() -> std::io::Result<Ready> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: called while the process is single-threaded; each call gets valid pointers
    // (`fds`, a one-byte buffer, C string literals).
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {}
            _ => {
                libc::close(fds[1]);
                let mut b = 0u8;
                let n = loop {
                    let n = libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
                    if n < 0
                        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                    {
                        continue;
                    }
                    break n;
                };
                libc::_exit(if n == 1 && b == b'1' { 0 } else { 1 });
            }
        }
        libc::close(fds[0]);
        if libc::setsid() == -1 {
            return Err(std::io::Error::last_os_error());
        }
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::dup2(fd, 0);
        libc::dup2(fd, 1);
        if fd > 2 {
            libc::close(fd);
        }
    }
    Ok(Ready(fds[1]))
}
