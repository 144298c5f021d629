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

/// Keeps the client's `CLIENT_TRAFFIC_SECRET_0` (the test's own key log).
#[derive(Debug, Default)]
struct ClientSecret(std::sync::Mutex<Option<Vec<u8>>>);

impl rustls::KeyLog for ClientSecret {
    fn log(&self, label: &str, _: &[u8], secret: &[u8]) {
        if label == "CLIENT_TRAFFIC_SECRET_0" {
            *self.0.lock().unwrap() = Some(secret.to_vec());
        }
    }
}

/// A TLS 1.3 client whose records after a rustls handshake are made and opened here, with
/// the provider's own encrypter and decrypter: it can send a KeyUpdate(update_not_requested),
/// which rustls' buffered API never sends (`refresh_traffic_keys` asks for the peer's too).
struct HandClient {
    sock: TcpStream,
    suite: &'static rustls::Tls13CipherSuite,
    enc: Box<dyn rustls::crypto::cipher::MessageEncrypter>,
    tx_seq: u64,
    secret: Vec<u8>,
    dec: Box<dyn rustls::crypto::cipher::MessageDecrypter>,
    rx_seq: u64,
    inbuf: Vec<u8>,
}

fn keys_of(
    s: rustls::ConnectionTrafficSecrets,
) -> (rustls::crypto::cipher::AeadKey, rustls::crypto::cipher::Iv) {
    use rustls::ConnectionTrafficSecrets as S;
    match s {
        S::Aes128Gcm { key, iv } | S::Aes256Gcm { key, iv } | S::Chacha20Poly1305 { key, iv } => {
            (key, iv)
        }
        _ => panic!("a suite without kernel TLS"),
    }
}

impl HandClient {
    /// Connects and handshakes (TLS 1.3; `suite`, e.g. `TLS13_AES_128_GCM_SHA256`, if given).
    fn connect(addr: &str, suite: Option<&str>) -> Self {
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if let Some(name) = suite {
            provider
                .cipher_suites
                .retain(|s| format!("{:?}", s.suite()) == name);
            assert!(!provider.cipher_suites.is_empty(), "no suite {name}");
        }
        let provider = Arc::new(provider);
        let log = Arc::new(ClientSecret::default());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth();
        config.enable_secret_extraction = true;
        config.key_log = log.clone();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        // The server sends nothing after its Finished until it has ours: rustls reads no byte
        // past the handshake.
        loop {
            while conn.wants_write() {
                conn.write_tls(&mut sock).unwrap();
            }
            if !conn.is_handshaking() {
                break;
            }
            assert!(
                conn.read_tls(&mut sock).unwrap() > 0,
                "EOF in the handshake"
            );
            conn.process_new_packets().expect("handshake");
        }
        let suite = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.tls13())
            .unwrap();
        let secret = log.0.lock().unwrap().take().expect("client traffic secret");
        let x = conn.dangerous_extract_secrets().unwrap();
        assert_eq!(x.tx.0, 0, "aws-lc's sealing keys count from 0");
        let (key, iv) = keys_of(x.tx.1);
        let enc = suite.aead_alg.encrypter(key, iv);
        let (key, iv) = keys_of(x.rx.1);
        Self {
            sock,
            suite,
            enc,
            tx_seq: 0,
            secret,
            dec: suite.aead_alg.decrypter(key, iv),
            rx_seq: x.rx.0,
            inbuf: Vec::new(),
        }
    }

    fn record(&mut self, typ: rustls::ContentType, body: &[u8]) {
        use rustls::crypto::cipher::{OutboundChunks, OutboundPlainMessage};
        let m = OutboundPlainMessage {
            typ,
            version: rustls::ProtocolVersion::TLSv1_2,
            payload: OutboundChunks::Single(body),
        };
        let r = self.enc.encrypt(m, self.tx_seq).unwrap();
        self.tx_seq += 1;
        self.sock.write_all(&r.encode()).unwrap();
    }

    fn send(&mut self, data: &[u8]) {
        for c in data.chunks(16_384) {
            self.record(rustls::ContentType::ApplicationData, c);
        }
    }

    /// KeyUpdate(update_not_requested); later records under the next traffic secret
    /// (RFC 8446 §7.2, with the suite's HKDF).
    fn key_update(&mut self) {
        use rustls::crypto::tls13::OkmBlock;
        self.record(rustls::ContentType::Handshake, &[24, 0, 0, 1, 0]);
        let exp = self
            .suite
            .hkdf_provider
            .expander_for_okm(&OkmBlock::new(&self.secret));
        let n = self.secret.len();
        let label = b"tls13 traffic upd";
        let mut next = vec![0u8; n];
        exp.expand_slice(
            &[&(n as u16).to_be_bytes(), &[label.len() as u8], label, &[0]],
            &mut next,
        )
        .unwrap();
        let exp = self
            .suite
            .hkdf_provider
            .expander_for_okm(&OkmBlock::new(&next));
        let key = rustls::internal::derive_traffic_key(exp.as_ref(), self.suite.aead_alg);
        let iv = rustls::internal::derive_traffic_iv(exp.as_ref());
        self.enc = self.suite.aead_alg.encrypter(key, iv);
        self.tx_seq = 0;
        self.secret = next;
    }

    /// The next application data from the server (session tickets skipped); empty at the
    /// server's close_notify or EOF.
    fn recv(&mut self) -> Vec<u8> {
        use rustls::crypto::cipher::InboundOpaqueMessage;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if self.inbuf.len() >= 5 {
                let len = u16::from_be_bytes([self.inbuf[3], self.inbuf[4]]) as usize;
                if self.inbuf.len() >= 5 + len {
                    let mut rec: Vec<u8> = self.inbuf.drain(..5 + len).collect();
                    let msg = InboundOpaqueMessage::new(
                        rustls::ContentType::ApplicationData,
                        rustls::ProtocolVersion::TLSv1_2,
                        &mut rec[5..],
                    );
                    let plain = self.dec.decrypt(msg, self.rx_seq).expect("server record");
                    self.rx_seq += 1;
                    match plain.typ {
                        rustls::ContentType::ApplicationData => return plain.payload.to_vec(),
                        rustls::ContentType::Handshake => continue,
                        _ => return Vec::new(),
                    }
                }
            }
            let n = self.sock.read(&mut buf).expect("read");
            if n == 0 {
                return Vec::new();
            }
            self.inbuf.extend_from_slice(&buf[..n]);
        }
    }

    /// One response to `GET path` whose body is `want`: checked byte for byte. `mid` runs
    /// once a third of the body has arrived.
    fn get(&mut self, path: &str, want: &[u8], mut mid: impl FnMut(&mut Self, usize)) {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        let mut got = Vec::new();
        let mut head_end = None;
        let mut called = false;
        while head_end.is_none_or(|h| got.len() < h + want.len()) {
            let chunk = self.recv();
            assert!(!chunk.is_empty(), "EOF after {} bytes", got.len());
            got.extend_from_slice(&chunk);
            if head_end.is_none() {
                head_end = got.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
            }
            if !called && got.len() > want.len() / 3 {
                mid(self, got.len());
                called = true;
            }
        }
        let head_end = head_end.unwrap();
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&got[..head_end])
        );
        assert_eq!(got.len(), head_end + want.len(), "more than the body");
        assert!(got[head_end..] == want[..], "body differs");
    }
}

