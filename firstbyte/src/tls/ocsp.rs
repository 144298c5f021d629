//! OCSP for `ssl_stapling` and `ssl_ocsp`: the pure part (RFC 6960), no sockets and no clock.
//!
//! [`Subject::new`] takes a certificate and its issuer and gives the request to send
//! ([`Subject::request`], DER, one `CertID` hashed with SHA-1 as nginx's OpenSSL does) and the
//! responder to send it to ([`responder_url`], from the certificate's Authority Information
//! Access unless `ssl_stapling_responder` names one). [`Subject::check`] takes the responder's
//! bytes and the time and says whether the response may be stapled: successful, for this
//! certificate, status `good`, within its validity window (OpenSSL's 5 minutes of leeway, as
//! nginx), and, with `ssl_stapling_verify on`, signed by the issuer or by a responder the issuer
//! delegated to (`id-kp-OCSPSigning`), with the issuer trusted. [`refresh_after`] is nginx's
//! schedule for the next fetch.

use aws_lc_rs::digest;
use aws_lc_rs::signature;
use x509_parser::prelude::{FromDer, X509Certificate};

/// OpenSSL's `OCSP_check_validity` leeway nginx passes: 300 seconds each way.
pub const LEEWAY: u64 = 300;
/// nginx refetches at most an hour after a success (`ngx_ssl_stapling_update`): 3600 seconds.
const MAX_REFRESH: u64 = 3600;
/// nginx retries 5 minutes after a failure, and never sooner after a success: 300 seconds.
pub const RETRY: u64 = 300;

const SHA1_OID: &[u8] = &[0x2b, 0x0e, 0x03, 0x02, 0x1a];
/// id-pkix-ocsp-basic, 1.3.6.1.5.5.7.48.1.1.
const BASIC_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];

/// Why a response cannot be stapled (worded for the error log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OcspError {
    /// Not DER of the expected shape.
    #[error("malformed OCSP response ({0})")]
    Malformed(&'static str),
    /// `responseStatus` other than successful (0).
    #[error("OCSP response not successful ({0})")]
    Status(u8),
    /// No `SingleResponse` for this certificate.
    #[error("certificate status not found in the OCSP response")]
    NotFound,
    /// The certificate is revoked or unknown to the responder.
    #[error("certificate status \"{0}\" in the OCSP response")]
    CertStatus(&'static str),
    /// `thisUpdate` in the future or `nextUpdate` in the past.
    #[error("OCSP response not valid at this time")]
    Expired,
    /// `ssl_stapling_verify on` and the signature or its signer does not check out.
    #[error("OCSP response not verified ({0})")]
    Unverified(&'static str),
    /// The certificate or its issuer cannot be parsed.
    #[error("certificate cannot be parsed")]
    Certificate,
}

/// A certificate's status in a response (RFC 6960 `CertStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertStatus {
    /// `good`.
    Good,
    /// `revoked`.
    Revoked,
    /// `unknown`.
    Unknown,
}

/// Unix seconds a response is good for, as [`Subject::check`] found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `thisUpdate`.
    pub this_update: u64,
    /// `nextUpdate`, if the responder gave one.
    pub next_update: Option<u64>,
}

/// When to fetch again after a fetch at `now` (nginx: `max(min(valid − 300, now + 3600), now +
/// 300)` after a success, `now + 300` after a failure).
pub fn refresh_after(now: u64, got: Option<&Validity>) -> u64 {
    match got.and_then(|v| v.next_update) {
        Some(next) => next
            .saturating_sub(LEEWAY)
            .min(now + MAX_REFRESH)
            .max(now + RETRY),
        None if got.is_some() => now + MAX_REFRESH,
        None => now + RETRY,
    }
}

/// The OCSP responder URL of a certificate's AIA extension (the first `http://` one).
pub fn responder_url(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(cert_der).ok()?;
    for ext in cert.extensions() {
        if let x509_parser::extensions::ParsedExtension::AuthorityInfoAccess(aia) =
            ext.parsed_extension()
        {
            for d in &aia.accessdescs {
                if d.access_method.to_id_string() != "1.3.6.1.5.5.7.48.1" {
                    continue;
                }
                if let x509_parser::extensions::GeneralName::URI(u) = &d.access_location {
                    return Some((*u).to_string());
                }
            }
        }
    }
    None
}

