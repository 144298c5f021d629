//! The client's certificate as requests see it: nginx's `$ssl_client_*` variables and the
//! verification result each request of a server with `ssl_verify_client` is checked against.
//!
//! The handshake asks for a certificate as the server block chosen by SNI says and, as nginx,
//! accepts any certificate whose key the client proves it holds (or none); [`verify`] then
//! checks the chain (`tls::chain`, OpenSSL's rules), so a request gets nginx's 400 pages (495
//! "The SSL certificate error", 496 "No required SSL certificate was sent" for `on`) and
//! `$ssl_client_verify` says `FAILED:reason`, as in nginx.
//! The result is computed once per connection, against the CA of the server block whose
//! handshake it was; a request whose `Host` selects a server with other client checks is
//! refused with 421 before it is looked at (see `http::pipeline::misdirected`).

use std::sync::Arc;

use super::chain::ChainVerifier;
use rustls::pki_types::{CertificateDer, UnixTime};

use crate::conf::model::VerifyClient;

/// `$ssl_client_verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientVerify {
    /// No certificate was sent (`NONE`).
    None,
    /// The chain verified (`SUCCESS`).
    Success,
    /// It did not (`FAILED:reason`, OpenSSL's words for the reason).
    Failed(&'static str),
}

impl ClientVerify {
    /// The variable's value.
    pub fn as_var(&self) -> String {
        match self {
            ClientVerify::None => "NONE".into(),
            ClientVerify::Success => "SUCCESS".into(),
            ClientVerify::Failed(r) => format!("FAILED:{r}"),
        }
    }
}

/// What a request must be answered when its server block checks client certificates: `None`
/// to go on, else nginx's 495 (a certificate that failed) or 496 (none sent to a server with
/// `ssl_verify_client on`).
pub fn refusal(mode: VerifyClient, verify: &ClientVerify) -> Option<u16> {
    match (mode, verify) {
        (VerifyClient::Off | VerifyClient::OptionalNoCa, _) => None,
        (VerifyClient::On | VerifyClient::Optional, ClientVerify::Failed(_)) => Some(495),
        (VerifyClient::On, ClientVerify::None) => Some(496),
        _ => None,
    }
}

/// The client's certificate chain (leaf first) and its verification result.
#[derive(Debug, Clone)]
pub struct PeerCert {
    /// Leaf first, as sent.
    pub chain: Vec<CertificateDer<'static>>,
    /// Checked at the handshake's server block.
    pub verify: ClientVerify,
    /// The verified path, leaf first and the self-signed anchor last (empty unless
    /// `verify` is `Success` against a CA): what `ssl_ocsp` checks, taken (emptied) by the
    /// connection's accept once it has.
    pub path: Vec<CertificateDer<'static>>,
}

