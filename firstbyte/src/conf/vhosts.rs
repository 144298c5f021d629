//! Virtual hosts: which sockets to open, and which `server {}` answers a connection or request.
//!
//! [`VirtualHosts::new`] takes the merged [`HttpConf`] and groups every `listen` the way nginx
//! does (`ngx_http_add_listen`, `ngx_http_optimize_servers`, `ngx_http_init_listening`):
//! - listens are gathered per *port and family*, then per *address*; each address collects the
//!   servers that listen on it, its default server, and whether it speaks TLS / HTTP/2 (an
//!   address is `ssl` when any of its `listen` directives says so);
//! - when a wildcard address (`0.0.0.0` or `[::]`) listens on a port, one socket is bound to it
//!   and the specific addresses of that port are served from it, told apart by the connection's
//!   local address; a specific address gets a socket of its own only when its `listen` sets
//!   socket options (`backlog=`, `fastopen=`, `deferred`, `reuseport`, `ipv6only=`), as nginx's implied `bind`;
//! - without a wildcard, every address gets its own socket.
//!
//! At run time the acceptor of socket `i` calls [`VirtualHosts::addr_servers`] with the local
//! address, and the TLS SNI callback and the request router call [`AddrServers::find`] with the
//! server name / `Host` to pick the server: exact name, longest leading wildcard, longest
//! trailing wildcard, first matching regex, else the address's default server.
//! [`normalize_host`] is nginx's `ngx_http_validate_host`: the caller answers 400 on an error.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::model::{HttpConf, Listen, Pos, ServerConf, ServerName, DEFAULT_BACKLOG};

/// A listening socket to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenSocket {
    /// The address to bind (a placeholder when `unix` is set).
    pub addr: SocketAddr,
    /// `listen unix:PATH`: the UNIX-domain socket's path.
    pub unix: Option<Arc<str>>,
    /// Some address served from this socket speaks TLS (the per-connection answer is
    /// [`AddrServers::ssl`]: specific addresses sharing a wildcard socket may differ).
    pub ssl: bool,
    /// Some address served from this socket has `listen ... http2` (per connection:
    /// [`AddrServers::http2`]).
    pub http2: bool,
    /// `SO_REUSEPORT`.
    pub reuseport: bool,
    /// `listen()` backlog.
    pub backlog: i32,
    /// `TCP_FASTOPEN` queue length.
    pub fastopen: Option<u32>,
    /// `TCP_DEFER_ACCEPT` (`deferred`).
    pub deferred: bool,
    /// `IPV6_V6ONLY` (IPv6 sockets only).
    pub ipv6only: bool,
    /// `sndbuf=`, `rcvbuf=`, `so_keepalive=`.
    pub tuning: crate::net::SocketTuning,
    /// A UDP socket for QUIC (`listen ... quic`), not a TCP one.
    pub quic: bool,
    /// The `listen` directive the socket's options come from.
    pub pos: Pos,
}

/// Why the listen directives of a config cannot be served (nginx's `[emerg]` words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
// Every variant is a duplicate of something: the names say of what, as nginx's messages do.
#[allow(clippy::enum_variant_names)]
pub enum VhostError {
    /// Two servers say `default_server` on one address.
    #[error("a duplicate default server for {addr} in {pos}")]
    DuplicateDefault {
        /// The address (`127.0.0.1:80`, `unix:/path`).
        addr: String,
        /// The second `listen ... default_server`.
        pos: Pos,
    },
    /// Two `listen` directives on one address both set socket options.
    #[error("duplicate listen options for {addr} in {pos}")]
    DuplicateOptions {
        /// The address (`127.0.0.1:80`, `unix:/path`).
        addr: String,
        /// The second `listen` with options.
        pos: Pos,
    },
    /// One server listens twice on the same address.
    #[error("a duplicate listen {addr} in {pos}")]
    DuplicateListen {
        /// The address (`127.0.0.1:80`, `unix:/path`).
        addr: String,
        /// The second `listen`.
        pos: Pos,
    },
}

/// Why a `Host` (or SNI server name) is refused; the caller answers 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidHost {
    /// Nothing left once the port and a trailing dot are stripped.
    #[error("client sent invalid host header")]
    Empty,
    /// `..` somewhere.
    #[error("client sent invalid host header")]
    ConsecutiveDots,
    /// A name starting with `.`.
    #[error("client sent invalid host header")]
    LeadingDot,
    /// A `/` or a backslash (path separators; nginx's newer host check refuses the backslash too).
    #[error("client sent invalid host header")]
    Separator,
    /// NUL, a space, another control character or DEL.
    #[error("client sent invalid host header")]
    Control,
}

