//! The proxy's remaining directives end to end: `proxy_pass` with variables (an `upstream`
//! name, an address, a unix socket, 502 for a name with no resolver), `proxy_bind`,
//! `proxy_set_body`, `proxy_limit_rate`, the `upstream` block's `keepalive_requests`,
//! `keepalive_timeout` and `keepalive_time`, an intercepted 401's `WWW-Authenticate`, and the
//! order of the upstream's response fields.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use support::*;

/// An upstream that serves keep-alive requests and answers each with what it saw: the
/// request line, the peer's address, the connection's number, and the body; `extra` is
/// added to every response head.
fn echo(extra: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let conns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let numbering = conns.clone();
    let (port, accepted) = upstream(move |s| {
        let n = numbering.fetch_add(1, Ordering::SeqCst);
        let peer = s
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        while let Some(head) = read_head(&mut r) {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            let mut body = vec![0u8; len];
            if r.read_exact(&mut body).is_err() {
                return;
            }
            let line = head.lines().next().unwrap_or("");
            let text = format!(
                "line={line}\npeer={peer}\nconn={n}\nbody={}\n",
                String::from_utf8_lossy(&body)
            );
            let keep = head.to_ascii_lowercase().contains("http/1.1\r\n")
                && !head.to_ascii_lowercase().contains("connection: close");
            let answer = format!(
                "HTTP/1.1 200 OK\r\n{extra}Content-Length: {}\r\n{}\r\n{text}",
                text.len(),
                if keep { "" } else { "Connection: close\r\n" }
            );
            if w.write_all(answer.as_bytes()).is_err() || !keep {
                return;
            }
        }
    });
    (port, accepted)
}

