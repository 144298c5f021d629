//! Server-core gaps (issue 2): `sendfile` + `tcp_nopush` on plain HTTP/1.1, `send_timeout`,
//! `client_body_timeout`, `keepalive_requests` on HTTP/2, nginx's 421, and socket options read
//! back from accepted connections. Real binary, real clients (curl and raw sockets); timing
//! bounds are seconds wide against a 1 s timeout so they never flake.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::*;

/// A file body whose every byte says where it is (so a misplaced range shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// Bytes the error log says went out with `sendfile` (nginx's debug line
/// `sendfile: SENT of COUNT @OFFSET`).
fn sendfile_bytes(log: &str) -> u64 {
    log.lines()
        .filter_map(|l| l.split("sendfile: ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn error_log(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default()
}

const SENDFILE_CONF: &str = r#"
pid off;
error_log {dir}/error.log debug;
events {}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/html;
        sendfile off;
    }
}
"#;

#[test]
fn sendfile_sends_static_files_without_reading_them() {
    let (server, ports) = Server::start("sendfile", SENDFILE_CONF, 2);
    let size = 3 * 1024 * 1024 + 12_345;
    let data = pattern(size);
    std::fs::write(server.dir.join("html/big.bin"), &data).unwrap();
    let url = |p: u16| format!("http://127.0.0.1:{p}/big.bin");

    // Whole file: right bytes, and every byte counted by a sendfile call.
    let before = sendfile_bytes(&error_log(&server));
    let (code, _, body) = curl_i(&["--http1.1", &url(ports[0])]);
    assert_eq!(code, 200);
    assert!(body == data, "body differs ({} bytes)", body.len());
    let log = error_log(&server);
    assert_eq!(
        sendfile_bytes(&log) - before,
        size as u64,
        "not all by sendfile"
    );
    // tcp_nopush: corked before the head, uncorked after the file.
    let cork_on = log.find("TCP_CORK 1").expect("corked");
    let first_sendfile = log.find("sendfile: ").expect("sendfile line");
    let cork_off = log.rfind("TCP_CORK 0").expect("uncorked");
    assert!(cork_on < first_sendfile && first_sendfile < cork_off);

    // A range: the range's bytes, by sendfile.
    let before = sendfile_bytes(&error_log(&server));
    let (code, h, body) = curl_i(&["--http1.1", "-r", "1000000-1999999", &url(ports[0])]);
    assert_eq!(code, 206);
    assert_eq!(
        header(&h, "content-range"),
        Some(&*format!("bytes 1000000-1999999/{size}"))
    );
    assert!(body == data[1_000_000..2_000_000], "range body differs");
    assert_eq!(sendfile_bytes(&error_log(&server)) - before, 1_000_000);

    // HEAD: the head, no body, no sendfile.
    let before = sendfile_bytes(&error_log(&server));
    let (code, h, body) = curl_i(&["--http1.1", "-I", &url(ports[0])]);
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-length"), Some(&*size.to_string()));
    assert!(body.is_empty());
    assert_eq!(sendfile_bytes(&error_log(&server)), before);

    // Pipelined requests on one connection: each response's file in its place.
    std::fs::write(server.dir.join("html/small.txt"), b"small file\n").unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    s.write_all(
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut all = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_to_end(&mut all).unwrap();
    let mut rest = &all[..];
    for want in [&b"small file\n"[..], &data[..], &b"small file\n"[..]] {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("head")
            + 4;
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", want.len())),
            "{head}"
        );
        assert!(
            &rest[end..end + want.len()] == want,
            "pipelined body differs"
        );
        rest = &rest[end + want.len()..];
    }
    assert!(rest.is_empty());

    // HTTP/2 and `sendfile off` keep reading the file (no sendfile line).
    let before = sendfile_bytes(&error_log(&server));
    let (code, _, body) = curl_i(&["--http1.1", &url(ports[1])]);
    assert_eq!(code, 200);
    assert!(body == data);
    assert_eq!(
        sendfile_bytes(&error_log(&server)),
        before,
        "sendfile off used sendfile"
    );
}

