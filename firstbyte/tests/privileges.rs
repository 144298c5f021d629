//! `user NAME GROUP` when started as root: the serving process holds no privilege at all (no
//! capability in any set, no way to regain one), while a reload can still read root-only keys
//! and bind a privileged port through the privileged broker process.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

fn status_field(pid: u32, task: Option<&str>, field: &str) -> String {
    let path = match task {
        Some(t) => format!("/proc/{pid}/task/{t}/status"),
        None => format!("/proc/{pid}/status"),
    };
    let s = std::fs::read_to_string(path).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn subject(port: u16) -> String {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "localhost",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or("")
        .to_string()
}

fn conf(dir: &std::path::Path, port: u16, extra_listen: &str) -> String {
    format!(
        "user nobody nogroup;\npid off;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n server {{\n  listen 127.0.0.1:{port} ssl;\n  {extra_listen}\n  server_name localhost;\n  ssl_certificate {d}/keys/server.crt;\n  ssl_certificate_key {d}/keys/server.key;\n  root {d}/html;\n }}\n}}\n",
        d = dir.display()
    )
}

#[test]
fn serves_unprivileged_and_reloads_with_root_only_keys() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (CI runs as root)"
    );
    let c = certs();
    let dir = tempdir("privileges");
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::create_dir_all(dir.join("html")).unwrap();
    // The document root and its index are world-readable; a secret is root-only.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join("html"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("html/index.html"), "public\n").unwrap();
    std::fs::set_permissions(
        dir.join("html/index.html"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(dir.join("html/secret.txt"), "root only\n").unwrap();
    std::fs::set_permissions(
        dir.join("html/secret.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // Keys in a root-only directory.
    std::fs::copy(c.cert("a.test"), keys.join("server.crt")).unwrap();
    std::fs::copy(c.key("a.test"), keys.join("server.key")).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(
        keys.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();

    let port = free_port();
    let mut server = Server::start_in(&dir, &conf(&dir, port, ""), port);
    let pid = server.child.id();

    // Requests reach only what nobody may read. (A served request first: the port accepts
    // into the kernel's backlog from listen() on, while the process may still be root.)
    let base = format!("https://localhost:{port}");
    let resolve = format!("localhost:{port}:127.0.0.1");
    let (code, _, body) = curl_i(&["--resolve", &resolve, &format!("{base}/")]);
    assert_eq!((code, body.as_slice()), (200, b"public\n".as_slice()));

    // Every thread runs as nobody with no capability, and cannot gain one.
    assert_unprivileged(pid, "after start");
    // The broker: a child that kept root, and goes when the server goes.
    let broker = broker_of(pid);
    let buid = status_field(broker, None, "Uid");
    assert!(
        buid.split_whitespace().all(|u| u == "0"),
        "broker Uid: {buid}"
    );

    let (code, _, _) = curl_i(&["--resolve", &resolve, &format!("{base}/secret.txt")]);
    assert_eq!(code, 403, "a root-only file must not be served");

    // A reload reads a new root-only key and binds a privileged port.
    assert!(subject(port).contains("CN = a.test"), "{}", subject(port));
    std::fs::copy(c.cert("b.test"), keys.join("server.crt")).unwrap();
    std::fs::copy(c.key("b.test"), keys.join("server.key")).unwrap();
    let privileged = 444;
    std::fs::write(
        &server.conf,
        conf(&dir, port, &format!("listen 127.0.0.1:{privileged} ssl;")),
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !subject(port).contains("CN = b.test") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        subject(port).contains("CN = b.test"),
        "reload did not pick up the root-only key:\n{}\n{}",
        server.stderr_text(),
        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
    );
    server.wait_port(privileged);
    assert!(subject(privileged).contains("CN = b.test"));
    // Still unprivileged afterwards, with the threads the reload started.
    assert_unprivileged(pid, "after reload");
    // -s reopen goes through the broker too (the log directory is root's).
    std::fs::rename(dir.join("error.log"), dir.join("error.log.1")).unwrap();
    server.signal(libc::SIGUSR1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dir.join("error.log").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dir.join("error.log").exists(), "error.log not reopened");
    // The broker ends with the server, and leaves no pid behind.
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(5)).is_some());
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{broker}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{broker}")).exists(),
        "the broker outlived the server"
    );
}

/// Uid nobody and every capability set empty in every thread of `pid`; no new privileges.
fn assert_unprivileged(pid: u32, when: &str) {
    let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| t.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!tasks.is_empty());
    for t in tasks {
        let uid = status_field(pid, Some(&t), "Uid");
        assert!(
            uid.split_whitespace().all(|u| u == "65534"),
            "{when}: thread {t} Uid {uid}"
        );
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            let v = status_field(pid, Some(&t), set);
            assert_eq!(
                u64::from_str_radix(&v, 16).unwrap(),
                0,
                "{when}: thread {t} {set} {v}"
            );
        }
        assert_eq!(
            status_field(pid, Some(&t), "NoNewPrivs"),
            "1",
            "{when}: thread {t}"
        );
    }
}

