//! Choosing an upstream server: nginx's balancing methods with `max_fails` and
//! `fail_timeout`.
//!
//! Plain code: the caller passes the time and the request's key in and reports each
//! attempt's outcome, so tests drive it without sockets or sleeps.
//! - Round robin (the default) is nginx's smooth weighted one: each pick adds every
//!   available peer's weight to its running score and takes the highest, which then pays the
//!   total back (`ngx_http_upstream_get_peer`): weights 5:1:1 give `a a b a c a a`.
//! - `least_conn`: the fewest active connections per weight unit; ties by round robin.
//! - `ip_hash`: nginx's hash of the client's first three IPv4 octets (all 16 of IPv6),
//!   `h = (h * 113 + byte) % 6271` from 89, walked over the weights.
//! - `hash KEY`: `(crc32([REHASH] KEY) >> 16) & 0x7fff` added up per try (Cache::Memcached's
//!   formula, as nginx). `hash KEY consistent`: ketama, 160 points per weight unit, each
//!   `crc32(HOST \0 PORT PREV_HASH)` of the server as written, so a key maps to the server
//!   nginx would pick for the same `server` lines.
//! - `random [two [least_conn]]`: a peer drawn at random by weight; `two` draws two distinct
//!   available ones and takes the one with fewer active connections per weight unit
//!   (`random.rs`).
//! - A hash or random draw that meets 20 unavailable peers falls back to round robin (as
//!   nginx).
//!
//! A peer that failed `max_fails` times within `fail_timeout` rests for `fail_timeout`; a
//! success clears its count. A group of one server is never taken out (as nginx). `backup`
//! servers are used only when no primary one is available.
//!
//! The peers of a `server NAME resolve` line change at run time ([`Balancer::replace`], in
//! `resolved.rs`): each peer has an id that stays while it does, so a request in flight
//! reports its outcome to the right peer (or to none, once that peer is gone).

use std::time::{Duration, Instant};

use crate::conf::model::{BalanceMethod, PeerAddr, ResolveServer, UpstreamServer};

mod random;
mod resolved;

pub use resolved::Resolved;

/// One server's state.
#[derive(Debug, Clone)]
struct Peer {
    /// Stays while the peer does (its index may change when a resolved line's peers do).
    id: usize,
    addr: PeerAddr,
    /// The `server NAME resolve` line (index into `templates`) it came from, if any.
    host: Option<usize>,
    /// The SRV record's target name it came from (`service=`).
    srv_name: Option<String>,
    weight: i64,
    current: i64,
    fails: u32,
    /// nginx's `accessed`: the last failure.
    accessed: Option<Instant>,
    /// nginx's `checked`: the last failure, or a pick once `fail_timeout` had passed since.
    checked: Option<Instant>,
    max_fails: u32,
    fail_timeout: Duration,
    backup: bool,
    down: bool,
    /// Active connections (least_conn, `max_conns`).
    conns: u64,
    /// `max_conns` (0: no limit).
    max_conns: u64,
    /// Index of its `server` line (one line may give several addresses).
    server: usize,
}

/// The balancing method, prepared.
#[derive(Debug, Clone)]
enum Method {
    RoundRobin,
    LeastConn,
    IpHash,
    Hash,
    /// Ketama points, sorted by hash: (hash, server line).
    Consistent(Vec<(u32, usize)>),
    /// `random [two]`: each peer's first weight unit on the line `0..total` of all weights.
    Random {
        two: bool,
        starts: Vec<u64>,
        total: u64,
    },
}

/// The state of one upstream group.
#[derive(Debug, Clone)]
pub struct Balancer {
    peers: Vec<Peer>,
    method: Method,
    /// State of the random draws of `random` (xorshift, seeded from the system's generator).
    rng: u64,
    /// The `server NAME resolve` lines, whose peers [`Balancer::replace`] sets.
    templates: Vec<ResolveServer>,
    /// Server lines of the templates (for `hash ... consistent` and `Peer::server`).
    template_lines: Vec<usize>,
    /// Whether the method has backup servers (round robin, `least_conn`): SRV records of a
    /// higher priority number become backup peers then, and are left out otherwise.
    backups: bool,
    /// Bumped at each change of the peer list: an [`Attempt`] remaps what it tried.
    gen: u64,
    next_id: usize,
}

