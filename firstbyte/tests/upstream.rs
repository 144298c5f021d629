//! `upstream {}` groups end to end: `proxy_next_upstream` (statuses, methods, tries, a sent
//! body), `max_fails`, the balancing methods `least_conn`, `ip_hash`, `hash` and `random [two
//! [least_conn]]`, `zone`, `proxy_redirect`, and `$request_port` / `$is_request_port`.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::*;

/// An upstream answering every request with `status` and its `name` as the body (after
/// `delay` when the path is `/slow`); the port and its request count.
fn named(name: &'static str, status: u16) -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        h.fetch_add(1, Ordering::SeqCst);
        // Read a body the request declares, so the proxy's write never blocks.
        let len = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        let _ = r.read_exact(&mut body);
        if head.starts_with("GET /slow") {
            std::thread::sleep(Duration::from_millis(2000));
        }
        let mut w = s;
        let _ = write!(
            w,
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
            name.len()
        );
    });
    (port, hits)
}

fn front(upstreams: &str, location: &str) -> (Server, u16) {
    let dir = tempdir("upstream");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {upstreams}\n server {{ listen 127.0.0.1:{port};\n location / {{ {location} }}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// Sends a raw request and returns (status, body).
fn ask(port: u16, req: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (status, _, body) = parse_response(&buf);
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn get(port: u16, path: &str) -> (u16, String) {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

fn post(port: u16) -> (u16, String) {
    ask(
        port,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
}

fn two(bad: u16, good: u16, extra: &str) -> String {
    format!(
        "upstream u {{ server 127.0.0.1:{bad} max_fails=0; server 127.0.0.1:{good} max_fails=0; }} {extra}"
    )
}

/// An upstream that reads a request and closes without answering (an error for the proxy);
/// the port and its request count.
fn closer() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_some() {
            h.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, hits)
}

/// `firstbyte -t` on `http` inside `http {}`, line 2 of `t.conf`: (ok, stderr, file).
fn check(http: &str) -> (bool, String, String) {
    let dir = tempdir("upstream-zone-conf");
    let file = dir.join("t.conf");
    std::fs::write(
        &file,
        format!("events {{}}\nhttp {{ {http}\n server {{ listen 127.0.0.1:1; }} }}\n"),
    )
    .expect("write");
    let out = firstbyte(&["-t", "-c", &file.display().to_string()]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        file.display().to_string(),
    )
}

#[test]
fn next_upstream_on_a_listed_status_and_not_otherwise() {
    let (bad, bad_hits) = named("bad", 502);
    let (good, _) = named("good", 200);
    // Listed: each request that meets the 502 server goes on to the other.
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream error http_502;",
    );
    for _ in 0..4 {
        assert_eq!(get(port, "/"), (200, "good".into()));
    }
    assert!(
        bad_hits.load(Ordering::SeqCst) >= 1,
        "the 502 server was tried"
    );
    // nginx's default (`error timeout`): the upstream's 502 is the answer, as sent.
    let (_s, port) = front(&two(bad, good, ""), "proxy_pass http://u;");
    let answers: Vec<(u16, String)> = (0..2).map(|_| get(port, "/")).collect();
    assert!(answers.contains(&(502, "bad".into())), "{answers:?}");
    assert!(answers.contains(&(200, "good".into())), "{answers:?}");
}

#[test]
fn post_is_retried_only_with_non_idempotent() {
    let (bad, _) = named("bad", 502);
    let (good, _) = named("good", 200);
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream error http_502;",
    );
    let answers: Vec<(u16, String)> = (0..2).map(|_| post(port)).collect();
    assert!(answers.contains(&(502, "bad".into())), "{answers:?}");
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream error http_502 non_idempotent;",
    );
    for _ in 0..2 {
        assert_eq!(post(port), (200, "good".into()));
    }
}

#[test]
fn tries_limit_and_a_sent_body_stop_the_retry() {
    let (bad, _) = named("bad", 503);
    let (good, _) = named("good", 200);
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream http_503; proxy_next_upstream_tries 1;",
    );
    let answers: Vec<(u16, String)> = (0..2).map(|_| get(port, "/")).collect();
    assert!(answers.contains(&(503, "bad".into())), "{answers:?}");
    // A PUT with a streamed body (`proxy_request_buffering off`): sent once, so the 503
    // stands (the body is gone).
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream http_503; proxy_request_buffering off;",
    );
    let put = "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let answers: Vec<(u16, String)> = (0..2).map(|_| ask(port, put)).collect();
    assert!(answers.contains(&(503, "bad".into())), "{answers:?}");
    // Without a body it is retried.
    for _ in 0..2 {
        assert_eq!(get(port, "/"), (200, "good".into()));
    }
    // Read whole first (`proxy_request_buffering on`, the default), the body goes again.
    let (_s, port) = front(
        &two(bad, good, ""),
        "proxy_pass http://u; proxy_next_upstream http_503;",
    );
    for _ in 0..2 {
        assert_eq!(ask(port, put), (200, "good".into()));
    }
}

