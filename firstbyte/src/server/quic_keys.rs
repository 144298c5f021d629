//! QUIC's server secrets, derived by HKDF-SHA256 (aws-lc-rs) from one host key: the key that
//! signs stateless reset tokens and the one that keys the connection IDs' check (an
//! endpoint's), and the key that seals address-validation (Retry) tokens (a server config's).
//! A stateless reset needs both endpoint keys: quinn answers a packet for a connection it does
//! not know only when the connection ID passes the check, so another instance (or a restart)
//! resets a client's connection only with the same host key. The host key is `quic_host_key`'s file, or else a random
//! secret made once per process, so a reload keeps tokens and resets valid.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use aws_lc_rs::{hkdf, hmac};

use crate::conf::model::ServerConf;

/// Keeps keys from firstbyte's HKDF apart from any other use of the same file.
const SALT: &[u8] = b"firstbyte quic_host_key";

/// The keys derived from one host key.
pub(super) struct HostKeys {
    /// Signs stateless reset tokens (HMAC-SHA256 of the connection ID).
    pub reset: hmac::Key,
    /// Seals Retry tokens (quinn derives one AEAD key per token from it).
    pub token: Arc<hkdf::Prk>,
    /// Keys the hash in connection IDs (see [`CidGenerator`]).
    pub cid: u64,
}

/// An HKDF output length.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

impl HostKeys {
    /// The keys of `server`'s `quic_host_key`, or of the process's own secret.
    pub fn of(server: &ServerConf) -> HostKeys {
        match &server.quic_host_key {
            Some(k) => Self::derive(&k.secret),
            None => Self::derive(process_secret()),
        }
    }

    /// HKDF-Extract with firstbyte's salt, then one Expand per key, each with its own label.
    pub fn derive(secret: &[u8]) -> HostKeys {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(secret);
        // Expand fails only for more than 255 hash lengths of output; each key is one.
        let reset = prk
            .expand(&[b"sr_token_key".as_slice()], hmac::HMAC_SHA256)
            .map(hmac::Key::from);
        let token = prk
            .expand(&[b"av_token_key".as_slice()], hkdf::HKDF_SHA256)
            .map(hkdf::Prk::from);
        let mut cid = [0u8; 8];
        let cid_ok = prk
            .expand(&[b"cid_key".as_slice()], Len(cid.len()))
            .and_then(|okm| okm.fill(&mut cid));
        let (Ok(reset), Ok(token), Ok(())) = (reset, token, cid_ok) else {
            unreachable!("at most one hash length of HKDF output")
        };
        HostKeys {
            reset,
            token: Arc::new(token),
            cid: u64::from_le_bytes(cid),
        }
    }
}

/// 32 random bytes made once per process: the host key without `quic_host_key`.
fn process_secret() -> &'static [u8] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut s = [0u8; 32];
        // aws-lc's RNG does not fail on Linux; a zero key would still be a valid (weak) one.
        let _ = aws_lc_rs::rand::fill(&mut s);
        s
    })
}

/// An endpoint's stateless reset key. quinn fixes it when the endpoint is made; a reload that
/// changes `quic_host_key` swaps the key inside, so the UDP socket stays.
pub(super) struct ResetKey(ArcSwap<hmac::Key>);

impl ResetKey {
    pub fn new(key: hmac::Key) -> Arc<ResetKey> {
        Arc::new(ResetKey(ArcSwap::from_pointee(key)))
    }

    pub fn set(&self, key: hmac::Key) {
        self.0.store(Arc::new(key));
    }
}

impl quinn::crypto::HmacKey for ResetKey {
    fn sign(&self, data: &[u8], signature_out: &mut [u8]) {
        quinn::crypto::HmacKey::sign(&**self.0.load(), data, signature_out)
    }

    fn signature_len(&self) -> usize {
        quinn::crypto::HmacKey::signature_len(&**self.0.load())
    }

