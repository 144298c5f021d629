//! HTTP/3: `listen ... quic` serves the same server blocks as TCP (SNI, static files,
//! `return`, variables), TCP responses advertise it with `Alt-Svc`, and a reload keeps the
//! UDP socket serving. The client is quinn + h3 (aws-lc-rs), trusting the tests' CA.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustls_pki_types::pem::PemObject;
use support::{certs, curl_i, header, Server};

/// A QUIC client endpoint that trusts the tests' CA and speaks h3.
fn client() -> quinn::Endpoint {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(certs().ca()).expect("read CA");
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.expect("CA parses")).expect("CA added");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

/// One HTTP/3 connection to `port` for `sni`.
struct H3 {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    _driver: tokio::task::JoinHandle<()>,
}

async fn connect(ep: &quinn::Endpoint, port: u16, sni: &str) -> Result<H3, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let conn = ep
        .connect(addr, sni)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok(H3 {
        send,
        _driver: driver,
    })
}

impl H3 {
    /// GET `path` for `host`: status, headers, body.
    async fn get(
        &mut self,
        host: &str,
        path: &str,
    ) -> Result<(u16, http::HeaderMap, Vec<u8>), String> {
        let req = http::Request::get(format!("https://{host}{path}"))
            .body(())
            .unwrap();
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        stream.finish().await.map_err(|e| e.to_string())?;
        let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            while chunk.has_remaining() {
                let c = chunk.chunk();
                body.extend_from_slice(c);
                let n = c.len();
                chunk.advance(n);
            }
        }
        Ok((resp.status().as_u16(), resp.headers().clone(), body))
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

const CONF: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log {dir}/access.log;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
        location /who { return 200 "a $server_protocol h3=$http3 sni=$ssl_server_name\n"; }
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name b.test;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        location / { return 200 "b $http3\n"; }
    }
}
"#;

#[test]
fn http3_serves_the_server_blocks_by_sni() {
    let (server, ports) = Server::start("h3-sni", CONF, 1);
    let port = ports[0];
    rt().block_on(async {
        let ep = client();
        // The certificate is verified for the name asked: b.test's would not do for a.test.
        let mut a = connect(&ep, port, "a.test").await.expect("h3 to a.test");
        let (status, _, body) = a.get("a.test", "/index.html").await.expect("GET");
        assert_eq!(status, 200);
        assert_eq!(body, b"<h1>hello from firstbyte</h1>\n");
        let (status, headers, body) = a.get("a.test", "/who").await.expect("GET /who");
        assert_eq!(status, 200);
        assert_eq!(
            String::from_utf8_lossy(&body),
            "a HTTP/3.0 h3=h3 sni=a.test\n"
        );
        assert!(
            headers.get("alt-svc").is_none(),
            "no Alt-Svc over HTTP/3 itself"
        );
        let (status, _, _) = a.get("a.test", "/missing").await.expect("GET 404");
        assert_eq!(status, 404);
        let mut b = connect(&ep, port, "b.test").await.expect("h3 to b.test");
        let (_, _, body) = b.get("b.test", "/").await.expect("GET b");
        assert_eq!(String::from_utf8_lossy(&body), "b h3\n");
    });
    let log = std::fs::read_to_string(server.dir.join("access.log")).expect("access log");
    assert!(
        log.contains("\"GET /index.html HTTP/3.0\" 200 30"),
        "access log: {log}"
    );
}

#[test]
fn tcp_responses_advertise_http3() {
    let (_server, ports) = Server::start("h3-altsvc", CONF, 1);
    let url = format!("https://a.test:{}/who", ports[0]);
    let resolve = format!("a.test:{}:127.0.0.1", ports[0]);
    let ca = certs().ca().display().to_string();
    let (status, headers, body) = curl_i(&["--cacert", &ca, "--resolve", &resolve, &url]);
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, "alt-svc"),
        Some(format!("h3=\":{}\"; ma=86400", ports[0]).as_str())
    );
    assert_eq!(
        String::from_utf8_lossy(&body),
        "a HTTP/1.1 h3= sni=a.test\n"
    );
}

