//! `fastcgi_pass` end to end against a real PHP-FPM (Debian's `php-fpm`), started per test
//! with a generated pool on a unix socket in the test's directory and killed at the end.
//! The PHP location is Debian's default site's: `include snippets/fastcgi-php.conf` (which
//! includes `fastcgi.conf`), the files copied from the configuration corpus's debian/ (see
//! `support::conf_corpus`).

mod support;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

/// PHP-FPM's binary (php-fpm8.2 on bookworm).
fn php_fpm() -> PathBuf {
    let found = std::fs::read_dir("/usr/sbin")
        .expect("/usr/sbin")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("php-fpm"))
        });
    found.expect("php-fpm is not installed (scripts/test installs Debian's php-fpm)")
}

/// A running PHP-FPM; killed and reaped when dropped.
struct Fpm {
    child: Child,
    sock: PathBuf,
}

impl Fpm {
    fn start(dir: &Path) -> Fpm {
        let sock = dir.join("fpm.sock");
        let conf = format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\
             [www]\nlisten = {s}\nlisten.mode = 0666\npm = static\npm.max_children = 2\n\
             php_admin_flag[log_errors] = on\n",
            d = dir.display(),
            s = sock.display()
        );
        let path = dir.join("fpm.conf");
        std::fs::write(&path, conf).expect("write fpm.conf");
        let mut cmd = Command::new(php_fpm());
        cmd.arg("-n").arg("-y").arg(&path).arg("--nodaemonize");
        // SAFETY: a plain syscall.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("-R");
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start php-fpm");
        reap_at_exit(child.id());
        let fpm = Fpm { child, sock };
        let start = Instant::now();
        while UnixStream::connect(&fpm.sock).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "php-fpm did not listen: {}",
                std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        fpm
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        // SIGQUIT: php-fpm's graceful stop takes its workers with it; then make sure.
        // SAFETY: signals to our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGQUIT);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                forget_at_exit(self.child.id());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        forget_at_exit(self.child.id());
    }
}

/// A unix-socket relay in front of `to` that counts the connections it accepts.
fn counting_relay(at: &Path, to: &Path) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(at).expect("bind relay");
    // firstbyte started as root serves as `nobody`.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o666)).expect("chmod relay");
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let to = to.to_path_buf();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(a) = s else { return };
            c.fetch_add(1, Ordering::SeqCst);
            let Ok(b) = UnixStream::connect(&to) else {
                continue;
            };
            let (mut a2, mut b2) = (a.try_clone().expect("clone"), b.try_clone().expect("clone"));
            let (mut a, mut b) = (a, b);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut b2, &mut a2);
                let _ = a2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    count
}

const INFO_PHP: &str = r#"<?php
foreach (['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'QUERY_STRING', 'REQUEST_METHOD',
          'CONTENT_TYPE', 'CONTENT_LENGTH', 'HTTPS', 'SERVER_NAME', 'DOCUMENT_ROOT',
          'REQUEST_URI', 'GATEWAY_INTERFACE', 'REDIRECT_STATUS', 'HTTP_X_TEST', 'OUTER'] as $k) {
    echo $k, '=', isset($_SERVER[$k]) ? $_SERVER[$k] : '(unset)', "\n";
}
echo 'BODY=', file_get_contents('php://input'), "\n";
"#;

/// Everything one test needs: PHP-FPM, its scripts, firstbyte in front.
struct Site {
    dir: PathBuf,
    port: u16,
    server: Server,
    _fpm: Fpm,
    relayed: Arc<AtomicUsize>,
}

