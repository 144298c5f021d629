//! HTTP/3 for the raw clients: quinn connections with a control stream (an empty
//! SETTINGS), a request's HEADERS as QPACK literal field lines with literal names and no
//! table (RFC 9204 §4.5.6) and DATA on a bidirectional stream; the answer's `:status` read
//! from the static table or a literal (Huffman-decoded with loona-hpack), or the stream reset
//! or connection close with its code. 0-RTT: a first connection for the ticket, then
//! `into_0rtt`.

use std::net::SocketAddr;
use std::sync::Arc;

use super::{field_list, put_int, put_str, Got, Outcome, Req, TIMEOUT};

/// A QUIC client endpoint trusting the tests' CA, ALPN h3 (TLS 1.3 early data if `early`).
pub(super) fn h3_endpoint(early: bool) -> quinn::Endpoint {
    let mut tls = (*super::super::rust_client_config(&[b"h3"])).clone();
    tls.enable_early_data = early;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

/// A QUIC connection with its HTTP/3 control stream open (SETTINGS sent); the stream is held
/// open for the connection's life (closing it is a connection error).
pub(super) struct H3Conn {
    conn: quinn::Connection,
    _control: quinn::SendStream,
}

async fn h3_control(conn: quinn::Connection) -> Result<H3Conn, String> {
    let mut control = conn.open_uni().await.map_err(|e| e.to_string())?;
    // Stream type 0x00 (control), SETTINGS (0x04) with nothing in it.
    control
        .write_all(&[0x00, 0x04, 0x00])
        .await
        .map_err(|e| e.to_string())?;
    Ok(H3Conn {
        conn,
        _control: control,
    })
}

pub(super) async fn h3_connect(
    ep: &quinn::Endpoint,
    port: u16,
    sni: &str,
) -> Result<H3Conn, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let conn = ep
        .connect(addr, sni)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    h3_control(conn).await
}

/// A first connection for a ticket, then `req` in 0-RTT on a second.
pub(super) async fn h3_early(port: u16, sni: &str, req: &Req) -> Got {
    let ep = h3_endpoint(true);
    let first = match h3_connect(&ep, port, sni).await {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e)),
    };
    let g = h3_exchange(&first, &Req::get("/")).await;
    if !matches!(g.outcome, Outcome::Status(_)) {
        return Got::new(Outcome::Failed(format!("first connection: {g:?}")));
    }
    first.conn.close(0u32.into(), b"");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let connecting = match ep.connect(addr, sni) {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e.to_string())),
    };
    let Ok((conn, accepted)) = connecting.into_0rtt() else {
        return Got::new(Outcome::Failed("no 0-RTT ticket".into()));
    };
    let c = match h3_control(conn).await {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e)),
    };
    let g = h3_exchange(&c, req).await;
    if !accepted.await {
        return Got::new(Outcome::Failed(format!("0-RTT not accepted (got {g:?})")));
    }
    g
}

fn varint(out: &mut Vec<u8>, v: u64) {
    if v < 64 {
        out.push(v as u8);
    } else if v < 16384 {
        out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

fn h3_frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    varint(out, kind);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// HEADERS (QPACK literal field lines with literal names, no table) and DATA frames.
fn h3_request(req: &Req) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0.
    let mut block = vec![0, 0];
    for (n, v) in field_list(req) {
        // 001NHxxx: literal field line with literal name, never-index 0, no Huffman.
        put_int(&mut block, 0x20, 3, n.len());
        block.extend_from_slice(&n);
        put_str(&mut block, &v);
    }
    let mut out = Vec::new();
    h3_frame(&mut out, 0x01, &block);
    if let Some(body) = &req.body {
        if !body.is_empty() {
            h3_frame(&mut out, 0x00, body);
        }
    }
    out
}

fn h3_code(code: u64) -> String {
    let name = match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        _ => "?",
    };
    format!("{name} ({code:#x})")
}

/// A QUIC variable-length integer at the start of `b`: (value, its size).
fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = (first & 0x3f) as u64;
    for x in &b[1..len] {
        v = (v << 8) | *x as u64;
    }
    Some((v, len))
}

/// A prefixed integer (`n`-bit prefix) at the start of `b`: (value, its size).
fn get_int(b: &[u8], n: u32) -> Option<(usize, usize)> {
    let max = (1usize << n) - 1;
    let mut v = (*b.first()? as usize) & max;
    if v < max {
        return Some((v, 1));
    }
    let mut shift = 0;
    for (i, x) in b[1..].iter().enumerate() {
        v += ((x & 0x7f) as usize) << shift;
        shift += 7;
        if x & 0x80 == 0 {
            return Some((v, i + 2));
        }
        if shift > 28 {
            return None;
        }
    }
    None
}

