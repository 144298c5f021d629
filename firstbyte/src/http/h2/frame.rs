//! HTTP/2 frames on the wire (RFC 9113 §4, §6): the 9-byte header, the frame types, flags and
//! error codes, and the encoders that write the server's frames straight into an output
//! buffer.

/// Bytes of a frame header (RFC 9113 §4.1).
pub const HEADER_LEN: usize = 9;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// SETTINGS_MAX_FRAME_SIZE's initial value and the largest frame the server accepts: 16 KiB
/// (RFC 9113 §6.5.2). The server never raises it.
pub const DEFAULT_MAX_FRAME: usize = 16_384;

/// The initial flow-control window of every stream and the connection (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: i64 = 65_535;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Frame types.
pub mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const PRIORITY: u8 = 2;
    pub const RST_STREAM: u8 = 3;
    pub const SETTINGS: u8 = 4;
    pub const PUSH_PROMISE: u8 = 5;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const WINDOW_UPDATE: u8 = 8;
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags.
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameters.
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 1;
    pub const ENABLE_PUSH: u16 = 2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 3;
    pub const INITIAL_WINDOW_SIZE: u16 = 4;
    pub const MAX_FRAME_SIZE: u16 = 5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 6;
}

/// An error code (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0);
    pub const PROTOCOL_ERROR: Reason = Reason(1);
    pub const INTERNAL_ERROR: Reason = Reason(2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(3);
    pub const STREAM_CLOSED: Reason = Reason(5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(6);
    pub const REFUSED_STREAM: Reason = Reason(7);
    pub const CANCEL: Reason = Reason(8);
    pub const COMPRESSION_ERROR: Reason = Reason(9);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Payload length.
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream: u32,
}

impl Head {
    /// Parses the first [`HEADER_LEN`] bytes of `b` (which must hold them).
    pub fn parse(b: &[u8]) -> Head {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    /// Whether `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Appends a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// The 9 bytes of a frame header (RFC 9113 §4.1): 24-bit length, type, flags, stream id.
pub fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    let l = len as u32;
    let s = stream.to_be_bytes();
    [
        (l >> 16) as u8,
        (l >> 8) as u8,
        l as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]
}

/// The payload of a HEADERS or DATA frame without its padding (RFC 9113 §6.1): `None` when the
/// pad length is not within the payload (a connection error PROTOCOL_ERROR).
pub fn unpad(head: &Head, payload: &[u8]) -> Option<(usize, usize)> {
    if !head.has(flag::PADDED) {
        return Some((0, payload.len()));
    }
    let pad = usize::from(*payload.first()?);
    let end = payload.len().checked_sub(pad)?;
    (end >= 1).then_some((1, end))
}

/// Appends a SETTINGS frame with `params`.
pub fn put_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    put_head(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for (id, v) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a WINDOW_UPDATE.
pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends a RST_STREAM.
pub fn put_rst(out: &mut Vec<u8>, stream: u32, reason: Reason) {
    put_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&reason.0.to_be_bytes());
}

/// Appends a GOAWAY.
pub fn put_goaway(out: &mut Vec<u8>, last_stream: u32, reason: Reason) {
    put_head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&reason.0.to_be_bytes());
}

/// Appends a PING acknowledgement carrying `data`.
pub fn put_pong(out: &mut Vec<u8>, data: &[u8]) {
    put_head(out, 8, kind::PING, flag::ACK, 0);
    out.extend_from_slice(data);
}

/// Appends DATA frames carrying `data`, each at most `max` bytes, the last with END_STREAM
/// when `end` (an empty `data` with `end` is one empty frame).
pub fn put_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end: bool, max: usize) {
    let max = max.max(1);
    let mut chunks = data.chunks(max).peekable();
    if chunks.peek().is_none() {
        let f = if end { flag::END_STREAM } else { 0 };
        put_head(out, 0, kind::DATA, f, stream);
        return;
    }
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        let f = if end && last { flag::END_STREAM } else { 0 };
        put_head(out, c.len(), kind::DATA, f, stream);
        out.extend_from_slice(c);
    }
}

/// Appends a header block as HEADERS + CONTINUATION frames of at most `max` bytes each.
pub fn put_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max: usize) {
    let max = max.max(1);
    let es = if end_stream { flag::END_STREAM } else { 0 };
    let (first, mut rest) = block.split_at(block.len().min(max));
    let eh = if rest.is_empty() {
        flag::END_HEADERS
    } else {
        0
    };
    put_head(out, first.len(), kind::HEADERS, es | eh, stream);
    out.extend_from_slice(first);
    while !rest.is_empty() {
        let (c, r) = rest.split_at(rest.len().min(max));
        rest = r;
        let eh = if rest.is_empty() {
            flag::END_HEADERS
        } else {
            0
        };
        put_head(out, c.len(), kind::CONTINUATION, eh, stream);
        out.extend_from_slice(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trip_clears_the_reserved_bit() {
        let mut out = Vec::new();
        put_head(&mut out, 0x01_02_03, kind::HEADERS, 0x25, 7);
        out[5] |= 0x80;
        let h = Head::parse(&out);
        assert_eq!(
            h,
            Head {
                len: 0x01_02_03,
                kind: kind::HEADERS,
                flags: 0x25,
                stream: 7
            }
        );
        assert!(h.has(flag::END_HEADERS) && !h.has(flag::PADDED));
    }

    #[test]
    fn padding_must_fit_the_payload() {
        let padded = Head {
            len: 0,
            kind: kind::DATA,
            flags: flag::PADDED,
            stream: 1,
        };
        assert_eq!(unpad(&padded, &[2, b'a', 0, 0]), Some((1, 2)));
        assert_eq!(unpad(&padded, &[3, b'a', 0, 0]), Some((1, 1)));
        assert_eq!(unpad(&padded, &[4, b'a', 0, 0]), None);
        assert_eq!(unpad(&padded, &[]), None);
        let plain = Head { flags: 0, ..padded };
        assert_eq!(unpad(&plain, b"abc"), Some((0, 3)));
    }

    #[test]
    fn data_is_cut_into_frames_and_only_the_last_ends_the_stream() {
        let mut out = Vec::new();
        put_data(&mut out, 3, &[7u8; 10], true, 4);
        let mut lens = Vec::new();
        let mut at = 0;
        while at < out.len() {
            let h = Head::parse(&out[at..]);
            lens.push((h.len, h.has(flag::END_STREAM)));
            at += HEADER_LEN + h.len;
        }
        assert_eq!(lens, [(4, false), (4, false), (2, true)]);
        out.clear();
        put_data(&mut out, 3, &[], true, 4);
        assert_eq!(Head::parse(&out).len, 0);
        assert!(Head::parse(&out).has(flag::END_STREAM));
    }

    #[test]
    fn long_header_blocks_continue() {
        let mut out = Vec::new();
        put_headers(&mut out, 1, &[1u8; 9], false, 4);
        let a = Head::parse(&out);
        assert_eq!(
            (a.kind, a.len, a.has(flag::END_HEADERS)),
            (kind::HEADERS, 4, false)
        );
        let b = Head::parse(&out[13..]);
        assert_eq!((b.kind, b.len), (kind::CONTINUATION, 4));
        let c = Head::parse(&out[26..]);
        assert_eq!(
            (c.kind, c.len, c.has(flag::END_HEADERS)),
            (kind::CONTINUATION, 1, true)
        );
        assert_eq!(out.len(), 26 + 9 + 1);
    }
}
