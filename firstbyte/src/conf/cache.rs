//! The proxy cache's directives: `proxy_cache_path` (a zone: a directory and its limits),
//! and the per-location `proxy_cache*` values (`directives.rs` declares the plain ones; the
//! parsers and the accumulating `proxy_cache_valid` are here). The runtime is
//! `http::cache`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::args::{arg0, invalid, param, size, time, value, R};
use super::cx::Cx;
use super::error::ConfError;
use super::model::Pos;
use super::parse::Directive;
use super::settings::LocSettings;
use super::vars::ComplexValue;

/// One `proxy_cache_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePath {
    /// `keys_zone=NAME`.
    pub name: String,
    /// The directory (under the prefix when relative).
    pub path: PathBuf,
    /// `levels=1:2`: the widths of the subdirectory names, taken from the end of the key's
    /// hex MD5 (empty: files directly in `path`).
    pub levels: Vec<u8>,
    /// `keys_zone=NAME:SIZE`: bytes of index (one entry takes about 128 bytes here).
    pub zone_size: u64,
    /// `inactive=10m`: an entry not used this long is removed, fresh or not.
    pub inactive: Duration,
    /// `max_size=`: most bytes of cached files (0: no limit), least recently used go first.
    pub max_size: u64,
}

impl CachePath {
    /// How many entries the zone's index holds (nginx: about 8,000 keys a megabyte).
    pub fn max_entries(&self) -> usize {
        usize::try_from(self.zone_size / 128)
            .unwrap_or(usize::MAX)
            .max(1)
    }
}

/// Cache zones of one load, and where `proxy_cache` names them.
#[derive(Debug, Default)]
pub(crate) struct CacheZones {
    pub zones: HashMap<String, Arc<CachePath>>,
    pub refs: Vec<(String, Pos)>,
}

/// `proxy_cache_path PATH [levels=L] keys_zone=NAME:SIZE [inactive=T] [max_size=N] ...`.
pub(crate) fn proxy_cache_path(cx: &mut Cx, d: &Directive) -> R {
    let path = cx.prefixed(arg0(d));
    let mut levels = Vec::new();
    let (mut zone, mut inactive, mut max_size) = (None, Duration::from_secs(600), 0);
    for a in &d.args[1..] {
        let (k, v) = a.split_once('=').unwrap_or((a.as_str(), ""));
        match k {
            "levels" => levels = parse_levels(v).ok_or_else(|| param(d, a))?,
            "keys_zone" => {
                let (name, sz) = v.rsplit_once(':').ok_or_else(|| param(d, a))?;
                if name.is_empty() {
                    return Err(param(d, a));
                }
                let bytes = size(d, sz)?;
                if bytes < 8 * 4096 {
                    return Err(ConfError::other(
                        format!("zone \"{name}\" is too small"),
                        &d.pos,
                    ));
                }
                zone = Some((name.to_string(), bytes));
            }
            "inactive" => inactive = time(d, v)?,
            "max_size" => max_size = size(d, v)?,
            "use_temp_path" if v == "on" || v == "off" => {}
            "min_free" => {
                size(d, v)?;
            }
            "manager_files" | "manager_threshold" | "manager_sleep" | "loader_files"
            | "loader_threshold" | "loader_sleep"
                if !v.is_empty() => {}
            "purger" | "purger_files" | "purger_threshold" | "purger_sleep" => {
                return Err(super::args::unsupported(
                    d,
                    format!("\"{k}\" of \"{}\"", d.name),
                ));
            }
            _ => return Err(param(d, a)),
        }
    }
    let Some((name, zone_size)) = zone else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"keys_zone\" parameter", d.name),
            &d.pos,
        ));
    };
    if cx.zones.cache.zones.contains_key(&name) {
        return Err(ConfError::other(
            format!("duplicate zone \"{name}\""),
            &d.pos,
        ));
    }
    if cx.zones.cache.zones.values().any(|z| z.path == path) {
        return Err(ConfError::other(
            format!("duplicate \"{}\" path \"{}\"", d.name, path.display()),
            &d.pos,
        ));
    }
    let z = CachePath {
        name: name.clone(),
        path,
        levels,
        zone_size,
        inactive,
        max_size,
    };
    cx.zones.cache.zones.insert(name, Arc::new(z));
    Ok(())
}

