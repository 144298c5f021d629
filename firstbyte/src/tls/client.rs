//! rustls client configs for HTTPS upstreams (`proxy_ssl_*`).
//!
//! One [`client_config`] per distinct set of `proxy_ssl_*` values in a load; every file goes
//! through the load's [`ObjectStore`], so 10,000 locations naming one client certificate
//! parse it once. Verification follows nginx: off by default (any certificate is accepted,
//! as `proxy_ssl_verify off`), and when on, the chain must lead to
//! `proxy_ssl_trusted_certificate` (nginx has no default trust store either) and match
//! `proxy_ssl_name`, with `proxy_ssl_crl` checked. Sessions are resumed by rustls' in-memory
//! client cache unless `proxy_ssl_session_reuse off`. Only the aws-lc-rs provider is used.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::error::TlsError;
use super::store::ObjectStore;
use crate::conf::model::{CertKey, Pos, ProxySsl, Source, TlsVersion};

/// Accepts any server certificate for any name, still checking the handshake's signatures
/// (so a broken handshake fails): `proxy_ssl_verify off`, and the client side of the unit
/// tests, whose fixtures are self-signed (`tls::testutil`). The one such verifier in the crate.
#[derive(Debug)]
pub struct AnyServerCert {
    provider: Arc<CryptoProvider>,
    /// The signature schemes offered (and checked).
    schemes: Vec<SignatureScheme>,
    /// The OCSP response stapled in the last handshake (tests of `ssl_stapling`).
    #[cfg(test)]
    ocsp: std::sync::Mutex<Vec<u8>>,
}

impl AnyServerCert {
    /// Offers every signature scheme `provider` verifies.
    pub fn new(provider: Arc<CryptoProvider>) -> Arc<Self> {
        Self::only(provider, |_| true)
    }

    /// Offers the schemes `keep` accepts (e.g. no ECDSA: an RSA-only client).
    pub fn only(
        provider: Arc<CryptoProvider>,
        keep: impl Fn(SignatureScheme) -> bool,
    ) -> Arc<Self> {
        let schemes = provider
            .signature_verification_algorithms
            .supported_schemes()
            .into_iter()
            .filter(|s| keep(*s))
            .collect();
        Arc::new(Self {
            provider,
            schemes,
            #[cfg(test)]
            ocsp: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The OCSP response stapled in the last handshake (empty if none).
    #[cfg(test)]
    pub fn last_ocsp(&self) -> Vec<u8> {
        self.ocsp.lock().expect("lock").clone()
    }
}

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        #[cfg(test)]
        {
            *self.ocsp.lock().expect("lock") = _ocsp.to_vec();
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::chain::tls12_signature(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::chain::tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// Always offers one client certificate (`proxy_ssl_certificate`).
struct OneClientCert(Arc<CertifiedKey>);

impl fmt::Debug for OneClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OneClientCert")
    }
}

impl ResolvesClientCert for OneClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// What every client config of one `proxy_ssl_*` setting shares: protocols, the verifier
/// (trusted certificates and CRLs read once, through the load's store), SNI and resumption.
/// A `proxy_ssl_certificate` with variables makes one config per evaluated pair from it at
/// request time, with no file read but the pair's own.
#[derive(Clone)]
pub struct ClientBase {
    provider: Arc<CryptoProvider>,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    verifier: Arc<dyn ServerCertVerifier>,
    sni: bool,
    session_reuse: bool,
}

impl fmt::Debug for ClientBase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBase")
            .field("versions", &self.versions.len())
            .field("sni", &self.sni)
            .field("session_reuse", &self.session_reuse)
            .finish_non_exhaustive()
    }
}

impl ClientBase {
    /// The shared part of `ssl`'s client configs; CA and CRL files go through `store`.
    pub fn new(ssl: &ProxySsl, store: &mut ObjectStore) -> Result<ClientBase, TlsError> {
        let provider = store.provider().clone();
        let mut versions = Vec::with_capacity(2);
        if ssl.protocols.contains(&TlsVersion::Tls13) {
            versions.push(&rustls::version::TLS13);
        }
        if ssl.protocols.contains(&TlsVersion::Tls12) {
            versions.push(&rustls::version::TLS12);
        }
        if versions.is_empty() {
            return Err(TlsError::NoProtocols);
        }
        let verifier: Arc<dyn ServerCertVerifier> = if ssl.verify {
            // Without `proxy_ssl_trusted_certificate` nothing is trusted, as in nginx.
            let anchors = match &ssl.trusted_certificate {
                Some(p) => store.ca_file(p)?.1.to_vec(),
                None => Vec::new(),
            };
            let crls = match &ssl.crl {
                Some(crl) => Some(store.crls(crl)?),
                None => None,
            };
            let chain = super::chain::ChainVerifier::new(
                super::chain::Purpose::Server,
                anchors,
                crls.as_deref().map(Vec::as_slice),
                ssl.verify_depth,
                Vec::new(),
                provider.clone(),
            )
            .map_err(|e| TlsError::Rustls(rustls::Error::General(e)))?;
            Arc::new(super::upstream_verify::UpstreamVerifier::new(
                chain,
                provider.clone(),
            ))
        } else {
            AnyServerCert::new(provider.clone())
        };
        Ok(ClientBase {
            provider,
            versions,
            verifier,
            sni: ssl.server_name,
            session_reuse: ssl.session_reuse,
        })
    }

