//! The client's request body on its way to `proxy_pass` or `fastcgi_pass`: read whole first
//! (`proxy_request_buffering on`, `fastcgi_request_buffering on`, or a body of unknown
//! length that must be sent with its length) into a [`Stored`], or streamed with a copy kept
//! for `$request_body` ([`tee`]). `client_max_body_size` and `client_body_timeout` hold
//! either way: the body comes through `LimitBody` and `StallBody`, whose errors the caller
//! answers with 413 and 408.

use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;

use super::{server_name, Req};
use crate::conf::model::LocationConf;
use crate::http::proxy::{self as px, Capture, ReqBody, RequestBody, Stored};

/// Reads `body` whole into memory (`client_body_buffer_size`) and then a temp file in
/// `dir`, before any upstream is asked; `$request_body` and `$request_body_file` read it.
/// `Err` is the status to answer (400: the body failed; the caller knows when it was too
/// large or stalled).
pub(super) async fn read_whole(
    r: &Req<'_>,
    loc: &LocationConf,
    dir: &std::path::Path,
    body: &mut ReqBody,
) -> Result<Arc<Stored>, u16> {
    let mut s = Stored::new(
        usize::try_from(loc.client_body_buffer_size).unwrap_or(usize::MAX),
        dir,
        loc.client_body_in_file_only,
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
                Err(e) => return Err(write_failed(&e)),
            }
        }
    }
    s.finish().map_err(|e| write_failed(&e))?;
    let s = Arc::new(s);
    let _ = r.request_body.set(RequestBody::Stored(s.clone()));
    Ok(s)
}

fn write_failed(e: &std::io::Error) -> u16 {
    crate::fblog!(
        Crit,
        "write to a temporary file failed ({}) while reading client request body",
        crate::log::OsError(e)
    );
    500
}

/// A streamed body, of which `$request_body` keeps a copy while it fits
/// `client_body_buffer_size`; what the client already sent is taken first, to go with the
/// request's head. The watch ends if the client's body fails after the upstream had all of
/// its declared length (see `SharedBody`).
pub(super) async fn tee(
    r: &Req<'_>,
    loc: &LocationConf,
    body: ReqBody,
) -> (ReqBody, px::Watch<ReqBody>) {
    let size = usize::try_from(loc.client_body_buffer_size).unwrap_or(usize::MAX);
    let capture = Arc::new(Mutex::new(Capture::new(size)));
    let _ = r.request_body.set(RequestBody::Streamed(capture.clone()));
    let mut tee = px::TeeBody::new(body, capture, size);
    tee.preread().await;
    let (shared, watch) = px::SharedBody::new(tee);
    (px::request_body(shared), watch)
}

/// The body to send for a stored one.
pub(super) fn stored_body(s: &Arc<Stored>) -> ReqBody {
    px::request_body(px::StoredBody::new(s.clone()))
}
