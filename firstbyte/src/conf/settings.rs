//! Per-level settings while a configuration is read, and nginx's merge rules.
//!
//! Each level (http, server, location) gets a settings struct whose fields are `None` until a
//! directive at that level sets them. After the whole file is read, levels merge outward-in:
//! [`LocSettings::inherit`] fills what a level did not set from its parent (array-like
//! directives such as `add_header` are one field each, so they are inherited only when the
//! level set none of them), and `finish` fills what nobody set with nginx's defaults, giving
//! the model's plain values.
//!
//! The fields, inheritance and defaults of plain-valued directives come from the lists in
//! `directives.rs` (`settings_struct!` adds the fields and `inherit_listed`, `finish_conf!`
//! the defaults); what is written here by hand is the odd ones'.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub(crate) use super::cx::Cx;
use super::declare::{finish_conf, settings_struct};
use super::directives::{
    compression_directives, loc_directives, main_directives, srv_directives, tls_directives,
};
use super::model::{
    AccessLog, AccessLogTarget, AccessRule, AddHeader, BodyInFileOnly, CertKey, CertificateCache,
    Compression, DocRoot, DynamicCertKey, ErrorLog, ErrorPage, Expires, GzipStatic, LocationConf,
    Locations, LogEscape, LogFormat, MainConf, MimeTypes, Pos, SessionCache, SizeValue, Source,
    Symlinks, TlsConf, TlsVersion, TryFiles, User, VerifyClient, WorkerProcesses,
};
use super::proxy_settings::ProxySettings;
use super::vars::ComplexValue;

main_directives! { settings_struct!
/// Main and events values as written.
#[derive(Debug, Default)]
pub(crate) struct MainSettings {
    pub error_log: Vec<ErrorLog>,
    /// An `events {}` was read (a second one is a duplicate).
    pub events: bool,
}
}

impl MainSettings {
    /// With nginx's (and firstbyte's) defaults.
    pub fn finish(self) -> MainConf {
        main_directives!(finish_conf! (self) MainConf {
            error_log: self.error_log,
        })
    }
}

/// `root` or `alias` as set, with the prefix an alias replaces.
#[derive(Debug, Clone)]
pub(crate) struct RootSet {
    pub root: DocRoot,
    /// For `alias`: the prefix of the location that wrote it (inherited with it, as nginx).
    pub alias_prefix: String,
    /// An `alias` written in a regex location: the whole path (nginx's `alias` length
    /// `NGX_MAX_SIZE_T_VALUE`), not a prefix's replacement; a location that inherits it
    /// from a prefix location keeps the prefix rule.
    pub alias_whole: bool,
}

/// `access_log` directives of one level.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccessLogSet {
    /// `access_log off` was among them (it wins, as nginx).
    pub off: bool,
    pub logs: Vec<AccessLogTarget>,
}

/// What the location being read is, for directives that depend on it (`alias`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Here {
    /// The location's prefix (prefix and exact locations).
    pub prefix: String,
    /// A regex location.
    pub regex: bool,
    /// A named location.
    pub named: bool,
}

loc_directives! { settings_struct!
/// Location-level values of one level (http, server or location), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct LocSettings {
    pub here: Here,
    pub root: Option<RootSet>,
    pub index: Option<Vec<ComplexValue>>,
    pub try_files: Option<TryFiles>,
    /// `limit_except` (per location, not inherited).
    pub limit_except: Option<Box<super::limit_except::LimitExceptSet>>,
    pub add_header: Option<Vec<AddHeader>>,
    pub add_trailer: Option<Vec<AddHeader>>,
    pub error_page: Option<Vec<ErrorPage>>,
    pub access_log: Option<AccessLogSet>,
    /// `error_log` of this level (several allowed; inherited as a whole).
    pub error_log: Option<Vec<ErrorLog>>,
    pub access: Option<Vec<AccessRule>>,
    pub types: Option<Arc<MimeTypes>>,
    pub compression: CompressionSettings,
    pub proxy: ProxySettings,
    pub fastcgi: super::fastcgi::FastcgiSettings,
    /// `set`, `if`, `rewrite`, `return`, `break`, `rewrite_log`, `uninitialized_variable_warn`.
    pub rewrite: super::rewrite::RewriteSettings,
    /// `auth_basic`, `satisfy`, the real-IP directives, `limit_req`, `limit_conn`.
    pub guard: super::access_conf::GuardSettings,
}
}