/// One request's walk over the peers: those tried, and the hash state of `ip_hash`/`hash`.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// Peers tried so far (their indices in the list of generation `gen`).
    tried: Vec<usize>,
    /// Their ids, in order.
    ids: Vec<usize>,
    gen: u64,
    key: Vec<u8>,
    hash: u64,
    rehash: u32,
    hash_tries: u32,
    begun: bool,
}

impl Attempt {
    /// A request whose balancing key is `key` (`ip_hash`: the client's address bytes;
    /// `hash`: the evaluated key; ignored otherwise).
    pub fn new(key: Vec<u8>) -> Self {
        Attempt {
            key,
            ..Attempt::default()
        }
    }

    /// How many peers this request tried.
    pub fn tries(&self) -> usize {
        self.ids.len()
    }

    /// The last try does not count (a pooled connection the upstream had closed).
    pub fn untry(&mut self) {
        self.ids.pop();
        self.tried.pop();
    }
}

/// The `ip_hash` key of a client address: the first three octets of IPv4 (a /24), all
/// sixteen of IPv6 (nginx; an IPv4-mapped IPv6 address counts as IPv4).
pub fn ip_hash_key(ip: std::net::IpAddr) -> Vec<u8> {
    match ip {
        std::net::IpAddr::V4(v4) => v4.octets()[..3].to_vec(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets()[..3].to_vec(),
            None => v6.octets().to_vec(),
        },
    }
}

fn crc32(parts: &[&[u8]]) -> u32 {
    let mut c = flate2::Crc::new();
    for p in parts {
        c.update(p);
    }
    c.sum()
}

/// Ketama points of the servers as written, as `ngx_http_upstream_init_chash`.
fn ketama(servers: &[(String, i64)]) -> Vec<(u32, usize)> {
    let mut points = Vec::new();
    for (idx, (name, weight)) in servers.iter().enumerate() {
        let (host, port) = if name.len() >= 5 && name[..5].eq_ignore_ascii_case("unix:") {
            (&name.as_bytes()[5..], &b""[..])
        } else {
            let b = name.as_bytes();
            let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
            if digits < b.len() && b[b.len() - digits - 1] == b':' {
                (&b[..b.len() - digits - 1], &b[b.len() - digits..])
            } else {
                (b, &b""[..])
            }
        };
        let mut prev = 0u32;
        for _ in 0..weight.saturating_mul(160) {
            let h = crc32(&[host, b"\0", port, &prev.to_le_bytes()]);
            points.push((h, idx));
            prev = h;
        }
    }
    // nginx sorts by hash only (qsort, not stable) and keeps the first of equal hashes.
    points.sort_by_key(|p| p.0);
    points.dedup_by_key(|p| p.0);
    points
}

impl Balancer {
    /// A round-robin balancer over `servers`, in their order.
    pub fn new(servers: &[UpstreamServer]) -> Self {
        Self::with_method(servers, &BalanceMethod::RoundRobin)
    }

    /// A balancer over `servers` with `method`.
    pub fn with_method(servers: &[UpstreamServer], method: &BalanceMethod) -> Self {
        Self::group(servers, &[], method)
    }

