//! Connection facts in OpenSSL's spelling, as nginx's `$ssl_protocol`, `$ssl_cipher` and
//! `$ssl_curve` show them (and as the built-in site prints them).
//!
//! rustls codes in, `&'static str` out. Codes rustls never negotiates here (CBC suites, old
//! protocol versions) still get their OpenSSL names when known, so logs read as nginx's.

use rustls::{CipherSuite, NamedGroup, ProtocolVersion};

/// `$ssl_protocol`: `TLSv1.2`, `TLSv1.3`; `unknown` for codes OpenSSL has no name for.
pub fn protocol_name(version: ProtocolVersion) -> &'static str {
    match version {
        ProtocolVersion::TLSv1_3 => "TLSv1.3",
        ProtocolVersion::TLSv1_2 => "TLSv1.2",
        ProtocolVersion::TLSv1_1 => "TLSv1.1",
        ProtocolVersion::TLSv1_0 => "TLSv1",
        ProtocolVersion::SSLv3 => "SSLv3",
        ProtocolVersion::SSLv2 => "SSLv2",
        ProtocolVersion::DTLSv1_0 => "DTLSv1",
        ProtocolVersion::DTLSv1_2 => "DTLSv1.2",
        ProtocolVersion::DTLSv1_3 => "DTLSv1.3",
        _ => "unknown",
    }
}

/// `$ssl_cipher`: OpenSSL's name of a suite (`TLS_AES_128_GCM_SHA256`,
/// `ECDHE-ECDSA-AES128-GCM-SHA256`, ...); `unknown` for a suite outside the table.
pub fn cipher_name(suite: CipherSuite) -> &'static str {
    use CipherSuite as C;
    match suite {
        C::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        C::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        C::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        C::TLS13_AES_128_CCM_SHA256 => "TLS_AES_128_CCM_SHA256",
        C::TLS13_AES_128_CCM_8_SHA256 => "TLS_AES_128_CCM_8_SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        C::TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256 => "ECDHE-ECDSA-AES128-SHA256",
        C::TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384 => "ECDHE-ECDSA-AES256-SHA384",
        C::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256 => "ECDHE-RSA-AES128-SHA256",
        C::TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384 => "ECDHE-RSA-AES256-SHA384",
        C::TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA => "ECDHE-ECDSA-AES128-SHA",
        C::TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA => "ECDHE-ECDSA-AES256-SHA",
        C::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA => "ECDHE-RSA-AES128-SHA",
        C::TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA => "ECDHE-RSA-AES256-SHA",
        C::TLS_RSA_WITH_AES_128_GCM_SHA256 => "AES128-GCM-SHA256",
        C::TLS_RSA_WITH_AES_256_GCM_SHA384 => "AES256-GCM-SHA384",
        C::TLS_RSA_WITH_AES_128_CBC_SHA => "AES128-SHA",
        C::TLS_RSA_WITH_AES_256_CBC_SHA => "AES256-SHA",
        C::TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 => "DHE-RSA-AES128-GCM-SHA256",
        C::TLS_DHE_RSA_WITH_AES_256_GCM_SHA384 => "DHE-RSA-AES256-GCM-SHA384",
        C::TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "DHE-RSA-CHACHA20-POLY1305",
        _ => "unknown",
    }
}

/// `$ssl_curve`: OpenSSL's group name (`x25519`, `prime256v1`, `secp384r1`, `X25519MLKEM768`);
/// `unknown` for a group outside the table.
pub fn group_name(group: NamedGroup) -> &'static str {
    match group {
        NamedGroup::X25519 => "x25519",
        NamedGroup::X448 => "x448",
        NamedGroup::secp256r1 => "prime256v1",
        NamedGroup::secp384r1 => "secp384r1",
        NamedGroup::secp521r1 => "secp521r1",
        NamedGroup::X25519MLKEM768 => "X25519MLKEM768",
        NamedGroup::secp256r1MLKEM768 => "SecP256r1MLKEM768",
        NamedGroup::MLKEM768 => "MLKEM768",
        NamedGroup::MLKEM1024 => "MLKEM1024",
        NamedGroup::FFDHE2048 => "ffdhe2048",
        NamedGroup::FFDHE3072 => "ffdhe3072",
        NamedGroup::FFDHE4096 => "ffdhe4096",
        NamedGroup::FFDHE6144 => "ffdhe6144",
        NamedGroup::FFDHE8192 => "ffdhe8192",
        _ => "unknown",
    }
}

