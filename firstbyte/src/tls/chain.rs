//! Client-certificate chains verified as OpenSSL verifies them for nginx's `ssl_verify_client`,
//! `ssl_verify_depth` and `ssl_crl`.
//!
//! webpki (rustls' verifier) implements the Web PKI profile: it refuses X.509 v1 certificates,
//! a CA certificate presented as a client's certificate, a client certificate that is itself
//! the trust anchor, and CRLs of version 1 or without extensions (what `openssl ca -gencrl`
//! makes without `crl_extensions`). nginx takes all of these, and operators' private CAs make
//! them, so client chains are checked here instead, with OpenSSL's rules and words:
//!
//! - The path runs from the leaf through the certificates the client sent to a **self-signed**
//!   certificate of `ssl_client_certificate` / `ssl_trusted_certificate` (CA files are looked
//!   at first, as OpenSSL's trusted-first search); a path that ends elsewhere fails, as without
//!   OpenSSL's partial-chain flag. Every signature is checked with the aws-lc-rs provider's
//!   algorithms (the ones rustls accepts in handshakes).
//! - Every certificate must be within its validity period; every issuer must be a CA (basic
//!   constraints `CA:TRUE` within its path length, or a self-signed v1 certificate, as
//!   `X509_check_ca`), with `keyCertSign` if it has a key usage; the leaf's key usage and
//!   extended key usage, when present, must allow a TLS client (as must an issuer's extended
//!   key usage, as OpenSSL's `sslclient` purpose).
//! - A critical extension other than basic constraints, key usage, extended key usage and
//!   subject alternative name fails the chain (stricter than OpenSSL, which also processes
//!   name constraints and policies).
//! - `ssl_verify_depth N`: at most N certificates between the leaf and the self-signed anchor.
//! - `ssl_crl` (OpenSSL's `CRL_CHECK | CRL_CHECK_ALL`, as nginx sets): every certificate of the
//!   path, the anchor included, needs a CRL of its issuer, signed by it and current; a listed
//!   serial is revoked. A CRL with a critical extension is not used (stricter than OpenSSL).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, SignatureVerificationAlgorithm, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::revocation_list::CertificateRevocationList;

// OpenSSL's words for the failures found here (`X509_verify_cert_error_string`), which
// `$ssl_client_verify` shows after `FAILED:`.
const UNABLE_LOCAL_ISSUER: &str = "unable to get local issuer certificate";
const UNABLE_ISSUER: &str = "unable to get issuer certificate";
const SELF_SIGNED: &str = "self-signed certificate";
const SELF_SIGNED_IN_CHAIN: &str = "self-signed certificate in certificate chain";
const EXPIRED: &str = "certificate has expired";
const NOT_YET_VALID: &str = "certificate is not yet valid";
const BAD_SIGNATURE: &str = "certificate signature failure";
const INVALID_CA: &str = "invalid CA certificate";
const PATH_LENGTH: &str = "path length constraint exceeded";
const PURPOSE: &str = "unsupported certificate purpose";
const CRITICAL: &str = "unhandled critical extension";
/// `X509_V_ERR_CERT_CHAIN_TOO_LONG`.
pub const TOO_LONG: &str = "certificate chain too long";
const NO_CRL: &str = "unable to get certificate CRL";
const CRL_EXPIRED: &str = "CRL has expired";
const CRL_NOT_YET_VALID: &str = "CRL is not yet valid";
const REVOKED: &str = "certificate revoked";
const DECODE: &str = "unable to decode certificate";

/// Most certificates followed on one path (OpenSSL stops at 100; nginx allows any depth).
const MAX_PATH: usize = 32;

/// Critical certificate extensions this verifier processes: basic constraints, key usage,
/// subject alternative name (not used for clients), extended key usage.
const HANDLED_CRITICAL: &[&str] = &["2.5.29.19", "2.5.29.15", "2.5.29.17", "2.5.29.37"];

/// A certificate revocation list whose signature is checked when it is used.
struct Crl {
    der: Vec<u8>,
    issuer: Vec<u8>,
    this_update: i64,
    next_update: Option<i64>,
    /// Serial numbers (DER integer contents) listed.
    revoked: Vec<Vec<u8>>,
    /// It has a critical extension (or a critical entry extension): never used.
    unusable: bool,
}

