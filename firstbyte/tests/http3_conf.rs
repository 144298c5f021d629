//! nginx's HTTP/3 and QUIC directives, each seen from the client: `http3 off` (handshake
//! refused, 421), `http3_max_concurrent_streams`, `http3_stream_buffer_size` (and a reload
//! that changes it), `quic_retry` (a UDP relay sees the Retry packet), `quic_host_key` (a
//! stateless reset from a restarted server is recognised only with the same key), `quic_gso`
//! (the server's `sendmsg` calls, traced), `quic_active_connection_id_limit`.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustls_pki_types::pem::PemObject;
use support::{certs, curl_i, header, Server};

/// A server whose directory goes when it does.
struct Tidy(Option<Server>);

impl std::ops::Deref for Tidy {
    type Target = Server;
    fn deref(&self) -> &Server {
        self.0.as_ref().expect("running")
    }
}

impl Drop for Tidy {
    fn drop(&mut self) {
        if let Some(server) = self.0.take() {
            let dir = server.dir.clone();
            drop(server);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn start(tag: &str, conf: &str) -> (Tidy, Vec<u16>) {
    let (server, ports) = Server::start(tag, conf, 1);
    (Tidy(Some(server)), ports)
}

/// A temporary directory, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        TempDir(support::tempdir(tag))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A QUIC client endpoint trusting the tests' CA, speaking h3; `idle`: its idle timeout.
fn client(idle: Option<Duration>) -> quinn::Endpoint {
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
    let mut config = quinn::ClientConfig::new(Arc::new(quic));
    if let Some(idle) = idle {
        let mut t = quinn::TransportConfig::default();
        t.max_idle_timeout(Some(idle.try_into().expect("idle timeout")));
        config.transport_config(Arc::new(t));
    }
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(config);
    ep
}

/// A QUIC connection to 127.0.0.1:`port` for `sni`.
async fn quic(
    ep: &quinn::Endpoint,
    port: u16,
    sni: &str,
) -> Result<quinn::Connection, quinn::ConnectionError> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    ep.connect(addr, sni).expect("connect").await
}

/// HTTP/3 over `conn`: the request sender (its driver runs in a task).
async fn h3(conn: &quinn::Connection) -> h3::client::SendRequest<h3_quinn::OpenStreams, Bytes> {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .expect("h3 client");
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    send
}

/// GET `https://host/path`: status and body.
async fn get(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    host: &str,
    path: &str,
) -> Result<(u16, Vec<u8>), String> {
    let req = http::Request::get(format!("https://{host}{path}"))
        .body(())
        .unwrap();
    let mut stream = send.send_request(req).await.map_err(|e| e.to_string())?;
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        while chunk.has_remaining() {
            let n = chunk.chunk().len();
            body.extend_from_slice(chunk.chunk());
            chunk.advance(n);
        }
    }
    Ok((resp.status().as_u16(), body))
}

/// How much of a 1 MiB write a fresh request stream on `conn` takes at once: the server's
/// receive window for the stream (or for the connection, if smaller). The bytes are an HTTP/3
/// frame of a reserved type, which the server must skip.
async fn first_write(conn: &quinn::Connection) -> usize {
    let (mut send, _recv) = conn.open_bi().await.expect("stream");
    let mut frame = vec![0x21, 0x80, 0x10, 0x00, 0x00];
    frame.resize(5 + (1 << 20), 0);
    let n = send.write(&frame).await.expect("write");
    // Reset, not finished: a finished stream would end the frame early, a connection error.
    let _ = send.reset(0u32.into());
    n
}

/// Whether `fut` is ready at its first poll.
async fn ready_now<F: std::future::Future>(fut: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        r = fut => Some(r),
        _ = std::future::ready(()) => None,
    }
}

const SITE: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    ssl_certificate {certs}/a.test.crt;
    ssl_certificate_key {certs}/a.test.key;
    EXTRA
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        root {dir}/html;
        location /who { return 200 "a $http3\n"; }
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name b.test;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        http3 off;
        location / { return 200 "b\n"; }
    }
}
"#;

fn site(extra: &str) -> String {
    SITE.replace("EXTRA", extra)
}

