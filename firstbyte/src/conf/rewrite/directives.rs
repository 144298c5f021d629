//! The rewrite module's directives: `set`, `rewrite`, `return`, `break`, `if`, `rewrite_log`,
//! `uninitialized_variable_warn`, with nginx's checks and messages.

use super::super::args::{flag, once, value, R};
use super::super::error::ConfError;
use super::super::model::Return;
use super::super::parse::Directive;
use super::super::settings::{Cx, Here, LocSettings};
use super::super::table::{Handler, LOCATION, SERVER};
use super::super::vars::{self, ComplexValue};
use super::regex::Regex;
use super::{Captures, Cond, FileTest, Flag, IfLoc, Rewrite, SetTarget, Stmt};

fn other(d: &Directive, msg: String) -> ConfError {
    ConfError::other(msg, &d.pos)
}

/// `set $var value`.
pub(crate) fn set(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let name = &d.args[0];
    let Some(var) = name.strip_prefix('$').filter(|v| !v.is_empty()) else {
        return Err(other(d, format!("invalid variable name \"{name}\"")));
    };
    let dup = || other(d, format!("the duplicate \"{var}\" variable"));
    let target = if var == "args" {
        SetTarget::Args
    } else if var == "limit_rate" {
        SetTarget::LimitRate
    } else if vars::KNOWN.contains(&var) {
        return Err(dup());
    } else {
        SetTarget::Var(cx.user_vars.set_slot(var).ok_or_else(dup)?)
    };
    let value = value(d, &d.args[1])?;
    s.rewrite.stmts.push(Stmt::Set { target, value });
    Ok(())
}

/// A regex whose named groups become `set` variables.
pub(super) fn captures(
    re: &str,
    caseless: bool,
    d: &Directive,
    cx: &mut Cx,
) -> Result<Captures, ConfError> {
    let regex = Regex::compile(re, caseless, &d.pos)?;
    let mut named = Vec::new();
    for (group, name) in regex.names() {
        let slot = cx
            .user_vars
            .set_slot(&name)
            .ok_or_else(|| other(d, format!("the duplicate \"{name}\" variable")))?;
        named.push((group, slot));
    }
    Ok(Captures { regex, named })
}

/// Whether a replacement or `return` URL makes a redirect (nginx's test, on the text as
/// written).
fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://") || s.starts_with("$scheme")
}

/// `rewrite regex replacement [last|break|redirect|permanent]`.
pub(crate) fn rewrite(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let mut repl = d.args[1].as_str();
    if repl.is_empty() {
        return Err(other(d, "empty replacement".into()));
    }
    let mut flag = if is_url(repl) {
        Flag::Redirect(302)
    } else {
        Flag::None
    };
    if let Some(f) = d.args.get(2) {
        flag = match f.as_str() {
            "last" => Flag::Last,
            "break" => Flag::Break,
            "redirect" => Flag::Redirect(302),
            "permanent" => Flag::Redirect(301),
            _ => return Err(other(d, format!("invalid parameter \"{f}\""))),
        };
        // A URL replacement redirects whatever the flag (nginx sets `redirect` first and
        // `last`/`break` only add to it).
        if is_url(repl) && !matches!(flag, Flag::Redirect(_)) {
            flag = Flag::Redirect(302);
        }
    }
    // A last "?" drops the request's arguments.
    let add_args = match repl.strip_suffix('?') {
        Some(r) => {
            repl = r;
            false
        }
        None => true,
    };
    let regex = captures(&d.args[0], false, d, cx)?;
    let (uri, args) = match (flag, repl.split_once('?')) {
        (Flag::Redirect(_), _) | (_, None) => (value(d, repl)?, None),
        (_, Some((u, a))) => (value(d, u)?, Some(value(d, a)?)),
    };
    // A redirect's arguments are joined with "&" when the replacement has its own.
    let args = match (flag, repl.contains('?')) {
        (Flag::Redirect(_), true) => Some(ComplexValue::default()),
        _ => args,
    };
    s.rewrite.stmts.push(Stmt::Rewrite(Box::new(Rewrite {
        regex,
        uri,
        args,
        add_args,
        flag,
    })));
    Ok(())
}

/// `return CODE [TEXT|URL]` or `return URL`.
pub(crate) fn ret(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let first = d.args[0].as_str();
    let bad_code = || other(d, format!("invalid return code \"{first}\""));
    let r = if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
        match first.parse::<u16>() {
            Ok(code) if code <= 999 => Return {
                code,
                value: d.args.get(1).map(|v| value(d, v)).transpose()?,
            },
            _ => return Err(bad_code()),
        }
    } else if d.args.len() == 1 && is_url(first) {
        // `return URL`: a temporary redirect, as nginx.
        Return {
            code: 302,
            value: Some(value(d, first)?),
        }
    } else {
        return Err(bad_code());
    };
    s.rewrite.stmts.push(Stmt::Return(r));
    Ok(())
}

/// `break`.
pub(crate) fn brk(s: &mut LocSettings, _: &Directive, _: &mut Cx) -> R {
    s.rewrite.stmts.push(Stmt::Break);
    Ok(())
}

/// `rewrite_log on|off`.
pub(crate) fn rewrite_log(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.rewrite.log, d)?;
    s.rewrite.log = Some(flag(d)?);
    Ok(())
}

/// `uninitialized_variable_warn on|off`.
pub(crate) fn uninitialized_variable_warn(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.rewrite.warn_uninit, d)?;
    s.rewrite.warn_uninit = Some(flag(d)?);
    Ok(())
}

