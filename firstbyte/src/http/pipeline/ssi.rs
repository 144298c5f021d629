//! `ssi on`: the response body through the SSI filter (`http::ssi`), with this request's
//! variables and its includes run as subrequests through the pipeline.
//!
//! A subrequest is a GET for the include's URI with the client's headers (less those that
//! would make it partial or conditional), run by `handle` on the connection's own task: the
//! location match, rewrite, static files, `proxy_pass`, `error_page` as any request, but
//! `internal` locations are open to it, it is not counted nor logged (nginx's
//! `log_subrequest off`), and its response goes through the SSI filter again (one level
//! deeper) but not through compression or the connection's duties. At most 50 deep
//! (nginx's NGX_HTTP_MAX_SUBREQUESTS) and 1000 per client request.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Request, Response};

use super::Req;
use crate::conf::model::{LocationConf, ServerConf};
use crate::http::body::{Body, BoxBody};
use crate::http::conn::Conn;
use crate::http::reqvars::RequestVars;
use crate::http::ssi::{self, Env, SubFuture};

/// nginx's NGX_HTTP_MAX_SUBREQUESTS: includes nested this deep are refused.
pub const MAX_DEPTH: u8 = 50;
/// Includes per client request (nginx's bound is its 16-bit reference count, 65535;
/// firstbyte's is stricter, for a page that includes itself twice at every level).
pub const MAX_COUNT: u32 = 1000;

/// A request extension marking a subrequest: its depth, the client request's count of
/// subrequests so far, and the client request's number on the connection.
#[derive(Clone, Debug)]
pub(super) struct Sub {
    pub depth: u8,
    pub count: Arc<AtomicU32>,
    pub nreq: u64,
}

/// What the filter keeps of the request: owned copies for the variables it may read later.
struct ReqEnv {
    conn: Arc<Conn>,
    method: String,
    request_uri: String,
    uri: String,
    args: Option<String>,
    protocol: &'static str,
    version: http::Version,
    headers: HeaderMap,
    head_length: u64,
    host: String,
    server: Arc<ServerConf>,
    document_root: Option<String>,
    request_filename: Option<String>,
    early_data: bool,
    start: std::time::Instant,
    nreq: u64,
    pipelined: bool,
    captures: Vec<Option<String>>,
    user: Option<crate::http::rewrite::uservars::UserVars>,
    limit_rate: u64,
    request_port: u16,
    sub: Sub,
}

impl Env for ReqEnv {
    fn var(&self, name: &str) -> Option<String> {
        use crate::conf::vars::Vars;
        let v = RequestVars {
            conn: self.conn.facts(),
            method: &self.method,
            request_uri: &self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: &self.headers,
            head_length: self.head_length,
            host: &self.host,
            server_name: super::server_name(&self.server),
            document_root: self.document_root.as_deref(),
            request_filename: self.request_filename.as_deref(),
            early_data: self.early_data,
            status: 0,
            response_headers: None,
            body_bytes_sent: 0,
            head_bytes: 0,
            start: self.start,
            ttfb: None,
            stats: Some(&self.conn.shared().stats),
            connection_requests: self.nreq,
            pipelined: self.pipelined,
            captures: &self.captures,
            user: self.user.as_ref(),
            upstream: None,
            fastcgi: None,
            guard: None,
            limit_rate: self.limit_rate,
            request_port: self.request_port,
            request_body: None,
        };
        v.get(name).map(|c| c.into_owned())
    }

    fn uri(&self) -> &str {
        &self.uri
    }

