//! OpenSSL's cipher and group lists mapped onto what rustls (aws-lc-rs) can do.
//!
//! `ssl_ciphers` text → [`tls12_suites`] (OpenSSL's rule engine — add, `-` delete, `!` kill,
//! `+` move to end, `A+B` intersection, `@STRENGTH` — run over the six ECDHE + AEAD suites
//! rustls has; names of suites rustls lacks (CBC, RSA key exchange, DHE) match nothing, as
//! unknown names do in OpenSSL). `ssl_conf_command Ciphersuites` → [`tls13_suites`].
//! `ssl_ecdh_curve` → [`kx_groups`]. Results are in preference order, for
//! `ssl_prefer_server_ciphers on`.

use rustls::crypto::aws_lc_rs::{cipher_suite as cs, kx_group, DEFAULT_KX_GROUPS};
use rustls::crypto::SupportedKxGroup;
use rustls::SupportedCipherSuite;

use super::TlsError;

/// Authentication of a TLS 1.2 suite.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Auth {
    Ecdsa,
    Rsa,
}

/// Bulk cipher of a TLS 1.2 suite.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Enc {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20,
}

/// One TLS 1.2 suite rustls offers, with the attributes OpenSSL's aliases select on.
struct Suite12 {
    name: &'static str,
    suite: SupportedCipherSuite,
    auth: Auth,
    enc: Enc,
}

impl Suite12 {
    /// Strength bits, for `@STRENGTH`.
    fn bits(&self) -> u32 {
        match self.enc {
            Enc::Aes128Gcm => 128,
            Enc::Aes256Gcm | Enc::Chacha20 => 256,
        }
    }
}

/// rustls' TLS 1.2 suites in OpenSSL 3's default order (`openssl ciphers -v ALL`).
fn all12() -> [Suite12; 6] {
    [
        Suite12 {
            name: "ECDHE-ECDSA-AES256-GCM-SHA384",
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            auth: Auth::Ecdsa,
            enc: Enc::Aes256Gcm,
        },
        Suite12 {
            name: "ECDHE-RSA-AES256-GCM-SHA384",
            suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            auth: Auth::Rsa,
            enc: Enc::Aes256Gcm,
        },
        Suite12 {
            name: "ECDHE-ECDSA-CHACHA20-POLY1305",
            suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            auth: Auth::Ecdsa,
            enc: Enc::Chacha20,
        },
        Suite12 {
            name: "ECDHE-RSA-CHACHA20-POLY1305",
            suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            auth: Auth::Rsa,
            enc: Enc::Chacha20,
        },
        Suite12 {
            name: "ECDHE-ECDSA-AES128-GCM-SHA256",
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            auth: Auth::Ecdsa,
            enc: Enc::Aes128Gcm,
        },
        Suite12 {
            name: "ECDHE-RSA-AES128-GCM-SHA256",
            suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            auth: Auth::Rsa,
            enc: Enc::Aes128Gcm,
        },
    ]
}

/// Whether one component of an element (an alias or a suite name) selects `s`. Unknown
/// words select nothing. Checked against `openssl ciphers` 3.0 for each alias.
fn selects(word: &str, s: &Suite12) -> bool {
    match word {
        "ALL" | "DEFAULT" | "HIGH" | "ECDHE" | "EECDH" | "kECDHE" | "kEECDH" | "ECDH"
        | "TLSv1.2" => true,
        "aECDSA" | "ECDSA" => s.auth == Auth::Ecdsa,
        "aRSA" => s.auth == Auth::Rsa,
        "AES" | "AESGCM" | "FIPS" => matches!(s.enc, Enc::Aes128Gcm | Enc::Aes256Gcm),
        "AES128" => s.enc == Enc::Aes128Gcm,
        "AES256" => s.enc == Enc::Aes256Gcm,
        "CHACHA20" => s.enc == Enc::Chacha20,
        "SUITEB128" => s.auth == Auth::Ecdsa && s.enc != Enc::Chacha20,
        name => name == s.name,
    }
}

/// What an element does to the list (OpenSSL's `CIPHER_ADD`, `_DEL`, `_KILL`, `_ORD`).
#[derive(Clone, Copy)]
enum Op {
    Add,
    Del,
    Kill,
    Ord,
}

