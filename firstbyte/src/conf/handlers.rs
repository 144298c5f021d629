//! The hand-written main and location-level handlers (http, server, location): directives
//! whose parsing is special (`error_log`, `root`/`alias`, `index`, `try_files`, `return`,
//! `add_header`, `error_page`, `access_log`, `allow`/`deny`, `types {}`, `log_format`).
//! Plain-valued ones come from the lists in `directives.rs`; server-level ones (TLS,
//! sockets) are in `server_handlers.rs`, `listen` and `server_name` in `server_head.rs`; the
//! argument helpers in `args.rs` (re-exported here as `R` for the existing callers).
//!
//! The table (`table.rs`) names these functions; the walker (`build.rs`) has already checked
//! the context, the block and the argument count, so a handler validates values only. Each
//! single-value directive refuses a second setting in the same block (`"x" directive is
//! duplicate`); array-like ones (`add_header`, `allow`, `access_log`, ...) accumulate.

use std::net::IpAddr;
use std::sync::Arc;

pub(crate) use super::args::R;
use super::args::{arg0, invalid, number, once, param, unsupported, value};
use super::cx::Cx;
use super::error::ConfError;
use super::model::{
    AccessRule, AddHeader, DocRoot, ErrorLog, ErrorPage, Expires, LogEscape, LogFormat, LogLevel,
    LogTarget, Net, TryFallback, TryFiles,
};
use super::parse::Directive;
use super::settings::{AccessLogSet, LocSettings, MainSettings, RootSet};
use super::units;

// ---- main and events ----

/// `error_log FILE|stderr [LEVEL]` (several allowed).
pub(crate) fn error_log(m: &mut MainSettings, d: &Directive, cx: &mut Cx) -> R {
    let file = arg0(d);
    let target = if file == "stderr" {
        LogTarget::Stderr
    } else if file.starts_with("syslog:") || file.starts_with("memory:") {
        return Err(unsupported(d, format!("\"error_log\" to \"{file}\"")));
    } else {
        LogTarget::File(cx.prefixed(file))
    };
    let level = match d.args.get(1).map(String::as_str) {
        None => LogLevel::Error,
        Some(l) => match l {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "notice" => LogLevel::Notice,
            "warn" => LogLevel::Warn,
            "error" => LogLevel::Error,
            "crit" => LogLevel::Crit,
            "alert" => LogLevel::Alert,
            "emerg" => LogLevel::Emerg,
            _ => {
                return Err(ConfError::other(
                    format!("invalid log level \"{l}\""),
                    &d.pos,
                ))
            }
        },
    };
    m.error_log.push(ErrorLog { target, level });
    Ok(())
}

// ---- http: log formats ----