fn front(http: &str, server: &str) -> (Server, u16) {
    let dir = tempdir("proxy-more");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {http}\n server {{ listen 127.0.0.1:{port};\n {server}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// Sends a raw request and returns (status, headers, body).
fn ask(port: u16, req: &str) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (status, headers, body) = parse_response(&buf);
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(port: u16, path: &str) -> (u16, Vec<(String, String)>, String) {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

fn error_log(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default()
}

#[test]
fn proxy_pass_with_variables_finds_an_upstream_or_an_address() {
    let (a, _) = echo("");
    let (b, _) = echo("");
    let (s, port) = front(
        &format!("upstream named {{ server 127.0.0.1:{a}; }}"),
        "location /var { proxy_pass http://$arg_to; }\n\
         location /uri { proxy_pass http://$arg_to/fixed$is_args$args; }",
    );
    // The evaluated host names the upstream block.
    let (status, _, body) = get(port, "/var/x?to=named");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("line=GET /var/x?to=named HTTP/1.0"), "{body}");
    // An address with a port: straight there.
    let (status, _, body) = get(port, &format!("/var/y?to=127.0.0.1:{b}"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("line=GET /var/y?to=127.0.0.1:{b} HTTP/1.0")));
    // A URI part with variables replaces the whole request URI (nginx's rule).
    let (status, _, body) = get(port, &format!("/uri/deep/path?to=127.0.0.1:{b}"));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!("line=GET /fixed?to=127.0.0.1:{b} HTTP/1.0")),
        "{body}"
    );
    // A name that is neither an upstream nor an address: no resolver, 502, nginx's words.
    let (status, _, _) = get(port, "/var/z?to=localhost:1");
    assert_eq!(status, 502);
    assert!(
        error_log(&s).contains("no resolver defined to resolve localhost"),
        "{}",
        error_log(&s)
    );
    drop(s);
}

#[test]
fn proxy_pass_with_variables_finds_an_implicit_upstream() {
    // nginx's implicit upstream: a `proxy_pass http://HOST:PORT` without variables anywhere
    // in the load (here in a later location) is what a URL with variables naming that host
    // and port uses — its addresses from the load, no resolver needed.
    let (a, _) = echo("");
    let (s, port) = front(
        "",
        &format!(
            "location /var {{ proxy_pass http://$arg_to; }}\n\
             location /static {{ proxy_pass http://localhost:{a}; }}"
        ),
    );
    for to in [format!("localhost:{a}"), format!("LocalHost:{a}")] {
        let (status, _, body) = get(port, &format!("/var/x?to={to}"));
        assert_eq!(status, 200, "{to}: {body}");
        assert!(body.contains("line=GET /var/x?to="), "{body}");
    }
    // The same host on another port is no implicit upstream: it needs a resolver.
    let other = free_port();
    let (status, _, _) = get(port, &format!("/var/y?to=localhost:{other}"));
    assert_eq!(status, 502);
    let log = error_log(&s);
    assert_eq!(
        log.matches("no resolver defined to resolve localhost")
            .count(),
        1,
        "{log}"
    );
    drop(s);
}

#[test]
fn proxy_pass_in_an_if_and_a_later_if_without_it() {
    // nginx: the content handler is the last one an `if` that held set, the settings are
    // the last `if`'s. A later `if` without `proxy_pass` in a location without it leaves the
    // proxy handler with no upstream: 500 and an alert — never the location's files.
    let (a, _) = echo("X-Up: a\r\n");
    let (b, _) = echo("X-Up: b\r\n");
    let (s, port) = front(
        "",
        &format!(
            "root /nonexistent;\n\
             location /lost {{ if ($arg_p) {{ proxy_pass http://127.0.0.1:{a}; }} if ($arg_q) {{ }} }}\n\
             location /outer {{ proxy_pass http://127.0.0.1:{b};\n\
                 if ($arg_p) {{ proxy_pass http://127.0.0.1:{a}; }} if ($arg_q) {{ }} }}"
        ),
    );
    let up = |path: &str| {
        let (status, h, body) = get(port, path);
        assert_eq!(status, 200, "{path}: {body}");
        header(&h, "x-up").map(str::to_string)
    };
    assert_eq!(up("/lost?p=1").as_deref(), Some("a"));
    assert_eq!(get(port, "/lost?q=1").0, 404);
    assert_eq!(get(port, "/lost?p=1&q=1").0, 500);
    let log = error_log(&s);
    assert!(
        log.contains("[alert]") && log.contains("no upstream configuration"),
        "{log}"
    );
    // The later `if` inherits the location's `proxy_pass`: that upstream answers.
    assert_eq!(up("/outer?p=1").as_deref(), Some("a"));
    assert_eq!(up("/outer?p=1&q=1").as_deref(), Some("b"));
    assert_eq!(up("/outer?q=1").as_deref(), Some("b"));
    drop(s);
}

#[test]
fn proxy_pass_with_a_variable_unix_socket() {
    let dir = tempdir("proxy-more-unix");
    let path = dir.join("up.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).expect("bind unix");
    // Run as root, firstbyte serves as nobody: it must be able to connect.
    use std::os::unix::fs::PermissionsExt;
    for p in [&dir, &path] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut r = BufReader::new(c.try_clone().expect("clone"));
            let mut line = String::new();
            while std::io::BufRead::read_line(&mut r, &mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut w = c;
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nunix");
        }
    });
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_pass http://unix:{}$arg_tail:/; }}",
            dir.join("up").display()
        ),
    );
    let (status, _, body) = get(port, "/?tail=.sock");
    assert_eq!((status, body.as_str()), (200, "unix"), "{}", error_log(&s));
    // Another path: nothing listens there.
    let (status, _, _) = get(port, "/?tail=.nothing");
    assert_eq!(status, 502);
    drop(s);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn proxy_redirect_default_with_variables_is_refused() {
    let dir = tempdir("proxy-more-redirect");
    std::fs::write(
        dir.join("t.conf"),
        "events {}\nhttp { server { location / { proxy_pass http://$arg_a; proxy_redirect default; } } }\n",
    )
    .expect("write");
    let out = firstbyte(&["-t", "-c", &dir.join("t.conf").display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables"),
        "{err}"
    );
}

#[test]
fn proxy_bind_sets_the_source_address() {
    // 127.0.0.2 is a loopback address on Linux without configuration.
    let (a, _) = echo("");
    let (s, port) = front(
        "proxy_bind 127.0.0.2;",
        &format!(
            "location /inherit {{ proxy_pass http://127.0.0.1:{a}; }}\n\
             location /off {{ proxy_bind off; proxy_pass http://127.0.0.1:{a}; }}\n\
             location /var {{ proxy_bind $arg_b; proxy_pass http://127.0.0.1:{a}; }}"
        ),
    );
    let (_, _, body) = get(port, "/inherit");
    assert!(body.contains("peer=127.0.0.2\n"), "{body}");
    let (_, _, body) = get(port, "/off");
    assert!(body.contains("peer=127.0.0.1\n"), "{body}");
    let (_, _, body) = get(port, "/var?b=127.0.0.3");
    assert!(body.contains("peer=127.0.0.3\n"), "{body}");
    // Empty: no bind.
    let (_, _, body) = get(port, "/var");
    assert!(body.contains("peer=127.0.0.1\n"), "{body}");
    // Not an address: 500, nginx's words.
    let (status, _, _) = get(port, "/var?b=nonsense");
    assert_eq!(status, 500);
    assert!(error_log(&s).contains("invalid local address \"nonsense\""));
    // An address this host does not have: bind() fails, 500.
    let (status, _, _) = get(port, "/var?b=192.0.2.1");
    assert_eq!(status, 500);
    assert!(
        error_log(&s).contains("bind(192.0.2.1:0) failed"),
        "{}",
        error_log(&s)
    );
    drop(s);
}

#[test]
fn proxy_bind_literal_address_is_checked_at_load() {
    let dir = tempdir("proxy-more-bind");
    std::fs::write(
        dir.join("t.conf"),
        "events {}\nhttp { server { location / { proxy_bind 300.1.1.1; proxy_pass http://127.0.0.1:9; } } }\n",
    )
    .expect("write");
    let out = firstbyte(&["-t", "-c", &dir.join("t.conf").display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("invalid address \"300.1.1.1\""), "{err}");
}

#[test]
fn proxy_set_body_replaces_the_clients_body() {
    let (a, _) = echo("");
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_set_body \"set $arg_v\"; proxy_pass http://127.0.0.1:{a}; }}"
        ),
    );
    let (status, _, body) = ask(
        port,
        "POST /?v=here HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nConnection: close\r\n\r\nclient",
    );
    assert_eq!(status, 200);
    assert!(body.contains("body=set here\n"), "{body}");
    // A GET without a body gets one too.
    let (_, _, body) = get(port, "/?v=get");
    assert!(body.contains("body=set get\n"), "{body}");
    drop(s);
}

