//! The I/O shell of an HTTP/2 connection: one task reads, feeds the [`Core`], runs a service
//! future per request and polls the response bodies as the client's windows allow, and
//! writes what the turn produced in one write.
//!
//! Nothing is spawned per stream: every stream is polled inside the connection's task with
//! the task's waker (a connection carries at most `http2_max_concurrent_streams`, and a
//! turn polls each once). Reads go into a buffer on the stack; only an incomplete frame is
//! kept on the heap until the rest comes. The output buffer is freed once written while no
//! stream is open, so an idle connection holds no buffer.

use std::convert::Infallible;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::tls::stream::BatchWrite;
use bytes::{Buf, Bytes};
use http_body::Body as _;
use tokio::io::{AsyncRead, ReadBuf};

use super::body::{self, RecvBody};
use super::core::{Config, Core, Event};
use super::frame::Reason;
use crate::conf::model::ServerConf;
use crate::http::conn::Conn;
use crate::http::h2limits as limits;
use crate::http::pipeline::{HttpResponse, ResponseBody};
use crate::http::send_watch::{self, Progress};

/// Bytes read per read call: one TLS record's plaintext.
const READ_SIZE: usize = 16 * 1024;

/// The connection's output bytes (every stream's frames together) past which no more response
/// data is produced and no input read until the socket takes them: 128 KiB, eight full
/// records (`h2limits::MAX_SEND_BUF_SIZE`).
const OUT_HIGH: usize = limits::MAX_SEND_BUF_SIZE;

/// How long a connection that ended still reads what the client sends (nginx's
/// `lingering_timeout` default, 5 s, is for HTTP/1.1 bodies; a second is enough for frames
/// already in flight).
const LINGER: Duration = Duration::from_secs(1);

/// Reads per turn before the task yields to others.
const READS_PER_TURN: usize = 16;

type ServiceFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

/// Where a stream's response stands.
enum Answer {
    /// The service is working.
    Service(ServiceFuture),
    /// The head was sent; the body is sent as windows allow. `pending` was taken from the
    /// body and not sent yet.
    Body {
        body: Pin<Box<ResponseBody>>,
        pending: Bytes,
        /// Body bytes taken after `pending` and sent after it: the rest of a piece whose
        /// start topped up `pending`'s last frame (see [`top_up`]).
        carry: Bytes,
        /// The body's trailers, taken while `pending` still had bytes to send.
        trailers: Option<http::HeaderMap>,
        ended: bool,
        /// `http2_chunk_size`: the most body bytes per DATA frame (else the core's frame size).
        chunk: usize,
    },
    Done,
}

/// One stream in the shell.
struct Slot {
    id: u32,
    answer: Answer,
    /// The request body's queue, while the request has one.
    queue: Option<body::Shared>,
    progress: Arc<Progress>,
    head: bool,
    /// 103 Early Hints the service passes on (`early_hints`), sent before its answer.
    hints: Option<tokio::sync::mpsc::UnboundedReceiver<http::HeaderMap>>,
}

/// The connection's I/O state.
pub struct Shell<I> {
    pub(super) core: Core,
    io: I,
    conn: Arc<Conn>,
    /// An incomplete frame, kept until the rest arrives.
    partial: Vec<u8>,
    /// Bytes of `core.out` already written.
    written: usize,
    /// Written and not yet flushed to the socket.
    unflushed: bool,
    slots: Vec<Slot>,
    eof: bool,
    /// The send watchdog's next look.
    watch: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Requests started, and `keepalive_requests`: GOAWAY as the last one starts (as nginx
    /// decides when it creates the stream), so it leaves before that response.
    started: u64,
    max_requests: u64,
}

/// The core's limits for a connection of `server`.
pub fn config(server: &ServerConf, data_chunk: Option<usize>) -> Config {
    Config {
        max_concurrent: limits::max_concurrent_streams(server),
        max_header_list: limits::max_header_list_size(server) as usize,
        stream_window: limits::stream_window(server),
        conn_window: limits::INITIAL_CONNECTION_WINDOW.max(limits::stream_window(server)),
        max_pending_resets: limits::MAX_PENDING_ACCEPT_RESET_STREAMS,
        max_local_resets: limits::MAX_LOCAL_ERROR_RESET_STREAMS,
        data_frame: data_chunk.unwrap_or(super::frame::DEFAULT_MAX_FRAME),
    }
}

impl<I: AsyncRead + BatchWrite> Shell<I> {
    /// A connection on `io`, its server preface ready to go.
    pub fn new(conn: Arc<Conn>, io: I, cfg: Config, max_requests: u64) -> Self {
        Shell {
            started: 0,
            max_requests,
            core: Core::new(cfg),
            io,
            conn,
            partial: Vec::new(),
            written: 0,
            unflushed: false,
            slots: Vec::new(),
            eof: false,
            watch: None,
        }
    }

