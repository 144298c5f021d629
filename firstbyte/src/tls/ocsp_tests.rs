use super::*;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, SigningKey,
};

/// 2026-11-24T00:00:00Z.
const T0: u64 = 1_795_478_400;
const T0_GT: &[u8] = b"20261124000000Z";
/// 2026-11-25T12:30:05Z.
const T1: u64 = 1_795_609_805;
const T1_GT: &[u8] = b"20261125123005Z";

struct Pki {
    ca: Vec<u8>,
    ca_key: KeyPair,
    ca_params: CertificateParams,
    leaf: Vec<u8>,
}

fn aia(url: &str) -> CustomExtension {
    let oid = tlv(0x06, &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01]);
    let desc = tlv(0x30, &[oid, tlv(0x86, url.as_bytes())].concat());
    CustomExtension::from_oid_content(&[1, 3, 6, 1, 5, 5, 7, 1, 1], tlv(0x30, &desc))
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test ca");
    let ca = ca_params.self_signed(&ca_key).unwrap().der().to_vec();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf_params.custom_extensions = vec![aia("http://127.0.0.1:8888/ocsp")];
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .unwrap()
        .der()
        .to_vec();
    Pki {
        ca,
        ca_key,
        ca_params,
        leaf,
    }
}

/// A basic OCSP response for `id`, signed by `key` (ECDSA P-256 SHA-256), carrying `certs`.
fn response(
    id: &[u8],
    status: &[u8],
    this: &[u8],
    next: Option<&[u8]>,
    key: &KeyPair,
    certs: &[&[u8]],
) -> Vec<u8> {
    let mut single = [id.to_vec(), status.to_vec(), tlv(0x18, this)].concat();
    if let Some(n) = next {
        single.extend(tlv(0xa0, &tlv(0x18, n)));
    }
    let tbs = tlv(
        0x30,
        &[
            tlv(0xa2, &tlv(0x04, &[7; 20])),
            tlv(0x18, this),
            tlv(0x30, &tlv(0x30, &single)),
        ]
        .concat(),
    );
    let sig = key.sign(&tbs).unwrap();
    let alg = tlv(
        0x30,
        &tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
    );
    let mut basic = [tbs, alg, tlv(0x03, &[&[0u8][..], &sig].concat())].concat();
    if !certs.is_empty() {
        basic.extend(tlv(0xa0, &tlv(0x30, &certs.concat())));
    }
    let basic = tlv(0x30, &basic);
    let bytes = tlv(0x30, &[tlv(0x06, BASIC_OID), tlv(0x04, &basic)].concat());
    tlv(0x30, &[vec![0x0a, 0x01, 0x00], tlv(0xa0, &bytes)].concat())
}

const GOOD: &[u8] = &[0x80, 0x00];

#[test]
fn responder_url_comes_from_aia() {
    let p = pki();
    assert_eq!(
        responder_url(&p.leaf).as_deref(),
        Some("http://127.0.0.1:8888/ocsp")
    );
    assert_eq!(responder_url(&p.ca), None);
}

#[test]
fn responder_urls_parse_as_nginx_takes_them() {
    let r = Responder::parse("http://ocsp.example.com").unwrap();
    assert_eq!(
        (r.host.as_str(), r.port, r.path.as_str()),
        ("ocsp.example.com", 80, "/")
    );
    let r = Responder::parse("HTTP://[::1]:8080/a?b").unwrap();
    assert_eq!(
        (r.host.as_str(), r.port, r.path.as_str()),
        ("::1", 8080, "/a?b")
    );
    assert!(Responder::parse("https://ocsp.example.com/").is_none());
    assert!(Responder::parse("http://:80/").is_none());
    assert!(Responder::parse("http://h:99999/").is_none());
    let get = String::from_utf8(r.get(&[0xfb, 0xff, 0xfe, 0x61])).unwrap();
    assert_eq!(
        get,
        "GET /a?b/%2B%2F%2F%2BYQ%3D%3D HTTP/1.0\r\nHost: [::1]\r\n\r\n"
    );
    let r = Responder::parse("http://127.0.0.1:81/ocsp/").unwrap();
    let get = String::from_utf8(r.get(b"foobar")).unwrap();
    assert!(get.starts_with("GET /ocsp/Zm9vYmFy HTTP/1.0\r\n"), "{get}");
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
}