    /// A client config offering `client` as the client certificate (none: no client auth).
    pub fn config(&self, client: Option<Arc<CertifiedKey>>) -> Result<Arc<ClientConfig>, TlsError> {
        let builder = ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&self.versions)?
            .dangerous()
            .with_custom_certificate_verifier(self.verifier.clone());
        let mut config = match client {
            Some(ck) => builder.with_client_cert_resolver(Arc::new(OneClientCert(ck))),
            None => builder.with_no_client_auth(),
        };
        config.enable_sni = self.sni;
        // As nginx's upstream contexts: no certificate compression either way
        // (`SSL_OP_NO_RX_CERTIFICATE_COMPRESSION`, `..._TX_...`).
        config.cert_decompressors = Vec::new();
        config.cert_compressors = Vec::new();
        if !self.session_reuse {
            config.resumption = Resumption::disabled();
        }
        Ok(Arc::new(config))
    }

    /// The crypto provider (aws-lc-rs).
    pub fn provider(&self) -> &Arc<CryptoProvider> {
        &self.provider
    }
}

/// The client config for `ssl` with its static client certificate, if any (a
/// `proxy_ssl_certificate` with variables is loaded per request: see [`ClientBase`]).
pub fn client_config(
    ssl: &ProxySsl,
    store: &mut ObjectStore,
) -> Result<Arc<ClientConfig>, TlsError> {
    let base = ClientBase::new(ssl, store)?;
    let client = match (&ssl.certificate, &ssl.certificate_key) {
        (Some(cert), Some(key)) => Some(store.certified_key(
            &CertKey {
                cert: cert.clone(),
                key: key.clone(),
                pos: Pos {
                    file: Arc::new(std::path::PathBuf::new()),
                    line: 0,
                },
            },
            ssl.password_file.as_deref(),
            None,
        )?),
        _ => None,
    };
    base.config(client)
}

/// The name the upstream's certificate is checked against (and sent as SNI when enabled):
/// `proxy_ssl_name`, else the `proxy_pass` host, without a port in either, as nginx's
/// `ngx_http_upstream_ssl_name` (`proxy_ssl_name backend:123` checks and sends `backend`).
/// An IP address (`[::1]` as `::1`) is checked as one and sent as no SNI.
pub fn upstream_server_name(ssl: &ProxySsl, host: &str) -> Result<ServerName<'static>, TlsError> {
    let given = ssl.name.as_deref().unwrap_or(host);
    let bare = strip_port(given)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| TlsError::ServerName(given.to_string()))
}

/// The name before its port, as nginx cuts it: at the first `:` (after the `]` of a
/// bracketed IPv6 address).
fn strip_port(host: &str) -> &str {
    let from = match host.starts_with('[') {
        true => host.find(']').unwrap_or(0),
        false => 0,
    };
    match host[from..].find(':') {
        Some(i) => &host[..from + i],
        None => host,
    }
}

