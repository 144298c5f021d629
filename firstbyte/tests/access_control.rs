//! Who is served, as nginx decides it: `auth_basic` with htpasswd files, `satisfy`, the real
//! client address behind trusted proxies (`set_real_ip_from`), and the request and
//! connection limits (`limit_req`, `limit_conn`), over real sockets.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::*;

/// A response read off a keep-alive connection.
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// One HTTP/1.1 connection to 127.0.0.1:`port`.
struct Client(BufReader<TcpStream>);

impl Client {
    fn new(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client(BufReader::new(s))
    }

    fn send(&mut self, path: &str, extra: &str) {
        let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n");
        self.0.get_mut().write_all(req.as_bytes()).expect("write");
    }

    fn get(&mut self, path: &str, extra: &str) -> Resp {
        self.send(path, extra);
        self.read()
    }

    fn read(&mut self) -> Resp {
        let mut line = String::new();
        self.0.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.0.read_line(&mut h).expect("header");
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = header(&headers, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        self.0.read_exact(&mut body).expect("body");
        Resp {
            status,
            headers,
            body,
        }
    }
}

/// `Authorization: Basic base64(user:password)` as a header line.
fn basic(user: &str, password: &str) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let src = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for c in src.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() {
                B64[(n >> (18 - 6 * i) & 0x3f) as usize] as char
            } else {
                '='
            });
        }
    }
    format!("Authorization: Basic {out}\r\n")
}

fn world_readable(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// Waits (5 s at most) until the error log holds `needle`.
fn error_log_has(dir: &std::path::Path, needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        if text.contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

const HTPASSWD: &str = "# users\n\
plain:{PLAIN}password\n\
sha:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n\
apr1:$apr1$salt$Xxd1irWT9ycqoYxGFn4cb.\n\
bcrypt:$2y$05$dxx8yna8k0DCKzXSTee4vOvWtuda7.zW8qenYWTeYneLJZXuRP6Pa\n\
sha512:$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc.eoxqOmSuNp2xS0ktL3nh/\n\
nocolon\n\
empty:\n";

#[test]
fn auth_basic_as_nginx() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        add_header X-User "$remote_user" always;
        location / {
            auth_basic "closed site";
            auth_basic_user_file {dir}/htpasswd;
            location /open/ { auth_basic off; }
        }
        location /missing/ { auth_basic "m"; auth_basic_user_file {dir}/nope; }
        location /unreadable/ { auth_basic "u"; auth_basic_user_file {dir}/locked; }
        location /any/ {
            satisfy any;
            allow 10.0.0.1;
            deny all;
            auth_basic "any";
            auth_basic_user_file {dir}/htpasswd;
        }
        location /anyip/ {
            satisfy any;
            allow 127.0.0.1;
            deny all;
            auth_basic "any";
            auth_basic_user_file {dir}/htpasswd;
        }
    }
}
"#;
    let dir = tempdir("auth-basic");
    std::fs::create_dir_all(dir.join("html/open")).unwrap();
    for d in ["any", "anyip", "missing", "unreadable"] {
        std::fs::create_dir_all(dir.join("html").join(d)).unwrap();
        world_readable(&dir.join("html").join(d).join("index.html"), "inner\n");
    }
    world_readable(&dir.join("html/index.html"), "secret\n");
    world_readable(&dir.join("html/open/index.html"), "open\n");
    world_readable(&dir.join("htpasswd"), HTPASSWD);
    std::fs::write(dir.join("locked"), "plain:{PLAIN}password\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("locked"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
    }
    let port = free_port();
    let _s = Server::start_in(&dir, &render(conf, &dir, &[port]), port);
    let mut c = Client::new(port);

    // No credentials: 401 with the realm.
    let r = c.get("/", "");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"closed site\"")
    );
    // Every scheme, with its right password: the file, and $remote_user.
    for user in ["plain", "sha", "apr1", "bcrypt", "sha512"] {
        let r = c.get("/", &basic(user, "password"));
        assert_eq!(r.status, 200, "{user}");
        assert_eq!(r.body, b"secret\n", "{user}");
        assert_eq!(r.header("x-user"), Some(user), "{user}");
        assert_eq!(r.header("www-authenticate"), None);
    }
    // Attacks: a wrong password, an unknown user, a line without a colon, an empty
    // password entry (with an empty password too), malformed headers.
    for (what, extra) in [
        ("wrong password", basic("bcrypt", "Password")),
        ("wrong plain", basic("plain", "passwor")),
        ("unknown user", basic("mallory", "password")),
        ("line without a colon", basic("nocolon", "")),
        ("empty entry", basic("empty", "")),
        ("empty entry, any password", basic("empty", "x")),
        ("user prefix", basic("plai", "password")),
        ("comment as user", basic("# users", "")),
        (
            "not basic",
            "Authorization: Bearer cGxhaW46cGFzc3dvcmQ=\r\n".into(),
        ),
        (
            "bad base64",
            "Authorization: Basic cGxh!W46cGFzc3dvcmQ=\r\n".into(),
        ),
        ("no colon", "Authorization: Basic cGxhaW4=\r\n".into()),
        ("empty user", basic("", "password")),
    ] {
        let r = c.get("/", &extra);
        assert_eq!(r.status, 401, "{what}");
        assert_eq!(
            r.header("www-authenticate"),
            Some("Basic realm=\"closed site\""),
            "{what}"
        );
        // `$remote_user` is the Basic user name whether or not it passed, as nginx's
        // (`ngx_http_auth_basic_user`); nothing when the header does not decode to `user:`.
        let user = match what {
            "wrong password" => Some("bcrypt"),
            "wrong plain" => Some("plain"),
            "unknown user" => Some("mallory"),
            "line without a colon" => Some("nocolon"),
            "empty entry" | "empty entry, any password" => Some("empty"),
            "user prefix" => Some("plai"),
            "comment as user" => Some("# users"),
            _ => None,
        };
        assert_eq!(r.header("x-user"), user, "{what}");
    }
    assert!(error_log_has(&dir, "user \"bcrypt\": password mismatch"));
    assert!(error_log_has(&dir, "user \"mallory\" was not found in"));
    // `auth_basic off` inside.
    assert_eq!(c.get("/open/", "").status, 200);
    // The file is read per request: an edit applies without a reload.
    world_readable(&dir.join("htpasswd"), "plain:{PLAIN}changed\n");
    assert_eq!(c.get("/", &basic("plain", "password")).status, 401);
    assert_eq!(c.get("/", &basic("plain", "changed")).status, 200);
    // A missing file is 403 and an unreadable one 500, each with an error-log line (nginx).
    let r = c.get("/missing/", &basic("plain", "changed"));
    assert_eq!(r.status, 403);
    assert!(error_log_has(
        &dir,
        "/nope\" failed (2: No such file or directory)"
    ));
    // (root reads any file: the 500 shows only when the server is not root, or serves as
    // `nobody` after starting as root, which is how tests run.)
    let r = c.get("/unreadable/", &basic("plain", "changed"));
    assert_eq!(r.status, 500);
    assert!(error_log_has(
        &dir,
        "/locked\" failed (13: Permission denied)"
    ));
    // satisfy any: the address rule or the password is enough; 401 outranks deny's 403.
    assert_eq!(c.get("/anyip/", "").status, 200);
    let r = c.get("/any/", "");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Basic realm=\"any\""));
    assert_eq!(c.get("/any/", &basic("plain", "changed")).status, 200);
}

