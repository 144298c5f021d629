//! Kernel TLS (`ssl_conf_command Options KTLS`). On a kernel without the `tls` module (this
//! machine's) the start-up probe warns once and TLS is served in user space; where the kernel
//! has it, HTTP/1.1 connections switch after the handshake. The kernel side is exercised in a
//! VM by `scripts/ktls-vm`, which runs `vm_keyupdate_mid_download` below as its client.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log debug;
events {}
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        ssl_conf_command Options KTLS;
        ssl_conf_command Options KTLSTxZerocopySendfile;
        root {dir}/html;
        location = /info { connection_info; }
    }
}
"#;

/// Whether this kernel takes `TCP_ULP "tls"` (asked here, apart from the server's probe).
fn kernel_has_tls() -> bool {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _s = l.accept().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&c);
    // SAFETY: a valid socket and a 3-byte option value.
    let r = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, 31, b"tls".as_ptr().cast(), 3) };
    r == 0
}

#[test]
fn without_kernel_tls_the_probe_warns_once_and_tls_serves_in_user_space() {
    let (server, ports) = Server::start("ktls-fallback", CONF, 1);
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.dir.join("html/big.bin"), &data).unwrap();
    let url = format!("https://localhost:{}/big.bin", ports[0]);
    let resolve = format!("localhost:{}:127.0.0.1", ports[0]);
    let ca = certs().ca();
    for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"][..]] {
        let mut args = vec![
            "--http1.1",
            "--cacert",
            ca.to_str().unwrap(),
            "--resolve",
            &resolve,
        ];
        args.extend_from_slice(version);
        args.push(&url);
        let (code, _, body) = curl_i(&args);
        assert_eq!(code, 200, "{version:?}");
        assert!(
            body == data,
            "{version:?}: body differs ({} bytes)",
            body.len()
        );
    }
    let info = format!("https://localhost:{}/info?format=json", ports[0]);
    let (_, _, body) = curl_i(&[
        "--http1.1",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve,
        &info,
    ]);
    let j: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let stderr = server.stderr_text();
    let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
    if kernel_has_tls() {
        assert!(stderr.contains("kernel TLS available for"), "{stderr}");
        assert_eq!(j["ktls_tx"], true, "{j}");
        assert!(log.contains("BIO_get_ktls_send(): 1"), "{log}");
    } else {
        let warning = "[warn]";
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("kernel TLS is not available"))
            .collect();
        assert_eq!(lines.len(), 1, "one warning at start:\n{stderr}");
        assert!(
            lines[0].contains(warning)
                && lines[0]
                    .contains("setsockopt(TCP_ULP, \"tls\") failed (2: No such file or directory)")
                && lines[0].contains("TLS is served in user space"),
            "{}",
            lines[0]
        );
        assert_eq!(j["ktls_tx"], false, "{j}");
        assert_eq!(j["ktls_rx"], false, "{j}");
        // `KTLSTxZerocopySendfile` without kernel TLS: ignored, with no line of its own.
        assert_eq!(j["ktls_tx_zerocopy"], false, "{j}");
        for l in stderr
            .lines()
            .filter(|l| l.contains("ZEROCOPY") || l.contains("Zerocopy"))
        {
            assert!(l.contains("[debug]"), "only a debug line: {l}");
        }
        assert!(!log.contains("BIO_get_ktls_send(): 1"), "{log}");
        // Never switched, so file bodies were read and encrypted in user space.
        assert!(!log.contains("SSL_sendfile"), "{log}");
    }
}

