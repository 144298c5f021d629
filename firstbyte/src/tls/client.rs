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
use rustls::client::{ResolvesClientCert, Resumption, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::error::TlsError;
use super::store::ObjectStore;
use crate::conf::model::{CertKey, Pos, ProxySsl, Source, TlsVersion};

/// `proxy_ssl_verify off`: any certificate, any name (signatures are still checked so a
/// broken handshake fails).
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
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

/// The client config for `ssl` (a static client certificate, if any). `client` overrides
/// the certificate (a `proxy_ssl_certificate` with variables, loaded per request).
pub fn client_config(
    ssl: &ProxySsl,
    client: Option<Arc<CertifiedKey>>,
    store: &mut ObjectStore,
) -> Result<Arc<ClientConfig>, TlsError> {
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
    let builder =
        ClientConfig::builder_with_provider(provider.clone()).with_protocol_versions(&versions)?;
    let builder = if ssl.verify {
        let roots = match &ssl.trusted_certificate {
            Some(p) => store.roots(p)?,
            None => Arc::new(RootCertStore::empty()),
        };
        let mut vb = WebPkiServerVerifier::builder_with_provider(roots, provider.clone());
        if let Some(crl) = &ssl.crl {
            vb = vb.with_crls(store.crls(crl)?.iter().cloned());
        }
        let verifier = vb
            .build()
            .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)))
    };
    let client = match client {
        Some(c) => Some(c),
        None => match (&ssl.certificate, &ssl.certificate_key) {
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
        },
    };
    let mut config = match client {
        Some(ck) => builder.with_client_cert_resolver(Arc::new(OneClientCert(ck))),
        None => builder.with_no_client_auth(),
    };
    config.enable_sni = ssl.server_name;
    if !ssl.session_reuse {
        config.resumption = Resumption::disabled();
    }
    Ok(Arc::new(config))
}

/// The name the upstream's certificate is checked against (and sent as SNI when enabled):
/// `proxy_ssl_name`, else the `proxy_pass` host without its port.
pub fn upstream_server_name(ssl: &ProxySsl, host: &str) -> Result<ServerName<'static>, TlsError> {
    let name = match &ssl.name {
        Some(n) => n.as_str(),
        None => strip_port(host),
    };
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| TlsError::ServerName(name.to_string()))
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
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

    fn ssl() -> ProxySsl {
        ProxySsl {
            certificate: None,
            certificate_key: None,
            password_file: None,
            trusted_certificate: None,
            crl: None,
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
        let mut store = ObjectStore::new();
        let c = client_config(&s, None, &mut store).expect("config");
        assert!(!c.enable_sni, "proxy_ssl_server_name off by default");
        assert!(!c.client_auth_cert_resolver.has_certs());
        let mut v = ssl();
        v.verify = true;
        v.trusted_certificate = Some("/nonexistent/ca.pem".into());
        assert!(client_config(&v, None, &mut store).is_err());
    }
}
