//! Server-level directives (http and server contexts) with hand-written handlers: TLS
//! certificates and the values with their own rules (`ssl_conf_command`, record sizes,
//! socket options, `http2`), and the value parsers the TLS list (`directives.rs`) names.
//!
//! Like `handlers.rs`, each function takes a directive already checked against the table and
//! sets a field of the level's [`SrvSettings`]; TLS files resolve against the configuration
//! directory, as nginx's. Turning these values into rustls objects is `tls`' job.

use super::args::{arg0, choice, flag, invalid, number, once, size, time, unsupported, R};
use super::cx::Cx;
use super::error::ConfError;
use super::model::{OcspCacheZone, OcspMode, SessionCache, Source, TlsVersion, VerifyClient};
use super::parse::Directive;
use super::settings::{CertSet, ConfCommands, SrvSettings};
use super::units;

fn tls_source(d: &Directive, cx: &Cx) -> Result<Source, ConfError> {
    let a = arg0(d);
    if let Some(pem) = a.strip_prefix("data:") {
        return Ok(Source::Data(pem.to_string()));
    }
    if a.contains('$') {
        // Loaded at handshake time; kept as written, with its `$`, until `cert_keys` splits it
        // off. `DynamicCertKey::eval` resolves it against the configuration prefix.
        super::args::value(d, a)?;
        return Ok(Source::File(a.into()));
    }
    Ok(Source::File(cx.in_conf_dir(a)))
}

/// `ssl_certificate FILE|data:PEM` (several).
pub(crate) fn ssl_certificate(s: &mut SrvSettings, d: &Directive, cx: &mut Cx) -> R {
    let c = CertSet {
        source: tls_source(d, cx)?,
        written: arg0(d).to_string(),
        pos: d.pos.clone(),
    };
    s.tls.certificates.get_or_insert_with(Vec::new).push(c);
    Ok(())
}

/// `ssl_certificate_key FILE|data:PEM` (several).
pub(crate) fn ssl_certificate_key(s: &mut SrvSettings, d: &Directive, cx: &mut Cx) -> R {
    let k = tls_source(d, cx)?;
    s.tls.keys.get_or_insert_with(Vec::new).push(k);
    Ok(())
}

/// `ssl_session_ticket_key FILE` (several).
pub(crate) fn ssl_session_ticket_key(s: &mut SrvSettings, d: &Directive, cx: &mut Cx) -> R {
    let k = cx.in_conf_dir(arg0(d));
    s.tls
        .session_ticket_keys
        .get_or_insert_with(Vec::new)
        .push(k);
    Ok(())
}

/// `ssl_protocols VERSION ...`: TLSv1.2 and TLSv1.3 kept; older ones dropped with one warning.
pub(crate) fn protocols(d: &Directive, cx: &mut Cx) -> Result<Vec<TlsVersion>, ConfError> {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for a in &d.args {
        match a.as_str() {
            "TLSv1.2" => kept.push(TlsVersion::Tls12),
            "TLSv1.3" => kept.push(TlsVersion::Tls13),
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => dropped.push(a.as_str()),
            _ => return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos)),
        }
    }
    kept.dedup();
    if !dropped.is_empty() {
        cx.warn(
            format!(
                "{} in \"ssl_protocols\" not offered: rustls speaks TLSv1.2 and TLSv1.3 only",
                dropped.join(" ")
            ),
            &d.pos,
        );
    }
    if kept.is_empty() {
        return Err(ConfError::other(
            "\"ssl_protocols\" names no protocol firstbyte speaks (TLSv1.2, TLSv1.3)",
            &d.pos,
        ));
    }
    Ok(kept)
}

