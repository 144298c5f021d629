//! `firstbyte-bench ktls [--rounds N] [--single-mb N] [--small N] [--small-kb N] [--out DIR]`:
//! kernel TLS + `sendfile` against user-space TLS and against nginx's kTLS.
//!
//! This machine's kernel has no kTLS, so the measuring happens in a VM: `scripts/ktls-vm
//! --bench` boots Debian's own kernel under qemu's software emulation and runs
//! `bench/ktls-guest.sh` there, which starts three servers side by side — firstbyte with
//! `ssl_conf_command Options KTLS` (`fb-ktls`), the same without it (`fb-user`), and Debian's
//! nginx with `ssl_conf_command Options KTLS; sendfile on;` (`nginx-ktls`) — and downloads with
//! curl (HTTP/1.1, TLS 1.3 AES-128-GCM): one file over one connection (`single`), and many
//! small files, a new connection each (`small`). Rounds interleave the servers, rotating
//! the order. Each run reports its wall time, the server's CPU ticks (`/proc/PID/stat`,
//! every process of the server) and how many connections the kernel encrypted for
//! (`/proc/net/tls_stat`); this side takes the medians over rounds and the ratios. Under
//! emulation only the ratios mean anything, and the client (curl decrypting in user space)
//! shares the one emulated CPU: throughput understates what the server side gains, CPU per
//! GiB is the server's own.
//!
//! `--h2` runs the HTTP/2 cases instead (h2load in the guest, one connection each): the large
//! file (`h2-single`) and the small files, 10 streams at a time (`h2-small`). There `fb-ktls`
//! runs with `FIRSTBYTE_KTLS_H2=1`, so its HTTP/2 connections switch to kernel TLS (DATA frames
//! written through the kernel's records), against the same server in user space and nginx,
//! whose HTTP/2 writes go through OpenSSL's kTLS.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::{positive, Common};

/// Options of `firstbyte-bench ktls`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Rounds (each runs every server once per case) [default: 5, or 1 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    rounds: Option<usize>,
    /// The single-connection file, MB [default: 200, or 5 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    single_mb: Option<usize>,
    /// Small files, one connection each [default: 200, or 10 with --quick].
    #[arg(long, value_name = "N", value_parser = positive)]
    small: Option<usize>,
    /// Size of each small file, KB [default: 100].
    #[arg(long, value_name = "N", value_parser = positive)]
    small_kb: Option<usize>,
    /// The firstbyte binary [default: target/release/firstbyte].
    #[arg(long, value_name = "PATH")]
    firstbyte: Option<PathBuf>,
    /// Summarize a saved run (its `guest.txt`) instead of running the VM.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// HTTP/2 (h2load, one connection per case) in place of HTTP/1.1 (curl); the single file
    /// then defaults to 100 MB.
    #[arg(long)]
    h2: bool,
}

/// One run, as the guest reported it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    server: String,
    case: String,
    round: usize,
    seconds: f64,
    cpu_seconds: f64,
    bytes: u64,
    tls_tx: u64,
}

/// Parses a `bench: SERVER CASE ROUND key=value...` line.
pub fn parse_line(line: &str) -> Option<Run> {
    let rest = line.strip_prefix("bench: ")?;
    let mut it = rest.split_whitespace();
    let server = it.next()?.to_string();
    let case = it.next()?.to_string();
    let round = it.next()?.parse().ok()?;
    let kv: BTreeMap<&str, &str> = it.filter_map(|t| t.split_once('=')).collect();
    let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok());
    let hz = num("ticks_per_s").filter(|h| *h > 0.0)?;
    Some(Run {
        server,
        case,
        round,
        seconds: num("seconds")?,
        cpu_seconds: num("cpu_ticks")? / hz,
        bytes: num("bytes")? as u64,
        tls_tx: num("tls_tx")? as u64,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Medians of one server in one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    server: String,
    case: String,
    runs: usize,
    /// MB/s (10^6 bytes per second of wall time).
    throughput_mb_s: f64,
    /// Server CPU seconds per GiB sent.
    cpu_s_per_gib: f64,
    /// The best run's MB/s: on a shared host the slow runs are the ones other work slowed.
    best_throughput_mb_s: f64,
    /// The best run's server CPU seconds per GiB.
    best_cpu_s_per_gib: f64,
    /// Runs in which the kernel encrypted (a kTLS server must show it in every run).
    kernel_runs: usize,
}

/// The medians per (server, case).
pub fn cells(runs: &[Run]) -> Vec<Cell> {
    let mut keys: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r.server.clone(), r.case.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|(server, case)| {
            let rs: Vec<&Run> = runs
                .iter()
                .filter(|r| r.server == server && r.case == case)
                .collect();
            let tput: Vec<f64> = rs
                .iter()
                .map(|r| r.bytes as f64 / 1e6 / r.seconds)
                .collect();
            let cpu: Vec<f64> = rs
                .iter()
                .map(|r| r.cpu_seconds / (r.bytes as f64 / (1u64 << 30) as f64))
                .collect();
            Cell {
                runs: rs.len(),
                best_throughput_mb_s: tput.iter().copied().fold(f64::NAN, f64::max),
                best_cpu_s_per_gib: cpu.iter().copied().fold(f64::NAN, f64::min),
                throughput_mb_s: median(tput),
                cpu_s_per_gib: median(cpu),
                kernel_runs: rs.iter().filter(|r| r.tls_tx > 0).count(),
                server,
                case,
            }
        })
        .collect()
}

