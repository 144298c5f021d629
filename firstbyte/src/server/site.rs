//! A [`Site`]: one loaded configuration generation, with everything built from it — the
//! request side (`http::Site`: virtual hosts, proxy routes, access log files) and what the
//! runtime keeps for itself (rustls configs per server block, the TLS object store, error
//! logs, the retire signal).
//!
//! Building a site is all the work of a load (`-t`, start, reload); serving only reads it.
//! Every certificate, key and CA file named anywhere (server blocks, `proxy_ssl_*`) goes
//! through one `tls::ObjectStore`, made from the previous site's on reload; its counts
//! (parsed, reused, shared) are logged at `info` once per load. A server block whose TLS
//! settings and files are unchanged keeps the previous site's rustls config
//! (`tls::ServerConfigs`).
//! A site is replaced whole on reload; connections keep the one they started with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::Shared;
use crate::conf::model::{AccessLog, Config, LogLevel, LogTarget, ServerConf};
use crate::conf::vhosts::VirtualHosts;
use crate::log::LogFile;

/// Why a configuration could not be loaded. Displays in nginx's words, without the level.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The configuration language refused the file.
    #[error("{0}")]
    Conf(#[from] crate::conf::ConfError),
    /// Listen addresses or server names conflict.
    #[error("{0}")]
    Vhost(#[from] crate::conf::vhosts::VhostError),
    /// A certificate, key or TLS setting could not be used.
    #[error("{0}")]
    Tls(#[from] crate::tls::TlsError),
    /// A file (log) could not be opened, or a socket option was refused.
    #[error("{0}")]
    Other(String),
}

/// One configuration generation, ready to serve.
pub struct Site {
    /// The configuration.
    pub config: Arc<Config>,
    /// What requests read: virtual hosts, `proxy_pass` routes, access log files.
    http: Arc<crate::http::Site>,
    /// rustls config of each TLS server block, keyed by the block's address.
    tls: HashMap<usize, Arc<rustls::ServerConfig>>,
    /// The strict client-certificate verifier of blocks with `ssl_verify_client on|optional`.
    client_verifiers: HashMap<usize, Arc<crate::tls::ChainVerifier>>,
    /// The handshake-time certificate loader of blocks whose `ssl_certificate` has variables.
    dynamic: HashMap<usize, Arc<crate::tls::DynamicResolver>>,
    /// The same configs with what they were built from, for the next load to reuse.
    configs: crate::tls::ServerConfigs,
    /// Error log targets.
    pub error_logs: Vec<(Option<Arc<LogFile>>, LogLevel)>,
    /// Parsed TLS objects of this load (reused by the next load when files are unchanged).
    pub store: crate::tls::ObjectStore,
    /// Warnings found while building, beyond the config's own (`Config.warnings`): conflicting
    /// server names, `fastopen=` on a kernel that allows it to clients only.
    pub warnings: Vec<String>,
    retired: watch::Sender<bool>,
    live: Live,
}

/// Sites alive in this process: the current one, retired ones that still have connections,
/// and one being built or torn down. A retired site holds every certificate, key and config of
/// its generation, so nothing but its connections may keep it: the count says so at `info`.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static GENERATIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts one site; logs when it is freed.
struct Live(usize);

impl Live {
    fn new() -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Live(GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let left = LIVE.fetch_sub(1, Ordering::Relaxed) - 1;
        crate::fblog!(
            Info,
            "configuration generation {} freed, {left} live",
            self.0
        );
    }
}

/// How many sites are alive in this process.
pub fn live_sites() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn key(s: &Arc<ServerConf>) -> usize {
    Arc::as_ptr(s) as usize
}

impl Site {
    /// Builds everything a configuration needs: certificates are read and checked, log files
    /// opened, socket options validated. Nothing is bound here (see `server::Listeners`).
    pub fn build(config: Config, shared: &Shared, prev: Option<&Site>) -> Result<Site, LoadError> {
        let http = config.http.clone().unwrap_or(crate::conf::model::HttpConf {
            servers: Vec::new(),
        });
        let vhosts = VirtualHosts::new(&http)?;
        let mut store = match prev {
            Some(p) => crate::tls::ObjectStore::inherit(&p.store),
            None => crate::tls::ObjectStore::new(),
        };
        let mut tls = HashMap::with_capacity(http.servers.len());
        let mut client_verifiers = HashMap::new();
        let mut dynamic = HashMap::new();
        let mut configs = crate::tls::ServerConfigs::new();
        let mut cc_checked: Vec<&str> = Vec::new();
        for s in &http.servers {
            let h2 = s.http2 || s.listen.iter().any(|l| l.http2);
            let previous = prev.map(|p| &p.configs);
            if let Some(cfg) = configs.config_for(s, h2, &shared.tls, &mut store, previous)? {
                tls.insert(key(s), cfg);
                if let Some(v) = configs.last_client_verifier() {
                    client_verifiers.insert(key(s), v);
                }
                if let Some(d) = configs.last_dynamic() {
                    dynamic.insert(key(s), d);
                }
            }
            if let Some(cc) = &s.socket.congestion {
                if !cc_checked.contains(&cc.as_str()) {
                    crate::net::check_congestion(cc).map_err(|e| {
                        LoadError::Other(format!(
                            "\"tcp_congestion\" \"{cc}\" is not available: setsockopt(TCP_CONGESTION) failed ({}) in {}",
                            crate::log::OsError(&e),
                            s.pos
                        ))
                    })?;
                    cc_checked.push(cc);
                }
            }
        }
        let proxies = crate::http::proxy::Proxies::build(&http, &mut store)?;
        store.set_inheritable(config.main.ssl_object_cache_inheritable);
        store.finish();
        crate::fblog!(Info, "{}", store.counts());
        let mut access_logs = HashMap::new();
        let mut loc_error_logs = HashMap::new();
        for s in &http.servers {
            each_location(s, &mut |loc| {
                if !loc.error_log.is_empty() && !loc_error_logs.contains_key(&loc.error_log) {
                    let sinks =
                        crate::log::open_error_logs(&loc.error_log, &mut |p| shared.log_file(p))
                            .map_err(|e| LoadError::Other(e.to_string()))?;
                    loc_error_logs.insert(
                        loc.error_log.clone(),
                        Arc::new(crate::log::Sinks::new(sinks)),
                    );
                }
                for p in access_log_files(loc) {
                    if !access_logs.contains_key(p) {
                        let f = shared
                            .log_file(p)
                            .map_err(|e| LoadError::Other(e.to_string()))?;
                        access_logs.insert(p.to_path_buf(), f);
                    }
                }
                Ok::<(), LoadError>(())
            })?;
        }
        let error_logs =
            crate::log::open_error_logs(&config.main.error_log, &mut |p| shared.log_file(p))
                .map_err(|e| LoadError::Other(e.to_string()))?;
        let mut warnings = vhosts.warnings().to_vec();
        if let Some(s) = vhosts.sockets().iter().find(|s| s.fastopen.is_some()) {
            if crate::net::fastopen_server_enabled() == Some(false) {
                warnings.push(format!(
                    "\"fastopen\" has no effect: net.ipv4.tcp_fastopen lacks the server bit (2); set it to 3 to accept TFO in {}",
                    s.pos
                ));
            }
        }
        let (retired, _) = watch::channel(false);
        Ok(Site {
            warnings,
            config: Arc::new(config),
            http: Arc::new(crate::http::Site::new(
                vhosts,
                proxies,
                access_logs,
                loc_error_logs,
            )),
            tls,
            client_verifiers,
            dynamic,
            configs,
            error_logs,
            store,
            retired,
            live: Live::new(),
        })
    }

    /// The handshake-time certificate loader of a block whose `ssl_certificate` has variables.
    pub fn dynamic_for(&self, s: &Arc<ServerConf>) -> Option<&Arc<crate::tls::DynamicResolver>> {
        self.dynamic.get(&key(s))
    }

    /// The rustls config of a TLS server block.
    pub fn tls_for(&self, s: &Arc<ServerConf>) -> Option<&Arc<rustls::ServerConfig>> {
        self.tls.get(&key(s))
    }

    /// The strict client-certificate verifier of a block with `ssl_verify_client on|optional`.
    pub fn client_verifier_for(
        &self,
        s: &Arc<ServerConf>,
    ) -> Option<&Arc<crate::tls::ChainVerifier>> {
        self.client_verifiers.get(&key(s))
    }

    /// What requests read of this generation.
    pub fn http(&self) -> &Arc<crate::http::Site> {
        &self.http
    }

    /// Sockets and server selection.
    pub fn vhosts(&self) -> &VirtualHosts {
        &self.http.vhosts
    }

    /// This site's generation: 1 for the first built in this process, then counting up.
    pub fn generation(&self) -> usize {
        self.live.0
    }

    /// Every `proxy_temp_path` and `client_body_temp_path` of a proxying location
    /// (deduplicated).
    pub fn temp_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        if let Some(http) = &self.config.http {
            for s in &http.servers {
                let _ = each_location(s, &mut |loc| -> Result<(), ()> {
                    if let Some(p) = &loc.proxy {
                        let cache: Vec<&PathBuf> = match &p.cache {
                            Some(c) => match &c.zone {
                                Some(z) => vec![&z.path],
                                None => c.zones.values().map(|z| &z.path).collect(),
                            },
                            None => Vec::new(),
                        };
                        let paths = [&p.buffers.temp_path, &p.buffers.body_temp_path];
                        for t in paths.into_iter().chain(cache) {
                            if !out.contains(t) {
                                out.push(t.clone());
                            }
                        }
                    }
                    Ok(())
                });
            }
        }
        out
    }

    /// Signals connections of this generation to finish and close (after a reload).
    pub fn retire(&self) {
        self.retired.send_replace(true);
    }

    /// Watches for [`Site::retire`].
    pub fn retired(&self) -> watch::Receiver<bool> {
        self.retired.subscribe()
    }
}

/// Calls `f` with every location of a server: its server-level settings, its locations
/// and the locations nested in them.
fn each_location<E>(
    s: &ServerConf,
    f: &mut impl FnMut(&crate::conf::model::LocationConf) -> Result<(), E>,
) -> Result<(), E> {
    fn nested<E>(
        l: &crate::conf::model::Locations,
        f: &mut impl FnMut(&crate::conf::model::LocationConf) -> Result<(), E>,
    ) -> Result<(), E> {
        let confs = l
            .exact
            .values()
            .chain(l.named.values())
            .chain(l.prefix.iter().map(|c| &c.conf))
            .chain(l.regex.iter().map(|c| &c.conf));
        for c in confs {
            f(c)?;
            for i in c.implicit() {
                f(i)?;
            }
            nested(&c.locations, f)?;
        }
        Ok(())
    }
    f(&s.default_location)?;
    nested(&s.default_location.locations, f)?;
    nested(&s.locations, f)
}

/// The files of a location's `access_log` directives.
fn access_log_files(loc: &crate::conf::model::LocationConf) -> impl Iterator<Item = &Path> {
    let targets = match &loc.access_log {
        AccessLog::Logs(ts) => ts.as_slice(),
        _ => &[],
    };
    targets.iter().filter_map(|t| match &t.target {
        LogTarget::File(p) => Some(p.as_path()),
        // Opened per request (`open_log_file_cache`).
        LogTarget::Stderr | LogTarget::Stdout | LogTarget::Variable(_) => None,
    })
}
