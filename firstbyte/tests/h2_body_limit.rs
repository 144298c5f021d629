//! A request body over `client_max_body_size` on HTTP/2 and HTTP/3 is answered 413 (through
//! `error_page 413`, as on HTTP/1.1), whether its length is declared (answered at once) or
//! not (answered once the limit is passed), and the client's upload is then stopped cleanly:
//! RST_STREAM(NO_ERROR) after the whole response (RFC 9113 §8.1), in a write of its own. With
//! them in one TLS record, curl (7.88) saw its upload's stream closed before the response and
//! failed with "Stream error in the HTTP/2 framing layer". A body that the window holds is
//! read on after the response instead of reset, and the stream closes when it ends.

mod support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use support::*;

/// Bytes sent: three times the default 1 MiB limit.
const BIG: usize = 3_000_000;

/// `/ret` does not read bodies, `/p` passes them to an upstream (the second server);
/// both have the default 1 MiB limit; the error page's location takes any body.
const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        error_page 413 /too-large.html;
        location = /too-large.html { client_max_body_size 0; }
        location /ret { return 200 "ok\n"; }
        location /p { proxy_pass http://127.0.0.1:{port1}; }
    }
    server {
        listen 127.0.0.1:{port1};
        location / { return 200 "upstream\n"; }
    }
}
"#;

const PAGE: &str = "the body is too large\n";

fn start() -> (Server, Vec<u16>, std::path::PathBuf) {
    let (s, ports) = Server::start("h2-body-limit", CONF, 2);
    std::fs::write(s.dir.join("html/too-large.html"), PAGE).expect("page");
    let big = s.dir.join("big");
    std::fs::write(&big, vec![b'x'; BIG]).expect("big");
    (s, ports, big)
}

/// curl `--http2 -XPOST` of the file `big` to `url`: declared (`--data-binary @big`, with its
/// content-length) or streamed from stdin (`-T -`: no content-length). (exit code, status,
/// body, stderr).
fn post(version: &str, url: &str, big: &std::path::Path, declared: bool) -> (i32, String, String) {
    let mut c = Command::new("curl");
    c.args([
        "-sk",
        "--max-time",
        "20",
        version,
        "-XPOST",
        "-w",
        "\n%{http_code}",
    ]);
    if declared {
        c.arg("--data-binary").arg(format!("@{}", big.display()));
        c.stdin(Stdio::null());
    } else {
        c.args(["-T", "-"]);
        c.stdin(std::fs::File::open(big).expect("open big"));
    }
    let out = c.arg(url).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        format!("{code} {body}"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_body_over_the_limit_is_413_over_http2_as_over_http11() {
    let (s, ports, big) = start();
    let base = format!("https://localhost:{}", ports[0]);
    let want = format!("413 {PAGE}");
    // Twice each: the answer does not depend on how far the upload got.
    for _ in 0..2 {
        for version in ["--http1.1", "--http2"] {
            for path in ["/ret", "/p"] {
                let (code, got, err) = post(version, &format!("{base}{path}"), &big, true);
                assert_eq!(
                    (code, got.as_str()),
                    (0, want.as_str()),
                    "{version} {path} declared: {err}"
                );
            }
            let (code, got, err) = post(version, &format!("{base}/p"), &big, false);
            assert_eq!(
                (code, got.as_str()),
                (0, want.as_str()),
                "{version} /p streamed: {err}"
            );
        }
    }
    let log = std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("client intended to send too large body"),
        "{log}"
    );
}

/// nghttp's frames: the 413's HEADERS and DATA (END_STREAM), then RST_STREAM(NO_ERROR); a body
/// that fits the window is read after the response, and its stream ends without a reset.
#[test]
fn the_upload_is_stopped_after_the_response_or_read_when_it_fits() {
    if Command::new("nghttp").arg("--version").output().is_err() {
        eprintln!("nghttp is not installed: skipped");
        return;
    }
    let (s, ports, big) = start();
    let small = s.dir.join("small");
    std::fs::write(&small, vec![b'y'; 100_000]).expect("small");
    let frames = |file: &std::path::Path| {
        let out = Command::new("nghttp")
            .args(["-v", "--timeout=10", "-d"])
            .arg(file)
            .arg(format!("https://localhost:{}/ret", ports[0]))
            .output()
            .expect("nghttp");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let recv: Vec<String> = text
            .lines()
            .filter(|l| l.contains("] recv ") && l.contains("stream_id=13"))
            .map(|l| l.split("] recv ").nth(1).unwrap_or("").to_string())
            .collect();
        (recv, text)
    };
    let (recv, text) = frames(&big);
    let kinds: Vec<&str> = recv
        .iter()
        .filter(|l| l.contains(" frame "))
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["HEADERS", "DATA", "RST_STREAM"], "{text}");
    assert!(recv.iter().any(|l| l.contains(":status: 413")), "{text}");
    let rst = text.split("recv RST_STREAM").nth(1).unwrap_or("");
    assert!(rst.contains("error_code=NO_ERROR"), "{text}");

    let (recv, text) = frames(&small);
    assert!(recv.iter().any(|l| l.contains(":status: 200")), "{text}");
    assert!(!text.contains("recv RST_STREAM"), "{text}");
    assert!(
        text.contains("recv DATA frame <length=3, flags=0x01"),
        "{text}"
    );
}

/// HTTP/3: the same 413 and error page, declared or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_over_http3() {
    let (_s, ports, _) = tokio::task::spawn_blocking(start).await.expect("start");
    let tls = (*rust_client_config(&[b"h3"])).clone();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).expect("endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    for (path, declared) in [("/ret", true), ("/p", true), ("/p", false)] {
        let conn = ep
            .connect(([127, 0, 0, 1], ports[0]).into(), "localhost")
            .expect("connect")
            .await
            .expect("QUIC handshake");
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
            .await
            .expect("h3");
        let drive = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let mut req = http::Request::post(format!("https://localhost{path}"));
        if declared {
            req = req.header("content-length", BIG.to_string());
        }
        let stream = send
            .send_request(req.body(()).expect("request"))
            .await
            .expect("send");
        // The upload runs beside the response: it may be stopped (STOP_SENDING) midway.
        let (mut up, mut down) = stream.split();
        let upload = tokio::spawn(async move {
            let piece = bytes::Bytes::from(vec![b'x'; 100_000]);
            for _ in 0..BIG / 100_000 {
                if up.send_data(piece.clone()).await.is_err() {
                    return;
                }
            }
            let _ = up.finish().await;
        });
        let resp = tokio::time::timeout(Duration::from_secs(20), down.recv_response())
            .await
            .expect("a response in time")
            .expect("response");
        assert_eq!(resp.status(), 413, "{path} declared: {declared}");
        let mut body = Vec::new();
        while let Some(mut chunk) = tokio::time::timeout(Duration::from_secs(20), down.recv_data())
            .await
            .expect("body in time")
            .expect("body")
        {
            use bytes::Buf;
            while chunk.has_remaining() {
                let c = chunk.chunk();
                body.extend_from_slice(c);
                let n = c.len();
                chunk.advance(n);
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&body),
            PAGE,
            "{path} declared: {declared}"
        );
        upload.abort();
        drop(send);
        drive.abort();
    }
    ep.close(0u32.into(), b"");
}