/// Normalises a `Host` header value (or an SNI name, or the host of an absolute request
/// target) as nginx's `ngx_http_validate_host`: strips `:port` (also after `[v6]`) and one
/// trailing `.`, lower-cases ASCII, and refuses `..`, `/`, NUL, spaces and control characters,
/// a leading `.` and an empty result. Borrows when nothing changes.
pub fn normalize_host(host: &str) -> Result<Cow<'_, str>, InvalidHost> {
    #[derive(PartialEq)]
    enum State {
        Usual,
        Literal,
        Rest,
    }
    let bytes = host.as_bytes();
    if bytes.first() == Some(&b'.') {
        return Err(InvalidHost::LeadingDot);
    }
    let mut state = State::Usual;
    let mut last_dot: Option<usize> = None;
    let mut len = bytes.len();
    let mut upper = false;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'.' => {
                if i > 0 && last_dot == Some(i - 1) {
                    return Err(InvalidHost::ConsecutiveDots);
                }
                last_dot = Some(i);
            }
            b':' if state == State::Usual => {
                len = i;
                state = State::Rest;
            }
            b'[' if i == 0 => state = State::Literal,
            b']' if state == State::Literal => {
                len = i + 1;
                state = State::Rest;
            }
            b'/' | b'\\' => return Err(InvalidHost::Separator),
            0..=0x20 | 0x7f => return Err(InvalidHost::Control),
            b'A'..=b'Z' => upper = true,
            _ => {}
        }
    }
    if len > 0 && last_dot == Some(len - 1) {
        len -= 1;
    }
    if len == 0 {
        return Err(InvalidHost::Empty);
    }
    // `len` sits on an ASCII byte (`:`, `]`, `.`) or the end, so it is a char boundary.
    let name = host.get(..len).ok_or(InvalidHost::Empty)?;
    // Upper-case letters in the stripped port are dropped with it.
    if upper && name.bytes().any(|b| b.is_ascii_uppercase()) {
        Ok(Cow::Owned(name.to_ascii_lowercase()))
    } else {
        Ok(Cow::Borrowed(name))
    }
}

/// Whether the authority of an absolute request target (`GET http://HOST[:PORT]/ HTTP/1.1`)
/// has the form nginx's request-line parser accepts: a name of letters, digits, `.` and `-`,
/// or an IP literal in `[...]` of letters, digits, `:` and RFC 3986's unreserved and
/// sub-delims characters; then nothing, or `:` and digits. Anything else (`_`, `@`, `\`, a
/// dot after `]`, text before `[`, a port with a dot) is a 400 there. [`normalize_host`]
/// applies on top, as nginx's `ngx_http_validate_host` does after the parser.
pub fn absolute_form_host_ok(authority: &str) -> bool {
    let b = authority.as_bytes();
    let rest = if let Some(lit) = b.strip_prefix(b"[") {
        let Some(end) = lit.iter().position(|&c| c == b']') else {
            return false;
        };
        let literal_ok = lit[..end].iter().all(|&c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b':' | b'-'
                        | b'.'
                        | b'_'
                        | b'~'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                )
        });
        if !literal_ok {
            return false;
        }
        &lit[end + 1..]
    } else {
        let n = b
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || c == b'.' || c == b'-'))
            .unwrap_or(b.len());
        &b[n..]
    };
    match rest.split_first() {
        None => true,
        Some((b':', port)) => port.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

/// The servers that listen on one address:port, and how to choose among them.
#[derive(Debug)]
pub struct AddrServers {
    addr: SocketAddr,
    unix: Option<Arc<str>>,
    servers: Vec<Arc<ServerConf>>,
    default: Arc<ServerConf>,
    names: Names,
    ssl: bool,
    http2: bool,
    proxy_protocol: bool,
}

/// Server names of one address, in nginx's lookup structure.
#[derive(Debug, Default)]
struct Names {
    /// Exact names (lower-case), `""` included.
    exact: HashMap<String, Arc<ServerConf>>,
    /// Leading wildcards as `.example.com`.
    leading: HashMap<String, Arc<ServerConf>>,
    /// Trailing wildcards as `www.example.`.
    trailing: HashMap<String, Arc<ServerConf>>,
    /// Regexes in file order (servers in file order, names in order within a server).
    regex: Vec<(regex::Regex, Arc<ServerConf>)>,
}

impl Names {
    /// Builds the tables; a name already taken draws nginx's warning (when `warn`).
    fn build(addr: &str, servers: &[Arc<ServerConf>], warnings: &mut Vec<String>) -> Self {
        let mut names = Names::default();
        let warn = servers.len() > 1;
        for server in servers {
            for name in &server.server_names {
                let (table, key, shown) = match name {
                    ServerName::Exact(s) => {
                        let key = s.to_ascii_lowercase();
                        (&mut names.exact, key.clone(), key)
                    }
                    ServerName::LeadingWildcard(s) => {
                        let key = s.to_ascii_lowercase();
                        let shown = format!("*{key}");
                        (&mut names.leading, key, shown)
                    }
                    ServerName::TrailingWildcard(s) => {
                        let key = s.to_ascii_lowercase();
                        let shown = format!("{key}*");
                        (&mut names.trailing, key, shown)
                    }
                    ServerName::Regex(re) => {
                        names.regex.push((re.clone(), server.clone()));
                        continue;
                    }
                };
                match table.entry(key) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        if warn {
                            warnings.push(format!(
                                "conflicting server name \"{shown}\" on {addr}, ignored"
                            ));
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(server.clone());
                    }
                }
            }
        }
        names
    }

    /// nginx's order: exact, longest leading wildcard, longest trailing wildcard, regex.
    fn lookup(&self, host: &str) -> Option<&Arc<ServerConf>> {
        if let Some(s) = self.exact.get(host) {
            return Some(s);
        }
        if !self.leading.is_empty() {
            // Suffixes starting at each dot, left to right: the first hit is the longest.
            for (i, _) in host.match_indices('.') {
                if let Some(s) = self.leading.get(&host[i..]) {
                    return Some(s);
                }
            }
        }
        if !self.trailing.is_empty() {
            // Prefixes ending at each dot, right to left; the name itself must go on after it.
            for (i, _) in host.rmatch_indices('.') {
                if i + 1 < host.len() {
                    if let Some(s) = self.trailing.get(&host[..=i]) {
                        return Some(s);
                    }
                }
            }
        }
        if host.is_empty() {
            return None; // nginx runs no regex on an empty name
        }
        self.regex
            .iter()
            .find(|(re, _)| re.is_match(host))
            .map(|(_, s)| s)
    }
}