fn site() -> Site {
    let dir = tempdir("fastcgi");
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("sub")).expect("www");
    std::fs::write(www.join("info.php"), INFO_PHP).expect("info.php");
    std::fs::write(www.join("sub/index.php"), INFO_PHP).expect("index.php");
    std::fs::write(
        www.join("status.php"),
        "<?php header('Status: 404 Not Found'); header('X-Script: status'); echo \"gone\\n\";",
    )
    .expect("status.php");
    std::fs::write(
        www.join("redirect.php"),
        "<?php header('Location: /elsewhere');",
    )
    .expect("redirect.php");
    std::fs::write(
        www.join("stderr.php"),
        "<?php error_log('fcgi-stderr-marker'); echo \"ok\\n\";",
    )
    .expect("stderr.php");
    std::fs::write(
        www.join("big.php"),
        "<?php $n = isset($_GET['n']) ? (int)$_GET['n'] : 40000; for ($i = 0; $i < $n; $i++) { echo str_pad($i, 100, 'x'); if ($i % 1000 == 0) flush(); }",
    )
    .expect("big.php");
    std::fs::write(www.join("custom404.html"), "custom not found\n").expect("404 page");
    std::fs::write(
        www.join("xar.php"),
        "<?php header('X-Accel-Redirect: /target.txt'); header('Set-Cookie: k=v'); header('X-Other: o');",
    )
    .expect("xar.php");
    std::fs::write(www.join("target.txt"), "the target\n").expect("target");
    std::fs::write(
        www.join("accel.php"),
        "<?php header('Content-Type: text/html; charset=B'); header('X-Accel-Charset: A'); echo 'XoX';",
    )
    .expect("accel.php");
    // Sleeps, then writes 3 MB (a write fails once the connection is closed, and PHP then
    // ends the script); its shutdown function leaves a mark saying whether it was aborted.
    std::fs::write(
        www.join("abort.php"),
        format!("<?php register_shutdown_function(function () {{ file_put_contents('{}/mark-' . $_SERVER['MARK'], connection_aborted() ? 'aborted' : 'finished'); }}); sleep(1); for ($i = 0; $i < 30; $i++) {{ echo str_repeat('x', 100000); flush(); }}", dir.display()),
    )
    .expect("abort.php");
    // Debian's stock files, as /etc/nginx has them.
    let debian = conf_corpus().join("debian");
    std::fs::create_dir_all(dir.join("snippets")).expect("snippets");
    for f in [
        "fastcgi.conf",
        "fastcgi_params",
        "snippets/fastcgi-php.conf",
    ] {
        std::fs::copy(debian.join(f), dir.join(f)).expect("copy debian file");
    }
    let fpm = Fpm::start(&dir);
    let relay = dir.join("relay.sock");
    let relayed = counting_relay(&relay, &fpm.sock);
    let port = free_port();
    let conf = format!(
        r#"pid {d}/fb.pid;
error_log {d}/error.log info;
events {{}}
http {{
  access_log off;
  charset_map B A {{ 58 59; }}
  upstream kept {{ server unix:{relay}; keepalive 4; }}
  upstream flaky {{ server unix:{d}/dead.sock; server unix:{sock}; }}
  upstream dead {{ server unix:{d}/dead.sock; }}
  server {{
    listen 127.0.0.1:{port};
    server_name fcgi.test;
    root {d}/www;
    index index.php;
    fastcgi_temp_path {d}/fastcgi_temp;
    include fastcgi_params;
    fastcgi_param SCRIPT_FILENAME $document_root/info.php;
    fastcgi_param OUTER yes;
    location ~ [^/]\.php(/|$) {{
      include snippets/fastcgi-php.conf;
      fastcgi_pass unix:{sock};
    }}
    location /sub/ {{
      include snippets/fastcgi-php.conf;
      fastcgi_pass unix:{sock};
    }}
    location /inherit/ {{ fastcgi_pass unix:{sock}; }}
    location /streamed/ {{ fastcgi_pass unix:{sock}; fastcgi_request_buffering off; }}
    location /keep/ {{
      fastcgi_pass kept;
      fastcgi_keep_conn on;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/info.php;
    }}
    location /nokeep/ {{
      fastcgi_pass kept;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/info.php;
    }}
    location /flaky/ {{ fastcgi_pass flaky; }}
    location /caught/ {{
      fastcgi_pass unix:{sock};
      fastcgi_catch_stderr fcgi-stderr-marker;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/stderr.php;
    }}
    location /dead/ {{ fastcgi_pass dead; }}
    location /abort-on/ {{
      fastcgi_pass unix:{sock};
      fastcgi_ignore_client_abort on;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/abort.php;
      fastcgi_param MARK on;
    }}
    location /abort-off/ {{
      fastcgi_pass unix:{sock};
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/abort.php;
      fastcgi_param MARK off;
    }}
    location /xar-ignored/ {{
      fastcgi_pass unix:{sock};
      fastcgi_ignore_headers X-Accel-Redirect;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/xar.php;
    }}
    location /buffered/ {{
      fastcgi_pass unix:{sock};
      fastcgi_buffering on;
      fastcgi_buffers 4 4k;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/big.php;
    }}
    location /intercept/ {{
      fastcgi_pass unix:{sock};
      fastcgi_intercept_errors on;
      error_page 404 /custom404.html;
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/status.php;
    }}
  }}
}}
"#,
        d = dir.display(),
        sock = fpm.sock.display(),
        relay = relay.display(),
    );
    let server = Server::start_in(&dir, &conf, port);
    Site {
        dir,
        port,
        server,
        _fpm: fpm,
        relayed,
    }
}

