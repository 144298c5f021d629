//! Unit tests of [`Core`]: frames in, events and frames out, no socket.

use super::*;
use crate::http::h2::frame::{put_head, HEADER_LEN};

fn cfg() -> Config {
    Config {
        max_concurrent: 2,
        max_header_list: 32 * 1024,
        stream_window: 1 << 20,
        conn_window: 1 << 20,
        max_pending_resets: 3,
        max_local_resets: 2,
        data_frame: 16_375,
    }
}

/// A client: frames it sends, and an HPACK encoder for its heads.
struct Client {
    buf: Vec<u8>,
    enc: loona_hpack::Encoder<'static>,
}

impl Client {
    fn new() -> Client {
        let mut buf = frame::PREFACE.to_vec();
        put_head(&mut buf, 0, kind::SETTINGS, 0, 0);
        Client {
            buf,
            enc: loona_hpack::Encoder::new(),
        }
    }
    fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> &mut Self {
        put_head(&mut self.buf, payload.len(), kind, flags, stream);
        self.buf.extend_from_slice(payload);
        self
    }
    /// A GET on stream `id`, its block cut into frames of at most 16 KiB.
    fn get(&mut self, id: u32, extra: &[(&str, &str)], flags: u8) -> &mut Self {
        let mut f = vec![
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/"),
        ];
        f.extend_from_slice(extra);
        let block = self
            .enc
            .encode(f.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
        let mut parts = block.chunks(16_384).peekable();
        let mut k = kind::HEADERS;
        while let Some(p) = parts.next() {
            let eh = if parts.peek().is_none() {
                flag::END_HEADERS
            } else {
                0
            };
            let f = if k == kind::HEADERS { flags } else { 0 };
            self.frame(k, eh | f, id, p);
            k = kind::CONTINUATION;
        }
        self
    }
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// The frames in `out` as (kind, flags, stream, payload).
fn frames(out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let h = Head::parse(&out[at..]);
        let p = out[at + HEADER_LEN..at + HEADER_LEN + h.len].to_vec();
        v.push((h.kind, h.flags, h.stream, p));
        at += HEADER_LEN + h.len;
    }
    v
}

fn code(p: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

/// The RST_STREAM codes and the GOAWAY code in `core.out`, which is cleared.
fn errors(core: &mut Core) -> (Vec<(u32, u32)>, Option<u32>) {
    let out = std::mem::take(&mut core.out);
    let f = frames(&out);
    let rst = f
        .iter()
        .filter(|f| f.0 == kind::RST_STREAM)
        .map(|f| (f.2, code(&f.3, 0)))
        .collect();
    let goaway = f
        .iter()
        .find(|f| f.0 == kind::GOAWAY)
        .map(|f| code(&f.3, 4));
    (rst, goaway)
}

fn started() -> (Core, Client) {
    let mut core = Core::new(cfg());
    let mut c = Client::new();
    let input = c.take();
    assert_eq!(core.recv(&input), input.len());
    let f = frames(&core.out);
    assert_eq!(f[0].0, kind::SETTINGS, "server preface");
    assert!(f.iter().any(|f| f.0 == kind::SETTINGS && f.1 == flag::ACK));
    core.out.clear();
    (core, c)
}

#[test]
fn preface_must_be_the_magic_then_settings() {
    let mut core = Core::new(cfg());
    core.out.clear();
    assert_eq!(core.recv(&frame::PREFACE[..10]), 0, "waits for the rest");
    let mut bad = frame::PREFACE.to_vec();
    put_head(&mut bad, 8, kind::PING, 0, 0);
    bad.extend_from_slice(&[0; 8]);
    core.recv(&bad);
    assert_eq!(errors(&mut core).1, Some(1), "PING before SETTINGS");
    let mut core = Core::new(cfg());
    core.recv(b"GET / HTTP/1.1\r\n\r\n");
    assert!(core.is_done() && core.error() == Some(Reason::PROTOCOL_ERROR));
    // A client with nothing to set may answer the server's SETTINGS with just its ACK (nginx's
    // test client does; nginx and the h2 crate take it): the connection goes on.
    let mut core = Core::new(cfg());
    core.out.clear();
    let mut ack = frame::PREFACE.to_vec();
    put_head(&mut ack, 0, kind::SETTINGS, flag::ACK, 0);
    put_head(&mut ack, 8, kind::PING, 0, 0);
    ack.extend_from_slice(&[0; 8]);
    assert_eq!(core.recv(&ack), ack.len());
    let f = frames(&core.out);
    assert!(!core.is_done() && core.error().is_none());
    assert!(
        f.iter().any(|f| f.0 == kind::PING && f.1 == flag::ACK),
        "PING answered"
    );
}

#[test]
fn a_request_with_a_body_and_flow_control_credit() {
    let (mut core, mut c) = started();
    c.get(1, &[("content-length", "5")], 0)
        .frame(kind::DATA, 0, 1, b"abc")
        .frame(kind::DATA, flag::END_STREAM, 1, b"de");
    let input = c.take();
    // Given in two pieces: the incomplete frame is left for later.
    let used = core.recv(&input[..input.len() - 1]);
    assert!(used < input.len() - 1);
    let used2 = core.recv(&input[used..]);
    assert_eq!(used + used2, input.len());
    let Some(Event::Request {
        id: 1,
        head,
        end_stream: false,
    }) = core.take_event()
    else {
        panic!("request");
    };
    assert_eq!(head.parts.uri.path(), "/");
    assert!(
        matches!(core.take_event(), Some(Event::Data { id: 1, ref data, end_stream: false }) if data == "abc")
    );
    assert!(
        matches!(core.take_event(), Some(Event::Data { id: 1, ref data, end_stream: true }) if data == "de")
    );
    // Consumed: below half a window, no WINDOW_UPDATE yet.
    core.release(1, 5);
    assert!(core.out.is_empty());
    // The response: HEADERS then DATA within the client's window.
    assert_eq!(core.send_capacity(1), 65_535);
    core.send_headers(1, 200, &HeaderMap::new(), Some(3), false);
    core.send_data(1, b"xyz", true, None);
    let f = frames(&core.out);
    assert_eq!((f[0].0, f[0].2), (kind::HEADERS, 1));
    assert_eq!(
        (f[1].0, f[1].1, f[1].3.as_slice()),
        (kind::DATA, flag::END_STREAM, &b"xyz"[..])
    );
    assert_eq!(core.open_streams(), 0, "closed both ways");
    assert_eq!(core.send_capacity(3), 0);
}

#[test]
fn send_windows_follow_settings_and_window_updates() {
    let (mut core, mut c) = started();
    c.frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 1])
        .get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert!(core.take_event().is_some());
    assert_eq!(core.send_capacity(1), 1, "SETTINGS_INITIAL_WINDOW_SIZE 1");
    core.send_data(1, b"a", false, None);
    assert_eq!(core.send_capacity(1), 0);
    c.frame(kind::WINDOW_UPDATE, 0, 1, &10u32.to_be_bytes());
    core.recv(&c.take());
    assert_eq!(core.send_capacity(1), 10);
    // Lowering the initial window makes it negative, still counted.
    c.frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]);
    core.recv(&c.take());
    assert_eq!(core.send_capacity(1), 9);
    // Overflow of a stream window: a stream error; of the connection's: a connection error.
    c.frame(kind::WINDOW_UPDATE, 0, 1, &0x7fff_ffffu32.to_be_bytes());
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 3)], None));
    c.frame(kind::WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes());
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(3));
}

