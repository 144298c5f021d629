//! `proxy_store` end to end: a 200 response kept byte for byte under the root (or at a path
//! with variables) with `proxy_store_access`'s mode and the upstream's `Last-Modified`; nothing
//! kept for a body cut short, a HEAD, a 404 or an `X-Accel-Redirect` answer; a request cannot place a file outside the
//! directory (`..`, encoded or not, and a symlink under the root).

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::*;

const SIZE: usize = 300_000;
/// `Last-Modified` of every upstream answer, and its time.
const LAST_MODIFIED: &str = "Wed, 21 Oct 2015 07:28:00 GMT";
const LAST_MODIFIED_SECS: i64 = 1_445_412_480;

fn body() -> Vec<u8> {
    let mut x: u32 = 12345;
    (0..SIZE)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect()
}

/// The upstream: `/cut...` promises the whole body and closes after half; `/missing...` is a
/// 404; `/slow...` waits before its second half; anything else is the whole body.
fn start_upstream() -> u16 {
    upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let mut parts = head.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut s = s;
        let data = body();
        if path.starts_with("/accel") {
            let head = format!(
                "HTTP/1.1 200 OK\r\nX-Accel-Redirect: /elsewhere\r\nContent-Length: {SIZE}\r\nConnection: close\r\n\r\n"
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&data);
            return;
        }
        if path.starts_with("/missing") {
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope");
            return;
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\nLast-Modified: {LAST_MODIFIED}\r\nConnection: close\r\n\r\n"
        );
        let _ = s.write_all(head.as_bytes());
        if method == "HEAD" {
            return;
        }
        let half = SIZE / 2;
        let _ = s.write_all(&data[..half]);
        if path.starts_with("/cut") {
            return;
        }
        if path.starts_with("/slow") {
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = s.write_all(&data[half..]);
    })
    .0
}

fn start(tag: &str) -> (Server, u16, PathBuf) {
    let up = start_upstream();
    let dir = tempdir(tag);
    let port = free_port();
    let d = dir.display();
    // `user root`: the serving user writes the files (nginx's workers), here into the
    // test's own directories.
    let conf = format!(
        "user root;\npid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n \
         proxy_temp_path {d}/temp;\n root {d}/root;\n \
         server {{ listen 127.0.0.1:{port};\n \
         location /s/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_store on; proxy_store_access group:rw all:r; }}\n \
         location /b/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_store on; proxy_buffering on; }}\n \
         location /a/ {{ alias {d}/aliased/; proxy_pass http://127.0.0.1:{up}/; proxy_store on; }}\n \
         location /v/ {{ proxy_pass http://127.0.0.1:{up}/; proxy_store {d}/byvar/$arg_name.bin; }}\n \
         }}\n}}\n"
    );
    std::fs::create_dir_all(dir.join("root")).expect("root");
    let srv = Server::start_in(&dir, &conf, port);
    (srv, port, dir)
}

/// The whole answer to `method path` (the connection closes after it).
fn fetch(port: u16, method: &str, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}

/// Waits (10 s at most) until `cond` holds.
fn wait_for(cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

fn temp_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("temp")).map_or(true, |mut d| d.next().is_none())
}

/// Every regular file under `dir`, relative.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("under").display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_complete_200_is_kept_byte_for_byte_with_its_mode_and_time() {
    let (_srv, port, dir) = start("store-ok");
    let resp = fetch(port, "GET", "/s/deep/er/file.bin");
    assert!(resp.starts_with(b"HTTP/1.1 200"), "{:?}", &resp[..40]);
    assert!(resp.ends_with(&body()), "the client gets the body");
    let kept = dir.join("root/s/deep/er/file.bin");
    assert!(wait_for(|| kept.exists()), "not stored: {:?}", files(&dir));
    assert_eq!(std::fs::read(&kept).expect("read"), body());
    let m = std::fs::metadata(&kept).expect("meta");
    assert_eq!(m.mode() & 0o777, 0o664, "proxy_store_access group:rw all:r");
    assert_eq!(
        m.mtime(),
        LAST_MODIFIED_SECS,
        "the upstream's Last-Modified"
    );
    assert!(dir.join("root/s/deep/er").is_dir());
    assert!(wait_for(|| temp_empty(&dir)), "a temp file stayed");

    // Buffered (`proxy_buffering on`: the body spills to a temp file of its own), and an alias.
    fetch(port, "GET", "/b/x.bin");
    let b = dir.join("root/b/x.bin");
    assert!(wait_for(|| b.exists()));
    assert_eq!(std::fs::read(&b).expect("read"), body());
    assert_eq!(
        std::fs::metadata(&b).expect("meta").mode() & 0o777,
        0o600,
        "proxy_store_access's default: user:rw"
    );
    fetch(port, "GET", "/a/in/alias.bin");
    let a = dir.join("aliased/in/alias.bin");
    assert!(wait_for(|| a.exists()), "{:?}", files(&dir));
    assert_eq!(std::fs::read(&a).expect("read"), body());

    // A string with variables.
    fetch(port, "GET", "/v/any?name=one");
    let v = dir.join("byvar/one.bin");
    assert!(wait_for(|| v.exists()), "{:?}", files(&dir));
    assert_eq!(std::fs::read(&v).expect("read"), body());
    assert!(wait_for(|| temp_empty(&dir)), "a temp file stayed");
}