/// `http3 off` in a block: a client whose SNI names it is refused in the handshake, a request
/// whose Host names it gets 421 (as nginx), and its TCP responses advertise no HTTP/3.
#[test]
fn http3_off_refuses_the_handshake_and_misdirected_requests() {
    let (server, ports) = start("h3c-off", &site(""));
    let port = ports[0];
    rt().block_on(async {
        let ep = client(None);
        let err = quic(&ep, port, "b.test")
            .await
            .expect_err("b.test has http3 off");
        // A TLS alert in a QUIC CONNECTION_CLOSE: 0x100 + access_denied (49).
        match &err {
            quinn::ConnectionError::ConnectionClosed(c) => {
                assert_eq!(c.error_code, quinn::TransportErrorCode::crypto(49), "{err}")
            }
            e => panic!("not a handshake refusal: {e}"),
        }
        let conn = quic(&ep, port, "a.test")
            .await
            .expect("a.test serves HTTP/3");
        let mut send = h3(&conn).await;
        assert_eq!(
            get(&mut send, "a.test", "/who").await.expect("GET a"),
            (200, b"a h3\n".to_vec())
        );
        let (status, _) = get(&mut send, "b.test", "/").await.expect("GET b");
        assert_eq!(status, 421, "Host of a block with http3 off");
    });
    let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap();
    assert!(
        log.contains("for which the negotiated protocol is disabled")
            && log.contains("\"http3\" is off in the server block for SNI \"b.test\""),
        "{log}"
    );
    // Over TCP both blocks answer; only the one serving HTTP/3 advertises it.
    let ca = certs().ca().display().to_string();
    for (name, alt) in [("a.test", true), ("b.test", false)] {
        let url = format!("https://{name}:{port}/who");
        let resolve = format!("{name}:{port}:127.0.0.1");
        let (status, headers, _) = curl_i(&["--cacert", &ca, "--resolve", &resolve, &url]);
        assert_eq!(status, 200);
        assert_eq!(
            header(&headers, "alt-svc").is_some(),
            alt,
            "{name}: {headers:?}"
        );
    }
}

