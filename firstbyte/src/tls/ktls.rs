//! Kernel TLS (`ssl_conf_command Options KTLS`): after a handshake made by rustls in user
//! space, the record layer moves into the kernel (`TCP_ULP "tls"`, `TLS_TX`, `TLS_RX`), so a
//! file body leaves with `sendfile(2)` — page cache to socket, encrypted by the kernel, with no
//! copy through user space — as nginx does with OpenSSL's `SSL_sendfile`.
//!
//! The switch is decided *before* rustls gives up its state, so a connection is never lost to
//! a switch that fails: once at start [`sys::support`] probes what the kernel takes (the `tls`
//! module, then `TLS_TX` and `TLS_RX` for each version and cipher, on a loopback pair), and
//! per connection [`decide`] compares the handshake's result with that probe. Only then does
//! [`sys::switch`] write what rustls still has queued (the TLS 1.3 session tickets), extract
//! the traffic keys with their sequence numbers and hand them to the kernel (for TLS 1.3, the
//! sending ones only: see below).
//!
//! What stays in user space, and why:
//! - **HTTP/2.** HTTP/2 frames every DATA chunk itself, so its bytes pass through user space
//!   anyway and gain no `sendfile` (nginx's `sendfile` is HTTP/1.x-only too, though its HTTP/2
//!   writes do go through OpenSSL's kTLS). Measured (`firstbyte-bench ktls --h2`,
//!   `bench/results/2026-11-26-ktls-h2`): HTTP/2 through kTLS was slower and cost 1.3–1.6×
//!   the server CPU per byte, so it stays with rustls. `FIRSTBYTE_KTLS_H2=1` switches it for
//!   that bench ([`sys::h2_in_kernel`]).
//! - **TLS 1.3 records from the client** ([`rx`]). Only `TLS_TX` goes to the kernel; the
//!   socket's receive path stays plain TCP (the `tls` module leaves it alone without
//!   `TLS_RX`) and [`rx::Reader`] opens the client's records with the suite's own decrypter
//!   (rustls' provider, no cryptography of ours). The reason is the client's KeyUpdate: its
//!   next records use keys derived from its traffic *secret*, which rustls' buffered
//!   connection does not hand over (only keys; `KernelConnection` exists only for the
//!   unbuffered API) and kernels before TLS 1.3 rekey support (Debian 12's 6.1 among them)
//!   cannot take as a second `TLS_RX`. The secret is kept during the handshake through a
//!   `KeyLog` ([`rx::capture`]), the next one derived (RFC 8446 §7.2) and the connection
//!   reads on. This is always so for TLS 1.3, on every kernel: one path, and a client's
//!   request bytes are few next to the response bytes `sendfile` saves. TLS 1.2 has no
//!   KeyUpdate: both directions go to the kernel. The start-up line and each connection's
//!   `ktls_rx` (the connection page) say which.
//! - **Our own KeyUpdate.** A client's KeyUpdate with `update_requested` (rustls clients send
//!   only that kind) requires ours before our next data (RFC 8446 §4.6.3), which needs new
//!   sending keys the kernel cannot take either: the connection sends close_notify and closes
//!   with an `[info]` line ([`rx::Fail::UpdateRequested`]). `openssl s_client`'s `k`
//!   (update_not_requested) is followed; its `K` closes.
//!
//! `ssl_conf_command Options KTLSTxZerocopySendfile` (OpenSSL's option, off by default) sets
//! `TLS_TX_ZEROCOPY_RO` after `TLS_TX` where the start-up probe found the kernel takes it
//! ([`Zerocopy`]; else `sendfile` copies, silently): the file's pages go out without the
//! kernel's copy. That is safe only while served files are not changed in place.
//!
//! The decisions here are plain code (cipher mapping, probe result → decision, the kernel's
//! `crypto_info` bytes, record sizes → send calls), unit-tested; `sys` is the shell of
//! `setsockopt`, `recvmsg`/`sendmsg` with control messages and `sendfile`.

pub(crate) mod rx;
pub(crate) mod sys;

use rustls::{CipherSuite, ConnectionTrafficSecrets, ProtocolVersion};