impl Crl {
    fn parse(der: &[u8]) -> Result<Crl, String> {
        let (rest, crl) = CertificateRevocationList::from_der(der).map_err(|e| e.to_string())?;
        if !rest.is_empty() {
            return Err("trailing data after the CRL".into());
        }
        let unusable = crl.extensions().iter().any(|e| e.critical)
            || crl
                .iter_revoked_certificates()
                .any(|r| r.extensions().iter().any(|e| e.critical));
        Ok(Crl {
            der: der.to_vec(),
            issuer: crl.issuer().as_raw().to_vec(),
            this_update: crl.last_update().timestamp(),
            next_update: crl.next_update().map(|t| t.timestamp()),
            revoked: crl
                .iter_revoked_certificates()
                .map(|r| strip_sign_padding(r.raw_serial()).to_vec())
                .collect(),
            unusable,
        })
    }
}

/// Parses `ssl_crl`'s CRLs (any version, with or without extensions) for [`ChainVerifier`].
pub fn check_crls(crls: &[CertificateRevocationListDer<'_>]) -> Result<(), String> {
    crls.iter()
        .try_for_each(|c| Crl::parse(c.as_ref()).map(|_| ()))
}

/// What the leaf certificate is for (OpenSSL's `sslclient` and `sslserver` purposes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A client's certificate (`ssl_verify_client`).
    Client,
    /// An upstream server's (`proxy_ssl_verify`).
    Server,
}