/// The QPACK static table's `:status` entries (RFC 9204 Appendix A).
fn static_status(index: usize) -> Option<&'static str> {
    Some(match index {
        24 => "103",
        25 => "200",
        26 => "304",
        27 => "404",
        28 => "503",
        63 => "100",
        64 => "204",
        65 => "206",
        66 => "302",
        67 => "400",
        68 => "403",
        69 => "421",
        70 => "425",
        71 => "500",
        _ => return None,
    })
}

/// A string literal with an `n`-bit length prefix whose H bit is the bit above it.
fn get_str(b: &[u8], n: u32) -> Option<(Vec<u8>, usize)> {
    let huffman = *b.first()? & (1 << n) != 0;
    let (len, at) = get_int(b, n)?;
    let raw = b.get(at..at + len)?;
    let s = if huffman {
        loona_hpack::huffman::HuffmanDecoder::new()
            .decode(raw)
            .ok()?
    } else {
        raw.to_vec()
    };
    Some((s, at + len))
}

/// The `:status` of a QPACK field section encoded without the dynamic table.
fn qpack_status(block: &[u8]) -> Option<u16> {
    let (_, a) = get_int(block, 8)?;
    let (_, b) = get_int(block.get(a..)?, 7)?;
    let mut p = block.get(a + b..)?;
    while let Some(&first) = p.first() {
        let (value, used): (Vec<u8>, usize) = if first & 0x80 != 0 {
            // Indexed field line; T=1: the static table.
            let (i, n) = get_int(p, 6)?;
            let v = if first & 0x40 != 0 {
                static_status(i)
            } else {
                None
            };
            (v.map(|v| v.as_bytes().to_vec()).unwrap_or_default(), n)
        } else if first & 0x40 != 0 {
            // Literal field line with name reference.
            let (i, n) = get_int(p, 4)?;
            let (v, m) = get_str(&p[n..], 7)?;
            let is_status = first & 0x10 != 0 && static_status(i).is_some();
            (if is_status { v } else { Vec::new() }, n + m)
        } else if first & 0x20 != 0 {
            // Literal field line with literal name.
            let (name, n) = get_str(p, 3)?;
            let (v, m) = get_str(&p[n..], 7)?;
            (if name == b":status" { v } else { Vec::new() }, n + m)
        } else {
            return None;
        };
        if !value.is_empty() {
            return std::str::from_utf8(&value).ok()?.parse().ok();
        }
        p = &p[used..];
    }
    None
}

/// One request on a new bidirectional stream of `c`; reads the answer.
pub(super) async fn h3_exchange(c: &H3Conn, req: &Req) -> Got {
    let (mut send, mut recv) = match c.conn.open_bi().await {
        Ok(s) => s,
        Err(e) => return Got::new(Outcome::Refused(format!("connection: {e}"))),
    };
    // A write the server stops (STOP_SENDING) is no answer yet: the answer is read below.
    let bytes = h3_request(req);
    if send.write_all(&bytes).await.is_ok() {
        let _ = send.finish();
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut status = None;
    let mut body = Vec::new();
    let mut chunk = vec![0u8; 16384];
    let got = |status: Option<u16>, body: Vec<u8>, otherwise: Outcome| match status {
        Some(s) => Got {
            outcome: Outcome::Status(s),
            body,
        },
        None => Got::new(otherwise),
    };
    loop {
        // Whole frames first.
        while let Some((kind, a)) = get_varint(&buf) {
            let Some((len, b)) = buf.get(a..).and_then(get_varint) else {
                break;
            };
            let len = len as usize;
            if buf.len() < a + b + len {
                break;
            }
            let payload = buf[a + b..a + b + len].to_vec();
            buf.drain(..a + b + len);
            match kind {
                0x01 if status.is_none() => match qpack_status(&payload) {
                    Some(s) if (100..200).contains(&s) => {}
                    Some(s) => status = Some(s),
                    None => return Got::new(Outcome::Failed("no :status in HEADERS".into())),
                },
                0x00 => body.extend_from_slice(&payload),
                _ => {}
            }
        }
        let read = match tokio::time::timeout(TIMEOUT, recv.read(&mut chunk)).await {
            Ok(r) => r,
            Err(_) => {
                return Got::new(Outcome::Failed(format!(
                    "timeout (status {status:?}, {} body bytes, {} bytes unparsed)",
                    body.len(),
                    buf.len()
                )))
            }
        };
        match read {
            Ok(Some(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(None) => return got(status, body, Outcome::Closed),
            Err(quinn::ReadError::Reset(code)) => {
                return got(
                    status,
                    body,
                    Outcome::Refused(format!("stream reset {}", h3_code(code.into_inner()))),
                )
            }
            Err(quinn::ReadError::ConnectionLost(e)) => {
                let why = match &e {
                    quinn::ConnectionError::ApplicationClosed(a) => {
                        format!("connection closed {}", h3_code(a.error_code.into_inner()))
                    }
                    other => format!("connection lost: {other}"),
                };
                return got(status, body, Outcome::Refused(why));
            }
            Err(e) => return Got::new(Outcome::Failed(format!("read: {e}"))),
        }
    }
}