compression_directives! { settings_struct!
/// `gzip*` and `brotli*` values of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompressionSettings {}
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl LocSettings {
    /// Fills what this level did not set from `parent` (already merged), as nginx's merge.
    /// `try_files`, `return`, `stub_status` and `internal` are not inherited (nginx keeps them
    /// per location, as is firstbyte's `connection_info`); a server-level `return` is applied by `finish`'s caller.
    pub fn inherit(&mut self, p: &LocSettings) {
        or(&mut self.root, &p.root);
        or(&mut self.index, &p.index);
        or(&mut self.add_header, &p.add_header);
        or(&mut self.add_trailer, &p.add_trailer);
        or(&mut self.error_page, &p.error_page);
        or(&mut self.access_log, &p.access_log);
        or(&mut self.error_log, &p.error_log);
        or(&mut self.access, &p.access);
        or(&mut self.types, &p.types);
        self.inherit_listed(p);
        self.compression.inherit_listed(&p.compression);
        self.proxy.inherit(&p.proxy);
        self.fastcgi.inherit(&p.fastcgi);
        self.rewrite.inherit(&p.rewrite);
        self.guard.inherit(&p.guard);
    }

    /// The merged values with defaults for what nobody set; `default_types` applies when no
    /// `types {}` does (levels that inherit one block share its Arc).
    pub fn finish(
        &self,
        cx: &Cx,
        name: String,
        pos: Pos,
        default_types: &Arc<MimeTypes>,
        locations: Locations,
    ) -> LocationConf {
        let alias_whole = self.root.as_ref().is_some_and(|r| r.alias_whole);
        let (root, prefix) = match &self.root {
            Some(RootSet {
                root: r @ DocRoot::Alias(_),
                alias_prefix,
                ..
            }) => (r.clone(), alias_prefix.clone()),
            Some(RootSet { root, .. }) => (root.clone(), self.here.prefix.clone()),
            // `html` under the prefix: nginx's default.
            None => (
                DocRoot::Root(ComplexValue::literal(
                    &cx.prefixed("html").to_string_lossy(),
                )),
                self.here.prefix.clone(),
            ),
        };
        let access_log = match &self.access_log {
            Some(AccessLogSet { off: true, .. }) => AccessLog::Off,
            Some(AccessLogSet { logs, .. }) => AccessLog::Logs(logs.clone()),
            // None written: `combined` to stdout in the foreground (firstbyte's default, as
            // the official nginx container links access.log to /dev/stdout), so a minimal
            // config needs no `logs/` directory; a daemon has no stdout, so it keeps nginx's
            // `logs/access.log` under the prefix.
            None => AccessLog::Logs(vec![AccessLogTarget {
                target: if cx.daemon {
                    super::model::LogTarget::File(cx.prefixed("logs/access.log"))
                } else {
                    super::model::LogTarget::Stdout
                },
                format: cx.log_formats.get("combined").cloned().unwrap_or_else(|| {
                    Arc::new(LogFormat {
                        name: "combined".into(),
                        escape: LogEscape::Default,
                        value: ComplexValue::default(),
                    })
                }),
                buffer: None,
                flush: None,
                condition: None,
                gzip: None,
            }]),
        };
        let rewrite = self.rewrite.finish(self, cx, &name, default_types);
        let limit_except = self
            .limit_except
            .as_ref()
            .map(|l| l.finish(self, cx, &name, default_types));
        let fastcgi_vars = self.fastcgi.vars();
        let proxy = match self.fastcgi.finish(cx, fastcgi_vars.as_ref()) {
            Some(f) => Some(f),
            None => self.proxy.finish(cx, &self.here.prefix),
        };
        loc_directives!(finish_conf! (self) LocationConf {
            name,
            prefix,
            root,
            alias_whole,
            // index.html: nginx's default.
            index: self
                .index
                .clone()
                .unwrap_or_else(|| vec![ComplexValue::literal("index.html")]),
            try_files: self.try_files.clone(),
            limit_except,
            rewrite,
            add_header: self.add_header.clone().unwrap_or_default(),
            add_trailer: self.add_trailer.clone().unwrap_or_default(),
            error_page: self.error_page.clone().unwrap_or_default(),
            access_log,
            error_log: self.error_log.clone().unwrap_or_default(),
            access: self.access.clone().unwrap_or_default(),
            compression: compression_directives!(finish_conf! (self.compression) Compression {}),
            types: self.types.clone().unwrap_or_else(|| default_types.clone()),
            proxy: proxy.map(Arc::new),
            fastcgi_vars,
            guard: self.guard.finish(cx),
            charsets: cx.charsets.clone(),
            locations,
            pos,
        })
    }
}

/// nginx's types when no `types {}` applies (`ngx_http_core_default_types`).
pub(crate) fn default_types() -> MimeTypes {
    HashMap::from([
        ("html".to_string(), "text/html".to_string()),
        ("gif".to_string(), "image/gif".to_string()),
        ("jpg".to_string(), "image/jpeg".to_string()),
    ])
}

/// `ssl_conf_command`s of one level (inherited as a whole, as nginx).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfCommands {
    pub ciphersuites: Option<String>,
    pub num_tickets: Option<u32>,
    /// `Options KTLS` (`Some(true)`) or `Options -KTLS`.
    pub ktls: Option<bool>,
    /// `Options KTLSTxZerocopySendfile` (`Some(true)`) or `Options -KTLSTxZerocopySendfile`.
    pub ktls_tx_zerocopy: Option<bool>,
    /// `Options SessionTicket` (`Some(true)`) or `Options -SessionTicket`: over
    /// `ssl_session_tickets`.
    pub session_tickets: Option<bool>,
    /// `Options ServerPreference` (`Some(true)`) or `Options -ServerPreference`: over
    /// `ssl_prefer_server_ciphers`.
    pub server_preference: Option<bool>,
    /// `CipherString LIST`: over `ssl_ciphers`.
    pub cipher_string: Option<String>,
    /// `Groups LIST` (or `Curves`): over `ssl_ecdh_curve`.
    pub groups: Option<String>,
    /// `Certificate FILE` (in the configuration directory) and where it was written.
    pub certificate: Option<(PathBuf, Pos)>,
    /// `PrivateKey FILE` and where it was written.
    pub private_key: Option<(PathBuf, Pos)>,
}

