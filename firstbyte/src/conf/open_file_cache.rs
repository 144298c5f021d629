//! `open_file_cache max=N [inactive=TIME] | off`: one cache of open files per directive,
//! shared by the levels that inherit it (nginx's `ngx_open_file_cache_init` per
//! `open_file_cache` line).
//!
//! The configuration owns the cache's identity and limits; what it holds (open descriptors
//! and their metadata) is the HTTP layer's type, kept in [`OpenFileCacheConf::state`] and
//! made at the first request (`http::open_file_cache::configured`), so a reload starts with
//! an empty cache, as nginx's new cycle does.

use std::any::Any;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::cx::Cx;
use super::error::ConfError;
use super::parse::Directive;
use super::units;

/// One `open_file_cache max=N [inactive=TIME]`.
pub struct OpenFileCacheConf {
    /// `max=N`: the most entries (paths) it keeps; a new one drops the least recently used.
    pub max: usize,
    /// `inactive=TIME` (nginx: 60s): an entry unused this long is dropped.
    pub inactive: Duration,
    /// The HTTP layer's cache, made at first use.
    pub state: OnceLock<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for OpenFileCacheConf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenFileCacheConf")
            .field("max", &self.max)
            .field("inactive", &self.inactive)
            .finish_non_exhaustive()
    }
}

/// Equal limits (what the cache holds does not count).
impl PartialEq for OpenFileCacheConf {
    fn eq(&self, o: &Self) -> bool {
        (self.max, self.inactive) == (o.max, o.inactive)
    }
}

/// `open_file_cache max=N [inactive=TIME] | off`, read as nginx does: `off` anywhere among
/// the arguments turns it off; otherwise `max=` is required and positive.
pub(crate) fn parse(
    d: &Directive,
    _: &mut Cx,
) -> Result<Option<Arc<OpenFileCacheConf>>, ConfError> {
    let (mut max, mut inactive, mut off) = (None, Duration::from_secs(60), false);
    for a in &d.args {
        let bad = || {
            ConfError::other(
                format!("invalid \"open_file_cache\" parameter \"{a}\""),
                &d.pos,
            )
        };
        if let Some(v) = a.strip_prefix("max=") {
            max = Some(v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad)?);
        } else if let Some(v) = a.strip_prefix("inactive=") {
            inactive = units::time(v).ok_or_else(bad)?;
        } else if a == "off" {
            off = true;
        } else {
            return Err(bad());
        }
    }
    if off {
        return Ok(None);
    }
    let max = max.ok_or_else(|| {
        ConfError::other(
            "\"open_file_cache\" must have the \"max\" parameter".to_string(),
            &d.pos,
        )
    })?;
    Ok(Some(Arc::new(OpenFileCacheConf {
        max,
        inactive,
        state: OnceLock::new(),
    })))
}