/// `$ssl_curves`: the client's groups (their code points, as a connection keeps them) in its
/// order, by OpenSSL's names, colon-separated; groups OpenSSL has no name for as `0x` and four
/// hex digits (GREASE values among them), as nginx prints them.
pub fn curves_list(codes: &[u16]) -> String {
    join_names(codes.iter().map(|&c| (group_name(NamedGroup::from(c)), c)))
}

/// `$ssl_ciphers`: the client's cipher suites (their code points) in its order, by OpenSSL's
/// names, colon-separated; suites without one as `0x` and four hex digits (GREASE among
/// them), as nginx prints them.
pub fn ciphers_list(codes: &[u16]) -> String {
    join_names(
        codes
            .iter()
            .map(|&c| (cipher_name(CipherSuite::from(c)), c)),
    )
}

/// Names joined with `:`, `unknown` ones as `0x` and four hex digits of their code.
fn join_names(items: impl Iterator<Item = (&'static str, u16)>) -> String {
    let mut out = String::new();
    for (name, code) in items {
        if !out.is_empty() {
            out.push(':');
        }
        match name {
            "unknown" => out.push_str(&format!("0x{code:04x}")),
            name => out.push_str(name),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols() {
        assert_eq!(protocol_name(ProtocolVersion::TLSv1_2), "TLSv1.2");
        assert_eq!(protocol_name(ProtocolVersion::TLSv1_3), "TLSv1.3");
        assert_eq!(protocol_name(ProtocolVersion::Unknown(0x1234)), "unknown");
    }

    #[test]
    fn every_rustls_suite_has_its_openssl_name() {
        for suite in rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES {
            assert_ne!(cipher_name(suite.suite()), "unknown", "{:?}", suite.suite());
        }
        assert_eq!(
            cipher_name(CipherSuite::TLS13_AES_128_GCM_SHA256),
            "TLS_AES_128_GCM_SHA256"
        );
        assert_eq!(
            cipher_name(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
            "ECDHE-ECDSA-AES128-GCM-SHA256"
        );
        assert_eq!(
            cipher_name(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
            "ECDHE-RSA-CHACHA20-POLY1305"
        );
    }

    #[test]
    fn every_rustls_group_has_its_openssl_name() {
        for g in rustls::crypto::aws_lc_rs::ALL_KX_GROUPS {
            assert_ne!(group_name(g.name()), "unknown", "{:?}", g.name());
        }
        assert_eq!(group_name(NamedGroup::X25519), "x25519");
        assert_eq!(group_name(NamedGroup::secp256r1), "prime256v1");
        assert_eq!(group_name(NamedGroup::secp384r1), "secp384r1");
        assert_eq!(group_name(NamedGroup::X25519MLKEM768), "X25519MLKEM768");
    }

    #[test]
    fn curves_are_listed_as_nginx() {
        let list = [
            NamedGroup::from(0x0a0a),
            NamedGroup::X25519,
            NamedGroup::secp256r1,
        ];
        let codes: Vec<u16> = list.iter().map(|&g| u16::from(g)).collect();
        assert_eq!(curves_list(&codes), "0x0a0a:x25519:prime256v1");
        assert_eq!(
            curves_list(&[0x0a0a, 0x001d, 0x0017]),
            "0x0a0a:x25519:prime256v1"
        );
        assert_eq!(curves_list(&[]), "");
        let suites = [
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::Unknown(0x2a2a),
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ];
        let codes: Vec<u16> = suites.iter().map(|&c| u16::from(c)).collect();
        let names = "TLS_AES_128_GCM_SHA256:0x2a2a:ECDHE-RSA-AES128-GCM-SHA256";
        assert_eq!(ciphers_list(&codes), names);
        assert_eq!(ciphers_list(&[0x1301, 0x2a2a, 0xc02f]), names);
        assert_eq!(ciphers_list(&[]), "");
    }
}