#[test]
fn http_bodies_need_status_200() {
    assert_eq!(
        http_body(b"HTTP/1.0 200 OK\r\nA: b\r\n\r\nDER").unwrap(),
        b"DER"
    );
    assert!(http_body(b"HTTP/1.0 404 Not Found\r\n\r\n")
        .unwrap_err()
        .contains("\"404\""));
    assert!(http_body(b"HTTP/1.0 200 OK\r\n").is_err());
    assert!(http_body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").is_err());
}

#[test]
fn request_is_one_sha1_cert_id() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let req = s.request();
    // OCSPRequest { TBSRequest { requestList { Request { CertID } } } }
    let mut d = Der(&req);
    let id = d
        .expect(0x30)
        .and_then(|mut t| t.expect(0x30))
        .and_then(|mut l| l.expect(0x30))
        .and_then(|mut r| r.expect(0x30))
        .and_then(|r| r.peek_raw())
        .unwrap();
    assert_eq!(id, s.cert_id());
    assert!(s.matches(Der(id).expect(0x30).unwrap()).unwrap());
    let (_, leaf) = X509Certificate::from_der(&p.leaf).unwrap();
    assert_eq!(s.serial, leaf.raw_serial());
    assert_eq!(s.name_hash.len(), 20);
}

#[test]
fn good_response_is_valid_between_this_and_next_update() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let r = response(&s.cert_id(), GOOD, T0_GT, Some(T1_GT), &p.ca_key, &[]);
    let v = s.check(&r, T0 + 10, None).unwrap();
    assert_eq!(
        v,
        Validity {
            this_update: T0,
            next_update: Some(T1)
        }
    );
    assert_eq!(s.check(&r, T0 - LEEWAY, None), Ok(v));
    assert_eq!(s.check(&r, T0 - LEEWAY - 1, None), Err(OcspError::Expired));
    assert_eq!(s.check(&r, T1 + LEEWAY + 1, None), Err(OcspError::Expired));
    // Verified: signed by the issuer, which is trusted.
    assert_eq!(s.check(&r, T0, Some(std::slice::from_ref(&p.ca))), Ok(v));
    // Not trusted.
    assert!(matches!(
        s.check(&r, T0, Some(&[])),
        Err(OcspError::Unverified(_))
    ));
}

#[test]
fn bad_statuses_and_other_certificates_are_refused() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let revoked = [&[0xa1, 0x11][..], &tlv(0x18, T0_GT)].concat();
    let r = response(&s.cert_id(), &revoked, T0_GT, None, &p.ca_key, &[]);
    assert_eq!(s.check(&r, T0, None), Err(OcspError::CertStatus("revoked")));
    let r = response(&s.cert_id(), &[0x82, 0x00], T0_GT, None, &p.ca_key, &[]);
    assert_eq!(s.check(&r, T0, None), Err(OcspError::CertStatus("unknown")));
    let other = Subject::new(&p.ca, &p.ca).unwrap();
    let r = response(&other.cert_id(), GOOD, T0_GT, None, &p.ca_key, &[]);
    assert_eq!(s.check(&r, T0, None), Err(OcspError::NotFound));
    // tryLater (3), and bytes that are not an OCSPResponse.
    assert_eq!(
        s.check(&[0x30, 0x03, 0x0a, 0x01, 0x03], T0, None),
        Err(OcspError::Status(3))
    );
    assert!(matches!(
        s.check(b"<html>", T0, None),
        Err(OcspError::Malformed(_))
    ));
    let good = response(&s.cert_id(), GOOD, T0_GT, None, &p.ca_key, &[]);
    for n in 0..good.len() {
        assert!(s.check(&good[..n], T0, None).is_err());
    }
}

#[test]
fn verification_takes_the_issuer_or_a_delegated_responder_only() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let trusted = [p.ca.clone()];
    let stranger = KeyPair::generate().unwrap();
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &stranger, &[]);
    assert_eq!(
        s.check(&r, T0, Some(&trusted)),
        Err(OcspError::Unverified("signature failure"))
    );
    // Unverified responses still staple with ssl_stapling_verify off, as nginx.
    assert!(s.check(&r, T0, None).is_ok());

    let issuer = Issuer::from_params(&p.ca_params, &p.ca_key);
    let responder = |eku: Vec<ExtendedKeyUsagePurpose>| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.extended_key_usages = eku;
        params.signed_by(&stranger, &issuer).unwrap().der().to_vec()
    };
    let delegated = responder(vec![ExtendedKeyUsagePurpose::OcspSigning]);
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &stranger, &[&delegated]);
    assert!(s.check(&r, T0, Some(&trusted)).is_ok());
    let not_for_ocsp = responder(vec![ExtendedKeyUsagePurpose::ServerAuth]);
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &stranger, &[&not_for_ocsp]);
    assert!(s.check(&r, T0, Some(&trusted)).is_err());
}

