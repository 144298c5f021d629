//! The reverse-proxy directives: `upstream {}` blocks, `proxy_pass` and `proxy_*`, one
//! handler each, filling the level's `ProxySettings` (`proxy_settings.rs`, which merges and
//! resolves them); `upstream` blocks go to the load's [`Cx`].

use std::path::PathBuf;
use std::time::Duration;

use super::args::{arg0, choice, invalid, number, once, size, time, unsupported, value, R};
use super::cx::Cx;
use super::error::ConfError;
use super::model::{NextUpstream, ProxyStore, Redirect, Source, TlsVersion};
use super::parse::Directive;
use super::proxy_settings::{resolve_host, CertArg, PassSet, RedirectSet};
use super::settings::LocSettings;

/// Splits `http://host[:port][/uri]`: (tls, hostname, port, host as written, uri).
pub(crate) fn split_url(url: &str) -> Option<(bool, String, u16, String, Option<String>)> {
    let (tls, rest) = if let Some(r) = strip_prefix_ci(url, "http://") {
        (false, r)
    } else if let Some(r) = strip_prefix_ci(url, "https://") {
        (true, r)
    } else {
        return None;
    };
    let (host, uri) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    if host.is_empty() {
        return None;
    }
    let default_port = if tls { 443 } else { 80 };
    let (hostname, port) = if let Some(end) = host.strip_prefix('[').and_then(|h| h.find(']')) {
        // [v6]:port
        let name = &host[..end + 2];
        match host[end + 2..].strip_prefix(':') {
            Some(p) => (name, p.parse().ok()?),
            None if host.len() == end + 2 => (name, default_port),
            None => return None,
        }
    } else {
        match host.rsplit_once(':') {
            Some((n, p)) => (n, p.parse().ok()?),
            None => (host, default_port),
        }
    };
    if hostname.is_empty() || port == 0 {
        return None;
    }
    Some((
        tls,
        hostname.to_ascii_lowercase(),
        port,
        host.to_string(),
        uri,
    ))
}

fn strip_prefix_ci<'a>(s: &'a str, p: &str) -> Option<&'a str> {
    // `get`: `p.len()` may fall inside a multi-byte character of `s`.
    let head = s.get(..p.len())?;
    head.eq_ignore_ascii_case(p).then(|| &s[p.len()..])
}

// ---- handlers ----

pub(crate) use super::upstream::{finish_upstreams, upstream, UPSTREAM_DIRECTIVES};

/// `proxy_next_upstream error | timeout | invalid_header | http_NNN | non_idempotent ... | off`.
pub(crate) fn next_upstream(d: &Directive, _: &mut Cx) -> Result<NextUpstream, ConfError> {
    let mut bits = 0u16;
    for a in &d.args {
        bits |= match a.as_str() {
            "error" => NextUpstream::ERROR,
            "timeout" => NextUpstream::TIMEOUT,
            "invalid_header" => NextUpstream::INVALID_HEADER,
            "http_500" => NextUpstream::HTTP_500,
            "http_502" => NextUpstream::HTTP_502,
            "http_503" => NextUpstream::HTTP_503,
            "http_504" => NextUpstream::HTTP_504,
            "http_403" => NextUpstream::HTTP_403,
            "http_404" => NextUpstream::HTTP_404,
            "http_429" => NextUpstream::HTTP_429,
            "non_idempotent" => NextUpstream::NON_IDEMPOTENT,
            // nginx: `off` alone; with others it is "invalid value".
            "off" if d.args.len() == 1 => 0,
            // nginx accepts `updating` for its cache and ignores it here.
            "updating" => 0,
            _ => return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos)),
        };
    }
    Ok(NextUpstream(bits))
}

/// `proxy_pass URL` (location).
pub(crate) fn proxy_pass(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.pass, d)?;
    let url = arg0(d);
    if url.contains('$') {
        // nginx: the URL is evaluated per request; TLS is known only then.
        s.proxy.pass = Some(PassSet {
            tls: strip_prefix_ci(url, "https://").is_some(),
            hostname: String::new(),
            port: 0,
            host: String::new(),
            uri: None,
            pos: d.pos.clone(),
            target: None,
            unix: None,
            dynamic: Some(value(d, url)?),
        });
        return Ok(());
    }
    if let Some(pass) = unix_url(url, &d.pos)? {
        s.proxy.pass = Some(pass);
        return Ok(());
    }
    let Some((tls, hostname, port, host, uri)) = split_url(url) else {
        return Err(ConfError::other(
            format!("invalid URL prefix in \"{url}\""),
            &d.pos,
        ));
    };
    if s.here.named && uri.is_some() || s.here.regex && uri.is_some() {
        return Err(ConfError::other(
            "\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location",
            &d.pos,
        ));
    }
    s.proxy.pass = Some(PassSet {
        tls,
        hostname,
        port,
        host,
        uri,
        pos: d.pos.clone(),
        target: None,
        unix: None,
        dynamic: None,
    });
    Ok(())
}