/// `log_format NAME [escape=default|json|none] STRING ...`.
pub(crate) fn log_format(cx: &mut Cx, d: &Directive) -> R {
    let name = arg0(d).to_string();
    if cx.log_formats.contains_key(&name) {
        return Err(ConfError::other(
            format!("duplicate \"log_format\" name \"{name}\""),
            &d.pos,
        ));
    }
    let mut rest = &d.args[1..];
    let mut escape = LogEscape::Default;
    if let Some(e) = rest.first().and_then(|a| a.strip_prefix("escape=")) {
        escape = match e {
            "default" => LogEscape::Default,
            "json" => LogEscape::Json,
            "none" => LogEscape::None,
            _ => {
                return Err(ConfError::other(
                    format!("unknown log format escaping \"{e}\""),
                    &d.pos,
                ))
            }
        };
        rest = &rest[1..];
    }
    if rest.is_empty() {
        return Err(ConfError::ArgCount {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    let fmt = LogFormat {
        name: name.clone(),
        escape,
        value: value(d, &rest.concat())?,
    };
    cx.log_formats.insert(name, Arc::new(fmt));
    Ok(())
}

// ---- location level (http, server, location) ----

/// `root PATH`.
pub(crate) fn root(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    doc_root(s, d, cx, false)
}

/// `alias PATH`.
pub(crate) fn alias(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    doc_root(s, d, cx, true)
}

fn doc_root(s: &mut LocSettings, d: &Directive, cx: &mut Cx, alias: bool) -> R {
    if let Some(prev) = &s.root {
        let prev_alias = matches!(prev.root, DocRoot::Alias(_));
        if prev_alias == alias {
            return Err(ConfError::Duplicate {
                name: d.name.clone(),
                pos: d.pos.clone(),
            });
        }
        return Err(ConfError::DuplicateRoot {
            name: d.name.clone(),
            earlier: if prev_alias { "alias" } else { "root" }.into(),
            pos: d.pos.clone(),
        });
    }
    if alias && s.here.named {
        return Err(ConfError::other(
            "the \"alias\" directive cannot be used inside the named location",
            &d.pos,
        ));
    }
    let mut path = arg0(d);
    if !alias && path.len() > 1 {
        // nginx drops one trailing slash of a root.
        path = path.strip_suffix('/').unwrap_or(path);
    }
    let full = if path.starts_with('$') {
        path.to_string()
    } else {
        cx.prefixed(path).to_string_lossy().into_owned()
    };
    let v = value(d, &full)?;
    s.root = Some(RootSet {
        root: if alias {
            DocRoot::Alias(v)
        } else {
            DocRoot::Root(v)
        },
        alias_prefix: s.here.prefix.clone(),
        alias_whole: alias && s.here.regex,
    });
    Ok(())
}

/// `index FILE ...` (several directives add up, as nginx).
pub(crate) fn index(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let mut files = Vec::with_capacity(d.args.len());
    for a in &d.args {
        if a.is_empty() {
            return Err(ConfError::other(
                "index \"\" in \"index\" directive is invalid",
                &d.pos,
            ));
        }
        files.push(value(d, a)?);
    }
    s.index.get_or_insert_with(Vec::new).extend(files);
    Ok(())
}

/// `try_files FILE ... =CODE|@NAME|URI`.
pub(crate) fn try_files(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.try_files, d)?;
    let Some((last, files)) = d.args.split_last() else {
        return Err(invalid(d));
    };
    let fallback = if let Some(code) = last.strip_prefix('=') {
        match number::<u16>(d, code) {
            Ok(c) if (100..=999).contains(&c) => TryFallback::Code(c),
            _ => return Err(ConfError::other(format!("invalid code \"{last}\""), &d.pos)),
        }
    } else if last.starts_with('@') {
        TryFallback::Named(last.clone())
    } else {
        TryFallback::Uri(value(d, last)?)
    };
    let files = files
        .iter()
        .map(|f| value(d, f))
        .collect::<Result<_, _>>()?;
    s.try_files = Some(TryFiles { files, fallback });
    Ok(())
}

/// `add_header NAME VALUE [always]`.
pub(crate) fn add_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let h = added_field(d)?;
    s.add_header.get_or_insert_with(Vec::new).push(h);
    Ok(())
}

/// `add_trailer NAME VALUE [always]`.
pub(crate) fn add_trailer(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let h = added_field(d)?;
    s.add_trailer.get_or_insert_with(Vec::new).push(h);
    Ok(())
}

/// The field of `add_header` or `add_trailer`.
fn added_field(d: &Directive) -> Result<AddHeader, ConfError> {
    let always = match d.args.get(2).map(String::as_str) {
        None => false,
        Some("always") => true,
        Some(p) => return Err(param(d, p)),
    };
    let name = arg0(d).to_string();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(ConfError::other(
            format!("invalid header name \"{name}\""),
            &d.pos,
        ));
    }
    Ok(AddHeader {
        name,
        value: value(d, &d.args[1])?,
        always,
    })
}