#[test]
fn refresh_follows_nginx() {
    let now = T0;
    // Long-lived response: an hour.
    let v = |next| Validity {
        this_update: now,
        next_update: next,
    };
    assert_eq!(refresh_after(now, Some(&v(Some(now + 86_400)))), now + 3600);
    // Expiring soon: 5 minutes before nextUpdate, but never sooner than 5 minutes.
    assert_eq!(refresh_after(now, Some(&v(Some(now + 1200)))), now + 900);
    assert_eq!(refresh_after(now, Some(&v(Some(now + 400)))), now + 300);
    assert_eq!(refresh_after(now, Some(&v(None))), now + 3600);
    assert_eq!(refresh_after(now, None), now + 300);
}

#[test]
fn generalized_times() {
    assert_eq!(generalized_time(T0_GT), Some(T0));
    assert_eq!(generalized_time(T1_GT), Some(T1));
    assert_eq!(generalized_time(b"20000229235959Z"), Some(951_868_799));
    assert_eq!(generalized_time(b"20000229235959.123Z"), Some(951_868_799));
    assert_eq!(generalized_time(b"20001329235959Z"), None);
    assert_eq!(generalized_time(b"2000022923595Z"), None);
    assert_eq!(generalized_time(b"20000229235959"), None);
}

/// `revoked` with a revocation time (`RevokedInfo ::= SEQUENCE { revocationTime }`).
const REVOKED: &[u8] = &[
    0xa1, 0x11, 0x18, 0x0f, b'2', b'0', b'2', b'6', b'1', b'1', b'2', b'0', b'0', b'0', b'0', b'0',
    b'0', b'0', b'Z',
];

#[test]
fn ssl_ocsp_statuses_come_only_from_verified_current_responses() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let anchor = [p.ca.clone()];
    let t1 = Some(T1_GT);
    let r = response(&s.cert_id(), REVOKED, T0_GT, t1, &p.ca_key, &[]);
    assert_eq!(
        s.examine(&r, T0, Some(&anchor)).map(|(st, _)| st),
        Ok(CertStatus::Revoked)
    );
    let r = response(&s.cert_id(), &[0x82, 0x00], T0_GT, t1, &p.ca_key, &[]);
    assert_eq!(
        s.examine(&r, T0, Some(&anchor)).map(|(st, _)| st),
        Ok(CertStatus::Unknown)
    );
    // A revoked answer from a key that is not the issuer's is no answer at all.
    let stranger = KeyPair::generate().unwrap();
    let r = response(&s.cert_id(), REVOKED, T0_GT, t1, &stranger, &[]);
    assert_eq!(
        s.examine(&r, T0, Some(&anchor)),
        Err(OcspError::Unverified("signature failure"))
    );
    // nextUpdate before thisUpdate, or past (beyond the 5 minutes of leeway): not current.
    let r = response(&s.cert_id(), GOOD, T1_GT, Some(T0_GT), &p.ca_key, &[]);
    assert_eq!(s.examine(&r, T1, Some(&anchor)), Err(OcspError::Expired));
    let r = response(&s.cert_id(), GOOD, T0_GT, t1, &p.ca_key, &[]);
    assert!(s.examine(&r, T1 + LEEWAY, Some(&anchor)).is_ok());
    assert_eq!(
        s.examine(&r, T1 + LEEWAY + 1, Some(&anchor)),
        Err(OcspError::Expired)
    );
    assert_eq!(s.cache_key().len(), 40 + s.serial.len());
}

#[test]
fn delegated_responders_must_be_current_and_signed_by_the_issuer_key() {
    let p = pki();
    let s = Subject::new(&p.leaf, &p.ca).unwrap();
    let anchor = [p.ca.clone()];
    let responder_key = KeyPair::generate().unwrap();
    let delegate = |signer: &KeyPair, not_after: (i32, u8, u8)| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::OcspSigning];
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        // The CA's name either way; only `signer` differs.
        let issuer = Issuer::from_params(&p.ca_params, signer);
        params
            .signed_by(&responder_key, &issuer)
            .unwrap()
            .der()
            .to_vec()
    };
    let ok = delegate(&p.ca_key, (2030, 1, 1));
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &responder_key, &[&ok]);
    assert!(s.examine(&r, T0, Some(&anchor)).is_ok());
    // Issued in the CA's name by an impostor key.
    let impostor = KeyPair::generate().unwrap();
    let forged = delegate(&impostor, (2030, 1, 1));
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &responder_key, &[&forged]);
    assert!(s.examine(&r, T0, Some(&anchor)).is_err());
    // Expired.
    let old = delegate(&p.ca_key, (2026, 1, 1));
    let r = response(&s.cert_id(), GOOD, T0_GT, None, &responder_key, &[&old]);
    assert!(s.examine(&r, T0, Some(&anchor)).is_err());
}