/// `http://unix:/path/to.sock[:/uri]` (nginx's `ngx_parse_unix_domain_url`): the socket is
/// the peer, `$proxy_host` is `localhost`. None: not a unix-socket URL.
pub(crate) fn unix_url(url: &str, pos: &super::model::Pos) -> Result<Option<PassSet>, ConfError> {
    let (tls, rest) = if let Some(r) = strip_prefix_ci(url, "http://unix:") {
        (false, r)
    } else if let Some(r) = strip_prefix_ci(url, "https://unix:") {
        (true, r)
    } else {
        return Ok(None);
    };
    let (path, uri) = match rest.find(':') {
        Some(i) => (&rest[..i], Some(rest[i + 1..].to_string())),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err(ConfError::other(
            format!("no path in the unix domain socket in \"{url}\""),
            pos,
        ));
    }
    Ok(Some(PassSet {
        tls,
        hostname: "localhost".into(),
        port: 0,
        host: "localhost".into(),
        uri: uri.filter(|u| !u.is_empty()),
        pos: pos.clone(),
        target: None,
        unix: Some(PathBuf::from(path)),
        dynamic: None,
    }))
}

/// `proxy_set_header NAME VALUE` (several).
pub(crate) fn proxy_set_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let name = arg0(d).to_string();
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(invalid(d));
    }
    let v = value(d, d.args.get(1).map(String::as_str).unwrap_or(""))?;
    s.proxy
        .set_headers
        .get_or_insert_with(Vec::new)
        .push((name, v));
    Ok(())
}

fn nth(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(String::as_str).unwrap_or("")
}

/// A size that must fit memory and be above zero.
pub(crate) fn buffer_bytes(d: &Directive, s: &str) -> Result<usize, ConfError> {
    let n = size(d, s)?;
    match usize::try_from(n) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(invalid(d)),
    }
}

/// `proxy_buffers NUMBER SIZE`.
pub(crate) fn proxy_buffers(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.buffers, d)?;
    let n: usize = number(d, arg0(d))?;
    let size = buffer_bytes(d, nth(d, 1))?;
    // nginx: "there must be at least 2 proxy_buffers".
    if n < 2 {
        return Err(invalid(d));
    }
    s.proxy.buffers = Some((n, size));
    Ok(())
}

/// `proxy_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]`: levels are checked as nginx (1 or 2
/// each) and otherwise unused: a temp file is unlinked as soon as it is made.
pub(crate) fn proxy_temp_path(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.temp_path, d)?;
    s.proxy.temp_path = Some(temp_path(d, cx)?);
    Ok(())
}

/// `proxy_store on|off|PATH` (nginx's `ngx_http_proxy_store`): not beside `proxy_cache` of
/// the same level; an empty PATH is refused.
pub(crate) fn proxy_store(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.store, d)?;
    let a = arg0(d);
    let store = match a {
        "off" => ProxyStore::Off,
        "" => return Err(ConfError::other("empty path".to_string(), &d.pos)),
        "on" => ProxyStore::On,
        _ => ProxyStore::Path(value(d, a)?),
    };
    if store != ProxyStore::Off && matches!(s.proxy.cache.zone_name, Some(Some(_))) {
        return Err(ConfError::other(
            "\"proxy_store\" directive is incompatible with \"proxy_cache\"".to_string(),
            &d.pos,
        ));
    }
    s.proxy.store = Some(store);
    Ok(())
}

/// `proxy_store_access user:rw group:r all:r` (nginx's `ngx_conf_set_access_slot`): the
/// user's rights are `rw` unless `user:` names them.
pub(crate) fn store_access(d: &Directive, _: &mut Cx) -> Result<u32, ConfError> {
    let mut access = 0u32;
    let mut user = 0o600;
    for a in &d.args {
        let (shift, right) = if let Some(r) = a.strip_prefix("user:") {
            user = 0;
            (6, r)
        } else if let Some(r) = a.strip_prefix("group:") {
            (3, r)
        } else if let Some(r) = a.strip_prefix("all:") {
            (0, r)
        } else {
            return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos));
        };
        let bits = match right {
            "rw" => 6,
            "r" => 4,
            _ => return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos)),
        };
        access |= bits << shift;
    }
    Ok(access | user)
}

