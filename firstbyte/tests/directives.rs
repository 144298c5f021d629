//! Directives added through the declarative lists (`firstbyte/src/conf/directives.rs`),
//! against the real binary and nginx's documented behaviour: `etag`, `log_not_found`,
//! `expires`, `add_header ... always`, `worker_rlimit_nofile`, `client_header_buffer_size`
//! and `large_client_header_buffers` (HTTP/1.1 and HTTP/2).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    client_header_buffer_size 1k;
    large_client_header_buffers 2 1k;
    # H5BP's cache expiration: a map from the type to an `expires` value.
    map $arg_kind $expires {
        default off;
        page epoch;
        asset 1h;
        bad junk;
    }
    server {
        listen 127.0.0.1:{port0};
        server_name localhost;
        root {dir}/html;
        add_header X-Some some;
        add_header X-Always always always;
        location /quiet/ { log_not_found off; }
        location /noetag/ { etag off; }
        location /epoch/ { expires epoch; }
        location /max/ { expires max; }
        location /off/ { expires off; }
        location /access/ {
            expires 2048;
            location /access/inner/ { }
        }
        location /negative/ { expires -2048; }
        location /mapped/ { expires $expires; }
        location /daily/ { expires @15h30m33s; }
        location /modified/ { expires modified 2048; }
        location /cs/ {
            types { text/plain txt; text/css css; }
            charset utf-8;
        }
        location /cs/all/ { types { text/css css; } charset utf-8; charset_types *; }
        location /gz/ { gzip on; gzip_min_length 1; gzip_types text/plain; gzip_http_version 1.0; }
        location /gz11/ { gzip on; gzip_min_length 1; gzip_types text/plain; }
        location /gzp/ {
            gzip on; gzip_min_length 1; gzip_types text/plain; gzip_http_version 1.0;
            gzip_proxied any; gzip_disable "^Wget/" msie6;
        }
    }
}
"#;

/// One request on a fresh connection (`Connection: close`), the whole answer parsed.
fn raw(port: u16, req: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse_response(&buf)
}

fn get(port: u16, path: &str, extra: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n"),
    )
}

fn write(dir: &Path, rel: &str, body: &str) {
    let p = dir.join("html").join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, body).expect("write");
}

fn start(tag: &str) -> (Server, u16) {
    let dir = tempdir(tag);
    for f in [
        "a.txt",
        "quiet/x.txt",
        "noetag/a.txt",
        "epoch/a.txt",
        "max/a.txt",
        "off/a.txt",
        "access/a.txt",
        "access/inner/a.txt",
        "negative/a.txt",
        "mapped/a.txt",
        "daily/a.txt",
        "modified/a.txt",
        "cs/a.txt",
        "cs/a.css",
        "cs/all/a.css",
        "gz/a.txt",
        "gz11/a.txt",
        "gzp/a.txt",
    ] {
        write(&dir, f, "0123456789");
    }
    let port = free_port();
    let conf = render(CONF, &dir, &[port]);
    (Server::start_in(&dir, &conf, port), port)
}

