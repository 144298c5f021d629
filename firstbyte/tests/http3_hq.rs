//! `http3_hq on`: HTTP/0.9 over QUIC (ALPN `hq-interop`, the QUIC interop runner's protocol).
//! A raw quinn client opens a stream per request, sends `GET /path` and reads the body to the
//! stream's end; the requests obey the locations' access rules and are logged as nginx logs
//! HTTP/0.9 requests.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use support::{certs, Server};

/// A QUIC client endpoint that trusts the tests' CA and offers only `alpn`.
fn client(alpn: &[u8]) -> quinn::Endpoint {
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
    tls.alpn_protocols = vec![alpn.to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

async fn connect(ep: &quinn::Endpoint, port: u16) -> Result<quinn::Connection, String> {
    connect_to(ep, port, "a.test").await
}

async fn connect_to(
    ep: &quinn::Endpoint,
    port: u16,
    sni: &str,
) -> Result<quinn::Connection, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    ep.connect(addr, sni)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())
}

/// Sends `line` on a new stream; the bytes that come back until the stream ends, or the
/// error that ended it (a reset).
async fn hq(conn: &quinn::Connection, line: &[u8]) -> Result<Vec<u8>, String> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(line).await.map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    recv.read_to_end(1 << 20).await.map_err(|e| e.to_string())
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
    log_format hq '$request|$server_protocol|$status|$http3|$body_bytes_sent';
    access_log {dir}/access.log hq;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name a.test;
        http3_hq on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
        location /who { return 200 "[$server_protocol] [$request] [$http3] [$ssl_alpn_protocol]\n"; }
        location /private/ { deny all; }
        location /gone { return 444; }
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name b.test;
        http3 off;
        http3_hq on;
        ssl_certificate {certs}/b.test.crt;
        ssl_certificate_key {certs}/b.test.key;
        location / { return 200 "b $http3\n"; }
    }
}
"#;

#[test]
fn hq_interop_serves_http09_through_the_pipeline() {
    let (server, ports) = Server::start("h3-hq", CONF, 1);
    let port = ports[0];
    std::fs::create_dir_all(server.dir.join("html/private")).expect("mkdir");
    std::fs::write(server.dir.join("html/private/secret"), "secret\n").expect("write");
    rt().block_on(async {
        let ep = client(b"hq-interop");
        let conn = connect(&ep, port).await.expect("hq handshake");
        assert_eq!(
            conn.handshake_data()
                .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
                .and_then(|d| d.protocol),
            Some(b"hq-interop".to_vec())
        );
        // The body alone: no status line, no headers.
        let body = hq(&conn, b"GET /index.html\r\n").await.expect("GET");
        assert_eq!(body, b"<h1>hello from firstbyte</h1>\n");
        let body = hq(&conn, b"GET /who\r\n").await.expect("GET /who");
        assert_eq!(
            String::from_utf8_lossy(&body),
            "[] [GET /who] [hq] [hq-interop]\n"
        );
        // `deny all`: nginx's 403 page as the body, as HTTP/0.9 has no status line.
        let body = hq(&conn, b"GET /private/secret\r\n")
            .await
            .expect("GET denied");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("403 Forbidden"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        // A method other than GET: 400, as nginx's HTTP/0.9 parser.
        let body = hq(&conn, b"POST /index.html\r\n").await.expect("POST");
        assert!(String::from_utf8_lossy(&body).contains("400 Bad Request"));
        // 444: the stream is reset.
        let gone = hq(&conn, b"GET /gone\r\n").await;
        assert!(gone.is_err(), "444 resets the stream: {gone:?}");
        let body = hq(&conn, b"GET /missing\r\n").await.expect("GET 404");
        assert!(String::from_utf8_lossy(&body).contains("404 Not Found"));
        conn.close(0u32.into(), b"");
        // A block with `http3 off` and `http3_hq on` speaks hq alone, as nginx: its SNI with
        // h3 alone is refused in the handshake.
        let b = connect_to(&ep, port, "b.test").await.expect("hq to b.test");
        let body = hq(&b, b"GET /\r\n").await.expect("GET b");
        assert_eq!(body, b"b hq\n");
        b.close(0u32.into(), b"");
        let h3 = client(b"h3");
        let refused = connect_to(&h3, port, "b.test").await;
        assert!(refused.is_err(), "h3 to an http3-off block: {refused:?}");
        ep.wait_idle().await;
    });
    let log = std::fs::read_to_string(server.dir.join("access.log")).expect("access log");
    assert!(log.contains("GET /index.html||200|hq|30\n"), "{log}");
    assert!(log.contains("GET /private/secret||403|hq|"), "{log}");
    assert!(log.contains("GET /missing||404|hq|"), "{log}");
    assert!(log.contains("|400|hq|"), "{log}");
    let errors = std::fs::read_to_string(server.dir.join("error.log")).expect("error log");
    assert!(errors.contains("access forbidden by rule"), "{errors}");
}

#[test]
fn hq_is_offered_only_with_http3_hq_on() {
    let conf = CONF.replace("http3_hq on;", "");
    let (_server, ports) = Server::start("h3-hq-off", &conf, 1);
    rt().block_on(async {
        let hq_only = client(b"hq-interop");
        // Refused in the handshake (the block speaks no protocol the client offers).
        let e = connect(&hq_only, ports[0]).await.expect_err("no hq");
        assert!(e.contains("cryptographic handshake failed"), "{e}");
        // h3 is served as before.
        let h3 = client(b"h3");
        connect(&h3, ports[0]).await.expect("h3 handshake");
    });
}
