//! End to end: `firstbyte-bench run` on a tiny plan through the real emulator (as root),
//! against the real firstbyte and nginx; then a resume after losing the last rows.
//!
//! Prerequisites fail loudly rather than skip: root, curl, nginx, caddy (`bash scripts/test`
//! installs them), and the debug `firstbyte` and `firstbyte-netem` binaries next to this
//! crate's binary (`cargo build -p firstbyte -p firstbyte-netem`; `cargo test --workspace`
//! builds them).

use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = "condition,server,size_bytes,client,seq,connect_ms,appconnect_ms,ttfb_ms,total_ms,syn_retransmits,http_version,status,gap_ms,position,handshake";

const PLAN: &str = r#"
seed = 7
n = 2
sizes = ["10k"]
clients = ["curl-h2", "rust-h2"]
baseline = "fb-16k"
[network]
delay = "5ms"
[[condition]]
name = "fb-16k"
server = "firstbyte"
config = "ssl_buffer_size 16k;"
[[condition]]
name = "nginx-4k"
server = "nginx"
config = "ssl_buffer_size 4k;"
"#;

fn bench() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_firstbyte-bench"))
}

fn check_prerequisites() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the WAN bench test needs root (network namespaces)"
    );
    let dir = bench().parent().map(Path::to_path_buf).expect("binary dir");
    for name in ["firstbyte", "firstbyte-netem"] {
        assert!(
            dir.join(name).is_file(),
            "{} missing: run `cargo build -p firstbyte -p firstbyte-netem` first",
            dir.join(name).display()
        );
    }
    assert!(
        Path::new("/usr/sbin/nginx").is_file(),
        "nginx missing: apt-get install nginx"
    );
    assert!(
        Command::new("curl").arg("--version").output().is_ok(),
        "curl missing: apt-get install curl"
    );
}

fn run(plan: &Path, out: &Path) -> String {
    let o = Command::new(bench())
        .arg("run")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .env_remove("FB_BENCH_FIRSTBYTE")
        .env_remove("FB_BENCH_NETEM")
        .output()
        .expect("run firstbyte-bench");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "firstbyte-bench failed: {text}");
    text
}

fn rows(out: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER));
    lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// A row's connect, appconnect, TTFB and total (ms): connect (TCP's SYN-ACK, QUIC's first
/// flight answered) takes at least one RTT (10 ms), and the four come in that order.
fn timings_in_order(row: &[String]) -> Vec<f64> {
    let t: Vec<f64> = row[5..9]
        .iter()
        .map(|v| v.parse().expect("number"))
        .collect();
    assert!(
        t[0] >= 9.0 && t[0] <= t[1] && t[1] <= t[2] && t[2] <= t[3],
        "{row:?}"
    );
    t
}

/// An empty scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fb-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

