//! HTTP/2 conformance: h2spec (2.2.1, 145 cases of RFC 7540/7541) over TLS against the built-in
//! site (firstbyte with no configuration, in a private network namespace so port 8443 is its
//! own) and against a configured server with `http2 on`, static files and a `return` location.
//! Every case must pass in a single run (none is retried); each run prints its counts.
//!
//! h2spec is built by scripts/test from the pinned module in scripts/h2spec (into
//! `target/tools/h2spec`); `H2SPEC=/path/to/h2spec` points the test at another build.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// Cases in h2spec 2.2.1.
const CASES: usize = 145;

/// The h2spec binary.
fn h2spec() -> PathBuf {
    if let Some(p) = std::env::var_os("H2SPEC") {
        return PathBuf::from(p);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/h2spec");
    if built.exists() {
        return built;
    }
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join("go/bin/h2spec"));
    match home {
        Some(p) if p.exists() => p,
        _ => PathBuf::from("h2spec"),
    }
}

/// One h2spec run's results, from its JUnit report.
#[derive(Debug, Default)]
struct Report {
    passed: usize,
    skipped: Vec<String>,
    failed: Vec<String>,
}

/// Reads h2spec's JUnit XML: each `<testsuite package="http2/6.9.2">` holds its cases in order,
/// case N being `http2/6.9.2/N`; a case that failed holds `<failure>` or `<error>`, a skipped
/// one `<skipped>`.
fn parse_junit(xml: &str) -> Report {
    let mut r = Report::default();
    for suite in xml.split("<testsuite ").skip(1) {
        let package = suite
            .split("package=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("?");
        for (i, case) in suite.split("<testcase ").skip(1).enumerate() {
            let case = case.split("</testcase>").next().unwrap_or(case);
            let id = format!("{package}/{}", i + 1);
            if case.contains("<failure") || case.contains("<error") {
                r.failed.push(id);
            } else if case.contains("<skipped") {
                r.skipped.push(id);
            } else {
                r.passed += 1;
            }
        }
    }
    r
}

/// Runs h2spec over TLS against 127.0.0.1:`port` (`wrap`: a command and arguments to run it
/// under, e.g. `nsenter`), with `extra` arguments; the parsed report.
fn run(wrap: &[&str], port: u16, extra: &[&str], dir: &Path, tag: &str) -> Report {
    let junit = dir.join(format!("h2spec-{tag}.xml"));
    let _ = std::fs::remove_file(&junit);
    let bin = h2spec();
    let port = port.to_string();
    let mut args: Vec<&str> = wrap.to_vec();
    args.push(bin.to_str().expect("h2spec path"));
    args.extend_from_slice(&[
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "--tls",
        "--insecure",
        "-o",
        "2",
    ]);
    args.extend_from_slice(&["-j", junit.to_str().expect("junit path")]);
    args.extend_from_slice(extra);
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): scripts/test builds it into target/tools/h2spec",
                bin.display()
            )
        });
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| {
        panic!(
            "h2spec wrote no report ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    parse_junit(&xml)
}

/// The whole suite against one server, once: panics on any failure or skip, naming the cases.
/// No case is run again: the server's answer to each must not depend on timing (a response
/// that ends before its request body does not hide what the body's later frames break, see
/// `http::h2::core`).
fn conformance(name: &str, wrap: &[&str], port: u16, extra: &[&str], dir: &Path) {
    let full = run(wrap, port, extra, dir, "full");
    let total = full.passed + full.skipped.len() + full.failed.len();
    println!(
        "h2spec {name}: {total} tests, {} passed, {} skipped, {} failed",
        full.passed,
        full.skipped.len(),
        full.failed.len(),
    );
    assert_eq!(total, CASES, "{name}: h2spec ran {total} cases");
    assert!(
        full.skipped.is_empty(),
        "{name}: skipped {:?}",
        full.skipped
    );
    assert!(
        full.failed.is_empty(),
        "{name}: h2spec cases failed: {:?}",
        full.failed
    );
}

/// A configured server: TLS, `http2 on`, static files from `html/`, and a `return` location
/// whose body is long enough for h2spec's flow-control cases (they skip under 5 bytes).
const CONF: &str = r#"
pid {dir}/fb.pid;
error_log {dir}/error.log warn;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        location /r { return 200 "returned by firstbyte for h2spec\n"; }
    }
}
"#;

