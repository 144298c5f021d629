//! Reading arguments: the helpers every handler uses (`once`, `flag`, `time`, `size`,
//! `number`, ...) and the value parsers the declarative lists (`directives.rs`) name.
//!
//! A value parser has one shape, `fn(&Directive, &mut Cx) -> Result<T, ConfError>`: the
//! walker has checked the argument count, so it reads the arguments, validates them with
//! nginx's wording, and gives the value the level's field holds. This module sits below the
//! settings and the handlers and imports neither.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::cx::Cx;
use super::error::ConfError;
use super::model::{
    AutoindexFormat, BodyInFileOnly, CertificateCache, DisableSymlinks, GzipDisable, GzipProxied,
    GzipStatic, SizeValue, Symlinks, User, WorkerProcesses,
};
use super::parse::Directive;
use super::units;
use super::vars::ComplexValue;

/// What a handler returns.
pub(crate) type R = Result<(), ConfError>;

/// 10 s: nginx's default `inactive=` of `ssl_certificate_cache`.
pub(crate) const CACHE_INACTIVE: Duration = Duration::from_secs(10);
/// 60 s: nginx's default `valid=` of `ssl_certificate_cache`.
pub(crate) const CACHE_VALID: Duration = Duration::from_secs(60);

// ---- helpers ----
/// `"NAME" directive is duplicate` when `slot` is already set.
pub(crate) fn once<T>(slot: &Option<T>, d: &Directive) -> R {
    if slot.is_some() {
        return Err(ConfError::Duplicate {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    Ok(())
}

pub(crate) fn invalid(d: &Directive) -> ConfError {
    ConfError::InvalidValue {
        name: d.name.clone(),
        pos: d.pos.clone(),
    }
}

pub(crate) fn param(d: &Directive, p: &str) -> ConfError {
    ConfError::InvalidParam {
        param: p.to_string(),
        pos: d.pos.clone(),
    }
}

pub(crate) fn unsupported(d: &Directive, what: String) -> ConfError {
    ConfError::UnsupportedParam {
        what,
        pos: d.pos.clone(),
    }
}

/// The first argument, or "" (the table guarantees the count; this keeps handlers total).
pub(crate) fn arg0(d: &Directive) -> &str {
    d.args.first().map(String::as_str).unwrap_or("")
}

/// `on`/`off` in the first argument.
pub(crate) fn flag(d: &Directive) -> Result<bool, ConfError> {
    choice(d, arg0(d), &[("on", true), ("off", false)])
}

/// One of `opts` (case-insensitive, as nginx), or `invalid value "x" in "NAME" directive, it must be ...`.
pub(crate) fn choice<T: Copy>(d: &Directive, s: &str, opts: &[(&str, T)]) -> Result<T, ConfError> {
    if let Some((_, v)) = opts.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Ok(*v);
    }
    let names: Vec<String> = opts.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(ConfError::InvalidChoice {
        value: s.to_string(),
        name: d.name.clone(),
        expected,
        pos: d.pos.clone(),
    })
}

pub(crate) fn size(d: &Directive, s: &str) -> Result<u64, ConfError> {
    units::size(s).ok_or_else(|| invalid(d))
}

pub(crate) fn time(d: &Directive, s: &str) -> Result<Duration, ConfError> {
    units::time(s).ok_or_else(|| invalid(d))
}

pub(crate) fn number<T: std::str::FromStr>(d: &Directive, s: &str) -> Result<T, ConfError> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(d));
    }
    s.parse().map_err(|_| invalid(d))
}

/// A number in `lo..=hi`: `invalid value "10" in "gzip_comp_level" directive, it must be between 1 and 9`.
pub(crate) fn bounded(d: &Directive, lo: u32, hi: u32) -> Result<u32, ConfError> {
    let s = arg0(d);
    match number::<u32>(d, s) {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(ConfError::InvalidChoice {
            value: s.to_string(),
            name: d.name.clone(),
            expected: format!("between {lo} and {hi}"),
            pos: d.pos.clone(),
        }),
    }
}

/// A value with `$variables`.
pub(crate) fn value(d: &Directive, s: &str) -> Result<ComplexValue, ConfError> {
    ComplexValue::parse(s).map_err(|source| ConfError::Var {
        source,
        pos: d.pos.clone(),
    })
}

/// MIME types, lower-cased (`gzip_types`, `brotli_types`).
pub(crate) fn mime_list(d: &Directive) -> Vec<String> {
    d.args.iter().map(|a| a.to_ascii_lowercase()).collect()
}

