//! Main, events and location-level directives (http, server, location), one function each:
//! arguments in, a field of the level's settings set. Server-level ones (TLS, sockets) are in
//! `server_handlers.rs`, `listen` and `server_name` in `server_head.rs`; the shared helpers
//! are here.
//!
//! The table (`table.rs`) names these functions; the walker (`build.rs`) has already checked
//! the context, the block and the argument count, so a handler validates values only. Each
//! single-value directive refuses a second setting in the same block (`"x" directive is
//! duplicate`); array-like ones (`add_header`, `allow`, `access_log`, ...) accumulate.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::error::ConfError;
use super::model::{
    AccessRule, AddHeader, DisableSymlinks, DocRoot, ErrorLog, ErrorPage, GzipStatic, LogEscape,
    LogFormat, LogLevel, LogTarget, Net, Return, TryFallback, TryFiles, User, WorkerProcesses,
};
use super::parse::Directive;
use super::settings::{AccessLogSet, Cx, LocSettings, MainSettings, RootSet};
use super::units;
use super::vars::ComplexValue;

/// What a handler returns.
pub(crate) type R = Result<(), ConfError>;

// ---- helpers ----

/// `"NAME" directive is duplicate` when `slot` is already set.
pub(super) fn once<T>(slot: &Option<T>, d: &Directive) -> R {
    if slot.is_some() {
        return Err(ConfError::Duplicate {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    Ok(())
}

pub(super) fn invalid(d: &Directive) -> ConfError {
    ConfError::InvalidValue {
        name: d.name.clone(),
        pos: d.pos.clone(),
    }
}

pub(super) fn param(d: &Directive, p: &str) -> ConfError {
    ConfError::InvalidParam {
        param: p.to_string(),
        pos: d.pos.clone(),
    }
}

pub(super) fn unsupported(d: &Directive, what: String) -> ConfError {
    ConfError::UnsupportedParam {
        what,
        pos: d.pos.clone(),
    }
}

/// The first argument, or "" (the table guarantees the count; this keeps handlers total).
pub(super) fn arg0(d: &Directive) -> &str {
    d.args.first().map(String::as_str).unwrap_or("")
}

/// `on`/`off` in the first argument.
pub(crate) fn flag(d: &Directive) -> Result<bool, ConfError> {
    choice(d, arg0(d), &[("on", true), ("off", false)])
}

/// One of `opts` (case-insensitive, as nginx), or `invalid value "x" in "NAME" directive, it must be ...`.
pub(super) fn choice<T: Copy>(d: &Directive, s: &str, opts: &[(&str, T)]) -> Result<T, ConfError> {
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

pub(super) fn size(d: &Directive, s: &str) -> Result<u64, ConfError> {
    units::size(s).ok_or_else(|| invalid(d))
}

pub(super) fn time(d: &Directive, s: &str) -> Result<Duration, ConfError> {
    units::time(s).ok_or_else(|| invalid(d))
}

pub(super) fn number<T: std::str::FromStr>(d: &Directive, s: &str) -> Result<T, ConfError> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(d));
    }
    s.parse().map_err(|_| invalid(d))
}

/// A number in `lo..=hi`: `invalid value "10" in "gzip_comp_level" directive, it must be between 1 and 9`.
fn bounded(d: &Directive, lo: u32, hi: u32) -> Result<u32, ConfError> {
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

// ---- main and events ----

/// `user NAME [GROUP]`.
pub(crate) fn user(m: &mut MainSettings, d: &Directive, _: &mut Cx) -> R {
    once(&m.user, d)?;
    m.user = Some(User {
        name: arg0(d).to_string(),
        group: d.args.get(1).cloned(),
    });
    Ok(())
}

/// `worker_processes N|auto`.
pub(crate) fn worker_processes(m: &mut MainSettings, d: &Directive, _: &mut Cx) -> R {
    once(&m.worker_processes, d)?;
    let v = match arg0(d) {
        "auto" => WorkerProcesses::Auto,
        s => match number::<usize>(d, s)? {
            0 => return Err(invalid(d)),
            n => WorkerProcesses::Count(n),
        },
    };
    m.worker_processes = Some(v);
    Ok(())
}

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

/// `pid FILE|off`.
pub(crate) fn pid(m: &mut MainSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&m.pid, d)?;
    m.pid = Some(match arg0(d) {
        "off" => None,
        f => Some(cx.prefixed(f)),
    });
    Ok(())
}

/// `worker_shutdown_timeout TIME`.
pub(crate) fn worker_shutdown_timeout(m: &mut MainSettings, d: &Directive, _: &mut Cx) -> R {
    once(&m.worker_shutdown_timeout, d)?;
    m.worker_shutdown_timeout = Some(time(d, arg0(d))?);
    Ok(())
}

/// `daemon on|off`.
pub(crate) fn daemon(m: &mut MainSettings, d: &Directive, _: &mut Cx) -> R {
    once(&m.daemon, d)?;
    m.daemon = Some(flag(d)?);
    Ok(())
}

/// `worker_connections N`.
pub(crate) fn worker_connections(m: &mut MainSettings, d: &Directive, _: &mut Cx) -> R {
    once(&m.worker_connections, d)?;
    match number::<u32>(d, arg0(d))? {
        0 => Err(invalid(d)),
        n => {
            m.worker_connections = Some(n);
            Ok(())
        }
    }
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
    if alias && s.here.regex {
        // nginx replaces the whole URI there; the model's alias replaces a prefix.
        return Err(unsupported(d, "\"alias\" inside a regex location".into()));
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

fn is_redirect_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://") || s.starts_with("$scheme")
}

/// `return CODE [TEXT|URL]` or `return URL`.
pub(crate) fn ret(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.ret, d)?;
    let first = arg0(d);
    let bad_code = || ConfError::other(format!("invalid return code \"{first}\""), &d.pos);
    let r = match number::<u16>(d, first) {
        Ok(code) if code <= 999 => Return {
            code,
            value: d.args.get(1).map(|v| value(d, v)).transpose()?,
        },
        Ok(_) => return Err(bad_code()),
        Err(_) if d.args.len() == 1 && is_redirect_url(first) => Return {
            // `return URL`: a temporary redirect, as nginx.
            code: 302,
            value: Some(value(d, first)?),
        },
        Err(_) => return Err(bad_code()),
    };
    s.ret = Some(r);
    Ok(())
}

/// `add_header NAME VALUE [always]`.
pub(crate) fn add_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
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
    let h = AddHeader {
        name,
        value: value(d, &d.args[1])?,
        always,
    };
    s.add_header.get_or_insert_with(Vec::new).push(h);
    Ok(())
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
        return Err(unsupported(
            d,
            "a variable in the \"access_log\" path".into(),
        ));
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
    let (mut buffer, mut flush) = (None, None);
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
        } else if p == "gzip" || p.starts_with("gzip=") || p.starts_with("if=") {
            return Err(unsupported(
                d,
                format!("the \"{p}\" parameter of \"access_log\""),
            ));
        } else {
            return Err(param(d, p));
        }
    }
    if flush.is_some() && buffer.is_none() {
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
    });
    Ok(())
}

