//! The client side is the same provider's encrypter; the key derivation is checked against an
//! HKDF written here on aws-lc's HMAC (not rustls'), itself checked against a known answer.

use super::*;
use aws_lc_rs::hmac;
use rustls::crypto::cipher::{MessageEncrypter, OutboundChunks, OutboundPlainMessage};

/// Every TLS 1.3 suite firstbyte serves: rustls' own and the keyed-once twins (`tls::hkdf`).
fn suites() -> Vec<&'static Tls13CipherSuite> {
    let stock = crate::tls::provider()
        .cipher_suites
        .iter()
        .filter_map(|s| s.tls13())
        .collect::<Vec<_>>();
    let ours = crate::tls::hkdf::suites().map(|s| s.tls13().unwrap());
    assert_eq!(stock.len(), 3);
    stock.into_iter().chain(ours).collect()
}

/// HKDF-Expand-Label(prk, label, "", len) over aws-lc's HMAC (RFC 5869 and RFC 8446 §7.1).
fn expand_label_here(prk: &[u8], label: &str, len: usize) -> Vec<u8> {
    let alg = if prk.len() == 48 {
        hmac::HMAC_SHA384
    } else {
        hmac::HMAC_SHA256
    };
    let key = hmac::Key::new(alg, prk);
    let full = format!("tls13 {label}");
    let mut info = (len as u16).to_be_bytes().to_vec();
    info.push(full.len() as u8);
    info.extend_from_slice(full.as_bytes());
    info.push(0);
    let (mut out, mut t, mut i) = (Vec::new(), Vec::new(), 1u8);
    while out.len() < len {
        let mut m = t.clone();
        m.extend_from_slice(&info);
        m.push(i);
        t = hmac::sign(&key, &m).as_ref().to_vec();
        out.extend_from_slice(&t);
        i += 1;
    }
    out.truncate(len);
    out
}

fn hash_len(suite: &Tls13CipherSuite) -> usize {
    suite.common.hash_provider.output_len()
}

/// A first secret for a test connection (any bytes of the hash's length).
fn secret0(suite: &Tls13CipherSuite) -> OkmBlock {
    let b: Vec<u8> = (0..hash_len(suite) as u8)
        .map(|i| i.wrapping_mul(7) ^ 0x5a)
        .collect();
    OkmBlock::new(&b)
}

/// The client: records under its current keys, KeyUpdates with the next secret computed
/// here.
struct Client {
    suite: &'static Tls13CipherSuite,
    enc: Box<dyn MessageEncrypter>,
    seq: u64,
    secret: Vec<u8>,
}

impl Client {
    fn new(suite: &'static Tls13CipherSuite, seq: u64) -> Self {
        let s = secret0(suite);
        let (key, iv) = traffic_keys(suite, &s);
        let mut c = Self {
            suite,
            enc: suite.aead_alg.encrypter(key, iv),
            seq: 0,
            secret: s.as_ref().to_vec(),
        };
        // aws-lc's TLS 1.3 GCM sealing key wants its sequence numbers from 0, in order: the
        // records before `seq` are made and dropped (the handshake's, say).
        while c.seq < seq {
            c.data(b"");
        }
        c
    }

    fn record(&mut self, typ: ContentType, body: &[u8]) -> Vec<u8> {
        let m = OutboundPlainMessage {
            typ,
            version: ProtocolVersion::TLSv1_2,
            payload: OutboundChunks::Single(body),
        };
        let r = self.enc.encrypt(m, self.seq).unwrap();
        self.seq += 1;
        r.encode()
    }

    fn data(&mut self, body: &[u8]) -> Vec<u8> {
        self.record(ContentType::ApplicationData, body)
    }

    fn key_update(&mut self, requested: bool) -> Vec<u8> {
        let r = self.record(ContentType::Handshake, &[24, 0, 0, 1, u8::from(requested)]);
        self.secret = expand_label_here(&self.secret, "traffic upd", self.secret.len());
        let (key, iv) = traffic_keys(self.suite, &OkmBlock::new(&self.secret));
        self.enc = self.suite.aead_alg.encrypter(key, iv);
        self.seq = 0;
        r
    }
}

fn reader(suite: &'static Tls13CipherSuite, seq: u64, keep_secret: bool) -> Reader {
    let s = secret0(suite);
    let (key, iv) = traffic_keys(suite, &s);
    Reader::new(suite, key, iv, seq, keep_secret.then_some(s))
}