use crate::record::MAX_RECORD_SIZE;

/// A cipher the kernel's `tls` module may offer (`linux/tls.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelCipher {
    /// `TLS_CIPHER_AES_GCM_128` (51).
    Aes128Gcm,
    /// `TLS_CIPHER_AES_GCM_256` (52).
    Aes256Gcm,
    /// `TLS_CIPHER_CHACHA20_POLY1305` (54).
    Chacha20Poly1305,
}

impl KernelCipher {
    /// Every cipher firstbyte's suites can use.
    pub const ALL: [KernelCipher; 3] = [Self::Aes128Gcm, Self::Aes256Gcm, Self::Chacha20Poly1305];

    /// The kernel's `cipher_type`.
    pub fn code(self) -> u16 {
        match self {
            Self::Aes128Gcm => 51,
            Self::Aes256Gcm => 52,
            Self::Chacha20Poly1305 => 54,
        }
    }

    /// The name in log lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Aes128Gcm => "AES-128-GCM",
            Self::Aes256Gcm => "AES-256-GCM",
            Self::Chacha20Poly1305 => "CHACHA20-POLY1305",
        }
    }

    fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm | Self::Chacha20Poly1305 => 32,
        }
    }

    /// The implicit part of the nonce: 4 bytes for GCM (the rest of rustls' 12-byte IV goes
    /// in the `iv` field), none for ChaCha20 (all 12 bytes are the `iv` field).
    fn salt_len(self) -> usize {
        match self {
            Self::Aes128Gcm | Self::Aes256Gcm => 4,
            Self::Chacha20Poly1305 => 0,
        }
    }
}

/// The TLS versions the kernel offloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelVersion {
    /// TLS 1.2 (`TLS_1_2_VERSION`, 0x0303).
    Tls12,
    /// TLS 1.3 (`TLS_1_3_VERSION`, 0x0304).
    Tls13,
}

impl KernelVersion {
    /// Both versions.
    pub const ALL: [KernelVersion; 2] = [Self::Tls12, Self::Tls13];

    fn code(self) -> u16 {
        match self {
            Self::Tls12 => 0x0303,
            Self::Tls13 => 0x0304,
        }
    }

    /// `TLSv1.2` / `TLSv1.3`, as the logs spell versions.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tls12 => "TLSv1.2",
            Self::Tls13 => "TLSv1.3",
        }
    }

    /// The kernel version of a negotiated rustls version.
    pub fn of(v: ProtocolVersion) -> Option<Self> {
        match v {
            ProtocolVersion::TLSv1_2 => Some(Self::Tls12),
            ProtocolVersion::TLSv1_3 => Some(Self::Tls13),
            _ => None,
        }
    }
}

/// The kernel cipher a negotiated suite needs, if the kernel has one for it.
pub fn cipher_of(suite: CipherSuite) -> Option<KernelCipher> {
    use CipherSuite as S;
    match suite {
        S::TLS13_AES_128_GCM_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Some(KernelCipher::Aes128Gcm),
        S::TLS13_AES_256_GCM_SHA384
        | S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Some(KernelCipher::Aes256Gcm),
        S::TLS13_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Some(KernelCipher::Chacha20Poly1305),
        _ => None,
    }
}

/// What the start-up probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// `setsockopt(TCP_ULP, "tls")` failed: no kernel TLS at all (the reason, as logged).
    NoModule(String),
    /// The module is there; these (version, cipher) pairs took `TLS_TX` (and, for TLS 1.2,
    /// `TLS_RX`: TLS 1.3 records from clients are opened in user space, [`rx`]).
    Ciphers(Vec<(KernelVersion, KernelCipher)>),
}

impl Support {
    /// The one line logged at start when kernel TLS cannot be used, `None` when it can
    /// (with at least one cipher).
    pub fn warning(&self) -> Option<String> {
        match self {
            Self::NoModule(why) => Some(format!(
                "kernel TLS is not available ({why}): \"ssl_conf_command Options KTLS\" is ignored, TLS is served in user space"
            )),
            Self::Ciphers(c) if c.is_empty() => Some(
                "kernel TLS takes none of the ciphers (AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305): \"ssl_conf_command Options KTLS\" is ignored, TLS is served in user space"
                    .to_string(),
            ),
            Self::Ciphers(_) => None,
        }
    }

