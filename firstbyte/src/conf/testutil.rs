//! Helpers shared by the unit tests of the configuration modules.

use std::path::PathBuf;
use std::sync::Arc;

use super::model::Pos;
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
