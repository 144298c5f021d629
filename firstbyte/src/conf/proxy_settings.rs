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
use super::declare::{finish_conf, settings_struct};
use super::directives::{
    proxy_buffer_directives, proxy_cache_directives, proxy_directives, proxy_ssl_directives,
};
use super::error::ConfError;
use super::model::{
    CacheConf, CertificateCache, DynamicCertKey, DynamicPass, NextUpstream, PeerAddr, Pos,
    ProxyBuffers, ProxyConf, ProxySsl, ProxyTarget, Redirect, Source, TlsVersion,
};
use super::vars::ComplexValue;

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
    /// `http://unix:/path:`: the socket.
    pub unix: Option<PathBuf>,
    /// The URL has variables: evaluated per request (the fields above are empty).
    pub dynamic: Option<ComplexValue>,
}

/// `proxy_redirect` of one level as written.
#[derive(Debug, Clone)]
pub(crate) enum RedirectSet {
    /// `proxy_redirect off`.
    Off,
    /// Rules, `default` already turned into its rule.
    Rules(Vec<Redirect>),
}

impl PassSet {
    /// `proxy_redirect default` for this `proxy_pass` in a location with prefix `location`
    /// (nginx: the URL as written and the location's name when it has a URI part; else the
    /// URL with `/` added, replaced by `/`).
    pub fn default_redirect(&self, location: &str) -> Redirect {
        let scheme = if self.tls { "https" } else { "http" };
        let url = match &self.unix {
            Some(path) => match &self.uri {
                Some(u) => format!("{scheme}://unix:{}:{u}", path.display()),
                None => format!("{scheme}://unix:{}", path.display()),
            },
            None => format!(
                "{scheme}://{}{}",
                self.host,
                self.uri.as_deref().unwrap_or("")
            ),
        };
        let (pattern, replacement) = match &self.uri {
            Some(_) => (url, location.to_string()),
            None => (format!("{url}/"), "/".to_string()),
        };
        Redirect::Prefix {
            pattern: ComplexValue::literal(&pattern),
            replacement: ComplexValue::literal(&replacement),
        }
    }
}

/// A certificate or key as written: a file, `data:`, or with variables.
#[derive(Debug, Clone)]
pub(crate) enum CertArg {
    Static(Source),
    Dynamic(ComplexValue),
    /// `""`: no client certificate (cancels an inherited one, as nginx).
    None,
}

proxy_directives! { settings_struct!
/// `proxy_*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxySettings {
    pub pass: Option<PassSet>,
    pub set_headers: Option<Vec<(String, ComplexValue)>>,
    pub buffers: Option<(usize, usize)>,
    pub temp_path: Option<PathBuf>,
    pub body_temp_path: Option<PathBuf>,
    pub pass_headers: Option<Vec<String>>,
    pub hide_headers: Option<Vec<String>>,
    pub redirects: Option<RedirectSet>,
    pub ssl_certificate: Option<CertArg>,
    pub ssl_certificate_key: Option<CertArg>,
    pub bufs: ProxyBufferSettings,
    pub ssl: ProxySslSettings,
    pub cookies: super::cookies::CookieSettings,
    pub cache: ProxyCacheSettings,
    pub cache_valid: Option<Vec<super::cache::ValidRule>>,
    pub cache_bypass: Option<Vec<ComplexValue>>,
    pub ignore_headers: Option<Vec<String>>,
    pub no_cache: Option<Vec<ComplexValue>>,
    pub store: Option<super::model::ProxyStore>,
}
}

proxy_buffer_directives! { settings_struct!
/// `proxy_*` buffer sizes of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxyBufferSettings {}
}

proxy_cache_directives! { settings_struct!
/// `proxy_cache*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxyCacheSettings {}
}

