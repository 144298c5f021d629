//! The privileged broker: a small process that keeps root so that the serving process needs
//! no privilege at all, as nginx's master process does for its workers.
//!
//! At start, as root and before any thread exists, firstbyte binds its sockets, writes its pid
//! file, then forks the broker and switches itself to the `user` with no capability left
//! (`privileges::drop_all`). The two talk over a socketpair, the server asking:
//!
//! - **reload**: the broker loads the configuration itself, from the path it was started with
//!   (never a path the server names), with the same code the server uses — parse, then build
//!   the whole site, recording every file the load reads (`files::recording`): configuration
//!   files, certificates, keys, password files, ticket keys, CA files. It opens the log files
//!   and binds the sockets the configuration names that the server does not hold yet. It
//!   answers with that snapshot (contents with their stamps, for the TLS object store's reuse)
//!   and the descriptors (`SCM_RIGHTS`). The server then builds the same site from the
//!   snapshot (`files::replaying`); any failure keeps the old configuration serving.
//! - **reopen**: the broker reopens every log file the configurations it loaded named (log
//!   directories may be root's), and sends the new descriptors.
//! - **quit**: the broker removes the pid file (root's, in a root-owned directory) and the
//!   files of its UNIX-domain listening sockets (`listen unix:`), and exits.
//!
//! The broker also removes the file of a UNIX-domain socket that a reload's configuration no
//! longer names, as nginx's master does (it bound them, as root).
//!
//! The only input the broker takes from the server is which kind of request, and for a reload
//! the addresses the server already listens on (sockets it needs no new bind for). A
//! compromised server can therefore make the broker re-read the configuration it already
//! serves, nothing else. The broker exits when the server does (`PR_SET_PDEATHSIG`, or the end
//! of the socket).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::files::Snapshot;
use crate::server::{Bound, Shared, Site, SocketKey, Source};
use crate::wire::{self, Reader, Writer};

const RELOAD: u8 = 1;
const REOPEN: u8 = 2;
const QUIT: u8 = 3;

/// The server's end of the broker.
pub struct Broker {
    sock: Mutex<UnixStream>,
    pid: libc::pid_t,
}

/// What a reload brings back: the snapshot to build from and the newly bound sockets.
pub struct Loaded {
    /// Everything the broker's load read, and the log files it opened.
    pub snapshot: Snapshot,
    /// Sockets the configuration names that the server did not hold.
    pub listeners: crate::server::Fresh,
}

