//! Certificates, private keys and CA bundles: PEM bytes in, rustls objects out.
//!
//! Pure functions over bytes already read; [`ObjectStore`](super::ObjectStore) does the file
//! I/O and caching and calls these. A key goes: legacy-encryption check → encrypted PKCS#8
//! (decrypted with each `ssl_password_file` line in turn) or plain PKCS#8 / SEC1 / PKCS#1 →
//! a rustls [`SigningKey`] from the aws-lc-rs provider. Nothing here panics on bad bytes:
//! every failure is a [`LoadReason`].

use std::sync::Arc;

use pkcs8::pkcs5::pbes2::Kdf;
use pkcs8::pkcs5::EncryptionScheme;
use pkcs8::EncryptedPrivateKeyInfo;
use rustls::crypto::CryptoProvider;
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::RootCertStore;
use rustls_pki_types::pem::{PemObject, SectionKind};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::error::LoadReason;

/// The marker of OpenSSL's legacy PEM encryption (`openssl rsa -aes256`, `openssl ec -aes256`).
const LEGACY_ENCRYPTED: &[u8] = b"Proc-Type: 4,ENCRYPTED";
/// The armour of an encrypted PKCS#8 key (RFC 5958 `EncryptedPrivateKeyInfo`).
const ENCRYPTED_BEGIN: &[u8] = b"-----BEGIN ENCRYPTED PRIVATE KEY-----";
/// Its end line.
const ENCRYPTED_END: &[u8] = b"-----END ENCRYPTED PRIVATE KEY-----";

/// Highest PBKDF2 iteration count tried: 10 million is ~5 s of CPU per passphrase, far above
/// OpenSSL's default of 2048, and keeps a hostile key file from stalling a load for hours.
const MAX_PBKDF2_ITERATIONS: u32 = 10_000_000;
/// Most memory one scrypt derivation may take (128 · r · N bytes): 256 MiB, 8 times
/// what `openssl pkcs8 -scrypt` (N = 2^14, r = 8) and the pkcs8 crate (N = 2^15) use.
const MAX_SCRYPT_BYTES: u64 = 256 << 20;

/// The armour OpenSSL writes for a certificate with trust settings (`openssl x509 -trustout`):
/// the certificate's DER followed by an `X509_CERT_AUX` structure.
const TRUSTED_LABEL: &[u8] = b"TRUSTED CERTIFICATE-----";

/// Every certificate of a PEM file in order: `CERTIFICATE` sections and, as OpenSSL's
/// `PEM_read_bio_X509_AUX` (so nginx) reads them, `TRUSTED CERTIFICATE` ones, whose trust
/// settings are dropped: firstbyte trusts a certificate for what the directive naming its file
/// says, never for what the file says of it.
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, LoadReason> {
    let trusted = find(pem, TRUSTED_LABEL).is_some();
    let relabelled;
    let pem = if trusted {
        relabelled = replace_all(pem, TRUSTED_LABEL, b"CERTIFICATE-----");
        relabelled.as_slice()
    } else {
        pem
    };
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| LoadReason::Pem(e.to_string()))?;
        certs.push(match (trusted, der_element_len(cert.as_ref())) {
            (true, Some(n)) if n < cert.len() => CertificateDer::from(cert.as_ref()[..n].to_vec()),
            _ => cert,
        });
    }
    Ok(certs)
}

/// `haystack` with every `from` replaced by `to`.
fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The length of the DER element (tag, length and contents) `der` starts with; `None` when it
/// does not start with a whole element of a single-byte tag.
fn der_element_len(der: &[u8]) -> Option<usize> {
    let first = *der.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = der.get(2..2 + n)?;
        let len = bytes.iter().fold(0usize, |a, b| (a << 8) | usize::from(*b));
        (len, 2 + n)
    };
    let total = header.checked_add(len)?;
    (total <= der.len()).then_some(total)
}

