//! nginx's rewrite module, `map`, `split_clients` and `geo`: read at load into programs and
//! variable definitions; [`crate::http::rewrite`] runs them per request.
//!
//! The rewrite directives of a level (`set`, `if`, `rewrite`, `return`, `break`) become one
//! [`Program`] in file order: the server's runs before any location is chosen (nginx's server
//! rewrite phase), a location's once the location is chosen (the location rewrite phase).
//! Programs are not inherited, as nginx's. An `if` inside a location may also carry other
//! directives (`root`, `add_header`, `proxy_pass`, ...): they make an implicit location that
//! inherits the enclosing one's settings and takes over when the condition holds.
//!
//! Variables: `set $x`, regex named groups, and the outputs of `map` / `split_clients` are
//! declared before anything is read ([`declared_names`]), so a value may name one defined
//! later in the file, as nginx resolves variables after the whole file is read. Each gets a
//! [`Slot`] in [`VarDefs`].

mod directives;
mod geo;
mod map;
pub mod regex;

use std::collections::HashMap;
use std::sync::Arc;

pub(crate) use directives::{brk, ret, rewrite, rewrite_log, set, uninitialized_variable_warn};
pub(crate) use directives::{if_block, IfIn};
pub(crate) use geo::geo;
pub use geo::GeoDef;
pub(crate) use map::{map, split_clients};
pub use map::{MapDef, MapKey, SplitDef};

use super::model::{LocationConf, Locations, MimeTypes, Return};
use super::parse::Directive;
use super::settings::{Cx, LocSettings};
use super::vars::ComplexValue;
use regex::Regex;

/// One rewrite directive. `L` is how an `if`'s implicit location is held: its settings while
/// the file is read, the finished location after.
#[derive(Debug, Clone)]
pub enum Stmt<L = Arc<LocationConf>> {
    /// `set $var value`.
    Set {
        /// What is set.
        target: SetTarget,
        /// The value.
        value: ComplexValue,
    },
    /// `if (cond) { ... }`.
    If {
        /// The condition.
        cond: Cond,
        /// The rewrite directives inside.
        body: Vec<Stmt<L>>,
        /// The implicit location, when the block (in a location) has other directives.
        loc: Option<L>,
        /// The block sets a content handler of its own (`proxy_pass`, `fastcgi_pass`): as
        /// nginx's `r->content_handler`, it stays the handler when a later `if` that holds
        /// takes over the settings.
        handler: bool,
    },
    /// `rewrite regex replacement [flag]`.
    Rewrite(Box<Rewrite>),
    /// `return ...`.
    Return(Return),
    /// `break`.
    Break,
}

/// What `set` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTarget {
    /// A variable of `set` (its slot).
    Var(usize),
    /// `$args`, which nginx lets `set` change.
    Args,
    /// `$limit_rate`: the request's rate (a size; an invalid one is logged and ignored).
    LimitRate,
}

/// An `if` condition.
#[derive(Debug, Clone)]
pub enum Cond {
    /// `($var)`: true unless empty or "0".
    Var(ComplexValue),
    /// `($var = value)`, `($var != value)`.
    Eq {
        /// The variable.
        var: ComplexValue,
        /// The value compared.
        value: ComplexValue,
        /// `!=`.
        neg: bool,
    },
    /// `($var ~ re)`, `~*`, `!~`, `!~*`.
    Match {
        /// The variable.
        var: ComplexValue,
        /// The expression with its named groups' slots.
        regex: Captures,
        /// `!~`, `!~*`.
        neg: bool,
    },
    /// `(-f path)`, `-d`, `-e`, `-x` and `!-f` ...
    File {
        /// The path.
        path: ComplexValue,
        /// Which test.
        test: FileTest,
        /// `!-f` ...
        neg: bool,
    },
}

/// `-f`, `-d`, `-e`, `-x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileTest {
    /// `-f`: a regular file.
    File,
    /// `-d`: a directory.
    Dir,
    /// `-e`: anything.
    Exists,
    /// `-x`: executable.
    Exec,
}

