//! A Rust client (rustls + hyper) against the real binary: certificate verification against
//! the test CA, ALPN, HTTP/2 and HTTP/1.1 requests, several requests on one connection, and
//! TLS 1.3 resumption with the client's own session cache.

mod support;

use std::sync::Arc;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        location /info { connection_info; }
    }
}
"#;

async fn connect(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tokio_rustls::TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// An HTTP/2 client on `tls`, its connection driven by a task of its own.
async fn h2_sender(
    tls: tokio_rustls::client::TlsStream<TcpStream>,
) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}

#[tokio::test]
async fn http2_and_http11_with_a_rust_client() {
    let (_server, ports) = Server::start("rust-client", CONF, 1);
    let port = ports[0];

    // HTTP/2: three requests on one connection.
    let cfg = rust_client_config(&[b"h2", b"http/1.1"]);
    let tls = connect(port, cfg.clone()).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut send = h2_sender(tls).await;
    for _ in 0..3 {
        let req = http::Request::get("https://localhost/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["server"], "firstbyte");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"<h1>hello from firstbyte</h1>\n");
    }

    // HTTP/1.1 by ALPN.
    let tls = connect(port, rust_client_config(&[b"http/1.1"])).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/info?format=json")
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["alpn"], "http/1.1");
    assert_eq!(v["tls_version"], "TLSv1.3");

    // Resumption: the second connection with the same client config resumes.
    let cfg = rust_client_config(&[b"http/1.1"]);
    for expect_resumed in [false, true] {
        let tls = connect(port, cfg.clone()).await;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = http::Request::get("/info?format=json")
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["resumed"], expect_resumed, "{v}");
    }
}

/// The server's CPU time (user + system) in clock ticks, from `/proc/PID/stat`.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// An idle HTTP/2 connection costs no CPU. (hyper flushes on every poll of an HTTP/2
/// connection; a flush that re-woke the task kept one idle connection on a whole core.) The
/// bound: under 20% of one core over 2 s, against ~100% when the bug is there.
#[tokio::test]
async fn idle_http2_connection_costs_no_cpu() {
    let (server, ports) = Server::start("rust-client-idle", CONF, 1);
    let tls = connect(ports[0], rust_client_config(&[b"h2"])).await;
    let mut send = h2_sender(tls).await;
    let req = http::Request::get("https://localhost/")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let pid = server.child.id();
    let ticks_per_s = 100; // USER_HZ on Linux
    let before = cpu_ticks(pid);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 2 * ticks_per_s / 5,
        "the server used {used} ticks of CPU in 2 s with one idle HTTP/2 connection"
    );
    drop(send);
}
