//! Building a load's [`Proxies`]: one [`Route`] per location with `proxy_pass`, the
//! balancers shared by the locations naming one `upstream` block or one implicit upstream
//! (nginx's: a `proxy_pass` host and port without a block), and the TLS client configs
//! shared by equal `proxy_ssl_*` settings.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{
    dynamic, ptr, Balancer, ClientCertCounts, DynamicClient, Keepalive, Proxies, Route, Shared,
    UpstreamTls,
};
use crate::conf::model::{
    BalanceMethod, HttpConf, LocationConf, Locations, PeerAddr, ProxyConf, ProxySsl, ProxyTarget,
};
use crate::tls::{ObjectStore, TlsError};

impl Proxies {
    /// Routes for every proxying location of `http`; TLS files go through `store`.
    pub fn build(http: &HttpConf, store: &mut ObjectStore) -> Result<Proxies, TlsError> {
        let mut b = Builder {
            out: Proxies::default(),
            balancers: HashMap::new(),
            implicit: HashMap::new(),
            configs: HashMap::new(),
            h2_configs: HashMap::new(),
            dynamics: HashMap::new(),
        };
        // nginx's implicit upstreams first: every `proxy_pass http://HOST:PORT` of the load,
        // so that a URL with variables finds one defined in any location.
        for s in &http.servers {
            walk(&s.default_location, &mut |l| b.implicit_upstream(l));
            for l in each(&s.locations) {
                walk(l, &mut |l| b.implicit_upstream(l));
            }
        }
        for s in &http.servers {
            b.location(&s.default_location, store)?;
            b.locations(&s.locations, store)?;
        }
        b.out.early_hints = b
            .out
            .routes
            .values()
            .any(|r| !r.conf.early_hints.is_empty());
        Ok(b.out)
    }

    /// Whether a location has `early_hints`: requests then carry where a 103 goes.
    pub fn early_hints(&self) -> bool {
        self.early_hints
    }

    /// The route of a location's proxy settings.
    pub fn route(&self, conf: &Arc<ProxyConf>) -> Option<&Arc<Route>> {
        self.routes.get(&ptr(conf))
    }

    /// How many routes (proxying locations) the load has.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether no location proxies.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

impl Route {
    /// Loads and cache hits of the route's per-request client certificates (`None`: the
    /// client certificate is static or absent).
    pub fn client_cert_counts(&self) -> Option<ClientCertCounts> {
        self.dynamic.as_ref().map(|d| d.counts())
    }
}

/// `proxy_ssl_*` settings as a map key: equal settings share a client config. Hashing the
/// fields directly (not a formatted string) keeps 10,000 locations cheap to build.
struct SslKey<'a>(&'a ProxySsl);

impl PartialEq for SslKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for SslKey<'_> {}

impl std::hash::Hash for SslKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let s = self.0;
        s.certificate.hash(h);
        s.certificate_key.hash(h);
        s.password_file.hash(h);
        s.trusted_certificate.hash(h);
        s.crl.hash(h);
        (s.verify, s.verify_depth, s.server_name, s.session_reuse).hash(h);
        s.name.hash(h);
        s.protocols.len().hash(h);
        // The variable pair has no Hash; equal keys still compare it in full.
        s.dynamic.is_some().hash(h);
        s.certificate_cache.hash(h);
    }
}

/// Calls `f` on `loc` and every location inside it (nested, `if`, `limit_except`).
fn walk<'a>(loc: &'a LocationConf, f: &mut impl FnMut(&'a LocationConf)) {
    f(loc);
    for l in loc.implicit() {
        walk(l, f);
    }
    for l in each(&loc.locations) {
        walk(l, f);
    }
}

/// The locations of one level: exact, named, prefix and regex ones.
fn each(l: &Locations) -> impl Iterator<Item = &LocationConf> {
    l.exact
        .values()
        .chain(l.named.values())
        .map(|c| &**c)
        .chain(l.prefix.iter().map(|c| &*c.conf))
        .chain(l.regex.iter().map(|c| &*c.conf))
}

/// The key of nginx's implicit upstream of `proxy_pass SCHEME://HOST[:PORT]`: the host
/// (lower-case, IPv6 without brackets) and the port (the scheme's default when none is
/// written). None for a UNIX-domain socket or a URL with variables.
fn implicit_key(p: &ProxyConf) -> Option<(String, u16)> {
    match &p.target {
        ProxyTarget::Addrs(a) if a.iter().all(|a| matches!(a, PeerAddr::Tcp(_))) => {}
        _ => return None,
    }
    let scheme = if p.tls { "https" } else { "http" };
    let (_, hostname, port, _, _) =
        crate::conf::proxy::split_url(&format!("{scheme}://{}/", p.host))?;
    Some((bare_host(&hostname), port))
}

/// A host name as implicit upstreams are keyed: lower-case, an IPv6 address unbracketed.
fn bare_host(h: &str) -> String {
    h.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

struct Builder<'a> {
    out: Proxies,
    /// Balancers by upstream block, so locations naming one upstream share its state.
    balancers: HashMap<usize, Shared>,
    /// nginx's implicit upstreams: the peers and balancer of each `proxy_pass` host and port
    /// without an `upstream` block, shared by the locations naming it and by URLs with
    /// variables that evaluate to it.
    implicit: HashMap<(String, u16), Shared>,
    /// Client configs made so far, by their settings (as their debug text, which covers every
    /// field): equal settings share one config and its session cache.
    configs: HashMap<SslKey<'a>, Arc<rustls::ClientConfig>>,
    /// The same offering ALPN `h2` (`proxy_http_version 2`), by the address of the one above:
    /// one per settings, so the locations of one `upstream` share its keepalive pool.
    h2_configs: HashMap<usize, Arc<rustls::ClientConfig>>,
    /// Per-request client certificates by settings, likewise: locations inheriting one
    /// `proxy_ssl_certificate_cache` share it.
    dynamics: HashMap<SslKey<'a>, Arc<DynamicClient>>,
}

