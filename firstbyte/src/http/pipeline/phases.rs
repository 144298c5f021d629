//! nginx's phases for one request, synchronous: the server's rewrite directives, location
//! match, `internal`, body size, the location's rewrite directives (`set`, `if`, `rewrite`,
//! `return`, `break`: `http::rewrite`; a changed URI finds the location again),
//! `allow`/`deny`, `stub_status` /
//! `connection_info`, `empty_gif`, `proxy_pass`, `try_files`, static files (and `autoindex`); a status through
//! `error_page`; internal redirects followed up to [`MAX_REDIRECTS`]. The outcome is a
//! [`Step`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};

use super::access::allowed;
use super::respond::{absolute, redirect_response, status_response, stub_status};
use super::{server_name, Req, Step, MAX_REDIRECTS};
use crate::conf::model::{DocRoot, LocationConf, ProxyConf, TryFallback};
use crate::http::body::Body;
use crate::http::open_file::{self, SymlinkCheck};
use crate::http::rewrite::{self, Action};
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
    /// The location's rewrite directives changed the URI: find the location again.
    Rematch,
}

/// Runs the phases, following internal redirects: the step they decided, with the location
/// that decided it.
pub(super) fn run(r: &mut Req) -> (Step, Arc<LocationConf>) {
    let server = r.server.clone();
    // nginx's post-read phase (a new request only, not an `X-Accel-Redirect`): the
    // server's real-IP settings.
    if let Some(g) = server
        .default_location
        .guard
        .as_ref()
        .filter(|_| !r.internal)
    {
        super::guard::post_read(r, g);
    }
    // The server's rewrite directives run before any location is chosen (nginx's server
    // rewrite phase); a changed URI is simply what the location search sees.
    let prog = &server.default_location.rewrite;
    if !prog.is_empty() {
        match run_rewrite(r, prog) {
            (Some(Out::Response(resp)), ..) => {
                return (Step::Done(resp), server.default_location.clone())
            }
            (Some(Out::Status(code)), ..) => {
                return done(error(r, code, server.default_location.clone()))
            }
            _ => {}
        }
    }
    locations(r, None)
}

/// Follows an upstream's `X-Accel-Redirect` (nginx's `ngx_http_upstream_process_headers`):
/// `@name` continues in that named location; a URI is checked as nginx's
/// `ngx_http_parse_unsafe_uri` does (unescaped, split at `?`, no `..` segment: 404
/// otherwise) and redirected to, the server's rewrite directives first, with the method
/// turned to GET (HEAD stays).
pub(super) fn accel_redirect(r: &mut Req, target: &str) -> (Step, Arc<LocationConf>) {
    let server = r.server.clone();
    r.internal = true;
    r.redirects += 1;
    if let Some(name) = target.strip_prefix('@') {
        return locations(r, Some(name.to_string()));
    }
    let Some((path, args)) = uri::unsafe_uri(target) else {
        crate::fblog!(
            Error,
            "unsafe URI \"{target}\" was detected while reading response header from upstream"
        );
        return done(error(r, 404, server.default_location.clone()));
    };
    if r.method != Method::HEAD {
        r.method = Method::GET;
    }
    r.uri = path;
    r.args = args;
    run(r)
}

