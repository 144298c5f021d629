//! Reverse proxy end to end: streaming, upstream down, WebSocket, keepalive reuse, upstream
//! TLS with a client certificate, and the SSL object cache across reloads.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

fn front_conf(dir: &std::path::Path, port: u16, location: &str, extra: &str) -> String {
    format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {extra}\n server {{ listen 127.0.0.1:{port};\n location / {{ {location} }}\n }}\n}}\n",
        d = dir.display()
    )
}

fn request(port: u16, head: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(head.as_bytes()).expect("write");
    s
}

fn read_all(mut s: TcpStream) -> String {
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[test]
fn slow_upstream_first_chunk_arrives_before_upstream_ends() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let mut w = s;
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n");
        let _ = w.flush();
        std::thread::sleep(Duration::from_millis(1500));
        let _ = w.write_all(b"5\r\nlast\n\r\n0\r\n\r\n");
    });
    let dir = tempdir("proxy-stream");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up};"),
        "",
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let start = Instant::now();
    let mut s = request(
        port,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut first_at = None;
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if first_at.is_none() && String::from_utf8_lossy(&got).contains("first") {
            first_at = Some(start.elapsed());
        }
    }
    let total = start.elapsed();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("last"), "{text}");
    let first = first_at.expect("first chunk seen");
    assert!(
        first < Duration::from_millis(1000),
        "first chunk after {first:?}"
    );
    assert!(
        total >= Duration::from_millis(1400),
        "whole body after {total:?}"
    );
    assert!(text.contains("Server: firstbyte"), "{text}");
}

#[test]
fn upstream_down_is_502_quickly_with_nginx_reason() {
    let dead = free_port();
    let dir = tempdir("proxy-down");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{dead}; proxy_connect_timeout 2s;"),
        "",
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let start = Instant::now();
    let text = read_all(request(
        port,
        "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(text.starts_with("HTTP/1.1 502"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(100));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("connect() failed (111: Connection refused) while connecting to upstream"),
        "{log}"
    );
    assert!(
        log.contains(&format!("upstream: \"http://127.0.0.1:{dead}/x\"")),
        "{log}"
    );
}

#[test]
fn websocket_echo_through_the_proxy() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let mut w = s;
        if !head.to_ascii_lowercase().contains("upgrade: websocket") {
            let _ = w.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        let _ = w.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        );
        let mut buf = [0u8; 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 || w.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    let dir = tempdir("proxy-ws");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\";"
        ),
        "",
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let mut s = request(
        port,
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    );
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let head = read_head(&mut r).expect("101 head");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    s.write_all(b"ping-123").expect("write");
    let mut buf = [0u8; 8];
    r.read_exact(&mut buf).expect("echo");
    assert_eq!(&buf, b"ping-123");
}

#[test]
fn keepalive_pool_reuses_upstream_connections() {
    let (up, accepted) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut w = s;
        while let Some(head) = read_head(&mut r) {
            let body = if head.contains("X-FF: 127.0.0.1") {
                "xff"
            } else {
                "noxff"
            };
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nServer: upstream\r\n\r\n{body}",
                body.len()
            );
            if w.write_all(resp.as_bytes()).is_err() {
                break;
            }
        }
    });
    let dir = tempdir("proxy-keepalive");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        "proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header X-FF $proxy_add_x_forwarded_for;",
        &format!("upstream backend {{ server 127.0.0.1:{up} weight=2 max_fails=3 fail_timeout=5s; keepalive 4; }}"),
    );
    let _srv = Server::start_in(&dir, &conf, port);
    for _ in 0..4 {
        let text = read_all(request(
            port,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ));
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("xff"), "{text}");
        assert!(
            !text.contains("Server: upstream"),
            "upstream Server hidden: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one upstream connection for four requests"
    );
}

#[test]
fn request_body_streams_upstream() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("Content-Length: ")
                    .or_else(|| l.strip_prefix("content-length: "))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        let _ = r.read_exact(&mut body);
        let mut w = s;
        let resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", len + 4);
        let _ = w.write_all(resp.as_bytes());
        let _ = w.write_all(b"got:");
        let _ = w.write_all(&body);
    });
    let dir = tempdir("proxy-body");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        &format!("proxy_pass http://127.0.0.1:{up}/base/;"),
        "",
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let text = read_all(request(
        port,
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    ));
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("got:hello"), "{text}");
}