/// Polls `stub_status` (on `port`) until only the poller's own connection is active;
/// returns when that happened, or `None` within `limit`.
fn connections_gone(port: u16, limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let out = curl(&["--http1.1", &format!("http://127.0.0.1:{port}/status")]);
        let text = String::from_utf8_lossy(&out.stdout);
        if text.starts_with("Active connections: 1 ") {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

const TIMEOUT_CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    keepalive_timeout 30s;
    send_timeout 1s;
    client_body_timeout 1s;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        sendfile on;
        location = /status { stub_status; }
        location /up { proxy_pass http://127.0.0.1:{upstream}; }
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/html;
        sendfile off;
    }
}
"#;

/// A client that asks for a big file and then reads nothing: closed after `send_timeout`.
fn stalled_reader(port: u16, status_port: u16) -> (Duration, usize) {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    // A small receive window: the server's writes block within a few hundred KB.
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let asked = Instant::now();
    let gone = connections_gone(status_port, Duration::from_secs(8)).expect("connection closed");
    let mut got = 0;
    let mut buf = vec![0u8; 1 << 16];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    (gone - asked, got)
}

#[test]
fn send_timeout_and_client_body_timeout() {
    // An upstream that accepts and reads, and never answers.
    let up_port = silent_upstream();
    let conf = TIMEOUT_CONF.replace("{upstream}", &up_port.to_string());
    let (server, ports) = Server::start("sendtimeout", &conf, 2);
    let size = 64 * 1024 * 1024;
    let f = std::fs::File::create(server.dir.join("html/huge.bin")).unwrap();
    f.set_len(size as u64).unwrap();

    // send_timeout, with sendfile and with the read-and-write path.
    for port in [ports[0], ports[1]] {
        let (t, got) = stalled_reader(port, ports[0]);
        assert!(
            t >= Duration::from_millis(800) && t < Duration::from_secs(3),
            "closed after {t:?} (port {port})"
        );
        assert!(got < size, "the whole file arrived: not closed");
    }
    assert!(error_log(&server)
        .contains("client timed out (110: Connection timed out) while sending response to client"));

    // client_body_timeout: part of a body, then nothing: 408 and closed.
    let mut s = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    s.write_all(b"POST /up/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
        .unwrap();
    let sent = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let t = sent.elapsed();
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        t >= Duration::from_millis(800) && t < Duration::from_secs(3),
        "closed after {t:?}"
    );

    // A body that keeps coming, slower than the whole timeout but never stalling for it, is
    // not cut (the limit is between two reads, not for the whole body).
    let mut s = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    s.write_all(b"POST /up/y HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        s.write_all(b"ab").unwrap();
    }
    // The upstream never answers: the request is still open (no 408) well after 1 s.
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 64];
    let r = s.read(&mut b);
    assert!(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "answered early: {r:?} after {:?}",
        start.elapsed()
    );
}

const KEEPALIVE_CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    keepalive_requests 2;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
    }
    server {
        listen 127.0.0.1:{port1};
        http2 on;
        root {dir}/html;
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        http2 on;
        keepalive_requests 1000;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
    }
}
"#;

/// Fetches `url` `n` times in one curl run; returns the connections curl opened.
fn connects(proto: &str, url: &str, n: usize) -> u32 {
    let mut args = vec![proto, "-w", "%{http_code} %{num_connects}\n"];
    for _ in 0..n {
        args.extend(["-o", "/dev/null", url]);
    }
    args.insert(0, "--cacert");
    let ca = certs().ca().display().to_string();
    args.insert(1, &ca);
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut total = 0;
    let mut lines = 0;
    for l in text.lines() {
        let (code, c) = l.split_once(' ').expect("curl -w line");
        assert_eq!(
            code,
            "200",
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        total += c.parse::<u32>().unwrap();
        lines += 1;
    }
    assert_eq!(lines, n, "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    total
}

#[test]
fn keepalive_requests_closes_http2_and_http1_connections() {
    let (_server, ports) = Server::start("keepalive-req", KEEPALIVE_CONF, 3);
    let tls = format!("https://localhost:{}/index.html", ports[0]);
    let many = format!("https://localhost:{}/index.html", ports[2]);
    // keepalive_requests 2. HTTP/1.1: `Connection: close` on the 2nd response, so six
    // requests take exactly three connections.
    assert_eq!(
        connects("--http1.1", &tls, 6),
        3,
        "HTTP/1.1: Connection: close after 2"
    );
    // HTTP/2: GOAWAY as the 2nd request starts, naming it as the last stream; a request the
    // client sent before the GOAWAY arrived is retried on a new connection: at least two
    // connections, never all six on one.
    let n = connects("--http2", &tls, 6);
    assert!((2..=3).contains(&n), "HTTP/2 over TLS: {n} connections");
    // The default (1000) keeps one connection.
    assert_eq!(connects("--http2", &many, 6), 1);
    // h2c (curl 7.88 cannot reuse a prior-knowledge connection): hyper's client.
    assert!(
        h2c_closes_after_two(ports[1]),
        "h2c: no GOAWAY after 2 requests"
    );
}

/// Two requests on one h2c connection, then waits for the server to end the connection.
fn h2c_closes_after_two(port: u16) -> bool {
    use http_body_util::{BodyExt, Empty};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let (mut send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap();
        let conn = tokio::spawn(conn);
        for _ in 0..2 {
            let req = http::Request::get(format!("http://127.0.0.1:{port}/index.html"))
                .body(Empty::<bytes::Bytes>::new())
                .unwrap();
            let resp = send.send_request(req).await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.into_body().collect().await.unwrap();
        }
        // keepalive_timeout is 75 s: only the GOAWAY can end the connection this soon.
        matches!(
            tokio::time::timeout(Duration::from_secs(3), conn).await,
            Ok(Ok(Ok(())))
        )
    })
}

const MISDIRECTED_CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl default_server;
        http2 on;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        return 200 "a\n";
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name b.test;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        ssl_verify_client optional;
        ssl_client_certificate {certs}/ca.crt;
        return 200 "b\n";
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name c.a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        ssl_verify_client optional;
        ssl_client_certificate {certs}/ca.crt;
        return 200 "c\n";
    }
}
"#;

