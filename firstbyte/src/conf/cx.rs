//! What every level of one load shares: the prefix and configuration directory paths
//! resolve against, the `[warn]` lines so far, `log_format`s and `upstream`s by name.
//!
//! At the bottom of the configuration modules: the parsing helpers (`args`), the settings
//! (`settings`) and the handlers all take a [`Cx`], and it imports none of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::model::{LogEscape, LogFormat, Pos};
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
    /// Variables of `set`, `map`, `split_clients` and regex named groups.
    pub user_vars: super::rewrite::VarDefs,
    /// `limit_req_zone`s and `limit_conn_zone`s.
    pub zones: super::limits::Zones,
    /// `charset_map` tables.
    pub charsets: Arc<super::charset::CharsetMaps>,
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
            user_vars: Default::default(),
            zones: Default::default(),
            charsets: Default::default(),
            daemon: false,
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