impl ConfCommands {
    /// The pair of `Certificate` and `PrivateKey` (the certificate's file when no key is
    /// named: OpenSSL then reads the key from there).
    fn certificate(&self) -> Option<CertKey> {
        let (cert, pos) = self.certificate.clone()?;
        let key = self.private_key.as_ref().map_or(&cert, |(k, _)| k).clone();
        Some(CertKey {
            cert: Source::File(cert),
            key: Source::File(key),
            pos,
        })
    }
}

/// An `ssl_certificate` as written.
#[derive(Debug, Clone)]
pub(crate) struct CertSet {
    pub source: Source,
    pub written: String,
    pub pos: Pos,
}

tls_directives! { settings_struct!
/// TLS values of one level (http or server), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    pub certificates: Option<Vec<CertSet>>,
    pub keys: Option<Vec<Source>>,
    pub conf_commands: Option<ConfCommands>,
    pub session_ticket_keys: Option<Vec<PathBuf>>,
}
}

impl TlsSettings {
    /// Fills what this level did not set from `p`.
    pub fn inherit(&mut self, p: &TlsSettings) {
        self.inherit_listed(p);
        or(&mut self.certificates, &p.certificates);
        or(&mut self.keys, &p.keys);
        or(&mut self.conf_commands, &p.conf_commands);
        or(&mut self.session_ticket_keys, &p.session_ticket_keys);
    }

    /// Pairs certificates with keys (`no "ssl_certificate_key" is defined for certificate "X"`).
    /// Pairs written with variables (either path has a `$`) are loaded at handshake time and
    /// come back separately.
    pub fn cert_keys(
        &self,
        conf_dir: &Path,
    ) -> Result<(Vec<CertKey>, Vec<DynamicCertKey>), super::ConfError> {
        let certs = self.certificates.as_deref().unwrap_or_default();
        let keys = self.keys.as_deref().unwrap_or_default();
        let cmds = self.conf_commands.as_ref();
        if let Some((_, pos)) = cmds
            .filter(|c| c.certificate.is_none())
            .and_then(|c| c.private_key.as_ref())
        {
            // OpenSSL would put the key beside the configured certificate of its type.
            return Err(super::ConfError::UnsupportedParam {
                what: "ssl_conf_command \"PrivateKey\" without \"Certificate\"".into(),
                pos: pos.clone(),
            });
        }
        let mut out = Vec::with_capacity(certs.len());
        let mut dynamic = Vec::new();
        for (i, c) in certs.iter().enumerate() {
            let Some(key) = keys.get(i) else {
                return Err(super::ConfError::NoCertificateKey {
                    cert: c.written.clone(),
                    pos: c.pos.clone(),
                });
            };
            let pair = match (dynamic_value(&c.source), dynamic_value(key)) {
                (None, None) => None,
                // One of the two with variables: both are evaluated per handshake (nginx).
                (cv, kv) => cv
                    .or_else(|| literal_value(&c.source))
                    .zip(kv.or_else(|| literal_value(key))),
            };
            if let Some((cv, kv)) = pair {
                if let Some((_, pos)) = cmds.and_then(|c| c.certificate.as_ref()) {
                    // nginx sets these per connection over the context's certificates.
                    return Err(super::ConfError::UnsupportedParam {
                        what: "ssl_conf_command \"Certificate\" beside \"ssl_certificate\" with variables".into(),
                        pos: pos.clone(),
                    });
                }
                dynamic.push(DynamicCertKey {
                    cert: cv,
                    key: kv,
                    conf_dir: conf_dir.to_path_buf(),
                    pos: c.pos.clone(),
                });
                continue;
            }
            out.push(CertKey {
                cert: c.source.clone(),
                key: key.clone(),
                pos: c.pos.clone(),
            });
        }
        Ok((out, dynamic))
    }