/// `ssl_verify_client`'s (and `proxy_ssl_verify`'s) chain check (see the module's words).
pub struct ChainVerifier {
    purpose: Purpose,
    anchors: Vec<CertificateDer<'static>>,
    crls: Option<Vec<Crl>>,
    depth: u32,
    hints: Vec<DistinguishedName>,
    algorithms: &'static [&'static dyn SignatureVerificationAlgorithm],
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for ChainVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainVerifier")
            .field("anchors", &self.anchors.len())
            .field("crls", &self.crls.as_ref().map(Vec::len))
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl ChainVerifier {
    /// A verifier trusting `anchors` (DER certificates of the CA files), checking `crls` when
    /// given (`ssl_crl`), allowing `depth` intermediates; `hints` are the names sent to
    /// clients (`ssl_client_certificate`'s subjects).
    pub fn new(
        purpose: Purpose,
        anchors: Vec<CertificateDer<'static>>,
        crls: Option<&[CertificateRevocationListDer<'_>]>,
        depth: u32,
        hints: Vec<DistinguishedName>,
        provider: Arc<CryptoProvider>,
    ) -> Result<ChainVerifier, String> {
        let crls = match crls {
            Some(list) => Some(
                list.iter()
                    .map(|c| Crl::parse(c.as_ref()))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => None,
        };
        Ok(ChainVerifier {
            purpose,
            anchors,
            crls,
            depth,
            hints,
            algorithms: provider.signature_verification_algorithms.all,
            provider,
        })
    }

    /// Checks `leaf` with the `sent` certificates at `now` (seconds since the epoch); the
    /// error is OpenSSL's wording.
    pub fn check(&self, leaf: &[u8], sent: &[&[u8]], now: i64) -> Result<(), &'static str> {
        self.verified_path(leaf, sent, now).map(|_| ())
    }

    /// As [`Self::check`], giving the verified path: the leaf first, the self-signed anchor
    /// last (what `ssl_ocsp` checks, as nginx takes OpenSSL's verified chain).
    pub fn verified_path<'a>(
        &'a self,
        leaf: &'a [u8],
        sent: &[&'a [u8]],
        now: i64,
    ) -> Result<Vec<&'a [u8]>, &'static str> {
        let path = self.build(leaf, sent)?;
        let certs: Vec<X509Certificate<'_>> =
            path.iter().map(|d| parse(d)).collect::<Result<_, _>>()?;
        // Intermediates between the leaf and the self-signed anchor.
        if certs.len().saturating_sub(2) > self.depth as usize {
            return Err(TOO_LONG);
        }
        for (i, c) in certs.iter().enumerate() {
            let v = c.validity();
            if now < v.not_before.timestamp() {
                return Err(NOT_YET_VALID);
            }
            if now > v.not_after.timestamp() {
                return Err(EXPIRED);
            }
            if c.extensions()
                .iter()
                .any(|e| e.critical && !HANDLED_CRITICAL.contains(&e.oid.to_id_string().as_str()))
            {
                return Err(CRITICAL);
            }
            let eku = c.extended_key_usage().map_err(|_| DECODE)?;
            let allowed = |e: &x509_parser::extensions::ExtendedKeyUsage<'_>| match self.purpose {
                Purpose::Client => e.client_auth,
                Purpose::Server => e.server_auth,
            };
            if eku.is_some_and(|e| !allowed(e.value)) {
                return Err(PURPOSE);
            }
            if i == 0 {
                let ku = c.key_usage().map_err(|_| DECODE)?;
                let fits = |k: &x509_parser::extensions::KeyUsage| match self.purpose {
                    Purpose::Client => k.digital_signature() || k.key_agreement(),
                    Purpose::Server => {
                        k.digital_signature() || k.key_encipherment() || k.key_agreement()
                    }
                };
                if ku.is_some_and(|k| !fits(k.value)) {
                    return Err(PURPOSE);
                }
            } else {
                // Issuers: CAs, within their path length (self-issued intermediates aside,
                // the certificates below this one that are not the leaf).
                let below = certs[1..i].iter().filter(|b| !self_issued(b)).count();
                is_ca(c, below)?;
            }
        }
        let mut result = Ok(());
        if let Some(crls) = &self.crls {
            // Every certificate is checked and the last failure is the one reported: nginx's
            // verify callback lets OpenSSL go on after each, and the last error stays.
            for (i, c) in certs.iter().enumerate() {
                let issuer = certs.get(i + 1).unwrap_or(c);
                if let Err(e) = self.revocation(c, issuer, crls, now) {
                    result = Err(e);
                }
            }
        }
        result.map(|()| path)
    }

    /// The path from `leaf` to a self-signed anchor: leaf first, anchor last.
    fn build<'a>(
        &'a self,
        leaf: &'a [u8],
        sent: &[&'a [u8]],
    ) -> Result<Vec<&'a [u8]>, &'static str> {
        let mut path: Vec<&[u8]> = vec![leaf];
        loop {
            let cur = *path.last().unwrap_or(&leaf);
            let c = parse(cur)?;
            let trusted = self.anchors.iter().any(|a| a.as_ref() == cur);
            if self_issued(&c) {
                if trusted && self.signed_by(cur, &c).is_ok() {
                    return Ok(path);
                }
                return Err(if path.len() == 1 {
                    SELF_SIGNED
                } else {
                    SELF_SIGNED_IN_CHAIN
                });
            }
            if path.len() >= MAX_PATH {
                return Err(TOO_LONG);
            }
            let issuer = c.issuer().as_raw();
            let mut bad_signature = false;
            let candidates = self
                .anchors
                .iter()
                .map(|a| a.as_ref())
                .chain(sent.iter().copied());
            let mut next = None;
            for cand in candidates {
                if path.contains(&cand) {
                    continue;
                }
                let Ok(ic) = parse(cand) else { continue };
                if ic.subject().as_raw() != issuer {
                    continue;
                }
                match self.signed_by(cur, &ic) {
                    Ok(()) => {
                        next = Some(cand);
                        break;
                    }
                    Err(_) => bad_signature = true,
                }
            }
            match next {
                Some(n) => path.push(n),
                None if bad_signature => return Err(BAD_SIGNATURE),
                None if trusted => return Err(UNABLE_ISSUER),
                None => return Err(UNABLE_LOCAL_ISSUER),
            }
        }
    }

    /// Whether `signed` (a certificate or CRL, DER) carries a valid signature of `issuer`'s key.
    fn signed_by(&self, signed: &[u8], issuer: &X509Certificate<'_>) -> Result<(), ()> {
        let (tbs, alg, sig) = split_signed(signed).ok_or(())?;
        let spki = issuer.public_key();
        // SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier, ... }
        let spki_fields = der_contents(der_first(spki.raw).ok_or(())?).ok_or(())?;
        let key_alg = der_contents(der_first(spki_fields).ok_or(())?).ok_or(())?;
        let key = spki.subject_public_key.data.as_ref();
        let ok = self.algorithms.iter().any(|a| {
            a.signature_alg_id().as_ref() == alg
                && a.public_key_alg_id().as_ref() == key_alg
                && a.verify_signature(key, tbs, sig).is_ok()
        });
        ok.then_some(()).ok_or(())
    }

    /// `ssl_crl` for one certificate of the path, whose issuer is `issuer`.
    fn revocation(
        &self,
        cert: &X509Certificate<'_>,
        issuer: &X509Certificate<'_>,
        crls: &[Crl],
        now: i64,
    ) -> Result<(), &'static str> {
        let serial = strip_sign_padding(cert.raw_serial());
        // An issuer whose key usage leaves out cRLSign signs no CRL (OpenSSL's check too).
        let may_sign = match issuer.key_usage() {
            Ok(Some(k)) => k.value.crl_sign(),
            Ok(None) => true,
            Err(_) => false,
        };
        let mut usable = crls
            .iter()
            .filter(|_| may_sign)
            .filter(|c| !c.unusable && c.issuer == cert.issuer().as_raw())
            .filter(|c| self.signed_by(&c.der, issuer).is_ok())
            .peekable();
        if usable.peek().is_none() {
            return Err(NO_CRL);
        }
        let mut current = false;
        let mut early = false;
        for crl in usable {
            if crl.revoked.iter().any(|s| s.as_slice() == serial) {
                return Err(REVOKED);
            }
            if crl.this_update > now {
                early = true;
            } else if crl.next_update.is_none_or(|n| n >= now) {
                current = true;
            }
        }
        match (current, early) {
            (true, _) => Ok(()),
            (false, true) => Err(CRL_NOT_YET_VALID),
            (false, false) => Err(CRL_EXPIRED),
        }
    }
}

