//! Open files of static responses: by default a file rewritten in place is served with its
//! new content and length at once (nginx's `open_file_cache off` opens per request);
//! `open_file_cache max=N` keeps nginx's metadata for `open_file_cache_valid`, and with
//! `open_file_cache_errors on` its 404s; bad values are `[emerg]`s naming file and line.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
pid {dir}/fb.pid;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    types { text/plain txt; }
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location /sf/ { sendfile on; alias {dir}/html/; }
        location /strict/ { disable_symlinks on; alias {dir}/html/; }
        location /c/ {
            alias {dir}/html/;
            open_file_cache max=10;
            open_file_cache_valid 60s;
        }
        location /e/ {
            alias {dir}/html/;
            open_file_cache max=10 inactive=60s;
            open_file_cache_errors on;
        }
    }
}
"#;

/// One HTTP/1.0 request over a fresh connection: (status, headers, body).
fn get(port: u16, uri: &str, extra: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {uri} HTTP/1.0\r\nHost: t\r\n{extra}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}

fn len_of(h: &[(String, String)]) -> Option<&str> {
    header(h, "content-length")
}

/// Rewrites `p` in place (same inode), as a test's `open(F, '>', ...)` does.
fn rewrite(p: &Path, data: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(p)
        .unwrap();
    f.write_all(data).unwrap();
}

fn inode(p: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap())
}

#[test]
fn a_file_rewritten_in_place_is_served_new_at_once_by_default() {
    let (srv, ports) = Server::start("ofc-default", CONF, 1);
    let port = ports[0];
    let f = srv.dir.join("html/f.txt");
    std::fs::write(&f, "one").unwrap();
    let ino = inode(&f);
    for prefix in ["/", "/sf/", "/strict/"] {
        let uri = format!("{prefix}f.txt");
        rewrite(&f, b"one");
        let (code, h, body) = get(port, &uri, "");
        assert_eq!((code, body.as_slice()), (200, &b"one"[..]), "{uri}");
        let etag1 = header(&h, "etag").unwrap().to_string();
        // Within the same second (nothing sleeps): the new length and bytes.
        rewrite(&f, b"second version");
        let (code, h, body) = get(port, &uri, "");
        assert_eq!((code, len_of(&h)), (200, Some("14")), "{uri}");
        assert_eq!(body, b"second version", "{uri}");
        let etag2 = header(&h, "etag").unwrap();
        assert!(etag2.ends_with("-e\""), "{uri}: {etag2}");
        assert_ne!(etag1, etag2);
        // The old ETag no longer matches; the new one does.
        let (code, _, _) = get(port, &uri, &format!("If-None-Match: {etag1}\r\n"));
        assert_eq!(code, 200, "{uri}");
        let (code, _, _) = get(port, &uri, &format!("If-None-Match: {etag2}\r\n"));
        assert_eq!(code, 304, "{uri}");
        // A range of the new content; then shorter again.
        let (code, h, body) = get(port, &uri, "Range: bytes=7-\r\n");
        assert_eq!((code, body.as_slice()), (206, &b"version"[..]), "{uri}");
        assert_eq!(header(&h, "content-range"), Some("bytes 7-13/14"));
        rewrite(&f, b"3rd");
        let (code, h, body) = get(port, &uri, "");
        assert_eq!(
            (code, len_of(&h), body.as_slice()),
            (200, Some("3"), &b"3rd"[..])
        );
    }
    assert_eq!(inode(&f), ino, "rewritten in place throughout");
    // A file created after a 404 is found at once; a removed one is gone at once.
    let g = srv.dir.join("html/later.txt");
    assert_eq!(get(port, "/later.txt", "").0, 404);
    std::fs::write(&g, "now").unwrap();
    assert_eq!(get(port, "/later.txt", "").2, b"now");
    std::fs::remove_file(&g).unwrap();
    assert_eq!(get(port, "/later.txt", "").0, 404);
    // Under `disable_symlinks on`, a file replaced by a symlink is refused at once.
    std::fs::write(srv.dir.join("html/real.txt"), "real").unwrap();
    assert_eq!(get(port, "/strict/f.txt", "").0, 200);
    std::fs::remove_file(&f).unwrap();
    std::os::unix::fs::symlink(srv.dir.join("html/real.txt"), &f).unwrap();
    assert_eq!(get(port, "/strict/f.txt", "").0, 403);
    assert_eq!(get(port, "/f.txt", "").2, b"real");
}

