//! `proxy_pass_trailers`: a chunked upstream response's trailer section goes on to the
//! client after the body, as nginx's (HTTP/1.1 to a client that sent `TE: trailers`, HTTP/2),
//! without hop-by-hop or hidden fields, before `add_trailer`'s; off (the default), it stays
//! behind, where `$upstream_trailer_NAME` still reads it.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

/// An upstream answering every request with a chunked body and a trailer section that holds
/// fields a proxy must not pass on (`Connection`, `Server`, `X-Accel-*`, one that
/// `proxy_hide_header` names) beside two it must.
fn chunked_upstream() -> u16 {
    upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if read_head(&mut r).is_none() {
            return;
        }
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\
              Trailer: X-Sum, Connection, X-Secret, Server, X-Accel-Redirect\r\n\
              Connection: close\r\n\r\n\
              4\r\nbody\r\n0\r\n\
              X-Sum: 42\r\nConnection: keep-alive\r\nX-Secret: s\r\nServer: up\r\n\
              X-Accel-Redirect: /x\r\nX-Unannounced: u\r\n\r\n",
        );
    })
    .0
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port1};
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        proxy_http_version 1.1;
        location /pass {
            proxy_pass http://127.0.0.1:{up};
            proxy_pass_trailers on;
            proxy_hide_header X-Secret;
            add_trailer X-Added "[$sent_trailer_x_sum]";
        }
        location /buffered {
            proxy_pass http://127.0.0.1:{up};
            proxy_buffering on;
            proxy_pass_trailers on;
        }
        location /off {
            proxy_pass http://127.0.0.1:{up};
            add_trailer X-Read "$upstream_trailer_x_sum";
        }
    }
}
"#;

fn h1(port: u16, path: &str, te: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{te}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The trailer section of a chunked HTTP/1.1 response, lowercased.
fn h1_trailers(r: &str) -> String {
    let (_, t) = r.split_once("\r\n0\r\n").unwrap_or_else(|| panic!("{r}"));
    t.to_ascii_lowercase()
}

async fn h2_get(port: u16, path: &str) -> (Vec<u8>, Option<http::HeaderMap>) {
    let (mut send, conn) = h2_tls_client(port, None).await;
    let req = http::Request::get(format!("https://localhost:{port}{path}"))
        .body(())
        .expect("request");
    let (resp, _) = send.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while let Some(c) = body.data().await {
        let c = c.expect("data");
        let _ = body.flow_control().release_capacity(c.len());
        data.extend_from_slice(&c);
    }
    let t = body.trailers().await.expect("trailers");
    drop(send);
    conn.abort();
    (data, t)
}

#[tokio::test]
async fn upstream_trailers_pass_with_the_directive() {
    let up = chunked_upstream();
    let conf = CONF.replace("{up}", &up.to_string());
    let (server, ports) = Server::start("proxy-trailers", &conf, 2);

    // HTTP/1.1 with `TE: trailers`: the fields the upstream announced that may pass, then
    // add_trailer's, which sees them as `$sent_trailer_*`.
    let r = h1(ports[1], "/pass", "TE: trailers\r\n");
    assert!(r.contains("\r\n4\r\nbody\r\n0\r\n"), "{r}");
    let t = h1_trailers(&r);
    assert!(t.contains("x-sum: 42\r\n"), "{r}");
    assert!(t.contains("x-added: [42]\r\n"), "{r}");
    for gone in ["connection", "x-secret", "server", "x-accel-redirect"] {
        assert!(!t.contains(gone), "{gone} passed: {r}");
    }
    // hyper sends only what the `Trailer` field names: the upstream's unannounced field
    // stays behind over HTTP/1.1.
    assert!(!t.contains("x-unannounced"), "{r}");
    let head = r
        .split("\r\n\r\n")
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(head.contains("trailer: x-sum, x-added\r\n"), "{head}");
    // Without `TE: trailers`: chunked, an empty section.
    let r = h1(ports[1], "/pass", "");
    assert!(r.ends_with("\r\n4\r\nbody\r\n0\r\n\r\n"), "{r}");

    // HTTP/2: every field that may pass, in the upstream's order, add_trailer's after.
    let (body, t) = h2_get(ports[0], "/pass").await;
    assert_eq!(body, b"body");
    let t = t.expect("a trailer section");
    let names: Vec<&str> = t.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["x-sum", "x-unannounced", "x-added"], "{t:?}");
    assert_eq!(t["x-sum"], "42");
    assert_eq!(t["x-added"], "[42]");

    // Through proxy_buffering's spool too.
    let (body, t) = h2_get(ports[0], "/buffered").await;
    assert_eq!(body, b"body");
    assert_eq!(t.expect("a trailer section")["x-sum"], "42");

    // Off (nginx's default): none of the upstream's, but the variable reads them.
    let (body, t) = h2_get(ports[0], "/off").await;
    assert_eq!(body, b"body");
    let t = t.expect("add_trailer's section");
    assert!(t.get("x-sum").is_none(), "{t:?}");
    assert_eq!(t["x-read"], "42");
    drop(server);
}