impl ClientCertVerifier for ChainVerifier {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let sent: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        self.check(end_entity.as_ref(), &sent, now)
            .map(|()| ClientCertVerified::assertion())
            .map_err(|reason| Error::General(reason.into()))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls12_signature(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Checks a TLS 1.2 handshake signature with the certificate's key alone: webpki's parser
/// (behind `rustls::crypto::verify_tls12_signature`) refuses X.509 v1, which OpenSSL (so
/// nginx) takes from peers. Nothing about the certificate is trusted here.
pub fn tls12_signature(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, Error> {
    let bad = || Error::InvalidCertificate(rustls::CertificateError::BadEncoding);
    let c = parse(cert.as_ref()).map_err(|_| bad())?;
    let spki = c.public_key();
    let spki_fields = der_first(spki.raw).and_then(der_contents).ok_or_else(bad)?;
    let key_alg = der_first(spki_fields)
        .and_then(der_contents)
        .ok_or_else(bad)?;
    let algs = &provider.signature_verification_algorithms;
    let candidates = algs
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, a)| *a)
        .ok_or(Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        ))?;
    let ok = candidates.iter().any(|a| {
        a.public_key_alg_id().as_ref() == key_alg
            && a.verify_signature(
                spki.subject_public_key.data.as_ref(),
                message,
                dss.signature(),
            )
            .is_ok()
    });
    if ok {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(Error::InvalidCertificate(
            rustls::CertificateError::BadSignature,
        ))
    }
}