impl<'a> Builder<'a> {
    /// Records `loc`'s implicit upstream, if its `proxy_pass` makes one.
    fn implicit_upstream(&mut self, loc: &LocationConf) {
        let Some(p) = &loc.proxy else {
            return;
        };
        let (Some(key), ProxyTarget::Addrs(a)) = (implicit_key(p), &p.target) else {
            return;
        };
        self.implicit
            .entry(key)
            .or_insert_with(|| (Arc::new(Mutex::new(Balancer::equal(a))), Keepalive::OFF));
    }

    fn locations(&mut self, l: &'a Locations, store: &mut ObjectStore) -> Result<(), TlsError> {
        for c in l.exact.values().chain(l.named.values()) {
            self.location(c, store)?;
        }
        for c in &l.prefix {
            self.location(&c.conf, store)?;
        }
        for c in &l.regex {
            self.location(&c.conf, store)?;
        }
        Ok(())
    }

    fn location(&mut self, loc: &'a LocationConf, store: &mut ObjectStore) -> Result<(), TlsError> {
        if let Some(p) = &loc.proxy {
            let mut dynamic_pass = None;
            let (balancer, keepalive) = match &p.target {
                ProxyTarget::Upstream(u) => self.shared(u),
                ProxyTarget::Dynamic(d) => {
                    let upstreams = d
                        .upstreams
                        .iter()
                        .map(|(name, u)| (name.clone(), (u.clone(), self.shared(u))))
                        .collect();
                    dynamic_pass = Some(Arc::new(dynamic::DynamicRoutes {
                        url: d.url.clone(),
                        upstreams,
                        implicit: self.implicit.clone(),
                        // nginx makes the TLS context of any URL with variables.
                        tls: Some(match self.configs.get(&SslKey(&p.ssl)) {
                            Some(c) => c.clone(),
                            None => {
                                let c = crate::tls::client_config(&p.ssl, store)?;
                                self.configs.insert(SslKey(&p.ssl), c.clone());
                                c
                            }
                        }),
                    }));
                    (Arc::new(Mutex::new(Balancer::equal(&[]))), Keepalive::OFF)
                }
                ProxyTarget::Addrs(a) => {
                    match implicit_key(p).and_then(|k| self.implicit.get(&k)) {
                        Some(shared) => shared.clone(),
                        None => (Arc::new(Mutex::new(Balancer::equal(a))), Keepalive::OFF),
                    }
                }
            };
            let mut dynamic = None;
            let tls = if p.tls && dynamic_pass.is_none() {
                let config = match self.configs.get(&SslKey(&p.ssl)) {
                    Some(c) => c.clone(),
                    None => {
                        let c = crate::tls::client_config(&p.ssl, store)?;
                        self.configs.insert(SslKey(&p.ssl), c.clone());
                        c
                    }
                };
                if let Some(pair) = &p.ssl.dynamic {
                    dynamic = Some(match self.dynamics.get(&SslKey(&p.ssl)) {
                        Some(d) => d.clone(),
                        None => {
                            let base = crate::tls::ClientBase::new(&p.ssl, store)?;
                            let passwords = match &p.ssl.password_file {
                                Some(path) => Some(store.passwords(path)?),
                                None => None,
                            };
                            let d =
                                Arc::new(DynamicClient::new(&p.ssl, pair.clone(), base, passwords));
                            self.dynamics.insert(SslKey(&p.ssl), d.clone());
                            d
                        }
                    });
                }
                let config = if p.http_version.is_h2() {
                    let base = Arc::as_ptr(&config) as usize;
                    self.h2_configs
                        .entry(base)
                        .or_insert_with(|| super::h2::alpn_config(&config))
                        .clone()
                } else {
                    config
                };
                Some(UpstreamTls {
                    config,
                    name: crate::tls::upstream_server_name(&p.ssl, &p.host)?,
                })
            } else {
                None
            };
            let route = Route {
                conf: p.clone(),
                balancer,
                tls,
                dynamic,
                keepalive,
                method: match &p.target {
                    ProxyTarget::Upstream(u) => u.method.clone(),
                    _ => BalanceMethod::RoundRobin,
                },
                dynamic_pass,
            };
            self.out.routes.insert(ptr(p), Arc::new(route));
        }
        for l in loc.implicit() {
            self.location(l, store)?;
        }
        self.locations(&loc.locations, store)
    }

    /// The peers, balancer and pool size of an `upstream` block, shared by every location
    /// naming it.
    /// The `server NAME resolve` lines start with the answers a previous load kept, and are
    /// re-resolved once the load serves ([`Proxies::start_resolving`]).
    fn shared(&mut self, u: &Arc<crate::conf::model::Upstream>) -> Shared {
        if let Some(s) = self.balancers.get(&ptr(u)) {
            return s.clone();
        }
        let balancer = Arc::new(Mutex::new(Balancer::group(
            &u.servers, &u.resolve, &u.method,
        )));
        self.out
            .resolving
            .extend(super::resolve::jobs(u, &balancer));
        let s = (balancer, Keepalive::of(u));
        self.balancers.insert(ptr(u), s.clone());
        s
    }
}
