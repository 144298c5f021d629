//! `user NAME [GROUP]`: serving without root, while a reload can still read root-only keys
//! and bind privileged ports.
//!
//! nginx keeps a root master process beside unprivileged workers. firstbyte is one process, so
//! it does this with capabilities instead: at start, before any thread exists, it switches to
//! the user and group, keeping exactly two capabilities in its *permitted* set —
//! `CAP_NET_BIND_SERVICE` (bind ports below 1024) and `CAP_DAC_OVERRIDE` (read keys and open
//! log files that only root may) — and none in its *effective* set. Capabilities are
//! per thread on Linux: the thread that loads a new configuration (reload, log reopen) raises
//! them for the duration of the load with [`Elevated`] and drops them after; the threads that
//! serve requests never hold them, so a request can reach only what the user may.

use std::ffi::CString;
use std::io;

use crate::conf::model::User;

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_NET_BIND_SERVICE: u32 = 10;
const KEPT: u32 = (1 << CAP_DAC_OVERRIDE) | (1 << CAP_NET_BIND_SERVICE);
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn capset(effective: u32, permitted: u32) -> io::Result<()> {
    let mut h = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let d = [
        CapData {
            effective,
            permitted,
            inheritable: 0,
        },
        CapData::default(),
    ];
    // SAFETY: the header and the two data structs are laid out as the kernel's v3 ABI expects
    // and live for the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Resolved ids of `user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// User id.
    pub uid: libc::uid_t,
    /// Group id.
    pub gid: libc::gid_t,
}

/// Looks up `user NAME [GROUP]` (the group defaults to the user's name, as nginx).
pub fn resolve(u: &User) -> io::Result<Ids> {
    let name = CString::new(u.name.as_str()).map_err(|_| io::Error::other("bad user name"))?;
    let group = u.group.as_deref().unwrap_or(&u.name);
    let gname = CString::new(group).map_err(|_| io::Error::other("bad group name"))?;
    // SAFETY: getpwnam/getgrnam return pointers into static storage valid until the next call;
    // this runs single-threaded at start and copies the ids out at once.
    unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        if pw.is_null() {
            return Err(io::Error::other(format!("getpwnam(\"{}\") failed", u.name)));
        }
        let gr = libc::getgrnam(gname.as_ptr());
        if gr.is_null() {
            return Err(io::Error::other(format!("getgrnam(\"{group}\") failed")));
        }
        Ok(Ids {
            uid: (*pw).pw_uid,
            gid: (*gr).gr_gid,
        })
    }
}

static WORKER: std::sync::OnceLock<Ids> = std::sync::OnceLock::new();

/// The user and group requests are served as, when firstbyte started as root and switched.
pub fn worker() -> Option<Ids> {
    WORKER.get().copied()
}

/// Whether a directory with `mode`, owner `uid` and group `gid` lets `w` create or replace
/// entries (write and search permission through owner, group or other bits).
pub fn dir_writable_by(mode: u32, uid: u32, gid: u32, w: Ids) -> bool {
    const WX: u32 = 0o3;
    let bits = if uid == w.uid {
        mode >> 6
    } else if gid == w.gid {
        mode >> 3
    } else {
        mode
    };
    w.uid == 0 || bits & WX == WX
}

/// Whether files in `path`'s directory must be opened with care (no symlink followed, no hard
/// link or special file accepted): the serving user, who may be an attacker's after a
/// compromise, can plant entries there, and root (start, reload, reopen) opens them.
pub fn untrusted_dir(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(w) = worker().filter(|w| w.uid != 0) else {
        return false;
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) => dir_writable_by(m.mode(), m.uid(), m.gid(), w),
        Err(_) => true,
    }
}

/// Switches the process to `ids`, keeping the two capabilities permitted but not effective.
/// Must run before any thread is started.
pub fn drop_to(ids: Ids) -> io::Result<()> {
    // SAFETY: plain syscalls with integer arguments and a pointer to one gid.
    unsafe {
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setgroups(1, &ids.gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setgid(ids.gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setuid(ids.uid) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    capset(0, KEPT)?;
    let _ = WORKER.set(ids);
    Ok(())
}

/// While alive, this thread holds the kept capabilities in its effective set.
pub struct Elevated(bool);

impl Elevated {
    /// Raises the kept capabilities on the current thread (a no-op when they are not permitted,
    /// e.g. when firstbyte was not started as root, or runs as root without `user`).
    pub fn raise() -> Self {
        if is_root() {
            return Elevated(false);
        }
        Elevated(capset(KEPT, KEPT).is_ok())
    }
}

impl Drop for Elevated {
    fn drop(&mut self) {
        if self.0 {
            let _ = capset(0, KEPT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_directories_for_the_worker() {
        let w = Ids {
            uid: 65534,
            gid: 65534,
        };
        assert!(dir_writable_by(0o755, 65534, 0, w), "its own");
        assert!(!dir_writable_by(0o555, 65534, 0, w), "its own, read-only");
        assert!(dir_writable_by(0o775, 0, 65534, w), "its group's");
        assert!(
            !dir_writable_by(0o755, 0, 65534, w),
            "its group's, not group-writable"
        );
        assert!(
            dir_writable_by(0o1777, 0, 0, w),
            "world-writable, sticky (/tmp)"
        );
        assert!(!dir_writable_by(0o755, 0, 0, w), "root's");
        assert!(
            !dir_writable_by(0o757, 0, 65534, w),
            "group bits decide for the group"
        );
    }

    #[test]
    fn resolves_root_and_refuses_unknown() {
        let ids = resolve(&User {
            name: "root".into(),
            group: None,
        })
        .unwrap();
        assert_eq!(ids, Ids { uid: 0, gid: 0 });
        assert!(resolve(&User {
            name: "no-such-user-fb".into(),
            group: None
        })
        .is_err());
    }
}
