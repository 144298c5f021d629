//! The reverse-proxy directives: `upstream {}` blocks, `proxy_pass` and `proxy_*`, and the
//! certificate-cache arguments shared with `ssl_certificate_cache`.
//!
//! Handlers fill a [`ProxySettings`] per level (http, server, location); `upstream` blocks go
//! to the load's [`Cx`]. After the whole file is read, `build` merges levels
//! ([`ProxySettings::inherit`]), resolves each `proxy_pass` against the upstreams and the
//! resolver ([`ProxySettings::resolve`]: `host not found in upstream` is a load error, as
//! nginx), then [`ProxySettings::finish`] gives the model's [`ProxyConf`] for locations with
//! `proxy_pass`. `proxy_pass` itself is not inherited (nginx: it belongs to its location).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::error::ConfError;
use super::handlers::{arg0, flag, invalid, number, once, size, time, unsupported, value, R};
use super::model::{
    CertificateCache, DynamicCertKey, Pos, ProxyBuffers, ProxyConf, ProxySsl, ProxyTarget, Source,
    TlsVersion, Upstream, UpstreamServer,
};
use super::parse::Directive;
use super::settings::{Cx, LocSettings};
use super::vars::ComplexValue;

/// 60 s: nginx's default for `proxy_connect_timeout`, `proxy_read_timeout`, `proxy_send_timeout`.
const PROXY_TIMEOUT: Duration = Duration::from_secs(60);
/// 10 s: nginx's default `fail_timeout` of an upstream server.
const FAIL_TIMEOUT: Duration = Duration::from_secs(10);
/// 10 s: nginx's default `inactive=` of `ssl_certificate_cache`.
pub(crate) const CACHE_INACTIVE: Duration = Duration::from_secs(10);
/// 60 s: nginx's default `valid=` of `ssl_certificate_cache`.
pub(crate) const CACHE_VALID: Duration = Duration::from_secs(60);

/// `proxy_pass URL` as written, split.
#[derive(Debug, Clone)]
pub(crate) struct PassSet {
    pub tls: bool,
    /// Host without port (for upstream lookup and the resolver).
    pub hostname: String,
    /// Port given or the scheme's.
    pub port: u16,
    /// `host[:port]` as written.
    pub host: String,
    pub uri: Option<String>,
    pub pos: Pos,
    /// Filled by [`ProxySettings::resolve`].
    pub target: Option<ProxyTarget>,
}

/// A certificate or key as written: a file, `data:`, or with variables.
#[derive(Debug, Clone)]
pub(crate) enum CertArg {
    Static(Source),
    Dynamic(ComplexValue),
}

