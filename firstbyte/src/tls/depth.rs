//! `ssl_verify_depth`: a client chain that verifies may still be too long for nginx.
//!
//! rustls' verifier does not say which path it built, so after it accepts a chain
//! [`DepthLimited`] measures the shortest path by names ([`chain_depth`]: leaf issuer →
//! intermediates sent by the client → a trust anchor) and counts it as OpenSSL ≥ 1.1.0 does
//! (nginx-tests' ssl_verify_depth.t says the same): the depth limits the intermediates between
//! the leaf and the anchor, so nginx's default of 1 takes a leaf signed by a CA of
//! `ssl_client_certificate` or by one intermediate under it, and 0 only the former.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use x509_parser::prelude::{FromDer, X509Certificate};

/// OpenSSL's words (`X509_V_ERR_CERT_CHAIN_TOO_LONG`), also `$ssl_client_verify`'s reason.
pub const CHAIN_TOO_LONG: &str = "certificate chain too long";

/// Paths longer than this are not followed (OpenSSL's own limit is 100; nginx allows any).
const MAX_WALK: usize = 32;

/// The depth of the trust anchor on the shortest path from `leaf` through `intermediates`
/// (DER certificates) to one of `anchors` (DER-encoded subject names), `Some(0)` for a leaf
/// that is itself an anchor; `None` when names lead to no anchor.
pub fn chain_depth(leaf: &[u8], intermediates: &[&[u8]], anchors: &[&[u8]]) -> Option<usize> {
    let names = |der: &[u8]| {
        X509Certificate::from_der(der)
            .ok()
            .map(|(_, c)| (c.subject().as_raw().to_vec(), c.issuer().as_raw().to_vec()))
    };
    let (subject, mut issuer) = names(leaf)?;
    if subject == issuer && anchors.contains(&subject.as_slice()) {
        return Some(0);
    }
    let inter: Vec<(Vec<u8>, Vec<u8>)> = intermediates.iter().filter_map(|d| names(d)).collect();
    for depth in 1..=MAX_WALK {
        if anchors.contains(&issuer.as_slice()) {
            return Some(depth);
        }
        let next = inter.iter().find(|(s, i)| *s == issuer && s != i)?;
        issuer = next.1.clone();
    }
    None
}

/// Whether a chain whose anchor is at `depth` (from [`chain_depth`]) exceeds `ssl_verify_depth
/// max`: more than `max` intermediates between the leaf and the anchor.
pub fn too_long(depth: usize, max: u32) -> bool {
    depth.saturating_sub(1) > max as usize
}

/// A client verifier that also enforces `ssl_verify_depth`.
#[derive(Debug)]
pub struct DepthLimited {
    inner: Arc<dyn ClientCertVerifier>,
    anchors: Vec<DistinguishedName>,
    max: u32,
}

impl DepthLimited {
    /// `inner` checks the chain; `anchors` are its roots' subjects (`RootCertStore::subjects`).
    pub fn new(
        inner: Arc<dyn ClientCertVerifier>,
        anchors: Vec<DistinguishedName>,
        max: u32,
    ) -> Self {
        Self {
            inner,
            anchors,
            max,
        }
    }
}

impl ClientCertVerifier for DepthLimited {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let ok = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let inter: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        let anchors: Vec<&[u8]> = self.anchors.iter().map(|a| a.as_ref()).collect();
        match chain_depth(end_entity, &inter, &anchors) {
            Some(d) if too_long(d, self.max) => Err(Error::General(CHAIN_TOO_LONG.into())),
            _ => Ok(ok),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    struct Ca {
        params: CertificateParams,
        key: KeyPair,
        der: Vec<u8>,
    }

    fn ca(name: &str, parent: Option<&Ca>) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let der = match parent {
            None => params.self_signed(&key).unwrap(),
            Some(p) => params
                .signed_by(&key, &Issuer::from_params(&p.params, &p.key))
                .unwrap(),
        }
        .der()
        .to_vec();
        Ca { params, key, der }
    }

    fn subject(der: &[u8]) -> Vec<u8> {
        let (_, c) = X509Certificate::from_der(der).unwrap();
        c.subject().as_raw().to_vec()
    }

    #[test]
    fn depth_counts_as_openssl() {
        let root = ca("root", None);
        let int = ca("int", Some(&root));
        let leaf = ca("leaf", Some(&int));
        let direct = ca("direct", Some(&root));
        let anchors_root = subject(&root.der);
        let anchors = [anchors_root.as_slice()];
        assert_eq!(chain_depth(&direct.der, &[], &anchors), Some(1));
        assert_eq!(chain_depth(&leaf.der, &[&int.der], &anchors), Some(2));
        // Unused extra certificates do not lengthen the path.
        assert_eq!(
            chain_depth(&leaf.der, &[&direct.der, &int.der], &anchors),
            Some(2)
        );
        // A trusted self-signed certificate used as the client's own.
        assert_eq!(chain_depth(&root.der, &[], &anchors), Some(0));
        // The intermediate trusted itself: one step.
        let int_subject = subject(&int.der);
        assert_eq!(
            chain_depth(&leaf.der, &[], &[int_subject.as_slice()]),
            Some(1)
        );
        // No way to an anchor.
        assert_eq!(chain_depth(&leaf.der, &[], &anchors), None);
        assert_eq!(chain_depth(b"junk", &[], &anchors), None);
    }

    #[test]
    fn limits_follow_nginx_tests() {
        // ssl_verify_depth.t: depth 0 takes the root itself and a leaf the root signed, not
        // one behind an intermediate; 1 takes that too.
        assert!(!too_long(0, 0));
        assert!(!too_long(1, 0));
        assert!(too_long(2, 0));
        assert!(!too_long(2, 1));
        assert!(too_long(3, 1));
        assert!(!too_long(3, 2));
    }
}