/// A regex whose named groups set variables.
#[derive(Debug, Clone)]
pub struct Captures {
    /// The expression.
    pub regex: Regex,
    /// (group number, `set` slot) of each named group.
    pub named: Vec<(usize, usize)>,
}

/// `rewrite`.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// Matched against `$uri`.
    pub regex: Captures,
    /// The replacement before any `?`.
    pub uri: ComplexValue,
    /// The replacement's arguments (after `?`), when it has some.
    pub args: Option<ComplexValue>,
    /// The request's arguments are appended (no trailing `?`).
    pub add_args: bool,
    /// What follows a match.
    pub flag: Flag,
}

/// What a `rewrite` does after a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// No flag: go on with the next directive.
    None,
    /// `last`: stop, find the location for the new URI.
    Last,
    /// `break`: stop, stay in this location.
    Break,
    /// `redirect` (302), `permanent` (301), or a replacement starting with `http://`,
    /// `https://` or `$scheme` (302).
    Redirect(u16),
}

/// The rewrite directives of one level, finished.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// In file order.
    pub stmts: Vec<Stmt>,
    /// `rewrite_log on`: notices of matches and results in the error log.
    pub log: bool,
    /// `uninitialized_variable_warn` (default on).
    pub warn_uninit: bool,
    /// A regex location's named groups: (group number, `set` slot), set when it matches.
    pub location_captures: Vec<(usize, usize)>,
}

impl Program {
    /// Whether there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty()
    }
}

/// An `if` block's implicit location as read: its own directives and where it starts.
#[derive(Debug, Clone)]
pub(crate) struct IfLoc {
    pub settings: LocSettings,
    pub pos: super::model::Pos,
}

/// The rewrite directives of one level as read.
#[derive(Debug, Clone, Default)]
pub(crate) struct RewriteSettings {
    pub stmts: Vec<Stmt<Box<IfLoc>>>,
    pub log: Option<bool>,
    pub warn_uninit: Option<bool>,
    pub location_captures: Vec<(usize, usize)>,
}

impl RewriteSettings {
    /// `rewrite_log` and `uninitialized_variable_warn` inherit; the directives do not.
    pub fn inherit(&mut self, p: &RewriteSettings) {
        if self.log.is_none() {
            self.log = p.log;
        }
        if self.warn_uninit.is_none() {
            self.warn_uninit = p.warn_uninit;
        }
    }

    /// The program, with each `if` location merged under `parent` (this level, merged).
    pub fn finish(
        &self,
        parent: &LocSettings,
        cx: &Cx,
        name: &str,
        default_types: &Arc<MimeTypes>,
    ) -> Program {
        Program {
            stmts: finish_stmts(&self.stmts, parent, cx, name, default_types),
            log: self.log.unwrap_or(false),
            warn_uninit: self.warn_uninit.unwrap_or(true),
            location_captures: self.location_captures.clone(),
        }
    }
}

fn finish_stmts(
    stmts: &[Stmt<Box<IfLoc>>],
    parent: &LocSettings,
    cx: &Cx,
    name: &str,
    default_types: &Arc<MimeTypes>,
) -> Vec<Stmt> {
    stmts
        .iter()
        .map(|s| match s {
            Stmt::Set { target, value } => Stmt::Set {
                target: *target,
                value: value.clone(),
            },
            Stmt::If {
                cond,
                body,
                loc,
                handler,
            } => Stmt::If {
                handler: *handler,
                cond: cond.clone(),
                body: finish_stmts(body, parent, cx, name, default_types),
                loc: loc.as_ref().map(|l| {
                    let mut m = l.settings.clone();
                    m.inherit(parent);
                    // Content handlers stay as the enclosing location set them (nginx keeps
                    // `r->content_handler` when the `if` location has none); `try_files` and
                    // the rest that does not inherit are lost, as in nginx ("if is evil").
                    if m.proxy.pass.is_none() && m.fastcgi.pass.is_none() {
                        m.proxy.pass.clone_from(&parent.proxy.pass);
                        m.fastcgi.pass.clone_from(&parent.fastcgi.pass);
                    }
                    if m.stub_status.is_none() {
                        m.stub_status = parent.stub_status;
                    }
                    if m.connection_info.is_none() {
                        m.connection_info = parent.connection_info;
                    }
                    if m.metrics.is_none() {
                        m.metrics = parent.metrics;
                    }
                    if m.empty_gif.is_none() {
                        m.empty_gif = parent.empty_gif;
                    }
                    // Its rewrite directives run as the enclosing location's.
                    m.rewrite.stmts.clear();
                    Arc::new(m.finish(
                        cx,
                        name.to_string(),
                        l.pos.clone(),
                        default_types,
                        Locations::default(),
                    ))
                }),
            },
            Stmt::Rewrite(r) => Stmt::Rewrite(r.clone()),
            Stmt::Return(r) => Stmt::Return(r.clone()),
            Stmt::Break => Stmt::Break,
        })
        .collect()
}

