//! nginx's phases for one request, synchronous: server-level `return`, location match,
//! `internal`, `allow`/`deny`, body size, location `return`, `stub_status` /
//! `connection_info`, `proxy_pass`, `try_files`, static files; a status through
//! `error_page`; internal redirects followed up to [`MAX_REDIRECTS`]. The outcome is a
//! [`Step`].

use std::path::PathBuf;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};

use super::access::allowed;
use super::respond::{absolute, redirect_response, status_response, stub_status};
use super::{server_name, Req, Step, MAX_REDIRECTS};
use crate::conf::model::{DocRoot, LocationConf, ProxyConf, TryFallback};
use crate::http::body::Body;
use crate::http::{static_files, uri};

/// What one pass through a location decided.
enum Out {
    /// A finished response.
    Response(Response<Body>),
    /// A status to answer, through `error_page` if one applies.
    Status(u16),
    /// Continue with another URI (`try_files` fallback, index, error page).
    Internal { uri: String, args: Option<String> },
    /// Continue in a named location.
    Named(String),
    /// Hand the request to the location's `proxy_pass`.
    Proxy(Arc<ProxyConf>),
}

/// Runs the phases, following internal redirects: the step they decided, with the location
/// that decided it.
pub(super) fn run(r: &mut Req) -> (Step, Arc<LocationConf>) {
    let server = r.server.clone();
    // Server-level `return` runs before any location is chosen (nginx's server rewrite phase).
    if let Some(ret) = &server.default_location.ret {
        match do_return(r, ret) {
            Out::Response(resp) => return (Step::Done(resp), server.default_location.clone()),
            Out::Status(code) => return done(error(r, code, server.default_location.clone())),
            _ => {}
        }
    }
    let mut named: Option<String> = None;
    loop {
        if r.redirects > MAX_REDIRECTS {
            crate::fblog!(
                Error,
                "rewrite or internal redirection cycle while processing \"{}\"",
                r.uri
            );
            return (
                Step::Done(status_response(500)),
                server.default_location.clone(),
            );
        }
        let loc = match named.take() {
            Some(n) => match server.locations.named(&n) {
                Some(l) => l.clone(),
                None => {
                    return (
                        Step::Done(status_response(500)),
                        server.default_location.clone(),
                    )
                }
            },
            None => match server.locations.find(&r.uri) {
                Some(m) => {
                    r.captures = m.captures;
                    m.conf.clone()
                }
                None => server.default_location.clone(),
            },
        };
        match in_location(r, &loc) {
            Out::Response(resp) => return (Step::Done(resp), loc),
            Out::Status(code) => return done(error(r, code, loc)),
            Out::Proxy(conf) => return (Step::Proxy(conf), loc),
            Out::Internal { uri, args } => {
                r.redirects += 1;
                r.internal = true;
                r.uri = uri;
                r.args = args;
            }
            Out::Named(n) => {
                r.redirects += 1;
                r.internal = true;
                named = Some(n);
            }
        }
    }
}

fn done((resp, loc): (Response<Body>, Arc<LocationConf>)) -> (Step, Arc<LocationConf>) {
    (Step::Done(resp), loc)
}

/// Answers `code`, through the location's `error_page` when one names it.
pub(super) fn error(
    r: &mut Req,
    code: u16,
    loc: Arc<LocationConf>,
) -> (Response<Body>, Arc<LocationConf>) {
    let page = loc
        .error_page
        .iter()
        .find(|p| p.codes.contains(&code))
        .cloned();
    let Some(page) = page else {
        return (status_response(code), loc);
    };
    let target = r.eval(&page.uri);
    if target.starts_with("http://") || target.starts_with("https://") {
        let c = match page.response {
            Some(Some(c)) if (301..=308).contains(&c) => c,
            _ => 302,
        };
        return (redirect_response(c, &target), loc);
    }
    // The page is fetched with GET (HEAD stays HEAD), and only one level deep.
    if r.method != Method::HEAD {
        r.method = Method::GET;
    }
    r.internal = true;
    r.redirects += 1;
    let mut inner = Req {
        conn: r.conn,
        method: r.method.clone(),
        headers: r.headers,
        request_uri: r.request_uri,
        uri: String::new(),
        args: None,
        protocol: r.protocol,
        version: r.version,
        host: r.host.clone(),
        server: r.server.clone(),
        captures: Vec::new(),
        internal: true,
        redirects: r.redirects,
        document_root: None,
        request_filename: None,
        start: r.start,
        nreq: r.nreq,
        guard: r.guard.as_ref().map(|g| Box::new(g.for_redirect())),
    };
    let server = r.server.clone();
    let (page_loc, out) = if let Some(name) = target.strip_prefix('@') {
        match server.locations.named(name) {
            Some(l) => (l.clone(), in_location(&mut inner, l)),
            None => return (status_response(code), loc),
        }
    } else {
        let (p, q) = uri::split_target(&target);
        let Ok(u) = uri::normalize_path(p) else {
            return (status_response(code), loc);
        };
        inner.uri = u;
        inner.args = q.map(str::to_string);
        let l = match server.locations.find(&inner.uri) {
            Some(m) => {
                inner.captures = m.captures;
                m.conf.clone()
            }
            None => server.default_location.clone(),
        };
        let out = in_location(&mut inner, &l);
        (l, out)
    };
    match out {
        Out::Response(mut resp) => {
            let status = match page.response {
                Some(Some(c)) => c,
                Some(None) => resp.status().as_u16(),
                None => code,
            };
            *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(resp.status());
            (resp, page_loc)
        }
        // recursive_error_pages off: a failing error page gives the original status's page.
        _ => (status_response(code), loc),
    }
}