/// The location phases from a location search for `r.uri` (or the named location `named`),
/// following internal redirects.
fn locations(r: &mut Req, mut named: Option<String>) -> (Step, Arc<LocationConf>) {
    let server = r.server.clone();
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
                Some(m) if m.auto_redirect => {
                    // `location /app/ { proxy_pass ...; }` and a request for `/app`: 301 to
                    // `/app/`, the query string kept, as nginx.
                    let mut to = crate::http::uri::encode_path(&r.uri);
                    to.push('/');
                    if let Some(a) = r.args.as_deref().filter(|a| !a.is_empty()) {
                        to.push('?');
                        to.push_str(a);
                    }
                    let abs = absolute(r, &to);
                    return (Step::Done(redirect_response(301, &abs)), m.conf.clone());
                }
                Some(m) => {
                    r.captures = m.captures;
                    m.conf.clone()
                }
                None => server.default_location.clone(),
            },
        };
        if !loc.rewrite.location_captures.is_empty() {
            set_named_captures(r, &loc.rewrite.location_captures);
        }
        let (out, loc) = in_location(r, loc);
        match out {
            Out::Response(resp) => return (Step::Done(resp), loc),
            Out::Status(code) => return done(error(r, code, loc)),
            Out::Proxy(conf) => return (Step::Proxy(conf), loc),
            Out::Rematch => {
                r.redirects += 1;
            }
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
    match error_step(r, code, loc.clone()) {
        (ErrorStep::Done(resp), l) => (resp, l),
        (ErrorStep::Proxy(..), _) => (status_response(code), loc),
    }
}

/// Where an error page leads: a finished response, or the `proxy_pass` of the page's
/// location (`r` then carries the page's URI), with the status the answer takes (`None`:
/// the proxied response's own, `error_page 502 = /page`).
pub(super) enum ErrorStep {
    Done(Response<Body>),
    Proxy(Arc<ProxyConf>, Option<u16>),
}

/// [`error`], following a page whose location proxies (nginx runs the page's location in
/// full, `proxy_pass` included).
pub(super) fn error_step(
    r: &mut Req,
    code: u16,
    loc: Arc<LocationConf>,
) -> (ErrorStep, Arc<LocationConf>) {
    let (resp, l) = error_inner(r, code, loc);
    match resp {
        Ok(resp) => (ErrorStep::Done(resp), l),
        Err(step) => (step, l),
    }
}

