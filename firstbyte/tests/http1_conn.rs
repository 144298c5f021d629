//! HTTP/1.x connection matters as nginx: the host of an absolute request target is checked as
//! nginx's request-line parser does (400 otherwise), `Connection: keep-alive` and
//! `Keep-Alive: timeout=N` on responses that keep the connection, the answering location's
//! `keepalive_timeout` for the wait that follows, and `$proxy_protocol_tlv_*` from a PROXY
//! version 2 header.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    keepalive_timeout 1s 9s;
    server {
        listen 127.0.0.1:{port0};
        server_name localhost;
        location / { return 200 "host=$host"; }
        location /long { keepalive_timeout 30s; return 200 "long"; }
    }
    server {
        listen 127.0.0.1:{port1} proxy_protocol;
        server_name localhost;
        location / {
            return 200 "alpn=$proxy_protocol_tlv_alpn;verify=$proxy_protocol_tlv_ssl_verify;cn=$proxy_protocol_tlv_ssl_cn;custom=$proxy_protocol_tlv_0x000ae;none=$proxy_protocol_tlv_netns;addr=$proxy_protocol_addr";
        }
    }
}
"#;

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// A response: status, headers (names lower-cased), body.
type Resp = (u16, Vec<(String, String)>, Vec<u8>);

/// Sends `req` and reads one response (its head, and a body of `Content-Length`).
fn exchange(s: &mut TcpStream, req: &[u8]) -> Option<Resp> {
    s.write_all(req).ok()?;
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let (status, headers, _) = parse_response(&buf[..end + 4]);
            let len: usize = header(&headers, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut b).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&b[..n]);
            }
            return Some((status, headers, buf[end + 4..end + 4 + len].to_vec()));
        }
        let n = s.read(&mut b).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
    }
}

/// Whether the server closes `s` (EOF) within the read timeout.
fn closed(s: &mut TcpStream) -> bool {
    matches!(s.read(&mut [0u8; 64]), Ok(0))
}

fn absolute(port: u16, host: &str) -> (u16, Vec<u8>) {
    let mut s = connect(port);
    let req = format!("GET http://{host}/ HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let (status, _, body) = exchange(&mut s, req.as_bytes()).expect("a response");
    (status, body)
}

#[test]
fn absolute_target_hosts_as_nginx_parser() {
    let (_s, ports) = Server::start("http1conn", CONF, 2);
    for bad in [
        "example.com.:1.2",
        "[abcd::ef98:0:7654:321].",
        "[abcd::ef98:0:7654:321].:98",
        "extra[abcd::ef98:0:7654:321]",
        "a_b.example",
        "com.exa-m.45..:",
        ".",
        "[::1]x",
        "a.com:80:80",
    ] {
        let (status, body) = absolute(ports[0], bad);
        assert_eq!(status, 400, "{bad:?}: {}", String::from_utf8_lossy(&body));
    }
    for (good, host) in [
        ("Example.COM.:8080", "example.com"),
        ("www.abcd-ef.g02.xyz.", "www.abcd-ef.g02.xyz"),
        ("[::ffff:12.30.67.89]:4321", "[::ffff:12.30.67.89]"),
    ] {
        let (status, body) = absolute(ports[0], good);
        assert_eq!(status, 200, "{good:?}");
        assert_eq!(body, format!("host={host}").as_bytes());
    }
}

#[test]
fn keep_alive_is_said_as_nginx_says_it() {
    let (_s, ports) = Server::start("http1conn", CONF, 2);
    // HTTP/1.1: keep-alive and keepalive_timeout's second parameter, twice on one connection.
    let mut s = connect(ports[0]);
    for _ in 0..2 {
        let (status, h, _) =
            exchange(&mut s, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("response");
        assert_eq!(status, 200);
        assert_eq!(header(&h, "connection"), Some("keep-alive"), "{h:?}");
        assert_eq!(header(&h, "keep-alive"), Some("timeout=9"), "{h:?}");
    }
    // The client's close: close alone.
    let req = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let (_, h, _) = exchange(&mut s, req).expect("response");
    assert_eq!(header(&h, "connection"), Some("close"), "{h:?}");
    assert_eq!(header(&h, "keep-alive"), None);
    assert!(closed(&mut s));
    // HTTP/1.0 keeps the connection only when asked.
    let mut s = connect(ports[0]);
    let (_, h, _) = exchange(&mut s, b"GET / HTTP/1.0\r\n\r\n").expect("response");
    assert_eq!(header(&h, "connection"), None, "{h:?}");
    assert_eq!(header(&h, "keep-alive"), None);
    assert!(closed(&mut s));
    let mut s = connect(ports[0]);
    let req = b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    for _ in 0..2 {
        let (_, h, _) = exchange(&mut s, req).expect("response");
        assert_eq!(header(&h, "connection"), Some("keep-alive"), "{h:?}");
    }
}

#[test]
fn the_answering_location_sets_the_keepalive_wait() {
    let (_s, ports) = Server::start("http1conn", CONF, 2);
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // /long says 30 s: 2.5 s later (past the server's 1 s) the connection still serves.
    let mut s = connect(ports[0]);
    assert!(exchange(&mut s, get("/long").as_bytes()).is_some());
    std::thread::sleep(Duration::from_millis(2500));
    let (status, _, body) = exchange(&mut s, get("/").as_bytes()).expect("still open");
    assert_eq!((status, body.as_slice()), (200, &b"host=localhost"[..]));
    // That response came from `/` (1 s): the connection is closed when idle past it.
    assert!(closed(&mut s), "closed after the 1 s keepalive_timeout");
}

fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
    let mut b = vec![t];
    b.extend_from_slice(&(v.len() as u16).to_be_bytes());
    b.extend_from_slice(v);
    b
}

/// A PROXY v2 header (PROXY, TCP over IPv4 192.0.2.1:123 -> 192.0.2.2:5678) with `tlvs`.
fn v2_header(tlvs: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    let mut body = vec![192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e];
    body.extend_from_slice(tlvs);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&body);
    h
}