/// `proxy_*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxySettings {
    pub pass: Option<PassSet>,
    pub set_headers: Option<Vec<(String, ComplexValue)>>,
    pub http11: Option<bool>,
    pub connect_timeout: Option<Duration>,
    pub read_timeout: Option<Duration>,
    pub send_timeout: Option<Duration>,
    pub buffering: Option<bool>,
    pub buffers: Option<(usize, usize)>,
    pub buffer_size: Option<usize>,
    pub busy_buffers_size: Option<usize>,
    pub temp_path: Option<PathBuf>,
    pub body_temp_path: Option<PathBuf>,
    pub max_temp_file_size: Option<u64>,
    pub temp_file_write_size: Option<usize>,
    pub pass_headers: Option<Vec<String>>,
    pub hide_headers: Option<Vec<String>>,
    pub ssl_certificate: Option<CertArg>,
    pub ssl_certificate_key: Option<CertArg>,
    pub ssl_password_file: Option<PathBuf>,
    pub ssl_trusted_certificate: Option<PathBuf>,
    pub ssl_crl: Option<PathBuf>,
    pub ssl_verify: Option<bool>,
    pub ssl_server_name: Option<bool>,
    pub ssl_name: Option<String>,
    pub ssl_session_reuse: Option<bool>,
    pub ssl_protocols: Option<Vec<TlsVersion>>,
    pub ssl_certificate_cache: Option<CertificateCache>,
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl ProxySettings {
    /// Fills what this level did not set from `p` (`proxy_pass` is not inherited).
    pub fn inherit(&mut self, p: &ProxySettings) {
        or(&mut self.set_headers, &p.set_headers);
        or(&mut self.http11, &p.http11);
        or(&mut self.connect_timeout, &p.connect_timeout);
        or(&mut self.read_timeout, &p.read_timeout);
        or(&mut self.send_timeout, &p.send_timeout);
        or(&mut self.buffering, &p.buffering);
        or(&mut self.buffers, &p.buffers);
        or(&mut self.buffer_size, &p.buffer_size);
        or(&mut self.busy_buffers_size, &p.busy_buffers_size);
        or(&mut self.temp_path, &p.temp_path);
        or(&mut self.body_temp_path, &p.body_temp_path);
        or(&mut self.max_temp_file_size, &p.max_temp_file_size);
        or(&mut self.temp_file_write_size, &p.temp_file_write_size);
        or(&mut self.pass_headers, &p.pass_headers);
        or(&mut self.hide_headers, &p.hide_headers);
        or(&mut self.ssl_certificate, &p.ssl_certificate);
        or(&mut self.ssl_certificate_key, &p.ssl_certificate_key);
        or(&mut self.ssl_password_file, &p.ssl_password_file);
        or(
            &mut self.ssl_trusted_certificate,
            &p.ssl_trusted_certificate,
        );
        or(&mut self.ssl_crl, &p.ssl_crl);
        or(&mut self.ssl_verify, &p.ssl_verify);
        or(&mut self.ssl_server_name, &p.ssl_server_name);
        or(&mut self.ssl_name, &p.ssl_name);
        or(&mut self.ssl_session_reuse, &p.ssl_session_reuse);
        or(&mut self.ssl_protocols, &p.ssl_protocols);
        or(&mut self.ssl_certificate_cache, &p.ssl_certificate_cache);
    }

    /// The buffer settings with nginx's defaults for what nobody set.
    fn buffers_conf(&self, cx: &Cx) -> ProxyBuffers {
        let d = ProxyBuffers::default();
        let (count, size) = self.buffers.unwrap_or((d.count, d.size));
        ProxyBuffers {
            count,
            size,
            buffer_size: self.buffer_size.unwrap_or(d.buffer_size),
            busy_size: self.busy_buffers_size.unwrap_or(d.busy_size),
            temp_path: self
                .temp_path
                .clone()
                .unwrap_or_else(|| cx.prefixed("proxy_temp")),
            body_temp_path: self
                .body_temp_path
                .clone()
                .unwrap_or_else(|| cx.prefixed("client_body_temp")),
            max_temp_file_size: self.max_temp_file_size.unwrap_or(d.max_temp_file_size),
            temp_file_write_size: self.temp_file_write_size.unwrap_or(d.temp_file_write_size),
        }
    }

    /// Resolves `proxy_pass`: an `upstream` of that name, else the host's addresses now.
    pub fn resolve(&mut self, cx: &Cx) -> R {
        let Some(p) = &mut self.pass else {
            return Ok(());
        };
        // nginx's check (`ngx_http_proxy_set_ssl`): a client certificate for an https
        // upstream needs its key; a key alone is ignored.
        if let (true, Some(c), None) = (p.tls, &self.ssl_certificate, &self.ssl_certificate_key) {
            return Err(ConfError::other(
                format!(
                    "no \"proxy_ssl_certificate_key\" is defined for certificate \"{}\"",
                    cert_text(c)
                ),
                &p.pos,
            ));
        }
        if let Some(u) = cx.upstreams.get(&p.hostname) {
            p.target = Some(ProxyTarget::Upstream(u.clone()));
            return Ok(());
        }
        let addrs = resolve_host(&p.hostname, p.port).map_err(|_| {
            ConfError::other(format!("host not found in upstream \"{}\"", p.host), &p.pos)
        })?;
        p.target = Some(ProxyTarget::Addrs(addrs));
        Ok(())
    }

    /// The model's proxy settings when this level has a resolved `proxy_pass`.
    pub fn finish(&self, cx: &Cx) -> Option<ProxyConf> {
        let p = self.pass.as_ref()?;
        let target = p.target.clone()?;
        let (certificate, certificate_key, dynamic) =
            match (&self.ssl_certificate, &self.ssl_certificate_key) {
                (Some(CertArg::Static(c)), Some(CertArg::Static(k))) => {
                    (Some(c.clone()), Some(k.clone()), None)
                }
                (Some(c), Some(k)) => (
                    None,
                    None,
                    Some(DynamicCertKey {
                        cert: cert_value(c),
                        key: cert_value(k),
                        conf_dir: cx.conf_dir.clone(),
                        pos: p.pos.clone(),
                    }),
                ),
                _ => (None, None, None),
            };
        Some(ProxyConf {
            tls: p.tls,
            host: p.host.clone(),
            uri: p.uri.clone(),
            target,
            set_headers: self.set_headers.clone().unwrap_or_default(),
            // HTTP/1.0: nginx's default.
            http11: self.http11.unwrap_or(false),
            connect_timeout: self.connect_timeout.unwrap_or(PROXY_TIMEOUT),
            read_timeout: self.read_timeout.unwrap_or(PROXY_TIMEOUT),
            send_timeout: self.send_timeout.unwrap_or(PROXY_TIMEOUT),
            // off: firstbyte streams (seed 001: never hold back bytes that could be sent);
            // nginx's default is on.
            buffering: self.buffering.unwrap_or(false),
            buffers: self.buffers_conf(cx),
            pass_headers: self.pass_headers.clone().unwrap_or_default(),
            hide_headers: self.hide_headers.clone().unwrap_or_default(),
            ssl: ProxySsl {
                certificate,
                certificate_key,
                password_file: self.ssl_password_file.clone(),
                trusted_certificate: self.ssl_trusted_certificate.clone(),
                crl: self.ssl_crl.clone(),
                // Defaults below are nginx's.
                verify: self.ssl_verify.unwrap_or(false),
                server_name: self.ssl_server_name.unwrap_or(false),
                name: self.ssl_name.clone(),
                session_reuse: self.ssl_session_reuse.unwrap_or(true),
                protocols: self
                    .ssl_protocols
                    .clone()
                    .unwrap_or_else(|| vec![TlsVersion::Tls12, TlsVersion::Tls13]),
                dynamic,
                certificate_cache: self.ssl_certificate_cache.unwrap_or(CertificateCache::Off),
            },
        })
    }
}

