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

const LATE: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        listen 127.0.0.1:{port1};
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        # 40000 bytes at 20000 a second: the second half goes a second after the first.
        location /slow/ {
            alias {dir}/html/;
            limit_rate 20000;
            add_trailer X-Time $request_time;
            add_trailer X-Body $body_bytes_sent;
            add_trailer X-Bytes $bytes_sent;
        }
        location /up/ {
            proxy_pass http://127.0.0.1:{port1}/slow/;
            add_trailer X-Urt $upstream_response_time;
            add_trailer X-Body $body_bytes_sent;
        }
    }
}
"#;

/// The trailer section of a chunked HTTP/1.1 response, lowercased.
fn h1_trailers(r: &str) -> String {
    r.rsplit("\r\n0\r\n")
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
}

fn field<'a>(section: &'a str, name: &str) -> Option<&'a str> {
    section.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn secs(v: &str) -> f64 {
    v.parse().unwrap_or_else(|_| panic!("seconds: {v:?}"))
}

/// GET `path` over HTTP/3 on 127.0.0.1:`port`: the body and the trailer section.
async fn h3_get(port: u16, path: &str) -> (Vec<u8>, http::HeaderMap) {
    use bytes::Buf;
    let mut tls = (*rust_client_config(&[b"h3"])).clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).expect("endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(std::sync::Arc::new(quic)));
    let conn = ep
        .connect(([127, 0, 0, 1], port).into(), "localhost")
        .expect("connect")
        .await
        .expect("QUIC handshake");
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3");
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let req = http::Request::get(format!("https://localhost{path}"))
        .body(())
        .expect("request");
    let mut stream = send.send_request(req).await.expect("send");
    stream.finish().await.expect("finish");
    let resp = stream.recv_response().await.expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = Vec::new();
    while let Some(mut c) = stream.recv_data().await.expect("data") {
        body.extend_from_slice(&c.copy_to_bytes(c.remaining()));
    }
    let t = stream
        .recv_trailers()
        .await
        .expect("trailers")
        .expect("some");
    drop(send);
    drive.abort();
    ep.close(0u32.into(), b"");
    (body, t)
}

/// nginx evaluates `add_trailer` when the body has ended: a trailer's `$request_time`,
/// `$body_bytes_sent` and `$upstream_response_time` describe the whole response (at the
/// head they would be 0.000, 0 and `-`), over HTTP/1.1, HTTP/2 and HTTP/3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailer_values_are_taken_after_the_body() {
    let (server, ports) = Server::start("trailers-late", LATE, 2);
    std::fs::create_dir_all(server.dir.join("html")).expect("html");
    let data = "x".repeat(40000);
    std::fs::write(server.dir.join("html/data"), &data).expect("file");
    // The rate limit holds the second half back a second; the head goes at once.
    let slow = |v: &str| assert!(secs(v) >= 0.5, "taken at the head: {v}");

    // HTTP/1.1, a client that asks for trailers.
    let port = ports[1];
    let r = tokio::task::spawn_blocking(move || h1(port, "/slow/data", "TE: trailers\r\n"))
        .await
        .expect("h1");
    // The chunks' bytes: 40000 `x` between the head and the last chunk.
    let chunks = r.split("\r\n\r\n").nth(1).unwrap_or("");
    let chunks = chunks.split("\r\n0\r\n").next().unwrap_or("");
    assert_eq!(
        chunks.matches('x').count(),
        40000,
        "{}",
        &r[..r.len().min(300)]
    );
    let t = h1_trailers(&r);
    slow(field(&t, "x-time").expect("x-time"));
    assert_eq!(field(&t, "x-body"), Some("40000"), "{t}");
    let bytes: u64 = field(&t, "x-bytes").expect("x-bytes").parse().expect("n");
    assert!(
        bytes > 40000,
        "$bytes_sent counts the head on HTTP/1.1: {bytes}"
    );
    let head = r
        .split("\r\n\r\n")
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    assert!(head.contains("trailer: x-time, x-body, x-bytes"), "{head}");

    // Proxied: the upstream's time runs until its body is read.
    let r = tokio::task::spawn_blocking(move || h1(port, "/up/data", "TE: trailers\r\n"))
        .await
        .expect("h1");
    let t = h1_trailers(&r);
    slow(field(&t, "x-urt").expect("x-urt"));
    assert_eq!(field(&t, "x-body"), Some("40000"), "{t}");

    // HTTP/2.
    let (mut send, conn) = h2_tls_client(ports[0], None).await;
    let req = http::Request::get(format!("https://localhost:{}/slow/data", ports[0]))
        .body(())
        .expect("request");
    let (resp, _) = send.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    assert!(resp.headers().get("x-time").is_none());
    let mut body = resp.into_body();
    let mut n = 0;
    while let Some(c) = body.data().await {
        let c = c.expect("data");
        let _ = body.flow_control().release_capacity(c.len());
        n += c.len();
    }
    assert_eq!(n, 40000);
    let t = body.trailers().await.expect("trailers").expect("some");
    slow(t["x-time"].to_str().expect("ascii"));
    assert_eq!(t["x-body"], "40000");
    drop(send);
    conn.abort();

    // HTTP/3.
    let (body, t) = h3_get(ports[0], "/slow/data").await;
    assert_eq!(body.len(), 40000);
    slow(t["x-time"].to_str().expect("ascii"));
    assert_eq!(t["x-body"], "40000");
    drop(server);
}
