//! `geo [$address] $variable { ... }` (http level): a value chosen by the client's address,
//! as nginx's geo module.
//!
//! Entries: `CIDR value;` (the longest matching network wins), `default value;`, `delete
//! CIDR;`, `include file;` (expanded by the parser), `proxy CIDR;` and `proxy_recursive;`
//! (the address of a request from a trusted proxy is taken from `X-Forwarded-For`), and
//! `ranges;` after which entries read `FIRST-LAST value;` (IPv4; a later range wins where it
//! overlaps an earlier one), `volatile` (not cached for the request). The address is `$remote_addr` (after `real_ip_header`), or the
//! first parameter's value; one that is not an address gets `default`. Values are text (no
//! variables), as nginx.

use std::net::{IpAddr, Ipv4Addr};

use super::super::args::R;
use super::super::error::ConfError;
use super::super::parse::Directive;
use super::super::realip::cidr_contains;
use super::super::settings::Cx;
use super::super::vars::ComplexValue;
use super::Slot;

/// One `geo` block.
#[derive(Debug, Clone, Default)]
pub struct GeoDef {
    /// The address's source; None: the client's address.
    pub source: Option<ComplexValue>,
    /// Networks and their values (CIDR mode), a later duplicate replacing an earlier one.
    pub nets: Vec<(IpAddr, u8, String)>,
    /// `ranges` mode: IPv4 ranges (inclusive) and their values, in file order.
    pub ranges: Option<Vec<(u32, u32, String)>>,
    /// `default` (empty when not given).
    pub default: String,
    /// `proxy` networks.
    pub proxies: Vec<(IpAddr, u8)>,
    /// `proxy_recursive`.
    pub proxy_recursive: bool,
    /// `volatile`: computed at each read, not once per request.
    pub volatile: bool,
}

impl GeoDef {
    /// The value for an address (None: not an address: `default`).
    pub fn lookup(&self, ip: Option<IpAddr>) -> &str {
        let Some(ip) = ip else {
            return &self.default;
        };
        if let Some(ranges) = &self.ranges {
            let v4 = match ip {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(a) => a.to_ipv4_mapped(),
            };
            let hit = v4.and_then(|a| {
                let n = u32::from(a);
                ranges.iter().rev().find(|(lo, hi, _)| *lo <= n && n <= *hi)
            });
            return hit.map_or(&self.default, |(_, _, v)| v);
        }
        self.nets
            .iter()
            .filter(|(net, bits, _)| cidr_contains(*net, *bits, ip))
            .max_by_key(|(_, bits, _)| *bits)
            .map_or(&self.default, |(_, _, v)| v)
    }

    /// The address to look up: `client`, or when it is a trusted `proxy`, the address its
    /// `X-Forwarded-For` names (the last one; with `proxy_recursive` the last one that is not
    /// a trusted proxy), as nginx's `ngx_http_get_forwarded_addr`.
    pub fn address(&self, client: Option<IpAddr>, forwarded: Option<&str>) -> Option<IpAddr> {
        let client = client?;
        let trusted = |ip: IpAddr| self.proxies.iter().any(|(n, b)| cidr_contains(*n, *b, ip));
        if self.proxies.is_empty() || !trusted(client) {
            return Some(client);
        }
        let Some(xff) = forwarded else {
            return Some(client);
        };
        let mut found = client;
        for item in xff.rsplit(',') {
            let Ok(ip) = item.trim().parse::<IpAddr>() else {
                break;
            };
            found = ip;
            if !self.proxy_recursive || !trusted(ip) {
                break;
            }
        }
        Some(found)
    }
}

fn other(d: &Directive, msg: String) -> ConfError {
    ConfError::other(msg, &d.pos)
}

fn cidr(d: &Directive, a: &str) -> Result<(IpAddr, u8), ConfError> {
    super::super::realip::parse_cidr(a)
        .map(|(ip, bits)| (mask(ip, bits), bits))
        .ok_or_else(|| other(d, format!("invalid network \"{a}\"")))
}

/// The network address of `ip/bits` (host bits cleared).
fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

fn range(d: &Directive, a: &str) -> Result<(u32, u32), ConfError> {
    let bad = || other(d, format!("invalid range \"{a}\""));
    let (lo, hi) = a.split_once('-').ok_or_else(bad)?;
    let lo: Ipv4Addr = lo.parse().map_err(|_| bad())?;
    let hi: Ipv4Addr = hi.parse().map_err(|_| bad())?;
    let (lo, hi) = (u32::from(lo), u32::from(hi));
    if lo > hi {
        return Err(other(d, format!("range \"{a}\" is invalid")));
    }
    Ok((lo, hi))
}