    /// The line logged at start when kernel TLS can be used: what it takes.
    pub fn summary(&self) -> String {
        match self {
            Self::NoModule(_) => String::new(),
            Self::Ciphers(c) => {
                let list: Vec<String> = c
                    .iter()
                    .map(|(v, c)| format!("{} {}", v.name(), c.name()))
                    .collect();
                let mut line = format!("kernel TLS available for {}", list.join(", "));
                if c.iter().any(|(v, _)| *v == KernelVersion::Tls13) {
                    line.push_str(
                        "; TLSv1.3 records from clients are decrypted in user space (so that a client's KeyUpdate is followed)",
                    );
                }
                line
            }
        }
    }
}

/// What the start-up probe found for `setsockopt(SOL_TLS, TLS_TX_ZEROCOPY_RO, 1)` (OpenSSL's
/// `Options KTLSTxZerocopySendfile`): `sendfile` then hands the file's pages on without the
/// kernel's copy. The kernel's documentation: the pages must not change until sent, or a
/// retransmission may carry different bytes under the same record (the peer sees a record that
/// fails authentication). Linux ≥ 5.19; its zerocopy path is the device-offload one (`TLS_HW`),
/// software kTLS (`TLS_SW`) takes the option and encrypts as before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zerocopy {
    /// The kernel takes the option.
    Available,
    /// The kernel does not know it (`ENOPROTOOPT`: before 5.19) or refuses it (`EINVAL`):
    /// `sendfile` copies, said only at debug level (as OpenSSL, which ignores the failure).
    Unsupported(String),
    /// Another failure: `sendfile` copies, said once at start (a `[notice]`).
    Failed(String),
}

impl Zerocopy {
    /// The probe's result from the `setsockopt` call's outcome (its `errno` on failure).
    pub fn of(r: Result<(), i32>, why: impl FnOnce() -> String) -> Self {
        match r {
            Ok(()) => Self::Available,
            Err(libc::EINVAL | libc::ENOPROTOOPT) => Self::Unsupported(why()),
            Err(_) => Self::Failed(why()),
        }
    }

    /// Whether a connection of a server that asked (`asked`) sends files without the copy.
    pub fn used(&self, asked: bool) -> bool {
        asked && *self == Self::Available
    }
}

/// A connection's record layer after its handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Hand the keys to the kernel.
    Kernel(KernelVersion, KernelCipher),
    /// Stay in user space, for this reason (logged at debug level).
    User(&'static str),
}

/// Decides where a connection's records are made, from the probe and the handshake's result
/// (version, suite, ALPN). Called before anything is taken from rustls. `h2_in_kernel`:
/// HTTP/2 connections switch too (the measuring switch, [`sys::h2_in_kernel`]).
pub fn decide(
    support: &Support,
    version: Option<ProtocolVersion>,
    suite: Option<CipherSuite>,
    alpn: &str,
    h2_in_kernel: bool,
) -> Decision {
    let Support::Ciphers(have) = support else {
        return Decision::User("the kernel has no TLS module");
    };
    if alpn == "h2" && !h2_in_kernel {
        return Decision::User("HTTP/2 stays in user space");
    }
    let Some(v) = version.and_then(KernelVersion::of) else {
        return Decision::User("protocol version not offloaded");
    };
    let Some(c) = suite.and_then(cipher_of) else {
        return Decision::User("cipher has no kernel offload");
    };
    if !have.contains(&(v, c)) {
        return Decision::User("the kernel does not take this cipher");
    }
    Decision::Kernel(v, c)
}

/// Why traffic keys cannot go to the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported;