#[test]
fn proxy_set_body_can_carry_the_request_body() {
    // The client's body is read before the set body is made (nginx's order), so
    // `$request_body` is part of it.
    let (a, _) = echo("");
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_set_body \"[$request_body]\"; proxy_pass http://127.0.0.1:{a}; }}"
        ),
    );
    let (status, _, body) = ask(
        port,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nConnection: close\r\n\r\nclient",
    );
    assert_eq!(status, 200);
    assert!(body.contains("body=[client]\n"), "{body}");
    drop(s);
}

#[test]
fn proxy_limit_rate_bounds_the_upstream_read() {
    // 60,000 bytes at 20,000 bytes/s: one second's worth goes at once (as nginx), the rest
    // takes at least two more seconds; a build without the limit takes milliseconds.
    let big: &'static str = Box::leak("x".repeat(60_000).into_boxed_str());
    let (a, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{big}",
            big.len()
        );
    });
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_limit_rate 20000; proxy_pass http://127.0.0.1:{a}; }}\n\
             location /buffered {{ proxy_buffering on; proxy_limit_rate 20000; proxy_pass http://127.0.0.1:{a}; }}"
        ),
    );
    for path in ["/", "/buffered"] {
        let started = Instant::now();
        let (status, _, body) = get(port, path);
        let took = started.elapsed();
        assert_eq!((status, body.len()), (200, 60_000), "{path}");
        assert!(took >= Duration::from_secs(2), "{path}: {took:?}");
    }
    drop(s);
}

#[test]
fn upstream_keepalive_requests_and_time_close_pooled_connections() {
    let (a, accepted) = echo("");
    let (s, port) = front(
        &format!(
            "upstream req {{ server 127.0.0.1:{a}; keepalive 4; keepalive_requests 2; }}\n\
             upstream idle {{ server 127.0.0.1:{a}; keepalive 4; keepalive_timeout 1s; }}"
        ),
        "proxy_http_version 1.1; proxy_set_header Connection \"\";\n\
         location /req { proxy_pass http://req; }\n\
         location /idle { proxy_pass http://idle; }",
    );
    let conn_of = |path: &str| -> String {
        let (status, _, body) = get(port, path);
        assert_eq!(status, 200, "{body}");
        body.lines()
            .find_map(|l| l.strip_prefix("conn="))
            .expect("conn")
            .to_string()
    };
    // keepalive_requests 2: two requests per connection.
    let first = conn_of("/req");
    assert_eq!(conn_of("/req"), first);
    let second = conn_of("/req");
    assert_ne!(second, first);
    assert_eq!(conn_of("/req"), second);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    // keepalive_timeout 1s: reused at once, not after two idle seconds.
    let c = conn_of("/idle");
    assert_eq!(conn_of("/idle"), c);
    std::thread::sleep(Duration::from_millis(2100));
    assert_ne!(conn_of("/idle"), c);
    drop(s);
}

