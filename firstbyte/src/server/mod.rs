//! The runtime: listening sockets, accept loops, reload and signals.
//!
//! Start: load a [`Site`], bind its sockets, write the pid file, accept. Each accepted
//! connection is served on the current site. `SIGHUP` loads a new site beside the running one;
//! if it fails, the error is logged and nothing changes. If it loads, new sockets are bound
//! first (a failure there also keeps the old config), sockets that stay are kept open (no
//! refused connection during a reload), sockets no longer named are closed, the new site
//! becomes current, and the old one is retired: its connections finish what is in flight and
//! close. `SIGQUIT` drains, `SIGTERM`/`SIGINT` stop at once, `SIGUSR1` reopens log files.

mod conn;
mod quic;
mod quic_amplification;
mod quic_hq;
mod quic_keys;
mod quic_request;
mod quic_socket;
mod quic_tls;
mod site;
mod sockets;
pub(crate) mod trim;

pub use site::{LoadError, Site};
pub use sockets::{bind_all, bind_sockets, unix_socket_paths, Bound, Fresh, SocketKey};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::conf::model::{Config, LogLevel};
use crate::log::LogFile;

/// A site whose every answer is `return 200 "ok"` (HTTP/2 on), the process state, one
/// plain-text connection to it and its server block (for tests of the connection code).
#[cfg(test)]
pub(crate) fn test_conn() -> (
    Arc<Site>,
    Arc<Shared>,
    crate::http::conn::Conn,
    Arc<crate::conf::model::ServerConf>,
) {
    let text =
        "error_log stderr;\nevents {}\nhttp { access_log off;\n server { listen 127.0.0.1:1; http2 on; \
                location / { return 200 \"ok\"; } } }\n";
    let dir = std::env::temp_dir();
    let config = crate::conf::load_str(text, &dir.join("test-conn.conf"), &dir).expect("config");
    let server = config.http.as_ref().expect("http").servers[0].clone();
    let shared = Arc::new(Shared::new().expect("shared"));
    let site = Arc::new(Site::build(config, &shared, None).expect("site"));
    let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let facts = crate::http::reqvars::ConnFacts {
        peer: None,
        local: Some(local),
        id: 1,
        tls: None,
        record_policy: "static",
        proxy_protocol: None,
        proxy_protocol_tlvs: None,
        socket: None,
        accepted: None,
        unix: None,
    };
    let io = Arc::new(crate::net::IoControl::new(Duration::from_secs(60), false));
    let conn = crate::http::conn::Conn::new(
        site.http().clone(),
        shared.http.clone(),
        0,
        local,
        facts,
        io,
    );
    (site, shared, conn, server)
}

/// Process-wide state that outlives configuration generations.
pub struct Shared {
    /// What requests count in and read: `stub_status` counters, the open-file cache.
    pub http: Arc<crate::http::Shared>,
    /// Ticket keys and session caches (kept across reloads so sessions stay resumable).
    pub tls: crate::tls::TlsShared,
    log_files: Mutex<HashMap<PathBuf, Arc<LogFile>>>,
    draining: watch::Sender<bool>,
}

impl Shared {
    /// Fresh process state (fails only if the system's random source does).
    pub fn new() -> Result<Self, crate::tls::TlsError> {
        Ok(Self::with_tls(crate::tls::TlsShared::new()?))
    }

    /// The state `firstbyte -t` loads a configuration with: nothing random is made.
    pub fn for_test() -> Self {
        Self::with_tls(crate::tls::TlsShared::for_test())
    }

    fn with_tls(tls: crate::tls::TlsShared) -> Self {
        Self {
            http: Arc::new(crate::http::Shared::new()),
            tls,
            log_files: Mutex::new(HashMap::new()),
            draining: watch::channel(false).0,
        }
    }