// ---- value parsers: `fn(&Directive, &mut Cx) -> Result<T, ConfError>` ----

/// `on|off`.
pub(crate) fn on_off(d: &Directive, _: &mut Cx) -> Result<bool, ConfError> {
    flag(d)
}

/// `ssl on|off` (removed in nginx 1.25): the flag, with nginx 1.22's warning.
pub(crate) fn ssl_deprecated(d: &Directive, cx: &mut Cx) -> Result<bool, ConfError> {
    let on = flag(d)?;
    cx.warn(
        "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead",
        &d.pos,
    );
    Ok(on)
}

/// `[on|off]`: no argument means on (`stub_status`'s old form, `connection_info`).
pub(crate) fn on_unless_off(d: &Directive, _: &mut Cx) -> Result<bool, ConfError> {
    Ok(d.args.is_empty() || flag(d)?)
}

/// No argument: the directive's presence (`internal`).
pub(crate) fn present(_: &Directive, _: &mut Cx) -> Result<bool, ConfError> {
    Ok(true)
}

/// A time (`75s`, `1m30s`, `500ms`; a bare number is seconds).
pub(crate) fn duration(d: &Directive, _: &mut Cx) -> Result<Duration, ConfError> {
    time(d, arg0(d))
}

/// A time, kept as set (for values whose default is "none").
pub(crate) fn some_duration(d: &Directive, _: &mut Cx) -> Result<Option<Duration>, ConfError> {
    time(d, arg0(d)).map(Some)
}

/// A size in bytes (`16k`, `1m`).
pub(crate) fn bytes(d: &Directive, _: &mut Cx) -> Result<u64, ConfError> {
    size(d, arg0(d))
}

/// A size, or a value with variables evaluated per request (nginx's complex value size).
pub(crate) fn size_value(d: &Directive, _: &mut Cx) -> Result<SizeValue, ConfError> {
    let a = arg0(d);
    if a.contains('$') {
        return Ok(SizeValue::Var(value(d, a)?));
    }
    Ok(SizeValue::Fixed(size(d, a)?))
}

/// A size above zero, kept as set (for values whose default is "none").
pub(crate) fn some_bytes(d: &Directive, _: &mut Cx) -> Result<Option<u64>, ConfError> {
    match size(d, arg0(d))? {
        0 => Err(invalid(d)),
        n => Ok(Some(n)),
    }
}

/// A plain number of the field's type.
pub(crate) fn count<T: std::str::FromStr>(d: &Directive, _: &mut Cx) -> Result<T, ConfError> {
    number(d, arg0(d))
}

/// A plain number, kept as set (for values whose default is "none").
pub(crate) fn some_count(d: &Directive, _: &mut Cx) -> Result<Option<u64>, ConfError> {
    number(d, arg0(d)).map(Some)
}

/// A plain `u32` number, kept as set (for values whose default is "none").
pub(crate) fn some_u32(d: &Directive, _: &mut Cx) -> Result<Option<u32>, ConfError> {
    number(d, arg0(d)).map(Some)
}

/// `NUMBER SIZE` of buffers, both above zero (`large_client_header_buffers`).
pub(crate) fn buffers(d: &Directive, _: &mut Cx) -> Result<(usize, usize), ConfError> {
    let n: usize = number(d, arg0(d))?;
    let s = size(d, d.args.get(1).map(String::as_str).unwrap_or(""))?;
    match usize::try_from(s) {
        Ok(s) if n > 0 && s > 0 => Ok((n, s)),
        _ => Err(invalid(d)),
    }
}

/// A number above zero.
pub(crate) fn positive(d: &Directive, _: &mut Cx) -> Result<u32, ConfError> {
    match number::<u32>(d, arg0(d))? {
        0 => Err(invalid(d)),
        n => Ok(n),
    }
}

/// A number in `LO..=HI`, worded as nginx's bounded values.
pub(crate) fn between<const LO: u32, const HI: u32>(
    d: &Directive,
    _: &mut Cx,
) -> Result<u32, ConfError> {
    bounded(d, LO, HI)
}

/// The argument as written.
pub(crate) fn text(d: &Directive, _: &mut Cx) -> Result<String, ConfError> {
    Ok(arg0(d).to_string())
}

/// `charset NAME|off`: `None` for off.
pub(crate) fn charset(d: &Directive, _: &mut Cx) -> Result<Option<String>, ConfError> {
    let v = arg0(d);
    if v == "off" {
        return Ok(None);
    }
    // A token as in a Content-Type parameter; nginx takes any name it has a table for.
    if v.is_empty()
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:+".contains(&b))
    {
        return Err(invalid(d));
    }
    Ok(Some(v.to_string()))
}

