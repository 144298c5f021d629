//! The `proxy_*` values of one level as written ([`ProxySettings`]), their merge and
//! defaults, and the resolution of `proxy_pass` against `upstream`s and the resolver.
//!
//! The handlers that fill it are in `proxy.rs`; `settings.rs` holds one per level. After the
//! whole file is read, `build` merges levels ([`ProxySettings::inherit`]), resolves each
//! `proxy_pass` ([`ProxySettings::resolve`]: `host not found in upstream` is a load error, as
//! nginx), then [`ProxySettings::finish`] gives the model's [`ProxyConf`] for locations with
//! `proxy_pass`. `proxy_pass` itself is not inherited (nginx: it belongs to its location).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use super::args::R;
use super::cx::Cx;
use super::error::ConfError;
use super::model::{
    CertificateCache, DynamicCertKey, Pos, ProxyBuffers, ProxyConf, ProxySsl, ProxyTarget, Source,
    TlsVersion,
};
use super::vars::ComplexValue;

/// 60 s: nginx's default for `proxy_connect_timeout`, `proxy_read_timeout`, `proxy_send_timeout`.
const PROXY_TIMEOUT: Duration = Duration::from_secs(60);
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

pub(crate) fn resolve_host(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let v: Vec<SocketAddr> = (h, port).to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(std::io::Error::other("no addresses"));
    }
    Ok(v)
}
