//! TLS 1.3 records from the client, opened in user space while the kernel makes ours.
//!
//! A TLS 1.3 connection in kernel TLS has only `TLS_TX` set: the `tls` module then leaves the
//! socket's receive path as plain TCP, and [`Reader`] opens the client's records with the
//! negotiated suite's own decrypter (rustls' provider API, `Tls13AeadAlgorithm::decrypter`;
//! no cryptography here). The reason is the client's KeyUpdate (RFC 8446 §4.6.3): its next
//! records use a key derived from its *traffic secret*, which the kernels firstbyte meets
//! cannot take as a second `TLS_RX` (Linux's TLS 1.3 rekey came only in recent kernels) — and
//! rustls' buffered connection hands over keys, not secrets. Here the secret is kept (captured
//! during the handshake, [`capture`]), the next one derived (`application_traffic_secret_N+1
//! = HKDF-Expand-Label(secret_N, "traffic upd", "", Hash.length)`, RFC 8446 §7.2) with the
//! suite's HKDF, and the connection reads on under the new keys.
//!
//! What the reader decides, record by record: application data → plaintext for HTTP;
//! close_notify → EOF; a KeyUpdate(update_not_requested) → new keys, sequence 0; a
//! KeyUpdate(update_requested) → the end of the connection ([`Fail::UpdateRequested`]: the
//! answer, our own KeyUpdate before our next data, needs new *sending* keys, which the kernel
//! cannot take either); any other alert, handshake message, an oversized record, a record
//! version other than 0x0303 or a record that fails authentication → the end, with the alert
//! RFC 8446 names ([`Fail::alert`]). Nothing here panics on input.

pub mod capture;

use std::ops::Range;

use rustls::crypto::cipher::{AeadKey, InboundOpaqueMessage, Iv, MessageDecrypter};
use rustls::crypto::tls13::{HkdfExpander, OkmBlock};
use rustls::{ContentType, ProtocolVersion, Tls13CipherSuite};

use super::{post_handshake, PostHandshake, CONTENT_ALERT, CONTENT_DATA, CONTENT_HANDSHAKE};

/// The record header: type, legacy version, length.
const HEADER: usize = 5;
/// The largest TLS 1.3 ciphertext a record may carry (RFC 8446 §5.2: 2^14 + 256).
pub const MAX_CIPHERTEXT: usize = (1 << 14) + 256;
/// The read buffer's first size; it grows to one whole record when a larger one comes.
const INITIAL: usize = 4096;

/// HKDF-Expand-Label(secret, label, "", out.len()) (RFC 8446 §7.1).
fn expand_label(exp: &dyn HkdfExpander, label: &[u8], out: &mut [u8]) -> bool {
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    exp.expand_slice(&[&len, &label_len, b"tls13 ", label, &[0]], out)
        .is_ok()
}

/// The next traffic secret after a KeyUpdate (RFC 8446 §7.2).
pub fn next_secret(suite: &Tls13CipherSuite, secret: &OkmBlock) -> Option<OkmBlock> {
    let exp = suite.hkdf_provider.expander_for_okm(secret);
    let mut out = [0u8; OkmBlock::MAX_LEN];
    let n = exp.hash_len().min(out.len());
    let ok = expand_label(exp.as_ref(), b"traffic upd", &mut out[..n]);
    let next = ok.then(|| OkmBlock::new(&out[..n]));
    out.fill(0);
    next
}

/// The record key and IV of a traffic secret (RFC 8446 §7.3), through rustls' own
/// `derive_traffic_key`/`derive_traffic_iv` (an `AeadKey` of a suite's length can be made
/// nowhere else outside rustls).
pub fn traffic_keys(suite: &Tls13CipherSuite, secret: &OkmBlock) -> (AeadKey, Iv) {
    let exp = suite.hkdf_provider.expander_for_okm(secret);
    (
        rustls::internal::derive_traffic_key(exp.as_ref(), suite.aead_alg),
        rustls::internal::derive_traffic_iv(exp.as_ref()),
    )
}

