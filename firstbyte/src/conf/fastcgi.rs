//! The FastCGI directives (nginx's ngx_http_fastcgi_module): `fastcgi_pass`,
//! `fastcgi_param`, `fastcgi_split_path_info` and the hand-written rest; the plain values are
//! the `fastcgi_directives!` list. A location with `fastcgi_pass` gets a [`ProxyConf`] whose
//! proxy fields hold the `fastcgi_*` values of the same meaning and whose `fastcgi` says the
//! upstream speaks FastCGI, so upstream blocks, balancing, next upstream and buffering are
//! the proxy's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::args::{arg0, invalid, number, once, value, R};
use super::cx::Cx;
use super::declare::{defaults_conf, finish_conf, settings_struct};
use super::directives::{fastcgi_directives, proxy_ssl_directives};
use super::error::ConfError;
use super::model::{CertificateCache, TlsVersion};
use super::model::{
    FastcgiConf, FastcgiParam, FastcgiVars, NextUpstream, PeerAddr, Pos, ProxyBuffers, ProxyConf,
    ProxySsl, ProxyTarget,
};
use super::parse::Directive;
use super::proxy_settings::{check_buffers, resolve_host};
use super::settings::LocSettings;

/// `fastcgi_pass ADDRESS` as written.
#[derive(Debug, Clone)]
pub(crate) struct FastcgiPass {
    /// As written (`127.0.0.1:9000`, `unix:/run/php/php8.2-fpm.sock`, `php`).
    pub addr: String,
    pub pos: Pos,
    /// Filled by [`FastcgiSettings::resolve`].
    pub target: Option<ProxyTarget>,
}

/// `fastcgi_split_path_info` as written and compiled.
#[derive(Debug, Clone)]
pub(crate) struct Split(pub regex::Regex);

