//! Reading a server's CPU time and memory from `/proc`, and pinning it to one CPU.
//!
//! A server is a process tree (nginx: master + worker; h2o and firstbyte: one process with
//! threads). [`tree`] finds the root and its descendants from every `/proc/PID/stat`'s parent
//! field; [`sample`] sums, over that tree, `utime + stime` from `/proc/PID/stat` (all threads
//! of a process, in clock ticks) and the on-CPU nanoseconds of every thread from
//! `/proc/PID/task/TID/schedstat` (the same time at nanosecond resolution, which matters when
//! a run costs only a few hundred milliseconds), plus `VmRSS` and `smaps_rollup` `Pss`.
//! The parsers are plain functions over text so the unit tests need no process.

use std::fs;

/// What went wrong reading or parsing a `/proc` file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// The file could not be read (the process may have exited).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The `/proc` path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file's text was not in the expected shape.
    #[error("unexpected format in {what}")]
    Format {
        /// Which file or field.
        what: &'static str,
    },
    /// `sched_setaffinity(2)` failed.
    #[error("sched_setaffinity({tid}) failed: {source}")]
    Affinity {
        /// The thread id.
        tid: i32,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The fields of `/proc/PID/stat` the bench uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Parent process id (field 4).
    pub ppid: i32,
    /// User-mode CPU time of all threads, in clock ticks (field 14).
    pub utime: u64,
    /// Kernel-mode CPU time of all threads, in clock ticks (field 15).
    pub stime: u64,
}

/// Parses the text of `/proc/PID/stat`. The command name (field 2) is in parentheses and may
/// itself hold spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<Stat, ProcError> {
    let bad = ProcError::Format { what: "stat" };
    let close = text.rfind(')').ok_or(bad)?;
    // After ")": field 3 (state) is index 0, so field N is index N - 3.
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<&str, ProcError> {
        fields
            .get(n - 3)
            .copied()
            .ok_or(ProcError::Format { what: "stat" })
    };
    let num = |n: usize| -> Result<u64, ProcError> {
        field(n)?
            .parse()
            .map_err(|_| ProcError::Format { what: "stat" })
    };
    let ppid = field(4)?
        .parse()
        .map_err(|_| ProcError::Format { what: "stat ppid" })?;
    Ok(Stat {
        ppid,
        utime: num(14)?,
        stime: num(15)?,
    })
}

/// Parses `/proc/PID/task/TID/schedstat`: the first number is the time spent on a CPU, in ns.
pub fn parse_schedstat(text: &str) -> Result<u64, ProcError> {
    text.split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .ok_or(ProcError::Format { what: "schedstat" })
}

/// Finds a `Key:   1234 kB` line in `/proc/PID/status` or `smaps_rollup` and returns the KiB.
pub fn parse_kib(text: &str, key: &str) -> Result<u64, ProcError> {
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(key) {
            if let Some(rest) = rest.strip_prefix(':') {
                let mut parts = rest.split_whitespace();
                let value = parts.next().and_then(|v| v.parse().ok());
                if let (Some(value), Some("kB")) = (value, parts.next()) {
                    return Ok(value);
                }
                return Err(ProcError::Format { what: "kB line" });
            }
        }
    }
    Err(ProcError::Format {
        what: "missing kB key",
    })
}

/// The root and every descendant of `root`, given (pid, ppid) pairs of all processes.
/// The root comes first; a process whose parent chain never reaches `root` is left out.
pub fn descendants(root: i32, parents: &[(i32, i32)]) -> Vec<i32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for &(pid, ppid) in parents {
            if ppid == parent && !out.contains(&pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    out
}

fn read(path: &str) -> Result<String, ProcError> {
    fs::read_to_string(path).map_err(|source| ProcError::Read {
        path: path.to_string(),
        source,
    })
}

/// The process tree rooted at `root` (root first), read from `/proc`.
pub fn tree(root: i32) -> Result<Vec<i32>, ProcError> {
    let entries = fs::read_dir("/proc").map_err(|source| ProcError::Read {
        path: "/proc".into(),
        source,
    })?;
    let mut parents = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // Processes come and go while we scan: skip the ones that vanished.
        if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) {
            if let Ok(stat) = parse_stat(&text) {
                parents.push((pid, stat.ppid));
            }
        }
    }
    Ok(descendants(root, &parents))
}

/// Thread ids of one process.
pub fn threads(pid: i32) -> Result<Vec<i32>, ProcError> {
    let path = format!("/proc/{pid}/task");
    let entries = fs::read_dir(&path).map_err(|source| ProcError::Read { path, source })?;
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect())
}

/// CPU time and memory of a process tree at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Sum of `utime + stime` over the tree, clock ticks.
    pub ticks: u64,
    /// Sum of `stime` alone (kernel mode: syscalls, and on loopback the TCP receive path
    /// the sender runs), clock ticks.
    pub sys_ticks: u64,
    /// Sum of on-CPU time over every live thread of the tree, ns.
    pub sched_ns: u64,
    /// Sum of `VmRSS`, KiB.
    pub rss_kib: u64,
    /// Sum of `smaps_rollup` `Pss`, KiB (shared pages split between sharers).
    pub pss_kib: u64,
}