/// The argument as written, for messages.
fn cert_text(a: &CertArg) -> String {
    cert_value(a)
        .parts()
        .iter()
        .map(|p| match p {
            crate::conf::vars::Part::Lit(t) => t.clone(),
            crate::conf::vars::Part::Var(v) => format!("${{{v}}}"),
        })
        .collect()
}

fn cert_value(a: &CertArg) -> ComplexValue {
    match a {
        CertArg::Dynamic(v) => v.clone(),
        CertArg::Static(Source::File(p)) => ComplexValue::literal(&p.to_string_lossy()),
        CertArg::Static(Source::Data(d)) => ComplexValue::literal(&format!("data:{d}")),
    }
}

fn resolve_host(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let v: Vec<SocketAddr> = (h, port).to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(std::io::Error::other("no addresses"));
    }
    Ok(v)
}

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

/// The directives of `upstream {}` firstbyte reads (`keepalive_*` are accepted with a
/// warning); `-V` derives the upstream modules it reports from this list.
pub(crate) const UPSTREAM_DIRECTIVES: &[&str] = &[
    "server",
    "keepalive",
    "keepalive_timeout",
    "keepalive_requests",
    "keepalive_time",
];

/// `upstream NAME { server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]; keepalive N; }`.
pub(crate) fn upstream(cx: &mut Cx, d: &Directive) -> R {
    let name = arg0(d).to_ascii_lowercase();
    if cx.upstreams.contains_key(&name) {
        return Err(ConfError::other(
            format!("duplicate upstream \"{}\"", arg0(d)),
            &d.pos,
        ));
    }
    let mut up = Upstream {
        name: name.clone(),
        servers: Vec::new(),
        keepalive: None,
        pos: d.pos.clone(),
    };
    for c in d.block.as_deref().unwrap_or_default() {
        if c.block.is_some() {
            return Err(ConfError::NotTerminated {
                name: c.name.clone(),
                pos: c.pos.clone(),
            });
        }
        match c.name.as_str() {
            "server" => upstream_server(&mut up, c)?,
            "keepalive" => {
                if c.args.len() != 1 {
                    return Err(ConfError::ArgCount {
                        name: c.name.clone(),
                        pos: c.pos.clone(),
                    });
                }
                once(&up.keepalive, c)?;
                let n: usize = number(c, arg0(c))?;
                if n == 0 {
                    return Err(invalid(c));
                }
                up.keepalive = Some(n);
            }
            "keepalive_timeout" | "keepalive_requests" | "keepalive_time" => {
                cx.warn(
                    format!(
                        "\"{}\" is ignored: firstbyte's upstream pool keeps idle connections until the upstream closes them",
                        c.name
                    ),
                    &c.pos,
                );
            }
            "zone" | "least_conn" | "ip_hash" | "hash" | "random" | "server_resolver" => {
                return Err(ConfError::Unsupported {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
            _ => {
                return Err(ConfError::UnknownDirective {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
        }
    }
    if up.servers.is_empty() {
        return Err(ConfError::other(
            format!("no servers are inside upstream \"{}\"", arg0(d)),
            &d.pos,
        ));
    }
    cx.upstreams.insert(name, Arc::new(up));
    Ok(())
}

fn upstream_server(up: &mut Upstream, c: &Directive) -> R {
    let Some(addr) = c.args.first() else {
        return Err(ConfError::ArgCount {
            name: c.name.clone(),
            pos: c.pos.clone(),
        });
    };
    let mut weight = 1u32;
    let mut max_fails = 1u32;
    let mut fail_timeout = FAIL_TIMEOUT;
    let mut backup = false;
    let mut down = false;
    for a in &c.args[1..] {
        let bad = || ConfError::other(format!("invalid parameter \"{a}\""), &c.pos);
        if let Some(v) = a.strip_prefix("weight=") {
            weight = v.parse().ok().filter(|w| *w > 0).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("max_fails=") {
            max_fails = v.parse().map_err(|_| bad())?;
        } else if let Some(v) = a.strip_prefix("fail_timeout=") {
            fail_timeout = super::units::time(v).ok_or_else(bad)?;
        } else if a == "backup" {
            backup = true;
        } else if a == "down" {
            down = true;
        } else {
            return Err(bad());
        }
    }
    let (host, port) = match addr.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') || h.starts_with('[') => match p.parse::<u16>() {
            Ok(p) => (h, p),
            Err(_) => (addr.as_str(), 80),
        },
        _ => (addr.as_str(), 80),
    };
    if addr.starts_with("unix:") {
        return Err(unsupported(c, "a unix socket upstream".into()));
    }
    let addrs = resolve_host(host, port)
        .map_err(|_| ConfError::other(format!("host not found in upstream \"{addr}\""), &c.pos))?;
    for a in addrs {
        up.servers.push(UpstreamServer {
            addr: a,
            name: addr.clone(),
            weight,
            max_fails,
            fail_timeout,
            backup,
            down,
        });
    }
    Ok(())
}

/// `proxy_pass URL` (location).
pub(crate) fn proxy_pass(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.pass, d)?;
    let url = arg0(d);
    if url.contains('$') {
        return Err(unsupported(d, "a variable in \"proxy_pass\"".into()));
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
    });
    Ok(())
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

/// `proxy_http_version 1.0|1.1`.
pub(crate) fn proxy_http_version(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.http11, d)?;
    s.proxy.http11 = Some(super::handlers::choice(
        d,
        arg0(d),
        &[("1.0", false), ("1.1", true)],
    )?);
    Ok(())
}

macro_rules! proxy_time {
    ($($(#[$m:meta])* $fn:ident => $field:ident;)*) => {$(
        $(#[$m])*
        pub(crate) fn $fn(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
            once(&s.proxy.$field, d)?;
            let t = time(d, arg0(d))?;
            if t.is_zero() {
                return Err(invalid(d));
            }
            s.proxy.$field = Some(t);
            Ok(())
        }
    )*};
}

proxy_time! {
    /// `proxy_connect_timeout TIME`.
    proxy_connect_timeout => connect_timeout;
    /// `proxy_read_timeout TIME`.
    proxy_read_timeout => read_timeout;
    /// `proxy_send_timeout TIME`.
    proxy_send_timeout => send_timeout;
}

fn nth(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(String::as_str).unwrap_or("")
}

/// A size that must fit memory and be above zero.
fn buffer_bytes(d: &Directive, s: &str) -> Result<usize, ConfError> {
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

macro_rules! proxy_buffer_size {
    ($($(#[$m:meta])* $fn:ident => $field:ident;)*) => {$(
        $(#[$m])*
        pub(crate) fn $fn(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
            once(&s.proxy.$field, d)?;
            s.proxy.$field = Some(buffer_bytes(d, arg0(d))?);
            Ok(())
        }
    )*};
}

proxy_buffer_size! {
    /// `proxy_buffer_size SIZE`.
    proxy_buffer_size => buffer_size;
    /// `proxy_busy_buffers_size SIZE`.
    proxy_busy_buffers_size => busy_buffers_size;
    /// `proxy_temp_file_write_size SIZE`.
    proxy_temp_file_write_size => temp_file_write_size;
}

/// `proxy_max_temp_file_size SIZE` (0: no temp file).
pub(crate) fn proxy_max_temp_file_size(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.max_temp_file_size, d)?;
    s.proxy.max_temp_file_size = Some(size(d, arg0(d))?);
    Ok(())
}

/// `proxy_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]`: levels are checked as nginx (1 or 2
/// each) and otherwise unused: a temp file is unlinked as soon as it is made.
pub(crate) fn proxy_temp_path(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.temp_path, d)?;
    s.proxy.temp_path = Some(temp_path(d, cx)?);
    Ok(())
}

/// `client_body_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]`: where a request body that must be
/// read whole before it goes upstream spills past memory, as `proxy_temp_path`.
pub(crate) fn client_body_temp_path(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.proxy.body_temp_path, d)?;
    s.proxy.body_temp_path = Some(temp_path(d, cx)?);
    Ok(())
}

/// A temp directory under the prefix; levels are checked as nginx (1 or 2 characters each).
fn temp_path(d: &Directive, cx: &Cx) -> Result<PathBuf, ConfError> {
    for i in 1..d.args.len() {
        if !matches!(nth(d, i), "1" | "2") {
            return Err(invalid(d));
        }
    }
    Ok(cx.prefixed(arg0(d)))
}

macro_rules! proxy_flag {
    ($($(#[$m:meta])* $fn:ident => $field:ident;)*) => {$(
        $(#[$m])*
        pub(crate) fn $fn(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
            once(&s.proxy.$field, d)?;
            s.proxy.$field = Some(flag(d)?);
            Ok(())
        }
    )*};
}

proxy_flag! {
    /// `proxy_buffering on|off`.
    proxy_buffering => buffering;
    /// `proxy_ssl_verify on|off`.
    proxy_ssl_verify => ssl_verify;
    /// `proxy_ssl_server_name on|off`.
    proxy_ssl_server_name => ssl_server_name;
    /// `proxy_ssl_session_reuse on|off`.
    proxy_ssl_session_reuse => ssl_session_reuse;
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

macro_rules! proxy_path {
    ($($(#[$m:meta])* $fn:ident => $field:ident;)*) => {$(
        $(#[$m])*
        pub(crate) fn $fn(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
            once(&s.proxy.$field, d)?;
            s.proxy.$field = Some(cx.in_conf_dir(arg0(d)));
            Ok(())
        }
    )*};
}

proxy_path! {
    /// `proxy_ssl_password_file FILE`.
    proxy_ssl_password_file => ssl_password_file;
    /// `proxy_ssl_trusted_certificate FILE`.
    proxy_ssl_trusted_certificate => ssl_trusted_certificate;
    /// `proxy_ssl_crl FILE`.
    proxy_ssl_crl => ssl_crl;
}

/// `proxy_ssl_name NAME`.
pub(crate) fn proxy_ssl_name(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.ssl_name, d)?;
    if arg0(d).contains('$') {
        return Err(unsupported(d, "a variable in \"proxy_ssl_name\"".into()));
    }
    s.proxy.ssl_name = Some(arg0(d).to_string());
    Ok(())
}

/// `proxy_ssl_protocols TLSv1.2 TLSv1.3`.
pub(crate) fn proxy_ssl_protocols(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.ssl_protocols, d)?;
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
    s.proxy.ssl_protocols = Some(v);
    Ok(())
}

/// `proxy_ssl_certificate_cache off | max=N [inactive=time] [valid=time]`.
pub(crate) fn proxy_ssl_certificate_cache(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.proxy.ssl_certificate_cache, d)?;
    s.proxy.ssl_certificate_cache = Some(cache_args(d)?);
    Ok(())
}

/// The arguments of `ssl_certificate_cache` and `proxy_ssl_certificate_cache`.
pub(crate) fn cache_args(d: &Directive) -> Result<CertificateCache, ConfError> {
    if d.args.len() == 1 && d.args[0] == "off" {
        return Ok(CertificateCache::Off);
    }
    let mut max = None;
    let mut inactive = CACHE_INACTIVE;
    let mut valid = CACHE_VALID;
    for a in &d.args {
        let bad = || ConfError::other(format!("invalid parameter \"{a}\""), &d.pos);
        if let Some(v) = a.strip_prefix("max=") {
            max = Some(v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad)?);
        } else if let Some(v) = a.strip_prefix("inactive=") {
            inactive = super::units::time(v).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("valid=") {
            valid = super::units::time(v).ok_or_else(bad)?;
        } else {
            return Err(bad());
        }
    }
    let Some(max) = max else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"max\" parameter", d.name),
            &d.pos,
        ));
    };
    Ok(CertificateCache::On {
        max,
        inactive,
        valid,
    })
}

#[cfg(test)]
mod tests {
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
}