/// Feeds `pieces` as successive reads; returns the plaintext (taken 7 bytes at a time) and
/// every step other than data and more, up to the first that ends the connection.
fn feed(r: &mut Reader, pieces: &[&[u8]]) -> (Vec<u8>, Vec<Step>) {
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let mut pieces = pieces
        .iter()
        .map(|p| p.to_vec())
        .collect::<std::collections::VecDeque<_>>();
    loop {
        match r.step() {
            Step::Data => {
                assert!(r.ready());
                let n = r.plaintext().len().min(7);
                out.extend_from_slice(&r.plaintext()[..n]);
                r.consume(n);
            }
            Step::More => {
                assert!(!r.ready());
                let Some(mut p) = pieces.pop_front() else {
                    break;
                };
                let sp = r.spare();
                assert!(!sp.is_empty());
                let n = p.len().min(sp.len());
                sp[..n].copy_from_slice(&p[..n]);
                r.filled(n);
                if n < p.len() {
                    pieces.push_front(p.split_off(n));
                }
            }
            s @ Step::KeyUpdate { .. } => events.push(s),
            s => {
                events.push(s);
                break;
            }
        }
    }
    (out, events)
}

#[test]
fn the_derivation_matches_an_independent_hkdf() {
    // The HKDF here against a known answer: the client application traffic secret of the
    // TLS 1.3 key schedule trace rustls checks itself against, and its AES-128-GCM key and IV.
    let ats = [
        0xc1, 0x4a, 0x6d, 0x79, 0x76, 0xd8, 0x10, 0x2b, 0x5a, 0x0c, 0x99, 0x51, 0x49, 0x3f, 0xee,
        0x87, 0xdc, 0xaf, 0xf8, 0x2c, 0x24, 0xca, 0xb2, 0x14, 0xe8, 0xbe, 0x71, 0xa8, 0x20, 0x6d,
        0xbd, 0xa5,
    ];
    let key = [
        0xcc, 0x9f, 0x5f, 0x98, 0x0b, 0x5f, 0x10, 0x30, 0x6c, 0xba, 0xd7, 0xbe, 0x98, 0xd7, 0x57,
        0x2e,
    ];
    let iv = [
        0xb8, 0x09, 0x29, 0xe8, 0xd0, 0x2c, 0x70, 0xf6, 0x11, 0x62, 0xed, 0x6b,
    ];
    assert_eq!(expand_label_here(&ats, "key", 16), key);
    assert_eq!(expand_label_here(&ats, "iv", 12), iv);
    for suite in suites() {
        let s = secret0(suite);
        let (k, i) = traffic_keys(suite, &s);
        assert_eq!(
            k.as_ref(),
            &expand_label_here(s.as_ref(), "key", suite.aead_alg.key_len())[..]
        );
        assert_eq!(i.as_ref(), &expand_label_here(s.as_ref(), "iv", 12)[..]);
        let next = next_secret(suite, &s).unwrap();
        assert_eq!(next.as_ref().len(), hash_len(suite));
        assert_eq!(
            next.as_ref(),
            &expand_label_here(s.as_ref(), "traffic upd", hash_len(suite))[..],
            "{:?}",
            suite.common.suite
        );
    }
}

