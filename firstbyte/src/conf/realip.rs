//! nginx's realip module: `set_real_ip_from`, `real_ip_header`, `real_ip_recursive`, and the
//! decision itself ([`RealIp::resolve`]): which address a request from a trusted proxy
//! really comes from. Pure code: addresses and header values in, an address out.

use std::net::{IpAddr, SocketAddr};

use super::args::{arg0, flag, once, param, R};
use super::parse::Directive;
use super::settings::{Cx, LocSettings};

/// A trusted source: a network, or any unix-domain connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trusted {
    /// `ADDR` or `ADDR/BITS`.
    Cidr(IpAddr, u8),
    /// `unix:`.
    Unix,
}

/// Where the real address is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealIpHeader {
    /// `X-Real-IP` (nginx's default).
    XRealIp,
    /// `X-Forwarded-For`: every such header, walked right to left.
    XForwardedFor,
    /// The connection's PROXY protocol header.
    ProxyProtocol,
    /// Another header (lower-cased name).
    Other(String),
}

/// A location's real-IP settings (present when `set_real_ip_from` is).
#[derive(Debug, Clone)]
pub struct RealIp {
    /// `set_real_ip_from`s.
    pub from: Vec<Trusted>,
    /// `real_ip_header`.
    pub header: RealIpHeader,
    /// `real_ip_recursive`.
    pub recursive: bool,
}

/// The real-IP directives of one level, as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct RealIpSettings {
    pub from: Option<Vec<Trusted>>,
    pub header: Option<RealIpHeader>,
    pub recursive: Option<bool>,
}

impl RealIpSettings {
    pub fn inherit(&mut self, p: &RealIpSettings) {
        if self.from.is_none() {
            self.from.clone_from(&p.from);
        }
        if self.header.is_none() {
            self.header.clone_from(&p.header);
        }
        if self.recursive.is_none() {
            self.recursive = p.recursive;
        }
    }

    pub fn finish(&self) -> Option<RealIp> {
        let from = self.from.as_ref().filter(|f| !f.is_empty())?;
        Some(RealIp {
            from: from.clone(),
            header: self.header.clone().unwrap_or(RealIpHeader::XRealIp),
            recursive: self.recursive.unwrap_or(false),
        })
    }
}

/// `set_real_ip_from ADDR|CIDR|unix:|HOSTNAME`. A host name is resolved when the
/// configuration loads, as nginx: each of its addresses is trusted (`/32` or `/128`).
pub(crate) fn set_real_ip_from(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let a = arg0(d);
    let from = s.guard.realip.from.get_or_insert_with(Vec::new);
    if a == "unix:" {
        from.push(Trusted::Unix);
    } else if let Some((ip, bits)) = parse_cidr(a) {
        let masked = super::handlers::mask(ip, bits);
        if masked != ip {
            cx.warn(format!("low address bits of {a} are meaningless"), &d.pos);
        }
        from.push(Trusted::Cidr(masked, bits));
    } else if is_host_name(a) {
        let addrs = super::proxy_settings::resolve_host(a, 0).map_err(|_| {
            super::error::ConfError::other(
                format!("host not found in set_real_ip_from \"{a}\""),
                &d.pos,
            )
        })?;
        for sa in addrs {
            let bits = if sa.is_ipv4() { 32 } else { 128 };
            let t = Trusted::Cidr(sa.ip(), bits);
            if !from.contains(&t) {
                from.push(t);
            }
        }
    } else {
        return Err(param(d, a));
    }
    Ok(())
}

/// A DNS name's characters: letters, digits, `-` and `.`, with a letter somewhere (an
/// address-like value that failed to parse is a bad parameter, not a name to look up).
fn is_host_name(a: &str) -> bool {
    !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && a.bytes().any(|b| b.is_ascii_alphabetic())
}

pub(crate) fn parse_cidr(a: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = match a.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (a, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits = match bits {
        None => max,
        Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => {
            b.parse::<u8>().ok().filter(|n| *n <= max)?
        }
        Some(_) => return None,
    };
    Some((ip, bits))
}

/// `real_ip_header X-Real-IP|X-Forwarded-For|proxy_protocol|NAME`.
pub(crate) fn real_ip_header(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.realip.header, d)?;
    let a = arg0(d);
    let h = if a.eq_ignore_ascii_case("X-Real-IP") {
        RealIpHeader::XRealIp
    } else if a.eq_ignore_ascii_case("X-Forwarded-For") {
        RealIpHeader::XForwardedFor
    } else if a == "proxy_protocol" {
        RealIpHeader::ProxyProtocol
    } else if http::HeaderName::from_bytes(a.as_bytes()).is_ok() {
        RealIpHeader::Other(a.to_ascii_lowercase())
    } else {
        return Err(param(d, a));
    };
    s.guard.realip.header = Some(h);
    Ok(())
}

