//! The peers of a `server NAME resolve` line, replaced when its name resolves anew (nginx's
//! `ngx_http_upstream_zone_resolve_handler`):
//! - A peer whose address is still in the answer stays, with its state (failures, active
//!   connections, round-robin score); one whose address is not is removed (requests in
//!   flight to it finish; their outcome then counts for no peer); a new address becomes a
//!   peer at the end of the list.
//! - Each answer's address takes one peer: two equal SRV records give two peers.
//! - Without `service=`, every address gets the line's port and parameters.
//! - With `service=`, each SRV record's port, and its weight unless the line sets `weight=`;
//!   a peer matches only an address of the same target name (and weight, when it comes from
//!   the record). Records of a priority number above the lowest become backup peers where
//!   the method has backups (round robin, `least_conn`) and are left out otherwise (and on a
//!   `backup` line, whose peers are backups already).

use std::net::SocketAddr;

use super::{random, Balancer, Method, Peer};
use crate::conf::model::PeerAddr;

/// One address a resolution of a `server NAME resolve` line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The address (its port is the line's unless `service=`).
    pub addr: SocketAddr,
    /// The SRV record's target name, priority and weight (`service=`); None for A/AAAA.
    pub srv: Option<(String, u16, u16)>,
}

/// What one address of an answer becomes: a peer with these fields.
struct Wanted {
    addr: SocketAddr,
    backup: bool,
    weight: i64,
    srv_name: Option<String>,
}

impl Balancer {
    /// The `server NAME resolve` lines of this group, in file order (their index is what
    /// [`Balancer::replace`] takes).
    pub fn templates(&self) -> &[crate::conf::model::ResolveServer] {
        &self.templates
    }

