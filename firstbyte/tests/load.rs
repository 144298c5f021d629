//! Reloads under load: 110 `SIGHUP`s (a new configuration generation each, some with a
//! changed file) while h2load keeps a TLS + HTTP/2 server busy. No request fails and memory
//! stays flat.
//!
//! On each reload every HTTP/2 connection of the old generation gets GOAWAY and finishes its
//! streams in flight, as nginx's old workers do (nginx marks every HTTP/2 connection idle for
//! `ngx_close_idle_connections`, so each gets GOAWAY). h2load cannot go on after a GOAWAY: it
//! counts the requests it had yet to send on that connection as failed, whatever the server
//! did; and a request it queued in the same read as the GOAWAY is counted as started, then
//! failed when nghttp2 refuses to send it (`NGHTTP2_ERR_START_STREAM_NOT_ALLOWED`). So the
//! load here is h2load run again and again, each run lasting until its connections are sent
//! away, and "no failed request" is proven from both ends: every request the server started
//! (`stub_status`'s counter) ended in the access log as a 200 with its whole body, their number
//! equals h2load's 2xx count, no answer was anything but 2xx, and h2load's started-but-failed
//! requests per run are at most what it can have queued (connections × streams), none of
//! which the server ever started.
//!
//! Memory: the server's `Pss` after a warm-up of 10 reloads, after 50 more and after 50 more,
//! each measured once the load has stopped and the retired generations are gone. A leak of a
//! generation per reload would show: each generation carries 300 extra server blocks.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;

/// Plain server blocks in each generation: they make a generation heavy enough for a leak of
/// one per reload to stand out of the allocator's noise.
const EXTRA_SERVERS: usize = 300;

const INDEX: &str = "<h1>hello from firstbyte</h1>\n";

fn conf(dir: &std::path::Path, ports: &[u16], generation: usize) -> String {
    let d = dir.display();
    let certs = certs();
    let mut extra = String::new();
    for i in 0..EXTRA_SERVERS {
        extra.push_str(&format!(
            "    server {{ listen 127.0.0.1:{}; server_name s{i}.test; location / {{ return 200 \"{generation}\"; }} }}\n",
            ports[1]
        ));
    }
    extra.push_str(&format!(
        "    server {{ listen 127.0.0.1:{}; server_name status; location = /status {{ stub_status; }} }}\n",
        ports[1]
    ));
    format!(
        r#"pid off;
error_log {d}/error.log info;
events {{}}
http {{
    access_log off;
    log_format st "$status $body_bytes_sent";
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_session_timeout {timeout}m;
        root {d}/html;
        access_log {d}/access.log st;
        add_header X-Generation {generation};
    }}
{extra}}}
"#,
        port = ports[0],
        cert = certs.cert("localhost").display(),
        key = certs.key("localhost").display(),
        // A changed TLS setting: the server block gets a new rustls config too.
        timeout = 5 + generation % 2,
    )
}

/// One h2load run's summary.
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    total: u64,
    started: u64,
    done: u64,
    succeeded: u64,
    failed: u64,
    timeout: u64,
    s2xx: u64,
    other_status: u64,
}