/// Why the connection ends (each is logged once by the socket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// The client sent an alert other than close_notify (its description).
    Alert(u8),
    /// KeyUpdate(update_requested): we would have to update our sending keys.
    UpdateRequested,
    /// A KeyUpdate came but its traffic secret was not kept: the next record cannot be opened.
    NoSecret,
    /// A handshake message other than KeyUpdate (its type), or a malformed one.
    Handshake(u8),
    /// A record of another outer or inner type (its type).
    Type(u8),
    /// A record whose legacy version is not 0x0303.
    Version(u16),
    /// A record longer than TLS 1.3 allows (its length).
    Overflow(usize),
    /// A record that failed authentication (or the sequence number ran out).
    BadRecordMac,
}

impl Fail {
    /// The fatal alert to send before closing (its description), if any.
    pub fn alert(&self) -> Option<u8> {
        match self {
            Self::Alert(_) | Self::UpdateRequested | Self::NoSecret => None,
            Self::Handshake(_) | Self::Type(_) => Some(10),
            Self::Version(_) => Some(70),
            Self::Overflow(_) => Some(22),
            Self::BadRecordMac => Some(20),
        }
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Alert(d) => write!(f, "the client sent TLS alert {d}"),
            Self::UpdateRequested => f.write_str(
                "the client asked for a KeyUpdate of ours (update_requested), which kernel TLS cannot send",
            ),
            Self::NoSecret => f.write_str(
                "a record under the client's updated keys, whose traffic secret was not kept",
            ),
            Self::Handshake(t) => write!(f, "unexpected TLS handshake message {t} from the client"),
            Self::Type(t) => write!(f, "unexpected TLS record type {t} from the client"),
            Self::Version(v) => write!(f, "TLS record version {v:#06x} from the client"),
            Self::Overflow(n) => write!(f, "a TLS record of {n} bytes from the client"),
            Self::BadRecordMac => f.write_str("a TLS record from the client failed authentication"),
        }
    }
}

/// What [`Reader::step`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Application data: [`Reader::plaintext`].
    Data,
    /// No whole record is buffered: read more into [`Reader::spare`].
    More,
    /// A KeyUpdate(update_not_requested); `followed`: its keys are in use (else the next
    /// record fails with [`Fail::NoSecret`]).
    KeyUpdate {
        /// Whether the new keys could be derived.
        followed: bool,
    },
    /// close_notify: EOF.
    Closed,
    /// The connection must end.
    Fail(Fail),
}

/// The client's records of one TLS 1.3 connection: read into one buffer, opened in place.
pub struct Reader {
    suite: &'static Tls13CipherSuite,
    dec: Box<dyn MessageDecrypter>,
    seq: u64,
    /// The client's current traffic secret (zeroed on drop by `OkmBlock`).
    secret: Option<OkmBlock>,
    /// A KeyUpdate came without a secret to follow it.
    stale: bool,
    buf: Vec<u8>,
    /// The first byte not yet taken as a record.
    start: usize,
    /// The end of the bytes read.
    end: usize,
    /// Opened application data not yet handed on.
    plain: Range<usize>,
    /// Once closed or failed, every later step says so again.
    done: Option<Step>,
}

impl Reader {
    /// A reader for records from sequence number `seq` under `key`/`iv`; `secret` (the
    /// client's traffic secret those keys come from) lets it follow KeyUpdates.
    pub fn new(
        suite: &'static Tls13CipherSuite,
        key: AeadKey,
        iv: Iv,
        seq: u64,
        secret: Option<OkmBlock>,
    ) -> Self {
        Self {
            suite,
            dec: suite.aead_alg.decrypter(key, iv),
            seq,
            secret,
            stale: false,
            buf: Vec::new(),
            start: 0,
            end: 0,
            plain: 0..0,
            done: None,
        }
    }

    /// Opened application data waiting to be read.
    pub fn plaintext(&self) -> &[u8] {
        &self.buf[self.plain.clone()]
    }

    /// `n` bytes of [`plaintext`](Self::plaintext) were handed on.
    pub fn consume(&mut self, n: usize) {
        self.plain.start = (self.plain.start + n).min(self.plain.end);
    }

    /// Whether a step would answer without reading (plaintext waits, or the end came).
    pub fn ready(&self) -> bool {
        !self.plain.is_empty() || self.done.is_some()
    }