impl AddrServers {
    /// The server for requests no name selects: the one whose `listen` says
    /// `default_server`, else the first server (in file order) on the address.
    pub fn default_server(&self) -> &Arc<ServerConf> {
        &self.default
    }

    /// The server for a `Host` / SNI name. nginx's order: exact name, longest leading wildcard
    /// (`*.example.com`, `.example.com`), longest trailing wildcard (`www.example.*`), first
    /// matching regex in file order, then the default server. `None` (no `Host`, e.g.
    /// HTTP/1.0) looks up the empty name (`server_name ""`). The name is normalised here with
    /// [`normalize_host`]; an invalid one gets the default server (callers that must answer 400
    /// call [`normalize_host`] first).
    pub fn find(&self, host: Option<&str>) -> &Arc<ServerConf> {
        if self.servers.len() <= 1 {
            return &self.default; // nginx builds no name tables for a lone server
        }
        let host = match host {
            None => Cow::Borrowed(""),
            Some(h) => match normalize_host(h) {
                Ok(h) => h,
                Err(_) => return &self.default,
            },
        };
        self.names.lookup(&host).unwrap_or(&self.default)
    }

    /// Connections on this address start with a PROXY protocol header (some `listen` on it
    /// says `proxy_protocol`).
    pub fn proxy_protocol(&self) -> bool {
        self.proxy_protocol
    }

    /// Connections on this address speak TLS (some `listen` on it says `ssl`).
    pub fn ssl(&self) -> bool {
        self.ssl
    }

    /// Some `listen` on this address says `http2` (the old style). Whether a connection
    /// offers h2 also depends on the chosen server's `http2 on`: see [`AddrServers::offers_h2`].
    pub fn http2(&self) -> bool {
        self.http2
    }

    /// Whether to offer HTTP/2 on a connection whose server (from SNI, else the default) is
    /// `server`: `listen ... http2` on the address, or `http2 on` in the server (nginx's ALPN rule).
    pub fn offers_h2(&self, server: &ServerConf) -> bool {
        self.http2 || server.http2
    }

    /// The configured address:port (`0.0.0.0:443` for a wildcard).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `listen unix:PATH`: the path.
    pub fn unix(&self) -> Option<&Arc<str>> {
        self.unix.as_ref()
    }

    /// Every server on this address, in file order.
    pub fn servers(&self) -> &[Arc<ServerConf>] {
        &self.servers
    }
}

/// The addresses one socket serves.
#[derive(Debug)]
struct SocketGroup {
    /// Specific addresses served from a wildcard socket, chosen by local address.
    specific: Vec<AddrServers>,
    /// The socket's own address.
    own: AddrServers,
}

/// Every socket to open and the servers behind each (nginx's `ports` / `addrs` tables).
#[derive(Debug)]
pub struct VirtualHosts {
    sockets: Vec<ListenSocket>,
    groups: Vec<SocketGroup>,
    warnings: Vec<String>,
}

/// One address:port while the config's listens are gathered (nginx's `ngx_http_conf_addr_t`).
struct AddrBuild {
    /// The listen that gave the socket options (the first one, or the one that set options).
    opt: Listen,
    /// `opt` set socket options explicitly (nginx's `lsopt.set`, which also implies `bind`).
    opt_set: bool,
    servers: Vec<Arc<ServerConf>>,
    default: Arc<ServerConf>,
    default_set: bool,
    ssl: bool,
    http2: bool,
    proxy_protocol: bool,
    protocols: u8,
    protocols_set: bool,
    protocols_changed: bool,
}

/// Whether a listen sets socket options. The model keeps values, not whether they were
/// written, so a value other than the default counts as set.
fn sets_options(l: &Listen) -> bool {
    l.reuseport
        || l.bind
        || l.tuning != crate::net::SocketTuning::default()
        || l.backlog != DEFAULT_BACKLOG
        || l.fastopen.is_some()
        || l.deferred
        || (l.addr.is_ipv6() && !l.ipv6only && l.unix.is_none())
}

/// nginx's protocol bits of a listen: ssl = 2, http2 = 4 (1 is proxy_protocol, not here).
fn protocols(ssl: bool, http2: bool) -> u8 {
    (u8::from(ssl) << 1) | (u8::from(http2) << 2)
}

fn same_addr(a: &Listen, b: &Listen) -> bool {
    a.addr.ip() == b.addr.ip() && a.addr.port() == b.addr.port() && a.unix == b.unix
}

impl AddrBuild {
    fn new(server: &Arc<ServerConf>, l: &Listen) -> Self {
        AddrBuild {
            opt: l.clone(),
            opt_set: sets_options(l),
            servers: vec![server.clone()],
            default: server.clone(),
            default_set: l.default_server,
            ssl: l.ssl,
            http2: l.http2,
            proxy_protocol: l.proxy_protocol,
            protocols: 0,
            protocols_set: false,
            protocols_changed: false,
        }
    }