/// `geo [$address] $variable { ... }`.
pub(crate) fn geo(cx: &mut Cx, d: &Directive) -> R {
    let (source, out) = match d.args.as_slice() {
        [out] => (None, out),
        [src, out] => (Some(super::super::args::value(d, src)?), out),
        _ => {
            return Err(other(
                d,
                "invalid number of arguments in \"geo\" directive".into(),
            ))
        }
    };
    let name = out
        .strip_prefix('$')
        .filter(|n| !n.is_empty())
        .ok_or_else(|| other(d, format!("invalid variable name \"{out}\"")))?
        .to_string();
    let mut g = GeoDef {
        source,
        ..GeoDef::default()
    };
    let mut default_seen = false;
    for e in d.block.as_deref().unwrap_or_default() {
        match (e.name.as_str(), e.args.as_slice()) {
            ("ranges", []) => {
                if !g.nets.is_empty() || g.ranges.is_some() {
                    return Err(other(e, "\"ranges\" must come before the networks".into()));
                }
                g.ranges = Some(Vec::new());
            }
            ("proxy_recursive", []) => g.proxy_recursive = true,
            ("volatile", []) => g.volatile = true,
            ("proxy", [net]) => g.proxies.push(cidr(e, net)?),
            ("default", [v]) => {
                if default_seen {
                    return Err(other(e, "duplicate default geo range value".into()));
                }
                default_seen = true;
                g.default = v.clone();
            }
            ("delete", [net]) => match &mut g.ranges {
                Some(r) => {
                    let (lo, hi) = range(e, net)?;
                    r.retain(|(a, b, _)| !(*a == lo && *b == hi));
                }
                None => {
                    let (ip, bits) = cidr(e, net)?;
                    g.nets.retain(|(n, b, _)| !(*n == ip && *b == bits));
                }
            },
            (key, [v]) => match &mut g.ranges {
                Some(r) => {
                    let (lo, hi) = range(e, key)?;
                    r.push((lo, hi, v.clone()));
                }
                None => {
                    let (ip, bits) = cidr(e, key)?;
                    g.nets.retain(|(n, b, _)| !(*n == ip && *b == bits));
                    g.nets.push((ip, bits, v.clone()));
                }
            },
            _ => return Err(other(e, "invalid number of the geo parameters".into())),
        }
    }
    let slot = Slot::Geo(cx.user_vars.geos.len());
    super::map::define(cx, d, &name, slot)?;
    cx.user_vars.geos.push(g);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn def() -> GeoDef {
        GeoDef {
            nets: vec![
                ("10.0.0.0".parse().unwrap(), 8, "ten".into()),
                ("10.1.0.0".parse().unwrap(), 16, "ten-one".into()),
                ("2001:db8::".parse().unwrap(), 32, "doc6".into()),
            ],
            default: "world".into(),
            proxies: vec![("192.0.2.0".parse().unwrap(), 24)],
            ..GeoDef::default()
        }
    }

    #[test]
    fn longest_network_wins_else_default() {
        let g = def();
        assert_eq!(g.lookup(ip("10.2.3.4")), "ten");
        assert_eq!(g.lookup(ip("10.1.3.4")), "ten-one");
        assert_eq!(g.lookup(ip("2001:db8::1")), "doc6");
        assert_eq!(g.lookup(ip("::ffff:10.1.0.1")), "ten-one");
        assert_eq!(g.lookup(ip("192.168.1.1")), "world");
        assert_eq!(g.lookup(None), "world");
    }

    #[test]
    fn ranges_later_ones_win() {
        let g = GeoDef {
            ranges: Some(vec![
                (
                    u32::from(Ipv4Addr::new(10, 0, 0, 0)),
                    u32::from(Ipv4Addr::new(10, 0, 0, 255)),
                    "a".into(),
                ),
                (
                    u32::from(Ipv4Addr::new(10, 0, 0, 10)),
                    u32::from(Ipv4Addr::new(10, 0, 0, 20)),
                    "b".into(),
                ),
            ]),
            default: "d".into(),
            ..GeoDef::default()
        };
        assert_eq!(g.lookup(ip("10.0.0.5")), "a");
        assert_eq!(g.lookup(ip("10.0.0.15")), "b");
        assert_eq!(g.lookup(ip("10.0.0.20")), "b");
        assert_eq!(g.lookup(ip("10.0.1.0")), "d");
        assert_eq!(g.lookup(ip("::1")), "d");
    }

    #[test]
    fn trusted_proxies_defer_to_x_forwarded_for() {
        let mut g = def();
        let c = ip("192.0.2.7");
        assert_eq!(
            g.address(ip("10.9.9.9"), Some("10.1.1.1")),
            ip("10.9.9.9"),
            "not a proxy"
        );
        assert_eq!(g.address(c, None), c, "no header");
        assert_eq!(
            g.address(c, Some("10.1.1.1, 192.0.2.8")),
            ip("192.0.2.8"),
            "last one"
        );
        g.proxy_recursive = true;
        assert_eq!(
            g.address(c, Some("10.1.1.1, 192.0.2.8")),
            ip("10.1.1.1"),
            "recursive"
        );
        assert_eq!(g.address(c, Some("junk, 192.0.2.8")), ip("192.0.2.8"));
    }
}
