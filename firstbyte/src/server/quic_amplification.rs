//! QUIC's anti-amplification limit (RFC 9000 §8.1), held per remote address at the UDP socket:
//! until an address is validated the server sends it at most three times the bytes it received
//! from it. quinn checks its own limit before a datagram and then lets the whole datagram out
//! whatever is left of the budget, so a first flight could leave up to a datagram over 3x; the
//! socket (`quic_socket`) asks [`Budgets`] before each datagram and drops one that does not
//! fit (quinn's loss recovery sends it again once the client has sent more).
//!
//! An address is validated when a datagram from it carries a Handshake packet or a
//! short-header (1-RTT) packet addressed to one of the server's own connection IDs — which the
//! client learns only from the server's first flight, so a source address spoofed by a third
//! party cannot prove itself — or when quinn took an address-validation token from it (Retry or
//! NEW_TOKEN, told by the accept loop).
//!
//! The table is bounded: an address that is not in it has no budget at all (nothing leaves for
//! it until it sends), so forgetting an entry only ever makes the limit stricter. Unvalidated
//! entries expire [`UNVALIDATED_TTL`] after their last datagram and the oldest goes first when
//! the table is full; validated ones expire once nothing came from them for longer than a
//! connection may stay idle.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How many times what it received the server may send an unvalidated address.
const FACTOR: u64 = 3;

/// The addresses a socket keeps: at ~80 bytes each, some 5 MB at most.
pub(super) const CAPACITY: usize = 65_536;

/// An unvalidated address is forgotten this long after its last datagram (a handshake takes
/// round trips, not seconds; forgotten, it is only held the tighter).
pub(super) const UNVALIDATED_TTL: Duration = Duration::from_secs(30);

/// Expired entries are looked for at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The length of the server's connection IDs (quinn's hashed generator, `quic_keys`), which a
/// short header does not state.
pub(super) const CID_LEN: usize = 8;

/// Whether `datagram` carries a Handshake packet (long header, QUIC v1 type 2) or a
/// short-header packet whose destination connection ID `own_cid` recognises as the server's.
/// Coalesced long-header packets are walked by their Length fields; a malformed one ends the
/// walk (and proves nothing).
pub(super) fn proves_address(mut datagram: &[u8], own_cid: impl Fn(&[u8]) -> bool) -> bool {
    while let Some(&first) = datagram.first() {
        if first & 0x80 == 0 {
            // A short header: the rest of the datagram, after the first byte the DCID.
            return datagram.get(1..1 + CID_LEN).is_some_and(&own_cid);
        }
        let Some(packet) = LongPacket::parse(datagram) else {
            return false;
        };
        if packet.kind == HANDSHAKE && own_cid(packet.dcid) {
            return true;
        }
        datagram = packet.rest;
    }
    false
}

/// QUIC v1's long-header packet types (RFC 9000 §17.2).
const INITIAL: u8 = 0;
const HANDSHAKE: u8 = 2;
const RETRY: u8 = 3;

/// One long-header packet of a datagram, and what follows it.
struct LongPacket<'a> {
    kind: u8,
    dcid: &'a [u8],
    rest: &'a [u8],
}

impl<'a> LongPacket<'a> {
    fn parse(d: &'a [u8]) -> Option<LongPacket<'a>> {
        let mut r = Reader(d);
        let first = r.byte()?;
        let version = u32::from_be_bytes(r.take(4)?.try_into().ok()?);
        // Version 1 and the drafts quinn speaks (0xff0000xx) share v1's type codes; anything
        // else (version negotiation, v2) is not read.
        if version != 1 && version >> 8 != 0x00ff_0000 {
            return None;
        }
        let kind = (first >> 4) & 0x3;
        let dcil = usize::from(r.byte()?);
        if dcil > 20 {
            return None;
        }
        let dcid = r.take(dcil)?;
        let scil = usize::from(r.byte()?);
        r.take(scil)?;
        if kind == RETRY {
            return None;
        }
        if kind == INITIAL {
            let token = r.varint()?;
            r.take(usize::try_from(token).ok()?)?;
        }
        let len = r.varint()?;
        r.take(usize::try_from(len).ok()?)?;
        Some(LongPacket {
            kind,
            dcid,
            rest: r.0,
        })
    }
}

/// Reads a packet's fields front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A QUIC variable-length integer (RFC 9000 §16).
    fn varint(&mut self) -> Option<u64> {
        let first = *self.0.first()?;
        let len = 1usize << (first >> 6);
        let bytes = self.take(len)?;
        let mut v = u64::from(first & 0x3f);
        for b in &bytes[1..] {
            v = (v << 8) | u64::from(*b);
        }
        Some(v)
    }
}

