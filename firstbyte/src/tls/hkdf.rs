//! TLS 1.3's key schedule over HMAC keys made once per secret.
//!
//! rustls' aws-lc-rs provider runs HKDF-Expand through aws-lc's `HKDF_expand`, which keys
//! HMAC afresh on every expand: two extra SHA-256 compressions (the padded key, inner and
//! outer) for each of the ~14 labels a TLS 1.3 handshake expands, and each expand needs only
//! two more. Here each secret is keyed once (`hmac::Key` keeps the padded inner and outer
//! states) and every expand under it starts from a copy of those states: the same bytes, about
//! half the hashing. Callgrind over 1,020 full TLS 1.3 handshakes (two tickets each, the
//! loopback bench's `--only handshake`): 1.164 M → 1.108 M instructions per handshake, SHA-256
//! blocks 141 → 103, `HMAC_Init_ex` calls 30 → 16.
//!
//! Only the HKDF changes: the suites keep aws-lc-rs' AEADs, hashes and QUIC keys (copied from
//! rustls' own suite values), so negotiation, names and resumption checks are unchanged.

use std::sync::OnceLock;

use aws_lc_rs::hmac as lc;
use rustls::crypto::aws_lc_rs::cipher_suite as cs;
use rustls::crypto::hmac::{Hmac, Key, Tag};
use rustls::crypto::tls13::HkdfUsingHmac;
use rustls::{SupportedCipherSuite, Tls13CipherSuite};

/// aws-lc's HMAC with the key's padded states computed once per key.
struct KeyedHmac(lc::Algorithm);

struct KeyedHmacKey(lc::Key);

impl Hmac for KeyedHmac {
    fn with_key(&self, key: &[u8]) -> Box<dyn Key> {
        Box::new(KeyedHmacKey(lc::Key::new(self.0, key)))
    }

    fn hash_output_len(&self) -> usize {
        self.0.digest_algorithm().output_len()
    }

    fn fips(&self) -> bool {
        aws_lc_rs::try_fips_mode().is_ok()
    }
}

impl Key for KeyedHmacKey {
    fn sign_concat(&self, first: &[u8], middle: &[&[u8]], last: &[u8]) -> Tag {
        // `Context::with_key` copies the key's keyed states: no re-hashing of the pads.
        let mut ctx = lc::Context::with_key(&self.0);
        ctx.update(first);
        for m in middle {
            ctx.update(m);
        }
        ctx.update(last);
        Tag::new(ctx.sign().as_ref())
    }

    fn tag_len(&self) -> usize {
        self.0.algorithm().digest_algorithm().output_len()
    }
}

static HMAC_SHA256: KeyedHmac = KeyedHmac(lc::HMAC_SHA256);
static HMAC_SHA384: KeyedHmac = KeyedHmac(lc::HMAC_SHA384);
static HKDF_SHA256: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA256);
static HKDF_SHA384: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA384);

/// `suite` (one of rustls' aws-lc-rs TLS 1.3 suites) with the keyed-once HKDF.
fn rekeyed(suite: SupportedCipherSuite, sha384: bool) -> Tls13CipherSuite {
    let SupportedCipherSuite::Tls13(s) = suite else {
        unreachable!("called with TLS 1.3 suites only")
    };
    Tls13CipherSuite {
        common: rustls::CipherSuiteCommon {
            suite: s.common.suite,
            hash_provider: s.common.hash_provider,
            confidentiality_limit: s.common.confidentiality_limit,
        },
        hkdf_provider: if sha384 { &HKDF_SHA384 } else { &HKDF_SHA256 },
        aead_alg: s.aead_alg,
        quic: s.quic,
    }
}

