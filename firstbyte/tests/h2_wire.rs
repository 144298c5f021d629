//! HTTP/2 on the wire as nginx answers it, with a raw frame client (h2c, prior knowledge):
//! invalid hosts (`:authority`, `host`) are 400 through the normal response path, a client's
//! PUSH_PROMISE ends the connection on its frame header, CONNECT is 405, a lower-case method is
//! a stream error, `$request_length` is the header block's size, DATA frames follow
//! `http2_chunk_size` up to the client's SETTINGS_MAX_FRAME_SIZE and stay full across the
//! file's reads, and a reload says one GOAWAY naming the last stream the client opened.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        http2 on;
        server_name localhost;
        root {dir}/html;
        location /rl { return 200 $request_length; }
        location /frame_size/ { http2_chunk_size 64k; }
        location /empty { charset utf-8; return 200; }
        location / { return 200 "host=$host"; }
    }
}
"#;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const GOAWAY: u8 = 7;
const PING: u8 = 6;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// What came back for one stream.
#[derive(Debug, Default)]
struct Answer {
    status: Option<u16>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    data_frames: Vec<usize>,
    rst: Option<u32>,
    /// (last stream id, error code)
    goaway: Option<(u32, u32)>,
}

/// A raw HTTP/2 client connection.
struct H2 {
    s: TcpStream,
    enc: loona_hpack::Encoder<'static>,
    dec: loona_hpack::Decoder<'static>,
}

impl H2 {
    /// Connects, sends the preface and `settings`, and acknowledges the server's SETTINGS.
    fn connect(port: u16, settings: &[(u16, u32)]) -> H2 {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut c = H2 {
            s,
            enc: loona_hpack::Encoder::new(),
            dec: loona_hpack::Decoder::new(),
        };
        c.s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .expect("preface");
        let mut p = Vec::new();
        for (id, v) in settings {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        c.frame(SETTINGS, 0, 0, &p);
        loop {
            let f = c.read().expect("server SETTINGS");
            if f.kind == SETTINGS && f.flags & 1 == 0 {
                c.frame(SETTINGS, 1, 0, &[]);
                return c;
            }
        }
    }

    fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let mut b = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        b.extend_from_slice(&[kind, flags]);
        b.extend_from_slice(&stream.to_be_bytes());
        b.extend_from_slice(payload);
        self.s.write_all(&b).expect("write frame");
    }

    /// A request's HEADERS (END_STREAM), the fields as given (pseudo-headers included).
    fn request(&mut self, stream: u32, fields: &[(&str, &str)]) {
        let block = self
            .enc
            .encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
        self.frame(HEADERS, END_HEADERS | END_STREAM, stream, &block);
    }

    fn get(&mut self, stream: u32, path: &str) {
        self.request(
            stream,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", path),
            ],
        );
    }

    /// The next frame; None at EOF, a reset or the read timeout.
    fn read(&mut self) -> Option<Frame> {
        let mut h = [0u8; 9];
        self.s.read_exact(&mut h).ok()?;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut payload = vec![0u8; len];
        self.s.read_exact(&mut payload).ok()?;
        Some(Frame {
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// Frames until stream `id` ends (END_STREAM or RST_STREAM) or the connection does.
    fn answer(&mut self, id: u32) -> Answer {
        let mut a = Answer::default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let Some(f) = self.read() else { break };
            match f.kind {
                GOAWAY => {
                    let word = |i: usize| {
                        u32::from_be_bytes([
                            f.payload[i],
                            f.payload[i + 1],
                            f.payload[i + 2],
                            f.payload[i + 3],
                        ])
                    };
                    a.goaway = Some((word(0) & 0x7fff_ffff, word(4)));
                    if a.status.is_none() || f.stream != 0 {
                        break;
                    }
                }
                _ if f.stream != id => {}
                HEADERS => {
                    let fields = self.dec.decode(&f.payload).expect("hpack");
                    for (n, v) in fields {
                        let (n, v) = (
                            String::from_utf8_lossy(&n).into_owned(),
                            String::from_utf8_lossy(&v).into_owned(),
                        );
                        if n == ":status" {
                            a.status = v.parse().ok();
                        }
                        a.headers.push((n, v));
                    }
                    if f.flags & END_STREAM != 0 {
                        break;
                    }
                }
                DATA => {
                    a.data_frames.push(f.payload.len());
                    a.body.extend_from_slice(&f.payload);
                    if f.flags & END_STREAM != 0 {
                        break;
                    }
                }
                RST_STREAM => {
                    a.rst = Some(u32::from_be_bytes([
                        f.payload[0],
                        f.payload[1],
                        f.payload[2],
                        f.payload[3],
                    ]));
                    break;
                }
                _ => {}
            }
        }
        a
    }
}

fn start() -> (Server, u16) {
    let (s, ports) = Server::start("h2wire", CONF, 1);
    let big = s.dir.join("html/frame_size");
    std::fs::create_dir_all(&big).expect("mkdir");
    std::fs::write(big.join("big"), vec![b'x'; 100_000]).expect("write");
    (s, ports[0])
}

fn with_authority(authority: &str) -> Answer {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[]);
    c.request(
        1,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", authority),
            (":path", "/"),
        ],
    );
    c.answer(1)
}

