//! The configuration language: nginx's syntax, nginx's directive names.
//!
//! Text flows `parse` (tokens → a tree of directives with file and line, `include` expanded)
//! → `table` (each directive's contexts and arguments checked) → `build` (handlers set each
//! level's values, then they merge http → server → location) → [`model::Config`].
//! [`load`] reads a file, [`load_str`] text in memory; both give a [`ConfError`] worded as
//! nginx's messages, and collect `[warn]` lines in [`Config::warnings`](model::Config).
//!
//! Paths: `include` and TLS files (`ssl_certificate*`, `ssl_password_file`,
//! `ssl_session_ticket_key`, `ssl_client_certificate`, `ssl_stapling_file`) resolve against the
//! main file's directory, as nginx's conf prefix; `root`, logs and `pid` against the prefix
//! (`-p`, by default the main file's directory too).

pub mod access_conf;
mod args;
mod build;
pub mod charset;
pub mod cookies;
mod cx;
mod declare;
mod directives;
// Renders the table as docs/directives.md; a test keeps that file current.
#[cfg(test)]
pub(crate) mod docs;
mod error;
mod fastcgi;
mod handlers;

/// A size as nginx's `ngx_parse_size` reads it (`40k`, `1m`, `512`).
pub fn units_size(s: &str) -> Option<u64> {
    units::size(s)
}
pub mod cache;
pub mod leaky;
mod limit_except;
pub mod limits;
pub mod locate;
pub mod log_cache;
pub mod model;
mod modules;
pub mod open_file_cache;
mod parse;
pub(crate) mod proxy;
mod proxy_settings;
pub mod quic;
pub mod realip;
pub mod rewrite;
mod server_handlers;
mod server_head;
mod settings;
mod table;
mod units;
mod upstream;
mod upstream_zone;
pub mod vars;
pub mod vhosts;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use error::ConfError;
pub use handlers::parse_expires;
use model::Config;
pub use modules::configure_arguments;

/// Loads `path` (main file). `prefix`: `-p` (None = the directory of `path`).
/// `globals`: `-g "directives;"` text, parsed as main-context directives before the file.
pub fn load(
    path: &Path,
    prefix: Option<&Path>,
    globals: Option<&str>,
) -> Result<Config, ConfError> {
    let path = std::path::absolute(path).map_err(|e| ConfError::open(path, &e, None))?;
    let text = crate::files::read_config(&path, MAX_FILE_BYTES)
        .map_err(|e| ConfError::open(&path, &e, None))?
        .0;
    let prefix = match prefix {
        Some(p) => Some(std::path::absolute(p).map_err(|e| ConfError::open(p, &e, None))?),
        None => None,
    };
    load_text(&text, &path, prefix.as_deref(), globals, running_as_root())
}

/// Applies `-e FILE|stderr` (nginx ≥ 1.19.5): the error log of a configuration that names
/// none at the main level, at `error`; a relative file is under the prefix, as nginx.
pub fn default_error_log(config: &mut Config, arg: Option<&str>) {
    let Some(arg) = arg else { return };
    if !config.main.error_log.is_empty() {
        return;
    }
    let target = if arg == "stderr" {
        model::LogTarget::Stderr
    } else {
        model::LogTarget::File(config.prefix.join(arg))
    };
    config.main.error_log.push(model::ErrorLog {
        target,
        level: model::LogLevel::Error,
    });
}

/// The same from text in memory (for tests and the built-in site), `name` used in messages.
pub fn load_str(text: &str, name: &Path, prefix: &Path) -> Result<Config, ConfError> {
    load_text(text.as_bytes(), name, Some(prefix), None, running_as_root())
}

/// Largest configuration file read (the main file, each `include`): 64 MiB. The biggest real
/// ones are generated `geo`/`map` lists (a million-entry IP block list is ~25 MB), well under
/// it, while the memory a wrong path can take stays bounded (the bytes, then a tree a few times
/// their size). Devices, FIFOs and sockets are refused whatever their size
/// ([`crate::files::read_config`]).
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// Whether the process has root's privileges (the default `listen` port depends on it), or
/// started with them (the server that gave them up loads as the root process would).
fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    crate::files::started_as_root() || unsafe { libc::geteuid() == 0 }
}

/// The loader proper: `text` is the main file's contents, `name` its path.
pub(crate) fn load_text(
    text: &[u8],
    name: &Path,
    prefix: Option<&Path>,
    globals: Option<&str>,
    is_root: bool,
) -> Result<Config, ConfError> {
    let conf_dir = name.parent().map(Path::to_path_buf).unwrap_or_default();
    let prefix = prefix
        .map(Path::to_path_buf)
        .unwrap_or_else(|| conf_dir.clone());
    let mut files = vec![name.to_path_buf()];
    let (global_tree, tree) = {
        let mut p = parse::Parser {
            conf_dir: &conf_dir,
            files: &mut files,
        };
        let g = match globals {
            Some(g) => p.text(
                g.as_bytes(),
                Arc::new(PathBuf::from("command line")),
                true,
                0,
            )?,
            None => Vec::new(),
        };
        (g, p.text(text, Arc::new(name.to_path_buf()), false, 0)?)
    };
    let mut cx = settings::Cx::new(prefix.clone(), conf_dir, is_root);
    let (main, http) = build::build(&global_tree, &tree, &mut cx)?;
    Ok(Config {
        path: name.to_path_buf(),
        prefix,
        main,
        http,
        warnings: cx.warnings,
        files,
    })
}

#[cfg(test)]
mod compat_tests;
#[cfg(test)]
mod listed_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testutil;