    /// The open log file at `path` (opened once, shared by every generation that names it).
    pub fn log_file(&self, path: &Path) -> std::io::Result<Arc<LogFile>> {
        let mut m = self
            .log_files
            .lock()
            .map_err(|_| std::io::Error::other("log registry poisoned"))?;
        if let Some(f) = m.get(path) {
            return Ok(f.clone());
        }
        let f = LogFile::open(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "open() \"{}\" failed ({})",
                    path.display(),
                    crate::log::OsError(&e)
                ),
            )
        })?;
        m.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }

    /// Swaps in the files the broker reopened; logs its failures as [`Shared::reopen_logs`].
    pub fn replace_logs(&self, files: Vec<(PathBuf, std::io::Result<std::fs::File>)>) {
        let Ok(m) = self.log_files.lock() else {
            return;
        };
        for (path, r) in files {
            let Some(f) = m.get(&path) else {
                continue;
            };
            match r {
                Ok(file) => f.replace(file),
                Err(e) => crate::fblog!(
                    Alert,
                    "reopen() \"{}\" failed ({})",
                    path.display(),
                    crate::log::OsError(&e)
                ),
            }
        }
    }

    /// Paths of the open log files.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        self.log_files
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Reopens every log file (`-s reopen`).
    pub fn reopen_logs(&self) {
        let files: Vec<_> = match self.log_files.lock() {
            Ok(m) => m.values().cloned().collect(),
            Err(_) => return,
        };
        for f in files {
            if let Err(e) = f.reopen() {
                crate::fblog!(
                    Alert,
                    "reopen() \"{}\" failed ({})",
                    f.path().display(),
                    crate::log::OsError(&e)
                );
            }
        }
    }

    /// Watches for a graceful shutdown.
    pub fn draining(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }
}

/// How to find the configuration again on reload.
#[derive(Debug, Clone)]
pub struct Source {
    /// Main file.
    pub path: PathBuf,
    /// `-p`.
    pub prefix: Option<PathBuf>,
    /// `-g`.
    pub globals: Option<String>,
    /// `-e FILE|stderr`: the error log when the configuration names none.
    pub error_log: Option<String>,
    /// The built-in site's text (when there is no file).
    pub builtin: Option<String>,
}

impl Source {
    /// Parses the configuration.
    pub fn load(&self) -> Result<Config, LoadError> {
        let mut config = match &self.builtin {
            Some(text) => crate::conf::load_str(
                text,
                &self.path,
                self.prefix.as_deref().unwrap_or(Path::new("/")),
            )?,
            None => crate::conf::load(&self.path, self.prefix.as_deref(), self.globals.as_deref())?,
        };
        crate::conf::default_error_log(&mut config, self.error_log.as_deref());
        Ok(config)
    }
}

/// Open listening sockets, each with its accept loop (TCP) or endpoint (QUIC).
struct Listeners {
    open: HashMap<SocketKey, Listening>,
}

/// What runs on an open socket.
enum Listening {
    /// A TCP (or UNIX-domain) socket's accept loop.
    Tcp(JoinHandle<()>),
    /// A QUIC endpoint (its accept loop and the handle that reconfigures it on reload).
    Quic(quic::Endpoint),
}

impl Listening {
    /// Stops accepting; connections in flight go on.
    fn close(self) {
        match self {
            Listening::Tcp(h) => h.abort(),
            Listening::Quic(e) => e.close(),
        }
    }
}

/// What a load that now serves starts (the re-resolving of its upstreams' names) and tells
/// the `metrics`: its object cache's hits (objects reused
/// from the previous load or shared within this one) and misses (objects parsed), and its
/// certificates' expiry times.
fn loaded(site: &Site) {
    // `server NAME resolve` lines of its upstreams: resolved from now on, while it serves.
    site.http().proxies.start_resolving(&site.retired());
    let c = site.store.counts();
    crate::metrics::cache(
        crate::metrics::Cache::Object,
        (c.reused + c.shared) as u64,
        c.parsed as u64,
    );
    crate::metrics::certificates(&site.store.certificate_expiry());
}

/// The running server.
pub struct Server {
    source: Source,
    shared: Arc<Shared>,
    current: Arc<ArcSwap<Site>>,
    listeners: Mutex<Listeners>,
    broker: Option<crate::broker::Broker>,
}

impl Server {
    /// Starts serving `site` on `fresh`, the sockets [`bind_all`] bound for it (inside the runtime).
    pub fn start(
        source: Source,
        site: Site,
        shared: Arc<Shared>,
        fresh: Fresh,
        broker: Option<crate::broker::Broker>,
    ) -> Arc<Self> {
        let server = Arc::new(Server {
            broker,
            source,
            shared,
            current: Arc::new(ArcSwap::from_pointee(site)),
            listeners: Mutex::new(Listeners {
                open: HashMap::new(),
            }),
        });
        let site = server.site();
        server.activate(fresh, &site);
        loaded(&site);
        server
    }

    /// The current site.
    pub fn site(&self) -> Arc<Site> {
        self.current.load_full()
    }