#[test]
fn upstream_tls_with_client_certificate_and_verification() {
    let c = certs();
    let back_dir = tempdir("proxy-tls-back");
    let back_port = free_port();
    let back = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{back_port} ssl; server_name localhost;\n ssl_certificate {cert}; ssl_certificate_key {key};\n ssl_verify_client on; ssl_client_certificate {ca};\n return 200 \"tls-ok\"; }} }}\n",
        d = back_dir.display(),
        cert = c.cert("localhost").display(),
        key = c.key("localhost").display(),
        ca = c.ca().display(),
    );
    let _back = Server::start_in(&back_dir, &back, back_port);

    let dir = tempdir("proxy-tls-front");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{port};\n location /good {{ proxy_pass https://127.0.0.1:{back_port};\n proxy_ssl_certificate {cert}; proxy_ssl_certificate_key {key};\n proxy_ssl_trusted_certificate {ca}; proxy_ssl_verify on; proxy_ssl_name localhost; proxy_ssl_server_name on; }}\n location /nocert {{ proxy_pass https://127.0.0.1:{back_port}; proxy_ssl_verify off; }}\n location /wrongname {{ proxy_pass https://127.0.0.1:{back_port};\n proxy_ssl_certificate {cert}; proxy_ssl_certificate_key {key};\n proxy_ssl_trusted_certificate {ca}; proxy_ssl_verify on; proxy_ssl_name b.test; }} }} }}\n",
        d = dir.display(),
        cert = c.cert("a.test").display(),
        key = c.key("a.test").display(),
        ca = c.ca().display(),
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let get = |path: &str| {
        read_all(request(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ))
    };
    let ok = get("/good");
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.ends_with("tls-ok"),
        "{ok}"
    );
    let again = get("/good");
    assert!(again.ends_with("tls-ok"), "{again}");
    // Without a client certificate the upstream (`ssl_verify_client on`) completes the
    // handshake and answers nginx's 400 page, passed through.
    let nocert = get("/nocert");
    assert!(
        nocert.starts_with("HTTP/1.1 400")
            && nocert.contains("No required SSL certificate was sent"),
        "no client certificate: {nocert}"
    );
    let wrong = get("/wrongname");
    assert!(wrong.starts_with("HTTP/1.1 502"), "name mismatch: {wrong}");
}

#[test]
fn reload_reuses_unchanged_certificates_and_logs_counts() {
    let c = certs();
    let dir = tempdir("proxy-objcache");
    for n in ["one", "two"] {
        std::fs::copy(c.cert("localhost"), dir.join(format!("{n}.crt"))).expect("copy");
        std::fs::copy(c.key("localhost"), dir.join(format!("{n}.key"))).expect("copy");
    }
    let port = free_port();
    let mut locs = String::new();
    for i in 0..20 {
        let n = if i % 2 == 0 { "one" } else { "two" };
        locs.push_str(&format!(
            " location /l{i} {{ proxy_pass https://127.0.0.1:1; proxy_ssl_certificate {d}/{n}.crt; proxy_ssl_certificate_key {d}/{n}.key; }}\n",
            d = dir.display()
        ));
    }
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{port};\n{locs} }} }}\n",
        d = dir.display()
    );
    let mut srv = Server::start_in(&dir, &conf, port);
    let log = || std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let wait_for = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if log().matches("ssl object cache").count() >= 1 && log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    // Reload with nothing changed: the four objects come from the previous load.
    srv.signal(libc::SIGHUP);
    assert!(wait_for("0 parsed, 4 reused"), "{}", log());
    // Replace one certificate (new inode): only it is parsed again.
    let tmp = dir.join("one.crt.new");
    std::fs::copy(c.cert("localhost"), &tmp).expect("copy");
    std::fs::rename(&tmp, dir.join("one.crt")).expect("rename");
    srv.signal(libc::SIGHUP);
    assert!(wait_for("1 parsed, 3 reused"), "{}", log());
    let _ = srv.wait_exit(Duration::from_millis(1));
}

