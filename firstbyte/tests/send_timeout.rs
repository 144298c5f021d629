//! `send_timeout` holds on HTTP/2 when the client starves streams through flow control: a
//! client that opens streams for a large file with a zero window and never sends
//! WINDOW_UPDATE gets them reset after `send_timeout`, and the server lets go of them (the
//! responses are not pinned: stub_status counts them gone).

mod support;

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        send_timeout 2s;
        keepalive_timeout 120s;
        root {dir}/html;
        location = /status { stub_status; }
    }
}
"#;

/// An HTTP/2 connection whose streams start with `window` bytes of flow-control credit.
async fn h2(port: u16, window: u32) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(rust_client_config(&[b"h2"]))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(window)
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

fn get(path: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::builder()
        .uri(format!("https://localhost{path}"))
        .body(Empty::new())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_window_streams_are_reset_after_send_timeout() {
    let (server, ports) = Server::start("h2-send-timeout", CONF, 1);
    std::fs::write(server.dir.join("html/big.bin"), vec![b'x'; 4 << 20]).unwrap();
    let port = ports[0];

    let mut starved = h2(port, 0).await;
    let mut bodies = Vec::new();
    for _ in 0..10 {
        starved.ready().await.unwrap();
        let resp = starved.send_request(get("/big.bin")).await.unwrap();
        assert_eq!(resp.status(), 200, "headers need no window");
        bodies.push(resp.into_body());
    }
    let start = Instant::now();
    for mut b in bodies {
        let frame = tokio::time::timeout(Duration::from_secs(20), b.frame())
            .await
            .expect("the stream was not reset within 20 s");
        assert!(
            !matches!(frame, Some(Ok(_))),
            "no data can arrive through a zero window: {frame:?}"
        );
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "reset before send_timeout: {took:?}"
    );

    // The server holds none of them: only the status request itself is writing.
    let mut other = h2(port, 65_535).await;
    let resp = other.send_request(get("/status")).await.unwrap();
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("Writing: 1 "), "{text}");
    assert!(
        server
            .stderr_text()
            .contains("while sending response to client")
            || std::fs::read_to_string(server.dir.join("error.log"))
                .unwrap_or_default()
                .contains("while sending response to client"),
        "the reset is logged"
    );
}
