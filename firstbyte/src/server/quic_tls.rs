//! What a QUIC connection's TLS handshake chose that quinn does not tell (its rustls session is
//! private): the cipher suite (`$ssl_cipher`) and whether the session was resumed
//! (`$ssl_session_reused`). Each connection is accepted with its own copy of the endpoint's
//! TLS settings whose certificate resolver notes, in the connection's [`Facts`], the suite
//! rustls will choose from the client's offer ([`choose_suite`], rustls' rule for TLS 1.3) and
//! hands out the certificate with a key that notes when it signs: a full handshake signs its
//! CertificateVerify, a resumed one does not. Both are final once the ClientHello is processed,
//! when quinn reports the handshake data. [`Configs`] keeps the endpoint's settings they are
//! made from.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, Signer, SigningKey};
use rustls::{CipherSuite, SignatureAlgorithm, SignatureScheme, SupportedCipherSuite};

/// One connection's handshake, as its resolver saw it.
#[derive(Debug, Default)]
pub(super) struct Facts {
    suite: OnceLock<CipherSuite>,
    signed: AtomicBool,
    resolved: AtomicBool,
}

impl Facts {
    /// OpenSSL's name of the suite (`TLS_AES_128_GCM_SHA256`), empty before the ClientHello.
    pub fn cipher(&self) -> &'static str {
        self.suite.get().map_or("", |s| crate::tls::cipher_name(*s))
    }

    /// Whether the handshake resumed a session: a certificate was chosen but never signed with.
    pub fn resumed(&self) -> bool {
        self.resolved.load(Ordering::Acquire) && !self.signed.load(Ordering::Acquire)
    }
}

/// An endpoint's settings for new connections: quinn's, and the TLS settings in them.
pub(super) struct Configs {
    pub quic: quinn::ServerConfig,
    pub tls: Arc<rustls::ServerConfig>,
}

impl Configs {
    /// One connection's settings: its TLS notes the handshake's choices in `facts`.
    pub fn for_connection(&self, facts: &Arc<Facts>) -> Option<quinn::ServerConfig> {
        let tls = for_connection(&self.tls, facts.clone());
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(tls)).ok()?;
        let mut quic = self.quic.clone();
        quic.crypto = Arc::new(crypto);
        Some(quic)
    }
}

/// The suite rustls chooses for TLS 1.3 among `server`'s (in its order): the client's first
/// that the server has, or with `prefer_server` (`ssl_prefer_server_ciphers`) the server's
/// first that the client offered.
pub(super) fn choose_suite(
    client: &[CipherSuite],
    server: &[CipherSuite],
    prefer_server: bool,
) -> Option<CipherSuite> {
    if prefer_server {
        server.iter().find(|s| client.contains(s)).copied()
    } else {
        client.iter().find(|s| server.contains(s)).copied()
    }
}

/// `tls` for one connection: its certificates come through a resolver that notes `facts`.
pub(super) fn for_connection(
    tls: &rustls::ServerConfig,
    facts: Arc<Facts>,
) -> rustls::ServerConfig {
    let mut t = tls.clone();
    // QUIC is TLS 1.3 only, with the suites that have QUIC keys.
    let suites = t
        .crypto_provider()
        .cipher_suites
        .iter()
        .filter_map(|s| match s {
            SupportedCipherSuite::Tls13(s) if s.quic.is_some() => Some(s.common.suite),
            _ => None,
        })
        .collect();
    t.cert_resolver = Arc::new(Noting {
        inner: tls.cert_resolver.clone(),
        facts,
        suites,
        prefer_server: tls.ignore_client_order,
    });
    t
}

/// Asks `inner` and notes the handshake's suite and whether its key signs.
#[derive(Debug)]
struct Noting {
    inner: Arc<dyn ResolvesServerCert>,
    facts: Arc<Facts>,
    suites: Vec<CipherSuite>,
    prefer_server: bool,
}

impl ResolvesServerCert for Noting {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(s) = choose_suite(hello.cipher_suites(), &self.suites, self.prefer_server) {
            let _ = self.facts.suite.set(s);
        }
        let ck = self.inner.resolve(hello)?;
        self.facts.resolved.store(true, Ordering::Release);
        let key = Arc::new(NotingKey {
            inner: ck.key.clone(),
            facts: self.facts.clone(),
        });
        let mut noted = CertifiedKey::new(ck.cert.clone(), key);
        noted.ocsp = ck.ocsp.clone();
        Some(Arc::new(noted))
    }
}

/// A certificate's key that notes when a handshake signs with it.
#[derive(Debug)]
struct NotingKey {
    inner: Arc<dyn SigningKey>,
    facts: Arc<Facts>,
}

impl SigningKey for NotingKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        self.facts.signed.store(true, Ordering::Release);
        self.inner.choose_scheme(offered)
    }

    fn public_key(&self) -> Option<rustls_pki_types::SubjectPublicKeyInfoDer<'_>> {
        self.inner.public_key()
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.inner.algorithm()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CipherSuite as C;

    #[test]
    fn the_clients_order_unless_the_server_prefers_its_own() {
        let server = [
            C::TLS13_AES_256_GCM_SHA384,
            C::TLS13_AES_128_GCM_SHA256,
            C::TLS13_CHACHA20_POLY1305_SHA256,
        ];
        let client = [
            C::TLS13_CHACHA20_POLY1305_SHA256,
            C::TLS13_AES_128_GCM_SHA256,
        ];
        assert_eq!(
            choose_suite(&client, &server, false),
            Some(C::TLS13_CHACHA20_POLY1305_SHA256)
        );
        assert_eq!(
            choose_suite(&client, &server, true),
            Some(C::TLS13_AES_128_GCM_SHA256)
        );
        assert_eq!(
            choose_suite(&[C::TLS13_AES_128_CCM_SHA256], &server, false),
            None
        );
    }

    #[test]
    fn facts_before_and_after_a_handshake() {
        let f = Facts::default();
        assert_eq!(f.cipher(), "");
        assert!(!f.resumed(), "nothing resolved yet");
        let _ = f.suite.set(C::TLS13_AES_128_GCM_SHA256);
        f.resolved.store(true, Ordering::Release);
        assert_eq!(f.cipher(), "TLS_AES_128_GCM_SHA256");
        assert!(f.resumed(), "resolved, never signed");
        f.signed.store(true, Ordering::Release);
        assert!(!f.resumed());
    }
}
