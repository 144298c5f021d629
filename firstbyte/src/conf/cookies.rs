//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags`: how the `Set-Cookie`
//! fields of a proxied answer change (applied by `http::proxy::cookies`).
//!
//! Each directive takes rules (several, tried in order) or `off`; a level without any
//! inherits its parent's, as nginx. `off` beside rules at one level is a duplicate.

use super::args::{arg0, value, R};
use super::cx::Cx;
use super::error::ConfError;
use super::model::Redirect;
use super::parse::Directive;
use super::rewrite::regex::Regex;
use super::settings::LocSettings;
use super::vars::ComplexValue;

/// Which cookies a `proxy_cookie_flags` rule is for.
#[derive(Debug, Clone)]
pub enum CookieName {
    /// A name (variables allowed), compared without case.
    Exact(ComplexValue),
    /// `~REGEX`, always caseless (nginx).
    Regex(Regex),
}

/// One `proxy_cookie_flags COOKIE FLAG...` rule.
#[derive(Debug, Clone)]
pub struct CookieFlags {
    /// The cookie it is for.
    pub name: CookieName,
    /// `secure`, `httponly`, `samesite=strict|lax|none`, `nosecure`, `nohttponly`,
    /// `nosamesite` (variables allowed; an unknown value does nothing).
    pub flags: Vec<ComplexValue>,
}

/// The `Set-Cookie` rules of a location (empty: none).
#[derive(Debug, Clone, Default)]
pub struct CookieRules {
    /// `proxy_cookie_domain`: `Prefix` is a whole-domain match (without case, a leading dot
    /// of the value kept); `Regex` replaces a matching value.
    pub domains: Vec<Redirect>,
    /// `proxy_cookie_path`: `Prefix` replaces a leading match (case-sensitive); `Regex`
    /// replaces a matching value.
    pub paths: Vec<Redirect>,
    /// `proxy_cookie_flags`: the first rule whose cookie matches applies.
    pub flags: Vec<CookieFlags>,
}

impl CookieRules {
    /// Whether no rule changes anything.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty() && self.paths.is_empty() && self.flags.is_empty()
    }
}

/// `proxy_cookie_*` of one level as written: None unset, `Some(empty)` for `off`.
#[derive(Debug, Clone, Default)]
pub(crate) struct CookieSettings {
    pub domains: Option<Vec<Redirect>>,
    pub paths: Option<Vec<Redirect>>,
    pub flags: Option<Vec<CookieFlags>>,
}

impl CookieSettings {
    /// Fills what this level did not set from `p`.
    pub fn inherit(&mut self, p: &CookieSettings) {
        if self.domains.is_none() {
            self.domains.clone_from(&p.domains);
        }
        if self.paths.is_none() {
            self.paths.clone_from(&p.paths);
        }
        if self.flags.is_none() {
            self.flags.clone_from(&p.flags);
        }
    }

    /// The merged rules.
    pub fn finish(&self) -> CookieRules {
        CookieRules {
            domains: self.domains.clone().unwrap_or_default(),
            paths: self.paths.clone().unwrap_or_default(),
            flags: self.flags.clone().unwrap_or_default(),
        }
    }
}

fn nth(d: &Directive, i: usize) -> &str {
    d.args.get(i).map_or("", String::as_str)
}

/// `off` (Ok(true)), a rule (Ok(false)), or nginx's errors: `off` after rules and rules
/// after `off` are duplicates, one argument other than `off` is invalid.
fn off_or_rule<T>(list: &Option<Vec<T>>, d: &Directive) -> Result<bool, ConfError> {
    let duplicate = || ConfError::Duplicate {
        name: d.name.clone(),
        pos: d.pos.clone(),
    };
    if matches!(list, Some(v) if v.is_empty()) {
        return Err(duplicate());
    }
    if d.args.len() == 1 {
        if arg0(d) != "off" {
            return Err(ConfError::other(
                format!("invalid parameter \"{}\"", arg0(d)),
                &d.pos,
            ));
        }
        if list.is_some() {
            return Err(duplicate());
        }
        return Ok(true);
    }
    Ok(false)
}

/// `proxy_cookie_domain off | DOMAIN REPLACEMENT | ~REGEX REPLACEMENT`.
pub(crate) fn proxy_cookie_domain(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let list = &mut s.proxy.cookies.domains;
    if off_or_rule(list, d)? {
        *list = Some(Vec::new());
        return Ok(());
    }
    let (pattern, replacement) = (arg0(d), nth(d, 1));
    let rule = match pattern.strip_prefix('~') {
        Some(re) => Redirect::Regex {
            regex: Regex::compile(re, true, &d.pos)?,
            replacement: value(d, replacement)?,
        },
        // nginx drops a leading dot of both (a cookie's domain matches with or without one).
        None => Redirect::Prefix {
            pattern: value(d, pattern.strip_prefix('.').unwrap_or(pattern))?,
            replacement: value(d, replacement.strip_prefix('.').unwrap_or(replacement))?,
        },
    };
    list.get_or_insert_with(Vec::new).push(rule);
    Ok(())
}

/// `proxy_cookie_path off | PATH REPLACEMENT | ~REGEX REPLACEMENT | ~*REGEX REPLACEMENT`.
pub(crate) fn proxy_cookie_path(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let list = &mut s.proxy.cookies.paths;
    if off_or_rule(list, d)? {
        *list = Some(Vec::new());
        return Ok(());
    }
    let (pattern, replacement) = (arg0(d), value(d, nth(d, 1))?);
    let rule = match pattern.strip_prefix('~') {
        Some(re) => {
            let (re, caseless) = match re.strip_prefix('*') {
                Some(r) => (r, true),
                None => (re, false),
            };
            Redirect::Regex {
                regex: Regex::compile(re, caseless, &d.pos)?,
                replacement,
            }
        }
        None => Redirect::Prefix {
            pattern: value(d, pattern)?,
            replacement,
        },
    };
    list.get_or_insert_with(Vec::new).push(rule);
    Ok(())
}

/// `proxy_cookie_flags off | COOKIE FLAG...` (COOKIE: a name with variables, or `~REGEX`).
pub(crate) fn proxy_cookie_flags(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    let list = &mut s.proxy.cookies.flags;
    if off_or_rule(list, d)? {
        *list = Some(Vec::new());
        return Ok(());
    }
    let name = match arg0(d).strip_prefix('~') {
        Some(re) => CookieName::Regex(Regex::compile(re, true, &d.pos)?),
        None => CookieName::Exact(value(d, arg0(d))?),
    };
    let flags = d.args[1..]
        .iter()
        .map(|a| value(d, a))
        .collect::<Result<Vec<_>, _>>()?;
    list.get_or_insert_with(Vec::new)
        .push(CookieFlags { name, flags });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::conf::testutil;

    #[test]
    fn off_and_rules_at_one_level_are_duplicates() {
        for body in [
            "proxy_cookie_domain off; proxy_cookie_domain a b;",
            "proxy_cookie_path /a /b; proxy_cookie_path off;",
            "proxy_cookie_flags off; proxy_cookie_flags a secure;",
        ] {
            let e = testutil::load_as(
                &format!("http {{ server {{ listen 127.0.0.1:1; location / {{ {body} }} }} }}"),
                true,
            )
            .expect_err(body)
            .to_string();
            assert!(e.contains("is duplicate"), "{body}: {e}");
        }
        let e = testutil::load_as(
            "http { server { listen 127.0.0.1:1; location / { proxy_cookie_path on; } } }",
            true,
        )
        .expect_err("on")
        .to_string();
        assert!(e.contains("invalid parameter \"on\""), "{e}");
    }
}
