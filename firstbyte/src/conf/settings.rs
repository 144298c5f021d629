//! Per-level settings while a configuration is read, and nginx's merge rules.
//!
//! Each level (http, server, location) gets a settings struct whose fields are `None` until a
//! directive at that level sets them. After the whole file is read, levels merge outward-in:
//! [`LocSettings::inherit`] fills what a level did not set from its parent (array-like
//! directives such as `add_header` are one field each, so they are inherited only when the
//! level set none of them), and `finish` fills what nobody set with nginx's defaults, giving
//! the model's plain values.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::model::{
    AccessLog, AccessLogTarget, AccessRule, AddHeader, CertKey, CertificateCache, Compression,
    DisableSymlinks, DocRoot, DynamicCertKey, ErrorLog, ErrorPage, GzipStatic, LocationConf,
    Locations, LogEscape, LogFormat, MainConf, MimeTypes, Pos, Return, SessionCache, Source,
    TlsConf, TlsVersion, TryFiles, User, VerifyClient, WorkerProcesses,
};
use super::vars::ComplexValue;

/// nginx's predefined `combined` format.
pub(crate) const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// What every level of a load shares: paths, warnings, log formats.
#[derive(Debug)]
pub(crate) struct Cx {
    /// `-p`: `root`, logs and `pid` resolve against it.
    pub prefix: PathBuf,
    /// The main file's directory: `include` and TLS files resolve against it.
    pub conf_dir: PathBuf,
    /// `[warn]` lines so far.
    pub warnings: Vec<String>,
    /// `log_format`s by name (`combined` predefined).
    pub log_formats: HashMap<String, Arc<LogFormat>>,
    /// Whether firstbyte runs as root (the default `listen` is `*:80` then, else `*:8000`).
    pub is_root: bool,
    /// `upstream {}` blocks by lower-cased name.
    pub upstreams: HashMap<String, Arc<super::model::Upstream>>,
    /// `daemon on` (known once the main level is read, before `http {}` is finished).
    pub daemon: bool,
    /// `limit_req_zone`s and `limit_conn_zone`s.
    pub zones: super::limits::Zones,
}

impl Cx {
    /// A context with `combined` defined.
    pub fn new(prefix: PathBuf, conf_dir: PathBuf, is_root: bool) -> Self {
        let combined = LogFormat {
            name: "combined".into(),
            escape: LogEscape::Default,
            // COMBINED names only variables vars.rs knows.
            value: ComplexValue::parse(COMBINED).unwrap_or_default(),
        };
        Self {
            prefix,
            conf_dir,
            warnings: Vec::new(),
            log_formats: HashMap::from([("combined".to_string(), Arc::new(combined))]),
            is_root,
            upstreams: HashMap::new(),
            daemon: false,
            zones: Default::default(),
        }
    }

    /// Records `{msg} in {pos}` as a warning.
    pub fn warn(&mut self, msg: impl std::fmt::Display, pos: &Pos) {
        self.warnings.push(format!("{msg} in {pos}"));
    }

    /// `s` against the prefix (root, logs, pid), as `ngx_conf_full_name(.., 0)`.
    pub fn prefixed(&self, s: &str) -> PathBuf {
        full(&self.prefix, s)
    }

    /// `s` against the configuration directory (include, certificates), as `ngx_conf_full_name(.., 1)`.
    pub fn in_conf_dir(&self, s: &str) -> PathBuf {
        full(&self.conf_dir, s)
    }
}