/// `ssl_conf_command NAME VALUE`, the OpenSSL commands rustls can honour: `Ciphersuites`,
/// `CipherString`, `Groups` (`Curves`), `NumTickets`, `Certificate`, `PrivateKey` (files in
/// the configuration directory, as nginx resolves them) and `Options` `KTLS` (nginx's switch
/// for kernel TLS), `KTLSTxZerocopySendfile` (OpenSSL's, for `sendfile` without the kernel's
/// copy), `SessionTicket` and `ServerPreference`, each also with `-`. Names and options are
/// matched without case, as OpenSSL matches them in a file; anything else is an `[emerg]`.
pub(crate) fn ssl_conf_command(s: &mut SrvSettings, d: &Directive, cx: &mut Cx) -> R {
    let name = arg0(d);
    let v = d.args.get(1).map(String::as_str).unwrap_or("");
    let cmds = s
        .tls
        .conf_commands
        .get_or_insert_with(ConfCommands::default);
    if name.eq_ignore_ascii_case("ciphersuites") {
        cmds.ciphersuites = Some(v.to_string());
    } else if name.eq_ignore_ascii_case("cipherstring") {
        cmds.cipher_string = Some(v.to_string());
    } else if name.eq_ignore_ascii_case("groups") || name.eq_ignore_ascii_case("curves") {
        cmds.groups = Some(v.to_string());
    } else if name.eq_ignore_ascii_case("numtickets") {
        cmds.num_tickets = Some(number(d, v)?);
    } else if name.eq_ignore_ascii_case("certificate") {
        cmds.certificate = Some((cx.in_conf_dir(v), d.pos.clone()));
    } else if name.eq_ignore_ascii_case("privatekey") {
        cmds.private_key = Some((cx.in_conf_dir(v), d.pos.clone()));
    } else if name.eq_ignore_ascii_case("options") {
        // OpenSSL's syntax: a comma-separated list, `-` turns an option off.
        for opt in v.split(',').map(str::trim) {
            let (on, bare) = match opt.strip_prefix('-') {
                Some(b) => (false, b),
                None => (true, opt),
            };
            let slot = match bare.to_ascii_lowercase().as_str() {
                "ktls" => &mut cmds.ktls,
                "ktlstxzerocopysendfile" => &mut cmds.ktls_tx_zerocopy,
                "sessionticket" => &mut cmds.session_tickets,
                "serverpreference" => &mut cmds.server_preference,
                _ => {
                    return Err(unsupported(
                        d,
                        format!("ssl_conf_command \"Options {opt}\""),
                    ))
                }
            };
            *slot = Some(on);
        }
    } else {
        return Err(unsupported(d, format!("ssl_conf_command \"{name}\"")));
    }
    Ok(())
}

/// `ssl_session_cache off | none | [builtin[:N]] [shared:NAME:SIZE]`.
pub(crate) fn session_cache_value(d: &Directive, _: &mut Cx) -> Result<SessionCache, ConfError> {
    session_cache(&d.args)
        .map_err(|a| ConfError::other(format!("invalid session cache \"{a}\""), &d.pos))
}

/// The cache an `ssl_session_cache` asks for, or the argument that is wrong.
fn session_cache(args: &[String]) -> Result<SessionCache, String> {
    // nginx's figure: about 4000 sessions fit in one megabyte of shared cache.
    const SESSIONS_PER_MB: u64 = 4000;
    // nginx's `builtin` default size, in sessions.
    const BUILTIN_DEFAULT: usize = 20480;
    let mut sessions = 0usize;
    for a in args {
        match a.as_str() {
            "off" | "none" if args.len() == 1 => {
                return Ok(if a == "off" {
                    SessionCache::Off
                } else {
                    SessionCache::None
                });
            }
            "builtin" => sessions = sessions.max(BUILTIN_DEFAULT),
            _ => {
                if let Some(n) = a.strip_prefix("builtin:") {
                    let n: usize = n.parse().map_err(|_| a.clone())?;
                    if n == 0 {
                        return Err(a.clone());
                    }
                    sessions = sessions.max(n);
                } else if let Some(rest) = a.strip_prefix("shared:") {
                    let (name, sz) = rest.rsplit_once(':').ok_or_else(|| a.clone())?;
                    let bytes = units::size(sz).ok_or_else(|| a.clone())?;
                    if name.is_empty() || bytes == 0 {
                        return Err(a.clone());
                    }
                    let n = (bytes.saturating_mul(SESSIONS_PER_MB) >> 20).max(1);
                    sessions = sessions.max(usize::try_from(n).unwrap_or(usize::MAX));
                } else {
                    return Err(a.clone());
                }
            }
        }
    }
    Ok(SessionCache::Sessions(sessions))
}

/// `ssl_verify_client on|off|optional|optional_no_ca`.
pub(crate) fn verify_client(d: &Directive, _: &mut Cx) -> Result<VerifyClient, ConfError> {
    let opts = [
        ("on", VerifyClient::On),
        ("off", VerifyClient::Off),
        ("optional", VerifyClient::Optional),
        ("optional_no_ca", VerifyClient::OptionalNoCa),
    ];
    choice(d, arg0(d), &opts)
}

/// `ssl_stapling_responder URL`: `http://` only (nginx: "invalid URL prefix in OCSP responder").
pub(crate) fn stapling_responder(d: &Directive, _: &mut Cx) -> Result<Option<String>, ConfError> {
    let url = arg0(d);
    if !url
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
        || url.len() == 7
    {
        return Err(ConfError::other(
            format!("invalid URL prefix in OCSP responder \"{url}\" in \"ssl_stapling_responder\""),
            &d.pos,
        ));
    }
    Ok(Some(url.to_string()))
}