/// Checks a TLS 1.3 handshake signature with the certificate's key alone (see
/// [`tls12_signature`]).
pub fn tls13_signature(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, Error> {
    let c = parse(cert.as_ref())
        .map_err(|_| Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
    rustls::crypto::verify_tls13_signature_with_raw_key(
        message,
        &rustls::pki_types::SubjectPublicKeyInfoDer::from(c.public_key().raw),
        dss,
        &provider.signature_verification_algorithms,
    )
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, &'static str> {
    match X509Certificate::from_der(der) {
        Ok((&[], c)) => Ok(c),
        _ => Err(DECODE),
    }
}

fn self_issued(c: &X509Certificate<'_>) -> bool {
    c.subject().as_raw() == c.issuer().as_raw()
}

/// Whether `c` may issue certificates with `below` non-self-issued intermediates under it.
fn is_ca(c: &X509Certificate<'_>, below: usize) -> Result<(), &'static str> {
    let bc = c.basic_constraints().map_err(|_| DECODE)?;
    let ku = c.key_usage().map_err(|_| DECODE)?;
    if ku.is_some_and(|k| !k.value.key_cert_sign()) {
        return Err(INVALID_CA);
    }
    match bc {
        Some(b) if b.value.ca => match b.value.path_len_constraint {
            Some(n) if below > n as usize => Err(PATH_LENGTH),
            _ => Ok(()),
        },
        Some(_) => Err(INVALID_CA),
        // X509_check_ca: a v1 self-signed certificate is a CA; other certificates without
        // basic constraints are not.
        None if c.version().0 == 0 && self_issued(c) => Ok(()),
        None => Err(INVALID_CA),
    }
}

/// A DER integer's contents without the leading zero that keeps it positive.
fn strip_sign_padding(serial: &[u8]) -> &[u8] {
    match serial {
        [0, rest @ ..] if !rest.is_empty() => rest,
        s => s,
    }
}

/// The first DER element of `der` (tag, length, contents) and what follows it.
fn der_split(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let first = *der.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = der.get(2..2 + n)?;
        (
            bytes.iter().fold(0usize, |a, b| (a << 8) | usize::from(*b)),
            2 + n,
        )
    };
    let end = header.checked_add(len)?;
    (end <= der.len()).then(|| der.split_at(end))
}

fn der_first(der: &[u8]) -> Option<&[u8]> {
    der_split(der).map(|(e, _)| e)
}

/// The contents of one DER element.
fn der_contents(element: &[u8]) -> Option<&[u8]> {
    let first = *element.get(1)?;
    let header = if first < 0x80 {
        2
    } else {
        2 + usize::from(first & 0x7f)
    };
    element.get(header..)
}

/// A signed structure (certificate or CRL): the to-be-signed element (whole), the signature
/// algorithm (the AlgorithmIdentifier's contents) and the signature (the BIT STRING's bits).
fn split_signed(der: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let outer = der_contents(der_first(der)?)?;
    let (tbs, rest) = der_split(outer)?;
    let (alg, rest) = der_split(rest)?;
    let (sig, rest) = der_split(rest)?;
    if !rest.is_empty() || sig.first() != Some(&0x03) {
        return None;
    }
    let bits = der_contents(sig)?;
    // No unused bits in a signature.
    let (&0, sig) = bits.split_first()? else {
        return None;
    };
    Some((tbs, der_contents(alg)?, sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_elements_split_whole() {
        // SEQUENCE { INTEGER 5 } then trailing bytes.
        let der = [0x30, 0x03, 0x02, 0x01, 0x05, 0xff];
        assert_eq!(der_split(&der), Some((&der[..5], &der[5..])));
        assert_eq!(der_contents(&der[..5]), Some(&der[2..5]));
        // A length past the end, and a 5-byte length, are refused.
        assert_eq!(der_split(&[0x30, 0x05, 0x00]), None);
        assert_eq!(der_split(&[0x30, 0x85, 0, 0, 0, 0, 1]), None);
        assert_eq!(split_signed(&der), None);
    }

    #[test]
    fn serials_compare_without_sign_padding() {
        assert_eq!(strip_sign_padding(&[0x00, 0x80]), &[0x80]);
        assert_eq!(strip_sign_padding(&[0x00]), &[0x00]);
        assert_eq!(strip_sign_padding(&[0x10, 0x00]), &[0x10, 0x00]);
    }

    #[test]
    fn garbage_is_no_crl() {
        assert!(check_crls(&[CertificateRevocationListDer::from(vec![0x30, 0x00])]).is_err());
    }
}
