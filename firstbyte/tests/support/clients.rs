//! Client-side credentials for tests: a rustls client trusting the test CA, and client
//! certificates.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// A rustls client (aws-lc-rs) trusting the test CA, offering `alpn`.
pub fn rust_client_config(alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(super::certs().ca()).expect("CA file") {
        roots.add(c.expect("CA certificate")).expect("add CA");
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// In `dir`: `client.crt`/`client.key` (subject `/O=Acme, Inc/CN=client one`, signed by the
/// test CA, `clientAuth`), and `stranger.crt`/`stranger.key` (self-signed).
pub fn client_certs(dir: &Path) {
    let c = super::certs();
    let script = format!(
        r#"
set -e
cd {d}
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=Acme, Inc/CN=client one" -keyout client.key -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA {ca} -CAkey {cakey} -CAcreateserial -CAserial ca.srl -days 2 -extfile client.ext -out client.crt 2>/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=stranger -keyout stranger.key -out stranger.crt 2>/dev/null
"#,
        d = dir.display(),
        ca = c.ca().display(),
        cakey = c.dir.join("ca.key").display()
    );
    let out = Command::new("sh")
        .arg("-ec")
        .arg(&script)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "client certificates: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An HTTP/2 client over TLS (ALPN `h2`, trusting the test CA, SNI `localhost`) to
/// 127.0.0.1:`port`, and its connection task. `window`: the client's initial stream window
/// (None: h2's default).
pub async fn h2_tls_client(
    port: u16,
    window: Option<u32>,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let tls = tokio_rustls::TlsConnector::from(rust_client_config(&[b"h2"]))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let mut b = h2::client::Builder::new();
    if let Some(w) = window {
        b.initial_window_size(w);
    }
    let (send, conn) = b.handshake(tls).await.expect("h2 handshake");
    (send, tokio::spawn(conn))
}

/// Accepts any server certificate but checks the handshake signature (for servers with a
/// throwaway self-signed certificate).
#[derive(Debug)]
pub struct AnyCert(pub Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls_pki_types::CertificateDer<'_>,
        _: &[rustls_pki_types::CertificateDer<'_>],
        _: &rustls_pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls_pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls_pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `openssl s_client -connect 127.0.0.1:PORT -ign_eof ARGS`, sending one
/// `GET / HTTP/1.1` with `Connection: close` and reading until the server closes (so TLS 1.3
/// tickets that follow the handshake are read, and saved with `-sess_out`); its output.
#[allow(dead_code)]
pub fn s_client_get(port: u16, args: &[&std::ffi::OsStr]) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut c = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-ign_eof",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    let mut stdin = c.stdin.take().expect("stdin");
    stdin
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("request");
    drop(stdin);
    c.wait_with_output().expect("openssl")
}
