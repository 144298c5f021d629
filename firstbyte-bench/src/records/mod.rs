//! `firstbyte-bench records [--rounds N] [--size BYTES]`: single-connection throughput of each
//! TLS record policy (issue 3): one firstbyte, one server block per policy, a file of 1 GiB
//! downloaded over one TLS 1.3 AES-128-GCM connection with curl, server and client pinned to
//! different CPUs, the policies interleaved round by round. Prints throughput and server CPU
//! per GiB (median, min–max) and each policy's ratio to static 16k. After the ramp every
//! policy should be within 3% of static 16k.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The policies compared, as `server {}` snippets.
const POLICIES: [(&str, &str); 5] = [
    ("static 16k", "ssl_buffer_size 16k; ssl_dyn_rec_enable off;"),
    ("static 4k", "ssl_buffer_size 4k; ssl_dyn_rec_enable off;"),
    ("dynamic defaults", "ssl_dyn_rec_enable on;"),
    (
        "dynamic tuned",
        "ssl_dyn_rec_enable on; ssl_dyn_rec_size_lo 1369; ssl_dyn_rec_size_hi 16384; ssl_dyn_rec_threshold 10; ssl_dyn_rec_timeout 5s;",
    ),
    ("adaptive", "ssl_dyn_rec_enable adaptive;"),
];

const BASE_PORT: u16 = 18440;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn die(msg: impl std::fmt::Display) -> i32 {
    eprintln!("firstbyte-bench records: {msg}");
    1
}

/// utime + stime of `pid` (all threads), in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

