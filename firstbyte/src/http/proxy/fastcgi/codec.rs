//! FastCGI records (the FastCGI 1.0 specification, as nginx's ngx_http_fastcgi_module speaks
//! it): encoding the request's BEGIN_REQUEST, PARAMS and STDIN streams, and decoding the
//! STDOUT, STDERR and END_REQUEST records of the answer. Pure: bytes in, bytes out.

use bytes::{Buf, Bytes, BytesMut};

/// The protocol version every record carries.
pub const VERSION: u8 = 1;
/// `FCGI_BEGIN_REQUEST`.
pub const BEGIN_REQUEST: u8 = 1;
/// `FCGI_ABORT_REQUEST`.
pub const ABORT_REQUEST: u8 = 2;
/// `FCGI_END_REQUEST`.
pub const END_REQUEST: u8 = 3;
/// `FCGI_PARAMS`.
pub const PARAMS: u8 = 4;
/// `FCGI_STDIN`.
pub const STDIN: u8 = 5;
/// `FCGI_STDOUT`.
pub const STDOUT: u8 = 6;
/// `FCGI_STDERR`.
pub const STDERR: u8 = 7;
/// `FCGI_RESPONDER`, the only role nginx asks for.
const RESPONDER: u16 = 1;
/// `FCGI_KEEP_CONN`: the application keeps the connection after the request.
const KEEP_CONN: u8 = 1;
/// Most content bytes of one record.
pub const MAX_CONTENT: usize = 65535;
/// The request id firstbyte uses (one request per connection at a time, as nginx).
pub const REQUEST_ID: u16 = 1;

fn header(out: &mut Vec<u8>, kind: u8, id: u16, len: usize) -> usize {
    // Padding to a multiple of 8, as nginx sends (the specification recommends it).
    let padding = (8 - len % 8) % 8;
    out.extend_from_slice(&[
        VERSION,
        kind,
        (id >> 8) as u8,
        id as u8,
        (len >> 8) as u8,
        len as u8,
        padding as u8,
        0,
    ]);
    padding
}

/// A BEGIN_REQUEST record for the responder role.
pub fn begin_request(out: &mut Vec<u8>, id: u16, keep_conn: bool) {
    header(out, BEGIN_REQUEST, id, 8);
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    out.extend_from_slice(&[
        (RESPONDER >> 8) as u8,
        RESPONDER as u8,
        flags,
        0,
        0,
        0,
        0,
        0,
    ]);
}

/// `data` as records of stream `kind`, cut at [`MAX_CONTENT`]. Empty `data` is the empty
/// record that ends the stream.
pub fn stream(out: &mut Vec<u8>, kind: u8, id: u16, data: &[u8]) {
    if data.is_empty() {
        header(out, kind, id, 0);
        return;
    }
    for chunk in data.chunks(MAX_CONTENT) {
        let padding = header(out, kind, id, chunk.len());
        out.extend_from_slice(chunk);
        out.resize(out.len() + padding, 0);
    }
}

fn length(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        // Four bytes, the high bit set; names and values past 2^31 cannot be written.
        let n = (n as u32 & 0x7fff_ffff) | 0x8000_0000;
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// One name-value pair of the PARAMS stream.
pub fn name_value(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    length(out, name.len());
    length(out, value.len());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// Parses a PARAMS stream's content back into pairs (for tests and checks); None: malformed.
pub fn parse_pairs(mut b: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    fn len(b: &mut &[u8]) -> Option<usize> {
        let first = *b.first()?;
        if first < 128 {
            *b = &b[1..];
            return Some(first as usize);
        }
        let n = b.get(..4)?;
        let v = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) & 0x7fff_ffff;
        *b = &b[4..];
        Some(v as usize)
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let n = len(&mut b)?;
        let v = len(&mut b)?;
        let name = b.get(..n)?.to_vec();
        let value = b.get(n..n.checked_add(v)?)?.to_vec();
        b = &b[n + v..];
        out.push((name, value));
    }
    Some(out)
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its type (`STDOUT`, ...).
    pub kind: u8,
    /// Its request id.
    pub id: u16,
    /// Its content, without padding.
    pub content: Bytes,
}

/// What was wrong with the upstream's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A record of another protocol version (nginx: "upstream sent unsupported FastCGI
    /// protocol version").
    #[error("upstream sent unsupported FastCGI protocol version: {0}")]
    Version(u8),
}

