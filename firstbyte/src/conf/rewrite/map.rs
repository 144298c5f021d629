//! `map $source $var { ... }` and `split_clients "$expr" $var { ... }` (http level).

use std::collections::HashMap;

use super::super::args::{value, R};
use super::super::error::ConfError;
use super::super::parse::Directive;
use super::super::settings::Cx;
use super::super::vars::ComplexValue;
use super::{Captures, Slot};

/// One `map` block.
#[derive(Debug, Clone)]
pub struct MapDef {
    /// The source value.
    pub source: ComplexValue,
    /// `hostnames`: keys may be `*.example.com`, `.example.com`, `www.example.*`.
    pub hostnames: bool,
    /// `volatile`: not cached per request.
    pub volatile: bool,
    /// Exact keys, lower-cased (nginx's map hash is case-insensitive).
    pub exact: HashMap<String, ComplexValue>,
    /// Wildcard keys (with `hostnames`), in file order.
    pub wildcards: Vec<(MapKey, ComplexValue)>,
    /// `~regex` and `~*regex` keys, in file order.
    pub regexes: Vec<(Captures, ComplexValue)>,
    /// `default` (none: empty).
    pub default: Option<ComplexValue>,
}

/// A `hostnames` wildcard key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapKey {
    /// `*.example.com` (the suffix kept with its dot: `.example.com`): subdomains only.
    Head(String),
    /// `.example.com`: the name and its subdomains (kept as `.example.com`).
    Dot(String),
    /// `www.example.*` (kept as `www.example.`).
    Tail(String),
}

/// One `split_clients` block.
#[derive(Debug, Clone)]
pub struct SplitDef {
    /// The value hashed.
    pub source: ComplexValue,
    /// Upper hash bounds (0: the rest) with their values, as nginx computes them.
    pub parts: Vec<(u32, String)>,
}

fn other(d: &Directive, msg: String) -> ConfError {
    ConfError::other(msg, &d.pos)
}

fn out_var(d: &Directive) -> Result<&str, ConfError> {
    let name = &d.args[1];
    name.strip_prefix('$')
        .filter(|n| !n.is_empty())
        .ok_or_else(|| other(d, format!("invalid variable name \"{name}\"")))
}

pub(super) fn define(cx: &mut Cx, d: &Directive, name: &str, slot: Slot) -> R {
    if super::super::vars::KNOWN.contains(&name) || cx.user_vars.slots.contains_key(name) {
        return Err(other(d, format!("the duplicate \"{name}\" variable")));
    }
    cx.user_vars.slots.insert(name.to_string(), slot);
    Ok(())
}

/// `map $source $var { ... }`.
pub(crate) fn map(cx: &mut Cx, d: &Directive) -> R {
    let source = value(d, &d.args[0])?;
    let name = out_var(d)?.to_string();
    let mut m = MapDef {
        source,
        hostnames: false,
        volatile: false,
        exact: HashMap::new(),
        wildcards: Vec::new(),
        regexes: Vec::new(),
        default: None,
    };
    let entries = d.block.as_deref().unwrap_or_default();
    // `hostnames` changes how the keys read, wherever it stands.
    m.hostnames = entries
        .iter()
        .any(|e| e.name == "hostnames" && e.args.is_empty());
    for e in entries {
        let dup = || other(e, format!("duplicate \"{}\" parameter", e.name));
        match (e.name.as_str(), e.args.as_slice()) {
            ("hostnames", []) => continue,
            ("volatile", []) => {
                m.volatile = true;
                continue;
            }
            (_, [v]) => {
                let v = value(e, v)?;
                let key = e.name.as_str();
                if key == "default" {
                    if m.default.is_some() {
                        return Err(dup());
                    }
                    m.default = Some(v);
                } else if let Some(re) = key.strip_prefix("~*") {
                    let c = super::directives::captures(re, true, e, cx)?;
                    m.regexes.push((c, v));
                } else if let Some(re) = key.strip_prefix('~') {
                    let c = super::directives::captures(re, false, e, cx)?;
                    m.regexes.push((c, v));
                } else {
                    // A leading "\" lets a key be `default`, `hostnames`, `include`, `~...`.
                    let key = key.strip_prefix('\\').unwrap_or(key).to_ascii_lowercase();
                    if m.hostnames {
                        if let Some(k) = wildcard(&key) {
                            m.wildcards.push((k, v));
                            continue;
                        }
                    }
                    let key = if m.hostnames {
                        key.strip_suffix('.').map(str::to_string).unwrap_or(key)
                    } else {
                        key
                    };
                    if m.exact.insert(key, v).is_some() {
                        return Err(other(e, format!("conflicting parameter \"{}\"", e.name)));
                    }
                }
            }
            _ => return Err(other(e, "invalid number of the map parameters".into())),
        }
    }
    let slot = Slot::Map(cx.user_vars.maps.len());
    define(cx, d, &name, slot)?;
    cx.user_vars.maps.push(m);
    Ok(())
}

