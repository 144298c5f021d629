//! `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags` on the upstream's
//! `Set-Cookie` fields, as nginx's `ngx_http_proxy_rewrite_cookie`: the field is split into
//! `name=value` and attributes at `;`, the `Domain` and `Path` values go through the first
//! rule that matches, the flags of the first matching `proxy_cookie_flags` rule are set or
//! cleared, and a field that changed is written again with `; ` between its parts. A field
//! no rule changed is passed as it came.

use http::header::{HeaderMap, HeaderValue, SET_COOKIE};

use super::headers::Captures;
use crate::conf::cookies::{CookieName, CookieRules};
use crate::conf::model::Redirect;
use crate::conf::vars::Vars;

/// How one kind of rule applies to an attribute's value.
type Rule = fn(&Redirect, &str, &dyn Vars) -> Option<String>;

/// One part of a cookie: `key[=value]`; a cleared key is dropped when written.
struct Attr {
    key: Option<String>,
    value: Option<String>,
}

fn parse(field: &str) -> Vec<Attr> {
    field
        .split(';')
        .map(|part| {
            let part = part.trim_start_matches(' ');
            match part.split_once('=') {
                Some((k, v)) => Attr {
                    key: Some(k.trim_end_matches(' ').to_string()),
                    value: Some(v.trim_matches(' ').to_string()),
                },
                None => Attr {
                    key: Some(part.trim_end_matches(' ').to_string()),
                    value: None,
                },
            }
        })
        .collect()
}

/// A domain rule: whole-value match without case (past a leading dot, which stays).
fn domain(rule: &Redirect, value: &str, vars: &dyn Vars) -> Option<String> {
    match rule {
        Redirect::Prefix {
            pattern,
            replacement,
        } => {
            let (dot, rest) = match value.strip_prefix('.') {
                Some(r) => (".", r),
                None => ("", value),
            };
            pattern
                .eval(vars)
                .eq_ignore_ascii_case(rest)
                .then(|| format!("{dot}{}", replacement.eval(vars)))
        }
        Redirect::Regex { .. } => regex(rule, value, vars),
    }
}

/// A path rule: a leading match, case-sensitive.
fn path(rule: &Redirect, value: &str, vars: &dyn Vars) -> Option<String> {
    match rule {
        Redirect::Prefix {
            pattern,
            replacement,
        } => {
            let tail = value.strip_prefix(pattern.eval(vars).as_str())?;
            Some(format!("{}{tail}", replacement.eval(vars)))
        }
        Redirect::Regex { .. } => regex(rule, value, vars),
    }
}

fn regex(rule: &Redirect, value: &str, vars: &dyn Vars) -> Option<String> {
    let Redirect::Regex { regex, replacement } = rule else {
        return None;
    };
    let caps = regex.capture_texts(value)?;
    Some(replacement.eval(&Captures { inner: vars, caps }))
}

const SECURE_ON: u8 = 1;
const SECURE_OFF: u8 = 2;
const HTTPONLY_ON: u8 = 4;
const HTTPONLY_OFF: u8 = 8;
const STRICT: u8 = 16;
const LAX: u8 = 32;
const NONE: u8 = 64;
const SAMESITE_OFF: u8 = 128;

fn flag_bit(v: &str) -> u8 {
    match v.to_ascii_lowercase().as_str() {
        "secure" => SECURE_ON,
        "nosecure" => SECURE_OFF,
        "httponly" => HTTPONLY_ON,
        "nohttponly" => HTTPONLY_OFF,
        "samesite=strict" => STRICT,
        "samesite=lax" => LAX,
        "samesite=none" => NONE,
        "nosamesite" => SAMESITE_OFF,
        _ => 0,
    }
}

/// The flags of the first `proxy_cookie_flags` rule for cookie `name` (0: none).
fn flags_for(rules: &CookieRules, name: &str, vars: &dyn Vars) -> u8 {
    let Some(rule) = rules.flags.iter().find(|r| match &r.name {
        CookieName::Regex(re) => re.is_match(name),
        CookieName::Exact(n) => n.eval(vars).eq_ignore_ascii_case(name),
    }) else {
        return 0;
    };
    rule.flags
        .iter()
        .fold(0, |f, v| f | flag_bit(&v.eval(vars)))
}