#[test]
fn request_body_credit_is_returned_as_it_is_consumed() {
    let mut cfg = cfg();
    cfg.stream_window = 100;
    cfg.conn_window = 100_000;
    let mut core = Core::new(cfg);
    let mut c = Client::new();
    c.get(1, &[], 0).frame(kind::DATA, 0, 1, &[0; 60]);
    core.recv(&c.take());
    core.out.clear();
    core.release(1, 60);
    let f = frames(&core.out);
    assert_eq!(f.len(), 1, "stream credit past half its window");
    assert_eq!(
        (f[0].0, f[0].2, code(&f[0].3, 0)),
        (kind::WINDOW_UPDATE, 1, 60)
    );
    // More than the stream window: FLOW_CONTROL_ERROR on the stream.
    core.out.clear();
    c.frame(kind::DATA, 0, 1, &[0; 101]);
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 3)], None));
}

#[test]
fn malformed_requests_reset_the_stream_and_too_many_end_the_connection() {
    let (mut core, mut c) = started();
    c.get(1, &[("connection", "x")], flag::END_STREAM);
    c.get(3, &[("transfer-encoding", "chunked")], 0)
        .frame(kind::DATA, flag::END_STREAM, 3, b"a");
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 1), (3, 1)], None));
    assert!(
        core.take_event().is_none(),
        "stream 3's request was never taken up"
    );
    c.get(5, &[("te", "gzip")], flag::END_STREAM);
    core.recv(&c.take());
    assert_eq!(
        errors(&mut core),
        (vec![(5, 1)], Some(0xb)),
        "third local reset"
    );
}