/// A responder URL split for an HTTP/1.0 request: host, port, path (nginx takes `http://`
/// only: "https responder not supported").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responder {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port, 80 unless given.
    pub port: u16,
    /// Path with query, `/` when empty.
    pub path: String,
}

impl Responder {
    /// Parses `http://host[:port][/path]`; `None` for anything else.
    pub fn parse(url: &str) -> Option<Responder> {
        let rest = url
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']')?;
            match after.strip_prefix(':') {
                Some(p) => (h, p.parse().ok()?),
                None if after.is_empty() => (h, 80),
                None => return None,
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse().ok()?),
                None => (authority, 80),
            }
        };
        if host.is_empty() || host.contains('@') {
            return None;
        }
        Some(Responder {
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }

    /// The HTTP/1.0 GET carrying `request` as nginx sends it (RFC 6960 appendix A.1): the
    /// path, a `/`, then the request in base64 with `+`, `/` and `=` percent-escaped.
    pub fn get(&self, request: &[u8]) -> Vec<u8> {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let sep = if self.path.ends_with('/') { "" } else { "/" };
        let mut b64 = String::new();
        for c in base64(request).chars() {
            match c {
                '+' => b64.push_str("%2B"),
                '/' => b64.push_str("%2F"),
                '=' => b64.push_str("%3D"),
                c => b64.push(c),
            }
        }
        format!(
            "GET {}{sep}{b64} HTTP/1.0\r\nHost: {host}\r\n\r\n",
            self.path
        )
        .into_bytes()
    }
}

