//! TLS record sizes on the wire, for each record policy (issue 3): a relay between curl and
//! firstbyte reads the 5-byte record headers of everything the server sends.
//!
//! TLS 1.2 with AES-128-GCM is used so that every application-data record is the response
//! (no TLS 1.3 tickets among them) and its plaintext is exactly `length - 24` (8-byte explicit
//! nonce + 16-byte tag). The relay connects to the server with `TCP_MAXSEG` 1460, so the
//! server's connection has an Ethernet-sized MSS (1448 with timestamps) as on a real network,
//! which is what the adaptive policy sizes records from.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    types { application/octet-stream bin; }
    default_type application/octet-stream;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    root {dir}/html;
    http2 on;
    server { listen 127.0.0.1:{port0} ssl; ssl_buffer_size 16k; ssl_dyn_rec_enable off; }
    server { listen 127.0.0.1:{port1} ssl; ssl_buffer_size 4k; ssl_dyn_rec_enable off; }
    server { listen 127.0.0.1:{port2} ssl; ssl_dyn_rec_enable on; }
    server {
        listen 127.0.0.1:{port3} ssl;
        ssl_dyn_rec_enable on;
        ssl_dyn_rec_size_lo 1369;
        ssl_dyn_rec_size_hi 16384;
        ssl_dyn_rec_threshold 10;
        ssl_dyn_rec_timeout 5s;
    }
    server { listen 127.0.0.1:{port4} ssl; ssl_dyn_rec_enable adaptive; }
    server { listen 127.0.0.1:{port5} ssl; }
}
"#;

/// One record the server sent: content type, length, and when the relay had all of it.
type Record = (u8, usize, Instant);

/// Relays one connection from a fresh local port to `upstream`; returns the port and a
/// receiver of every record the server sent.
fn relay(upstream: u16) -> (u16, mpsc::Receiver<Vec<Record>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_tcp_mss(1460).unwrap();
        sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], upstream)).into())
            .unwrap();
        let mut server: TcpStream = sock.into();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let up = thread::spawn(move || {
            let _ = std::io::copy(&mut c2, &mut s2);
            let _ = s2.shutdown(Shutdown::Write);
        });
        let mut records = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = match server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if client.write_all(&buf[..n]).is_err() {
                break;
            }
            pending.extend_from_slice(&buf[..n]);
            while pending.len() >= 5 {
                let len = usize::from(u16::from_be_bytes([pending[3], pending[4]]));
                if pending.len() < 5 + len {
                    break;
                }
                records.push((pending[0], len, Instant::now()));
                pending.drain(..5 + len);
            }
        }
        let _ = client.shutdown(Shutdown::Write);
        let _ = up.join();
        let _ = tx.send(records);
    });
    (port, rx)
}

/// Fetches `path` through a relay to `port`; returns the plaintext sizes of the server's
/// application-data records, in order.
fn app_records(port: u16, proto: &str, path: &str) -> Vec<usize> {
    let (rport, rx) = relay(port);
    let out = curl(&[
        proto,
        "--tls-max",
        "1.2",
        "--tlsv1.2",
        "--ciphers",
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{size_download}",
        &format!("https://localhost:{rport}{path}"),
    ]);
    let w = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(w.starts_with("200 "), "{proto} {path}: {w}");
    let records = rx.recv_timeout(Duration::from_secs(20)).expect("relay");
    records
        .into_iter()
        .filter(|(t, _, _)| *t == 23)
        .map(|(_, len, _)| len - 24)
        .collect()
}

const SIZES: [(&str, usize); 3] = [
    ("/10k.bin", 10 * 1024),
    ("/100k.bin", 100 * 1024),
    ("/1m.bin", 1024 * 1024),
];