#[test]
fn a_body_off_its_content_length_fails_the_body_not_the_stream() {
    // nginx answers 400 to both: the stream stays for the response.
    let (mut core, mut c) = started();
    c.get(1, &[("content-length", "2")], 0)
        .frame(kind::DATA, flag::END_STREAM, 1, b"a");
    c.get(3, &[("content-length", "2")], 0)
        .frame(kind::DATA, 0, 3, b"abc")
        .frame(kind::DATA, flag::END_STREAM, 3, b"d");
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![], None));
    let mut seen = Vec::new();
    while let Some(e) = core.take_event() {
        match e {
            Event::Request { id, .. } => seen.push(("request", id)),
            Event::Data { id, .. } => seen.push(("data", id)),
            Event::BadLength { id } => seen.push(("bad length", id)),
            Event::Reset { id } => seen.push(("reset", id)),
        }
    }
    assert_eq!(
        seen,
        [
            ("request", 1),
            ("bad length", 1),
            ("request", 3),
            ("bad length", 3)
        ],
        "no DATA of a wrong length is passed on, nor any after it"
    );
}

#[test]
fn too_many_streams_are_refused_and_big_heads_get_431() {
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM)
        .get(3, &[], flag::END_STREAM)
        .get(5, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(5, 7)], None));
    core.reset(1, Reason::CANCEL);
    core.reset(3, Reason::CANCEL);
    core.out.clear();
    let big = "x".repeat(40 * 1024);
    c.get(7, &[("x-big", &big)], flag::END_STREAM);
    core.recv(&c.take());
    let f = frames(&core.out);
    assert_eq!((f[0].0, f[0].2), (kind::HEADERS, 7));
    let h = loona_hpack::Decoder::new().decode(&f[0].3).unwrap();
    assert_eq!(h[0], (b":status".to_vec(), b"431".to_vec()));
}

#[test]
fn rapid_reset_in_one_burst_ends_the_connection() {
    let (mut core, mut c) = started();
    for id in [1u32, 3, 5] {
        c.get(id, &[], flag::END_STREAM)
            .frame(kind::RST_STREAM, 0, id, &[0, 0, 0, 8]);
    }
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, None, "three: at the limit");
    assert!(
        core.take_event().is_none(),
        "reset before taken up: no request"
    );
    for id in [7u32, 9, 11, 13] {
        c.get(id, &[], flag::END_STREAM)
            .frame(kind::RST_STREAM, 0, id, &[0, 0, 0, 8]);
    }
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(0xb));
}

#[test]
fn a_reset_after_the_request_was_taken_up_tells_the_shell() {
    let (mut core, mut c) = started();
    c.get(1, &[], 0);
    core.recv(&c.take());
    assert!(matches!(
        core.take_event(),
        Some(Event::Request { id: 1, .. })
    ));
    c.frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
    core.recv(&c.take());
    assert!(matches!(core.take_event(), Some(Event::Reset { id: 1 })));
    // DATA after the client's reset: STREAM_CLOSED.
    c.frame(kind::DATA, 0, 1, b"x");
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 5)], None));
}