    /// Another listen on this address (nginx's `ngx_http_add_addresses`).
    fn add(
        &mut self,
        server: &Arc<ServerConf>,
        l: &Listen,
        warnings: &mut Vec<String>,
    ) -> Result<(), VhostError> {
        let addr = self.opt.shown();
        if self.servers.iter().any(|s| Arc::ptr_eq(s, server)) {
            return Err(VhostError::DuplicateListen {
                addr: addr.clone(),
                pos: l.pos.clone(),
            });
        }
        self.servers.push(server.clone());
        let prots = protocols(l.ssl, l.http2);
        let prev = protocols(self.ssl, self.http2);
        let set = sets_options(l);
        if set {
            if self.opt_set {
                return Err(VhostError::DuplicateOptions {
                    addr: addr.clone(),
                    pos: l.pos.clone(),
                });
            }
            self.opt = l.clone();
            self.opt_set = true;
        }
        if l.default_server {
            if self.default_set {
                return Err(VhostError::DuplicateDefault {
                    addr: addr.clone(),
                    pos: l.pos.clone(),
                });
            }
            self.default_set = true;
            self.default = server.clone();
        }
        let redefined = if prots | prev != prev {
            // options added
            let w = (self.opt_set && !set) || self.protocols_changed || (prots | prev) != prots;
            self.protocols = prev;
            self.protocols_set = true;
            self.protocols_changed = true;
            w
        } else if prev | prots != prots {
            // options removed
            let w = set || (self.protocols_set && prots != self.protocols);
            self.protocols = prots;
            self.protocols_set = true;
            self.protocols_changed = true;
            w
        } else {
            let w =
                (set && self.protocols_changed) || (self.protocols_set && prots != self.protocols);
            self.protocols = prots;
            self.protocols_set = true;
            w
        };
        if redefined {
            warnings.push(format!(
                "protocol options redefined for {addr} in {}",
                l.pos
            ));
        }
        self.ssl |= l.ssl;
        self.http2 |= l.http2;
        self.proxy_protocol |= l.proxy_protocol;
        Ok(())
    }

    fn finish(&self, warnings: &mut Vec<String>) -> AddrServers {
        AddrServers {
            addr: self.opt.addr,
            unix: self.opt.unix.clone(),
            names: Names::build(&self.opt.shown(), &self.servers, warnings),
            servers: self.servers.clone(),
            default: self.default.clone(),
            ssl: self.ssl,
            http2: self.http2,
            proxy_protocol: self.proxy_protocol,
        }
    }
}

impl VirtualHosts {
    /// Groups the listens of every server (see the module overview). Errors are nginx's
    /// `[emerg]` cases; `[warn]` cases (conflicting server names, redefined protocol options)
    /// are kept in [`VirtualHosts::warnings`]. Servers with no `listen` are not reachable here:
    /// the loader fills in nginx's default listen.
    pub fn new(http: &HttpConf) -> Result<Self, VhostError> {
        let mut warnings = Vec::new();
        // (port, is IPv6, QUIC, UNIX-domain path) → addresses in order of first appearance: TCP
        // and UDP sockets of one port are apart, as nginx keys its ports by socket type; each
        // UNIX-domain path is a "port" of its own, with one address.
        type PortKey = (u16, bool, bool, Option<Arc<str>>);
        let mut ports: Vec<(PortKey, Vec<AddrBuild>)> = Vec::new();
        for server in &http.servers {
            for l in &server.listen {
                let key = (l.addr.port(), l.addr.is_ipv6(), l.quic, l.unix.clone());
                let pi = match ports.iter().position(|(k, _)| *k == key) {
                    Some(pi) => pi,
                    None => {
                        ports.push((key, Vec::new()));
                        ports.len() - 1
                    }
                };
                let addrs = &mut ports[pi].1;
                match addrs.iter_mut().find(|a| same_addr(&a.opt, l)) {
                    Some(a) => a.add(server, l, &mut warnings)?,
                    None => addrs.push(AddrBuild::new(server, l)),
                }
            }
        }

        let mut sockets = Vec::new();
        let mut groups = Vec::new();
        for (_, addrs) in &ports {
            let wildcard = addrs
                .iter()
                .position(|a| a.opt.unix.is_none() && a.opt.addr.ip().is_unspecified());
            // Explicitly bound addresses first, the wildcard last, as nginx sorts them.
            let mut shared = Vec::new();
            for (i, a) in addrs.iter().enumerate() {
                if Some(i) == wildcard {
                    continue;
                }
                let served = a.finish(&mut warnings);
                if wildcard.is_some() && !a.opt_set {
                    shared.push((a, served));
                } else {
                    sockets.push(socket_of(a, &[]));
                    groups.push(SocketGroup {
                        specific: Vec::new(),
                        own: served,
                    });
                }
            }
            if let Some(w) = wildcard {
                let a = &addrs[w];
                let own = a.finish(&mut warnings);
                let peers: Vec<&AddrBuild> = shared.iter().map(|(b, _)| *b).collect();
                sockets.push(socket_of(a, &peers));
                groups.push(SocketGroup {
                    specific: shared.into_iter().map(|(_, s)| s).collect(),
                    own,
                });
            }
        }
        Ok(VirtualHosts {
            sockets,
            groups,
            warnings,
        })
    }