#[test]
fn certificate_by_variable_at_handshake_time() {
    let c = certs();
    let dir = tempdir("dyncert");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n ssl_certificate_cache max=10 inactive=30s valid=1m;\n server {{ listen 127.0.0.1:{port} ssl; server_name _;\n ssl_certificate {certs}/$ssl_server_name.crt; ssl_certificate_key {certs}/$ssl_server_name.key;\n return 200 \"sni-ok\"; }} }}\n",
        d = dir.display(),
        certs = c.dir.display(),
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let url = |name: &str| format!("https://{name}:{port}/");
    for name in ["a.test", "b.test", "a.test"] {
        let resolve = format!("{name}:{port}:127.0.0.1");
        let o = curl(&[
            "--cacert",
            c.ca().to_str().expect("ca"),
            "--resolve",
            &resolve,
            &url(name),
        ]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "sni-ok",
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // No file for this name: that handshake fails, the server keeps serving.
    let resolve = format!("nope.test:{port}:127.0.0.1");
    let o = curl(&["--resolve", &resolve, &url("nope.test")]);
    assert!(!o.status.success());
    let resolve = format!("b.test:{port}:127.0.0.1");
    let o = curl(&[
        "--cacert",
        c.ca().to_str().expect("ca"),
        "--resolve",
        &resolve,
        &url("b.test"),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "sni-ok");
    std::thread::sleep(Duration::from_millis(100));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("nope.test.crt") && log.contains("while SSL handshaking"),
        "{log}"
    );
}

/// An HTTPS upstream that requires a client certificate signed by the test CA and answers
/// with the name of the test certificate it got (`a.test`, `b.test`, or `other`).
fn upstream_reporting_client_cert() -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let c = certs();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(c.ca()).expect("ca pem"))
        .expect("ca");
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .expect("verifier");
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(c.cert("localhost"))
        .expect("chain")
        .map(|r| r.expect("cert"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(c.key("localhost")).expect("key");
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .expect("server config");
    let known: Arc<Vec<(&'static str, Vec<u8>)>> = Arc::new(
        ["a.test", "b.test"]
            .iter()
            .map(|n| {
                let d = CertificateDer::from_pem_file(c.cert(n)).expect("leaf");
                (*n, d.as_ref().to_vec())
            })
            .collect(),
    );
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    l.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).expect("listener");
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
            while let Ok((tcp, _)) = l.accept().await {
                let acceptor = acceptor.clone();
                let known = known.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let got = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|leaf| {
                            known
                                .iter()
                                .find(|(_, d)| d == leaf.as_ref())
                                .map(|(n, _)| *n)
                        })
                        .unwrap_or("other");
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.ends_with(b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{got}",
                        got.len()
                    );
                    let _ = tls.write_all(resp.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    port
}

#[test]
fn client_certificate_by_variable_per_request() {
    let c = certs();
    let up = upstream_reporting_client_cert();
    let dir = tempdir("proxy-dyncert");
    let port = free_port();
    let pass = |cache: &str| {
        format!(
            "proxy_pass https://127.0.0.1:{up}; proxy_ssl_certificate {certs}/$host.crt; proxy_ssl_certificate_key {certs}/$host.key; proxy_ssl_certificate_cache {cache};",
            certs = c.dir.display()
        )
    };
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log debug;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{port};\n location /cached {{ {cached} }}\n location /off {{ {off} }} }} }}\n",
        d = dir.display(),
        cached = pass("max=10 inactive=1m valid=1m"),
        off = pass("off"),
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let get = |path: &str, host: &str| {
        read_all(request(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        ))
    };
    let log = || std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let loads = |name: &str| {
        log()
            .lines()
            .filter(|l| l.contains(&format!("{name}.crt\" loaded")))
            .count()
    };
    // Two hosts, two certificates; the repeat is a cache hit (no second load).
    for host in ["a.test", "b.test", "a.test"] {
        let r = get("/cached", host);
        assert!(r.starts_with("HTTP/1.1 200"), "{host}: {r}");
        assert!(r.ends_with(host), "{host} sent its own certificate: {r}");
    }
    assert_eq!(loads("a.test"), 1, "{}", log());
    assert_eq!(loads("b.test"), 1, "{}", log());
    // Without the cache every request reads the pair.
    for _ in 0..2 {
        let r = get("/off", "a.test");
        assert!(r.ends_with("a.test"), "{r}");
    }
    assert_eq!(loads("a.test"), 3, "{}", log());
    // No file for this host: that request fails with 500 (as nginx) and a logged reason.
    let r = get("/cached", "nope.test");
    assert!(r.starts_with("HTTP/1.1 500"), "{r}");
    std::thread::sleep(Duration::from_millis(100));
    let text = log();
    assert!(
        text.contains("nope.test.crt") && text.contains("while SSL handshaking to upstream"),
        "{text}"
    );
    // And the server keeps serving.
    assert!(get("/cached", "b.test").ends_with("b.test"));
}

