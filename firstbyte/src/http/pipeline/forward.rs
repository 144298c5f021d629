//! The proxied request: the upstream URI and headers evaluated for the location's
//! `proxy_pass`, the client's body read whole first (`proxy_request_buffering on`, or of
//! unknown length to an HTTP/1.0 upstream) or streamed through, an upgrade carried over,
//! then `proxy::forward`.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response};

use super::{server_name, Req};
use crate::conf::model::{LocationConf, ProxyConf, ProxyHttpVersion, ProxyStore};
use crate::http::body::Body;

/// Builds the upstream request and forwards it; `Err` is the status to answer.
pub(super) async fn proxy<B>(
    r: &Req<'_>,
    loc: &Arc<LocationConf>,
    conf: &Arc<ProxyConf>,
    body: B,
    extensions: &mut http::Extensions,
) -> Result<Response<Body>, u16>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use crate::http::proxy::{self as px, headers as ph};
    let site = r.conn.site();
    let Some(route) = site.proxies.route(conf) else {
        return Err(502);
    };
    if let Some(fcgi) = &conf.fastcgi {
        let resp = super::fastcgi::pass(r, loc, route, fcgi, body).await;
        return resp.map(|mut resp| {
            accel_charset(r, conf, &mut resp);
            resp
        });
    }
    let remote = r.remote_addr();
    // `proxy_pass` with variables: this request's route.
    let evaluated: Arc<px::Route>;
    let with_vars = route.dynamic_url().is_some();
    let (route, conf) = match route.dynamic_url() {
        Some(url) => {
            let url = r.eval(url);
            match route.for_url(&url).await {
                Ok(rt) => {
                    evaluated = Arc::new(rt);
                    (&evaluated, &evaluated.conf)
                }
                Err(e) => {
                    crate::fblog!(
                        Error,
                        "{}, client: {}, server: {}, request: \"{} {} {}\", host: \"{}\"",
                        e.reason,
                        remote.as_deref().unwrap_or(""),
                        server_name(&r.server),
                        r.method,
                        r.request_uri,
                        r.protocol,
                        r.host
                    );
                    return Err(e.status);
                }
            }
        }
        None => (route, conf),
    };
    let forwarded_for = ph::add_x_forwarded_for(r.headers, remote.as_deref());
    let mut plan = None;
    // `proxy_cache_background_update`: the stale answer, sent while the plan refreshes it.
    let mut background = None;
    if let Some(c) = &conf.cache {
        match super::cache::begin(r, loc, conf, c, &forwarded_for).await {
            super::cache::Begin::Answer(resp, status) => {
                let mut up = px::UpstreamVars::default();
                up.cache_status = Some(status);
                let _ = r.upstream.set(up);
                // A stored error that `error_page` answers (nginx's cached error).
                if intercepted(conf, loc, resp.status().as_u16()) {
                    return Err(resp.status().as_u16());
                }
                return Ok(finish(r, conf, &forwarded_for, resp));
            }
            super::cache::Begin::Go(p) => plan = Some(p),
            super::cache::Begin::Background(resp, p) => {
                background = Some(resp);
                plan = Some(p);
            }
            super::cache::Begin::Off => {}
            super::cache::Begin::Unknown => return Err(500),
        }
    }
    let target = if let (true, Some(uri)) = (with_vars, &conf.uri) {
        // nginx: a URI part evaluated with variables is the whole upstream URI.
        uri.clone()
    } else if r.valid_location {
        ph::upstream_uri(
            conf,
            &loc.prefix,
            r.internal,
            r.request_uri,
            &r.uri,
            r.args.as_deref(),
        )
    } else {
        // The URI changed in this location and stayed (`rewrite ... break`): nginx sends it
        // whole, without `proxy_pass`'s URI part.
        let path = crate::http::uri::encode_path(&r.uri);
        match r.args.as_deref() {
            Some(a) => format!("{path}?{a}"),
            None => path,
        }
    };
    let (headers, client_cert) = {
        let inner = r.vars();
        let vars = ph::ProxyVars {
            inner: &inner,
            proxy_host: &conf.host,
            forwarded_for: &forwarded_for,
        };
        let cert = px::client_cert_paths(&conf.ssl, &vars);
        let empty = http::HeaderMap::new();
        let client = if conf.pass_request_headers {
            r.headers
        } else {
            &empty
        };
        (ph::request_headers(conf, client, &vars), cert)
    };
    let version = match conf.http_version {
        ProxyHttpVersion::V10 => http::Version::HTTP_10,
        ProxyHttpVersion::V11 => http::Version::HTTP_11,
        ProxyHttpVersion::V2 => http::Version::HTTP_2,
    };
    let mut headers = headers;
    if conf.cache.is_some() {
        super::cache::upstream_headers(conf, plan.as_deref(), &mut headers);
    }
    if r.early_data {
        // RFC 8470 §5.1: an intermediary forwarding early data says so; the origin may
        // answer 425 to have the client retry after the handshake.
        headers.insert("early-data", HeaderValue::from_static("1"));
    }
    let mut body = px::request_body(body);
    let mut resend = None;
    let mut watch = None;
    if let Some(set) = &conf.set_body {
        // `proxy_set_body`: this body and its length instead of the client's. As nginx, the
        // client's body is still read first (whole), so `$request_body` can be part of it.
        if !http_body::Body::is_end_stream(&body) && !r.body_used {
            let dir = &conf.buffers.body_temp_path;
            super::reqbody::read_whole(r, loc, dir, &mut body).await?;
        }
        let text = Bytes::from(r.eval(set));
        headers.remove(header::TRANSFER_ENCODING);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
        // Held as a stored body: each server tried gets it again.
        let mut stored = px::Stored::new(
            text.len(),
            &conf.buffers.body_temp_path,
            crate::conf::model::BodyInFileOnly::Off,
        );
        stored.push(text).map_err(|_| 500u16)?;
        let stored = std::sync::Arc::new(stored);
        body = super::reqbody::stored_body(&stored);
        resend = Some(stored);
    } else if !conf.pass_request_body || r.body_used || background.is_some() {
        body = px::request_body(http_body_util::Empty::<Bytes>::new());
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::TRANSFER_ENCODING);
    } else if !http_body::Body::is_end_stream(&body)
        && (conf.request_buffering
            || (!conf.http_version.persistent() && !headers.contains_key(header::CONTENT_LENGTH)))
    {
        // `proxy_request_buffering on` (nginx's default): the body is read whole before the
        // upstream is connected, and sent with its length (again to the next server). A
        // body of unknown length to an HTTP/1.0 upstream, which has no chunked, is read
        // whole too, as nginx.
        let dir = &conf.buffers.body_temp_path;
        let stored = super::reqbody::read_whole(r, loc, dir, &mut body).await?;
        headers.remove(header::TRANSFER_ENCODING);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(stored.len()));
        body = super::reqbody::stored_body(&stored);
        resend = Some(stored);
    } else if !http_body::Body::is_end_stream(&body) {
        // `off`: streamed as it arrives; a body of unknown length (chunked, or HTTP/2 without
        // content-length) goes chunked, never dropped (hyper would send none for a GET of
        // unknown length).
        // HTTP/2 frames its body in DATA frames: no chunked there.
        if !headers.contains_key(header::CONTENT_LENGTH) && !conf.http_version.is_h2() {
            headers.insert(
                header::TRANSFER_ENCODING,
                HeaderValue::from_static("chunked"),
            );
        }
        let (b, w) = super::reqbody::tee(r, loc, body).await;
        body = b;
        watch = Some(w);
    }
    let mut req = Request::new(body);
    *req.method_mut() = match &conf.method {
        Some(m) => http::Method::from_bytes(r.eval(m).as_bytes()).map_err(|_| 500u16)?,
        None if plan.as_ref().is_some_and(|p| p.converted_head) => http::Method::GET,
        None => r.method.clone(),
    };
    *req.version_mut() = version;
    // `proxy_store`: not for a HEAD (no body); `on` knows its file now, a path waits for
    // the response header (its `$upstream_*`).
    let store = (conf.store != ProxyStore::Off && req.method() != http::Method::HEAD).then(|| {
        let slot = px::store::Slot::new(conf.store_access);
        if conf.store == ProxyStore::On {
            match store_on_target(r, loc) {
                Some(t) => slot.set(t),
                None => slot.cancel(),
            }
        }
        req.extensions_mut().insert(slot.clone());
        slot
    });
    *req.uri_mut() = target.parse().map_err(|_| 500u16)?;
    *req.headers_mut() = headers;
    if conf.http_version.is_h2() {
        px::h2::prepare(&mut req, conf.tls, &conf.host).map_err(|_| 500u16)?;
    }
    if let Some(c) = client_cert {
        req.extensions_mut().insert(c);
    }
    if let Some(s) = resend {
        req.extensions_mut().insert(px::Resend(s));
    }
    // `early_hints`: any value true (non-empty, not `0`), and a client that can take a 103.
    if let Some(to) = extensions
        .get::<px::EarlyHints>()
        .and_then(|h| h.clone().for_version(r.version))
    {
        if conf.early_hints.iter().any(|c| {
            let v = r.eval(c);
            !v.is_empty() && v != "0"
        }) {
            req.extensions_mut().insert(px::PassHints::new(conf, to));
        }
    }
    if let Some(b) = &conf.bind {
        let text = r.eval(&b.addr);
        // nginx: an empty value binds nothing.
        if !text.is_empty() {
            let Some(addr) = crate::conf::model::ProxyBind::parse(&text) else {
                crate::fblog!(
                    Error,
                    "invalid local address \"{text}\", client: {}, server: {}, request: \"{} {} {}\", host: \"{}\"",
                    remote.as_deref().unwrap_or(""),
                    server_name(&r.server),
                    r.method,
                    r.request_uri,
                    r.protocol,
                    r.host
                );
                return Err(500);
            };
            req.extensions_mut().insert(px::LocalBind {
                addr,
                transparent: b.transparent,
            });
        }
    }
    let upgrade = if req.headers().contains_key(header::UPGRADE) {
        extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .map(|on| px::ClientUpgrade {
                on,
                shared: r.conn.shared().clone(),
            })
    } else {
        None
    };
    let request_line = format!("{} {} {}", r.method, r.request_uri, r.protocol);
    let log = px::LogContext {
        client: remote.as_deref().unwrap_or(""),
        server: server_name(&r.server),
        request_line: &request_line,
        host: &r.host,
    };
    if let Some((stale, p)) = background.and_then(|s| Some((s, plan.take()?))) {
        let how = super::refresh::Refresh {
            conf,
            loc,
            route,
            pool: &site.proxies.pool,
            log: &log,
            balance_key: balance_key(r, route),
            forwarded_for: &forwarded_for,
        };
        super::refresh::start(r, how, req, p);
        let mut up = px::UpstreamVars::default();
        up.cache_status = Some("STALE");
        let _ = r.upstream.set(up);
        if intercepted(conf, loc, stale.status().as_u16()) {
            return Err(stale.status().as_u16());
        }
        return Ok(finish(r, conf, &forwarded_for, stale));
    }
    let mut abort = AbortLog {
        r,
        loc,
        up: px::UpstreamVars::default(),
        armed: true,
    };
    abort.up.proxy_host = Some(conf.host.clone());
    abort.up.cache_status = plan.as_ref().map(|p| p.status);
    let key = balance_key(r, route);
    // A streamed body that fails after the upstream had all of its length (an HTTP/2 client
    // sending more than its content-length) is the client's error, answered 400 as nginx,
    // whatever the upstream would answer.
    // `proxy_store` reads the whole response whatever the client does, as nginx.
    let result = if conf.ignore_client_abort || store.is_some() {
        let (route, pool) = (Arc::clone(route), Arc::clone(&site.proxies.pool));
        let owned = OwnedLog::of(&log);
        let mut up = std::mem::take(&mut abort.up);
        let exchange = async move {
            let res = px::forward(&route, &pool, req, upgrade, &owned.get(), key, &mut up).await;
            (res, up)
        };
        let (res, up) = super::detach::run(exchange, watch.map(|w| w.failed())).await;
        abort.up = up;
        res
    } else {
        let forwarding = px::forward(
            route,
            &site.proxies.pool,
            req,
            upgrade,
            &log,
            key,
            &mut abort.up,
        );
        match watch {
            Some(w) => tokio::select! {
                r = forwarding => r,
                () = w.failed() => Err(px::Failure::ClientBody),
            },
            None => forwarding.await,
        }
    };
    abort.armed = false;
    let mut result = match plan {
        Some(p) => {
            let raw = abort.up.last_headers().cloned();
            let caught =
                matches!(&result, Ok(resp) if intercepted(conf, loc, resp.status().as_u16()));
            // The cache keeps the upstream's `X-Accel-Charset` with the response, as nginx
            // keeps its header: a hit is recoded as the first answer was.
            let accel = raw.as_ref().and_then(|h| h.get("x-accel-charset")).cloned();
            let result = result.map(|mut resp| {
                if let Some(v) = accel {
                    resp.headers_mut().insert("x-accel-charset", v);
                }
                resp
            });
            let (res, status) = super::cache::after(
                r,
                conf,
                p,
                result.map_err(|f| f.status()),
                raw.as_ref(),
                &forwarded_for,
                caught,
            );
            abort.up.cache_status = Some(status);
            res
        }
        None => result.map_err(|f| f.status()),
    };
    let _ = r.upstream.set(std::mem::take(&mut abort.up));
    if let Some(slot) = &store {
        // An `X-Accel-Redirect` answer is not the response: its body is not kept (nginx
        // redirects before reading it).
        let redirected = !conf.ignore_headers.iter().any(|h| h == "x-accel-redirect")
            && r.upstream
                .get()
                .and_then(|u| u.last_headers())
                .is_some_and(|h| h.contains_key("x-accel-redirect"));
        match &conf.store {
            _ if redirected => slot.cancel(),
            ProxyStore::Path(v) => {
                let path = r.eval(v);
                match path.is_empty() {
                    true => slot.cancel(),
                    false => slot.set(px::store::Target::split(&path, literal_len(v))),
                }
            }
            _ => {}
        }
    }
    // `proxy_limit_rate` with variables, evaluated now that this response's header is among
    // the request's variables (its body waits for it); an invalid size is no limit.
    if let Some(later) = result.as_mut().ok().and_then(|resp| {
        resp.extensions_mut()
            .remove::<crate::http::rate::RateLater>()
    }) {
        let rate = conf.limit_rate.get(|c| r.eval(c)).unwrap_or_else(|s| {
            crate::fblog!(Error, "invalid size \"{s}\"");
            0
        });
        later.set(rate);
    }
    let result = match result {
        // A 101 the client did not ask for has no meaning in HTTP/2 or HTTP/3.
        Ok(resp)
            if resp.status() == http::StatusCode::SWITCHING_PROTOCOLS
                && !matches!(r.version, http::Version::HTTP_10 | http::Version::HTTP_11) =>
        {
            return Err(502);
        }
        Ok(resp) if intercepted(conf, loc, resp.status().as_u16()) => {
            keep_www_authenticate(r, &resp);
            return Err(resp.status().as_u16());
        }
        // The cache served its own ranges (of a response it stored).
        Ok(resp) if conf.force_ranges && resp.status() == http::StatusCode::OK => {
            Ok(super::ranges::force(r, loc, resp))
        }
        other => other,
    };
    result.map(|resp| finish(r, conf, &forwarded_for, resp))
}

