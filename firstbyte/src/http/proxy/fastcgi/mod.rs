//! `fastcgi_pass`: the request to a FastCGI server (PHP-FPM) as nginx's
//! ngx_http_fastcgi_module sends it, over the proxy's machinery.
//!
//! The route (peers, balancer, `upstream {}` keepalive) is the proxy's [`Route`], built from
//! the location's [`ProxyConf`] whose fields hold the `fastcgi_*` values. Per request:
//! pick a peer, take an idle connection from [`Pool`] (`fastcgi_keep_conn on` with
//! `keepalive N`) or connect (`fastcgi_connect_timeout`), write BEGIN_REQUEST, the PARAMS the
//! caller evaluated and the client's body as STDIN (each write within
//! `fastcgi_send_timeout`), then read records (each read within `fastcgi_read_timeout`):
//! STDERR is logged as nginx (`FastCGI sent in stderr: "..."`), STDOUT starts with the CGI
//! header (`cgi`), the rest of STDOUT is the body, streamed to the client (or buffered, as
//! `proxy_buffering`), until END_REQUEST, when a kept connection goes back to the pool.
//! Failures go to the next peer under `fastcgi_next_upstream`, as the proxy's.

pub mod cgi;
pub mod codec;
mod conn;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;

use super::{next, Attempt, ConnGuard, Failure, LogContext, Route, UpstreamVars};
use crate::conf::model::{NextUpstream, PeerAddr, ProxyConf};
use crate::http::body::Body;

use codec::REQUEST_ID;
pub use conn::Pool;
use conn::{connect, Conn, ReadError, SendError};

/// The client's body as STDIN.
pub enum Stdin {
    /// None (`fastcgi_pass_request_body off`, or no body).
    Empty,
    /// Streamed as it arrives: sent once.
    Stream(super::ReqBody),
    /// Read whole first (`fastcgi_request_buffering on`): sent to each server tried.
    Stored(Arc<super::Stored>),
}

/// The request as the caller evaluated it.
pub struct FcgiRequest {
    /// The PARAMS stream's content (name-value pairs).
    pub params: Vec<u8>,
    /// The client's body.
    pub body: Stdin,
    /// `$request_method`, for `fastcgi_next_upstream` (non-idempotent methods).
    pub method: http::Method,
}

/// `$document_root`-style parameters of the request: the PARAMS content for `pairs`.
pub fn encode_params<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in pairs {
        codec::name_value(&mut out, n, v);
    }
    out
}

/// The name of a request header as a FastCGI parameter (`HTTP_USER_AGENT`).
pub fn header_param(name: &str) -> String {
    let mut p = String::with_capacity(5 + name.len());
    p.push_str("HTTP_");
    for c in name.chars() {
        p.push(if c == '-' {
            '_'
        } else {
            c.to_ascii_uppercase()
        });
    }
    p
}