/// One pass through a location.
fn in_location(r: &mut Req, loc: &Arc<LocationConf>) -> Out {
    if loc.internal && !r.internal {
        return Out::Status(404);
    }
    if let Some(g) = &loc.guard {
        if let Some(code) = super::guard::check(r, loc, g) {
            return Out::Status(code);
        }
    } else if !allowed(&loc.access, r.conn.facts().peer.map(|p| p.ip())) {
        crate::fblog!(
            Error,
            "access forbidden by rule, client: {}, server: {}, request: \"{} {}\"",
            r.conn.client_ip(),
            server_name(&r.server),
            r.method,
            r.request_uri
        );
        return Out::Status(403);
    }
    if loc.client_max_body_size > 0 {
        let len = r
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if len > loc.client_max_body_size {
            return Out::Status(413);
        }
    }
    if let Some(ret) = &loc.ret {
        return do_return(r, ret);
    }
    if loc.stub_status {
        return Out::Response(stub_status(r.conn));
    }
    if let Some(conf) = &loc.proxy {
        return Out::Proxy(conf.clone());
    }
    if loc.connection_info {
        return Out::Response(crate::http::builtin::connection_info(
            r.conn,
            r.headers,
            r.args.as_deref(),
            r.protocol,
        ));
    }
    let root = match &loc.root {
        DocRoot::Root(v) | DocRoot::Alias(v) => r.eval(v),
    };
    r.document_root = Some(root.clone());
    if let Some(tf) = &loc.try_files {
        for f in &tf.files {
            let cand = r.eval(f);
            let Some(path) = static_files::map_path(loc, &cand, &root) else {
                continue;
            };
            let is_dir_cand = cand.ends_with('/');
            match std::fs::metadata(&path) {
                Ok(m) if is_dir_cand && m.is_dir() => {
                    r.uri = cand;
                    return serve_static(r, loc, path);
                }
                Ok(m) if !is_dir_cand && m.is_file() => {
                    r.uri = cand;
                    return serve_static(r, loc, path);
                }
                _ => {}
            }
        }
        return match &tf.fallback {
            TryFallback::Code(c) => Out::Status(*c),
            TryFallback::Named(n) => Out::Named(n.clone()),
            TryFallback::Uri(v) => {
                let target = r.eval(v);
                let (p, q) = uri::split_target(&target);
                match uri::normalize_path(p) {
                    Ok(u) => Out::Internal {
                        uri: u,
                        args: q.map(str::to_string).or_else(|| r.args.clone()),
                    },
                    Err(_) => Out::Status(500),
                }
            }
        };
    }
    match static_files::map_path(loc, &r.uri, &root) {
        Some(path) => serve_static(r, loc, path),
        None => Out::Status(404),
    }
}

fn serve_static(r: &mut Req, loc: &Arc<LocationConf>, path: PathBuf) -> Out {
    r.request_filename = Some(path.to_string_lossy().into_owned());
    let fr = static_files::FileRequest {
        method: &r.method,
        headers: r.headers,
        uri: &r.uri,
        path: &path,
        loc,
    };
    match static_files::serve(&fr, &r.conn.shared().files) {
        static_files::FileOutcome::Response(resp) => Out::Response(resp),
        static_files::FileOutcome::Redirect(to) => {
            let abs = absolute(r, &to);
            Out::Response(redirect_response(301, &abs))
        }
        static_files::FileOutcome::Status(s) => {
            if s == StatusCode::NOT_FOUND {
                crate::fblog!(
                    Error,
                    "open() \"{}\" failed (2: No such file or directory), client: {}, server: {}, request: \"{} {}\"",
                    path.display(),
                    r.conn.client_ip(),
                    server_name(&r.server),
                    r.method,
                    r.request_uri
                );
            }
            Out::Status(s.as_u16())
        }
    }
}

fn do_return(r: &mut Req, ret: &crate::conf::model::Return) -> Out {
    let code = ret.code;
    let value = ret.value.as_ref().map(|v| r.eval(v));
    if matches!(code, 301 | 302 | 303 | 307 | 308) {
        let to = value.unwrap_or_default();
        return Out::Response(redirect_response(code, &absolute(r, &to)));
    }
    match value {
        Some(text) => {
            let mut resp = Response::new(Body::full(text));
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            let ct = r
                .server
                .locations
                .find(&r.uri)
                .map(|m| m.conf.default_type.clone())
                .unwrap_or_else(|| r.server.default_location.default_type.clone());
            if let Ok(v) = HeaderValue::from_str(&ct) {
                resp.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            Out::Response(resp)
        }
        None if code >= 400 => Out::Status(code),
        None => {
            let mut resp = Response::new(Body::Empty);
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            Out::Response(resp)
        }
    }
}
