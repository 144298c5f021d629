//! `daemon on`: detach from the terminal the classic way (fork, setsid, fork, stdio to
//! /dev/null). Called before any thread exists.

/// Detaches the process. The parent exits 0; the grandchild returns `Ok`.
pub fn daemonize() -> std::io::Result<()> {
    // SAFETY: called while the process is single-threaded; each libc call has no memory
    // preconditions beyond valid C strings, which are literals here.
    unsafe {
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
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
    Ok(())
}