pub(super) fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The body of an HTTP/1.x response read to its end: status 200 required (the content type
/// is not checked: nginx checks it, the DER check that follows is stricter).
pub fn http_body(resp: &[u8]) -> Result<&[u8], String> {
    // The header ends at the first empty line; bare LF line ends are taken, as nginx takes them.
    let mut start = 0;
    let end = loop {
        let Some(nl) = resp[start..].iter().position(|b| *b == b'\n') else {
            return Err("OCSP responder sent a truncated response".into());
        };
        let line = &resp[start..start + nl];
        if line.is_empty() || line == b"\r" {
            break start;
        }
        start += nl + 1;
    };
    let body = &resp[end..];
    let body = &body[body
        .iter()
        .position(|b| *b == b'\n')
        .map_or(body.len(), |i| i + 1)..];
    let head = std::str::from_utf8(&resp[..end]).map_err(|_| "OCSP responder sent a bad header")?;
    let status = head.lines().next().unwrap_or("");
    let mut parts = status.split_ascii_whitespace();
    let proto = parts.next().unwrap_or("");
    let code = parts.next().unwrap_or("");
    if !proto.starts_with("HTTP/1.") {
        return Err("OCSP responder sent an invalid response".into());
    }
    if code != "200" {
        return Err(format!("OCSP responder sent unexpected \"{code}\" status"));
    }
    if head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:"))
    {
        return Err("OCSP responder sent a chunked response to HTTP/1.0".into());
    }
    Ok(body)
}

/// One certificate to staple for.
#[derive(Debug, Clone)]
pub struct Subject {
    name_hash: Vec<u8>,
    key_hash: Vec<u8>,
    serial: Vec<u8>,
    issuer: Vec<u8>,
}

impl Subject {
    /// From the certificate and its issuer (DER).
    pub fn new(cert_der: &[u8], issuer_der: &[u8]) -> Result<Subject, OcspError> {
        let (_, cert) = X509Certificate::from_der(cert_der).map_err(|_| OcspError::Certificate)?;
        let (_, issuer) =
            X509Certificate::from_der(issuer_der).map_err(|_| OcspError::Certificate)?;
        let sha1 = |b: &[u8]| {
            digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, b)
                .as_ref()
                .to_vec()
        };
        Ok(Subject {
            name_hash: sha1(cert.issuer().as_raw()),
            key_hash: sha1(&issuer.public_key().subject_public_key.data),
            serial: cert.raw_serial().to_vec(),
            issuer: issuer_der.to_vec(),
        })
    }

    fn cert_id(&self) -> Vec<u8> {
        let alg = tlv(0x30, &[tlv(0x06, SHA1_OID), vec![0x05, 0x00]].concat());
        let body = [
            alg,
            tlv(0x04, &self.name_hash),
            tlv(0x04, &self.key_hash),
            tlv(0x02, &self.serial),
        ]
        .concat();
        tlv(0x30, &body)
    }

    /// The DER `OCSPRequest` for this certificate (no nonce: a stapled response is shared by
    /// every client, so nginx sends none either).
    pub fn request(&self) -> Vec<u8> {
        let request = tlv(0x30, &self.cert_id());
        let list = tlv(0x30, &request);
        let tbs = tlv(0x30, &list);
        tlv(0x30, &tbs)
    }

    /// Checks a DER `OCSPResponse` at unix time `now` for stapling: as [`Self::examine`], and
    /// the status must be `good`. With `trusted` (`ssl_stapling_verify on`: the certificates of
    /// `ssl_trusted_certificate` and `ssl_client_certificate`), the signature is verified too
    /// and the issuer must be one of them or signed by one.
    pub fn check(
        &self,
        der: &[u8],
        now: u64,
        trusted: Option<&[Vec<u8>]>,
    ) -> Result<Validity, OcspError> {
        let (status, validity) = self.examine(der, now, trusted)?;
        match status {
            CertStatus::Good => Ok(validity),
            CertStatus::Revoked => Err(OcspError::CertStatus("revoked")),
            CertStatus::Unknown => Err(OcspError::CertStatus("unknown")),
        }
    }

    /// nginx's `ssl_ocsp_cache` key (`ngx_ssl_ocsp_create_key`): the issuer's name and key
    /// hashes and the serial number.
    pub fn cache_key(&self) -> Vec<u8> {
        [&self.name_hash[..], &self.key_hash, &self.serial].concat()
    }

    /// The certificate's status in a DER `OCSPResponse` at unix time `now`, in the order of
    /// nginx's `ngx_ssl_ocsp_verify`: the response successful; with `trusted`, signed by the
    /// issuer or a responder it delegated to (current, `id-kp-OCSPSigning`, signed by the
    /// issuer) and the issuer anchored in `trusted`; a `SingleResponse` for this certificate;
    /// `thisUpdate` and `nextUpdate` current within OpenSSL's 5 minutes of leeway. Any failure
    /// is an error whatever the status said; the status (good, revoked, unknown) comes last.
    pub fn examine(
        &self,
        der: &[u8],
        now: u64,
        trusted: Option<&[Vec<u8>]>,
    ) -> Result<(CertStatus, Validity), OcspError> {
        let bad = OcspError::Malformed;
        let mut top = Der(der);
        let mut resp = top.expect(0x30).ok_or(bad("OCSPResponse"))?;
        let status = resp.expect(0x0a).ok_or(bad("responseStatus"))?;
        match status.0 {
            [0] => {}
            [s] => return Err(OcspError::Status(*s)),
            _ => return Err(bad("responseStatus")),
        }
        let mut bytes = resp
            .expect(0xa0)
            .and_then(|mut e| e.expect(0x30))
            .ok_or(bad("responseBytes"))?;
        if bytes.expect(0x06).map(|o| o.0) != Some(BASIC_OID) {
            return Err(bad("not a basic OCSP response"));
        }
        let basic = bytes.expect(0x04).ok_or(bad("response"))?;
        let mut basic = Der(basic.0).expect(0x30).ok_or(bad("BasicOCSPResponse"))?;
        let tbs_raw = basic.peek_raw().ok_or(bad("tbsResponseData"))?;
        let mut tbs = basic.expect(0x30).ok_or(bad("tbsResponseData"))?;
        let mut sig_alg = basic.expect(0x30).ok_or(bad("signatureAlgorithm"))?;
        let sig_oid = sig_alg.expect(0x06).ok_or(bad("signatureAlgorithm"))?.0;
        let sig = basic.expect(0x03).ok_or(bad("signature"))?.0;
        let certs = match basic.expect(0xa0) {
            Some(mut c) => {
                let mut list = c.expect(0x30).ok_or(bad("certs"))?;
                let mut out = Vec::new();
                while let Some(raw) = list.peek_raw() {
                    list.next().ok_or(bad("certs"))?;
                    out.push(raw);
                }
                out
            }
            None => Vec::new(),
        };

        if tbs.peek_tag() == Some(0xa0) {
            tbs.next();
        }
        match tbs.peek_tag() {
            Some(0xa1 | 0xa2) => tbs.next().ok_or(bad("responderID"))?,
            _ => return Err(bad("responderID")),
        };
        tbs.expect(0x18).ok_or(bad("producedAt"))?;
        let mut responses = tbs.expect(0x30).ok_or(bad("responses"))?;
        let mut found = None;
        while responses.peek_tag().is_some() {
            let mut single = responses.expect(0x30).ok_or(bad("SingleResponse"))?;
            let id = single.expect(0x30).ok_or(bad("CertID"))?;
            let (tag, _) = single.next().ok_or(bad("certStatus"))?;
            let this_update = single
                .expect(0x18)
                .and_then(|t| generalized_time(t.0))
                .ok_or(bad("thisUpdate"))?;
            let next_update = match single.peek_tag() {
                Some(0xa0) => Some(
                    single
                        .expect(0xa0)
                        .and_then(|mut e| e.expect(0x18))
                        .and_then(|t| generalized_time(t.0))
                        .ok_or(bad("nextUpdate"))?,
                ),
                _ => None,
            };
            if found.is_none() && self.matches(id)? {
                found = Some((tag, this_update, next_update));
            }
        }
        if let Some(trusted) = trusted {
            self.verify(tbs_raw, sig_oid, sig, &certs, trusted, now)?;
        }
        let (tag, this_update, next_update) = found.ok_or(OcspError::NotFound)?;
        let status = match tag {
            0x80 => CertStatus::Good,
            0xa1 => CertStatus::Revoked,
            _ => CertStatus::Unknown,
        };
        // OpenSSL's `OCSP_check_validity(this, next, 300, -1)`.
        if this_update > now + LEEWAY
            || next_update.is_some_and(|n| n + LEEWAY < now || n < this_update)
        {
            return Err(OcspError::Expired);
        }
        Ok((
            status,
            Validity {
                this_update,
                next_update,
            },
        ))
    }

    fn matches(&self, mut id: Der<'_>) -> Result<bool, OcspError> {
        let bad = OcspError::Malformed;
        let mut alg = id.expect(0x30).ok_or(bad("hashAlgorithm"))?;
        let oid = alg.expect(0x06).ok_or(bad("hashAlgorithm"))?.0;
        let name = id.expect(0x04).ok_or(bad("issuerNameHash"))?.0;
        let key = id.expect(0x04).ok_or(bad("issuerKeyHash"))?.0;
        let serial = id.expect(0x02).ok_or(bad("serialNumber"))?.0;
        Ok(oid == SHA1_OID
            && name == self.name_hash
            && key == self.key_hash
            && serial == self.serial)
    }

    fn verify(
        &self,
        tbs: &[u8],
        sig_oid: &[u8],
        sig: &[u8],
        certs: &[&[u8]],
        trusted: &[Vec<u8>],
        now: u64,
    ) -> Result<(), OcspError> {
        let (_, issuer) =
            X509Certificate::from_der(&self.issuer).map_err(|_| OcspError::Certificate)?;
        let sig = sig.split_first().filter(|(u, _)| **u == 0).map(|(_, s)| s);
        let sig = sig.ok_or(OcspError::Unverified("bad signature encoding"))?;
        let signed_by = |spki: &[u8]| verify_sig(sig_oid, spki, tbs, sig);
        let issuer_key = &issuer.public_key().subject_public_key.data;
        let ok = signed_by(issuer_key)
            || certs.iter().any(|der| {
                let Ok((_, c)) = X509Certificate::from_der(der) else {
                    return false;
                };
                // A delegated responder: issued by our issuer for OCSP signing (RFC 6960 4.2.2.2).
                let delegated =
                    matches!(c.extended_key_usage(), Ok(Some(e)) if e.value.ocsp_signing);
                let v = c.validity();
                let now = i64::try_from(now).unwrap_or(i64::MAX);
                let current = v.not_before.timestamp() <= now && now <= v.not_after.timestamp();
                delegated
                    && current
                    && c.issuer().as_raw() == issuer.subject().as_raw()
                    && cert_signed_by(&c, issuer_key)
                    && signed_by(&c.public_key().subject_public_key.data)
            });
        if !ok {
            return Err(OcspError::Unverified("signature failure"));
        }
        let anchored = trusted.iter().any(|t| {
            *t == self.issuer
                || X509Certificate::from_der(t).is_ok_and(|(_, t)| {
                    t.subject().as_raw() == issuer.issuer().as_raw()
                        && cert_signed_by(&issuer, &t.public_key().subject_public_key.data)
                })
        });
        if anchored {
            Ok(())
        } else {
            Err(OcspError::Unverified(
                "issuer not in \"ssl_trusted_certificate\"",
            ))
        }
    }
}

