//! The command line and configuration errors, through the real binary: `-v`, `-t`, `-T`, `-g`,
//! `-s`, and nginx's messages with file and line.

mod support;

use support::*;

fn test_conf(tag: &str, body: &str) -> (std::path::PathBuf, std::process::Output) {
    let dir = tempdir(tag);
    let path = dir.join("firstbyte.conf");
    std::fs::write(&path, render(body, &dir, &[free_port()])).unwrap();
    let out = firstbyte(&["-t", "-c", path.to_str().unwrap()]);
    (path, out)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version_flags() {
    let o = firstbyte(&["-v"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).starts_with("firstbyte version: firstbyte/"),
        "{}",
        stderr(&o)
    );
    let o = firstbyte(&["-V"]);
    assert!(stderr(&o).contains("rustls"), "{}", stderr(&o));
    // What certbot's nginx plugin needs from `-V` (configurator.get_version): the
    // regex `nginx version: ([^/]+)/([0-9\.]*)` with a version of 0.8.48 or later, SNI and
    // ` --with-http_ssl_module`; nginx's test harness reads `nginx version: nginx/([0-9.]+)`.
    let e = stderr(&o);
    let line = e
        .lines()
        .find_map(|l| l.strip_prefix("nginx version: nginx/"))
        .unwrap_or_else(|| panic!("no nginx version line: {e}"));
    let v: Vec<u32> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(
        v.len() == 3 && v.as_slice() >= [0, 8, 48].as_slice(),
        "{line}"
    );
    assert!(e.contains("TLS SNI support enabled"), "{e}");
    assert!(e.contains(" --with-http_ssl_module"), "{e}");
    let o = firstbyte(&["-x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("invalid option: \"-x\""));
}

#[test]
fn test_flag_reports_success_in_nginx_words() {
    let (path, o) = test_conf(
        "t-ok",
        "pid off; events {} http { access_log off; server { listen 127.0.0.1:{port0}; root {dir}; } }",
    );
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains(&format!(
        "firstbyte: the configuration file {} syntax is ok",
        path.display()
    )));
    assert!(e.contains(&format!(
        "firstbyte: configuration file {} test is successful",
        path.display()
    )));
}

#[test]
fn dump_prints_every_file() {
    let dir = tempdir("t-dump");
    std::fs::write(dir.join("inc.conf"), "# included-marker\n").unwrap();
    let path = dir.join("firstbyte.conf");
    std::fs::write(
        &path,
        format!(
            "pid off;\ninclude {}/inc.conf;\nevents {{}}\n",
            dir.display()
        ),
    )
    .unwrap();
    let o = firstbyte(&["-T", "-c", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("# configuration file {}:", path.display())));
    assert!(out.contains("# included-marker"));
}

fn assert_emerg(tag: &str, conf: &str, expect: &str, line: usize) {
    let (path, o) = test_conf(tag, conf);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    let want = format!("firstbyte: [emerg] {expect} in {}:{line}", path.display());
    assert!(e.contains(&want), "want {want:?}\ngot {e}");
    assert!(e.contains("test failed"), "{e}");
}

#[test]
fn config_errors_name_file_and_line() {
    assert_emerg(
        "e-unknown",
        "events {}\nhttp {\n  foo bar;\n}\n",
        "unknown directive \"foo\"",
        3,
    );
    assert_emerg(
        "e-context",
        "events {}\nhttp {\n server {\n  location / {\n   ssl_dyn_rec_enable on;\n  }\n }\n}\n",
        "\"ssl_dyn_rec_enable\" directive is not allowed here",
        5,
    );
    assert_emerg(
        "e-args",
        "events {}\nhttp {\n server {\n  root;\n }\n}\n",
        "invalid number of arguments in \"root\" directive",
        4,
    );
    assert_emerg(
        "e-onoff",
        "events {}\nhttp {\n sendfile maybe;\n}\n",
        "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\"",
        3,
    );
    assert_emerg(
        "e-brace",
        "events {}\nhttp {\n}\n}\n",
        "unexpected \"}\"",
        4,
    );
    assert_emerg(
        "e-unsupported",
        "events {}\nhttp {\n server {\n  location / {\n   fastcgi_cache zone1;\n  }\n }\n}\n",
        "\"fastcgi_cache\" directive is not supported by firstbyte yet",
        5,
    );
}

#[test]
fn missing_certificate_fails_the_test() {
    let (_, o) = test_conf(
        "e-cert",
        "pid off; events {} http { server { listen 127.0.0.1:{port0} ssl; ssl_certificate {dir}/nope.crt; ssl_certificate_key {dir}/nope.key; } }",
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("[emerg] cannot load certificate"), "{e}");
    assert!(e.contains("nope.crt"), "{e}");
}