#[test]
fn record_sizes_follow_each_policy() {
    let (server, ports) = Server::start("records", CONF, 6);
    for (p, n) in SIZES {
        std::fs::write(server.dir.join("html").join(&p[1..]), vec![7u8; n]).unwrap();
    }
    std::fs::write(server.dir.join("html/200.bin"), vec![7u8; 200]).unwrap();

    for proto in ["--http1.1", "--http2"] {
        for (path, size) in SIZES {
            let full = |r: &[usize]| r.iter().filter(|&&p| p == 16384).count();
            let ctx = format!("{proto} {path}");

            // Static 16k: nothing larger; a large body goes in full records.
            let r = app_records(ports[0], proto, path);
            assert!(r.iter().all(|&p| p <= 16384), "16k {ctx}: {r:?}");
            assert!(full(&r) + 2 >= size / 16384, "16k {ctx}: {r:?}");
            // No runt records between full ones (an HTTP/2 DATA frame is 9 bytes more than a
            // record; file bodies are cut so that a frame fills one record exactly).
            assert!(
                r.len() <= size / 16384 + 5,
                "16k {ctx}: {} records: {r:?}",
                r.len()
            );

            // Static 4k.
            let r = app_records(ports[1], proto, path);
            assert!(r.iter().all(|&p| p <= 4096), "4k {ctx}: {r:?}");
            let n4 = r.iter().filter(|&&p| p == 4096).count();
            assert!(n4 + 3 >= size / 4096, "4k {ctx}: {r:?}");

            // Dynamic, Cloudflare's defaults: records 1-41 <= 1369, 42-81 <= 4229, then full.
            let r = app_records(ports[2], proto, path);
            for (i, &p) in r.iter().enumerate() {
                let k = i + 1;
                let cap = if k <= 41 {
                    1369
                } else if k <= 81 {
                    4229
                } else {
                    16384
                };
                assert!(p <= cap, "dynamic {ctx}: record {k} is {p} > {cap}: {r:?}");
            }
            if size >= 1024 * 1024 {
                assert!(
                    full(&r) > 0,
                    "dynamic {ctx} never reached full records: {r:?}"
                );
            }

            // Dynamic, tuned (lo 1369, hi 16384, threshold 10): 11 small records, then full.
            let r = app_records(ports[3], proto, path);
            for (i, &p) in r.iter().enumerate() {
                let cap = if i < 11 { 1369 } else { 16384 };
                assert!(p <= cap, "tuned {ctx}: record {} is {p}: {r:?}", i + 1);
            }
            if size >= 100 * 1024 {
                assert!(
                    full(&r) > 0,
                    "tuned {ctx} never reached full records: {r:?}"
                );
            }

            // Adaptive: a fresh connection starts with one segment's payload (MSS 1448 minus
            // the largest record overhead), and grows to full records as the window opens.
            let r = app_records(ports[4], proto, path);
            assert!(
                r[0] <= 1448 - 24,
                "adaptive {ctx}: first record {}: {r:?}",
                r[0]
            );
            assert!(r.iter().all(|&p| p <= 16384), "adaptive {ctx}: {r:?}");
            if size >= 1024 * 1024 {
                assert!(
                    full(&r) > 0,
                    "adaptive {ctx} never reached full records: {r:?}"
                );
            }
        }
    }

    // A 200-byte response over HTTP/1.1 is one record: headers and body coalesced.
    for port in [ports[0], ports[1], ports[2], ports[4]] {
        let r = app_records(port, "--http1.1", "/200.bin");
        assert_eq!(r.len(), 1, "headers and body in one record: {r:?}");
        assert!(r[0] > 200, "{r:?}");
    }
}

/// Every `ssl_buffer_size` nginx accepts works, over HTTP/2 too (below 9 bytes a DATA frame
/// header no longer fits a record: the frame size once underflowed there).
#[test]
fn tiny_record_sizes_serve_http2_and_http11() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    root {dir}/html;
    http2 on;
    server { listen 127.0.0.1:{port0} ssl; ssl_buffer_size 1; }
    server { listen 127.0.0.1:{port1} ssl; ssl_buffer_size 8; }
    server { listen 127.0.0.1:{port2} ssl; ssl_buffer_size 9; }
}
"#;
    let (s, ports) = Server::start("tiny-records", conf, 3);
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(s.dir.join("html/f.bin"), &body).unwrap();
    for port in ports {
        for proto in ["--http2", "--http1.1"] {
            let out = curl(&[proto, &format!("https://localhost:{port}/f.bin")]);
            assert!(
                out.status.success(),
                "{port} {proto}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.stdout == body,
                "{port} {proto}: {} bytes",
                out.stdout.len()
            );
        }
    }
}

