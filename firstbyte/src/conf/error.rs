//! Configuration errors, worded as nginx words them.
//!
//! Every variant displays nginx's message *without* the level: the runtime prints
//! `firstbyte: [emerg] {err}`. Positions end the message as ` in FILE:LINE`; a position with
//! line 0 (the `-g` command line) prints as ` in command line`.

use super::model::Pos;
use super::vars::VarError;

/// Why a configuration could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfError {
    /// A file could not be read: `open() "/x" failed (2: No such file or directory)`.
    #[error("open() \"{path}\" failed ({reason}){}", at(.pos.as_ref()))]
    Open {
        /// The path as firstbyte tried to open it.
        path: String,
        /// `errno: text`, as nginx prints it.
        reason: String,
        /// The `include` that named it (None for the main file).
        pos: Option<Pos>,
    },
    /// A name that is no nginx directive firstbyte knows.
    #[error("unknown directive \"{name}\" in {pos}")]
    UnknownDirective {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// An nginx directive whose function firstbyte does not have yet.
    #[error("\"{name}\" directive is not supported by firstbyte yet in {pos}")]
    Unsupported {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A parameter or option of a directive that firstbyte does not have yet.
    #[error("{what} is not supported by firstbyte yet in {pos}")]
    UnsupportedParam {
        /// What, e.g. `ssl_conf_command "Options"`.
        what: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A directive in a context where it may not appear.
    #[error("\"{name}\" directive is not allowed here in {pos}")]
    NotAllowedHere {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// Too few or too many arguments.
    #[error("invalid number of arguments in \"{name}\" directive in {pos}")]
    ArgCount {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A single-value directive set twice in one block.
    #[error("\"{name}\" directive is duplicate in {pos}")]
    Duplicate {
        /// The directive's name.
        name: String,
        /// Where the second one was written.
        pos: Pos,
    },
    /// `root` and `alias` in one block.
    #[error(
        "\"{name}\" directive is duplicate, \"{earlier}\" directive was specified earlier in {pos}"
    )]
    DuplicateRoot {
        /// The second directive (`root` or `alias`).
        name: String,
        /// The first.
        earlier: String,
        /// Where the second one was written.
        pos: Pos,
    },
    /// A character where none may be: `unexpected "}"`, `unexpected ";"`.
    #[error("unexpected \"{what}\" in {pos}")]
    Unexpected {
        /// The character.
        what: char,
        /// Where it was found.
        pos: Pos,
    },
    /// The file ended inside a block or a directive.
    #[error("unexpected end of file, expecting {expecting} in {pos}")]
    UnexpectedEof {
        /// `"}"` or `";" or "}"`.
        expecting: &'static str,
        /// The last line of the file.
        pos: Pos,
    },
    /// The `-g` text ended inside a directive.
    #[error("unexpected end of parameter, expecting \";\" in command line")]
    UnexpectedEndOfParameter,
    /// A block directive ended with `;`.
    #[error("directive \"{name}\" has no opening \"{{\" in {pos}")]
    NoOpeningBrace {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A simple directive followed by `{`.
    #[error("directive \"{name}\" is not terminated by \";\" in {pos}")]
    NotTerminated {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A value outside a fixed set: `invalid value "maybe" in "sendfile" directive, it must be "on" or "off"`.
    #[error("invalid value \"{value}\" in \"{name}\" directive, it must be {expected} in {pos}")]
    InvalidChoice {
        /// What was written.
        value: String,
        /// The directive's name.
        name: String,
        /// The accepted values, e.g. `"on" or "off"`.
        expected: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A size, time or number that does not parse: `"client_max_body_size" directive invalid value`.
    #[error("\"{name}\" directive invalid value in {pos}")]
    InvalidValue {
        /// The directive's name.
        name: String,
        /// Where it was written.
        pos: Pos,
    },
    /// An unknown parameter of a directive.
    #[error("invalid parameter \"{param}\" in {pos}")]
    InvalidParam {
        /// The parameter as written.
        param: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A bad `listen` address: `invalid port in "x:99999" of the "listen" directive`.
    #[error("{reason} in \"{value}\" of the \"listen\" directive in {pos}")]
    Listen {
        /// `invalid port`, `host not found`, ...
        reason: &'static str,
        /// The address as written.
        value: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A value with an unknown or malformed `$variable`.
    #[error("{source} in {pos}")]
    Var {
        /// What was wrong.
        source: VarError,
        /// Where it was written.
        pos: Pos,
    },
    /// A regular expression that does not compile.
    #[error("invalid regex \"{regex}\": {reason} in {pos}")]
    Regex {
        /// The expression as written.
        regex: String,
        /// The compiler's reason, on one line.
        reason: String,
        /// Where it was written.
        pos: Pos,
    },
    /// A server with `listen ... ssl` and no certificate.
    #[error("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in {pos}")]
    NoCertificate {
        /// Where the server block starts.
        pos: Pos,
    },
    /// More certificates than keys.
    #[error("no \"ssl_certificate_key\" is defined for certificate \"{cert}\" in {pos}")]
    NoCertificateKey {
        /// The certificate as written.
        cert: String,
        /// Where the `ssl_certificate` was written.
        pos: Pos,
    },
    /// Includes nested deeper than firstbyte follows (a file that includes itself).
    #[error("too deep nesting of includes or blocks (more than {limit}) in {pos}")]
    TooDeep {
        /// The limit.
        limit: usize,
        /// The include or block that went past it.
        pos: Pos,
    },
    /// A message of nginx's with the position inside it: `resolving names at run time
    /// requires upstream "u" in FILE:LINE to be in shared memory`.
    #[error("{before} in {pos}{after}")]
    Around {
        /// The words before the position.
        before: String,
        /// Where the block was written.
        pos: Pos,
        /// The words after it.
        after: String,
    },
    /// Any other message of nginx's, e.g. `duplicate location "/x"`.
    #[error("{msg} in {pos}")]
    Other {
        /// The message.
        msg: String,
        /// Where the directive was written.
        pos: Pos,
    },
}

/// ` in FILE:LINE`, or nothing.
fn at(pos: Option<&Pos>) -> String {
    pos.map(|p| format!(" in {p}")).unwrap_or_default()
}

impl ConfError {
    /// `ConfError::Other` from a message and a position.
    pub(crate) fn other(msg: impl Into<String>, pos: &Pos) -> Self {
        Self::Other {
            msg: msg.into(),
            pos: pos.clone(),
        }
    }

    /// `open() "PATH" failed (N: TEXT)` from an I/O error.
    pub(crate) fn open(path: &std::path::Path, err: &std::io::Error, pos: Option<&Pos>) -> Self {
        Self::Open {
            path: path.display().to_string(),
            reason: crate::log::OsError(err).to_string(),
            pos: pos.cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;

    fn pos() -> Pos {
        Pos {
            file: Arc::new(PathBuf::from("/etc/x.conf")),
            line: 12,
        }
    }

    #[test]
    fn open_error_is_worded_as_nginx() {
        let err = std::io::Error::from_raw_os_error(2);
        let e = ConfError::open(std::path::Path::new("/x"), &err, Some(&pos()));
        assert_eq!(
            e.to_string(),
            "open() \"/x\" failed (2: No such file or directory) in /etc/x.conf:12"
        );
        let e = ConfError::open(std::path::Path::new("/x"), &err, None);
        assert_eq!(
            e.to_string(),
            "open() \"/x\" failed (2: No such file or directory)"
        );
    }

    #[test]
    fn messages_end_with_the_position() {
        let e = ConfError::NoOpeningBrace {
            name: "http".into(),
            pos: pos(),
        };
        assert_eq!(
            e.to_string(),
            "directive \"http\" has no opening \"{\" in /etc/x.conf:12"
        );
        let e = ConfError::InvalidChoice {
            value: "maybe".into(),
            name: "sendfile".into(),
            expected: "\"on\" or \"off\"".into(),
            pos: pos(),
        };
        assert_eq!(
            e.to_string(),
            "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\" in /etc/x.conf:12"
        );
    }
}