    fn include(&self, uri: String, args: Option<String>) -> Result<SubFuture, &'static str> {
        if self.sub.depth >= MAX_DEPTH {
            crate::fblog!(Error, "subrequests cycle while processing \"{uri}\"");
            return Err("subrequests cycle");
        }
        if self.sub.count.fetch_add(1, Ordering::Relaxed) >= MAX_COUNT {
            crate::fblog!(Error, "too many subrequests while processing \"{uri}\"");
            return Err("too many subrequests");
        }
        let target = match &args {
            Some(a) => format!("{}?{a}", crate::http::uri::encode_path(&uri)),
            None => crate::http::uri::encode_path(&uri),
        };
        let Ok(target) = http::Uri::try_from(target) else {
            return Err("invalid URI in \"include\"");
        };
        let mut req = Request::new(http_body_util::Empty::<Bytes>::new());
        *req.uri_mut() = target;
        *req.version_mut() = self.version;
        let mut headers = self.headers.clone();
        for h in [
            header::RANGE,
            header::IF_RANGE,
            header::IF_MODIFIED_SINCE,
            header::IF_UNMODIFIED_SINCE,
            header::IF_MATCH,
            header::IF_NONE_MATCH,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::ACCEPT_ENCODING,
        ] {
            headers.remove(h);
        }
        // HTTP/2 and HTTP/3 name the host in `:authority`, not in a header: the subrequest
        // goes to the same server block.
        if !headers.contains_key(header::HOST) {
            if let Ok(v) = HeaderValue::from_str(&self.host) {
                headers.insert(header::HOST, v);
            }
        }
        *req.headers_mut() = headers;
        req.extensions_mut().insert(Sub {
            depth: self.sub.depth + 1,
            count: self.sub.count.clone(),
            nreq: self.sub.nreq,
        });
        let conn = self.conn.clone();
        Ok(Box::pin(async move {
            let resp = super::handle(&conn, req, Some(0)).await;
            let status = resp.status().as_u16();
            (status, resp.into_body().take_inner())
        }))
    }
}

/// `ssi on` for this response: its body through the filter and its headers as nginx's SSI
/// header filter leaves them. Not a response without a body, a HEAD, or one already encoded.
pub(super) fn apply(r: &Req, mut resp: Response<Body>, loc: &Arc<LocationConf>) -> Response<Body> {
    if r.method == http::Method::HEAD
        || matches!(resp.body(), Body::Empty)
        || resp.headers().contains_key(header::CONTENT_ENCODING)
        || matches!(resp.status().as_u16(), 204 | 304)
    {
        return resp;
    }
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if !ssi::type_applies(ct, &loc.ssi_types) {
        return resp;
    }
    let h = resp.headers_mut();
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::ACCEPT_RANGES);
    h.remove(header::CONTENT_RANGE);
    if loc.ssi_last_modified {
        // The page's validators stay, the ETag weak (the bytes differ).
        if let Some(e) = h.get(header::ETAG).and_then(|v| v.to_str().ok()) {
            if !e.starts_with("W/") {
                if let Ok(v) = HeaderValue::from_str(&format!("W/{e}")) {
                    h.insert(header::ETAG, v);
                }
            }
        }
    } else {
        h.remove(header::LAST_MODIFIED);
        h.remove(header::ETAG);
    }
    let Some(conn) = r.arc.cloned() else {
        return resp;
    };
    let sub = r.sub.clone().unwrap_or(Sub {
        depth: 0,
        count: Arc::new(AtomicU32::new(0)),
        nreq: r.nreq,
    });
    let env = ReqEnv {
        conn,
        method: r.method.to_string(),
        request_uri: r.request_uri.to_string(),
        uri: r.uri.clone(),
        args: r.args.clone(),
        protocol: r.protocol,
        version: r.version,
        headers: r.headers.clone(),
        head_length: r.head_length,
        host: r.host.clone(),
        server: r.server.clone(),
        document_root: r.document_root.clone(),
        request_filename: r
            .request_filename
            .as_deref()
            .and_then(|p| p.to_str())
            .map(str::to_string),
        early_data: r.early_data,
        start: r.start,
        nreq: r.nreq,
        pipelined: r.pipelined,
        captures: r.captures.clone(),
        user: r.user.as_deref().cloned(),
        limit_rate: r.limit_rate.unwrap_or(0),
        request_port: r.request_port,
        sub,
    };
    let settings = ssi::Settings {
        silent_errors: loc.ssi_silent_errors,
        value_length: usize::try_from(loc.ssi_value_length).unwrap_or(usize::MAX),
    };
    let body = std::mem::take(resp.body_mut());
    let filtered = ssi::SsiBody::new(body, Arc::new(env), settings);
    *resp.body_mut() = Body::Stream(BoxBody::new(filtered));
    resp
}
