//! What an upstream's answer leaves for the front: `$upstream_http_*`, `$upstream_cookie_*`,
//! `$upstream_response_length` and `$upstream_bytes_*`; `X-Accel-Redirect`; the 502 for a
//! head whose framing two readers could disagree on (request smuggling); `Upgrade` in a
//! non-101 answer; `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`; and
//! `access_log ... gzip`; and on the request side, nginx's 400 for a field it takes once
//! sent twice, `$remote_user` from `Authorization` without `auth_basic`, and `$sent_http_*`
//! in `add_header` (the fields added above it).

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

/// An upstream that answers each request with what `answer` gives for its head.
fn answering(answer: fn(&str) -> Vec<u8>) -> u16 {
    upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let mut w = s;
        let _ = w.write_all(&answer(&head));
    })
    .0
}

fn path_of(head: &str) -> &str {
    head.split_whitespace().nth(1).unwrap_or("")
}

fn get(port: u16, target: &str, extra: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let req =
        format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse_response(&buf)
}

fn all<'a>(h: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    h.iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

fn conf(dir: &Path, port: u16, http_extra: &str, server: &str) -> String {
    format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {http_extra}\n server {{ listen 127.0.0.1:{port}; server_name localhost;\n {server}\n }}\n}}\n",
        d = dir.display()
    )
}

/// The file's text once it holds `lines` lines (the access log is written once the response
/// is done, just after the client has it); gives up after 10 s.
fn wait_lines(path: &Path, lines: usize) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let t = std::fs::read_to_string(path).unwrap_or_default();
        if t.lines().count() >= lines || Instant::now() > until {
            return t;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn upstream_variables_in_headers_and_log() {
    // LF-only lines, as nginx's own test upstream writes them: the byte counts are the
    // bytes on the wire, not a re-rendering of the head.
    let up = answering(|head| {
        let len = head.len();
        format!(
            "HTTP/1.1 200 OK\nConnection: close\nX-Len: {len}\nSet-Cookie: a=1\nSet-Cookie: TC = x y ; Path=/\nX-Multi: 1\nX-Multi: 2\n\nTEST-OK-IF-YOU-SEE-THIS"
        )
        .into_bytes()
    });
    let dir = tempdir("upvars-vars");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "log_format u \"$upstream_response_length:$upstream_bytes_received:$upstream_bytes_sent:$upstream_http_x_len\";",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{up}; access_log {d}/u.log u;\n add_header X-UC $upstream_cookie_tc; add_header X-UA $upstream_cookie_a; add_header X-UM $upstream_http_x_multi; add_header X-Missing \"[$upstream_cookie_b]\"; }}",
            d = dir.display()
        ),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let (status, h, body) = get(port, "/", "");
    assert_eq!(status, 200);
    // Read to the upstream's close: chunked to the client.
    assert!(String::from_utf8_lossy(&body).contains("\r\nTEST-OK-IF-YOU-SEE-THIS\r\n0\r\n"));
    let sent: usize = header(&h, "x-len").expect("x-len").parse().expect("number");
    // nginx: up to the `;` ("x y "; the reader trims the field).
    assert_eq!(header(&h, "x-uc"), Some("x y"));
    assert_eq!(header(&h, "x-ua"), Some("1"));
    assert_eq!(header(&h, "x-um"), Some("1, 2"));
    assert_eq!(header(&h, "x-missing"), Some("[]"));
    let head_len = "HTTP/1.1 200 OK\nConnection: close\nX-Len: \nSet-Cookie: a=1\nSet-Cookie: TC = x y ; Path=/\nX-Multi: 1\nX-Multi: 2\n\n".len()
        + sent.to_string().len();
    let log = wait_lines(&dir.join("u.log"), 1);
    assert_eq!(log, format!("23:{}:{sent}:{sent}\n", head_len + 23));
}

#[test]
fn ambiguous_upstream_framing_is_a_502() {
    let up = answering(|head| {
        let fields = match path_of(head) {
            "/dup-length" => "Content-Length: 0\r\nContent-Length: 0\r\n",
            "/unknown-te" => "Transfer-Encoding: foo\r\n",
            "/dup-te" => "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "/length-and-te" => "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n",
            "/te-and-length" => "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
            "/dup-expires" => "Content-Length: 0\r\nExpires: foo\r\nExpires: bar\r\n",
            _ => "Content-Length: 0\r\n",
        };
        let body = if fields.contains("chunked") {
            "0\r\n\r\n"
        } else {
            ""
        };
        format!("HTTP/1.1 200 OK\r\nConnection: close\r\n{fields}\r\n{body}").into_bytes()
    });
    let dir = tempdir("upvars-framing");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{up}; }}"),
    );
    let _srv = Server::start_in(&dir, &c, port);
    assert_eq!(get(port, "/", "").0, 200);
    for p in [
        "/dup-length",
        "/unknown-te",
        "/dup-te",
        "/length-and-te",
        "/te-and-length",
    ] {
        assert_eq!(get(port, p, "").0, 502, "{p}");
    }
    let (status, h, _) = get(port, "/dup-expires", "");
    assert_eq!(status, 200);
    assert_eq!(all(&h, "expires"), ["foo"], "the repeated one is ignored");
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("upstream sent unknown \"Transfer-Encoding\": \"foo\""),
        "{log}"
    );
}

