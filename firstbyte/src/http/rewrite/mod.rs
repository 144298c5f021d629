//! Runs a rewrite [`Program`] for one request, as nginx's script engine: `set`, `if`,
//! `rewrite`, `return`, `break` in file order, giving a decision.
//!
//! Sans I/O: the request is an [`Env`] (its variables, its URI and arguments, its regex
//! captures and `set` variables, a file-test answer, a notice sink), so the decisions are unit
//! tested without sockets or files. The pipeline (`http::pipeline::phases`) runs the server's
//! program before choosing a location and a location's program once it is chosen, and acts
//! on the [`Outcome`]: a new location search after `last` (or a changed URI), a response for
//! a redirect or `return`, the content phase otherwise (in an `if`'s implicit location when
//! one took over).

pub mod uservars;

use std::sync::Arc;

use crate::conf::model::{LocationConf, Return};
use crate::conf::rewrite::{Captures, Cond, FileTest, Flag, Program, Rewrite, SetTarget, Stmt};
use crate::conf::vars::ComplexValue;

/// What a file test learns about a path (`stat`, following symlinks, as nginx).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileFacts {
    /// Something is there.
    pub exists: bool,
    /// A regular file.
    pub file: bool,
    /// A directory.
    pub dir: bool,
    /// Any execute bit set.
    pub exec: bool,
}

/// The request, as a program sees it.
pub trait Env {
    /// A value with the request's variables as they are now.
    fn eval(&self, v: &ComplexValue) -> String;
    /// `$uri`.
    fn uri(&self) -> &str;
    /// `$args`.
    fn args(&self) -> Option<&str>;
    /// Replaces `$uri`.
    fn set_uri(&mut self, uri: String);
    /// Replaces `$args` (None: no arguments).
    fn set_args(&mut self, args: Option<String>);
    /// Replaces `$0`, `$1`.. (empty after a regex that did not match, as nginx).
    fn set_captures(&mut self, caps: Vec<Option<String>>);
    /// Sets a `set` variable (or a named group's).
    fn set_var(&mut self, slot: usize, value: String);
    /// Facts about `path` for `-f`, `-d`, `-e`, `-x`.
    fn file(&self, path: &str) -> FileFacts;
    /// A `rewrite_log` line (notice level).
    fn notice(&self, msg: &str);
}

/// What a program decided.
#[derive(Debug)]
pub enum Action<'p> {
    /// Go on. `rematch`: the URI changed (`last`, or a `rewrite` without flag) and the
    /// location is to be found again.
    Next {
        /// Find the location again.
        rematch: bool,
    },
    /// Answer with a redirect a `rewrite` made.
    Redirect {
        /// 301 or 302.
        code: u16,
        /// The `Location`, possibly relative.
        location: String,
    },
    /// `return`.
    Return(&'p Return),
    /// Answer with this status (500: a rewritten URI of zero length).
    Status(u16),
}

/// The decision and, when an `if` in a location held, its implicit location.
#[derive(Debug)]
pub struct Outcome<'p> {
    /// What to do.
    pub action: Action<'p>,
    /// The last `if` location whose condition held.
    pub loc: Option<&'p Arc<LocationConf>>,
}

struct State<'p> {
    uri_changed: bool,
    loc: Option<&'p Arc<LocationConf>>,
    log: bool,
}

/// Runs `prog` against `env`.
pub fn run<'p, E: Env + ?Sized>(prog: &'p Program, env: &mut E) -> Outcome<'p> {
    let mut st = State {
        uri_changed: false,
        loc: None,
        log: prog.log,
    };
    let action = match exec(&prog.stmts, env, &mut st) {
        Some(a) => a,
        None => Action::Next {
            rematch: st.uri_changed,
        },
    };
    Outcome {
        action,
        loc: st.loc,
    }
}

