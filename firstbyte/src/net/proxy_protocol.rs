//! The PROXY protocol header (HAProxy's, versions 1 and 2) that a load balancer sends before
//! anything else on a connection, as nginx's `ngx_proxy_protocol_read`: pure parsing of the
//! bytes received so far into the client's and server's addresses.
//!
//! Version 1 is one text line of at most 107 bytes: `PROXY TCP4|TCP6 SRC DST SPORT
//! DPORT\r\n`, or `PROXY UNKNOWN ...\r\n` (no addresses). Version 2 is a 16-byte binary head
//! (signature, version and command, family and transport, length) and that many bytes of
//! addresses and TLVs, at most 4096 in all (nginx's `NGX_PROXY_PROTOCOL_MAX_HEADER`). A
//! `LOCAL` command, a non-stream transport or an unknown family carries no addresses: the
//! connection keeps its own, as nginx.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Longest version 1 line, CRLF included (nginx's `NGX_PROXY_PROTOCOL_V1_MAX_HEADER`).
pub const V1_MAX: usize = 107;
/// Longest header of either version (nginx's `NGX_PROXY_PROTOCOL_MAX_HEADER`).
pub const MAX_HEADER: usize = 4096;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The addresses a header carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyAddrs {
    /// The client (`$proxy_protocol_addr`, `$proxy_protocol_port`).
    pub source: SocketAddr,
    /// The address the client connected to (`$proxy_protocol_server_addr`, `..._port`).
    pub destination: SocketAddr,
}

/// What the bytes so far hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A complete header of this many bytes, with its addresses (None: `UNKNOWN`, `LOCAL`,
    /// or a family without addresses).
    Done(usize, Option<ProxyAddrs>),
    /// Not enough bytes yet; read more (up to [`MAX_HEADER`]).
    Incomplete,
    /// Not a valid header: the connection is closed. The text is for the log (nginx's
    /// `broken header: "..."`).
    Invalid(String),
}

/// Parses the start of a connection's bytes.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.len() < V2_SIGNATURE.len() {
        // Could still be either version: decide as soon as the bytes differ from both.
        let v1 = b"PROXY ";
        let n = buf.len().min(v1.len());
        if buf[..n] != v1[..n] && buf[..] != V2_SIGNATURE[..buf.len()] {
            return broken(buf);
        }
        if buf.len() < v1.len() || buf[..] == V2_SIGNATURE[..buf.len()] {
            return Parsed::Incomplete;
        }
    }
    if buf.starts_with(V2_SIGNATURE) {
        return parse_v2(buf);
    }
    parse_v1(buf)
}

/// The TLVs of a complete version 2 header `head` (as [`parse`] measured it) that carries
/// IPv4 or IPv6 addresses of a PROXY command over a stream transport, as nginx keeps them
/// (`$proxy_protocol_tlv_*`); `None` otherwise or when there are none.
pub fn v2_tlvs(head: &[u8]) -> Option<&[u8]> {
    if !head.starts_with(V2_SIGNATURE) || head.len() < 16 {
        return None;
    }
    let total = 16 + usize::from(u16::from_be_bytes([head[14], head[15]]));
    if head[12] != 0x21 || head[13] & 0x0f != 1 || head.len() < total {
        return None;
    }
    let addrs = match head[13] >> 4 {
        1 => 12,
        2 => 36,
        _ => return None,
    };
    head.get(16 + addrs..total).filter(|t| !t.is_empty())
}

/// A `$proxy_protocol_tlv_NAME` variable's name, as nginx resolves it: `alpn`, `authority`,
/// `unique_id`, `ssl`, `netns` or a type in hex (`0x30`); `ssl_verify`; `ssl_version`,
/// `ssl_cn`, `ssl_cipher`, `ssl_sig_alg`, `ssl_key_alg` or `ssl_0xHH` (inside the SSL TLV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlvName {
    /// A TLV of this type (types past 0xff never match).
    Type(u64),
    /// A sub-TLV of the SSL TLV (0x20).
    Ssl(u64),
    /// The SSL TLV's `verify` field, in decimal.
    SslVerify,
}