#[test]
fn misdirected_request_421() {
    let (server, ports) = Server::start("misdirected", MISDIRECTED_CONF, 1);
    let port = ports[0];
    let ca = certs().ca().display().to_string();
    let get = |proto: &str, sni: &str, host: &str| -> (u16, String) {
        let resolve = format!("{sni}:{port}:127.0.0.1");
        let url = format!("https://{sni}:{port}/");
        let host_h = format!("Host: {host}");
        let (code, _, body) = curl_i(&[
            proto,
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            "-H",
            &host_h,
            &url,
        ]);
        (code, String::from_utf8_lossy(&body).into_owned())
    };
    for proto in ["--http1.1", "--http2"] {
        // SNI chose a server without client checks; Host asks for one with them: 421.
        assert_eq!(get(proto, "a.test", "b.test").0, 421, "{proto}");
        // Host equal to SNI, or a Host whose server has no client checks: served.
        assert_eq!(
            get(proto, "b.test", "b.test"),
            (200, "b\n".into()),
            "{proto}"
        );
        assert_eq!(
            get(proto, "a.test", "a.test"),
            (200, "a\n".into()),
            "{proto}"
        );
        assert_eq!(
            get(proto, "b.test", "a.test"),
            (200, "a\n".into()),
            "{proto}"
        );
        // Same checks as the handshake made (same mode, same CA): served (nginx 1.22 would
        // say 421; see `pipeline::misdirected`).
        assert_eq!(
            get(proto, "b.test", "c.a.test"),
            (200, "c\n".into()),
            "{proto}"
        );
    }
    assert!(error_log(&server).contains(
        "client attempted to request the server name different from the one that was negotiated"
    ));
}

const SOCKOPT_CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    tcp_notsent_lowat 16k;
    tcp_congestion bbr;
    server {
        listen 127.0.0.1:{port0};
        location / { connection_info; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        http2 on;
        tcp_notsent_lowat 4k;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / { connection_info; }
    }
}
"#;

#[test]
fn notsent_lowat_and_congestion_apply_to_accepted_connections() {
    let (_server, ports) = Server::start("sockopts", SOCKOPT_CONF, 2);
    let ca = certs().ca().display().to_string();
    let cases = [
        (
            format!("http://127.0.0.1:{}/?format=json", ports[0]),
            "--http1.1",
            16384,
        ),
        (
            format!("https://localhost:{}/?format=json", ports[1]),
            "--http2",
            4096,
        ),
    ];
    for (url, proto, lowat) in cases {
        let (code, _, body) = curl_i(&[proto, "--cacert", &ca, &url]);
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["tcp_notsent_lowat"], lowat, "{v}");
        assert_eq!(v["tcp_congestion"], "bbr", "{v}");
        // The fields the page always had are still there.
        for k in [
            "tls_version",
            "cipher",
            "group",
            "alpn",
            "resumed",
            "rtt_us",
            "cwnd",
            "record_policy",
        ] {
            assert!(v.get(k).is_some(), "{k} missing: {v}");
        }
    }
}