#[test]
fn upgrade_in_a_non_101_answer_reaches_an_http11_client() {
    let up = answering(|_| {
        b"HTTP/1.1 426 Upgrade Required\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n".to_vec()
    });
    let dir = tempdir("upvars-upgrade");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{up}; }}"),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let (status, h, _) = get(port, "/", "");
    assert_eq!(status, 426);
    assert_eq!(header(&h, "upgrade"), Some("websocket"));
}

#[test]
fn x_accel_redirect_from_the_upstream_only() {
    let up = answering(|head| {
        let path = path_of(head);
        let target = path.split_once("xar=").map_or("", |(_, t)| t).to_string();
        if target.is_empty() {
            // Echoes what the client sent, so a client's own X-Accel-Redirect would show.
            return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 8\r\n\r\nupstream"
                .to_vec();
        }
        format!(
            "HTTP/1.1 204 No Content\r\nConnection: close\r\nX-Accel-Redirect: {target}\r\nContent-Type: text/blah\r\nSet-Cookie: k=v\r\nSomething: other\r\n\r\n"
        )
        .into_bytes()
    });
    let dir = tempdir("upvars-xar");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "",
        &format!(
            "location /proxy {{ proxy_pass http://127.0.0.1:{up}; }}\n\
             location /ignored {{ proxy_pass http://127.0.0.1:{up}; proxy_ignore_headers X-Accel-Redirect; }}\n\
             location /passed {{ proxy_pass http://127.0.0.1:{up}; proxy_pass_header X-Accel-Redirect; proxy_ignore_headers x-accel-redirect; }}\n\
             location /target {{ return 200 \"xar $upstream_http_x_accel_redirect uri $uri args $args method $request_method\"; }}\n\
             location @named {{ return 200 \"named $uri\"; }}"
        ),
    );
    let _srv = Server::start_in(&dir, &c, port);

    let (status, h, body) = get(port, "/proxy?xar=/target%20x?a=1", "");
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8_lossy(&body),
        "xar /target%20x?a=1 uri /target x args a=1 method GET"
    );
    assert_eq!(
        header(&h, "content-type"),
        Some("text/blah"),
        "kept as nginx"
    );
    assert_eq!(header(&h, "set-cookie"), Some("k=v"));
    assert_eq!(header(&h, "something"), None, "other fields go");
    assert_eq!(header(&h, "x-accel-redirect"), None);

    let (_, _, body) = get(port, "/proxy?xar=@named", "");
    assert_eq!(String::from_utf8_lossy(&body), "named /proxy");

    for unsafe_target in ["/target/..", "../target", "/t/.%2e/target"] {
        let (status, _, _) = get(port, &format!("/proxy?xar={unsafe_target}"), "");
        assert_eq!(status, 404, "{unsafe_target}");
    }

    // proxy_ignore_headers: the upstream's own answer, its X-Accel-* still hidden...
    let (status, h, _) = get(port, "/ignored?xar=/target", "");
    assert_eq!(status, 204);
    assert_eq!(header(&h, "x-accel-redirect"), None);
    // ... unless proxy_pass_header names it.
    let (status, h, _) = get(port, "/passed?xar=/target", "");
    assert_eq!(status, 204);
    assert_eq!(header(&h, "x-accel-redirect"), Some("/target"));

    // A client's X-Accel-Redirect is a request header like any other: no redirect.
    let (status, _, body) = get(port, "/proxy", "X-Accel-Redirect: /target\r\n");
    assert_eq!(status, 200);
    assert_eq!(body, b"upstream");
}

