//! systemd's `Type=notify` protocol, seen from a fake `$NOTIFY_SOCKET`: `READY=1` once the
//! port answers, `RELOADING=1` with a plausible `MONOTONIC_USEC` on SIGHUP, `READY=1` after the
//! reload, `STOPPING=1` on SIGQUIT and SIGTERM, each sent by the main process (the one
//! started), as `NotifyAccess=main` requires.

mod support;

use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}

/// Makes the kernel attach the sender's credentials to each datagram, as systemd does.
fn pass_credentials(sock: &UnixDatagram) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a pointer to an int that lives for the call.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_PASSCRED");
}

/// One notification and the pid that sent it. systemd's `NotifyAccess=main` drops messages
/// from any other process than the service's main one (here: the process started, not the
/// privileged broker it forks).
fn recv_from(sock: &UnixDatagram, dir: &std::path::Path) -> (String, i32) {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 4096];
    let mut control = [0u8; 256];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the recvmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = control.len();
    // SAFETY: as above; the socket is valid.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        panic!(
            "no notification ({}); server stderr:\n{}",
            std::io::Error::last_os_error(),
            std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
        );
    }
    let mut pid = 0;
    // SAFETY: the CMSG macros walk the control buffer recvmsg filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::ucred);
                pid = cred.pid;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    (
        String::from_utf8_lossy(&buf[..n as usize]).into_owned(),
        pid,
    )
}

fn recv(sock: &UnixDatagram, dir: &std::path::Path) -> String {
    recv_from(sock, dir).0
}

fn start(tag: &str, notify_socket: &str) -> (std::process::Child, std::path::PathBuf, u16) {
    let dir = tempdir(tag);
    let port = free_port();
    let conf = dir.join("firstbyte.conf");
    std::fs::write(
        &conf,
        format!(
            "pid {dir}/firstbyte.pid;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen \
             127.0.0.1:{port}; location / {{ return 200 \"ok\"; }} }} }}\n",
            dir = dir.display()
        ),
    )
    .unwrap();
    let child = Command::new(bin())
        .arg("-c")
        .arg(&conf)
        .env("NOTIFY_SOCKET", notify_socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .expect("start firstbyte");
    reap_at_exit(child.id());
    (child, dir, port)
}

fn stop(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
    forget_at_exit(child.id());
}

#[test]
fn ready_reloading_ready_stopping() {
    let dir = tempdir("notify-sock");
    let path = dir.join("notify");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    pass_credentials(&sock);
    let (child, sdir, port) = start("notify", path.to_str().unwrap());
    let pid = child.id() as i32;

    assert_eq!(recv_from(&sock, &sdir), ("READY=1\n".to_string(), pid));
    // READY means listening: the port answers now, with no retry.
    TcpStream::connect(("127.0.0.1", port)).expect("READY=1 came before the port listened");

    let before = monotonic_usec();
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    let (reloading, from) = recv_from(&sock, &sdir);
    let after = monotonic_usec();
    assert_eq!(from, pid, "RELOADING=1 from another process");
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading:?}");
    let usec: u64 = lines
        .next()
        .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {reloading:?}"));
    assert!(
        before <= usec && usec <= after,
        "MONOTONIC_USEC={usec} is not between {before} and {after} (CLOCK_MONOTONIC)"
    );
    assert_eq!(recv_from(&sock, &sdir), ("READY=1\n".to_string(), pid));

    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGQUIT) };
    assert_eq!(recv_from(&sock, &sdir), ("STOPPING=1\n".to_string(), pid));
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&sdir);
}

/// An abstract socket name (`@...`, what systemd itself uses in containers and user
/// managers), a failed reload (still `READY=1`, with a `STATUS=` saying so), and SIGTERM.
#[test]
fn abstract_socket_failed_reload_and_term() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("firstbyte-notify-itest-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let (child, sdir, _port) = start("notify-abs", &format!("@{name}"));
    let pid = child.id() as i32;
    assert_eq!(recv(&sock, &sdir), "READY=1\n");

    std::fs::write(sdir.join("firstbyte.conf"), "http { bogus_directive; }\n").unwrap();
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    assert!(recv(&sock, &sdir).starts_with("RELOADING=1\nMONOTONIC_USEC="));
    let after = recv(&sock, &sdir);
    assert!(
        after.starts_with("READY=1\nSTATUS=reload failed") && after.contains("bogus_directive"),
        "{after:?}"
    );

    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(recv(&sock, &sdir), "STOPPING=1\n");
    stop(child);
    let _ = std::fs::remove_dir_all(&sdir);
}