/// Sends the request over `route` and returns the response for the client.
pub async fn forward(
    route: &Route,
    pool: &Arc<Pool>,
    req: FcgiRequest,
    log: &LogContext<'_>,
    balance_key: Vec<u8>,
    up: &mut UpstreamVars,
) -> Result<Response<Body>, Failure> {
    let conf = &route.conf;
    let Some(fcgi) = conf.fastcgi.clone() else {
        return Err(Failure::BadGateway);
    };
    let keep = fcgi.keep_conn && route.keepalive.max > 0;
    // A streamed body, once sent, cannot go to the next server.
    let has_body = matches!(&req.body, Stdin::Stream(b) if !http_body::Body::is_end_stream(b));
    let mut body = Some(req.body);
    let mut attempt = Attempt::new(balance_key);
    let tries = route.tries();
    let started = Instant::now();
    let mut last = Failure::BadGateway;
    let mut head = Vec::with_capacity(req.params.len() + 64);
    codec::begin_request(&mut head, REQUEST_ID, fcgi.keep_conn);
    codec::stream(&mut head, codec::PARAMS, REQUEST_ID, &req.params);
    codec::stream(&mut head, codec::PARAMS, REQUEST_ID, b"");
    loop {
        let (i, guard, addr) = route.next_peer(&mut attempt, up, last, log, "fastcgi", "")?;
        let tries_left = tries.saturating_sub(attempt.tries());
        if has_body && body.is_none() {
            // The body went to a server that failed: it cannot be sent again.
            return Err(last);
        }
        let pooled = if keep { pool.checkout(&addr) } else { None };
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => match connect(&addr, conf.connect_timeout).await {
                Ok(c) => c,
                Err(e) => {
                    crate::fblog!(Error, "{}", log.line(&e, "fastcgi", Some(&addr), ""));
                    let outcome = if e.is_timeout() {
                        last = Failure::Timeout;
                        next::Outcome::Timeout
                    } else {
                        last = Failure::BadGateway;
                        next::Outcome::Error
                    };
                    up.end(last.status(), Instant::now());
                    route.failed(i);
                    drop(guard);
                    let facts = next::Request {
                        method: &req.method,
                        sent: false,
                        has_body: false,
                    };
                    if !next::go_next(
                        conf.next_upstream,
                        conf.next_upstream_timeout,
                        outcome,
                        facts,
                        tries_left,
                        started.elapsed(),
                    ) {
                        return Err(last);
                    }
                    continue;
                }
            },
        };
        up.connected(Instant::now());
        let tail = log.line(&"", "fastcgi", Some(&addr), "");
        let this = match &body {
            Some(Stdin::Stored(s)) => Stdin::Stored(s.clone()),
            _ => body.take().unwrap_or(Stdin::Empty),
        };
        let result = exchange(&mut conn, &head, this, conf, &tail).await;
        let facts = next::Request {
            method: &req.method,
            sent: true,
            has_body,
        };
        let outcome = match result {
            Ok((h, rest)) => {
                up.header(h.status, Instant::now());
                up.response_headers(&h.headers);
                let outcome = next::Outcome::Status(h.status);
                if NextUpstream::status_bit(h.status).is_some()
                    && next::go_next(
                        conf.next_upstream,
                        conf.next_upstream_timeout,
                        outcome,
                        facts,
                        tries_left,
                        started.elapsed(),
                    )
                {
                    if outcome.is_failure() {
                        route.failed(i);
                    }
                    up.end(h.status, Instant::now());
                    last = Failure::BadGateway;
                    continue;
                }
                if let Ok(mut b) = route.balancer.lock() {
                    b.succeeded(i);
                }
                let back = keep.then(|| (pool.clone(), addr.clone(), route.keepalive.max));
                return Ok(respond(conf, h, rest, conn, back, guard, tail));
            }
            Err(Exchange::ClientBody) => return Err(Failure::ClientBody),
            Err(Exchange::Failed {
                outcome: next::Outcome::Error,
                ..
            }) if reused && !has_body => {
                // An idle connection the server closed meanwhile (nginx: a cached
                // connection's error is not the server's fault, and not a try): again,
                // afresh.
                attempt.untry();
                up.forget();
                continue;
            }
            Err(Exchange::Failed {
                reason,
                failure,
                outcome,
            }) => {
                crate::fblog!(Error, "{}", log.line(&reason, "fastcgi", Some(&addr), ""));
                last = failure;
                outcome
            }
        };
        drop(conn);
        route.failed(i);
        drop(guard);
        up.end(last.status(), Instant::now());
        if !next::go_next(
            conf.next_upstream,
            conf.next_upstream_timeout,
            outcome,
            facts,
            tries_left,
            started.elapsed(),
        ) {
            return Err(last);
        }
    }
}

/// How one exchange failed before the response header.
enum Exchange {
    ClientBody,
    Failed {
        reason: String,
        failure: Failure,
        outcome: next::Outcome,
    },
}