/// The kernel's `struct tls12_crypto_info_*` for `setsockopt(SOL_TLS, TLS_TX | TLS_RX)`:
/// version, cipher type, IV (explicit part), key, salt (implicit part of the IV), record
/// sequence number (big-endian), in that order, with no padding.
pub fn crypto_info(
    version: KernelVersion,
    secrets: &ConnectionTrafficSecrets,
    seq: u64,
) -> Result<Vec<u8>, Unsupported> {
    let (cipher, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
            (KernelCipher::Aes128Gcm, key.as_ref(), iv.as_ref())
        }
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            (KernelCipher::Aes256Gcm, key.as_ref(), iv.as_ref())
        }
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (KernelCipher::Chacha20Poly1305, key.as_ref(), iv.as_ref())
        }
        _ => return Err(Unsupported),
    };
    raw_crypto_info(version, cipher, key, iv, seq)
}

/// [`crypto_info`] from raw parts (the probe uses zero keys).
pub fn raw_crypto_info(
    version: KernelVersion,
    cipher: KernelCipher,
    key: &[u8],
    iv: &[u8],
    seq: u64,
) -> Result<Vec<u8>, Unsupported> {
    if key.len() != cipher.key_len() || iv.len() != 12 {
        return Err(Unsupported);
    }
    let (salt, iv) = iv.split_at(cipher.salt_len());
    let mut out = Vec::with_capacity(4 + 12 + 32 + 8);
    out.extend_from_slice(&version.code().to_ne_bytes());
    out.extend_from_slice(&cipher.code().to_ne_bytes());
    out.extend_from_slice(iv);
    out.extend_from_slice(key);
    out.extend_from_slice(salt);
    out.extend_from_slice(&seq.to_be_bytes());
    Ok(out)
}

/// TLS record content types (RFC 8446 §5.1).
pub const CONTENT_ALERT: u8 = 21;
/// A handshake record.
pub const CONTENT_HANDSHAKE: u8 = 22;
/// Application data.
pub const CONTENT_DATA: u8 = 23;

/// The close_notify alert: level warning (1), description close_notify (0).
pub const CLOSE_NOTIFY: [u8; 2] = [1, 0];

/// What a non-data record means (handed up by the kernel for TLS 1.2, opened by [`rx`] for
/// TLS 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostHandshake {
    /// The peer closed its side (close_notify): EOF.
    CloseNotify,
    /// Any other alert: the connection failed (its description).
    Alert(u8),
    /// A TLS 1.3 KeyUpdate: the peer's next records use its next traffic secret's keys.
    KeyUpdate {
        /// `update_requested`: the peer asked us to update ours too.
        requested: bool,
    },
    /// Another handshake message (its type): not expected from a client, ignored.
    Handshake(u8),
    /// A record type not expected here, or a malformed one.
    Invalid,
}

/// Reads one non-data record (its type and plaintext).
pub fn post_handshake(content_type: u8, body: &[u8]) -> PostHandshake {
    match (content_type, body) {
        (CONTENT_ALERT, [_, 0]) => PostHandshake::CloseNotify,
        (CONTENT_ALERT, [_, d]) => PostHandshake::Alert(*d),
        // KeyUpdate: type 24, length 1, request_update 0 or 1 (RFC 8446 §4.6.3).
        (CONTENT_HANDSHAKE, [24, 0, 0, 1, r @ (0 | 1)]) => {
            PostHandshake::KeyUpdate { requested: *r == 1 }
        }
        (CONTENT_HANDSHAKE, [t, ..]) if *t != 24 => PostHandshake::Handshake(*t),
        _ => PostHandshake::Invalid,
    }
}

/// How many bytes one send call may take so that it makes records of `record` bytes (the
/// record policy's next size): the kernel closes a record at the end of each call made
/// without `MSG_MORE` (and `sendfile` sets it only inside one call), so a policy below the
/// full 16 KB is one call per record; at full size one call makes full records itself.
pub fn send_size(record: usize, want: usize) -> usize {
    if record >= MAX_RECORD_SIZE {
        want
    } else {
        want.min(record.max(1))
    }
}