/// `ssl_ocsp on|off|leaf`.
pub(crate) fn ocsp_mode(d: &Directive, _: &mut Cx) -> Result<OcspMode, ConfError> {
    let opts = [
        ("off", OcspMode::Off),
        ("on", OcspMode::On),
        ("leaf", OcspMode::Leaf),
    ];
    choice(d, arg0(d), &opts)
}

/// `ssl_ocsp_responder URL`: `http://` only, as nginx.
pub(crate) fn ocsp_responder(d: &Directive, _: &mut Cx) -> Result<Option<String>, ConfError> {
    let url = arg0(d);
    let bad = |what: &str| {
        ConfError::other(
            format!("{what} in OCSP responder \"{url}\" in \"ssl_ocsp_responder\""),
            &d.pos,
        )
    };
    if !url
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
        || url.len() == 7
    {
        return Err(bad("invalid URL prefix"));
    }
    let authority = url[7..].split(['/', '?']).next().unwrap_or("");
    if authority.is_empty() || authority.starts_with(':') {
        return Err(bad("no host"));
    }
    Ok(Some(url.to_string()))
}

/// `ssl_ocsp_cache off | shared:NAME:SIZE` (nginx: `invalid OCSP cache`, and at least 8 pages).
pub(crate) fn ocsp_cache(d: &Directive, _: &mut Cx) -> Result<Option<OcspCacheZone>, ConfError> {
    const MIN: u64 = 8 * 4096;
    let a = arg0(d);
    if a == "off" {
        return Ok(None);
    }
    let invalid = || ConfError::other(format!("invalid OCSP cache \"{a}\""), &d.pos);
    let rest = a.strip_prefix("shared:").ok_or_else(invalid)?;
    let (name, sz) = rest.split_once(':').ok_or_else(invalid)?;
    if name.is_empty() {
        return Err(invalid());
    }
    let size = units::size(sz).ok_or_else(invalid)?;
    if size < MIN {
        return Err(ConfError::other(
            format!("OCSP cache \"{a}\" is too small"),
            &d.pos,
        ));
    }
    Ok(Some(OcspCacheZone {
        name: name.to_string(),
        size,
    }))
}

/// A record size: 1 byte to 16k (a TLS record's plaintext limit, RFC 8446 §5.1).
fn record_size(d: &Directive) -> Result<usize, ConfError> {
    let n = size(d, arg0(d))?;
    if n == 0 || n > crate::record::MAX_RECORD_SIZE as u64 {
        return Err(invalid(d));
    }
    Ok(n as usize)
}

/// `ssl_buffer_size SIZE` (16k).
pub(crate) fn ssl_buffer_size(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.ssl_buffer_size, d)?;
    s.ssl_buffer_size = Some(record_size(d)?);
    Ok(())
}

/// `ssl_dyn_rec_enable off|on|adaptive`.
pub(crate) fn ssl_dyn_rec_enable(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    use crate::record::DynRecMode;
    once(&s.dyn_rec_enable, d)?;
    let opts = [
        ("off", DynRecMode::Off),
        ("on", DynRecMode::On),
        ("adaptive", DynRecMode::Adaptive),
    ];
    s.dyn_rec_enable = Some(choice(d, arg0(d), &opts)?);
    Ok(())
}

/// `ssl_dyn_rec_size_lo SIZE` (1369).
pub(crate) fn ssl_dyn_rec_size_lo(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.dyn_rec_size_lo, d)?;
    s.dyn_rec_size_lo = Some(record_size(d)?);
    Ok(())
}

/// `ssl_dyn_rec_size_hi SIZE` (4229).
pub(crate) fn ssl_dyn_rec_size_hi(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.dyn_rec_size_hi, d)?;
    s.dyn_rec_size_hi = Some(record_size(d)?);
    Ok(())
}

/// `ssl_dyn_rec_threshold N` (40 records).
pub(crate) fn ssl_dyn_rec_threshold(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.dyn_rec_threshold, d)?;
    s.dyn_rec_threshold = Some(number(d, arg0(d))?);
    Ok(())
}

/// `ssl_dyn_rec_timeout TIME` (1s; 0 turns dynamic records off, as Cloudflare's patch).
pub(crate) fn ssl_dyn_rec_timeout(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.dyn_rec_timeout, d)?;
    s.dyn_rec_timeout = Some(time(d, arg0(d))?);
    Ok(())
}