fn stop(server: Server) {
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn date_secs(v: &str) -> i64 {
    httpdate::parse_http_date(v)
        .expect("http date")
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

/// nginx's `"<mtime hex>-<size hex>"` of a file.
fn etag_of(p: &Path) -> String {
    let m = std::fs::metadata(p).expect("stat");
    format!("\"{:x}-{:x}\"", m.mtime(), m.size())
}

/// `etag on` (default): an ETag, and If-None-Match answered by it. `etag off`: none, a
/// matching tag is not a match, only `*` is (nginx's `ngx_http_test_if_match`).
#[test]
fn etag_on_and_off() {
    let (server, port) = start("etag");
    let on = etag_of(&server.dir.join("html/a.txt"));
    let (st, h, _) = get(port, "/a.txt", "");
    assert_eq!((st, header(&h, "etag")), (200, Some(on.as_str())));
    let (st, _, _) = get(port, "/a.txt", &format!("If-None-Match: {on}\r\n"));
    assert_eq!(st, 304, "etag on: If-None-Match matches");

    let off = etag_of(&server.dir.join("html/noetag/a.txt"));
    let (st, h, _) = get(port, "/noetag/a.txt", "");
    assert_eq!((st, header(&h, "etag")), (200, None), "etag off: no ETag");
    let (st, h, body) = get(port, "/noetag/a.txt", &format!("If-None-Match: {off}\r\n"));
    assert_eq!(st, 200, "etag off: the file's tag does not match");
    assert_eq!(body, b"0123456789");
    assert!(header(&h, "etag").is_none());
    let (st, _, _) = get(port, "/noetag/a.txt", "If-None-Match: *\r\n");
    assert_eq!(st, 304, "etag off: * still matches");
    let (st, _, _) = get(port, "/noetag/a.txt", &format!("If-Match: {off}\r\n"));
    assert_eq!(st, 412, "etag off: If-Match with a tag fails");
    stop(server);
}

/// A missing file writes `open() "..." failed (2: No such file or directory)` to the error
/// log; under `log_not_found off` it writes nothing.
#[test]
fn log_not_found_off_keeps_the_error_log_quiet() {
    let (server, port) = start("log-not-found");
    assert_eq!(get(port, "/quiet/missing-quiet.txt", "").0, 404);
    assert_eq!(get(port, "/missing-loud.txt", "").0, 404);
    let log = server.dir.join("error.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        if t.contains("missing-loud.txt") || std::time::Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        text.contains("[error]")
            && text.contains("missing-loud.txt\" failed (2: No such file or directory)"),
        "{text}"
    );
    assert!(!text.contains("missing-quiet.txt"), "{text}");
    stop(server);
}

/// Each form of `expires`, with the values of nginx's headers.t; none on a 404.
#[test]
fn expires_forms() {
    let (server, port) = start("expires");
    let exp = |path: &str| {
        let (st, h, _) = get(port, path, "");
        assert_eq!(st, 200, "{path}");
        (
            header(&h, "expires").map(str::to_string),
            header(&h, "cache-control").map(str::to_string),
        )
    };
    assert_eq!(
        exp("/epoch/a.txt"),
        (
            Some("Thu, 01 Jan 1970 00:00:01 GMT".into()),
            Some("no-cache".into())
        )
    );
    assert_eq!(
        exp("/max/a.txt"),
        (
            Some("Thu, 31 Dec 2037 23:55:55 GMT".into()),
            Some("max-age=315360000".into())
        )
    );
    assert_eq!(exp("/off/a.txt"), (None, None));
    assert_eq!(exp("/a.txt"), (None, None), "default: off");
    for path in ["/access/a.txt", "/access/inner/a.txt"] {
        let (e, cc) = exp(path);
        assert_eq!(cc.as_deref(), Some("max-age=2048"), "{path}");
        let d = date_secs(&e.expect("Expires")) - now();
        assert!((2040..=2050).contains(&d), "{path}: {d}");
    }
    // From a map, per response; an invalid value sets nothing.
    assert_eq!(exp("/mapped/a.txt"), (None, None));
    assert_eq!(
        exp("/mapped/a.txt?kind=page").1.as_deref(),
        Some("no-cache")
    );
    assert_eq!(
        exp("/mapped/a.txt?kind=asset").1.as_deref(),
        Some("max-age=3600")
    );
    assert_eq!(exp("/mapped/a.txt?kind=bad"), (None, None));
    let (e, cc) = exp("/negative/a.txt");
    assert_eq!(cc.as_deref(), Some("no-cache"));
    assert!(date_secs(&e.expect("Expires")) < now() - 2000);
    let (e, cc) = exp("/daily/a.txt");
    let e = e.expect("Expires");
    // Local 15:30:33: the seconds survive any whole-hour or half-hour zone offset.
    assert!(e.ends_with(":33 GMT"), "{e}");
    let d = date_secs(&e) - now();
    assert!((0..=86_400 + 3600).contains(&d), "{d}");
    let age: i64 = cc
        .as_deref()
        .and_then(|c| c.strip_prefix("max-age="))
        .and_then(|n| n.parse().ok())
        .expect("max-age");
    assert!((age - d).abs() <= 2, "{age} vs {d}");
    // modified: 2048 s after the file's mtime, here 48 s ago.
    let f = std::fs::File::options()
        .write(true)
        .open(server.dir.join("html/modified/a.txt"))
        .expect("open");
    f.set_modified(SystemTime::now() - Duration::from_secs(48))
        .expect("set mtime");
    drop(f);
    let (_, cc) = exp("/modified/a.txt");
    let age: i64 = cc
        .as_deref()
        .and_then(|c| c.strip_prefix("max-age="))
        .and_then(|n| n.parse().ok())
        .expect("max-age");
    assert!((1995..=2001).contains(&age), "{age}");
    // Not for a 404.
    let (st, h, _) = get(port, "/max/missing.txt", "");
    assert_eq!(st, 404);
    assert!(header(&h, "expires").is_none() && header(&h, "cache-control").is_none());
    stop(server);
}

/// `add_header` without `always` is for 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308;
/// with `always`, for every status.
#[test]
fn add_header_always() {
    let (server, port) = start("add-header");
    let (st, h, _) = get(port, "/a.txt", "");
    assert_eq!(st, 200);
    assert_eq!(header(&h, "x-some"), Some("some"));
    assert_eq!(header(&h, "x-always"), Some("always"));
    let (st, h, _) = get(port, "/missing.txt", "");
    assert_eq!(st, 404);
    assert_eq!(header(&h, "x-some"), None);
    assert_eq!(header(&h, "x-always"), Some("always"));
    stop(server);
}

/// Request line and header lines against `large_client_header_buffers 2 1k` (and a 1k
/// client header buffer): at SIZE served, one byte over refused, as nginx (414 for the
/// request line, 400 "Request Header Or Cookie Too Large" for a header line or a head that
/// needs a third buffer).
#[test]
fn header_buffers_http1() {
    let (server, port) = start("header-buffers");
    // "GET /a.txt?q=... HTTP/1.1\r\n" of exactly `len` bytes.
    let line = |len: usize| {
        let fixed = "GET /a.txt?q= HTTP/1.1\r\n".len();
        format!("GET /a.txt?q={} HTTP/1.1\r\n", "a".repeat(len - fixed))
    };
    let tail = "Host: localhost\r\nConnection: close\r\n\r\n";
    let (st, _, body) = raw(port, &format!("{}{tail}", line(1024)));
    assert_eq!((st, body.as_slice()), (200, &b"0123456789"[..]), "1024");
    let (st, _, _) = raw(port, &format!("{}{tail}", line(1025)));
    assert_eq!(st, 414, "1025-byte request line");
    // As nginx, the connection ends after it, even when the client asked to keep it.
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let req = format!("{}Host: localhost\r\n\r\n", line(1025));
    c.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    c.read_to_end(&mut buf)
        .expect("closed by the server, not timed out");
    assert_eq!(parse_response(&buf).0, 414);

    // "X-Long: ...\r\n" of exactly `len` bytes.
    let hdr = |len: usize| format!("X-Long: {}\r\n", "b".repeat(len - "X-Long: \r\n".len()));
    let req = |headers: &str| format!("GET /a.txt HTTP/1.1\r\n{headers}{tail}");
    let (st, _, _) = raw(port, &req(&hdr(1024)));
    assert_eq!(st, 200, "1024-byte header line");
    let (st, _, body) = raw(port, &req(&hdr(1025)));
    assert_eq!(st, 400, "1025-byte header line");
    assert!(
        String::from_utf8_lossy(&body).contains("Request Header Or Cookie Too Large"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    // Two lines of 1000 take the two large buffers; a third finds none.
    let (st, _, _) = raw(port, &req(&hdr(1000).repeat(2)));
    assert_eq!(st, 200, "two 1000-byte lines");
    let (st, _, _) = raw(port, &req(&hdr(1000).repeat(3)));
    assert_eq!(st, 400, "three 1000-byte lines");
    stop(server);
}

const TLS_CONF: &str = r#"
pid off;
error_log {dir}/error.log warn;
events {}
http {
    access_log off;
    large_client_header_buffers 2 1k;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / { return 200 "ok\n"; }
    }
}
"#;

/// HTTP/2: `large_client_header_buffers 2 1k` bounds the decoded header list at 2048 bytes
/// (the default, 4 8k, allows 32 KiB).
#[tokio::test]
async fn header_buffers_http2() {
    let (server, ports) = Server::start("header-buffers-h2", TLS_CONF, 1);
    let port = ports[0];
    let (mut send, conn) = h2_tls_client(port, None).await;
    // `bytes` of values in fields of 900 bytes at most: one field past a 1k buffer is refused
    // on its own (nginx: "client sent too large header field").
    let with_header = |bytes: usize| {
        let mut req = http::Request::get(format!("https://localhost:{port}/"))
            .body(())
            .expect("request");
        for i in 0..bytes.div_ceil(900) {
            let n = (bytes - i * 900).min(900);
            req.headers_mut().insert(
                http::HeaderName::from_bytes(format!("x-large-{i}").as_bytes()).expect("name"),
                http::HeaderValue::from_str(&"a".repeat(n)).expect("value"),
            );
        }
        req
    };
    // The pseudo-headers and the x-large fields' own 32 + 9 bytes each take ~300 of the 2048.
    let (resp, _) = send.send_request(with_header(1700), true).expect("send");
    assert_eq!(resp.await.expect("1700 bytes").status(), 200);
    let (resp, _) = send.send_request(with_header(2100), true).expect("send");
    match resp.await {
        Ok(r) => assert_eq!(r.status(), 431, "2100 bytes"),
        Err(e) => assert_eq!(e.reason(), Some(h2::Reason::REFUSED_STREAM), "{e:?}"),
    }
    drop(send);
    let _ = conn.await;
    // One field of 1,100 bytes, the list well within 2048: past a buffer of 1k, refused.
    let (mut send, conn) = h2_tls_client(port, None).await;
    let mut req = http::Request::get(format!("https://localhost:{port}/"))
        .body(())
        .expect("request");
    req.headers_mut().insert(
        "x-large",
        http::HeaderValue::from_str(&"a".repeat(1100)).expect("value"),
    );
    let (resp, _) = send.send_request(req, true).expect("send");
    assert_eq!(resp.await.expect("one large field").status(), 400);
    drop(send);
    let _ = conn.await;
    stop(server);
}

/// Two Host headers name two servers: 400 on HTTP/1.1 and on HTTP/2, as nginx ("client sent
/// duplicate host header"; nginx-tests h2_host.t "host repeat").
#[tokio::test]
async fn duplicate_host_header_is_refused() {
    let (server, ports) = Server::start("dup-host", TLS_CONF, 1);
    let port = ports[0];
    let (mut send, conn) = h2_tls_client(port, None).await;
    for (hosts, want) in [
        (&["localhost"][..], 200),
        (&["localhost", "again"][..], 400),
    ] {
        let mut req = http::Request::get("/").body(()).expect("request");
        for h in hosts {
            req.headers_mut()
                .append(http::header::HOST, http::HeaderValue::from_static(h));
        }
        // No :authority: the Host headers decide.
        let (resp, _) = send.send_request(req, true).expect("send");
        assert_eq!(resp.await.expect("response").status(), want, "{hosts:?}");
    }
    drop(send);
    let _ = conn.await;

    let one = curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--http1.1",
        "-H",
        "Host: localhost",
        &format!("https://127.0.0.1:{port}/"),
    ]);
    assert_eq!(String::from_utf8_lossy(&one.stdout), "200");
    let mut s = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-connect",
            &format!("127.0.0.1:{port}"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl");
    s.stdin
        .take()
        .unwrap()
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: again\r\nConnection: close\r\n\r\n")
        .unwrap();
    let out = s.wait_with_output().expect("openssl output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    stop(server);
}

/// `worker_rlimit_nofile N`: the running server's soft and hard limits are N; a value the
/// kernel refuses (past `fs.nr_open`) is an `[alert]` and the server still starts, as nginx.
#[test]
fn worker_rlimit_nofile() {
    let conf = "pid off;\nworker_rlimit_nofile 1234;\nevents {}\nhttp { access_log off; server { listen 127.0.0.1:{port0}; location / { return 200; } } }\n";
    let (server, _) = Server::start("rlimit", conf, 1);
    let limits =
        std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let nums: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(nums, ["1234", "1234"], "{line}");
    stop(server);

    let conf = conf.replace("1234", "99999999999");
    let (server, port) = Server::start("rlimit-fail", &conf, 1);
    let (st, _, _) = get(port[0], "/", "");
    assert_eq!(st, 200);
    let err = server.stderr_text();
    assert!(
        err.contains("[alert] setrlimit(RLIMIT_NOFILE, 99999999999) failed ("),
        "{err}"
    );
    stop(server);
}

/// `charset` names the charset of listed types that name none (`charset_types *`: every
/// type); `gzip_http_version 1.0` compresses for HTTP/1.0 clients, the default 1.1 does not;
/// `gzip_proxied` and `gzip_disable` decide for proxied requests and user agents.
#[test]
fn charset_and_gzip_http_version() {
    let (server, port) = start("charset");
    let ct = |path: &str| {
        let (code, h, _) = get(port, path, "");
        assert_eq!(code, 200, "{path}");
        header(&h, "content-type").unwrap_or("").to_string()
    };
    assert_eq!(ct("/cs/a.txt"), "text/plain; charset=utf-8");
    assert_eq!(
        ct("/cs/a.css"),
        "text/css",
        "text/css is not in charset_types"
    );
    assert_eq!(ct("/cs/all/a.css"), "text/css; charset=utf-8");
    assert_eq!(ct("/a.txt"), "text/plain", "no charset outside");
    let gz = |path: &str| {
        let (code, h, _) = raw(
            port,
            &format!("GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n"),
        );
        assert_eq!(code, 200, "{path}");
        header(&h, "content-encoding").map(str::to_string)
    };
    assert_eq!(gz("/gz/a.txt").as_deref(), Some("gzip"));
    assert_eq!(gz("/gz11/a.txt"), None);
    // gzip_proxied (a `Via` means proxied: off by default) and gzip_disable.
    let gz_with = |path: &str, extra: &str| {
        let (code, h, _) = raw(
            port,
            &format!(
                "GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n{extra}\r\n"
            ),
        );
        assert_eq!(code, 200, "{path}");
        header(&h, "content-encoding").map(str::to_string)
    };
    assert_eq!(gz_with("/gz/a.txt", "Via: 1.1 proxy\r\n"), None);
    assert_eq!(
        gz_with("/gzp/a.txt", "Via: 1.1 proxy\r\n").as_deref(),
        Some("gzip")
    );
    assert_eq!(gz_with("/gzp/a.txt", "User-Agent: wget/1.21\r\n"), None);
    assert_eq!(
        gz_with(
            "/gzp/a.txt",
            "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows 98)\r\n"
        ),
        None
    );
    assert_eq!(
        gz_with("/gzp/a.txt", "User-Agent: curl/8\r\n").as_deref(),
        Some("gzip")
    );
    stop(server);
}

/// `limit_rate 10k`: a 30 KiB body takes at least 2 s (10 KiB at once, then 10 KiB a second,
/// nginx's rule), over HTTP/1.1 and HTTP/2, and arrives whole; `limit_rate_after 30k` lets it
/// all go at once.
#[test]
fn limit_rate_paces_the_body() {
    let conf = r#"
pid off;
error_log {dir}/error.log warn;
events {}
http {
    access_log off;
    root {dir}/html;
    sendfile on;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        limit_rate 10k;
        location /after/ { limit_rate_after 30k; alias {dir}/html/; }
    }
    server { listen 127.0.0.1:{port1}; limit_rate 10k; }
}
"#;
    let (server, ports) = Server::start("limit-rate", conf, 2);
    let body: Vec<u8> = (0..30 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::create_dir_all(server.dir.join("html")).unwrap();
    std::fs::write(server.dir.join("html/f.bin"), &body).unwrap();
    let fetch = |args: &[&str]| {
        let t = std::time::Instant::now();
        let out = curl(args);
        assert!(out.status.success(), "{args:?}");
        assert!(out.stdout == body, "{args:?}: {} bytes", out.stdout.len());
        t.elapsed()
    };
    let tls = format!("https://localhost:{}/f.bin", ports[0]);
    let plain = format!("http://127.0.0.1:{}/f.bin", ports[1]);
    for (proto, url) in [
        ("--http2", &tls),
        ("--http1.1", &tls),
        ("--http1.1", &plain),
    ] {
        let took = fetch(&[proto, url]);
        assert!(
            took >= Duration::from_millis(1950),
            "{proto} {url}: {took:?}"
        );
    }
    let took = fetch(&[
        "--http2",
        &format!("https://localhost:{}/after/f.bin", ports[0]),
    ]);
    assert!(
        took < Duration::from_millis(1900),
        "limit_rate_after 30k: {took:?}"
    );
    stop(server);
}

/// `http2_chunk_size 1k`: no DATA frame carries more than 1 KiB of a 10 KiB body (the h2
/// client hands over each DATA frame's payload as one chunk); without it frames fill records.
#[tokio::test]
async fn http2_chunk_size_caps_data_frames() {
    let conf = r#"
pid off;
error_log {dir}/error.log warn;
events {}
http {
    access_log off;
    root {dir}/html;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location /small/ { http2_chunk_size 1k; alias {dir}/html/; }
    }
}
"#;
    let (server, ports) = Server::start("h2-chunk", conf, 1);
    std::fs::create_dir_all(server.dir.join("html")).unwrap();
    std::fs::write(server.dir.join("html/f.bin"), vec![5u8; 10 * 1024]).unwrap();
    let (mut send, conn) = h2_tls_client(ports[0], None).await;
    for (path, most) in [("/small/f.bin", 1024), ("/f.bin", 16 * 1024)] {
        let req = http::Request::get(format!("https://localhost:{}{path}", ports[0]))
            .body(())
            .expect("request");
        let (resp, _) = send.send_request(req, true).expect("send");
        let mut body = resp.await.expect("response").into_body();
        let (mut total, mut largest, mut frames) = (0, 0, 0);
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("data");
            let _ = body.flow_control().release_capacity(chunk.len());
            total += chunk.len();
            largest = largest.max(chunk.len());
            frames += 1;
        }
        assert_eq!(total, 10 * 1024, "{path}");
        assert!(largest <= most, "{path}: a {largest}-byte DATA frame");
        if path.starts_with("/small") {
            assert!(frames >= 10, "{path}: {frames} frames");
        } else {
            assert!(
                frames <= 2,
                "{path}: {frames} frames (record-sized by default)"
            );
        }
    }
    drop(send);
    let _ = conn.await;
    stop(server);
}

/// `listen ... sndbuf= rcvbuf= so_keepalive=`: the accepted connection has the buffers (the
/// kernel doubles what is set) and a keep-alive timer, as `ss` shows it.
#[test]
fn listen_socket_tuning_reaches_accepted_connections() {
    let conf = "pid off;\nevents {}\nhttp { access_log off; server { listen 127.0.0.1:{port0} sndbuf=64k rcvbuf=32k so_keepalive=7:3:2; return 200 ok; } }\n";
    let (server, ports) = Server::start("listen-tuning", conf, 1);
    let s = TcpStream::connect(("127.0.0.1", ports[0])).expect("connect");
    let filter = format!("( sport = :{} )", ports[0]);
    let mut out = String::new();
    for _ in 0..50 {
        let o = std::process::Command::new("ss")
            .args(["-tmon", "state", "established", &filter])
            .output()
            .expect("ss");
        out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.contains("skmem") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(out.contains("tb131072"), "SO_SNDBUF 64k: {out}");
    assert!(out.contains("rb65536"), "SO_RCVBUF 32k: {out}");
    assert!(out.contains("timer:(keepalive"), "SO_KEEPALIVE: {out}");
    drop(s);
    stop(server);
}

/// `return 444`: no response. HTTP/1.1: the connection closes with nothing written (curl: 52,
/// empty reply); HTTP/2: the stream is reset (curl: 92) and the connection serves the next
/// request; the access log records 444.
#[test]
fn return_444_closes_without_a_response() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log {dir}/access.log;
    http2 on;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    server {
        listen 127.0.0.1:{port0};
        listen 127.0.0.1:{port1} ssl;
        location / { return 444; }
        location /ok { return 200 "ok\n"; }
    }
}
"#;
    let (server, ports) = Server::start("return-444", conf, 2);
    let url = format!("http://127.0.0.1:{}/", ports[0]);
    let h1 = curl(&["-s", &url]);
    assert_eq!(h1.status.code(), Some(52), "{h1:?}");
    assert!(h1.stdout.is_empty());
    let h2 = curl(&["-s", "--http2-prior-knowledge", &url]);
    assert_eq!(h2.status.code(), Some(92), "{h2:?}");
    // The stream, not the connection: the next request on it is served.
    let tls = format!("https://localhost:{}", ports[1]);
    let both = curl(&["-s", "--http2", &format!("{tls}/"), &format!("{tls}/ok")]);
    assert_eq!(String::from_utf8_lossy(&both.stdout), "ok\n");
    let log = std::fs::read_to_string(server.dir.join("access.log")).unwrap_or_default();
    assert!(log.contains("\"GET / HTTP/1.1\" 444 0"), "{log}");
    assert!(log.contains("\"GET /ok HTTP/2.0\" 200"), "{log}");
    stop(server);
}