/// nginx's `ngx_http_proxy_edit_cookie_flags`.
fn edit_flags(attrs: &mut Vec<Attr>, mut f: u8) {
    for a in attrs.iter_mut().skip(1) {
        let Some(key) = a.key.as_deref() else {
            continue;
        };
        if key.eq_ignore_ascii_case("secure") {
            if f & SECURE_ON != 0 {
                f &= !SECURE_ON;
            } else if f & SECURE_OFF != 0 {
                a.key = None;
            }
        } else if key.eq_ignore_ascii_case("httponly") {
            if f & HTTPONLY_ON != 0 {
                f &= !HTTPONLY_ON;
            } else if f & HTTPONLY_OFF != 0 {
                a.key = None;
            }
        } else if key.eq_ignore_ascii_case("samesite") {
            let want = [(STRICT, "Strict"), (LAX, "Lax"), (NONE, "None")]
                .into_iter()
                .find(|(bit, _)| f & bit != 0);
            match want {
                Some((bit, v)) => {
                    f &= !bit;
                    if !a
                        .value
                        .as_deref()
                        .is_some_and(|x| x.eq_ignore_ascii_case(v))
                    {
                        a.key = Some("SameSite".into());
                        a.value = Some(v.into());
                    }
                }
                None if f & SAMESITE_OFF != 0 => a.key = None,
                None => {}
            }
        }
    }
    let add = |k: &str, v: Option<&str>| Attr {
        key: Some(k.into()),
        value: v.map(str::to_string),
    };
    if f & SECURE_ON != 0 {
        attrs.push(add("Secure", None));
    }
    if f & HTTPONLY_ON != 0 {
        attrs.push(add("HttpOnly", None));
    }
    if let Some((_, v)) = [(STRICT, "Strict"), (LAX, "Lax"), (NONE, "None")]
        .into_iter()
        .find(|(bit, _)| f & bit != 0)
    {
        attrs.push(add("SameSite", Some(v)));
    }
}

/// The field `value` as the rules make it; None: unchanged.
pub fn rewrite(rules: &CookieRules, field: &str, vars: &dyn Vars) -> Option<String> {
    let mut attrs = parse(field);
    attrs.first()?.value.as_ref()?;
    let mut changed = false;
    for a in attrs.iter_mut().skip(1) {
        let (Some(key), Some(v)) = (a.key.as_deref(), a.value.as_deref()) else {
            continue;
        };
        let (list, apply): (&[Redirect], Rule) = if key.eq_ignore_ascii_case("domain") {
            (&rules.domains, domain)
        } else if key.eq_ignore_ascii_case("path") {
            (&rules.paths, path)
        } else {
            continue;
        };
        if let Some(new) = list.iter().find_map(|r| apply(r, v, vars)) {
            a.value = Some(new);
            changed = true;
        }
    }
    if !rules.flags.is_empty() {
        let name = attrs[0].key.clone().unwrap_or_default();
        let f = flags_for(rules, &name, vars);
        if f != 0 {
            edit_flags(&mut attrs, f);
            changed = true;
        }
    }
    if !changed {
        return None;
    }
    let mut out = String::with_capacity(field.len() + 16);
    for (i, a) in attrs.iter().enumerate() {
        let Some(k) = &a.key else { continue };
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(k);
        if let Some(v) = &a.value {
            out.push('=');
            out.push_str(v);
        }
    }
    Some(out)
}

/// Applies the rules to every `Set-Cookie` field of `headers`.
pub fn rewrite_headers(rules: &CookieRules, headers: &mut HeaderMap, vars: &dyn Vars) {
    if rules.is_empty() || !headers.contains_key(SET_COOKIE) {
        return;
    }
    let fields: Vec<HeaderValue> = headers.get_all(SET_COOKIE).iter().cloned().collect();
    headers.remove(SET_COOKIE);
    for f in fields {
        let new = f
            .to_str()
            .ok()
            .and_then(|s| rewrite(rules, s, vars))
            .and_then(|s| HeaderValue::from_str(&s).ok());
        headers.append(SET_COOKIE, new.unwrap_or(f));
    }
}