    /// The merged values with defaults (nginx's unless said).
    pub fn finish(
        &self,
        certificates: Vec<CertKey>,
        dynamic_certificates: Vec<DynamicCertKey>,
    ) -> TlsConf {
        let cmds = self.conf_commands.clone().unwrap_or_default();
        let mut conf = tls_directives!(finish_conf! (self) TlsConf {
            conf_certificate: cmds.certificate(),
            certificates,
            ciphersuites: cmds.ciphersuites,
            num_tickets: cmds.num_tickets,
            ktls: cmds.ktls.unwrap_or(false),
            ktls_tx_zerocopy: cmds.ktls_tx_zerocopy.unwrap_or(false),
            session_ticket_keys: self.session_ticket_keys.clone().unwrap_or_default(),
            dynamic_certificates,
            ocsp_resolver: None,
        });
        // nginx applies `ssl_conf_command`s last: over the directives they overlap.
        if let Some(on) = cmds.session_tickets {
            conf.session_tickets = on;
        }
        if let Some(on) = cmds.server_preference {
            conf.prefer_server_ciphers = on;
        }
        if let Some(list) = cmds.cipher_string {
            conf.ciphers = list;
        }
        if let Some(list) = cmds.groups {
            conf.ecdh_curve = list;
        }
        conf
    }
}

/// A certificate path written with variables (stored as a file whose name holds a `$`;
/// `server_handlers::tls_source` has checked it parses), as a value; `None` for a static one.
/// A path without variables as a value (for a pair whose other half has variables).
fn literal_value(s: &Source) -> Option<ComplexValue> {
    match s {
        Source::File(p) => ComplexValue::parse(&p.to_string_lossy()).ok(),
        Source::Data(_) => None,
    }
}

fn dynamic_value(s: &Source) -> Option<ComplexValue> {
    match s {
        Source::File(p) => {
            let t = p.to_string_lossy();
            if t.contains('$') {
                ComplexValue::parse(&t).ok()
            } else {
                None
            }
        }
        Source::Data(_) => None,
    }
}

srv_directives! { settings_struct!
/// Server-level values of one level (http or server), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct SrvSettings {
    pub tls: TlsSettings,
    pub notsent_lowat: Option<u32>,
    pub congestion: Option<String>,
    pub http2: Option<bool>,
    pub ssl_buffer_size: Option<usize>,
    pub dyn_rec_enable: Option<crate::record::DynRecMode>,
    pub dyn_rec_size_lo: Option<usize>,
    pub dyn_rec_size_hi: Option<usize>,
    pub dyn_rec_threshold: Option<u32>,
    pub dyn_rec_timeout: Option<Duration>,
}
}

impl SrvSettings {
    /// Fills what this level did not set from `p`.
    pub fn inherit(&mut self, p: &SrvSettings) {
        self.tls.inherit(&p.tls);
        self.inherit_listed(p);
        or(&mut self.notsent_lowat, &p.notsent_lowat);
        or(&mut self.congestion, &p.congestion);
        or(&mut self.http2, &p.http2);
        or(&mut self.ssl_buffer_size, &p.ssl_buffer_size);
        or(&mut self.dyn_rec_enable, &p.dyn_rec_enable);
        or(&mut self.dyn_rec_size_lo, &p.dyn_rec_size_lo);
        or(&mut self.dyn_rec_size_hi, &p.dyn_rec_size_hi);
        or(&mut self.dyn_rec_threshold, &p.dyn_rec_threshold);
        or(&mut self.dyn_rec_timeout, &p.dyn_rec_timeout);
    }

