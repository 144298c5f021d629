//! The request to `fastcgi_pass`: its parameters (`fastcgi_param`, then the request's
//! headers as `HTTP_*`) evaluated, its body (read whole first with `fastcgi_request_buffering
//! on`, which gives one of unknown length its `CONTENT_LENGTH`), then
//! `proxy::fastcgi::forward`.

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
    // `fastcgi_request_buffering on` (nginx's default): read whole first, and
    // `$content_length` gives the length of one that came without (chunked, HTTP/2). `off`
    // streams it, as nginx, even of unknown length (`CONTENT_LENGTH` is then empty).
    if fcgi.pass_request_body && !http_body::Body::is_end_stream(&body) && fcgi.request_buffering {
        let s = super::reqbody::read_whole(r, loc, &conf.buffers.body_temp_path, &mut body).await?;
        if !r.headers.contains_key(header::CONTENT_LENGTH) {
            content_length = Some(s.len().to_string());
        }
        stored = Some(s);
    } else if fcgi.pass_request_body && !http_body::Body::is_end_stream(&body) {
        body = super::reqbody::tee(r, loc, body).await.0;
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
    let remote = r.remote_addr();
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
    let key = super::forward::balance_key(r, route);
    let result = if conf.ignore_client_abort {
        // `fastcgi_ignore_client_abort on`: the script runs to its end whatever the client does.
        let (route, pool) = (Arc::clone(route), Arc::clone(&site.proxies.fastcgi_pool));
        let owned = super::forward::OwnedLog::of(&log);
        let exchange = async move {
            let res = fc::forward(&route, &pool, req, &owned.get(), key, &mut up).await;
            (res, up)
        };
        let (res, u) = super::detach::run(exchange, None::<std::future::Pending<()>>).await;
        up = u;
        res
    } else {
        fc::forward(route, &site.proxies.fastcgi_pool, req, &log, key, &mut up).await
    };
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