    /// Binds the sockets `site` names that are not open yet. Nothing running changes, so a
    /// failure here leaves the server as it was.
    fn bind_new(&self, site: &Site) -> Result<Fresh, LoadError> {
        let l = self
            .listeners
            .lock()
            .map_err(|_| LoadError::Other("listener registry poisoned".into()))?;
        bind_sockets(site, |a| l.open.contains_key(a))
    }

    /// Starts accepting on freshly bound sockets, points QUIC endpoints that stay at `site`,
    /// and closes the sockets `site` no longer names.
    fn activate(&self, fresh: Fresh, site: &Arc<Site>) {
        let Ok(mut l) = self.listeners.lock() else {
            return;
        };
        for (key, bound) in fresh {
            let started = match bound {
                Bound::Tcp(std_l) => TcpListener::from_std(std_l).map(|tl| {
                    Listening::Tcp(tokio::spawn(accept_loop(
                        Acceptor::Tcp(tl),
                        key.clone(),
                        self.current.clone(),
                        self.shared.clone(),
                    )))
                }),
                Bound::Unix(std_l) => tokio::net::UnixListener::from_std(std_l).map(|ul| {
                    Listening::Tcp(tokio::spawn(accept_loop(
                        Acceptor::Unix(ul),
                        key.clone(),
                        self.current.clone(),
                        self.shared.clone(),
                    )))
                }),
                Bound::Udp(udp) => {
                    quic::Endpoint::start(udp, key.addr, site, self.shared.clone(), &self.current)
                        .map(Listening::Quic)
                }
            };
            match started {
                Ok(s) => {
                    l.open.insert(key, s);
                }
                Err(e) => crate::fblog!(Emerg, "{}", sockets::bind_error(&key, &e)),
            }
        }
        let wanted = site.vhosts().sockets();
        let gone: Vec<SocketKey> = l
            .open
            .keys()
            .filter(|k| !wanted.iter().any(|s| SocketKey::of(s) == **k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(s) = l.open.remove(&k) {
                s.close();
                sockets::remove_socket_file(&k, true, self.broker.is_none());
            }
        }
        for s in l.open.values() {
            if let Listening::Quic(e) = s {
                e.reconfigure(site);
            }
        }
    }

    /// Re-reads the configuration. On any failure the old configuration keeps serving.
    ///
    /// With a broker (started as root), the broker reads the files, opens the logs and binds
    /// the new sockets; this process builds the site from what it sent (`files::replaying`).
    /// Without one, this process reads and binds itself.
    pub async fn reload(self: &Arc<Self>) -> Result<(), LoadError> {
        let this = self.clone();
        let (built, fresh) = tokio::task::spawn_blocking(move || {
            let prev = this.site();
            let Some(broker) = &this.broker else {
                let config = this.source.load()?;
                let site = Site::build(config, &this.shared, Some(&prev))?;
                let fresh = this.bind_new(&site)?;
                return Ok::<_, LoadError>((site, fresh));
            };
            let open: Vec<SocketKey> = match this.listeners.lock() {
                Ok(l) => l.open.keys().cloned().collect(),
                Err(_) => return Err(LoadError::Other("listener registry poisoned".into())),
            };
            let loaded = broker.reload(&open).map_err(LoadError::Other)?;
            let site = crate::files::replaying(loaded.snapshot, || {
                let config = this.source.load()?;
                Site::build(config, &this.shared, Some(&prev))
            })?;
            let mut given = loaded.listeners;
            let fresh = this.take_new(&site, &mut given)?;
            Ok((site, fresh))
        })
        .await
        .map_err(|e| LoadError::Other(format!("reload task failed: {e}")))??;
        for w in built.config.warnings.iter().chain(&built.warnings) {
            crate::fblog!(Warn, "{w}");
        }
        crate::log::set_error_logs(built.error_logs.clone());
        let built = Arc::new(built);
        let old = self.current.swap(built.clone());
        // The new configuration's record policies stand until `tuning_advisor apply` decides
        // again on fresh evidence.
        self.shared.http.advisor.forget_switch();
        self.activate(fresh, &built);
        loaded(&built);
        old.retire();
        // Tearing down a big site (thousands of configs, names, objects) is a few ms of
        // frees: off the runtime thread, so "reconfiguration done" does not wait for it.
        // Connections still on it keep it alive; the last of them drops it instead.
        drop(tokio::task::spawn_blocking(move || drop(old)));
        Ok(())
    }

    /// The sockets `site` needs that are not open, out of those the broker bound.
    fn take_new(&self, site: &Site, given: &mut Fresh) -> Result<Fresh, LoadError> {
        let l = self
            .listeners
            .lock()
            .map_err(|_| LoadError::Other("listener registry poisoned".into()))?;
        let mut fresh = Vec::new();
        for s in site.vhosts().sockets() {
            let key = SocketKey::of(s);
            if l.open.contains_key(&key) {
                continue;
            }
            let Some(i) = given.iter().position(|(k, _)| *k == key) else {
                return Err(LoadError::Other(format!(
                    "the privileged process bound no socket for {key}"
                )));
            };
            fresh.push(given.swap_remove(i));
        }
        Ok(fresh)
    }

    /// Reopens log files (`-s reopen`); with a broker, it opens them (a log directory may be
    /// root's) and this process swaps the files in.
    pub async fn reopen_logs(self: &Arc<Self>) {
        let this = self.clone();
        let _ = tokio::task::spawn_blocking(move || match &this.broker {
            None => this.shared.reopen_logs(),
            Some(b) => match b.reopen() {
                Ok(files) => this.shared.replace_logs(files),
                Err(e) => {
                    crate::fblog!(Alert, "reopening logs failed ({})", crate::log::OsError(&e))
                }
            },
        })
        .await;
    }

    /// The broker removes the pid file and exits (at the end of a run).
    pub fn shutdown(&self) {
        if let Some(b) = &self.broker {
            b.shutdown();
        }
    }

    /// Stops accepting and closes the listening sockets.
    pub fn close_listeners(&self) {
        if let Ok(mut l) = self.listeners.lock() {
            for (k, s) in l.open.drain() {
                s.close();
                sockets::remove_socket_file(&k, false, self.broker.is_none());
            }
        }
    }

    /// Graceful stop: no new connections, in-flight requests finish, idle connections close.
    /// With `worker_shutdown_timeout`, connections still open when it runs out are closed (the
    /// caller returns and the process exits), as nginx does.
    pub async fn drain(&self) {
        self.close_listeners();
        self.shared.draining.send_replace(true);
        let wait = async {
            // Background cache refreshes (`proxy_cache_background_update`) finish too.
            while self.shared.http.stats.active.load(Ordering::Relaxed) > 0
                || crate::http::cache::refreshing() > 0
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        match self.site().config.main.worker_shutdown_timeout {
            None => wait.await,
            Some(t) => {
                if tokio::time::timeout(t, wait).await.is_err() {
                    crate::fblog!(
                        Notice,
                        "worker_shutdown_timeout: closing {} connection(s)",
                        self.shared.http.stats.active.load(Ordering::Relaxed)
                    );
                }
            }
        }
    }

    /// Runs until a signal says stop.
    pub async fn run_signals(self: &Arc<Self>, signals: Signals) {
        let Signals {
            mut hup,
            mut quit,
            mut term,
            mut int,
            mut usr1,
        } = signals;
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    crate::fblog!(Notice, "signal 1 (SIGHUP) received, reconfiguring");
                    crate::notify::reloading();
                    let result = self.reload().await;
                    crate::metrics::reload(result.is_ok());
                    match result {
                        Ok(()) => {
                            crate::fblog!(
                                Notice,
                                "reconfiguration done: generation {}, {} live",
                                self.site().generation(),
                                site::live_sites()
                            );
                            crate::notify::ready(None);
                        }
                        Err(e) => {
                            crate::fblog!(Emerg, "{e}; the previous configuration keeps serving");
                            crate::notify::ready(Some(&format!(
                                "reload failed, the previous configuration keeps serving: {e}"
                            )));
                        }
                    }
                }
                _ = usr1.recv() => {
                    crate::fblog!(Notice, "signal 10 (SIGUSR1) received, reopening logs");
                    self.reopen_logs().await;
                }
                _ = quit.recv() => {
                    crate::fblog!(Notice, "signal 3 (SIGQUIT) received, shutting down gracefully");
                    crate::notify::stopping();
                    // SIGTERM or SIGINT during the drain still stops at once.
                    tokio::select! {
                        _ = self.drain() => {}
                        _ = term.recv() => {
                            crate::fblog!(Notice, "signal 15 (SIGTERM) received, exiting");
                        }
                        _ = int.recv() => {
                            crate::fblog!(Notice, "signal 2 (SIGINT) received, exiting");
                        }
                    }
                    return;
                }
                _ = term.recv() => {
                    crate::fblog!(Notice, "signal 15 (SIGTERM) received, exiting");
                    crate::notify::stopping();
                    return;
                }
                _ = int.recv() => {
                    crate::fblog!(Notice, "signal 2 (SIGINT) received, exiting");
                    crate::notify::stopping();
                    return;
                }
            }
        }
    }
}