/// The records the kernel makes of one call of `sent` bytes sized by [`send_size`] for
/// `record`: their plaintext sizes, for the policy's accounting.
pub fn records_of(sent: usize, record: usize) -> impl Iterator<Item = usize> {
    let size = record.clamp(1, MAX_RECORD_SIZE);
    let full = sent / size;
    let rest = sent % size;
    std::iter::repeat_n(size, full).chain((rest > 0).then_some(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IV: [u8; 12] = [
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab,
    ];

    /// 32-byte secrets as rustls extracts them (rustls makes no 16-byte key outside itself).
    fn secrets(c: KernelCipher) -> ConnectionTrafficSecrets {
        let mut k = [0u8; 32];
        for (i, b) in k.iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        let key = rustls::crypto::cipher::AeadKey::from(k);
        let iv = rustls::crypto::cipher::Iv::new(IV);
        match c {
            KernelCipher::Aes256Gcm => ConnectionTrafficSecrets::Aes256Gcm { key, iv },
            _ => ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv },
        }
    }

    #[test]
    fn crypto_info_has_the_kernels_layout() {
        // struct tls12_crypto_info_aes_gcm_128: 4 + iv 8 + key 16 + salt 4 + rec_seq 8 = 40.
        let key: Vec<u8> = (1..=16).collect();
        let b =
            raw_crypto_info(KernelVersion::Tls13, KernelCipher::Aes128Gcm, &key, &IV, 7).unwrap();
        assert_eq!(b.len(), 40);
        assert_eq!(&b[..2], &0x0304u16.to_ne_bytes());
        assert_eq!(&b[2..4], &51u16.to_ne_bytes());
        assert_eq!(&b[4..12], &[0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab]);
        assert_eq!(&b[12..28], &(1..=16).collect::<Vec<u8>>()[..]);
        assert_eq!(&b[28..32], &[0xa0, 0xa1, 0xa2, 0xa3]);
        assert_eq!(&b[32..], &7u64.to_be_bytes());
        // aes_gcm_256: 4 + 8 + 32 + 4 + 8 = 56.
        let b = crypto_info(KernelVersion::Tls12, &secrets(KernelCipher::Aes256Gcm), 1).unwrap();
        assert_eq!(b.len(), 56);
        assert_eq!(
            &b[..4],
            &[&0x0303u16.to_ne_bytes()[..], &52u16.to_ne_bytes()[..]].concat()[..]
        );
        assert_eq!(&b[44..48], &[0xa0, 0xa1, 0xa2, 0xa3]);
        // chacha20_poly1305: 4 + iv 12 + key 32 + salt 0 + 8 = 56; the whole IV is `iv`.
        let b = crypto_info(
            KernelVersion::Tls13,
            &secrets(KernelCipher::Chacha20Poly1305),
            u64::MAX - 1,
        )
        .unwrap();
        assert_eq!(b.len(), 56);
        assert_eq!(&b[2..4], &54u16.to_ne_bytes());
        assert_eq!(b[4], 0xa0);
        assert_eq!(b[15], 0xab);
        assert_eq!(&b[48..], &(u64::MAX - 1).to_be_bytes());
        assert_eq!(
            raw_crypto_info(
                KernelVersion::Tls13,
                KernelCipher::Aes128Gcm,
                &[0; 32],
                &[0; 12],
                0
            ),
            Err(Unsupported),
            "a key of the wrong length is refused"
        );
    }

    #[test]
    fn every_aead_suite_maps_and_others_do_not() {
        for s in crate::tls::provider().cipher_suites.iter() {
            assert!(cipher_of(s.suite()).is_some(), "{:?}", s.suite());
        }
        assert_eq!(cipher_of(CipherSuite::TLS13_AES_128_CCM_SHA256), None);
        assert_eq!(
            cipher_of(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
            Some(KernelCipher::Chacha20Poly1305)
        );
    }

    #[test]
    fn decisions_follow_the_probe_and_the_handshake() {
        let none = Support::NoModule(
            "setsockopt(TCP_ULP, \"tls\") failed (2: No such file or directory)".into(),
        );
        let v13 = Some(ProtocolVersion::TLSv1_3);
        let aes = Some(CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert_eq!(
            decide(&none, v13, aes, "http/1.1", false),
            Decision::User("the kernel has no TLS module")
        );
        assert!(none
            .warning()
            .unwrap()
            .contains("No such file or directory"));
        let some = Support::Ciphers(vec![(KernelVersion::Tls13, KernelCipher::Aes128Gcm)]);
        assert_eq!(some.warning(), None);
        assert_eq!(
            some.summary(),
            "kernel TLS available for TLSv1.3 AES-128-GCM; TLSv1.3 records from clients are decrypted in user space (so that a client's KeyUpdate is followed)"
        );
        assert_eq!(
            Support::Ciphers(vec![(KernelVersion::Tls12, KernelCipher::Aes256Gcm)]).summary(),
            "kernel TLS available for TLSv1.2 AES-256-GCM"
        );
        assert_eq!(
            decide(&some, v13, aes, "", false),
            Decision::Kernel(KernelVersion::Tls13, KernelCipher::Aes128Gcm)
        );
        assert_eq!(
            decide(&some, v13, aes, "h2", false),
            Decision::User("HTTP/2 stays in user space")
        );
        assert_eq!(
            decide(&some, v13, aes, "h2", true),
            Decision::Kernel(KernelVersion::Tls13, KernelCipher::Aes128Gcm)
        );
        assert!(matches!(
            decide(
                &some,
                Some(ProtocolVersion::TLSv1_2),
                Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
                "",
                false
            ),
            Decision::User(_)
        ));
        assert!(matches!(
            decide(
                &some,
                v13,
                Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
                "",
                false
            ),
            Decision::User(_)
        ));
        assert!(Support::Ciphers(Vec::new()).warning().is_some());
    }

    #[test]
    fn zerocopy_is_used_only_when_asked_and_the_kernel_takes_it() {
        let why = || "setsockopt(TLS_TX_ZEROCOPY_RO) failed".to_string();
        let yes = Zerocopy::of(Ok(()), why);
        assert_eq!(yes, Zerocopy::Available);
        assert!(yes.used(true));
        assert!(!yes.used(false), "off unless the operator asks");
        // Kernels before 5.19 do not know the option; a kernel may refuse it: silent fallback.
        for errno in [libc::ENOPROTOOPT, libc::EINVAL] {
            let z = Zerocopy::of(Err(errno), why);
            assert!(matches!(z, Zerocopy::Unsupported(_)), "{errno}: {z:?}");
            assert!(!z.used(true));
        }
        let z = Zerocopy::of(Err(libc::EPERM), why);
        assert!(matches!(z, Zerocopy::Failed(_)), "{z:?}");
        assert!(!z.used(true));
    }

    #[test]
    fn records_from_the_kernel_are_read() {
        assert_eq!(post_handshake(21, &[1, 0]), PostHandshake::CloseNotify);
        assert_eq!(post_handshake(21, &[2, 40]), PostHandshake::Alert(40));
        assert_eq!(
            post_handshake(22, &[24, 0, 0, 1, 0]),
            PostHandshake::KeyUpdate { requested: false }
        );
        assert_eq!(
            post_handshake(22, &[24, 0, 0, 1, 1]),
            PostHandshake::KeyUpdate { requested: true }
        );
        assert_eq!(
            post_handshake(22, &[24, 0, 0, 1, 2]),
            PostHandshake::Invalid
        );
        assert_eq!(
            post_handshake(22, &[4, 0, 0, 0]),
            PostHandshake::Handshake(4)
        );
        assert_eq!(post_handshake(21, &[1]), PostHandshake::Invalid);
        assert_eq!(post_handshake(20, &[1]), PostHandshake::Invalid);
        assert_eq!(post_handshake(22, &[]), PostHandshake::Invalid);
    }

    #[test]
    fn record_sizes_become_send_calls() {
        // Full-size records: one call, the kernel cuts 16 KB records.
        assert_eq!(send_size(16_384, 2 << 20), 2 << 20);
        // Smaller policies: one call per record.
        assert_eq!(send_size(1369, 2 << 20), 1369);
        assert_eq!(send_size(4096, 100), 100);
        assert_eq!(send_size(0, 100), 1);
        assert_eq!(
            records_of(40_000, 16_384).collect::<Vec<_>>(),
            [16_384, 16_384, 7232]
        );
        assert_eq!(records_of(1369, 1369).collect::<Vec<_>>(), [1369]);
        assert_eq!(records_of(0, 1369).count(), 0);
    }
}