/// Parses a certificate chain: every `CERTIFICATE` section in order (leaf first); other
/// sections (a key in the same file, as nginx allows) are skipped. The leaf must parse as
/// X.509 of any version: v1 (what `openssl req -x509` makes without extensions) loads, as in
/// nginx.
pub fn parse_chain(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, LoadReason> {
    let chain = pem_certificates(pem)?;
    let Some(leaf) = chain.first() else {
        return Err(if is_blank(pem) {
            LoadReason::Empty
        } else {
            LoadReason::NoCertificate
        });
    };
    leaf_spki(leaf)?;
    Ok(chain)
}

/// The leaf's SubjectPublicKeyInfo (DER, outer SEQUENCE included). Read with x509-parser, not
/// webpki: webpki's end-entity parser refuses X.509 v1 (`UnsupportedCertVersion`), which
/// OpenSSL, and so nginx, serves. Nothing here trusts the certificate; clients verify it.
fn leaf_spki<'a>(leaf: &'a CertificateDer<'_>) -> Result<&'a [u8], LoadReason> {
    match x509_parser::parse_x509_certificate(leaf.as_ref()) {
        Ok((rest, _)) if !rest.is_empty() => Err(LoadReason::BadCertificate(
            "trailing data after the certificate".into(),
        )),
        Ok((_, cert)) => Ok(cert.tbs_certificate.subject_pki.raw),
        Err(e) => Err(LoadReason::BadCertificate(e.to_string())),
    }
}

/// Whether the key is the leaf certificate's: `SSL_CTX_use_PrivateKey`'s check. rustls'
/// `CertifiedKey::keys_match` would do it through webpki, which refuses X.509 v1 leaves.
pub fn keys_match(ck: &CertifiedKey) -> bool {
    let (Some(key), Some(leaf)) = (ck.key.public_key(), ck.cert.first()) else {
        return false;
    };
    leaf_spki(leaf).is_ok_and(|spki| spki == key.as_ref())
}

/// Parses a CA bundle (`ssl_client_certificate`) into trust anchors; at least one must parse.
pub fn parse_roots(pem: &[u8]) -> Result<RootCertStore, LoadReason> {
    let certs = pem_certificates(pem)?;
    if certs.is_empty() {
        return Err(if is_blank(pem) {
            LoadReason::Empty
        } else {
            LoadReason::NoCertificate
        });
    }
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(LoadReason::BadCertificate(
            "no certificate in the file is a usable trust anchor".into(),
        ));
    }
    Ok(roots)
}

/// Whether the key file holds an encrypted PKCS#8 key, so `ssl_password_file` must be read.
pub fn needs_password(pem: &[u8]) -> bool {
    find(pem, ENCRYPTED_BEGIN).is_some() && find(pem, LEGACY_ENCRYPTED).is_none()
}

/// Splits an `ssl_password_file` into passphrases as nginx does: one per line, a trailing
/// CR dropped; a last line without LF counts, the empty remainder after a final LF does not.
pub fn parse_passwords(text: &[u8]) -> Vec<Vec<u8>> {
    let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
        .into_iter()
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
        .collect()
}

/// Parses a private key into a rustls signing key. `passwords` is `None` when no
/// `ssl_password_file` is set; it is only consulted for an encrypted PKCS#8 key.
pub fn parse_key(
    pem: &[u8],
    passwords: Option<&[Vec<u8>]>,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, LoadReason> {
    if find(pem, LEGACY_ENCRYPTED).is_some() {
        return Err(LoadReason::LegacyEncrypted);
    }
    if let Some(start) = find(pem, ENCRYPTED_BEGIN) {
        return parse_encrypted_key(&pem[start..], passwords, provider);
    }
    let mut found = None;
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        let (kind, der) = section.map_err(|e| LoadReason::Pem(e.to_string()))?;
        let key = match kind {
            SectionKind::PrivateKey => PrivateKeyDer::Pkcs8(der.into()),
            SectionKind::EcPrivateKey => PrivateKeyDer::Sec1(der.into()),
            SectionKind::RsaPrivateKey => PrivateKeyDer::Pkcs1(der.into()),
            _ => continue,
        };
        found = Some(key);
        break;
    }
    let Some(key) = found else {
        return Err(if is_blank(pem) {
            LoadReason::Empty
        } else {
            LoadReason::NoKey
        });
    };
    load_key(key, provider)
}

/// Hands DER to the provider's key loader (RSA, ECDSA P-256/P-384/P-521, Ed25519).
fn load_key(
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, LoadReason> {
    provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| LoadReason::UnsupportedKey(e.to_string()))
}