/// The one child process of `pid` (the privileged broker).
fn broker_of(pid: u32) -> u32 {
    let kids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the comm may hold spaces, so split after the ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect();
    assert_eq!(kids.len(), 1, "one broker process: {kids:?}");
    kids[0]
}

/// The pid file is root's and not writable by the serving user (who could otherwise aim root's
/// `-s stop` at any process); a log directory the serving user can write is opened without
/// following symlinks, so a symlink planted there before `-s reopen` does not make root append
/// to the file it points at.
#[test]
fn pid_file_is_roots_and_reopen_follows_no_planted_symlink() {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    let dir = tempdir("priv-files");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    // The serving user's own log directory, as with a package that chowns /var/log/NAME.
    std::os::unix::fs::chown(&logs, Some(65534), Some(65534)).unwrap();
    let target = dir.join("root-only.txt");
    std::fs::write(&target, "untouched\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = free_port();
    let conf = format!(
        "user nobody nogroup;\npid {d}/fb.pid;\nerror_log {d}/logs/error.log info;\nevents {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{port}; root {d}; }} }}\n",
        d = dir.display()
    );
    let server = Server::start_in(&dir, &conf, port);
    // The port answers once bound; the pid file is written just after the bind.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(dir.join("fb.pid"))
        .unwrap_or_default()
        .is_empty()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }

    let pid = std::fs::metadata(dir.join("fb.pid")).unwrap();
    assert_eq!(pid.uid(), 0, "the pid file belongs to root");
    assert_eq!(pid.mode() & 0o022, 0, "mode {:o}", pid.mode());
    assert_eq!(
        std::fs::read_to_string(dir.join("fb.pid")).unwrap().trim(),
        server.child.id().to_string()
    );

    // What a compromised worker could do: rotate the log away and plant a symlink.
    std::fs::rename(logs.join("error.log"), logs.join("error.log.1")).unwrap();
    std::os::unix::fs::symlink(&target, logs.join("error.log")).unwrap();
    server.signal(libc::SIGUSR1);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut old = String::new();
    while Instant::now() < deadline {
        old = std::fs::read_to_string(logs.join("error.log.1")).unwrap_or_default();
        if old.contains("reopen()") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // One more line after the reopen (a missing file is an [error]), wherever the log goes.
    let _ = curl(&[&format!("http://127.0.0.1:{port}/missing")]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "untouched\n",
        "root appended through the planted symlink"
    );
    assert!(
        old.contains("reopen()") && old.contains("failed"),
        "the refused reopen is logged in the file still in use: {old}"
    );
}

/// Started as root without a `user` directive, firstbyte serves as nginx's default user,
/// `nobody` (group `nogroup` on Debian), not as root.
#[test]
fn root_without_user_serves_as_nobody() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    let dir = tempdir("priv-default");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("index.html"), "public\n").unwrap();
    std::fs::write(dir.join("secret.txt"), "root only\n").unwrap();
    std::fs::set_permissions(
        dir.join("secret.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let port = free_port();
    let conf = format!(
        "pid off;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{port}; root {d}; }} }}\n",
        d = dir.display()
    );
    let server = Server::start_in(&dir, &conf, port);
    // A served request first: the port accepts connections (into the kernel's backlog) from
    // the bind on, while the process may still be root and not yet serving.
    let (code, _, body) = curl_i(&[&format!("http://127.0.0.1:{port}/")]);
    assert_eq!((code, body.as_slice()), (200, b"public\n".as_slice()));
    let pid = server.child.id();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().file_name().into_string().unwrap();
        let uid = status_field(pid, Some(&t), "Uid");
        assert!(uid.split_whitespace().all(|u| u == "65534"), "Uid: {uid}");
        let gid = status_field(pid, Some(&t), "Gid");
        assert!(gid.split_whitespace().all(|g| g == "65534"), "Gid: {gid}");
    }
    let (code, _, _) = curl_i(&[&format!("http://127.0.0.1:{port}/secret.txt")]);
    assert_eq!(code, 403, "a root-only file must not be served");
}
