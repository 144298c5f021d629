//! TLS 1.3 early data (0-RTT) over TCP, `ssl_early_data on`: a resumed client's safe request
//! is answered before the client's Finished (0.5-RTT), an unsafe one gets `425 Too Early`, a
//! ticket is never taken twice (a replayed first flight is not served), and with the
//! directive off nothing is taken. Clients: rustls driven by hand (the test decides when its
//! Finished leaves) and OpenSSL's `s_client`, a client nobody here wrote.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    log_format early '$request $status early=$ssl_early_data';
    access_log {dir}/access.log early;
    ssl_session_cache shared:early:1m;
    ssl_early_data on;
    server {
        listen 127.0.0.1:{port0} ssl;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location / { return 200 "early=$ssl_early_data\n"; }
    }
}
"#;

/// A rustls client (TLS 1.3, HTTP/1.1) that resumes and offers early data.
fn client_config() -> Arc<rustls::ClientConfig> {
    let mut c = (*rust_client_config(&[b"http/1.1"])).clone();
    c.enable_early_data = true;
    Arc::new(c)
}

fn connect(port: u16) -> TcpStream {
    let sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    sock
}

/// Whether `buf` holds a whole response (head and a `Content-Length` body).
fn complete(buf: &[u8]) -> bool {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().expect("content-length"));
    buf.len() >= end + 4 + len
}

/// Reads one response from `conn` over `sock`, sending nothing (the client's own handshake
/// messages stay queued).
fn read_response(conn: &mut rustls::ClientConnection, sock: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    while !complete(&out) {
        let n = conn.read_tls(sock).expect("read from the server");
        assert!(n > 0, "server closed: {:?}", String::from_utf8_lossy(&out));
        conn.process_new_packets().expect("TLS");
        let mut chunk = [0u8; 4096];
        loop {
            match conn.reader().read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
    }
    out
}

fn send(conn: &mut rustls::ClientConnection, sock: &mut TcpStream) {
    while conn.wants_write() {
        conn.write_tls(sock).expect("write to the server");
    }
}

/// A full handshake and one request, leaving tickets in the config's store.
fn full_handshake(cfg: &Arc<rustls::ClientConfig>, port: u16, path: &str) -> String {
    let mut sock = connect(port);
    let mut conn =
        rustls::ClientConnection::new(cfg.clone(), "a.test".try_into().unwrap()).expect("client");
    assert!(conn.early_data().is_none(), "no ticket yet");
    conn.writer()
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n").as_bytes())
        .unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).expect("handshake");
    }
    send(&mut conn, &mut sock);
    let r = read_response(&mut conn, &mut sock);
    String::from_utf8_lossy(&r).into_owned()
}

/// A resumed connection whose first flight carries `request` as early data, and no more: the
/// client's Finished is not sent. Returns the connection, its socket, the first flight's
/// bytes as they went on the wire, and whether the server accepted the early data.
fn early_flight(
    cfg: &Arc<rustls::ClientConfig>,
    port: u16,
    request: &[u8],
) -> (rustls::ClientConnection, TcpStream, Vec<u8>) {
    let mut sock = connect(port);
    let mut conn =
        rustls::ClientConnection::new(cfg.clone(), "a.test".try_into().unwrap()).expect("client");
    let mut early = conn.early_data().expect("a ticket that allows early data");
    assert!(early.bytes_left() >= request.len());
    assert_eq!(early.write(request).unwrap(), request.len());
    let mut wire = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut wire).unwrap();
    }
    sock.write_all(&wire).expect("first flight");
    (conn, sock, wire)
}