#[test]
fn invalid_hosts_are_400_not_resets() {
    let (_s, port) = start();
    // Values that are no host: empty, path separators, a backslash, a control character.
    for authority in [
        "",
        "\\e/xample.com",
        "[abcd\\::ef98:0:7654:321/]:12",
        "a..b",
        ".x",
    ] {
        let mut c = H2::connect(port, &[]);
        c.request(
            1,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", authority),
                (":path", "/"),
            ],
        );
        let a = c.answer(1);
        assert_eq!(a.status, Some(400), ":authority {authority:?}: {a:?}");
    }
    for host in ["localhost\x02", "local host", "a/b", "..", ""] {
        let mut c = H2::connect(port, &[]);
        c.request(
            1,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                ("host", host),
            ],
        );
        let a = c.answer(1);
        assert_eq!(a.status, Some(400), "host {host:?}: {a:?}");
    }
    // :authority and Host that disagree name two servers: 400; agreeing ones are served.
    let mut c = H2::connect(port, &[]);
    let both = |c: &mut H2, id, host| {
        c.request(
            id,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", "/"),
                ("host", host),
            ],
        )
    };
    both(&mut c, 1, "other.example");
    assert_eq!(c.answer(1).status, Some(400));
    let mut c = H2::connect(port, &[]);
    both(&mut c, 1, "localhost");
    let a = c.answer(1);
    assert_eq!(a.status, Some(200), "{a:?}");
    assert_eq!(a.body, b"host=localhost");
}

#[test]
fn a_valid_authority_names_the_host() {
    let a = with_authority("Example.COM.:8080");
    assert_eq!(a.status, Some(200), "{a:?}");
    assert_eq!(a.body, b"host=example.com");
}

#[test]
fn push_promise_from_a_client_ends_the_connection_on_its_header() {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[]);
    // The header says 4 payload bytes that never come.
    c.s.write_all(&[0, 0, 4, PUSH_PROMISE, 0, 0, 0, 0, 1])
        .expect("write");
    let a = c.answer(1);
    assert_eq!(a.goaway.map(|g| g.1), Some(1), "PROTOCOL_ERROR: {a:?}");
}

#[test]
fn connect_is_405_and_a_lower_case_method_a_stream_error() {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[]);
    c.request(
        1,
        &[
            (":method", "CONNECT"),
            (":scheme", "http"),
            (":authority", "localhost"),
            (":path", "/"),
        ],
    );
    assert_eq!(c.answer(1).status, Some(405));
    let mut c = H2::connect(port, &[]);
    c.request(
        1,
        &[
            (":method", "get"),
            (":scheme", "http"),
            (":authority", "localhost"),
            (":path", "/"),
        ],
    );
    let a = c.answer(1);
    assert_eq!((a.status, a.rst), (None, Some(1)), "{a:?}");
    // The connection goes on.
    c.get(3, "/");
    assert_eq!(c.answer(3).status, Some(200));
}

#[test]
fn request_length_is_the_header_block() {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[]);
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/rl"),
    ];
    let block = loona_hpack::Encoder::new()
        .encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
        .len();
    c.request(1, &fields);
    let a = c.answer(1);
    assert_eq!(a.status, Some(200));
    assert_eq!(String::from_utf8_lossy(&a.body), block.to_string());
}

