//! Test fixtures for the TLS layer: keys and certificates made with rcgen at test time, and an
//! in-memory handshake that drives a rustls client against a server config with no sockets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, NamedGroup, ServerConfig, ServerConnection, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;

/// The provider every test uses (as production does).
pub fn provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// A self-signed ECDSA P-256 certificate and its PKCS#8 key, as PEM.
pub fn ecdsa_pem(names: &[&str]) -> (String, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).expect("rcgen");
    (ck.cert.pem(), ck.signing_key.serialize_pem())
}

/// A self-signed RSA-2048 certificate and its PKCS#8 key, as PEM.
pub fn rsa_pem(names: &[&str]) -> (String, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let kp = rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
        .expect("rsa keygen");
    let cert = rcgen::CertificateParams::new(names)
        .expect("params")
        .self_signed(&kp)
        .expect("sign");
    (cert.pem(), kp.serialize_pem())
}

/// `key_pem` (PKCS#8) encrypted with `password`: PBES2, PBKDF2-SHA256 (2048 rounds,
/// OpenSSL's default), AES-256-CBC — what `openssl pkcs8 -topk8 -v2 aes-256-cbc` writes.
pub fn encrypt_pkcs8(key_pem: &str, password: &[u8]) -> String {
    let der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key");
    let info = pkcs8::PrivateKeyInfo::try_from(der.secret_der()).expect("pkcs8");
    let salt = [7u8; 16];
    let iv = [9u8; 16];
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &salt, &iv).expect("params");
    let doc = info.encrypt_with_params(params, password).expect("encrypt");
    doc.to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
        .expect("pem")
        .to_string()
}

/// The client-side verifier of TLS tests: accepts any server certificate (fixtures are
/// self-signed) but checks handshake signatures (the crate's one, `proxy_ssl_verify off`'s).
pub use super::client::AnyServerCert;

/// [`AnyServerCert`] offering every scheme the test provider verifies.
pub fn any_server_cert() -> Arc<AnyServerCert> {
    AnyServerCert::new(Arc::new(provider()))
}

/// [`AnyServerCert`] offering only the schemes `keep` accepts.
pub fn any_server_cert_only(keep: impl Fn(SignatureScheme) -> bool) -> Arc<AnyServerCert> {
    AnyServerCert::only(Arc::new(provider()), keep)
}

/// A client session store that counts the TLS 1.3 tickets it receives.
#[derive(Debug)]
pub struct CountingStore {
    inner: ClientSessionMemoryCache,
    /// NewSessionTicket messages received.
    pub tickets: AtomicUsize,
}

impl CountingStore {
    /// An empty store.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: ClientSessionMemoryCache::new(64),
            tickets: AtomicUsize::new(0),
        })
    }

    /// Tickets received so far.
    pub fn count(&self) -> usize {
        self.tickets.load(Ordering::SeqCst)
    }
}

impl ClientSessionStore for CountingStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group)
    }
    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }
    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(server_name, value)
    }
    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }
    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name)
    }
    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        self.tickets.fetch_add(1, Ordering::SeqCst);
        self.inner.insert_tls13_ticket(server_name, value)
    }
    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(server_name)
    }
}

/// A client config for tests: the given provider and versions, any server certificate.
pub fn client_config(
    provider: CryptoProvider,
    versions: &[&'static rustls::SupportedProtocolVersion],
    verifier: Arc<AnyServerCert>,
) -> ClientConfig {
    ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth()
}

/// Runs a full handshake in memory (and delivers post-handshake tickets to the client).
pub fn handshake(
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
) -> Result<(ClientConnection, ServerConnection), rustls::Error> {
    let name = ServerName::try_from("localhost").expect("name");
    let mut c = ClientConnection::new(client, name)?;
    let mut s = ServerConnection::new(server)?;
    for _ in 0..10 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).expect("client write");
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).expect("server read");
        }
        let server_result = s.process_new_packets();
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).expect("server write");
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).expect("client read");
        }
        server_result?;
        c.process_new_packets()?;
        if !c.is_handshaking() && !s.is_handshaking() && !s.wants_write() && !c.wants_write() {
            return Ok((c, s));
        }
    }
    Err(rustls::Error::General("handshake did not finish".into()))
}