fn full(base: &Path, s: &str) -> PathBuf {
    let p = Path::new(s);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Main and events values as written.
#[derive(Debug, Default)]
pub(crate) struct MainSettings {
    pub user: Option<User>,
    pub worker_processes: Option<WorkerProcesses>,
    pub error_log: Vec<ErrorLog>,
    pub pid: Option<Option<PathBuf>>,
    pub daemon: Option<bool>,
    pub worker_shutdown_timeout: Option<std::time::Duration>,
    pub worker_connections: Option<u32>,
    pub ssl_object_cache_inheritable: Option<bool>,
    /// An `events {}` was read (a second one is a duplicate).
    pub events: bool,
}

impl MainSettings {
    /// With nginx's (and firstbyte's) defaults.
    pub fn finish(self) -> MainConf {
        MainConf {
            user: self.user,
            // 1: nginx's default.
            worker_processes: self.worker_processes.unwrap_or(WorkerProcesses::Count(1)),
            error_log: self.error_log,
            // firstbyte's name in nginx's place.
            pid: self
                .pid
                .unwrap_or_else(|| Some(PathBuf::from("/run/firstbyte.pid"))),
            // off: foreground suits systemd and containers (firstbyte's choice; nginx's is on).
            daemon: self.daemon.unwrap_or(false),
            // None: wait for every connection, as nginx without the directive.
            worker_shutdown_timeout: self.worker_shutdown_timeout,
            // 512 connections: nginx's default.
            worker_connections: self.worker_connections.unwrap_or(512),
            // on: nginx 1.27.4's default.
            ssl_object_cache_inheritable: self.ssl_object_cache_inheritable.unwrap_or(true),
        }
    }
}

/// `root` or `alias` as set, with the prefix an alias replaces.
#[derive(Debug, Clone)]
pub(crate) struct RootSet {
    pub root: DocRoot,
    /// For `alias`: the prefix of the location that wrote it (inherited with it, as nginx).
    pub alias_prefix: String,
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

/// Location-level values of one level (http, server or location), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct LocSettings {
    pub here: Here,
    pub root: Option<RootSet>,
    pub index: Option<Vec<ComplexValue>>,
    pub try_files: Option<TryFiles>,
    pub ret: Option<Return>,
    pub add_header: Option<Vec<AddHeader>>,
    pub error_page: Option<Vec<ErrorPage>>,
    pub access_log: Option<AccessLogSet>,
    pub sendfile: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub absolute_redirect: Option<bool>,
    pub server_name_in_redirect: Option<bool>,
    pub port_in_redirect: Option<bool>,
    pub tcp_nopush: Option<bool>,
    pub keepalive_timeout: Option<Duration>,
    pub keepalive_requests: Option<u32>,
    pub client_max_body_size: Option<u64>,
    pub client_body_timeout: Option<Duration>,
    pub send_timeout: Option<Duration>,
    pub access: Option<Vec<AccessRule>>,
    pub stub_status: Option<bool>,
    pub gzip_static: Option<GzipStatic>,
    pub gzip: Option<bool>,
    pub gzip_types: Option<Vec<String>>,
    pub gzip_comp_level: Option<u32>,
    pub gzip_min_length: Option<u64>,
    pub gzip_vary: Option<bool>,
    pub brotli: Option<bool>,
    pub brotli_types: Option<Vec<String>>,
    pub brotli_comp_level: Option<u32>,
    pub types: Option<Arc<MimeTypes>>,
    pub default_type: Option<String>,
    pub disable_symlinks: Option<DisableSymlinks>,
    pub internal: Option<bool>,
    pub connection_info: Option<bool>,
    pub proxy: super::proxy::ProxySettings,
    /// auth_basic, satisfy, real IP, limit_req, limit_conn.
    pub guard: super::access_conf::GuardSettings,
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
        or(&mut self.error_page, &p.error_page);
        or(&mut self.access_log, &p.access_log);
        or(&mut self.sendfile, &p.sendfile);
        or(&mut self.tcp_nodelay, &p.tcp_nodelay);
        or(&mut self.absolute_redirect, &p.absolute_redirect);
        or(
            &mut self.server_name_in_redirect,
            &p.server_name_in_redirect,
        );
        or(&mut self.port_in_redirect, &p.port_in_redirect);
        or(&mut self.tcp_nopush, &p.tcp_nopush);
        or(&mut self.keepalive_timeout, &p.keepalive_timeout);
        or(&mut self.keepalive_requests, &p.keepalive_requests);
        or(&mut self.client_max_body_size, &p.client_max_body_size);
        or(&mut self.client_body_timeout, &p.client_body_timeout);
        or(&mut self.send_timeout, &p.send_timeout);
        or(&mut self.access, &p.access);
        or(&mut self.gzip_static, &p.gzip_static);
        or(&mut self.gzip, &p.gzip);
        or(&mut self.gzip_types, &p.gzip_types);
        or(&mut self.gzip_comp_level, &p.gzip_comp_level);
        or(&mut self.gzip_min_length, &p.gzip_min_length);
        or(&mut self.gzip_vary, &p.gzip_vary);
        or(&mut self.brotli, &p.brotli);
        or(&mut self.brotli_types, &p.brotli_types);
        or(&mut self.brotli_comp_level, &p.brotli_comp_level);
        or(&mut self.types, &p.types);
        or(&mut self.default_type, &p.default_type);
        or(&mut self.disable_symlinks, &p.disable_symlinks);
        self.proxy.inherit(&p.proxy);
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
        let (root, prefix) = match &self.root {
            Some(RootSet {
                root: r @ DocRoot::Alias(_),
                alias_prefix,
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
            }]),
        };
        LocationConf {
            name,
            prefix,
            root,
            // index.html: nginx's default.
            index: self
                .index
                .clone()
                .unwrap_or_else(|| vec![ComplexValue::literal("index.html")]),
            try_files: self.try_files.clone(),
            ret: self.ret.clone(),
            add_header: self.add_header.clone().unwrap_or_default(),
            error_page: self.error_page.clone().unwrap_or_default(),
            access_log,
            // Defaults below are nginx's.
            sendfile: self.sendfile.unwrap_or(false),
            tcp_nodelay: self.tcp_nodelay.unwrap_or(true),
            absolute_redirect: self.absolute_redirect.unwrap_or(true),
            server_name_in_redirect: self.server_name_in_redirect.unwrap_or(false),
            port_in_redirect: self.port_in_redirect.unwrap_or(true),
            tcp_nopush: self.tcp_nopush.unwrap_or(false),
            // 75 s
            keepalive_timeout: self.keepalive_timeout.unwrap_or(Duration::from_secs(75)),
            keepalive_requests: self.keepalive_requests.unwrap_or(1000),
            // 1 MiB
            client_max_body_size: self.client_max_body_size.unwrap_or(1 << 20),
            // 60 s
            client_body_timeout: self.client_body_timeout.unwrap_or(Duration::from_secs(60)),
            // 60 s
            send_timeout: self.send_timeout.unwrap_or(Duration::from_secs(60)),
            access: self.access.clone().unwrap_or_default(),
            stub_status: self.stub_status.unwrap_or(false),
            gzip_static: self.gzip_static.unwrap_or(GzipStatic::Off),
            compression: Compression {
                gzip: self.gzip.unwrap_or(false),
                gzip_types: self.gzip_types.clone().unwrap_or_default(),
                // level 1: nginx's default, the cheapest.
                gzip_comp_level: self.gzip_comp_level.unwrap_or(1),
                // 20 bytes: nginx's default.
                gzip_min_length: self.gzip_min_length.unwrap_or(20),
                gzip_vary: self.gzip_vary.unwrap_or(false),
                brotli: self.brotli.unwrap_or(false),
                brotli_types: self.brotli_types.clone().unwrap_or_default(),
                // quality 6: the ngx_brotli module's default and the seed's advice.
                brotli_comp_level: self.brotli_comp_level.unwrap_or(6),
            },
            types: self.types.clone().unwrap_or_else(|| default_types.clone()),
            default_type: self
                .default_type
                .clone()
                .unwrap_or_else(|| "text/plain".to_string()),
            disable_symlinks: self.disable_symlinks.unwrap_or(DisableSymlinks::Off),
            internal: self.internal.unwrap_or(false),
            connection_info: self.connection_info.unwrap_or(false),
            proxy: self.proxy.finish(cx).map(Arc::new),
            guard: self.guard.finish(cx),
            locations,
            pos,
        }
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
}