/// One remote address's account.
#[derive(Debug)]
struct Entry {
    received: u64,
    sent: u64,
    validated: bool,
    /// When its last datagram arrived.
    last: Instant,
    /// Tells its place in [`Budgets::order`] from a stale one of an earlier entry.
    seq: u64,
}

/// Per remote address: bytes received and sent until it is validated.
#[derive(Debug)]
pub(super) struct Budgets {
    entries: HashMap<SocketAddr, Entry>,
    /// Unvalidated addresses, oldest first (with their entry's `seq`; validated or replaced
    /// entries leave stale places, skipped and swept).
    order: VecDeque<(SocketAddr, u64)>,
    capacity: usize,
    /// How long a validated address stays without sending anything: longer than a connection
    /// may stay idle.
    validated_ttl: Duration,
    next_seq: u64,
    next_sweep: Option<Instant>,
}

impl Budgets {
    pub fn new(capacity: usize, validated_ttl: Duration) -> Budgets {
        Budgets {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            validated_ttl,
            next_seq: 0,
            next_sweep: None,
        }
    }

    /// Validated addresses are kept at least `ttl` after their last datagram (a reload's
    /// longer idle timeout; connections keep the one they started with, so it never shrinks).
    pub fn keep_validated_for(&mut self, ttl: Duration) {
        self.validated_ttl = self.validated_ttl.max(ttl);
    }

