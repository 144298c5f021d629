//! `random [two [least_conn]]` (nginx's ngx_http_upstream_random_module).
//!
//! A draw is a number below the total weight, found on the line of the peers' weights in file
//! order (nginx's `ranges`), `down` peers included: one that is down, tried by this request,
//! resting after `max_fails` or at `max_conns` is drawn again. `two` draws until it has two
//! distinct available peers and takes the one with fewer active connections per weight unit
//! (the second on a tie, as nginx). After 20 draws that found nothing, the request falls back
//! to round robin, as nginx.

use std::time::Instant;

use super::{Attempt, Balancer, Method, Peer};

/// How many draws one request may make before round robin takes over (nginx's 20).
const MAX_DRAWS: u32 = 20;

/// The method for `peers`: where each peer's weight starts on the line of all weights.
pub(super) fn method(peers: &[Peer], two: bool) -> Method {
    let mut starts = Vec::with_capacity(peers.len());
    let mut total = 0u64;
    for p in peers {
        starts.push(total);
        total += p.weight as u64;
    }
    Method::Random { two, starts, total }
}

/// A seed from the system's generator (a fixed odd number if it fails: draws stay valid).
pub(super) fn seed() -> u64 {
    let mut b = [0u8; 8];
    let s = match aws_lc_rs::rand::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0x9E37_79B9_7F4A_7C15,
    };
    s | 1
}

impl Balancer {
    /// The next draw: xorshift64*, reduced below `bound`.
    fn draw(&mut self, bound: u64) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % bound.max(1)
    }

    /// The peer a draw lands on.
    fn peek(&mut self) -> usize {
        let Method::Random { total, .. } = &self.method else {
            return 0;
        };
        let x = self.draw(*total);
        let Method::Random { starts, .. } = &self.method else {
            return 0;
        };
        // The last peer whose weight starts at or below x.
        starts.partition_point(|s| *s <= x).saturating_sub(1)
    }

    /// `random`'s pick for `a`; None: 20 draws found no available peer (round robin next).
    pub(super) fn pick_random(&mut self, now: Instant, a: &mut Attempt) -> Option<usize> {
        let two = matches!(self.method, Method::Random { two: true, .. });
        let mut prev: Option<usize> = None;
        while a.hash_tries <= MAX_DRAWS {
            let i = self.peek();
            if prev != Some(i) && self.usable(i, now, a) {
                let Some(p) = prev.filter(|_| two) else {
                    if !two {
                        return Some(i);
                    }
                    prev = Some(i);
                    a.hash_tries += 1;
                    continue;
                };
                let (pi, pp) = (&self.peers[i], &self.peers[p]);
                // Fewer connections per weight unit; on a tie, the one drawn second.
                let busier = u128::from(pi.conns) * (pp.weight as u128)
                    > u128::from(pp.conns) * (pi.weight as u128);
                return Some(if busier { p } else { i });
            }
            a.hash_tries += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{Attempt, Balancer};
    use crate::conf::model::{BalanceMethod, PeerAddr, UpstreamServer};

    fn server(weight: u32) -> UpstreamServer {
        UpstreamServer {
            addr: PeerAddr::Tcp("127.0.0.1:1".parse().expect("addr")),
            name: "a".into(),
            weight,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down: false,
            max_conns: 0,
        }
    }

    fn counts(b: &mut Balancer, n: usize) -> Vec<usize> {
        let mut c = vec![0; b.len()];
        let t = Instant::now();
        for _ in 0..n {
            let i = b.pick(t, &mut Attempt::default()).expect("peer");
            b.release(i);
            c[i] += 1;
        }
        c
    }

    #[test]
    fn random_follows_the_weights() {
        let mut b = Balancer::with_method(
            &[server(1), server(3)],
            &BalanceMethod::Random { two: false },
        );
        b.rng = 0x1234_5678_9abc_def1;
        let c = counts(&mut b, 4000);
        // Expected 1000 : 3000; a fair generator stays far within these bounds.
        assert!((700..=1300).contains(&c[0]), "{c:?}");
        assert_eq!(c[0] + c[1], 4000);
    }

    #[test]
    fn random_skips_down_failed_and_tried_peers() {
        let mut down = server(1);
        down.down = true;
        let mut b = Balancer::with_method(
            &[server(1), server(1), down],
            &BalanceMethod::Random { two: false },
        );
        b.rng = 7;
        let c = counts(&mut b, 300);
        assert_eq!(c[2], 0, "down is never picked: {c:?}");
        assert!(c[0] > 50 && c[1] > 50, "{c:?}");
        let t = Instant::now();
        b.failed(0, t);
        let c = counts(&mut b, 100);
        assert_eq!(c, vec![0, 100, 0], "a failed peer rests");
        // The retry of one request goes elsewhere; with all tried, none.
        let mut b = Balancer::with_method(
            &[server(1), server(1)],
            &BalanceMethod::Random { two: false },
        );
        let mut a = Attempt::default();
        let first = b.pick(t, &mut a).expect("first");
        let second = b.pick(t, &mut a).expect("second");
        assert_ne!(first, second);
        assert_eq!(b.pick(t, &mut a), None);
    }

    #[test]
    fn random_two_takes_the_idler_of_two() {
        let mut b = Balancer::with_method(
            &[server(1), server(1)],
            &BalanceMethod::Random { two: true },
        );
        b.rng = 99;
        let t = Instant::now();
        // Peer 0 holds a connection: every later pick (with both drawn) goes to 1.
        let mut a = Attempt::default();
        let busy = b.pick(t, &mut a).expect("first");
        for _ in 0..50 {
            let i = b.pick(t, &mut Attempt::default()).expect("peer");
            assert_ne!(i, busy, "the idle one");
            b.release(i);
        }
        // Per weight unit: one connection on weight 2 is less busy than one on weight 1.
        let mut w = Balancer::with_method(
            &[server(1), server(2)],
            &BalanceMethod::Random { two: true },
        );
        let mut a0 = Attempt::default();
        a0.tried.push(1);
        assert_eq!(w.pick(t, &mut a0), Some(0));
        let mut a1 = Attempt::default();
        a1.tried.push(0);
        assert_eq!(w.pick(t, &mut a1), Some(1));
        for _ in 0..20 {
            let i = w.pick(t, &mut Attempt::default()).expect("peer");
            assert_eq!(i, 1, "1/2 beats 1/1");
            w.release(i);
        }
    }

    #[test]
    fn single_or_exhausted_draws_fall_back_to_round_robin() {
        let mut one = Balancer::with_method(&[server(1)], &BalanceMethod::Random { two: true });
        let t = Instant::now();
        one.failed(0, t);
        assert_eq!(one.pick(t, &mut Attempt::default()), Some(0));
        // Both failed: the draws find nothing, round robin finds nothing either.
        let mut b = Balancer::with_method(
            &[server(1), server(1)],
            &BalanceMethod::Random { two: true },
        );
        b.failed(0, t);
        b.failed(1, t);
        assert_eq!(b.pick(t, &mut Attempt::default()), None);
    }
}