/// Verifies a client's chain for a server with `mode` and (for `on`/`optional`) the strict
/// verifier of its `ssl_client_certificate`. `chain` is what the handshake got (possibly from
/// a resumed session, which only resumes where it was made: `tls::SessionContext`).
pub fn verify(
    mode: VerifyClient,
    strict: Option<&Arc<ChainVerifier>>,
    chain: Option<&[CertificateDer<'static>]>,
    now: UnixTime,
) -> Option<PeerCert> {
    let chain = chain.filter(|c| !c.is_empty())?;
    let mut path = Vec::new();
    let verify = match (mode, strict) {
        (VerifyClient::Off, _) => return None,
        (_, Some(v)) => {
            let sent: Vec<&[u8]> = chain[1..].iter().map(|c| c.as_ref()).collect();
            let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
            match v.verified_path(chain[0].as_ref(), &sent, now) {
                Ok(p) => {
                    path = p
                        .into_iter()
                        .map(|c| CertificateDer::from(c.to_vec()))
                        .collect();
                    ClientVerify::Success
                }
                Err(r) => ClientVerify::Failed(r),
            }
        }
        // optional_no_ca without a CA: nothing to verify against, as OpenSSL says it.
        (_, None) => ClientVerify::Failed(if self_signed(&chain[0]) {
            "self-signed certificate"
        } else {
            "unable to get local issuer certificate"
        }),
    };
    Some(PeerCert {
        chain: chain.to_vec(),
        verify,
        path,
    })
}

fn self_signed(der: &CertificateDer<'_>) -> bool {
    x509_parser::parse_x509_certificate(der.as_ref())
        .map(|(_, c)| c.subject().as_raw() == c.issuer().as_raw())
        .unwrap_or(false)
}

/// `$ssl_client_s_dn`: the subject in RFC 2253 form (`CN=client,O=Example`), as nginx ≥ 1.11.6.
pub fn subject_dn(der: &CertificateDer<'_>) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(rfc2253(c.subject()))
}

/// `$ssl_client_i_dn`: the issuer, likewise.
pub fn issuer_dn(der: &CertificateDer<'_>) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(rfc2253(c.issuer()))
}

/// `$ssl_client_s_dn_legacy`: the subject as OpenSSL's `X509_NAME_oneline` (`/C=US/CN=client`).
pub fn subject_dn_legacy(der: &CertificateDer<'_>) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(oneline(c.subject()))
}

/// `$ssl_client_i_dn_legacy`: the issuer, likewise.
pub fn issuer_dn_legacy(der: &CertificateDer<'_>) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(oneline(c.issuer()))
}

fn oneline(name: &x509_parser::x509::X509Name<'_>) -> String {
    let registry = x509_parser::objects::oid_registry();
    let mut out = String::new();
    for atv in name.iter_attributes() {
        out.push('/');
        match x509_parser::objects::oid2abbrev(atv.attr_type(), registry) {
            Ok(a) => out.push_str(a),
            Err(_) => out.push_str(&atv.attr_type().to_id_string()),
        }
        out.push('=');
        match atv.as_str() {
            Ok(v) => out.push_str(v),
            Err(_) => {
                for b in atv.as_slice() {
                    out.push_str(&format!("\\x{b:02X}"));
                }
            }
        }
    }
    out
}

/// `$ssl_client_v_start` / `$ssl_client_v_end`: the validity bounds as OpenSSL prints them
/// (`Nov 26 07:42:00 2026 GMT`).
pub fn validity(der: &CertificateDer<'_>, end: bool) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let v = c.validity();
    let t = if end { v.not_after } else { v.not_before }.to_datetime();
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    Some(format!(
        "{} {:2} {:02}:{:02}:{:02} {} GMT",
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.year()
    ))
}

/// `$ssl_client_v_remain`: whole days until the certificate expires (0 once it has), as nginx.
pub fn days_remaining(der: &CertificateDer<'_>, now: i64) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let left = c.validity().not_after.timestamp() - now;
    Some((left.max(0) / 86_400).to_string())
}

/// `$ssl_client_serial`: upper-case hex, as nginx.
pub fn serial(der: &CertificateDer<'_>) -> Option<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(c.raw_serial().iter().map(|b| format!("{b:02X}")).collect())
}

/// `$ssl_client_fingerprint`: SHA-1 of the DER, lower-case hex, as nginx.
pub fn fingerprint(der: &CertificateDer<'_>) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der.as_ref());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// `$ssl_client_raw_cert`: the certificate in PEM.
pub fn pem(der: &CertificateDer<'_>) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der.as_ref()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// `$ssl_client_escaped_cert`: the PEM, URL-encoded (nginx escapes it as a URI component).
pub fn escaped_pem(der: &CertificateDer<'_>) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(&pem(der), SET).to_string()
}

/// `$ssl_client_cert` (deprecated in nginx): the PEM with a tab before every line but the
/// first, so it can be sent in a header.
pub fn tabbed_pem(der: &CertificateDer<'_>) -> String {
    pem(der).trim_end().replace('\n', "\n\t")
}

/// RFC 2253: the last RDN first, RDNs joined by `,`, multi-valued ones by `+`, and the
/// characters `,+"\<>;` (and `#` or a space at the start, a space at the end) escaped.
fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let registry = x509_parser::objects::oid_registry();
    let mut out = String::new();
    for (i, rdn) in name
        .iter_rdn()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            match x509_parser::objects::oid2abbrev(atv.attr_type(), registry) {
                Ok(a) => out.push_str(a),
                Err(_) => out.push_str(&atv.attr_type().to_id_string()),
            }
            out.push('=');
            match atv.as_str() {
                Ok(v) => escape_value(v, &mut out),
                Err(_) => {
                    out.push('#');
                    for b in atv.as_slice() {
                        out.push_str(&format!("{b:02x}"));
                    }
                }
            }
        }
    }
    out
}