#[test]
fn tiny_plan_end_to_end_and_resume() {
    check_prerequisites();
    let dir = scratch("wan");
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, PLAN).expect("plan");
    let out = dir.join("out");

    let printed = run(&plan, &out);
    let r = rows(&out);
    assert_eq!(r.len(), 2 * 2 * 2, "2 conditions × 2 clients × n=2");
    for row in &r {
        assert_eq!(row.len(), 15, "{row:?}");
        assert_eq!(row[14], "cold", "no ticket is ever offered: {row:?}");
        assert_eq!(
            (row[12].as_str(), row[13].as_str()),
            ("0.000", "1"),
            "{row:?}"
        );
        assert_eq!(row[11], "200", "{row:?}");
        assert_eq!(row[10], "2", "HTTP/2 negotiated: {row:?}");
        let t = timings_in_order(row);
        assert!(t[2] >= 25.0, "TTFB is at least ~3 RTT: {row:?}");
    }
    let servers: std::collections::HashSet<&str> = r.iter().map(|x| x[1].as_str()).collect();
    assert_eq!(servers, ["firstbyte", "nginx"].into_iter().collect());
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(summary.contains("### 10 KB — curl-h2"), "{summary}");
    assert!(summary.contains("### 10 KB — rust-h2"), "{summary}");
    assert!(
        summary.contains("| fb-16k | firstbyte | 2 | 0 |"),
        "{summary}"
    );
    assert!(
        summary.contains("| nginx-4k | nginx | 2 | 0 |"),
        "{summary}"
    );
    assert!(printed.contains("After connect"));
    let svg = std::fs::read_to_string(out.join("plot.svg")).expect("plot.svg");
    assert!(svg.starts_with("<svg") && svg.contains("<path"));

    // Resume: lose the last three rows (one torn), run again: the same rows come back.
    let text = std::fs::read_to_string(out.join("results.csv")).expect("results");
    let lines: Vec<&str> = text.lines().collect();
    let mut cut = lines[..lines.len() - 3].join("\n");
    cut.push('\n');
    cut.push_str(&lines[lines.len() - 3][..10]);
    std::fs::write(out.join("results.csv"), cut).expect("cut");
    let printed = run(&plan, &out);
    assert!(printed.contains("resuming"), "{printed}");
    assert!(printed.contains("3 requests to go"), "{printed}");
    let again = rows(&out);
    let key = |x: &Vec<String>| (x[0].clone(), x[3].clone(), x[4].clone());
    let mut a: Vec<_> = r.iter().map(key).collect();
    let mut b: Vec<_> = again.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "same requests after resuming");

    // Another plan into the same directory is refused.
    std::fs::write(&plan, PLAN.replace("seed = 7", "seed = 8")).expect("plan");
    let o = Command::new(bench())
        .arg("run")
        .arg(&plan)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("another plan"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// HTTP/3 through the emulator at 5% loss each way: the built-in quinn client downloads 1 MB
/// from firstbyte's QUIC listener, every byte (the runner fails a row whose body is short).
#[test]
fn http3_downloads_through_five_percent_loss() {
    check_prerequisites();
    let dir = scratch("h3");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"
seed = 11
n = 2
sizes = ["1m"]
clients = ["rust-h3"]
baseline = "fb"
[network]
delay = "5ms"
loss = "5%"
[[condition]]
name = "fb"
server = "firstbyte"
config = ""
"#,
    )
    .expect("plan");
    let out = dir.join("out");
    run(&plan, &out);
    let r = rows(&out);
    assert_eq!(r.len(), 2, "n=2: {r:?}");
    for row in &r {
        assert_eq!(row[11], "200", "{row:?}");
        assert_eq!(row[10], "3", "HTTP/3: {row:?}");
        timings_in_order(row);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Warm connections (issue 17): each job is one connection with a request, 300 ms idle, and a
/// second request; both rows are recorded with their gap and position, the second timed from
/// its own request (one round trip at least, no connect), and the summary has a column for it.
#[test]
fn warm_clients_reuse_one_connection_across_a_gap() {
    check_prerequisites();
    let dir = scratch("warm");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"
seed = 3
n = 2
sizes = ["100k"]
clients = ["rust-h1-warm", "rust-h2-warm"]
gaps = ["300ms"]
baseline = "fb-16k"
[network]
delay = "10ms"
[[condition]]
name = "fb-16k"
server = "firstbyte"
config = "ssl_buffer_size 16k;"
[[condition]]
name = "fb-adaptive"
server = "firstbyte"
config = "ssl_dyn_rec_enable adaptive;"
"#,
    )
    .expect("plan");
    let out = dir.join("out");
    run(&plan, &out);
    let r = rows(&out);
    assert_eq!(
        r.len(),
        2 * 2 * 2 * 2,
        "2 conditions × 2 clients × n=2 × 2 requests"
    );
    for row in &r {
        assert_eq!(row[11], "200", "{row:?}");
        let version = if row[3] == "rust-h2-warm" { "2" } else { "1.1" };
        assert_eq!(row[10], version, "{row:?}");
        match row[13].as_str() {
            "1" => {
                assert_eq!(row[12], "0.000", "{row:?}");
                timings_in_order(row);
            }
            "2" => {
                assert_eq!(row[12], "300.000", "{row:?}");
                assert_eq!(
                    (row[5].as_str(), row[6].as_str()),
                    ("0.000", "0.000"),
                    "{row:?}"
                );
                let ttfb: f64 = row[7].parse().expect("ttfb");
                let total: f64 = row[8].parse().expect("total");
                assert!(
                    ttfb >= 19.0 && ttfb <= total,
                    "one RTT (20 ms) at least: {row:?}"
                );
            }
            other => panic!("position {other}: {row:?}"),
        }
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(
        summary.contains("### 100 KB — rust-h2-warm@0.3s"),
        "{summary}"
    );
    assert!(summary.contains("### 100 KB — rust-h1-warm\n"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The resuming clients say truthfully which handshake each sample had, and the times agree:
/// a request really sent in 0-RTT answers sooner than any handshake allows without it
/// (HTTP/3 under 2 RTT, TCP under 3 RTT), and every other sample takes at least that long.
/// Servers with early data off give `no-0rtt` (HTTP/3: the ticket allows no early data) and
/// `resumed` (TCP: the session resumes, the request waits for the handshake); nginx 1.22 with
/// `ssl_early_data on` takes TCP early data, firstbyte and Caddy take HTTP/3 0-RTT.
#[test]
fn resuming_clients_report_the_handshake_they_had() {
    check_prerequisites();
    assert!(
        Path::new("/usr/bin/caddy").is_file(),
        "caddy missing: apt-get install caddy"
    );
    let dir = scratch("resume");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"
seed = 13
n = 2
sizes = ["10k"]
baseline = "fb"
[network]
delay = "25ms"
[[condition]]
name = "fb"
server = "firstbyte"
config = "ssl_early_data on; ssl_session_cache shared:fb:1m;"
clients = ["rust-h2-resumed", "rust-h2-0rtt", "rust-h3-0rtt"]
[[condition]]
name = "fb-off"
server = "firstbyte"
config = ""
clients = ["rust-h3-0rtt", "rust-h1-0rtt"]
[[condition]]
name = "caddy"
server = "caddy"
clients = ["rust-h3-0rtt"]
[[condition]]
name = "nginx"
server = "nginx"
config = "ssl_early_data on; ssl_session_cache shared:ng:1m;"
clients = ["rust-h2-0rtt", "rust-h1-0rtt"]
[[condition]]
name = "nginx-off"
server = "nginx"
config = ""
clients = ["rust-h2-0rtt"]
"#,
    )
    .expect("plan");
    let out = dir.join("out");
    run(&plan, &out);
    let r = rows(&out);
    assert_eq!(r.len(), (3 + 2 + 1 + 2 + 1) * 2, "{r:?}");
    let rtt = 50.0;
    for row in &r {
        assert_eq!(row[11], "200", "{row:?}");
        let h3 = row[3].starts_with("rust-h3");
        let ttfb: f64 = row[7].parse().expect("ttfb");
        // Without early data: TCP + TLS + request is 3 RTT, QUIC + request 2 RTT.
        let floor = if h3 { 2.0 * rtt } else { 3.0 * rtt };
        if row[14] == "0rtt" {
            assert!(ttfb < floor, "0-RTT, yet no round trip saved: {row:?}");
        } else {
            assert!(ttfb >= floor * 0.98, "{row:?}");
        }
        let want = match (row[0].as_str(), row[3].as_str()) {
            ("fb", "rust-h2-resumed") => &["resumed"][..],
            // firstbyte takes no TCP early data yet; once it does, 0rtt.
            ("fb", "rust-h2-0rtt") => &["resumed", "0rtt"],
            ("fb" | "caddy" | "nginx", _) => &["0rtt"],
            ("fb-off", "rust-h3-0rtt") => &["no-0rtt"],
            ("fb-off" | "nginx-off", _) => &["resumed"],
            other => panic!("unexpected cell {other:?}"),
        };
        assert!(want.contains(&row[14].as_str()), "want {want:?}: {row:?}");
    }
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(
        summary.contains("### 10 KB — rust-h3-0rtt:no-0rtt"),
        "{summary}"
    );
    assert!(
        summary.contains("| nginx-off | nginx | 0 | 0 | 0.0% (0) | resumed: 2 |"),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--lanes 3` over a two-link plan: both links at once, three emulators each; every job of
/// each link recorded exactly once in its one `results.csv`, each lane's own files, and a
/// resume (same command again) that makes exactly the rows lost.
#[test]
fn lanes_run_links_at_once_and_resume() {
    check_prerequisites();
    let dir = scratch("lanes");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"
seed = 13
n = 4
sizes = ["10k"]
clients = ["rust-h2"]
baseline = "fb"
[[link]]
name = "a"
delay = "5ms"
[[link]]
name = "b"
delay = "5ms"
rate = "20mbit"
[[condition]]
name = "fb"
server = "firstbyte"
[[condition]]
name = "ng"
server = "nginx"
"#,
    )
    .expect("plan");
    let out = dir.join("out");
    let lanes = |out: &Path| {
        let o = Command::new(bench())
            .arg("run")
            .arg(&plan)
            .arg("--out")
            .arg(out)
            .args(["--lanes", "3"])
            .env_remove("FB_BENCH_FIRSTBYTE")
            .env_remove("FB_BENCH_NETEM")
            .output()
            .expect("run firstbyte-bench");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "firstbyte-bench failed: {text}");
        text
    };
    let keys = |link: &str| {
        let mut k: Vec<(String, String)> = rows(&out.join(link))
            .iter()
            .map(|x| {
                assert_eq!(x.len(), 15, "{x:?}");
                assert_eq!(x[11], "200", "{x:?}");
                timings_in_order(x);
                (x[0].clone(), x[4].clone())
            })
            .collect();
        k.sort();
        k
    };
    let want: Vec<(String, String)> = ["fb", "ng"]
        .iter()
        .flat_map(|c| (0..4).map(move |s| (c.to_string(), s.to_string())))
        .collect();
    let printed = lanes(&out);
    assert!(printed.contains("(lane 2 of 3)"), "{printed}");
    for link in ["a", "b"] {
        assert_eq!(keys(link), want, "link {link}: every job once");
        let d = out.join(link);
        for lane in 0..3 {
            for f in [
                format!("netem-lane{lane}-000000.json"),
                format!("work/firstbyte-lane{lane}.conf"),
                format!("work/nginx-lane{lane}.conf"),
                format!("work/nginx-error-lane{lane}.log"),
            ] {
                assert!(d.join(&f).is_file(), "{link}: {f} missing");
            }
        }
        assert!(
            !d.join("work/nginx.conf").exists(),
            "{link}: no lane-less config"
        );
        let summary = std::fs::read_to_string(d.join("summary.md")).expect("summary");
        assert!(summary.contains("netem-lane2-000000.json"), "{summary}");
    }
    let top = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(top.contains("# Link \"a\"") && top.contains("# Link \"b\""));

    // Resume link b after losing its last two rows: exactly those come back; link a has
    // nothing to do.
    let csv = out.join("b/results.csv");
    let text = std::fs::read_to_string(&csv).expect("results");
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&csv, lines[..lines.len() - 2].join("\n") + "\n").expect("cut");
    let printed = lanes(&out);
    let to_go: usize = printed
        .lines()
        .filter_map(|l| {
            l.split("requests through")
                .next()?
                .rsplit(' ')
                .nth(1)?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert_eq!(to_go, 2, "{printed}");
    assert_eq!(keys("a"), want);
    assert_eq!(keys("b"), want);
    let _ = std::fs::remove_dir_all(&dir);
}
