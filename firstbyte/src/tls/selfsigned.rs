//! The built-in site's certificate: self-signed ECDSA P-256, made at start.
//!
//! Names in, a one-certificate chain and its PKCS#8 key out (rcgen on aws-lc-rs). Names that
//! parse as IP addresses (`127.0.0.1`, `::1`) become IP SANs, the rest DNS SANs.

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::TlsError;

/// A self-signed ECDSA P-256 certificate for `names`, and its key.
pub fn self_signed(
    names: &[&str],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(TlsError::SelfSigned)?;
    let mut params = rcgen::CertificateParams::new(names).map_err(TlsError::SelfSigned)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "firstbyte built-in site");
    let cert = params.self_signed(&key).map_err(TlsError::SelfSigned)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((vec![cert.der().clone()], key))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::provider;
    use super::*;
    use rustls::server::ParsedCertificate;
    use rustls_pki_types::ServerName;

    #[test]
    fn sans_cover_names_and_addresses() {
        let (chain, key) = self_signed(&["localhost", "127.0.0.1", "::1"]).expect("cert");
        assert_eq!(chain.len(), 1);
        let signer = provider()
            .key_provider
            .load_private_key(key)
            .expect("key loads");
        assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::ECDSA);
        let ck = rustls::sign::CertifiedKey::new(chain.clone(), signer);
        assert!(ck.keys_match().is_ok());
        let parsed = ParsedCertificate::try_from(&chain[0]).expect("parses");
        for name in ["localhost", "127.0.0.1", "::1"] {
            let sn = ServerName::try_from(name).expect("name");
            assert!(
                rustls::client::verify_server_name(&parsed, &sn).is_ok(),
                "{name}"
            );
        }
        let other = ServerName::try_from("example.com").expect("name");
        assert!(rustls::client::verify_server_name(&parsed, &other).is_err());
    }

    #[test]
    fn a_bad_name_is_an_error() {
        assert!(matches!(
            self_signed(&["b\u{e4}d.example"]),
            Err(TlsError::SelfSigned(_))
        ));
    }
}