/// `error_page CODE ... [=[RESPONSE]] URI`.
pub(crate) fn error_page(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let Some((uri, rest)) = d.args.split_last() else {
        return Err(invalid(d));
    };
    let (codes, response) = match rest.split_last() {
        Some((eq, codes)) if eq.starts_with('=') => {
            let r = match &eq[1..] {
                "" => None,
                c => match number::<u16>(d, c) {
                    Ok(n) if (100..=999).contains(&n) => Some(n),
                    _ => return Err(ConfError::other(format!("invalid value \"{eq}\""), &d.pos)),
                },
            };
            (codes, Some(r))
        }
        _ => (rest, None),
    };
    if codes.is_empty() {
        return Err(ConfError::ArgCount {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    let mut list = Vec::with_capacity(codes.len());
    for c in codes {
        let n = number::<u16>(d, c)
            .map_err(|_| ConfError::other(format!("invalid value \"{c}\""), &d.pos))?;
        if !(300..=599).contains(&n) {
            return Err(ConfError::other(
                format!("value \"{c}\" must be between 300 and 599"),
                &d.pos,
            ));
        }
        list.push(n);
    }
    let page = ErrorPage {
        codes: list,
        response,
        uri: value(d, uri)?,
    };
    s.error_page.get_or_insert_with(Vec::new).push(page);
    Ok(())
}

pub(crate) use super::log_cache::parse as open_log_file_cache;
pub(crate) use super::open_file_cache::parse as open_file_cache;

/// `access_log PATH [FORMAT [buffer=SIZE] [flush=TIME]] | off`.
pub(crate) fn access_log(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let set = s.access_log.get_or_insert_with(AccessLogSet::default);
    let path = arg0(d);
    if path == "off" {
        if let Some(p) = d.args.get(1) {
            return Err(param(d, p));
        }
        set.off = true;
        return Ok(());
    }
    let target = if path == "stderr" {
        LogTarget::Stderr
    } else if path.starts_with("syslog:") {
        return Err(unsupported(d, "\"access_log\" to syslog".into()));
    } else if path.contains('$') {
        let full = cx.prefixed(path);
        let full = full.to_str().ok_or_else(|| invalid(d))?;
        LogTarget::Variable(value(d, full)?)
    } else {
        LogTarget::File(cx.prefixed(path))
    };
    let format = match d.args.get(1) {
        None => "combined",
        Some(f) => f.as_str(),
    };
    let format = cx
        .log_formats
        .get(format)
        .cloned()
        .ok_or_else(|| ConfError::other(format!("unknown log format \"{format}\""), &d.pos))?;
    let (mut buffer, mut flush, mut condition, mut gzip) = (None, None, None, None);
    for p in d.args.iter().skip(2) {
        if let Some(v) = p.strip_prefix("buffer=") {
            let n = units::size(v)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| ConfError::other(format!("invalid buffer size \"{v}\""), &d.pos))?;
            buffer = Some(n);
        } else if let Some(v) = p.strip_prefix("flush=") {
            let t = units::time(v)
                .ok_or_else(|| ConfError::other(format!("invalid flush time \"{v}\""), &d.pos))?;
            flush = Some(t);
        } else if let Some(v) = p.strip_prefix("if=") {
            condition = Some(super::args::value(d, v)?);
        } else if p == "gzip" {
            // nginx's default level.
            gzip = Some(1);
        } else if let Some(v) = p.strip_prefix("gzip=") {
            gzip = Some(
                v.parse::<u32>()
                    .ok()
                    .filter(|l| (1..=9).contains(l))
                    .ok_or_else(|| {
                        ConfError::other(format!("invalid compression level \"{v}\""), &d.pos)
                    })?,
            );
        } else {
            return Err(param(d, p));
        }
    }
    if gzip.is_some() && !matches!(target, LogTarget::File(_)) {
        return Err(ConfError::other(
            format!("gzip is not supported for access_log \"{path}\""),
            &d.pos,
        ));
    }
    // nginx: a buffer is written when full or flushed, to one file; a path with variables
    // names a file per request.
    if matches!(target, LogTarget::Variable(_)) && (buffer.is_some() || gzip.is_some()) {
        return Err(ConfError::other(
            "buffered logs cannot have variables in name",
            &d.pos,
        ));
    }
    if flush.is_some() && buffer.is_none() && gzip.is_none() {
        return Err(ConfError::other(
            format!("no buffer is defined for access_log \"{path}\""),
            &d.pos,
        ));
    }
    set.logs.push(super::model::AccessLogTarget {
        target,
        format,
        buffer,
        flush,
        condition,
        gzip,
    });
    Ok(())
}

/// `expires [modified] TIME|@TIME|epoch|max|off`, as nginx's `ngx_http_parse_expires`.
pub(crate) fn expires(d: &Directive, _: &mut Cx) -> Result<Expires, ConfError> {
    let (modified, v) = match d.args.as_slice() {
        [v] => (false, v.as_str()),
        [m, v] if m == "modified" => (true, v.as_str()),
        _ => return Err(invalid(d)),
    };
    if v.contains('$') {
        let value = super::args::value(d, v)?;
        return Ok(Expires::Var {
            modified,
            value: std::sync::Arc::new(value),
        });
    }
    parse_expires(modified, v).map_err(|e| match e {
        None => invalid(d),
        Some(msg) => ConfError::other(msg, &d.pos),
    })
}

/// An `expires` value (with `modified` or not) as nginx reads it: `epoch`, `max`, `off`,
/// `[+|-]TIME`, `@TIME`. `Err(Some(msg))`: nginx's message; `Err(None)`: "invalid value".
/// Also used per response for a value with variables.
pub fn parse_expires(modified: bool, v: &str) -> Result<Expires, Option<&'static str>> {
    if !modified {
        match v {
            "epoch" => return Ok(Expires::Epoch),
            "max" => return Ok(Expires::Max),
            "off" => return Ok(Expires::Off),
            _ => {}
        }
    }
    let (daily, minus, t) = if let Some(t) = v.strip_prefix('@') {
        if modified {
            return Err(Some(
                "\"expires\" directive daily time cannot be used with \"modified\" parameter",
            ));
        }
        (true, false, t)
    } else if let Some(t) = v.strip_prefix('+') {
        (false, false, t)
    } else if let Some(t) = v.strip_prefix('-') {
        (false, true, t)
    } else {
        (false, false, v)
    };
    let secs = units::time(t)
        .and_then(|t| i64::try_from(t.as_secs()).ok())
        .ok_or(None)?;
    if daily {
        if secs > 24 * 60 * 60 {
            return Err(Some(
                "\"expires\" directive daily time value must be less than 24 hours",
            ));
        }
        return Ok(Expires::Daily(secs));
    }
    let secs = if minus { -secs } else { secs };
    Ok(if modified {
        Expires::Modified(secs)
    } else {
        Expires::Access(secs)
    })
}

/// `allow ADDR|CIDR|all`.
pub(crate) fn allow(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    access_rule(s, d, cx, true)
}

/// `lingering_close off`: what firstbyte does; `on` and `always` (nginx's lingering read
/// before closing) are refused, not ignored.
pub(crate) fn lingering_close(_: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    match arg0(d) {
        "off" => Ok(()),
        "on" | "always" => Err(ConfError::UnsupportedParam {
            what: format!("\"lingering_close {}\"", arg0(d)),
            pos: d.pos.clone(),
        }),
        _ => Err(ConfError::InvalidValue {
            name: d.name.clone(),
            pos: d.pos.clone(),
        }),
    }
}

/// `deny ADDR|CIDR|all`.
pub(crate) fn deny(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    access_rule(s, d, cx, false)
}

fn access_rule(s: &mut LocSettings, d: &Directive, cx: &mut Cx, allow: bool) -> R {
    let a = arg0(d);
    let net = if a == "all" {
        Net::All
    } else if a == "unix:" {
        Net::Unix
    } else {
        let (addr, bits) = match a.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits)),
            None => (a, None),
        };
        let ip: IpAddr = addr.parse().map_err(|_| param(d, a))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => match number::<u8>(d, b) {
                Ok(n) if n <= max => n,
                _ => return Err(param(d, a)),
            },
        };
        let masked = mask(ip, bits);
        if masked != ip {
            cx.warn(format!("low address bits of {a} are meaningless"), &d.pos);
        }
        Net::Cidr(masked, bits)
    };
    s.access
        .get_or_insert_with(Vec::new)
        .push(AccessRule { allow, net });
    Ok(())
}