/// A TLS 1.3 rustls client connected (TCP only: the handshake runs with the first I/O).
fn vm_client(addr: &str) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// The client side of the VM's large-first-request check (`KTLS_ADDR`): a 12 KB request
/// written before the handshake ends, so rustls sends it in the same write as its Finished —
/// more than the server's rustls reads at once (4 KB): the server's handshake reads must stop
/// at the Finished record for the kernel to get the request's record whole.
#[test]
#[ignore = "the VM's client: run by scripts/ktls-vm"]
fn vm_large_first_request() {
    let addr = std::env::var("KTLS_ADDR").expect("KTLS_ADDR");
    let mut tls = vm_client(&addr);
    let pad = "a".repeat(4000);
    let req = format!(
        "GET /small.txt HTTP/1.1\r\nHost: localhost\r\nX-Pad1: {pad}\r\nX-Pad2: {pad}\r\nX-Pad3: {pad}\r\nConnection: close\r\n\r\n"
    );
    // Queued before the handshake: it leaves right behind the Finished, in one write.
    tls.conn.writer().write_all(req.as_bytes()).unwrap();
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).expect("handshake");
    }
    while tls.conn.wants_write() {
        tls.conn.write_tls(&mut tls.sock).unwrap();
    }
    let mut got = Vec::new();
    match tls.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => panic!("read after {} bytes: {e}", got.len()),
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("small file\n"), "{text}");
    println!("ktls: a 12 KB request in the Finished's write: answered");
}

/// The client side of the VM's KeyUpdate check (`scripts/ktls-guest.sh` runs it with
/// `KTLS_ADDR`, `KTLS_FILE` and `KTLS_PATH`): over TLS 1.3 it requests the file on a kept-alive
/// connection, sends a KeyUpdate when a third of the body has arrived, reads the rest and
/// compares every byte; then it sends a second request under its new keys, which the kernel
/// cannot open: the server must end the connection without answering (and go on serving
/// others, which the guest script checks).
#[test]
#[ignore = "the VM's client: run by scripts/ktls-vm"]
fn vm_keyupdate_mid_download() {
    let addr = std::env::var("KTLS_ADDR").expect("KTLS_ADDR");
    let file = std::env::var("KTLS_FILE").expect("KTLS_FILE");
    let path = std::env::var("KTLS_PATH").expect("KTLS_PATH");
    let want = std::fs::read(&file).expect("the served file");
    let mut tls = vm_client(&addr);
    write!(tls, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    tls.flush().unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut updated = false;
    let mut head_end = None;
    loop {
        if head_end.is_none() {
            head_end = got.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        }
        if head_end.is_some_and(|h| got.len() >= h + want.len()) {
            break;
        }
        let n = match tls.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => panic!("read after {} bytes: {e}", got.len()),
        };
        assert!(n > 0, "EOF after {} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
        if !updated && got.len() > want.len() / 3 {
            tls.conn.refresh_traffic_keys().expect("KeyUpdate");
            // The KeyUpdate goes out with the next write_tls.
            while tls.conn.wants_write() {
                tls.conn.write_tls(&mut tls.sock).unwrap();
            }
            println!("ktls: KeyUpdate sent after {} bytes", got.len());
            updated = true;
        }
    }
    let head_end = head_end.unwrap();
    assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", &got[..head_end]);
    assert!(updated, "the body ended before a third of it");
    assert!(
        got[head_end..] == want[..],
        "body differs: {} of {} bytes",
        got.len() - head_end,
        want.len()
    );
    println!(
        "ktls: KeyUpdate mid-download: {} bytes identical",
        want.len()
    );
    // A second request, under the client's new keys: the server closes without an answer
    // (as soon as the request arrives: the client's own write may meet the reset).
    let sent =
        write!(tls, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").and_then(|()| tls.flush());
    let mut after = Vec::new();
    let end = loop {
        if let Err(e) = &sent {
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            assert!(matches!(e.kind(), BrokenPipe | ConnectionReset), "{e}");
            break format!("writing: {e}");
        }
        match tls.read(&mut buf) {
            Ok(0) => break "close_notify".to_string(),
            Ok(n) => after.extend_from_slice(&buf[..n]),
            Err(e) => {
                use std::io::ErrorKind::{TimedOut, WouldBlock};
                assert!(
                    !matches!(e.kind(), WouldBlock | TimedOut),
                    "the server kept the connection open (60 s)"
                );
                break e.to_string();
            }
        }
    };
    assert!(
        after.is_empty(),
        "answered after the KeyUpdate: {:?}",
        String::from_utf8_lossy(&after[..after.len().min(200)])
    );
    println!("ktls: a request under the new keys: no answer, the connection ended ({end})");
}
