//! Who may be answered: `allow`/`deny` rules, the client-certificate checks of the Host's
//! server block (495/496), and nginx's 421 when the Host asks for other client checks than
//! the handshake made.

use std::sync::Arc;

use super::Req;
use crate::conf::model::{AccessRule, Net, ServerConf};
use crate::conf::realip::cidr_contains;

/// Whether `allow`/`deny` `rules` let `peer` in (`None`: a client of a UNIX-domain socket).
pub(super) fn allowed(rules: &[AccessRule], peer: Option<std::net::IpAddr>) -> bool {
    access_rule(rules, peer).unwrap_or(true)
}

/// `allow`/`deny` as nginx's access module: Some(allow) for the first rule that matches
/// `peer` (`None`: a client of a UNIX-domain socket), None when none does (the module
/// declines).
pub(super) fn access_rule(rules: &[AccessRule], peer: Option<std::net::IpAddr>) -> Option<bool> {
    rules.iter().find_map(|rule| {
        let hit = match (rule.net, peer) {
            (Net::All, _) | (Net::Unix, None) => true,
            (Net::Cidr(net, bits), Some(ip)) => cidr_contains(net, bits, ip),
            (Net::Cidr(..), None) | (Net::Unix, Some(_)) => false,
        };
        hit.then_some(rule.allow)
    })
}

/// nginx's 421 Misdirected Request, for client certificates: on a TLS connection whose
/// handshake was made with `hs_server`'s settings (the block chosen by SNI), a request whose
/// Host chose `host_server` is refused when that server checks client certificates
/// (`ssl_verify_client` other than off) and the handshake did not make the same checks
/// (`ssl_verify_client`, `ssl_client_certificate`, `ssl_ocsp` or `ssl_ocsp_responder` differ),
/// or there was no SNI at all:
/// otherwise a client could pass the handshake of a server without client checks (or connect
/// by IP address) and then ask a protected one.
///
/// nginx 1.22 refuses whenever the Host (not equal to the SNI name) selects a server with
/// `ssl_verify_client` other than off, even the SNI's own server block, and without SNI
/// answers 400 ("No required SSL certificate was sent") when no certificate came. firstbyte
/// refuses only when the requirements differ (the same block, or one with the same checks,
/// was verified by the handshake already), and always without SNI.
pub fn misdirected(
    sni: Option<&str>,
    hs_server: &Arc<ServerConf>,
    host_server: &Arc<ServerConf>,
) -> bool {
    if Arc::ptr_eq(hs_server, host_server)
        || client_checks(host_server) == crate::conf::model::VerifyClient::Off
        || !own_handshakes(host_server)
    {
        return false;
    }
    sni.is_none()
        || (
            client_checks(host_server),
            client_ca(host_server),
            client_ocsp(host_server),
        ) != (
            client_checks(hs_server),
            client_ca(hs_server),
            client_ocsp(hs_server),
        )
}

/// nginx's check of every request to a server with `ssl_verify_client`: 495 for a
/// certificate that failed verification, 496 for none where one is required.
pub(super) fn client_refusal(r: &Req) -> Option<u16> {
    let tls = r.conn.facts().tls.as_ref()?;
    let verify = tls
        .client
        .as_ref()
        .map_or(crate::tls::peer::ClientVerify::None, |c| c.verify.clone());
    crate::tls::peer::refusal(client_checks(&r.server), &verify)
}

fn client_checks(s: &ServerConf) -> crate::conf::model::VerifyClient {
    s.tls
        .as_ref()
        .map_or(crate::conf::model::VerifyClient::Off, |t| t.verify_client)
}

/// Whether a block makes its own handshakes. One without a certificate on an `ssl` address
/// has the default server's make them (nginx keeps that server's SSL context, its client CA
/// included): its requests are judged by that handshake's result, under its own
/// `ssl_verify_client`.
fn own_handshakes(s: &ServerConf) -> bool {
    s.tls.as_ref().is_some_and(|t| {
        !t.certificates.is_empty() || !t.dynamic_certificates.is_empty() || t.reject_handshake
    })
}

/// `ssl_ocsp` and its responder: a handshake checked with other OCSP settings (or none) does
/// not stand for this server's (stricter than nginx, whose 421 looks at the name only).
fn client_ocsp(s: &ServerConf) -> Option<(crate::conf::model::OcspMode, Option<&str>)> {
    s.tls
        .as_ref()
        .map(|t| (t.ocsp, t.ocsp_responder.as_deref()))
}

fn client_ca(s: &ServerConf) -> Option<&std::path::Path> {
    s.tls.as_ref().and_then(|t| t.client_certificate.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_rules() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(cidr_contains(ip("10.1.0.0"), 16, ip("10.1.200.3")));
        assert!(!cidr_contains(ip("10.1.0.0"), 16, ip("10.2.0.1")));
        assert!(cidr_contains(ip("127.0.0.1"), 32, ip("::ffff:127.0.0.1")));
        assert!(cidr_contains(ip("2001:db8::"), 32, ip("2001:db8:1::1")));
        let rules = vec![
            AccessRule {
                allow: true,
                net: Net::Cidr(ip("127.0.0.1"), 32),
            },
            AccessRule {
                allow: false,
                net: Net::All,
            },
        ];
        assert!(allowed(&rules, Some(ip("127.0.0.1"))));
        assert!(!allowed(&rules, Some(ip("192.0.2.1"))));
        assert!(allowed(&[], Some(ip("192.0.2.1"))));
    }

    #[test]
    fn misdirected_when_host_asks_for_other_client_checks() {
        let conf = crate::conf::load_str(
            r#"
events {}
http {
    server { listen 127.0.0.1:8443 ssl; server_name a.test; ssl_certificate x.crt; ssl_certificate_key x.key; }
    server { listen 127.0.0.1:8443 ssl; server_name b.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client on; ssl_client_certificate ca.crt; }
    server { listen 127.0.0.1:8443 ssl; server_name c.test d.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client on; ssl_client_certificate ca.crt; }
    server { listen 127.0.0.1:8443 ssl; server_name e.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client optional; ssl_client_certificate other-ca.crt; }
    server { listen 127.0.0.1:8443 ssl; server_name f.test; ssl_certificate x.crt; ssl_certificate_key x.key;
             ssl_verify_client on; ssl_client_certificate ca.crt; ssl_ocsp leaf; }
}
"#,
            std::path::Path::new("/tmp/misdirected.conf"),
            std::path::Path::new("/tmp"),
        )
        .expect("config");
        let servers = &conf.http.as_ref().expect("http").servers;
        let (a, b, c, e) = (&servers[0], &servers[1], &servers[2], &servers[3]);
        // Handshake without client checks, Host needing them: refused.
        assert!(misdirected(Some("a.test"), a, b));
        // Different CA or mode than the handshake checked: refused.
        assert!(misdirected(Some("b.test"), b, e));
        assert!(misdirected(Some("e.test"), e, b));
        // Same CA, but the Host's server checks OCSP and the handshake's did not (or back).
        let f = &servers[4];
        assert!(misdirected(Some("b.test"), b, f));
        assert!(misdirected(Some("f.test"), f, b));
        // Same checks (same mode and CA), the same block, or a Host with no checks: served.
        assert!(!misdirected(Some("b.test"), b, c));
        assert!(!misdirected(Some("c.test"), c, c));
        assert!(!misdirected(Some("b.test"), b, a));
        // No SNI (a client connecting by IP address): a server that checks clients is
        // reached only if the handshake was its own.
        assert!(misdirected(None, a, b));
        assert!(!misdirected(None, b, b));
        assert!(!misdirected(None, b, a));
    }
}