    /// The balancer of an `upstream` block: its `servers`, and the `server NAME resolve`
    /// lines `resolve`, which have no peers until [`Balancer::replace`] gives them some.
    pub fn group(
        servers: &[UpstreamServer],
        resolve: &[ResolveServer],
        method: &BalanceMethod,
    ) -> Self {
        // Peers of one `server` line share its name; lines are numbered in file order.
        let mut lines: Vec<(String, i64)> = Vec::new();
        let mut peers = Vec::with_capacity(servers.len());
        for s in servers {
            let line = match lines.last() {
                Some((n, _)) if *n == s.name => lines.len() - 1,
                _ => {
                    lines.push((s.name.clone(), i64::from(s.weight.max(1))));
                    lines.len() - 1
                }
            };
            peers.push(Peer {
                id: peers.len(),
                addr: s.addr.clone(),
                host: None,
                srv_name: None,
                weight: i64::from(s.weight.max(1)),
                current: 0,
                fails: 0,
                accessed: None,
                checked: None,
                max_fails: s.max_fails,
                fail_timeout: s.fail_timeout,
                backup: s.backup,
                down: s.down,
                conns: 0,
                max_conns: u64::from(s.max_conns),
                server: line,
            });
        }
        let mut template_lines = Vec::with_capacity(resolve.len());
        for r in resolve {
            lines.push((r.params.name.clone(), i64::from(r.params.weight.max(1))));
            template_lines.push(lines.len() - 1);
        }
        let backups = matches!(method, BalanceMethod::RoundRobin | BalanceMethod::LeastConn);
        let method = match method {
            BalanceMethod::RoundRobin => Method::RoundRobin,
            BalanceMethod::LeastConn => Method::LeastConn,
            BalanceMethod::IpHash => Method::IpHash,
            BalanceMethod::Hash {
                consistent: false, ..
            } => Method::Hash,
            BalanceMethod::Hash {
                consistent: true, ..
            } => {
                // nginx makes points per address, but the addresses of one line give the
                // same points, which it then drops as duplicates: weight × 160 per line.
                Method::Consistent(ketama(&lines))
            }
            BalanceMethod::Random { two } => random::method(&peers, *two),
        };
        let next_id = peers.len();
        Self {
            peers,
            method,
            rng: random::seed(),
            templates: resolve.to_vec(),
            template_lines,
            backups,
            gen: 0,
            next_id,
        }
    }

    /// Equal servers with nginx's defaults at `addrs` (a `proxy_pass http://host` that
    /// resolved to several addresses).
    pub fn equal(addrs: &[PeerAddr]) -> Self {
        let servers: Vec<UpstreamServer> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| UpstreamServer {
                addr: a.clone(),
                name: i.to_string(),
                weight: 1,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                backup: false,
                down: false,
                max_conns: 0,
            })
            .collect();
        Self::new(&servers)
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether there are no servers.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// How many servers one request may try: those not `down` (nginx's `peer.tries`).
    pub fn tries(&self) -> usize {
        self.peers.iter().filter(|p| !p.down).count().max(1)
    }

    fn available(&self, i: usize, now: Instant) -> bool {
        let p = &self.peers[i];
        if p.down || (p.max_conns > 0 && p.conns >= p.max_conns) {
            return false;
        }
        if self.peers.len() == 1 || p.max_fails == 0 || p.fails < p.max_fails {
            return true;
        }
        match p.checked {
            Some(t) => now.saturating_duration_since(t) > p.fail_timeout,
            None => true,
        }
    }

    /// The next server to try for `a` (recorded in `a.tried`, its connection counted until
    /// [`Balancer::release`]). None: no live upstreams.
    pub fn pick(&mut self, now: Instant, a: &mut Attempt) -> Option<usize> {
        if a.gen != self.gen {
            // The peer list changed since this request's last try: what it tried, now.
            a.tried = a.ids.iter().filter_map(|id| self.index_of(*id)).collect();
            a.gen = self.gen;
        }
        let primary = self.peers.iter().filter(|p| !p.backup).count();
        let hashed = match &self.method {
            Method::IpHash if primary >= 2 => self.pick_ip_hash(now, a),
            Method::Hash if primary >= 2 && !a.key.is_empty() => self.pick_hash(now, a),
            Method::Consistent(_) if primary >= 2 && !a.key.is_empty() => {
                self.pick_consistent(now, a)
            }
            Method::Random { .. } if self.peers.len() >= 2 => self.pick_random(now, a),
            _ => None,
        };
        let least = matches!(self.method, Method::LeastConn);
        let i = hashed.or_else(|| {
            self.pick_among(now, &a.tried, false, least)
                .or_else(|| self.pick_among(now, &a.tried, true, least))
        })?;
        a.tried.push(i);
        a.ids.push(self.peers[i].id);
        let p = &mut self.peers[i];
        p.conns += 1;
        // nginx: a pick once fail_timeout has passed opens a new window, so that a success
        // then clears the failures (and a failure takes the peer out again at once).
        if p.checked
            .is_none_or(|c| now.saturating_duration_since(c) > p.fail_timeout)
        {
            p.checked = Some(now);
        }
        Some(i)
    }