/// `client_body_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]`: where a request body that must be
/// read whole before it goes upstream spills past memory, as `proxy_temp_path`.
pub(crate) fn client_body_temp_path(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.body_temp_path, d)?;
    s.proxy.body_temp_path = Some(temp_path(d, cx)?);
    Ok(())
}

/// A temp directory under the prefix; levels are checked as nginx (1 or 2 characters each).
pub(crate) fn temp_path(d: &Directive, cx: &Cx) -> Result<PathBuf, ConfError> {
    for i in 1..d.args.len() {
        if !matches!(nth(d, i), "1" | "2") {
            return Err(invalid(d));
        }
    }
    Ok(cx.prefixed(arg0(d)))
}

/// `proxy_http_version 1.0|1.1|2`.
pub(crate) fn http_version(
    d: &Directive,
    _: &mut Cx,
) -> Result<super::model::ProxyHttpVersion, ConfError> {
    use super::model::ProxyHttpVersion as V;
    choice(
        d,
        arg0(d),
        &[("1.0", V::V10), ("1.1", V::V11), ("2", V::V2)],
    )
}

/// `proxy_method METHOD` (variables allowed, as nginx 1.11.6+).
pub(crate) fn method(
    d: &Directive,
    _: &mut Cx,
) -> Result<Option<super::vars::ComplexValue>, ConfError> {
    super::args::value(d, arg0(d)).map(Some)
}

/// `early_hints VALUE ...` (variables allowed): the conditions, any of them true.
pub(crate) fn predicates(
    d: &Directive,
    _: &mut Cx,
) -> Result<Vec<super::vars::ComplexValue>, ConfError> {
    d.args.iter().map(|a| super::args::value(d, a)).collect()
}

/// `proxy_ignore_headers FIELD ...`: several directives add up, as nginx's bitmask.
pub(crate) fn proxy_ignore_headers(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let v = ignore_headers(d, cx)?;
    let all = s.proxy.ignore_headers.get_or_insert_with(Vec::new);
    for h in v {
        if !all.contains(&h) {
            all.push(h);
        }
    }
    Ok(())
}

/// `proxy_ignore_headers FIELD ...` (and `fastcgi_ignore_headers`): nginx's names, lower-cased.
pub(crate) fn ignore_headers(d: &Directive, _: &mut Cx) -> Result<Vec<String>, ConfError> {
    const NAMES: &[&str] = &[
        "x-accel-redirect",
        "x-accel-expires",
        "x-accel-limit-rate",
        "x-accel-buffering",
        "x-accel-charset",
        "expires",
        "cache-control",
        "set-cookie",
        "vary",
    ];
    let mut v = Vec::new();
    for a in &d.args {
        let l = a.to_ascii_lowercase();
        if !NAMES.contains(&l.as_str()) {
            return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos));
        }
        v.push(l);
    }
    Ok(v)
}

/// `proxy_bind ADDRESS [transparent] | off`: a literal address is checked now (nginx's
/// "invalid address").
pub(crate) fn bind(
    d: &Directive,
    _: &mut Cx,
) -> Result<Option<super::model::ProxyBind>, ConfError> {
    let a = arg0(d);
    let transparent = match d.args.get(1).map(String::as_str) {
        None => false,
        Some("transparent") => true,
        Some(other) => {
            return Err(ConfError::other(
                format!("invalid parameter \"{other}\""),
                &d.pos,
            ))
        }
    };
    if a == "off" && d.args.len() == 1 {
        return Ok(None);
    }
    let addr = value(d, a)?;
    if addr.as_static().is_some() && super::model::ProxyBind::parse(a).is_none() {
        return Err(ConfError::other(format!("invalid address \"{a}\""), &d.pos));
    }
    Ok(Some(super::model::ProxyBind { addr, transparent }))
}