/// The signals firstbyte answers (`-s reload|reopen|quit|stop`, and SIGINT), registered
/// before any socket is bound, as nginx does: SIGHUP's and SIGUSR1's default action ends the
/// process, so one sent as soon as the port answers must already be handled.
pub struct Signals {
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
}

/// The answered signals held back from this thread (and the threads it starts) while alive.
pub struct Blocked(libc::sigset_t);

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: the set was filled by sigemptyset/sigaddset; a null old-set pointer is allowed.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut()) };
    }
}

/// The signals firstbyte answers.
pub const ANSWERED: [libc::c_int; 5] = [
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGUSR1,
];

impl Signals {
    /// Blocks the answered signals until the guard drops: one that arrives before the handlers
    /// are installed stays pending and is handled then, instead of ending the process.
    pub fn block() -> Blocked {
        // SAFETY: sigset_t is plain data that sigemptyset initialises; the pointers are valid.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in ANSWERED {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Blocked(set)
        }
    }

    /// Registers the handlers (inside the runtime).
    pub fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            usr1: signal(SignalKind::user_defined1())?,
        })
    }
}

/// A listening socket's accept side.
enum Acceptor {
    Tcp(TcpListener),
    Unix(tokio::net::UnixListener),
}

impl Acceptor {
    /// The next connection, and its peer (`None` on a UNIX-domain socket, whose clients have
    /// no address). A UNIX-domain connection is handed on as a `TcpStream` over the same
    /// descriptor: the serving code reads and writes a stream socket through it and
    /// skips every TCP-only option for it (see `conn::handle`); `local_addr`/`peer_addr`
    /// are never asked of it.
    async fn accept(&self) -> std::io::Result<(tokio::net::TcpStream, Option<SocketAddr>)> {
        match self {
            Acceptor::Tcp(l) => l.accept().await.map(|(s, peer)| (s, Some(peer))),
            Acceptor::Unix(l) => {
                let (s, _) = l.accept().await?;
                let fd: std::os::fd::OwnedFd = s.into_std()?.into();
                let stream = std::net::TcpStream::from(fd);
                stream.set_nonblocking(true)?;
                Ok((tokio::net::TcpStream::from_std(stream)?, None))
            }
        }
    }
}