/// `real_ip_recursive on|off`.
pub(crate) fn real_ip_recursive(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.realip.recursive, d)?;
    s.guard.realip.recursive = Some(flag(d)?);
    Ok(())
}

/// Whether `ip` (None: a unix-domain peer) is one of `from`.
pub fn trusted(from: &[Trusted], ip: Option<IpAddr>) -> bool {
    from.iter().any(|t| match (t, ip) {
        (Trusted::Unix, None) => true,
        (Trusted::Cidr(net, bits), Some(ip)) => cidr_contains(*net, *bits, ip),
        _ => false,
    })
}

/// Whether `ip` is in `net/bits` (an IPv4-mapped IPv6 address counts as IPv4).
pub fn cidr_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    let ip = match (net, ip) {
        (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => return false,
        },
        _ => ip,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(bits.min(32)))
                .unwrap_or(0);
            (u32::from(n) & mask) == (u32::from(a) & mask)
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(bits.min(128)))
                .unwrap_or(0);
            (u128::from(n) & mask) == (u128::from(a) & mask)
        }
        _ => false,
    }
}

/// One address of a forwarded list, as `ngx_parse_addr_port`: `ADDR`, `ADDR:PORT`,
/// `[V6]`, `[V6]:PORT`. The port is 0 when none is given.
pub fn parse_addr_port(s: &str) -> Option<SocketAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let ip: std::net::Ipv6Addr = v6.parse().ok()?;
        let port = match after {
            "" => 0,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        return Some(SocketAddr::new(IpAddr::V6(ip), port));
    }
    let (ip, port) = s.rsplit_once(':')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(SocketAddr::new(IpAddr::V4(ip), port.parse().ok()?))
}

