//! Session contexts: a session resumes only where it was made.
//!
//! nginx binds every session to its server's context (`SSL_CTX_set_session_id_context`, a hash
//! of the server's certificates and client-verification settings), so a session made on a
//! server that does not ask for client certificates cannot be resumed on one that does.
//! rustls checks the SNI name and the cipher suite on resumption, not the client
//! verification: ticket keys and session caches are shared by every server block of the
//! process (and by processes that read the same `ssl_session_ticket_key` file), so without a
//! context a client could take a ticket from `api.example` on a port without client
//! certificates and resume it on a port that requires them, skipping the check.
//!
//! A [`SessionContext`] is 16 bytes of SHA-256 over what decides who may resume: the
//! certificate chains (or, for `ssl_certificate` with variables, the templates), the
//! `ssl_verify_client` mode and the trust anchors of `ssl_client_certificate`. It is the same
//! in every process that loads the same files, so fleets sharing ticket keys still resume each
//! other's sessions. Tickets seal `context ‖ session` ([`Ticketer`](super::Ticketer)); the
//! stateful cache keys entries by `context ‖ session id` ([`TimedSessions`](super::TimedSessions)).
//! A session from another context decrypts or looks up to nothing, and the client gets a full
//! handshake.

use aws_lc_rs::digest::{Context, SHA256};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

use crate::conf::model::{TlsConf, VerifyClient};

/// Bytes of a context: 128 bits tell contexts apart with no chance of collision by accident.
pub const CONTEXT_LEN: usize = 16;

/// The identity of a server block's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionContext(pub [u8; CONTEXT_LEN]);

impl SessionContext {
    /// The context of a server with these settings, certificates and client CA.
    pub fn of(
        tls: &TlsConf,
        certs: &[std::sync::Arc<CertifiedKey>],
        roots: Option<&RootCertStore>,
    ) -> Self {
        let mut h = Context::new(&SHA256);
        let mut field = |tag: u8, bytes: &[u8]| {
            h.update(&[tag]);
            h.update(&(bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        };
        field(0, b"firstbyte session context 1");
        for ck in certs {
            for der in &ck.cert {
                field(1, der.as_ref());
            }
        }
        for d in &tls.dynamic_certificates {
            field(2, format!("{:?}", d.cert).as_bytes());
        }
        let mode: u8 = match tls.verify_client {
            VerifyClient::Off => 0,
            VerifyClient::On => 1,
            VerifyClient::Optional => 2,
            VerifyClient::OptionalNoCa => 3,
        };
        field(3, &[mode]);
        if mode != 0 {
            for anchor in roots.map(|r| r.roots.as_slice()).unwrap_or_default() {
                field(4, anchor.subject.as_ref());
                field(5, anchor.subject_public_key_info.as_ref());
            }
        }
        let digest = h.finish();
        let mut out = [0u8; CONTEXT_LEN];
        out.copy_from_slice(&digest.as_ref()[..CONTEXT_LEN]);
        SessionContext(out)
    }

    /// `self ‖ data`.
    pub fn prefix(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(CONTEXT_LEN + data.len());
        out.extend_from_slice(&self.0);
        out.extend_from_slice(data);
        out
    }

    /// `data` without this context in front; `None` when another context is there.
    pub fn strip<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        data.strip_prefix(&self.0[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::{SessionCache, TlsVersion};
    use std::time::Duration;

    fn tls(verify: VerifyClient) -> TlsConf {
        TlsConf {
            certificates: Vec::new(),
            password_file: None,
            reject_handshake: false,
            protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            ciphers: "HIGH".into(),
            ciphersuites: None,
            conf_certificate: None,
            num_tickets: None,
            ktls: false,
            ktls_tx_zerocopy: false,
            prefer_server_ciphers: false,
            certificate_compression: false,
            ecdh_curve: "auto".into(),
            early_data: false,
            session_tickets: true,
            session_ticket_keys: Vec::new(),
            session_timeout: Duration::from_secs(300),
            session_cache: SessionCache::None,
            verify_client: verify,
            client_certificate: None,
            stapling: false,
            stapling_file: None,
            stapling_verify: false,
            stapling_responder: None,
            crl: None,
            verify_depth: 1,
            trusted_certificate: None,
            dynamic_certificates: Vec::new(),
            certificate_cache: crate::conf::model::CertificateCache::Off,
            ocsp: crate::conf::model::OcspMode::Off,
            ocsp_responder: None,
            ocsp_cache: None,
            ocsp_resolver: None,
        }
    }

    fn cert(name: &str) -> std::sync::Arc<CertifiedKey> {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der());
        let signer = crate::tls::provider()
            .key_provider
            .load_private_key(key.into())
            .unwrap();
        std::sync::Arc::new(CertifiedKey::new(vec![ck.cert.der().clone()], signer))
    }

    fn roots(name: &str) -> RootCertStore {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let mut r = RootCertStore::empty();
        r.add(ck.cert.der().clone()).unwrap();
        r
    }

    #[test]
    fn contexts_differ_by_certificate_verification_and_ca() {
        let (a, b) = (cert("a.test"), cert("b.test"));
        let (ca1, ca2) = (roots("ca1"), roots("ca2"));
        let off = tls(VerifyClient::Off);
        let on = tls(VerifyClient::On);
        let base = SessionContext::of(&off, std::slice::from_ref(&a), None);
        assert_eq!(
            base,
            SessionContext::of(&off, std::slice::from_ref(&a), None),
            "stable"
        );
        assert_ne!(
            base,
            SessionContext::of(&off, std::slice::from_ref(&b), None),
            "certificate"
        );
        let verified = SessionContext::of(&on, std::slice::from_ref(&a), Some(&ca1));
        assert_ne!(base, verified, "verification mode");
        assert_ne!(
            verified,
            SessionContext::of(&on, std::slice::from_ref(&a), Some(&ca2)),
            "CA"
        );
        assert_ne!(
            verified,
            SessionContext::of(
                &tls(VerifyClient::Optional),
                std::slice::from_ref(&a),
                Some(&ca1)
            ),
            "on vs optional"
        );
        // Without verification the CA does not matter (nothing was checked against it).
        assert_eq!(base, SessionContext::of(&off, &[a], Some(&ca1)));
    }

    #[test]
    fn prefix_and_strip() {
        let c = SessionContext([7; CONTEXT_LEN]);
        let d = SessionContext([8; CONTEXT_LEN]);
        let sealed = c.prefix(b"session");
        assert_eq!(c.strip(&sealed), Some(&b"session"[..]));
        assert_eq!(d.strip(&sealed), None);
        assert_eq!(c.strip(b"short"), None);
    }
}