/// The file `proxy_store on` keeps: the trusted `root`/`alias`, and the URI's part; `None`
/// when the mapping would climb out of the root.
fn store_on_target(r: &Req<'_>, loc: &LocationConf) -> Option<crate::http::proxy::store::Target> {
    use crate::conf::model::DocRoot;
    let root = match &loc.root {
        DocRoot::Root(v) | DocRoot::Alias(v) => r.eval(v),
    };
    let path = crate::http::static_files::map_path(loc, &r.uri, &root)?;
    let path = path.to_str()?;
    if loc.alias_whole && matches!(loc.root, DocRoot::Alias(_)) {
        return Some(crate::http::proxy::store::Target::split(path, path.len()));
    }
    Some(crate::http::proxy::store::Target {
        trusted: if root.is_empty() {
            ".".into()
        } else {
            root.clone().into()
        },
        rest: path.get(root.len()..)?.to_string(),
    })
}

/// The bytes of `v` before its first variable.
fn literal_len(v: &crate::conf::vars::ComplexValue) -> usize {
    use crate::conf::vars::Part;
    v.parts()
        .iter()
        .map_while(|p| match p {
            Part::Lit(s) => Some(s.len()),
            Part::Var(_) => None,
        })
        .sum()
}

/// The response as the client gets it: connection-specific fields dropped for HTTP/2 and
/// HTTP/3, `proxy_cookie_*` and `proxy_redirect` applied (to a cached one too).
fn finish(
    r: &Req<'_>,
    conf: &ProxyConf,
    forwarded_for: &str,
    mut resp: Response<Body>,
) -> Response<Body> {
    use crate::http::proxy::{self as px, headers as ph};
    accel_charset(r, conf, &mut resp);
    let absent = ph::PassedAbsent::of(conf, resp.headers());
    if absent.date || absent.server {
        resp.extensions_mut().insert(absent);
    }
    if let Some(pass) = r
        .upstream
        .get()
        .and_then(|u| u.last_headers())
        .and_then(|h| px::PassTrailers::of(conf, h))
    {
        resp.extensions_mut().insert(pass);
    }
    if !matches!(r.version, http::Version::HTTP_10 | http::Version::HTTP_11)
        && resp.status() != http::StatusCode::SWITCHING_PROTOCOLS
    {
        // Connection-specific in HTTP/2 and HTTP/3 (RFC 9113 §8.2.2).
        resp.headers_mut().remove(header::UPGRADE);
    }
    if !conf.cookies.is_empty() {
        let inner = r.vars();
        let vars = ph::ProxyVars {
            inner: &inner,
            proxy_host: &conf.host,
            forwarded_for,
        };
        px::rewrite_cookies(&conf.cookies, resp.headers_mut(), &vars);
    }
    if !conf.redirects.is_empty() {
        let inner = r.vars();
        let vars = ph::ProxyVars {
            inner: &inner,
            proxy_host: &conf.host,
            forwarded_for,
        };
        let complete = |l: &str| super::respond::absolute(r, l);
        ph::redirect_headers(&conf.redirects, resp.headers_mut(), &vars, &complete);
    }
    resp
}

