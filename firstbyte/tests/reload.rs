//! Reload and signals: a reload under traffic fails no request, a broken config keeps the old
//! one serving, sockets come and go with the config, `-s quit` drains and `-s stop` stops.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

fn conf(dir: &std::path::Path, port: u16, extra_port: Option<u16>, root: &str) -> String {
    let extra = extra_port
        .map(|p| {
            format!(
                "server {{ listen 127.0.0.1:{p}; root {}/{root}; }}",
                dir.display()
            )
        })
        .unwrap_or_default();
    format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port}; root {d}/{root}; }}\n {extra}\n}}\n",
        d = dir.display()
    )
}

/// One HTTP/1.1 request on a new connection; the body, or an error.
fn fetch(port: u16, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    if !text.starts_with("HTTP/1.1 200") {
        return Err(format!("bad response: {text}"));
    }
    Ok(text.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

fn setup(tag: &str) -> (std::path::PathBuf, u16) {
    let dir = tempdir(tag);
    for v in ["v1", "v2"] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
        std::fs::write(dir.join(v).join("index.html"), v).unwrap();
    }
    (dir, free_port())
}

fn firstbyte_s(conf: &std::path::Path, sig: &str) {
    let o = firstbyte(&["-s", sig, "-c", conf.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "-s {sig}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn reload_under_traffic_fails_no_request() {
    let (dir, port) = setup("reload-traffic");
    let mut server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    assert_eq!(fetch(port, "/").unwrap(), "v1");

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (stop, ok) = (stop.clone(), ok.clone());
        clients.push(std::thread::spawn(move || {
            let mut failures = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                match fetch(port, "/") {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => failures.push(e),
                }
            }
            failures
        }));
    }
    for i in 0..6 {
        let root = if i % 2 == 0 { "v2" } else { "v1" };
        std::fs::write(&server.conf, conf(&dir, port, None, root)).unwrap();
        firstbyte_s(&server.conf, "reload");
        std::thread::sleep(Duration::from_millis(150));
    }
    stop.store(true, Ordering::Relaxed);
    let failures: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        failures.is_empty(),
        "failed requests during reload: {failures:?}"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 50,
        "too little traffic to mean anything"
    );
    // The last reload chose v1.
    assert_eq!(fetch(port, "/").unwrap(), "v1");
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(5)).is_some());
}

#[test]
fn broken_reload_keeps_the_old_config_serving() {
    let (dir, port) = setup("reload-broken");
    let server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    std::fs::write(
        &server.conf,
        "events {}\nhttp { server { listen 127.0.0.1:1; bogus; } }\n",
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    let log = dir.join("error.log");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("[emerg]") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(text.contains("unknown directive \"bogus\""), "{text}");
    assert_eq!(fetch(port, "/").unwrap(), "v1");
}

#[test]
fn reload_opens_and_closes_sockets() {
    let (dir, port) = setup("reload-sockets");
    let extra = free_port();
    let mut server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    assert!(fetch(extra, "/").is_err());
    std::fs::write(&server.conf, conf(&dir, port, Some(extra), "v2")).unwrap();
    server.signal(libc::SIGHUP);
    server.wait_port(extra);
    assert_eq!(fetch(extra, "/").unwrap(), "v2");
    assert_eq!(fetch(port, "/").unwrap(), "v2");
    std::fs::write(&server.conf, conf(&dir, port, None, "v1")).unwrap();
    server.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(5);
    while fetch(extra, "/").is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fetch(extra, "/").is_err(), "socket not closed after reload");
    assert_eq!(fetch(port, "/").unwrap(), "v1");
}

#[test]
fn quit_drains_and_removes_the_pid_file() {
    let (dir, port) = setup("quit");
    let mut server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    let pid = dir.join("fb.pid");
    let text = std::fs::read_to_string(&pid).unwrap();
    assert_eq!(text.trim(), server.child.id().to_string());
    // An idle keep-alive connection must not hold the drain forever.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    let _ = idle.read(&mut buf).unwrap();
    firstbyte_s(&server.conf, "quit");
    let st = server
        .wait_exit(Duration::from_secs(10))
        .expect("exits after quit");
    assert!(st.success(), "{st}");
    assert!(!pid.exists(), "pid file left behind");
    assert!(fetch(port, "/").is_err());
}

