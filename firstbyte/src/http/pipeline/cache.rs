//! `proxy_cache` around a proxied request: before it, the lookup (a fresh stored response is
//! the answer, `HIT`; `proxy_cache_lock` waits for another request fetching the key); after
//! it, the upstream's answer is stored while it streams (`MISS`, `EXPIRED`, `BYPASS`), or a
//! stored one is served instead (`STALE`, `REVALIDATED`). An expired one that may be served
//! while it is updated (`proxy_cache_use_stale updating`, the upstream's
//! `stale-while-revalidate`) answers `UPDATING` while another request fetches it, or, with
//! `proxy_cache_background_update`, `STALE` at once while `refresh` fetches it. Decisions are
//! `http::cache::policy`'s.

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};

use super::Req;
use crate::conf::cache::stale;
use crate::conf::model::{CacheConf, LocationConf, ProxyConf};
use crate::http::body::Body;
use crate::http::cache::{self, policy, store, FetchGuard, Found, Zone};

/// A proxied request the cache takes part in.
pub(super) struct Plan {
    zone: Arc<Zone>,
    conf: Arc<CacheConf>,
    hash: [u8; 16],
    key: Vec<u8>,
    /// `$upstream_cache_status` so far.
    pub status: &'static str,
    /// An expired stored response (for `use_stale` and revalidation).
    stale: Option<(std::fs::File, store::Head)>,
    /// Whether the answer may be stored (`min_uses` reached, no lock timed out).
    store: bool,
    guard: Option<FetchGuard>,
    /// The request is a revalidation (`If-Modified-Since`/`If-None-Match` of the stale one).
    pub revalidating: bool,
    /// HEAD went to the upstream as GET.
    pub converted_head: bool,
    /// The key's own entry (a `Vary` variant's differs).
    main: ([u8; 16], Vec<u8>),
    /// The client's one range of the response being stored: (first, last, length).
    range: Option<(u64, u64, u64)>,
    /// The expired entry may answer an upstream error, timeout or invalid header: its
    /// `stale-if-error` (or `stale-while-revalidate`) time still runs (nginx's
    /// `stale_error`).
    stale_error: bool,
    /// The location's `max_ranges` (for the ranges answered from the stored response).
    max_ranges: Option<u32>,
    /// The location (its charset settings recode a stored response before its ranges).
    loc: Arc<LocationConf>,
}

impl Plan {
    /// Whether the answer may be stored: `proxy_cache_min_uses` reached, no lock timed
    /// out, no `proxy_no_cache` value set.
    pub(super) fn may_store(&self, r: &Req<'_>, conf: &ProxyConf, forwarded_for: &str) -> bool {
        self.store && !holds(r, conf, forwarded_for, &self.conf.no_cache)
    }
}