#[test]
fn intercepted_401_keeps_every_www_authenticate() {
    let (a, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = w.write_all(
            b"HTTP/1.1 401 No\r\nWWW-Authenticate: Basic realm=\"a\"\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{a}; proxy_intercept_errors on; error_page 401 /page; }}\n\
             location = /page {{ return 200 \"intercepted\"; }}"
        ),
    );
    let (status, headers, body) = get(port, "/");
    assert_eq!((status, body.as_str()), (401, "intercepted"));
    let auth: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, ["Basic realm=\"a\"", "Bearer"]);
    drop(s);
}

#[test]
fn upstream_fields_keep_their_order_when_some_are_dropped() {
    // Connection first: removing it in place would move the last field into its slot.
    let (a, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nX-First: 1\r\nX-Second: 2\r\nX-Third: 3\r\nContent-Length: 0\r\n\r\n",
        );
    });
    let (s, port) = front(
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{a}; }}"),
    );
    // The upstream's Connection field is dropped (hop-by-hop); the others keep their order.
    let (_, headers, _) = get(port, "/");
    let names: Vec<String> = headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .filter(|n| n.starts_with("x-"))
        .collect();
    assert_eq!(names, ["x-first", "x-second", "x-third"]);
    drop(s);
}

#[test]
fn proxy_variables_outside_proxy_set_header() {
    let (a, _) = echo("");
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{a}/x; add_header X-PH $proxy_host; add_header X-PP $proxy_port; add_header X-XFF $proxy_add_x_forwarded_for; add_header X-RT $upstream_response_time; }}"
        ),
    );
    let (status, headers, _) = ask(
        port,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    let want = format!("127.0.0.1:{a}");
    assert_eq!(header(&headers, "x-ph"), Some(want.as_str()));
    assert_eq!(header(&headers, "x-pp"), Some(a.to_string().as_str()));
    assert_eq!(header(&headers, "x-xff"), Some("192.0.2.1, 127.0.0.1"));
    // The response is still being read when the header goes: no response time yet (nginx).
    assert_eq!(header(&headers, "x-rt"), Some("-"));
    drop(s);
}

