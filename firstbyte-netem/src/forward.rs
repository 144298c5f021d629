//! The I/O shell of one direction: read packets from one TUN device, ask the scheduler, hold
//! them, and write them to the other TUN device at their due time.
//!
//! One thread per direction runs [`run`]. Each turn it writes every packet that is due, then
//! waits in `ppoll` until the next due time or until a packet arrives (timer slack 1 ns, and
//! a short spin for the last microseconds before a due time), then reads what arrived — at
//! most [`READ_BATCH`] packets, so a flood cannot delay the releases — stamping each with the
//! monotonic clock. Held packets sit in a heap ordered by (due time, arrival order), which
//! with jitter-without-reordering is simply a FIFO. All decisions are the scheduler's.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::Instant;

use crate::rng::Rng;
use crate::sched::{DropReason, Scheduler, Verdict};
use crate::stats::DirectionStats;
use crate::sys;

/// Packets read per turn before releasing again: 64 × 1500 B is ~8 ms of a 100 Mbit/s link's
/// traffic, read in well under 1 ms.
pub const READ_BATCH: usize = 64;

/// Longest single wait, ns: 20 ms, so a stop request is noticed promptly.
const MAX_WAIT_NS: u64 = 20_000_000;

/// Read buffer: the largest IPv4 packet.
const BUF_SIZE: usize = 65_536;

/// A packet waiting for its due time.
struct Held {
    due_ns: u64,
    seq: u64,
    data: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due_ns, self.seq) == (other.due_ns, other.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest due packet first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due_ns, other.seq).cmp(&(self.due_ns, self.seq))
    }
}

/// Everything one direction's thread needs.
pub struct Direction<'a> {
    /// Where packets come from.
    pub input: BorrowedFd<'a>,
    /// Where they go.
    pub output: BorrowedFd<'a>,
    /// The direction's scheduler.
    pub scheduler: Scheduler,
    /// The direction's random draws.
    pub rng: Rng,
    /// The clock's zero, shared by both directions.
    pub epoch: Instant,
    /// Busy-wait this close to a due time instead of sleeping, ns.
    pub spin_ns: u64,
    /// Set by `main` to stop the thread.
    pub stop: &'a AtomicBool,
    /// Whether the thread got real-time priority (reported with the counters).
    pub realtime: bool,
}

/// Nanoseconds since `epoch`.
fn now_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Forwards packets until `stop` is set; returns the direction's counters.
pub fn run(mut dir: Direction<'_>) -> DirectionStats {
    sys::set_timer_slack_ns(1);
    let mut stats = DirectionStats {
        realtime: dir.realtime,
        ..DirectionStats::default()
    };
    let run_delay_start = sys::thread_run_delay_ns();
    let mut held: BinaryHeap<Held> = BinaryHeap::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut seq = 0u64;
    while !dir.stop.load(AtomicOrdering::Relaxed) {
        release_due(&mut dir, &mut held, &mut stats);
        let now = now_ns(dir.epoch);
        let wait = held
            .peek()
            .map_or(MAX_WAIT_NS, |h| h.due_ns.saturating_sub(now))
            .min(MAX_WAIT_NS);
        let readable = if wait <= dir.spin_ns {
            // Close to a due time: poll without sleeping so the release is not late.
            sys::wait_readable(dir.input, 0).unwrap_or(false)
        } else {
            sys::wait_readable(dir.input, wait - dir.spin_ns).unwrap_or(false)
        };
        if !readable {
            continue;
        }
        for _ in 0..READ_BATCH {
            let n = match sys::read(dir.input, &mut buf) {
                Ok(Some(n)) if n > 0 => n,
                // Nothing more now; a read error (device gone) ends the batch too.
                _ => break,
            };
            let arrival = now_ns(dir.epoch);
            stats.packets_in += 1;
            stats.bytes_in += n as u64;
            match dir
                .scheduler
                .on_packet(n, arrival, held.len(), &mut dir.rng)
            {
                Verdict::Drop(DropReason::Loss) => stats.dropped_loss += 1,
                Verdict::Drop(DropReason::Queue) => stats.dropped_queue += 1,
                Verdict::Deliver { due_ns } => {
                    seq += 1;
                    held.push(Held {
                        due_ns,
                        seq,
                        data: buf[..n].to_vec(),
                    });
                }
            }
        }
    }
    stats.held_at_exit = held.len() as u64;
    stats.run_delay_ns = run_delay_start
        .zip(sys::thread_run_delay_ns())
        .map(|(start, end)| end.saturating_sub(start));
    stats
}

/// Writes every held packet whose due time has come.
fn release_due(dir: &mut Direction<'_>, held: &mut BinaryHeap<Held>, stats: &mut DirectionStats) {
    let mut now = now_ns(dir.epoch);
    while let Some(next) = held.peek() {
        if next.due_ns > now {
            break;
        }
        let Some(packet) = held.pop() else { break };
        match sys::write(dir.output, &packet.data) {
            Ok(_) => {
                stats.packets_out += 1;
                stats.bytes_out += packet.data.len() as u64;
                stats.lateness_ns.record(now - packet.due_ns);
            }
            Err(_) => stats.write_errors += 1,
        }
        now = now_ns(dir.epoch);
    }
}