/// `X-Accel-Charset` in `headers` (a stored response's, or one `proxy_pass_header` passes),
/// taken out unless `proxy_pass_header` passes it to the client; `None` too when
/// `proxy_ignore_headers` names it.
fn take_accel_charset(conf: &ProxyConf, headers: &mut http::HeaderMap) -> Option<String> {
    const NAME: &str = "x-accel-charset";
    let passed = !crate::http::proxy::headers::hidden(NAME, &conf.hide_headers, &conf.pass_headers);
    let v = if passed {
        headers.get(NAME).cloned()
    } else {
        headers.remove(NAME)
    };
    v.filter(|_| !conf.ignore_headers.iter().any(|h| h == NAME))
        .and_then(|v| v.to_str().ok().map(|v| v.trim().to_string()))
}

/// The upstream's `X-Accel-Charset` (as it came, or as the cache stored it), unless
/// `proxy_ignore_headers` names it: the charset the response goes out in (nginx's
/// `ngx_http_upstream_process_charset`). The field itself reaches the client only through
/// `proxy_pass_header`.
fn accel_charset(r: &Req<'_>, conf: &ProxyConf, resp: &mut Response<Body>) {
    let value = take_accel_charset(conf, resp.headers_mut()).or_else(|| {
        let v = r.upstream.get()?.last_headers()?.get("x-accel-charset")?;
        let mut raw = http::HeaderMap::new();
        raw.insert("x-accel-charset", v.clone());
        take_accel_charset(conf, &mut raw)
    });
    if let Some(v) = value {
        resp.extensions_mut()
            .insert(crate::http::charset::AccelCharset(v));
    }
}

