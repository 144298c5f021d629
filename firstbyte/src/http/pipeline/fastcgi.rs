//! The request to `fastcgi_pass`: its parameters (`fastcgi_param`, then the request's
//! headers as `HTTP_*`) evaluated, its body (read whole first when its length is unknown:
//! `CONTENT_LENGTH` must give it), then `proxy::fastcgi::forward`.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Response;

use super::{server_name, Req};
use crate::conf::model::{FastcgiConf, LocationConf};
use crate::conf::vars::Vars;
use crate::http::body::Body;
use crate::http::proxy::{self as px, fastcgi as fc, Route};

/// The request's variables, `$content_length` the spooled body's length when it had none.
struct FcgiVars<'a> {
    inner: &'a dyn Vars,
    content_length: Option<String>,
}

impl Vars for FcgiVars<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match (name, &self.content_length) {
            ("content_length", Some(n)) => Some(Cow::Borrowed(n)),
            _ => self.inner.get(name),
        }
    }
}

/// Forwards the request to the location's FastCGI server; `Err` is the status to answer.
pub(super) async fn pass<B>(
    r: &Req<'_>,
    loc: &Arc<LocationConf>,
    route: &Arc<Route>,
    fcgi: &FastcgiConf,
    body: B,
) -> Result<Response<Body>, u16>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conf = &route.conf;
    let mut body = px::request_body(body);
    let mut content_length = None;
    let mut stored = None;
    if fcgi.pass_request_body && fcgi.request_buffering && !http_body::Body::is_end_stream(&body) {
        use http_body_util::BodyExt;
        let mut s = fc::stdin::Stored::new(
            usize::try_from(loc.client_body_buffer_size).unwrap_or(usize::MAX),
            &conf.buffers.body_temp_path,
        );
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.map_err(|_| 400u16)?.into_data() {
                match s.push(d) {
                    Ok(Some(path)) => crate::fblog!(
                        Warn,
                        "a client request body is buffered to a temporary file {}, client: {}, server: {}, request: \"{} {} {}\", host: \"{}\"",
                        path.display(),
                        r.conn.client_ip(),
                        server_name(&r.server),
                        r.method,
                        r.request_uri,
                        r.protocol,
                        r.host
                    ),
                    Ok(None) => {}
                    Err(e) => {
                        crate::fblog!(
                            Crit,
                            "write to a temporary file failed ({}) while reading client request body",
                            crate::log::OsError(&e)
                        );
                        return Err(500);
                    }
                }
            }
        }
        if !r.headers.contains_key(header::CONTENT_LENGTH) {
            content_length = Some(s.len().to_string());
        }
        stored = Some(Arc::new(s));
    } else if fcgi.pass_request_body
        && !r.headers.contains_key(header::CONTENT_LENGTH)
        && !http_body::Body::is_end_stream(&body)
    {
        // Chunked or HTTP/2 without a length: read it whole (client_max_body_size bounds
        // it; memory holds client_body_buffer_size, the rest an unlinked temp file), as
        // nginx does before it passes a request to FastCGI.
        use http_body_util::BodyExt;
        let b = &conf.buffers;
        let mut spool = px::Spool::new(
            usize::try_from(loc.client_body_buffer_size).unwrap_or(usize::MAX),
            b.body_temp_path.clone(),
            u64::MAX,
            b.temp_file_write_size,
        );
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.map_err(|_| 400u16)?.into_data() {
                spool.push(d).map_err(|_| 500u16)?;
            }
        }
        content_length = Some(spool.len().to_string());
        body = px::SpoolBody(spool).boxed_unsync();
    }
    let params = {
        let inner = r.vars();
        let vars = FcgiVars {
            inner: &inner,
            content_length,
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        for p in &fcgi.params {
            let v = p.value.eval(&vars);
            if p.if_not_empty && v.is_empty() {
                continue;
            }
            pairs.push((p.name.clone(), v));
        }
        if fcgi.pass_request_headers {
            let set = pairs.len();
            for name in r.headers.keys() {
                let param = fc::header_param(name.as_str());
                // A `fastcgi_param HTTP_...` replaces the header's own, as nginx.
                if pairs[..set].iter().any(|(n, _)| *n == param) {
                    continue;
                }
                let sep = if name == header::COOKIE { "; " } else { ", " };
                let value = r
                    .headers
                    .get_all(name)
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()))
                    .collect::<Vec<_>>()
                    .join(sep);
                pairs.push((param, value));
            }
        }
        fc::encode_params(pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    };
    let remote = r.conn.facts().peer.map(|p| p.ip().to_string());
    let request_line = format!("{} {} {}", r.method, r.request_uri, r.protocol);
    let log = px::LogContext {
        client: remote.as_deref().unwrap_or(""),
        server: server_name(&r.server),
        request_line: &request_line,
        host: &r.host,
    };
    let req = fc::FcgiRequest {
        params,
        body: match stored {
            Some(s) => fc::Stdin::Stored(s),
            None if fcgi.pass_request_body => fc::Stdin::Stream(body),
            None => fc::Stdin::Empty,
        },
        method: r.method.clone(),
    };
    let mut up = px::UpstreamVars::default();
    let site = r.conn.site();
    let result = fc::forward(
        route,
        &site.proxies.fastcgi_pool,
        req,
        &log,
        super::forward::balance_key(r, route),
        &mut up,
    )
    .await;
    let _ = r.upstream.set(up);
    let mut resp = result.map_err(|f| f.status())?;
    let status = resp.status().as_u16();
    if super::forward::intercepted(conf, loc, status) {
        super::forward::keep_www_authenticate(r, &resp);
        return Err(status);
    }
    // nginx's header filter: a `Location: /path` becomes absolute (`absolute_redirect`).
    let relative = resp
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .filter(|l| l.starts_with('/'))
        .map(str::to_string);
    if let Some(l) = relative {
        if let Ok(v) = HeaderValue::from_str(&super::respond::absolute(r, &l)) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(resp)
}
