//! `limit_except METHOD ... { ... }`: the methods not listed get the block's settings (its
//! `allow`/`deny`, `auth_basic`, `access_log`, `proxy_pass`), as nginx's implicit location
//! (`ngx_http_core_limit_except`, switched to by `ngx_http_update_location_config`).
//!
//! As nginx: method names are nginx's (any case in the file); `GET` also lets `HEAD` through;
//! every other method, including one nginx does not know (`TRACE`, `CONNECT`, an extension
//! or lowercase method), gets the block. The block is a location of its own inheriting from
//! the enclosing one: the enclosing location's rewrite directives do not run in it
//! (nginx's rewrite module gives it none), its content handler is the enclosing one's unless
//! it has its own `proxy_pass`, and `internal` is checked on the enclosing location first.

use std::sync::Arc;

use super::args::R;
use super::cx::Cx;
use super::error::ConfError;
use super::model::{LimitExcept, LocationConf, Locations, MimeTypes, Pos};
use super::parse::Directive;
use super::settings::LocSettings;
use super::table::LOCATION;

/// The methods `limit_except` accepts (nginx's `ngx_methods_names`).
pub(crate) const METHODS: [&str; 14] = [
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "MKCOL",
    "COPY",
    "MOVE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "LOCK",
    "UNLOCK",
    "PATCH",
];

/// The directives nginx allows inside (`NGX_HTTP_LMT_CONF`) that firstbyte has.
const INSIDE: [&str; 6] = [
    "allow",
    "deny",
    "auth_basic",
    "auth_basic_user_file",
    "access_log",
    "proxy_pass",
];

/// A `limit_except` block as read.
#[derive(Debug, Clone)]
pub(crate) struct LimitExceptSet {
    /// The methods let through unchanged (with `HEAD` when `GET` is listed).
    pub methods: Vec<http::Method>,
    /// The block's own directives.
    pub settings: LocSettings,
    pub pos: Pos,
}

/// `limit_except METHOD ... { ... }` in a location.
pub(crate) fn limit_except(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    if s.limit_except.is_some() {
        return Err(ConfError::other(
            "\"limit_except\" directive is duplicate",
            &d.pos,
        ));
    }
    let mut methods = Vec::new();
    for a in &d.args {
        let Some(m) = METHODS.iter().find(|m| m.eq_ignore_ascii_case(a)) else {
            return Err(ConfError::other(format!("invalid method \"{a}\""), &d.pos));
        };
        let m = http::Method::from_bytes(m.as_bytes()).unwrap_or(http::Method::GET);
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    if methods.contains(&http::Method::GET) && !methods.contains(&http::Method::HEAD) {
        methods.push(http::Method::HEAD);
    }
    let mut inner = LocSettings {
        // Like a regex location: `proxy_pass` inside passes the URI unchanged.
        here: super::settings::Here {
            prefix: s.here.prefix.clone(),
            regex: true,
            named: false,
        },
        ..Default::default()
    };
    for c in d.block.as_deref().unwrap_or_default() {
        let spec = super::build::spec_for(c, LOCATION)?;
        match spec.handler {
            super::table::Handler::Loc(f) if INSIDE.contains(&c.name.as_str()) => {
                f(&mut inner, c, cx)?
            }
            _ => {
                return Err(ConfError::NotAllowedHere {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
        }
    }
    if inner.proxy.pass.is_some() {
        inner.proxy.resolve(cx)?;
    }
    s.limit_except = Some(Box::new(LimitExceptSet {
        methods,
        settings: inner,
        pos: d.pos.clone(),
    }));
    Ok(())
}

impl LimitExceptSet {
    /// The block's location, merged under `parent` (the enclosing location, merged).
    pub fn finish(
        &self,
        parent: &LocSettings,
        cx: &Cx,
        name: &str,
        default_types: &Arc<MimeTypes>,
    ) -> Arc<LimitExcept> {
        let mut m = self.settings.clone();
        m.inherit(parent);
        m.here.prefix.clone_from(&parent.here.prefix);
        // The content handler stays the enclosing location's unless the block has its own
        // `proxy_pass` (nginx keeps `r->content_handler`), and so do its per-location
        // settings that nginx's merge does not cover here.
        if m.proxy.pass.is_none() {
            m.here.regex = parent.here.regex;
            m.proxy.pass.clone_from(&parent.proxy.pass);
            m.fastcgi.pass.clone_from(&parent.fastcgi.pass);
        }
        m.try_files.clone_from(&parent.try_files);
        m.stub_status = parent.stub_status;
        m.connection_info = parent.connection_info;
        m.metrics = parent.metrics;
        m.tuning_advisor_status = parent.tuning_advisor_status;
        m.internal = parent.internal;
        m.rewrite.stmts.clear();
        m.limit_except = None;
        let conf: LocationConf = m.finish(
            cx,
            name.to_string(),
            self.pos.clone(),
            default_types,
            Locations::default(),
        );
        Arc::new(LimitExcept {
            methods: self.methods.clone(),
            conf: Arc::new(conf),
        })
    }
}
