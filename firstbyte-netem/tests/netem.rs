//! Whole-tool tests: run the real `firstbyte-netem` binary (root needed: TUN devices and
//! network namespaces) and measure the emulated link from inside its namespaces with ping and
//! the crate's probe (`firstbyte-netem-probe`).
//!
//! Tests hold one lock so they never run at once (timing checks must not share the two
//! cores with each other), except the collision test, which starts two emulators on purpose.
//! Random draws are seeded (`--seed`), so the loss checks see the same drop pattern each run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

const NETEM: &str = env!("CARGO_BIN_EXE_firstbyte-netem");
const PROBE: &str = env!("CARGO_BIN_EXE_firstbyte-netem-probe");

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scratch directory unique to this test, removed when the test ends.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("fbnetem-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    Scratch(dir)
}

/// Runs the emulator with `args`, killed after 60 s at the latest.
fn netem(args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-s", "KILL", "60", NETEM])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run firstbyte-netem")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("stats json written");
    serde_json::from_str(&text).expect("stats json parses")
}

fn num(v: &Value, dir: &str, key: &str) -> f64 {
    v[dir][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{dir}.{key} missing in {v}"))
}

/// A lateness percentile (`p50_us`, `p90_us`, ...) of one direction, µs.
fn lateness_us(v: &Value, dir: &str, key: &str) -> f64 {
    v[dir]["lateness"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{dir} lateness {key} missing in {v}"))
}

/// Checks what the emulator controls about lateness: its median and 90th percentile. The tail
/// (p99, max) is the machine's: on this 2-vCPU VM an idle vCPU wakes ~0.1 ms late and now and
/// then several ms late (the host runs someone else), whatever the emulator does — measured
/// with a release build on a quiet machine, p99 idle ranged 0.2–5.6 ms over six runs while p90
/// stayed under 0.32 ms. A timer with millisecond resolution, a lost wake-up or a 50 µs slack
/// shows in the median and p90. The report carries `steal_ms`, `realtime` and `run_delay_ms`,
/// so a failure says whether the host, the scheduler or the emulator made packets late.
fn assert_lateness(v: &Value, p50_max_us: f64, p90_max_us: f64) {
    for dir in ["client_to_server", "server_to_client"] {
        let (p50, p90) = (lateness_us(v, dir, "p50_us"), lateness_us(v, dir, "p90_us"));
        assert!(
            p50 <= p50_max_us && p90 <= p90_max_us,
            "{dir} lateness p50 {p50} µs (≤ {p50_max_us}), p90 {p90} µs (≤ {p90_max_us}): {v}"
        );
    }
}

/// Parses `bytes=N seconds=S mbit_per_s=R` from the probe.
fn goodput_mbit(out: &str) -> f64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("mbit_per_s="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no goodput in {out:?}"))
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        stdout(out),
        stderr(out)
    );
}

#[test]
fn delay_gives_the_rtt_and_idle_lateness_is_small() {
    let _guard = serial();
    let dir = scratch("delay");
    let stats = dir.join("stats.json");
    let out = netem(&[
        "--delay",
        "50ms",
        "--stats-json",
        stats.to_str().unwrap_or_default(),
        "--",
        "sh",
        "-c",
        // 300 probes: p99 is then the third-worst, so one packet delayed by a scheduling
        // hiccup of the shared machine cannot decide it, while a systematic 1 ms still would.
        "timeout 15 ping -n -c 300 -i 0.01 \"$FB_SERVER_ADDR\"",
    ]);
    assert_success(&out);
    let mut rtts: Vec<f64> = stdout(&out)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").trim().parse().ok())
        .collect();
    assert!(
        rtts.len() >= 290,
        "only {} replies:\n{}",
        rtts.len(),
        stdout(&out)
    );
    rtts.sort_by(f64::total_cmp);
    let median = rtts[rtts.len() / 2];
    assert!(
        (95.0..=105.0).contains(&median),
        "median RTT {median} ms: {rtts:?}"
    );
    let v = read_json(&stats);
    for dir in ["client_to_server", "server_to_client"] {
        assert!(num(&v, dir, "packets_out") >= 290.0, "{v}");
    }
    assert_lateness(&v, 500.0, 1_000.0);
}

#[test]
fn bernoulli_loss_lies_in_the_binomial_interval() {
    let _guard = serial();
    let dir = scratch("loss");
    let stats = dir.join("stats.json");
    // 4 × 500 pings in parallel: each round trip survives with (1 - 0.1)^2 = 0.81.
    let out = netem(&[
        "--loss", "10%", "--seed", "12345", "--stats-json", stats.to_str().unwrap_or_default(),
        "--", "sh", "-c",
        "for i in 1 2 3 4; do timeout 20 ping -n -q -c 500 -i 0.001 -W 1 \"$FB_SERVER_ADDR\" & done; wait",
    ]);
    assert_success(&out);
    let text = stdout(&out);
    let (mut sent, mut received) = (0.0, 0.0);
    for line in text.lines().filter(|l| l.contains("packets transmitted")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        sent += fields[0].parse::<f64>().unwrap_or(0.0);
        received += fields[3].parse::<f64>().unwrap_or(0.0);
    }
    assert_eq!(sent, 2000.0, "{text}");
    let within = |observed: f64, n: f64, p: f64| {
        // Binomial 99% interval, normal approximation: p ± 2.576·sqrt(p(1−p)/n).
        let half = 2.576 * (p * (1.0 - p) / n).sqrt();
        (observed / n - p).abs() <= half
    };
    assert!(
        within(received, sent, 0.81),
        "{received}/{sent} round trips"
    );
    let v = read_json(&stats);
    for dir in ["client_to_server", "server_to_client"] {
        let n = num(&v, dir, "packets_in");
        let lost = num(&v, dir, "dropped_loss");
        assert!(
            n >= 1500.0 && within(lost, n, 0.1),
            "{dir}: {lost}/{n} lost"
        );
        assert_eq!(num(&v, dir, "packets_out"), n - lost);
    }
}

#[test]
fn rate_limit_sets_the_goodput() {
    let _guard = serial();
    let sink = format!("exec {PROBE} sink 5001");
    let out = netem(&[
        "--rate",
        "20mbit",
        "--server",
        &sink,
        "--wait-port",
        "5001",
        "--",
        PROBE,
        "send",
        "server",
        "5001",
        "5000000",
    ]);
    assert_success(&out);
    let mbit = goodput_mbit(&stdout(&out));
    assert!((17.0..=21.0).contains(&mbit), "goodput {mbit} Mbit/s");
}

#[test]
fn lateness_stays_low_under_100_mbit() {
    let _guard = serial();
    let dir = scratch("load");
    let stats = dir.join("stats.json");
    let sink = format!("exec {PROBE} sink 5001");
    let out = netem(&[
        "--rate",
        "100mbit",
        "--server",
        &sink,
        "--wait-port",
        "5001",
        "--stats-json",
        stats.to_str().unwrap_or_default(),
        "--",
        PROBE,
        "send",
        "server",
        "5001",
        "25000000",
    ]);
    assert_success(&out);
    let mbit = goodput_mbit(&stdout(&out));
    let v = read_json(&stats);
    // The limit holds (the rate's precision is rate_limit_sets_the_goodput's check, at a rate
    // a stolen CPU cannot disturb); the link still carries most of it. A host that takes the
    // emulator's CPU for milliseconds loses that link time (packets are stamped when read), so
    // the lower bound is loose: 69.8 Mbit/s was seen on a CI machine.
    assert!((50.0..=101.0).contains(&mbit), "goodput {mbit} Mbit/s: {v}");
    assert!(num(&v, "client_to_server", "packets_out") > 15_000.0, "{v}");
    assert_lateness(&v, 500.0, 2_000.0);
}

#[test]
fn exit_code_and_addresses_pass_through() {
    let _guard = serial();
    let dir = scratch("env");
    let seen = dir.join("server-env");
    let stats = dir.join("stats.json");
    let server = format!(
        "echo \"$FB_SERVER_ADDR $FB_CLIENT_ADDR\" > {}; exec sleep 60",
        seen.display()
    );
    let out = netem(&[
        "--server",
        &server,
        "--stats-json",
        stats.to_str().unwrap_or_default(),
        "--",
        "sh",
        "-c",
        "sleep 0.2; echo \"$FB_SERVER_ADDR $FB_CLIENT_ADDR\"; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let client_view = stdout(&out).trim().to_string();
    let server_view = std::fs::read_to_string(&seen)
        .unwrap_or_default()
        .trim()
        .to_string();
    assert_eq!(client_view, server_view);
    let v = read_json(&stats);
    let expected = format!(
        "{} {}",
        v["server_addr"].as_str().unwrap_or_default(),
        v["client_addr"].as_str().unwrap_or_default()
    );
    assert_eq!(client_view, expected);
    assert!(client_view.starts_with("198.1"), "{client_view}");
    assert_eq!(v["client_exit_code"], 7);
    // A client killed by a signal reports 128 + signal, as shells do.
    let out = netem(&["--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(out.status.code(), Some(137));
}

#[test]
fn usage_and_startup_errors_are_clear() {
    let _guard = serial();
    let out = netem(&["--delay", "50", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid time value \"50\""),
        "{}",
        stderr(&out)
    );

    let out = netem(&["--server", "exit 3", "--wait-port", "9", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("exited with status 3"),
        "{}",
        stderr(&out)
    );

    let start = Instant::now();
    let out = netem(&[
        "--server",
        "exec sleep 30",
        "--wait-port",
        "9",
        "--wait-timeout",
        "500ms",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("did not accept connections"),
        "{}",
        stderr(&out)
    );
    assert!(start.elapsed() < Duration::from_secs(10));

    let out = netem(&["--", "/nonexistent/command"]);
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn two_emulators_at_once_do_not_collide() {
    let _guard = serial();
    let dir = scratch("two");
    let runs: Vec<(std::process::Child, PathBuf)> = (0..2)
        .map(|i| {
            let stats = dir.join(format!("stats{i}.json"));
            let sink = format!("exec {PROBE} sink 5001");
            let child = Command::new("timeout")
                .args([
                    "-s", "KILL", "60", NETEM, "--delay", "5ms", "--server", &sink,
                ])
                .args(["--wait-port", "5001", "--stats-json"])
                .arg(&stats)
                .args(["--", PROBE, "send", "server", "5001", "2000000"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn firstbyte-netem");
            (child, stats)
        })
        .collect();
    let mut addrs = Vec::new();
    for (child, stats) in runs {
        let out = child.wait_with_output().expect("wait");
        assert_success(&out);
        let v = read_json(&stats);
        addrs.push(v["server_addr"].as_str().unwrap_or_default().to_string());
        // Each run only saw its own transfer: ~2 MB, not 4.
        let bytes = num(&v, "client_to_server", "bytes_in");
        assert!((2.0e6..3.0e6).contains(&bytes), "{bytes} bytes");
    }
    assert_ne!(addrs[0], addrs[1]);
}

/// Network namespaces ("net:[inode]") still referenced by any process or descriptor.
fn live_namespaces() -> Vec<String> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for p in procs.flatten() {
        let path = p.path();
        if let Ok(link) = std::fs::read_link(path.join("ns/net")) {
            found.push(link.to_string_lossy().into_owned());
        }
        if let Ok(fds) = std::fs::read_dir(path.join("fd")) {
            for fd in fds.flatten() {
                if let Ok(link) = std::fs::read_link(fd.path()) {
                    found.push(link.to_string_lossy().into_owned());
                }
            }
        }
    }
    found
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> usize {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .flatten()
        .filter(|p| {
            std::fs::read(p.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .count()
}

/// Starts an emulator whose server and client each leave a background process and record
/// their namespace; returns the child, the namespaces and the marker.
fn start_busy_emulator(dir: &Path) -> (std::process::Child, Vec<String>, String) {
    // A sleep length unique to this run marks its processes.
    let marker = format!(
        "{}.{}",
        4000 + std::process::id() % 1000,
        dir.to_string_lossy().len()
    );
    let server_ns = dir.join("server-ns");
    let client_ns = dir.join("client-ns");
    let server = format!(
        "readlink /proc/self/ns/net > {}; sleep {marker} & sleep {marker}",
        server_ns.display()
    );
    let client = format!(
        "readlink /proc/self/ns/net > {}; sleep {marker} & sleep {marker}",
        client_ns.display()
    );
    let child = Command::new(NETEM)
        .args([
            "--delay", "1ms", "--server", &server, "--", "sh", "-c", &client,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn firstbyte-netem");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut namespaces = Vec::new();
    while Instant::now() < deadline {
        namespaces = [&server_ns, &client_ns]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| s.starts_with("net:"))
            .collect();
        if namespaces.len() == 2 && processes_with(&marker) >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(namespaces.len(), 2, "commands did not start");
    (child, namespaces, marker)
}

/// Waits up to 5 s for every trace of a run to disappear.
fn assert_all_gone(namespaces: &[String], marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left_ns: Vec<String> = live_namespaces()
            .into_iter()
            .filter(|n| namespaces.contains(n))
            .collect();
        let left_procs = processes_with(marker);
        if left_ns.is_empty() && left_procs == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: namespaces {left_ns:?}, {left_procs} processes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nothing_is_left_after_sigkill_or_sigterm() {
    let _guard = serial();
    let host_links_before = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .map(|o| stdout(&o));
    let dir = scratch("kill9");
    let (mut child, namespaces, marker) = start_busy_emulator(&dir);
    assert_ne!(namespaces[0], namespaces[1]);
    // The namespaces are the run's own, not the host's.
    let host_ns = std::fs::read_link("/proc/self/ns/net").map(|l| l.to_string_lossy().into_owned());
    assert!(host_ns.is_ok_and(|h| !namespaces.contains(&h)));
    child.kill().expect("SIGKILL the emulator");
    let _ = child.wait();
    assert_all_gone(&namespaces, &marker);

    let dir = scratch("term");
    let (child, namespaces, marker) = start_busy_emulator(&dir);
    // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    assert_all_gone(&namespaces, &marker);

    // The host never sees the TUN devices, and `ip netns` stays untouched.
    let host_links_after = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .map(|o| stdout(&o));
    if let (Ok(before), Ok(after)) = (host_links_before, host_links_after) {
        assert_eq!(before.lines().count(), after.lines().count());
        assert!(!after.contains(" fbn"), "{after}");
    }
}
