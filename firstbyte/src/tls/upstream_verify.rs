//! `proxy_ssl_verify on`: an upstream's chain is checked as OpenSSL checks it for nginx
//! (`tls::chain` with the `sslserver` purpose, `proxy_ssl_verify_depth`, `proxy_ssl_crl`), and
//! its name as `X509_check_host` does: the subject alternative names of type DNS when there
//! are any (`*` as a whole leftmost label only, stricter than OpenSSL's partial wildcards),
//! else the subject's common names; an IP address also matches an IP entry.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::chain::{tls12_signature, tls13_signature, ChainVerifier};

/// The upstream verifier of one `proxy_ssl_*` setting.
#[derive(Debug)]
pub struct UpstreamVerifier {
    chain: ChainVerifier,
    provider: Arc<CryptoProvider>,
}

impl UpstreamVerifier {
    /// Checks chains with `chain` (built with `Purpose::Server`).
    pub fn new(chain: ChainVerifier, provider: Arc<CryptoProvider>) -> Self {
        Self { chain, provider }
    }
}

/// Whether the certificate `der` is for `name`, as `X509_check_host` (see the module).
pub fn matches_host(der: &[u8], name: &str) -> bool {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return false;
    };
    let ip: Option<IpAddr> = name.parse().ok();
    let mut dns_seen = false;
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => {
                    dns_seen = true;
                    if dns_matches(d, name) {
                        return true;
                    }
                }
                GeneralName::IPAddress(bytes) => {
                    let listed = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    if ip.is_some() && listed == ip {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    if dns_seen {
        return false;
    }
    let matched = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| dns_matches(cn, name));
    matched
}

/// One DNS pattern against a name, case-insensitively; `*.` matches one whole leftmost label.
fn dns_matches(pattern: &str, name: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    let name = name.trim_end_matches('.');
    if let Some(rest) = pattern.strip_prefix("*.") {
        // At least two labels after the wildcard, as OpenSSL requires.
        if !rest.contains('.') {
            return false;
        }
        return match name.split_once('.') {
            Some((first, tail)) => !first.is_empty() && tail.eq_ignore_ascii_case(rest),
            None => false,
        };
    }
    !pattern.contains('*') && pattern.eq_ignore_ascii_case(name)
}

impl ServerCertVerifier for UpstreamVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let sent: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        self.chain
            .check(end_entity.as_ref(), &sent, secs)
            .map_err(|reason| {
                Error::General(format!("upstream SSL certificate verify error: {reason}"))
            })?;
        let name = match server_name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            _ => String::new(),
        };
        if !matches_host(end_entity.as_ref(), &name) {
            return Err(Error::General(format!(
                "upstream SSL certificate does not match \"{name}\""
            )));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls12_signature(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::dns_matches;

    #[test]
    fn wildcards_cover_one_whole_label() {
        assert!(dns_matches("example.com", "EXAMPLE.com"));
        assert!(dns_matches("*.example.com", "a.example.com"));
        assert!(!dns_matches("*.example.com", "example.com"));
        assert!(!dns_matches("*.example.com", "a.b.example.com"));
        assert!(!dns_matches("*.com", "example.com"));
        assert!(!dns_matches("f*.example.com", "foo.example.com"));
        assert!(!dns_matches("example.com", "example.org"));
    }
}