    /// Sockets to bind: one per distinct port and family when a wildcard address listens on it
    /// (specific addresses on that port are then served from the wildcard socket, chosen by the
    /// connection's local address, as nginx does without `bind`), else one per address.
    pub fn sockets(&self) -> &[ListenSocket] {
        &self.sockets
    }

    /// For a connection accepted on socket `socket` (an index into [`VirtualHosts::sockets`])
    /// with local address `local`: the set of servers.
    ///
    /// # Panics
    /// If `socket` is not an index into [`VirtualHosts::sockets`] (a caller bug, never input).
    pub fn addr_servers(&self, socket: usize, local: SocketAddr) -> &AddrServers {
        let group = &self.groups[socket];
        let ip: IpAddr = local.ip();
        group
            .specific
            .iter()
            .find(|a| a.addr.ip() == ip)
            .unwrap_or(&group.own)
    }

    /// `[warn]` lines in nginx's words (without level and prefix), e.g.
    /// `conflicting server name "example.com" on 0.0.0.0:80, ignored`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// The socket for address `a`, also serving `peers` (specific addresses under a wildcard).
fn socket_of(a: &AddrBuild, peers: &[&AddrBuild]) -> ListenSocket {
    let l = &a.opt;
    ListenSocket {
        addr: l.addr,
        unix: l.unix.clone(),
        ssl: a.ssl || peers.iter().any(|p| p.ssl),
        http2: a.http2 || peers.iter().any(|p| p.http2),
        reuseport: l.reuseport,
        backlog: l.backlog,
        fastopen: l.fastopen,
        deferred: l.deferred,
        ipv6only: l.ipv6only,
        tuning: l.tuning,
        quic: l.quic,
        pos: l.pos.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::declare::defaults_conf;
    use crate::conf::directives::srv_directives;
    use crate::conf::locate::fixtures::{location, pos};
    use crate::conf::model::{Locations, SocketConf};
    use std::time::Duration;

    fn listen(addr: &str, line: usize) -> Listen {
        Listen::new(addr.parse().expect("test address parses"), pos(line))
    }

    fn server(line: usize, listen: Vec<Listen>, names: Vec<ServerName>) -> Arc<ServerConf> {
        Arc::new(srv_directives!(defaults_conf! ServerConf {
            pos: pos(line),
            listen,
            server_names: names,
            name_captures: Vec::new(),
            server_name: String::new(),
            tls: None,
            alt_svc: None,
            socket: SocketConf::default(),
            record: Default::default(),
            http2: false,
            locations: Locations::default(),
            default_location: Arc::new(location("", Locations::default())),
            vars: Default::default(),
        }))
    }

    fn exact(s: &str) -> ServerName {
        ServerName::Exact(s.to_string())
    }

    fn regex(s: &str) -> ServerName {
        ServerName::Regex(regex::Regex::new(s).expect("test regex compiles"))
    }

    fn http(servers: Vec<Arc<ServerConf>>) -> HttpConf {
        HttpConf { servers }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address parses")
    }

    /// The line of the server block `find` chose (servers are told apart by their line).
    fn chosen(a: &AddrServers, host: Option<&str>) -> usize {
        a.find(host).pos.line
    }

    #[test]
    fn normalize_host_strips_and_lowercases() {
        let ok = |h: &str| normalize_host(h).map(Cow::into_owned);
        assert_eq!(ok("Example.COM"), Ok("example.com".to_string()));
        assert_eq!(ok("example.com."), Ok("example.com".to_string()));
        assert_eq!(ok("example.com:8080"), Ok("example.com".to_string()));
        assert_eq!(ok("Example.com.:443"), Ok("example.com".to_string()));
        assert_eq!(ok("[::1]:8443"), Ok("[::1]".to_string()));
        assert_eq!(ok("[2001:DB8::1]"), Ok("[2001:db8::1]".to_string()));
        assert_eq!(ok("10.0.0.1:80"), Ok("10.0.0.1".to_string()));
        assert_eq!(ok("bücher.de"), Ok("bücher.de".to_string()));
        assert!(matches!(
            normalize_host("example.com"),
            Ok(Cow::Borrowed("example.com"))
        ));
        assert!(matches!(
            normalize_host("a.com:8X"),
            Ok(Cow::Borrowed("a.com"))
        ));
    }

    #[test]
    fn normalize_host_refuses_what_nginx_refuses() {
        assert_eq!(normalize_host("a..b"), Err(InvalidHost::ConsecutiveDots));
        assert_eq!(
            normalize_host("a.com:8..0"),
            Err(InvalidHost::ConsecutiveDots)
        );
        assert_eq!(normalize_host("a/b"), Err(InvalidHost::Separator));
        assert_eq!(normalize_host("a\\b"), Err(InvalidHost::Separator));
        assert_eq!(normalize_host("a\0b"), Err(InvalidHost::Control));
        assert_eq!(normalize_host("a b"), Err(InvalidHost::Control));
        assert_eq!(normalize_host("a\x7f"), Err(InvalidHost::Control));
        assert_eq!(normalize_host(".example.com"), Err(InvalidHost::LeadingDot));
        assert_eq!(normalize_host("."), Err(InvalidHost::LeadingDot));
        assert_eq!(normalize_host(""), Err(InvalidHost::Empty));
        assert_eq!(normalize_host(":80"), Err(InvalidHost::Empty));
        assert_eq!(
            InvalidHost::Empty.to_string(),
            "client sent invalid host header"
        );
    }

    #[test]
    fn absolute_form_host_as_nginx_parser() {
        for ok in [
            "example.com",
            "Example.COM.:8080",
            "a-b.c:",
            "10.0.0.1:80",
            "[::1]",
            "[::ffff:12.30.67.89]:4321",
            "[v1.fe80::a+en1]",
            "",
        ] {
            assert!(absolute_form_host_ok(ok), "{ok:?}");
        }
        for bad in [
            "example.com.:1.2",
            "[abcd::ef98:0:7654:321].",
            "[abcd::ef98:0:7654:321].:98",
            "extra[abcd::ef98:0:7654:321]",
            "[abcd\\::ef98:0:7654:321/]:12",
            "[::1",
            "[::1]x",
            "a_b.com",
            "user@example.com",
            "a b",
            "a\0b",
            "exa\u{e9}mple.com",
            "a.com:80:80",
            "a.com:-1",
            "[[::1]]",
            "[::1]]",
        ] {
            assert!(!absolute_form_host_ok(bad), "{bad:?}");
        }
    }

    /// Servers on `0.0.0.0:80`, one per kind of name; their lines name them in assertions.
    fn named_servers() -> VirtualHosts {
        let l = |line| vec![listen("0.0.0.0:80", line)];
        let servers = vec![
            server(1, l(1), vec![exact("")]),
            server(2, l(2), vec![exact("www.example.com")]),
            server(
                3,
                l(3),
                vec![ServerName::LeadingWildcard(".example.com".into())],
            ),
            server(
                4,
                l(4),
                vec![ServerName::LeadingWildcard(".www.example.com".into())],
            ),
            server(
                5,
                l(5),
                vec![ServerName::TrailingWildcard("www.example.".into())],
            ),
            server(6, l(6), vec![regex(r"^www\d+\.example\.net$")]),
            server(7, l(7), vec![regex(r"^www1\."), regex(r"\.org$")]),
            server(8, l(8), vec![ServerName::TrailingWildcard("www.".into())]),
            server(9, l(9), vec![exact("mixed.example.com")]),
        ];
        VirtualHosts::new(&http(servers)).expect("valid")
    }

    #[test]
    fn server_name_priority() {
        let v = named_servers();
        assert_eq!(v.sockets().len(), 1);
        let a = v.addr_servers(0, addr("192.0.2.1:80"));
        assert_eq!(chosen(a, Some("www.example.com")), 2, "exact");
        assert_eq!(chosen(a, Some("WWW.Example.COM.:80")), 2, "case, dot, port");
        assert_eq!(
            chosen(a, Some("mixed.example.com")),
            9,
            "exact beats wildcard"
        );
        assert_eq!(chosen(a, Some("a.example.com")), 3, "leading wildcard");
        assert_eq!(
            chosen(a, Some("a.b.example.com")),
            3,
            "leading wildcard, deeper"
        );
        assert_eq!(
            chosen(a, Some("a.www.example.com")),
            4,
            "longest leading wildcard"
        );
        assert_eq!(
            chosen(a, Some("www.x.example.com")),
            3,
            "leading beats trailing"
        );
        assert_eq!(
            chosen(a, Some("www.example.org")),
            5,
            "longest trailing wildcard"
        );
        assert_eq!(chosen(a, Some("www.other.org")), 8, "trailing beats regex");
        assert_eq!(
            chosen(a, Some("www1.example.net")),
            6,
            "first regex in order"
        );
        assert_eq!(chosen(a, Some("www1.foo")), 7, "a later regex");
        assert_eq!(chosen(a, Some("shop.org")), 7, "second regex of a server");
        assert_eq!(
            chosen(a, Some("example.com")),
            1,
            "*.example.com needs a label"
        );
        assert_eq!(chosen(a, Some("www.")), 1, "www.* needs more after the dot");
        assert_eq!(
            chosen(a, Some("unknown.test")),
            1,
            "default: the first server"
        );
        assert_eq!(chosen(a, None), 1, "no Host: server_name \"\"");
        assert_eq!(chosen(a, Some("a..b")), 1, "invalid: default");
        assert!(v.warnings().is_empty(), "{:?}", v.warnings());
    }

    #[test]
    fn default_server_flag_and_empty_name() {
        let mut d = listen("0.0.0.0:80", 20);
        d.default_server = true;
        let v = VirtualHosts::new(&http(vec![
            server(10, vec![listen("0.0.0.0:80", 10)], vec![exact("a.test")]),
            server(20, vec![d], vec![exact("b.test")]),
            server(30, vec![listen("0.0.0.0:80", 30)], vec![exact("")]),
        ]))
        .expect("valid");
        let a = v.addr_servers(0, addr("127.0.0.1:80"));
        assert_eq!(a.default_server().pos.line, 20);
        assert_eq!(chosen(a, Some("nobody.test")), 20);
        assert_eq!(chosen(a, Some("a.test")), 10);
        assert_eq!(
            chosen(a, None),
            30,
            "server_name \"\" takes requests without Host"
        );
        assert_eq!(a.servers().len(), 3);
    }

    #[test]
    fn a_lone_server_answers_every_name() {
        let v = VirtualHosts::new(&http(vec![server(
            1,
            vec![listen("0.0.0.0:80", 1)],
            vec![exact("a.test"), exact("a.test")],
        )]))
        .expect("valid");
        let a = v.addr_servers(0, addr("127.0.0.1:80"));
        assert_eq!(chosen(a, Some("other.test")), 1);
        assert!(
            v.warnings().is_empty(),
            "nginx checks names only with 2+ servers"
        );
    }

    #[test]
    fn wildcard_and_specific_share_one_socket_per_family() {
        let v = VirtualHosts::new(&http(vec![
            server(
                1,
                vec![listen("0.0.0.0:80", 1), listen("[::]:80", 2)],
                vec![],
            ),
            server(
                3,
                vec![listen("10.0.0.1:80", 3), listen("[::1]:80", 4)],
                vec![exact("x.test")],
            ),
            server(5, vec![listen("127.0.0.1:8080", 5)], vec![]),
        ]))
        .expect("valid");
        let socks: Vec<SocketAddr> = v.sockets().iter().map(|s| s.addr).collect();
        assert_eq!(
            socks,
            vec![addr("0.0.0.0:80"), addr("[::]:80"), addr("127.0.0.1:8080")]
        );
        assert!(v.sockets()[1].ipv6only);
        // Chosen by the connection's local address.
        assert_eq!(
            v.addr_servers(0, addr("10.0.0.1:80"))
                .default_server()
                .pos
                .line,
            3
        );
        assert_eq!(
            v.addr_servers(0, addr("10.0.0.1:80")).addr(),
            addr("10.0.0.1:80")
        );
        assert_eq!(
            v.addr_servers(0, addr("10.0.0.2:80"))
                .default_server()
                .pos
                .line,
            1
        );
        assert_eq!(
            v.addr_servers(1, addr("[::1]:80"))
                .default_server()
                .pos
                .line,
            3
        );
        assert_eq!(
            v.addr_servers(1, addr("[::2]:80"))
                .default_server()
                .pos
                .line,
            1
        );
        // A specific address only sees the servers that listen on it, not the wildcard's.
        assert_eq!(v.addr_servers(0, addr("10.0.0.1:80")).servers().len(), 1);
        assert_eq!(
            v.addr_servers(2, addr("127.0.0.1:8080"))
                .default_server()
                .pos
                .line,
            5
        );
    }

    #[test]
    fn specific_addresses_without_wildcard_get_their_own_sockets() {
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![listen("10.0.0.1:80", 1)], vec![]),
            server(2, vec![listen("10.0.0.2:80", 2)], vec![]),
        ]))
        .expect("valid");
        assert_eq!(v.sockets().len(), 2);
        assert_eq!(
            v.addr_servers(1, addr("10.0.0.2:80"))
                .default_server()
                .pos
                .line,
            2
        );
    }

    #[test]
    fn socket_options_imply_a_socket_of_its_own() {
        let mut opts = listen("10.0.0.1:80", 2);
        opts.backlog = 4096;
        let mut fo = listen("0.0.0.0:80", 1);
        fo.fastopen = Some(256);
        fo.reuseport = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![fo], vec![]),
            server(2, vec![opts], vec![]),
        ]))
        .expect("valid");
        let socks = v.sockets();
        assert_eq!(socks.len(), 2);
        assert_eq!(socks[0].addr, addr("10.0.0.1:80"), "bound addresses first");
        assert_eq!(socks[0].backlog, 4096);
        assert_eq!(socks[1].addr, addr("0.0.0.0:80"));
        assert_eq!(socks[1].fastopen, Some(256));
        assert!(socks[1].reuseport);
        assert_eq!(socks[1].pos.line, 1);
    }

    #[test]
    fn options_come_from_the_listen_that_set_them() {
        let mut rp = listen("0.0.0.0:443", 2);
        rp.reuseport = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![listen("0.0.0.0:443", 1)], vec![exact("a")]),
            server(2, vec![rp], vec![exact("b")]),
        ]))
        .expect("valid");
        assert!(v.sockets()[0].reuseport);
        assert_eq!(v.sockets()[0].pos.line, 2);
        assert_eq!(
            v.addr_servers(0, addr("1.2.3.4:443"))
                .default_server()
                .pos
                .line,
            1
        );
    }

    #[test]
    fn ssl_is_per_address_and_any_listen_turns_it_on() {
        let mut s = listen("0.0.0.0:443", 1);
        s.ssl = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![s], vec![exact("a")]),
            server(2, vec![listen("0.0.0.0:443", 2)], vec![exact("b")]),
            server(3, vec![listen("10.0.0.1:443", 3)], vec![]),
        ]))
        .expect("valid");
        assert_eq!(v.sockets().len(), 1);
        assert!(v.sockets()[0].ssl);
        let wild = v.addr_servers(0, addr("10.0.0.9:443"));
        assert!(wild.ssl(), "ssl on the address for every server on it");
        assert!(!wild.http2());
        assert!(!v.addr_servers(0, addr("10.0.0.1:443")).ssl());
    }

    #[test]
    fn http2_from_listen_or_server() {
        let mut h = listen("0.0.0.0:443", 1);
        h.http2 = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![h], vec![]),
            server(2, vec![listen("0.0.0.0:8443", 2)], vec![]),
        ]))
        .expect("valid");
        let a = v.addr_servers(0, addr("127.0.0.1:443"));
        assert!(a.http2() && v.sockets()[0].http2);
        assert!(a.offers_h2(a.default_server()));
        let b = v.addr_servers(1, addr("127.0.0.1:8443"));
        assert!(!b.offers_h2(b.default_server()));
        let mut on = server(3, vec![], vec![]);
        Arc::get_mut(&mut on).expect("unique").http2 = true;
        assert!(b.offers_h2(&on));
    }

    #[test]
    fn duplicate_default_server_is_an_error() {
        let mut d1 = listen("0.0.0.0:80", 3);
        d1.default_server = true;
        let mut d2 = listen("0.0.0.0:80", 12);
        d2.default_server = true;
        let err = VirtualHosts::new(&http(vec![
            server(1, vec![d1], vec![]),
            server(10, vec![d2], vec![]),
        ]))
        .expect_err("two default servers");
        assert_eq!(
            err.to_string(),
            "a duplicate default server for 0.0.0.0:80 in /etc/firstbyte/test.conf:12"
        );
        // Different ports each have their own default.
        let mut d3 = listen("0.0.0.0:81", 12);
        d3.default_server = true;
        let mut d4 = listen("0.0.0.0:80", 3);
        d4.default_server = true;
        assert!(VirtualHosts::new(&http(vec![
            server(1, vec![d4], vec![]),
            server(10, vec![d3], vec![]),
        ]))
        .is_ok());
    }

    #[test]
    fn duplicate_listen_options_is_an_error() {
        let mut a = listen("[::]:443", 3);
        a.reuseport = true;
        let mut b = listen("[::]:443", 9);
        b.backlog = 1024;
        let err = VirtualHosts::new(&http(vec![
            server(1, vec![a], vec![]),
            server(8, vec![b], vec![]),
        ]))
        .expect_err("options twice");
        assert_eq!(
            err.to_string(),
            "duplicate listen options for [::]:443 in /etc/firstbyte/test.conf:9"
        );
    }

    #[test]
    fn duplicate_listen_in_one_server_is_an_error() {
        let err = VirtualHosts::new(&http(vec![server(
            1,
            vec![listen("0.0.0.0:80", 2), listen("0.0.0.0:80", 3)],
            vec![],
        )]))
        .expect_err("same listen twice");
        assert_eq!(
            err,
            VhostError::DuplicateListen {
                addr: "0.0.0.0:80".into(),
                pos: pos(3)
            }
        );
        assert_eq!(
            err.to_string(),
            "a duplicate listen 0.0.0.0:80 in /etc/firstbyte/test.conf:3"
        );
    }

    #[test]
    fn conflicting_server_names_warn_and_the_first_wins() {
        let l = |line| vec![listen("0.0.0.0:80", line)];
        let v = VirtualHosts::new(&http(vec![
            server(1, l(1), vec![exact("example.com")]),
            server(
                2,
                l(2),
                vec![
                    exact("example.com"),
                    ServerName::LeadingWildcard(".a.test".into()),
                ],
            ),
            server(3, l(3), vec![ServerName::LeadingWildcard(".a.test".into())]),
            server(4, l(4), vec![]),
        ]))
        .expect("valid");
        assert_eq!(
            v.warnings(),
            [
                "conflicting server name \"example.com\" on 0.0.0.0:80, ignored",
                "conflicting server name \"*.a.test\" on 0.0.0.0:80, ignored",
            ]
        );
        let a = v.addr_servers(0, addr("127.0.0.1:80"));
        assert_eq!(chosen(a, Some("example.com")), 1);
        assert_eq!(chosen(a, Some("x.a.test")), 2);
        // Two servers without a name both claim "": nginx's familiar warning.
        let v = VirtualHosts::new(&http(vec![
            server(1, l(1), vec![exact("")]),
            server(2, l(2), vec![exact("")]),
        ]))
        .expect("valid");
        assert_eq!(
            v.warnings(),
            ["conflicting server name \"\" on 0.0.0.0:80, ignored"]
        );
    }

    #[test]
    fn protocol_options_redefined_warns_as_nginx() {
        let mut s = listen("0.0.0.0:443", 1);
        s.ssl = true;
        let mut h = listen("0.0.0.0:443", 7);
        h.http2 = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![s], vec![exact("a")]),
            server(6, vec![h], vec![exact("b")]),
        ]))
        .expect("valid");
        assert_eq!(
            v.warnings(),
            ["protocol options redefined for 0.0.0.0:443 in /etc/firstbyte/test.conf:7"]
        );
        let a = v.addr_servers(0, addr("127.0.0.1:443"));
        assert!(a.ssl() && a.http2());
        // The same options everywhere: silent.
        let mut s2 = listen("0.0.0.0:443", 7);
        s2.ssl = true;
        let mut s1 = listen("0.0.0.0:443", 1);
        s1.ssl = true;
        let v = VirtualHosts::new(&http(vec![
            server(1, vec![s1], vec![exact("a")]),
            server(6, vec![s2], vec![exact("b")]),
        ]))
        .expect("valid");
        assert!(v.warnings().is_empty());
    }

    #[test]
    fn no_servers_no_sockets() {
        let v = VirtualHosts::new(&http(vec![])).expect("valid");
        assert!(v.sockets().is_empty());
        let v = VirtualHosts::new(&http(vec![server(1, vec![], vec![])])).expect("valid");
        assert!(v.sockets().is_empty());
    }
}