#[test]
fn real_ip_from_trusted_proxies_and_proxy_protocol() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    log_format addr "$remote_addr $realip_remote_addr $proxy_protocol_addr";
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        add_header X-Addr "$remote_addr" always;
        location /xff/ {
            set_real_ip_from 127.0.0.1;
            set_real_ip_from 10.0.0.0/8;
            real_ip_header X-Forwarded-For;
            real_ip_recursive on;
            deny 203.0.113.9;
        }
        location /once/ {
            set_real_ip_from 127.0.0.1;
            set_real_ip_from 10.0.0.0/8;
            real_ip_header X-Forwarded-For;
        }
        location /untrusted/ {
            set_real_ip_from 10.0.0.1;
            real_ip_header X-Forwarded-For;
        }
        location /xri/ { set_real_ip_from 127.0.0.0/8; }
    }
    server {
        listen 127.0.0.1:{port1} proxy_protocol;
        root {dir}/html;
        access_log {dir}/pp.log addr;
        set_real_ip_from 127.0.0.1;
        real_ip_header proxy_protocol;
        add_header X-Addr "$remote_addr" always;
        add_header X-PP "$proxy_protocol_addr:$proxy_protocol_port" always;
    }
    server {
        listen 127.0.0.1:{port2} ssl proxy_protocol;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        add_header X-PP "$proxy_protocol_addr" always;
    }
}
"#;
    let dir = tempdir("realip");
    for d in ["xff", "once", "untrusted", "xri"] {
        std::fs::create_dir_all(dir.join("html").join(d)).unwrap();
        world_readable(&dir.join("html").join(d).join("index.html"), "x\n");
    }
    world_readable(&dir.join("html/index.html"), "root\n");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut s = Server::start_in(&dir, &render(conf, &dir, &ports), ports[0]);
    s.wait_port(ports[1]);
    s.wait_port(ports[2]);

    let mut c = Client::new(ports[0]);
    let xff = |v: &str| format!("X-Forwarded-For: {v}\r\n");
    // Recursive: past every trusted hop, right to left; two headers are one list.
    let r = c.get("/xff/", &xff("198.51.100.1, 10.0.0.2, 10.0.0.3"));
    assert_eq!(r.header("x-addr"), Some("198.51.100.1"));
    let r = c.get(
        "/xff/",
        "X-Forwarded-For: 198.51.100.4\r\nX-Forwarded-For: 10.9.9.9\r\n",
    );
    assert_eq!(r.header("x-addr"), Some("198.51.100.4"));
    // A spoofed entry left of an untrusted one is not believed.
    let r = c.get("/xff/", &xff("203.0.113.9, 198.51.100.2, 10.0.0.3"));
    assert_eq!(r.header("x-addr"), Some("198.51.100.2"));
    // The real address is what allow/deny see.
    assert_eq!(c.get("/xff/", &xff("203.0.113.9")).status, 403);
    assert!(error_log_has(
        &dir,
        "access forbidden by rule, client: 203.0.113.9"
    ));
    // Not recursive: the last address only.
    let r = c.get("/once/", &xff("198.51.100.1, 10.0.0.2"));
    assert_eq!(r.header("x-addr"), Some("10.0.0.2"));
    // A peer that is not trusted keeps its own address, whatever it sends.
    let r = c.get("/untrusted/", &xff("198.51.100.1"));
    assert_eq!(r.header("x-addr"), Some("127.0.0.1"));
    // Garbage changes nothing.
    let r = c.get("/once/", &xff("not-an-address"));
    assert_eq!(r.header("x-addr"), Some("127.0.0.1"));
    // X-Real-IP, the default header.
    let r = c.get("/xri/", "X-Real-IP: 192.0.2.77\r\n");
    assert_eq!(r.header("x-addr"), Some("192.0.2.77"));

    // PROXY protocol v1 and v2 before HTTP; the header's source is $remote_addr there.
    let mut raw = TcpStream::connect(("127.0.0.1", ports[1])).unwrap();
    raw.write_all(b"PROXY TCP4 192.0.2.1 192.0.2.2 40000 80\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = raw.read_to_end(&mut out);
    let (status, h, _) = parse_response(&out);
    assert_eq!(status, 200);
    assert_eq!(header(&h, "x-pp"), Some("192.0.2.1:40000"));
    assert_eq!(header(&h, "x-addr"), Some("192.0.2.1"));
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    v2.extend_from_slice(&[198, 51, 100, 7, 127, 0, 0, 1, 0x1f, 0x90, 0, 80]);
    let mut raw = TcpStream::connect(("127.0.0.1", ports[1])).unwrap();
    raw.write_all(&v2).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = raw.read_to_end(&mut out);
    let (status, h, _) = parse_response(&out);
    assert_eq!(status, 200);
    assert_eq!(header(&h, "x-pp"), Some("198.51.100.7:8080"));
    // No valid header: the connection is closed without an answer (nginx).
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"PROXY TCP4 192.0.2.1 192.0.2.2 40000\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x02ab",
    ] {
        let mut raw = TcpStream::connect(("127.0.0.1", ports[1])).unwrap();
        raw.write_all(bad).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = Vec::new();
        let _ = raw.read_to_end(&mut out);
        assert!(out.is_empty(), "{:?}", String::from_utf8_lossy(&out));
    }
    assert!(error_log_has(&dir, "broken header: \"GET / HTTP/1.1\""));
    // The access log has the real address and the header's.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = String::new();
    while Instant::now() < deadline && !log.contains("198.51.100.7") {
        log = std::fs::read_to_string(dir.join("pp.log")).unwrap_or_default();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(log.contains("192.0.2.1 127.0.0.1 192.0.2.1\n"), "{log}");

    // Before TLS: curl sends a v1 header, then the handshake.
    let (status, h, _) = curl_i(&[
        "-sk",
        "--haproxy-protocol",
        &format!("https://127.0.0.1:{}/", ports[2]),
    ]);
    assert_eq!(status, 200);
    assert_eq!(header(&h, "x-pp"), Some("127.0.0.1"));
}