fn failed(reason: impl Into<String>, timeout: bool) -> Exchange {
    Exchange::Failed {
        reason: reason.into(),
        failure: if timeout {
            Failure::Timeout
        } else {
            Failure::BadGateway
        },
        outcome: if timeout {
            next::Outcome::Timeout
        } else {
            next::Outcome::Error
        },
    }
}

fn invalid_header(reason: impl Into<String>) -> Exchange {
    Exchange::Failed {
        reason: reason.into(),
        failure: Failure::BadGateway,
        outcome: next::Outcome::InvalidHeader,
    }
}

fn send_failed(e: SendError) -> Exchange {
    match e {
        SendError::Timeout => failed(
            "upstream timed out (110: Connection timed out) while sending request to upstream",
            true,
        ),
        SendError::Io(e) => failed(
            format!(
                "writev() failed ({}) while sending request to upstream",
                crate::log::OsError(&e)
            ),
            false,
        ),
    }
}

fn read_failed(e: ReadError, what: &str) -> Exchange {
    match e {
        ReadError::Timeout => failed(
            format!("upstream timed out (110: Connection timed out) while {what}"),
            true,
        ),
        ReadError::Io(e) => failed(
            format!("recv() failed ({}) while {what}", crate::log::OsError(&e)),
            false,
        ),
        ReadError::Closed => failed(
            format!("upstream prematurely closed connection while {what}"),
            false,
        ),
        ReadError::Decode(e) => invalid_header(format!("{e} while {what}")),
    }
}

/// nginx's line for a STDERR record: the text without trailing CR, LF, '.' and ' '.
fn log_stderr(content: &[u8], what: &str, tail: &str) {
    let mut end = content.len();
    while end > 0 && matches!(content[end - 1], b'\r' | b'\n' | b'.' | b' ') {
        end -= 1;
    }
    crate::fblog!(
        Error,
        "FastCGI sent in stderr: \"{}\" while {what}{tail}",
        String::from_utf8_lossy(&content[..end])
    );
}

const READING_HEADER: &str = "reading response header from upstream";