/// The three TLS 1.3 suites, in rustls' order, with the keyed-once HKDF.
pub fn suites() -> [SupportedCipherSuite; 3] {
    static SUITES: OnceLock<[Tls13CipherSuite; 3]> = OnceLock::new();
    let s = SUITES.get_or_init(|| {
        [
            rekeyed(cs::TLS13_AES_256_GCM_SHA384, true),
            rekeyed(cs::TLS13_AES_128_GCM_SHA256, false),
            rekeyed(cs::TLS13_CHACHA20_POLY1305_SHA256, false),
        ]
    });
    [
        SupportedCipherSuite::Tls13(&s[0]),
        SupportedCipherSuite::Tls13(&s[1]),
        SupportedCipherSuite::Tls13(&s[2]),
    ]
}

/// `suite` replaced by its keyed-once twin when it is one of the three TLS 1.3 suites.
pub fn keyed_once(suite: SupportedCipherSuite) -> SupportedCipherSuite {
    suites()
        .into_iter()
        .find(|s| s.suite() == suite.suite())
        .unwrap_or(suite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::tls13::{Hkdf, OkmBlock};

    /// RFC 5869 test case 1 (SHA-256), through rustls' `Hkdf` interface: extract, then a
    /// 42-byte expand.
    #[test]
    fn rfc5869_case_1() {
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let exp = HKDF_SHA256.extract_from_secret(Some(&salt), &ikm);
        let mut okm = [0u8; 42];
        exp.expand_slice(&[&info], &mut okm).expect("expand");
        let want = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf\
                    34007208d5b887185865";
        let got: String = okm.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, want);
    }

    /// Every expand agrees with aws-lc-rs' own HKDF (rustls' stock suite) for both hashes, over
    /// labels of the lengths TLS 1.3 uses.
    #[test]
    fn agrees_with_the_stock_provider() {
        for (ours, stock) in [
            (&HKDF_SHA256 as &dyn Hkdf, cs::TLS13_AES_128_GCM_SHA256),
            (&HKDF_SHA384, cs::TLS13_AES_256_GCM_SHA384),
        ] {
            let SupportedCipherSuite::Tls13(stock) = stock else {
                unreachable!()
            };
            let stock = stock.hkdf_provider;
            let secret = [7u8; 48];
            let a = ours.extract_from_secret(Some(b"salt"), &secret[..ours_len(ours)]);
            let b = stock.extract_from_secret(Some(b"salt"), &secret[..ours_len(ours)]);
            for info in [&b"tls13 c hs traffic"[..], b"", &[9u8; 100]] {
                assert_eq!(
                    a.expand_block(&[info]).as_ref(),
                    b.expand_block(&[info]).as_ref()
                );
                let (mut x, mut y) = ([0u8; 12], [0u8; 12]);
                a.expand_slice(&[info, b"iv"], &mut x).unwrap();
                b.expand_slice(&[info, b"iv"], &mut y).unwrap();
                assert_eq!(x, y);
            }
            let okm = OkmBlock::new(&secret[..ours_len(ours)]);
            assert_eq!(
                ours.hmac_sign(&okm, b"finished").as_ref(),
                stock.hmac_sign(&okm, b"finished").as_ref()
            );
            let z1 = ours.extract_from_zero_ikm(None).expand_block(&[b"derived"]);
            let z2 = stock
                .extract_from_zero_ikm(None)
                .expand_block(&[b"derived"]);
            assert_eq!(z1.as_ref(), z2.as_ref());
        }
    }

    fn ours_len(h: &dyn Hkdf) -> usize {
        h.extract_from_zero_ikm(None).hash_len()
    }

    #[test]
    fn suites_keep_their_ids_and_swap_only_tls13() {
        for s in suites() {
            assert_eq!(keyed_once(s).suite(), s.suite());
        }
        let tls12 = cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256;
        assert_eq!(keyed_once(tls12).suite(), tls12.suite());
        let SupportedCipherSuite::Tls13(ours) = keyed_once(cs::TLS13_AES_128_GCM_SHA256) else {
            unreachable!()
        };
        assert!(std::ptr::eq(
            ours.hkdf_provider as *const dyn Hkdf as *const u8,
            &HKDF_SHA256 as *const HkdfUsingHmac as *const u8
        ));
    }
}