/// `1:2`: one to three levels, each 1 or 2 characters (nginx's limits).
pub(crate) fn parse_levels(v: &str) -> Option<Vec<u8>> {
    let l: Vec<u8> = v
        .split(':')
        .map(|p| p.parse::<u8>().ok().filter(|n| (1..=2).contains(n)))
        .collect::<Option<_>>()?;
    (!l.is_empty() && l.len() <= 3).then_some(l)
}

/// `proxy_cache`'s zone as written.
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneRef {
    /// A zone's name (checked once the file is read).
    Name(String),
    /// With variables: the name is evaluated per request (empty: not cached; an unknown
    /// zone: 500).
    Var(ComplexValue),
}

/// `proxy_cache ZONE | off`.
pub(crate) fn zone_ref(d: &Directive, cx: &mut Cx) -> Result<Option<ZoneRef>, ConfError> {
    let a = arg0(d);
    if a == "off" {
        return Ok(None);
    }
    if a.contains('$') {
        return Ok(Some(ZoneRef::Var(value(d, a)?)));
    }
    cx.zones.cache.refs.push((a.to_string(), d.pos.clone()));
    Ok(Some(ZoneRef::Name(a.to_string())))
}

/// Every zone `proxy_cache` names exists (nginx: `"proxy_cache" zone "NAME" is unknown`).
pub(crate) fn check_refs(cx: &Cx) -> R {
    for (name, pos) in &cx.zones.cache.refs {
        if !cx.zones.cache.zones.contains_key(name) {
            return Err(ConfError::other(
                format!("\"proxy_cache\" zone \"{name}\" is unknown"),
                pos,
            ));
        }
    }
    Ok(())
}

/// The key: one argument, variables allowed.
pub(crate) fn key(d: &Directive, _: &mut Cx) -> Result<ComplexValue, ConfError> {
    value(d, arg0(d))
}

/// The default `proxy_cache_key`.
pub fn default_key() -> ComplexValue {
    ComplexValue::parse("$scheme$proxy_host$request_uri").unwrap_or_default()
}

/// `proxy_cache_bypass VALUE ...` (accumulates within a level, as nginx).
pub(crate) fn proxy_cache_bypass(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let v: Vec<ComplexValue> = d
        .args
        .iter()
        .map(|a| value(d, a))
        .collect::<Result<_, _>>()?;
    s.proxy.cache_bypass.get_or_insert_with(Vec::new).extend(v);
    Ok(())
}

/// `proxy_no_cache VALUE ...` (accumulates within a level, as nginx).
pub(crate) fn proxy_no_cache(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let v: Vec<ComplexValue> = d
        .args
        .iter()
        .map(|a| value(d, a))
        .collect::<Result<_, _>>()?;
    s.proxy.no_cache.get_or_insert_with(Vec::new).extend(v);
    Ok(())
}

/// The names `proxy_cache_methods` accepts: nginx's `ngx_http_upstream_cache_method_mask`
/// (any other method, `PUT` say, is `invalid value` there too: its response is never cached).
const CACHE_METHODS: [&str; 3] = ["GET", "HEAD", "POST"];

/// `proxy_cache_methods GET HEAD POST`: GET and HEAD are always in (nginx adds them).
pub(crate) fn methods(d: &Directive, _: &mut Cx) -> Result<Vec<String>, ConfError> {
    let mut v = vec!["GET".to_string(), "HEAD".to_string()];
    for a in &d.args {
        let m = a.to_ascii_uppercase();
        if !CACHE_METHODS.contains(&m.as_str()) {
            return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos));
        }
        if !v.contains(&m) {
            v.push(m);
        }
    }
    Ok(v)
}

#[cfg(test)]
mod methods_tests {
    fn load(args: &str) -> Result<crate::conf::model::Config, crate::conf::ConfError> {
        crate::conf::load_str(
            &format!("events {{}}\nhttp {{\nserver {{ listen 127.0.0.1:8080;\n  location / {{ proxy_cache_methods {args}; }} }}\n}}\n"),
            std::path::Path::new("/etc/fb/m.conf"),
            std::path::Path::new("/srv"),
        )
    }