/// Decrypts the `ENCRYPTED PRIVATE KEY` section at the start of `pem` with each passphrase.
fn parse_encrypted_key(
    pem: &[u8],
    passwords: Option<&[Vec<u8>]>,
    provider: &CryptoProvider,
) -> Result<Arc<dyn SigningKey>, LoadReason> {
    let end = find(pem, ENCRYPTED_END)
        .ok_or_else(|| LoadReason::Pem("missing \"-----END ENCRYPTED PRIVATE KEY-----\"".into()))?;
    let block = &pem[..end + ENCRYPTED_END.len()];
    let (_label, der) =
        pkcs8::der::pem::decode_vec(block).map_err(|e| LoadReason::Pem(e.to_string()))?;
    let info = EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| LoadReason::BadEncryptedKey(e.to_string()))?;
    check_cost(&info.encryption_algorithm)?;
    let Some(passwords) = passwords else {
        return Err(LoadReason::NoPassword);
    };
    for password in passwords {
        let Ok(plain) = info.decrypt(password) else {
            continue;
        };
        // A wrong passphrase can still yield valid CBC padding (1 in 256): the key loader
        // is the real check.
        let key = PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into());
        if let Ok(key) = load_key(key, provider) {
            return Ok(key);
        }
    }
    Err(LoadReason::BadPassword {
        tried: passwords.len(),
    })
}

/// Refuses key-derivation parameters that would stall a load, or that the pkcs5 crate
/// mishandles (an scrypt cost of 0 overflows inside it).
fn check_cost(scheme: &EncryptionScheme<'_>) -> Result<(), LoadReason> {
    let EncryptionScheme::Pbes2(params) = scheme else {
        return Err(LoadReason::BadEncryptedKey(
            "PBES1 is not supported; re-encrypt with \"openssl pkcs8 -topk8 -v2 aes-256-cbc\""
                .into(),
        ));
    };
    match &params.kdf {
        Kdf::Pbkdf2(p) if p.iteration_count == 0 || p.iteration_count > MAX_PBKDF2_ITERATIONS => {
            Err(LoadReason::BadEncryptedKey(format!(
                "PBKDF2 iteration count {} is out of range 1..={MAX_PBKDF2_ITERATIONS}",
                p.iteration_count
            )))
        }
        Kdf::Pbkdf2(_) => Ok(()),
        Kdf::Scrypt(p) => {
            let n = p.cost_parameter;
            let r = u64::from(p.block_size);
            let bytes = 128u64.saturating_mul(r).saturating_mul(n);
            if n < 2
                || !n.is_power_of_two()
                || r == 0
                || p.parallelization == 0
                || bytes > MAX_SCRYPT_BYTES
            {
                Err(LoadReason::BadEncryptedKey(format!(
                    "scrypt parameters N={n} r={r} p={} are out of range",
                    p.parallelization
                )))
            } else {
                Ok(())
            }
        }
        _ => Err(LoadReason::BadEncryptedKey(
            "unsupported key derivation function".into(),
        )),
    }
}