    /// A datagram of `len` bytes came from `from`; `proves` says it validated the address.
    pub fn received(&mut self, from: SocketAddr, len: usize, proves: bool, now: Instant) {
        self.sweep(now);
        let len = u64::try_from(len).unwrap_or(u64::MAX);
        if let Some(e) = self.entries.get_mut(&from) {
            e.received = e.received.saturating_add(len);
            e.validated |= proves;
            e.last = now;
            return;
        }
        if self.entries.len() >= self.capacity && !self.evict_unvalidated() {
            // Full of validated addresses: this one has no budget until there is room.
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(
            from,
            Entry {
                received: len,
                sent: 0,
                validated: proves,
                last: now,
                seq,
            },
        );
        if !proves {
            self.order.push_back((from, seq));
        }
    }

    /// quinn took an address-validation token from `addr` (Retry or NEW_TOKEN).
    pub fn validate(&mut self, addr: SocketAddr) {
        if let Some(e) = self.entries.get_mut(&addr) {
            e.validated = true;
        }
    }

    /// How many of the datagrams `sizes` (in order) may go to `to` now: a prefix, counted as
    /// sent ([`Budgets::unsend`] gives them back if the socket then fails).
    pub fn take(&mut self, to: SocketAddr, sizes: impl Iterator<Item = usize>) -> usize {
        let Some(e) = self.entries.get_mut(&to) else {
            return 0;
        };
        if e.validated {
            return usize::MAX;
        }
        let budget = e.received.saturating_mul(FACTOR);
        let mut n = 0;
        for size in sizes {
            let size = u64::try_from(size).unwrap_or(u64::MAX);
            if e.sent.saturating_add(size) > budget {
                break;
            }
            e.sent += size;
            n += 1;
        }
        n
    }

    /// `bytes` counted by [`Budgets::take`] did not leave after all.
    pub fn unsend(&mut self, to: SocketAddr, bytes: usize) {
        if let Some(e) = self.entries.get_mut(&to) {
            e.sent = e
                .sent
                .saturating_sub(u64::try_from(bytes).unwrap_or(u64::MAX));
        }
    }

    /// Makes room by forgetting the oldest unvalidated address; false if there is none.
    fn evict_unvalidated(&mut self) -> bool {
        while let Some((addr, seq)) = self.order.pop_front() {
            if self
                .entries
                .get(&addr)
                .is_some_and(|e| e.seq == seq && !e.validated)
            {
                self.entries.remove(&addr);
                return true;
            }
        }
        false
    }

    /// Forgets expired addresses (at most once per [`SWEEP_EVERY`]).
    fn sweep(&mut self, now: Instant) {
        if self.next_sweep.is_some_and(|t| now < t) {
            return;
        }
        self.next_sweep = Some(now + SWEEP_EVERY);
        let validated_ttl = self.validated_ttl;
        self.entries.retain(|_, e| {
            let ttl = if e.validated {
                validated_ttl
            } else {
                UNVALIDATED_TTL
            };
            now.saturating_duration_since(e.last) <= ttl
        });
        let entries = &self.entries;
        self.order.retain(|(addr, seq)| {
            entries
                .get(addr)
                .is_some_and(|e| e.seq == *seq && !e.validated)
        });
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: [u8; CID_LEN] = [7; CID_LEN];

    fn ours(cid: &[u8]) -> bool {
        cid == OURS
    }

    fn addr(port: u16) -> SocketAddr {
        ([192, 0, 2, 1], port).into()
    }

    /// A long-header packet of `kind` with `dcid` and a payload of `len` bytes.
    fn long(kind: u8, dcid: &[u8], len: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | (kind << 4)];
        p.extend_from_slice(&1u32.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend_from_slice(dcid);
        p.push(4);
        p.extend_from_slice(&[9; 4]);
        if kind == INITIAL {
            p.push(0); // no token
        }
        // A two-byte varint length.
        p.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
        p.extend(std::iter::repeat_n(0xaa, len));
        p
    }

    fn short(dcid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(dcid);
        p.extend_from_slice(&[0x55; 30]);
        p
    }

    #[test]
    fn an_initial_proves_nothing_a_handshake_or_short_packet_to_our_cid_does() {
        let random = [1u8; 8];
        assert!(!proves_address(&long(INITIAL, &random, 1100), ours));
        assert!(!proves_address(&long(1, &OURS, 100), ours), "0-RTT");
        assert!(proves_address(&long(HANDSHAKE, &OURS, 100), ours));
        assert!(proves_address(&short(&OURS), ours));
        // Addressed to a connection ID the server did not make: a spoofer's.
        assert!(!proves_address(&long(HANDSHAKE, &random, 100), ours));
        assert!(!proves_address(&short(&random), ours));
        assert!(!proves_address(&[], ours));
    }

    #[test]
    fn coalesced_packets_are_walked_by_their_length() {
        let mut d = long(INITIAL, &OURS, 300);
        d.extend(long(HANDSHAKE, &OURS, 50));
        assert!(proves_address(&d, ours));
        let mut d = long(INITIAL, &OURS, 300);
        d.extend(short(&OURS));
        assert!(proves_address(&d, ours));
        // Padding after an Initial: zeros read as a short header to a CID of zeros.
        let mut d = long(INITIAL, &OURS, 300);
        d.extend([0u8; 40]);
        assert!(!proves_address(&d, ours));
    }

    #[test]
    fn malformed_or_foreign_packets_prove_nothing_and_do_not_panic() {
        let mut h = long(HANDSHAKE, &OURS, 100);
        // Length past the datagram's end.
        h.truncate(60);
        assert!(!proves_address(&h, ours));
        // Another version (v2's Handshake is type 3).
        let mut v2 = long(HANDSHAKE, &OURS, 10);
        v2[1..5].copy_from_slice(&0x6b33_43cfu32.to_be_bytes());
        assert!(!proves_address(&v2, ours));
        // A CID longer than QUIC allows.
        let mut bad = long(HANDSHAKE, &OURS, 10);
        bad[5] = 21;
        assert!(!proves_address(&bad, ours));
        for n in 0..40 {
            let d = long(HANDSHAKE, &OURS, 10);
            let _ = proves_address(&d[..n.min(d.len())], ours);
            let _ = proves_address(&[0xff; 40][..n], ours);
        }
    }

    #[test]
    fn an_unvalidated_address_gets_three_times_what_it_sent_in_whole_datagrams() {
        let now = Instant::now();
        let mut b = Budgets::new(16, Duration::from_secs(60));
        let a = addr(1);
        // Nothing came from it: nothing goes.
        assert_eq!(b.take(a, [100].into_iter()), 0);
        b.received(a, 1200, false, now);
        // 1200 + 1200 + 1200 fit; a 54-byte datagram after them does not.
        assert_eq!(b.take(a, [1200, 1200].into_iter()), 2);
        assert_eq!(b.take(a, [1200, 54].into_iter()), 1);
        assert_eq!(b.take(a, [54].into_iter()), 0);
        // A failed send gives its bytes back.
        b.unsend(a, 1200);
        assert_eq!(b.take(a, [1000, 200, 1].into_iter()), 2);
        // The client sends more: more budget.
        b.received(a, 100, false, now);
        assert_eq!(b.take(a, [300, 1].into_iter()), 1);
        // Validated: no limit.
        b.received(a, 50, true, now);
        assert_eq!(b.take(a, [1200; 10].into_iter()), usize::MAX);
    }

    #[test]
    fn a_token_validates_a_known_address_only() {
        let now = Instant::now();
        let mut b = Budgets::new(16, Duration::from_secs(60));
        b.validate(addr(1));
        assert_eq!(b.take(addr(1), [1].into_iter()), 0);
        b.received(addr(1), 1200, false, now);
        b.validate(addr(1));
        assert_eq!(b.take(addr(1), [5000].into_iter()), usize::MAX);
    }

    #[test]
    fn a_full_table_forgets_the_oldest_unvalidated_and_never_frees_an_address() {
        let now = Instant::now();
        let mut b = Budgets::new(3, Duration::from_secs(60));
        b.received(addr(1), 1200, true, now);
        b.received(addr(2), 1200, false, now);
        b.received(addr(3), 1200, false, now);
        b.received(addr(4), 1200, false, now);
        assert_eq!(b.len(), 3);
        // 2 was the oldest unvalidated: forgotten, it has no budget (not an unlimited one).
        assert_eq!(b.take(addr(2), [1].into_iter()), 0);
        assert_eq!(b.take(addr(3), [3600].into_iter()), 1);
        assert_eq!(b.take(addr(1), [9000].into_iter()), usize::MAX);
        // Full of validated addresses: a new one is not taken (and gets nothing).
        let mut b = Budgets::new(2, Duration::from_secs(60));
        b.received(addr(1), 1200, true, now);
        b.received(addr(2), 1200, true, now);
        b.received(addr(3), 1200, false, now);
        assert_eq!(b.take(addr(3), [1].into_iter()), 0);
        assert_eq!(b.len(), 2);
        // A spoofed flood: the table stays at its capacity.
        let mut b = Budgets::new(100, Duration::from_secs(60));
        for p in 0..10_000 {
            b.received(addr(p), 1200, false, now);
        }
        assert_eq!(b.len(), 100);
        assert!(b.order.len() <= 100, "{}", b.order.len());
    }

    #[test]
    fn entries_expire_unvalidated_sooner_than_validated() {
        let t0 = Instant::now();
        let mut b = Budgets::new(16, Duration::from_secs(120));
        b.received(addr(1), 1200, false, t0);
        b.received(addr(2), 1200, true, t0);
        let later = t0 + UNVALIDATED_TTL + Duration::from_secs(2);
        b.received(addr(3), 1200, false, later);
        assert_eq!(b.take(addr(1), [1].into_iter()), 0, "expired: no budget");
        assert_eq!(b.take(addr(2), [1].into_iter()), usize::MAX);
        b.received(addr(3), 1, false, t0 + Duration::from_secs(125));
        assert_eq!(b.take(addr(2), [1].into_iter()), 0, "idle past its ttl");
        // A reload's longer idle timeout keeps them longer; a shorter one does not shorten.
        b.keep_validated_for(Duration::from_secs(10));
        assert_eq!(b.validated_ttl, Duration::from_secs(120));
        b.keep_validated_for(Duration::from_secs(600));
        assert_eq!(b.validated_ttl, Duration::from_secs(600));
    }
}