fn escape_value(v: &str, out: &mut String) {
    let n = v.chars().count();
    for (i, ch) in v.chars().enumerate() {
        let special = matches!(ch, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (ch == '#' || ch == ' '))
            || (i + 1 == n && ch == ' ');
        if special {
            out.push('\\');
        }
        out.push(ch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(dn: &[(rcgen::DnType, &str)]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["client.test".into()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn distinguished_names_in_rfc2253_order_and_escaping() {
        let c = cert_with(&[
            (rcgen::DnType::CountryName, "DE"),
            (rcgen::DnType::OrganizationName, "Acme, Inc"),
            (rcgen::DnType::CommonName, "client one"),
        ]);
        assert_eq!(
            subject_dn(&c).as_deref(),
            Some("CN=client one,O=Acme\\, Inc,C=DE")
        );
        assert_eq!(issuer_dn(&c), subject_dn(&c), "self-signed");
        assert!(self_signed(&c));
    }

    #[test]
    fn pem_forms_and_fingerprint() {
        let c = cert_with(&[(rcgen::DnType::CommonName, "x")]);
        let p = pem(&c);
        assert!(p.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(p.ends_with("-----END CERTIFICATE-----\n"));
        let e = escaped_pem(&c);
        assert!(e.starts_with("-----BEGIN%20CERTIFICATE-----%0A"), "{e}");
        assert!(!e.contains('\n') && !e.contains('+') && !e.contains('/'));
        let t = tabbed_pem(&c);
        assert!(t.contains("\n\t") && !t.ends_with('\n'));
        let f = fingerprint(&c);
        assert_eq!(f.len(), 40);
        assert!(f
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(serial(&c).is_some_and(|s| !s.is_empty()));
    }

    #[test]
    fn requests_are_refused_as_nginx_does() {
        use VerifyClient::*;
        let failed = ClientVerify::Failed("certificate has expired");
        assert_eq!(refusal(On, &ClientVerify::None), Some(496));
        assert_eq!(refusal(On, &failed), Some(495));
        assert_eq!(refusal(On, &ClientVerify::Success), None);
        assert_eq!(refusal(Optional, &ClientVerify::None), None);
        assert_eq!(refusal(Optional, &failed), Some(495));
        assert_eq!(refusal(OptionalNoCa, &failed), None);
        assert_eq!(refusal(Off, &ClientVerify::None), None);
        assert_eq!(failed.as_var(), "FAILED:certificate has expired");
        assert_eq!(ClientVerify::Success.as_var(), "SUCCESS");
    }

    #[test]
    fn verify_against_a_ca_or_none() {
        use VerifyClient::*;
        let stranger = cert_with(&[(rcgen::DnType::CommonName, "stranger")]);
        // A CA that did not sign it.
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".into()]).unwrap();
        let strict = Arc::new(
            crate::tls::chain::ChainVerifier::new(
                crate::tls::chain::Purpose::Client,
                vec![ca.cert.der().clone()],
                None,
                1,
                Vec::new(),
                crate::tls::provider(),
            )
            .unwrap(),
        );
        let chain = [stranger.clone()];
        let got = verify(Optional, Some(&strict), Some(&chain), UnixTime::now()).unwrap();
        assert!(matches!(got.verify, ClientVerify::Failed(_)), "{got:?}");
        let got = verify(OptionalNoCa, None, Some(&chain), UnixTime::now()).unwrap();
        assert_eq!(got.verify, ClientVerify::Failed("self-signed certificate"));
        assert!(verify(Optional, Some(&strict), None, UnixTime::now()).is_none());
        assert!(verify(Off, None, Some(&chain), UnixTime::now()).is_none());
    }
}