fn error_inner(
    r: &mut Req,
    code: u16,
    loc: Arc<LocationConf>,
) -> (Result<Response<Body>, ErrorStep>, Arc<LocationConf>) {
    let page = loc
        .error_page
        .iter()
        .find(|p| p.codes.contains(&code))
        .cloned();
    let Some(page) = page else {
        return (Ok(status_response(code)), loc);
    };
    let target = r.eval(&page.uri);
    // nginx (`ngx_http_send_error_page`): a page that is neither a URI (`/`) nor a named
    // location (`@`) is a redirect to it, as written (`error_page 502 redirect;` sends
    // `Location: redirect`).
    if !target.is_empty() && !target.starts_with('/') && !target.starts_with('@') {
        let c = match page.response {
            Some(Some(c)) if (301..=308).contains(&c) => c,
            _ => 302,
        };
        return (Ok(redirect_response(c, &target)), loc);
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
        request_port: r.request_port,
        host_given: r.host_given,
        server: r.server.clone(),
        captures: Vec::new(),
        internal: true,
        redirects: r.redirects,
        document_root: None,
        request_filename: None,
        start: r.start,
        nreq: r.nreq,
        pipelined: r.pipelined,
        head_length: r.head_length,
        early_data: r.early_data,
        user: r.user.clone(),
        rewrite_loc: None,
        fastcgi: None,
        valid_location: true,
        err_location: None,
        limit_rate: r.limit_rate,
        guard: r.guard.as_ref().map(|g| Box::new(g.for_redirect())),
        upstream: r.upstream.clone(),
        body_used: r.body_used,
        request_body: r.request_body.clone(),
        www_authenticate: r.www_authenticate.clone(),
        arc: r.arc,
        sub: r.sub.clone(),
    };
    let server = r.server.clone();
    let (page_loc, out) = if let Some(name) = target.strip_prefix('@') {
        match server.locations.named(name) {
            Some(l) => {
                let (out, l) = in_location(&mut inner, l.clone());
                (l, out)
            }
            None => return (Ok(status_response(code)), loc),
        }
    } else {
        let (p, q) = uri::split_target(&target);
        let Ok(u) = uri::normalize_path(p) else {
            return (Ok(status_response(code)), loc);
        };
        inner.uri = u;
        inner.args = q.map(str::to_string);
        match server.locations.find(&inner.uri) {
            // `location /app/ { proxy_pass ...; }` and a page `/app`: nginx's 301 to `/app/`.
            Some(m) if m.auto_redirect => {
                let mut to = crate::http::uri::encode_path(&inner.uri);
                to.push('/');
                if let Some(a) = inner.args.as_deref().filter(|a| !a.is_empty()) {
                    to.push('?');
                    to.push_str(a);
                }
                let abs = absolute(&inner, &to);
                (m.conf.clone(), Out::Response(redirect_response(301, &abs)))
            }
            Some(m) => {
                inner.captures = m.captures;
                let (out, l) = in_location(&mut inner, m.conf.clone());
                (l, out)
            }
            None => {
                let (out, l) = in_location(&mut inner, server.default_location.clone());
                (l, out)
            }
        }
    };
    match out {
        Out::Response(mut resp) => {
            let own = resp.status().as_u16();
            let status = match page.response {
                Some(Some(c)) => c,
                Some(None) => own,
                // A redirect the page's location answers keeps its status (nginx finalizes
                // a redirect with its own code).
                None if (301..=308).contains(&own)
                    && resp.headers().contains_key(header::LOCATION) =>
                {
                    own
                }
                None => code,
            };
            if let Some(l) = r.err_location.take() {
                if !resp.headers().contains_key(header::LOCATION) {
                    resp.headers_mut().insert(header::LOCATION, l);
                }
            }
            *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(resp.status());
            (Ok(resp), page_loc)
        }
        // recursive_error_pages off: an error the page's location answers is sent as its
        // built-in page, with its own status (nginx: `error_page 404 /x` where /x answers
        // `return 405` gives 405).
        Out::Status(s) => (Ok(status_response(s)), page_loc),
        Out::Proxy(conf) => {
            r.uri = std::mem::take(&mut inner.uri);
            r.args = inner.args.take();
            r.captures = std::mem::take(&mut inner.captures);
            r.redirects = inner.redirects;
            let status = match page.response {
                Some(Some(c)) => Some(c),
                Some(None) => None,
                None => Some(code),
            };
            (Err(ErrorStep::Proxy(conf, status)), page_loc)
        }
        // What the synchronous phases cannot follow here gives the original status's page.
        _ => (Ok(status_response(code)), loc),
    }
}

/// A regex location's named groups become variables (`location ~ ^/(?<section>\w+)`).
fn set_named_captures(r: &mut Req, named: &[(usize, usize)]) {
    for &(group, slot) in named {
        let v = r.captures.get(group).cloned().flatten().unwrap_or_default();
        if let Some(u) = r.user.as_mut() {
            u.set(slot, v);
        }
    }
}

/// Runs a rewrite program: Some(out) when it answers (a response or a status), with the
/// `if` location that took over, if one did, and whether that location lacks the upstream
/// of the content handler an earlier `if` set ([`lost_upstream`]). `rematch` comes back as
/// `Out::Rematch`.
fn run_rewrite(
    r: &mut Req,
    prog: &crate::conf::rewrite::Program,
) -> (Option<Out>, Option<Arc<LocationConf>>, bool) {
    if let Some(u) = r.user.as_mut() {
        u.warn_uninit = prog.warn_uninit;
    }
    let outcome = rewrite::run(prog, r);
    r.valid_location = outcome.valid_location;
    let lost = lost_upstream(outcome.handler, outcome.loc);
    let loc = outcome.loc.cloned();
    let out = match outcome.action {
        Action::Next { rematch: false } => None,
        Action::Next { rematch: true } => Some(Out::Rematch),
        Action::Redirect { code, location } => {
            let to = absolute(r, &location);
            Some(Out::Response(redirect_response(code, &to)))
        }
        Action::Return(ret) => Some(do_return(r, ret)),
        Action::Status(code) => Some(Out::Status(code)),
    };
    (out, loc, lost)
}