#[test]
fn open_file_cache_keeps_the_old_metadata_for_valid_as_nginx() {
    let (srv, ports) = Server::start("ofc-nginx", CONF, 1);
    let port = ports[0];
    let f = srv.dir.join("html/f.txt");
    std::fs::write(&f, "one").unwrap();
    let (code, h, body) = get(port, "/c/f.txt", "");
    assert_eq!((code, body.as_slice()), (200, &b"one"[..]));
    let etag = header(&h, "etag").unwrap().to_string();
    let modified = header(&h, "last-modified").unwrap().to_string();
    rewrite(&f, b"second version");
    // nginx sends the cached length from the kept descriptor: the first 3 bytes of the
    // rewritten file, with the old ETag and Last-Modified.
    let (code, h, body) = get(port, "/c/f.txt", "");
    assert_eq!((code, len_of(&h)), (200, Some("3")));
    assert_eq!(body, b"sec");
    assert_eq!(header(&h, "etag"), Some(etag.as_str()));
    assert_eq!(header(&h, "last-modified"), Some(modified.as_str()));
    let (code, _, _) = get(port, "/c/f.txt", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!(code, 304, "the old ETag still matches");
    let (code, h, body) = get(port, "/c/f.txt", "Range: bytes=1-\r\n");
    assert_eq!((code, body.as_slice()), (206, &b"ec"[..]));
    assert_eq!(header(&h, "content-range"), Some("bytes 1-2/3"));
    // Shorter now: nginx's read of the cached length fails ("file was truncated") and it
    // closes the connection, its buffered head unsent; so does firstbyte: never a whole
    // response of the cached length.
    rewrite(&f, b"s");
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /c/f.txt HTTP/1.0\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n");
    assert!(
        head_end.is_none_or(|e| raw.len() - (e + 4) < 3),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    rewrite(&f, b"second version");
    // A location without the directive sees the file as it is.
    assert_eq!(get(port, "/f.txt", "").2, b"second version");
    // Without `open_file_cache_errors`, failures are not kept.
    assert_eq!(get(port, "/c/later.txt", "").0, 404);
    std::fs::write(srv.dir.join("html/later.txt"), "now").unwrap();
    assert_eq!(get(port, "/c/later.txt", "").2, b"now");
}

#[test]
fn open_file_cache_errors_on_keeps_a_404_for_valid() {
    let (srv, ports) = Server::start("ofc-errors", CONF, 1);
    let port = ports[0];
    assert_eq!(get(port, "/e/later.txt", "").0, 404);
    std::fs::write(srv.dir.join("html/later.txt"), "now").unwrap();
    // nginx answers from the cached ENOENT until `open_file_cache_valid` (60s) passes.
    assert_eq!(get(port, "/e/later.txt", "").0, 404);
    assert_eq!(get(port, "/later.txt", "").2, b"now");
}

#[test]
fn bad_values_are_emergs_with_file_and_line() {
    let dir = tempdir("ofc-bad");
    let cases = [
        (
            "open_file_cache max=0;",
            "invalid \"open_file_cache\" parameter \"max=0\"",
        ),
        (
            "open_file_cache inactive=20s;",
            "\"open_file_cache\" must have the \"max\" parameter",
        ),
        (
            "open_file_cache max=9 inactive=soon;",
            "invalid \"open_file_cache\" parameter \"inactive=soon\"",
        ),
        (
            "open_file_cache_valid forever;",
            "\"open_file_cache_valid\" directive invalid value",
        ),
        (
            "open_file_cache_min_uses many;",
            "\"open_file_cache_min_uses\" directive invalid value",
        ),
        (
            "open_file_cache_errors maybe;",
            "invalid value \"maybe\" in \"open_file_cache_errors\" directive, it must be \"on\" or \"off\"",
        ),
    ];
    let conf = dir.join("bad.conf");
    for (line, want) in cases {
        let text = format!("events {{}}\nhttp {{\n    server {{\n        {line}\n    }}\n}}\n");
        std::fs::write(&conf, text).unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{line}: accepted");
        let want = format!("[emerg] {want} in {}:4", conf.display());
        assert!(err.contains(&want), "{line}: {err}");
    }
    // A tuning guide's lines load.
    let text = "events {}\nhttp {\n    open_file_cache max=1000 inactive=20s;\n    \
                open_file_cache_valid 30s;\n    open_file_cache_min_uses 2;\n    \
                open_file_cache_errors on;\n    server { listen 127.0.0.1:1; }\n}\n";
    std::fs::write(&conf, text).unwrap();
    let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