fn cert_signed_by(cert: &X509Certificate<'_>, key: &[u8]) -> bool {
    let oid = cert.signature_algorithm.algorithm.as_bytes();
    verify_sig(
        oid,
        key,
        cert.tbs_certificate.as_ref(),
        &cert.signature_value.data,
    )
}

fn verify_sig(oid: &[u8], key: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    // 1.2.840.113549.1.1.{5,11,12,13} and 1.2.840.10045.4.3.{2,3}.
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    let alg: &dyn signature::VerificationAlgorithm = match oid.split_last() {
        Some((5, p)) if p == RSA => &signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
        Some((11, p)) if p == RSA => &signature::RSA_PKCS1_2048_8192_SHA256,
        Some((12, p)) if p == RSA => &signature::RSA_PKCS1_2048_8192_SHA384,
        Some((13, p)) if p == RSA => &signature::RSA_PKCS1_2048_8192_SHA512,
        Some((2, p)) if p == ECDSA => &signature::ECDSA_P256_SHA256_ASN1,
        Some((3, p)) if p == ECDSA => &signature::ECDSA_P384_SHA384_ASN1,
        _ => return false,
    };
    signature::UnparsedPublicKey::new(alg, key)
        .verify(msg, sig)
        .is_ok()
}

fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(body);
    out
}