fn summary(cells: &[Cell], command: &str) -> String {
    let get = |s: &str, c: &str| cells.iter().find(|x| x.server == s && x.case == c);
    let h2 = cells.iter().any(|c| c.case.starts_with("h2-"));
    let mut out = if h2 {
        String::from(
            "# Kernel TLS for HTTP/2 (firstbyte-bench ktls --h2)\n\n\
             Debian's 6.1 kernel under qemu TCG (one emulated CPU, shared by server and h2load):\n\
             only ratios mean anything. HTTP/2 over TLS 1.3 AES-128-GCM, one connection per run;\n\
             fb-ktls: firstbyte with FIRSTBYTE_KTLS_H2=1 (HTTP/2 frames through kernel TLS).\n\
             Medians over rounds.\n\n",
        )
    } else {
        String::from(
            "# Kernel TLS + sendfile (firstbyte-bench ktls)\n\n\
             Debian's 6.1 kernel under qemu TCG (one emulated CPU, shared by server and curl):\n\
             only ratios mean anything. HTTP/1.1, TLS 1.3 AES-128-GCM. Medians over rounds.\n\n",
        )
    };
    out += "| server | case | runs | kTLS runs | MB/s | server CPU s/GiB | best MB/s | best CPU s/GiB |\n|---|---|---|---|---|---|---|---|\n";
    for c in cells {
        out += &format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            c.server,
            c.case,
            c.runs,
            c.kernel_runs,
            c.throughput_mb_s,
            c.cpu_s_per_gib,
            c.best_throughput_mb_s,
            c.best_cpu_s_per_gib
        );
    }
    out += "\nRatios of medians (of best runs in brackets):\n\n| case | kTLS/user throughput | kTLS/user CPU per GiB | fb kTLS / nginx kTLS throughput | fb kTLS / nginx kTLS CPU per GiB |\n|---|---|---|---|---|\n";
    for case in ["single", "small", "h2-single", "h2-small"] {
        if let (Some(k), Some(u), Some(n)) = (
            get("fb-ktls", case),
            get("fb-user", case),
            get("nginx-ktls", case),
        ) {
            out += &format!(
                "| {case} | {:.2}× ({:.2}×) | {:.2}× ({:.2}×) | {:.2}× ({:.2}×) | {:.2}× ({:.2}×) |\n",
                k.throughput_mb_s / u.throughput_mb_s,
                k.best_throughput_mb_s / u.best_throughput_mb_s,
                k.cpu_s_per_gib / u.cpu_s_per_gib,
                k.best_cpu_s_per_gib / u.best_cpu_s_per_gib,
                k.throughput_mb_s / n.throughput_mb_s,
                k.best_throughput_mb_s / n.best_throughput_mb_s,
                k.cpu_s_per_gib / n.cpu_s_per_gib,
                k.best_cpu_s_per_gib / n.best_cpu_s_per_gib,
            );
        }
    }
    if !h2 {
        out += "\nTargets (issue 12): kTLS ≥ 1.3× user-space throughput, ≤ 0.7× its CPU per GiB, ≥ nginx kTLS.\n";
    }
    out += &format!("\nRerun: `{command}`\n");
    out
}

/// Runs the bench; the exit code.
pub fn main(args: Args) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("firstbyte-bench ktls: {e:#}");
            1
        }
    }
}