fastcgi_directives! { settings_struct!
/// `fastcgi_*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct FastcgiSettings {
    pub pass: Option<FastcgiPass>,
    pub params: Option<Vec<FastcgiParam>>,
    pub split: Option<Split>,
    pub buffers: Option<(usize, usize)>,
    pub temp_path: Option<PathBuf>,
    pub pass_headers: Option<Vec<String>>,
    pub hide_headers: Option<Vec<String>>,
    pub ignore_headers: Option<Vec<String>>,
    pub catch_stderr: Option<Vec<String>>,
}
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl FastcgiSettings {
    /// Fills what this level did not set from `p` (`fastcgi_pass` is not inherited; a level
    /// with any `fastcgi_param` replaces the outer level's whole list, as nginx).
    pub fn inherit(&mut self, p: &FastcgiSettings) {
        self.inherit_listed(p);
        or(&mut self.params, &p.params);
        or(&mut self.split, &p.split);
        or(&mut self.buffers, &p.buffers);
        or(&mut self.temp_path, &p.temp_path);
        or(&mut self.pass_headers, &p.pass_headers);
        or(&mut self.hide_headers, &p.hide_headers);
        or(&mut self.ignore_headers, &p.ignore_headers);
        or(&mut self.catch_stderr, &p.catch_stderr);
    }

    fn buffers_conf(&self, cx: &Cx) -> ProxyBuffers {
        let d = ProxyBuffers::default();
        let (count, size) = self.buffers.unwrap_or((d.count, d.size));
        let twice = |b: usize| b.max(size).saturating_mul(2);
        let buffer_size = self.buffer_size.unwrap_or(d.buffer_size);
        ProxyBuffers {
            count,
            size,
            buffer_size,
            busy_size: self.busy_size.unwrap_or(twice(buffer_size)),
            max_temp_file_size: self.max_temp_file_size.unwrap_or(d.max_temp_file_size),
            temp_file_write_size: self.temp_file_write_size.unwrap_or(twice(buffer_size)),
            temp_path: self
                .temp_path
                .clone()
                .unwrap_or_else(|| cx.prefixed("fastcgi_temp")),
            body_temp_path: cx.prefixed("client_body_temp"),
        }
    }

    /// Resolves `fastcgi_pass`: a unix socket, an `upstream` of that name, else `host:port`
    /// now. `proxy_pass` in the same location is refused.
    pub fn resolve(&mut self, cx: &Cx, proxy_pass: bool) -> R {
        let b = self.buffers_conf(cx);
        let Some(p) = &mut self.pass else {
            return Ok(());
        };
        if proxy_pass {
            return Err(ConfError::other(
                "\"fastcgi_pass\" and \"proxy_pass\" in one location",
                &p.pos,
            ));
        }
        check_buffers(&b, "fastcgi", &p.pos)?;
        if let Some(path) = p.addr.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(ConfError::other(
                    format!("no path in the unix domain socket \"{}\"", p.addr),
                    &p.pos,
                ));
            }
            p.target = Some(ProxyTarget::Addrs(vec![PeerAddr::Unix(PathBuf::from(
                path,
            ))]));
            return Ok(());
        }
        if let Some(u) = cx.upstreams.get(&p.addr.to_ascii_lowercase()) {
            p.target = Some(ProxyTarget::Upstream(u.clone()));
            return Ok(());
        }
        let port = match p.addr.rsplit_once(':') {
            Some((h, port)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => {
                port.parse::<u16>().ok().filter(|p| *p != 0).map(|n| (h, n))
            }
            _ => None,
        };
        let Some((host, port)) = port else {
            return Err(ConfError::other(
                format!("no port in upstream \"{}\"", p.addr),
                &p.pos,
            ));
        };
        let addrs = resolve_host(host, port).map_err(|_| {
            ConfError::other(format!("host not found in upstream \"{}\"", p.addr), &p.pos)
        })?;
        p.target = Some(ProxyTarget::Addrs(
            addrs.into_iter().map(PeerAddr::Tcp).collect(),
        ));
        Ok(())
    }

    /// What `$fastcgi_script_name` needs at this level (None: nothing set).
    pub fn vars(&self) -> Option<Arc<FastcgiVars>> {
        if self.split.is_none() && self.index.is_none() {
            return None;
        }
        Some(Arc::new(FastcgiVars {
            split: self.split.as_ref().map(|s| s.0.clone()),
            index: self.index.clone().flatten(),
        }))
    }

    /// The model's settings when this level has a resolved `fastcgi_pass`.
    pub fn finish(&self, cx: &Cx, vars: Option<&Arc<FastcgiVars>>) -> Option<ProxyConf> {
        let p = self.pass.as_ref()?;
        let target = p.target.clone()?;
        let fcgi = fastcgi_directives!(finish_conf! (self) FastcgiConf {
            params: self.params.clone().unwrap_or_default(),
            vars: vars.cloned().unwrap_or_default(),
            ignore_headers: self.ignore_headers.clone().unwrap_or_default(),
            catch_stderr: self.catch_stderr.clone().unwrap_or_default(),
        });
        Some(ProxyConf {
            tls: false,
            host: p.addr.clone(),
            uri: None,
            target,
            set_headers: Vec::new(),
            buffers: self.buffers_conf(cx),
            pass_headers: self.pass_headers.clone().unwrap_or_default(),
            hide_headers: self.hide_headers.clone().unwrap_or_default(),
            redirects: Vec::new(),
            ssl: proxy_ssl_directives!(defaults_conf! ProxySsl {
                certificate: None,
                certificate_key: None,
                dynamic: None,
            }),
            http_version: if fcgi.keep_conn {
                super::model::ProxyHttpVersion::V11
            } else {
                super::model::ProxyHttpVersion::V10
            },
            connect_timeout: fcgi.connect_timeout,
            read_timeout: fcgi.read_timeout,
            send_timeout: fcgi.send_timeout,
            buffering: fcgi.buffering,
            intercept_errors: fcgi.intercept_errors,
            ignore_client_abort: fcgi.ignore_client_abort,
            force_ranges: false,
            next_upstream: fcgi.next_upstream,
            next_upstream_tries: fcgi.next_upstream_tries,
            next_upstream_timeout: fcgi.next_upstream_timeout,
            // FastCGI's own `fastcgi_pass_request_*` decide (see `FastcgiConf`).
            method: None,
            ignore_headers: fcgi.ignore_headers.clone(),
            cookies: Default::default(),
            bind: None,
            set_body: None,
            limit_rate: crate::conf::model::SizeValue::Fixed(0),
            cache: None,
            store: Default::default(),
            store_access: 0o600,
            resolver: None,
            resolver_timeout: Duration::from_secs(30),
            pass_request_headers: true,
            pass_request_body: true,
            // FastCGI has no trailers.
            pass_trailers: false,
            early_hints: Vec::new(),
            request_buffering: fcgi.request_buffering,
            fastcgi: Some(Arc::new(fcgi)),
        })
    }
}