/// A cursor over DER TLVs (definite lengths only, as DER requires).
#[derive(Debug, Clone, Copy)]
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn header(&self) -> Option<(u8, usize, usize)> {
        let (&tag, rest) = self.0.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, hdr) = if first < 0x80 {
            (usize::from(first), 2)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |a, b| (a << 8) | usize::from(*b));
            (len, 2 + n)
        };
        (self.0.len() - hdr >= len).then_some((tag, hdr, len))
    }

    fn peek_tag(&self) -> Option<u8> {
        self.header().map(|(t, _, _)| t)
    }

    fn peek_raw(&self) -> Option<&'a [u8]> {
        let (_, hdr, len) = self.header()?;
        Some(&self.0[..hdr + len])
    }

    fn next(&mut self) -> Option<(u8, Der<'a>)> {
        let (tag, hdr, len) = self.header()?;
        let body = &self.0[hdr..hdr + len];
        self.0 = &self.0[hdr + len..];
        Some((tag, Der(body)))
    }

    fn expect(&mut self, tag: u8) -> Option<Der<'a>> {
        if self.peek_tag()? != tag {
            return None;
        }
        self.next().map(|(_, d)| d)
    }
}

/// `YYYYMMDDHHMMSS[.f]Z` → unix seconds.
fn generalized_time(b: &[u8]) -> Option<u64> {
    if b.len() < 15 || *b.last()? != b'Z' || !b[..14].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| b[r].iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0'));
    let (y, m, d) = (n(0..4), n(4..6), n(6..8));
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(8..10) * 3600 + n(10..12) * 60 + n(12..14);
    u64::try_from(secs).ok()
}

#[cfg(test)]
#[path = "ocsp_tests.rs"]
mod tests;