pub(super) fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

/// `types { MIME EXT ...; ... }` (a second block at one level adds to the first, as nginx).
pub(crate) fn types(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let map = Arc::make_mut(s.types.get_or_insert_with(Default::default));
    for t in d.block.as_deref().unwrap_or_default() {
        if t.block.is_some() {
            return Err(ConfError::NotTerminated {
                name: t.name.clone(),
                pos: t.pos.clone(),
            });
        }
        if t.args.is_empty() {
            return Err(ConfError::ArgCount {
                name: t.name.clone(),
                pos: t.pos.clone(),
            });
        }
        for ext in &t.args {
            let ext = ext.to_ascii_lowercase();
            if let Some(prev) = map.insert(ext.clone(), t.name.clone()) {
                if prev != t.name {
                    cx.warn(
                        format!(
                            "duplicate extension \"{ext}\", content type: \"{}\", previous content type: \"{prev}\"",
                            t.name
                        ),
                        &t.pos,
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::conf::table::compression_set::gzip_comp_level;
    use crate::conf::testutil::cx;

    fn dir(name: &str, args: &[&str]) -> Directive {
        crate::conf::testutil::directive(name, args, 3)
    }

    #[test]
    fn choices_are_worded_with_the_list() {
        let d = dir("gzip_comp_level", &["10"]);
        let e = gzip_comp_level(&mut LocSettings::default(), &d, &mut cx()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value \"10\" in \"gzip_comp_level\" directive, it must be between 1 and 9 in /t.conf:3"
        );
    }

    #[test]
    fn access_rules_mask_and_warn() {
        let mut s = LocSettings::default();
        let mut c = cx();
        allow(&mut s, &dir("allow", &["10.1.2.3/8"]), &mut c).unwrap();
        deny(&mut s, &dir("deny", &["all"]), &mut c).unwrap();
        allow(&mut s, &dir("allow", &["2001:db8::/32"]), &mut c).unwrap();
        let rules = s.access.unwrap();
        assert_eq!(rules[0].net, Net::Cidr("10.0.0.0".parse().unwrap(), 8));
        assert_eq!(
            rules[1],
            AccessRule {
                allow: false,
                net: Net::All
            }
        );
        assert_eq!(rules[2].net, Net::Cidr("2001:db8::".parse().unwrap(), 32));
        assert_eq!(
            c.warnings,
            ["low address bits of 10.1.2.3/8 are meaningless in /t.conf:3"]
        );
        let e = allow(
            &mut LocSettings::default(),
            &dir("allow", &["10.0.0.0/33"]),
            &mut c,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "invalid parameter \"10.0.0.0/33\" in /t.conf:3"
        );
    }

    #[test]
    fn error_page_forms() {
        let mut c = cx();
        let mut s = LocSettings::default();
        error_page(
            &mut s,
            &dir("error_page", &["404", "500", "/err.html"]),
            &mut c,
        )
        .unwrap();
        error_page(
            &mut s,
            &dir("error_page", &["404", "=200", "/empty"]),
            &mut c,
        )
        .unwrap();
        error_page(
            &mut s,
            &dir("error_page", &["502", "=", "@fallback"]),
            &mut c,
        )
        .unwrap();
        let p = s.error_page.unwrap();
        assert_eq!(p[0].codes, [404, 500]);
        assert_eq!(p[0].response, None);
        assert_eq!(p[1].response, Some(Some(200)));
        assert_eq!(p[2].response, Some(None));
        let e = error_page(
            &mut LocSettings::default(),
            &dir("error_page", &["200", "/x"]),
            &mut c,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "value \"200\" must be between 300 and 599 in /t.conf:3"
        );
    }
}
