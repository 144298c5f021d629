//! The per-direction scheduler: the pure core that decides each packet's fate.
//!
//! The forwarding thread reads a packet, notes its arrival time, and asks
//! [`Scheduler::on_packet`] with the packet's size, that time, how many packets it already
//! holds, and the direction's random generator. The answer is a [`Verdict`]: drop it (loss,
//! or a full queue) or deliver it at a due time. The thread then releases packets at their due
//! times; this module never reads the clock or touches a socket.
//!
//! Per packet, in netem's order: the loss model decides first; then, with a rate limit, the
//! packet joins the bottleneck queue (tail drop when `queue_limit` packets are waiting or
//! being sent) and leaves it after its serialization time `size × 8 / rate`; then the fixed
//! delay plus a uniform jitter in `[−jitter, +jitter]` is added. Without `reorder`, a packet is
//! never due before the one delivered ahead of it, so jitter never reorders.

use std::collections::VecDeque;

use crate::loss::{LossModel, LossSpec};
use crate::rng::Rng;

/// Default bottleneck queue: 1000 packets, netem's and pfifo's default `limit`.
pub const DEFAULT_QUEUE_PACKETS: usize = 1000;

/// Most packets one direction may hold at once (queued or in the delay line): a memory bound
/// of ~100 MB at 1500-byte packets, well above 150 Mbit/s × 500 ms (~6,300 packets).
pub const MAX_HELD_PACKETS: usize = 65_536;

/// Nanoseconds per second, for serialization times.
const NS_PER_SEC: u128 = 1_000_000_000;

/// One direction's link parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// Fixed one-way delay, ns.
    pub delay_ns: u64,
    /// Jitter amplitude, ns: each packet gets a uniform offset in `[−jitter, +jitter]`.
    pub jitter_ns: u64,
    /// Loss process.
    pub loss: LossSpec,
    /// Bottleneck rate in bits per second; `None` means no rate limit.
    pub rate_bps: Option<u64>,
    /// Bottleneck queue size in packets (tail drop); only used with a rate.
    pub queue_limit: usize,
    /// Allow jitter to reorder packets.
    pub reorder: bool,
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The loss model chose it.
    Loss,
    /// The bottleneck queue (or the emulator's memory bound) was full.
    Queue,
}

/// The scheduler's decision for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Discard the packet.
    Drop(DropReason),
    /// Send the packet on at this time (ns, same clock as the arrival time).
    Deliver {
        /// When the packet is due to leave the emulator.
        due_ns: u64,
    },
}

/// One direction's scheduling state.
#[derive(Debug, Clone)]
pub struct Scheduler {
    params: LinkParams,
    loss: LossModel,
    /// When the bottleneck finishes sending what it has accepted so far.
    link_free_at: u64,
    /// Serialization end times of packets in the bottleneck queue, oldest first.
    backlog: VecDeque<u64>,
    /// Due time of the last delivered packet (for jitter without reordering).
    last_due: u64,
}

impl Scheduler {
    /// A scheduler with an idle link.
    pub fn new(params: LinkParams) -> Self {
        let loss = LossModel::new(params.loss);
        Scheduler {
            params,
            loss,
            link_free_at: 0,
            backlog: VecDeque::new(),
            last_due: 0,
        }
    }

    /// Decides the fate of a packet of `size` bytes arriving at `now_ns`, while the caller
    /// already holds `held` packets of this direction.
    pub fn on_packet(&mut self, size: usize, now_ns: u64, held: usize, rng: &mut Rng) -> Verdict {
        if held >= MAX_HELD_PACKETS {
            return Verdict::Drop(DropReason::Queue);
        }
        if self.loss.lose(rng) {
            return Verdict::Drop(DropReason::Loss);
        }
        let sent_at = match self.params.rate_bps {
            None => now_ns,
            Some(rate) => {
                while self.backlog.front().is_some_and(|&end| end <= now_ns) {
                    self.backlog.pop_front();
                }
                if self.backlog.len() >= self.params.queue_limit {
                    return Verdict::Drop(DropReason::Queue);
                }
                let start = self.link_free_at.max(now_ns);
                let end = start.saturating_add(serialization_ns(size, rate));
                self.link_free_at = end;
                self.backlog.push_back(end);
                end
            }
        };
        let mut due = sent_at.saturating_add(self.params.delay_ns);
        if self.params.jitter_ns > 0 {
            let span = self.params.jitter_ns as f64;
            let offset = (rng.next_f64() * 2.0 - 1.0) * span;
            due = if offset >= 0.0 {
                due.saturating_add(offset as u64)
            } else {
                due.saturating_sub((-offset) as u64).max(sent_at)
            };
        }
        if !self.params.reorder {
            due = due.max(self.last_due);
        }
        self.last_due = self.last_due.max(due);
        Verdict::Deliver { due_ns: due }
    }
}