/// An `ssl_certificate` as written.
#[derive(Debug, Clone)]
pub(crate) struct CertSet {
    pub source: Source,
    pub written: String,
    pub pos: Pos,
}

/// TLS values of one level (http or server), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    pub certificates: Option<Vec<CertSet>>,
    pub keys: Option<Vec<Source>>,
    pub password_file: Option<PathBuf>,
    pub protocols: Option<Vec<TlsVersion>>,
    pub ciphers: Option<String>,
    pub conf_commands: Option<ConfCommands>,
    pub prefer_server_ciphers: Option<bool>,
    pub ecdh_curve: Option<String>,
    pub session_tickets: Option<bool>,
    pub session_ticket_keys: Option<Vec<PathBuf>>,
    pub session_timeout: Option<Duration>,
    pub session_cache: Option<SessionCache>,
    pub verify_client: Option<VerifyClient>,
    pub client_certificate: Option<PathBuf>,
    pub stapling: Option<bool>,
    pub stapling_file: Option<PathBuf>,
    pub certificate_cache: Option<CertificateCache>,
}

impl TlsSettings {
    /// Fills what this level did not set from `p`.
    pub fn inherit(&mut self, p: &TlsSettings) {
        or(&mut self.certificates, &p.certificates);
        or(&mut self.keys, &p.keys);
        or(&mut self.password_file, &p.password_file);
        or(&mut self.protocols, &p.protocols);
        or(&mut self.ciphers, &p.ciphers);
        or(&mut self.conf_commands, &p.conf_commands);
        or(&mut self.prefer_server_ciphers, &p.prefer_server_ciphers);
        or(&mut self.ecdh_curve, &p.ecdh_curve);
        or(&mut self.session_tickets, &p.session_tickets);
        or(&mut self.session_ticket_keys, &p.session_ticket_keys);
        or(&mut self.session_timeout, &p.session_timeout);
        or(&mut self.session_cache, &p.session_cache);
        or(&mut self.verify_client, &p.verify_client);
        or(&mut self.client_certificate, &p.client_certificate);
        or(&mut self.stapling, &p.stapling);
        or(&mut self.stapling_file, &p.stapling_file);
        or(&mut self.certificate_cache, &p.certificate_cache);
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
        let mut out = Vec::with_capacity(certs.len());
        let mut dynamic = Vec::new();
        for (i, c) in certs.iter().enumerate() {
            let Some(key) = keys.get(i) else {
                return Err(super::ConfError::NoCertificateKey {
                    cert: c.written.clone(),
                    pos: c.pos.clone(),
                });
            };
            if let (Some(cv), Some(kv)) = (dynamic_value(&c.source), dynamic_value(key)) {
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
        TlsConf {
            certificates,
            password_file: self.password_file.clone(),
            protocols: self
                .protocols
                .clone()
                .unwrap_or_else(|| vec![TlsVersion::Tls12, TlsVersion::Tls13]),
            ciphers: self
                .ciphers
                .clone()
                .unwrap_or_else(|| "HIGH:!aNULL:!MD5".to_string()),
            ciphersuites: cmds.ciphersuites,
            num_tickets: cmds.num_tickets,
            prefer_server_ciphers: self.prefer_server_ciphers.unwrap_or(false),
            ecdh_curve: self
                .ecdh_curve
                .clone()
                .unwrap_or_else(|| "auto".to_string()),
            session_tickets: self.session_tickets.unwrap_or(true),
            session_ticket_keys: self.session_ticket_keys.clone().unwrap_or_default(),
            // 5 minutes
            session_timeout: self.session_timeout.unwrap_or(Duration::from_secs(300)),
            session_cache: self.session_cache.clone().unwrap_or(SessionCache::None),
            verify_client: self.verify_client.unwrap_or(VerifyClient::Off),
            client_certificate: self.client_certificate.clone(),
            stapling: self.stapling.unwrap_or(false),
            stapling_file: self.stapling_file.clone(),
            dynamic_certificates,
            certificate_cache: self.certificate_cache.unwrap_or(CertificateCache::Off),
        }
    }
}

/// A certificate path written with variables (stored as a file whose name holds a `$`;
/// `server_handlers::tls_source` has checked it parses), as a value; `None` for a static one.
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

/// Server-level values of one level (http or server), as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct SrvSettings {
    pub tls: TlsSettings,
    pub notsent_lowat: Option<u32>,
    pub congestion: Option<String>,
    pub client_header_timeout: Option<Duration>,
    pub underscores_in_headers: Option<bool>,
    pub ignore_invalid_headers: Option<bool>,
    pub http2: Option<bool>,
    pub http2_max_concurrent_streams: Option<u32>,
    pub ssl_buffer_size: Option<usize>,
    pub dyn_rec_enable: Option<crate::record::DynRecMode>,
    pub dyn_rec_size_lo: Option<usize>,
    pub dyn_rec_size_hi: Option<usize>,
    pub dyn_rec_threshold: Option<u32>,
    pub dyn_rec_timeout: Option<Duration>,
}

impl SrvSettings {
    /// Fills what this level did not set from `p`.
    pub fn inherit(&mut self, p: &SrvSettings) {
        self.tls.inherit(&p.tls);
        or(&mut self.notsent_lowat, &p.notsent_lowat);
        or(&mut self.congestion, &p.congestion);
        or(&mut self.client_header_timeout, &p.client_header_timeout);
        or(&mut self.underscores_in_headers, &p.underscores_in_headers);
        or(&mut self.ignore_invalid_headers, &p.ignore_invalid_headers);
        or(&mut self.http2, &p.http2);
        or(
            &mut self.http2_max_concurrent_streams,
            &p.http2_max_concurrent_streams,
        );
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
        assert_eq!(l.keepalive_timeout, Duration::from_secs(75));
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
