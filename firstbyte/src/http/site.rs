//! What requests read beyond their own connection: per configuration generation, the
//! [`Site`] (virtual hosts, `proxy_pass` routes and upstream pool, access log files); per
//! process, the [`Shared`] state (`stub_status` counters, the open-file cache, the tuning advisor).
//!
//! The runtime (`server`) builds both and keeps, beside them, what only it needs: rustls
//! configs, the TLS object store, error logs, the reload and drain signals.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::proxy::Proxies;
use super::static_files::OpenFileCache;
use crate::conf::model::{ErrorLog, LogTarget};
use crate::conf::vhosts::VirtualHosts;
use crate::log::{LogFile, Sinks};

/// The request side of one configuration generation.
pub struct Site {
    /// Sockets and server selection.
    pub vhosts: VirtualHosts,
    /// Routes of the locations with `proxy_pass`, and the upstream connection pool.
    pub proxies: Proxies,
    /// Access log files by path.
    access_logs: HashMap<PathBuf, Arc<LogFile>>,
    /// The error logs of `error_log` in http, server and location blocks, opened.
    error_logs: HashMap<Vec<ErrorLog>, Arc<Sinks>>,
}

impl Site {
    /// A generation's request side; `access_logs` holds every file its `access_log`
    /// directives name, opened.
    pub fn new(
        vhosts: VirtualHosts,
        proxies: Proxies,
        access_logs: HashMap<PathBuf, Arc<LogFile>>,
        error_logs: HashMap<Vec<ErrorLog>, Arc<Sinks>>,
    ) -> Self {
        Self {
            vhosts,
            proxies,
            access_logs,
            error_logs,
        }
    }

    /// Whether an http, server or location block has its own `error_log`.
    pub fn has_block_error_logs(&self) -> bool {
        !self.error_logs.is_empty()
    }

    /// The opened error log of a level's `error_log` list (None for an empty list: the main
    /// level's).
    pub fn error_log(&self, logs: &[ErrorLog]) -> Option<Arc<Sinks>> {
        if logs.is_empty() {
            return None;
        }
        self.error_logs.get(logs).cloned()
    }

    /// Appends to an access log.
    pub fn write_access_log(&self, target: &LogTarget, line: &[u8]) {
        match target {
            LogTarget::Stderr => {
                use std::io::Write;
                let _ = std::io::stderr().write_all(line);
            }
            LogTarget::Stdout => {
                use std::io::Write;
                let _ = std::io::stdout().lock().write_all(line);
            }
            LogTarget::File(p) => {
                if let Some(f) = self.access_logs.get(p) {
                    f.write(line);
                }
            }
            // The access log's writer opens these per request.
            LogTarget::Variable(_) => {}
        }
    }
}

/// Counters for `stub_status`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Open connections.
    pub active: AtomicU64,
    /// Connections accepted.
    pub accepts: AtomicU64,
    /// Connections handled.
    pub handled: AtomicU64,
    /// Requests started.
    pub requests: AtomicU64,
    /// Requests being answered.
    pub writing: AtomicU64,
    /// Connections whose next request's head is arriving.
    pub reading: AtomicU64,
}

impl Stats {
    /// Active connections, those reading a request head, and requests being answered.
    pub fn connections(&self) -> (u64, u64, u64) {
        (
            self.active.load(Ordering::Relaxed),
            self.reading.load(Ordering::Relaxed),
            self.writing.load(Ordering::Relaxed),
        )
    }
}

/// Process-wide state requests count in and read, across configuration generations.
pub struct Shared {
    /// `stub_status` counters.
    pub stats: Stats,
    /// Open files of static responses in locations without `open_file_cache` (each use
    /// revalidated: see `open_file_cache`).
    pub files: OpenFileCache,
    /// The tuning advisor's histograms (`tuning_advisor`), kept across reloads.
    pub advisor: crate::advisor::Advisor,
}

impl Shared {
    /// Zero counters and an empty revalidating open-file cache (locations without
    /// `open_file_cache`).
    pub fn new() -> Self {
        Self {
            stats: Stats::default(),
            files: OpenFileCache::revalidating(),
            advisor: crate::advisor::Advisor::default(),
        }
    }
}

impl Default for Shared {
    fn default() -> Self {
        Self::new()
    }
}
