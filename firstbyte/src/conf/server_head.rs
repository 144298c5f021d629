//! What only a `server {}` block says about itself: `listen` and `server_name`.
//!
//! `listen` text becomes a [`Listen`] (address, port, parameters) and `server_name` text
//! becomes [`ServerName`]s of nginx's four kinds; both are pure parsing. Which server answers
//! a connection is `vhosts`' business; this module only checks what nginx checks at load.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use super::args::R;
use super::error::ConfError;
use super::model::{Listen, Pos, ServerName};
use super::parse::Directive;
use super::settings::Cx;

/// `listen` and `server_name` values of one server, as written.
#[derive(Debug, Default)]
pub(crate) struct ServerHead {
    pub listen: Vec<Listen>,
    pub names: Option<Vec<ServerName>>,
    /// The regex names with named groups, and their groups' variable slots.
    pub name_captures: Vec<super::model::NameCaptures>,
    /// The first name as nginx's `$server_name` gives it: as written (lower-cased unless a
    /// regex).
    pub first_name: Option<String>,
}

/// nginx's default `listen` port when an address has none.
const DEFAULT_PORT: u16 = 80;

/// `ADDR[:PORT]`, `PORT`, `[V6][:PORT]`, `*:PORT`, `localhost[:PORT]` → an address, or the
/// reason nginx gives (`invalid port`, `host not found`, ...).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, &'static str> {
    fn port(p: &str) -> Result<u16, &'static str> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err("invalid port");
        }
        match p.parse::<u32>() {
            Ok(n @ 1..=65535) => Ok(n as u16),
            _ => Err("invalid port"),
        }
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("invalid host")?;
        let ip: Ipv6Addr = host.parse().map_err(|_| "invalid IPv6 address")?;
        let p = match after {
            "" => DEFAULT_PORT,
            _ => port(after.strip_prefix(':').ok_or("invalid host")?)?,
        };
        return Ok(SocketAddr::new(IpAddr::V6(ip), p));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port(s)?));
    }
    let (host, p) = match s.rsplit_once(':') {
        Some((h, p)) => (h, port(p)?),
        None => (s, DEFAULT_PORT),
    };
    let ip = match host {
        "*" => Ipv4Addr::UNSPECIFIED,
        // firstbyte resolves no names at load; localhost is the one name everyone means the same by.
        "localhost" => Ipv4Addr::LOCALHOST,
        "" => return Err("no host"),
        h => h.parse().map_err(|_| "host not found")?,
    };
    Ok(SocketAddr::new(IpAddr::V4(ip), p))
}

/// `listen`'s address, with nginx's port ranges (1.27.3: `127.0.0.1:8000-8010`, `[::1]:80-81`,
/// `8000-8001`): one address per port, in order.
pub(crate) fn parse_listen_addrs(s: &str) -> Result<Vec<SocketAddr>, &'static str> {
    let port_start = if let Some(i) = s.rfind(']') {
        s[i..].find(':').map(|j| i + j + 1)
    } else if s.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        Some(0)
    } else {
        s.rfind(':').map(|i| i + 1)
    };
    if let Some((lo, hi)) = port_start.and_then(|ps| Some((ps, s[ps..].split_once('-')?))) {
        let (ps, (lo, hi)) = (lo, hi);
        let last = match hi.parse::<u32>() {
            Ok(n @ 1..=65535) if hi.bytes().all(|b| b.is_ascii_digit()) => n as u16,
            _ => return Err("invalid port"),
        };
        let first = parse_addr(&format!("{}{lo}", &s[..ps]))?;
        if first.port() > last {
            return Err("invalid port range");
        }
        return Ok((first.port()..=last)
            .map(|p| SocketAddr::new(first.ip(), p))
            .collect());
    }
    Ok(vec![parse_addr(s)?])
}

/// The `addr` of a `listen unix:` (which has no IP address): never bound.
const UNIX_PLACEHOLDER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// `unix:PATH`'s path, as nginx's `ngx_parse_unix_domain_url` checks it: not empty, and short
/// enough for `sun_path` with its terminating zero.
pub(crate) fn parse_unix_path(path: &str) -> Result<&str, &'static str> {
    const SUN_PATH: usize = 108;
    if path.is_empty() {
        return Err("no path in the unix domain socket");
    }
    if path.len() + 1 > SUN_PATH {
        return Err("too long path in the unix domain socket");
    }
    Ok(path)
}