/// `gzip_http_version 1.0|1.1`: whether 1.0 requests are compressed too.
pub(crate) fn gzip_http_version(d: &Directive, _: &mut Cx) -> Result<bool, ConfError> {
    choice(d, arg0(d), &[("1.0", true), ("1.1", false)])
}

/// MIME types, lower-cased.
pub(crate) fn mime_types(d: &Directive, _: &mut Cx) -> Result<Vec<String>, ConfError> {
    Ok(mime_list(d))
}

/// A file under the configuration directory (TLS files), as `ngx_conf_full_name(.., 1)`.
pub(crate) fn conf_file(d: &Directive, cx: &mut Cx) -> Result<Option<PathBuf>, ConfError> {
    Ok(Some(cx.in_conf_dir(arg0(d))))
}

/// `user NAME [GROUP]`.
pub(crate) fn user(d: &Directive, _: &mut Cx) -> Result<Option<User>, ConfError> {
    Ok(Some(User {
        name: arg0(d).to_string(),
        group: d.args.get(1).cloned(),
    }))
}

/// `worker_processes N|auto`.
pub(crate) fn worker_processes(d: &Directive, _: &mut Cx) -> Result<WorkerProcesses, ConfError> {
    match arg0(d) {
        "auto" => Ok(WorkerProcesses::Auto),
        s => match number::<usize>(d, s)? {
            0 => Err(invalid(d)),
            n => Ok(WorkerProcesses::Count(n)),
        },
    }
}

/// `pid FILE|off`: a file under the prefix, or none.
pub(crate) fn pid_file(d: &Directive, cx: &mut Cx) -> Result<Option<PathBuf>, ConfError> {
    Ok(match arg0(d) {
        "off" => None,
        f => Some(cx.prefixed(f)),
    })
}

/// `keepalive_timeout TIME [HEADER_TIME]`.
pub(crate) fn keepalive_timeout(
    d: &Directive,
    _: &mut Cx,
) -> Result<super::model::KeepaliveTimeout, ConfError> {
    Ok(super::model::KeepaliveTimeout {
        idle: time(d, arg0(d))?,
        header: d.args.get(1).map(|h| time(d, h)).transpose()?,
    })
}

/// `if_modified_since off|exact|before`.
pub(crate) fn if_modified_since(
    d: &Directive,
    _: &mut Cx,
) -> Result<super::model::IfModifiedSince, ConfError> {
    use super::model::IfModifiedSince as I;
    choice(
        d,
        arg0(d),
        &[("off", I::Off), ("exact", I::Exact), ("before", I::Before)],
    )
}

/// `gzip_static on|off|always`.
pub(crate) fn gzip_static(d: &Directive, _: &mut Cx) -> Result<GzipStatic, ConfError> {
    let opts = [
        ("off", GzipStatic::Off),
        ("on", GzipStatic::On),
        ("always", GzipStatic::Always),
    ];
    choice(d, arg0(d), &opts)
}

/// `autoindex_format html|xml|json|jsonp`.
pub(crate) fn autoindex_format(d: &Directive, _: &mut Cx) -> Result<AutoindexFormat, ConfError> {
    let opts = [
        ("html", AutoindexFormat::Html),
        ("json", AutoindexFormat::Json),
        ("jsonp", AutoindexFormat::Jsonp),
        ("xml", AutoindexFormat::Xml),
    ];
    choice(d, arg0(d), &opts)
}

/// `tuning_advisor on|off|apply`.
pub(crate) fn tuning_advisor(
    d: &Directive,
    _: &mut Cx,
) -> Result<crate::advisor::AdvisorMode, ConfError> {
    use crate::advisor::AdvisorMode;
    let opts = [
        ("off", AdvisorMode::Off),
        ("on", AdvisorMode::On),
        ("apply", AdvisorMode::Apply),
    ];
    choice(d, arg0(d), &opts)
}

/// `gzip_proxied off|expired|no-cache|no-store|private|no_last_modified|no_etag|auth|any ...`.
pub(crate) fn gzip_proxied(d: &Directive, _: &mut Cx) -> Result<GzipProxied, ConfError> {
    let mut flags = 0;
    for a in &d.args {
        flags |= match a.as_str() {
            "off" => GzipProxied::OFF,
            "expired" => GzipProxied::EXPIRED,
            "no-cache" => GzipProxied::NO_CACHE,
            "no-store" => GzipProxied::NO_STORE,
            "private" => GzipProxied::PRIVATE,
            "no_last_modified" => GzipProxied::NO_LAST_MODIFIED,
            "no_etag" => GzipProxied::NO_ETAG,
            "auth" => GzipProxied::AUTH,
            "any" => GzipProxied::ANY,
            _ => return Err(param(d, a)),
        };
    }
    Ok(GzipProxied(flags))
}