/// Reads one [`Sample`] of the given processes.
pub fn sample(pids: &[i32]) -> Result<Sample, ProcError> {
    let mut s = Sample::default();
    for &pid in pids {
        let stat = parse_stat(&read(&format!("/proc/{pid}/stat"))?)?;
        s.ticks += stat.utime + stat.stime;
        s.sys_ticks += stat.stime;
        for tid in threads(pid)? {
            if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")) {
                s.sched_ns += parse_schedstat(&text)?;
            }
        }
        s.rss_kib += parse_kib(&read(&format!("/proc/{pid}/status"))?, "VmRSS")?;
        s.pss_kib += parse_kib(&read(&format!("/proc/{pid}/smaps_rollup"))?, "Pss")?;
    }
    Ok(s)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions and only reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// CPU seconds between two samples: the nanosecond schedstat sum when it moved, else ticks.
pub fn cpu_seconds(before: &Sample, after: &Sample, ticks_per_second: u64) -> f64 {
    let ns = after.sched_ns.saturating_sub(before.sched_ns);
    if ns > 0 {
        ns as f64 / 1e9
    } else {
        after.ticks.saturating_sub(before.ticks) as f64 / ticks_per_second.max(1) as f64
    }
}

/// Percent of the CPU ticks between two samples spent in the kernel; `None` with no ticks.
pub fn sys_percent(before: &Sample, after: &Sample) -> Option<f64> {
    let all = after.ticks.saturating_sub(before.ticks);
    let sys = after.sys_ticks.saturating_sub(before.sys_ticks);
    (all > 0).then(|| 100.0 * sys as f64 / all as f64)
}

/// Pins one thread (or process, tid = 0 for the caller) to a single CPU.
pub fn pin(tid: i32, cpu: usize) -> Result<(), ProcError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, filled by CPU_SET below.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is checked against the set's capacity by CPU_SET's own bound.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the pointer and size describe the local set.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(ProcError::Affinity {
            tid,
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Pins every thread of every process in `pids` to `cpu`.
pub fn pin_all(pids: &[i32], cpu: usize) -> Result<(), ProcError> {
    for &pid in pids {
        for tid in threads(pid)? {
            pin(tid, cpu)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_last_paren() {
        let text = "1234 (we (ird) name) S 77 1234 1234 0 -1 4194560 500 0 0 0 \
                    31 12 0 0 20 0 3 0 100 1000 200 18446744073709551615";
        let stat = parse_stat(text).expect("parses");
        assert_eq!(
            stat,
            Stat {
                ppid: 77,
                utime: 31,
                stime: 12
            }
        );
    }

    #[test]
    fn stat_rejects_truncated_text() {
        assert!(parse_stat("1 (x) S 0 1").is_err());
        assert!(parse_stat("no parens at all").is_err());
    }

    #[test]
    fn schedstat_first_number_is_ns() {
        assert_eq!(parse_schedstat("371991 1556577 3\n").ok(), Some(371_991));
        assert!(parse_schedstat("").is_err());
    }

    #[test]
    fn kib_lines_by_exact_key() {
        let status = "Name:\tnginx\nVmRSSX:\t1 kB\nVmRSS:\t   5120 kB\nRssAnon:\t 100 kB\n";
        assert_eq!(parse_kib(status, "VmRSS").ok(), Some(5120));
        let rollup = "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss: 900 kB\nPss: 612 kB\n";
        assert_eq!(parse_kib(rollup, "Pss").ok(), Some(612));
        assert!(parse_kib(rollup, "Swap").is_err());
        assert!(parse_kib("Pss: lots kB\n", "Pss").is_err());
    }

    #[test]
    fn descendants_walks_the_whole_tree_root_first() {
        let parents = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 10)];
        let mut got = descendants(10, &parents);
        assert_eq!(got[0], 10);
        got.sort();
        assert_eq!(got, vec![10, 11, 12, 14]);
        assert_eq!(descendants(99, &parents), vec![99]);
    }

    #[test]
    fn cpu_seconds_prefers_nanoseconds() {
        let a = Sample {
            ticks: 10,
            sched_ns: 1_000_000,
            ..Sample::default()
        };
        let b = Sample {
            ticks: 12,
            sched_ns: 26_000_000,
            ..Sample::default()
        };
        assert!((cpu_seconds(&a, &b, 100) - 0.025).abs() < 1e-12);
        let c = Sample {
            ticks: 15,
            sched_ns: 1_000_000,
            ..Sample::default()
        };
        assert!((cpu_seconds(&a, &c, 100) - 0.05).abs() < 1e-12);
    }

    #[test]
    fn sys_percent_of_tick_deltas() {
        let a = Sample {
            ticks: 100,
            sys_ticks: 40,
            ..Sample::default()
        };
        let b = Sample {
            ticks: 200,
            sys_ticks: 115,
            ..Sample::default()
        };
        assert_eq!(sys_percent(&a, &b), Some(75.0));
        assert_eq!(sys_percent(&a, &a), None);
    }

    #[test]
    fn own_process_samples() {
        let pid = std::process::id() as i32;
        let s = sample(&[pid]).expect("own /proc is readable");
        assert!(s.rss_kib > 0 && s.pss_kib > 0 && s.sched_ns > 0);
        assert_eq!(tree(pid).expect("tree")[0], pid);
    }
}