impl Broker {
    /// Forks the broker. Must run as root, before any thread is started; `logs` are the log
    /// files the running configuration opened (for reopen).
    /// `unix_sockets`: the paths of the UNIX-domain sockets bound for the running configuration.
    pub fn spawn(
        source: Source,
        pid_file: Option<PathBuf>,
        logs: Vec<PathBuf>,
        unix_sockets: Vec<PathBuf>,
    ) -> io::Result<Broker> {
        let (server_end, broker_end) = UnixStream::pair()?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the process is single-threaded here (the caller's contract), so the child
        // may run ordinary code after fork.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                drop(server_end);
                prepare_child(parent, broker_end.as_raw_fd());
                let code = serve(broker_end, &source, pid_file.as_deref(), logs, unix_sockets);
                // SAFETY: ends the broker without running the parent's destructors, whose
                // objects (sockets, files) this copy of the memory must not touch.
                unsafe { libc::_exit(code) }
            }
            pid => Ok(Broker {
                sock: Mutex::new(server_end),
                pid,
            }),
        }
    }

    fn ask(&self, req: &[u8]) -> io::Result<(std::sync::MutexGuard<'_, UnixStream>, Vec<u8>)> {
        let mut s = self
            .sock
            .lock()
            .map_err(|_| io::Error::other("broker channel poisoned"))?;
        wire::send(&mut s, req)?;
        let reply = wire::recv(&mut s)?
            .ok_or_else(|| io::Error::other("the privileged process is gone"))?;
        Ok((s, reply))
    }

    /// Has the broker load the configuration; `open`: sockets already listened on.
    pub fn reload(&self, open: &[SocketKey]) -> Result<Loaded, String> {
        let mut w = Writer::default();
        w.u8(RELOAD);
        w.u32(open.len() as u32);
        for a in open {
            w.str(&a.to_string());
        }
        let fail = |e: io::Error| format!("the privileged process failed: {e}");
        let (s, reply) = self.ask(&w.into_bytes()).map_err(fail)?;
        let mut r = Reader::new(&reply);
        if r.u8().map_err(fail)? != 1 {
            return Err(r.str().map_err(fail)?.to_string());
        }
        let body = r.bytes().map_err(fail)?;
        let mut addrs = Vec::new();
        for _ in 0..r.u32().map_err(fail)? {
            let a: SocketKey = r
                .str()
                .map_err(fail)?
                .parse()
                .map_err(|_| fail(io::Error::other("bad address")))?;
            addrs.push(a);
        }
        let nlogs = r.u32().map_err(fail)? as usize;
        let fds = wire::recv_fds(&s, nlogs + addrs.len()).map_err(fail)?;
        drop(s);
        let mut fds = fds.into_iter();
        let logs: Vec<File> = fds.by_ref().take(nlogs).collect();
        let snapshot =
            Snapshot::decode(&mut Reader::new(body), &mut logs.into_iter()).map_err(fail)?;
        // Each descriptor is a socket the broker bound for its key, now owned here.
        let listeners = addrs
            .into_iter()
            .zip(fds)
            .map(|(k, f)| {
                let b = Bound::from_fd(&k, f.into());
                (k, b)
            })
            .collect();
        Ok(Loaded {
            snapshot,
            listeners,
        })
    }

    /// Has the broker reopen the log files: each path with its new file or the error.
    pub fn reopen(&self) -> io::Result<Vec<(PathBuf, io::Result<File>)>> {
        let (s, reply) = self.ask(&[REOPEN])?;
        let mut r = Reader::new(&reply);
        let mut entries = Vec::new();
        for _ in 0..r.u32()? {
            let p = r.path()?;
            let ok = r.u8()? == 1;
            let err = if ok { None } else { Some(r.str()?.to_string()) };
            entries.push((p, err));
        }
        let n = entries.iter().filter(|(_, e)| e.is_none()).count();
        let mut fds = wire::recv_fds(&s, n)?.into_iter();
        Ok(entries
            .into_iter()
            .map(|(p, e)| match e {
                None => {
                    let f = fds.next().ok_or_else(|| io::Error::other("missing"));
                    (p, f)
                }
                Some(e) => (p, Err(io::Error::other(e))),
            })
            .collect())
    }

    /// Has the broker remove the pid file and exit; waits for it.
    pub fn shutdown(&self) {
        let _ = self.ask(&[QUIT]);
        // SAFETY: waits for this process's own child; a null status pointer is allowed.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

/// In the new child: die with the server, ignore the signals meant for the server, hold no
/// descriptor but the socket (the listening sockets and log files are the server's; the
/// terminal's stderr must not be kept open by a daemon).
fn prepare_child(parent: libc::pid_t, keep: RawFd) {
    // SAFETY: plain syscalls on integers and this process's own descriptors.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
        for s in crate::server::ANSWERED {
            libc::signal(s, libc::SIG_IGN);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
    }
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        if fd > 2 && fd != keep {
            // SAFETY: closes a descriptor this copy of the process does not use; the objects
            // that own them in the parent's memory are never dropped here (the broker ends
            // with _exit).
            unsafe { libc::close(fd) };
        }
    }
}

