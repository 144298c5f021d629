//! The directives that decide who is served, beyond `allow`/`deny`: `auth_basic`,
//! `auth_basic_user_file`, `satisfy`, the real-IP ones (`realip.rs`) and the request and
//! connection limits (`limits.rs`), gathered in one [`GuardSettings`] per level.
//!
//! A location whose merged settings use none of them gets no [`Guard`] at all, so a
//! configuration without these directives pays one `None` check per request.

use std::path::PathBuf;
use std::sync::Arc;

use super::args::{arg0, choice, once, value, R};
use super::limits::{LimitConnConf, LimitConnSet, LimitReqConf, LimitReqSet};
use super::parse::Directive;
use super::realip::{RealIp, RealIpSettings};
use super::settings::{Cx, LocSettings};
use super::vars::ComplexValue;

/// What a location checks before it answers (nginx's post-read, preaccess and access
/// phases), present only when something is set.
#[derive(Debug)]
pub struct Guard {
    /// `auth_basic` with a realm and a user file.
    pub auth: Option<AuthBasic>,
    /// `satisfy any`: `allow`/`deny` or `auth_basic` passing is enough (default all).
    pub satisfy_any: bool,
    /// `set_real_ip_from` and its companions.
    pub realip: Option<RealIp>,
    /// `limit_req`s.
    pub limit_req: Option<LimitReqConf>,
    /// `limit_conn`s.
    pub limit_conn: Option<LimitConnConf>,
}

/// `auth_basic REALM` with `auth_basic_user_file FILE`.
#[derive(Debug)]
pub struct AuthBasic {
    /// The realm (a value evaluating to `off` disables the check, as nginx).
    pub realm: ComplexValue,
    /// The user file (relative values resolve against `conf_dir`, nginx's conf prefix).
    pub user_file: ComplexValue,
    /// The configuration directory.
    pub conf_dir: PathBuf,
}

/// The guard directives of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct GuardSettings {
    /// `auth_basic`: Some(None) for `off`.
    pub auth_basic: Option<Option<ComplexValue>>,
    pub user_file: Option<ComplexValue>,
    pub satisfy_any: Option<bool>,
    pub realip: RealIpSettings,
    pub limit_req: LimitReqSet,
    pub limit_conn: LimitConnSet,
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl GuardSettings {
    /// Fills what this level did not set from `p`, as nginx's merges.
    pub fn inherit(&mut self, p: &GuardSettings) {
        or(&mut self.auth_basic, &p.auth_basic);
        or(&mut self.user_file, &p.user_file);
        or(&mut self.satisfy_any, &p.satisfy_any);
        self.realip.inherit(&p.realip);
        self.limit_req.inherit(&p.limit_req);
        self.limit_conn.inherit(&p.limit_conn);
    }

    /// The location's guard, None when it checks nothing.
    pub fn finish(&self, cx: &Cx) -> Option<Arc<Guard>> {
        let auth = match (&self.auth_basic, &self.user_file) {
            (Some(Some(realm)), Some(file)) => Some(AuthBasic {
                realm: realm.clone(),
                user_file: file.clone(),
                conf_dir: cx.conf_dir.clone(),
            }),
            _ => None,
        };
        let guard = Guard {
            auth,
            satisfy_any: self.satisfy_any.unwrap_or(false),
            realip: self.realip.finish(),
            limit_req: self.limit_req.finish(cx),
            limit_conn: self.limit_conn.finish(cx),
        };
        let active = guard.auth.is_some()
            || guard.realip.is_some()
            || guard.limit_req.is_some()
            || guard.limit_conn.is_some();
        active.then(|| Arc::new(guard))
    }
}

/// `auth_basic REALM|off`.
pub(crate) fn auth_basic(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.auth_basic, d)?;
    let a = arg0(d);
    s.guard.auth_basic = Some(if a == "off" { None } else { Some(value(d, a)?) });
    Ok(())
}

/// `auth_basic_user_file FILE` (variables allowed).
pub(crate) fn auth_basic_user_file(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.user_file, d)?;
    s.guard.user_file = Some(value(d, arg0(d))?);
    Ok(())
}

/// `satisfy all|any`.
pub(crate) fn satisfy(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.satisfy_any, d)?;
    s.guard.satisfy_any = Some(choice(d, arg0(d), &[("all", false), ("any", true)])?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::conf::testutil::cx;

    fn load(http: &str) -> Result<crate::conf::model::Config, crate::conf::ConfError> {
        crate::conf::load_str(
            &format!("events {{}}\nhttp {{\n{http}\n}}\n"),
            std::path::Path::new("/etc/fb/guard.conf"),
            std::path::Path::new("/srv"),
        )
    }

    #[test]
    fn auth_basic_needs_realm_and_file_and_inherits_each() {
        let conf = load(
            r#"auth_basic_user_file htpasswd;
server { listen 127.0.0.1:8080;
  location / { auth_basic "closed site";
    location /inner { auth_basic off; }
    location /other { satisfy any; }
  }
  location /none { }
}"#,
        )
        .expect("loads");
        let s = &conf.http.as_ref().expect("http").servers[0];
        let root = s.locations.find("/").expect("/").conf.clone();
        let g = root.guard.as_ref().expect("guard at /");
        let a = g.auth.as_ref().expect("auth");
        assert_eq!(a.realm.as_static(), Some("closed site"));
        assert_eq!(a.user_file.as_static(), Some("htpasswd"));
        assert_eq!(a.conf_dir, std::path::PathBuf::from("/etc/fb"));
        assert!(!g.satisfy_any);
        let other = s.locations.find("/other").expect("/other").conf.clone();
        assert!(other.guard.as_ref().expect("inherits").satisfy_any);
        // `off` and no realm at all: no guard (nothing to pay per request).
        assert!(s
            .locations
            .find("/inner")
            .expect("/inner")
            .conf
            .guard
            .is_none());
        assert!(s
            .locations
            .find("/none")
            .expect("/none")
            .conf
            .guard
            .is_none());
        assert!(s.default_location.guard.is_none());
    }

    #[test]
    fn bad_values_are_refused() {
        let e = load("server { listen 127.0.0.1:8080; satisfy some; }").unwrap_err();
        assert!(
            e.to_string().contains("it must be \"all\" or \"any\""),
            "{e}"
        );
        let e = load("auth_basic a; auth_basic b;").unwrap_err();
        assert!(
            e.to_string()
                .contains("\"auth_basic\" directive is duplicate"),
            "{e}"
        );
        let e = load("auth_basic_user_file $nosuchvar_x;").unwrap_err();
        assert!(e.to_string().contains("nosuchvar_x"), "{e}");
        let _ = cx();
    }
}