#[test]
fn globals_apply_before_the_file() {
    let dir = tempdir("t-g");
    let path = dir.join("firstbyte.conf");
    std::fs::write(&path, "events {}\n").unwrap();
    let o = firstbyte(&[
        "-t",
        "-c",
        path.to_str().unwrap(),
        "-g",
        "pid off; bogus_directive 1;",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("unknown directive \"bogus_directive\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn signal_without_a_running_server_says_why() {
    let dir = tempdir("t-s");
    let path = dir.join("firstbyte.conf");
    std::fs::write(
        &path,
        format!("pid {}/fb.pid;\nevents {{}}\n", dir.display()),
    )
    .unwrap();
    let o = firstbyte(&["-s", "reload", "-c", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("fb.pid\" failed (2: No such file or directory)"),
        "{}",
        stderr(&o)
    );
}

/// Debian's stock nginx configuration passes `-t`, with a warning for each directive that
/// means nothing to firstbyte.
#[test]
fn debian_stock_nginx_conf_passes_test() {
    assert!(
        std::path::Path::new("/etc/nginx/nginx.conf").exists(),
        "Debian's nginx package is required (scripts/test installs it)"
    );
    let o = firstbyte(&["-t", "-c", "/etc/nginx/nginx.conf"]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("syntax is ok") && e.contains("test is successful"),
        "{e}"
    );
    assert!(
        e.contains("[warn]") && e.contains("types_hash_max_size"),
        "{e}"
    );
    assert!(e.contains("TLSv1.1"), "{e}");
}

#[test]
fn fastopen_warns_when_the_kernel_lacks_the_server_bit() {
    let (_, o) = test_conf(
        "t-tfo",
        "pid off; events {} http { access_log off; server { listen 127.0.0.1:{port0} fastopen=16; root {dir}; } }",
    );
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    let sysctl: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let warned =
        e.contains("[warn] \"fastopen\" has no effect: net.ipv4.tcp_fastopen lacks the server bit");
    assert_eq!(warned, sysctl & 2 == 0, "sysctl {sysctl}: {e}");
}

#[test]
fn conflicting_server_names_warn() {
    let (_, o) = test_conf(
        "t-names",
        "pid off; events {} http { access_log off;\nserver { listen 127.0.0.1:{port0}; server_name x.test; root {dir}; }\nserver { listen 127.0.0.1:{port0}; server_name x.test; root {dir}; } }",
    );
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("[warn] conflicting server name \"x.test\" on 127.0.0.1:"),
        "{e}"
    );
}

#[test]
fn encrypted_keys_with_a_password_file() {
    let c = certs();
    let conf = |key: &str| {
        format!(
            "pid off; events {{}} http {{ access_log off; server {{ listen 127.0.0.1:{{port0}} ssl; root {{dir}};\n ssl_certificate {cert};\n ssl_certificate_key {key};\n ssl_password_file {pw}; }} }}",
            cert = c.cert("a.test").display(),
            key = c.key(key).display(),
            pw = c.dir.join("passwords").display()
        )
    };
    // PKCS#8 encrypted: the second line of the password file opens it.
    let (_, o) = test_conf("t-enc", &conf("a-enc"));
    assert!(o.status.success(), "{}", stderr(&o));
    // Legacy OpenSSL PEM encryption: a clear error naming the conversion.
    let (_, o) = test_conf("t-legacy", &conf("a-legacy"));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("[emerg] cannot load certificate key"), "{e}");
    assert!(e.contains("openssl pkcs8 -topk8"), "{e}");
    // A wrong password file fails cleanly.
    let dir = tempdir("t-badpw");
    std::fs::write(dir.join("pw"), "nope\n").unwrap();
    let bad = conf("a-enc").replace(
        &c.dir.join("passwords").display().to_string(),
        &dir.join("pw").display().to_string(),
    );
    let (_, o) = test_conf("t-badpw2", &bad);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot load certificate key"),
        "{}",
        stderr(&o)
    );
}

/// `-s` never signals a pid of 0, 1 or below (a process group, init, every process) or
/// garbage: it is a clear error and no signal leaves. Run in a pid namespace and a process
/// group of its own, with a shell as init that records any signal it gets and a canary
/// process: a wrong `kill` could reach only them.
#[test]
fn signal_refuses_pids_that_are_not_one_process() {
    use std::os::unix::process::CommandExt;
    let dir = tempdir("bad-pid");
    let conf = dir.join("firstbyte.conf");
    std::fs::write(
        &conf,
        format!("pid {}/fb.pid;\nevents {{}}\n", dir.display()),
    )
    .unwrap();
    let script = format!(
        r#"
trap 'echo signalled' HUP TERM QUIT USR1
sleep 30 & canary=$!
for v in 0 1 -1 garbage ''; do
  printf '%s\n' "$v" > {d}/fb.pid
  for s in stop reload; do
    {bin} -s $s -c {conf} 2>>{d}/err; echo "rc=$?"
  done
done
kill -0 $canary && echo canary-alive
kill $canary
"#,
        d = dir.display(),
        bin = bin().display(),
        conf = conf.display()
    );
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "sh", "-c", &script])
        .process_group(0)
        .output()
        .expect("unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = std::fs::read_to_string(dir.join("err")).unwrap_or_default();
    assert_eq!(text.matches("rc=1").count(), 10, "{text}\n{err}");
    assert!(text.contains("canary-alive"), "{text}\n{err}");
    assert!(!text.contains("signalled"), "{text}\n{err}");
    assert_eq!(err.matches("invalid PID number").count(), 10, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn include_of_a_device_is_refused_at_once() {
    // /dev/zero has no end and a FIFO no writer: neither is read (nginx, reading st_size
    // bytes, would read nothing of either); the load stops with the file and line.
    let dir = tempdir("t-include-dev");
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for target in ["/dev/zero".to_string(), fifo.display().to_string()] {
        let path = dir.join("firstbyte.conf");
        std::fs::write(
            &path,
            format!("pid off;\nevents {{}}\nhttp {{\n  include {target};\n}}\n"),
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(firstbyte(&["-t", "-c", p.to_str().unwrap()]));
        });
        // Liveness only: a blocked or endless read would never answer.
        let o = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("firstbyte -t on `include {target};` did not end"));
        let e = stderr(&o);
        assert!(!o.status.success(), "{e}");
        assert!(
            e.contains(&format!(
                "[emerg] open() \"{target}\" failed (not a regular file) in {}:4",
                path.display()
            )),
            "{e}"
        );
    }
}
