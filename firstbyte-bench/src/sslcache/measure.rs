//! Running the servers and reading what they cost: `-t` under `wait4(2)` (wall time, peak
//! RSS), `-t` under callgrind (instructions), reload time from SIGHUP to the
//! "reconfiguration done" notice, and a process's on-CPU time from `/proc`.
//!
//! The text parsers ([`callgrind_total`], [`schedstat_ns`]) are plain functions for the unit
//! tests; the rest starts processes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// One `-t` run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestRun {
    /// From spawn to exit.
    pub wall: Duration,
    /// Peak resident set, KiB (`ru_maxrss`).
    pub maxrss_kib: u64,
    /// User + system CPU time (`ru_utime + ru_stime`).
    pub cpu: Duration,
}

/// Runs `argv` to completion (stdout and stderr to `log`), with its wall time and peak RSS
/// from `wait4(2)`. A non-zero exit is an error carrying the log's tail.
pub fn run_test(argv: &[String], log: &Path) -> Result<TestRun> {
    let out = std::fs::File::create(log)?;
    let t = Instant::now();
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("start {}", argv.join(" ")))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with pointers to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = t.elapsed();
    // The child is reaped; dropping `child` does not wait again.
    drop(child);
    if r != pid {
        bail!("wait4({pid}) failed: {}", std::io::Error::last_os_error());
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: String = text.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        bail!("{} failed (status {status}): {tail}", argv[0]);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok(TestRun {
        wall,
        maxrss_kib: usage.ru_maxrss.max(0) as u64,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
    })
}

/// Instructions of `argv` under `valgrind --tool=callgrind` (its `totals:` line).
pub fn callgrind(argv: &[String], work: &Path, tag: &str) -> Result<u64> {
    let out = work.join(format!("callgrind.{tag}.out"));
    let mut full = vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}", out.display()),
    ];
    full.extend(argv.iter().cloned());
    run_test(&full, &work.join(format!("callgrind.{tag}.log")))?;
    let text = std::fs::read_to_string(&out).with_context(|| format!("read {}", out.display()))?;
    // The profile is large and only its total is needed.
    let _ = std::fs::remove_file(&out);
    callgrind_total(&text).context("no totals: line in the callgrind output")
}

/// Instructions per no-change reload of a server started from `argv` under callgrind: the
/// counters are zeroed once it listens on `port` (`callgrind_control -z`), `n` SIGHUPs are
/// each waited for ("reconfiguration done" in `log`, then 200 ms for the old site's teardown
/// on its blocking thread), and the dump (`callgrind_control -d`) is divided by `n`.
pub fn callgrind_reloads(
    argv: &[String],
    port: u16,
    log: &Path,
    work: &Path,
    n: usize,
) -> Result<u64> {
    let prefix = work.join("callgrind.reload");
    let mut full = vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        format!("--callgrind-out-file={}.%p", prefix.display()),
    ];
    full.extend(argv.iter().cloned());
    let mut server = Running::start(&full, port, log, &work.join("callgrind.reload.log"))?;
    let pid = server.pid();
    let control = |flag: &str| -> Result<()> {
        let st = Command::new("callgrind_control")
            .args([flag, &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("run callgrind_control")?;
        if !st.success() {
            bail!("callgrind_control {flag} {pid} failed: {st}");
        }
        Ok(())
    };
    control("-z")?;
    for _ in 0..n.max(1) {
        server.reload()?;
        std::thread::sleep(Duration::from_millis(200));
    }
    control("-d")?;
    // The dump is written by the process itself: wait for it.
    let dump = std::path::PathBuf::from(format!("{}.{pid}.1", prefix.display()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let total = loop {
        if let Some(t) = std::fs::read_to_string(&dump)
            .ok()
            .as_deref()
            .and_then(callgrind_total)
        {
            break t;
        }
        if Instant::now() > deadline {
            bail!("no callgrind dump at {}", dump.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    server.stop();
    for f in [
        dump,
        std::path::PathBuf::from(format!("{}.{pid}", prefix.display())),
    ] {
        let _ = std::fs::remove_file(f);
    }
    Ok(total / n.max(1) as u64)
}

/// The `totals:` (or `summary:`) count of a callgrind output file.
pub fn callgrind_total(text: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The first field of `/proc/PID/task/TID/schedstat`: nanoseconds on CPU.
pub fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// On-CPU nanoseconds of every thread of process `pid`.
pub fn cpu_ns(pid: i32) -> Result<u64> {
    let mut total = 0;
    let dir = format!("/proc/{pid}/task");
    for e in std::fs::read_dir(&dir).with_context(|| format!("read {dir}"))? {
        let p = e?.path().join("schedstat");
        if let Ok(t) = std::fs::read_to_string(&p) {
            total += schedstat_ns(&t).unwrap_or(0);
        }
    }
    Ok(total)
}

/// A firstbyte started in the foreground, for reloads.
pub struct Running {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Running {
    /// Starts `argv` and waits (up to 120 s) until `port` accepts.
    pub fn start(argv: &[String], port: u16, log: &Path, stderr: &Path) -> Result<Running> {
        let out = std::fs::File::create(stderr)?;
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("start {}", argv.join(" ")))?;
        let mut r = Running {
            child,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(r);
            }
            if let Some(s) = r.child.try_wait()? {
                bail!("{} exited with {s} before listening", argv[0]);
            }
            if Instant::now() > deadline {
                r.stop();
                bail!("{} did not listen on {addr} within 120 s", argv[0]);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends SIGHUP and returns the time until a new "reconfiguration done" line appears in
    /// the error log (polled every millisecond; up to 120 s). An `[emerg]` line is an error.
    pub fn reload(&self) -> Result<Duration> {
        let start_len = std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let t = Instant::now();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.pid(), libc::SIGHUP) };
        loop {
            let text = std::fs::read(&self.log).unwrap_or_default();
            let new = String::from_utf8_lossy(text.get(start_len as usize..).unwrap_or_default());
            if new.contains("reconfiguration done") {
                return Ok(t.elapsed());
            }
            if let Some(l) = new.lines().find(|l| l.contains("[emerg]")) {
                bail!("reload failed: {l}");
            }
            if t.elapsed() > Duration::from_secs(120) {
                bail!("no \"reconfiguration done\" within 120 s");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The last "ssl object cache" line of the error log.
    pub fn last_cache_line(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.log).ok()?;
        text.lines()
            .rev()
            .find(|l| l.contains("ssl object cache:"))
            .map(|l| l.to_string())
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_callgrind_and_schedstat() {
        let out = "events: Ir\nfn=main\n1 5\nsummary: 123456\ntotals: 123456\n";
        assert_eq!(callgrind_total(out), Some(123_456));
        assert_eq!(callgrind_total("events: Ir\n"), None);
        assert_eq!(schedstat_ns("5080000 1200 33\n"), Some(5_080_000));
        assert_eq!(schedstat_ns(""), None);
    }

    #[test]
    fn run_test_reports_failure_and_memory() {
        let dir = std::env::temp_dir().join(format!("fb-sslcache-m-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ok = run_test(&["true".to_string()], &dir.join("a.log")).expect("true runs");
        assert!(ok.maxrss_kib > 0);
        let failed = run_test(&["false".to_string()], &dir.join("b.log"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(failed.is_err());
    }
}