/// Maps an `ssl_ciphers` list to rustls' TLS 1.2 suites, in the resulting preference order.
/// An empty result is returned as is; [`tls12_suites`] turns it into an error.
fn run_cipher_list(list: &str) -> Vec<SupportedCipherSuite> {
    let all = all12();
    // OpenSSL's list: entries in order, each active or not; killed entries leave the list.
    let mut order: Vec<usize> = (0..all.len()).collect();
    let mut active = [false; 6];
    let mut killed = [false; 6];
    for element in list.split([':', ',', ' ']).filter(|e| !e.is_empty()) {
        if let Some(cmd) = element.strip_prefix('@') {
            if cmd == "STRENGTH" {
                order.sort_by_key(|&i| std::cmp::Reverse(all[i].bits()));
            }
            // `@SECLEVEL=n` and others: rustls' suites all pass any level.
            continue;
        }
        let (op, body) = match element.as_bytes()[0] {
            b'!' => (Op::Kill, &element[1..]),
            b'-' => (Op::Del, &element[1..]),
            b'+' => (Op::Ord, &element[1..]),
            _ => (Op::Add, element),
        };
        let mut matched: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| !body.is_empty() && body.split('+').all(|w| selects(w, &all[i])))
            .collect();
        if let Op::Del = op {
            // OpenSSL walks the list backwards for a delete, moving each to the head, so
            // deleted suites keep their relative order.
            matched.reverse();
        }
        for i in matched {
            match op {
                Op::Add if !active[i] && !killed[i] => {
                    active[i] = true;
                    order.retain(|&j| j != i);
                    order.push(i);
                }
                Op::Del if active[i] => {
                    active[i] = false;
                    order.retain(|&j| j != i);
                    order.insert(0, i);
                }
                Op::Kill => {
                    active[i] = false;
                    killed[i] = true;
                }
                Op::Ord if active[i] => {
                    order.retain(|&j| j != i);
                    order.push(i);
                }
                _ => {}
            }
        }
    }
    order
        .into_iter()
        .filter(|&i| active[i] && !killed[i])
        .map(|i| all[i].suite)
        .collect()
}

/// `ssl_ciphers` → TLS 1.2 suites in preference order. With TLS 1.2 enabled, a list that
/// selects nothing rustls can do is nginx's `no cipher match` error.
pub fn tls12_suites(list: &str, tls12: bool) -> Result<Vec<SupportedCipherSuite>, TlsError> {
    let suites = run_cipher_list(list);
    if suites.is_empty() && tls12 {
        return Err(TlsError::CipherList(list.to_string()));
    }
    Ok(suites)
}

/// rustls' TLS 1.3 suites in OpenSSL's default `Ciphersuites` order, with the HKDF that keys
/// each secret once (`tls/hkdf.rs`).
fn all13() -> [(&'static str, SupportedCipherSuite); 3] {
    use super::hkdf::keyed_once;
    [
        (
            "TLS_AES_256_GCM_SHA384",
            keyed_once(cs::TLS13_AES_256_GCM_SHA384),
        ),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            keyed_once(cs::TLS13_CHACHA20_POLY1305_SHA256),
        ),
        (
            "TLS_AES_128_GCM_SHA256",
            keyed_once(cs::TLS13_AES_128_GCM_SHA256),
        ),
    ]
}

/// `ssl_conf_command Ciphersuites` → TLS 1.3 suites (default: all three, OpenSSL's order).
/// The CCM suites OpenSSL knows are skipped (rustls lacks them); an unknown name is an error,
/// and so is a list that leaves TLS 1.3 with no suite while it is enabled.
pub fn tls13_suites(
    list: Option<&str>,
    tls13: bool,
) -> Result<Vec<SupportedCipherSuite>, TlsError> {
    let Some(list) = list else {
        return Ok(all13().into_iter().map(|(_, s)| s).collect());
    };
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in list.split(':').filter(|n| !n.is_empty()) {
        match all13().into_iter().find(|(n, _)| *n == name) {
            Some((_, s)) if !out.iter().any(|o| o.suite() == s.suite()) => out.push(s),
            Some(_) => {}
            None if matches!(name, "TLS_AES_128_CCM_SHA256" | "TLS_AES_128_CCM_8_SHA256") => {}
            None => return Err(TlsError::Ciphersuites(list.to_string())),
        }
    }
    if out.is_empty() && tls13 {
        return Err(TlsError::Ciphersuites(list.to_string()));
    }
    Ok(out)
}