    /// Whether peer `i` may take this request (hash methods' test).
    fn usable(&self, i: usize, now: Instant, a: &Attempt) -> bool {
        !a.tried.contains(&i) && self.available(i, now)
    }

    /// The peer at weight offset `w` (peers in order, each `weight` wide).
    fn by_weight(&self, mut w: u64) -> usize {
        for (i, p) in self.peers.iter().enumerate() {
            let pw = p.weight as u64;
            if w < pw {
                return i;
            }
            w -= pw;
        }
        self.peers.len() - 1
    }

    fn total_weight(&self) -> u64 {
        self.peers
            .iter()
            .map(|p| p.weight as u64)
            .sum::<u64>()
            .max(1)
    }

    fn pick_ip_hash(&mut self, now: Instant, a: &mut Attempt) -> Option<usize> {
        let total = self.total_weight();
        if !a.begun {
            a.begun = true;
            a.hash = 89;
        }
        let mut hash = a.hash;
        loop {
            for b in &a.key {
                hash = (hash * 113 + u64::from(*b)) % 6271;
            }
            let i = self.by_weight(hash % total);
            if self.usable(i, now, a) {
                a.hash = hash;
                return Some(i);
            }
            a.hash_tries += 1;
            if a.hash_tries > 20 {
                return None;
            }
        }
    }

    fn pick_hash(&mut self, now: Instant, a: &mut Attempt) -> Option<usize> {
        let total = self.total_weight();
        loop {
            let rehash = a.rehash.to_string();
            let prefix: &[u8] = if a.rehash > 0 { rehash.as_bytes() } else { b"" };
            let h = crc32(&[prefix, &a.key]);
            a.hash += u64::from((h >> 16) & 0x7fff);
            a.rehash += 1;
            let i = self.by_weight(a.hash % total);
            if self.usable(i, now, a) {
                return Some(i);
            }
            a.hash_tries += 1;
            if a.hash_tries > 20 {
                return None;
            }
        }
    }

    fn pick_consistent(&mut self, now: Instant, a: &mut Attempt) -> Option<usize> {
        let Method::Consistent(points) = &self.method else {
            return None;
        };
        if points.is_empty() {
            return None;
        }
        if !a.begun {
            a.begun = true;
            let h = crc32(&[&a.key]);
            // The first point at or after the key's hash (nginx's find_chash_point).
            a.hash = points.partition_point(|p| p.0 < h) as u64;
        }
        loop {
            let server = points[(a.hash % points.len() as u64) as usize].1;
            // Among the addresses of that server line: smooth weighted round robin.
            let mut best: Option<usize> = None;
            let mut total = 0i64;
            for i in 0..self.peers.len() {
                if self.peers[i].server != server || !self.usable(i, now, a) {
                    continue;
                }
                let p = &mut self.peers[i];
                p.current += p.weight;
                total += p.weight;
                let cur = p.current;
                if best.is_none_or(|b| cur > self.peers[b].current) {
                    best = Some(i);
                }
            }
            if let Some(b) = best {
                self.peers[b].current -= total;
                return Some(b);
            }
            a.hash += 1;
            a.hash_tries += 1;
            if a.hash_tries > 20 {
                return None;
            }
        }
    }