/// Runs `stmts`; Some when one of them ends the program.
fn exec<'p, E: Env + ?Sized>(
    stmts: &'p [Stmt],
    env: &mut E,
    st: &mut State<'p>,
) -> Option<Action<'p>> {
    for s in stmts {
        match s {
            Stmt::Set { target, value } => {
                let v = env.eval(value);
                match target {
                    SetTarget::Var(slot) => env.set_var(*slot, v),
                    SetTarget::Args => env.set_args(Some(v).filter(|v| !v.is_empty())),
                }
            }
            Stmt::If { cond, body, loc } => {
                if test(cond, env, st.log) {
                    if let Some(l) = loc {
                        st.loc = Some(l);
                    }
                    if let Some(a) = exec(body, env, st) {
                        return Some(a);
                    }
                }
            }
            Stmt::Rewrite(r) => {
                if let Some(a) = rewrite(r, env, st) {
                    return Some(a);
                }
            }
            Stmt::Return(r) => return Some(Action::Return(r)),
            Stmt::Break => {
                st.uri_changed = false;
                return Some(Action::Next { rematch: false });
            }
        }
    }
    None
}

/// Matches `c` against `text`, setting the captures (cleared on a miss, as nginx).
fn matches<E: Env + ?Sized>(c: &Captures, text: &str, env: &mut E, log: bool) -> bool {
    match c.regex.captures(text) {
        Some(spans) => {
            if log {
                env.notice(&format!("\"{}\" matches \"{text}\"", c.regex.source));
            }
            let caps = crate::conf::rewrite::regex::texts(text, &spans);
            for &(group, slot) in &c.named {
                let v = caps.get(group).cloned().flatten().unwrap_or_default();
                env.set_var(slot, v);
            }
            env.set_captures(caps);
            true
        }
        None => {
            if log {
                env.notice(&format!("\"{}\" does not match \"{text}\"", c.regex.source));
            }
            env.set_captures(Vec::new());
            false
        }
    }
}

fn test<E: Env + ?Sized>(c: &Cond, env: &mut E, log: bool) -> bool {
    match c {
        Cond::Var(v) => {
            let s = env.eval(v);
            !s.is_empty() && s != "0"
        }
        Cond::Eq { var, value, neg } => (env.eval(var) == env.eval(value)) != *neg,
        Cond::Match { var, regex, neg } => {
            let text = env.eval(var);
            matches(regex, &text, env, log) != *neg
        }
        Cond::File { path, test, neg } => {
            let f = env.file(&env.eval(path));
            let yes = match test {
                FileTest::File => f.file,
                FileTest::Dir => f.dir,
                FileTest::Exists => f.exists,
                FileTest::Exec => f.exec,
            };
            yes != *neg
        }
    }
}

fn rewrite<'p, E: Env + ?Sized>(
    r: &'p Rewrite,
    env: &mut E,
    st: &mut State<'p>,
) -> Option<Action<'p>> {
    let uri = env.uri().to_string();
    if !matches(&r.regex, &uri, env, st.log) {
        return None;
    }
    let orig_args = env.args().filter(|a| !a.is_empty()).map(str::to_string);
    if let Flag::Redirect(code) = r.flag {
        let mut location = env.eval(&r.uri);
        if let (true, Some(a)) = (r.add_args, &orig_args) {
            location.push(if r.args.is_some() { '&' } else { '?' });
            location.push_str(a);
        }
        if st.log {
            env.notice(&format!("rewritten redirect: \"{location}\""));
        }
        return Some(Action::Redirect { code, location });
    }
    let new_uri = env.eval(&r.uri);
    let new_args = match &r.args {
        Some(a) => {
            let mut v = env.eval(a);
            if let (true, Some(o)) = (r.add_args, &orig_args) {
                v.push('&');
                v.push_str(o);
            }
            Some(v)
        }
        None if r.add_args => orig_args,
        None => None,
    };
    if st.log {
        env.notice(&format!(
            "rewritten data: \"{new_uri}\", args: \"{}\"",
            new_args.as_deref().unwrap_or("")
        ));
    }
    if new_uri.is_empty() {
        crate::fblog!(Error, "the rewritten URI has a zero length");
        return Some(Action::Status(500));
    }
    env.set_uri(new_uri);
    env.set_args(new_args.filter(|a| !a.is_empty()));
    match r.flag {
        Flag::None => {
            st.uri_changed = true;
            None
        }
        Flag::Last => {
            st.uri_changed = true;
            Some(Action::Next { rematch: true })
        }
        Flag::Break | Flag::Redirect(_) => {
            st.uri_changed = false;
            Some(Action::Next { rematch: false })
        }
    }
}

#[cfg(test)]
mod tests;