    /// The record-size settings, defaults where unset.
    pub fn record(&self) -> crate::record::RecordSettings {
        let d = crate::record::RecordSettings::default();
        crate::record::RecordSettings {
            ssl_buffer_size: self.ssl_buffer_size.unwrap_or(d.ssl_buffer_size),
            ssl_dyn_rec_enable: self.dyn_rec_enable.unwrap_or(d.ssl_dyn_rec_enable),
            ssl_dyn_rec_size_lo: self.dyn_rec_size_lo.unwrap_or(d.ssl_dyn_rec_size_lo),
            ssl_dyn_rec_size_hi: self.dyn_rec_size_hi.unwrap_or(d.ssl_dyn_rec_size_hi),
            ssl_dyn_rec_threshold: self.dyn_rec_threshold.unwrap_or(d.ssl_dyn_rec_threshold),
            ssl_dyn_rec_timeout: self.dyn_rec_timeout.unwrap_or(d.ssl_dyn_rec_timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Cx {
        Cx::new(PathBuf::from("/srv"), PathBuf::from("/etc/fb"), true)
    }

    fn pos() -> Pos {
        Pos {
            file: Arc::new(PathBuf::from("/t")),
            line: 1,
        }
    }

    #[test]
    fn defaults_are_nginx_defaults() {
        let c = cx();
        let l = LocSettings::default().finish(
            &c,
            String::new(),
            pos(),
            &Arc::new(default_types()),
            Locations::default(),
        );
        assert!(matches!(&l.root, DocRoot::Root(v) if v.as_static() == Some("/srv/html")));
        assert_eq!(l.index[0].as_static(), Some("index.html"));
        assert_eq!(l.keepalive_timeout.idle, Duration::from_secs(75));
        assert_eq!(l.keepalive_timeout.header, None);
        assert_eq!(l.client_max_body_size, 1 << 20);
        assert!(l.tcp_nodelay && !l.sendfile && !l.tcp_nopush);
        assert_eq!(l.default_type, "text/plain");
        assert_eq!(l.compression.brotli_comp_level, 6);
        assert_eq!(l.types.get("jpg").map(String::as_str), Some("image/jpeg"));
        // No access_log: `combined` to stdout in the foreground (no `logs/` directory
        // needed), nginx's `logs/access.log` under the prefix for a daemon.
        let mut c = c;
        for (daemon, want) in [
            (false, super::super::model::LogTarget::Stdout),
            (
                true,
                super::super::model::LogTarget::File("/srv/logs/access.log".into()),
            ),
        ] {
            c.daemon = daemon;
            let l = LocSettings::default().finish(
                &c,
                String::new(),
                pos(),
                &Arc::new(default_types()),
                Locations::default(),
            );
            match &l.access_log {
                AccessLog::Logs(v) => {
                    assert_eq!(v[0].target, want);
                    assert_eq!(v[0].format.name, "combined");
                }
                AccessLog::Off => panic!("default access_log is on"),
            }
        }
        let m = MainSettings::default().finish();
        assert_eq!(m.pid, Some(PathBuf::from("/run/firstbyte.pid")));
        assert!(!m.daemon);
        assert_eq!(m.worker_connections, 512);
    }

    #[test]
    fn inherit_fills_only_unset_fields() {
        let parent = LocSettings {
            sendfile: Some(true),
            add_header: Some(vec![]),
            try_files: Some(TryFiles {
                files: vec![],
                fallback: super::super::model::TryFallback::Code(404),
            }),
            keepalive_requests: Some(5),
            ..Default::default()
        };
        let mut child = LocSettings {
            keepalive_requests: Some(7),
            ..Default::default()
        };
        child.inherit(&parent);
        assert_eq!(child.sendfile, Some(true));
        assert_eq!(child.keepalive_requests, Some(7));
        assert!(child.add_header.is_some());
        assert!(child.try_files.is_none(), "try_files is per location");
    }

    #[test]
    fn tls_defaults_and_key_pairing() {
        let t = TlsSettings::default().finish(vec![], vec![]);
        assert_eq!(t.protocols, vec![TlsVersion::Tls12, TlsVersion::Tls13]);
        assert_eq!(t.ciphers, "HIGH:!aNULL:!MD5");
        assert_eq!(t.session_timeout, Duration::from_secs(300));
        assert!(t.session_tickets);
        assert_eq!(t.session_cache, SessionCache::None);
        let s = TlsSettings {
            certificates: Some(vec![CertSet {
                source: Source::File("/a.pem".into()),
                written: "a.pem".into(),
                pos: pos(),
            }]),
            ..Default::default()
        };
        let e = s.cert_keys(Path::new("/")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no \"ssl_certificate_key\" is defined for certificate \"a.pem\" in /t:1"
        );
    }
}