impl Site {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

fn vars(body: &[u8]) -> std::collections::HashMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn php_sees_the_cgi_variables_of_debians_snippet() {
    let s = site();
    let www = s.dir.join("www");
    let (code, _, body) = curl_i(&[
        "-H",
        "X-Test: hello",
        &s.url("/info.php/extra/path?a=1&b=2"),
    ]);
    assert_eq!(code, 200, "{}", s.error_log());
    let v = vars(&body);
    let script = format!("{}/info.php", www.display());
    let want = [
        ("SCRIPT_FILENAME", script.as_str()),
        ("SCRIPT_NAME", "/info.php"),
        // set $path_info before try_files changed the URI (nginx ticket 321's workaround).
        ("PATH_INFO", "/extra/path"),
        ("QUERY_STRING", "a=1&b=2"),
        ("REQUEST_METHOD", "GET"),
        ("SERVER_NAME", "fcgi.test"),
        ("DOCUMENT_ROOT", www.to_str().expect("utf-8")),
        ("REQUEST_URI", "/info.php/extra/path?a=1&b=2"),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("REDIRECT_STATUS", "200"),
        ("HTTP_X_TEST", "hello"),
        // `if_not_empty`: plain HTTP sends no HTTPS.
        ("HTTPS", "(unset)"),
        // The location's own fastcgi_param list replaces the server's whole list.
        ("OUTER", "(unset)"),
    ];
    for (k, want) in want {
        assert_eq!(v.get(k).map(String::as_str), Some(want), "{k} in {v:?}");
    }
    // A script that does not exist: try_files $fastcgi_script_name =404.
    let (code, _, _) = curl_i(&[&s.url("/missing.php")]);
    assert_eq!(code, 404);
    // fastcgi_index for a directory URI.
    let (code, _, body) = curl_i(&[&s.url("/sub/")]);
    assert_eq!(code, 200);
    assert_eq!(
        vars(&body).get("SCRIPT_NAME").map(String::as_str),
        Some("/sub/index.php")
    );
    // A location without fastcgi_param takes the server's whole list.
    let (code, _, body) = curl_i(&[&s.url("/inherit/x")]);
    assert_eq!(code, 200);
    let v = vars(&body);
    assert_eq!(v.get("OUTER").map(String::as_str), Some("yes"), "{v:?}");
    assert_eq!(
        v.get("REQUEST_METHOD").map(String::as_str),
        Some("GET"),
        "{v:?}"
    );
}

#[test]
fn post_bodies_reach_stdin() {
    let s = site();
    let (code, _, body) = curl_i(&[
        "-H",
        "Content-Type: application/x-www-form-urlencoded",
        "--data-binary",
        "name=value&x=y",
        &s.url("/info.php"),
    ]);
    assert_eq!(code, 200);
    let v = vars(&body);
    assert_eq!(v.get("REQUEST_METHOD").map(String::as_str), Some("POST"));
    assert_eq!(
        v.get("CONTENT_TYPE").map(String::as_str),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(v.get("CONTENT_LENGTH").map(String::as_str), Some("14"));
    assert_eq!(v.get("BODY").map(String::as_str), Some("name=value&x=y"));
    // Chunked: read whole first, CONTENT_LENGTH says its length.
    let big = "z".repeat(100_000);
    let (code, _, body) = curl_i(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &big,
        &s.url("/info.php"),
    ]);
    assert_eq!(code, 200);
    let v = vars(&body);
    assert_eq!(v.get("CONTENT_LENGTH").map(String::as_str), Some("100000"));
    assert_eq!(v.get("BODY").map(String::len), Some(100_000));
    // fastcgi_request_buffering on (the default): past client_body_buffer_size the body
    // waited in a temp file before PHP-FPM was asked.
    assert!(
        s.error_log()
            .contains("a client request body is buffered to a temporary file"),
        "{}",
        s.error_log()
    );
    // fastcgi_request_buffering off: the body streams to PHP-FPM, whole.
    let body_in = "q".repeat(300_000);
    let file = s.dir.join("body.txt");
    std::fs::write(&file, &body_in).expect("body file");
    let at = format!("@{}", file.display());
    let (code, _, body) = curl_i(&["--data-binary", &at, &s.url("/streamed/")]);
    assert_eq!(code, 200);
    let v = vars(&body);
    assert_eq!(v.get("CONTENT_LENGTH").map(String::as_str), Some("300000"));
    assert_eq!(v.get("BODY").map(String::as_str), Some(body_in.as_str()));
}

#[test]
fn status_location_and_stderr() {
    let s = site();
    let (code, h, body) = curl_i(&[&s.url("/status.php")]);
    assert_eq!(code, 404);
    assert_eq!(body, b"gone\n");
    assert_eq!(header(&h, "x-script"), Some("status"));
    assert_eq!(header(&h, "status"), None, "Status is hidden: {h:?}");
    let (code, h, _) = curl_i(&[&s.url("/redirect.php")]);
    assert_eq!(code, 302);
    let loc = header(&h, "location").expect("location");
    assert_eq!(loc, format!("http://127.0.0.1:{}/elsewhere", s.port));
    let (code, _, body) = curl_i(&[&s.url("/stderr.php")]);
    assert_eq!((code, body.as_slice()), (200, &b"ok\n"[..]));
    let log = s.error_log();
    let line = log
        .lines()
        .find(|l| l.contains("FastCGI sent in stderr:") && l.contains("fcgi-stderr-marker"))
        .unwrap_or_else(|| panic!("no stderr line in {log}"));
    assert!(line.contains("[error]"), "{line}");
    assert!(line.contains("upstream: \"fastcgi://unix:"), "{line}");
    // fastcgi_catch_stderr: that stderr before the header makes it an invalid header.
    let (code, _, _) = curl_i(&[&s.url("/caught/")]);
    assert_eq!(code, 502);
    // fastcgi_intercept_errors: the 404 goes to error_page.
    let (code, _, body) = curl_i(&[&s.url("/intercept/x")]);
    assert_eq!((code, body.as_slice()), (404, &b"custom not found\n"[..]));
}

/// The script's `X-Accel-Charset`: the charset the answer goes out in (recoded through
/// `charset_map`), the field itself hidden, as nginx.
#[test]
fn x_accel_charset_from_the_script() {
    let s = site();
    let (code, h, body) = curl_i(&[&s.url("/accel.php")]);
    assert_eq!((code, body.as_slice()), (200, &b"YoY"[..]));
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=A"));
    assert_eq!(header(&h, "x-accel-charset"), None);
}

/// `X-Accel-Redirect` from the script: an internal redirect to the file it names, the
/// script's `Set-Cookie` kept; `fastcgi_ignore_headers X-Accel-Redirect` turns it off.
#[test]
fn x_accel_redirect_from_the_script() {
    let s = site();
    let (code, h, body) = curl_i(&[&s.url("/xar.php")]);
    assert_eq!((code, body.as_slice()), (200, &b"the target\n"[..]));
    assert_eq!(header(&h, "set-cookie"), Some("k=v"));
    assert_eq!(header(&h, "x-other"), None);
    assert_eq!(header(&h, "x-accel-redirect"), None);
    let (code, h, body) = curl_i(&[&s.url("/xar-ignored/")]);
    assert_eq!(code, 200);
    assert!(body.is_empty(), "the script's own (empty) answer");
    assert_eq!(header(&h, "x-other"), Some("o"));
    assert_eq!(header(&h, "x-accel-redirect"), None, "hidden as nginx");
}

fn big_body(n: usize) -> Vec<u8> {
    let mut want = Vec::with_capacity(n * 100);
    for i in 0..n {
        want.extend_from_slice(format!("{i:x<100}").as_bytes());
    }
    want
}

#[test]
fn large_responses_stream_intact() {
    let s = site();
    let want = big_body(40000);
    let (code, _, body) = curl_i(&[&s.url("/big.php")]);
    assert_eq!(code, 200);
    assert_eq!(body.len(), want.len());
    assert!(body == want, "streamed body differs");
    // fastcgi_buffering on with small buffers, 16 MB to a client that reads nothing until the
    // response spilled to fastcgi_temp_path (more than the sockets' buffers hold): still whole.
    let want = big_body(160_000);
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    c.write_all(b"GET /buffered/?n=160000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("request");
    let start = Instant::now();
    while !s
        .error_log()
        .contains("an upstream response is buffered to a temporary file")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never spilled: {}",
            s.error_log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).expect("read");
    let (code, _, body) = parse_response(&raw);
    assert_eq!(code, 200);
    // The body came chunked: take the chunks apart.
    let body = dechunk(&body);
    assert_eq!(body.len(), want.len());
    assert!(body == want, "buffered body differs");
}

/// A chunked body's data.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&b[..nl]).expect("hex"), 16)
            .expect("chunk size");
        b = &b[nl + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[test]
fn dead_socket_502_and_next_upstream() {
    let s = site();
    let (code, _, _) = curl_i(&[&s.url("/dead/x")]);
    assert_eq!(code, 502);
    for _ in 0..2 {
        let (code, _, body) = curl_i(&[&s.url("/flaky/x")]);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains("SCRIPT_FILENAME="));
    }
    let log = s.error_log();
    assert!(
        log.contains(
            "connect() failed (2: No such file or directory) while connecting to upstream"
        ) && log.contains("dead.sock"),
        "{log}"
    );
}

#[test]
fn keep_conn_reuses_connections() {
    let s = site();
    for _ in 0..5 {
        let (code, _, body) = curl_i(&[&s.url("/keep/x")]);
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert_eq!(
        s.relayed.load(Ordering::SeqCst),
        1,
        "five requests, one connection"
    );
    // Without fastcgi_keep_conn the server closes each connection.
    for _ in 0..3 {
        let (code, _, _) = curl_i(&[&s.url("/nokeep/x")]);
        assert_eq!(code, 200);
    }
    assert_eq!(s.relayed.load(Ordering::SeqCst), 4);
    drop(s.server);
}

/// `fastcgi_ignore_client_abort on`: a client that leaves while the script runs does not end
/// it (its output is read and discarded, so PHP's write succeeds and the script finishes);
/// `off`: the FastCGI connection closes, PHP's write fails and PHP ends the script.
#[test]
fn fastcgi_ignore_client_abort_lets_the_script_finish() {
    let site = site();
    for path in ["/abort-on/", "/abort-off/"] {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", site.port)).expect("connect");
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: fcgi.test\r\n\r\n").as_bytes())
            .expect("write");
        std::thread::sleep(Duration::from_millis(200));
        drop(c);
    }
    // PHP's shutdown function says how each script ended (it runs after an abort too).
    for (mark, want) in [("mark-on", "finished"), ("mark-off", "aborted")] {
        let path = site.dir.join(mark);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !path.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(50));
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(got, want, "{mark}");
    }
}
