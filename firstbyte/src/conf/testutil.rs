//! Helpers shared by the unit tests of the configuration modules.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::model::{Config, Pos};
use super::parse::Directive;
use super::settings::Cx;

/// A directive `name args...;` written at `/t.conf:line`, without a block.
pub(crate) fn directive(name: &str, args: &[&str], line: usize) -> Directive {
    Directive {
        name: name.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        pos: Pos {
            file: Arc::new(PathBuf::from("/t.conf")),
            line,
        },
        block: None,
    }
}

/// A load context with prefix `/p` and conf directory `/c`, as root.
pub(crate) fn cx() -> Cx {
    Cx::new(PathBuf::from("/p"), PathBuf::from("/c"), true)
}

/// Loads `text` as the main file `/t/x.conf` with prefix `/p`; `is_root` as when started by
/// root.
pub(crate) fn load_as(text: &str, is_root: bool) -> Result<Config, super::ConfError> {
    super::load_text(
        text.as_bytes(),
        Path::new("/t/x.conf"),
        Some(Path::new("/p")),
        None,
        is_root,
    )
}

/// [`load_as`] as root, which must succeed.
pub(crate) fn ok(text: &str) -> Config {
    match load_as(text, true) {
        Ok(c) => c,
        Err(e) => panic!("{e}\n--- in ---\n{text}"),
    }
}