/// The charset step of a stored response (before its ranges, as nginx's filters run): its
/// `Content-Type` names the charset it goes out in, and the table to recode its body with,
/// if any. The stored `X-Accel-Charset` is the destination, as [`accel_charset`] reads it.
pub(super) fn stored_charset(
    loc: &LocationConf,
    conf: &ProxyConf,
    headers: &mut http::HeaderMap,
    status: http::StatusCode,
) -> Option<crate::http::charset::Recode> {
    let accel = take_accel_charset(conf, headers);
    if loc.charset.is_none() && accel.is_none() {
        return None;
    }
    let plan = crate::http::charset::plan_with(
        loc,
        headers.get(header::CONTENT_TYPE),
        headers.contains_key(header::CONTENT_ENCODING),
        status.as_u16(),
        accel.as_deref(),
    )?;
    if let Some(v) = plan.content_type {
        headers.insert(header::CONTENT_TYPE, v);
    }
    plan.recode
}

/// A [`px::LogContext`]'s texts, owned, for an exchange running in a task of its own.
pub(super) struct OwnedLog {
    client: String,
    server: String,
    request_line: String,
    host: String,
}

impl OwnedLog {
    pub(super) fn of(l: &crate::http::proxy::LogContext<'_>) -> Self {
        OwnedLog {
            client: l.client.to_string(),
            server: l.server.to_string(),
            request_line: l.request_line.to_string(),
            host: l.host.to_string(),
        }
    }