/// The client side of the VM's KeyUpdate check (`scripts/ktls-guest.sh` runs it with
/// `KTLS_ADDR`, `KTLS_FILE`, `KTLS_PATH` and `KTLS_SUITE`): over TLS 1.3 it requests the file
/// on a kept-alive connection, sends a KeyUpdate(update_not_requested) when a third of the body
/// has arrived, reads the rest and compares every byte; then, under its new keys, it asks for
/// the file again on the same connection and compares every byte; then a close_notify, which
/// the server answers by closing.
#[test]
#[ignore = "the VM's client: run by scripts/ktls-vm"]
fn vm_keyupdate_mid_download() {
    let addr = std::env::var("KTLS_ADDR").expect("KTLS_ADDR");
    let file = std::env::var("KTLS_FILE").expect("KTLS_FILE");
    let path = std::env::var("KTLS_PATH").expect("KTLS_PATH");
    let suite = std::env::var("KTLS_SUITE").ok();
    keyupdate_mid_download(
        &addr,
        &std::fs::read(&file).unwrap(),
        &path,
        suite.as_deref(),
    );
}

fn keyupdate_mid_download(addr: &str, want: &[u8], path: &str, suite: Option<&str>) {
    println!(); // past libtest's "test NAME ... ", so that each line starts with "ktls:"
    let mut c = HandClient::connect(addr, suite);
    let name = format!("{:?}", c.suite.common.suite);
    c.get(path, want, |c, at| {
        c.key_update();
        println!("ktls: {name}: KeyUpdate(update_not_requested) sent after {at} bytes");
    });
    println!(
        "ktls: {name}: KeyUpdate mid-download: {} bytes identical",
        want.len()
    );
    c.get(path, want, |_, _| {});
    println!(
        "ktls: {name}: a second request on the same connection under the new keys: {} bytes identical",
        want.len()
    );
    c.record(rustls::ContentType::Alert, &[1, 0]);
    let rest = c.recv();
    assert!(rest.is_empty(), "data after close_notify");
    println!("ktls: {name}: close_notify under the new keys: the server closed");
}

/// The same client against a server without kernel TLS (rustls follows the KeyUpdate): the
/// client itself is checked on every host.
#[test]
fn a_keyupdate_not_requested_mid_download_is_followed() {
    let (server, ports) = Server::start("ktls-keyupdate", CONF, 1);
    let data: Vec<u8> = (0..3_000_017u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(server.dir.join("html/big.bin"), &data).unwrap();
    let addr = format!("127.0.0.1:{}", ports[0]);
    for suite in [
        "TLS13_AES_128_GCM_SHA256",
        "TLS13_AES_256_GCM_SHA384",
        "TLS13_CHACHA20_POLY1305_SHA256",
    ] {
        keyupdate_mid_download(&addr, &data, "/big.bin", Some(suite));
    }
}

/// The client side of the VM's update_requested check: rustls' `refresh_traffic_keys` asks
/// for our KeyUpdate, which kernel TLS cannot send: after the first answer the server ends
/// the connection at that record without answering the request behind it.
#[test]
#[ignore = "the VM's client: run by scripts/ktls-vm"]
fn vm_keyupdate_requested() {
    let addr = std::env::var("KTLS_ADDR").expect("KTLS_ADDR");
    println!();
    let mut tls = vm_client(&addr);
    write!(tls, "GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    tls.flush().unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !got.ends_with(b"small file\n") {
        let n = tls.read(&mut buf).expect("first answer");
        assert!(n > 0, "EOF before the first answer");
        got.extend_from_slice(&buf[..n]);
    }
    tls.conn.refresh_traffic_keys().expect("KeyUpdate");
    println!("ktls: KeyUpdate(update_requested) sent");
    let sent = write!(tls, "GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .and_then(|()| tls.flush());
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
    println!("ktls: update_requested: no answer, the connection ended ({end})");
}
