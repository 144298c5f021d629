//! `early_hints`: an upstream's `103 Early Hints` goes on to the client as soon as it comes,
//! before the final response (nginx 1.29), over HTTP/1.1, HTTP/2 and HTTP/3, its fields
//! filtered as the header's; none when the condition is false. The upstream holds its final
//! response back until the client has the 103, so a 103 sent only with the final response
//! would never arrive.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;

/// An upstream that answers each request with a 103, then its final response once `go`
/// says so (or 30 seconds passed: the clients give up on the 103 after 10).
fn hinting_upstream() -> (u16, mpsc::Sender<()>) {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Arc::new(Mutex::new(wait));
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if read_head(&mut r).is_none() {
            return;
        }
        let _ = w.write_all(
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\
              X-Secret: s\r\nConnection: keep-alive\r\n\r\n",
        );
        let _ = wait
            .lock()
            .expect("lock")
            .recv_timeout(Duration::from_secs(30));
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nSEE-THIS",
        );
    });
    (port, go)
}

const CONF: &str = r#"
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
        early_hints $arg_hints;
        proxy_hide_header X-Secret;
        location / {
            proxy_pass http://127.0.0.1:{up};
        }
    }
}
"#;

/// A 103's fields must be the upstream's that pass: `Link`, not the hidden or hop-by-hop ones.
fn check_hint(fields: &str) {
    let f = fields.to_ascii_lowercase();
    assert!(
        f.contains("link: </style.css>; rel=preload; as=style"),
        "{fields}"
    );
    assert!(!f.contains("x-secret"), "{fields}");
    assert!(!f.contains("connection"), "{fields}");
}

async fn h3_connect(
    port: u16,
) -> (
    h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    quinn::Endpoint,
    tokio::task::JoinHandle<()>,
) {
    let tls = (*rust_client_config(&[b"h3"])).clone();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).expect("endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    let conn = ep
        .connect(([127, 0, 0, 1], port).into(), "localhost")
        .expect("connect")
        .await
        .expect("QUIC handshake");
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .expect("h3");
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    (send, ep, drive)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_early_hints_go_before_the_response() {
    let (up, go) = hinting_upstream();
    let conf = CONF.replace("{up}", &up.to_string());
    let (server, ports) = Server::start("early-hints", &conf, 2);
    let plain = ports[1];

    // HTTP/1.1: the 103, whole, while the upstream still holds its answer.
    let go1 = go.clone();
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(("127.0.0.1", plain)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.write_all(b"GET /?hints=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .expect("write");
        let mut r = BufReader::new(s);
        let mut hint = String::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("no 103 before the response: {hint}");
            }
            hint.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        assert!(hint.starts_with("HTTP/1.1 103 Early Hints\r\n"), "{hint}");
        check_hint(&hint);
        go1.send(()).expect("go");
        let mut rest = String::new();
        let _ = r.read_to_string(&mut rest);
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
        assert!(rest.ends_with("\r\n\r\nSEE-THIS"), "{rest}");
    })
    .await
    .expect("HTTP/1.1");

    // The condition false (empty): no 103.
    let go1 = go.clone();
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(("127.0.0.1", plain)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.write_all(b"GET /?hints=0 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .expect("write");
        go1.send(()).expect("go");
        let mut all = String::new();
        let _ = s.read_to_string(&mut all);
        assert!(all.starts_with("HTTP/1.1 200 OK\r\n"), "{all}");
    })
    .await
    .expect("HTTP/1.1 off");

    // HTTP/2 (nghttp, prior knowledge): a HEADERS frame with :status 103 first.
    let go1 = go.clone();
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new("nghttp")
            .args([
                "-v",
                "--timeout=10",
                &format!("http://127.0.0.1:{plain}/?hints=1"),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("nghttp (nghttp2-client)");
        let out = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(out).lines();
        let mut seen = String::new();
        let mut hint = String::new();
        while let Some(Ok(l)) = lines.next() {
            seen.push_str(&l);
            seen.push('\n');
            if l.contains(":status: 103") {
                hint = l.clone();
            } else if !hint.is_empty() && l.contains("link: ") {
                hint.push_str(&l);
                break;
            }
        }
        assert!(!hint.is_empty(), "no 103: {seen}");
        check_hint(&hint);
        go1.send(()).expect("go");
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let _ = child.wait();
        assert!(rest.iter().any(|l| l.contains(":status: 200")), "{rest:?}");
    })
    .await
    .expect("HTTP/2");

    // HTTP/3: a 103 response, then the final one.
    let (mut send, ep, drive) = h3_connect(ports[0]).await;
    let req = http::Request::get("https://localhost/?hints=1")
        .body(())
        .expect("request");
    let mut stream = send.send_request(req).await.expect("send");
    stream.finish().await.expect("finish");
    let hint = tokio::time::timeout(Duration::from_secs(10), stream.recv_response())
        .await
        .expect("the 103 before the response")
        .expect("103");
    assert_eq!(hint.status(), 103);
    check_hint(&format!("{:?}", hint.headers()).replace("\": \"", ": "));
    go.send(()).expect("go");
    let resp = stream.recv_response().await.expect("response");
    assert_eq!(resp.status(), 200);
    drop(send);
    drive.abort();
    ep.close(0u32.into(), b"");
    drop(server);
}

/// An upstream that floods 103s: only `proxy_buffer_size` bytes of them go on (nginx's
/// bound), the rest is dropped; the final response follows whole.
#[test]
fn early_hints_past_proxy_buffer_size_are_dropped() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        if read_head(&mut r).is_none() {
            return;
        }
        let link = format!("Link: </{}.css>; rel=preload\r\n", "a".repeat(90));
        let hint = format!("HTTP/1.1 103 Early Hints\r\n{link}\r\n");
        let _ = w.write_all(hint.repeat(100).as_bytes());
        let _ = w.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nSEE-THIS",
        );
    });
    let conf = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        early_hints 1;
        proxy_buffer_size 1k;
        location / { proxy_pass http://127.0.0.1:{up}; }
    }
}
"#
    .replace("{up}", &up.to_string());
    let (server, ports) = Server::start("early-hints-flood", &conf, 1);
    let mut s = TcpStream::connect(("127.0.0.1", ports[0])).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut all = String::new();
    let _ = s.read_to_string(&mut all);
    let hints = all.matches("HTTP/1.1 103 Early Hints\r\n").count();
    // 1 KiB holds seven of these 136-byte heads, not a hundred.
    assert!((1..=8).contains(&hints), "{hints} hints: {all}");
    assert!(all.contains("\r\nHTTP/1.1 200 OK\r\n"), "{all}");
    assert!(all.ends_with("\r\n\r\nSEE-THIS"), "{all}");
    let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("upstream sent too big early hints"), "{log}");
}
