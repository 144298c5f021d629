//! The process: the built-in site with no configuration, `daemon on`, `worker_processes`
//! threads, and the `worker_connections` limit.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

/// With no `-c` and no default config file, firstbyte serves the built-in site on
/// https://localhost:8443 (127.0.0.1 and ::1) and prints its URL. Port 8443 and
/// `/etc/firstbyte` are made private with `unshare`, so the test neither collides with nor
/// depends on the machine's own.
#[test]
fn builtin_site_without_a_config() {
    let script = format!(
        r#"
set -e
ip link set lo up
[ -d /etc/firstbyte ] && mount -t tmpfs tmpfs /etc/firstbyte
mount -t tmpfs tmpfs /tmp
TMPDIR=/tmp {bin} > /tmp/fb-builtin.out 2>/tmp/fb-builtin.err &
pid=$!
i=0
until curl -sk -o /dev/null https://127.0.0.1:8443/; do
  i=$((i+1)); [ $i -lt 200 ] || {{ cat /tmp/fb-builtin.err; kill $pid; exit 3; }}
  sleep 0.05
done
curl -sk 'https://localhost:8443/?format=json'; echo
echo ----
curl -sk -g --http1.1 -H 'Accept: application/json' 'https://[::1]:8443/'; echo
echo ----
curl -sk https://127.0.0.1:8443/ | head -c 200; echo
echo ----
cat /tmp/fb-builtin.out
echo ----
ls -A /tmp
grep -rl "PRIVATE KEY" /tmp || true
kill -TERM $pid; wait $pid || true
"#,
        bin = bin().display()
    );
    let out = Command::new("unshare")
        .args(["--net", "--mount", "--fork", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parts: Vec<&str> = text.split("----\n").collect();
    let h2: serde_json::Value = serde_json::from_str(parts[0].trim()).expect("json");
    assert_eq!(h2["tls_version"], "TLSv1.3");
    assert_eq!(h2["alpn"], "h2");
    for k in [
        "cipher",
        "group",
        "resumed",
        "rtt_us",
        "cwnd",
        "record_policy",
    ] {
        assert!(h2.get(k).is_some(), "{k} missing: {h2}");
    }
    let v6: serde_json::Value = serde_json::from_str(parts[1].trim()).expect("json over ::1");
    assert_eq!(v6["alpn"], "http/1.1");
    assert_eq!(v6["client"], "::1");
    assert!(parts[2].contains("<html") || parts[2].contains("<!DOCTYPE html>"));
    assert!(
        parts[3].contains("https://localhost:8443/"),
        "the URL is printed on stdout: {}",
        parts[3]
    );
    // The key lives in memory only: nothing in /tmp but the script's own two files.
    let mut tmp: Vec<&str> = parts[4].lines().collect();
    tmp.sort_unstable();
    assert_eq!(tmp, ["fb-builtin.err", "fb-builtin.out"], "{}", parts[4]);
}

fn plain_conf(dir: &std::path::Path, port: u16, main: &str, events: &str) -> String {
    format!(
        "{main}\npid {d}/fb.pid;\nerror_log {d}/error.log;\nevents {{ {events} }}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{port}; root {d}; }} }}\n",
        d = dir.display()
    )
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn worker_processes_sets_event_loop_threads() {
    let dir = tempdir("workers");
    std::fs::write(dir.join("index.html"), "x").unwrap();
    let port = free_port();
    let one = Server::start_in(
        &dir,
        &plain_conf(&dir, port, "worker_processes 1;", ""),
        port,
    );
    assert_eq!(
        threads(one.child.id()),
        1,
        "one worker: a single-threaded runtime"
    );
    drop(one);
    let port = free_port();
    let three = Server::start_in(
        &dir,
        &plain_conf(&dir, port, "worker_processes 3;", ""),
        port,
    );
    // The port answers once bound, before the runtime starts: a response says it runs.
    assert!(get(port).unwrap().starts_with("HTTP/1.1 200"));
    assert!(threads(three.child.id()) >= 4, "main + 3 workers");
}

fn get(port: u16) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

#[test]
fn worker_connections_limits_open_connections() {
    let dir = tempdir("wconn");
    std::fs::write(dir.join("index.html"), "x").unwrap();
    let port = free_port();
    let _server = Server::start_in(
        &dir,
        &plain_conf(&dir, port, "worker_processes 1;", "worker_connections 4;"),
        port,
    );
    // The readiness probe's connection is gone; hold four open.
    std::thread::sleep(Duration::from_millis(100));
    let held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let refused = get(port).unwrap_or_default();
    assert!(
        refused.is_empty(),
        "a fifth connection was served: {refused}"
    );
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("4 worker_connections are not enough"), "{log}");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if get(port).unwrap_or_default().starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not serving again after the others closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn daemon_detaches_and_stops_by_signal() {
    let dir = tempdir("daemon");
    std::fs::write(dir.join("index.html"), "daemon\n").unwrap();
    let port = free_port();
    let conf = dir.join("firstbyte.conf");
    std::fs::write(&conf, plain_conf(&dir, port, "daemon on;", "")).unwrap();
    let started = Instant::now();
    let out = firstbyte(&["-c", conf.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the command returns at once"
    );
    let pid_file = dir.join("fb.pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let body = loop {
        match get(port) {
            Ok(b) if b.starts_with("HTTP/1.1 200") => break b,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => panic!("daemon not serving: {other:?}"),
        }
    };
    assert!(body.ends_with("daemon\n"));
    let stop = firstbyte(&["-s", "stop", "-c", conf.to_str().unwrap()]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    // SAFETY: kill with signal 0 only checks the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    assert_ne!(unsafe { libc::kill(pid, 0) }, 0, "daemon still running");
    assert!(!pid_file.exists(), "pid file left behind");
}

#[test]
fn daemon_start_failure_is_reported_by_the_command() {
    let dir = tempdir("daemon-fail");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let conf = dir.join("firstbyte.conf");
    std::fs::write(&conf, plain_conf(&dir, port, "daemon on;", "")).unwrap();
    let out = firstbyte(&["-c", conf.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("bind() to 127.0.0.1:{port} failed (98: ")),
        "{err}"
    );
}

/// Not a test on its own: `servers_left_in_statics_die_with_the_test_process` runs it in a
/// child test process, which starts a server, keeps it in a `static` (never dropped) and exits.
#[test]
#[ignore = "helper run in a child process by servers_left_in_statics_die_with_the_test_process"]
fn helper_leaves_a_server_in_a_static() {
    static LEFT: std::sync::OnceLock<std::sync::Mutex<Server>> = std::sync::OnceLock::new();
    let out = std::env::var("FB_LEFT_PID").expect("FB_LEFT_PID names the pid file");
    let dir = std::path::Path::new(&out).with_file_name("srv");
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let server = Server::start_in(&dir, &plain_conf(&dir, port, "", ""), port);
    std::fs::write(out, server.child.id().to_string()).unwrap();
    let _ = LEFT.set(std::sync::Mutex::new(server));
}

/// A server started through the test support and never dropped (serve.rs keeps its shared
/// server in a `static`) must not outlive the test process: `scripts/test` leaves no process.
#[test]
fn servers_left_in_statics_die_with_the_test_process() {
    let dir = tempdir("left-parent");
    let pid_file = dir.join("left.pid");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_leaves_a_server_in_a_static",
            "--ignored",
            "--test-threads",
            "1",
        ])
        .env("FB_LEFT_PID", &pid_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the helper ran")
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    if alive {
        // SAFETY: the server the helper left; ours to end.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!alive, "the server outlived its test process");
}