/// Whether the bytes are only whitespace (an empty file).
fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// The offset of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ecdsa_pem, encrypt_pkcs8, provider, rsa_pem};
    use super::*;

    #[test]
    fn trusted_certificate_pem_loads_without_its_trust_settings() {
        let (cert_pem, _) = super::super::testutil::ecdsa_pem(&["localhost"]);
        let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem");
        // `openssl x509 -trustout`: the certificate, then X509_CERT_AUX (trust clientAuth).
        let mut aux = der.to_vec();
        aux.extend_from_slice(&[
            0x30, 0x0c, 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02,
        ]);
        let b64 = super::super::ocsp::base64(&aux);
        let mut pem = String::from("-----BEGIN TRUSTED CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("ascii"));
            pem.push('\n');
        }
        pem.push_str("-----END TRUSTED CERTIFICATE-----\n");
        let chain = parse_chain(pem.as_bytes()).expect("a TRUSTED CERTIFICATE loads");
        assert_eq!(chain, vec![der.clone()], "the trust settings are dropped");
        let roots = parse_roots(pem.as_bytes()).expect("as a CA file too");
        assert_eq!(roots.len(), 1);
        // A plain CERTIFICATE is taken whole, as before.
        assert_eq!(parse_chain(cert_pem.as_bytes()).expect("plain"), vec![der]);
    }

    #[test]
    fn chain_and_key_parse() {
        let (cert, key) = ecdsa_pem(&["localhost"]);
        let chain = parse_chain(cert.as_bytes()).expect("chain");
        assert_eq!(chain.len(), 1);
        let k = parse_key(key.as_bytes(), None, &provider()).expect("key");
        assert_eq!(k.algorithm(), rustls::SignatureAlgorithm::ECDSA);
        let (cert2, _) = ecdsa_pem(&["b"]);
        let two = format!("{cert}{key}{cert2}");
        assert_eq!(parse_chain(two.as_bytes()).expect("chain").len(), 2);
    }

    #[test]
    fn rsa_pkcs1_and_sec1_keys() {
        let (_, key) = rsa_pem(&["localhost"]);
        let k = parse_key(key.as_bytes(), None, &provider()).expect("pkcs8 rsa");
        assert_eq!(k.algorithm(), rustls::SignatureAlgorithm::RSA);
        // The same key as PKCS#1 and an EC key as SEC1, re-armoured.
        let der = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("der");
        let pkcs1 = rsa_pkcs1_from_pkcs8(der.secret_der());
        let pem = pem_armour("RSA PRIVATE KEY", &pkcs1);
        let k = parse_key(pem.as_bytes(), None, &provider()).expect("pkcs1");
        assert_eq!(k.algorithm(), rustls::SignatureAlgorithm::RSA);
    }

    /// The PKCS#1 `RSAPrivateKey` inside a PKCS#8 `PrivateKeyInfo` (its OCTET STRING).
    fn rsa_pkcs1_from_pkcs8(pkcs8: &[u8]) -> Vec<u8> {
        let info = pkcs8::PrivateKeyInfo::try_from(pkcs8).expect("pkcs8");
        info.private_key.to_vec()
    }

    fn pem_armour(label: &str, der: &[u8]) -> String {
        pkcs8::der::pem::encode_string(label, pkcs8::der::pem::LineEnding::LF, der).expect("pem")
    }

    #[test]
    fn key_file_with_ec_parameters_first() {
        let (_, key) = ecdsa_pem(&["localhost"]);
        let text = format!(
            "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{key}"
        );
        assert!(parse_key(text.as_bytes(), None, &provider()).is_ok());
    }

    #[test]
    fn broken_files_are_errors_not_panics() {
        let p = provider();
        let (cert, key) = ecdsa_pem(&["localhost"]);
        assert!(matches!(parse_chain(b""), Err(LoadReason::Empty)));
        assert!(matches!(parse_chain(b"\n \n"), Err(LoadReason::Empty)));
        assert!(matches!(
            parse_chain(b"garbage \x00\xff"),
            Err(LoadReason::NoCertificate)
        ));
        let truncated = &cert.as_bytes()[..cert.len() / 2];
        assert!(matches!(parse_chain(truncated), Err(LoadReason::Pem(_))));
        let bad_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            parse_chain(bad_der.as_bytes()),
            Err(LoadReason::BadCertificate(_))
        ));
        assert!(matches!(parse_key(b"", None, &p), Err(LoadReason::Empty)));
        assert!(matches!(
            parse_key(cert.as_bytes(), None, &p),
            Err(LoadReason::NoKey)
        ));
        let truncated = &key.as_bytes()[..key.len() - 20];
        assert!(matches!(
            parse_key(truncated, None, &p),
            Err(LoadReason::Pem(_))
        ));
        let bad = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(matches!(
            parse_key(bad.as_bytes(), None, &p),
            Err(LoadReason::UnsupportedKey(_))
        ));
        let bad =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let pw = [b"x".to_vec()];
        assert!(matches!(
            parse_key(bad.as_bytes(), Some(&pw), &p),
            Err(LoadReason::BadEncryptedKey(_))
        ));
        let unterminated = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n";
        assert!(matches!(
            parse_key(unterminated.as_bytes(), Some(&pw), &p),
            Err(LoadReason::Pem(_))
        ));
        assert!(matches!(
            parse_roots(b"nothing"),
            Err(LoadReason::NoCertificate)
        ));
    }

    #[test]
    fn legacy_encrypted_pem_names_the_conversion() {
        let legacy = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
                      DEK-Info: AES-256-CBC,0123456789ABCDEF0123456789ABCDEF\n\nAAAA\n\
                      -----END EC PRIVATE KEY-----\n";
        let err = parse_key(legacy.as_bytes(), Some(&[b"pw".to_vec()]), &provider())
            .expect_err("an error");
        assert!(matches!(err, LoadReason::LegacyEncrypted));
        assert!(err
            .to_string()
            .contains("openssl pkcs8 -topk8 -in OLD.key -out NEW.key"));
        assert!(!needs_password(legacy.as_bytes()));
    }

    #[test]
    fn encrypted_pkcs8_tries_each_passphrase() {
        let p = provider();
        let (_, key) = ecdsa_pem(&["localhost"]);
        let enc = encrypt_pkcs8(&key, b"right");
        assert!(needs_password(enc.as_bytes()));
        assert!(matches!(
            parse_key(enc.as_bytes(), None, &p),
            Err(LoadReason::NoPassword)
        ));
        let wrong = parse_passwords(b"nope\nalso-wrong\n");
        assert!(matches!(
            parse_key(enc.as_bytes(), Some(&wrong), &p),
            Err(LoadReason::BadPassword { tried: 2 })
        ));
        let pws = parse_passwords(b"nope\r\nright\r\n");
        let k = parse_key(enc.as_bytes(), Some(&pws), &p).expect("decrypted");
        assert_eq!(k.algorithm(), rustls::SignatureAlgorithm::ECDSA);
    }

    #[test]
    fn password_lines_as_nginx() {
        assert_eq!(parse_passwords(b"a\nb"), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            parse_passwords(b"a\r\n\nb\n"),
            vec![b"a".to_vec(), vec![], b"b".to_vec()]
        );
        assert!(parse_passwords(b"").is_empty());
    }

    #[test]
    fn hostile_kdf_parameters_are_refused() {
        use pkcs8::pkcs5::pbes2;
        let salt = [1u8; 16];
        let iv = [2u8; 16];
        let mut params = pbes2::Parameters::pbkdf2_sha256_aes256cbc(1, &salt, &iv).expect("params");
        if let Kdf::Pbkdf2(k) = &mut params.kdf {
            k.iteration_count = u32::MAX;
        }
        assert!(check_cost(&EncryptionScheme::Pbes2(params)).is_err());
        let mut params = pbes2::Parameters::scrypt_aes256cbc(
            pkcs8::pkcs5::scrypt::Params::new(4, 8, 1, 32).expect("scrypt"),
            &salt,
            &iv,
        )
        .expect("params");
        assert!(check_cost(&EncryptionScheme::Pbes2(params.clone())).is_ok());
        if let Kdf::Scrypt(k) = &mut params.kdf {
            k.cost_parameter = 0;
        }
        assert!(check_cost(&EncryptionScheme::Pbes2(params)).is_err());
    }

    /// Keys as `openssl` writes them (`testdata/tls/make.sh`).
    #[test]
    fn openssl_fixtures() {
        macro_rules! fixture {
            ($name:literal) => {
                include_bytes!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../testdata/tls/",
                    $name
                ))
            };
        }
        let p = provider();
        let pws = parse_passwords(fixture!("password.txt"));
        assert_eq!(pws.len(), 2);
        let ec = parse_key(fixture!("ec.key"), None, &p).expect("sec1 after EC PARAMETERS");
        let enc = parse_key(fixture!("ec-pkcs8-aes256.key"), Some(&pws), &p).expect("pkcs8 enc");
        assert_eq!(
            ec.public_key(),
            enc.public_key(),
            "decrypts to the same key"
        );
        let chain = parse_chain(fixture!("ec.crt")).expect("cert");
        let ck = CertifiedKey::new(chain, enc.clone());
        assert!(keys_match(&ck));
        let rsa = parse_key(fixture!("rsa-pkcs1.key"), None, &p).expect("pkcs1");
        let rsa_chain = parse_chain(fixture!("rsa.crt")).expect("rsa");
        assert!(keys_match(&CertifiedKey::new(
            rsa_chain.clone(),
            rsa.clone()
        )));
        assert!(!keys_match(&CertifiedKey::new(rsa_chain, enc)));
        // X.509 v1, as `openssl req -x509` writes it without extensions, for the same key.
        let v1 = parse_chain(fixture!("ec-v1.crt")).expect("v1 certificate loads");
        let (_, parsed) = x509_parser::parse_x509_certificate(v1[0].as_ref()).expect("x509");
        assert_eq!(parsed.version(), x509_parser::x509::X509Version::V1);
        assert!(keys_match(&CertifiedKey::new(v1.clone(), ec)));
        assert!(!keys_match(&CertifiedKey::new(v1, rsa)));
        for legacy in [
            &fixture!("ec-legacy.key")[..],
            &fixture!("rsa-legacy.key")[..],
        ] {
            assert!(matches!(
                parse_key(legacy, Some(&pws), &p),
                Err(LoadReason::LegacyEncrypted)
            ));
        }
        assert!(matches!(
            parse_key(fixture!("ec-pkcs8-aes256.key"), Some(&pws[..1]), &p),
            Err(LoadReason::BadPassword { tried: 1 })
        ));
        assert!(matches!(
            parse_key(b"garbage\x00\xff", None, &p),
            Err(LoadReason::NoKey)
        ));
    }

    #[test]
    fn roots_parse() {
        let (cert, _) = ecdsa_pem(&["ca"]);
        assert_eq!(parse_roots(cert.as_bytes()).expect("roots").len(), 1);
    }
}