#[test]
fn stop_exits_at_once() {
    let (dir, port) = setup("stop");
    let mut server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    firstbyte_s(&server.conf, "stop");
    assert!(server.wait_exit(Duration::from_secs(5)).is_some());
}

#[test]
fn reopen_reopens_logs() {
    let (dir, port) = setup("reopen");
    let server = Server::start_in(&dir, &conf(&dir, port, None, "v1"), port);
    let log = dir.join("error.log");
    std::fs::rename(&log, dir.join("error.log.1")).unwrap();
    server.signal(libc::SIGUSR1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.exists(), "error.log not reopened");
    let old = std::fs::read_to_string(dir.join("error.log.1")).unwrap();
    assert!(old.contains("reopening logs"), "{old}");
}

/// A connection in the middle of a response, held open by its client: a 64 MiB download (a
/// sparse file) that the client never reads, so the server waits on a full socket
/// (`send_timeout` would wait a minute).
fn held_connection(dir: &std::path::Path, port: u16) -> TcpStream {
    let f = std::fs::File::create(dir.join("v1/big.bin")).unwrap();
    f.set_len(64 << 20).unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    std::thread::sleep(Duration::from_millis(200));
    s
}

fn held_conf(dir: &std::path::Path, port: u16, main: &str) -> String {
    format!(
        "{main}\npid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off; send_timeout 60s; server {{ listen 127.0.0.1:{port}; root {d}/v1; }} }}\n",
        d = dir.display()
    )
}

/// `worker_shutdown_timeout 1s`: `-s quit` closes what is still open after a second.
#[test]
fn quit_is_bounded_by_worker_shutdown_timeout() {
    let (dir, port) = setup("quit-bounded");
    let mut server = Server::start_in(
        &dir,
        &held_conf(&dir, port, "worker_shutdown_timeout 1s;"),
        port,
    );
    let held = held_connection(&dir, port);
    let started = Instant::now();
    server.signal(libc::SIGQUIT);
    // 1 s plus generous slack for a loaded machine; without the bound the drain waits for
    // client_header_timeout (60 s).
    let st = server
        .wait_exit(Duration::from_secs(20))
        .expect("exits after worker_shutdown_timeout");
    assert!(st.success(), "{st}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "closed before the timeout: {:?}",
        started.elapsed()
    );
    drop(held);
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("worker_shutdown_timeout: closing 1"), "{log}");
}

/// SIGTERM during a graceful shutdown stops at once.
#[test]
fn stop_after_quit_stops_at_once() {
    let (dir, port) = setup("quit-stop");
    let mut server = Server::start_in(&dir, &held_conf(&dir, port, ""), port);
    let held = held_connection(&dir, port);
    server.signal(libc::SIGQUIT);
    assert!(
        server.wait_exit(Duration::from_millis(500)).is_none(),
        "the drain waits for the held connection"
    );
    server.signal(libc::SIGTERM);
    let st = server
        .wait_exit(Duration::from_secs(10))
        .expect("SIGTERM after SIGQUIT stops at once");
    assert!(st.success(), "{st}");
    drop(held);
}

fn wait_log(dir: &std::path::Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        if log.contains(needle) || Instant::now() > deadline {
            return log;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A configuration retired by a reload is freed as soon as its last connection ends, and not
/// before: nothing else (the next generation, caches, the runtime) keeps it alive.
#[test]
fn retired_configurations_are_freed_after_their_last_connection() {
    let (dir, port) = setup("reload-free");
    let server = Server::start_in(&dir, &held_conf(&dir, port, ""), port);
    let held = held_connection(&dir, port);
    for generation in 2..=4 {
        server.signal(libc::SIGHUP);
        let log = wait_log(
            &dir,
            &format!("reconfiguration done: generation {generation},"),
        );
        assert!(log.contains(&format!("generation {generation},")), "{log}");
    }
    // Generations 2 and 3 had no connection: freed. Generation 1 serves the download.
    let log = wait_log(&dir, "generation 3 freed");
    assert!(log.contains("configuration generation 2 freed"), "{log}");
    assert!(log.contains("configuration generation 3 freed"), "{log}");
    assert!(!log.contains("generation 1 freed"), "{log}");
    assert!(!log.contains("generation 4 freed"), "{log}");
    drop(held);
    let log = wait_log(&dir, "generation 1 freed");
    assert!(
        log.contains("configuration generation 1 freed, 1 live"),
        "the first configuration outlived its connection: {log}"
    );
}