#[test]
fn send_timeout_fails_a_request_the_upstream_stops_reading() {
    // An upstream that accepts with a tiny receive buffer and never reads.
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    sock.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .expect("a")
            .into(),
    )
    .expect("bind");
    sock.listen(16).expect("listen");
    let l: TcpListener = sock.into();
    let up = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    let dir = tempdir("proxy-sendtimeout");
    let port = free_port();
    let conf = front_conf(
        &dir,
        port,
        &format!(
            "proxy_pass http://127.0.0.1:{up}; proxy_send_timeout 1s; proxy_read_timeout 30s;"
        ),
        "client_max_body_size 0;",
    );
    let _srv = Server::start_in(&dir, &conf, port);
    const BODY: usize = 64 << 20;
    let s = request(
        port,
        &format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {BODY}\r\nConnection: close\r\n\r\n"
        ),
    );
    let mut w = s.try_clone().expect("clone");
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..BODY / chunk.len() {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let t = Instant::now();
    let text = read_all(s);
    let took = t.elapsed();
    assert!(text.starts_with("HTTP/1.1 504"), "{text}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains(
            "upstream timed out (110: Connection timed out) while sending request to upstream"
        ),
        "{log}"
    );
}

/// `proxy_method`, `proxy_pass_request_headers off`, `proxy_pass_request_body off`: what the
/// upstream receives (an echo of its request head and body length).
#[test]
fn proxy_method_and_pass_request_switches() {
    let (up, _) = upstream(|s| {
        let mut r = BufReader::new(s.try_clone().unwrap());
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().to_string())
            })
            .map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        let echo = format!("{head}body={}", String::from_utf8_lossy(&body));
        let mut s = s;
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{echo}",
            echo.len()
        );
    });
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        location /method { proxy_pass http://127.0.0.1:{up}; proxy_method $arg_m; }
        location /noheaders { proxy_pass http://127.0.0.1:{up}; proxy_pass_request_headers off; }
        location /nobody { proxy_pass http://127.0.0.1:{up}; proxy_pass_request_body off; }
    }
}
"#
    .replace("{up}", &up.to_string());
    let (_s, p) = Server::start("proxy-method", &conf, 1);
    let post = |path: &str| {
        let out = curl(&[
            "-H",
            "X-Client: yes",
            "--data-binary",
            "hello",
            &format!("http://127.0.0.1:{}{path}", p[0]),
        ]);
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    let r = post("/method?m=PUT");
    assert!(r.starts_with("put /method?m=put http/1.0"), "{r}");
    assert!(r.ends_with("body=hello"), "{r}");
    let r = post("/noheaders");
    assert!(r.starts_with("post /noheaders"), "{r}");
    assert!(!r.contains("x-client"), "{r}");
    assert!(r.ends_with("body=hello"), "{r}");
    let r = post("/nobody");
    assert!(r.contains("x-client: yes"), "{r}");
    assert!(!r.contains("content-length"), "{r}");
    assert!(r.ends_with("body="), "{r}");
}

/// `proxy_ssl_name` with a port (nginx-tests proxy_ssl_name.t): the port is cut, as nginx's
/// `ngx_http_upstream_ssl_name` does, so `localhost:123` is both the SNI sent and the name
/// the certificate is verified against; an IP address upstream gets no SNI.
#[test]
fn upstream_ssl_name_with_a_port_sends_and_verifies_the_name_alone() {
    let c = certs();
    let back_dir = tempdir("proxy-sslname-back");
    let back_port = free_port();
    let back = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{back_port} ssl; server_name localhost;\n ssl_certificate {cert}; ssl_certificate_key {key};\n return 200 \"sni=[$ssl_server_name]\"; }} }}\n",
        d = back_dir.display(),
        cert = c.cert("localhost").display(),
        key = c.key("localhost").display(),
    );
    let _back = Server::start_in(&back_dir, &back, back_port);
    let dir = tempdir("proxy-sslname-front");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n server {{ listen 127.0.0.1:{port};\n proxy_ssl_session_reuse off; proxy_ssl_server_name on;\n proxy_ssl_trusted_certificate {ca}; proxy_ssl_verify on;\n location /port {{ proxy_pass https://127.0.0.1:{back_port}; proxy_ssl_name localhost:123; }}\n location /wrong {{ proxy_pass https://127.0.0.1:{back_port}; proxy_ssl_name other.test:123; }}\n location /ip {{ proxy_pass https://127.0.0.1:{back_port}; proxy_ssl_verify off; }} }} }}\n",
        d = dir.display(),
        ca = c.ca().display(),
    );
    let _srv = Server::start_in(&dir, &conf, port);
    let get = |path: &str| {
        read_all(request(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ))
    };
    let named = get("/port");
    assert!(
        named.starts_with("HTTP/1.1 200") && named.ends_with("sni=[localhost]"),
        "{named}"
    );
    // The port is cut before the name is checked: the name still decides verification.
    let wrong = get("/wrong");
    assert!(wrong.starts_with("HTTP/1.1 502"), "name mismatch: {wrong}");
    let ip = get("/ip");
    assert!(ip.ends_with("sni=[]"), "no SNI for an address: {ip}");
}