    /// Says GOAWAY: open streams finish, then the connection ends.
    pub fn goaway(&mut self) {
        self.core.goaway();
    }

    /// Runs the connection until it ends.
    pub fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..4 {
            self.core.set_clock(send_watch::now_ms());
            self.core.expire_drains();
            let read_more = match self.read(cx) {
                Err(()) => return Poll::Ready(()),
                Ok(more) => more,
            };
            self.events();
            let blocked = self.answer(cx);
            self.release();
            self.watchdog(cx);
            match self.write(cx) {
                Poll::Ready(Err(())) => return Poll::Ready(()),
                Poll::Ready(Ok(())) => {
                    if self.core.is_done() || (self.eof && self.slots.is_empty()) {
                        // close_notify and FIN; the socket is dropped when this returns.
                        return match Pin::new(&mut self.io).poll_shutdown(cx) {
                            Poll::Pending => Poll::Pending,
                            Poll::Ready(_) => Poll::Ready(()),
                        };
                    }
                    if self.eof {
                        // The client is gone: nothing it asked for can reach it.
                        return Poll::Ready(());
                    }
                    if !read_more && !blocked {
                        return Poll::Pending;
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Once the connection has ended (GOAWAY sent, the write side shut) while the client may
    /// still send: reads and drops what it sends until it closes or [`LINGER`] passes, as
    /// nginx's lingering close, so that closing the socket with its data unread (a TCP reset)
    /// does not destroy the GOAWAY and the response data the client has not read yet.
    async fn linger(&mut self) {
        if !self.eof {
            let linger = std::future::poll_fn(|cx| self.poll_linger(cx));
            let _ = tokio::time::timeout(LINGER, linger).await;
        }
    }

    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut stack = [MaybeUninit::<u8>::uninit(); READ_SIZE];
        loop {
            let mut rb = ReadBuf::uninit(&mut stack);
            match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => {}
                Poll::Ready(_) => return Poll::Ready(()),
            }
        }
    }

    /// Reads what is there and feeds the core; `Ok(true)` when the turn stopped reading with
    /// input possibly left. `Err` when the socket failed.
    fn read(&mut self, cx: &mut Context<'_>) -> Result<bool, ()> {
        if self.core.error().is_some() || self.eof {
            return Ok(false);
        }
        let mut stack = [MaybeUninit::<u8>::uninit(); READ_SIZE];
        for _ in 0..READS_PER_TURN {
            if self.core.out.len() > OUT_HIGH {
                // The client reads too slowly: its control frames wait until the output is
                // written (`true`: read again then, nothing registered a wake-up for input).
                return Ok(true);
            }
            let mut rb = ReadBuf::uninit(&mut stack);
            match Pin::new(&mut self.io).poll_read(cx, &mut rb) {
                Poll::Pending => return Ok(false),
                Poll::Ready(Err(_)) => return Err(()),
                Poll::Ready(Ok(())) => {}
            }
            let got = rb.filled();
            if got.is_empty() {
                self.eof = true;
                return Ok(false);
            }
            if self.partial.is_empty() {
                let used = self.core.recv(got);
                if used < got.len() {
                    self.partial.extend_from_slice(&got[used..]);
                }
            } else {
                self.partial.extend_from_slice(got);
                let used = self.core.recv(&self.partial);
                self.partial.drain(..used);
                if self.partial.is_empty() {
                    self.partial = Vec::new();
                }
            }
            if self.core.error().is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes the core's events: starts services, queues request data, drops reset streams.
    fn events(&mut self) {
        while let Some(e) = self.core.take_event() {
            match e {
                Event::Request {
                    id,
                    head,
                    end_stream,
                } => {
                    self.started += 1;
                    // nginx's `keepalive_time` on HTTP/2: a stream that starts after it ends
                    // the connection as `keepalive_requests` does (GOAWAY naming this stream).
                    if self.started >= self.max_requests
                        || self.conn.activity().age()
                            >= self.conn.first_server().default_location.keepalive_time
                    {
                        self.core.goaway();
                    }
                    let queue = (!end_stream).then(body::Shared::default);
                    let b = RecvBody::new(queue.clone(), head.content_length);
                    let head_method = head.parts.method == http::Method::HEAD;
                    let head_length = Some(head.head_length);
                    let mut parts = head.parts;
                    let mut hints = None;
                    if self.conn.site().proxies.early_hints() {
                        let (to, from) = tokio::sync::mpsc::unbounded_channel();
                        parts
                            .extensions
                            .insert(crate::http::proxy::EarlyHints::Queue(to));
                        hints = Some(from);
                    }
                    let req = http::Request::from_parts(parts, b);
                    let fut = crate::http::pipeline::serve(self.conn.clone(), req, head_length);
                    self.slots.push(Slot {
                        id,
                        answer: Answer::Service(Box::pin(fut)),
                        queue,
                        progress: Arc::default(),
                        head: head_method,
                        hints,
                    });
                }
                Event::Data {
                    id,
                    data,
                    end_stream,
                } => match self.slot(id).and_then(|s| s.queue.clone()) {
                    Some(q) => body::push(&q, data, end_stream),
                    None => self.core.release(id, data.len()),
                },
                Event::BadLength { id } => {
                    let slot = self
                        .slot(id)
                        .map(|s| (s.queue.clone(), matches!(s.answer, Answer::Service(_))));
                    match slot {
                        // Still deciding: a service that reads the body gets the error (400),
                        // one that answers without reading it a reset (see `step`).
                        Some((Some(q), true)) => body::bad_length(&q),
                        // Answering already: a reset unless the body was being read.
                        Some((Some(q), false)) => {
                            body::bad_length(&q);
                            if body::unread_bad_length(&q) {
                                self.core.reset(id, Reason::PROTOCOL_ERROR);
                            }
                        }
                        _ => self.core.reset(id, Reason::PROTOCOL_ERROR),
                    }
                }
                Event::Reset { id } => {
                    if let Some(i) = self.slots.iter().position(|s| s.id == id) {
                        let s = self.slots.swap_remove(i);
                        self.retire(s);
                    }
                }
            }
        }
    }

    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }

    /// A stream leaves the shell: its request body's unread bytes are credited back.
    fn retire(&mut self, s: Slot) {
        if let Some(q) = &s.queue {
            body::reset(q);
            let n = body::unread(q);
            self.core.release(s.id, n);
        }
        drop(s);
    }

    /// Polls every stream's service or body; whether a stream stopped only because the
    /// output buffer is full.
    fn answer(&mut self, cx: &mut Context<'_>) -> bool {
        let mut blocked = false;
        let mut i = 0;
        while i < self.slots.len() {
            let s = &mut self.slots[i];
            blocked |= step(&mut self.core, s, cx);
            if matches!(s.answer, Answer::Done) {
                let s = self.slots.swap_remove(i);
                self.retire(s);
            } else {
                i += 1;
            }
        }
        blocked
    }

    /// Returns the request body credit the services consumed.
    fn release(&mut self) {
        for s in &self.slots {
            if let Some(q) = &s.queue {
                let n = body::take_consumed(q);
                self.core.release(s.id, n);
            }
        }
    }

    /// `send_timeout`: streams whose response waited on the client that long are reset.
    fn watchdog(&mut self, cx: &mut Context<'_>) {
        let drain = self.core.drain_deadline();
        if self.slots.is_empty() && drain.is_none() {
            self.watch = None;
            return;
        }
        if let Some(w) = &mut self.watch {
            if w.as_mut().poll(cx).is_pending() {
                return;
            }
        }
        let now = send_watch::now_ms();
        // A stream draining its request body ends at its deadline (`Core::expire_drains`).
        let mut next: Option<u64> = drain;
        let mut stalled = Vec::new();
        for s in &self.slots {
            if s.progress.stalled_at(now) {
                stalled.push(s.id);
            } else if let Some(d) = s.progress.deadline() {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        if !stalled.is_empty() {
            crate::fblog!(
                Info,
                "client timed out (110: Connection timed out) while sending response to client, client: {}, streams reset: {}",
                self.conn.client_ip(),
                stalled.len()
            );
            for id in stalled {
                self.core.reset(id, Reason::CANCEL);
                if let Some(i) = self.slots.iter().position(|s| s.id == id) {
                    let s = self.slots.swap_remove(i);
                    self.retire(s);
                }
            }
        }
        // Deadlines move as streams progress: look again at the earliest, at most a second on.
        let wait = next.map_or(1000, |d| d.saturating_sub(now).clamp(10, 1000));
        let at = tokio::time::Instant::now() + Duration::from_millis(wait);
        match &mut self.watch {
            Some(w) => w.as_mut().reset(at),
            None => self.watch = Some(Box::pin(tokio::time::sleep_until(at))),
        }
        if let Some(w) = &mut self.watch {
            let _ = w.as_mut().poll(cx);
        }
    }

    /// Writes the core's output; `Ready(Ok)` once all is written and flushed. The NO_ERROR
    /// resets that follow responses go in a write (a TLS record) of their own, after them.
    fn write(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ()>> {
        loop {
            while self.written < self.core.out.len() {
                match self.io.poll_write_batch(cx, &self.core.out[self.written..]) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                    Poll::Ready(Ok(n)) => self.written += n,
                    Poll::Pending => return Poll::Pending,
                }
            }
            self.unflushed |= self.written > 0;
            self.core.out.clear();
            self.written = 0;
            if self.unflushed {
                match Pin::new(&mut self.io).poll_flush(cx) {
                    Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                    Poll::Ready(Ok(())) => self.unflushed = false,
                    Poll::Pending => return Poll::Pending,
                }
            }
            if !self.core.put_late_resets() {
                break;
            }
        }
        if self.slots.is_empty() && self.core.out.capacity() > 0 {
            // Idle: hold no buffer.
            self.core.out = Vec::new();
            self.core.shrink();
        }
        Poll::Ready(Ok(()))
    }
}

/// Moves one stream on: the service's answer, then body data within the windows. Whether it
/// stopped because the output buffer is full.
fn step(core: &mut Core, s: &mut Slot, cx: &mut Context<'_>) -> bool {
    if let Answer::Service(fut) = &mut s.answer {
        let r = send_watch::enter(&s.progress, || fut.as_mut().poll(cx));
        // The 103s that came so far go first (HEADERS without END_STREAM, RFC 9113 §8.1).
        if let Some(hints) = &mut s.hints {
            while let Poll::Ready(Some(h)) = hints.poll_recv(cx) {
                core.send_headers(s.id, 103, &h, None, false);
            }
        }
        let Poll::Ready(Ok(resp)) = r else {
            return false;
        };
        s.hints = None;
        let (parts, rbody) = resp.into_parts();
        if !core.is_open(s.id) {
            s.answer = Answer::Done;
            return false;
        }
        if s.queue.as_ref().is_some_and(body::unread_bad_length) {
            // The body broke its content-length and the service answered without reading
            // it: the error is the stream's (RFC 9113 §8.1.1), not an answer.
            core.reset(s.id, Reason::PROTOCOL_ERROR);
            s.answer = Answer::Done;
            return false;
        }
        if s.queue.as_ref().is_some_and(body::was_read) {
            // It read part of its body and answers (413, 408, an upstream's early answer):
            // the rest is not wanted (`Core::end_sending`).
            core.body_abandoned(s.id);
        }
        if parts.status.as_u16() == crate::http::pipeline::CLOSE {
            // nginx's 444: no response; the stream is reset, the connection goes on.
            core.reset(s.id, Reason::INTERNAL_ERROR);
            s.answer = Answer::Done;
            return false;
        }
        let end = s.head || rbody.is_end_stream();
        let length = if end {
            None
        } else {
            rbody
                .size_hint()
                .exact()
                .filter(|_| !parts.headers.contains_key(http::header::CONTENT_LENGTH))
        };
        core.send_headers(s.id, parts.status.as_u16(), &parts.headers, length, end);
        // Encoded: the map serves the next static response.
        crate::http::head_pool::give(parts.headers);
        s.answer = if end {
            Answer::Done
        } else {
            Answer::Body {
                chunk: rbody.h2_chunk.unwrap_or(usize::MAX),
                body: Box::pin(rbody),
                pending: Bytes::new(),
                carry: Bytes::new(),
                trailers: None,
                ended: false,
            }
        };
    }
    let Answer::Body {
        body,
        pending,
        carry,
        trailers,
        ended,
        chunk,
    } = &mut s.answer
    else {
        return false;
    };
    let chunk_size = Some(*chunk).filter(|&c| c != usize::MAX);
    loop {
        if !core.is_open(s.id) {
            s.answer = Answer::Done;
            return false;
        }
        if pending.is_empty() {
            *pending = std::mem::take(carry);
        }
        if pending.is_empty() {
            if let Some(t) = trailers.take() {
                core.send_trailers(s.id, &t);
                s.answer = Answer::Done;
                return false;
            }
        }
        if pending.is_empty() && trailers.is_none() && !*ended && body.reads_into() {
            // A file: read straight into DATA frames in the output buffer (no copy).
            let r = read_frames(core, s.id, body.as_mut().get_mut(), chunk_size);
            if matches!(r, Ok((sent, _)) if sent > 0) {
                // `send_timeout`'s progress: once per turn, not a clock read per frame.
                s.progress.touch(true);
            }
            match r {
                Err(()) => {
                    core.reset(s.id, Reason::INTERNAL_ERROR);
                    s.answer = Answer::Done;
                    return false;
                }
                Ok((_, true)) => return true,
                // The window is shut: the client's WINDOW_UPDATE (the watchdog's business).
                Ok(_) if body.reads_into() && core.is_open(s.id) => return false,
                // Ended (the top of the loop sees it), or trailers or an empty end follow.
                Ok(_) => continue,
            }
        }
        let frame = core.data_frame(chunk_size);
        if !pending.is_empty() && pending.len() < frame && !*ended && trailers.is_none() {
            let cap = core.send_capacity(s.id);
            if cap > pending.len() {
                match send_watch::enter(&s.progress, || body.as_mut().poll_frame(cx)) {
                    // Not ready: what there is goes now.
                    Poll::Pending => {}
                    Poll::Ready(None) => *ended = true,
                    Poll::Ready(Some(Err(_))) => {
                        core.reset(s.id, Reason::INTERNAL_ERROR);
                        s.answer = Answer::Done;
                        return false;
                    }
                    Poll::Ready(Some(Ok(f))) => {
                        match f.into_data() {
                            Ok(data) => top_up(pending, carry, data, frame.min(cap)),
                            Err(f) => *trailers = f.into_trailers().ok(),
                        }
                        if body.is_end_stream() {
                            *ended = true;
                        }
                    }
                }
            }
        }
        if !pending.is_empty() || *ended {
            let cap = core.send_capacity(s.id);
            if cap == 0 && !pending.is_empty() {
                return false;
            }
            let mut n = cap.min(pending.len()).min(*chunk);
            if n == pending.len() && n < cap && n > frame && !(*ended && carry.is_empty()) {
                // A last frame short of the frame size, window left and more to come: it
                // waits for the body's next piece (topped up above), as nginx fills its
                // frames from its whole buffer chain rather than per buffer.
                n -= n % frame;
            }
            let end = *ended && n == pending.len() && carry.is_empty() && trailers.is_none();
            core.send_data(
                s.id,
                &pending[..n],
                end,
                Some(*chunk).filter(|&c| c != usize::MAX),
            );
            pending.advance(n);
            if end {
                s.answer = Answer::Done;
                return false;
            }
            if pending.is_empty() && (!carry.is_empty() || trailers.is_some()) {
                continue;
            }
            if pending.len() < frame && n < cap && n > 0 && !*ended {
                // The whole frames went; the short rest is topped up first.
                continue;
            }
            if !pending.is_empty() {
                if n == *chunk && n < cap {
                    // Cut by http2_chunk_size, window left: the next frame, unless the output
                    // buffer is full.
                    if core.out.len() > OUT_HIGH {
                        return true;
                    }
                    continue;
                }
                return false;
            }
        }
        if core.out.len() > OUT_HIGH {
            return true;
        }
        if core.send_capacity(s.id) == 0 {
            // Waits for the client's WINDOW_UPDATE (the watchdog's business).
            return false;
        }
        match send_watch::enter(&s.progress, || body.as_mut().poll_frame(cx)) {
            Poll::Pending => return false,
            Poll::Ready(None) => *ended = true,
            Poll::Ready(Some(Err(_))) => {
                core.reset(s.id, Reason::INTERNAL_ERROR);
                s.answer = Answer::Done;
                return false;
            }
            Poll::Ready(Some(Ok(frame))) => {
                match frame.into_data() {
                    Ok(data) => *pending = data,
                    // The body's bytes are all sent (nothing is pending when it is polled):
                    // the trailers end the stream.
                    Err(frame) => {
                        if let Ok(t) = frame.into_trailers() {
                            core.send_trailers(s.id, &t);
                            s.answer = Answer::Done;
                            return false;
                        }
                    }
                }
                if body.is_end_stream() {
                    *ended = true;
                }
            }
        }
    }
}

/// Sends DATA frames of a body that [reads into](ResponseBody::reads_into) a buffer, its bytes
/// read straight into [`Core::out`] after each frame's header, while the window and the
/// output buffer allow and the body has bytes. `Ok((frames sent, blocked))`, blocked: the
/// output buffer is full; `Err`: a read failed.
fn read_frames(
    core: &mut Core,
    id: u32,
    body: &mut ResponseBody,
    chunk: Option<usize>,
) -> Result<(usize, bool), ()> {
    let mut sent = 0;
    loop {
        if !body.reads_into() || !core.is_open(id) || core.send_capacity(id) == 0 {
            return Ok((sent, false));
        }
        if core.out.len() > OUT_HIGH {
            return Ok((sent, true));
        }
        let n = core.send_data_with(id, chunk, |out, max| match body.read_into(out, max) {
            Some(Ok(_)) => Ok(body.is_end_stream()),
            Some(Err(e)) => Err(e),
            // Not a file read after all: nothing appended, nothing sent.
            None => Ok(false),
        });
        match n {
            Ok(0) => return Ok((sent, false)),
            Ok(_) => sent += 1,
            Err(_) => return Err(()),
        }
    }
}

/// Tops `pending` (shorter than `frame`) up to `frame` bytes from the start of `data`; the rest
/// of `data` is the `carry`. Copies at most one frame.
fn top_up(pending: &mut Bytes, carry: &mut Bytes, mut data: Bytes, frame: usize) {
    let k = frame.saturating_sub(pending.len()).min(data.len());
    let mut joined = bytes::BytesMut::with_capacity(pending.len() + k);
    joined.extend_from_slice(pending);
    joined.extend_from_slice(&data.split_to(k));
    *pending = joined.freeze();
    *carry = data;
}

/// Serves HTTP/2 on `io` until the connection ends; `stop` resolves when the server wants it
/// to end gracefully (idle timer, `keepalive_requests`, reload, quit) and says whether it
/// was the idle timer.
pub async fn serve<I, S>(conn: Arc<Conn>, io: I, server: &ServerConf, stop: S)
where
    I: AsyncRead + BatchWrite + Send,
    S: Future<Output = bool>,
{
    let max_requests = u64::from(server.default_location.keepalive_requests);
    let cfg = config(server, conn.data_chunk());
    let mut shell = Shell::new(conn.clone(), io, cfg, max_requests);
    let idle_out = tokio::select! {
        _ = std::future::poll_fn(|cx| shell.poll_run(cx)) => {
            shell.linger().await;
            return;
        }
        idle = stop => idle,
    };
    // A reload or quit gets RFC 9113 §6.8's two steps: GOAWAY with the largest id and a PING,
    // the final GOAWAY at its acknowledgement or after a second without one, so no request
    // already on its way is refused (`tests/load.rs` reloads under h2load and counts them);
    // nginx sends the final GOAWAY at once, refusing what crosses it. A connection the idle
    // timer ends gets the final GOAWAY at once: nothing is on its way.
    let busy = !idle_out;
    let run = async {
        if busy {
            shell.core.goaway_graceful();
            tokio::select! {
                _ = std::future::poll_fn(|cx| shell.poll_run(cx)) => {
                    shell.linger().await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        shell.goaway();
        std::future::poll_fn(|cx| shell.poll_run(cx)).await;
        shell.linger().await;
    };
    crate::http::conn::finish_graceful(run, idle_out).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h2::frame::{self, flag, kind, put_head, Head, HEADER_LEN};
    use std::task::Waker;
    use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};

    /// A connection of a site whose every answer is `return 200 "ok"`, and its server block.
    fn test_conn() -> (Arc<Conn>, Arc<ServerConf>) {
        let (_, _, conn, server) = crate::server::test_conn();
        (Arc::new(conn), server)
    }

    /// A socket that holds what is written until a flush, and does not finish its second
    /// flush the first time it is asked (it wakes the task).
    struct SlowFlush {
        inner: DuplexStream,
        held: Vec<u8>,
        flushes: usize,
    }

    impl AsyncRead for SlowFlush {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
        }
    }

    impl BatchWrite for SlowFlush {}

    impl AsyncWrite for SlowFlush {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.get_mut().held.extend_from_slice(b);
            Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            this.flushes += 1;
            if this.flushes == 2 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            while !this.held.is_empty() {
                let n = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, &this.held))?;
                this.held.drain(..n);
            }
            Pin::new(&mut this.inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    /// The client's preface, SETTINGS and a GET on stream 1.
    fn request() -> Vec<u8> {
        let mut b = frame::PREFACE.to_vec();
        put_head(&mut b, 0, kind::SETTINGS, 0, 0);
        let block = loona_hpack::Encoder::new().encode([
            (&b":method"[..], &b"GET"[..]),
            (b":scheme", b"https"),
            (b":authority", b"a"),
            (b":path", b"/"),
        ]);
        put_head(
            &mut b,
            block.len(),
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1,
        );
        b.extend_from_slice(&block);
        b
    }

    /// Polls the shell a few times with a no-op waker (the socket is an in-memory pipe).
    async fn turns(shell: &mut Shell<SlowFlush>, n: usize) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..n {
            let _ = shell.poll_run(&mut cx);
            tokio::task::yield_now().await;
        }
    }

    /// Reads frames until stream 1 ends; returns its DATA.
    async fn response(client: &mut DuplexStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let mut at = 0;
            while got.len() >= at + HEADER_LEN {
                let h = Head::parse(&got[at..]);
                let end = at + HEADER_LEN + h.len;
                if got.len() < end {
                    break;
                }
                if h.stream == 1 && h.kind == kind::DATA && h.has(flag::END_STREAM) {
                    return got[at + HEADER_LEN..end].to_vec();
                }
                at = end;
            }
            let n = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
                .await
                .expect("response in time")
                .unwrap();
            assert!(n > 0, "closed");
            got.extend_from_slice(&buf[..n]);
        }
    }

    /// A request is answered; a flush that was not done at once is finished on a later turn;
    /// a frame that came in two pieces is kept only until its rest arrives; once idle, the
    /// connection holds no buffer.
    #[tokio::test]
    async fn answers_retries_flushes_and_holds_no_buffer_when_idle() {
        let (conn, server) = test_conn();
        let (mut client, sock) = tokio::io::duplex(1 << 16);
        let io = SlowFlush {
            inner: sock,
            held: Vec::new(),
            flushes: 0,
        };
        let mut shell = Shell::new(conn, io, config(&server, None), 1000);
        let req = request();
        client.write_all(&req[..req.len() - 3]).await.unwrap();
        turns(&mut shell, 3).await;
        assert!(!shell.partial.is_empty(), "half a HEADERS frame is kept");
        client.write_all(&req[req.len() - 3..]).await.unwrap();
        turns(&mut shell, 5).await;
        assert!(shell.io.flushes >= 3, "the put-off flush was retried");
        assert_eq!(response(&mut client).await, b"ok");
        assert!(shell.slots.is_empty());
        assert_eq!(shell.partial.capacity(), 0, "no read buffer while idle");
        assert_eq!(shell.core.out.capacity(), 0, "no write buffer while idle");
    }
}