#[test]
fn a_client_that_leaves_while_the_upstream_thinks_is_logged_499() {
    let (a, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        std::thread::sleep(Duration::from_secs(3));
        let mut w = s;
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    let dir = tempdir("proxy-more-499");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n log_format t '$status $upstream_addr $upstream_header_time';\n access_log {d}/access.log t;\n server {{ listen 127.0.0.1:{port};\n location / {{ proxy_pass http://127.0.0.1:{a}; }}\n }}\n}}\n",
        d = dir.display()
    );
    let s = Server::start_in(&dir, &conf, port);
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    std::thread::sleep(Duration::from_millis(300));
    drop(c);
    let want = format!("499 127.0.0.1:{a} -");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut log = String::new();
    while Instant::now() < deadline {
        log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
        if log.contains(&want) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(log.contains(&want), "{log:?}");
    drop(s);
}

/// `proxy_ignore_client_abort on`: a client that leaves while the upstream thinks does not
/// end the exchange; the whole response (8 MiB, more than any socket buffer holds) is read
/// from the upstream. `off` (the default): the upstream connection is closed when the client
/// leaves, so the upstream's writes fail.
#[test]
fn proxy_ignore_client_abort_reads_the_whole_response() {
    const BODY: usize = 8 << 20;
    for (ignore, whole) in [("on", true), ("off", false)] {
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        let tx = std::sync::Mutex::new(tx);
        let (a, _) = upstream(move |s| {
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            if read_head(&mut r).is_none() {
                return;
            }
            std::thread::sleep(Duration::from_millis(800));
            let mut w = s;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
            let chunk = vec![b'x'; 64 << 10];
            let ok = w.write_all(head.as_bytes()).is_ok()
                && (0..BODY / chunk.len()).all(|_| w.write_all(&chunk).is_ok());
            if let Ok(tx) = tx.lock() {
                let _ = tx.send(ok);
            }
        });
        let (server, port) = front(
            "",
            &format!("location / {{ proxy_ignore_client_abort {ignore}; proxy_read_timeout 10s; proxy_pass http://127.0.0.1:{a}; }}"),
        );
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("write");
        std::thread::sleep(Duration::from_millis(200));
        drop(c);
        let got = rx.recv_timeout(Duration::from_secs(20));
        assert_eq!(got, Ok(whole), "proxy_ignore_client_abort {ignore}");
        drop(server);
    }
}

/// A DNS server on UDP: `backend.test` is 127.0.0.1 (TTL 60), `alias.test` a CNAME to it
/// (answered alone, so the proxy asks again), anything else NXDOMAIN; AAAA questions get an
/// empty answer. Its port and the number of A questions it got.
fn dns_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    // UDP and TCP on one port; TCP answers `big.test` (127.0.0.1), length-prefixed.
    let (sock, tcp) = loop {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind dns");
        let port = sock.local_addr().expect("addr").port();
        if let Ok(t) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            break (sock, t);
        }
    };
    let port = sock.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut c in tcp.incoming().flatten() {
            let mut len = [0u8; 2];
            if c.read_exact(&mut len).is_err() {
                continue;
            }
            let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if c.read_exact(&mut q).is_err() || q.len() < 17 {
                continue;
            }
            let qtype = u16::from_be_bytes([q[q.len() - 4], q[q.len() - 3]]);
            let mut r = q.clone();
            r[2] = 0x81;
            r[3] = 0x80;
            if qtype == 1 {
                r[7] = 1;
                r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let mut msg = (r.len() as u16).to_be_bytes().to_vec();
            msg.extend_from_slice(&r);
            let _ = c.write_all(&msg);
        }
    });
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = asked.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let q = &buf[..n];
            // The question's name, as labels, ends at the first zero byte after the header.
            let Some(end) = q[12..].iter().position(|b| *b == 0).map(|p| 12 + p + 1) else {
                continue;
            };
            let mut name = Vec::new();
            let mut at = 12;
            while q[at] != 0 {
                let len = q[at] as usize;
                name.push(String::from_utf8_lossy(&q[at + 1..at + 1 + len]).into_owned());
                at += 1 + len;
            }
            let name = name.join(".");
            let qtype = u16::from_be_bytes([q[end], q[end + 1]]);
            let mut r = q[..end + 4].to_vec();
            r[2] = 0x81;
            let (rcode, records): (u8, Vec<Vec<u8>>) = match (name.as_str(), qtype) {
                ("backend.test", 1) => {
                    count.fetch_add(1, Ordering::SeqCst);
                    (
                        0,
                        vec![[
                            &[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4][..],
                            &[127, 0, 0, 1],
                        ]
                        .concat()],
                    )
                }
                // A CNAME is the answer to any type (as DNS servers give it); `late.test`
                // has one for AAAA only, after an empty A answer.
                ("alias.test", _) | ("late.test", 28) => {
                    let target = b"\x07backend\x04test\x00";
                    let mut rr = vec![0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, target.len() as u8];
                    rr.extend_from_slice(target);
                    (0, vec![rr])
                }
                // An address for A, a server failure for AAAA.
                ("half.test", 1) => (
                    0,
                    vec![[
                        &[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4][..],
                        &[127, 0, 0, 1],
                    ]
                    .concat()],
                ),
                ("half.test", _) => (2, vec![]),
                // Truncated over UDP: the whole answer is over TCP.
                ("big.test", 1) => {
                    r[2] |= 0x02;
                    (0, vec![])
                }
                ("backend.test" | "big.test" | "late.test", _) => (0, vec![]),
                _ => (3, vec![]),
            };
            r[3] = 0x80 | rcode;
            r[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
            r[8..12].fill(0);
            for rr in records {
                r.extend_from_slice(&rr);
            }
            let _ = sock.send_to(&r, from);
        }
    });
    (port, asked)
}

