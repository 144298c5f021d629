//! Serving, end to end: TLS 1.2/1.3, ALPN, SNI, resumption, HTTP/1.1 and HTTP/2 with curl and
//! openssl s_client, static files and their headers, `return`, `try_files`, `error_page`,
//! `add_header`, access control, compression, path traversal, the access log.

mod support;

use std::process::Command;
use std::sync::OnceLock;

use support::*;

const CONF: &str = r#"
pid {dir}/fb.pid;
error_log {dir}/error.log info;
events {}
http {
    types { text/html html; text/css css; text/plain txt; application/octet-stream bin; }
    default_type application/octet-stream;
    access_log {dir}/access.log;
    gzip on;
    gzip_types text/css;
    gzip_min_length 20;
    charset_map B A { 58 59; }
    server {
        listen 127.0.0.1:{port0} ssl default_server;
        listen [::1]:{port0} ssl;
        http2 on;
        server_name a.test *.a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        ssl_certificate {certs}/a-rsa.crt;
        ssl_certificate_key {certs}/a-rsa.key;
        ssl_session_cache shared:SSL:1m;
        root {dir}/html;
        add_header X-Site a always;
        location = /redirect { return 301 https://$host$request_uri; }
        location /text { return 200 "text for $host $scheme $ssl_protocol\n"; }
        location /tf/ { try_files $uri $uri/ /index.html; }
        location /private/ { deny all; }
        location = /status { stub_status; allow 127.0.0.1; deny all; }
        location /info { connection_info; }
        location /alias/ { alias {dir}/other/; }
        location /cs/ { charset A; source_charset B; }
        location /one-range/ { max_ranges 1; alias {dir}/html/; }
        error_page 404 /404.html;
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        server_name b.test;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        root {dir}/html-b;
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        server_name big.test;
        ssl_certificate {certs}/big.test.crt;
        ssl_certificate_key {certs}/big.test.key;
        ssl_protocols TLSv1.3;
        root {dir}/html;
    }
    server {
        listen 127.0.0.1:{port1};
        server_name plain.test;
        root {dir}/html;
        location /old { return 301 /new$is_args$args; }
    }
}
"#;

struct Fixture {
    _server: std::sync::Mutex<Server>,
    dir: std::path::PathBuf,
    tls: u16,
    plain: u16,
}

/// One server shared by the tests of this file (they only read from it).
fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempdir("serve");
        let html = dir.join("html");
        std::fs::create_dir_all(html.join("sub")).unwrap();
        std::fs::create_dir_all(html.join("tf/d")).unwrap();
        std::fs::create_dir_all(html.join("private")).unwrap();
        std::fs::create_dir_all(dir.join("html-b")).unwrap();
        std::fs::create_dir_all(dir.join("other")).unwrap();
        std::fs::write(html.join("index.html"), "<h1>site a</h1>\n").unwrap();
        std::fs::create_dir_all(html.join("cs")).unwrap();
        std::fs::write(html.join("cs/t.html"), "X000XXXXXXX001XXXXXX").unwrap();
        std::fs::write(html.join("404.html"), "custom not found\n").unwrap();
        std::fs::write(html.join("sub/index.html"), "sub index\n").unwrap();
        std::fs::write(html.join("tf/d/index.html"), "tf dir index\n").unwrap();
        std::fs::write(html.join("private/secret.txt"), "secret\n").unwrap();
        std::fs::write(dir.join("html-b/index.html"), "<h1>site b</h1>\n").unwrap();
        std::fs::write(dir.join("other/x.txt"), "from alias\n").unwrap();
        std::fs::write(dir.join("outside.txt"), "must never be served\n").unwrap();
        let css = "body { color: red; }\n".repeat(100);
        std::fs::write(html.join("style.css"), &css).unwrap();
        let blob: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
        std::fs::write(html.join("blob.bin"), &blob).unwrap();
        let ports = [free_port(), free_port()];
        let conf = render(CONF, &dir, &ports);
        let server = Server::start_in(&dir, &conf, ports[0]);
        Fixture {
            _server: std::sync::Mutex::new(server),
            dir,
            tls: ports[0],
            plain: ports[1],
        }
    })
}