    /// Sets the peers of resolved line `host` to `answer` (see the module's text). An empty
    /// answer removes them all (nginx, on "Host not found"). Returns whether the peer list
    /// changed.
    pub fn replace(&mut self, host: usize, answer: &[Resolved]) -> bool {
        let Some(t) = self.templates.get(host) else {
            return false;
        };
        let service = t.service.is_some();
        let min_priority = answer
            .iter()
            .filter_map(|r| r.srv.as_ref().map(|s| s.1))
            .min()
            .unwrap_or(0);
        let line_weight = i64::from(t.params.weight.max(1));
        let mut wanted: Vec<Wanted> = Vec::with_capacity(answer.len());
        for r in answer {
            let higher = r.srv.as_ref().is_some_and(|s| s.1 != min_priority);
            let backup = match (t.params.backup, higher) {
                (true, true) => continue,
                (true, false) => true,
                (false, true) if !self.backups => continue,
                (false, higher) => higher,
            };
            let (addr, weight, srv_name) = match (&r.srv, service) {
                (Some((name, _, w)), true) => (
                    r.addr,
                    if t.params.weight != 1 {
                        line_weight
                    } else {
                        i64::from((*w).max(1))
                    },
                    Some(name.clone()),
                ),
                _ => (SocketAddr::new(r.addr.ip(), t.port), line_weight, None),
            };
            wanted.push(Wanted {
                addr,
                backup,
                weight,
                srv_name,
            });
        }
        let mut taken = vec![false; wanted.len()];
        let before = self.peers.len();
        let line_weight_fixed = t.params.weight != 1;
        self.peers.retain(|p| {
            if p.host != Some(host) {
                return true;
            }
            let m = wanted.iter().enumerate().position(|(j, w)| {
                !taken[j]
                    && w.backup == p.backup
                    && p.addr == PeerAddr::Tcp(w.addr)
                    && (!service
                        || (w.srv_name == p.srv_name
                            && (line_weight_fixed || w.weight == p.weight)))
            });
            match m {
                Some(j) => {
                    taken[j] = true;
                    true
                }
                None => false,
            }
        });
        let mut changed = self.peers.len() != before;
        let t = &self.templates[host];
        for (w, _) in wanted.into_iter().zip(&taken).filter(|(_, t)| !**t) {
            changed = true;
            self.peers.push(Peer {
                id: self.next_id,
                addr: PeerAddr::Tcp(w.addr),
                host: Some(host),
                srv_name: w.srv_name,
                weight: w.weight,
                current: 0,
                fails: 0,
                accessed: None,
                checked: None,
                max_fails: t.params.max_fails,
                fail_timeout: t.params.fail_timeout,
                backup: w.backup,
                down: t.params.down,
                conns: 0,
                max_conns: u64::from(t.params.max_conns),
                server: self.template_lines[host],
            });
            self.next_id += 1;
        }
        if changed {
            self.gen += 1;
            if let Method::Random { two, .. } = self.method {
                self.method = random::method(&self.peers, two);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::conf::model::{BalanceMethod, ResolveServer, UpstreamServer};
    use crate::http::proxy::Attempt;

    fn line(port: u16, service: bool, weight: u32) -> ResolveServer {
        ResolveServer {
            host: "example.net".into(),
            port,
            service: service.then(|| "http".into()),
            params: UpstreamServer {
                addr: PeerAddr::Tcp(SocketAddr::from(([0, 0, 0, 0], port))),
                name: "example.net".into(),
                weight,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                backup: false,
                down: false,
                max_conns: 0,
            },
        }
    }

    fn a(ip: &str) -> Resolved {
        Resolved {
            addr: SocketAddr::new(ip.parse().expect("ip"), 0),
            srv: None,
        }
    }

    fn srv(ip: &str, port: u16, name: &str, prio: u16, weight: u16) -> Resolved {
        Resolved {
            addr: SocketAddr::new(ip.parse().expect("ip"), port),
            srv: Some((name.into(), prio, weight)),
        }
    }

    fn addrs(b: &Balancer) -> Vec<String> {
        (0..b.len())
            .map(|i| b.addr(i).expect("addr").to_string())
            .collect()
    }

    fn group(lines: &[ResolveServer], method: &BalanceMethod) -> Balancer {
        let fixed = UpstreamServer {
            addr: PeerAddr::Tcp(SocketAddr::from(([127, 0, 0, 9], 80))),
            ..lines[0].params.clone()
        };
        let mut b = Balancer::group(&[fixed], lines, method);
        assert_eq!(addrs(&b), ["127.0.0.9:80"]);
        assert!(!b.replace(7, &[a("10.0.0.1")]), "no such line");
        b.peers.clear();
        b
    }

    #[test]
    fn addresses_come_and_go_and_kept_peers_keep_their_state() {
        let mut b = group(&[line(8080, false, 1)], &BalanceMethod::RoundRobin);
        assert!(b.replace(0, &[a("10.0.0.1")]));
        assert_eq!(addrs(&b), ["10.0.0.1:8080"]);
        assert!(
            !b.replace(0, &[a("10.0.0.1")]),
            "the same answer changes nothing"
        );
        // A failure on the kept peer, and a request in flight on it.
        let now = Instant::now();
        let mut req = Attempt::default();
        let i = b.pick(now, &mut req).expect("peer");
        let kept = b.id(i);
        b.failed(kept, now);
        assert!(b.replace(0, &[a("10.0.0.2"), a("10.0.0.1"), a("fe80::1")]));
        assert_eq!(
            addrs(&b),
            ["10.0.0.1:8080", "10.0.0.2:8080", "[fe80::1]:8080"]
        );
        let k = b.index_of(kept).expect("kept");
        assert_eq!((b.peers[k].fails, b.peers[k].conns), (1, 1));
        // The request's retry does not take the peer it tried, though indices moved.
        assert!(b.replace(0, &[a("10.0.0.2"), a("10.0.0.1")]));
        let j = b.pick(now, &mut req).expect("retry");
        assert_ne!(b.id(j), kept);
        assert_eq!(req.tries(), 2);
        // The address goes: its peer goes; the request's report finds none, harmlessly.
        assert!(b.replace(0, &[a("10.0.0.2")]));
        assert_eq!(addrs(&b), ["10.0.0.2:8080"]);
        b.release(kept);
        b.failed(kept, now);
        b.succeeded(kept);
        assert_eq!(b.peers[0].conns, 1, "the retry's connection");
        // Nothing resolves: no peers, no live upstreams.
        assert!(b.replace(0, &[]));
        assert!(b.is_empty());
        assert_eq!(b.pick(now, &mut Attempt::default()), None);
    }

    #[test]
    fn each_line_replaces_only_its_own_peers() {
        let mut b = group(
            &[line(8080, false, 2), line(9090, false, 1)],
            &BalanceMethod::RoundRobin,
        );
        b.replace(0, &[a("10.0.0.1")]);
        b.replace(1, &[a("10.0.0.1"), a("10.0.0.2")]);
        assert_eq!(
            addrs(&b),
            ["10.0.0.1:8080", "10.0.0.1:9090", "10.0.0.2:9090"]
        );
        b.replace(0, &[]);
        assert_eq!(addrs(&b), ["10.0.0.1:9090", "10.0.0.2:9090"]);
        // The line's weight: 2 for line 0's peers, smooth round robin over 2:1:1.
        b.replace(0, &[a("10.0.0.3")]);
        let now = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..4 {
            let i = b.pick(now, &mut Attempt::default()).expect("peer");
            seen.push(b.addr(i).expect("addr").to_string());
            b.release(b.id(i));
        }
        assert_eq!(seen.iter().filter(|s| *s == "10.0.0.3:8080").count(), 2);
    }

    #[test]
    fn srv_records_give_port_weight_and_backups_as_nginx() {
        let mut b = group(&[line(80, true, 1)], &BalanceMethod::RoundRobin);
        assert!(b.replace(
            0,
            &[
                srv("10.0.0.1", 8081, "a.test", 1, 5),
                srv("10.0.0.1", 8081, "a.test", 1, 5),
                srv("10.0.0.3", 8083, "c.test", 2, 6),
            ]
        ));
        assert_eq!(
            addrs(&b),
            ["10.0.0.1:8081", "10.0.0.1:8081", "10.0.0.3:8083"]
        );
        let flags: Vec<(i64, bool)> = b.peers.iter().map(|p| (p.weight, p.backup)).collect();
        assert_eq!(flags, [(5, false), (5, false), (6, true)]);
        // The backup is taken only once both primaries were tried.
        let now = Instant::now();
        let mut req = Attempt::default();
        let order: Vec<String> = (0..3)
            .map(|_| {
                let i = b.pick(now, &mut req).expect("peer");
                b.addr(i).expect("addr").to_string()
            })
            .collect();
        assert_eq!(order[2], "10.0.0.3:8083");
        // A changed record weight is a new peer; a changed target name too.
        let ids: Vec<usize> = b.peers.iter().map(|p| p.id).collect();
        assert!(b.replace(
            0,
            &[
                srv("10.0.0.1", 8081, "a.test", 1, 6),
                srv("10.0.0.1", 8081, "b.test", 1, 5),
            ]
        ));
        assert!(b.peers.iter().all(|p| !ids.contains(&p.id)));
        assert_eq!(b.peers.iter().map(|p| p.weight).collect::<Vec<_>>(), [6, 5]);
        // The line's own weight wins over the records' (and then a weight change is no
        // change).
        let mut b = group(&[line(80, true, 3)], &BalanceMethod::RoundRobin);
        b.replace(0, &[srv("10.0.0.1", 8081, "a.test", 1, 5)]);
        assert_eq!(b.peers[0].weight, 3);
        assert!(!b.replace(0, &[srv("10.0.0.1", 8081, "a.test", 1, 9)]));
        // Without backups (`random`), a higher priority number is left out.
        let mut b = group(&[line(80, true, 1)], &BalanceMethod::Random { two: false });
        b.replace(
            0,
            &[
                srv("10.0.0.1", 8081, "a.test", 1, 5),
                srv("10.0.0.3", 8083, "c.test", 2, 6),
            ],
        );
        assert_eq!(addrs(&b), ["10.0.0.1:8081"]);
        let i = b
            .pick(now, &mut Attempt::default())
            .expect("random draws the new peer");
        assert_eq!(b.addr(i).expect("addr").to_string(), "10.0.0.1:8081");
    }
}