/// `http3_max_concurrent_streams 2`: a client can open two request streams, the third waits
/// until one ends; `http3_stream_buffer_size 16k`: the first write on a stream is held to 16k
/// (the server's stream window). A reload changes them for new connections only.
#[test]
fn stream_limits_are_the_transport_parameters_and_reload() {
    let conf = site("http3_max_concurrent_streams 2;\n    http3_stream_buffer_size 16k;");
    let (server, ports) = start("h3c-streams", &conf);
    let port = ports[0];
    rt().block_on(async {
        let ep = client(None);
        let conn = quic(&ep, port, "a.test").await.expect("h3");
        // Stream credit comes with the handshake: the first two opens are immediate.
        let (mut s1, mut r1) = ready_now(conn.open_bi())
            .await
            .expect("first stream")
            .unwrap();
        let (mut s2, mut r2) = ready_now(conn.open_bi())
            .await
            .expect("second stream")
            .unwrap();
        assert!(
            ready_now(conn.open_bi()).await.is_none(),
            "a third concurrent stream must wait"
        );
        // Both streams end: the server gives the credit back and a request goes through.
        for (s, r) in [(&mut s1, &mut r1), (&mut s2, &mut r2)] {
            let _ = s.reset(0u32.into());
            let _ = r.stop(0u32.into());
        }
        let third = tokio::time::timeout(Duration::from_secs(20), conn.open_bi())
            .await
            .expect("credit returned after the streams ended");
        assert!(third.is_ok());
        drop(third);
        // The first write on a fresh stream is bounded by the server's window for it.
        let conn2 = quic(&ep, port, "a.test").await.expect("h3");
        assert_eq!(
            first_write(&conn2).await,
            16 << 10,
            "http3_stream_buffer_size"
        );
        // Reload with other values: new connections get them, this one keeps its own.
        let text = std::fs::read_to_string(&server.conf).unwrap();
        std::fs::write(
            &server.conf,
            text.replace(
                "http3_stream_buffer_size 16k",
                "http3_stream_buffer_size 32k",
            )
            .replace("http3_max_concurrent_streams 2;", ""),
        )
        .unwrap();
        server.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let c = quic(&ep, port, "a.test").await.expect("h3 after reload");
            let n = first_write(&c).await;
            if n == 32 << 10 {
                // nginx's default of 128 streams again.
                let mut open = Vec::new();
                for _ in 0..127 {
                    open.push(ready_now(c.open_bi()).await.expect("128 streams").unwrap());
                }
                break;
            }
            assert_eq!(n, 16 << 10);
            assert!(
                Instant::now() < deadline,
                "no reload: {}",
                server.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The connection made before the reload still has its 16k windows.
        assert_eq!(first_write(&conn2).await, 16 << 10);
    });
}

/// A UDP relay between one client and a server whose address can change (a restart elsewhere):
/// it counts the server's Retry packets and forwards only the current server's datagrams.
struct Relay {
    port: u16,
    retries: Arc<AtomicUsize>,
    target: Arc<Mutex<SocketAddr>>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(server_port: u16) -> Relay {
        let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let back = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = front.local_addr().unwrap().port();
        let retries = Arc::new(AtomicUsize::new(0));
        let target = Arc::new(Mutex::new(SocketAddr::from(([127, 0, 0, 1], server_port))));
        let (count, to) = (retries.clone(), target.clone());
        let task = tokio::spawn(async move {
            let mut client = None;
            let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
            loop {
                tokio::select! {
                    Ok((n, from)) = front.recv_from(&mut a) => {
                        client = Some(from);
                        let t = *to.lock().unwrap();
                        let _ = back.send_to(&a[..n], t).await;
                    }
                    Ok((n, from)) = back.recv_from(&mut b) => {
                        if from != *to.lock().unwrap() {
                            continue;
                        }
                        if is_retry(&b[..n]) {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(c) = client {
                            let _ = front.send_to(&b[..n], c).await;
                        }
                    }
                }
            }
        });
        Relay {
            port,
            retries,
            target,
            task,
        }
    }

    fn retarget(&self, server_port: u16) {
        *self.target.lock().unwrap() = SocketAddr::from(([127, 0, 0, 1], server_port));
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A QUIC v1 Retry packet: long header, type 3 (RFC 9000 §17.2.5).
fn is_retry(d: &[u8]) -> bool {
    d.len() > 5 && d[0] & 0x80 != 0 && d[1..5] == [0, 0, 0, 1] && (d[0] >> 4) & 3 == 3
}

/// `quic_retry on`: the server answers a client's first Initial with a Retry packet, and the
/// client that comes back with its token is served; off (nginx's default): no Retry.
#[test]
fn quic_retry_validates_the_address_first() {
    let (_off, off_ports) = start("h3c-noretry", &site(""));
    let (_on, on_ports) = start("h3c-retry", &site("quic_retry on;"));
    rt().block_on(async {
        let ep = client(None);
        for (port, retry) in [(off_ports[0], false), (on_ports[0], true)] {
            let relay = Relay::start(port).await;
            let conn = quic(&ep, relay.port, "a.test").await.expect("handshake");
            let mut send = h3(&conn).await;
            assert_eq!(
                get(&mut send, "a.test", "/who").await.expect("GET"),
                (200, b"a h3\n".to_vec())
            );
            assert_eq!(
                relay.retries.load(Ordering::Relaxed),
                usize::from(retry),
                "Retry packets with quic_retry {}",
                if retry { "on" } else { "off" }
            );
        }
    });
}

/// Writes a `quic_host_key` file of `byte`s and returns its path.
fn host_key(dir: &std::path::Path, byte: u8) -> std::path::PathBuf {
    let path = dir.join(format!("quic-{byte}.key"));
    std::fs::write(&path, [byte; 32]).unwrap();
    path
}

/// `quic_host_key`: a server restarted with the same key file recognises nothing of an old
/// connection but sends a stateless reset the client accepts (the token is the same HMAC of
/// the connection ID); without the file each start has its own key, and the client ignores
/// the reset and times out.
#[test]
fn quic_host_key_makes_stateless_resets_survive_a_restart() {
    let keys = TempDir::new("h3c-keys");
    let keys = &keys.0;
    let with_key = site(&format!("quic_host_key {};", host_key(keys, 7).display()));
    rt().block_on(async {
        // The client's idle timeout bounds the case where the reset is not recognised.
        let ep = client(Some(Duration::from_secs(2)));
        for (second, recognised) in [(with_key.as_str(), true), (&site("")[..], false)] {
            // Both servers start before the connection: starting one blocks this thread, which
            // drives the client's timers.
            let (first, ports) = start("h3c-key1", &with_key);
            let (_next, next_ports) = start("h3c-key2", second);
            let relay = Relay::start(ports[0]).await;
            let conn = quic(&ep, relay.port, "a.test").await.expect("handshake");
            let mut send = h3(&conn).await;
            get(&mut send, "a.test", "/who").await.expect("GET");
            // A "restart": the first server is gone, the other answers at the address.
            drop(first);
            relay.retarget(next_ports[0]);
            let _ = get(&mut send, "a.test", "/who").await;
            let reason = tokio::time::timeout(Duration::from_secs(30), conn.closed())
                .await
                .expect("the connection ends");
            if recognised {
                assert!(
                    matches!(reason, quinn::ConnectionError::Reset),
                    "same key: stateless reset, got {reason}"
                );
            } else {
                assert!(
                    matches!(reason, quinn::ConnectionError::TimedOut),
                    "other key: the reset is not the connection's, got {reason}"
                );
            }
        }
    });
}

/// `strace` attached to a running server, tracing its `sendmsg` calls into a file; detached
/// (SIGINT) when dropped.
struct Trace {
    child: std::process::Child,
    path: std::path::PathBuf,
}

impl Trace {
    fn attach(server: &Server, name: &str) -> Trace {
        use std::io::BufRead;
        let path = server.dir.join(name);
        let mut child = std::process::Command::new("strace")
            .args(["-f", "-e", "trace=sendmsg,sendmmsg", "-o"])
            .arg(&path)
            .args(["-p", &server.child.id().to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("strace (Debian's strace package) runs");
        support::reap_at_exit(child.id());
        // "strace: Process N attached with M threads" once it traces every thread.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("attached") {
            line.clear();
            assert!(
                err.read_line(&mut line).expect("strace's stderr") > 0,
                "strace did not attach"
            );
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Trace { child, path }
    }

    /// Detaches and returns (sendmsg calls, those carrying a `UDP_SEGMENT` message).
    fn finish(mut self) -> (usize, usize) {
        self.stop();
        let text = std::fs::read_to_string(&self.path).expect("trace file");
        let calls = text.lines().filter(|l| l.contains("sendmsg(")).count();
        let segmented = text
            .lines()
            .filter(|l| l.contains("sendmsg(") && l.contains("cmsg_level=SOL_UDP"))
            .count();
        (calls, segmented)
    }

    fn stop(&mut self) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        support::forget_at_exit(self.child.id());
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// Downloads `/big.bin` over a new HTTP/3 connection; returns its length.
async fn download(ep: &quinn::Endpoint, port: u16) -> usize {
    let conn = quic(ep, port, "a.test").await.expect("h3");
    let mut send = h3(&conn).await;
    let (status, body) = get(&mut send, "a.test", "/big.bin").await.expect("GET");
    assert_eq!(status, 200);
    conn.close(0u32.into(), b"");
    body.len()
}

/// `quic_gso off` (nginx's default): every packet goes out in a `sendmsg` of its own. `on`
/// (firstbyte's default): the server hands the kernel several packets per call with
/// `UDP_SEGMENT`. A reload switches it for new connections, on the same socket.
#[test]
fn quic_gso_decides_whether_packets_leave_in_batches() {
    let (server, ports) = start("h3c-gso", &site("quic_gso off;"));
    let size = 2 << 20;
    std::fs::write(server.dir.join("html/big.bin"), vec![7u8; size]).unwrap();
    rt().block_on(async {
        let ep = client(None);
        let trace = Trace::attach(&server, "off.trace");
        assert_eq!(download(&ep, ports[0]).await, size);
        let (calls, segmented) = trace.finish();
        // 2 MiB is well over 1,000 packets of at most 1,452 bytes.
        assert!(calls > 1000, "{calls} sendmsg calls");
        assert_eq!(segmented, 0, "quic_gso off: no UDP_SEGMENT");
        let text = std::fs::read_to_string(&server.conf).unwrap();
        std::fs::write(&server.conf, text.replace("quic_gso off;", "")).unwrap();
        server.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !std::fs::read_to_string(server.dir.join("error.log"))
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
        let trace = Trace::attach(&server, "on.trace");
        assert_eq!(download(&ep, ports[0]).await, size);
        let (calls, segmented) = trace.finish();
        assert!(
            segmented > 0 && calls < size / 1500,
            "quic_gso on: {segmented} of {calls} sendmsg calls with UDP_SEGMENT"
        );
    });
}

/// `quic_active_connection_id_limit`: quinn keeps 5 of a client's connection IDs, and the
/// client sees that (it keeps 5 active at the server, not nginx's default 2); any other value
/// is refused at load with the reason.
#[test]
fn quic_active_connection_id_limit_is_what_quinn_advertises() {
    let (_server, ports) = start("h3c-cids", &site("quic_active_connection_id_limit 5;"));
    rt().block_on(async {
        let ep = client(None);
        let conn = quic(&ep, ports[0], "a.test").await.expect("h3");
        let mut send = h3(&conn).await;
        get(&mut send, "a.test", "/who").await.expect("GET");
        // The client fills the server's limit: its handshake ID and NEW_CONNECTION_IDs, less
        // those the server retired (a retransmitted frame can only add to the count).
        let stats = conn.stats();
        let active = 1 + stats.frame_tx.new_connection_id - stats.frame_rx.retire_connection_id;
        assert!(active >= 5, "{stats:?}");
        // More than the limit would be a CONNECTION_ID_LIMIT_ERROR: the connection still serves.
        get(&mut send, "a.test", "/who").await.expect("GET after");
    });
    let tmp = TempDir::new("h3c-cid-t");
    let dir = &tmp.0;
    let path = dir.join("t.conf");
    std::fs::write(
        &path,
        support::render(&site("quic_active_connection_id_limit 2;"), dir, &[8443]),
    )
    .unwrap();
    let out = support::firstbyte(&["-t", "-c", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "[emerg] \"quic_active_connection_id_limit\" 2 cannot be honoured: firstbyte's QUIC stack (quinn) always stores 5 connection IDs of a client and advertises 5; only 5 can be set in {}:7",
            path.display()
        )),
        "{err}"
    );
}

/// `quic_host_key` with a missing, empty or short file: `[emerg]` at `-t`, naming file and line.
#[test]
fn quic_host_key_files_are_checked_at_load() {
    let tmp = TempDir::new("h3c-key-t");
    let dir = &tmp.0;
    let path = dir.join("t.conf");
    std::fs::write(dir.join("empty.key"), b"").unwrap();
    std::fs::write(dir.join("short.key"), b"0123456789").unwrap();
    std::fs::write(dir.join("good.key"), [3u8; 32]).unwrap();
    for (file, want) in [
        ("missing.key", None),
        ("empty.key", Some("zero key size")),
        ("short.key", Some("is too short a key (10 bytes")),
        ("good.key", None),
    ] {
        // Relative: against the configuration's directory, as nginx.
        let conf = support::render(&site(&format!("quic_host_key {file};")), dir, &[8443]);
        std::fs::write(&path, conf).unwrap();
        let out = support::firstbyte(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        let at = format!("in {}:7", path.display());
        match (file, want) {
            ("good.key", _) => assert!(out.status.success(), "{err}"),
            ("missing.key", _) => assert!(
                !out.status.success()
                    && err.contains(&format!(
                        "[emerg] open() \"{}\" failed (2: No such file or directory) {at}",
                        dir.join(file).display()
                    )),
                "{err}"
            ),
            (_, Some(w)) => assert!(
                !out.status.success()
                    && err.contains(&format!("[emerg] \"{}\" {w}", dir.join(file).display()))
                    && err.contains(&at),
                "{err}"
            ),
            _ => unreachable!(),
        }
    }
}
