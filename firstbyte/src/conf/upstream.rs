//! `upstream NAME { ... }` (nginx's ngx_http_upstream module and its balancing modules):
//! `server` lines (addresses resolved at load, or `resolve` templates re-resolved at run
//! time), `keepalive*`, the balancing method, `zone`, `resolver` and `resolver_timeout`;
//! and the checks nginx makes once the `http` level is read ([`finish_upstreams`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::args::{arg0, invalid, number, once, time, value, R};
use super::cx::Cx;
use super::error::ConfError;
use super::model::{BalanceMethod, PeerAddr, ResolveServer, Upstream, UpstreamServer};
use super::parse::Directive;
use super::proxy::resolver;
use super::proxy_settings::resolve_host;

/// 10 s: nginx's default `fail_timeout` of an upstream server.
const FAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// The directives of `upstream {}` firstbyte reads; `-V` derives the upstream modules it reports from this list.
pub(crate) const UPSTREAM_DIRECTIVES: &[&str] = &[
    "server",
    "keepalive",
    "keepalive_timeout",
    "keepalive_requests",
    "keepalive_time",
    "least_conn",
    "ip_hash",
    "hash",
    "random",
    "zone",
    "resolver",
    "resolver_timeout",
];

/// `upstream NAME { server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] [backup] [down]; keepalive N; }`.
pub(crate) fn upstream(cx: &mut Cx, d: &Directive) -> R {
    let name = arg0(d).to_ascii_lowercase();
    if cx.upstreams.contains_key(&name) {
        return Err(ConfError::other(
            format!("duplicate upstream \"{}\"", arg0(d)),
            &d.pos,
        ));
    }
    let mut up = Upstream {
        name: name.clone(),
        servers: Vec::new(),
        keepalive: None,
        keepalive_requests: 1000,
        keepalive_timeout: Duration::from_secs(60),
        keepalive_time: Duration::from_secs(3600),
        method: BalanceMethod::RoundRobin,
        pos: d.pos.clone(),
        resolve: Vec::new(),
        resolver: None,
        resolver_timeout: None,
        zone: false,
    };
    let mut method_set = false;
    for c in d.block.as_deref().unwrap_or_default() {
        if c.block.is_some() {
            return Err(ConfError::NotTerminated {
                name: c.name.clone(),
                pos: c.pos.clone(),
            });
        }
        match c.name.as_str() {
            "server" => upstream_server(&mut up, c)?,
            "keepalive" => {
                if c.args.len() != 1 {
                    return Err(ConfError::ArgCount {
                        name: c.name.clone(),
                        pos: c.pos.clone(),
                    });
                }
                once(&up.keepalive, c)?;
                let n: usize = number(c, arg0(c))?;
                if n == 0 {
                    return Err(invalid(c));
                }
                up.keepalive = Some(n);
            }
            "keepalive_requests" => {
                if c.args.len() != 1 {
                    return Err(ConfError::ArgCount {
                        name: c.name.clone(),
                        pos: c.pos.clone(),
                    });
                }
                up.keepalive_requests = number(c, arg0(c))?;
            }
            "keepalive_timeout" | "keepalive_time" => {
                if c.args.len() != 1 {
                    return Err(ConfError::ArgCount {
                        name: c.name.clone(),
                        pos: c.pos.clone(),
                    });
                }
                let t = time(c, arg0(c))?;
                if c.name == "keepalive_time" {
                    up.keepalive_time = t;
                } else {
                    up.keepalive_timeout = t;
                }
            }
            "zone" => {
                super::upstream_zone::zone(cx, c)?;
                up.zone = true;
            }
            "resolver" => {
                once(&up.resolver, c)?;
                up.resolver = resolver(c, cx)?;
            }
            "resolver_timeout" => {
                if c.args.len() != 1 {
                    return Err(ConfError::ArgCount {
                        name: c.name.clone(),
                        pos: c.pos.clone(),
                    });
                }
                once(&up.resolver_timeout, c)?;
                up.resolver_timeout = Some(time(c, arg0(c))?);
            }
            "least_conn" | "ip_hash" | "hash" | "random" => {
                let method = balance_method(c)?;
                if method_set {
                    // nginx: a warning, and the later method wins.
                    cx.warn("load balancing method redefined", &c.pos);
                }
                method_set = true;
                up.method = method;
            }
            "server_resolver" => {
                return Err(ConfError::Unsupported {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
            _ => {
                return Err(ConfError::UnknownDirective {
                    name: c.name.clone(),
                    pos: c.pos.clone(),
                })
            }
        }
    }
    if !matches!(
        up.method,
        BalanceMethod::RoundRobin | BalanceMethod::LeastConn
    ) {
        // nginx refuses `backup` once a hash or random method is set (its servers have no
        // backup flag).
        let mut all = up
            .servers
            .iter()
            .chain(up.resolve.iter().map(|r| &r.params));
        if let Some(s) = all.find(|s| s.backup) {
            return Err(ConfError::other(
                format!("invalid parameter \"backup\" of server \"{}\"", s.name),
                &up.pos,
            ));
        }
    }
    if up.servers.is_empty() && up.resolve.is_empty() {
        return Err(ConfError::other(
            format!("no servers are inside upstream \"{}\"", arg0(d)),
            &d.pos,
        ));
    }
    cx.upstreams.insert(name, Arc::new(up));
    Ok(())
}

/// `least_conn`, `ip_hash` (no arguments), `hash KEY [consistent]` or
/// `random [two [least_conn]]`.
fn balance_method(c: &Directive) -> Result<BalanceMethod, ConfError> {
    let count = match c.name.as_str() {
        "hash" => (1..=2).contains(&c.args.len()),
        "random" => c.args.len() <= 2,
        _ => c.args.is_empty(),
    };
    if !count {
        return Err(ConfError::ArgCount {
            name: c.name.clone(),
            pos: c.pos.clone(),
        });
    }
    Ok(match c.name.as_str() {
        "least_conn" => BalanceMethod::LeastConn,
        "ip_hash" => BalanceMethod::IpHash,
        "random" => {
            // nginx: `two`, then only `least_conn` (the one method of comparing the two).
            for (a, want) in c.args.iter().zip(["two", "least_conn"]) {
                if a != want {
                    return Err(ConfError::other(
                        format!("invalid parameter \"{a}\""),
                        &c.pos,
                    ));
                }
            }
            BalanceMethod::Random {
                two: !c.args.is_empty(),
            }
        }
        _ => {
            let consistent = match c.args.get(1).map(String::as_str) {
                None => false,
                Some("consistent") => true,
                Some(other) => {
                    return Err(ConfError::other(
                        format!("invalid parameter \"{other}\""),
                        &c.pos,
                    ))
                }
            };
            BalanceMethod::Hash {
                key: value(c, arg0(c))?,
                consistent,
            }
        }
    })
}

fn upstream_server(up: &mut Upstream, c: &Directive) -> R {
    let Some(addr) = c.args.first() else {
        return Err(ConfError::ArgCount {
            name: c.name.clone(),
            pos: c.pos.clone(),
        });
    };
    let mut weight = 1u32;
    let mut max_fails = 1u32;
    let mut fail_timeout = FAIL_TIMEOUT;
    let mut backup = false;
    let mut down = false;
    let mut max_conns = 0u32;
    let mut resolve = false;
    let mut service: Option<String> = None;
    for a in &c.args[1..] {
        let bad = || ConfError::other(format!("invalid parameter \"{a}\""), &c.pos);
        if let Some(v) = a.strip_prefix("weight=") {
            weight = v.parse().ok().filter(|w| *w > 0).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("max_fails=") {
            max_fails = v.parse().map_err(|_| bad())?;
        } else if let Some(v) = a.strip_prefix("fail_timeout=") {
            fail_timeout = super::units::time(v).ok_or_else(bad)?;
        } else if let Some(v) = a.strip_prefix("max_conns=") {
            max_conns = v.parse().map_err(|_| bad())?;
        } else if a == "backup" {
            backup = true;
        } else if a == "down" {
            down = true;
        } else if a == "resolve" {
            resolve = true;
        } else if let Some(v) = a.strip_prefix("service=") {
            if v.is_empty() {
                return Err(ConfError::other("service is empty", &c.pos));
            }
            service = Some(v.to_string());
        } else {
            return Err(bad());
        }
    }
    if service.is_some() && !resolve {
        return Err(ConfError::other(
            format!("service upstream \"{addr}\" requires \"resolve\" parameter"),
            &c.pos,
        ));
    }
    let (host, port, no_port) = match addr.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') || h.starts_with('[') => match p.parse::<u16>() {
            Ok(p) => (h, p, false),
            Err(_) => (addr.as_str(), 80, true),
        },
        _ => (addr.as_str(), 80, true),
    };
    let params = UpstreamServer {
        addr: PeerAddr::Tcp(std::net::SocketAddr::from(([0, 0, 0, 0], port))),
        name: addr.clone(),
        weight,
        max_fails,
        fail_timeout,
        backup,
        down,
        max_conns,
    };
    let literal = addr.starts_with("unix:")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok();
    if service.is_some() && !no_port {
        return Err(ConfError::other(
            format!("service upstream \"{addr}\" may not have port"),
            &c.pos,
        ));
    }
    if service.is_some() && literal {
        return Err(ConfError::other(
            format!("service upstream \"{addr}\" requires domain name"),
            &c.pos,
        ));
    }
    if resolve && !literal {
        // nginx: not resolved now; the name's addresses come from the resolver at run time.
        up.resolve.push(ResolveServer {
            host: host.trim_end_matches('.').to_ascii_lowercase(),
            port,
            service,
            params,
        });
        return Ok(());
    }
    let addrs = match addr.strip_prefix("unix:") {
        Some(path) if !path.is_empty() => vec![PeerAddr::Unix(PathBuf::from(path))],
        Some(_) => {
            return Err(ConfError::other(
                format!("no path in the unix domain socket \"{addr}\""),
                &c.pos,
            ))
        }
        None => resolve_host(host, port)
            .map_err(|_| {
                ConfError::other(format!("host not found in upstream \"{addr}\""), &c.pos)
            })?
            .into_iter()
            .map(PeerAddr::Tcp)
            .collect(),
    };
    for a in addrs {
        up.servers.push(UpstreamServer {
            addr: a,
            ..params.clone()
        });
    }
    Ok(())
}

/// Finishes the `upstream` blocks once the `http` level is read (nginx's
/// `ngx_http_upstream_init_round_robin`): a block with `server NAME resolve` needs a `zone`
/// and a resolver (its own, else `http`'s `resolver`), and takes `http`'s
/// `resolver_timeout` unless it has its own.
pub(crate) fn finish_upstreams(
    cx: &mut Cx,
    resolver: Option<&super::model::Resolver>,
    resolver_timeout: Option<Duration>,
) -> R {
    let mut names: Vec<String> = cx.upstreams.keys().cloned().collect();
    names.sort_unstable_by_key(|n| cx.upstreams[n].pos.line);
    for name in names {
        let u = &cx.upstreams[&name];
        if u.resolve.is_empty() {
            continue;
        }
        if !u.zone {
            return Err(ConfError::Around {
                before: format!(
                    "resolving names at run time requires upstream \"{}\"",
                    u.name
                ),
                pos: u.pos.clone(),
                after: " to be in shared memory".into(),
            });
        }
        let mut up = (**u).clone();
        if up.resolver.is_none() {
            up.resolver = resolver.cloned();
        }
        if up.resolver.is_none() {
            return Err(ConfError::other(
                format!(
                    "no resolver defined to resolve names at run time in upstream \"{}\"",
                    up.name
                ),
                &up.pos,
            ));
        }
        up.resolver_timeout = Some(
            up.resolver_timeout
                .or(resolver_timeout)
                .unwrap_or(Duration::from_secs(30)),
        );
        cx.upstreams.insert(name, Arc::new(up));
    }
    Ok(())
}