#[test]
fn frames_after_the_servers_reset_are_ignored() {
    let (mut core, mut c) = started();
    c.get(1, &[("content-length", "2000000")], 0);
    core.recv(&c.take());
    core.take_event();
    // The response ends before a body larger than the window: RST_STREAM(NO_ERROR), put
    // after the response once that is written; later DATA ignored.
    core.send_headers(1, 413, &HeaderMap::new(), None, true);
    let f = frames(&core.out);
    assert_eq!(f.len(), 1, "the response alone: {f:?}");
    assert_eq!(
        (f[0].0, f[0].1 & flag::END_STREAM),
        (kind::HEADERS, flag::END_STREAM)
    );
    core.out.clear();
    assert!(core.put_late_resets());
    assert_eq!(errors(&mut core), (vec![(1, 0)], None));
    assert!(!core.put_late_resets(), "sent once");
    c.frame(kind::DATA, flag::END_STREAM, 1, b"late");
    let mut hdr = c.take();
    c.get(1, &[], flag::END_STREAM);
    hdr.extend(c.take());
    core.recv(&hdr);
    assert_eq!(errors(&mut core), (vec![], None));
}

#[test]
fn stream_state_errors() {
    // DATA on an idle stream; HEADERS below a newer stream; HEADERS on a closed stream.
    let (mut core, mut c) = started();
    c.frame(kind::DATA, 0, 1, b"x");
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(1));
    let (mut core, mut c) = started();
    c.get(5, &[], flag::END_STREAM)
        .get(3, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(1));
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    core.out.clear();
    c.get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(5));
    // Half closed (remote): DATA is a stream error STREAM_CLOSED.
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM)
        .frame(kind::DATA, 0, 1, b"x");
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 5)], None));
    // A second HEADERS without END_STREAM: PROTOCOL_ERROR on the stream.
    let (mut core, mut c) = started();
    c.get(1, &[], 0);
    let trailer = c.enc.encode([(&b"x-t"[..], &b"1"[..])]);
    c.frame(kind::HEADERS, flag::END_HEADERS, 1, &trailer);
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(1, 1)], None));
}

#[test]
fn continuation_must_follow_its_headers() {
    let (mut core, mut c) = started();
    let block = c.enc.encode([
        (&b":method"[..], &b"GET"[..]),
        (b":scheme", b"https"),
        (b":path", b"/"),
    ]);
    c.frame(kind::HEADERS, flag::END_STREAM, 1, &block[..2])
        .frame(kind::CONTINUATION, flag::END_HEADERS, 1, &block[2..]);
    core.recv(&c.take());
    assert!(matches!(
        core.take_event(),
        Some(Event::Request {
            id: 1,
            end_stream: true,
            ..
        })
    ));
    let block = c.enc.encode([(&b":method"[..], &b"GET"[..])]);
    c.frame(kind::HEADERS, 0, 3, &block)
        .frame(kind::PING, 0, 0, &[0; 8]);
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(1));
}

#[test]
fn control_frames() {
    let (mut core, mut c) = started();
    c.frame(kind::PING, 0, 0, b"12345678")
        .frame(kind::PING, flag::ACK, 0, b"abcdefgh");
    core.recv(&c.take());
    let f = frames(&core.out);
    assert_eq!(f, vec![(kind::PING, flag::ACK, 0, b"12345678".to_vec())]);
    core.out.clear();
    for (bad, want) in [
        (vec![(kind::SETTINGS, flag::ACK, 0u32, vec![0u8; 6])], 6u32),
        (vec![(kind::SETTINGS, 0, 0, vec![0; 5])], 6),
        (vec![(kind::SETTINGS, 0, 0, vec![0, 2, 0, 0, 0, 2])], 1),
        (vec![(kind::SETTINGS, 0, 0, vec![0, 4, 0x80, 0, 0, 0])], 3),
        (vec![(kind::SETTINGS, 0, 0, vec![0, 5, 0, 0, 0, 1])], 1),
        (vec![(kind::PING, 0, 1, vec![0; 8])], 1),
        (vec![(kind::PING, 0, 0, vec![0; 7])], 6),
        (vec![(kind::WINDOW_UPDATE, 0, 0, vec![0; 4])], 1),
        (vec![(kind::RST_STREAM, 0, 1, vec![0; 4])], 1),
        (vec![(kind::PUSH_PROMISE, 0, 1, vec![0; 4])], 1),
        (vec![(kind::GOAWAY, 0, 1, vec![0; 8])], 1),
        (vec![(kind::DATA, 0, 0, vec![0; 1])], 1),
        (vec![(kind::DATA, 0, 1, vec![0; 16_385])], 6),
    ] {
        let (mut core, mut c) = started();
        for (k, f, s, p) in &bad {
            c.frame(*k, *f, *s, p);
        }
        core.recv(&c.take());
        assert_eq!(errors(&mut core).1, Some(want), "{bad:?}");
    }
    // Unknown frames and PRIORITY on idle streams are fine; a self-dependency is not.
    let (mut core, mut c) = started();
    c.frame(0x42, 0, 0, b"x")
        .frame(kind::PRIORITY, 0, 9, &[0, 0, 0, 1, 16]);
    c.frame(kind::PRIORITY, 0, 11, &[0, 0, 0, 11, 16]);
    core.recv(&c.take());
    assert_eq!(errors(&mut core), (vec![(11, 1)], None));
}