/// `resolver ADDRESS ... [valid=TIME] [ipv4=on|off] [ipv6=on|off] [status_zone=NAME]`: a name
/// is resolved now (as nginx), port 53 unless given.
pub(crate) fn resolver(
    d: &Directive,
    _: &mut Cx,
) -> Result<Option<super::model::Resolver>, ConfError> {
    let mut r = super::model::Resolver {
        servers: Vec::new(),
        ipv4: true,
        ipv6: true,
        valid: None,
    };
    let bad = |a: &str| ConfError::other(format!("invalid parameter \"{a}\""), &d.pos);
    for a in &d.args {
        if let Some(v) = a.strip_prefix("valid=") {
            r.valid = Some(super::units::time(v).ok_or_else(|| bad(a))?);
        } else if let Some(v) = a.strip_prefix("ipv4=") {
            r.ipv4 = choice(d, v, &[("on", true), ("off", false)])?;
        } else if let Some(v) = a.strip_prefix("ipv6=") {
            r.ipv6 = choice(d, v, &[("on", true), ("off", false)])?;
        } else if a.starts_with("status_zone=") {
        } else {
            let addrs = match super::model::ProxyBind::parse(a) {
                Some(mut s) => {
                    if s.port() == 0 {
                        s.set_port(53);
                    }
                    vec![s]
                }
                None => {
                    let (host, port) = match a.rsplit_once(':') {
                        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad(a))?),
                        None => (a.as_str(), 53),
                    };
                    resolve_host(host, port).map_err(|_| {
                        ConfError::other(format!("host not found in resolver \"{a}\""), &d.pos)
                    })?
                }
            };
            r.servers.extend(addrs);
        }
    }
    if !r.ipv4 && !r.ipv6 {
        return Err(ConfError::other(
            "\"ipv4\" and \"ipv6\" cannot both be \"off\"",
            &d.pos,
        ));
    }
    if r.servers.is_empty() {
        return Err(ConfError::ArgCount {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    Ok(Some(r))
}

/// A proxy timeout: a time above zero.
pub(crate) fn timeout(d: &Directive, _: &mut Cx) -> Result<Duration, ConfError> {
    let t = time(d, arg0(d))?;
    if t.is_zero() {
        return Err(invalid(d));
    }
    Ok(t)
}

/// A proxy buffer size: above zero, in memory.
pub(crate) fn buffer_size(d: &Directive, _: &mut Cx) -> Result<usize, ConfError> {
    buffer_bytes(d, arg0(d))
}

/// `proxy_ssl_name NAME` (variables are not supported yet).
pub(crate) fn ssl_name(d: &Directive, _: &mut Cx) -> Result<Option<String>, ConfError> {
    if arg0(d).contains('$') {
        return Err(unsupported(d, "a variable in \"proxy_ssl_name\"".into()));
    }
    Ok(Some(arg0(d).to_string()))
}

/// `proxy_ssl_protocols TLSv1.2 TLSv1.3` (older versions are dropped).
pub(crate) fn ssl_protocols(d: &Directive, _: &mut Cx) -> Result<Vec<TlsVersion>, ConfError> {
    let mut v = Vec::new();
    for a in &d.args {
        match a.as_str() {
            "TLSv1.2" => v.push(TlsVersion::Tls12),
            "TLSv1.3" => v.push(TlsVersion::Tls13),
            "TLSv1" | "TLSv1.1" | "SSLv2" | "SSLv3" => {}
            _ => return Err(invalid(d)),
        }
    }
    if v.is_empty() {
        return Err(invalid(d));
    }
    Ok(v)
}

/// `proxy_redirect default | off | REDIRECT REPLACEMENT` (several; REDIRECT `~REGEX` or
/// `~*REGEX`), with nginx's checks: `off` with rules, or rules after `off`, is a duplicate;
/// `default` needs `proxy_pass` before it in the same location.
pub(crate) fn proxy_redirect(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let duplicate = || ConfError::Duplicate {
        name: d.name.clone(),
        pos: d.pos.clone(),
    };
    if matches!(s.proxy.redirects, Some(RedirectSet::Off)) {
        return Err(duplicate());
    }
    let rule = if d.args.len() == 1 {
        match arg0(d) {
            "off" => {
                if s.proxy.redirects.is_some() {
                    return Err(duplicate());
                }
                s.proxy.redirects = Some(RedirectSet::Off);
                return Ok(());
            }
            "default" => match &s.proxy.pass {
                Some(p) if p.dynamic.is_some() => {
                    return Err(ConfError::other(
                        "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables",
                        &d.pos,
                    ))
                }
                Some(p) => p.default_redirect(&s.here.prefix),
                None => {
                    return Err(ConfError::other(
                        "\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive",
                        &d.pos,
                    ))
                }
            },
            other => return Err(ConfError::other(format!("invalid parameter \"{other}\""), &d.pos)),
        }
    } else {
        let replacement = value(d, nth(d, 1))?;
        let pattern = arg0(d);
        match pattern.strip_prefix('~') {
            Some(re) => {
                let (re, caseless) = match re.strip_prefix('*') {
                    Some(r) => (r, true),
                    None => (re, false),
                };
                Redirect::Regex {
                    regex: super::rewrite::regex::Regex::compile(re, caseless, &d.pos)?,
                    replacement,
                }
            }
            None => Redirect::Prefix {
                pattern: value(d, pattern)?,
                replacement,
            },
        }
    };
    match &mut s.proxy.redirects {
        Some(RedirectSet::Rules(v)) => v.push(rule),
        _ => s.proxy.redirects = Some(RedirectSet::Rules(vec![rule])),
    }
    Ok(())
}

/// `proxy_pass_header NAME` (several).
pub(crate) fn proxy_pass_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    s.proxy
        .pass_headers
        .get_or_insert_with(Vec::new)
        .push(arg0(d).to_ascii_lowercase());
    Ok(())
}

/// `proxy_hide_header NAME` (several).
pub(crate) fn proxy_hide_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    s.proxy
        .hide_headers
        .get_or_insert_with(Vec::new)
        .push(arg0(d).to_ascii_lowercase());
    Ok(())
}

