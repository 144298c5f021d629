//! `proxy_pass` with variables: the route of one request's evaluated URL, as nginx's
//! `ngx_http_proxy_eval` and `ngx_http_upstream_init_request` find it — an `upstream` block
//! named by a host without a port, else the host and port of a `proxy_pass` without
//! variables elsewhere in the load (nginx's implicit upstream: its addresses, no resolver
//! asked), else an IP address or the addresses the `resolver` gives
//! (without one: 502, "no resolver defined to resolve HOST"), or a `unix:` socket.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use super::{Balancer, Route, Shared, UpstreamTls};
use crate::conf::model::{BalanceMethod, PeerAddr, ProxyConf, ProxyTarget, Upstream};

/// What a route with variables chooses from per request.
pub(super) struct DynamicRoutes {
    /// The URL as written.
    pub url: crate::conf::vars::ComplexValue,
    /// Every `upstream` block, with the balancer it shares with the locations naming it.
    pub upstreams: HashMap<String, (Arc<Upstream>, Shared)>,
    /// nginx's implicit upstreams (each `proxy_pass` host and port of the load) by host and
    /// port: a URL naming one uses its addresses and shares its balancer, no resolver asked.
    pub implicit: HashMap<(String, u16), Shared>,
    /// The client config for an `https://` URL.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Why an evaluated URL gives no route: the status and what nginx logs.
#[derive(Debug, PartialEq, Eq)]
pub struct NoRoute {
    /// 500 or 502.
    pub status: u16,
    /// The reason, in nginx's words.
    pub reason: String,
}

impl Route {
    /// The URL with variables of this route, if it has one.
    pub fn dynamic_url(&self) -> Option<&crate::conf::vars::ComplexValue> {
        self.dynamic_pass.as_ref().map(|d| &d.url)
    }

    /// The route for the evaluated URL `url`.
    pub async fn for_url(&self, url: &str) -> Result<Route, NoRoute> {
        let Some(d) = &self.dynamic_pass else {
            return Err(NoRoute {
                status: 500,
                reason: "no URL with variables".into(),
            });
        };
        let invalid = || NoRoute {
            status: 500,
            reason: format!("invalid URL prefix in \"{url}\""),
        };
        let mut implicit_shared = None;
        let (tls, host, uri, target) = match crate::conf::proxy::unix_url(url, &self.conf_pos())
            .map_err(|_| invalid())?
        {
            Some(p) => (
                p.tls,
                p.host,
                p.uri,
                ProxyTarget::Addrs(vec![PeerAddr::Unix(p.unix.unwrap_or_default())]),
            ),
            None => {
                let (tls, hostname, port, host, uri) =
                    crate::conf::proxy::split_url(url).ok_or_else(invalid)?;
                // nginx: a `?args` URI part gets its `/`.
                let uri = uri.map(|u| {
                    if u.starts_with('?') {
                        format!("/{u}")
                    } else {
                        u
                    }
                });
                let no_port = hostname.len() == host.len();
                let bare = hostname.trim_start_matches('[').trim_end_matches(']');
                let implicit = d.implicit.get(&(bare.to_ascii_lowercase(), port));
                let target = match (d.upstreams.get(&hostname), implicit) {
                    (Some((u, _)), _) if no_port => ProxyTarget::Upstream(u.clone()),
                    (_, Some(shared)) => {
                        implicit_shared = Some(shared.clone());
                        ProxyTarget::Addrs(shared.0.lock().map(|b| b.addrs()).unwrap_or_default())
                    }
                    _ => {
                        let ips = match bare.parse::<IpAddr>() {
                            Ok(ip) => vec![ip],
                            Err(_) => self.resolve(&hostname).await?,
                        };
                        ProxyTarget::Addrs(
                            ips.into_iter()
                                .map(|ip| PeerAddr::Tcp(SocketAddr::new(ip, port)))
                                .collect(),
                        )
                    }
                };
                (tls, host, uri, target)
            }
        };
        let tls_conf = match (tls, &d.tls) {
            (false, _) => None,
            (true, Some(config)) => Some(UpstreamTls {
                config: config.clone(),
                name: crate::tls::upstream_server_name(&self.conf.ssl, &host).map_err(|e| {
                    NoRoute {
                        status: 502,
                        reason: format!("{e} while SSL handshaking to upstream"),
                    }
                })?,
            }),
            (true, None) => return Err(invalid()),
        };
        let (balancer, keepalive, method) = match &target {
            ProxyTarget::Upstream(u) => {
                let (_, (balancer, keepalive)) = &d.upstreams[&u.name];
                (balancer.clone(), *keepalive, u.method.clone())
            }
            ProxyTarget::Addrs(a) => match implicit_shared {
                Some((balancer, keepalive)) => (balancer, keepalive, BalanceMethod::RoundRobin),
                None => (
                    Arc::new(Mutex::new(Balancer::equal(a))),
                    super::Keepalive::OFF,
                    BalanceMethod::RoundRobin,
                ),
            },
            ProxyTarget::Dynamic(_) => return Err(invalid()),
        };
        let conf = ProxyConf {
            tls,
            host,
            uri,
            target,
            ..(*self.conf).clone()
        };
        Ok(Route {
            conf: Arc::new(conf),
            balancer,
            tls: tls_conf,
            dynamic: self.dynamic.clone(),
            keepalive,
            method,
            dynamic_pass: None,
        })
    }

    /// `name`'s addresses from the `resolver` (nginx's messages when there is none, or it
    /// gives none).
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, NoRoute> {
        let Some(r) = &self.conf.resolver else {
            return Err(NoRoute {
                status: 502,
                reason: format!("no resolver defined to resolve {name}"),
            });
        };
        super::dns::resolve(name, r, self.conf.resolver_timeout)
            .await
            .map_err(|e| NoRoute {
                status: 502,
                reason: format!("{name} could not be resolved ({e})"),
            })
    }

    fn conf_pos(&self) -> crate::conf::model::Pos {
        crate::conf::model::Pos {
            file: Arc::new("proxy_pass".into()),
            line: 0,
        }
    }
}