#[test]
fn real_ip_of_the_server_is_taken_before_its_rewrite_directives() {
    // nginx's post-read phase: `set_real_ip_from` at http/server level applies before the
    // server's `return`; a location's own `real_ip_header` still gets its turn when the
    // server's header was absent, and not when the server's already took an address.
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    add_header X-Addr "$remote_addr" always;
    set_real_ip_from 127.0.0.1;
    server {
        listen 127.0.0.1:{port0};
        return 204;
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/html;
        if ($remote_addr = 192.0.2.66) { return 403; }
        location /custom/ { real_ip_header X-Custom; }
        location /untrusted/ { set_real_ip_from 10.0.0.1; }
    }
}
"#;
    let dir = tempdir("realip-post-read");
    for d in ["custom", "untrusted"] {
        std::fs::create_dir_all(dir.join("html").join(d)).unwrap();
        world_readable(&dir.join("html").join(d).join("index.html"), "x\n");
    }
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let mut s = Server::start_in(&dir, &render(conf, &dir, &ports), ports[0]);
    s.wait_port(ports[1]);

    let mut c = Client::new(ports[0]);
    let r = c.get("/", "X-Real-IP: 192.0.2.1\r\n");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("x-addr"), Some("192.0.2.1"));
    let r = c.get("/", "");
    assert_eq!(r.header("x-addr"), Some("127.0.0.1"));

    let mut c = Client::new(ports[1]);
    // The server's `if` sees the real address.
    assert_eq!(c.get("/custom/", "X-Real-IP: 192.0.2.66\r\n").status, 403);
    // No X-Real-IP: the location's header decides.
    let r = c.get("/custom/", "X-Custom: 192.0.2.5\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-addr"), Some("192.0.2.5"));
    // The server's header was taken first: the location's is not read again.
    let r = c.get(
        "/custom/",
        "X-Real-IP: 192.0.2.6\r\nX-Custom: 192.0.2.5\r\n",
    );
    assert_eq!(r.header("x-addr"), Some("192.0.2.6"));
    // A location that trusts other proxies does not undo what the server took.
    let r = c.get("/untrusted/", "X-Real-IP: 192.0.2.7\r\n");
    assert_eq!(r.header("x-addr"), Some("192.0.2.7"));
}