#[test]
fn a_failing_status_counts_against_max_fails() {
    let (bad, bad_hits) = named("bad", 500);
    let (good, _) = named("good", 200);
    let (_s, port) = front(
        &format!(
            "upstream u {{ server 127.0.0.1:{bad} max_fails=1 fail_timeout=60s; server 127.0.0.1:{good}; }}"
        ),
        "proxy_pass http://u; proxy_next_upstream error http_500;",
    );
    for _ in 0..6 {
        assert_eq!(get(port, "/"), (200, "good".into()));
    }
    // Once failed, the server rests for fail_timeout: round robin alone would hit it 3 times.
    assert_eq!(bad_hits.load(Ordering::SeqCst), 1);
    // 404 is passed on but does not count as a failure (nginx).
    let (missing, missing_hits) = named("missing", 404);
    let (_s, port) = front(
        &format!(
            "upstream u {{ server 127.0.0.1:{missing} max_fails=1 fail_timeout=60s; server 127.0.0.1:{good}; }}"
        ),
        "proxy_pass http://u; proxy_next_upstream error http_404;",
    );
    for _ in 0..4 {
        assert_eq!(get(port, "/"), (200, "good".into()));
    }
    assert!(
        missing_hits.load(Ordering::SeqCst) >= 2,
        "404 is no failure"
    );
}