#[test]
fn goaway_finishes_open_streams_and_ignores_new_ones() {
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    core.take_event();
    core.goaway();
    let f = frames(&std::mem::take(&mut core.out));
    assert_eq!((f[0].0, code(&f[0].3, 0)), (kind::GOAWAY, 1));
    c.get(3, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert!(core.take_event().is_none(), "after GOAWAY");
    assert!(!core.is_done());
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    assert!(core.is_done());
}

#[test]
fn hpack_errors_end_the_connection() {
    let (mut core, mut c) = started();
    c.frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &[0x80],
    );
    core.recv(&c.take());
    assert_eq!(errors(&mut core).1, Some(9));
}

#[test]
fn goaway_names_the_last_stream_and_ignores_later_ones() {
    // A graceful shutdown says GOAWAY at once with the last stream the client opened, as
    // nginx: streams up to it are served, later ones ignored (the client may retry them).
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    core.take_event();
    core.goaway();
    let f = frames(&std::mem::take(&mut core.out));
    assert_eq!((f[0].0, code(&f[0].3, 0)), (kind::GOAWAY, 1));
    c.get(3, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert!(core.take_event().is_none(), "after the GOAWAY");
    assert!(!core.is_done());
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    assert!(core.is_done());
}

#[test]
fn graceful_goaway_of_a_busy_connection_takes_two_steps() {
    let (mut core, mut c) = started();
    c.get(1, &[], flag::END_STREAM);
    core.recv(&c.take());
    core.take_event();
    core.goaway_graceful();
    let f = frames(&std::mem::take(&mut core.out));
    assert_eq!((f[0].0, code(&f[0].3, 0)), (kind::GOAWAY, 0x7fff_ffff));
    assert_eq!((f[1].0, f[1].1), (kind::PING, 0));
    // A stream the client sent before it saw the GOAWAY is still served.
    c.get(3, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert!(matches!(
        core.take_event(),
        Some(Event::Request { id: 3, .. })
    ));
    c.frame(kind::PING, flag::ACK, 0, &f[1].3);
    core.recv(&c.take());
    let g = frames(&std::mem::take(&mut core.out));
    assert_eq!(
        (g[0].0, code(&g[0].3, 0)),
        (kind::GOAWAY, 3),
        "the final GOAWAY"
    );
    c.get(5, &[], flag::END_STREAM);
    core.recv(&c.take());
    assert!(core.take_event().is_none(), "after the final GOAWAY");
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    assert!(!core.is_done());
    core.send_headers(3, 200, &HeaderMap::new(), None, true);
    assert!(core.is_done());
}

/// The shell's part after a turn: the output written, then the late resets.
fn flushed(core: &mut Core) -> (Vec<(u32, u32)>, Option<u32>) {
    let mut first = errors(core);
    core.put_late_resets();
    let (rst, goaway) = errors(core);
    first.0.extend(rst);
    (first.0, first.1.or(goaway))
}

#[test]
fn a_response_before_a_body_that_fits_drains_it_with_its_checks() {
    // h2spec 8.1.2.6: the answer does not depend on whether the DATA came before the
    // response or after.
    let (mut core, mut c) = started();
    c.get(1, &[("content-length", "1")], 0);
    core.recv(&c.take());
    core.take_event();
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    assert_eq!(
        flushed(&mut core),
        (vec![], None),
        "no reset: the body is awaited"
    );
    assert_eq!(core.open_streams(), 1);
    assert!(!core.is_open(1), "nothing more is sent on it");
    c.frame(kind::DATA, flag::END_STREAM, 1, b"test");
    core.recv(&c.take());
    assert_eq!(flushed(&mut core), (vec![(1, 1)], None), "PROTOCOL_ERROR");
    assert!(
        matches!(core.take_event(), None | Some(Event::Reset { id: 1 })),
        "no body event: the service is gone"
    );
    // A body of the right length closes the stream without a reset.
    c.get(3, &[("content-length", "4")], 0);
    core.recv(&c.take());
    core.take_event();
    core.send_headers(3, 200, &HeaderMap::new(), None, true);
    c.frame(kind::DATA, flag::END_STREAM, 3, b"test");
    core.recv(&c.take());
    assert_eq!(flushed(&mut core), (vec![], None));
    assert_eq!(core.open_streams(), 0);
    // Without a length: trailers are still checked (a HEADERS without END_STREAM).
    c.get(5, &[], 0);
    core.recv(&c.take());
    core.take_event();
    core.send_headers(5, 200, &HeaderMap::new(), None, true);
    c.get(5, &[], 0);
    core.recv(&c.take());
    assert_eq!(flushed(&mut core), (vec![(5, 1)], None));
}

#[test]
fn a_draining_body_gets_no_more_credit_and_ends_with_its_window_or_its_time() {
    let (mut core, mut c) = started();
    core.set_clock(1000);
    c.get(1, &[], 0);
    core.recv(&c.take());
    core.take_event();
    core.send_headers(1, 200, &HeaderMap::new(), None, true);
    assert_eq!(core.drain_deadline(), Some(1000 + DRAIN_MS));
    let piece = vec![0u8; 16_384];
    for _ in 0..63 {
        c.frame(kind::DATA, 0, 1, &piece);
    }
    core.recv(&c.take());
    let f = frames(&core.out);
    assert!(
        f.iter().all(|f| f.0 != kind::WINDOW_UPDATE || f.2 == 0),
        "the stream's window is not opened again: {f:?}"
    );
    assert!(core.take_event().is_none(), "dropped, not passed on");
    assert_eq!(flushed(&mut core), (vec![], None));
    c.frame(kind::DATA, 0, 1, &piece);
    core.recv(&c.take());
    assert_eq!(flushed(&mut core), (vec![(1, 0)], None), "window used up");
    // A client that stops sending: reset at the deadline.
    c.get(3, &[], 0);
    core.recv(&c.take());
    core.take_event();
    core.send_headers(3, 200, &HeaderMap::new(), None, true);
    core.set_clock(1000 + DRAIN_MS - 1);
    core.expire_drains();
    assert_eq!(flushed(&mut core), (vec![], None));
    core.set_clock(1000 + DRAIN_MS);
    core.expire_drains();
    assert_eq!(flushed(&mut core), (vec![(3, 0)], None));
    assert_eq!(core.drain_deadline(), None);
}

#[test]
fn frames_after_the_clients_own_reset_are_its_error() {
    // h2spec 5.1: the server's reset came first (the response ended), then the client's
    // RST_STREAM: what follows that is an error, whoever reset first.
    for then in ["data", "headers"] {
        let (mut core, mut c) = started();
        c.get(1, &[("content-length", "2000000")], 0);
        core.recv(&c.take());
        core.take_event();
        core.send_headers(1, 200, &HeaderMap::new(), None, true);
        c.frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
        core.recv(&c.take());
        assert_eq!(
            flushed(&mut core),
            (vec![], None),
            "{then}: no reset after the client's"
        );
        if then == "data" {
            c.frame(kind::DATA, flag::END_STREAM, 1, b"test");
            core.recv(&c.take());
            assert_eq!(flushed(&mut core), (vec![(1, 5)], None), "STREAM_CLOSED");
        } else {
            c.get(1, &[], flag::END_STREAM);
            core.recv(&c.take());
            assert_eq!(flushed(&mut core), (vec![], Some(5)), "STREAM_CLOSED");
        }
    }
}

#[test]
fn a_body_the_service_gave_up_on_is_reset_after_the_response() {
    // 413 or 408 after reading part of it: nothing more of it is wanted.
    let (mut core, mut c) = started();
    c.get(1, &[], 0).frame(kind::DATA, 0, 1, b"part");
    core.recv(&c.take());
    while core.take_event().is_some() {}
    core.body_abandoned(1);
    core.send_headers(1, 413, &HeaderMap::new(), None, true);
    assert_eq!(flushed(&mut core), (vec![(1, 0)], None));
    assert_eq!(core.open_streams(), 0);
}

/// A DATA frame filled in place carries exactly the bytes the filler appended, after a
/// correct header (length, type, END_STREAM, stream id), byte for byte what `send_data`
/// writes for the same payload; it is cut to the window and the frame size, and a failed or
/// empty fill leaves nothing behind and costs no window.
#[test]
fn data_frames_filled_in_place() {
    let (mut core, mut c) = started();
    c.frame(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0x9c, 0x40]) // initial window 40,000
        .frame(kind::WINDOW_UPDATE, 0, 0, &1_000_000u32.to_be_bytes())
        .get(1, &[], flag::END_STREAM)
        .get(3, &[], flag::END_STREAM);
    core.recv(&c.take());
    while core.take_event().is_some() {}
    core.out.clear();
    let payload: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut at = 0;
    let mut limits = Vec::new();
    while at < payload.len() {
        let n = core
            .send_data_with(1, None, |out, limit| {
                limits.push(limit);
                let k = limit.min(payload.len() - at);
                out.extend_from_slice(&payload[at..at + k]);
                Ok(at + k == payload.len())
            })
            .unwrap();
        at += n;
    }
    assert_eq!(
        limits,
        [16_375, 16_375, 7_250],
        "frame size, then the window"
    );
    let mut expected = Vec::new();
    frame::put_data(&mut expected, 1, &payload, true, 16_375);
    assert_eq!(core.out, expected, "the same bytes as send_data's frames");
    let f = frames(&core.out);
    assert_eq!(f.len(), 3);
    assert_eq!(f[2].1, flag::END_STREAM);
    assert!(!core.is_open(1), "END_STREAM ended the response");
    // The connection's window (1,065,535) is not the limit here; stream 3's is 40,000.
    assert_eq!(core.send_capacity(3), 40_000);
    core.out.clear();
    // A failing fill, an empty one and one past its limit send nothing and cost no window.
    let e = core.send_data_with(3, Some(100), |out, _| {
        out.extend_from_slice(b"partial");
        Err(std::io::Error::other("read failed"))
    });
    assert!(e.is_err());
    assert_eq!(
        core.send_data_with(3, Some(100), |_, _| Ok(false)).unwrap(),
        0
    );
    let over = core.send_data_with(3, Some(100), |out, limit| {
        out.resize(out.len() + limit + 1, 0);
        Ok(false)
    });
    assert!(over.is_err());
    assert!(core.out.is_empty());
    assert_eq!(core.send_capacity(3), 40_000);
    // An empty last frame still ends the stream; `chunk` cuts the frame.
    assert_eq!(
        core.send_data_with(3, Some(100), |out, limit| {
            assert_eq!(limit, 100);
            out.extend_from_slice(b"abc");
            Ok(false)
        })
        .unwrap(),
        3
    );
    assert_eq!(
        core.send_data_with(3, Some(100), |_, _| Ok(true)).unwrap(),
        0
    );
    let f = frames(&core.out);
    assert_eq!(
        f,
        [
            (kind::DATA, 0, 3, b"abc".to_vec()),
            (kind::DATA, flag::END_STREAM, 3, Vec::new())
        ]
    );
    assert!(!core.is_open(3));
    // A closed stream gets nothing and its filler is not asked.
    assert_eq!(
        core.send_data_with(3, None, |_, _| panic!("not called"))
            .unwrap(),
        0
    );
}