fn url(host: &str, path: &str) -> (String, String) {
    let f = fx();
    (
        format!("{host}:{}:127.0.0.1", f.tls),
        format!("https://{host}:{}{path}", f.tls),
    )
}

fn get(host: &str, path: &str, extra: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let (resolve, u) = url(host, path);
    let mut a = vec!["--resolve", resolve.as_str()];
    a.extend_from_slice(extra);
    a.push(u.as_str());
    curl_i(&a)
}

#[test]
fn http11_and_http2_serve_index_with_standard_headers() {
    for proto in ["--http1.1", "--http2"] {
        let (code, h, body) = get("a.test", "/", &[proto]);
        assert_eq!(code, 200, "{proto}");
        assert_eq!(body, b"<h1>site a</h1>\n");
        assert_eq!(header(&h, "server"), Some("firstbyte"));
        assert!(header(&h, "date").is_some());
        assert_eq!(header(&h, "content-type"), Some("text/html"));
        assert_eq!(header(&h, "content-length"), Some("16"));
        assert!(header(&h, "etag").is_some_and(|e| e.starts_with('"')));
        assert!(header(&h, "last-modified").is_some());
        assert_eq!(header(&h, "x-site"), Some("a"));
    }
    let out = curl(&[
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version}",
        "--resolve",
        &url("a.test", "/").0,
        &url("a.test", "/").1,
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2");
}

#[test]
fn ipv6_listener_serves() {
    let f = fx();
    let out = curl(&[
        "-g",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{remote_ip}",
        &format!("https://[::1]:{}/", f.tls),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200 ::1");
}

#[test]
fn sni_chooses_the_server_block_and_certificate() {
    let (_, _, body) = get("b.test", "/", &[]);
    assert_eq!(body, b"<h1>site b</h1>\n");
    let (_, _, body) = get("www.a.test", "/", &[]);
    assert_eq!(body, b"<h1>site a</h1>\n");
    for (name, cn) in [
        ("b.test", "CN = b.test"),
        ("a.test", "CN = a.test"),
        ("unknown.test", "CN = a.test"),
    ] {
        let out = s_client(&["-servername", name], b"");
        assert!(out.contains(cn), "{name}: {out}");
    }
}

fn s_client(args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let f = fx();
    let mut a = vec![
        "s_client".to_string(),
        "-connect".into(),
        format!("127.0.0.1:{}", f.tls),
        "-CAfile".into(),
        certs().ca().display().to_string(),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    let mut c = Command::new("openssl")
        .args(&a)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl (scripts/test installs it)");
    let mut stdin = c.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn tls_versions_alpn_and_ciphers() {
    let out = s_client(&["-servername", "a.test", "-tls1_2", "-alpn", "h2"], b"");
    assert!(
        out.contains("Protocol  : TLSv1.2") || out.contains("TLSv1.2"),
        "{out}"
    );
    assert!(out.contains("ALPN protocol: h2"), "{out}");
    assert!(out.contains("ECDHE-ECDSA-AES"), "{out}");
    let out = s_client(
        &["-servername", "a.test", "-tls1_3", "-alpn", "http/1.1"],
        b"",
    );
    assert!(out.contains("TLSv1.3"), "{out}");
    assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
    // An RSA-only client gets the RSA certificate.
    let out = s_client(
        &["-servername", "a.test", "-tls1_2", "-sigalgs", "RSA+SHA256"],
        b"",
    );
    assert!(out.contains("Server public key is 2048 bit"), "{out}");
    // big.test speaks only TLS 1.3.
    let out = s_client(&["-servername", "big.test", "-tls1_2"], b"");
    assert!(out.contains("no peer certificate available"), "{out}");
    assert!(out.contains("alert protocol version"), "{out}");
}

#[test]
fn sessions_resume_with_tickets_and_the_cache() {
    let f = fx();
    let sess = f.dir.join(format!("sess-{}", std::process::id()));
    let sess = sess.to_str().unwrap();
    // A request and -ign_eof keep s_client reading until the server closes, so the TLS 1.3
    // tickets that follow the handshake are received and saved.
    let req = b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    for ver in ["-tls1_3", "-tls1_2"] {
        let first = s_client(
            &["-servername", "a.test", ver, "-ign_eof", "-sess_out", sess],
            req,
        );
        assert!(first.contains("New, "), "{first}");
        let second = s_client(
            &["-servername", "a.test", ver, "-ign_eof", "-sess_in", sess],
            req,
        );
        assert!(second.contains("Reused, "), "{ver}: {second}");
    }
}

#[test]
fn large_certificate_chain_handshakes() {
    let out = s_client(&["-servername", "big.test", "-showcerts"], b"");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    assert_eq!(
        out.matches("-----BEGIN CERTIFICATE-----").count(),
        4,
        "{out}"
    );
}

#[test]
fn return_and_variables() {
    let (code, h, _) = get("a.test", "/redirect?x=1", &[]);
    assert_eq!(code, 301);
    assert_eq!(header(&h, "location"), Some("https://a.test/redirect?x=1"));
    let (code, _, body) = get("a.test", "/text", &["--http2"]);
    assert_eq!(code, 200);
    assert_eq!(
        String::from_utf8_lossy(&body),
        "text for a.test https TLSv1.3\n"
    );
    let f = fx();
    let (code, h, _) = curl_i(&[
        &format!("http://127.0.0.1:{}/old?q=2", f.plain),
        "-H",
        "Host: plain.test",
    ]);
    assert_eq!(code, 301);
    // nginx's port_in_redirect: the listening port, as it is not 80.
    assert_eq!(
        header(&h, "location"),
        Some(format!("http://plain.test:{}/new?q=2", f.plain).as_str())
    );
}

#[test]
fn try_files_index_and_directories() {
    let (code, _, body) = get("a.test", "/tf/missing", &[]);
    assert_eq!(
        (code, body.as_slice()),
        (200, b"<h1>site a</h1>\n".as_slice())
    );
    // `$uri/` matches the directory and continues as `/tf/d` (nginx drops the candidate's
    // slash): the static module's 301 to `/tf/d/`, whose index then answers.
    let (code, h, _) = get("a.test", "/tf/d", &[]);
    assert_eq!(code, 301);
    assert!(
        header(&h, "location").is_some_and(|l| l.ends_with("/tf/d/")),
        "{h:?}"
    );
    let (code, _, body) = get("a.test", "/tf/d/", &[]);
    assert_eq!((code, body.as_slice()), (200, b"tf dir index\n".as_slice()));
    let (code, h, _) = get("a.test", "/sub", &[]);
    assert_eq!(code, 301);
    assert!(
        header(&h, "location").is_some_and(|l| l.ends_with("/sub/")),
        "{h:?}"
    );
    let (code, _, body) = get("a.test", "/sub/", &[]);
    assert_eq!((code, body.as_slice()), (200, b"sub index\n".as_slice()));
    let (code, _, body) = get("a.test", "/alias/x.txt", &[]);
    assert_eq!((code, body.as_slice()), (200, b"from alias\n".as_slice()));
}

#[test]
fn errors_pages_and_access_control() {
    let (code, h, body) = get("a.test", "/nope", &[]);
    assert_eq!(code, 404);
    assert_eq!(body, b"custom not found\n");
    assert_eq!(header(&h, "x-site"), Some("a"), "add_header ... always");
    let (code, _, body) = get("a.test", "/private/secret.txt", &[]);
    assert_eq!(code, 403);
    assert!(String::from_utf8_lossy(&body).contains("403 Forbidden"));
    let (code, _, body) = get("a.test", "/status", &[]);
    assert_eq!(code, 200);
    let s = String::from_utf8_lossy(&body);
    assert!(s.starts_with("Active connections: "), "{s}");
    assert!(s.contains("server accepts handled requests"), "{s}");
}

#[test]
fn path_traversal_is_refused() {
    for p in [
        "/../outside.txt",
        "/%2e%2e/outside.txt",
        "/sub/..%2f..%2foutside.txt",
        "/alias/..%2f..%2foutside.txt",
        "/%2E%2E%2Foutside.txt",
    ] {
        let (resolve, u) = url("a.test", p);
        let (code, _, body) = curl_i(&["--path-as-is", "--resolve", &resolve, &u]);
        assert!(code == 400 || code == 404, "{p}: {code}");
        assert!(
            !String::from_utf8_lossy(&body).contains("must never"),
            "{p}"
        );
    }
}

#[test]
fn conditional_and_range_requests() {
    let (_, h, _) = get("a.test", "/blob.bin", &[]);
    let etag = header(&h, "etag").unwrap().to_string();
    let lm = header(&h, "last-modified").unwrap().to_string();
    let (code, _, body) = get(
        "a.test",
        "/blob.bin",
        &["-H", &format!("If-None-Match: {etag}")],
    );
    assert_eq!((code, body.len()), (304, 0));
    let (code, _, _) = get(
        "a.test",
        "/blob.bin",
        &["-H", &format!("If-Modified-Since: {lm}")],
    );
    assert_eq!(code, 304);
    let (code, h, body) = get(
        "a.test",
        "/blob.bin",
        &["-H", "Range: bytes=10-19", "--http2"],
    );
    assert_eq!(code, 206);
    assert_eq!(header(&h, "content-range"), Some("bytes 10-19/100000"));
    let expect: Vec<u8> = (10..20u32).map(|i| (i * 7 % 256) as u8).collect();
    assert_eq!(body, expect);
    let (code, h, _) = get("a.test", "/blob.bin", &["-H", "Range: bytes=200000-"]);
    assert_eq!(code, 416);
    assert_eq!(header(&h, "content-range"), Some("bytes */100000"));
    // HEAD: headers only.
    let (code, h, body) = get("a.test", "/blob.bin", &["-I"]);
    assert_eq!((code, body.len()), (200, 0));
    assert_eq!(header(&h, "content-length"), Some("100000"));
    // The whole file, intact, over both protocols.
    for proto in ["--http1.1", "--http2"] {
        let (_, _, body) = get("a.test", "/blob.bin", &[proto]);
        let expect: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
        assert!(body == expect, "{proto}");
    }
}

/// Several ranges: one `multipart/byteranges` body whose length is known up front, over
/// HTTP/1.1 and HTTP/2, the parts in the order asked; the defences of nginx's range filter.
#[test]
fn multipart_ranges() {
    let blob: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
    for proto in ["--http1.1", "--http2"] {
        let (code, h, body) = get(
            "a.test",
            "/blob.bin",
            &["-H", "Range: bytes=99990-, 0-9, 5-14", proto],
        );
        assert_eq!(code, 206, "{proto}");
        let ct = header(&h, "content-type").unwrap();
        let b = ct.strip_prefix("multipart/byteranges; boundary=").unwrap();
        assert_eq!(
            header(&h, "content-length").map(|l| l.parse::<usize>().unwrap()),
            Some(body.len()),
            "{proto}"
        );
        let mut want = Vec::new();
        for (first, last) in [(99_990, 99_999), (0, 9), (5, 14)] {
            want.extend_from_slice(
                format!(
                    "\r\n--{b}\r\nContent-Type: application/octet-stream\r\n\
                     Content-Range: bytes {first}-{last}/100000\r\n\r\n"
                )
                .as_bytes(),
            );
            want.extend_from_slice(&blob[first..=last]);
        }
        want.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
        assert!(body == want, "{proto}: {}", String::from_utf8_lossy(&body));
    }
    // A hostile client: hundreds of one-byte ranges get the file once, as a plain 200.
    let many: Vec<String> = (0..600).map(|i| format!("{}-{}", i * 3, i * 3)).collect();
    let hdr = format!("Range: bytes={}", many.join(","));
    let (code, h, body) = get("a.test", "/blob.bin", &["-H", &hdr]);
    assert_eq!((code, body.len()), (200, 100_000));
    assert_eq!(header(&h, "accept-ranges"), Some("bytes"));
    // The same bytes asked for again and again: more than the file, a plain 200.
    let same = format!("Range: bytes={}", ["0-59999"; 2].join(","));
    let (code, _, body) = get("a.test", "/blob.bin", &["-H", &same]);
    assert_eq!((code, body.len()), (200, 100_000));
    // `max_ranges 1`: two ranges, the whole file; one, as usual.
    let (code, _, body) = get(
        "a.test",
        "/one-range/blob.bin",
        &["-H", "Range: bytes=0-0,2-2"],
    );
    assert_eq!((code, body.len()), (200, 100_000));
    let (code, _, body) = get("a.test", "/one-range/blob.bin", &["-H", "Range: bytes=2-2"]);
    assert_eq!((code, body), (206, vec![blob[2]]));
    // Malformed: 416 with the length.
    let (code, h, _) = get("a.test", "/blob.bin", &["-H", "Range: bytes=0-1,"]);
    assert_eq!(code, 416);
    assert_eq!(header(&h, "content-range"), Some("bytes */100000"));
}

/// `charset A; source_charset B;` with `charset_map B A { 58 59; }`: the charset named and the
/// file recoded, whole and in ranges.
#[test]
fn charset_recoding() {
    let (code, h, body) = get("a.test", "/cs/t.html", &[]);
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=A"));
    assert_eq!(body, b"Y000YYYYYYY001YYYYYY");
    let (code, h, body) = get("a.test", "/cs/t.html", &["-H", "Range: bytes=10-13"]);
    assert_eq!((code, body.as_slice()), (206, &b"Y001"[..]));
    assert_eq!(header(&h, "content-range"), Some("bytes 10-13/20"));
    let (code, _, body) = get("a.test", "/cs/t.html", &["-H", "Range: bytes=0-0,-2"]);
    assert_eq!(code, 206);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("Content-Type: text/html; charset=A\r\n"),
        "{text}"
    );
    assert!(text.contains("/20\r\n\r\nYY\r\n"), "{text}");
}

#[test]
fn gzip_compresses_listed_types() {
    let (code, h, body) = get("a.test", "/style.css", &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-encoding"), Some("gzip"));
    assert!(body.len() < 2100 / 4, "compressed size {}", body.len());
    let out = curl(&[
        "--compressed",
        "--resolve",
        &url("a.test", "/").0,
        &url("a.test", "/style.css").1,
    ]);
    assert_eq!(out.stdout, "body { color: red; }\n".repeat(100).as_bytes());
    // Not listed: not compressed.
    let (_, h, _) = get("a.test", "/blob.bin", &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(header(&h, "content-encoding"), None);
}

#[test]
fn connection_info_page_reports_the_connection() {
    let (code, h, body) = get("a.test", "/info?format=json", &["--http2"]);
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["tls_version"], "TLSv1.3");
    assert_eq!(v["alpn"], "h2");
    assert_eq!(v["resumed"], false);
    assert!(v["cipher"].as_str().unwrap().starts_with("TLS_"));
    assert!(!v["group"].as_str().unwrap().is_empty());
    assert!(v["rtt_us"].as_u64().unwrap() > 0);
    assert!(v["cwnd"].as_u64().unwrap() >= 10);
    assert_eq!(v["tcp_nodelay"], true, "TCP_NODELAY must be on for HTTP/2");
    let (_, h, body) = get("a.test", "/info", &["--http1.1"]);
    assert!(header(&h, "content-type").unwrap().starts_with("text/html"));
    assert!(String::from_utf8_lossy(&body).contains("http/1.1"));
}

#[test]
fn access_log_uses_combined_format() {
    let _ = get("a.test", "/?logged=1", &["--http1.1", "-A", "test-agent/1"]);
    let path = fx().dir.join("access.log");
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains("logged=1") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let line = text
        .lines()
        .find(|l| l.contains("logged=1"))
        .expect("logged line");
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(
        line.contains("\"GET /?logged=1 HTTP/1.1\" 200 16 \"-\" \"test-agent/1\""),
        "{line}"
    );
}

#[test]
fn malformed_requests_get_400() {
    use std::io::{Read, Write};
    let f = fx();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", f.plain)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    let resp = String::from_utf8_lossy(&buf[..n]);
    assert!(resp.starts_with("HTTP/1.1 400"), "no Host: {resp}");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", f.plain)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"GARBAGE\x01\x02 / HTTP/9\r\n\r\n").unwrap();
    let n = s.read(&mut buf).unwrap_or(0);
    let resp = String::from_utf8_lossy(&buf[..n]);
    assert!(n == 0 || resp.starts_with("HTTP/1.1 400"), "{resp}");
}