#[test]
fn limit_req_refuses_the_excess_and_delays_within_the_burst() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    limit_req_zone $binary_remote_addr zone=slow:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=strict:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=dry:1m rate=1r/m;
    limit_req_zone $binary_remote_addr zone=fast:1m rate=2r/s;
    limit_req_zone $http_x_key zone=bykey:1m rate=1r/m;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location /burst/ { limit_req zone=slow burst=2 nodelay; }
        location /strict/ {
            limit_req zone=strict;
            limit_req_status 429;
            add_header X-Limit "$limit_req_status" always;
        }
        location /dry/ {
            limit_req zone=dry;
            limit_req_dry_run on;
            add_header X-Limit "$limit_req_status" always;
        }
        location /delay/ { limit_req zone=fast burst=1; }
        location /key/ { limit_req zone=bykey; }
        location /free/ { }
    }
}
"#;
    let dir = tempdir("limit-req");
    for d in ["burst", "strict", "dry", "delay", "key", "free"] {
        std::fs::create_dir_all(dir.join("html").join(d)).unwrap();
        world_readable(&dir.join("html").join(d).join("index.html"), "x\n");
    }
    let port = free_port();
    let _s = Server::start_in(&dir, &render(conf, &dir, &[port]), port);
    let mut c = Client::new(port);
    // 1r/m with burst=2 nodelay: three pass at once, the fourth is refused (503), on one
    // keep-alive connection; no time passes that could let one more through.
    let codes: Vec<u16> = (0..4).map(|_| c.get("/burst/", "").status).collect();
    assert_eq!(codes, [200, 200, 200, 503]);
    assert!(error_log_has(
        &dir,
        "limiting requests, excess: 3.000 by zone \"slow\""
    ));
    // Still refused, and other locations are not limited.
    assert_eq!(c.get("/burst/", "").status, 503);
    assert_eq!(c.get("/free/", "").status, 200);
    // No burst: the second is refused, with limit_req_status.
    let r = c.get("/strict/", "");
    assert_eq!((r.status, r.header("x-limit")), (200, Some("PASSED")));
    let r = c.get("/strict/", "");
    assert_eq!((r.status, r.header("x-limit")), (429, Some("REJECTED")));
    // Dry run: logged, never refused.
    assert_eq!(c.get("/dry/", "").header("x-limit"), Some("PASSED"));
    for _ in 0..2 {
        let r = c.get("/dry/", "");
        assert_eq!(
            (r.status, r.header("x-limit")),
            (200, Some("REJECTED_DRY_RUN"))
        );
    }
    assert!(error_log_has(
        &dir,
        "limiting requests, dry run, excess: 1.000 by zone \"dry\""
    ));
    // Keys are per value: another key has its own bucket; an empty key is not limited.
    assert_eq!(c.get("/key/", "X-Key: a\r\n").status, 200);
    assert_eq!(c.get("/key/", "X-Key: a\r\n").status, 503);
    assert_eq!(c.get("/key/", "X-Key: b\r\n").status, 200);
    for _ in 0..3 {
        assert_eq!(c.get("/key/", "").status, 200);
    }
    // 2r/s, burst=1 without nodelay: the second request waits its turn (500 ms) and is
    // served, the third is refused. (A lower bound only: a sleep never ends early.)
    assert_eq!(c.get("/delay/", "").status, 200);
    let t = Instant::now();
    assert_eq!(c.get("/delay/", "").status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    // The excess is 1.000 when the two requests arrive at once and a little less when the
    // machine is slow between them (2r/s drains 2 milli-requests per ms).
    assert!(
        error_log_has(&dir, "delaying request, excess: 1.000, by zone \"fast\"")
            || error_log_has(&dir, "delaying request, excess: 0.9"),
        "{}",
        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
    );
}