/// A rustls client limited to TLS 1.2 with ECDHE-ECDSA-AES128-GCM-SHA256 (as `app_records`
/// asks of curl): every application-data record is response bytes, plaintext = length − 24.
fn tls12_client() -> Arc<rustls::ClientConfig> {
    use rustls::crypto::aws_lc_rs as provider;
    use rustls_pki_types::pem::PemObject;
    let p = rustls::crypto::CryptoProvider {
        cipher_suites: vec![provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256],
        ..provider::default_provider()
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(certs().ca()).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let c = rustls::ClientConfig::builder_with_provider(Arc::new(p))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS 1.2")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(c)
}

/// Reads one HTTP/1.1 response with a Content-Length body; returns the body's length.
fn read_response(s: &mut impl Read) -> usize {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).expect("response head");
        head.push(b[0]);
    }
    let (status, headers, _) = parse_response(&head);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&head));
    let len: usize = header(&headers, "content-length").unwrap().parse().unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).expect("response body");
    len
}

/// One keep-alive connection through the relay: GET `/1m.bin` (the policy ramps up to full
/// records), wait `gap`, GET `/100k.bin`. Returns the plaintext sizes of the second response's
/// records.
fn warm_records(port: u16, gap: Duration) -> Vec<usize> {
    let (rport, rx) = relay(port);
    let tcp = TcpStream::connect(("127.0.0.1", rport)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(tls12_client(), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(b"GET /1m.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s), 1024 * 1024);
    thread::sleep(gap);
    let second = Instant::now();
    s.write_all(b"GET /100k.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s), 100 * 1024);
    drop(s);
    let records = rx.recv_timeout(Duration::from_secs(20)).expect("relay");
    records
        .into_iter()
        .filter(|&(t, _, at)| t == 23 && at > second)
        .map(|(_, len, _)| len - 24)
        .collect()
}

/// Issue 17: a warm connection after idle. After a gap longer than the point where the kernel
/// restarts the window (the RTO, at least 200 ms) and than `ssl_dyn_rec_timeout` (1 s), the
/// dynamic and adaptive policies start the next response again with a small first record (so
/// it decrypts after one segment); after a short gap they keep full records. Static 16k sends a
/// full record either way. A server with no record directive is adaptive (the default).
#[test]
fn warm_connection_after_idle_restarts_small_records() {
    let (server, ports) = Server::start("records-warm", CONF, 6);
    for (p, n) in SIZES {
        std::fs::write(server.dir.join("html").join(&p[1..]), vec![7u8; n]).unwrap();
    }
    let (fixed, dynamic, adaptive, default) = (ports[0], ports[2], ports[4], ports[5]);
    let long = Duration::from_millis(1500);
    let short = Duration::from_millis(50);

    let r = warm_records(dynamic, long);
    assert!(r[0] <= 1369, "dynamic after 1.5 s idle: {r:?}");
    let r = warm_records(adaptive, long);
    assert!(r[0] <= 1448 - 24, "adaptive after 1.5 s idle: {r:?}");
    let r = warm_records(fixed, long);
    assert_eq!(r[0], 16384, "16k after 1.5 s idle: {r:?}");
    let r = warm_records(default, long);
    assert!(
        r[0] <= 1448 - 24,
        "default (adaptive) after 1.5 s idle: {r:?}"
    );

    let r = warm_records(dynamic, short);
    assert_eq!(r[0], 16384, "dynamic after 50 ms: {r:?}");
    let r = warm_records(adaptive, short);
    assert!(r[0] > 1448, "adaptive after 50 ms: {r:?}");
    let r = warm_records(default, short);
    assert!(r[0] > 1448, "default (adaptive) after 50 ms: {r:?}");
}