macro_rules! loc_flag {
    ($(#[$doc:meta] $f:ident => $field:ident;)*) => {$(
        #[$doc]
        pub(crate) fn $f(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
            once(&s.$field, d)?;
            s.$field = Some(flag(d)?);
            Ok(())
        }
    )*};
}

macro_rules! loc_time {
    ($(#[$doc:meta] $f:ident => $field:ident;)*) => {$(
        #[$doc]
        pub(crate) fn $f(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
            once(&s.$field, d)?;
            s.$field = Some(time(d, arg0(d))?);
            Ok(())
        }
    )*};
}

loc_flag! {
    /// `sendfile on|off`.
    sendfile => sendfile;
    /// `tcp_nodelay on|off`.
    tcp_nodelay => tcp_nodelay;
    /// `tcp_nopush on|off`.
    tcp_nopush => tcp_nopush;
    /// `absolute_redirect on|off`.
    absolute_redirect => absolute_redirect;
    /// `server_name_in_redirect on|off`.
    server_name_in_redirect => server_name_in_redirect;
    /// `port_in_redirect on|off`.
    port_in_redirect => port_in_redirect;
    /// `gzip on|off`.
    gzip => gzip;
    /// `gzip_vary on|off`.
    gzip_vary => gzip_vary;
    /// `brotli on|off`.
    brotli => brotli;
}

loc_time! {
    /// `client_body_timeout TIME`.
    client_body_timeout => client_body_timeout;
    /// `send_timeout TIME`.
    send_timeout => send_timeout;
}

/// `keepalive_timeout TIME [HEADER_TIME]`.
pub(crate) fn keepalive_timeout(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    once(&s.keepalive_timeout, d)?;
    s.keepalive_timeout = Some(time(d, arg0(d))?);
    if let Some(h) = d.args.get(1) {
        time(d, h)?;
        cx.warn(
            "the second parameter of \"keepalive_timeout\" is ignored: firstbyte sends no \"Keep-Alive: timeout=\" header",
            &d.pos,
        );
    }
    Ok(())
}

/// `keepalive_requests N`.
pub(crate) fn keepalive_requests(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.keepalive_requests, d)?;
    s.keepalive_requests = Some(number(d, arg0(d))?);
    Ok(())
}