/// Time to put `size` bytes on a link of `rate_bps`, in ns (rounded down).
pub fn serialization_ns(size: usize, rate_bps: u64) -> u64 {
    let ns = size as u128 * 8 * NS_PER_SEC / u128::from(rate_bps.max(1));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> LinkParams {
        LinkParams {
            delay_ns: 0,
            jitter_ns: 0,
            loss: LossSpec::None,
            rate_bps: None,
            queue_limit: DEFAULT_QUEUE_PACKETS,
            reorder: false,
        }
    }

    fn due(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver { due_ns } => due_ns,
            Verdict::Drop(r) => panic!("dropped: {r:?}"),
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn fixed_delay_is_added() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: 50 * MS,
            ..params()
        });
        let mut rng = Rng::seeded(1);
        assert_eq!(due(s.on_packet(1500, 1000, 0, &mut rng)), 1000 + 50 * MS);
        assert_eq!(due(s.on_packet(60, 7 * MS, 0, &mut rng)), 57 * MS);
    }

    #[test]
    fn serialization_time_matches_rate() {
        // 1500 bytes at 100 Mbit/s: 12,000 bits / 1e8 = 120 us.
        assert_eq!(serialization_ns(1500, 100_000_000), 120_000);
        assert_eq!(serialization_ns(1250, 10_000_000), MS);
    }

    #[test]
    fn rate_spaces_back_to_back_packets_then_delays() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: 10 * MS,
            rate_bps: Some(10_000_000),
            ..params()
        });
        let mut rng = Rng::seeded(1);
        // Three 1250-byte packets at t=0: each takes 1 ms on the wire.
        let dues: Vec<u64> = (0..3)
            .map(|_| due(s.on_packet(1250, 0, 0, &mut rng)))
            .collect();
        assert_eq!(dues, vec![11 * MS, 12 * MS, 13 * MS]);
        // After the link drains, a new packet only pays its own serialization.
        assert_eq!(due(s.on_packet(1250, 100 * MS, 0, &mut rng)), 111 * MS);
    }

    #[test]
    fn full_queue_tail_drops_and_recovers() {
        let mut s = Scheduler::new(LinkParams {
            rate_bps: Some(10_000_000),
            queue_limit: 4,
            ..params()
        });
        let mut rng = Rng::seeded(1);
        let verdicts: Vec<Verdict> = (0..6).map(|_| s.on_packet(1250, 0, 0, &mut rng)).collect();
        assert!(verdicts[..4]
            .iter()
            .all(|v| matches!(v, Verdict::Deliver { .. })));
        assert_eq!(verdicts[4], Verdict::Drop(DropReason::Queue));
        assert_eq!(verdicts[5], Verdict::Drop(DropReason::Queue));
        // At 1 ms the first packet has left the queue: room for one more, due after the 4th.
        assert_eq!(due(s.on_packet(1250, MS, 0, &mut rng)), 5 * MS);
        assert_eq!(
            s.on_packet(1250, MS, 0, &mut rng),
            Verdict::Drop(DropReason::Queue)
        );
    }

    #[test]
    fn memory_bound_drops_even_without_rate() {
        let mut s = Scheduler::new(params());
        let mut rng = Rng::seeded(1);
        assert_eq!(
            s.on_packet(100, 0, MAX_HELD_PACKETS, &mut rng),
            Verdict::Drop(DropReason::Queue)
        );
        assert!(matches!(
            s.on_packet(100, 0, MAX_HELD_PACKETS - 1, &mut rng),
            Verdict::Deliver { .. }
        ));
    }

    #[test]
    fn jitter_never_reorders_by_default() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: 20 * MS,
            jitter_ns: 10 * MS,
            ..params()
        });
        let mut rng = Rng::seeded(11);
        let mut last = 0;
        let mut spread = (u64::MAX, 0u64);
        for i in 0..10_000u64 {
            let now = i * 100_000; // one packet every 100 us, far closer than the jitter
            let d = due(s.on_packet(1000, now, 0, &mut rng));
            assert!(d >= last, "packet {i} due {d} before {last}");
            assert!(d >= now + 10 * MS, "packet {i} left before delay - jitter");
            last = d;
            let extra = d - now;
            spread = (spread.0.min(extra), spread.1.max(extra));
        }
        // Dense packets queue behind late ones, so delays crowd towards delay + jitter, but
        // still vary.
        assert!(spread.0 < 20 * MS && spread.1 > 28 * MS, "{spread:?}");
    }

    #[test]
    fn sparse_packets_get_the_full_uniform_jitter() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: 20 * MS,
            jitter_ns: 10 * MS,
            ..params()
        });
        let mut rng = Rng::seeded(5);
        let n = 10_000u64;
        let extras: Vec<u64> = (0..n)
            .map(|i| {
                let now = i * 25 * MS; // farther apart than the jitter's range: no clamping
                due(s.on_packet(100, now, 0, &mut rng)) - now
            })
            .collect();
        let min = extras.iter().min().copied().unwrap_or(0);
        let max = extras.iter().max().copied().unwrap_or(0);
        assert!((10 * MS..10 * MS + MS / 10).contains(&min), "min {min}");
        assert!((30 * MS - MS / 10..=30 * MS).contains(&max), "max {max}");
        let mean = extras.iter().sum::<u64>() as f64 / n as f64;
        // Uniform on [10, 30] ms: sd 5.8 ms, standard error 0.06 ms.
        assert!((mean - 20e6).abs() < 0.5e6, "mean {mean}");
    }

    #[test]
    fn jitter_with_reorder_allowed_does_reorder() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: 20 * MS,
            jitter_ns: 10 * MS,
            reorder: true,
            ..params()
        });
        let mut rng = Rng::seeded(11);
        let dues: Vec<u64> = (0..1000u64)
            .map(|i| due(s.on_packet(1000, i * 100_000, 0, &mut rng)))
            .collect();
        let inversions = dues.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(inversions > 100, "only {inversions} inversions");
        // Uniform jitter: the mean extra delay stays at the fixed delay (within 1 ms).
        let mean: f64 = dues
            .iter()
            .enumerate()
            .map(|(i, d)| (d - i as u64 * 100_000) as f64)
            .sum::<f64>()
            / dues.len() as f64;
        assert!((mean - 20e6).abs() < 1e6, "mean {mean}");
    }

    #[test]
    fn jitter_larger_than_delay_never_goes_back_in_time() {
        let mut s = Scheduler::new(LinkParams {
            delay_ns: MS,
            jitter_ns: 5 * MS,
            reorder: true,
            ..params()
        });
        let mut rng = Rng::seeded(2);
        for i in 0..1000u64 {
            let now = 1_000 * MS + i * MS;
            assert!(due(s.on_packet(100, now, 0, &mut rng)) >= now);
        }
    }

    #[test]
    fn loss_is_decided_before_the_queue() {
        let mut s = Scheduler::new(LinkParams {
            loss: LossSpec::Bernoulli { p: 1.0 },
            rate_bps: Some(1_000),
            queue_limit: 1,
            ..params()
        });
        let mut rng = Rng::seeded(1);
        for _ in 0..10 {
            assert_eq!(
                s.on_packet(1500, 0, 0, &mut rng),
                Verdict::Drop(DropReason::Loss)
            );
        }
    }
}