/// With `balancer`, while one server holds a slow request, `n` more go to the other one.
fn busy_server_is_avoided(balancer: &str, n: usize) {
    let (a, a_hits) = named("a", 200);
    let (b, b_hits) = named("b", 200);
    let (_s, port) = front(
        &format!("upstream u {{ {balancer}; server 127.0.0.1:{a}; server 127.0.0.1:{b}; }}"),
        "proxy_pass http://u;",
    );
    let slow = std::thread::spawn(move || get(port, "/slow"));
    // Wait until the slow request reached its server.
    for _ in 0..200 {
        if a_hits.load(Ordering::SeqCst) + b_hits.load(Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let busy = if a_hits.load(Ordering::SeqCst) == 1 {
        "a"
    } else {
        "b"
    };
    for _ in 0..n {
        let (status, body) = get(port, "/");
        assert_eq!(status, 200);
        assert_ne!(
            body, busy,
            "{balancer}: a request went to the server holding a connection"
        );
    }
    let (status, body) = slow.join().expect("slow");
    assert_eq!((status, body.as_str()), (200, busy));
}

#[test]
fn least_conn_avoids_the_busy_server() {
    busy_server_is_avoided("least_conn", 4);
}

#[test]
fn random_two_least_conn_prefers_the_idle_server() {
    busy_server_is_avoided("random two least_conn", 6);
}

#[test]
fn ip_hash_and_hash_keep_a_client_or_key_on_one_server() {
    let (a, _) = named("a", 200);
    let (b, _) = named("b", 200);
    let (c, _) = named("c", 200);
    let servers = format!("server 127.0.0.1:{a}; server 127.0.0.1:{b}; server 127.0.0.1:{c};");
    let (_s, port) = front(
        &format!("upstream u {{ ip_hash; {servers} }}"),
        "proxy_pass http://u;",
    );
    let first = get(port, "/").1;
    for _ in 0..4 {
        assert_eq!(get(port, "/").1, first, "one client, one server");
    }
    for method in ["hash $arg_k", "hash $arg_k consistent"] {
        let (_s, port) = front(
            &format!("upstream u {{ {method}; {servers} }}"),
            "proxy_pass http://u;",
        );
        let mut seen = std::collections::HashSet::new();
        for k in 0..12 {
            let path = format!("/?k=key{k}");
            let one = get(port, &path).1;
            for _ in 0..2 {
                assert_eq!(get(port, &path).1, one, "{method}: key{k} stays");
            }
            seen.insert(one);
        }
        assert!(seen.len() >= 2, "{method}: keys spread: {seen:?}");
    }
}

/// nginx's `ip_hash` over the first three octets of an IPv4 address, for `n` servers of
/// weight 1 (`ngx_http_upstream_get_ip_hash_peer`).
fn nginx_ip_hash(octets: [u8; 3], n: u64) -> usize {
    let mut hash: u64 = 89;
    for b in octets {
        hash = (hash * 113 + u64::from(b)) % 6271;
    }
    (hash % n) as usize
}

#[test]
fn ip_hash_hashes_the_real_address_behind_a_trusted_proxy() {
    // The harness's address is always 127.0.0.1: what decides is the X-Real-IP that
    // `set_real_ip_from` trusts, as nginx (its realip module replaces the connection's
    // address before the balancer reads it).
    let names = ["a", "b", "c"];
    let ups: Vec<u16> = names.iter().map(|n| named(n, 200).0).collect();
    let servers: String = ups
        .iter()
        .map(|p| format!("server 127.0.0.1:{p}; "))
        .collect();
    let (_s, port) = front(
        &format!("upstream u {{ ip_hash; {servers}}}"),
        "set_real_ip_from 127.0.0.0/8; proxy_pass http://u;",
    );
    let mut seen = std::collections::HashSet::new();
    for i in 1..=12u8 {
        let (status, body) = ask(
            port,
            &format!(
                "GET / HTTP/1.1\r\nHost: x\r\nX-Real-IP: 198.51.{i}.9\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(status, 200);
        let want = names[nginx_ip_hash([198, 51, i], 3)];
        assert_eq!(body, want, "198.51.{i}.9");
        seen.insert(body);
    }
    assert_eq!(seen.len(), 3, "twelve /24s reach every server: {seen:?}");
}

#[test]
fn proxy_redirect_rewrites_location_and_refresh() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        let mut w = s;
        let _ = write!(
            w,
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}{path}next\r\nRefresh: 3; url=http://127.0.0.1:{port}{path}later\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    });
    let dir = tempdir("upstream-redirect");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port};\n location /front/ {{ proxy_pass http://127.0.0.1:{up}/app/; }}\n location /re/ {{ proxy_pass http://127.0.0.1:{up}; proxy_redirect ~^http://127\\.0\\.0\\.1:\\d+/re/(.*)$ https://example.test/$host/$1; }}\n location /off/ {{ proxy_pass http://127.0.0.1:{up}; proxy_redirect off; }}\n }}\n}}\n",
        d = dir.display()
    );
    let _s = Server::start_in(&dir, &conf, port);
    let head = |path: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let (status, headers, _) = parse_response(&buf);
        assert_eq!(status, 302);
        (
            header(&headers, "location").unwrap_or("").to_string(),
            header(&headers, "refresh").unwrap_or("").to_string(),
        )
    };
    // default: the proxy_pass URL becomes the location's prefix.
    // A rewritten relative Location is made absolute (absolute_redirect on), Refresh not.
    let (location, refresh) = head("/front/a");
    assert_eq!(location, format!("http://site.test:{port}/front/anext"));
    assert_eq!(refresh, "3; url=/front/alater");
    // A regex with captures and a variable.
    let (location, _) = head("/re/b");
    assert_eq!(location, "https://example.test/site.test/bnext");
    // off: as the upstream sent it.
    let (location, _) = head("/off/c");
    assert_eq!(location, format!("http://127.0.0.1:{up}/off/cnext"));
}

#[test]
fn unix_socket_upstreams() {
    let dir = tempdir("upstream-unix");
    let sock = dir.join("up.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).expect("bind unix");
    // The server may run as `nobody`: the socket must be open to it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    match std::io::BufRead::read_line(&mut r, &mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let line = head.lines().next().unwrap_or("").to_string();
                let host = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("host: ")
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                let body = format!("{line}|{host}");
                let mut w = s;
                let _ = write!(
                    w,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n upstream u {{ server unix:{s}; }}\n server {{ listen 127.0.0.1:{port};\n location /direct/ {{ proxy_pass http://unix:{s}:/inner/; }}\n location /group/ {{ proxy_pass http://u; }}\n location /dead/ {{ proxy_pass http://unix:{d}/none.sock; }}\n }}\n}}\n",
        d = dir.display(),
        s = sock.display()
    );
    let _s = Server::start_in(&dir, &conf, port);
    // The URI part replaces the prefix; Host is nginx's `localhost` for a unix socket.
    assert_eq!(
        get(port, "/direct/x?y=1"),
        (200, "GET /inner/x?y=1 HTTP/1.0|localhost".into())
    );
    assert_eq!(
        get(port, "/group/z"),
        (200, "GET /group/z HTTP/1.0|u".into())
    );
    assert_eq!(get(port, "/dead/").0, 502);
    std::thread::sleep(Duration::from_millis(100));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains(&format!(
            "upstream: \"http://unix:{}/none.sock:/dead/\"",
            dir.display()
        )),
        "{log}"
    );
}

#[test]
fn upstream_variables_name_every_try() {
    let (bad, _) = named("bad", 502);
    let (good, _) = named("good", 200);
    let dir = tempdir("upstream-vars");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n log_format up \"$upstream_addr|$upstream_status|$upstream_connect_time|$upstream_header_time|$upstream_response_time\";\n access_log {d}/access.log up;\n upstream u {{ server 127.0.0.1:{bad} max_fails=0; server 127.0.0.1:{good} max_fails=0; }}\n server {{ listen 127.0.0.1:{port};\n add_header X-Up \"$upstream_addr|$upstream_status\" always;\n location / {{ proxy_pass http://u; proxy_next_upstream error http_502; }}\n location /off {{ proxy_pass http://u; proxy_next_upstream off; }}\n }}\n}}\n",
        d = dir.display()
    );
    let _s = Server::start_in(&dir, &conf, port);
    let up_header = |path: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let (status, headers, _) = parse_response(&buf);
        (status, header(&headers, "x-up").unwrap_or("").to_string())
    };
    // Round robin starts with the first server: the 502, then the next one.
    assert_eq!(
        up_header("/"),
        (200, format!("127.0.0.1:{bad}, 127.0.0.1:{good}|502, 200"))
    );
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    let line = log.lines().next().unwrap_or("");
    let fields: Vec<&str> = line.split('|').collect();
    assert_eq!(fields.len(), 5, "{line}");
    assert_eq!(fields[0], format!("127.0.0.1:{bad}, 127.0.0.1:{good}"));
    assert_eq!(fields[1], "502, 200");
    for f in &fields[2..] {
        let parts: Vec<&str> = f.split(", ").collect();
        assert_eq!(parts.len(), 2, "{line}");
        for t in parts {
            let (s, ms) = t.split_once('.').expect("seconds.millis");
            assert!(s.parse::<u64>().is_ok() && ms.len() == 3, "{line}");
        }
    }
}

#[test]
fn intercept_errors_sends_the_error_page() {
    let (missing, _) = named("upstream-404", 404);
    let group = format!("upstream u {{ server 127.0.0.1:{missing}; }}");
    let page = "}\n location = /page { return 200 \"page for $upstream_status\";";
    // Off (the default): the upstream's own 404.
    let (_a, off) = front(
        &group,
        &format!("proxy_pass http://u; error_page 404 /page; {page}"),
    );
    assert_eq!(get(off, "/x"), (404, "upstream-404".into()));
    // On: the error_page for 404, with the original status.
    let (_b, on) = front(
        &group,
        &format!("proxy_pass http://u; proxy_intercept_errors on; error_page 404 /page; {page}"),
    );
    assert_eq!(get(on, "/x"), (404, "page for 404".into()));
    // On, but no error_page names 404: the upstream's answer passes.
    let (_c, other) = front(
        &group,
        &format!("proxy_pass http://u; proxy_intercept_errors on; error_page 500 /page; {page}"),
    );
    assert_eq!(get(other, "/x"), (404, "upstream-404".into()));
}

#[test]
fn zone_is_accepted_with_nginx_checks() {
    // One zone shared by two groups, the size given once (nginx's upstream_zone.t).
    let (ok, err, _) = check(
        "upstream u { zone z 1m; server 127.0.0.1:1; }\n upstream v { zone z; random; server 127.0.0.1:2; }",
    );
    assert!(ok, "{err}");
    for (conf, want) in [
        ("upstream u { zone z 16k; server 127.0.0.1:1; }", "zone \"z\" is too small"),
        ("upstream u { zone z 1q; server 127.0.0.1:1; }", "invalid zone size \"1q\""),
        ("upstream u { zone z 1m 2m; server 127.0.0.1:1; }", "invalid number of arguments in \"zone\" directive"),
        (
            "upstream u { zone z 1m; server 127.0.0.1:1; } upstream v { zone z 2m; server 127.0.0.1:1; }",
            "the size 2097152 of shared memory zone \"z\" conflicts with already declared size 1048576",
        ),
        ("upstream u { zone z; server 127.0.0.1:1; }", "zero size shared memory zone \"z\""),
        (
            "limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s; upstream u { zone z 1m; server 127.0.0.1:1; }",
            "the shared memory zone \"z\" is already declared for a different use",
        ),
        ("zone z 1m;", "\"zone\" directive is not allowed here"),
    ] {
        let (ok, err, file) = check(conf);
        assert!(!ok, "{conf} loaded");
        assert!(err.contains(&format!("{want} in {file}:2")), "{conf}: {err}");
    }
}

#[test]
fn random_arguments_as_nginx() {
    for (conf, want) in [
        (
            "upstream u { random three; server 127.0.0.1:1; }",
            "invalid parameter \"three\"",
        ),
        (
            "upstream u { random two most_conn; server 127.0.0.1:1; }",
            "invalid parameter \"most_conn\"",
        ),
        (
            "upstream u { random two least_conn x; server 127.0.0.1:1; }",
            "invalid number of arguments in \"random\" directive",
        ),
        (
            "upstream u { random; server 127.0.0.1:1; server 127.0.0.1:2 backup; }",
            "invalid parameter \"backup\" of server \"127.0.0.1:2\"",
        ),
    ] {
        let (ok, err, file) = check(conf);
        assert!(!ok, "{conf} loaded");
        assert!(
            err.contains(&format!("{want} in {file}:2")),
            "{conf}: {err}"
        );
    }
    let (ok, err, _) = check("upstream u { random two least_conn; server 127.0.0.1:1; }");
    assert!(ok, "{err}");
}

#[test]
fn v_reports_the_zone_and_random_modules() {
    let out = firstbyte(&["-V"]);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("configure arguments:"), "{text}");
    // nginx's harness: present unless `--without-...` appears anywhere.
    assert!(
        !text.contains("--without-http_upstream_zone_module"),
        "{text}"
    );
    assert!(
        !text.contains("--without-http_upstream_random_module"),
        "{text}"
    );
}

#[test]
fn random_spreads_by_weight_and_skips_down_and_failed_servers() {
    let (a, _) = named("a", 200);
    let (b, _) = named("b", 200);
    let (c, c_hits) = named("c", 200);
    let (_s, port) = front(
        &format!(
            "upstream u {{ zone u 64k; random; server 127.0.0.1:{a} weight=3; server 127.0.0.1:{b}; server 127.0.0.1:{c} down; }}"
        ),
        "proxy_pass http://u;",
    );
    let mut counts = [0usize; 2];
    for _ in 0..80 {
        let (status, body) = get(port, "/");
        assert_eq!(status, 200);
        match body.as_str() {
            "a" => counts[0] += 1,
            "b" => counts[1] += 1,
            other => panic!("answered by {other:?}"),
        }
    }
    assert_eq!(
        c_hits.load(Ordering::SeqCst),
        0,
        "a down server is never used"
    );
    // Expected 60:20; a fair draw is outside these bounds with a probability below 1e-6.
    assert!(counts[1] > 0 && counts[0] > counts[1], "{counts:?}");

    // A server that fails is retried elsewhere and then rests for fail_timeout.
    let (d, d_hits) = closer();
    let (e, _) = named("e", 200);
    let (_s2, port2) = front(
        &format!("upstream u {{ random two; server 127.0.0.1:{d}; server 127.0.0.1:{e}; }}"),
        "proxy_pass http://u;",
    );
    for _ in 0..10 {
        assert_eq!(get(port2, "/"), (200, "e".to_string()));
    }
    assert!(
        d_hits.load(Ordering::SeqCst) <= 1,
        "the failed server rests"
    );
}

#[test]
fn request_port_is_the_port_of_the_host_that_chose_the_server() {
    let (_s, port) = front("", "return 200 \"[$is_request_port$request_port]\";");
    let cases = [
        ("GET / HTTP/1.0\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:8080\r\n\r\n", "[:8080]"),
        ("GET / HTTP/1.0\r\nHost: [::1]:9\r\n\r\n", "[:9]"),
        ("GET / HTTP/1.0\r\nHost: [::1]\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:\r\n\r\n", "[]"),
        ("GET / HTTP/1.0\r\nHost: localhost:0\r\n\r\n", "[]"),
        // The request line's host comes first, as nginx.
        (
            "GET http://localhost:8081/ HTTP/1.0\r\nHost: localhost:9000\r\n\r\n",
            "[:8081]",
        ),
        (
            "GET http://localhost/ HTTP/1.1\r\nHost: localhost:9000\r\nConnection: close\r\n\r\n",
            "[]",
        ),
    ];
    for (req, want) in cases {
        assert_eq!(ask(port, req), (200, want.to_string()), "{req:?}");
    }
}