/// `client_max_body_size SIZE`.
pub(crate) fn client_max_body_size(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.client_max_body_size, d)?;
    s.client_max_body_size = Some(size(d, arg0(d))?);
    Ok(())
}

/// `gzip_min_length SIZE`.
pub(crate) fn gzip_min_length(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.gzip_min_length, d)?;
    s.gzip_min_length = Some(size(d, arg0(d))?);
    Ok(())
}

/// `gzip_comp_level 1..9`.
pub(crate) fn gzip_comp_level(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.gzip_comp_level, d)?;
    s.gzip_comp_level = Some(bounded(d, 1, 9)?);
    Ok(())
}

/// `brotli_comp_level 0..11`.
pub(crate) fn brotli_comp_level(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.brotli_comp_level, d)?;
    s.brotli_comp_level = Some(bounded(d, 0, 11)?);
    Ok(())
}

fn mime_list(d: &Directive) -> Vec<String> {
    d.args.iter().map(|a| a.to_ascii_lowercase()).collect()
}

/// `gzip_types TYPE ...`.
pub(crate) fn gzip_types(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.gzip_types, d)?;
    s.gzip_types = Some(mime_list(d));
    Ok(())
}

/// `brotli_types TYPE ...`.
pub(crate) fn brotli_types(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.brotli_types, d)?;
    s.brotli_types = Some(mime_list(d));
    Ok(())
}

/// `gzip_static on|off|always`.
pub(crate) fn gzip_static(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.gzip_static, d)?;
    let opts = [
        ("off", GzipStatic::Off),
        ("on", GzipStatic::On),
        ("always", GzipStatic::Always),
    ];
    s.gzip_static = Some(choice(d, arg0(d), &opts)?);
    Ok(())
}

/// `disable_symlinks off|on|if_not_owner`.
pub(crate) fn disable_symlinks(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.disable_symlinks, d)?;
    if let Some(p) = d.args.get(1) {
        if p.starts_with("from=") {
            return Err(unsupported(
                d,
                "the \"from=\" parameter of \"disable_symlinks\"".into(),
            ));
        }
        return Err(param(d, p));
    }
    let opts = [
        ("off", DisableSymlinks::Off),
        ("on", DisableSymlinks::On),
        ("if_not_owner", DisableSymlinks::IfNotOwner),
    ];
    s.disable_symlinks = Some(choice(d, arg0(d), &opts)?);
    Ok(())
}

/// `default_type MIME`.
pub(crate) fn default_type(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.default_type, d)?;
    s.default_type = Some(arg0(d).to_string());
    Ok(())
}

/// `internal`.
pub(crate) fn internal(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.internal, d)?;
    s.internal = Some(true);
    Ok(())
}

/// `stub_status [on|off]` (the argument is nginx's old form).
pub(crate) fn stub_status(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.stub_status, d)?;
    s.stub_status = Some(d.args.is_empty() || flag(d)?);
    Ok(())
}

/// `connection_info [on|off]` (firstbyte's own): no argument means on.
pub(crate) fn connection_info(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.connection_info, d)?;
    s.connection_info = Some(d.args.is_empty() || flag(d)?);
    Ok(())
}

/// `allow ADDR|CIDR|all`.
pub(crate) fn allow(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    access_rule(s, d, cx, true)
}

/// `deny ADDR|CIDR|all`.
pub(crate) fn deny(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    access_rule(s, d, cx, false)
}

fn access_rule(s: &mut LocSettings, d: &Directive, cx: &mut Cx, allow: bool) -> R {
    let a = arg0(d);
    let net = if a == "all" {
        Net::All
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
    fn return_forms() {
        let mut c = cx();
        let r = |args: &[&str], c: &mut Cx| {
            let mut s = LocSettings::default();
            ret(&mut s, &dir("return", args), c).map(|_| s.ret.unwrap())
        };
        let x = r(&["301", "https://$host$request_uri"], &mut c).unwrap();
        assert_eq!(x.code, 301);
        assert!(x.value.unwrap().uses("host"));
        let x = r(&["https://example.com/"], &mut c).unwrap();
        assert_eq!(x.code, 302);
        let x = r(&["$scheme://x/"], &mut c).unwrap();
        assert_eq!(x.code, 302);
        let x = r(&["204"], &mut c).unwrap();
        assert!(x.value.is_none());
        let e = r(&["/relative"], &mut c).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid return code \"/relative\" in /t.conf:3"
        );
        let e = r(&["1000", "x"], &mut c).unwrap_err();
        assert_eq!(e.to_string(), "invalid return code \"1000\" in /t.conf:3");
        let e = r(&["200", "$nope"], &mut c).unwrap_err();
        assert_eq!(e.to_string(), "unknown \"nope\" variable in /t.conf:3");
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