    fn verify(&self, data: &[u8], signature: &[u8]) -> Result<(), quinn::crypto::CryptoError> {
        quinn::crypto::HmacKey::verify(&**self.0.load(), data, signature)
    }
}

/// quinn's 8-byte connection IDs (3 random bytes and 5 of a keyed hash of them, which lets a
/// packet for an unknown connection be checked before it is answered with a stateless reset),
/// with the key from the host key and swapped by a reload.
pub(super) struct CidGenerator(pub Arc<AtomicU64>);

impl CidGenerator {
    fn hashed(&self) -> quinn_proto::HashedConnectionIdGenerator {
        quinn_proto::HashedConnectionIdGenerator::from_key(self.0.load(Ordering::Relaxed))
    }
}

impl quinn::ConnectionIdGenerator for CidGenerator {
    fn generate_cid(&mut self) -> quinn::ConnectionId {
        self.hashed().generate_cid()
    }

    fn validate(&self, cid: &quinn::ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        self.hashed().validate(cid)
    }

    fn cid_len(&self) -> usize {
        self.hashed().cid_len()
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn::crypto::HmacKey;

    fn tag(k: &dyn HmacKey, data: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; k.signature_len()];
        k.sign(data, &mut out);
        out
    }

    #[test]
    fn the_same_secret_gives_the_same_keys_and_others_do_not() {
        let a = HostKeys::derive(&[1u8; 32]);
        let b = HostKeys::derive(&[1u8; 32]);
        let c = HostKeys::derive(&[2u8; 32]);
        assert_eq!(tag(&a.reset, b"cid"), tag(&b.reset, b"cid"));
        assert_ne!(tag(&a.reset, b"cid"), tag(&c.reset, b"cid"));
        // The token key is not the reset key: a sealed token opens with b's, not c's.
        use quinn::crypto::HandshakeTokenKey;
        let mut sealed = b"token".to_vec();
        a.token
            .aead_from_hkdf(b"nonce")
            .seal(&mut sealed, b"")
            .unwrap();
        let mut copy = sealed.clone();
        assert_eq!(
            b.token
                .aead_from_hkdf(b"nonce")
                .open(&mut copy, b"")
                .unwrap(),
            b"token"
        );
        let mut copy = sealed.clone();
        assert!(c
            .token
            .aead_from_hkdf(b"nonce")
            .open(&mut copy, b"")
            .is_err());
        assert_eq!(a.cid, b.cid);
        assert_ne!(a.cid, c.cid);
    }

    #[test]
    fn connection_ids_check_with_the_same_key_only() {
        use quinn::ConnectionIdGenerator;
        let key = Arc::new(AtomicU64::new(HostKeys::derive(&[1u8; 32]).cid));
        let mut a = CidGenerator(key.clone());
        let cid = a.generate_cid();
        assert_eq!(cid.len(), 8);
        assert!(a.validate(&cid).is_ok());
        let b = CidGenerator(Arc::new(AtomicU64::new(HostKeys::derive(&[1u8; 32]).cid)));
        assert!(
            b.validate(&cid).is_ok(),
            "another instance with the same key"
        );
        key.store(HostKeys::derive(&[2u8; 32]).cid, Ordering::Relaxed);
        assert!(a.validate(&cid).is_err(), "after a reload to another key");
    }

    #[test]
    fn the_process_secret_is_made_once_and_a_reset_key_swaps() {
        assert_eq!(process_secret(), process_secret());
        assert_ne!(process_secret(), &[0u8; 32]);
        let k = ResetKey::new(HostKeys::derive(&[1u8; 32]).reset);
        let before = tag(&*k, b"cid");
        k.verify(b"cid", &before).expect("own tag verifies");
        k.set(HostKeys::derive(&[2u8; 32]).reset);
        assert_ne!(tag(&*k, b"cid"), before);
        assert!(k.verify(b"cid", &before).is_err());
    }
}