/// `keepalive_disable none|msie6|safari ...`.
pub(crate) fn keepalive_disable(
    d: &Directive,
    _: &mut Cx,
) -> Result<super::model::KeepaliveDisable, ConfError> {
    let mut k = super::model::KeepaliveDisable {
        msie6: false,
        safari: false,
    };
    for a in &d.args {
        match a.as_str() {
            "none" => {}
            "msie6" => k.msie6 = true,
            "safari" => k.safari = true,
            _ => return Err(param(d, a)),
        }
    }
    Ok(k)
}

/// `gzip_disable msie6|REGEX ...` (regexes case-insensitive, as nginx's).
pub(crate) fn gzip_disable(d: &Directive, _: &mut Cx) -> Result<GzipDisable, ConfError> {
    let mut g = GzipDisable::default();
    for a in &d.args {
        if a == "msie6" {
            g.msie6 = true;
        } else {
            g.patterns
                .push(super::rewrite::regex::Regex::compile(a, true, &d.pos)?);
        }
    }
    Ok(g)
}

/// `client_body_in_file_only on|clean|off`.
pub(crate) fn body_in_file_only(d: &Directive, _: &mut Cx) -> Result<BodyInFileOnly, ConfError> {
    let opts = [
        ("off", BodyInFileOnly::Off),
        ("on", BodyInFileOnly::On),
        ("clean", BodyInFileOnly::Clean),
    ];
    choice(d, arg0(d), &opts)
}

/// `disable_symlinks off|on|if_not_owner [from=PART]`, in either order, as nginx: the words
/// case-sensitive, one policy, `from=` (variables allowed) not with `off`.
pub(crate) fn disable_symlinks(d: &Directive, _: &mut Cx) -> Result<Symlinks, ConfError> {
    let mut mode = None;
    let mut from = None;
    for a in &d.args {
        match a.as_str() {
            "off" => mode = Some(DisableSymlinks::Off),
            "on" => mode = Some(DisableSymlinks::On),
            "if_not_owner" => mode = Some(DisableSymlinks::IfNotOwner),
            _ => match a.strip_prefix("from=") {
                Some(v) => from = Some(Arc::new(value(d, v)?)),
                None => return Err(param(d, a)),
            },
        }
    }
    let Some(mode) = mode else {
        let msg = "\"disable_symlinks\" must have \"off\", \"on\" or \"if_not_owner\" parameter";
        return Err(ConfError::other(msg, &d.pos));
    };
    if d.args.len() == 2 && from.is_none() {
        let msg = format!("duplicate parameters \"{} {}\"", d.args[0], d.args[1]);
        return Err(ConfError::other(msg, &d.pos));
    }
    if from.is_some() && mode == DisableSymlinks::Off {
        let msg = "\"from=\" cannot be used with \"off\" parameter";
        return Err(ConfError::other(msg, &d.pos));
    }
    Ok(Symlinks { mode, from })
}

/// `ssl_certificate_cache` / `proxy_ssl_certificate_cache`.
pub(crate) fn certificate_cache(d: &Directive, _: &mut Cx) -> Result<CertificateCache, ConfError> {
    cache_args(d)
}

/// The arguments of `ssl_certificate_cache` and `proxy_ssl_certificate_cache`.
pub(crate) fn cache_args(d: &Directive) -> Result<CertificateCache, ConfError> {
    if d.args.len() == 1 && d.args[0] == "off" {
        return Ok(CertificateCache::Off);
    }
    let mut max = None;
    let mut inactive = CACHE_INACTIVE;
    let mut valid = CACHE_VALID;
    for a in &d.args {
        let bad = || ConfError::other(format!("invalid parameter \"{a}\""), &d.pos);
        if let Some(v) = a.strip_prefix("max=") {
            max = Some(v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad)?);
        } else if let Some(v) = a.strip_prefix("inactive=") {
            inactive = units::time(v).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("valid=") {
            valid = units::time(v).ok_or_else(bad)?;
        } else {
            return Err(bad());
        }
    }
    let Some(max) = max else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"max\" parameter", d.name),
            &d.pos,
        ));
    };
    Ok(CertificateCache::On {
        max,
        inactive,
        valid,
    })
}