#[test]
fn early_data_is_answered_before_the_clients_finished_and_only_when_safe() {
    let (server, ports) = Server::start("early-tcp", CONF, 1);
    let port = ports[0];
    let cfg = client_config();
    assert!(full_handshake(&cfg, port, "/full").ends_with("early=\n"));

    // A GET in early data: answered while the client's Finished is still unsent.
    let (mut conn, mut sock, wire) =
        early_flight(&cfg, port, b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
    assert!(conn.is_early_data_accepted(), "0-RTT accepted");
    assert!(conn.wants_write(), "the client's Finished has not left");
    assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
    assert!(r.ends_with("early=1\n"), "{r}");
    // The handshake completes; a request after it is not early data, and may be a POST.
    send(&mut conn, &mut sock);
    conn.writer()
        .write_all(b"GET /b HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    send(&mut conn, &mut sock);
    let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
    assert!(r.ends_with("early=\n"), "{r}");
    conn.writer()
        .write_all(b"POST /after HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\nx")
        .unwrap();
    send(&mut conn, &mut sock);
    let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
    assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
    drop((conn, sock));

    // A POST in early data, before the handshake completes: 425 Too Early.
    let (mut conn, mut sock, _) = early_flight(
        &cfg,
        port,
        b"POST /c HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\nx",
    );
    let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
    assert!(conn.is_early_data_accepted());
    assert!(r.starts_with("HTTP/1.1 425 "), "{r}");
    drop((conn, sock));

    // The first GET's flight replayed byte for byte: its ticket was taken, so the server
    // does a full handshake that never completes, and serves nothing.
    let mut replay = connect(port);
    replay.write_all(&wire).unwrap();
    replay
        .set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    while let Ok(n) = replay.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert!(!got.is_empty(), "the server answers the ClientHello");
    drop(replay);

    let log = std::fs::read_to_string(server.dir.join("access.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines,
        [
            "GET /full HTTP/1.1 200 early=",
            "GET /a HTTP/1.1 200 early=1",
            "GET /b HTTP/1.1 200 early=",
            "POST /after HTTP/1.1 200 early=",
            "POST /c HTTP/1.1 425 early=1",
        ],
        "{log}"
    );
}

#[test]
fn without_ssl_early_data_nothing_is_taken_early() {
    let conf = CONF.replace("    ssl_early_data on;\n", "");
    let (_server, ports) = Server::start("early-tcp-off", &conf, 1);
    let port = ports[0];
    let cfg = client_config();
    full_handshake(&cfg, port, "/full");
    // Tickets from a server without early data do not allow it.
    let mut conn =
        rustls::ClientConnection::new(cfg.clone(), "a.test".try_into().unwrap()).expect("client");
    assert!(conn.early_data().is_none(), "the ticket allows no 0-RTT");
    let mut sock = connect(port);
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).expect("handshake");
    }
    assert!(!conn.is_early_data_accepted());
    assert!(
        matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        "still resumed"
    );
}

/// OpenSSL's client: a session saved, then resumed with the request as early data.
#[test]
fn openssl_s_client_sends_early_data_that_is_served() {
    let (server, ports) = Server::start("early-tcp-openssl", CONF, 1);
    let port = ports[0];
    let sess = server.dir.join("sess.pem");
    let req = server.dir.join("req.txt");
    std::fs::write(
        &req,
        "GET /ossl HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let s_client = |stdin: &std::path::Path, extra: &[&str]| {
        let connect = format!("127.0.0.1:{port}");
        let ca = certs().ca();
        let mut args = vec![
            "s_client",
            "-connect",
            &connect,
            "-servername",
            "a.test",
            "-tls1_3",
            "-CAfile",
            ca.to_str().unwrap(),
            "-ign_eof",
        ];
        args.extend_from_slice(extra);
        let out = std::process::Command::new("openssl")
            .args(&args)
            .stdin(std::fs::File::open(stdin).unwrap())
            .output()
            .expect("openssl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = s_client(&req, &["-sess_out", sess.to_str().unwrap()]);
    assert!(first.contains("early="), "{first}");
    let req_arg = req.to_str().unwrap().to_string();
    let second = s_client(
        std::path::Path::new("/dev/null"),
        &["-sess_in", sess.to_str().unwrap(), "-early_data", &req_arg],
    );
    assert!(second.contains("Early data was accepted"), "{second}");
    // Served; whether as early data (`early=1`) depends on whether s_client's Finished, sent
    // as soon as the server's flight arrives, reached the server first (see the rustls test
    // for the case decided).
    assert!(second.contains("HTTP/1.1 200 "), "{second}");
    assert!(second.contains("early="), "{second}");
}

/// `$ssl_session_id` on 0-RTT: the resumed connection shows the id of the connection that
/// got the ticket, and so does a connection that resumes with a ticket issued after the
/// 0-RTT handshake completed (issued while the connection serves, not while it is accepted).
#[test]
fn session_id_carries_through_early_data() {
    let conf = CONF.replace("return 200 \"early=", "return 200 \"$ssl_session_id early=");
    let (_server, ports) = Server::start("early-tcp-sessid", &conf, 1);
    let port = ports[0];
    let cfg = client_config();
    let full = full_handshake(&cfg, port, "/full");
    let id = full
        .lines()
        .last()
        .and_then(|l| l.strip_suffix(" early="))
        .unwrap_or_else(|| panic!("{full}"))
        .to_string();
    assert_eq!(id.len(), 64, "{full}");
    for round in 0..2 {
        let (mut conn, mut sock, _) =
            early_flight(&cfg, port, b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n");
        let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
        assert!(conn.is_early_data_accepted(), "0-RTT accepted");
        assert!(
            r.ends_with(&format!("\r\n{id} early=1\n")),
            "round {round}: {r}"
        );
        // The client's Finished; the server's tickets come with the next response, and the
        // next round resumes with the newest of them.
        send(&mut conn, &mut sock);
        conn.writer()
            .write_all(b"GET /b HTTP/1.1\r\nHost: a.test\r\n\r\n")
            .unwrap();
        send(&mut conn, &mut sock);
        let r = String::from_utf8_lossy(&read_response(&mut conn, &mut sock)).into_owned();
        assert!(
            r.ends_with(&format!("\r\n{id} early=\n")),
            "round {round}: {r}"
        );
    }
}