/// The SSL TLV's type, and the size of its fixed part (client flags, verify).
const TLV_SSL: u64 = 0x20;
const TLV_SSL_FIXED: usize = 5;

impl TlvName {
    /// `None`: a name nginx does not know (firstbyte refuses it at load).
    pub fn parse(name: &str) -> Option<TlvName> {
        fn typ(name: &str, table: &[(&str, u64)]) -> Option<u64> {
            if let Some(hex) = name.strip_prefix("0x") {
                if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                return u64::from_str_radix(hex, 16).ok();
            }
            table.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
        }
        if let Some(sub) = name.strip_prefix("ssl_") {
            if sub == "verify" {
                return Some(TlvName::SslVerify);
            }
            let table = [
                ("version", 0x21),
                ("cn", 0x22),
                ("cipher", 0x23),
                ("sig_alg", 0x24),
                ("key_alg", 0x25),
            ];
            return typ(sub, &table).map(TlvName::Ssl);
        }
        let table = [
            ("alpn", 0x01),
            ("authority", 0x02),
            ("unique_id", 0x05),
            ("ssl", TLV_SSL),
            ("netns", 0x30),
        ];
        typ(name, &table).map(TlvName::Type)
    }

    /// The value in `tlvs` (see [`v2_tlvs`]): the TLV's bytes, or `verify` in decimal. `None`
    /// when absent, or when the TLVs are cut short before it (nginx's "broken PROXY protocol
    /// TLV").
    pub fn lookup(self, tlvs: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
        use std::borrow::Cow;
        let ssl = || find(tlvs, TLV_SSL).filter(|s| s.len() >= TLV_SSL_FIXED);
        match self {
            TlvName::Type(t) => find(tlvs, t).map(Cow::Borrowed),
            TlvName::Ssl(t) => find(&ssl()?[TLV_SSL_FIXED..], t).map(Cow::Borrowed),
            TlvName::SslVerify => {
                let s = ssl()?;
                let verify = u32::from_be_bytes([s[1], s[2], s[3], s[4]]);
                Some(Cow::Owned(verify.to_string().into_bytes()))
            }
        }
    }
}

/// The first TLV of type `t` in `tlvs` (type: 1 byte, length: 2 bytes big-endian, value).
fn find(mut tlvs: &[u8], t: u64) -> Option<&[u8]> {
    while !tlvs.is_empty() {
        let (&[typ, hi, lo], rest) = tlvs.split_first_chunk::<3>()?;
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        let value = rest.get(..len)?;
        if u64::from(typ) == t {
            return Some(value);
        }
        tlvs = &rest[len..];
    }
    None
}

fn broken(buf: &[u8]) -> Parsed {
    let end = buf
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(buf.len())
        .min(V1_MAX);
    Parsed::Invalid(format!(
        "broken header: \"{}\"",
        String::from_utf8_lossy(&buf[..end]).escape_default()
    ))
}

