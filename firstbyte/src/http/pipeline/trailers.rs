//! `add_trailer`: the trailer section of a response, evaluated once its body has ended, as
//! nginx's trailers (`ngx_http_trailers_filter` runs on the last buffer): `$msec`,
//! `$request_time`, `$body_bytes_sent` and `$upstream_response_time` in a trailer describe
//! the whole response.

use std::borrow::Cow;

use http::header::{self, HeaderValue};
use http::HeaderMap;

use super::log::LogOnDone;
use super::Req;
use crate::conf::model::LocationConf;
use crate::conf::vars::Vars;
use crate::http::proxy::PassTrailers;

/// The request's variables with `$sent_trailer_NAME`: the trailers added so far.
struct TrailerVars<'a> {
    inner: &'a dyn Vars,
    added: &'a HeaderMap,
}

impl Vars for TrailerVars<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        let Some(n) = name.strip_prefix("sent_trailer_") else {
            return self.inner.get(name);
        };
        let n = n.replace('_', "-");
        let vals: Vec<&str> = self
            .added
            .get_all(n.as_str())
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!vals.is_empty()).then(|| Cow::Owned(vals.join(", ")))
    }
}

/// A response's trailer section: planned with the head, its values evaluated at the end.
pub(super) struct Plan {
    /// The fields' names (the `Trailer` field of an HTTP/1.1 response, which hyper sends
    /// only the fields of); empty over HTTP/1.1 when the client did not ask for trailers:
    /// the section is empty.
    pub(super) names: Vec<String>,
    /// Whether fields may come (an empty section otherwise).
    fields: bool,
    /// Whether `add_trailer` without `always` applies (2xx and 3xx).
    applies: bool,
    /// The upstream's trailers go on (`proxy_pass_trailers`).
    pass: Option<PassTrailers>,
}

impl Plan {
    /// The trailer section of request `r`'s response with status `code`, if it has one.
    /// nginx chunks an HTTP/1.1 response with a body that an `add_trailer` applies to (by
    /// its status, or `always`), whatever its values (`expect_trailers`), and a response
    /// whose upstream sent a chunked body; the fields go to an HTTP/2 or HTTP/3 client,
    /// and to an HTTP/1.1 client whose `TE` names `trailers` (hyper's condition). No body,
    /// no trailers (HEAD, 204, 304).
    pub(super) fn of(
        r: &Req,
        loc: &LocationConf,
        code: u16,
        pass: Option<PassTrailers>,
    ) -> Option<Plan> {
        if (loc.add_trailer.is_empty() && pass.is_none())
            || r.method == http::Method::HEAD
            || matches!(code, 204 | 304)
        {
            return None;
        }
        let applies = super::respond::add_header_applies(code);
        let mut names: Vec<String> = pass
            .as_ref()
            .map(|p| p.announced.clone())
            .unwrap_or_default();
        let mut added = false;
        for t in loc.add_trailer.iter().filter(|t| t.always || applies) {
            let n = t.name.to_ascii_lowercase();
            if header::HeaderName::from_bytes(n.as_bytes()).is_ok() {
                added = true;
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        if !added && pass.is_none() {
            return None;
        }
        let fields = match r.version {
            http::Version::HTTP_2 | http::Version::HTTP_3 => true,
            http::Version::HTTP_11 => {
                !names.is_empty()
                    && r.headers.get_all(header::TE).iter().any(|v| {
                        v.to_str().is_ok_and(|s| {
                            s.split(',')
                                .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
                        })
                    })
            }
            _ => return None,
        };
        if !fields {
            names.clear();
        }
        Some(Plan {
            names,
            fields,
            applies,
            pass,
        })
    }
}

/// The trailer section's fields, evaluated when the body has ended.
pub(super) struct Pending {
    /// The request's variables as of the response head.
    vars: Box<LogOnDone>,
    captures: Vec<Option<String>>,
    document_root: Option<String>,
    request_filename: Option<String>,
    applies: bool,
    pass: Option<PassTrailers>,
}

impl Pending {
    /// The section `plan` describes for request `r`: None when it is empty.
    pub(super) fn new(
        r: &Req,
        plan: &Plan,
        vars: impl FnOnce() -> Box<LogOnDone>,
    ) -> Option<Pending> {
        plan.fields.then(|| Pending {
            vars: vars(),
            captures: r.captures.clone(),
            document_root: r.document_root.clone(),
            request_filename: r
                .request_filename
                .as_deref()
                .and_then(std::path::Path::to_str)
                .map(str::to_string),
            applies: plan.applies,
            pass: plan.pass.clone(),
        })
    }

    /// The fields once `sent` body bytes went out; an empty value adds none.
    pub(super) fn eval(&self, sent: u64) -> HeaderMap {
        let mut inner = self.vars.vars(sent);
        inner.captures = &self.captures;
        inner.document_root = self.document_root.as_deref();
        inner.request_filename = self.request_filename.as_deref();
        // The upstream's first, as nginx's `headers_out.trailers` has them.
        let mut added = match (&self.pass, &self.vars.upstream) {
            (Some(p), Some(u)) => u.last_trailers().map(|t| p.filter(&t)).unwrap_or_default(),
            _ => HeaderMap::new(),
        };
        for t in &self.vars.loc.add_trailer {
            if !(t.always || self.applies) {
                continue;
            }
            let v = t.value.eval(&TrailerVars {
                inner: &inner,
                added: &added,
            });
            let v = v.trim_end_matches(['\r', '\n']);
            if v.is_empty() {
                continue;
            }
            if let (Ok(n), Ok(v)) = (
                header::HeaderName::from_bytes(t.name.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                added.append(n, v);
            }
        }
        added
    }

    /// The variables, to complete with what the response head settled.
    pub(super) fn vars_mut(&mut self) -> &mut LogOnDone {
        &mut self.vars
    }
}
