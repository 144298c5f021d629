//! HTTP/2 for the raw clients: the preface, SETTINGS, a request's HEADERS (HPACK literals
//! without indexing or Huffman, CONTINUATION past 16 KiB) and DATA on stream 1; a reader
//! that answers SETTINGS and PING and returns stream 1's status, or its RST_STREAM, or the
//! connection's GOAWAY, with the code.

use std::io::ErrorKind;

use super::{field_list, put_str, Got, Outcome, Req, Tls};

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;
const MAX_FRAME: usize = 16384;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Preface, SETTINGS, HEADERS (and CONTINUATION) and DATA for stream 1.
pub(super) fn h2_request(req: &Req) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS_ENABLE_PUSH 0.
    frame(&mut out, SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]);
    let mut block = Vec::new();
    for (n, v) in field_list(req) {
        // Literal header field without indexing, new name (RFC 7541 §6.2.2).
        block.push(0);
        put_str(&mut block, &n);
        put_str(&mut block, &v);
    }
    let chunks: Vec<&[u8]> = block.chunks(MAX_FRAME).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let mut flags = if last { END_HEADERS } else { 0 };
        if i == 0 && req.body.is_none() {
            flags |= END_STREAM;
        }
        frame(
            &mut out,
            if i == 0 { HEADERS } else { CONTINUATION },
            flags,
            1,
            c,
        );
    }
    if let Some(body) = &req.body {
        if body.is_empty() {
            frame(&mut out, DATA, END_STREAM, 1, &[]);
        }
        let chunks: Vec<&[u8]> = body.chunks(MAX_FRAME).collect();
        for (i, c) in chunks.iter().enumerate() {
            let flags = if i + 1 == chunks.len() { END_STREAM } else { 0 };
            frame(&mut out, DATA, flags, 1, c);
        }
    }
    out
}

fn h2_code(code: u32) -> String {
    let name = match code {
        0 => "NO_ERROR",
        1 => "PROTOCOL_ERROR",
        2 => "INTERNAL_ERROR",
        3 => "FLOW_CONTROL_ERROR",
        5 => "STREAM_CLOSED",
        6 => "FRAME_SIZE_ERROR",
        7 => "REFUSED_STREAM",
        8 => "CANCEL",
        9 => "COMPRESSION_ERROR",
        11 => "ENHANCE_YOUR_CALM",
        _ => "?",
    };
    format!("{name} ({code:#x})")
}

/// Reads frames until stream 1 ends, is reset, or the connection ends.
pub(super) fn h2_response(t: &mut Tls) -> Got {
    let mut buf = Vec::new();
    let mut dec = loona_hpack::Decoder::new();
    let mut status: Option<u16> = None;
    let mut body = Vec::new();
    let mut block: Vec<u8> = Vec::new();
    let mut block_end_stream = false;
    let got = |status: Option<u16>, body: Vec<u8>, otherwise: Outcome| match status {
        Some(s) => Got {
            outcome: Outcome::Status(s),
            body,
        },
        None => Got::new(otherwise),
    };
    loop {
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let kind = buf[3];
            let flags = buf[4];
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload: Vec<u8> = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match (kind, stream) {
                (SETTINGS, 0) if flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    frame(&mut ack, SETTINGS, ACK, 0, &[]);
                    let _ = t.send(&ack);
                }
                (PING, 0) if flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    frame(&mut ack, PING, ACK, 0, &payload);
                    let _ = t.send(&ack);
                }
                (GOAWAY, 0) => {
                    let code = payload
                        .get(4..8)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    return got(
                        status,
                        body,
                        Outcome::Refused(format!("GOAWAY {}", h2_code(code))),
                    );
                }
                (RST_STREAM, 1) => {
                    let code = payload
                        .get(..4)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    return got(
                        status,
                        body,
                        Outcome::Refused(format!("RST_STREAM {}", h2_code(code))),
                    );
                }
                (HEADERS | CONTINUATION, 1) => {
                    let mut p: &[u8] = &payload;
                    if kind == HEADERS {
                        block.clear();
                        block_end_stream = flags & END_STREAM != 0;
                        if flags & 0x8 != 0 {
                            let pad = p.first().copied().unwrap_or(0) as usize;
                            p = p.get(1..p.len().saturating_sub(pad)).unwrap_or(&[]);
                        }
                        if flags & 0x20 != 0 {
                            p = p.get(5..).unwrap_or(&[]);
                        }
                    }
                    block.extend_from_slice(p);
                    if flags & END_HEADERS != 0 {
                        let fields = match dec.decode(&block) {
                            Ok(f) => f,
                            Err(e) => return Got::new(Outcome::Failed(format!("HPACK: {e:?}"))),
                        };
                        if status.is_none() {
                            let s = fields
                                .iter()
                                .find(|(n, _)| n == b":status")
                                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok());
                            if let Some(s) = s.filter(|s| !(100..200).contains(s)) {
                                status = Some(s);
                            }
                        }
                        if block_end_stream {
                            return got(status, body, Outcome::Closed);
                        }
                    }
                }
                (DATA, 1) => {
                    let mut p: &[u8] = &payload;
                    if flags & 0x8 != 0 {
                        let pad = p.first().copied().unwrap_or(0) as usize;
                        p = p.get(1..p.len().saturating_sub(pad)).unwrap_or(&[]);
                    }
                    body.extend_from_slice(p);
                    if flags & END_STREAM != 0 {
                        return got(status, body, Outcome::Closed);
                    }
                }
                _ => {}
            }
        }
        match t.recv(&mut buf) {
            Ok(0) => return got(status, body, Outcome::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return Got::new(Outcome::Failed("timeout".into()))
            }
            Err(_) => return got(status, body, Outcome::Closed),
        }
    }
}
