//! `user NAME [GROUP]`: serving without any privilege, while a reload can still read root-only
//! keys and bind privileged ports.
//!
//! As nginx, firstbyte splits the two: started as root, it binds, writes its pid file and
//! forks a small privileged broker (`broker`) that keeps root; then the serving process
//! switches to the user and group with **no capability at all** — permitted, effective,
//! inheritable and ambient sets empty, the bounding set emptied, and `PR_SET_NO_NEW_PRIVS` so
//! that nothing it executes could gain any back ([`drop_all`]). Whatever needs root later
//! (reload, log reopen, the pid file's removal) is asked of the broker.

use std::ffi::CString;
use std::io;

use crate::conf::model::User;

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

/// Empties this thread's effective, permitted and inheritable sets.
fn capset_none() -> io::Result<()> {
    let mut h = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let d = [CapData::default(), CapData::default()];
    // SAFETY: the header and the two data structs are laid out as the kernel's v3 ABI expects
    // and live for the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
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

/// Who serves when firstbyte starts as root without a `user` directive: nginx's default,
/// `nobody` with the group `nogroup` where the system has one (Debian), else `nobody`.
pub fn default_user() -> User {
    let has_nogroup = {
        // SAFETY: the literal is a valid C string; the result is only compared with null.
        unsafe { !libc::getgrnam(c"nogroup".as_ptr()).is_null() }
    };
    User {
        name: "nobody".into(),
        group: Some(if has_nogroup { "nogroup" } else { "nobody" }.into()),
    }
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

/// Records who serves (before the first load, so log files in directories that user can
/// write are opened with care from the start).
/// As nginx at start: each temp directory (`proxy_temp_path`) is made (mode 0700) if
/// missing and given to the serving user, so it can spill there after giving up root.
/// A failure is returned with the path; the caller logs it (the proxy then passes responses
/// at the client's pace, as when spilling fails later).
pub fn prepare_temp_dirs(paths: &[std::path::PathBuf], ids: Ids) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    for p in paths {
        if !p.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(p)
                .map_err(|e| {
                    format!(
                        "mkdir() \"{}\" failed ({})",
                        p.display(),
                        crate::log::OsError(&e)
                    )
                })?;
        }
        std::os::unix::fs::chown(p, Some(ids.uid), Some(ids.gid)).map_err(|e| {
            format!(
                "chown() \"{}\" failed ({})",
                p.display(),
                crate::log::OsError(&e)
            )
        })?;
    }
    Ok(())
}

pub fn set_worker(ids: Ids) {
    let _ = WORKER.set(ids);
}

/// Switches the process to `ids` with no capability left, for good. Must run before any
/// thread is started (capabilities and ids are per thread until then shared by all).
pub fn drop_all(ids: Ids) -> io::Result<()> {
    set_worker(ids);
    // SAFETY: plain syscalls with integer arguments and a pointer to one gid.
    unsafe {
        // The bounding set first: dropping from it needs CAP_SETPCAP, which root still has.
        for cap in 0..=last_cap() {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
            }
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setgroups(1, &ids.gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::setgid(ids.gid) != 0 {
            return Err(io::Error::last_os_error());
        }
        // From root to another user without KEEPCAPS: the kernel clears the permitted and
        // effective sets; capset below makes sure of it, inheritable included.
        if libc::setuid(ids.uid) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    capset_none()?;
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // A failed switch must not pass for one.
    // SAFETY: getuid/geteuid have no preconditions.
    if unsafe { libc::getuid() == 0 || libc::geteuid() == 0 } {
        return Err(io::Error::other("still root after setuid"));
    }
    Ok(())
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
    fn the_default_user_is_nobody() {
        let u = default_user();
        assert_eq!(u.name, "nobody");
        let g = u.group.as_deref().unwrap_or("");
        assert!(g == "nogroup" || g == "nobody", "{g}");
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