/// Writes the request (BEGIN_REQUEST and PARAMS in `head`, then STDIN) and reads up to the
/// end of the CGI header: the header and the body bytes that came with it.
async fn exchange(
    conn: &mut Conn,
    head: &[u8],
    body: Stdin,
    conf: &ProxyConf,
    tail: &str,
) -> Result<(cgi::Head, Bytes), Exchange> {
    // Records go out together while the body has more at hand (a small request is one
    // write, as nginx's writev), and as soon as it has not, or past 64k.
    let mut pending = head.to_vec();
    if let Stdin::Stored(s) = &body {
        let mut i = 0;
        loop {
            let piece = s.piece(i).map_err(|e| {
                failed(
                    format!(
                        "pread() failed ({}) while sending request to upstream",
                        crate::log::OsError(&e)
                    ),
                    false,
                )
            })?;
            let Some(piece) = piece else {
                break;
            };
            i += 1;
            codec::stream(&mut pending, codec::STDIN, REQUEST_ID, &piece);
            if pending.len() >= 64 << 10 {
                conn.write(&pending, conf.send_timeout)
                    .await
                    .map_err(send_failed)?;
                pending.clear();
            }
        }
    }
    if let Stdin::Stream(mut body) = body {
        loop {
            let polled = std::future::poll_fn(|cx| {
                Poll::Ready(http_body::Body::poll_frame(Pin::new(&mut body), cx))
            })
            .await;
            let frame = match polled {
                Poll::Ready(f) => f,
                Poll::Pending => {
                    if !pending.is_empty() {
                        conn.write(&pending, conf.send_timeout)
                            .await
                            .map_err(send_failed)?;
                        pending.clear();
                    }
                    body.frame().await
                }
            };
            let Some(frame) = frame else {
                break;
            };
            let frame = frame.map_err(|_| Exchange::ClientBody)?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if !data.is_empty() {
                codec::stream(&mut pending, codec::STDIN, REQUEST_ID, &data);
            }
            if pending.len() >= 64 << 10 {
                conn.write(&pending, conf.send_timeout)
                    .await
                    .map_err(send_failed)?;
                pending.clear();
            }
        }
    }
    codec::stream(&mut pending, codec::STDIN, REQUEST_ID, b"");
    conn.write(&pending, conf.send_timeout)
        .await
        .map_err(send_failed)?;
    let limit = conf.buffers.buffer_size;
    let mut header = BytesMut::new();
    loop {
        let r = conn
            .record(conf.read_timeout)
            .await
            .map_err(|e| read_failed(e, READING_HEADER))?;
        if r.id != REQUEST_ID {
            return Err(invalid_header(format!(
                "upstream sent unexpected FastCGI request id {} while {READING_HEADER}",
                r.id
            )));
        }
        match r.kind {
            codec::STDERR => {
                log_stderr(&r.content, READING_HEADER, tail);
                let caught = conf.fastcgi.as_ref().is_some_and(|f| {
                    f.catch_stderr.iter().any(|c| {
                        !c.is_empty() && r.content.windows(c.len()).any(|w| w == c.as_bytes())
                    })
                });
                if caught {
                    return Err(invalid_header(format!(
                        "upstream sent invalid header while {READING_HEADER}"
                    )));
                }
            }
            // nginx: the end of stdout before a whole header is an invalid header.
            codec::STDOUT if r.content.is_empty() => {
                return Err(invalid_header(format!(
                    "upstream prematurely closed FastCGI stdout while {READING_HEADER}"
                )));
            }
            codec::STDOUT => {
                header.extend_from_slice(&r.content);
                match cgi::parse(&header) {
                    Ok(Some(h)) => {
                        let rest = header.split_off(h.len).freeze();
                        return Ok((h, rest));
                    }
                    Ok(None) if header.len() > limit => {
                        return Err(invalid_header(format!(
                            "upstream sent too big header while {READING_HEADER}"
                        )));
                    }
                    Ok(None) => {}
                    Err(e) => return Err(invalid_header(format!("{e} while {READING_HEADER}"))),
                }
            }
            kind => {
                return Err(invalid_header(format!(
                    "upstream sent unexpected FastCGI record: {kind} while {READING_HEADER}"
                )));
            }
        }
    }
}

/// The response for the client: the CGI header's status and fields (`Status`, `X-Accel-*`
/// and hop-by-hop fields hidden, as nginx), the body read on.
fn respond(
    conf: &ProxyConf,
    h: cgi::Head,
    rest: Bytes,
    conn: Conn,
    back: Option<(Arc<Pool>, PeerAddr, usize)>,
    guard: ConnGuard,
    tail: String,
) -> Response<Body> {
    let mut headers = h.headers;
    filter_headers(conf, &mut headers);
    let body = FcgiBody {
        first: (!rest.is_empty()).then_some(rest),
        reading: Some(Reading {
            conn,
            timeout: conf.read_timeout,
            tail: tail.clone(),
        }),
        fut: None,
        back,
        _guard: guard,
    };
    let mut resp = Response::new(Body::Empty);
    *resp.status_mut() = StatusCode::from_u16(h.status).unwrap_or(StatusCode::BAD_GATEWAY);
    *resp.headers_mut() = headers;
    *resp.body_mut() = if conf.buffering {
        Body::Stream(super::spool::buffered(body, &conf.buffers, tail).boxed_unsync())
    } else {
        resp.extensions_mut()
            .insert(crate::http::postpone::Unbuffered);
        Body::Stream(body.boxed_unsync())
    };
    resp
}