fn wildcard(key: &str) -> Option<MapKey> {
    if let Some(rest) = key.strip_prefix("*.") {
        Some(MapKey::Head(format!(".{rest}")))
    } else if key.starts_with('.') && key.len() > 1 {
        Some(MapKey::Dot(key.to_string()))
    } else {
        key.strip_suffix(".*")
            .map(|rest| MapKey::Tail(format!("{rest}.")))
    }
}

/// `split_clients "$expr" $var { PERCENT% value; ... * value; }`.
pub(crate) fn split_clients(cx: &mut Cx, d: &Directive) -> R {
    let source = value(d, &d.args[0])?;
    let name = out_var(d)?.to_string();
    let mut parts: Vec<(u32, String)> = Vec::new();
    for e in d.block.as_deref().unwrap_or_default() {
        let [v] = e.args.as_slice() else {
            return Err(other(e, format!("invalid percent value \"{}\"", e.name)));
        };
        let percent = if e.name == "*" {
            0
        } else {
            match e.name.strip_suffix('%').and_then(hundredths) {
                Some(n) if n > 0 => n,
                _ => return Err(other(e, format!("invalid percent value \"{}\"", e.name))),
            }
        };
        parts.push((percent, v.clone()));
    }
    // nginx's arithmetic: cumulative bounds scaled to 32 bits, 0 for the part that reaches
    // 100% or for `*`.
    let mut sum: u64 = 0;
    let mut last: u32 = 0;
    for p in &mut parts {
        sum = if p.0 != 0 {
            sum + u64::from(p.0)
        } else {
            10000
        };
        if sum == 10000 {
            p.0 = 0;
        }
        if sum > 10000 {
            return Err(other(d, "percent total is greater than 100%".into()));
        }
        if p.0 != 0 {
            last = last.wrapping_add((u64::from(p.0) * 0xffff_ffff / 10000) as u32);
            p.0 = last;
        }
    }
    let slot = Slot::Split(cx.user_vars.splits.len());
    define(cx, d, &name, slot)?;
    cx.user_vars.splits.push(SplitDef { source, parts });
    Ok(())
}

/// "51.2" → 5120 (nginx's `ngx_atofp(s, len, 2)`).
fn hundredths(s: &str) -> Option<u32> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || frac.len() > 2
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut n: u32 = if int.is_empty() { 0 } else { int.parse().ok()? };
    for i in 0..2 {
        n = n.checked_mul(10)?;
        if let Some(b) = frac.as_bytes().get(i) {
            n = n.checked_add(u32::from(b - b'0'))?;
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_values() {
        assert_eq!(hundredths("51.2"), Some(5120));
        assert_eq!(hundredths("0.5"), Some(50));
        assert_eq!(hundredths("10"), Some(1000));
        assert_eq!(hundredths("1.234"), None);
        assert_eq!(hundredths("42949672.95"), Some(u32::MAX));
        assert_eq!(hundredths("42949672.96"), None);
        assert_eq!(hundredths("x"), None);
        assert_eq!(hundredths(""), None);
    }

    #[test]
    fn wildcard_keys() {
        assert_eq!(
            wildcard("*.example.com"),
            Some(MapKey::Head(".example.com".into()))
        );
        assert_eq!(
            wildcard(".example.com"),
            Some(MapKey::Dot(".example.com".into()))
        );
        assert_eq!(
            wildcard("www.example.*"),
            Some(MapKey::Tail("www.example.".into()))
        );
        assert_eq!(wildcard("example.com"), None);
    }
}