fn run(args: Args) -> Result<()> {
    let quick = args.common.quick;
    let rounds = args.rounds.unwrap_or(if quick { 1 } else { 5 });
    let single_mb = args.single_mb.unwrap_or(if quick {
        5
    } else if args.h2 {
        100
    } else {
        200
    });
    let small = args.small.unwrap_or(if quick { 10 } else { 200 });
    let small_kb = args.small_kb.unwrap_or(100);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().context("the checkout")?;
    let command = format!(
        "cargo build --release -p firstbyte && cargo run --release -p firstbyte-bench -- ktls{} --rounds {rounds} --single-mb {single_mb} --small {small} --small-kb {small_kb}",
        if args.h2 { " --h2" } else { "" }
    );
    if let Some(saved) = &args.from {
        let text = std::fs::read_to_string(saved).with_context(|| saved.display().to_string())?;
        let runs: Vec<Run> = text.lines().filter_map(parse_line).collect();
        let out = args.common.out.unwrap_or_else(|| saved.with_file_name(""));
        return write_report(&out, &runs, &command);
    }
    let fb = args
        .firstbyte
        .unwrap_or_else(|| root.join("target/release/firstbyte"));
    let fb = fb
        .canonicalize()
        .with_context(|| format!("{} (cargo build --release -p firstbyte)", fb.display()))?;
    let out_dir = args.common.out.unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        root.join(format!("bench/out/ktls-{stamp}"))
    });
    std::fs::create_dir_all(&out_dir).with_context(|| out_dir.display().to_string())?;
    eprintln!(
        "firstbyte-bench ktls: {}{rounds} rounds, {single_mb} MB single, {small} × {small_kb} KB, in a VM (minutes)",
        if args.h2 { "HTTP/2, " } else { "" }
    );
    let output = Command::new("bash")
        .arg(root.join("scripts/ktls-vm"))
        .arg("--bench")
        .arg(&fb)
        .args([rounds, single_mb, small, small_kb].map(|n| n.to_string()))
        .args(args.h2.then_some("h2"))
        .output()
        .context("scripts/ktls-vm")?;
    let text = String::from_utf8_lossy(&output.stdout);
    std::fs::write(out_dir.join("guest.txt"), text.as_bytes())?;
    let runs: Vec<Run> = text.lines().filter_map(parse_line).collect();
    if !output.status.success() || runs.is_empty() {
        bail!(
            "the VM run failed:\n{}{}",
            text,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    write_report(&out_dir, &runs, &command)
}

fn write_report(out_dir: &std::path::Path, runs: &[Run], command: &str) -> Result<()> {
    if runs.is_empty() {
        bail!("no runs to report");
    }
    let cells = cells(runs);
    let md = summary(&cells, command);
    #[derive(Serialize)]
    struct Results<'a> {
        command: &'a str,
        runs: &'a [Run],
        cells: &'a [Cell],
    }
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_string_pretty(&Results {
            command,
            runs,
            cells: &cells,
        })?,
    )?;
    std::fs::write(out_dir.join("summary.md"), &md)?;
    println!("{md}\nWritten to {}", out_dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_medians_divide_right() {
        let r = parse_line(
            "bench: fb-ktls single 2 seconds=2.000 cpu_ticks=50 ticks_per_s=100 bytes=1073741824 tls_tx=1",
        )
        .unwrap();
        assert_eq!(r.server, "fb-ktls");
        assert_eq!(r.round, 2);
        assert_eq!(r.cpu_seconds, 0.5);
        assert_eq!(parse_line("bench: done"), None);
        assert_eq!(
            parse_line("bench: x y 1 seconds=1 cpu_ticks=1 ticks_per_s=0 bytes=1 tls_tx=0"),
            None
        );
        let mut runs = vec![r.clone()];
        runs.push(Run {
            seconds: 4.0,
            cpu_seconds: 1.5,
            round: 1,
            ..r.clone()
        });
        runs.push(Run {
            seconds: 1.0,
            cpu_seconds: 1.0,
            round: 3,
            tls_tx: 0,
            ..r
        });
        let c = cells(&runs);
        assert_eq!(c.len(), 1);
        // Throughputs 536.9, 268.4, 1073.7 MB/s: median 536.9; CPU per GiB 0.5, 1.5, 1.0: 1.0.
        assert!((c[0].throughput_mb_s - 536.870912).abs() < 1e-6, "{c:?}");
        assert_eq!(c[0].cpu_s_per_gib, 1.0);
        assert_eq!(c[0].kernel_runs, 2);
        assert!(
            (c[0].best_throughput_mb_s - 1073.741824).abs() < 1e-6,
            "{c:?}"
        );
        assert_eq!(c[0].best_cpu_s_per_gib, 0.5);
    }

    #[test]
    fn the_h2_summary_compares_the_h2_cases() {
        let line = |server: &str, case: &str, seconds: f64| {
            parse_line(&format!(
                "bench: {server} {case} 1 seconds={seconds} cpu_ticks=100 ticks_per_s=100 bytes=20000000 tls_tx=1"
            ))
            .unwrap()
        };
        let runs = vec![
            line("fb-ktls", "h2-single", 4.0),
            line("fb-user", "h2-single", 2.0),
            line("nginx-ktls", "h2-single", 8.0),
        ];
        let md = summary(&cells(&runs), "cmd");
        assert!(md.starts_with("# Kernel TLS for HTTP/2"), "{md}");
        // kTLS at half the user-space throughput, twice nginx's; the same CPU each.
        assert!(
            md.contains(
                "| h2-single | 0.50× (0.50×) | 1.00× (1.00×) | 2.00× (2.00×) | 1.00× (1.00×) |"
            ),
            "{md}"
        );
        assert!(!md.contains("Targets"), "{md}");
        assert!(md.contains("Rerun: `cmd`"), "{md}");
    }
}