    /// Where the next read goes: room for at least the rest of the record begun.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 && self.plain.is_empty() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.plain = 0..0;
        }
        let have = self.end - self.start;
        let record = if have < HEADER {
            HEADER
        } else {
            HEADER
                + usize::from(u16::from_be_bytes([
                    self.buf[self.start + 3],
                    self.buf[self.start + 4],
                ]))
        };
        let want = (self.start + record.min(HEADER + MAX_CIPHERTEXT))
            .max(INITIAL)
            .max(self.end + 1);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`spare`](Self::spare).
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Takes the next record, if whole, and says what it was.
    pub fn step(&mut self) -> Step {
        let s = self.next();
        if matches!(s, Step::Closed | Step::Fail(_)) {
            self.done = Some(s.clone());
        }
        s
    }

    fn next(&mut self) -> Step {
        loop {
            if let Some(d) = &self.done {
                return d.clone();
            }
            if !self.plain.is_empty() {
                return Step::Data;
            }
            let avail = &self.buf[self.start..self.end];
            if avail.len() < HEADER {
                return Step::More;
            }
            let (typ, version) = (avail[0], u16::from_be_bytes([avail[1], avail[2]]));
            let len = usize::from(u16::from_be_bytes([avail[3], avail[4]]));
            if typ != CONTENT_DATA {
                return Step::Fail(Fail::Type(typ));
            }
            if version != 0x0303 {
                return Step::Fail(Fail::Version(version));
            }
            if len > MAX_CIPHERTEXT {
                return Step::Fail(Fail::Overflow(len));
            }
            if avail.len() < HEADER + len {
                return Step::More;
            }
            if self.stale {
                return Step::Fail(Fail::NoSecret);
            }
            let body = self.start + HEADER..self.start + HEADER + len;
            self.start = body.end;
            let Some(next_seq) = self.seq.checked_add(1) else {
                return Step::Fail(Fail::BadRecordMac);
            };
            let seq = std::mem::replace(&mut self.seq, next_seq);
            let base = self.buf.as_ptr() as usize;
            let msg = InboundOpaqueMessage::new(
                ContentType::ApplicationData,
                ProtocolVersion::TLSv1_2,
                &mut self.buf[body.clone()],
            );
            let plain = match self.dec.decrypt(msg, seq) {
                Ok(p) => p,
                Err(rustls::Error::PeerSentOversizedRecord) => {
                    return Step::Fail(Fail::Overflow(len))
                }
                Err(rustls::Error::PeerMisbehaved(_)) => return Step::Fail(Fail::Type(0)),
                Err(_) => return Step::Fail(Fail::BadRecordMac),
            };
            let kind = u8::from(plain.typ);
            let at = plain.payload.as_ptr() as usize - base;
            let opened = at..at + plain.payload.len();
            if opened.start < body.start || opened.end > body.end {
                return Step::Fail(Fail::BadRecordMac);
            }
            match kind {
                CONTENT_DATA => {
                    // Empty application data records are allowed; they carry nothing.
                    self.plain = opened;
                }
                CONTENT_ALERT | CONTENT_HANDSHAKE => {
                    return match post_handshake(kind, &self.buf[opened]) {
                        PostHandshake::CloseNotify => Step::Closed,
                        // user_canceled: a warning, close_notify follows (RFC 8446 §6.1).
                        PostHandshake::Alert(90) => continue,
                        PostHandshake::Alert(d) => Step::Fail(Fail::Alert(d)),
                        PostHandshake::KeyUpdate { requested: true } => {
                            Step::Fail(Fail::UpdateRequested)
                        }
                        PostHandshake::KeyUpdate { requested: false } => {
                            let followed = self.rekey();
                            self.stale = !followed;
                            Step::KeyUpdate { followed }
                        }
                        PostHandshake::Handshake(t) => Step::Fail(Fail::Handshake(t)),
                        PostHandshake::Invalid if kind == CONTENT_HANDSHAKE => {
                            Step::Fail(Fail::Handshake(24))
                        }
                        PostHandshake::Invalid => Step::Fail(Fail::Type(kind)),
                    };
                }
                other => return Step::Fail(Fail::Type(other)),
            }
        }
    }

    /// Moves to the client's next traffic secret; `false` when there is none to move from.
    fn rekey(&mut self) -> bool {
        let Some(next) = self
            .secret
            .as_ref()
            .and_then(|s| next_secret(self.suite, s))
        else {
            self.secret = None;
            return false;
        };
        let (key, iv) = traffic_keys(self.suite, &next);
        self.dec = self.suite.aead_alg.decrypter(key, iv);
        self.seq = 0;
        self.secret = Some(next);
        true
    }
}

#[cfg(test)]
mod tests;