async fn accept_loop(
    listener: Acceptor,
    key: SocketKey,
    current: Arc<ArcSwap<Site>>,
    shared: Arc<Shared>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let site = current.load_full();
                let Some(idx) = site
                    .vhosts()
                    .sockets()
                    .iter()
                    .position(|s| !s.quic && s.addr == key.addr && s.unix == key.unix)
                else {
                    continue;
                };
                let limit = site.config.main.max_connections();
                if shared
                    .http
                    .stats
                    .active
                    .load(std::sync::atomic::Ordering::Relaxed)
                    >= limit
                {
                    // nginx's words; the connection is closed at once, as nginx does.
                    crate::fblog!(
                        Alert,
                        "{} worker_connections are not enough",
                        site.config.main.worker_connections
                    );
                    drop(stream);
                    continue;
                }
                tokio::spawn(conn::handle(
                    site,
                    shared.clone(),
                    idx,
                    stream,
                    peer,
                    key.addr,
                    key.unix.clone(),
                ));
            }
            Err(e) => {
                // EMFILE/ENFILE and friends: log, breathe, go on (nginx disables accept briefly).
                crate::fblog!(Crit, "accept() failed ({})", crate::log::OsError(&e));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Writes the pid file; removes it when dropped.
pub struct PidFile(Option<PathBuf>);

impl PidFile {
    /// Writes `path` with this process's id. Called as root before privileges are dropped,
    /// so the file is root's, mode 0644: the serving user cannot rewrite it to aim `-s` (run
    /// by root) at another process. A symlink at `path` is not followed.
    pub fn write(path: Option<&Path>) -> std::io::Result<Self> {
        if let Some(p) = path {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)?;
            f.write_all(format!("{}\n", std::process::id()).as_bytes())?;
        }
        Ok(Self(path.map(Path::to_path_buf)))
    }

    /// Someone else (the broker) removes the file.
    pub fn disown(&mut self) {
        self.0 = None;
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Logs the configuration's warnings on stderr (start, `-t`).
pub fn print_warnings(c: &Config) {
    for w in &c.warnings {
        crate::log::stderr(LogLevel::Warn, w);
    }
}