#[test]
fn set_cookie_rewrites() {
    let up = answering(|head| {
        let q = path_of(head).split_once('?').map_or("", |(_, q)| q);
        let v = q.replace("%20", " ");
        format!(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nSet-Cookie: {v}\r\nContent-Length: 0\r\n\r\n"
        )
        .into_bytes()
    });
    let dir = tempdir("upvars-cookies");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{up};\n\
               proxy_cookie_domain www.example.org .example.com;\n\
               proxy_cookie_domain ~^(.+)\\.net$ $1.org;\n\
               proxy_cookie_path /app/ /;\n\
               proxy_cookie_flags one secure samesite=strict;\n\
               proxy_cookie_flags ~^t nosecure;\n\
               location /off/ {{ proxy_pass http://127.0.0.1:{up}; proxy_cookie_domain off; proxy_cookie_path off; proxy_cookie_flags off; }} }}"
        ),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let cookie = |q: &str| {
        let (_, h, _) = get(port, &format!("/?{q}"), "");
        header(&h, "set-cookie").unwrap_or("").to_string()
    };
    assert_eq!(
        cookie("a=1;%20Domain=WWW.example.org"),
        "a=1; Domain=example.com"
    );
    assert_eq!(
        cookie("a=1;%20Domain=.www.example.org"),
        "a=1; Domain=.example.com"
    );
    assert_eq!(cookie("a=1;%20domain=shop.net"), "a=1; domain=shop.org");
    assert_eq!(cookie("a=1;%20Path=/app/x"), "a=1; Path=/x");
    assert_eq!(
        cookie("a=1;Path=/other"),
        "a=1;Path=/other",
        "untouched as it came"
    );
    assert_eq!(
        cookie("ONE=1;%20SameSite=Lax"),
        "ONE=1; SameSite=Strict; Secure"
    );
    assert_eq!(cookie("two=2;%20Secure;HttpOnly"), "two=2; HttpOnly");
    let (_, h, _) = get(
        port,
        "/off/?a=1;%20Domain=www.example.org;%20Path=/app/",
        "",
    );
    assert_eq!(
        header(&h, "set-cookie"),
        Some("a=1; Domain=www.example.org; Path=/app/")
    );
}

#[test]
fn gzip_access_log_is_a_gzip_file() {
    let dir = tempdir("upvars-gzip");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "log_format t \"$uri:$status\";",
        &format!(
            "location / {{ access_log {d}/c.log.gz t gzip=5 buffer=8k flush=1s; return 200 ok; }}",
            d = dir.display()
        ),
    );
    let _srv = Server::start_in(&dir, &c, port);
    assert_eq!(get(port, "/a", "").0, 200);
    assert_eq!(get(port, "/b", "").0, 200);
    let path = dir.join("c.log.gz");
    let until = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let raw = std::fs::read(&path).unwrap_or_default();
        let mut text = String::new();
        let whole = flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .is_ok();
        if (whole && text.lines().count() >= 2) || Instant::now() > until {
            assert!(raw.starts_with(&[0x1f, 0x8b]), "a gzip file");
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(text, "/a:200\n/b:200\n");
}

#[test]
fn request_fields_nginx_takes_once_are_refused_twice() {
    let dir = tempdir("upvars-unique");
    let port = free_port();
    let c = conf(&dir, port, "", "location / { return 200 ok; }");
    let _srv = Server::start_in(&dir, &c, port);
    assert_eq!(get(port, "/", "Cookie: a\r\nCookie: b\r\n").0, 200);
    for twice in [
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Authorization: Basic a\r\nAuthorization: Basic b\r\n",
        "If-None-Match: a\r\nIf-None-Match: b\r\n",
        "Expect: x\r\nExpect: y\r\n",
    ] {
        let (status, h, _) = get(port, "/", twice);
        assert_eq!(status, 400, "{twice}");
        assert_eq!(header(&h, "connection"), Some("close"));
    }
}

#[test]
fn upgraded_connection_is_logged_with_its_bytes_when_it_closes() {
    // The upstream switches, sends 5 bytes through the tunnel, and closes.
    let up = answering(|_| {
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\nhello"
            .to_vec()
    });
    let dir = tempdir("upvars-tunnel");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "log_format b \"$status $bytes_sent $body_bytes_sent\";",
        &format!(
            "location / {{ proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1;\n proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade;\n access_log {d}/b.log b; }}",
            d = dir.display()
        ),
    );
    let _srv = Server::start_in(&dir, &c, port);
    let read = |extra: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let req = format!("GET / HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n");
        s.write_all(req.as_bytes()).expect("write");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        buf
    };
    let got = read("Upgrade: foo\r\nConnection: Upgrade\r\n");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 101"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello"), "{text}");
    let log = wait_lines(&dir.join("b.log"), 1);
    assert_eq!(
        log,
        format!("101 {} 5\n", got.len()),
        "the bytes the client read"
    );
    // Not asked to switch: the 101 head alone, no tunnel.
    let got = read("");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 101"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "no tunnelled bytes: {text}");
    let log = wait_lines(&dir.join("b.log"), 2);
    assert!(log.ends_with(" 0\n"), "{log}");
}

#[test]
fn remote_user_and_sent_http_in_add_header() {
    let dir = tempdir("upvars-reqvars");
    let port = free_port();
    let c = conf(
        &dir,
        port,
        "",
        "location / { add_header Foo a; add_header Foo b; add_header X-Sent \"[$sent_http_foo]\";\n add_header X-User \"[$remote_user]\"; return 204; }",
    );
    let _srv = Server::start_in(&dir, &c, port);
    // user:secret
    let (status, h, _) = get(port, "/", "Authorization: Basic dXNlcjpzZWNyZXQ=\r\n");
    assert_eq!(status, 204);
    assert_eq!(header(&h, "x-user"), Some("[user]"));
    assert_eq!(header(&h, "x-sent"), Some("[a, b]"));
    let (_, h, _) = get(port, "/", "");
    assert_eq!(header(&h, "x-user"), Some("[]"));
}