    #[test]
    fn only_nginx_cacheable_methods_load() {
        for ok in ["get", "POST", "GET HEAD POST"] {
            assert!(load(ok).is_ok(), "{ok}");
        }
        for bad in ["PUT", "GET DELETE", "PATCH"] {
            let e = load(bad).unwrap_err().to_string();
            assert!(e.contains("invalid value"), "{bad}: {e}");
        }
    }
}

/// `proxy_cache_use_stale` flags.
pub mod stale {
    /// `error`.
    pub const ERROR: u32 = 1;
    /// `timeout`.
    pub const TIMEOUT: u32 = 2;
    /// `invalid_header`.
    pub const INVALID_HEADER: u32 = 4;
    /// `updating`.
    pub const UPDATING: u32 = 8;
    /// `http_500`.
    pub const HTTP_500: u32 = 16;
    /// `http_502`.
    pub const HTTP_502: u32 = 32;
    /// `http_503`.
    pub const HTTP_503: u32 = 64;
    /// `http_504`.
    pub const HTTP_504: u32 = 128;
    /// `http_403`.
    pub const HTTP_403: u32 = 256;
    /// `http_404`.
    pub const HTTP_404: u32 = 512;
    /// `http_429`.
    pub const HTTP_429: u32 = 1024;

    /// The flag of a status, if `use_stale` can name it.
    pub fn of_status(s: u16) -> u32 {
        match s {
            500 => HTTP_500,
            502 => HTTP_502,
            503 => HTTP_503,
            504 => HTTP_504,
            403 => HTTP_403,
            404 => HTTP_404,
            429 => HTTP_429,
            _ => 0,
        }
    }
}

/// `proxy_cache_use_stale error timeout ... | off`.
pub(crate) fn use_stale(d: &Directive, _: &mut Cx) -> Result<u32, ConfError> {
    let mut f = 0;
    for a in &d.args {
        f |= match a.as_str() {
            "off" if d.args.len() == 1 => 0,
            "error" => stale::ERROR,
            "timeout" => stale::TIMEOUT,
            "invalid_header" => stale::INVALID_HEADER,
            "updating" => stale::UPDATING,
            "http_500" => stale::HTTP_500,
            "http_502" => stale::HTTP_502,
            "http_503" => stale::HTTP_503,
            "http_504" => stale::HTTP_504,
            "http_403" => stale::HTTP_403,
            "http_404" => stale::HTTP_404,
            "http_429" => stale::HTTP_429,
            _ => return Err(ConfError::other(format!("invalid value \"{a}\""), &d.pos)),
        };
    }
    Ok(f)
}

/// One `proxy_cache_valid`: the statuses (empty: 200, 301 and 302) or `any`, and the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRule {
    /// Statuses; empty with `any` false: 200 301 302.
    pub codes: Vec<u16>,
    /// `any`.
    pub any: bool,
    /// How long a response is fresh.
    pub time: Duration,
}

/// `proxy_cache_valid [code ...|any] time` (accumulates within a level).
pub(crate) fn proxy_cache_valid(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let (last, codes) = d.args.split_last().ok_or_else(|| invalid(d))?;
    let t = time(d, last)?;
    let mut rule = ValidRule {
        codes: Vec::new(),
        any: false,
        time: t,
    };
    if codes.is_empty() {
        rule.codes = vec![200, 301, 302];
    }
    for c in codes {
        if c == "any" {
            rule.any = true;
            continue;
        }
        match c.parse::<u16>() {
            Ok(n) if (200..=599).contains(&n) => rule.codes.push(n),
            _ => return Err(ConfError::other(format!("invalid value \"{c}\""), &d.pos)),
        }
    }
    s.proxy.cache_valid.get_or_insert_with(Vec::new).push(rule);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_as_nginx() {
        assert_eq!(parse_levels("1:2"), Some(vec![1, 2]));
        assert_eq!(parse_levels("2"), Some(vec![2]));
        assert_eq!(parse_levels("1:2:2"), Some(vec![1, 2, 2]));
        assert_eq!(parse_levels("3"), None);
        assert_eq!(parse_levels("1:1:1:1"), None);
        assert_eq!(parse_levels(""), None);
        assert_eq!(parse_levels("../"), None);
    }
}