impl RealIp {
    /// The request's real address, as nginx's realip handler and
    /// `ngx_http_get_forwarded_addr`: only when `peer` (None: a unix-domain client) is
    /// trusted; the list `value` (every X-Forwarded-For joined with commas) is walked from
    /// the right, each address replacing the current one while the current one is trusted —
    /// once, or (`real_ip_recursive on`) until an untrusted one is reached. `proxy` is the
    /// connection's PROXY protocol source, for `real_ip_header proxy_protocol`.
    /// None: the address stays.
    pub fn resolve(
        &self,
        peer: Option<IpAddr>,
        value: Option<&str>,
        proxy: Option<SocketAddr>,
    ) -> Option<SocketAddr> {
        if self.header == RealIpHeader::ProxyProtocol {
            let p = proxy?;
            return trusted(&self.from, peer).then_some(p);
        }
        let value = value?;
        let mut current = peer;
        let mut found = None;
        let mut rest = value;
        loop {
            if !trusted(&self.from, current) {
                break;
            }
            let trimmed = rest.trim_end_matches([' ', ',']);
            let start = trimmed.rfind([' ', ',']).map_or(0, |i| i + 1);
            let token = &trimmed[start..];
            let Some(addr) = parse_addr_port(token) else {
                break;
            };
            found = Some(addr);
            current = Some(addr.ip());
            rest = &trimmed[..start];
            if !self.recursive || rest.is_empty() {
                break;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn conf(from: &[&str], recursive: bool) -> RealIp {
        RealIp {
            from: from
                .iter()
                .map(|f| {
                    if *f == "unix:" {
                        Trusted::Unix
                    } else {
                        let (a, b) = parse_cidr(f).unwrap();
                        Trusted::Cidr(a, b)
                    }
                })
                .collect(),
            header: RealIpHeader::XForwardedFor,
            recursive,
        }
    }

    fn got(r: &RealIp, peer: &str, v: &str) -> Option<String> {
        r.resolve(ip(peer), Some(v), None)
            .map(|a| a.ip().to_string())
    }

    #[test]
    fn only_a_trusted_peer_is_replaced() {
        let r = conf(&["127.0.0.1"], false);
        assert_eq!(got(&r, "127.0.0.1", "192.0.2.1"), Some("192.0.2.1".into()));
        assert_eq!(
            got(&r, "::ffff:127.0.0.1", "192.0.2.1"),
            Some("192.0.2.1".into())
        );
        assert_eq!(got(&r, "10.0.0.1", "192.0.2.1"), None);
        assert_eq!(r.resolve(None, Some("192.0.2.1"), None), None);
        let u = conf(&["unix:"], false);
        assert_eq!(
            u.resolve(None, Some("192.0.2.1"), None).map(|a| a.ip()),
            ip("192.0.2.1")
        );
        assert_eq!(got(&u, "127.0.0.1", "192.0.2.1"), None);
    }

    #[test]
    fn right_to_left_walk_with_and_without_recursion() {
        let v = "203.0.113.9, 10.0.0.2, 10.0.0.3,  ";
        let once = conf(&["127.0.0.1", "10.0.0.0/8"], false);
        assert_eq!(got(&once, "127.0.0.1", v), Some("10.0.0.3".into()));
        let rec = conf(&["127.0.0.1", "10.0.0.0/8"], true);
        assert_eq!(got(&rec, "127.0.0.1", v), Some("203.0.113.9".into()));
        // All trusted: the leftmost is taken.
        assert_eq!(
            got(&rec, "127.0.0.1", "10.1.1.1,10.2.2.2"),
            Some("10.1.1.1".into())
        );
        // A client-supplied spoof left of an untrusted hop is not believed.
        assert_eq!(
            got(&rec, "127.0.0.1", "1.1.1.1, 198.51.100.7, 10.0.0.2"),
            Some("198.51.100.7".into())
        );
        // Ports and brackets, as ngx_parse_addr_port.
        assert_eq!(
            got(&once, "127.0.0.1", "192.0.2.1:8080"),
            Some("192.0.2.1".into())
        );
        assert_eq!(
            got(&once, "127.0.0.1", "[2001:db8::1]:443"),
            Some("2001:db8::1".into())
        );
        assert_eq!(
            got(&once, "127.0.0.1", "2001:db8::1"),
            Some("2001:db8::1".into())
        );
    }

    #[test]
    fn hostile_values_change_nothing_or_stop_the_walk() {
        let rec = conf(&["127.0.0.1", "10.0.0.0/8"], true);
        for bad in [
            "",
            " ",
            ",,,",
            "unknown",
            "999.1.1.1",
            "1.2.3.4:99999",
            "[::1",
            "1.2.3.4:",
            "a,b",
        ] {
            assert_eq!(got(&rec, "127.0.0.1", bad), None, "{bad:?}");
        }
        // A bad entry stops the walk at the last good one.
        assert_eq!(
            got(&rec, "127.0.0.1", "1.1.1.1, junk, 10.0.0.2"),
            Some("10.0.0.2".into())
        );
        let long = "10.0.0.1,".repeat(10_000);
        assert_eq!(got(&rec, "127.0.0.1", &long), Some("10.0.0.1".into()));
    }

    #[test]
    fn proxy_protocol_source() {
        let mut r = conf(&["127.0.0.1"], false);
        r.header = RealIpHeader::ProxyProtocol;
        let src: SocketAddr = "192.0.2.5:1234".parse().unwrap();
        assert_eq!(r.resolve(ip("127.0.0.1"), None, Some(src)), Some(src));
        assert_eq!(r.resolve(ip("10.9.9.9"), None, Some(src)), None);
        assert_eq!(r.resolve(ip("127.0.0.1"), None, None), None);
    }

    #[test]
    fn directives_parse() {
        use crate::conf::testutil::{cx, directive};
        let mut s = LocSettings::default();
        let mut c = cx();
        set_real_ip_from(
            &mut s,
            &directive("set_real_ip_from", &["10.1.2.3/8"], 3),
            &mut c,
        )
        .unwrap();
        set_real_ip_from(
            &mut s,
            &directive("set_real_ip_from", &["unix:"], 4),
            &mut c,
        )
        .unwrap();
        assert_eq!(
            s.guard.realip.from,
            Some(vec![
                Trusted::Cidr(ip("10.0.0.0").unwrap(), 8),
                Trusted::Unix
            ])
        );
        assert_eq!(c.warnings.len(), 1);
        for bad in ["10.0.0.0/33", "10.0.0.0/", "unix:/x", "1.2.3"] {
            let e = set_real_ip_from(&mut s, &directive("set_real_ip_from", &[bad], 5), &mut c)
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid parameter \"{bad}\" in /t.conf:5")
            );
        }
        let mut named = LocSettings::default();
        set_real_ip_from(
            &mut named,
            &directive("set_real_ip_from", &["localhost"], 5),
            &mut c,
        )
        .unwrap();
        let trusted = named.guard.realip.from.unwrap();
        assert!(
            trusted.contains(&Trusted::Cidr(ip("127.0.0.1").unwrap(), 32)),
            "localhost resolves to 127.0.0.1 at load: {trusted:?}"
        );
        real_ip_header(
            &mut s,
            &directive("real_ip_header", &["X-Forwarded-For"], 6),
            &mut c,
        )
        .unwrap();
        assert_eq!(s.guard.realip.header, Some(RealIpHeader::XForwardedFor));
        let mut s2 = LocSettings::default();
        real_ip_header(
            &mut s2,
            &directive("real_ip_header", &["CF-Connecting-IP"], 6),
            &mut c,
        )
        .unwrap();
        assert_eq!(
            s2.guard.realip.header,
            Some(RealIpHeader::Other("cf-connecting-ip".into()))
        );
        assert!(real_ip_header(&mut s2, &directive("real_ip_header", &["X"], 7), &mut c).is_err());
        let mut s3 = LocSettings::default();
        assert!(real_ip_header(
            &mut s3,
            &directive("real_ip_header", &["bad header"], 7),
            &mut c
        )
        .is_err());
    }
}