/// nginx keeps `r->content_handler` from the last `if` that set one (`handler`) while the
/// settings come from the last `if` that held (`last`): when that one has no upstream of
/// the handler's kind (`proxy_pass` in one `if`, a later `if` without it, in a location
/// without it), nginx's handler finds "no upstream configuration" and answers 500. True
/// then.
fn lost_upstream(handler: Option<&Arc<LocationConf>>, last: Option<&Arc<LocationConf>>) -> bool {
    let (Some(h), Some(last)) = (handler, last) else {
        return false;
    };
    let kind = |l: &LocationConf| l.proxy.as_ref().map(|p| p.fastcgi.is_some());
    !Arc::ptr_eq(h, last) && kind(h) != kind(last)
}

/// One pass through a location: the checks of nginx's find-config phase, its rewrite
/// directives, then access and content (in an `if` location when one took over, which is
/// the location given back).
fn in_location(r: &mut Req, loc: Arc<LocationConf>) -> (Out, Arc<LocationConf>) {
    r.fastcgi.clone_from(&loc.fastcgi_vars);
    // The location's `error_log` takes the request's error lines from here on.
    crate::log::set_request_log(r.conn.site().error_log(&loc.error_log));
    if let Some(out) = find_config_checks(r, &loc) {
        return (out, loc);
    }
    // `limit_except`: a method not listed continues in the block's location (after the
    // `internal` check on the enclosing one, as nginx's find-config phase).
    let loc = match &loc.limit_except {
        Some(le) if le.limits(&r.method) => le.conf.clone(),
        _ => loc,
    };
    // The location rewrite phase, skipped for the server's own level (nginx: "skipping
    // location rewrite phase for server null location").
    if !loc.rewrite.is_empty() && !Arc::ptr_eq(&loc, &r.server.default_location) {
        r.rewrite_loc = Some(loc.clone());
        let (out, if_loc, lost) = run_rewrite(r, &loc.rewrite);
        r.rewrite_loc = None;
        let here = if_loc.unwrap_or(loc);
        let out = match out {
            // nginx finalizes a `return`/`rewrite` redirect with its code, so an
            // `error_page` for that code takes over (and its Location replaces this one).
            Some(Out::Response(resp))
                if resp.status().is_redirection()
                    && here
                        .error_page
                        .iter()
                        .any(|p| p.codes.contains(&resp.status().as_u16())) =>
            {
                r.err_location = resp.headers().get(header::LOCATION).cloned();
                Out::Status(resp.status().as_u16())
            }
            Some(out) => out,
            None => content(r, &here, lost),
        };
        return (out, here);
    }
    let out = content(r, &loc, false);
    (out, loc)
}

/// `internal` and `client_max_body_size`, checked as soon as the location is known.
fn find_config_checks(r: &mut Req, loc: &LocationConf) -> Option<Out> {
    r.valid_location = true;
    if loc.internal && !r.internal {
        return Some(Out::Status(404));
    }
    if loc.client_max_body_size > 0 {
        let len = r
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if len > loc.client_max_body_size {
            return Some(Out::Status(413));
        }
    }
    None
}