/// What the lookup gave.
pub(super) enum Begin {
    /// Answered from the cache, with `$upstream_cache_status`.
    Answer(Response<Body>, &'static str),
    /// To the upstream.
    Go(Box<Plan>),
    /// Not a cached request (its method, an empty zone name).
    Off,
    /// A zone name with variables named no zone: 500.
    Unknown,
    /// An expired stored response answers now (`STALE`) while the plan refreshes it in the
    /// background (`proxy_cache_background_update`).
    Background(Response<Body>, Box<Plan>),
}

fn holds(
    r: &Req<'_>,
    conf: &ProxyConf,
    forwarded_for: &str,
    vs: &[crate::conf::vars::ComplexValue],
) -> bool {
    let inner = r.vars();
    let vars = crate::http::proxy::headers::ProxyVars {
        inner: &inner,
        proxy_host: &conf.host,
        forwarded_for,
    };
    vs.iter().any(|v| policy::holds(&v.eval(&vars)))
}

/// The lookup of a request to a location with `proxy_cache`.
pub(super) async fn begin(
    r: &Req<'_>,
    loc: &Arc<LocationConf>,
    conf: &ProxyConf,
    c: &Arc<CacheConf>,
    forwarded_for: &str,
) -> Begin {
    let max_ranges = loc.max_ranges;
    if !c.methods.iter().any(|m| m == r.method.as_str()) {
        // nginx: not cached, and the status stays empty.
        return Begin::Off;
    }
    if let (Some(max), Some(range)) = (c.max_range_offset, r.headers.get(header::RANGE)) {
        if policy::range_beyond(range.as_bytes(), max) {
            return Begin::Off;
        }
    }
    let key = {
        let inner = r.vars();
        let vars = crate::http::proxy::headers::ProxyVars {
            inner: &inner,
            proxy_host: &conf.host,
            forwarded_for,
        };
        c.key.eval(&vars).into_bytes()
    };
    let hash = policy::hash_key(&key);
    let zone = match &c.zone {
        Some(z) => cache::zone(z),
        None => {
            let Some(crate::conf::cache::ZoneRef::Var(v)) = &c.zone_name else {
                return Begin::Off;
            };
            let name = r.eval(v);
            if name.is_empty() {
                return Begin::Off;
            }
            match c.zones.get(&name) {
                Some(z) => cache::zone(z),
                None => return Begin::Unknown,
            }
        }
    };
    let mut plan = Plan {
        zone: zone.clone(),
        conf: c.clone(),
        hash,
        key: key.clone(),
        main: (hash, key),
        status: "MISS",
        stale: None,
        store: true,
        guard: None,
        revalidating: false,
        converted_head: r.method == Method::HEAD && c.convert_head,
        range: None,
        stale_error: false,
        max_ranges,
        loc: loc.clone(),
    };
    if holds(r, conf, forwarded_for, &c.bypass) {
        plan.status = "BYPASS";
        return Begin::Go(Box::new(plan));
    }
    let started = std::time::Instant::now();
    let vary = !conf.ignore_headers.iter().any(|h| h == "vary");
    loop {
        let (uses, found) = find(&zone, &mut plan, r, vary);
        let hash = plan.hash;
        plan.store = uses >= c.min_uses && plan.store;
        match found {
            // nginx: fresh through its last second (`valid_sec < now` is expired), so
            // `proxy_cache_valid 1s` keeps an answer one to two seconds, never less than one.
            Found::Entry(f, head) if head.valid >= cache::now() => {
                return Begin::Answer(serve(r, &plan, conf, f, head), "HIT");
            }
            Found::Entry(f, head) => {
                plan.status = "EXPIRED";
                // nginx's `stale_updating` and `stale_error`: the upstream's
                // `stale-while-revalidate` / `stale-if-error` time past the expiry.
                let now = cache::now();
                let updating = c.use_stale & stale::UPDATING != 0
                    || head.valid.saturating_add(head.stale.updating) >= now;
                plan.stale_error = head.valid.saturating_add(head.stale.error) >= now;
                match zone.begin_fetch(&hash, None) {
                    Ok(g) => plan.guard = Some(g),
                    // Another request refreshes it.
                    Err(_) if updating => {
                        return Begin::Answer(serve(r, &plan, conf, f, head), "UPDATING")
                    }
                    Err(_) => {}
                }
                if c.revalidate
                    && head.status == StatusCode::OK
                    && (head.headers.contains_key(header::LAST_MODIFIED)
                        || head.headers.contains_key(header::ETAG))
                {
                    plan.revalidating = true;
                }
                if updating && c.background_update && plan.guard.is_some() {
                    // Answered now; this request's key stays locked (`UPDATING` for the
                    // others) until the background refresh ends.
                    if let Ok(dup) = f.try_clone() {
                        plan.stale = Some((dup, head.clone()));
                        return Begin::Background(serve(r, &plan, conf, f, head), Box::new(plan));
                    }
                }
                plan.stale = Some((f, head));
                return Begin::Go(Box::new(plan));
            }
            Found::Miss => {}
        }
        let age = c.lock.then_some(c.lock_age);
        match zone.begin_fetch(&hash, age) {
            Ok(g) => {
                plan.guard = Some(g);
                return Begin::Go(Box::new(plan));
            }
            Err(_) if !c.lock => return Begin::Go(Box::new(plan)),
            Err((since, n)) => {
                let notified = n.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !zone.is_fetching(&hash) {
                    continue;
                }
                let now = std::time::Instant::now();
                let aged = since + c.lock_age;
                let Some(left) = c.lock_timeout.checked_sub(started.elapsed()) else {
                    // nginx: past the lock's timeout the request goes to the upstream, and
                    // its response is not stored.
                    plan.store = false;
                    return Begin::Go(Box::new(plan));
                };
                let wait = left.min(aged.saturating_duration_since(now));
                let _ = tokio::time::timeout(wait, notified).await;
            }
        }
    }
}

/// The stored entry of a request: the main one of its key, or, when that one's `Vary` fields
/// have other values in this request, the entry of those values (whose own `Vary` may lead
/// to another, as nginx: a few steps at most); the plan then names it.
fn find(zone: &Zone, plan: &mut Plan, r: &Req<'_>, vary: bool) -> (u32, Found) {
    plan.hash = plan.main.0;
    plan.key = plan.main.1.clone();
    let (uses, mut found) = zone.lookup(&plan.hash, &plan.key);
    for _ in 0..3 {
        let Found::Entry(_, head) = &found else {
            return (uses, found);
        };
        let names = policy::vary_names(&head.headers);
        if !vary || names.is_empty() {
            return (uses, found);
        }
        let want = policy::variant(&names, r.headers);
        if want == head.variant {
            return (uses, found);
        }
        let key = policy::variant_key(&plan.main.1, &want);
        if key == plan.key {
            return (uses, Found::Miss);
        }
        plan.key = key;
        plan.hash = policy::hash_key(&plan.key);
        found = zone.lookup(&plan.hash, &plan.key).1;
    }
    (uses, Found::Miss)
}

/// Request header fields nginx does not pass to the upstream of a cached location (the
/// cache answers them), unless `proxy_set_header` sets them; a revalidation's own.
pub(super) fn upstream_headers(conf: &ProxyConf, plan: Option<&Plan>, headers: &mut HeaderMap) {
    // nginx: only a request whose answer may be stored (`u->cacheable`); below
    // `proxy_cache_min_uses`, or another method, the client's fields go as they are.
    if !plan.is_some_and(|p| p.store) {
        return;
    }
    for n in [
        "if-modified-since",
        "if-unmodified-since",
        "if-none-match",
        "if-match",
        "range",
        "if-range",
    ] {
        if !conf
            .set_headers
            .iter()
            .any(|(s, _)| s.eq_ignore_ascii_case(n))
        {
            headers.remove(n);
        }
    }
    if let Some(p) = plan.filter(|p| p.revalidating) {
        if let Some((_, head)) = &p.stale {
            if let Some(v) = head.headers.get(header::LAST_MODIFIED) {
                headers.insert(header::IF_MODIFIED_SINCE, v.clone());
            }
            if let Some(v) = head.headers.get(header::ETAG) {
                headers.insert(header::IF_NONE_MATCH, v.clone());
            }
        }
    }
}

/// A stored response as the answer: its header fields, its body from the file (one `Range`
/// of a 200 answered 206; a matching `If-None-Match` or `If-Modified-Since` 304).
fn serve(
    r: &Req<'_>,
    plan: &Plan,
    conf: &ProxyConf,
    f: std::fs::File,
    head: store::Head,
) -> Response<Body> {
    let max_ranges = plan.max_ranges;
    let mut headers = head.headers;
    headers.remove(header::TRANSFER_ENCODING);
    // nginx's charset filter runs before its range filter: the parts are recoded and named.
    let recode = super::forward::stored_charset(&plan.loc, conf, &mut headers, head.status);
    let len = head.body_len;
    let mut status = head.status;
    let (mut start, mut count) = (head.body_at, len);
    if status == StatusCode::OK && precondition_failed(r.headers, &headers) {
        let mut resp = Response::new(Body::Empty);
        *resp.status_mut() = StatusCode::PRECONDITION_FAILED;
        return resp;
    }
    if status == StatusCode::OK && not_modified(r.headers, &headers) {
        let mut resp = Response::new(Body::Empty);
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        for n in [
            header::ETAG,
            header::LAST_MODIFIED,
            header::EXPIRES,
            header::CACHE_CONTROL,
        ] {
            if let Some(v) = headers.get(&n) {
                resp.headers_mut().insert(n, v.clone());
            }
        }
        return resp;
    }
    // `max_ranges 0`: no ranges, and none offered (nginx's range filter steps aside).
    if status == StatusCode::OK && r.method == Method::GET && max_ranges != Some(0) {
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        let range = r.headers.get(header::RANGE).and_then(|v| v.to_str().ok());
        let if_range_ok = match r.headers.get(header::IF_RANGE) {
            None => true,
            Some(v) => {
                Some(v) == headers.get(header::ETAG)
                    || Some(v) == headers.get(header::LAST_MODIFIED)
            }
        };
        if let (Some(range), true) = (range, if_range_ok) {
            use crate::http::static_files::ByteRange;
            // Past `max_ranges` ranges, the whole response (as a static file's).
            match crate::http::range::parse(range, len, max_ranges) {
                ByteRange::Full => {}
                ByteRange::Part { start: s, end } => {
                    status = StatusCode::PARTIAL_CONTENT;
                    headers.insert(
                        header::CONTENT_RANGE,
                        HeaderValue::from_str(&format!("bytes {s}-{end}/{len}"))
                            .unwrap_or(HeaderValue::from_static("bytes */0")),
                    );
                    start += s;
                    count = end - s + 1;
                }
                ByteRange::Multi(spans) => {
                    // Several ranges: one `multipart/byteranges` 206 from the stored body,
                    // its parts read from the file past the stored head.
                    let ct = headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let m = crate::http::range::multipart(
                        &spans,
                        len,
                        ct.as_deref(),
                        crate::http::range::boundary(),
                    )
                    .shifted(start);
                    m.set_headers(&mut headers);
                    let body = crate::http::range::MultipartBody::body(Arc::new(f), m, recode);
                    let mut resp = Response::new(body);
                    resp.extensions_mut().insert(crate::http::charset::Applied);
                    *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
                    *resp.headers_mut() = headers;
                    return resp;
                }
                ByteRange::Unsatisfiable => {
                    let mut resp = Response::new(Body::Empty);
                    *resp.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                        resp.headers_mut().insert(header::CONTENT_RANGE, v);
                    }
                    resp.headers_mut()
                        .insert(header::CONTENT_LENGTH, HeaderValue::from(0));
                    return resp;
                }
            }
        }
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    let body = if count == 0 {
        Body::Empty
    } else {
        let mut b = Body::file(Arc::new(f), start, count);
        if let Some(t) = recode {
            b.set_recode(t);
        }
        b
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp.extensions_mut().insert(crate::http::charset::Applied);
    resp
}

/// nginx's `If-Match` and `If-Unmodified-Since` checks of a cached response (412).
fn precondition_failed(req: &HeaderMap, stored: &HeaderMap) -> bool {
    if let Some(im) = req.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) {
        let etag = stored.get(header::ETAG).and_then(|v| v.to_str().ok());
        let ok = im.trim() == "*" && etag.is_some()
            || etag.is_some_and(|e| !e.starts_with("W/") && im.split(',').any(|t| t.trim() == e));
        if !ok {
            return true;
        }
    }
    if let Some(ius) = req
        .get(header::IF_UNMODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
    {
        let date = |v: &str| httpdate::parse_http_date(v.trim()).ok();
        let lm = stored
            .get(header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(date);
        return match (date(ius), lm) {
            (Some(i), Some(l)) => l > i,
            _ => true,
        };
    }
    false
}

/// nginx's not-modified check of a cached response (`if_modified_since exact`).
fn not_modified(req: &HeaderMap, stored: &HeaderMap) -> bool {
    if let Some(inm) = req.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        let Some(etag) = stored.get(header::ETAG).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let weak = |t: &str| t.trim().trim_start_matches("W/").to_string();
        return inm.trim() == "*" || inm.split(',').any(|t| weak(t) == weak(etag));
    }
    match (
        req.get(header::IF_MODIFIED_SINCE),
        stored.get(header::LAST_MODIFIED),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// After the upstream answered (or failed): serve a stored response instead, or store this
/// one. `raw` is the upstream's header as it came (for `X-Accel-Expires`).
pub(super) fn after(
    r: &Req<'_>,
    conf: &ProxyConf,
    mut plan: Box<Plan>,
    result: Result<Response<Body>, u16>,
    raw: Option<&HeaderMap>,
    forwarded_for: &str,
    intercepted: bool,
) -> (Result<Response<Body>, u16>, &'static str) {
    let c = plan.conf.clone();
    let failed = match &result {
        Err(502) => stale::ERROR | stale::INVALID_HEADER,
        Err(504) => stale::TIMEOUT,
        Ok(resp) => stale::of_status(resp.status().as_u16()),
        Err(_) => 0,
    };
    // `stale-if-error` answers what `ngx_http_upstream_next` gives up on: here an error,
    // timeout or invalid header (a status is the upstream's own answer, as nginx's with one
    // server).
    let errors = stale::ERROR | stale::TIMEOUT | stale::INVALID_HEADER;
    if failed & c.use_stale != 0 || (plan.stale_error && failed & errors != 0) {
        if let Some((f, head)) = plan.stale.take() {
            return (Ok(serve(r, &plan, conf, f, head)), "STALE");
        }
    }
    let mut resp = match result {
        Ok(resp) => resp,
        Err(e) => return (Err(e), plan.status),
    };
    if plan.revalidating && resp.status() == StatusCode::NOT_MODIFIED {
        if let Some((f, head)) = revalidated(&mut plan, conf, raw) {
            return (Ok(serve(r, &plan, conf, f, head)), "REVALIDATED");
        }
    }
    let status = plan.status;
    if !plan.may_store(r, conf, forwarded_for) {
        return (Ok(resp), status);
    }
    let range = if r.method == Method::GET && plan.max_ranges != Some(0) {
        r.headers.get(header::RANGE).and_then(|v| v.to_str().ok())
    } else {
        None
    };
    let cx = StoreCx {
        ignore: &conf.ignore_headers,
        headers: r.headers,
        range,
        intercepted,
    };
    *resp.body_mut() = store_answer(&mut plan, &cx, &mut resp, raw);
    (Ok(resp), status)
}

/// A revalidation's 304: the stored response is fresh again and is the answer. As nginx,
/// its validity and `stale-*` times are the 304's own (`X-Accel-Expires`, `Cache-Control`,
/// `Expires`), else the stored response's header fields', else `proxy_cache_valid`'s for
/// the stored status (with the stored `stale-*` times); with none of them it stays expired.
/// The file is rewritten in place.
pub(super) fn revalidated(
    plan: &mut Plan,
    conf: &ProxyConf,
    raw: Option<&HeaderMap>,
) -> Option<(std::fs::File, store::Head)> {
    let (f, mut head) = plan.stale.take()?;
    let now = cache::now();
    let ignore = &conf.ignore_headers;
    let fresh = raw
        .and_then(|h| explicit_validity(h, ignore, now))
        .or_else(|| explicit_validity(&head.headers, ignore, now))
        .or_else(|| {
            let d = policy::rule_time(head.status.as_u16(), &plan.conf.valid)?;
            let ext = policy::stale_extensions(&head.headers, ignore).unwrap_or_default();
            Some((now.saturating_add(d), ext))
        });
    if let Some((valid, ext)) = fresh {
        let path = plan.zone.path(&plan.hash);
        if store::set_valid(&path, &f, &plan.key, valid, ext).is_ok() {
            head.valid = valid;
            head.stale = ext;
        }
    }
    Some((f, head))
}

/// The time a response's header fields make it fresh until, with its `stale-*` times; None
/// when they give none (nginx's `valid_sec` left 0: no field, `no-cache`, `max-age=0`, an
/// `Expires` past).
fn explicit_validity(
    headers: &HeaderMap,
    ignore: &[String],
    now: u64,
) -> Option<(u64, store::Stale)> {
    // Only the times: `Set-Cookie` and `Vary` decide whether an answer is stored, not how
    // long a stored one stays fresh.
    let mut times_only = ignore.to_vec();
    times_only.extend(["set-cookie".to_string(), "vary".to_string()]);
    let valid = policy::validity(200, headers, &times_only, &[], now).ok()?;
    let ext = policy::stale_extensions(headers, ignore).unwrap_or_default();
    Some((valid, ext))
}

/// What storing an upstream's answer needs of its request.
pub(super) struct StoreCx<'a> {
    /// `proxy_ignore_headers`, lower-cased.
    pub ignore: &'a [String],
    /// The request's header fields (the values of the answer's `Vary` fields).
    pub headers: &'a HeaderMap,
    /// The `Range` of a GET (its one range of a 200 is answered while the whole is stored).
    pub range: Option<&'a str>,
    /// An `error_page` answers it (stored as its status alone).
    pub intercepted: bool,
}

/// Stores an answer the plan may store (as its validity allows) while it streams: the
/// body the client gets (`resp`'s own taken; a 206 of the client's one range).
pub(super) fn store_answer(
    plan: &mut Plan,
    cx: &StoreCx<'_>,
    resp: &mut Response<Body>,
    raw: Option<&HeaderMap>,
) -> Body {
    let now = cache::now();
    let body = std::mem::take(resp.body_mut());
    let empty = HeaderMap::new();
    let valid = match policy::validity(
        resp.status().as_u16(),
        raw.unwrap_or(&empty),
        cx.ignore,
        &plan.conf.valid,
        now,
    ) {
        // A past `X-Accel-Expires: @T` is stored too, as nginx: the next request finds it
        // expired.
        Ok(v) => v,
        Err(_) => return body,
    };
    let Ok(ext) = policy::stale_extensions(raw.unwrap_or(&empty), cx.ignore) else {
        return body;
    };
    let max = plan.zone.conf.max_size;
    let declared: Option<u64> = resp
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if max > 0 && declared.is_some_and(|n| n > max) {
        return body;
    }
    // One range of a 200 being stored: the client gets its part while the whole is stored.
    if resp.status() == StatusCode::OK {
        if let (Some(len), Some(range)) = (declared, cx.range) {
            use crate::http::static_files::{parse_range, ByteRange};
            if let ByteRange::Part { start, end } = parse_range(range, len) {
                plan.range = Some((start, end, len));
            }
        }
    }
    let mut stored_headers = resp.headers().clone();
    for n in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
    ] {
        stored_headers.remove(n);
    }
    let names = if cx.ignore.iter().any(|h| h == "vary") {
        Vec::new()
    } else {
        policy::vary_names(raw.unwrap_or(&empty))
    };
    if names.is_empty() {
        // Without `Vary`, the key's own entry (it replaces the variants' main one).
        plan.hash = plan.main.0;
        plan.key = plan.main.1.clone();
    }
    let variant = policy::variant(&names, cx.headers);
    let head = store::encode_head(
        valid,
        ext,
        &plan.key,
        &variant,
        resp.status(),
        &stored_headers,
    );
    let dest = plan.zone.path(&plan.hash);
    let mut writer = match store::Writer::create(&dest, &head, max) {
        Ok(w) => w,
        Err(e) => {
            crate::fblog!(
                Crit,
                "open() \"{}\" failed ({})",
                dest.display(),
                crate::log::OsError(&e)
            );
            return body;
        }
    };
    if cx.intercepted {
        // An error page answers it: stored as its status alone, as nginx's cached error.
        if let Some(size) = writer.commit() {
            plan.zone.clone_stored(&plan.hash, size);
        }
        return body;
    }
    let range = plan.range.take();
    match body {
        Body::Empty => {
            if let Some(size) = writer.commit() {
                plan.zone.clone_stored(&plan.hash, size);
            }
            Body::Empty
        }
        Body::Full(Some(b)) => {
            if writer.write(&b) {
                if let Some(size) = writer.commit() {
                    plan.zone.clone_stored(&plan.hash, size);
                }
            }
            Body::Full(Some(b))
        }
        // Ended before it began (an empty body): hyper may never poll it.
        Body::Stream(s) if http_body::Body::is_end_stream(&s) => {
            if let Some(size) = writer.commit() {
                plan.zone.clone_stored(&plan.hash, size);
            }
            Body::Stream(s)
        }
        Body::Stream(s) => {
            use http_body_util::BodyExt;
            let tee = cache::Tee::new(s, writer, plan.zone.clone(), plan.hash, plan.guard.take());
            if let Some((start, end, len)) = range.filter(|_| declared.is_some()) {
                let sliced = cache::Slice::new(tee, start, end);
                let h = resp.headers_mut();
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                    h.insert(header::CONTENT_RANGE, v);
                }
                *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
                Body::Stream(sliced.boxed_unsync())
            } else if plan.converted_head {
                // The client asked for HEAD: the GET's body is read to the end for the file
                // only.
                tokio::spawn(async move {
                    let mut tee = tee;
                    while let Some(Ok(_)) = tee.frame().await {}
                });
                Body::Empty
            } else {
                Body::Stream(tee.boxed_unsync())
            }
        }
        other => other,
    }
}
