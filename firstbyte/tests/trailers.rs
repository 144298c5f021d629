//! `add_trailer`: an HTTP/2 trailer section after the body, and HTTP/1.1 chunked trailers
//! for a client that asks for them (`TE: trailers`).

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
    root {dir}/html;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port1};
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / {
            add_trailer X-Var $host;
            add_trailer X-Multi a;
            add_trailer X-Multi b;
            add_trailer X-Seen "[$sent_trailer_x_multi]";
            add_trailer X-Empty "";
        }
        location /error { add_trailer X-Never n; add_trailer X-Always y always; return 404; }
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

#[tokio::test]
async fn trailers_over_http2_and_chunked_http11() {
    let (server, ports) = Server::start("trailers", CONF, 2);
    std::fs::create_dir_all(server.dir.join("html")).expect("html");
    std::fs::write(server.dir.join("html/index.html"), "SEE-THIS").expect("file");

    let (mut send, conn) = h2_tls_client(ports[0], None).await;
    let req = |path: &str| {
        http::Request::get(format!("https://localhost:{}{path}", ports[0]))
            .body(())
            .expect("request")
    };
    let (resp, _) = send.send_request(req("/index.html"), true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers().get("x-var").is_none(),
        "a trailer, not a header"
    );
    let mut body = resp.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    assert_eq!(data, b"SEE-THIS");
    let t = body.trailers().await.expect("trailers").expect("some");
    assert_eq!(t["x-var"], "localhost");
    let multi: Vec<_> = t.get_all("x-multi").iter().collect();
    assert_eq!(multi, ["a", "b"]);
    assert_eq!(t["x-seen"], "[a, b]");
    assert!(t.get("x-empty").is_none(), "an empty value adds none");

    let (resp, _) = send.send_request(req("/error"), true).expect("send");
    let mut body = resp.await.expect("response").into_body();
    while let Some(c) = body.data().await {
        let _ = body.flow_control().release_capacity(c.expect("data").len());
    }
    let t = body.trailers().await.expect("trailers").expect("some");
    assert!(t.get("x-never").is_none(), "404: only `always`");
    assert_eq!(t["x-always"], "y");
    drop(send);
    conn.abort();

    // HTTP/1.1: chunked, the trailer after the last chunk, for a client that said TE.
    let r = h1(ports[1], "/index.html", "TE: trailers\r\n");
    assert!(
        r.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{r}"
    );
    assert!(!r.to_ascii_lowercase().contains("content-length"), "{r}");
    assert!(r.contains("SEE-THIS\r\n0\r\n"), "{r}");
    let tail = r
        .split("\r\n0\r\n")
        .nth(1)
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(tail.contains("x-var: localhost\r\n"), "{r}");
    // Without TE: chunked still, as nginx (its `add_trailer` applies), but no trailer field.
    let r = h1(ports[1], "/index.html", "");
    assert!(!r.to_ascii_lowercase().contains("x-var"), "{r}");
    assert!(!r.to_ascii_lowercase().contains("content-length"), "{r}");
    assert!(r.ends_with("8\r\nSEE-THIS\r\n0\r\n\r\n"), "{r}");
    drop(server);
}