proxy_ssl_directives! { settings_struct!
/// `proxy_ssl_*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxySslSettings {}
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl ProxySettings {
    /// Fills what this level did not set from `p` (`proxy_pass` is not inherited).
    pub fn inherit(&mut self, p: &ProxySettings) {
        // nginx's merge: `proxy_store` on at this level drops an inherited `proxy_cache`,
        // and `proxy_cache` here an inherited `proxy_store`.
        let store_here = self
            .store
            .as_ref()
            .is_some_and(|s| *s != super::model::ProxyStore::Off);
        if store_here && self.cache.zone_name.is_none() {
            self.cache.zone_name = Some(None);
        }
        if matches!(self.cache.zone_name, Some(Some(_))) && self.store.is_none() {
            self.store = Some(super::model::ProxyStore::Off);
        }
        or(&mut self.store, &p.store);
        self.inherit_listed(p);
        self.bufs.inherit_listed(&p.bufs);
        self.ssl.inherit_listed(&p.ssl);
        or(&mut self.set_headers, &p.set_headers);
        or(&mut self.buffers, &p.buffers);
        or(&mut self.temp_path, &p.temp_path);
        or(&mut self.body_temp_path, &p.body_temp_path);
        or(&mut self.pass_headers, &p.pass_headers);
        or(&mut self.hide_headers, &p.hide_headers);
        or(&mut self.redirects, &p.redirects);
        or(&mut self.ssl_certificate, &p.ssl_certificate);
        or(&mut self.ssl_certificate_key, &p.ssl_certificate_key);
        self.cookies.inherit(&p.cookies);
        self.cache.inherit_listed(&p.cache);
        or(&mut self.cache_valid, &p.cache_valid);
        or(&mut self.cache_bypass, &p.cache_bypass);
        or(&mut self.ignore_headers, &p.ignore_headers);
        or(&mut self.no_cache, &p.no_cache);
    }

    /// The buffer settings with nginx's defaults for what nobody set.
    fn buffers_conf(&self, cx: &Cx) -> ProxyBuffers {
        let d = ProxyBuffers::default();
        let (count, size) = self.buffers.unwrap_or((d.count, d.size));
        let mut b = proxy_buffer_directives!(finish_conf! (self.bufs) ProxyBuffers {
            count,
            size,
            temp_path: self
                .temp_path
                .clone()
                .unwrap_or_else(|| cx.prefixed("proxy_temp")),
            body_temp_path: self
                .body_temp_path
                .clone()
                .unwrap_or_else(|| cx.prefixed("client_body_temp")),
        });
        // nginx: unset, the busy size and the temp-file write size are twice the larger of
        // proxy_buffer_size and one of proxy_buffers (8k with the defaults).
        let twice = b.buffer_size.max(b.size).saturating_mul(2);
        if self.bufs.busy_size.is_none() {
            b.busy_size = twice;
        }
        if self.bufs.temp_file_write_size.is_none() {
            b.temp_file_write_size = twice;
        }
        b
    }

    /// Resolves `proxy_pass`: an `upstream` of that name, else the host's addresses now.
    pub fn resolve(&mut self, cx: &Cx) -> R {
        if self.pass.is_none() {
            return Ok(());
        }
        let b = self.buffers_conf(cx);
        let Some(p) = &mut self.pass else {
            return Ok(());
        };
        // nginx's check (`ngx_http_proxy_set_ssl`): a client certificate for an https
        // upstream needs its key; a key alone is ignored.
        if let (true, Some(c @ (CertArg::Static(_) | CertArg::Dynamic(_))), None) =
            (p.tls, &self.ssl_certificate, &self.ssl_certificate_key)
        {
            return Err(ConfError::other(
                format!(
                    "no \"proxy_ssl_certificate_key\" is defined for certificate \"{}\"",
                    cert_text(c)
                ),
                &p.pos,
            ));
        }
        check_buffers(&b, "proxy", &p.pos)?;
        if let Some(url) = &p.dynamic {
            p.target = Some(ProxyTarget::Dynamic(std::sync::Arc::new(DynamicPass {
                url: url.clone(),
                upstreams: cx.upstreams.clone(),
            })));
            return Ok(());
        }
        if let Some(path) = &p.unix {
            p.target = Some(ProxyTarget::Addrs(vec![PeerAddr::Unix(path.clone())]));
            return Ok(());
        }
        if let Some(u) = cx.upstreams.get(&p.hostname) {
            p.target = Some(ProxyTarget::Upstream(u.clone()));
            return Ok(());
        }
        let addrs = resolve_host(&p.hostname, p.port).map_err(|_| {
            ConfError::other(format!("host not found in upstream \"{}\"", p.host), &p.pos)
        })?;
        p.target = Some(ProxyTarget::Addrs(
            addrs.into_iter().map(PeerAddr::Tcp).collect(),
        ));
        Ok(())
    }

    /// The model's proxy settings when this level has a resolved `proxy_pass`; `location`
    /// is the location's prefix (for `proxy_redirect default`).
    pub fn finish(&self, cx: &Cx, location: &str) -> Option<ProxyConf> {
        let p = self.pass.as_ref()?;
        let target = p.target.clone()?;
        let (certificate, certificate_key, dynamic) =
            match (&self.ssl_certificate, &self.ssl_certificate_key) {
                (Some(CertArg::None), _) | (_, Some(CertArg::None)) => (None, None, None),
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
        let cache = self.cache.zone_name.clone().flatten().and_then(|z| {
            let zone = match &z {
                super::cache::ZoneRef::Name(n) => Some(cx.zones.cache.zones.get(n)?.clone()),
                super::cache::ZoneRef::Var(_) => None,
            };
            Some(std::sync::Arc::new(
                proxy_cache_directives!(finish_conf! (self.cache) CacheConf {
                    zone,
                    zones: std::sync::Arc::new(cx.zones.cache.zones.clone()),
                    valid: self.cache_valid.clone().unwrap_or_default(),
                bypass: self.cache_bypass.clone().unwrap_or_default(),
                no_cache: self.no_cache.clone().unwrap_or_default(),
                }),
            ))
        });
        Some(proxy_directives!(finish_conf! (self) ProxyConf {
            store: if cache.is_some() {
                super::model::ProxyStore::Off
            } else {
                self.store.clone().unwrap_or_default()
            },
            cache,
            ignore_headers: self.ignore_headers.clone().unwrap_or_default(),
            tls: p.tls,
            host: p.host.clone(),
            uri: p.uri.clone(),
            target,
            set_headers: self.set_headers.clone().unwrap_or_default(),
            buffers: self.buffers_conf(cx),
            pass_headers: self.pass_headers.clone().unwrap_or_default(),
            hide_headers: self.hide_headers.clone().unwrap_or_default(),
            redirects: match &self.redirects {
                Some(RedirectSet::Off) => Vec::new(),
                Some(RedirectSet::Rules(r)) => r.clone(),
                // nginx: no default rule for a URL with variables.
                None if p.dynamic.is_some() => Vec::new(),
                None => vec![p.default_redirect(location)],
            },
            fastcgi: None,
            cookies: std::sync::Arc::new(self.cookies.finish()),
            ssl: proxy_ssl_directives!(finish_conf! (self.ssl) ProxySsl {
                certificate,
                certificate_key,
                dynamic,
            }),
        }))
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
        CertArg::None => ComplexValue::literal(""),
    }
}

/// nginx's checks of the merged buffer sizes (`ngx_http_proxy_merge_loc_conf`; `fastcgi`'s
/// are the same with its prefix).
pub(crate) fn check_buffers(b: &ProxyBuffers, prefix: &str, pos: &Pos) -> R {
    let one = b.buffer_size.max(b.size);
    let both = format!(
        "the maximum of the value of \"{prefix}_buffer_size\" and one of the \"{prefix}_buffers\""
    );
    let check = |bad: bool, msg: String| {
        if bad {
            Err(ConfError::other(msg, pos))
        } else {
            Ok(())
        }
    };
    check(
        b.busy_size < one,
        format!("\"{prefix}_busy_buffers_size\" must be equal to or greater than {both}"),
    )?;
    check(
        b.busy_size > b.count.saturating_sub(1).saturating_mul(b.size),
        format!("\"{prefix}_busy_buffers_size\" must be less than the size of all \"{prefix}_buffers\" minus one buffer"),
    )?;
    check(
        b.temp_file_write_size < one,
        format!("\"{prefix}_temp_file_write_size\" must be equal to or greater than {both}"),
    )?;
    check(
        b.max_temp_file_size != 0 && b.max_temp_file_size < one as u64,
        format!("\"{prefix}_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal to or greater than {both}"),
    )
}

pub(crate) fn resolve_host(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let v: Vec<SocketAddr> = (h, port).to_socket_addrs()?.collect();
    if v.is_empty() {
        return Err(std::io::Error::other("no addresses"));
    }
    Ok(v)
}