/// `ssl_ecdh_curve` → key-exchange groups in preference order.
///
/// `auto` is rustls' default list: X25519, P-256, P-384, then X25519MLKEM768 (last, so a
/// client that sends both an X25519 and a hybrid key share gets the ~1.1 KB smaller
/// ServerHello; a client that sends only the hybrid share still gets it). Names are
/// OpenSSL's and their aliases; `?name` marks a group that may be absent (OpenSSL 3.5).
/// Groups OpenSSL knows but rustls lacks (`secp521r1`, `X448`, `ffdhe*`) are skipped;
/// an unknown name, or a list left empty, is an error.
pub fn kx_groups(spec: &str) -> Result<Vec<&'static dyn SupportedKxGroup>, TlsError> {
    if spec.eq_ignore_ascii_case("auto") {
        return Ok(DEFAULT_KX_GROUPS.to_vec());
    }
    let err = |reason: String| TlsError::Curves {
        list: spec.to_string(),
        reason,
    };
    let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for raw in spec.split([':', ',', '/']).filter(|n| !n.is_empty()) {
        let (optional, name) = match raw.strip_prefix('?') {
            Some(n) => (true, n),
            None => (false, raw),
        };
        let group: Option<&'static dyn SupportedKxGroup> = match name.to_ascii_lowercase().as_str()
        {
            "x25519" => Some(kx_group::X25519),
            "prime256v1" | "secp256r1" | "p-256" => Some(kx_group::SECP256R1),
            "secp384r1" | "p-384" => Some(kx_group::SECP384R1),
            "x25519mlkem768" => Some(kx_group::X25519MLKEM768),
            "secp256r1mlkem768" => Some(kx_group::SECP256R1MLKEM768),
            "mlkem768" => Some(kx_group::MLKEM768),
            "mlkem1024" => Some(kx_group::MLKEM1024),
            "secp521r1" | "p-521" | "x448" | "ffdhe2048" | "ffdhe3072" | "ffdhe4096"
            | "ffdhe6144" | "ffdhe8192" => None,
            _ if optional => None,
            _ => return Err(err(format!("unknown group \"{name}\""))),
        };
        if let Some(g) = group {
            if !out.iter().any(|o| o.name() == g.name()) {
                out.push(g);
            }
        }
    }
    if out.is_empty() {
        return Err(err(
            "no group that firstbyte supports (X25519, prime256v1, secp384r1, X25519MLKEM768)"
                .into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::names::cipher_name;
    use super::*;

    fn names(list: &str) -> Vec<&'static str> {
        run_cipher_list(list)
            .iter()
            .map(|s| cipher_name(s.suite()))
            .collect()
    }

    #[test]
    fn nginx_default_gives_every_aead_suite() {
        assert_eq!(
            names("HIGH:!aNULL:!MD5"),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ]
        );
    }

    #[test]
    fn one_name_gives_one_suite() {
        assert_eq!(
            names("ECDHE-RSA-AES128-GCM-SHA256"),
            ["ECDHE-RSA-AES128-GCM-SHA256"]
        );
    }

    #[test]
    fn suites_rustls_lacks_are_no_match() {
        let e = tls12_suites("AES256-SHA", true).expect_err("error");
        assert_eq!(
            e.to_string(),
            "SSL_CTX_set_cipher_list(\"AES256-SHA\") failed: no cipher match"
        );
        // With TLS 1.2 off, an empty TLS 1.2 list is fine.
        assert!(tls12_suites("AES256-SHA", false).expect("ok").is_empty());
        assert!(names("DHE-RSA-AES128-GCM-SHA256:AES128-SHA:kRSA:RSA:AEAD:SHA256").is_empty());
    }

    /// Each expectation below is `openssl ciphers -s -tls1_2 LIST` (3.0) restricted to the six.
    #[test]
    fn rules_match_openssl() {
        assert_eq!(
            names("ECDHE+AESGCM:ECDHE+CHACHA20"),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
            ]
        );
        assert_eq!(
            names("CHACHA20:HIGH:!ECDSA"),
            [
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ]
        );
        assert_eq!(
            names("CHACHA20:-CHACHA20:AES128:CHACHA20"),
            [
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
            ]
        );
        assert_eq!(
            names("HIGH:+AES256"),
            [
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384",
            ]
        );
        assert_eq!(
            names("ALL:-AESGCM:+AESGCM"),
            [
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305"
            ]
        );
        assert!(names(
            "ECDHE-RSA-AES128-GCM-SHA256:!ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"
        )
        .is_empty());
        assert_eq!(
            names("AES128, aRSA @STRENGTH"),
            [
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ]
        );
        assert!(names("").is_empty());
        assert!(names("!:+:-:@").is_empty());
    }

    #[test]
    fn tls13_names() {
        let s =
            tls13_suites(Some("TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256"), true).expect("ok");
        assert_eq!(s.len(), 1);
        assert_eq!(cipher_name(s[0].suite()), "TLS_AES_128_GCM_SHA256");
        assert_eq!(tls13_suites(None, true).expect("default").len(), 3);
        assert!(matches!(
            tls13_suites(Some("TLS_NOPE"), true),
            Err(TlsError::Ciphersuites(_))
        ));
        assert!(tls13_suites(Some("TLS_AES_128_CCM_SHA256"), true).is_err());
        assert!(tls13_suites(Some(""), false).expect("ok").is_empty());
    }

    #[test]
    fn groups() {
        let names = |s: &str| -> Vec<&'static str> {
            kx_groups(s)
                .expect("groups")
                .iter()
                .map(|g| super::super::names::group_name(g.name()))
                .collect()
        };
        assert_eq!(
            names("auto"),
            ["x25519", "prime256v1", "secp384r1", "X25519MLKEM768"]
        );
        assert_eq!(
            names("X25519:prime256v1:secp384r1"),
            ["x25519", "prime256v1", "secp384r1"]
        );
        assert_eq!(
            names("P-256:X25519MLKEM768"),
            ["prime256v1", "X25519MLKEM768"]
        );
        assert_eq!(names("secp521r1:secp384r1:?brainpool"), ["secp384r1"]);
        assert!(matches!(kx_groups("bogus"), Err(TlsError::Curves { .. })));
        assert!(matches!(
            kx_groups("secp521r1"),
            Err(TlsError::Curves { .. })
        ));
        assert!(kx_groups("").is_err());
    }
}