    fn pick_among(
        &mut self,
        now: Instant,
        tried: &[usize],
        backup: bool,
        least: bool,
    ) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.peers.len())
            .filter(|&i| {
                self.peers[i].backup == backup && !tried.contains(&i) && self.available(i, now)
            })
            .collect();
        // least_conn: only the peers with the fewest connections per weight unit compete.
        let fewest = if least {
            let ratio = |i: usize| (self.peers[i].conns, self.peers[i].weight);
            let lowest = candidates.iter().copied().reduce(|b, i| {
                let (ci, wi) = ratio(i);
                let (cb, wb) = ratio(b);
                if u128::from(ci) * (wb as u128) < u128::from(cb) * (wi as u128) {
                    i
                } else {
                    b
                }
            });
            match lowest {
                Some(l) => {
                    let (cl, wl) = ratio(l);
                    candidates
                        .into_iter()
                        .filter(|&i| {
                            let (ci, wi) = ratio(i);
                            u128::from(ci) * (wl as u128) == u128::from(cl) * (wi as u128)
                        })
                        .collect()
                }
                None => Vec::new(),
            }
        } else {
            candidates
        };
        let mut best: Option<usize> = None;
        let mut total = 0i64;
        for i in fewest {
            let w = self.peers[i].weight;
            self.peers[i].current += w;
            total += w;
            let cur = self.peers[i].current;
            if best.is_none_or(|b| cur > self.peers[b].current) {
                best = Some(i);
            }
        }
        let b = best?;
        self.peers[b].current -= total;
        Some(b)
    }

    /// The id of the peer at index `i` (what [`Balancer::release`], [`Balancer::failed`]
    /// and [`Balancer::succeeded`] take).
    pub fn id(&self, i: usize) -> usize {
        self.peers.get(i).map_or(usize::MAX, |p| p.id)
    }

    /// The address of the peer at index `i`.
    pub fn addr(&self, i: usize) -> Option<&PeerAddr> {
        self.peers.get(i).map(|p| &p.addr)
    }

    /// Every peer's address, in order.
    pub fn addrs(&self) -> Vec<PeerAddr> {
        self.peers.iter().map(|p| p.addr.clone()).collect()
    }

    /// The index of the peer with this id; None once it is gone.
    fn index_of(&self, id: usize) -> Option<usize> {
        match self.peers.get(id) {
            Some(p) if p.id == id => Some(id),
            _ => self.peers.iter().position(|p| p.id == id),
        }
    }

    fn by_id(&mut self, id: usize) -> Option<&mut Peer> {
        let i = self.index_of(id)?;
        self.peers.get_mut(i)
    }

    /// The connection to peer `id` that [`Balancer::pick`] counted has ended.
    pub fn release(&mut self, id: usize) {
        if let Some(p) = self.by_id(id) {
            p.conns = p.conns.saturating_sub(1);
        }
    }

    /// Reports a failed attempt (connect error, timeout, a status `proxy_next_upstream`
    /// counts) on peer `id`.
    pub fn failed(&mut self, id: usize, now: Instant) {
        if let Some(p) = self.by_id(id) {
            p.fails = p.fails.saturating_add(1);
            p.accessed = Some(now);
            p.checked = Some(now);
        }
    }

    /// Reports a successful attempt on server `i`. As nginx, it clears the failures only
    /// once a pick came after `fail_timeout` since the last failure: `max_fails` counts
    /// failures within `fail_timeout`, successes between them notwithstanding.
    pub fn succeeded(&mut self, id: usize) {
        if let Some(p) = self.by_id(id) {
            if p.accessed.is_none_or(|a| p.checked.is_some_and(|c| a < c)) {
                p.fails = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Balancer {
        /// One pick for a fresh request that already tried `tried`.
        fn pick_tried(&mut self, now: Instant, tried: &[usize]) -> Option<usize> {
            let mut a = Attempt {
                tried: tried.to_vec(),
                ..Attempt::default()
            };
            self.pick(now, &mut a)
        }
    }

    fn named(name: &str, weight: u32) -> UpstreamServer {
        let mut s = server(weight, 1);
        s.name = name.into();
        s
    }

    fn key_pick(b: &mut Balancer, key: &[u8]) -> usize {
        let mut a = Attempt::new(key.to_vec());
        let i = b.pick(Instant::now(), &mut a).expect("peer");
        b.release(i);
        i
    }

    #[test]
    fn crc32_is_nginx_crc32() {
        // ngx_crc32_long("123456789"): the CRC-32 check value.
        assert_eq!(crc32(&[b"123456789"]), 0xCBF4_3926);
        assert_eq!(crc32(&[b"1234", b"56789"]), 0xCBF4_3926);
    }

    #[test]
    fn least_conn_takes_the_idlest_per_weight() {
        let mut b = Balancer::with_method(
            &[server(1, 1), server(1, 1), server(2, 1)],
            &BalanceMethod::LeastConn,
        );
        let t = Instant::now();
        let mut a = Attempt::default();
        // All idle: round robin among them by weight (2 first).
        assert_eq!(b.pick(t, &mut a), Some(2));
        let mut a = Attempt::default();
        assert_eq!(
            b.pick(t, &mut a),
            Some(0),
            "0 and 1 have 0 conns, 2 has 1/2"
        );
        let mut a = Attempt::default();
        assert_eq!(b.pick(t, &mut a), Some(1));
        // 0: 1/1, 1: 1/1, 2: 1/2 — 2 is the idlest per weight unit.
        let mut a = Attempt::default();
        assert_eq!(b.pick(t, &mut a), Some(2));
        // Now 2 has 2/2; releasing 1 makes it the idlest.
        b.release(1);
        let mut a = Attempt::default();
        assert_eq!(b.pick(t, &mut a), Some(1));
        // A plain round robin would have gone on regardless of the held connections.
        let mut rr = Balancer::new(&[server(1, 1), server(1, 1)]);
        let mut a = Attempt::default();
        assert_eq!(rr.pick(t, &mut a), Some(0));
        let mut a = Attempt::default();
        assert_eq!(rr.pick(t, &mut a), Some(1));
    }

    #[test]
    fn ip_hash_is_nginx_formula_over_the_slash_24() {
        let servers = [server(1, 1), server(1, 1), server(1, 1)];
        let mut b = Balancer::with_method(&servers, &BalanceMethod::IpHash);
        // nginx: h = 89; for each of 3 octets h = (h * 113 + o) % 6271; peer h % 3.
        let expect = |o: [u8; 3]| {
            let mut h = 89u64;
            for x in o {
                h = (h * 113 + u64::from(x)) % 6271;
            }
            (h % 3) as usize
        };
        for ip in [
            "10.0.0.1",
            "10.0.0.200",
            "192.168.7.1",
            "127.0.0.1",
            "8.8.4.4",
        ] {
            let ip: std::net::IpAddr = ip.parse().expect("ip");
            let key = ip_hash_key(ip);
            let std::net::IpAddr::V4(v4) = ip else {
                unreachable!()
            };
            let o = v4.octets();
            assert_eq!(key_pick(&mut b, &key), expect([o[0], o[1], o[2]]), "{ip}");
        }
        // Same /24: same server, every time.
        let a = key_pick(&mut b, &ip_hash_key("10.1.2.3".parse().expect("ip")));
        let c = key_pick(&mut b, &ip_hash_key("10.1.2.99".parse().expect("ip")));
        assert_eq!(a, c);
        let mapped: std::net::IpAddr = "::ffff:10.1.2.3".parse().expect("ip");
        assert_eq!(ip_hash_key(mapped), vec![10, 1, 2]);
        assert_eq!(ip_hash_key("::1".parse().expect("ip")).len(), 16);
    }

    #[test]
    fn hash_is_stable_weighted_and_moves_on_when_tried() {
        let servers = [server(1, 1), server(3, 1)];
        let mut b = Balancer::with_method(
            &servers,
            &BalanceMethod::Hash {
                key: crate::conf::vars::ComplexValue::literal("x"),
                consistent: false,
            },
        );
        // nginx: ((crc32(KEY) >> 16) & 0x7fff) % total_weight walked over the weights.
        let mut counts = [0usize; 2];
        for n in 0..400 {
            let key = format!("/item/{n}");
            let h = (u64::from(crc32(&[key.as_bytes()])) >> 16) & 0x7fff;
            let want = if h % 4 < 1 { 0 } else { 1 };
            let got = key_pick(&mut b, key.as_bytes());
            assert_eq!(got, want, "{key}");
            assert_eq!(key_pick(&mut b, key.as_bytes()), got, "stable");
            counts[got] += 1;
        }
        assert!(counts[1] > counts[0] * 2, "weight 3 against 1: {counts:?}");
        // A retry of one request goes to the other server.
        let mut a = Attempt::new(b"/item/1".to_vec());
        let t = Instant::now();
        let first = b.pick(t, &mut a).expect("first");
        let second = b.pick(t, &mut a).expect("second");
        assert_ne!(first, second);
    }

    #[test]
    fn consistent_hash_is_ketama_and_moves_few_keys() {
        let method = BalanceMethod::Hash {
            key: crate::conf::vars::ComplexValue::literal("x"),
            consistent: true,
        };
        let three = [
            named("10.0.0.1:80", 1),
            named("10.0.0.2:80", 1),
            named("10.0.0.3:80", 1),
        ];
        let mut b3 = Balancer::with_method(&three, &method);
        let Method::Consistent(points) = &b3.method else {
            panic!("ketama")
        };
        assert_eq!(points.len(), 480, "160 points per weight unit");
        // The first point of "10.0.0.1:80": crc32("10.0.0.1" \0 "80" 00 00 00 00).
        let first = crc32(&[b"10.0.0.1\x0080\0\0\0\0"]);
        assert!(points.contains(&(first, 0)));
        let mut b2 = Balancer::with_method(&three[..2], &method);
        let mut moved = 0;
        for n in 0..600 {
            let key = format!("user{n}");
            let with3 = key_pick(&mut b3, key.as_bytes());
            assert_eq!(key_pick(&mut b3, key.as_bytes()), with3, "stable");
            let with2 = key_pick(&mut b2, key.as_bytes());
            if with3 != 2 {
                // Keys of the servers that stay do not move (ketama's point).
                assert_eq!(with2, with3, "{key}");
            } else {
                moved += 1;
            }
        }
        assert!((100..=300).contains(&moved), "about a third move: {moved}");
        // Weights: weight 2 gets 320 points.
        let w = Balancer::with_method(&[named("a:1", 2), named("b:1", 1)], &method);
        let Method::Consistent(p) = &w.method else {
            panic!("ketama")
        };
        assert_eq!(p.iter().filter(|p| p.1 == 0).count(), 320);
    }

    #[test]
    fn hash_skips_failed_peers() {
        let servers = [server(1, 1), server(1, 1)];
        let mut b = Balancer::with_method(&servers, &BalanceMethod::IpHash);
        let key = ip_hash_key("10.9.9.9".parse().expect("ip"));
        let home = key_pick(&mut b, &key);
        b.failed(home, Instant::now());
        assert_ne!(
            key_pick(&mut b, &key),
            home,
            "a resting peer is passed over"
        );
    }

    fn server(weight: u32, max_fails: u32) -> UpstreamServer {
        UpstreamServer {
            addr: PeerAddr::Tcp("127.0.0.1:1".parse().expect("addr")),
            name: "a".into(),
            weight,
            max_fails,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down: false,
            max_conns: 0,
        }
    }

    /// `max_conns`: a server with that many requests in flight is passed over; with every
    /// server full there is none (nginx's "no live upstreams").
    #[test]
    fn max_conns_bounds_requests_in_flight() {
        let mut one = server(1, 1);
        one.max_conns = 1;
        let mut b = Balancer::new(&[one.clone(), one]);
        let now = Instant::now();
        let i = b.pick(now, &mut Attempt::new(vec![])).expect("first");
        let j = b.pick(now, &mut Attempt::new(vec![])).expect("second");
        assert_ne!(i, j);
        assert_eq!(b.pick(now, &mut Attempt::new(vec![])), None, "both full");
        b.release(i);
        assert_eq!(b.pick(now, &mut Attempt::new(vec![])), Some(i));
        // A single server is bounded too.
        let mut solo = server(1, 1);
        solo.max_conns = 1;
        let mut b = Balancer::new(&[solo]);
        assert!(b.pick(now, &mut Attempt::new(vec![])).is_some());
        assert_eq!(b.pick(now, &mut Attempt::new(vec![])), None);
    }

    #[test]
    fn smooth_weighted_order() {
        let mut b = Balancer::new(&[server(5, 1), server(1, 1), server(1, 1)]);
        let now = Instant::now();
        let order: Vec<usize> = (0..7)
            .map(|_| b.pick_tried(now, &[]).expect("peer"))
            .collect();
        assert_eq!(order, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn max_fails_rests_a_peer_for_fail_timeout() {
        let mut b = Balancer::new(&[server(1, 2), server(1, 2)]);
        let t0 = Instant::now();
        b.failed(0, t0);
        assert!(b.available(0, t0), "one failure of two allowed");
        b.failed(0, t0);
        assert!(!b.available(0, t0));
        for _ in 0..4 {
            assert_eq!(b.pick_tried(t0 + Duration::from_secs(1), &[]), Some(1));
        }
        let later = t0 + Duration::from_secs(11);
        assert!(b.available(0, later));
        // Back after fail_timeout: a success now clears the count...
        assert_eq!(b.pick_tried(later, &[1]), Some(0));
        b.succeeded(0);
        b.failed(0, later);
        assert!(b.available(0, later), "one failure of two again");
    }

    #[test]
    fn successes_within_fail_timeout_do_not_clear_failures() {
        // nginx's upstream.t: max_fails=3 counts the 3rd, 6th and 9th request failing,
        // with successes between them.
        let mut b = Balancer::new(&[server(1, 3), server(1, 3)]);
        let t = Instant::now();
        for _ in 0..2 {
            assert_eq!(b.pick_tried(t, &[1]), Some(0));
            b.succeeded(0);
            b.failed(0, t);
            assert!(b.available(0, t));
        }
        assert_eq!(b.pick_tried(t, &[1]), Some(0));
        b.succeeded(0);
        b.failed(0, t);
        assert!(!b.available(0, t), "three failures within fail_timeout");
    }

    #[test]
    fn tried_peers_are_skipped_and_all_down_is_none() {
        let mut b = Balancer::new(&[server(1, 1), server(1, 1)]);
        let t = Instant::now();
        let first = b.pick_tried(t, &[]).expect("one");
        let second = b.pick_tried(t, &[first]).expect("other");
        assert_ne!(first, second);
        assert_eq!(b.pick_tried(t, &[first, second]), None);
        b.failed(0, t);
        b.failed(1, t);
        assert_eq!(b.pick_tried(t, &[]), None, "no live upstreams");
    }

    #[test]
    fn single_server_never_taken_out_and_backup_last() {
        let mut one = Balancer::new(&[server(1, 1)]);
        let t = Instant::now();
        one.failed(0, t);
        assert_eq!(one.pick_tried(t, &[]), Some(0));
        let mut backup = server(1, 1);
        backup.backup = true;
        let mut b = Balancer::new(&[server(1, 1), backup]);
        assert_eq!(b.pick_tried(t, &[]), Some(0));
        assert_eq!(b.pick_tried(t, &[]), Some(0));
        b.failed(0, t);
        assert_eq!(b.pick_tried(t, &[]), Some(1));
    }
}
