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

/// What a file test learns about a path (`stat`, following symlinks, as nginx; under
/// `disable_symlinks on|if_not_owner`, what the checked walk opens).
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
    /// `set $limit_rate SIZE`: the request's rate from now on.
    fn set_limit_rate(&mut self, _size: &str) {}
    /// Replaces `$0`, `$1`.. (empty after a regex that did not match, as nginx).
    fn set_captures(&mut self, caps: Vec<Option<String>>);
    /// Sets a `set` variable (or a named group's).
    fn set_var(&mut self, slot: usize, value: String);
    /// Facts about `path` for `-f`, `-d`, `-e`, `-x`.
    fn file(&self, path: &str) -> FileFacts;
    /// A `rewrite_log` line (notice level).
    fn notice(&self, msg: &str);
    /// One variable's value ("" when unset).
    fn var(&self, name: &str) -> String;
    /// The request target had `%XX` or `+` in its path (nginx's `quoted_uri`,
    /// `plus_in_uri`): captures are escaped again where they land in arguments.
    fn quoted_uri(&self) -> bool;
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
    /// The last `if` location whose condition held and that has a content handler of its
    /// own (`proxy_pass`, `fastcgi_pass`): nginx's `r->content_handler` comes from it.
    pub handler: Option<&'p Arc<LocationConf>>,
    /// False when the URI changed and the location stays (`break`): `proxy_pass` then sends
    /// the whole new URI instead of replacing the location's prefix (nginx's
    /// `valid_location`).
    pub valid_location: bool,
}

struct State<'p> {
    uri_changed: bool,
    loc: Option<&'p Arc<LocationConf>>,
    handler: Option<&'p Arc<LocationConf>>,
    log: bool,
    valid_location: bool,
    caps: Vec<Option<String>>,
}

/// Runs `prog` against `env`.
pub fn run<'p, E: Env + ?Sized>(prog: &'p Program, env: &mut E) -> Outcome<'p> {
    let mut st = State {
        uri_changed: false,
        loc: None,
        handler: None,
        log: prog.log,
        valid_location: true,
        caps: Vec::new(),
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
        handler: st.handler,
        valid_location: st.valid_location,
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
                    SetTarget::LimitRate => env.set_limit_rate(&v),
                }
            }
            Stmt::If {
                cond,
                body,
                loc,
                handler,
            } => {
                if test(cond, env, st.log) {
                    if let Some(l) = loc {
                        st.loc = Some(l);
                        if *handler {
                            st.handler = Some(l);
                        }
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
                if st.uri_changed {
                    st.valid_location = false;
                }
                st.uri_changed = false;
                return Some(Action::Next { rematch: false });
            }
        }
    }
    None
}

/// Matches `c` against `text`, setting the captures (cleared on a miss, as nginx); the
/// captures when it matched.
fn matches<E: Env + ?Sized>(
    c: &Captures,
    text: &str,
    env: &mut E,
    log: bool,
) -> Option<Vec<Option<String>>> {
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
            env.set_captures(caps.clone());
            Some(caps)
        }
        None => {
            if log {
                env.notice(&format!("\"{}\" does not match \"{text}\"", c.regex.source));
            }
            env.set_captures(Vec::new());
            None
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
            matches(regex, &text, env, log).is_some() != *neg
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
    st.caps = matches(&r.regex, &uri, env, st.log)?;
    let orig_args = env.args().filter(|a| !a.is_empty()).map(str::to_string);
    let quoted = env.quoted_uri();
    if let Flag::Redirect(code) = r.flag {
        // Captures escaped, then the whole unescaped as nginx's NGX_UNESCAPE_REDIRECT: a
        // `%0D%0A` in a variable stays escaped (no header splitting).
        let mut location = unescape_redirect(&eval_captures(&r.uri, env, &st.caps, quoted));
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
            let mut v = eval_captures(a, env, &st.caps, quoted);
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
            st.valid_location = false;
            Some(Action::Next { rematch: false })
        }
    }
}

/// Evaluates `v`, escaping each capture with nginx's `NGX_ESCAPE_ARGS` when the request
/// URI was quoted (a decoded `%26` must not become an argument separator).
fn eval_captures<E: Env + ?Sized>(
    v: &ComplexValue,
    env: &E,
    caps: &[Option<String>],
    quoted: bool,
) -> String {
    use crate::conf::vars::Part;
    if !quoted {
        return env.eval(v);
    }
    let mut out = String::new();
    for p in v.parts() {
        match p {
            Part::Lit(s) => out.push_str(s),
            Part::Var(name) => match name.parse::<usize>() {
                Ok(n) => escape_args(
                    caps.get(n).and_then(|c| c.as_deref()).unwrap_or(""),
                    &mut out,
                ),
                Err(_) => out.push_str(&env.var(name)),
            },
        }
    }
    out
}

/// nginx's `ngx_escape_uri(.., NGX_ESCAPE_ARGS)`: controls, space, `"`, `#`, `%`, `&`,
/// `+`, `;`, `<`, `>`, `?`, `\`, `^`, `` ` ``, `{`, `|`, `}`, DEL and non-ASCII as `%XX`.
pub fn escape_args(s: &str, out: &mut String) {
    for b in s.bytes() {
        let esc = !(0x20..0x7f).contains(&b)
            || matches!(
                b,
                b' ' | b'"'
                    | b'#'
                    | b'%'
                    | b'&'
                    | b'+'
                    | b';'
                    | b'<'
                    | b'>'
                    | b'?'
                    | b'\\'
                    | b'^'
                    | b'`'
                    | b'{'
                    | b'|'
                    | b'}'
            );
        if esc {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
}

/// nginx's `ngx_unescape_uri(.., NGX_UNESCAPE_REDIRECT)`: `%XX` becomes its character when
/// that is past `%` and before DEL (so `%0D%0A`, `%20`, `%25` stay escaped), up to the first
/// literal `?`, after which the rest is kept as it is.
pub fn unescape_redirect(s: &str) -> String {
    let b = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'?' => {
                out.extend_from_slice(&b[i..]);
                break;
            }
            b'%' if b.len() - i >= 3 => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        let ch = (h * 16 + l) as u8;
                        if ch > b'%' && ch < 0x7f {
                            out.push(ch);
                        } else {
                            out.extend_from_slice(&b[i..i + 3]);
                        }
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