#[test]
fn limit_conn_counts_requests_in_progress() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    limit_conn_zone $binary_remote_addr zone=addr:64k;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location / { limit_conn addr 1; }
        location /two/ { limit_conn addr 2; limit_conn_status 429; }
    }
}
"#;
    let dir = tempdir("limit-conn");
    std::fs::create_dir_all(dir.join("html/two")).unwrap();
    // Larger than what the socket buffers hold: a client that does not read keeps the
    // response (and its count) in progress.
    let big = "x".repeat(32 << 20);
    world_readable(&dir.join("html/big.txt"), &big);
    world_readable(&dir.join("html/two/big.txt"), &big);
    world_readable(&dir.join("html/small.txt"), "small\n");
    let port = free_port();
    let _s = Server::start_in(&dir, &render(conf, &dir, &[port]), port);

    let mut slow = Client::new(port);
    slow.send("/big.txt", "");
    // Wait until the slow request is being answered (its headers arrive).
    let mut line = String::new();
    slow.0.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    // A second connection from the same address is over the limit.
    let mut c = Client::new(port);
    assert_eq!(c.get("/small.txt", "").status, 503);
    assert!(error_log_has(&dir, "limiting connections by zone \"addr\""));
    // limit 2: a second slow one fits, a third is refused with limit_conn_status.
    let mut slow2 = Client::new(port);
    slow2.send("/two/big.txt", "");
    let mut line = String::new();
    slow2.0.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    let mut slow3 = Client::new(port);
    slow3.send("/two/big.txt", "");
    assert_eq!(slow3.read().status, 429);
    // When the slow responses end (the clients go away), the count is given back.
    drop(slow);
    drop(slow2);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 0;
    while Instant::now() < deadline {
        status = Client::new(port).get("/small.txt", "").status;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status, 200);
}

/// HTTP/2: each stream in progress counts as a connection for `limit_conn` (nginx: "each
/// concurrent request is considered a separate connection"), until its body is sent: with
/// the client's stream window at 1 byte the first response stays in progress, and a second
/// stream on the same connection is refused (nginx-tests h2_limit_conn.t).
#[tokio::test]
async fn limit_conn_counts_http2_streams_until_their_body_is_sent() {
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    root {dir}/html;
    limit_conn_zone $binary_remote_addr zone=conn:64k;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location /t.html { limit_conn conn 1; }
    }
}
"#;
    let (server, ports) = Server::start("limit-conn-h2", conf, 1);
    std::fs::create_dir_all(server.dir.join("html")).unwrap();
    std::fs::write(server.dir.join("html/t.html"), "SEE-THIS").unwrap();
    let (mut send, conn) = h2_tls_client(ports[0], Some(1)).await;
    let get = || {
        http::Request::get(format!("https://localhost:{}/t.html", ports[0]))
            .body(())
            .expect("request")
    };
    let (first, _) = send.send_request(get(), true).expect("send");
    let first = first.await.expect("first response");
    assert_eq!(first.status(), 200);
    let (second, _) = send.send_request(get(), true).expect("send");
    assert_eq!(second.await.expect("second response").status(), 503);
    drop(first);
    drop(send);
    conn.abort();
    drop(server);
}