/// nginx's fastcgi hides `Status` and `X-Accel-*` unless `fastcgi_pass_header` names them;
/// connection-level fields are the server's own.
fn filter_headers(conf: &ProxyConf, headers: &mut HeaderMap) {
    if headers.contains_key(http::header::TRANSFER_ENCODING) {
        headers.remove(http::header::CONTENT_LENGTH);
    }
    let names: Vec<_> = headers.keys().cloned().collect();
    for name in names {
        let n = name.as_str();
        let passed = conf.pass_headers.iter().any(|p| p == n);
        let hop = matches!(
            n,
            "connection" | "keep-alive" | "transfer-encoding" | "te" | "trailer" | "upgrade"
        );
        let hidden = (n == "status" || n.starts_with("x-accel-")) && !passed;
        if hop || hidden || conf.hide_headers.iter().any(|h| h == n) {
            headers.remove(&name);
        }
    }
}

/// The connection while the body is read.
struct Reading {
    conn: Conn,
    timeout: Duration,
    tail: String,
}

enum Step {
    Data(Bytes),
    End,
    Failed(io::Error),
}

const READING: &str = "reading upstream";

async fn next_step(mut rd: Reading) -> (Reading, Step) {
    loop {
        match rd.conn.record(rd.timeout).await {
            Ok(r) if r.id != REQUEST_ID => {}
            Ok(r) => match r.kind {
                codec::STDOUT if !r.content.is_empty() => return (rd, Step::Data(r.content)),
                codec::STDERR => log_stderr(&r.content, READING, &rd.tail),
                codec::END_REQUEST => return (rd, Step::End),
                _ => {}
            },
            Err(e) => {
                let (msg, kind) = match e {
                    ReadError::Timeout => (
                        format!("upstream timed out (110: Connection timed out) while {READING}"),
                        io::ErrorKind::TimedOut,
                    ),
                    ReadError::Closed => (
                        format!("upstream prematurely closed connection while {READING}"),
                        io::ErrorKind::UnexpectedEof,
                    ),
                    ReadError::Io(e) => (
                        format!(
                            "recv() failed ({}) while {READING}",
                            crate::log::OsError(&e)
                        ),
                        e.kind(),
                    ),
                    ReadError::Decode(e) => {
                        (format!("{e} while {READING}"), io::ErrorKind::InvalidData)
                    }
                };
                crate::fblog!(Error, "{msg}{}", rd.tail);
                return (rd, Step::Failed(io::Error::new(kind, msg)));
            }
        }
    }
}

type StepFuture = Pin<Box<dyn Future<Output = (Reading, Step)> + Send>>;

/// The STDOUT stream after the header, as the response body.
struct FcgiBody {
    first: Option<Bytes>,
    reading: Option<Reading>,
    fut: Option<StepFuture>,
    /// Where a kept connection goes after END_REQUEST, and the upstream's `keepalive`.
    back: Option<(Arc<Pool>, PeerAddr, usize)>,
    /// `least_conn` counts the connection until the body is done.
    _guard: ConnGuard,
}

impl http_body::Body for FcgiBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if let Some(b) = this.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if this.fut.is_none() {
            let Some(rd) = this.reading.take() else {
                return Poll::Ready(None);
            };
            this.fut = Some(Box::pin(next_step(rd)));
        }
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Ready(None);
        };
        let Poll::Ready((rd, step)) = fut.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        this.fut = None;
        match step {
            Step::Data(d) => {
                this.reading = Some(rd);
                Poll::Ready(Some(Ok(Frame::data(d))))
            }
            Step::End => {
                if let Some((pool, peer, max)) = this.back.take() {
                    if rd.conn.dec.is_empty() {
                        pool.put(peer, rd.conn, max);
                    }
                }
                Poll::Ready(None)
            }
            Step::Failed(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.reading.is_none() && self.fut.is_none()
    }
}

impl super::spool::Upstream for FcgiBody {
    fn rearm(&mut self) {
        // Each read has its own timer, started when it starts.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parameter_names() {
        assert_eq!(header_param("user-agent"), "HTTP_USER_AGENT");
        assert_eq!(header_param("x-a_b"), "HTTP_X_A_B");
    }
}