/// Where a variable's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Set by `set` or by a regex's named group: the request's own value.
    Set(usize),
    /// A `map` output.
    Map(usize),
    /// A `split_clients` output.
    Split(usize),
    /// A `geo` output.
    Geo(usize),
}

/// The variables a configuration defines, shared by its servers.
#[derive(Debug, Clone, Default)]
pub struct VarDefs {
    /// By name.
    pub slots: HashMap<String, Slot>,
    /// Names of the `Set` slots, by slot (for warnings).
    pub set_names: Vec<String>,
    /// `map` blocks, by slot.
    pub maps: Vec<MapDef>,
    /// `split_clients` blocks, by slot.
    pub splits: Vec<SplitDef>,
    /// `geo` blocks, by slot.
    pub geos: Vec<GeoDef>,
}

impl VarDefs {
    /// Whether the configuration defines no variable (requests then carry no state for them).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The `Set` slot of `name`, made on first use; None when `name` is a `map` or
    /// `split_clients` output.
    pub(crate) fn set_slot(&mut self, name: &str) -> Option<usize> {
        match self.slots.get(name) {
            Some(Slot::Set(i)) => Some(*i),
            Some(_) => None,
            None => {
                let i = self.set_names.len();
                self.set_names.push(name.to_string());
                self.slots.insert(name.to_string(), Slot::Set(i));
                Some(i)
            }
        }
    }
}

/// (group, slot) of each named group of a regex location's expression.
pub(crate) fn location_captures(
    re: &Regex,
    cx: &mut Cx,
    d: &Directive,
) -> Result<Vec<(usize, usize)>, super::error::ConfError> {
    re.names()
        .into_iter()
        .map(|(group, name)| {
            let slot = cx.user_vars.set_slot(&name).ok_or_else(|| {
                super::error::ConfError::other(format!("the duplicate \"{name}\" variable"), &d.pos)
            })?;
            Ok((group, slot))
        })
        .collect()
}

/// Every variable name the tree defines (`set`, `map`, `split_clients`, named groups of
/// `rewrite`, `if` and `map` expressions), for [`super::vars::declare`].
pub(crate) fn declared_names(tree: &[Directive], out: &mut Vec<String>) {
    for d in tree {
        match d.name.as_str() {
            "set" => {
                if let Some(n) = d.args.first().and_then(|a| a.strip_prefix('$')) {
                    out.push(n.to_string());
                }
            }
            "geo" => {
                if let Some(n) = d.args.last().and_then(|a| a.strip_prefix('$')) {
                    out.push(n.to_string());
                }
            }
            "map" | "split_clients" => {
                if let Some(n) = d.args.get(1).and_then(|a| a.strip_prefix('$')) {
                    out.push(n.to_string());
                }
                if d.name == "map" {
                    for k in d.block.as_deref().unwrap_or_default() {
                        if k.name.starts_with('~') {
                            out.extend(regex::group_names(&k.name));
                        }
                    }
                }
            }
            "server_name" => {
                for a in &d.args {
                    if let Some(re) = a.strip_prefix('~') {
                        out.extend(regex::group_names(re));
                    }
                }
            }
            "rewrite" | "if" | "location" => {
                for a in &d.args {
                    out.extend(regex::group_names(a));
                }
            }
            _ => {}
        }
        if let Some(b) = &d.block {
            if d.name != "map" {
                declared_names(b, out);
            }
        }
    }
}