    pub(super) fn get(&self) -> crate::http::proxy::LogContext<'_> {
        crate::http::proxy::LogContext {
            client: &self.client,
            server: &self.server,
            request_line: &self.request_line,
            host: &self.host,
        }
    }
}

/// A proxied request waiting on its upstream: dropped there (the client closed the
/// connection or reset the stream), it still leaves its access log line, status 499 and
/// the tries so far, as nginx's "client closed request".
struct AbortLog<'a, 'r> {
    r: &'a Req<'r>,
    loc: &'a Arc<LocationConf>,
    up: crate::http::proxy::UpstreamVars,
    armed: bool,
}

impl Drop for AbortLog<'_, '_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.up.close(std::time::Instant::now());
        let line = super::log::LogOnDone::of(
            self.r,
            self.loc,
            499,
            self.r.headers,
            &http::HeaderMap::new(),
            self.r.start.elapsed(),
            Some(std::mem::take(&mut self.up)),
        );
        if let Some(l) = line {
            l.write(0);
        }
    }
}

/// What the route's balancing method hashes for this request (`ip_hash`: the client's
/// address, `hash KEY`: the key's value); empty for the others.
pub(super) fn balance_key(r: &Req<'_>, route: &crate::http::proxy::Route) -> Vec<u8> {
    use crate::conf::model::BalanceMethod;
    match &route.method {
        // The real address when `set_real_ip_from` took one (nginx hashes `r->connection`'s
        // address, which its realip module replaced).
        BalanceMethod::IpHash => r
            .client_addr()
            .map(|p| crate::http::proxy::ip_hash_key(p.ip()))
            .unwrap_or_default(),
        BalanceMethod::Hash { key, .. } => key.eval(&r.vars()).into_bytes(),
        _ => Vec::new(),
    }
}

/// An intercepted 401 keeps the upstream's `WWW-Authenticate` fields, all of them, for the
/// error page's answer (nginx's `ngx_http_upstream_intercept_errors`).
pub(super) fn keep_www_authenticate<B>(r: &Req<'_>, resp: &Response<B>) {
    if resp.status() == http::StatusCode::UNAUTHORIZED {
        let all: Vec<HeaderValue> = resp
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .cloned()
            .collect();
        if !all.is_empty() {
            let _ = r.www_authenticate.set(all);
        }
    }
}

/// `proxy_intercept_errors` (`fastcgi_intercept_errors`): an upstream status of 300 or more
/// that an `error_page` of the location names is answered with that page instead.
pub(super) fn intercepted(conf: &ProxyConf, loc: &LocationConf, status: u16) -> bool {
    conf.intercept_errors
        && status >= 300
        && loc.error_page.iter().any(|p| p.codes.contains(&status))
}