/// Access checks and the content phase of a location (`lost_upstream`: see
/// [`lost_upstream`]).
fn content(r: &mut Req, loc: &Arc<LocationConf>, lost_upstream: bool) -> Out {
    if let Some(g) = &loc.guard {
        if let Some(code) = super::guard::check(r, loc, g) {
            return Out::Status(code);
        }
    } else if !allowed(&loc.access, r.client_addr().map(|p| p.ip())) {
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
    if lost_upstream {
        crate::fblog!(
            Alert,
            "no upstream configuration, client: {}, server: {}, request: \"{} {}\"",
            r.conn.client_ip(),
            server_name(&r.server),
            r.method,
            r.request_uri
        );
        return Out::Status(500);
    }
    if loc.stub_status {
        // nginx's stub_status answers GET and HEAD only.
        if r.method != http::Method::GET && r.method != http::Method::HEAD {
            return Out::Status(405);
        }
        return Out::Response(stub_status(r.conn));
    }
    if loc.metrics {
        return Out::Response(super::respond::metrics(r.conn, r.headers));
    }
    if loc.tuning_advisor_status {
        return Out::Response(crate::http::tuning::status(r.conn, r.args.as_deref()));
    }
    if loc.empty_gif {
        return match crate::http::empty_gif::serve(&r.method, r.headers, loc) {
            Ok(resp) => Out::Response(resp),
            Err(s) => Out::Status(s.as_u16()),
        };
    }
    // `fastcgi_pass`: after `$document_root` and `try_files` (Debian's fastcgi-php.conf checks
    // `try_files $fastcgi_script_name =404`), as nginx's content phase.
    let fastcgi = loc.proxy.as_ref().filter(|c| c.fastcgi.is_some());
    if let Some(conf) = loc.proxy.as_ref().filter(|c| c.fastcgi.is_none()) {
        return Out::Proxy(conf.clone());
    }
    if loc.connection_info && fastcgi.is_none() {
        return Out::Response(crate::http::builtin::connection_info(
            r.conn,
            r.headers,
            r.args.as_deref(),
            r.protocol,
        ));
    }
    // `$document_root` holds the evaluated root; paths below borrow it from there.
    r.document_root = Some(match &loc.root {
        DocRoot::Root(v) | DocRoot::Alias(v) => r.eval(v),
    });
    if let Some(tf) = &loc.try_files {
        let from = symlinks_from(r, loc);
        for f in &tf.files {
            let cand = r.eval(f);
            let root = r.document_root.as_deref().unwrap_or_default();
            let Some(path) = static_files::map_try_path(loc, &cand, root) else {
                continue;
            };
            // A directory candidate is one written with a trailing `/` (`$uri/`), as nginx
            // decides it from the file, not from the value (`$uri` of `/d/` is a file test).
            let is_dir_cand = matches!(
                f.parts().last(),
                Some(crate::conf::vars::Part::Lit(l)) if l.ends_with('/')
            );
            let check = SymlinkCheck::at(loc, from.as_deref(), &path);
            match open_file::stat_path(&path, check) {
                Ok(m) if is_dir_cand && m.is_dir() || !is_dir_cand && m.is_file() => {
                    // nginx drops a directory candidate's trailing slash (`$uri/` for
                    // `/dir` continues as `/dir`, which the static module redirects to
                    // `/dir/`); a regex location's own alias keeps the URI for it.
                    let mut cand = cand;
                    if is_dir_cand && cand.len() > 1 {
                        cand.pop();
                    }
                    if !(is_dir_cand && loc.alias_whole) {
                        r.uri = cand;
                    }
                    if let Some(conf) = fastcgi {
                        return Out::Proxy(conf.clone());
                    }
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
    if let Some(conf) = fastcgi {
        return Out::Proxy(conf.clone());
    }
    if r.uri.ends_with('/') && loc.index.iter().any(|i| i.as_static().is_none()) {
        let root = r.document_root.clone().unwrap_or_default();
        if let Some(out) = index_with_variables(r, loc, &root) {
            return out;
        }
    }
    let root = r.document_root.as_deref().unwrap_or_default();
    match static_files::map_path(loc, &r.uri, root) {
        Some(path) => serve_static(r, loc, path),
        None => Out::Status(404),
    }
}

/// nginx's index module for a list with variables (`index index$variant.html`, `index
/// $mapped`), which the static module cannot evaluate: an entry that evaluates to an
/// absolute URI is an internal redirect at once; another is one when its file exists. None:
/// no entry applied (the static module then answers, as for any directory).
fn index_with_variables(r: &Req, loc: &LocationConf, root: &str) -> Option<Out> {
    let from = symlinks_from(r, loc);
    for entry in &loc.index {
        let name = r.eval(entry);
        if name.is_empty() {
            continue;
        }
        if name.starts_with('/') {
            return Some(Out::Internal {
                uri: name,
                args: r.args.clone(),
            });
        }
        let uri = format!("{}{name}", r.uri);
        let exists = static_files::map_path(loc, &uri, root).is_some_and(|p| {
            open_file::stat_path(&p, SymlinkCheck::at(loc, from.as_deref(), &p)).is_ok()
        });
        if exists {
            return Some(Out::Internal {
                uri,
                args: r.args.clone(),
            });
        }
    }
    None
}

/// The location's `disable_symlinks from=` value for this request (`$document_root` is
/// known by now).
fn symlinks_from(r: &Req, loc: &LocationConf) -> Option<String> {
    loc.disable_symlinks.from.as_ref().map(|v| r.eval(v))
}

fn serve_static(r: &mut Req, loc: &Arc<LocationConf>, path: PathBuf) -> Out {
    // `add_header Last-Modified` (the last one) is what `If-Range` compares, as nginx's
    // range filter sees the headers filter's date; only a Range request needs it.
    let if_range_date = if !loc.add_header.is_empty() && r.headers.contains_key(header::IF_RANGE) {
        loc.add_header
            .iter()
            .rev()
            .find(|h| h.name.eq_ignore_ascii_case("last-modified"))
            .map(|h| {
                let v = r.eval(&h.value);
                httpdate::parse_http_date(v.trim())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .and_then(|d| i64::try_from(d.as_secs()).ok())
            })
    } else {
        None
    };
    let from = symlinks_from(r, loc);
    let path: &Path = r.request_filename.insert(path);
    let fr = static_files::FileRequest {
        method: &r.method,
        headers: r.headers,
        uri: &r.uri,
        path,
        loc,
        symlinks_from: from.as_deref(),
        if_range_date,
        received: r.conn.io().last_read(),
    };
    let shared = r.conn.shared();
    let cache = loc
        .open_file_cache
        .as_deref()
        .and_then(crate::http::open_file_cache::configured)
        .unwrap_or(&shared.files);
    match static_files::serve(&fr, cache) {
        static_files::FileOutcome::Response(resp) => Out::Response(resp),
        static_files::FileOutcome::Redirect(to) => {
            // nginx keeps the query string: `/dir?a=b` → `/dir/?a=b`.
            let to = match r.args.as_deref() {
                Some(a) if !a.is_empty() => format!("{to}?{a}"),
                _ => to,
            };
            let abs = absolute(r, &to);
            Out::Response(redirect_response(301, &abs))
        }
        static_files::FileOutcome::Autoindex => {
            let listing = crate::http::autoindex::Listing {
                method: &r.method,
                uri: &r.uri,
                args: r.args.as_deref(),
                dir: path,
                loc,
            };
            match crate::http::autoindex::serve(&listing) {
                Ok(resp) => Out::Response(resp),
                Err(s) => Out::Status(s.as_u16()),
            }
        }
        static_files::FileOutcome::Internal(uri) => Out::Internal {
            uri,
            args: r.args.clone(),
        },
        static_files::FileOutcome::Status(s) => {
            if s == StatusCode::NOT_FOUND && loc.log_not_found {
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
    if value.is_none() && code >= 400 {
        return Out::Status(code);
    }
    // A text, or an empty body below 400: nginx's ngx_http_send_response, typed as a file of
    // the URI's extension would be, else the location's `default_type` (also on an empty
    // `return 200;`; 204 and 304 carry none).
    let mut resp = Response::new(value.map_or(Body::Empty, Body::full));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    if !matches!(code, 204 | 304) {
        let ct = r
            .server
            .locations
            .find(&r.uri)
            .map(|m| crate::http::static_files::uri_content_type(m.conf, &r.uri).to_string())
            .unwrap_or_else(|| r.server.default_location.default_type.clone());
        if let Ok(v) = HeaderValue::from_str(&ct) {
            resp.headers_mut().insert(header::CONTENT_TYPE, v);
        }
    }
    Out::Response(resp)
}