#[test]
fn h2spec_configured_server_static_and_return() {
    let (s, ports) = Server::start("h2spec", CONF, 1);
    conformance("static file (/)", &[], ports[0], &[], &s.dir);
    conformance("return (/r)", &[], ports[0], &["-P", "/r"], &s.dir);
    let dir = s.dir.clone();
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}

/// The built-in site, run as a user runs it (no `-c`), in a private network and mount
/// namespace: its port 8443 and `/etc/firstbyte` are the namespace's own.
struct Builtin {
    unshare: Child,
    /// The firstbyte process inside the namespace.
    pid: u32,
}

impl Builtin {
    fn start() -> Builtin {
        let script = format!(
            "ip link set lo up; [ -d /etc/firstbyte ] && mount -t tmpfs tmpfs /etc/firstbyte; \
             exec {} >/dev/null 2>&1",
            bin().display()
        );
        let unshare = Command::new("unshare")
            .args(["--net", "--mount", "--fork", "sh", "-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .expect("unshare");
        let mut b = Builtin { unshare, pid: 0 };
        let children = format!("/proc/{0}/task/{0}/children", b.unshare.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "the built-in site did not start");
            if let Ok(Some(st)) = b.unshare.try_wait() {
                panic!("unshare exited: {st}");
            }
            if b.pid == 0 {
                b.pid = std::fs::read_to_string(&children)
                    .ok()
                    .and_then(|c| c.split_whitespace().next()?.parse().ok())
                    .unwrap_or(0);
            }
            // Ready once the process is firstbyte (not sh) and answers on 8443.
            let exe = std::fs::read_link(format!("/proc/{}/exe", b.pid)).unwrap_or_default();
            if b.pid != 0 && exe.file_name() == bin().file_name() {
                let ns = b.netns();
                let ok = Command::new("nsenter")
                    .args([
                        ns.as_str(),
                        "curl",
                        "-sk",
                        "-o",
                        "/dev/null",
                        "--max-time",
                        "2",
                    ])
                    .arg("https://127.0.0.1:8443/")
                    .status()
                    .is_ok_and(|s| s.success());
                if ok {
                    return b;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn netns(&self) -> String {
        format!("--net=/proc/{}/ns/net", self.pid)
    }
}

impl Drop for Builtin {
    fn drop(&mut self) {
        if self.pid != 0 {
            // SAFETY: kill has no memory preconditions; the pid is our grandchild, alive
            // until unshare (our child, not yet reaped) has waited for it.
            unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

#[test]
fn h2spec_builtin_site() {
    let b = Builtin::start();
    let dir = tempdir("h2spec-builtin");
    let ns = b.netns();
    conformance("built-in site", &["nsenter", ns.as_str()], 8443, &[], &dir);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn junit_report_is_read_by_position() {
    let xml = r#"<testsuites>
  <testsuite name="6.9.2" package="http2/6.9.2" tests="3">
    <testcase package="http2/6.9.2" classname="a" time="0.1"></testcase>
    <testcase package="http2/6.9.2" classname="b" time="0.1">
      <skipped></skipped>
    </testcase>
    <testcase package="http2/6.9.2" classname="c" time="0.1"><failure>x</failure></testcase>
  </testsuite>
  <testsuite name="8.1.2.6" package="http2/8.1.2.6" tests="2">
    <testcase package="http2/8.1.2.6" classname="d" time="0.1"><error>y</error></testcase>
    <testcase package="http2/8.1.2.6" classname="e" time="0.1"></testcase>
  </testsuite>
</testsuites>"#;
    let r = parse_junit(xml);
    assert_eq!(r.passed, 2);
    assert_eq!(r.skipped, ["http2/6.9.2/2"]);
    assert_eq!(r.failed, ["http2/6.9.2/3", "http2/8.1.2.6/1"]);
}