/// Reads h2load's `requests:` and `status codes:` lines.
fn parse_h2load(text: &str) -> Option<Run> {
    let nums = |line: &str| -> Vec<u64> {
        line.split([' ', ','])
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    let req = nums(text.lines().find(|l| l.starts_with("requests:"))?);
    let st = nums(text.lines().find(|l| l.starts_with("status codes:"))?);
    if req.len() != 7 || st.len() != 4 {
        return None;
    }
    Some(Run {
        total: req[0],
        started: req[1],
        done: req[2],
        succeeded: req[3],
        failed: req[4],
        timeout: req[6],
        s2xx: st[0],
        other_status: st[1] + st[2] + st[3],
    })
}

#[test]
fn h2load_parse() {
    let text = "finished in 645.41ms, 756.11 req/s, 37.08KB/s\n\
        requests: 6000 total, 488 started, 488 done, 488 succeeded, 5512 failed, 5512 errored, 0 timeout\n\
        status codes: 488 2xx, 0 3xx, 1 4xx, 2 5xx\n";
    let r = parse_h2load(text).unwrap();
    assert_eq!(
        (
            r.total,
            r.started,
            r.succeeded,
            r.failed,
            r.s2xx,
            r.other_status
        ),
        (6000, 488, 488, 5512, 488, 3)
    );
    assert!(parse_h2load("requests: 1 total\n").is_none());
}

/// h2load's connections and streams per connection.
const CONNECTIONS: u64 = 4;
const STREAMS: u64 = 8;

/// Runs h2load against `url` again and again until `stop`; returns every run.
fn load(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Run>> {
    std::thread::spawn(move || {
        let mut runs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            // Bounded: 3,000 requests at most per run (a run with no reload in it ends there).
            let (c, m) = (CONNECTIONS.to_string(), STREAMS.to_string());
            let out = run(
                "h2load",
                &["-n", "3000", "-c", &c, "-m", &m, "-t", "1", &url],
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let r = parse_h2load(&text).unwrap_or_else(|| {
                panic!(
                    "h2load output: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            runs.push(r);
        }
        runs
    })
}

/// The server's proportional set size, KiB.
fn pss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("Pss line")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Lines of the error log that say a reload finished.
fn reloads_done(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("error.log"))
        .unwrap_or_default()
        .matches("reconfiguration done")
        .count()
}

/// `n` reloads under load, ~60 ms apart, each waited for; every fifth rewrites the config
/// (a new generation number, a new rustls config). Returns h2load's runs.
fn reloads_under_load(
    server: &Server,
    ports: &[u16],
    url: &str,
    generation: &mut usize,
    n: usize,
) -> Vec<Run> {
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(url.to_string(), stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..n {
        if i % 5 == 0 {
            *generation += 1;
            std::fs::write(&server.conf, conf(&server.dir, ports, *generation)).unwrap();
        }
        let before = reloads_done(&server.dir);
        server.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while reloads_done(&server.dir) == before {
            assert!(
                Instant::now() < deadline,
                "reload not done:\n{}",
                server.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(60));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap()
}

/// Memory once the load is over and retired generations are gone.
fn settled_pss(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_millis(1500));
    pss_kib(pid)
}

/// Access-log lines: (200 with the whole body, anything else).
fn access_log_counts(dir: &std::path::Path) -> (u64, Vec<String>) {
    let text = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    let whole = format!("200 {}", INDEX.len());
    let mut ok = 0;
    let mut other = Vec::new();
    for l in text.lines() {
        if l == whole {
            ok += 1;
        } else {
            other.push(l.to_string());
        }
    }
    (ok, other)
}

#[test]
fn reloads_under_h2load_fail_nothing_and_leak_nothing() {
    let dir = tempdir("load");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), INDEX).unwrap();
    let ports = [free_port(), free_port()];
    let mut generation = 0;
    let server = Server::start_in(&dir, &conf(&dir, &ports, generation), ports[0]);
    let pid = server.child.id();
    let url = format!("https://127.0.0.1:{}/index.html", ports[0]);

    let all = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let phase = |n: usize, generation: &mut usize| {
        let runs = reloads_under_load(&server, &ports, &url, generation, n);
        eprintln!("{n} reloads done at {:?}", t0.elapsed());
        all.lock().unwrap().extend(runs.iter().copied());
        (runs, settled_pss(pid), open_fds(pid))
    };
    let (_, base_pss, base_fds) = phase(10, &mut generation);
    let (runs50, pss50, fds50) = phase(50, &mut generation);
    let (runs100, pss100, fds100) = phase(50, &mut generation);
    assert_eq!(reloads_done(&dir), 110);

    let runs = all.lock().unwrap().clone();
    let sum = |f: fn(&Run) -> u64| runs.iter().map(f).sum::<u64>();
    let summary = format!(
        "{} h2load runs: {} total, {} started, {} succeeded, {} failed (of which never sent \
         after a GOAWAY: {}), 2xx {}, other {}; Pss KiB: {base_pss} → {pss50} (50) → {pss100} \
         (100); fds {base_fds} → {fds50} → {fds100}",
        runs.len(),
        sum(|r| r.total),
        sum(|r| r.started),
        sum(|r| r.succeeded),
        sum(|r| r.failed),
        sum(|r| r.total - r.started),
        sum(|r| r.s2xx),
        sum(|r| r.other_status),
    );
    eprintln!("{summary}");

    // Load: each phase's h2load runs did real work.
    for (what, rs) in [("50", &runs50), ("100", &runs100)] {
        let ok: u64 = rs.iter().map(|r| r.succeeded).sum();
        assert!(ok >= 500, "phase {what}: only {ok} requests: {summary}");
    }
    // None timed out, every answer was 2xx, and the only requests h2load started that failed
    // are those it had queued when a GOAWAY came.
    for r in &runs {
        assert_eq!(r.started, r.done, "{r:?}");
        assert!(
            r.started - r.succeeded <= CONNECTIONS * STREAMS,
            "more requests failed than h2load can have queued: {r:?}"
        );
        assert_eq!(r.timeout, 0, "{r:?}");
        assert_eq!(r.other_status, 0, "{r:?}");
        assert_eq!(r.s2xx, r.succeeded, "{r:?}");
    }
    // Every request the server started was answered 200 with its whole body, and every such
    // answer reached h2load: none of h2load's failed requests was ever started by the server.
    let (logged, other) = access_log_counts(&dir);
    assert!(
        other.is_empty(),
        "other access-log lines: {:?}",
        &other[..other.len().min(10)]
    );
    assert_eq!(logged, sum(|r| r.s2xx), "{summary}");
    let status = curl(&[
        &format!("http://127.0.0.1:{}/status", ports[1]),
        "-H",
        "Host: status",
    ]);
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let started: u64 = status
        .lines()
        .nth(2)
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("stub_status: {status}"));
    assert_eq!(
        started,
        logged + 1,
        "requests started by the server: {status}"
    );

    // Flat memory: a generous bound over the warm baseline, and no growth from 50 to 100.
    assert!(
        pss100 < base_pss + 20 * 1024 && pss100 * 2 < base_pss * 3,
        "{summary}"
    );
    // 8 MiB: the allocator's arenas under load once held 4.6 MiB more at the 100th reload
    // than at the 50th (and none in other runs); a leak of a configuration per reload (50
    // servers, their TLS configs) would pass it within the 50 reloads.
    assert!(
        pss100 < pss50 + 8 * 1024,
        "grew from 50 to 100 reloads: {summary}"
    );
    assert!(fds100 <= base_fds + 2, "descriptors leak: {summary}");
    let errors = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    for bad in ["[alert]", "[crit]", "[emerg]", "panicked"] {
        assert!(!errors.contains(bad), "{bad} in the error log");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