/// `tcp_notsent_lowat SIZE`.
pub(crate) fn tcp_notsent_lowat(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.notsent_lowat, d)?;
    let n = size(d, arg0(d))?;
    s.notsent_lowat = Some(u32::try_from(n).map_err(|_| invalid(d))?);
    Ok(())
}

/// `tcp_congestion NAME` (`[a-z0-9_]+`, at most 15 bytes as the kernel's `TCP_CA_NAME_MAX`).
pub(crate) fn tcp_congestion(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.congestion, d)?;
    let n = arg0(d);
    let ok = !n.is_empty()
        && n.len() < 16
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(invalid(d));
    }
    s.congestion = Some(n.to_string());
    Ok(())
}

/// `http2 on|off`.
pub(crate) fn http2(s: &mut SrvSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.http2, d)?;
    s.http2 = Some(flag(d)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::conf::table::tls_set::{
        protocols as ssl_protocols, verify_client as ssl_verify_client,
    };
    use crate::conf::testutil::cx;

    fn dir(name: &str, args: &[&str]) -> Directive {
        crate::conf::testutil::directive(name, args, 3)
    }

    #[test]
    fn session_cache_forms() {
        let v = |a: &[&str]| session_cache(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(v(&["off"]), Ok(SessionCache::Off));
        assert_eq!(v(&["none"]), Ok(SessionCache::None));
        assert_eq!(v(&["builtin"]), Ok(SessionCache::Sessions(20480)));
        assert_eq!(v(&["builtin:1000"]), Ok(SessionCache::Sessions(1000)));
        assert_eq!(v(&["shared:SSL:10m"]), Ok(SessionCache::Sessions(40000)));
        assert_eq!(
            v(&["builtin:10", "shared:SSL:1m"]),
            Ok(SessionCache::Sessions(4000))
        );
        assert_eq!(v(&["shared:SSL"]), Err("shared:SSL".into()));
        assert_eq!(v(&["off", "builtin"]), Err("off".into()));
        assert_eq!(v(&["builtin:x"]), Err("builtin:x".into()));
    }

    #[test]
    fn ocsp_cache_and_responder_as_nginx() {
        let mut c = cx();
        let v = |a: &str, c: &mut Cx| ocsp_cache(&dir("ssl_ocsp_cache", &[a]), c);
        assert_eq!(v("off", &mut c).unwrap(), None);
        assert_eq!(
            v("shared:OCSP:1m", &mut c).unwrap(),
            Some(OcspCacheZone {
                name: "OCSP".into(),
                size: 1 << 20
            })
        );
        assert!(v("shared:OCSP:32k", &mut c).is_ok());
        for bad in [
            "shared:OCSP:31k",
            "shared::1m",
            "shared:OCSP",
            "builtin",
            "shared:O:x",
        ] {
            assert!(v(bad, &mut c).is_err(), "{bad}");
        }
        let r = |a: &str, c: &mut Cx| ocsp_responder(&dir("ssl_ocsp_responder", &[a]), c);
        assert_eq!(
            r("http://127.0.0.1:8080/test", &mut c).unwrap().as_deref(),
            Some("http://127.0.0.1:8080/test")
        );
        for bad in [
            "https://ocsp.example.com/",
            "http://",
            "http://:80/",
            "ocsp.example.com",
        ] {
            assert!(r(bad, &mut c).is_err(), "{bad}");
        }
        assert_eq!(
            ocsp_mode(&dir("ssl_ocsp", &["leaf"]), &mut c).unwrap(),
            OcspMode::Leaf
        );
        assert!(ocsp_mode(&dir("ssl_ocsp", &["chain"]), &mut c).is_err());
    }

    #[test]
    fn conf_command_and_protocols() {
        let mut c = cx();
        let mut s = SrvSettings::default();
        ssl_conf_command(
            &mut s,
            &dir(
                "ssl_conf_command",
                &["ciphersuites", "TLS_AES_128_GCM_SHA256"],
            ),
            &mut c,
        )
        .unwrap();
        ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["NumTickets", "1"]),
            &mut c,
        )
        .unwrap();
        let cmds = s.tls.conf_commands.clone().unwrap();
        assert_eq!(cmds.num_tickets, Some(1));
        assert_eq!(cmds.ciphersuites.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
        ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["Options", "KTLS"]),
            &mut c,
        )
        .unwrap();
        assert_eq!(s.tls.conf_commands.clone().unwrap().ktls, Some(true));
        assert_eq!(s.tls.conf_commands.clone().unwrap().ktls_tx_zerocopy, None);
        ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["Options", "KTLSTxZerocopySendfile"]),
            &mut c,
        )
        .unwrap();
        let cmds = s.tls.conf_commands.clone().unwrap();
        assert_eq!((cmds.ktls, cmds.ktls_tx_zerocopy), (Some(true), Some(true)));
        ssl_conf_command(
            &mut s,
            &dir(
                "ssl_conf_command",
                &["Options", "-KTLSTxZerocopySendfile,KTLS"],
            ),
            &mut c,
        )
        .unwrap();
        let cmds = s.tls.conf_commands.clone().unwrap();
        assert_eq!(
            (cmds.ktls, cmds.ktls_tx_zerocopy),
            (Some(true), Some(false))
        );
        ssl_conf_command(
            &mut s,
            &dir(
                "ssl_conf_command",
                &["Options", "sessionticket, -ServerPreference,-SessionTicket"],
            ),
            &mut c,
        )
        .unwrap();
        let cmds = s.tls.conf_commands.clone().unwrap();
        assert_eq!(
            (cmds.session_tickets, cmds.server_preference),
            (Some(false), Some(false)),
            "in order, without case"
        );
        for (name, value) in [("CipherString", "HIGH"), ("curves", "X25519")] {
            ssl_conf_command(&mut s, &dir("ssl_conf_command", &[name, value]), &mut c).unwrap();
        }
        let cmds = s.tls.conf_commands.clone().unwrap();
        assert_eq!(cmds.cipher_string.as_deref(), Some("HIGH"));
        assert_eq!(cmds.groups.as_deref(), Some("X25519"));
        ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["Certificate", "o.crt"]),
            &mut c,
        )
        .unwrap();
        let cmds = s.tls.conf_commands.clone().unwrap();
        let (file, pos) = cmds.certificate.expect("Certificate");
        assert_eq!(
            file,
            std::path::Path::new("/c/o.crt"),
            "in the configuration directory"
        );
        assert_eq!(pos.line, 3);
        let e = ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["Options", "KTLS,x"]),
            &mut c,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "ssl_conf_command \"Options x\" is not supported by firstbyte yet in /t.conf:3"
        );
        let e = ssl_conf_command(
            &mut s,
            &dir("ssl_conf_command", &["Frobnicate", "x"]),
            &mut c,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "ssl_conf_command \"Frobnicate\" is not supported by firstbyte yet in /t.conf:3"
        );
        ssl_protocols(&mut s, &dir("ssl_protocols", &["SSLv3", "TLSv1.3"]), &mut c).unwrap();
        assert_eq!(s.tls.protocols, Some(vec![TlsVersion::Tls13]));
        assert_eq!(c.warnings.len(), 1);
        let mut s = SrvSettings::default();
        let e = ssl_protocols(&mut s, &dir("ssl_protocols", &["TLSv1"]), &mut c).unwrap_err();
        assert!(e.to_string().contains("names no protocol"), "{e}");
        let e = ssl_protocols(&mut s, &dir("ssl_protocols", &["TLSv9"]), &mut c).unwrap_err();
        assert_eq!(e.to_string(), "invalid value \"TLSv9\" in /t.conf:3");
    }

    #[test]
    fn stapling_responder_takes_http_urls_only() {
        let mut c = cx();
        let ok = dir("ssl_stapling_responder", &["http://ocsp.example.com:8080/"]);
        assert_eq!(
            stapling_responder(&ok, &mut c).unwrap().as_deref(),
            Some("http://ocsp.example.com:8080/")
        );
        for bad in ["https://ocsp.example.com/", "ocsp.example.com", "http://"] {
            let e = stapling_responder(&dir("ssl_stapling_responder", &[bad]), &mut c).unwrap_err();
            assert!(e.to_string().contains("invalid URL prefix"), "{e}");
        }
    }

    #[test]
    fn congestion_names() {
        let mut c = cx();
        let mut s = SrvSettings::default();
        tcp_congestion(&mut s, &dir("tcp_congestion", &["bbr"]), &mut c).unwrap();
        assert_eq!(s.congestion.as_deref(), Some("bbr"));
        for bad in ["BBR", "b-r", "", "abcdefghijklmnop"] {
            let e = tcp_congestion(
                &mut SrvSettings::default(),
                &dir("tcp_congestion", &[bad]),
                &mut c,
            );
            assert_eq!(
                e.unwrap_err().to_string(),
                "\"tcp_congestion\" directive invalid value in /t.conf:3",
                "{bad}"
            );
        }
    }

    #[test]
    fn verify_client_choices() {
        let d = dir("ssl_verify_client", &["maybe"]);
        let e = ssl_verify_client(&mut SrvSettings::default(), &d, &mut cx()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value \"maybe\" in \"ssl_verify_client\" directive, it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\" in /t.conf:3"
        );
    }
}