fn cert_arg(d: &Directive, cx: &Cx) -> Result<CertArg, ConfError> {
    let a = arg0(d);
    if a.is_empty() {
        return Ok(CertArg::None);
    }
    if let Some(pem) = a.strip_prefix("data:") {
        return Ok(CertArg::Static(Source::Data(pem.to_string())));
    }
    if a.contains('$') {
        // Resolved against the configuration prefix once evaluated (`DynamicCertKey::eval`).
        return Ok(CertArg::Dynamic(value(d, a)?));
    }
    Ok(CertArg::Static(Source::File(cx.in_conf_dir(a))))
}

/// `proxy_ssl_certificate FILE|data:PEM` (variables allowed).
pub(crate) fn proxy_ssl_certificate(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.ssl_certificate, d)?;
    s.proxy.ssl_certificate = Some(cert_arg(d, cx)?);
    Ok(())
}

/// `proxy_ssl_certificate_key FILE|data:PEM` (variables allowed).
pub(crate) fn proxy_ssl_certificate_key(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.ssl_certificate_key, d)?;
    s.proxy.ssl_certificate_key = Some(cert_arg(d, cx)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn urls() {
        let (tls, name, port, host, uri) = split_url("http://127.0.0.1:8080").expect("url");
        assert!(!tls);
        assert_eq!(
            (name.as_str(), port, host.as_str()),
            ("127.0.0.1", 8080, "127.0.0.1:8080")
        );
        assert_eq!(uri, None);
        let (tls, name, port, _, uri) = split_url("HTTPS://Back.end/api/").expect("url");
        assert!(tls);
        assert_eq!((name.as_str(), port), ("back.end", 443));
        assert_eq!(uri.as_deref(), Some("/api/"));
        let (_, name, port, _, _) = split_url("http://[::1]:81/").expect("v6");
        assert_eq!((name.as_str(), port), ("[::1]", 81));
        assert!(split_url("ftp://x").is_none());
        assert!(split_url("http://").is_none());
        assert!(split_url("http://x:notaport").is_none());
    }

    #[test]
    fn url_scheme_cut_inside_a_character_is_refused() {
        // Found by fuzz/ (config): "https://".len() falls inside the second U+FFFD.
        assert!(split_url("http\u{FFFD}\u{FFFD}27.0.0.1:8080/a-a").is_none());
        assert!(split_url("é").is_none());
    }

    #[test]
    fn unix_socket_urls_as_nginx() {
        let pos = super::super::model::Pos {
            file: Arc::new("t".into()),
            line: 1,
        };
        let p = unix_url("http://unix:/run/app.sock:/api/", &pos)
            .expect("ok")
            .expect("unix");
        assert_eq!(p.unix, Some(PathBuf::from("/run/app.sock")));
        assert_eq!(
            (p.uri.as_deref(), p.host.as_str()),
            (Some("/api/"), "localhost")
        );
        let p = unix_url("https://UNIX:/run/app.sock", &pos)
            .expect("ok")
            .expect("unix");
        assert!(p.tls);
        assert_eq!(
            (p.unix, p.uri),
            (Some(PathBuf::from("/run/app.sock")), None)
        );
        assert!(unix_url("http://unix:", &pos).is_err());
        assert!(unix_url("http://unixhost:80/", &pos).expect("ok").is_none());
    }
}
