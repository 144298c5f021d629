//! Choosing an upstream server: nginx's smooth weighted round-robin with `max_fails` and
//! `fail_timeout`.
//!
//! Plain code: the caller passes the time in and reports each attempt's outcome, so tests
//! drive it without sockets or sleeps. Each pick adds every available peer's weight to its
//! running score and takes the highest, which then pays the total back (nginx's
//! `ngx_http_upstream_get_peer`): weights 5:1:1 give `a a b a c a a`, not `a a a a a b c`.
//! A peer that failed `max_fails` times within `fail_timeout` rests for `fail_timeout`; a
//! success clears its count. A group of one server is never taken out (as nginx). `backup`
//! servers are used only when no primary one is available.

use std::time::{Duration, Instant};

use crate::conf::model::UpstreamServer;

/// One server's state.
#[derive(Debug, Clone)]
struct Peer {
    weight: i64,
    current: i64,
    fails: u32,
    failed_at: Option<Instant>,
    max_fails: u32,
    fail_timeout: Duration,
    backup: bool,
    down: bool,
}

/// The round-robin state of one upstream group.
#[derive(Debug, Clone)]
pub struct Balancer {
    peers: Vec<Peer>,
}

impl Balancer {
    /// A balancer over `servers`, in their order.
    pub fn new(servers: &[UpstreamServer]) -> Self {
        Self {
            peers: servers
                .iter()
                .map(|s| Peer {
                    weight: i64::from(s.weight.max(1)),
                    current: 0,
                    fails: 0,
                    failed_at: None,
                    max_fails: s.max_fails,
                    fail_timeout: s.fail_timeout,
                    backup: s.backup,
                    down: s.down,
                })
                .collect(),
        }
    }

    /// `n` equal servers with nginx's defaults (a `proxy_pass http://host` that resolved to
    /// several addresses).
    pub fn equal(n: usize) -> Self {
        Self {
            peers: (0..n)
                .map(|_| Peer {
                    weight: 1,
                    current: 0,
                    fails: 0,
                    failed_at: None,
                    max_fails: 1,
                    fail_timeout: Duration::from_secs(10),
                    backup: false,
                    down: false,
                })
                .collect(),
        }
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether there are no servers.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    fn available(&self, i: usize, now: Instant) -> bool {
        let p = &self.peers[i];
        if p.down {
            return false;
        }
        if self.peers.len() == 1 || p.max_fails == 0 || p.fails < p.max_fails {
            return true;
        }
        match p.failed_at {
            Some(t) => now.saturating_duration_since(t) >= p.fail_timeout,
            None => true,
        }
    }

    /// The next server to try, skipping those in `tried` (indexes already attempted for this
    /// request). None: no live upstreams.
    pub fn pick(&mut self, now: Instant, tried: &[usize]) -> Option<usize> {
        self.pick_among(now, tried, false)
            .or_else(|| self.pick_among(now, tried, true))
    }

    fn pick_among(&mut self, now: Instant, tried: &[usize], backup: bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut total = 0i64;
        for i in 0..self.peers.len() {
            if self.peers[i].backup != backup || tried.contains(&i) || !self.available(i, now) {
                continue;
            }
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

    /// Reports a failed attempt (connect error or timeout) on server `i`.
    pub fn failed(&mut self, i: usize, now: Instant) {
        if let Some(p) = self.peers.get_mut(i) {
            p.fails = p.fails.saturating_add(1);
            p.failed_at = Some(now);
        }
    }

    /// Reports a successful attempt on server `i`.
    pub fn succeeded(&mut self, i: usize) {
        if let Some(p) = self.peers.get_mut(i) {
            p.fails = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, max_fails: u32) -> UpstreamServer {
        UpstreamServer {
            addr: "127.0.0.1:1".parse().expect("addr"),
            name: "a".into(),
            weight,
            max_fails,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down: false,
        }
    }

    #[test]
    fn smooth_weighted_order() {
        let mut b = Balancer::new(&[server(5, 1), server(1, 1), server(1, 1)]);
        let now = Instant::now();
        let order: Vec<usize> = (0..7).map(|_| b.pick(now, &[]).expect("peer")).collect();
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
            assert_eq!(b.pick(t0 + Duration::from_secs(1), &[]), Some(1));
        }
        assert!(b.available(0, t0 + Duration::from_secs(10)));
        b.succeeded(0);
        assert!(b.available(0, t0));
    }

    #[test]
    fn tried_peers_are_skipped_and_all_down_is_none() {
        let mut b = Balancer::new(&[server(1, 1), server(1, 1)]);
        let t = Instant::now();
        let first = b.pick(t, &[]).expect("one");
        let second = b.pick(t, &[first]).expect("other");
        assert_ne!(first, second);
        assert_eq!(b.pick(t, &[first, second]), None);
        b.failed(0, t);
        b.failed(1, t);
        assert_eq!(b.pick(t, &[]), None, "no live upstreams");
    }

    #[test]
    fn single_server_never_taken_out_and_backup_last() {
        let mut one = Balancer::new(&[server(1, 1)]);
        let t = Instant::now();
        one.failed(0, t);
        assert_eq!(one.pick(t, &[]), Some(0));
        let mut backup = server(1, 1);
        backup.backup = true;
        let mut b = Balancer::new(&[server(1, 1), backup]);
        assert_eq!(b.pick(t, &[]), Some(0));
        assert_eq!(b.pick(t, &[]), Some(0));
        b.failed(0, t);
        assert_eq!(b.pick(t, &[]), Some(1));
    }
}
