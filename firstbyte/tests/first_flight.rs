//! The first response fits the initial window: on a cold TLS 1.3 connection, the answer to a
//! 10 KB request — session tickets included — leaves in 8 segments, the fewest 10 KB of
//! payload can take at 1448 bytes per segment (the README's promise; h2o: 9, nginx: 11, one
//! over the initial window of 10).
//!
//! Loopback's 64 KB MTU hides packet counts, so the server runs in a network namespace joined
//! to the client's by a veth pair with a 1500-byte MTU. The client is written out by hand with
//! rustls so it can bracket exactly the server's answer: it reads the server's handshake
//! flight, snapshots the server namespace's `TcpExtTCPOrigDataSent` (segments carrying new
//! data), sends its Finished and the request together (as browsers and curl do), reads the
//! whole response, and snapshots again.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use support::*;

/// Two namespaces joined by a veth pair; removed on drop.
struct Netns {
    server: String,
    client: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// `tag`: one letter per test, so tests running at once get their own names.
    fn new(tag: char) -> Netns {
        let id = std::process::id() % 100_000;
        let n = Netns {
            server: format!("fbff-{tag}s{id}"),
            client: format!("fbff-{tag}c{id}"),
        };
        let _ = Command::new("ip")
            .args(["netns", "del", &n.server])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &n.client])
            .output();
        ip(&["netns", "add", &n.server]);
        ip(&["netns", "add", &n.client]);
        let (vs, vc) = (format!("fb{tag}s{id}"), format!("fb{tag}c{id}"));
        ip(&["link", "add", &vs, "type", "veth", "peer", "name", &vc]);
        ip(&["link", "set", &vs, "netns", &n.server]);
        ip(&["link", "set", &vc, "netns", &n.client]);
        ip(&[
            "-n",
            &n.server,
            "addr",
            "add",
            "198.18.200.1/30",
            "dev",
            &vs,
        ]);
        ip(&[
            "-n",
            &n.client,
            "addr",
            "add",
            "198.18.200.2/30",
            "dev",
            &vc,
        ]);
        for (ns, dev) in [(&n.server, &vs), (&n.client, &vc)] {
            ip(&["-n", ns, "link", "set", dev, "mtu", "1500", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.server])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.client])
            .output();
    }
}

/// Runs `f` on a thread that has entered network namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("netns file");
        // SAFETY: setns on an open namespace file affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}

/// `TcpExtTCPOrigDataSent` of namespace `ns`: segments sent carrying new data.
fn orig_data_sent(ns: &str) -> u64 {
    in_netns(ns, || {
        let text = std::fs::read_to_string("/proc/thread-self/net/netstat").expect("netstat");
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("TcpExt:")).collect();
        let names: Vec<&str> = lines[0].split_whitespace().collect();
        let values: Vec<&str> = lines[1].split_whitespace().collect();
        let i = names
            .iter()
            .position(|n| *n == "TCPOrigDataSent")
            .expect("TCPOrigDataSent");
        values[i].parse().expect("counter")
    })
}

fn client_config(alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(certs().ca()).expect("ca") {
        roots.add(c.expect("ca cert")).expect("add ca");
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![alpn.to_vec()];
    c.resumption = rustls::client::Resumption::disabled();
    Arc::new(c)
}

fn h2_request(path: &str, authority: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x87]; // :method GET, :scheme https
    block.push(0x44); // :path, literal with indexing, no Huffman
    block.push(path.len() as u8);
    block.extend_from_slice(path.as_bytes());
    block.push(0x41); // :authority
    block.push(authority.len() as u8);
    block.extend_from_slice(authority.as_bytes());
    let mut v = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    v.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // empty SETTINGS
    let len = block.len();
    v.extend_from_slice(&[
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        1,
        0x05,
        0,
        0,
        0,
        1,
    ]);
    v.extend_from_slice(&block);
    v
}