// ---- handlers ----

/// `fastcgi_pass ADDRESS` (location).
pub(crate) fn fastcgi_pass(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.fastcgi.pass, d)?;
    let addr = arg0(d);
    if addr.contains('$') {
        return Err(super::args::unsupported(
            d,
            "a variable in \"fastcgi_pass\"".into(),
        ));
    }
    s.fastcgi.pass = Some(FastcgiPass {
        addr: addr.to_string(),
        pos: d.pos.clone(),
        target: None,
    });
    Ok(())
}

/// `fastcgi_param NAME VALUE [if_not_empty]` (several).
pub(crate) fn fastcgi_param(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let if_not_empty = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("if_not_empty") => true,
        Some(other) => {
            return Err(ConfError::other(
                format!("invalid parameter \"{other}\""),
                &d.pos,
            ))
        }
    };
    let v = value(d, d.args.get(1).map(String::as_str).unwrap_or(""))?;
    s.fastcgi
        .params
        .get_or_insert_with(Vec::new)
        .push(FastcgiParam {
            name: arg0(d).to_string(),
            value: v,
            if_not_empty,
        });
    Ok(())
}

/// `fastcgi_split_path_info REGEX`: two captures (nginx: "pattern ... must have 2
/// captures").
pub(crate) fn fastcgi_split_path_info(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.fastcgi.split, d)?;
    let re = regex::Regex::new(arg0(d)).map_err(|e| {
        ConfError::other(
            format!("invalid regular expression \"{}\": {e}", arg0(d)),
            &d.pos,
        )
    })?;
    if re.captures_len() != 3 {
        return Err(ConfError::other(
            format!("pattern \"{}\" must have 2 captures", arg0(d)),
            &d.pos,
        ));
    }
    s.fastcgi.split = Some(Split(re));
    Ok(())
}

/// `fastcgi_index NAME`.
pub(crate) fn index(d: &Directive, _: &mut Cx) -> Result<Option<String>, ConfError> {
    Ok(Some(arg0(d).to_string()))
}

/// `fastcgi_buffers NUMBER SIZE`.
pub(crate) fn fastcgi_buffers(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.fastcgi.buffers, d)?;
    let n: usize = number(d, arg0(d))?;
    let size = super::proxy::buffer_bytes(d, d.args.get(1).map(String::as_str).unwrap_or(""))?;
    if n < 2 {
        return Err(invalid(d));
    }
    s.fastcgi.buffers = Some((n, size));
    Ok(())
}

/// `fastcgi_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]`, as `proxy_temp_path`.
pub(crate) fn fastcgi_temp_path(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.fastcgi.temp_path, d)?;
    s.fastcgi.temp_path = Some(super::proxy::temp_path(d, cx)?);
    Ok(())
}

/// `fastcgi_pass_header NAME` (several).
pub(crate) fn fastcgi_pass_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    s.fastcgi
        .pass_headers
        .get_or_insert_with(Vec::new)
        .push(arg0(d).to_ascii_lowercase());
    Ok(())
}

/// `fastcgi_hide_header NAME` (several).
pub(crate) fn fastcgi_hide_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    s.fastcgi
        .hide_headers
        .get_or_insert_with(Vec::new)
        .push(arg0(d).to_ascii_lowercase());
    Ok(())
}

/// `fastcgi_catch_stderr STRING` (several).
pub(crate) fn fastcgi_catch_stderr(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    s.fastcgi
        .catch_stderr
        .get_or_insert_with(Vec::new)
        .push(arg0(d).to_string());
    Ok(())
}