/// The broker's loop; returns the exit code.
fn serve(
    mut sock: UnixStream,
    source: &Source,
    pid_file: Option<&Path>,
    logs: Vec<PathBuf>,
    unix_sockets: Vec<PathBuf>,
) -> i32 {
    let mut logs = logs;
    let mut unix_sockets = unix_sockets;
    while let Ok(Some(req)) = wire::recv(&mut sock) {
        let (reply, fds) = match req.first() {
            Some(&RELOAD) => reload(source, &req[1..], &mut logs, &mut unix_sockets),
            Some(&REOPEN) if req.len() == 1 => reopen(&logs),
            Some(&QUIT) if req.len() == 1 => {
                remove_pid(pid_file);
                remove_sockets(&unix_sockets);
                let _ = wire::send(&mut sock, &[1]);
                return 0;
            }
            _ => {
                let mut w = Writer::default();
                w.u8(0);
                w.str("unknown request");
                (w.into_bytes(), Vec::new())
            }
        };
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        if wire::send(&mut sock, &reply).is_err() || wire::send_fds(&sock, &raw).is_err() {
            break;
        }
    }
    remove_pid(pid_file);
    remove_sockets(&unix_sockets);
    0
}

fn remove_sockets(paths: &[PathBuf]) {
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

fn remove_pid(pid_file: Option<&Path>) {
    if let Some(p) = pid_file {
        let _ = std::fs::remove_file(p);
    }
}

/// Descriptors to send after a reply.
type Fds = Vec<std::os::fd::OwnedFd>;

fn reload(
    source: &Source,
    args: &[u8],
    logs: &mut Vec<PathBuf>,
    unix_sockets: &mut Vec<PathBuf>,
) -> (Vec<u8>, Fds) {
    let mut w = Writer::default();
    let mut r = Reader::new(args);
    let open = (|| -> io::Result<Vec<SocketKey>> {
        let mut v = Vec::new();
        for _ in 0..r.u32()? {
            v.push(
                r.str()?
                    .parse()
                    .map_err(|_| io::Error::other("bad address"))?,
            );
        }
        Ok(v)
    })();
    let Ok(open) = open else {
        w.u8(0);
        w.str("bad reload request");
        return (w.into_bytes(), Vec::new());
    };
    let (result, snap) = crate::files::recording(|| load(source, &open));
    match result {
        Err(e) => {
            w.u8(0);
            w.str(&e);
            (w.into_bytes(), Vec::new())
        }
        Ok((fresh, now_unix)) => {
            // The sockets the configuration no longer names close in the server; their
            // files go now (the server cannot remove a file in a root-owned directory).
            let gone: Vec<PathBuf> = unix_sockets
                .iter()
                .filter(|p| !now_unix.contains(p))
                .cloned()
                .collect();
            remove_sockets(&gone);
            *unix_sockets = now_unix;
            for p in snap.log_paths() {
                if !logs.contains(&p) {
                    logs.push(p);
                }
            }
            let mut body = Writer::default();
            snap.encode(&mut body);
            w.u8(1);
            w.bytes(&body.into_bytes());
            w.u32(fresh.len() as u32);
            for (a, _) in &fresh {
                w.str(&a.to_string());
            }
            let log_files = snap.log_files();
            w.u32(log_files.len() as u32);
            let mut fds: Fds = Vec::new();
            for f in log_files {
                if let Ok(f) = f.try_clone() {
                    fds.push(f.into());
                }
            }
            for (_, l) in fresh {
                fds.push(l.into_fd());
            }
            (w.into_bytes(), fds)
        }
    }
}

/// The broker's load: the server's own steps, from disk, as root. With the sockets bound
/// comes the list of every UNIX-domain socket path the configuration names.
fn load(
    source: &Source,
    open: &[SocketKey],
) -> Result<(crate::server::Fresh, Vec<PathBuf>), String> {
    let shared = Shared::for_test();
    let config = source.load().map_err(|e| e.to_string())?;
    let site = Site::build(config, &shared, None).map_err(|e| e.to_string())?;
    let fresh =
        crate::server::bind_sockets(&site, |a| open.contains(a)).map_err(|e| e.to_string())?;
    Ok((fresh, crate::server::unix_socket_paths(&site)))
}

fn reopen(logs: &[PathBuf]) -> (Vec<u8>, Fds) {
    let mut w = Writer::default();
    let mut fds: Fds = Vec::new();
    w.u32(logs.len() as u32);
    for p in logs {
        w.path(p);
        match crate::log::open_append(p) {
            Ok(f) => {
                w.u8(1);
                fds.push(f.into());
            }
            Err(e) => {
                w.u8(0);
                w.str(&crate::log::OsError(&e).to_string());
            }
        }
    }
    (w.into_bytes(), fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker's loop in a thread, over a socketpair, as the server would talk to it.
    fn start(source: Source) -> (UnixStream, std::thread::JoinHandle<i32>) {
        let (a, b) = UnixStream::pair().unwrap();
        let h = std::thread::spawn(move || serve(b, &source, None, Vec::new(), Vec::new()));
        (a, h)
    }

    #[test]
    fn the_broker_reads_only_what_its_configuration_names() {
        let d = std::env::temp_dir().join(format!("fb-broker-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("mime.types"), "types { text/html html; }\n").unwrap();
        let conf = d.join("firstbyte.conf");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::fs::write(
            &conf,
            format!(
                "pid off;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{ include mime.types; access_log off; server {{ listen 127.0.0.1:{port}; root {d}; }} }}\n",
                d = d.display()
            ),
        )
        .unwrap();
        let source = Source {
            path: conf.clone(),
            prefix: None,
            globals: None,
            error_log: None,
            builtin: None,
        };
        let (mut s, h) = start(source);
        // A reload: exactly the configuration's files come back, and its log.
        let mut w = Writer::default();
        w.u8(RELOAD);
        w.u32(0);
        wire::send(&mut s, &w.into_bytes()).unwrap();
        let reply = wire::recv(&mut s).unwrap().unwrap();
        let mut r = Reader::new(&reply);
        assert_eq!(r.u8().unwrap(), 1, "{reply:?}");
        let body = r.bytes().unwrap();
        let nsock = r.u32().unwrap() as usize;
        assert_eq!(nsock, 1);
        assert_eq!(r.str().unwrap(), format!("127.0.0.1:{port}"));
        let nlogs = r.u32().unwrap() as usize;
        assert_eq!(nlogs, 1);
        let fds = wire::recv_fds(&s, nsock + nlogs).unwrap();
        let snap = Snapshot::decode(&mut Reader::new(body), &mut fds.into_iter()).unwrap();
        assert_eq!(
            snap.paths_read(),
            [conf.as_path(), d.join("mime.types").as_path()]
        );
        assert_eq!(snap.log_paths(), [d.join("error.log")]);
        // Anything else — a request naming a file, a reload with trailing bytes for a path —
        // is refused without a read.
        for bad in [
            [&[9u8][..], b"/etc/shadow"].concat(),
            [&[REOPEN][..], b"/etc/shadow"].concat(),
            [&[QUIT][..], b"/etc/shadow"].concat(),
            [
                &[RELOAD][..],
                &1u32.to_le_bytes(),
                &11u64.to_le_bytes(),
                b"/etc/shadow",
            ]
            .concat(),
        ] {
            wire::send(&mut s, &bad).unwrap();
            let reply = wire::recv(&mut s).unwrap().unwrap();
            let mut r = Reader::new(&reply);
            assert_eq!(r.u8().unwrap(), 0, "{bad:?}");
            let text = r.str().unwrap();
            assert!(!text.contains("root:"), "{text}");
        }
        // Reopen names no path: the logs of the configurations loaded.
        wire::send(&mut s, &[REOPEN]).unwrap();
        let reply = wire::recv(&mut s).unwrap().unwrap();
        let mut r = Reader::new(&reply);
        assert_eq!(r.u32().unwrap(), 1);
        assert_eq!(r.path().unwrap(), d.join("error.log"));
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(wire::recv_fds(&s, 1).unwrap().len(), 1);
        drop(s);
        assert_eq!(h.join().unwrap(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }
}
