//! The server side of one HTTP/2 connection as plain state, with no I/O (as quinn-proto is
//! to quinn): bytes in ([`Core::recv`]), [`Event`]s out (a request's head, request body data,
//! a stream gone), and the response frames the I/O shell asks for encoded straight into
//! [`Core::out`], which the shell writes to the socket once per turn.
//!
//! It keeps the connection's and every stream's state (RFC 9113 §5.1), both directions of
//! flow control (§6.9), SETTINGS, PING, GOAWAY, RST_STREAM, PRIORITY and CONTINUATION, and
//! checks requests (§8, in `headers`). Errors are decided here: a stream error resets the
//! stream (RST_STREAM), a connection error writes GOAWAY and ends the connection. The limits
//! of `http::h2limits` apply: concurrent streams (REFUSED_STREAM), the header list (431),
//! streams opened and reset by the client in one burst (CVE-2023-44487) and streams reset by
//! the server for the client's errors (CVE-2025-8671), both ending the connection with
//! GOAWAY `ENHANCE_YOUR_CALM`.

use std::collections::VecDeque;

use bytes::Bytes;
use http::HeaderMap;

use super::frame::{self, flag, kind, setting, Head, Reason, DEFAULT_WINDOW, MAX_WINDOW};
use super::headers::{self, HeadError, RequestHead};
use super::hpack;
use crate::http::contract::BodyLength;

/// The connection's limits (see `http::h2limits`).
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_concurrent: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, decoded bytes.
    pub max_header_list: usize,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request-body bytes per stream before the service reads.
    pub stream_window: u32,
    /// The connection's receive window.
    pub conn_window: u32,
    /// Streams opened and reset by the client in one read before the connection ends.
    pub max_pending_resets: usize,
    /// Streams reset for the client's protocol errors before the connection ends.
    pub max_local_resets: usize,
    /// DATA payload per frame at most (one TLS record with its frame header).
    pub data_frame: usize,
}

/// What the client's bytes meant, for the shell.
#[derive(Debug)]
pub enum Event {
    /// A new request; its body follows as [`Event::Data`] unless `end_stream`.
    Request {
        id: u32,
        head: Box<RequestHead>,
        end_stream: bool,
    },
    /// Request body bytes (possibly none, with `end_stream`: the body ended).
    Data {
        id: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The stream is gone (reset by either side): drop its service.
    Reset { id: u32 },
    /// The body's DATA did not add up to its `content-length`: the body fails (nginx answers
    /// 400, "client intended to send body data larger than declared" or "client prematurely
    /// closed stream"); nothing more of it is taken. A service that answers without reading
    /// its body gets the stream reset instead (PROTOCOL_ERROR, RFC 9113 §8.1.1).
    BadLength { id: u32 },
}

/// One open stream.
#[derive(Debug)]
struct Stream {
    id: u32,
    /// The client ended its side (END_STREAM received).
    recv_closed: bool,
    /// The body broke its `content-length`: further DATA is dropped (nginx's `skip_data`).
    skip_data: bool,
    /// The response has ended (END_STREAM sent).
    send_closed: bool,
    /// Response bytes the client lets the server send.
    send_window: i64,
    /// Request bytes the client may still send.
    recv_window: i64,
    /// Request bytes the service consumed, not yet returned by WINDOW_UPDATE.
    recv_unacked: u32,
    /// The DATA received against the declared `content-length` (the request contract's).
    length: BodyLength,
    /// Its request event is still queued (not taken up by the shell).
    fresh: bool,
    /// The response ended first and the request body is read on (see
    /// [`Core::end_sending`]): until this time ([`Core::set_clock`]'s milliseconds).
    drain_until: u64,
    /// The service read part of the body and gave up on it ([`Core::body_abandoned`]).
    abandoned: bool,
}

/// Where the connection preface stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preface {
    /// Bytes of the client magic matched so far.
    Magic,
    /// The magic came; the first frame must be SETTINGS.
    Settings,
    Done,
}

/// A header block spread over CONTINUATION frames.
struct Continuation {
    stream: u32,
    end_stream: bool,
    self_dependent: bool,
    block: Vec<u8>,
}

/// Closed streams remembered (for "closed" vs "idle", and for frames to ignore after the
/// server's RST_STREAM, RFC 9113 §5.1).
const CLOSED_MEMORY: usize = 64;