/// Parameters of `listen` that nginx has and firstbyte does not yet.
const UNSUPPORTED_PARAMS: &[&str] = &["setfib", "accept_filter", "multipath"];

/// `so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt]` (times in seconds, or with nginx's
/// units).
fn so_keepalive(v: &str) -> Option<crate::net::KeepAlive> {
    let mut k = crate::net::KeepAlive {
        on: true,
        idle: None,
        interval: None,
        count: None,
    };
    match v {
        "on" => return Some(k),
        "off" => {
            k.on = false;
            return Some(k);
        }
        _ => {}
    }
    let parts: Vec<&str> = v.split(':').collect();
    let [idle, interval, count] = parts.as_slice() else {
        return None;
    };
    let secs = |s: &str| -> Option<Option<u32>> {
        if s.is_empty() {
            return Some(None);
        }
        let t = super::units::time(s)?.as_secs();
        u32::try_from(t).ok().filter(|n| *n > 0).map(Some)
    };
    k.idle = secs(idle)?;
    k.interval = secs(interval)?;
    k.count = if count.is_empty() {
        None
    } else {
        Some(count.parse().ok().filter(|n| *n > 0)?)
    };
    if k.idle.is_none() && k.interval.is_none() && k.count.is_none() {
        return None;
    }
    Some(k)
}

/// `listen ADDR[:PORT] [ssl] [http2] [default_server] [reuseport] [deferred] [bind] [backlog=N]
/// [fastopen=N] [sndbuf=SIZE] [rcvbuf=SIZE] [so_keepalive=...] [ipv6only=on|off]`.
pub(crate) fn listen(h: &mut ServerHead, d: &Directive, cx: &mut Cx) -> R {
    let text = d.args.first().map(String::as_str).unwrap_or("");
    let listen_error = |reason| ConfError::Listen {
        reason,
        value: text.to_string(),
        pos: d.pos.clone(),
    };
    let (addrs, unix) = match text.strip_prefix("unix:") {
        Some(path) => {
            let path = parse_unix_path(path).map_err(listen_error)?;
            (vec![UNIX_PLACEHOLDER], Some(Arc::from(path)))
        }
        None => (parse_listen_addrs(text).map_err(listen_error)?, None),
    };
    let addr = addrs[0];
    let mut l = Listen::new(addr, d.pos.clone());
    l.unix = unix;
    let other = |msg: String| ConfError::other(msg, &d.pos);
    for p in &d.args[1..] {
        let (key, val) = match p.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (p.as_str(), None),
        };
        match (key, val) {
            ("ssl", None) => l.ssl = true,
            ("http2", None) => l.http2 = true,
            ("default_server" | "default", None) => l.default_server = true,
            ("reuseport", None) => l.reuseport = true,
            ("deferred", None) => l.deferred = true,
            ("quic", None) => l.quic = true,
            ("proxy_protocol", None) => l.proxy_protocol = true,
            ("bind", None) => l.bind = true,
            ("sndbuf" | "rcvbuf", Some(v)) => {
                let n = super::units::size(v)
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| other(format!("invalid {key} \"{v}\"")))?;
                if key == "sndbuf" {
                    l.tuning.sndbuf = Some(n);
                } else {
                    l.tuning.rcvbuf = Some(n);
                }
            }
            ("so_keepalive", Some(v)) => {
                l.tuning.keepalive = Some(
                    so_keepalive(v)
                        .ok_or_else(|| other(format!("invalid so_keepalive value: \"{p}\"")))?,
                );
            }
            ("backlog", Some(v)) => {
                l.backlog = v
                    .parse::<i32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| other(format!("invalid backlog \"{p}\"")))?;
            }
            ("fastopen", Some(v)) => {
                l.fastopen = Some(
                    v.parse()
                        .map_err(|_| other(format!("invalid fastopen \"{p}\"")))?,
                );
            }
            ("ipv6only", Some(v)) => {
                l.ipv6only = super::units::flag(v)
                    .ok_or_else(|| other(format!("invalid ipv6only flags \"{v}\"")))?;
                if addr.is_ipv4() || l.unix.is_some() {
                    cx.warn(
                        format!(
                            "ipv6only is not supported on addr \"{}\", ignored",
                            l.shown()
                        ),
                        &d.pos,
                    );
                }
            }
            (k, _) if UNSUPPORTED_PARAMS.contains(&k) => {
                return Err(ConfError::UnsupportedParam {
                    what: format!("the \"{k}\" parameter of \"listen\""),
                    pos: d.pos.clone(),
                });
            }
            _ => {
                return Err(ConfError::InvalidParam {
                    param: p.clone(),
                    pos: d.pos.clone(),
                })
            }
        }
    }
    if l.quic && l.unix.is_some() {
        return Err(other(
            "\"quic\" parameter is incompatible with a UNIX-domain socket".into(),
        ));
    }
    if l.quic {
        // nginx's checks, in its order: what only a TCP socket or a TLS-over-TCP listener has.
        let clash = [
            ("fastopen", l.fastopen.is_some()),
            ("backlog", l.backlog != super::model::DEFAULT_BACKLOG),
            ("deferred", l.deferred),
            ("ssl", l.ssl),
            ("http2", l.http2),
            ("proxy_protocol", l.proxy_protocol),
            ("so_keepalive", l.tuning.keepalive.is_some()),
        ];
        if let Some((name, _)) = clash.iter().find(|(_, set)| *set) {
            return Err(other(format!(
                "\"{name}\" parameter is incompatible with \"quic\""
            )));
        }
    }
    for a in addrs {
        if h.listen
            .iter()
            .any(|x| x.addr == a && x.unix == l.unix && x.quic == l.quic)
        {
            return Err(other(format!("a duplicate listen {}", l.shown())));
        }
        let mut one = l.clone();
        one.addr = a;
        h.listen.push(one);
    }
    Ok(())
}