#[test]
fn resolver_names_for_proxy_pass_with_variables() {
    let (a, _) = echo("");
    let (dns, asked) = dns_server();
    let (s, port) = front(
        "",
        &format!(
            "location / {{ resolver 127.0.0.1:{dns}; resolver_timeout 5s; proxy_pass http://$arg_h:{a}; }}"
        ),
    );
    let (status, _, body) = get(port, "/?h=backend.test");
    assert_eq!(status, 200, "{body}{}", error_log(&s));
    assert!(
        body.contains("line=GET /?h=backend.test HTTP/1.0"),
        "{body}"
    );
    // Cached for the answer's TTL: asked once for both requests (names are caseless).
    let (status, _, _) = get(port, "/?h=Backend.Test");
    assert_eq!(status, 200);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // A CNAME answered alone: its target is asked (and is cached already).
    let (status, _, _) = get(port, "/?h=alias.test");
    assert_eq!(status, 200, "{}", error_log(&s));
    // A truncated answer is asked again over TCP.
    let (status, _, _) = get(port, "/?h=big.test");
    assert_eq!(status, 200, "{}", error_log(&s));
    // No A record and a CNAME for AAAA: the CNAME is followed (nginx).
    let (status, _, _) = get(port, "/?h=late.test");
    assert_eq!(status, 200, "{}", error_log(&s));
    // An error answer to one query is the name's error beside the other's address (nginx).
    let (status, _, _) = get(port, "/?h=half.test");
    assert_eq!(status, 502);
    assert!(
        error_log(&s).contains("half.test could not be resolved (2: Server failure)"),
        "{}",
        error_log(&s)
    );
    // NXDOMAIN: 502 in nginx's words.
    let (status, _, _) = get(port, "/?h=nowhere.test");
    assert_eq!(status, 502);
    assert!(
        error_log(&s).contains("nowhere.test could not be resolved (3: Host not found)"),
        "{}",
        error_log(&s)
    );
    drop(s);
}

#[test]
fn resolver_moves_on_from_a_server_that_does_not_answer() {
    let (a, _) = echo("");
    let (dns, _) = dns_server();
    // Nothing answers on this UDP port.
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let dead_port = dead.local_addr().expect("addr").port();
    drop(dead);
    let (s, port) = front(
        "",
        &format!(
            "location / {{ resolver 127.0.0.1:{dead_port} 127.0.0.1:{dns}; resolver_timeout 20s; proxy_pass http://$arg_h:{a}; }}"
        ),
    );
    // Each query goes to the next server; one that does not answer is left after 5 s.
    for name in ["backend.test", "alias.test"] {
        let (status, _, body) = get(port, &format!("/?h={name}"));
        assert_eq!(status, 200, "{name}: {body}{}", error_log(&s));
    }
    drop(s);
}

#[test]
fn error_page_to_a_proxied_location() {
    // An upstream that answers 502 and an error page whose location proxies elsewhere: the
    // page's upstream answers (nginx runs the page's location in full), with its own status
    // under `=`, the original one without.
    let (bad, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = w.write_all(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let (good, _) = echo("");
    let (s, port) = front(
        "",
        &format!(
            "proxy_intercept_errors on;\n \
             location /own/ {{ proxy_pass http://127.0.0.1:{bad}; error_page 502 = /pass; }}\n \
             location /kept/ {{ proxy_pass http://127.0.0.1:{bad}; error_page 502 /pass; }}\n \
             location /pass {{ proxy_pass http://127.0.0.1:{good}; }}"
        ),
    );
    let (status, _, body) = get(port, "/own/x");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("GET /pass "), "{body}");
    let (status, _, body) = get(port, "/kept/x");
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("GET /pass "), "{body}");
    drop(s);
}

#[test]
fn error_page_to_a_bare_word_is_a_redirect_to_it() {
    // nginx: a page that is neither `/URI` nor `@name` is a 302 to it as written, and the
    // location's `add_header` goes on it (nginx-tests' `error_page 502 504 redirect;`).
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_port = dead.local_addr().expect("addr").port();
    drop(dead);
    let (s, port) = front(
        "",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{dead_port}; \
             add_header X-IP $upstream_addr; error_page 502 504 redirect; }}\n \
             location /at {{ proxy_pass http://127.0.0.1:{dead_port}; error_page 502 =301 elsewhere?a=1; }}"
        ),
    );
    let (status, headers, _) = get(port, "/x");
    assert_eq!(status, 302);
    assert_eq!(header(&headers, "location"), Some("redirect"));
    assert_eq!(
        header(&headers, "x-ip"),
        Some(format!("127.0.0.1:{dead_port}").as_str())
    );
    let (status, headers, _) = get(port, "/at");
    assert_eq!(status, 301);
    assert_eq!(header(&headers, "location"), Some("elsewhere?a=1"));
    drop(s);
}
