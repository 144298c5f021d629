//! A request that `proxy_pass` (or `fastcgi_pass`) answers: the upstream exchange and what
//! its answer leads to (`X-Accel-Redirect`, `X-Accel-Limit-Rate`, an error page that proxies
//! again), kept out of the common request future (it is boxed where it starts).

use super::*;

/// `proxy_pass` (or `fastcgi_pass`) with `conf` in `loc`, and what its answer leads to: an
/// upstream's `X-Accel-Redirect`, an error page whose location proxies again. The response
/// and the location that answered.
pub(super) async fn proxied<B>(
    r: &mut Req<'_>,
    conf: Arc<ProxyConf>,
    loc: Arc<LocationConf>,
    body: B,
    extensions: &mut http::Extensions,
) -> (Response<Body>, Arc<LocationConf>)
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut step, mut loc) = (Step::Proxy(conf), loc);
    let mut body = Some(body);
    // The fields an upstream's `X-Accel-Redirect` carries over to the final response.
    let mut carried: Option<HeaderMap> = None;
    // An error page whose location proxies: the status its answer takes (`None`: its own).
    // Followed once (nginx's `recursive_error_pages off`).
    let mut page_status: Option<Option<u16>> = None;
    let (mut resp, loc) = loop {
        let conf = match step {
            Step::Done(resp) => break (resp, loc),
            Step::Proxy(conf) => conf,
        };
        // nginx answers `Expect: 100-continue` as it starts reading the body it passes on,
        // an empty one too; hyper sends it for a body it reads that is not empty.
        if r.version == http::Version::HTTP_11
            && body.as_ref().is_some_and(http_body::Body::is_end_stream)
            && r.headers
                .get(header::EXPECT)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
        {
            r.conn.h1().continue_due.store(true, Ordering::Relaxed);
        }
        let timed_out = Arc::new(AtomicBool::new(false));
        let too_large = Arc::new(AtomicBool::new(false));
        // Boxed: the proxy state is large and rare; the common request future stays small.
        let result = match body.take() {
            Some(b) => {
                let b = StallBody::new(b, loc.client_body_timeout, timed_out.clone());
                let b = LimitBody::new(b, loc.client_max_body_size, too_large.clone());
                Box::pin(forward::proxy(r, &loc, &conf, b, extensions)).await
            }
            // After an `X-Accel-Redirect`: the client's body went to the first upstream.
            None => {
                r.body_used = true;
                r.upstream = std::sync::OnceLock::new();
                let b = http_body_util::Empty::<Bytes>::new();
                Box::pin(forward::proxy(r, &loc, &conf, b, extensions)).await
            }
        };
        match result {
            Ok(resp) => {
                if let Some(rate) = accel_limit_rate(r, &conf) {
                    r.limit_rate = Some(rate);
                }
                match accel_redirect(r, &conf) {
                    Some((target, kept)) => {
                        drop(resp);
                        carried = Some(kept);
                        (step, loc) = phases::accel_redirect(r, &target);
                    }
                    None => break (resp, loc),
                }
            }
            Err(_) if too_large.load(Ordering::Relaxed) => {
                crate::fblog!(
                    Error,
                    "client intended to send too large body: more than {} bytes, client: {}, request: \"{} {}\"",
                    loc.client_max_body_size,
                    r.conn.client_ip(),
                    r.method,
                    r.request_uri
                );
                break error(r, 413, loc);
            }
            // nginx: "the request is terminated with the 408 (Request Time-out) error".
            Err(_) if timed_out.load(Ordering::Relaxed) => {
                crate::fblog!(
                    Info,
                    "client timed out (110: Connection timed out) while reading client request body, client: {}, request: \"{} {}\"",
                    r.conn.client_ip(),
                    r.method,
                    r.request_uri
                );
                break error(r, 408, loc);
            }
            Err(code) if page_status.is_some() => break error(r, code, loc),
            Err(code) => match phases::error_step(r, code, loc) {
                (phases::ErrorStep::Done(resp), l) => break (resp, l),
                (phases::ErrorStep::Proxy(c, status), l) => {
                    page_status = Some(status);
                    (step, loc) = (Step::Proxy(c), l);
                }
            },
        }
    };
    if let Some(Some(code)) = page_status {
        *resp.status_mut() = http::StatusCode::from_u16(code).unwrap_or(resp.status());
    }
    if let Some(kept) = carried {
        let h = resp.headers_mut();
        for name in kept.keys() {
            h.remove(name);
        }
        for (name, value) in &kept {
            h.append(name, value.clone());
        }
    }
    (resp, loc)
}

/// Fields of an upstream's answer that survive its `X-Accel-Redirect` (nginx's upstream
/// headers marked `redirect`).
const ACCEL_KEPT: &[&str] = &[
    "content-type",
    "set-cookie",
    "content-disposition",
    "cache-control",
    "expires",
    "accept-ranges",
];

/// The target of the upstream's `X-Accel-Redirect` (when `proxy_ignore_headers` does not
/// name it) and the fields that go with it. Only the upstream's own answer is read: a
/// client cannot send one.
fn accel_redirect(r: &Req<'_>, conf: &ProxyConf) -> Option<(String, HeaderMap)> {
    if conf.ignore_headers.iter().any(|h| h == "x-accel-redirect") {
        return None;
    }
    let up = r.upstream.get()?.last_headers()?;
    let target = String::from_utf8_lossy(up.get("x-accel-redirect")?.as_bytes()).into_owned();
    let mut kept = HeaderMap::new();
    for (name, value) in up {
        if ACCEL_KEPT.contains(&name.as_str()) {
            kept.append(name, value.clone());
        }
    }
    Some((target, kept))
}

/// The rate limit an upstream's `X-Accel-Limit-Rate` sets (bytes per second, `0`: none), when
/// `proxy_ignore_headers` does not name it. As nginx (`ngx_atoi`): digits only; any other
/// value (`off` too) is ignored and the location's `limit_rate` stands. Like `set
/// $limit_rate`, it outranks the `limit_rate` of a location an `X-Accel-Redirect` leads to.
fn accel_limit_rate(r: &Req<'_>, conf: &ProxyConf) -> Option<u64> {
    if conf
        .ignore_headers
        .iter()
        .any(|h| h == "x-accel-limit-rate")
    {
        return None;
    }
    let v = r
        .upstream
        .get()?
        .last_headers()?
        .get("x-accel-limit-rate")?;
    let v = v.as_bytes();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