/// The listen a server gets when it has none: `*:80` as root, `*:8000` otherwise (nginx's).
pub(crate) fn default_listen(is_root: bool, pos: &Pos) -> Listen {
    let port = if is_root { 80 } else { 8000 };
    Listen::new(
        SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        pos.clone(),
    )
}

/// Compiles a configuration regex (`caseless`: `~*` locations and server names).
pub(crate) fn regex(re: &str, caseless: bool, pos: &Pos) -> Result<regex::Regex, ConfError> {
    regex::RegexBuilder::new(re)
        .case_insensitive(caseless)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            // The syntax error's last line is its reason ("error: unclosed group").
            let reason = text
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .unwrap_or(text.lines().last().unwrap_or(""))
                .to_string();
            ConfError::Regex {
                regex: re.to_string(),
                reason,
                pos: pos.clone(),
            }
        })
}

/// `server_name NAME ...` (several directives add up).
pub(crate) fn server_name(h: &mut ServerHead, d: &Directive, cx: &mut Cx) -> R {
    let names = h.names.get_or_insert_with(Vec::new);
    if h.first_name.is_none() {
        h.first_name = d.args.first().map(|a| {
            if a.starts_with('~') {
                a.clone()
            } else {
                // `.example.com` is `example.com` (nginx stores the name without the dot).
                a.strip_prefix('.').unwrap_or(a).to_ascii_lowercase()
            }
        });
    }
    for a in &d.args {
        if let Some(re) = a.strip_prefix('~') {
            // nginx compiles server name regexes caseless; PCRE's `\Q...\E` quoting is
            // rewritten as escaped text first, as for locations.
            let re = super::rewrite::regex::unquote(re);
            let re = regex(&re, true, &d.pos)?;
            // Named groups (`(?<name>...)`, `(?P<name>...)`) become variables, set from the
            // host the regex matched.
            let mut slots = Vec::new();
            for (group, name) in re.capture_names().enumerate() {
                let Some(name) = name else { continue };
                let slot = cx.user_vars.set_slot(name).ok_or_else(|| {
                    ConfError::other(format!("the duplicate \"{name}\" variable"), &d.pos)
                })?;
                slots.push((group, slot));
            }
            if !slots.is_empty() {
                h.name_captures.push(super::model::NameCaptures {
                    regex: re.clone(),
                    slots,
                });
            }
            names.push(ServerName::Regex(re));
            continue;
        }
        let n = a.to_ascii_lowercase();
        let bad = || ConfError::other(format!("invalid server name or wildcard \"{a}\""), &d.pos);
        if n.contains('$') {
            return Err(ConfError::UnsupportedParam {
                what: format!("the variable in server name \"{a}\""),
                pos: d.pos.clone(),
            });
        }
        if let Some(rest) = n.strip_prefix("*.") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            names.push(ServerName::LeadingWildcard(format!(".{rest}")));
        } else if let Some(rest) = n.strip_prefix('.') {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            names.push(ServerName::Exact(rest.to_string()));
            names.push(ServerName::LeadingWildcard(n.clone()));
        } else if let Some(rest) = n.strip_suffix(".*") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad());
            }
            names.push(ServerName::TrailingWildcard(format!("{rest}.")));
        } else if n.contains('*') {
            return Err(bad());
        } else {
            names.push(ServerName::Exact(n));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::conf::testutil::cx;

    fn dir(name: &str, args: &[&str]) -> Directive {
        crate::conf::testutil::directive(name, args, 2)
    }

    #[test]
    fn addresses() {
        let a = |s: &str| parse_addr(s).map(|a| a.to_string());
        assert_eq!(a("80"), Ok("0.0.0.0:80".into()));
        assert_eq!(a("*:8080"), Ok("0.0.0.0:8080".into()));
        assert_eq!(a("127.0.0.1"), Ok("127.0.0.1:80".into()));
        assert_eq!(a("10.0.0.1:443"), Ok("10.0.0.1:443".into()));
        assert_eq!(a("[::]:443"), Ok("[::]:443".into()));
        assert_eq!(a("[::1]"), Ok("[::1]:80".into()));
        assert_eq!(a("localhost:8443"), Ok("127.0.0.1:8443".into()));
        assert_eq!(a("x:99999"), Err("invalid port"));
        // Port ranges (nginx 1.27.3).
        let r = |s: &str| {
            parse_listen_addrs(s).map(|v| v.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            r("127.0.0.1:8000-8002").unwrap(),
            ["127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"]
        );
        assert_eq!(r("[::1]:80-81").unwrap(), ["[::1]:80", "[::1]:81"]);
        assert_eq!(r("8000-8000").unwrap(), ["0.0.0.0:8000"]);
        assert_eq!(r("127.0.0.1:8001-8000"), Err("invalid port range"));
        assert_eq!(r("127.0.0.1:8000-70000"), Err("invalid port"));
        assert_eq!(r("127.0.0.1:-80"), Err("invalid port"));
        assert_eq!(r("127.0.0.1:80-"), Err("invalid port"));
        assert_eq!(r("127.0.0.1:8080").unwrap(), ["127.0.0.1:8080"]);
        assert_eq!(a("99999"), Err("invalid port"));
        assert_eq!(a("0"), Err("invalid port"));
        assert_eq!(a("1.2.3.4:"), Err("invalid port"));
        assert_eq!(a("example.com:80"), Err("host not found"));
        assert_eq!(a("[::1:80"), Err("invalid host"));
        assert_eq!(a("[zz]:80"), Err("invalid IPv6 address"));
    }

    #[test]
    fn socket_tuning_parameters() {
        let mut h = ServerHead::default();
        let mut c = cx();
        let d = dir(
            "listen",
            &[
                "8080",
                "bind",
                "sndbuf=64k",
                "rcvbuf=1m",
                "so_keepalive=30m::10",
            ],
        );
        listen(&mut h, &d, &mut c).unwrap();
        let l = &h.listen[0];
        assert!(l.bind);
        assert_eq!(l.tuning.sndbuf, Some(65536));
        assert_eq!(l.tuning.rcvbuf, Some(1 << 20));
        assert_eq!(
            l.tuning.keepalive,
            Some(crate::net::KeepAlive {
                on: true,
                idle: Some(1800),
                interval: None,
                count: Some(10)
            })
        );
        assert_eq!(so_keepalive("off").map(|k| k.on), Some(false));
        for bad in ["", "::", "x", "1:2", "0::", "::0", "1:2:3:4"] {
            assert_eq!(so_keepalive(bad), None, "{bad:?}");
        }
        let mut h = ServerHead::default();
        let e = listen(&mut h, &dir("listen", &["80", "sndbuf=0"]), &mut c).unwrap_err();
        assert!(e.to_string().contains("invalid sndbuf \"0\""), "{e}");
        let e = listen(
            &mut h,
            &dir("listen", &["443", "quic", "so_keepalive=on"]),
            &mut c,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"so_keepalive\" parameter is incompatible with \"quic\""),
            "{e}"
        );
    }

    #[test]
    fn listen_parameters() {
        let mut h = ServerHead::default();
        let mut c = cx();
        let d = dir(
            "listen",
            &[
                "[::]:443",
                "ssl",
                "http2",
                "default",
                "reuseport",
                "deferred",
                "backlog=100",
                "fastopen=256",
                "ipv6only=off",
            ],
        );
        listen(&mut h, &d, &mut c).unwrap();
        let l = &h.listen[0];
        assert!(l.ssl && l.http2 && l.default_server && l.reuseport && !l.ipv6only);
        assert!(l.deferred);
        assert_eq!((l.backlog, l.fastopen), (100, Some(256)));
        listen(&mut h, &dir("listen", &["80"]), &mut c).unwrap();
        assert_eq!((h.listen[1].backlog, h.listen[1].ipv6only), (511, true));
        assert!(!h.listen[1].deferred);
        // The same port over QUIC is another socket (UDP); twice over QUIC is a duplicate.
        listen(
            &mut h,
            &dir("listen", &["[::]:443", "quic", "reuseport"]),
            &mut c,
        )
        .unwrap();
        assert!(h.listen[2].quic && h.listen[2].reuseport && !h.listen[0].quic);
        let err = listen(&mut h, &dir("listen", &["[::]:443", "quic"]), &mut c).unwrap_err();
        assert_eq!(err.to_string(), "a duplicate listen [::]:443 in /t.conf:2");
        let e = |args: &[&str]| {
            listen(&mut ServerHead::default(), &dir("listen", args), &mut cx())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&["x:99999"]),
            "invalid port in \"x:99999\" of the \"listen\" directive in /t.conf:2"
        );
        assert_eq!(e(&["80", "foo"]), "invalid parameter \"foo\" in /t.conf:2");
        assert_eq!(
            e(&["80", "backlog=x"]),
            "invalid backlog \"backlog=x\" in /t.conf:2"
        );
        for (p, msg) in [
            (
                "ssl",
                "\"ssl\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
            (
                "http2",
                "\"http2\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
            (
                "deferred",
                "\"deferred\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
            (
                "backlog=10",
                "\"backlog\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
            (
                "fastopen=5",
                "\"fastopen\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
            (
                "proxy_protocol",
                "\"proxy_protocol\" parameter is incompatible with \"quic\" in /t.conf:2",
            ),
        ] {
            assert_eq!(e(&["443", "quic", p]), msg, "{p}");
        }
        let err = listen(&mut h, &dir("listen", &["0.0.0.0:80"]), &mut c).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a duplicate listen 0.0.0.0:80 in /t.conf:2"
        );
        listen(&mut h, &dir("listen", &["8080", "ipv6only=on"]), &mut c).unwrap();
        assert_eq!(c.warnings.len(), 1, "ipv6only on IPv4 warns");
    }

    #[test]
    fn server_name_kinds() {
        let mut h = ServerHead::default();
        let d = dir(
            "server_name",
            &[
                "Example.COM",
                "*.a.org",
                ".b.net",
                "www.c.*",
                "~^w\\d+\\.d\\.io$",
                "",
                "_",
            ],
        );
        server_name(&mut h, &d, &mut cx()).unwrap();
        let n = h.names.unwrap();
        assert!(matches!(&n[0], ServerName::Exact(s) if s == "example.com"));
        assert!(matches!(&n[1], ServerName::LeadingWildcard(s) if s == ".a.org"));
        assert!(matches!(&n[2], ServerName::Exact(s) if s == "b.net"));
        assert!(matches!(&n[3], ServerName::LeadingWildcard(s) if s == ".b.net"));
        assert!(matches!(&n[4], ServerName::TrailingWildcard(s) if s == "www.c."));
        assert!(matches!(&n[5], ServerName::Regex(r) if r.is_match("W12.D.io")));
        let d = dir("server_name", &["~^(?P<name>[a-z]+)\\Q.example.com\\E$"]);
        let mut h = ServerHead::default();
        server_name(&mut h, &d, &mut cx()).unwrap();
        let re = match &h.names.as_ref().unwrap()[0] {
            ServerName::Regex(r) => r.clone(),
            other => panic!("{other:?}"),
        };
        assert!(re.is_match("www.example.com"));
        assert!(!re.is_match("wwwXexampleYcom"), "quoted dots are literal");
        assert!(matches!(&n[6], ServerName::Exact(s) if s.is_empty()));
        assert!(matches!(&n[7], ServerName::Exact(s) if s == "_"));
        for bad in ["a*.b.com", "*.", "*.x.*"] {
            let e = server_name(
                &mut ServerHead::default(),
                &dir("server_name", &[bad]),
                &mut cx(),
            );
            assert_eq!(
                e.unwrap_err().to_string(),
                format!("invalid server name or wildcard \"{bad}\" in /t.conf:2")
            );
        }
        let e = server_name(
            &mut ServerHead::default(),
            &dir("server_name", &["~("]),
            &mut cx(),
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "invalid regex \"(\": unclosed group in /t.conf:2"
        );
    }
}