/// Cuts records out of the bytes read so far.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
}

impl Decoder {
    /// Adds bytes read from the upstream.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The room to read into.
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The next whole record, None when more bytes are needed.
    pub fn record(&mut self) -> Result<Option<Record>, DecodeError> {
        let Some(h) = self.buf.get(..8) else {
            return Ok(None);
        };
        if h[0] != VERSION {
            return Err(DecodeError::Version(h[0]));
        }
        let kind = h[1];
        let id = u16::from_be_bytes([h[2], h[3]]);
        let len = u16::from_be_bytes([h[4], h[5]]) as usize;
        let padding = h[6] as usize;
        if self.buf.len() < 8 + len + padding {
            return Ok(None);
        }
        self.buf.advance(8);
        let content = self.buf.split_to(len).freeze();
        self.buf.advance(padding);
        Ok(Some(Record { kind, id, content }))
    }

    /// Whether bytes of an unfinished record are held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// An END_REQUEST's application status and protocol status.
pub fn end_request(content: &[u8]) -> (u32, u8) {
    match content.get(..5) {
        Some(c) => (u32::from_be_bytes([c[0], c[1], c[2], c[3]]), c[4]),
        None => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8]) -> Vec<Record> {
        let mut d = Decoder::default();
        d.push(bytes);
        let mut out = Vec::new();
        while let Some(r) = d.record().expect("valid") {
            out.push(r);
        }
        assert!(d.is_empty());
        out
    }

    #[test]
    fn begin_request_bytes() {
        let mut out = Vec::new();
        begin_request(&mut out, 1, true);
        assert_eq!(out, [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
        out.clear();
        begin_request(&mut out, 1, false);
        assert_eq!(out[10], 0);
    }

    #[test]
    fn streams_are_padded_cut_and_ended() {
        let mut out = Vec::new();
        stream(&mut out, STDIN, 1, b"hello");
        assert_eq!(&out[..8], &[1, STDIN, 0, 1, 0, 5, 3, 0]);
        assert_eq!(out.len(), 16);
        let big = vec![7u8; MAX_CONTENT + 10];
        let mut out = Vec::new();
        stream(&mut out, STDIN, 1, &big);
        stream(&mut out, STDIN, 1, b"");
        let recs = decode_all(&out);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].content.len(), MAX_CONTENT);
        assert_eq!(recs[1].content.len(), 10);
        assert!(recs[2].content.is_empty());
        assert!(recs.iter().all(|r| r.kind == STDIN && r.id == 1));
    }

    #[test]
    fn name_value_lengths() {
        let mut out = Vec::new();
        name_value(&mut out, b"A", b"b");
        assert_eq!(out, [1, 1, b'A', b'b']);
        let long = vec![b'x'; 300];
        let mut out = Vec::new();
        name_value(&mut out, b"SCRIPT_FILENAME", &long);
        assert_eq!(out[0], 15);
        assert_eq!(&out[1..5], &[0x80, 0, 1, 44]);
        name_value(&mut out, b"", b"");
        let pairs = parse_pairs(&out).expect("pairs");
        assert_eq!(pairs[0], (b"SCRIPT_FILENAME".to_vec(), long));
        assert_eq!(pairs[1], (Vec::new(), Vec::new()));
        assert!(parse_pairs(&[5, 1, b'a']).is_none());
        assert!(parse_pairs(&[0x80]).is_none());
    }

    #[test]
    fn decoder_waits_for_whole_records() {
        let mut out = Vec::new();
        stream(&mut out, STDOUT, 1, b"Status: 200\r\n\r\nbody");
        let mut d = Decoder::default();
        for (i, b) in out.iter().enumerate() {
            assert_eq!(d.record(), Ok(None), "byte {i}");
            d.push(&[*b]);
        }
        let r = d.record().expect("ok").expect("record");
        assert_eq!(r.kind, STDOUT);
        assert_eq!(&r.content[..], b"Status: 200\r\n\r\nbody");
        assert!(d.is_empty());
    }

    #[test]
    fn bad_version_and_end_request() {
        let mut d = Decoder::default();
        d.push(&[2, 6, 0, 1, 0, 0, 0, 0]);
        assert_eq!(d.record(), Err(DecodeError::Version(2)));
        assert_eq!(end_request(&[0, 0, 1, 2, 3, 0, 0, 0]), (258, 3));
        assert_eq!(end_request(&[1]), (0, 0));
    }
}