/// Bytes reserved for an encoded response head (a static file's five headers take ~90).
const RESPONSE_HEAD_GUESS: usize = 128;

/// How long a stream whose response ended before its request body reads on that body, in
/// milliseconds, before it is reset with NO_ERROR (nginx's `lingering_timeout` default).
const DRAIN_MS: u64 = 5000;

/// The PING payload of a graceful shutdown's first step.
const GOAWAY_PING: &[u8; 8] = b"fb-drain";

/// The connection.
pub struct Core {
    cfg: Config,
    /// Frames for the socket, in order.
    pub out: Vec<u8>,
    decoder: hpack::Decoder,
    streams: Vec<Stream>,
    events: VecDeque<Event>,
    preface: Preface,
    max_peer_id: u32,
    peer_max_frame: usize,
    peer_initial_window: i64,
    conn_send_window: i64,
    conn_recv_window: i64,
    conn_recv_unacked: u32,
    continuation: Option<Continuation>,
    /// Recently closed streams, and whether the server reset them.
    closed: VecDeque<(u32, bool)>,
    local_resets: usize,
    pending_resets: usize,
    /// The last stream id of the GOAWAY sent, if any.
    goaway: Option<u32>,
    peer_goaway: bool,
    /// The first GOAWAY of a two-step graceful shutdown was sent.
    draining: bool,
    /// The connection error sent: nothing more is read.
    error: Option<Reason>,
    scratch: Vec<u8>,
    /// Streams to reset with NO_ERROR once the output before them is written
    /// ([`Core::put_late_resets`]).
    late_resets: Vec<u32>,
    /// The shell's clock ([`Core::set_clock`]).
    now_ms: u64,
}

impl Core {
    /// A connection whose server preface (SETTINGS, the connection window's increase) is in
    /// [`Core::out`].
    pub fn new(cfg: Config) -> Core {
        let mut out = Vec::new();
        frame::put_settings(
            &mut out,
            &[
                (setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent),
                (setting::INITIAL_WINDOW_SIZE, cfg.stream_window),
                (setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list as u32),
            ],
        );
        let extra = i64::from(cfg.conn_window) - DEFAULT_WINDOW;
        if extra > 0 {
            frame::put_window_update(&mut out, 0, extra as u32);
        }
        // The client may only resize its table within SETTINGS_HEADER_TABLE_SIZE (4096).
        let decoder = hpack::Decoder::new(4096);
        Core {
            conn_recv_window: i64::from(cfg.conn_window),
            cfg,
            out,
            decoder,
            streams: Vec::new(),
            events: VecDeque::new(),
            preface: Preface::Magic,
            max_peer_id: 0,
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            peer_initial_window: DEFAULT_WINDOW,
            conn_send_window: DEFAULT_WINDOW,
            conn_recv_unacked: 0,
            continuation: None,
            closed: VecDeque::new(),
            local_resets: 0,
            pending_resets: 0,
            goaway: None,
            peer_goaway: false,
            draining: false,
            error: None,
            scratch: Vec::new(),
            late_resets: Vec::new(),
            now_ms: 0,
        }
    }

    /// Reads whole frames from `buf`; returns the bytes used (the rest is an incomplete frame
    /// to be given again with more). After a connection error everything is used.
    pub fn recv(&mut self, buf: &[u8]) -> usize {
        if self.error.is_some() {
            return buf.len();
        }
        self.pending_resets = 0;
        let mut at = 0;
        if self.preface == Preface::Magic {
            let n = buf.len().min(frame::PREFACE.len());
            if buf[..n] != frame::PREFACE[..n] {
                self.fail(Reason::PROTOCOL_ERROR);
                return buf.len();
            }
            if n < frame::PREFACE.len() {
                return 0;
            }
            at = n;
            self.preface = Preface::Settings;
        }
        while buf.len() - at >= frame::HEADER_LEN {
            let head = Head::parse(&buf[at..]);
            if head.len > frame::DEFAULT_MAX_FRAME {
                self.fail(Reason::FRAME_SIZE_ERROR);
                return buf.len();
            }
            // A client never sends PUSH_PROMISE (RFC 9113 §8.4): refused on its header, as
            // nginx, without waiting for a payload that may never come.
            if head.kind == kind::PUSH_PROMISE {
                self.fail(Reason::PROTOCOL_ERROR);
                return buf.len();
            }
            let end = at + frame::HEADER_LEN + head.len;
            if buf.len() < end {
                break;
            }
            let payload = &buf[at + frame::HEADER_LEN..end];
            at = end;
            if let Err(r) = self.frame(head, payload) {
                self.fail(r);
                return buf.len();
            }
        }
        at
    }

