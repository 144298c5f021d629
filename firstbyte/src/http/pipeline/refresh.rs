//! `proxy_cache_background_update on`: the client got the expired stored response at once
//! (`STALE`); its request, built as for the upstream (no body), goes there in a task of its
//! own and the answer is stored, as nginx's background subrequest. The task holds the key's
//! fetch lock (others get `UPDATING`), so there is one per key; it ends with the exchange
//! (bounded by the upstream timeouts), whether or not the client is still there, and a
//! graceful stop waits for it. The upstream's `103 Early Hints` to it are dropped.

use std::sync::Arc;

use http::{Request, StatusCode};
use http_body_util::BodyExt;

use super::cache::{Plan, StoreCx};
use super::Req;
use crate::conf::model::{LocationConf, ProxyConf};
use crate::http::cache;
use crate::http::proxy::{self as px, LogContext, ReqBody};

/// What the refresh takes along from the request.
pub(super) struct Refresh<'a> {
    pub conf: &'a Arc<ProxyConf>,
    pub loc: &'a Arc<LocationConf>,
    pub route: &'a Arc<px::Route>,
    pub pool: &'a Arc<px::Pool>,
    pub log: &'a LogContext<'a>,
    pub balance_key: Vec<u8>,
    pub forwarded_for: &'a str,
}

/// Starts the refresh of `plan` with the upstream request `req`.
pub(super) fn start(r: &Req<'_>, how: Refresh<'_>, mut req: Request<ReqBody>, mut plan: Box<Plan>) {
    // No client waits for this answer: its `103 Early Hints` go nowhere. Over HTTP/1.1 they
    // would be written before the connection's next response (with their `Set-Cookie`).
    req.extensions_mut().remove::<px::PassHints>();
    // `proxy_no_cache` is evaluated now, with the request's variables (the upstream's
    // answer is not there yet).
    let no_cache = !plan.may_store(r, how.conf, how.forwarded_for);
    let headers = r.headers.clone();
    let (conf, loc) = (how.conf.clone(), how.loc.clone());
    let (route, pool) = (how.route.clone(), how.pool.clone());
    let log = super::forward::OwnedLog::of(how.log);
    let key = how.balance_key;
    // The body is read here to its end for the file, not in a task of its own.
    plan.converted_head = false;
    let running = cache::Refreshing::start();
    // The client's connection, if it ends after this response, closes when this ends.
    let hold = r.conn.hold_for_background();
    tokio::spawn(async move {
        let _running = (running, hold);
        let mut up = px::UpstreamVars::default();
        let res = px::forward(&route, &pool, req, None, &log.get(), key, &mut up).await;
        // An upstream that failed leaves the stored response as it was.
        let Ok(mut resp) = res else {
            return;
        };
        let raw = up.last_headers().cloned();
        if plan.revalidating && resp.status() == StatusCode::NOT_MODIFIED {
            super::cache::revalidated(&mut plan, &conf, raw.as_ref());
            return;
        }
        if no_cache {
            return;
        }
        let cx = StoreCx {
            ignore: &conf.ignore_headers,
            headers: &headers,
            range: None,
            intercepted: super::forward::intercepted(&conf, &loc, resp.status().as_u16()),
        };
        let mut body = super::cache::store_answer(&mut plan, &cx, &mut resp, raw.as_ref());
        while let Some(Ok(_)) = body.frame().await {}
    });
}