/// Whether `buf` holds a complete response of `body_len` body bytes.
fn complete(buf: &[u8], h2: bool, body_len: usize) -> bool {
    if !h2 {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        return buf.len() - end - 4 >= body_len;
    }
    let mut i = 0;
    while i + 9 <= buf.len() {
        let len =
            (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        let (kind, flags) = (buf[i + 3], buf[i + 4]);
        let stream =
            u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
        if i + 9 + len > buf.len() {
            return false;
        }
        if stream == 1 && (kind == 0 || kind == 1) && flags & 1 == 1 {
            return true;
        }
        i += 9 + len;
    }
    false
}

/// One cold connection; returns the data segments the server sent between our Finished and
/// the end of the response.
fn answer_segments(server_ns: &str, client_ns: &str, h2: bool, path: &str, body_len: usize) -> u64 {
    let alpn: &[u8] = if h2 { b"h2" } else { b"http/1.1" };
    let cfg = client_config(alpn);
    let server_ns = server_ns.to_string();
    let (sock, mut conn) = in_netns(client_ns, move || {
        let sock = TcpStream::connect(("198.18.200.1", 8443)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap())
            .expect("client");
        (sock, conn)
    });
    let mut sock = sock;
    let request = if h2 {
        h2_request(path, "localhost")
    } else {
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").into_bytes()
    };
    // Queued now, sent with our Finished.
    conn.writer().write_all(&request).unwrap();
    conn.write_tls(&mut sock).unwrap(); // ClientHello
    while conn.is_handshaking() {
        conn.read_tls(&mut sock).expect("server flight");
        conn.process_new_packets().expect("handshake");
    }
    let before = orig_data_sent(&server_ns);
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap(); // Finished + request
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !complete(&got, h2, body_len) {
        assert!(
            Instant::now() < deadline,
            "response incomplete: {} bytes",
            got.len()
        );
        if conn.read_tls(&mut sock).expect("read") == 0 {
            panic!("server closed early");
        }
        let state = conn.process_new_packets().expect("tls");
        if state.plaintext_bytes_to_read() > 0 {
            let mut buf = vec![0u8; state.plaintext_bytes_to_read()];
            conn.reader().read_exact(&mut buf).unwrap();
            got.extend_from_slice(&buf);
        }
    }
    // Let any segment the server queued behind the response leave before counting.
    std::thread::sleep(Duration::from_millis(50));
    orig_data_sent(&server_ns) - before
}

/// One cold connection: how many bytes the server sent after our Finished before the first
/// byte of the response could be decrypted (the end of the record holding it).
fn bytes_before_first_byte(client_ns: &str, h2: bool, path: &str) -> usize {
    let alpn: &[u8] = if h2 { b"h2" } else { b"http/1.1" };
    let cfg = client_config(alpn);
    let (mut sock, mut conn) = in_netns(client_ns, move || {
        let sock = TcpStream::connect(("198.18.200.1", 8443)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let conn = rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap())
            .expect("client");
        (sock, conn)
    });
    let request = if h2 {
        h2_request(path, "localhost")
    } else {
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").into_bytes()
    };
    conn.writer().write_all(&request).unwrap();
    conn.write_tls(&mut sock).unwrap();
    while conn.is_handshaking() {
        conn.read_tls(&mut sock).expect("server flight");
        conn.process_new_packets().expect("handshake");
    }
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap();
    }
    // Feed rustls one whole record at a time, counting the bytes.
    let mut raw: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert!(Instant::now() < deadline, "no response");
        while raw.len() - fed >= 5 {
            let len = usize::from(u16::from_be_bytes([raw[fed + 3], raw[fed + 4]]));
            if raw.len() - fed < 5 + len {
                break;
            }
            let mut rec = &raw[fed..fed + 5 + len];
            while !rec.is_empty() {
                conn.read_tls(&mut rec).unwrap();
            }
            fed += 5 + len;
            let state = conn.process_new_packets().expect("tls");
            let mut plain = vec![0u8; state.plaintext_bytes_to_read()];
            conn.reader().read_exact(&mut plain).unwrap();
            // HTTP/1.1: any plaintext is the response. HTTP/2: a HEADERS frame (type 1) on
            // stream 1 somewhere in what arrived.
            let head = if h2 {
                plain
                    .windows(9)
                    .any(|w| w[3] == 1 && w[5..9] == [0, 0, 0, 1])
            } else {
                !plain.is_empty()
            };
            if head {
                return fed;
            }
        }
        let n = sock.read(&mut buf).expect("read");
        assert!(n > 0, "server closed");
        raw.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn the_first_byte_arrives_in_the_first_window_with_16k_records() {
    let ns = Netns::new('b');
    let dir = tempdir("first-byte-16k");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/f100k.bin"), vec![0x5a; 100 * 1024]).unwrap();
    let conf = dir.join("firstbyte.conf");
    let text = render(CONF, &dir, &[]).replace("root", "ssl_buffer_size 16k;\n        root");
    std::fs::write(&conf, text).unwrap();
    let _server = Running(
        Command::new("ip")
            .args(["netns", "exec", &ns.server])
            .arg(bin())
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .spawn()
            .expect("start firstbyte"),
    );
    wait_listening(&ns.client);
    // Ten 1448-byte segments: the initial congestion window.
    let window = 10 * 1448;
    for h2 in [false, true] {
        let n = bytes_before_first_byte(&ns.client, h2, "/f100k.bin");
        eprintln!("first response byte decryptable after {n} bytes (h2: {h2})");
        assert!(
            n <= window,
            "the response head's record ends at byte {n}, past the initial window (h2: {h2})"
        );
    }
}

fn wait_listening(client_ns: &str) {
    let up = in_netns(client_ns, || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("198.18.200.1", 8443)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    assert!(up, "firstbyte did not listen in the namespace");
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    types { application/octet-stream bin; }
    server {
        listen 198.18.200.1:8443 ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
    }
}
"#;

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ten_kilobytes_with_tickets_fit_the_initial_window() {
    let ns = Netns::new('a');
    let dir = tempdir("first-flight");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/f10k.bin"), vec![0x5a; 10 * 1024]).unwrap();
    let conf = dir.join("firstbyte.conf");
    std::fs::write(&conf, render(CONF, &dir, &[])).unwrap();
    let bin = bin();
    let _server = Running(
        Command::new("ip")
            .args(["netns", "exec", &ns.server])
            .arg(&bin)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .spawn()
            .expect("start firstbyte"),
    );
    let client = ns.client.clone();
    let up = in_netns(&client, || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("198.18.200.1", 8443)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    assert!(up, "firstbyte did not listen in the namespace");
    for h2 in [false, true] {
        let segs = answer_segments(&ns.server, &ns.client, h2, "/f10k.bin", 10 * 1024);
        eprintln!(
            "answer to a 10 KB request over {}: {segs} segments",
            if h2 { "h2" } else { "http/1.1" }
        );
        assert!(
            segs >= 8,
            "10 KB cannot fit in fewer than 8 segments of 1448 bytes: {segs}"
        );
        assert!(
            segs <= 8,
            "tickets + response took {segs} segments (h2: {h2}); the README promises 8"
        );
    }
}