fn parse_v1(buf: &[u8]) -> Parsed {
    if !buf.starts_with(b"PROXY ") {
        return broken(buf);
    }
    let Some(lf) = buf.iter().take(V1_MAX).position(|&b| b == b'\n') else {
        return if buf.len() >= V1_MAX {
            broken(buf)
        } else {
            Parsed::Incomplete
        };
    };
    let line = &buf[..lf + 1];
    let Some(body) = line.strip_suffix(b"\r\n") else {
        return broken(buf);
    };
    let Ok(text) = std::str::from_utf8(&body[6..]) else {
        return broken(buf);
    };
    if text.starts_with("UNKNOWN") {
        return Parsed::Done(line.len(), None);
    }
    let mut parts = text.split(' ');
    let (Some(proto), Some(src), Some(dst), Some(sport), Some(dport), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return broken(buf);
    };
    let addr = |s: &str| -> Option<IpAddr> {
        match proto {
            "TCP4" => s.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
            "TCP6" => s.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
            _ => None,
        }
    };
    let port = |s: &str| -> Option<u16> {
        if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    match (addr(src), addr(dst), port(sport), port(dport)) {
        (Some(s), Some(d), Some(sp), Some(dp)) => Parsed::Done(
            line.len(),
            Some(ProxyAddrs {
                source: SocketAddr::new(s, sp),
                destination: SocketAddr::new(d, dp),
            }),
        ),
        _ => broken(buf),
    }
}

fn parse_v2(buf: &[u8]) -> Parsed {
    if buf.len() < 16 {
        return Parsed::Incomplete;
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Parsed::Invalid(format!("unknown PROXY protocol version: {}", ver_cmd >> 4));
    }
    let len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let total = 16 + len;
    if total > MAX_HEADER {
        return Parsed::Invalid("header is too large".into());
    }
    if buf.len() < total {
        return Parsed::Incomplete;
    }
    let body = &buf[16..total];
    let command = ver_cmd & 0x0f;
    let family = buf[13] >> 4;
    let transport = buf[13] & 0x0f;
    match command {
        // LOCAL: a health check from the balancer itself; no addresses.
        0 => return Parsed::Done(total, None),
        1 => {}
        c => return Parsed::Invalid(format!("unknown PROXY protocol v2 command: {c}")),
    }
    // Only STREAM carries addresses nginx uses.
    if transport != 1 {
        return Parsed::Done(total, None);
    }
    let addrs = match family {
        1 => {
            if body.len() < 12 {
                return Parsed::Invalid("PROXY protocol v2 address block too short".into());
            }
            let ip = |o: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    body[o],
                    body[o + 1],
                    body[o + 2],
                    body[o + 3],
                ))
            };
            let port = |o: usize| u16::from_be_bytes([body[o], body[o + 1]]);
            ProxyAddrs {
                source: SocketAddr::new(ip(0), port(8)),
                destination: SocketAddr::new(ip(4), port(10)),
            }
        }
        2 => {
            if body.len() < 36 {
                return Parsed::Invalid("PROXY protocol v2 address block too short".into());
            }
            let ip = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&body[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            let port = |o: usize| u16::from_be_bytes([body[o], body[o + 1]]);
            ProxyAddrs {
                source: SocketAddr::new(ip(0), port(32)),
                destination: SocketAddr::new(ip(16), port(34)),
            }
        }
        // AF_UNSPEC, AF_UNIX, unknown: no addresses, as nginx.
        _ => return Parsed::Done(total, None),
    };
    Parsed::Done(total, Some(addrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut b = V2_SIGNATURE.to_vec();
        b.push(0x20 | cmd);
        b.push(fam);
        b.extend_from_slice(&(body.len() as u16).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn version_1() {
        let h = b"PROXY TCP4 192.0.2.1 198.51.100.2 51000 443\r\nGET /";
        let Parsed::Done(n, Some(a)) = parse(h) else {
            panic!("{:?}", parse(h))
        };
        assert_eq!(&h[n..], b"GET /");
        assert_eq!(a.source, "192.0.2.1:51000".parse().unwrap());
        assert_eq!(a.destination, "198.51.100.2:443".parse().unwrap());
        let h6 = b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n";
        assert!(matches!(parse(h6), Parsed::Done(36, Some(a)) if a.source.port() == 1));
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Parsed::Done(15, None));
        assert_eq!(
            parse(b"PROXY UNKNOWN whatever 1 2\r\nx"),
            Parsed::Done(28, None)
        );
    }

    #[test]
    fn version_1_incomplete_then_complete() {
        let full = b"PROXY TCP4 192.0.2.1 198.51.100.2 51000 443\r\n";
        for n in 0..full.len() {
            assert_eq!(parse(&full[..n]), Parsed::Incomplete, "{n} bytes");
        }
        assert!(matches!(parse(full), Parsed::Done(..)));
    }

    #[test]
    fn version_1_hostile() {
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00",
            b"PROXY TCP5 1.1.1.1 2.2.2.2 1 2\r\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 1 2\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 1 2 3\r\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 1\r\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 1 65536\r\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 -1 2\r\n",
            b"PROXY TCP4 ::1 2.2.2.2 1 2\r\n",
            b"PROXY TCP6 1.1.1.1 ::1 1 2\r\n",
            b"PROXY TCP4 1.1.1.1  2.2.2.2 1 2\r\n",
            b"PROXY TCP4 1.1.1.1 2.2.2.2 +1 2\r\n",
            b"PROXY \xff\xfe\r\n",
            b"proxy TCP4 1.1.1.1 2.2.2.2 1 2\r\n",
        ] {
            assert!(
                matches!(parse(bad), Parsed::Invalid(_)),
                "{:?}: {:?}",
                String::from_utf8_lossy(bad),
                parse(bad)
            );
        }
        // Oversized: no line end within 107 bytes.
        let mut long = b"PROXY TCP4 ".to_vec();
        long.resize(200, b'1');
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
        long.truncate(106);
        assert_eq!(parse(&long), Parsed::Incomplete);
        long.push(b'1');
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
    }

    #[test]
    fn version_2() {
        let mut body = vec![192, 0, 2, 1, 198, 51, 100, 2];
        body.extend_from_slice(&51000u16.to_be_bytes());
        body.extend_from_slice(&443u16.to_be_bytes());
        body.extend_from_slice(&[0x04, 0, 1, 0]); // a TLV after the addresses
        let mut h = v2(1, 0x11, &body);
        let n = h.len();
        h.extend_from_slice(b"\x16\x03\x01");
        let Parsed::Done(len, Some(a)) = parse(&h) else {
            panic!("{:?}", parse(&h))
        };
        assert_eq!(len, n);
        assert_eq!(a.source, "192.0.2.1:51000".parse().unwrap());
        assert_eq!(a.destination, "198.51.100.2:443".parse().unwrap());
        for cut in 0..n {
            assert_eq!(parse(&h[..cut]), Parsed::Incomplete, "{cut} bytes");
        }
        let mut b6 = vec![0u8; 36];
        b6[15] = 1;
        b6[31] = 2;
        b6[32..34].copy_from_slice(&7u16.to_be_bytes());
        let Parsed::Done(_, Some(a)) = parse(&v2(1, 0x21, &b6)) else {
            panic!()
        };
        assert_eq!(a.source, "[::1]:7".parse().unwrap());
        // LOCAL, UDP, UNIX and UNSPEC carry no addresses.
        assert_eq!(
            parse(&v2(0, 0x11, &body)),
            Parsed::Done(16 + body.len(), None)
        );
        assert_eq!(
            parse(&v2(1, 0x12, &body)),
            Parsed::Done(16 + body.len(), None)
        );
        assert_eq!(parse(&v2(1, 0x31, &[0; 216])), Parsed::Done(232, None));
        assert_eq!(parse(&v2(1, 0x00, &[])), Parsed::Done(16, None));
    }

    #[test]
    fn version_2_hostile() {
        // Truncated address blocks for the family claimed.
        assert!(matches!(
            parse(&v2(1, 0x11, &[1, 2, 3])),
            Parsed::Invalid(_)
        ));
        assert!(matches!(parse(&v2(1, 0x21, &[0; 20])), Parsed::Invalid(_)));
        // Bad version, bad command.
        let mut h = v2(1, 0x11, &[0; 12]);
        h[12] = 0x11;
        assert!(matches!(parse(&h), Parsed::Invalid(_)));
        h[12] = 0x2f;
        assert!(matches!(parse(&h), Parsed::Invalid(_)));
        // A length past the bound is refused before waiting for it.
        let mut big = V2_SIGNATURE.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert!(matches!(parse(&big), Parsed::Invalid(m) if m.contains("too large")));
        // Every prefix of random-looking input gives an answer without panicking.
        let mut x: u32 = 12345;
        for _ in 0..2000 {
            let mut buf = V2_SIGNATURE.to_vec();
            for _ in 0..(x % 64) {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                buf.push((x >> 16) as u8);
            }
            let _ = parse(&buf);
            let _ = parse(&buf[12..]);
        }
    }

    fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
        let mut b = vec![t];
        b.extend_from_slice(&(v.len() as u16).to_be_bytes());
        b.extend_from_slice(v);
        b
    }

    #[test]
    fn tlv_names_as_nginx() {
        use TlvName::*;
        assert_eq!(TlvName::parse("alpn"), Some(Type(1)));
        assert_eq!(TlvName::parse("netns"), Some(Type(0x30)));
        assert_eq!(TlvName::parse("0x000ae"), Some(Type(0xae)));
        assert_eq!(TlvName::parse("0x3"), Some(Type(3)));
        assert_eq!(TlvName::parse("ssl"), Some(Type(0x20)));
        assert_eq!(TlvName::parse("ssl_verify"), Some(SslVerify));
        assert_eq!(TlvName::parse("ssl_cn"), Some(Ssl(0x22)));
        assert_eq!(TlvName::parse("ssl_0x21"), Some(Ssl(0x21)));
        for bad in [
            "",
            "foo",
            "0x",
            "0xg1",
            "ssl_",
            "ssl_foo",
            "ALPN",
            "0x1ffffffffffffffff",
        ] {
            assert_eq!(TlvName::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn tlvs_of_a_v2_header_and_their_lookup() {
        let mut ssl = vec![0x01, 0, 0, 0, 255];
        ssl.extend(tlv(0x21, b"TLSv1.2"));
        ssl.extend(tlv(0x22, b"example.com"));
        let mut tlvs = tlv(0x01, b"h2");
        tlvs.extend(tlv(0x20, &ssl));
        tlvs.extend(tlv(0xae, b"12345"));
        let mut addrs = vec![192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e];
        addrs.extend_from_slice(&tlvs);
        let head = v2(1, 0x11, &addrs);
        let want = ProxyAddrs {
            source: "192.0.2.1:123".parse().expect("address"),
            destination: "192.0.2.2:5678".parse().expect("address"),
        };
        assert_eq!(parse(&head), Parsed::Done(head.len(), Some(want)));
        let t = v2_tlvs(&head).expect("tlvs");
        assert_eq!(t, &tlvs[..]);
        let get = |n: &str| TlvName::parse(n).and_then(|n| n.lookup(t).map(|v| v.into_owned()));
        assert_eq!(get("alpn").as_deref(), Some(&b"h2"[..]));
        assert_eq!(get("0xae").as_deref(), Some(&b"12345"[..]));
        assert_eq!(get("ssl_verify").as_deref(), Some(&b"255"[..]));
        assert_eq!(get("ssl_version").as_deref(), Some(&b"TLSv1.2"[..]));
        assert_eq!(get("ssl_0x22").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(get("ssl").as_deref(), Some(&ssl[..]));
        assert_eq!(get("authority"), None);
        assert_eq!(get("ssl_cipher"), None);
        // No TLVs kept for LOCAL, UNSPEC or a header without any.
        assert_eq!(v2_tlvs(&v2(0, 0x11, &addrs)), None);
        assert_eq!(v2_tlvs(&v2(1, 0x00, &addrs)), None);
        assert_eq!(v2_tlvs(&v2(1, 0x11, &addrs[..12])), None);
    }

    #[test]
    fn hostile_tlvs_end_the_lookup() {
        // A length past the end, a lone type byte, a short SSL TLV: nothing found, no panic.
        for t in [
            vec![0x01, 0xff, 0xff, b'x'],
            vec![0x05, 0, 1, b'u', 0x01],
            vec![0x05, 0, 1, b'u', 0x01, 0],
            tlv(0x20, &[1, 0, 0]),
        ] {
            for n in ["alpn", "ssl_verify", "ssl_version", "0x20"] {
                let v = TlvName::parse(n).and_then(|n| n.lookup(&t).map(|v| v.into_owned()));
                assert!(v.is_none() || n == "0x20", "{n} in {t:?}: {v:?}");
            }
        }
        // A broken sub-TLV inside a well-formed SSL TLV: its fixed part still reads.
        let t = tlv(0x20, &[1, 0, 0, 0, 7, 0x21, 0, 9, b'x']);
        assert_eq!(TlvName::Ssl(0x21).lookup(&t), None);
        assert_eq!(TlvName::SslVerify.lookup(&t).as_deref(), Some(&b"7"[..]));
        // The TLVs before a broken one are still found, as nginx walks them in order.
        let mut t = tlv(0x05, b"id");
        t.extend([0x01, 0, 9]);
        assert_eq!(TlvName::Type(5).lookup(&t).as_deref(), Some(&b"id"[..]));
    }
}