/// Where an `if` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfIn {
    /// In a `server {}`: rewrite directives only (nginx's `NGX_HTTP_SIF_CONF`).
    Server,
    /// In a `location {}`: also the directives nginx marks `NGX_HTTP_LIF_CONF` that
    /// firstbyte has.
    Location,
}

/// The rewrite module's directives, allowed in any `if`.
const REWRITE: &[&str] = &[
    "set",
    "rewrite",
    "return",
    "break",
    "rewrite_log",
    "uninitialized_variable_warn",
];

/// Other directives nginx allows in an `if` in a location, that firstbyte has. (nginx's
/// list also has `expires`, `limit_rate`, `charset`, `ssi`, `post_action` and the `*_pass`
/// directives other than `proxy_pass` and `fastcgi_pass`, which firstbyte does not have: those stay "not allowed here" or
/// "not supported" as anywhere else.)
const IN_LOCATION_IF: &[&str] = &[
    "root",
    "add_header",
    "proxy_pass",
    "fastcgi_pass",
    "access_log",
    "error_page",
    "gzip",
    "sendfile",
];

/// `if (condition) { ... }` in a server or a location.
pub(crate) fn if_block(s: &mut LocSettings, d: &Directive, cx: &mut Cx, at: IfIn) -> R {
    let cond = condition(d, cx)?;
    let mut inner = LocSettings {
        // The implicit location is like a regex one: `proxy_pass` inside may have no URI part.
        here: Here {
            prefix: s.here.prefix.clone(),
            regex: true,
            named: false,
        },
        ..Default::default()
    };
    let ctx = match at {
        IfIn::Server => SERVER,
        IfIn::Location => LOCATION,
    };
    let mut own = false;
    for c in d.block.as_deref().unwrap_or_default() {
        let spec = super::super::build::spec_for(c, ctx)?;
        let rewrite = REWRITE.contains(&c.name.as_str());
        let allowed =
            rewrite || (at == IfIn::Location && IN_LOCATION_IF.contains(&c.name.as_str()));
        match spec.handler {
            Handler::Loc(f) if allowed => f(&mut inner, c, cx)?,
            _ => {
                return Err(ConfError::NotAllowedHere {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
        }
        own |= !rewrite;
    }
    let body = std::mem::take(&mut inner.rewrite.stmts);
    let handler = inner.proxy.pass.is_some() || inner.fastcgi.pass.is_some();
    let loc = match at {
        IfIn::Server => None,
        IfIn::Location => {
            if own {
                inner.proxy.resolve(cx)?;
                let proxied = inner.proxy.pass.is_some();
                inner.fastcgi.resolve(cx, proxied)?;
            }
            Some(Box::new(IfLoc {
                settings: inner,
                pos: d.pos.clone(),
            }))
        }
    };
    s.rewrite.stmts.push(Stmt::If {
        cond,
        body,
        loc,
        handler,
    });
    Ok(())
}

/// The condition of `if`, from its arguments as nginx splits them: `($a`, `=`, `b)`.
fn condition(d: &Directive, cx: &mut Cx) -> Result<Cond, ConfError> {
    let invalid = |v: &str| other(d, format!("invalid condition \"{v}\""));
    let mut args: Vec<&str> = d.args.iter().map(String::as_str).collect();
    let first = args[0];
    if !first.starts_with('(') {
        return Err(invalid(first));
    }
    if first == "(" {
        args.remove(0);
    } else {
        args[0] = &first[1..];
    }
    let Some(last) = args.last().copied() else {
        return Err(invalid(first));
    };
    if !last.ends_with(')') {
        return Err(invalid(last));
    }
    if last == ")" {
        args.pop();
    } else {
        let n = args.len() - 1;
        args[n] = &last[..last.len() - 1];
    }
    let Some(&cur) = args.first() else {
        return Err(invalid(last));
    };
    if cur.len() > 1 && cur.starts_with('$') {
        let var = value(d, cur)?;
        match args.as_slice() {
            [_] => return Ok(Cond::Var(var)),
            [_, op, v] => {
                let (neg, caseless) = match *op {
                    "=" => {
                        return Ok(Cond::Eq {
                            var,
                            value: value(d, v)?,
                            neg: false,
                        })
                    }
                    "!=" => {
                        return Ok(Cond::Eq {
                            var,
                            value: value(d, v)?,
                            neg: true,
                        })
                    }
                    "~" => (false, false),
                    "~*" => (false, true),
                    "!~" => (true, false),
                    "!~*" => (true, true),
                    _ => return Err(other(d, format!("unexpected \"{op}\" in condition"))),
                };
                return Ok(Cond::Match {
                    var,
                    regex: captures(v, caseless, d, cx)?,
                    neg,
                });
            }
            _ => return Err(invalid(cur)),
        }
    }
    let (neg, op) = match cur.strip_prefix('!') {
        Some(op) => (true, op),
        None => (false, cur),
    };
    let test = match op {
        "-f" => FileTest::File,
        "-d" => FileTest::Dir,
        "-e" => FileTest::Exists,
        "-x" => FileTest::Exec,
        _ => return Err(invalid(cur)),
    };
    match args.as_slice() {
        [_, path] => Ok(Cond::File {
            path: value(d, path)?,
            test,
            neg,
        }),
        _ => Err(invalid(cur)),
    }
}