#[test]
fn empty_return_carries_the_type() {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[]);
    c.get(1, "/empty");
    let a = c.answer(1);
    assert_eq!(a.status, Some(200));
    let ct = a.headers.iter().find(|(n, _)| n == "content-type");
    assert_eq!(
        ct.map(|(_, v)| v.as_str()),
        Some("text/plain; charset=utf-8")
    );
}

#[test]
fn data_frames_follow_chunk_size_up_to_the_client_frame_size() {
    let (_s, port) = start();
    // Windows large enough for the whole file; SETTINGS_MAX_FRAME_SIZE 32k.
    let mut c = H2::connect(port, &[(4, 1 << 20), (5, 1 << 15)]);
    c.frame(8, 0, 0, &(1u32 << 20).to_be_bytes());
    c.get(1, "/frame_size/big");
    let a = c.answer(1);
    assert_eq!(a.status, Some(200));
    assert_eq!(a.body.len(), 100_000);
    assert_eq!(a.data_frames.first(), Some(&32768), "{:?}", a.data_frames);
    assert!(a.data_frames.iter().all(|&n| n <= 32768));
    // The default frame size (16k) still bounds them for a client that sets none.
    let mut c = H2::connect(port, &[(4, 1 << 20)]);
    c.frame(8, 0, 0, &(1u32 << 20).to_be_bytes());
    c.get(1, "/frame_size/big");
    let a = c.answer(1);
    assert_eq!(a.body.len(), 100_000);
    assert!(
        a.data_frames.iter().all(|&n| n <= 16384),
        "{:?}",
        a.data_frames
    );
}

/// nginx fills DATA frames from its whole buffer chain: after a window stall shifts the
/// frames against the file's 64 KiB reads, and a second SETTINGS opens the window and
/// raises the frame size, every frame but the last is still a full one (h2.t "multiple
/// SETTINGS"), not a short one at each read's end.
#[test]
fn frames_stay_full_across_file_reads_after_a_window_stall() {
    let (_s, port) = start();
    let mut c = H2::connect(port, &[(4, 42)]);
    c.frame(8, 0, 0, &(1u32 << 20).to_be_bytes());
    c.get(1, "/frame_size/big");
    let mut first = None;
    while first.is_none() {
        let f = c.read().expect("a frame");
        if f.kind == DATA && f.stream == 1 {
            first = Some(f.payload.len());
        }
    }
    assert_eq!(first, Some(42), "the initial window");
    let mut p = Vec::new();
    for (id, v) in [(4u16, 1u32 << 17), (5, 1 << 15)] {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    c.frame(SETTINGS, 0, 0, &p);
    let a = c.answer(1);
    assert_eq!(a.body.len(), 100_000 - 42);
    // 99,958 bytes: three full frames and the rest.
    assert_eq!(a.data_frames, [32768, 32768, 32768, 1654]);
}

#[test]
fn reload_says_goaway_in_two_steps() {
    // RFC 9113 §6.8: GOAWAY with the largest id and a PING; the final GOAWAY, naming the last
    // stream, once the PING is acknowledged (nginx sends only the final one).
    let (s, port) = start();
    let mut c = H2::connect(port, &[]);
    c.get(1, "/");
    assert_eq!(c.answer(1).status, Some(200));
    c.get(3, "/");
    assert_eq!(c.answer(3).status, Some(200));
    s.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut goaways = Vec::new();
    while goaways.len() < 2 && Instant::now() < deadline {
        match c.read() {
            Some(f) if f.kind == GOAWAY => goaways.push(u32::from_be_bytes([
                f.payload[0],
                f.payload[1],
                f.payload[2],
                f.payload[3],
            ])),
            Some(f) if f.kind == PING && f.flags & 1 == 0 => {
                let payload = f.payload.clone();
                c.frame(PING, 1, 0, &payload);
            }
            Some(_) => {}
            None => match c.s.peek(&mut [0u8; 1]) {
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {}
                _ => break,
            },
        }
    }
    assert_eq!(
        goaways,
        [0x7fff_ffff, 3],
        "GOAWAY(2^31-1), then GOAWAY naming stream 3"
    );
}