#[test]
fn records_split_at_every_byte_and_several_per_read() {
    let suite = suites()[0];
    let mut c = Client::new(suite, 3);
    let first = c.data(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    let empty = c.data(b"");
    let second = c.data(b"GET /b HTTP/1.1\r\n\r\n");
    let want = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
    let all = [first.clone(), empty, second].concat();
    // Everything in one read.
    let (out, ev) = feed(&mut reader(suite, 3, true), &[&all]);
    assert_eq!(out, want);
    assert!(ev.is_empty(), "{ev:?}");
    // Split at every byte of the stream: two reads.
    for cut in 1..all.len() {
        let (out, ev) = feed(&mut reader(suite, 3, true), &[&all[..cut], &all[cut..]]);
        assert_eq!(out, want, "cut at {cut}");
        assert!(ev.is_empty());
    }
    // One byte per read.
    let bytes: Vec<&[u8]> = all.chunks(1).collect();
    assert_eq!(feed(&mut reader(suite, 3, true), &bytes).0, want);
    // The sequence number starts where the handshake left it: from 0 the first record fails.
    let (out, ev) = feed(&mut reader(suite, 0, true), &[&first]);
    assert!(out.is_empty());
    assert_eq!(ev, [Step::Fail(Fail::BadRecordMac)]);
}

#[test]
fn full_size_records_grow_the_buffer_once() {
    for suite in suites() {
        let mut c = Client::new(suite, 0);
        let big: Vec<u8> = (0..16_384u32).map(|i| (i % 251) as u8).collect();
        let recs = [c.data(&big), c.data(&big[..100]), c.data(&big)].concat();
        let pieces: Vec<&[u8]> = recs.chunks(1000).collect();
        let mut r = reader(suite, 0, true);
        let (out, ev) = feed(&mut r, &pieces);
        assert!(ev.is_empty());
        assert_eq!(out, [&big[..], &big[..100], &big[..]].concat());
        assert!(
            r.buf.len() <= HEADER + MAX_CIPHERTEXT + 1000,
            "{}",
            r.buf.len()
        );
    }
}

#[test]
fn a_key_update_moves_to_the_next_keys_for_every_suite() {
    for suite in suites() {
        let mut c = Client::new(suite, 1);
        let all = [
            c.data(b"one "),
            c.key_update(false),
            c.data(b"two "),
            c.data(b"three "),
            c.key_update(false),
            c.data(b"four"),
        ]
        .concat();
        let updated = Step::KeyUpdate { followed: true };
        let (out, ev) = feed(&mut reader(suite, 1, true), &[&all]);
        assert_eq!(out, b"one two three four", "{:?}", suite.common.suite);
        assert_eq!(ev, [updated.clone(), updated.clone()]);
        // And arriving byte by byte.
        let bytes: Vec<&[u8]> = all.chunks(1).collect();
        let (out, ev) = feed(&mut reader(suite, 1, true), &bytes);
        assert_eq!(out, b"one two three four");
        assert_eq!(ev.len(), 2);
    }
}

#[test]
fn without_the_secret_the_record_after_a_key_update_ends_the_connection() {
    let suite = suites()[1];
    let mut c = Client::new(suite, 0);
    let all = [c.data(b"one"), c.key_update(false)].concat();
    let mut r = reader(suite, 0, false);
    let (out, ev) = feed(&mut r, &[&all]);
    assert_eq!(out, b"one");
    assert_eq!(ev, [Step::KeyUpdate { followed: false }]);
    let (out, ev) = feed(&mut r, &[&c.data(b"two")]);
    assert!(out.is_empty());
    assert_eq!(ev, [Step::Fail(Fail::NoSecret)]);
    assert_eq!(Fail::NoSecret.alert(), None);
}

#[test]
fn update_requested_ends_the_connection_cleanly() {
    let suite = suites()[2];
    let mut c = Client::new(suite, 0);
    let all = [c.data(b"one"), c.key_update(true), c.data(b"two")].concat();
    let mut r = reader(suite, 0, true);
    let (out, ev) = feed(&mut r, &[&all]);
    assert_eq!(out, b"one");
    assert_eq!(ev, [Step::Fail(Fail::UpdateRequested)]);
    assert_eq!(r.step(), Step::Fail(Fail::UpdateRequested), "stays failed");
    assert!(r.ready());
    assert_eq!(
        Fail::UpdateRequested.alert(),
        None,
        "close_notify, not an error"
    );
}

#[test]
fn close_notify_is_eof_and_other_alerts_fail() {
    let suite = suites()[0];
    let mut c = Client::new(suite, 0);
    let all = [
        c.data(b"last"),
        c.record(ContentType::Alert, &[1, 90]),
        c.record(ContentType::Alert, &[1, 0]),
        c.data(b"after"),
    ]
    .concat();
    let mut r = reader(suite, 0, true);
    let (out, ev) = feed(&mut r, &[&all]);
    assert_eq!(
        out, b"last",
        "user_canceled passes, nothing after close_notify"
    );
    assert_eq!(ev, [Step::Closed]);
    assert_eq!(r.step(), Step::Closed);
    let mut c = Client::new(suite, 0);
    let (_, ev) = feed(
        &mut reader(suite, 0, true),
        &[&c.record(ContentType::Alert, &[2, 40])],
    );
    assert_eq!(ev, [Step::Fail(Fail::Alert(40))]);
}

#[test]
fn bad_records_fail_with_their_alert_and_never_panic() {
    let suite = suites()[0];
    let fresh = || (Client::new(suite, 0), reader(suite, 0, true));
    // A flipped bit in the tag, in the ciphertext.
    for back in [1, 20, 22] {
        let (mut c, mut r) = fresh();
        let mut rec = c.data(b"GET / HTTP/1.1\r\n\r\n");
        let i = rec.len() - back;
        rec[i] ^= 0x01;
        let (out, ev) = feed(&mut r, &[&rec]);
        assert!(out.is_empty());
        assert_eq!(ev, [Step::Fail(Fail::BadRecordMac)], "byte {i}");
    }
    assert_eq!(Fail::BadRecordMac.alert(), Some(20));
    // Too short to hold a tag.
    let (_, ev) = feed(&mut fresh().1, &[&[23, 3, 3, 0, 3, 1, 2, 3]]);
    assert_eq!(ev, [Step::Fail(Fail::BadRecordMac)]);
    // Oversized: refused from the header, before its bytes arrive.
    let (_, ev) = feed(&mut fresh().1, &[&[23, 3, 3, 0x41, 0x01]]);
    assert_eq!(ev, [Step::Fail(Fail::Overflow(0x4101))]);
    assert_eq!(Fail::Overflow(0).alert(), Some(22));
    // Record version other than 0x0303; an outer type other than application data.
    let (mut c, mut r) = fresh();
    let mut rec = c.data(b"x");
    rec[2] = 1;
    assert_eq!(feed(&mut r, &[&rec]).1, [Step::Fail(Fail::Version(0x0301))]);
    let (_, ev) = feed(&mut fresh().1, &[&[22, 3, 3, 0, 1, 1]]);
    assert_eq!(ev, [Step::Fail(Fail::Type(22))]);
    // Other handshake messages, a malformed KeyUpdate, a KeyUpdate with more after it.
    for (body, t) in [
        (&[1u8, 0, 0, 0][..], 1),
        (&[24, 0, 0, 1, 2][..], 24),
        (&[24, 0, 0, 1, 0, 24, 0, 0, 1, 0][..], 24),
        (&[24, 0, 0][..], 24),
    ] {
        let (mut c, mut r) = fresh();
        let rec = c.record(ContentType::Handshake, body);
        assert_eq!(
            feed(&mut r, &[&rec]).1,
            [Step::Fail(Fail::Handshake(t))],
            "{body:?}"
        );
    }
    // An inner change_cipher_spec, or an unknown inner type.
    for typ in [20u8, 99] {
        let (mut c, mut r) = fresh();
        let rec = c.record(ContentType::from(typ), b"\x01");
        let ev = feed(&mut r, &[&rec]).1;
        assert!(
            matches!(ev[..], [Step::Fail(Fail::Type(_))]),
            "{typ}: {ev:?}"
        );
    }
    assert_eq!(Fail::Type(0).alert(), Some(10));
}

/// A real rustls client against a rustls server config as firstbyte makes it for kernel TLS
/// (`enable_secret_extraction`, [`capture::SecretLog`]), in memory, for each TLS 1.3 suite:
/// the secret captured during the handshake is the one the keys `dangerous_extract_secrets`
/// hands over come from, and the reader opens the client's records with them. rustls'
/// clients ask for our KeyUpdate (`refresh_traffic_keys` sends update_requested): the
/// connection ends there, cleanly.
#[test]
fn a_rustls_client_is_read_with_the_captured_secret() {
    use crate::tls::testutil;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use rustls_pki_types::pem::PemObject;
    use std::io::Write;
    use std::sync::Arc;

    let (cert, key) = testutil::ecdsa_pem(&["localhost"]);
    let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(testutil::provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    server.enable_secret_extraction = true;
    server.key_log = Arc::new(capture::SecretLog);
    let server = Arc::new(server);
    for suite in testutil::provider()
        .cipher_suites
        .into_iter()
        .filter(|s| s.tls13().is_some())
    {
        let mut p = testutil::provider();
        p.cipher_suites = vec![suite];
        let client = Arc::new(testutil::client_config(
            p,
            &[&rustls::version::TLS13],
            testutil::any_server_cert(),
        ));
        let mut hs = crate::tls::handshake_cx::HandshakeCx::default();
        let (mut c, s) = hs
            .run(|| testutil::handshake(server.clone(), client))
            .unwrap();
        let secret = hs.secret.expect("captured");
        let t13 = s.negotiated_cipher_suite().and_then(|s| s.tls13()).unwrap();
        let (seq, rx) = s.dangerous_extract_secrets().unwrap().rx;
        let (key, iv) = match rx {
            rustls::ConnectionTrafficSecrets::Aes128Gcm { key, iv }
            | rustls::ConnectionTrafficSecrets::Aes256Gcm { key, iv }
            | rustls::ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (key, iv),
            _ => unreachable!(),
        };
        let (k, i) = traffic_keys(t13, &secret);
        assert_eq!(k.as_ref(), key.as_ref(), "{:?}", suite.suite());
        assert_eq!(i.as_ref(), iv.as_ref());
        let mut r = Reader::new(t13, key, iv, seq, Some(secret));
        let mut wire = Vec::new();
        c.writer().write_all(b"GET /1 ").unwrap();
        c.refresh_traffic_keys().unwrap();
        c.writer().write_all(b"GET /2").unwrap();
        while c.wants_write() {
            c.write_tls(&mut wire).unwrap();
        }
        let (out, ev) = feed(&mut r, &[&wire]);
        assert_eq!(out, b"GET /1 ");
        assert_eq!(ev, [Step::Fail(Fail::UpdateRequested)]);
    }
    // Outside a handshake step, nothing is kept.
    let client = Arc::new(testutil::client_config(
        testutil::provider(),
        &[&rustls::version::TLS13],
        testutil::any_server_cert(),
    ));
    let mut nothing = crate::tls::handshake_cx::HandshakeCx::default();
    nothing.run(|| {});
    testutil::handshake(server, client).unwrap();
    nothing.run(|| {});
    assert!(nothing.secret.is_none());
}