/// `fastcgi_ignore_headers FIELD ...`: nginx's names, checked.
pub(crate) fn fastcgi_ignore_headers(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.fastcgi.ignore_headers, d)?;
    s.fastcgi.ignore_headers = Some(super::proxy::ignore_headers(d, cx)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::{Config, FastcgiVars, LocationConf};
    use crate::conf::testutil::load_as;

    fn load(server: &str) -> Result<Config, String> {
        load_as(
            &format!("events {{}}\nhttp {{\n server {{\n{server}\n }}\n}}\n"),
            true,
        )
        .map_err(|e| e.to_string())
    }

    fn location<'a>(c: &'a Config, prefix: &str) -> &'a LocationConf {
        let s = &c.http.as_ref().expect("http").servers[0];
        &s.locations
            .prefix
            .iter()
            .find(|l| l.prefix == prefix)
            .expect("location")
            .conf
    }

    fn params(l: &LocationConf) -> Vec<&str> {
        let f = l
            .proxy
            .as_ref()
            .and_then(|p| p.fastcgi.as_ref())
            .expect("fastcgi");
        f.params.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn params_inherit_as_a_whole_list() {
        let c = load(
            "fastcgi_param A 1;\nfastcgi_param B $uri if_not_empty;\n\
             location /own/ { fastcgi_pass 127.0.0.1:9000; fastcgi_param C 3; }\n\
             location /outer/ { fastcgi_pass unix:/run/php/php8.2-fpm.sock; fastcgi_read_timeout 5s; }",
        )
        .expect("loads");
        assert_eq!(params(location(&c, "/own/")), ["C"]);
        let outer = location(&c, "/outer/");
        assert_eq!(params(outer), ["A", "B"]);
        let p = outer.proxy.as_ref().expect("proxy");
        assert_eq!(p.read_timeout, std::time::Duration::from_secs(5));
        assert!(p.fastcgi.as_ref().expect("fastcgi").params[1].if_not_empty);
        assert!(
            matches!(&p.target, ProxyTarget::Addrs(a) if matches!(&a[..], [PeerAddr::Unix(_)]))
        );
    }

    #[test]
    fn errors_as_nginx_and_unsupported_parts_refused() {
        let e = load("location / { fastcgi_cache zone; }").unwrap_err();
        assert!(
            e.contains("\"fastcgi_cache\" directive is not supported by firstbyte yet"),
            "{e}"
        );
        let e = load("location / { fastcgi_store on; }").unwrap_err();
        assert!(
            e.contains("\"fastcgi_store\" directive is not supported"),
            "{e}"
        );
        let e = load("fastcgi_split_path_info ^(.+\\.php)$;").unwrap_err();
        assert!(e.contains("must have 2 captures"), "{e}");
        let e = load("location / { fastcgi_pass localhost; }").unwrap_err();
        assert!(e.contains("no port in upstream \"localhost\""), "{e}");
        let e = load("location / { fastcgi_pass 127.0.0.1:9000; proxy_pass http://127.0.0.1:1; }")
            .unwrap_err();
        assert!(e.contains("\"fastcgi_pass\" and \"proxy_pass\""), "{e}");
        // nginx allows fastcgi_pass (not fastcgi_param) in an `if` in a location.
        load("location / { if ($uri !~ \"^/images/\") { fastcgi_pass 127.0.0.1:9000; } }")
            .expect("fastcgi_pass in if");
        let e = load("location / { if ($uri) { fastcgi_param A 1; } }").unwrap_err();
        assert!(
            e.contains("\"fastcgi_param\" directive is not allowed here"),
            "{e}"
        );
        let e = load("location / { fastcgi_param A 1 sometimes; }").unwrap_err();
        assert!(e.contains("invalid parameter \"sometimes\""), "{e}");
        let e =
            load("location / { fastcgi_pass 127.0.0.1:9000; fastcgi_buffers 1 4k; }").unwrap_err();
        assert!(e.contains("invalid value"), "{e}");
        let e = load("location / { fastcgi_pass 127.0.0.1:9000; fastcgi_busy_buffers_size 64k; }")
            .unwrap_err();
        assert!(
            e.contains("\"fastcgi_busy_buffers_size\" must be less than"),
            "{e}"
        );
    }

    #[test]
    fn script_name_and_path_info_as_nginx() {
        let v = FastcgiVars {
            split: Some(regex::Regex::new(r"^(.+?\.php)(/.*)$").expect("re")),
            index: Some("index.php".into()),
        };
        let (n, i) = FastcgiVars::split(Some(&v), "/app/x.php/a/b");
        assert_eq!((n.as_ref(), i), ("/app/x.php", "/a/b"));
        let (n, i) = FastcgiVars::split(Some(&v), "/dir/");
        assert_eq!((n.as_ref(), i), ("/dir/index.php", ""));
        let (n, i) = FastcgiVars::split(Some(&v), "/x.php");
        assert_eq!((n.as_ref(), i), ("/x.php", ""));
        let (n, i) = FastcgiVars::split(None, "/dir/");
        assert_eq!((n.as_ref(), i), ("/dir/", ""));
    }
}