#[test]
fn a_reload_keeps_serving_http3_with_the_new_configuration() {
    let (server, ports) = Server::start("h3-reload", CONF, 1);
    let port = ports[0];
    rt().block_on(async {
        let ep = client();
        let mut a = connect(&ep, port, "a.test").await.expect("h3");
        let (_, _, body) = a.get("a.test", "/who").await.expect("before");
        assert!(body.starts_with(b"a HTTP/3.0"));
        // A download in flight across the reload: it finishes, byte for byte.
        let big: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
        std::fs::write(server.dir.join("html/big.bin"), &big).unwrap();
        let req = http::Request::get("https://a.test/big.bin")
            .body(())
            .unwrap();
        let mut stream = a.send.send_request(req).await.expect("send");
        stream.finish().await.expect("finish");
        let resp = stream.recv_response().await.expect("response head");
        assert_eq!(resp.status(), 200);
        let mut got = Vec::new();
        let first = stream
            .recv_data()
            .await
            .expect("data")
            .expect("a first chunk");
        got.extend_from_slice(first.chunk());
        let conf = std::fs::read_to_string(&server.conf).unwrap();
        std::fs::write(
            &server.conf,
            conf.replace("\"a $server_protocol", "\"A2 $server_protocol"),
        )
        .unwrap();
        server.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.stderr_text().contains("reconfiguration done")
            && !std::fs::read_to_string(server.dir.join("error.log"))
                .unwrap_or_default()
                .contains("reconfiguration done")
        {
            assert!(
                Instant::now() < deadline,
                "no reload: {}",
                server.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        while let Some(mut chunk) = stream.recv_data().await.expect("data after the reload") {
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                got.extend_from_slice(chunk.chunk());
                chunk.advance(n);
            }
        }
        assert!(
            got == big,
            "the download across the reload is whole ({} bytes)",
            got.len()
        );
        // New connections reach the new configuration on the same UDP socket.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = connect(&ep, port, "a.test").await.expect("h3 after reload");
            let (status, _, body) = c.get("a.test", "/who").await.expect("after");
            assert_eq!(status, 200);
            if body.starts_with(b"A2 HTTP/3.0") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "reload not seen: {}",
                server.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn quic_listeners_refuse_what_they_cannot_serve() {
    let dir = support::tempdir("h3-conf");
    let conf = |extra: &str, listen: &str| {
        support::render(
            &format!(
                "events {{}}\nhttp {{ server {{ listen 127.0.0.1:8443 {listen}; \
                 ssl_certificate {{certs}}/a.test.crt; ssl_certificate_key {{certs}}/a.test.key; {extra} }} }}\n"
            ),
            &dir,
            &[],
        )
    };
    let check = |text: String| {
        let path = dir.join("t.conf");
        std::fs::write(&path, text).unwrap();
        let out = support::firstbyte(&["-t", "-c", path.to_str().unwrap()]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = check(conf("", "quic"));
    assert!(ok, "{err}");
    let (ok, err) = check(conf("", "quic ssl"));
    assert!(
        !ok && err.contains("\"ssl\" parameter is incompatible with \"quic\""),
        "{err}"
    );
    let (ok, err) = check(conf(
        &format!(
            "ssl_verify_client on; ssl_client_certificate {};",
            certs().ca().display()
        ),
        "quic",
    ));
    assert!(
        !ok && err.contains("\"ssl_verify_client\" is not supported with \"listen ... quic\""),
        "{err}"
    );
    let (ok, err) = check(conf("ssl_protocols TLSv1.2;", "quic"));
    assert!(!ok && err.contains("needs TLSv1.3"), "{err}");
    // 0-RTT needs single-use tickets: a session cache, and no shared ticket keys.
    let (ok, err) = check(conf("ssl_early_data on;", "quic"));
    assert!(
        !ok && err.contains("\"ssl_early_data\" needs \"ssl_session_cache\""),
        "{err}"
    );
    let key = dir.join("ticket.key");
    std::fs::write(&key, [7u8; 80]).unwrap();
    let (ok, err) = check(conf(
        &format!(
            "ssl_early_data on; ssl_session_cache shared:x:1m; ssl_session_ticket_key {};",
            key.display()
        ),
        "quic",
    ));
    assert!(
        !ok && err.contains("cannot be combined with \"ssl_session_ticket_key\""),
        "{err}"
    );
    let (ok, err) = check(conf(
        "ssl_early_data on; ssl_session_cache shared:x:1m;",
        "quic",
    ));
    assert!(ok, "{err}");
}

#[test]
fn quit_closes_idle_http3_connections() {
    let (mut server, ports) = Server::start("h3-quit", CONF, 1);
    rt().block_on(async {
        let ep = client();
        let mut a = connect(&ep, ports[0], "a.test").await.expect("h3");
        a.get("a.test", "/who").await.expect("GET");
        server.signal(libc::SIGQUIT);
        // The idle connection hears GOAWAY and closes: the drain does not wait for the QUIC
        // idle timeout (keepalive_timeout, 75 s). Generous bound for a loaded machine.
        let started = Instant::now();
        while server.wait_exit(Duration::from_millis(50)).is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "still running after -s quit: {}",
                server.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(a);
    });
}

/// The Python venv with aioquic that `scripts/test` makes (`target/tools/aioquic`).
fn aioquic_python() -> std::path::PathBuf {
    let p =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/aioquic/bin/python");
    assert!(
        p.exists(),
        "{} is missing: bash scripts/test installs aioquic there",
        p.display()
    );
    p
}

/// A client nobody here wrote: aioquic fetches a static file and a proxied response over one
/// HTTP/3 connection, then resumes the TLS session on a second connection.
#[test]
fn aioquic_fetches_static_and_proxied_responses() {
    use std::io::{BufReader, Write};
    let (up, _) = support::upstream(|s| {
        let mut r = BufReader::new(s.try_clone().unwrap());
        while let Some(head) = support::read_head(&mut r) {
            let body = format!("upstream saw: {}", head.lines().next().unwrap_or(""));
            let mut w = &s;
            let _ = write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Up: 1\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let conf = CONF.replace(
        "location /who {",
        &format!(
            "location /api/ {{ proxy_pass http://127.0.0.1:{up}; }}\n        location /who {{"
        ),
    );
    let (server, ports) = Server::start("h3-aioquic", &conf, 1);
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(server.dir.join("html/big.bin"), &big).unwrap();
    let sha = |b: &[u8]| {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b);
        d.as_ref()
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    let base = format!("https://a.test:{}", ports[0]);
    let session = server.dir.join("session.bin");
    let out = aioquic(
        &server,
        ports[0],
        &session,
        &[],
        &[format!("{base}/big.bin"), format!("{base}/api/x?y=1")],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("200 {} {} alt-svc=", big.len(), sha(&big)),
        "{out}"
    );
    // proxy_http_version 1.0, nginx's default.
    let proxied = b"upstream saw: GET /api/x?y=1 HTTP/1.0";
    assert_eq!(
        lines[1],
        format!("200 {} {} alt-svc=", proxied.len(), sha(proxied)),
        "{out}"
    );
    assert!(session.exists(), "no session ticket saved: {out}");
    // A second connection with the saved ticket: resumed (no 0-RTT without ssl_early_data).
    let out = aioquic(&server, ports[0], &session, &[], &[format!("{base}/who")]);
    let who = b"a HTTP/3.0 h3=h3 sni=a.test\n";
    assert_eq!(
        out.lines().next().unwrap(),
        format!("200 {} {} alt-svc=", who.len(), sha(who)),
        "{out}"
    );
    assert!(out.contains("early_data=no"), "{out}");
}

/// Runs `scripts/h3-get.py` (aioquic) against 127.0.0.1:`port` as a.test with `session`.
fn aioquic(
    server: &Server,
    port: u16,
    session: &std::path::Path,
    extra: &[&str],
    urls: &[String],
) -> String {
    let out = std::process::Command::new(aioquic_python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/h3-get.py"))
        .args(["--ca", certs().ca().to_str().unwrap()])
        .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
        .args(["--session-file", session.to_str().unwrap()])
        .args(extra)
        .args(urls)
        .output()
        .expect("run aioquic");
    assert!(
        out.status.success(),
        "aioquic failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.stderr_text()
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `ssl_early_data on`: a resumed client's GET is answered from 0-RTT data (`$ssl_early_data`
/// is 1), a POST in early data gets 425, and a ticket works once: replayed, it resumes
/// nothing and carries no early data.
#[test]
fn zero_rtt_serves_safe_requests_once_per_ticket() {
    let conf = CONF
        .replace(
            "    access_log {dir}/access.log;",
            "    log_format early '$request $status early=$ssl_early_data';\n    access_log {dir}/access.log early;\n    ssl_session_cache shared:h3:1m;\n    ssl_early_data on;",
        );
    let (server, ports) = Server::start("h3-0rtt", &conf, 1);
    let port = ports[0];
    let session = server.dir.join("session.bin");
    let who = vec![format!("https://a.test:{port}/who")];
    // A full handshake: no early data, a ticket saved.
    let out = aioquic(&server, port, &session, &[], &who);
    assert!(
        out.starts_with("200 ") && out.contains("early_data=no"),
        "{out}"
    );
    // Resumed with 0-RTT: the GET rides in early data and is answered.
    let kept = server.dir.join("session-kept.bin");
    std::fs::copy(&session, &kept).unwrap();
    let out = aioquic(&server, port, &session, &[], &who);
    assert!(
        out.starts_with("200 ") && out.contains("early_data=yes"),
        "{out}"
    );
    // The same ticket again (a replay of the resumption): single-use, so no 0-RTT.
    let out = aioquic(&server, port, &kept, &[], &who);
    assert!(
        out.starts_with("200 ") && out.contains("early_data=no"),
        "{out}"
    );
    // A POST in early data: 425 Too Early.
    let out = aioquic(&server, port, &session, &["--post"], &who);
    assert!(out.contains("early_data=yes"), "{out}");
    assert!(out.starts_with("425 "), "{out}");
    let log = std::fs::read_to_string(server.dir.join("access.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines,
        [
            "GET /who HTTP/3.0 200 early=",
            "GET /who HTTP/3.0 200 early=1",
            "GET /who HTTP/3.0 200 early=",
            "POST /who HTTP/3.0 425 early=1",
        ],
        "{log}"
    );
}

/// A file rewritten in place (same inode, same second) is served new on the next request of
/// the same HTTP/3 connection, as over TCP (`tests/open_file_cache.rs`): the open-file check
/// is skipped only for requests that arrived before the last one was made.
#[test]
fn a_file_rewritten_in_place_is_served_new_over_http3() {
    use std::io::Write;
    let (server, ports) = Server::start("h3-rewrite", CONF, 1);
    let port = ports[0];
    let f = server.dir.join("html/f.txt");
    let rewrite = |data: &[u8]| {
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&f)
            .unwrap();
        w.write_all(data).unwrap();
    };
    std::fs::write(&f, "one").unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&f).unwrap());
    rt().block_on(async {
        let ep = client();
        let mut a = connect(&ep, port, "a.test").await.expect("h3 to a.test");
        let (status, h1, body) = a.get("a.test", "/f.txt").await.expect("GET 1");
        assert_eq!((status, body.as_slice()), (200, &b"one"[..]));
        // Many requests on one connection, each after a rewrite: each sees the new file.
        // (Lengths other than the first's: within one second the ETag, mtime-size as
        // nginx's, changes only with the size.)
        for (i, text) in ["second version", "third!", "the fourth one"]
            .iter()
            .enumerate()
        {
            rewrite(text.as_bytes());
            let (status, h, body) = a.get("a.test", "/f.txt").await.expect("GET");
            assert_eq!(status, 200, "rewrite {i}");
            assert_eq!(body, text.as_bytes(), "rewrite {i}");
            assert_eq!(
                header_value(&h, "content-length"),
                Some(text.len().to_string()),
                "rewrite {i}"
            );
            assert_ne!(h.get("etag"), h1.get("etag"), "rewrite {i}");
        }
        // Requests in flight together, all after the last rewrite: all see it.
        rewrite(b"last");
        let mut gets = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let mut s = a.send.clone();
            gets.spawn(async move {
                let req = http::Request::get("https://a.test/f.txt").body(()).unwrap();
                let mut st = s.send_request(req).await.expect("send");
                st.finish().await.expect("finish");
                let resp = st.recv_response().await.expect("response");
                let mut body = Vec::new();
                while let Some(mut c) = st.recv_data().await.expect("data") {
                    while c.has_remaining() {
                        let n = c.chunk().len();
                        body.extend_from_slice(c.chunk());
                        c.advance(n);
                    }
                }
                (resp.status().as_u16(), body)
            });
        }
        let mut n = 0;
        while let Some(r) = gets.join_next().await {
            let (status, body) = r.expect("request task");
            assert_eq!((status, body.as_slice()), (200, &b"last"[..]));
            n += 1;
        }
        assert_eq!(n, 8);
    });
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&f).unwrap()),
        ino,
        "rewritten in place throughout"
    );
}

fn header_value(h: &http::HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