/// The `Source` of a certificate path evaluated from variables.
pub fn file_source(path: &str) -> Source {
    match path.strip_prefix("data:") {
        Some(pem) => Source::Data(pem.to_string()),
        None => Source::File(path.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::CertificateCache;

    /// One certificate for every handshake (rustls' own resolvers check the key against the
    /// leaf through webpki, which refuses X.509 v1).
    #[derive(Debug)]
    struct Fixed(Arc<CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Fixed {
        fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    /// `proxy_ssl_verify off` takes an X.509 v1 server certificate (what `openssl req -x509`
    /// makes without extensions), as nginx: webpki refuses to parse one, so the handshake's
    /// signature is checked against the key x509-parser reads; a wrong signature still fails.
    #[test]
    fn any_server_cert_takes_x509_v1_and_still_checks_the_signature() {
        use crate::tls::testutil;
        macro_rules! fixture {
            ($name:literal) => {
                include_bytes!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../testdata/tls/",
                    $name
                ))
            };
        }
        let p = testutil::provider();
        let chain = super::super::certs::parse_chain(fixture!("ec-v1.crt")).expect("v1");
        let key = super::super::certs::parse_key(fixture!("ec.key"), None, &p).expect("key");
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(testutil::provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Fixed(Arc::new(CertifiedKey::new(
                chain.clone(),
                key,
            )))));
        let server = Arc::new(server);
        for v in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let client =
                testutil::client_config(testutil::provider(), &[v], testutil::any_server_cert());
            testutil::handshake(server.clone(), Arc::new(client)).expect("handshake");
        }
        // The v1 certificate with another key than the one that signs: refused.
        let rsa = super::super::certs::parse_key(fixture!("rsa-pkcs1.key"), None, &p).expect("rsa");
        let wrong = rustls::ServerConfig::builder_with_provider(Arc::new(testutil::provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Fixed(Arc::new(CertifiedKey::new(chain, rsa)))));
        let client = testutil::client_config(
            testutil::provider(),
            &[&rustls::version::TLS13],
            testutil::any_server_cert(),
        );
        assert!(testutil::handshake(Arc::new(wrong), Arc::new(client)).is_err());
    }

    fn ssl() -> ProxySsl {
        ProxySsl {
            certificate: None,
            certificate_key: None,
            password_file: None,
            trusted_certificate: None,
            crl: None,
            verify_depth: 1,
            verify: false,
            server_name: false,
            name: None,
            session_reuse: true,
            protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            dynamic: None,
            certificate_cache: CertificateCache::Off,
        }
    }

    #[test]
    fn names_and_defaults() {
        let s = ssl();
        assert_eq!(
            upstream_server_name(&s, "backend.test:8443").expect("name"),
            ServerName::try_from("backend.test").expect("n")
        );
        assert!(upstream_server_name(&s, "[::1]:443").is_ok());
        assert_eq!(
            upstream_server_name(&s, "[::1]:443").expect("v6"),
            ServerName::try_from("::1").expect("n")
        );
        let mut named = ssl();
        named.name = Some("backend:123".into());
        assert_eq!(
            upstream_server_name(&named, "127.0.0.1:8081").expect("port cut"),
            ServerName::try_from("backend").expect("n")
        );
        named.name = Some("[::1]:8443".into());
        assert_eq!(
            upstream_server_name(&named, "backend").expect("v6 name"),
            ServerName::try_from("::1").expect("n")
        );
        named.name = Some(":123".into());
        assert!(
            upstream_server_name(&named, "backend").is_err(),
            "no name is refused"
        );
        let mut store = ObjectStore::new();
        let c = client_config(&s, &mut store).expect("config");
        assert!(!c.enable_sni, "proxy_ssl_server_name off by default");
        assert!(!c.client_auth_cert_resolver.has_certs());
        // As nginx's upstream contexts: no certificate compression offered or sent.
        assert!(c.cert_decompressors.is_empty());
        assert!(c.cert_compressors.is_empty());
        let mut v = ssl();
        v.verify = true;
        v.trusted_certificate = Some("/nonexistent/ca.pem".into());
        assert!(client_config(&v, &mut store).is_err());
    }
}