fn pp_body(port: u16, header: &[u8]) -> Option<String> {
    let mut s = connect(port);
    let mut req = header.to_vec();
    req.extend_from_slice(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let (status, _, body) = exchange(&mut s, &req)?;
    assert_eq!(status, 200);
    Some(String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn proxy_protocol_tlv_variables() {
    let (_s, ports) = Server::start("http1conn", CONF, 2);
    let mut ssl = vec![0x01, 0, 0, 1, 2]; // client flags, verify = 258
    ssl.extend(tlv(0x22, b"example.com"));
    let mut tlvs = tlv(0x01, b"h2");
    tlvs.extend(tlv(0x20, &ssl));
    tlvs.extend(tlv(0xae, b"12345"));
    assert_eq!(
        pp_body(ports[1], &v2_header(&tlvs)).expect("served"),
        "alpn=h2;verify=258;cn=example.com;custom=12345;none=;addr=192.0.2.1"
    );
    // Hostile TLVs: a length past the header's end, a short SSL TLV. The header itself is
    // well formed: the request is served, the variables are empty from the break on.
    let mut broken = tlv(0x01, b"h2");
    broken.extend([0xae, 0xff, 0xff, b'x']);
    assert_eq!(
        pp_body(ports[1], &v2_header(&broken)).expect("served"),
        "alpn=h2;verify=;cn=;custom=;none=;addr=192.0.2.1"
    );
    let short_ssl = tlv(0x20, &[1, 0]);
    assert_eq!(
        pp_body(ports[1], &v2_header(&short_ssl)).expect("served"),
        "alpn=;verify=;cn=;custom=;none=;addr=192.0.2.1"
    );
    // Version 1 carries none.
    assert_eq!(
        pp_body(ports[1], b"PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n").expect("served"),
        "alpn=;verify=;cn=;custom=;none=;addr=192.0.2.1"
    );
}

#[test]
fn an_unknown_tlv_name_is_refused_at_load() {
    let dir = tempdir("http1conn-tlv");
    let conf = dir.join("bad.conf");
    std::fs::write(
        &conf,
        "events {}\nhttp {\n server {\n  listen 127.0.0.1:1;\n  return 200 $proxy_protocol_tlv_foo;\n }\n}\n",
    )
    .expect("write");
    let out = firstbyte(&["-t", "-c", conf.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("unknown \"proxy_protocol_tlv_foo\" variable") && err.contains("bad.conf:5"),
        "{err}"
    );
}

/// A graceful stop while a pipelined request waits: its response says `Connection: close`
/// alone (hyper's own close is not hidden behind a `keep-alive`), and the one answered before
/// the stop kept the connection.
#[test]
fn graceful_stop_says_close_alone() {
    const STOP: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    limit_req_zone $binary_remote_addr zone=one:1m rate=30r/m;
    server {
        listen 127.0.0.1:{port0};
        server_name localhost;
        root {dir}/html;
        location / { limit_req zone=one burst=5; }
    }
}
"#;
    let (s, ports) = Server::start("http1conn-stop", STOP, 1);
    let mut c = connect(ports[0]);
    let req = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n";
    c.write_all(&[&req[..], &req[..]].concat()).expect("write");
    // The first response comes at once; the second waits 2 s in limit_req: stop meanwhile.
    let mut all = Vec::new();
    let mut b = [0u8; 4096];
    while !all.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.read(&mut b).expect("read");
        assert!(n > 0, "closed before the first response");
        all.extend_from_slice(&b[..n]);
    }
    s.signal(libc::SIGQUIT);
    loop {
        match c.read(&mut b) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&b[..n]),
            Err(e) => panic!("no EOF after the stop: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&all);
    let heads: Vec<&str> = text.split("HTTP/1.1 ").filter(|r| !r.is_empty()).collect();
    assert_eq!(heads.len(), 2, "{text}");
    assert!(
        heads[0].contains("\r\nConnection: keep-alive\r\n"),
        "{text}"
    );
    assert!(heads[1].starts_with("200 "), "{text}");
    assert!(heads[1].contains("\r\nConnection: close\r\n"), "{text}");
    assert!(!heads[1].contains("keep-alive"), "{text}");
}