#[test]
fn nothing_is_kept_for_a_cut_body_a_head_or_a_404() {
    let (_srv, port, dir) = start("store-not");
    let cut = fetch(port, "GET", "/s/cut.bin");
    assert!(cut.starts_with(b"HTTP/1.1 200"));
    assert!(cut.len() < SIZE, "the client's answer is cut too");
    assert!(wait_for(|| temp_empty(&dir)), "the temp file is removed");
    let head = fetch(port, "HEAD", "/s/head.bin");
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let missing = fetch(port, "GET", "/s/missing.bin");
    assert!(missing.starts_with(b"HTTP/1.1 404"));
    // An `X-Accel-Redirect` answer (its target is a missing file here) is not the response.
    let accel = fetch(port, "GET", "/s/accel.bin");
    assert!(
        accel.starts_with(b"HTTP/1.1 404"),
        "{}",
        String::from_utf8_lossy(&accel[..40])
    );
    assert!(wait_for(|| temp_empty(&dir)));
    // A complete one after them, so that their (absent) files had their chance.
    fetch(port, "GET", "/s/done.bin");
    assert!(wait_for(|| dir.join("root/s/done.bin").exists()));
    assert_eq!(files(&dir.join("root")), vec!["s/done.bin".to_string()]);
}

/// nginx goes on reading an upstream whose response it stores when the client leaves
/// (`proxy_store` implies `proxy_ignore_client_abort`), and keeps the file.
#[test]
fn a_client_that_leaves_still_gets_the_file_kept() {
    let (_srv, port, dir) = start("store-abort");
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(b"GET /s/slow.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut first = [0u8; 1024];
    let n = s.read(&mut first).expect("read");
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    drop(s);
    let kept = dir.join("root/s/slow.bin");
    assert!(wait_for(|| kept.exists()), "{:?}", files(&dir));
    assert_eq!(std::fs::read(&kept).expect("read"), body());
    assert!(wait_for(|| temp_empty(&dir)));
}

/// The request's part of the path cannot leave the directory: `..` (plain, encoded, or in a
/// variable) and a symlink under the root are refused; the client still gets its answer.
#[test]
fn a_request_cannot_place_a_file_outside_the_directory() {
    let (_srv, port, dir) = start("store-escape");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::create_dir_all(dir.join("root/s")).expect("root/s");
    std::os::unix::fs::symlink(&outside, dir.join("root/s/link")).expect("symlink");
    for path in [
        "/s/link/planted.bin",
        "/s/../../outside/dots.bin",
        "/s/%2e%2e/%2e%2e/outside/encoded.bin",
        "/s/x/..%2f..%2f..%2foutside/mixed.bin",
        "/v/any?name=../outside/var",
        "/v/any?name=..%2foutside%2fvar2",
    ] {
        let resp = fetch(port, "GET", path);
        assert!(!resp.is_empty(), "{path}: no answer");
    }
    assert!(wait_for(|| temp_empty(&dir)), "a temp file stayed");
    assert_eq!(files(&outside), Vec::<String>::new(), "written outside");
    let everywhere = files(&dir);
    assert!(
        everywhere
            .iter()
            .all(|f| f.starts_with("root/s/") || f.starts_with("byvar/") || !f.contains('/')),
        "{everywhere:?}"
    );
    // `$arg_name` is not decoded: `..%2f...` names one file inside the directory.
    assert!(
        everywhere
            .iter()
            .filter(|f| f.starts_with("byvar/"))
            .all(|f| f == "byvar/..%2foutside%2fvar2.bin"),
        "{everywhere:?}"
    );
}