fn pin(pid: u32, cpu: usize) {
    // SAFETY: the set is plain data, zeroed then filled by the CPU_* helpers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid as i32, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn median_min_max(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn make_cert(dir: &Path) -> Result<(), String> {
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .map_err(|e| format!("openssl: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(())
}

fn config(dir: &Path) -> String {
    let mut servers = String::new();
    for (i, (_, snippet)) in POLICIES.iter().enumerate() {
        servers += &format!(
            "    server {{ listen 127.0.0.1:{} ssl; {snippet} }}\n",
            BASE_PORT + i as u16
        );
    }
    format!(
        "worker_processes 1;\npid off;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n    access_log off;\n    types {{ application/octet-stream bin; }}\n    ssl_protocols TLSv1.3;\n    ssl_certificate {d}/cert.pem;\n    ssl_certificate_key {d}/key.pem;\n    root {d}/www;\n{servers}}}\n",
        d = dir.display()
    )
}

/// Options of `firstbyte-bench records`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Rounds; each downloads the file once per policy, policies rotated.
    #[arg(long, value_name = "N", default_value = "5", value_parser = crate::cli::positive)]
    rounds: usize,
    /// Size of the (sparse) file downloaded, bytes [default: 1 GiB].
    #[arg(long, value_name = "BYTES", default_value = "1073741824", value_parser = crate::cli::positive_u64)]
    size: u64,
}

/// Entry point; returns the exit code.
pub fn main(args: Args) -> i32 {
    let Args { rounds, size } = args;
    let bin = std::env::var("FIRSTBYTE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/firstbyte")
        });
    if !bin.exists() {
        return die(format!(
            "{} not found: cargo build --release -p firstbyte",
            bin.display()
        ));
    }
    let dir = std::env::temp_dir().join(format!("fb-records-{}", std::process::id()));
    let _ = std::fs::create_dir_all(dir.join("www"));
    if let Err(e) = make_cert(&dir) {
        return die(e);
    }
    // A sparse file: served from the page cache's zero page, so the disk never limits.
    match std::fs::File::create(dir.join("www/big.bin")).and_then(|f| f.set_len(size)) {
        Ok(()) => {}
        Err(e) => return die(e),
    }
    let conf = dir.join("firstbyte.conf");
    if let Err(e) = std::fs::write(&conf, config(&dir)) {
        return die(e);
    }
    let server = match Command::new(&bin)
        .arg("-c")
        .arg(&conf)
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => Killed(c),
        Err(e) => return die(format!("{}: {e}", bin.display())),
    };
    let pid = server.0.id();
    pin(pid, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", BASE_PORT + POLICIES.len() as u16 - 1))
        .is_err()
    {
        if Instant::now() > deadline {
            return die("firstbyte did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // One unrecorded transfer first: the file's pages and the server's buffers warm up
    // before any policy is timed.
    let _ = Command::new("curl")
        .args(["-sk", "-o", "/dev/null"])
        .arg(format!("https://localhost:{BASE_PORT}/big.bin"))
        .output();
    let mut gbps: Vec<Vec<f64>> = vec![Vec::new(); POLICIES.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); POLICIES.len()];
    let gib = size as f64 / (1u64 << 30) as f64;
    for round in 0..rounds {
        // Rotate the starting policy each round so no policy always runs first.
        for k in 0..POLICIES.len() {
            let i = (k + round) % POLICIES.len();
            let before = cpu_seconds(pid).unwrap_or(0.0);
            let out = Command::new("taskset")
                .args(["-c", "1", "curl", "-sk", "--http1.1", "--tlsv1.3"])
                .args([
                    "--tls13-ciphers",
                    "TLS_AES_128_GCM_SHA256",
                    "-o",
                    "/dev/null",
                ])
                .args(["-w", "%{size_download} %{time_total}"])
                .arg(format!(
                    "https://localhost:{}/big.bin",
                    BASE_PORT + i as u16
                ))
                .output();
            let after = cpu_seconds(pid).unwrap_or(0.0);
            let Ok(out) = out else {
                return die("curl/taskset not runnable");
            };
            let w = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut f = w.split_whitespace();
            let got: f64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
            let secs: f64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
            if got as u64 != size || secs <= 0.0 {
                return die(format!("{}: incomplete transfer: {w}", POLICIES[i].0));
            }
            gbps[i].push(got / secs / 1e9);
            cpu[i].push((after - before) / gib);
            eprintln!(
                "round {}/{rounds} {:<17} {:.3} GB/s {:.3} CPU-s/GiB",
                round + 1,
                POLICIES[i].0,
                got / secs / 1e9,
                (after - before) / gib
            );
        }
    }
    let base = median_min_max(&mut gbps[0].clone()).0;
    println!("\nsingle connection, {gib:.2} GiB, TLS 1.3 AES-128-GCM, {rounds} rounds, server CPU 0, curl CPU 1");
    println!("| policy | GB/s median (min–max) | server CPU-s/GiB median (min–max) | throughput vs static 16k |");
    println!("|---|---|---|---|");
    for (i, (name, _)) in POLICIES.iter().enumerate() {
        let (m, lo, hi) = median_min_max(&mut gbps[i]);
        let (c, clo, chi) = median_min_max(&mut cpu[i]);
        println!(
            "| {name} | {m:.3} ({lo:.3}–{hi:.3}) | {c:.3} ({clo:.3}–{chi:.3}) | {:.3} |",
            m / base
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<Args, clap::Error> {
        match crate::cli::parse(&[&["records"], list].concat())? {
            crate::cli::Command::Records(a) => Ok(a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_and_refused_values() {
        assert_eq!(
            parse(&[]).expect("defaults"),
            Args {
                rounds: 5,
                size: 1 << 30
            }
        );
        let a = parse(&["--rounds", "3", "--size", "1_000_000"]).expect("valid");
        assert_eq!((a.rounds, a.size), (3, 1_000_000));
        // These fell back to the defaults before clap.
        for bad in [
            &["--rounds", "0"][..],
            &["--rounds", "x"],
            &["--size", "1G"],
            &["--size", "0"],
            &["--size"],
            &["--quick"],
        ] {
            let e = parse(bad).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2);
        }
    }

    #[test]
    fn config_has_one_server_per_policy() {
        let c = config(Path::new("/x"));
        assert_eq!(c.matches("server {").count(), POLICIES.len());
        assert!(c.contains("ssl_dyn_rec_enable adaptive;"));
        assert!(c.contains(&format!("127.0.0.1:{}", BASE_PORT)));
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median_min_max(&mut [3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(median_min_max(&mut [4.0, 1.0, 3.0, 2.0]).0, 3.0);
    }
}