    /// The next event, if any.
    pub fn take_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front()?;
        if let Event::Request { id, .. } = &e {
            if let Some(i) = self.find(*id) {
                self.streams[i].fresh = false;
            }
        }
        Some(e)
    }

    /// Whether the connection is over: a connection error was sent, or GOAWAY went either
    /// way and no stream is left.
    pub fn is_done(&self) -> bool {
        self.error.is_some()
            || ((self.goaway.is_some() || self.peer_goaway) && self.streams.is_empty())
    }

    /// The connection error sent, if any.
    pub fn error(&self) -> Option<Reason> {
        self.error
    }

    /// Streams open.
    #[cfg(test)]
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The first step of a graceful shutdown of a busy connection (RFC 9113 §6.8): GOAWAY
    /// with the largest stream id and a PING; streams keep being accepted until the PING's
    /// acknowledgement (which follows every stream the client sent before it saw the GOAWAY)
    /// makes the final one ([`Core::goaway`]) go out. No request in flight is refused.
    pub fn goaway_graceful(&mut self) {
        if self.goaway.is_none() && self.error.is_none() && !self.draining {
            frame::put_goaway(&mut self.out, MAX_WINDOW as u32, Reason::NO_ERROR);
            frame::put_head(&mut self.out, 8, kind::PING, 0, 0);
            self.out.extend_from_slice(GOAWAY_PING);
            self.draining = true;
        }
    }

    /// Says GOAWAY (NO_ERROR): the streams opened so far are finished, later ones ignored.
    pub fn goaway(&mut self) {
        if self.goaway.is_none() && self.error.is_none() {
            frame::put_goaway(&mut self.out, self.max_peer_id, Reason::NO_ERROR);
            self.goaway = Some(self.max_peer_id);
        }
    }

    /// Frees what an idle connection need not keep.
    pub fn shrink(&mut self) {
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
        self.scratch = Vec::new();
    }

    /// Response bytes stream `id` may send now.
    pub fn send_capacity(&self, id: u32) -> usize {
        match self.find(id) {
            Some(i) if !self.streams[i].send_closed => self
                .conn_send_window
                .min(self.streams[i].send_window)
                .max(0) as usize,
            _ => 0,
        }
    }

    /// Whether stream `id` is open (a response can still be sent on it).
    pub fn is_open(&self, id: u32) -> bool {
        self.find(id).is_some_and(|i| !self.streams[i].send_closed)
    }

    /// Sends the response head of stream `id`; `end` when there is no body.
    pub fn send_headers(
        &mut self,
        id: u32,
        status: u16,
        headers: &HeaderMap,
        content_length: Option<u64>,
        end: bool,
    ) {
        if !self.is_open(id) {
            return;
        }
        let mut block = std::mem::take(&mut self.scratch);
        block.clear();
        // Freed while idle: one allocation of a typical response head, not a growth series.
        block.reserve(RESPONSE_HEAD_GUESS);
        headers::encode_response(&mut block, status, headers, content_length);
        frame::put_headers(&mut self.out, id, &block, end, self.peer_max_frame);
        self.scratch = block;
        if end {
            self.end_sending(id);
        }
    }

    /// Sends the trailer section on stream `id`, which ends the response (HEADERS with
    /// END_STREAM, CONTINUATION when it is larger than a frame).
    pub fn send_trailers(&mut self, id: u32, trailers: &HeaderMap) {
        if !self.is_open(id) {
            return;
        }
        let mut block = std::mem::take(&mut self.scratch);
        block.clear();
        headers::encode_trailers(&mut block, trailers);
        frame::put_headers(&mut self.out, id, &block, true, self.peer_max_frame);
        self.scratch = block;
        self.end_sending(id);
    }

    /// The most body bytes a DATA frame carries: the peer's `SETTINGS_MAX_FRAME_SIZE`, or
    /// less (`chunk`, `http2_chunk_size`; else the configured frame size).
    pub fn data_frame(&self, chunk: Option<usize>) -> usize {
        self.peer_max_frame
            .min(chunk.unwrap_or(self.cfg.data_frame))
    }

    /// Sends response body bytes on stream `id` (at most [`Core::send_capacity`]); `end` ends
    /// the response. DATA frames are cut at the client's SETTINGS_MAX_FRAME_SIZE and at
    /// `chunk` (the location's `http2_chunk_size`), else at the connection's frame size.
    pub fn send_data(&mut self, id: u32, data: &[u8], end: bool, chunk: Option<usize>) {
        let Some(i) = self.find(id).filter(|&i| !self.streams[i].send_closed) else {
            return;
        };
        let n = data.len() as i64;
        debug_assert!(
            n <= self
                .conn_send_window
                .min(self.streams[i].send_window)
                .max(0)
        );
        self.streams[i].send_window -= n;
        self.conn_send_window -= n;
        let max = self.data_frame(chunk);
        frame::put_data(&mut self.out, id, data, end, max);
        if end {
            self.end_sending(id);
        }
    }

    /// Sends one DATA frame on stream `id` whose payload `fill` appends to [`Core::out`]
    /// itself, right after the frame's header: a file body is read straight into the frame
    /// that carries it, with no copy of its bytes. `fill` is told the most it may append —
    /// the send capacity cut to the frame size (`chunk` as in [`Core::send_data`]) — and
    /// answers whether what it appended ends the response. The header is written once the
    /// length is known. Nothing is sent when the capacity is 0 (`fill` is not called), when
    /// `fill` fails (its error is returned), or when it appended nothing and did not end the
    /// response; a `fill` that appends more than it was allowed fails the same way. `Ok` is
    /// the payload's length.
    pub fn send_data_with(
        &mut self,
        id: u32,
        chunk: Option<usize>,
        fill: impl FnOnce(&mut Vec<u8>, usize) -> std::io::Result<bool>,
    ) -> std::io::Result<usize> {
        let limit = self.send_capacity(id).min(self.data_frame(chunk));
        if limit == 0 {
            return Ok(0);
        }
        let at = self.out.len();
        self.out.reserve(frame::HEADER_LEN + limit);
        self.out.extend_from_slice(&[0; frame::HEADER_LEN]);
        let end = fill(&mut self.out, limit);
        let n = self.out.len() - at - frame::HEADER_LEN;
        let end = match end {
            Ok(_) if n > limit => Err(std::io::Error::other("a DATA payload past its limit")),
            Ok(false) if n == 0 => Ok(false),
            Ok(end) => {
                let flags = if end { flag::END_STREAM } else { 0 };
                let head = frame::head_bytes(n, kind::DATA, flags, id);
                self.out[at..at + frame::HEADER_LEN].copy_from_slice(&head);
                let Some(i) = self.find(id) else {
                    return Ok(0);
                };
                self.streams[i].send_window -= n as i64;
                self.conn_send_window -= n as i64;
                if end {
                    self.end_sending(id);
                }
                return Ok(n);
            }
            Err(e) => Err(e),
        };
        self.out.truncate(at);
        end.map(|_| 0)
    }

    /// Resets stream `id` for the server's own reason (the service failed, `send_timeout`).
    pub fn reset(&mut self, id: u32, reason: Reason) {
        if let Some(i) = self.find(id) {
            frame::put_rst(&mut self.out, id, reason);
            self.streams.swap_remove(i);
            self.remember_closed(id, true);
        }
    }

    /// The service consumed `n` bytes of stream `id`'s request body: the windows open again
    /// (WINDOW_UPDATE once half a window is consumed).
    pub fn release(&mut self, id: u32, n: usize) {
        if n == 0 {
            return;
        }
        let n = n as u32;
        if let Some(i) = self.find(id) {
            let s = &mut self.streams[i];
            // A draining stream's body is read only as far as its window goes.
            if !s.recv_closed && !s.send_closed {
                s.recv_unacked += n;
                if s.recv_unacked >= self.cfg.stream_window / 2 {
                    frame::put_window_update(&mut self.out, id, s.recv_unacked);
                    s.recv_window += i64::from(s.recv_unacked);
                    s.recv_unacked = 0;
                }
            }
        }
        self.release_conn(n);
    }

    fn release_conn(&mut self, n: u32) {
        self.conn_recv_unacked += n;
        if self.conn_recv_unacked >= self.cfg.conn_window / 2 {
            frame::put_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += i64::from(self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    fn fail(&mut self, reason: Reason) {
        frame::put_goaway(&mut self.out, self.max_peer_id, reason);
        self.error = Some(reason);
        self.events.clear();
        self.late_resets.clear();
    }

    fn remember_closed(&mut self, id: u32, by_server: bool) {
        if self.closed.len() == CLOSED_MEMORY {
            self.closed.pop_front();
        }
        self.closed.push_back((id, by_server));
    }

    /// Whether `id` was closed recently, and whether by the server's reset.
    fn closed_as(&self, id: u32) -> Option<bool> {
        self.closed.iter().find(|c| c.0 == id).map(|c| c.1)
    }

    /// The response ended: the stream closes, or, with the request still coming, either
    /// drains or is reset with NO_ERROR (RFC 9113 §8.1).
    ///
    /// It drains (half-closed local: the body is read and dropped, its checks still made, so
    /// that a malformed body is a stream error whether it came before the response or after)
    /// while the rest of the body can come within the stream's window, which is not opened
    /// again, for at most [`DRAIN_MS`]; it closes when the body ends. A declared body larger
    /// than the window, one the service read part of and gave up on ([`Core::body_abandoned`]),
    /// one already failed, or a window used up gets the reset instead, after
    /// the response's bytes ([`Core::put_late_resets`]): a client reading the response and
    /// the reset in one piece may see its upload fail before it sees the response (curl).
    fn end_sending(&mut self, id: u32) {
        let Some(i) = self.find(id) else {
            return;
        };
        let s = &mut self.streams[i];
        if s.recv_closed {
            self.streams.swap_remove(i);
            self.remember_closed(id, false);
            return;
        }
        let window = s.recv_window.max(0) as u64;
        let fits = s.length.left().is_none_or(|r| r <= window);
        if fits && window > 0 && !s.skip_data && !s.abandoned {
            s.send_closed = true;
            s.drain_until = self.now_ms + DRAIN_MS;
        } else {
            self.stop_body(id);
        }
    }

    /// The service of stream `id` answers after it read part of its request body and stopped
    /// (too large, timed out, its upstream answered first): the rest is not read after the
    /// response, the stream is reset with NO_ERROR once the response is written.
    pub fn body_abandoned(&mut self, id: u32) {
        if let Some(i) = self.find(id) {
            self.streams[i].abandoned = true;
        }
    }

    /// Drops stream `id` and resets it with NO_ERROR once the output so far is written.
    fn stop_body(&mut self, id: u32) {
        if let Some(i) = self.find(id) {
            self.streams.swap_remove(i);
        }
        self.remember_closed(id, true);
        self.late_resets.push(id);
    }

    /// A draining stream's request body ended: the stream closes.
    fn close_drained(&mut self, i: usize) {
        let id = self.streams.swap_remove(i).id;
        self.remember_closed(id, false);
    }

    /// The shell's clock, in milliseconds, for the draining streams' deadlines.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// The earliest deadline of a draining stream.
    pub fn drain_deadline(&self) -> Option<u64> {
        self.streams
            .iter()
            .filter(|s| s.send_closed)
            .map(|s| s.drain_until)
            .min()
    }

    /// Resets (NO_ERROR) the draining streams whose time is up.
    pub fn expire_drains(&mut self) {
        while let Some(s) = self
            .streams
            .iter()
            .find(|s| s.send_closed && s.drain_until <= self.now_ms)
        {
            let id = s.id;
            self.stop_body(id);
        }
    }

    /// To be called once [`Core::out`] is written: puts the NO_ERROR resets that follow
    /// responses ended before their requests in it; whether there were any.
    pub fn put_late_resets(&mut self) -> bool {
        if self.late_resets.is_empty() {
            return false;
        }
        for id in self.late_resets.drain(..) {
            frame::put_rst(&mut self.out, id, Reason::NO_ERROR);
        }
        true
    }

    /// The client reset stream `id`, which the server had closed: any frame after this is
    /// the client's error (RFC 9113 §5.1), whatever the server's reset said, and the server's
    /// pending reset is not sent.
    fn reset_by_client(&mut self, id: u32) {
        if let Some(c) = self.closed.iter_mut().find(|c| c.0 == id) {
            c.1 = false;
        }
        self.late_resets.retain(|&x| x != id);
    }

    /// Drops a stream (reset by either side) and tells the shell, or forgets its queued
    /// request if the shell has not taken it up.
    fn drop_stream(&mut self, id: u32, by_server: bool) -> bool {
        let Some(i) = self.find(id) else {
            return false;
        };
        let s = self.streams.swap_remove(i);
        self.remember_closed(id, by_server);
        if s.fresh {
            self.events.retain(|e| match e {
                Event::Request { id: x, .. }
                | Event::Data { id: x, .. }
                | Event::BadLength { id: x } => *x != id,
                Event::Reset { .. } => true,
            });
        } else {
            self.events.push_back(Event::Reset { id });
        }
        s.fresh
    }

    /// A stream error caused by the client: RST_STREAM, counted toward
    /// [`Config::max_local_resets`].
    fn stream_error(&mut self, id: u32, reason: Reason) -> Result<(), Reason> {
        frame::put_rst(&mut self.out, id, reason);
        if !self.drop_stream(id, true) {
            self.remember_closed(id, true);
        }
        self.local_resets += 1;
        if self.local_resets > self.cfg.max_local_resets {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        Ok(())
    }

    fn frame(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if self.preface == Preface::Settings {
            // RFC 9113 §3.4: the magic is followed by a SETTINGS frame. One that acknowledges
            // the server's (sent first) counts, as nginx and the h2 crate take it: clients
            // with nothing to set send just that (nginx's own test client does).
            if head.kind != kind::SETTINGS {
                return Err(Reason::PROTOCOL_ERROR);
            }
            self.preface = Preface::Done;
        }
        if let Some(c) = &self.continuation {
            if head.kind != kind::CONTINUATION || head.stream != c.stream {
                return Err(Reason::PROTOCOL_ERROR);
            }
        }
        match head.kind {
            kind::DATA => self.on_data(head, payload),
            kind::HEADERS => self.on_headers(head, payload),
            kind::CONTINUATION => self.on_continuation(head, payload),
            kind::PRIORITY => {
                if head.stream == 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() != 5 {
                    return self.stream_error(head.stream, Reason::FRAME_SIZE_ERROR);
                }
                let dep = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if dep & 0x7fff_ffff == head.stream {
                    return self.stream_error(head.stream, Reason::PROTOCOL_ERROR);
                }
                Ok(())
            }
            kind::RST_STREAM => {
                if head.stream == 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() != 4 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                if head.stream > self.max_peer_id {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if self.drop_stream(head.stream, false) {
                    self.pending_resets += 1;
                    if self.pending_resets > self.cfg.max_pending_resets {
                        return Err(Reason::ENHANCE_YOUR_CALM);
                    }
                } else {
                    self.reset_by_client(head.stream);
                }
                Ok(())
            }
            kind::SETTINGS => self.on_settings(head, payload),
            kind::PUSH_PROMISE => Err(Reason::PROTOCOL_ERROR),
            kind::PING => {
                if head.stream != 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() != 8 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                if !head.has(flag::ACK) {
                    frame::put_pong(&mut self.out, payload);
                } else if self.draining && payload == GOAWAY_PING {
                    self.goaway();
                }
                Ok(())
            }
            kind::GOAWAY => {
                if head.stream != 0 {
                    return Err(Reason::PROTOCOL_ERROR);
                }
                if payload.len() < 8 {
                    return Err(Reason::FRAME_SIZE_ERROR);
                }
                self.peer_goaway = true;
                Ok(())
            }
            kind::WINDOW_UPDATE => self.on_window_update(head, payload),
            // Unknown types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn on_settings(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if head.stream != 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        if head.has(flag::ACK) {
            return if payload.is_empty() {
                Ok(())
            } else {
                Err(Reason::FRAME_SIZE_ERROR)
            };
        }
        if payload.len() % 6 != 0 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        for p in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([p[0], p[1]]);
            let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
            match id {
                setting::ENABLE_PUSH if v > 1 => return Err(Reason::PROTOCOL_ERROR),
                setting::INITIAL_WINDOW_SIZE => {
                    let v = i64::from(v);
                    if v > MAX_WINDOW {
                        return Err(Reason::FLOW_CONTROL_ERROR);
                    }
                    let delta = v - self.peer_initial_window;
                    self.peer_initial_window = v;
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return Err(Reason::FLOW_CONTROL_ERROR);
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => {
                    let v = v as usize;
                    if !(frame::DEFAULT_MAX_FRAME..=(1 << 24) - 1).contains(&v) {
                        return Err(Reason::PROTOCOL_ERROR);
                    }
                    self.peer_max_frame = v;
                }
                // The encoder never uses the dynamic table; the server never pushes; its
                // responses' header lists are its own.
                setting::HEADER_TABLE_SIZE
                | setting::MAX_CONCURRENT_STREAMS
                | setting::MAX_HEADER_LIST_SIZE => {}
                _ => {}
            }
        }
        frame::put_settings_ack(&mut self.out);
        Ok(())
    }

    fn on_window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        if payload.len() != 4 {
            return Err(Reason::FRAME_SIZE_ERROR);
        }
        let inc = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
        );
        if head.stream == 0 {
            if inc == 0 {
                return Err(Reason::PROTOCOL_ERROR);
            }
            self.conn_send_window += inc;
            if self.conn_send_window > MAX_WINDOW {
                return Err(Reason::FLOW_CONTROL_ERROR);
            }
            return Ok(());
        }
        if head.stream > self.max_peer_id {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let Some(i) = self.find(head.stream) else {
            return Ok(());
        };
        if inc == 0 {
            return self.stream_error(head.stream, Reason::PROTOCOL_ERROR);
        }
        let s = &mut self.streams[i];
        s.send_window += inc;
        if s.send_window > MAX_WINDOW {
            return self.stream_error(head.stream, Reason::FLOW_CONTROL_ERROR);
        }
        Ok(())
    }

    fn on_data(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        let id = head.stream;
        if id == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let (from, to) = frame::unpad(&head, payload).ok_or(Reason::PROTOCOL_ERROR)?;
        if id > self.max_peer_id {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let len = payload.len() as i64;
        self.conn_recv_window -= len;
        if self.conn_recv_window < 0 {
            return Err(Reason::FLOW_CONTROL_ERROR);
        }
        let Some(i) = self.find(id).filter(|&i| !self.streams[i].recv_closed) else {
            self.release_conn(len as u32);
            if self.find(id).is_none() && self.closed_as(id) == Some(true) {
                return Ok(());
            }
            return self.stream_error(id, Reason::STREAM_CLOSED);
        };
        let s = &mut self.streams[i];
        if s.skip_data {
            s.recv_closed |= head.has(flag::END_STREAM);
            self.release_conn(len as u32);
            return Ok(());
        }
        s.recv_window -= len;
        if s.recv_window < 0 {
            self.release_conn(len as u32);
            return self.stream_error(id, Reason::FLOW_CONTROL_ERROR);
        }
        let data = &payload[from..to];
        let end = head.has(flag::END_STREAM);
        // The request contract's count: more DATA than declared, or an end short of it.
        if s.length.feed(data.len()).is_err() || (end && s.length.end().is_err()) {
            if s.send_closed {
                // Answered already: nothing will read the body (RFC 9113 §8.1.1).
                self.release_conn(len as u32);
                return self.stream_error(id, Reason::PROTOCOL_ERROR);
            }
            s.skip_data = true;
            s.recv_closed |= end;
            self.release_conn(len as u32);
            self.events.push_back(Event::BadLength { id });
            return Ok(());
        }
        if s.send_closed {
            // Draining: dropped, the connection's credit given back, not the stream's.
            let used_up = s.recv_window <= 0;
            self.release_conn(len as u32);
            if end {
                self.close_drained(i);
            } else if used_up {
                self.stop_body(id);
            }
            return Ok(());
        }
        if end {
            s.recv_closed = true;
        }
        // Padding is given back at once, the data when the service reads it.
        let pad = len as usize - data.len();
        if !data.is_empty() || end {
            self.events.push_back(Event::Data {
                id,
                data: Bytes::copy_from_slice(data),
                end_stream: end,
            });
        }
        if pad > 0 {
            self.release(id, pad);
        }
        Ok(())
    }

    fn on_headers(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        let id = head.stream;
        if id == 0 || id % 2 == 0 {
            return Err(Reason::PROTOCOL_ERROR);
        }
        let (mut from, to) = frame::unpad(&head, payload).ok_or(Reason::PROTOCOL_ERROR)?;
        let mut self_dependent = false;
        if head.has(flag::PRIORITY) {
            if to < from + 5 {
                return Err(Reason::PROTOCOL_ERROR);
            }
            let p = &payload[from..from + 4];
            self_dependent = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff == id;
            from += 5;
        }
        let fragment = &payload[from..to];
        let end_stream = head.has(flag::END_STREAM);
        if head.has(flag::END_HEADERS) {
            return self.on_block(id, end_stream, self_dependent, fragment);
        }
        self.continuation = Some(Continuation {
            stream: id,
            end_stream,
            self_dependent,
            block: fragment.to_vec(),
        });
        Ok(())
    }

    fn on_continuation(&mut self, head: Head, payload: &[u8]) -> Result<(), Reason> {
        let Some(c) = &mut self.continuation else {
            return Err(Reason::PROTOCOL_ERROR);
        };
        c.block.extend_from_slice(payload);
        // A block this long encodes more than the header list limit: a CONTINUATION flood.
        if c.block.len() > 2 * self.cfg.max_header_list {
            return Err(Reason::ENHANCE_YOUR_CALM);
        }
        if !head.has(flag::END_HEADERS) {
            return Ok(());
        }
        let Some(c) = self.continuation.take() else {
            return Ok(());
        };
        self.on_block(c.stream, c.end_stream, c.self_dependent, &c.block)
    }

    /// A whole header block on stream `id`.
    fn on_block(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
    ) -> Result<(), Reason> {
        let max = self.cfg.max_header_list;
        if id > self.max_peer_id {
            let decoded = headers::decode_request(&mut self.decoder, block, max);
            if decoded.as_ref().err() == Some(&HeadError::Compression) {
                return Err(Reason::COMPRESSION_ERROR);
            }
            self.max_peer_id = id;
            if self.goaway.is_some() || self.peer_goaway {
                return Ok(());
            }
            if self_dependent {
                return self.stream_error(id, Reason::PROTOCOL_ERROR);
            }
            if self.streams.len() >= self.cfg.max_concurrent as usize {
                frame::put_rst(&mut self.out, id, Reason::REFUSED_STREAM);
                self.remember_closed(id, true);
                return Ok(());
            }
            let head = match decoded {
                Ok(h) => h,
                Err(HeadError::TooLarge) => {
                    let mut block = std::mem::take(&mut self.scratch);
                    block.clear();
                    headers::encode_response(&mut block, 431, &HeaderMap::new(), Some(0));
                    frame::put_headers(&mut self.out, id, &block, true, self.peer_max_frame);
                    self.scratch = block;
                    if !end_stream {
                        frame::put_rst(&mut self.out, id, Reason::NO_ERROR);
                    }
                    self.remember_closed(id, true);
                    return Ok(());
                }
                Err(_) => return self.stream_error(id, Reason::PROTOCOL_ERROR),
            };
            let length = BodyLength::new(head.content_length);
            if end_stream && length.end().is_err() {
                return self.stream_error(id, Reason::PROTOCOL_ERROR);
            }
            self.streams.push(Stream {
                id,
                recv_closed: end_stream,
                skip_data: false,
                send_closed: false,
                send_window: self.peer_initial_window,
                recv_window: i64::from(self.cfg.stream_window),
                recv_unacked: 0,
                length,
                fresh: true,
                drain_until: 0,
                abandoned: false,
            });
            self.events.push_back(Event::Request {
                id,
                head: Box::new(head),
                end_stream,
            });
            return Ok(());
        }
        let Some(i) = self.find(id) else {
            // Closed: decoded only to keep the table in step.
            if headers::decode_trailers(&mut self.decoder, block, max)
                == Err(HeadError::Compression)
            {
                return Err(Reason::COMPRESSION_ERROR);
            }
            return match self.closed_as(id) {
                Some(true) => Ok(()),
                Some(false) => Err(Reason::STREAM_CLOSED),
                // An idle stream below a newer one (RFC 9113 §5.1.1).
                None => Err(Reason::PROTOCOL_ERROR),
            };
        };
        let trailers = headers::decode_trailers(&mut self.decoder, block, max);
        if trailers == Err(HeadError::Compression) {
            return Err(Reason::COMPRESSION_ERROR);
        }
        let s = &mut self.streams[i];
        if s.recv_closed {
            return self.stream_error(id, Reason::STREAM_CLOSED);
        }
        if !end_stream || trailers.is_err() || self_dependent {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        if s.length.end().is_err() {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        if s.send_closed {
            self.close_drained(i);
            return Ok(());
        }
        s.recv_closed = true;
        self.events.push_back(Event::Data {
            id,
            data: Bytes::new(),
            end_stream: true,
        });
        Ok(())
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
