//! What the TLS stream writes and when, as plain code: no socket, no clock, no rustls.
//!
//! The stream's shell ([`TlsStream`](super::TlsStream)) tells a [`WritePlan`] what happened —
//! plaintext arrived (with the time, whether the first response is released, and a
//! `TCP_INFO` source it reads only when a decision needs it), a flush was asked for, the
//! queue was written, the hold's deadline passed — and does what the answer says:
//!
//! - [`WritePlan::next_chunk`]: hand the next bytes of a write to rustls as a record of its
//!   own ([`Chunk::Record`], no copy), or gather them into the open record
//!   ([`Chunk::Gather`], which says when that record is full and must be handed over).
//! - [`WritePlan::send`]: write rustls' queue to the socket, or hold it (the TLS 1.3
//!   tickets) until the deadline it returns; the shell arms one timer at that instant and
//!   calls [`WritePlan::on_deadline`] when it fires, as quinn-proto hands out timers.

use std::time::Instant;

use crate::record::{
    clamp_size, RecordPolicy, TcpInfoSource, DEFAULT_SIZE_LO, MAX_RECORD_OVERHEAD,
    TLS13_RECORD_OVERHEAD,
};

use super::{MAX_HOLD, PUSH_AT};

/// What to do with the next bytes of a write (see [`WritePlan::next_chunk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Hand the first `n` bytes to rustls as one record, uncopied (no record is open).
    Record(usize),
    /// Copy the first `n` bytes into the open record; when `closes`, the record is then
    /// complete: hand it to rustls.
    Gather {
        /// Bytes to copy (may be 0 when the open record is already at its size).
        n: usize,
        /// Whether the open record is complete after them.
        closes: bool,
    },
}

/// Whether rustls' queue may go to the socket (see [`WritePlan::send`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Send {
    /// Write it.
    Write,
    /// Keep it (the tickets wait for the first response) until this instant at the latest.
    Hold(Instant),
}

/// The decisions of one TLS stream's write side (see the module docs).
#[derive(Debug)]
pub(crate) struct WritePlan {
    policy: RecordPolicy,
    /// The size decided for the open record (`None` before its first byte).
    limit: Option<usize>,
    /// Plaintext bytes gathered in the open record.
    open: usize,
    /// Plaintext bytes handed to rustls since the queue was last written.
    queued: usize,
    /// The deadline of the TLS 1.3 tickets' hold, while they are held.
    hold: Option<Instant>,
    /// Whether bytes were written after the release (the hold ends at their flush).
    wrote_after_release: bool,
    /// Whether the record that starts the first response is still to come (it is kept
    /// within one segment; see [`WritePlan::head_cap`]).
    head_record: bool,
    /// That record's size, once computed.
    head_cap: Option<usize>,
}

impl WritePlan {
    /// The plan of a stream whose handshake ended at `now`. `tls13`: the version agreed;
    /// `queued`: whether rustls has output queued then (TLS 1.3 session tickets), which is
    /// held for the first response, at most until `now + MAX_HOLD`.
    pub(crate) fn new(mut policy: RecordPolicy, now: Instant, tls13: bool, queued: bool) -> Self {
        if tls13 {
            policy.set_record_overhead(TLS13_RECORD_OVERHEAD);
        }
        Self {
            policy,
            limit: None,
            open: 0,
            queued: 0,
            hold: (tls13 && queued).then(|| now + MAX_HOLD),
            wrote_after_release: false,
            head_record: true,
            head_cap: None,
        }
    }

    /// The record policy.
    pub(crate) fn policy(&self) -> &RecordPolicy {
        &self.policy
    }

    /// The protocol speaks first (HTTP/2's SETTINGS, which clients such as curl wait for
    /// before they send a request) and writes each turn's output in one write itself
    /// (`http::h2`): nothing is held for the first response, the tickets leave with the
    /// first flush, as nginx and h2o send theirs.
    pub(crate) fn speak_first(&mut self) {
        self.hold = None;
    }

    /// Whether the tickets are held.
    pub(crate) fn holding(&self) -> bool {
        self.hold.is_some()
    }

    /// The deadline of a [`Send::Hold`] passed (the shell's timer fired): the hold is over.
    pub(crate) fn on_deadline(&mut self) {
        self.hold = None;
    }

    /// Whether enough is queued that the socket must take some before more is accepted
    /// (and a write stops taking bytes).
    pub(crate) fn must_push(&self) -> bool {
        self.queued >= PUSH_AT
    }

    /// A write of `len` bytes begins; `released`: the first response is ready. Bytes are
    /// counted when they arrive, not when their record closes: bytes written before the
    /// release (an HTTP/2 SETTINGS ack) but flushed after it must not end the hold before
    /// the response itself is written.
    pub(crate) fn on_write(&mut self, released: bool, len: usize) {
        if self.hold.is_some() && released && len > 0 {
            self.wrote_after_release = true;
        }
    }

    /// What to do with the next `len` (> 0) bytes of a write at `now`.
    pub(crate) fn next_chunk(
        &mut self,
        now: Instant,
        released: bool,
        len: usize,
        tcp: &mut impl TcpInfoSource,
    ) -> Chunk {
        let limit = self.decide(now, released, tcp);
        if self.open == 0 && len >= limit {
            self.on_record(now, released, limit);
            return Chunk::Record(limit);
        }
        let n = (limit - self.open).min(len);
        self.open += n;
        let closes = self.open >= limit;
        if closes {
            self.on_record(now, released, self.open);
        }
        Chunk::Gather { n, closes }
    }

    /// [`next_chunk`](Self::next_chunk) for the last `len` bytes (> 0) before a flush: a
    /// record that the flush would close right after them is closed at their end now, so the
    /// shell hands them to rustls uncopied. The records and the policy's accounting are those
    /// of gathering them and flushing.
    pub(crate) fn next_chunk_before_flush(
        &mut self,
        now: Instant,
        released: bool,
        len: usize,
        tcp: &mut impl TcpInfoSource,
    ) -> Chunk {
        if self.open == 0 && len < self.decide(now, released, tcp) {
            self.on_record(now, released, len);
            return Chunk::Record(len);
        }
        self.next_chunk(now, released, len, tcp)
    }

    /// Closes the open record at `now` (a flush or shutdown): `Some(len)` if one is open,
    /// which the shell hands to rustls.
    pub(crate) fn close_open(&mut self, now: Instant, released: bool) -> Option<usize> {
        if self.open == 0 {
            return None;
        }
        let len = self.open;
        self.on_record(now, released, len);
        Some(len)
    }

    /// Whether rustls' queue may be written now; `flushing`: for a flush (which ends the
    /// hold once the first response has been written), not a push or a read.
    pub(crate) fn send(&mut self, flushing: bool) -> Send {
        match self.hold {
            None => Send::Write,
            Some(_) if flushing && self.wrote_after_release => {
                self.hold = None;
                Send::Write
            }
            Some(deadline) => Send::Hold(deadline),
        }
    }

    /// rustls' queue was written to the socket.
    pub(crate) fn on_sent(&mut self) {
        self.queued = 0;
    }

    /// The stream shuts down: nothing is held any more (the shell closes the open record
    /// first).
    pub(crate) fn shutdown(&mut self) {
        self.hold = None;
    }

    /// The open record's size, deciding it now if none is open.
    fn decide(&mut self, now: Instant, released: bool, tcp: &mut impl TcpInfoSource) -> usize {
        let capped = self.head_record && released;
        if let Some(l) = self.limit {
            if capped {
                // A record opened before the release (an HTTP/2 preface) that the response
                // now joins: cut it at the head cap too.
                let c = self.head_cap(tcp).max(self.open).max(1);
                if c < l {
                    self.limit = Some(c);
                    return c;
                }
            }
            return l;
        }
        let info = if self.policy.wants_tcp_info() {
            tcp.tcp_info()
        } else {
            None
        };
        let mut l = clamp_size(self.policy.next_size(now, info.as_ref()));
        if capped {
            l = l.min(self.head_cap(tcp));
        }
        self.limit = Some(l);
        l
    }

    /// The size of the record that starts the first response: it carries the response head
    /// and must arrive within the first round trip's window whatever the policy, or the first
    /// byte waits a round trip (a 16 KB record after the tickets overflows an initial window
    /// of ten 1448-byte segments). One segment's payload (from `TCP_INFO`'s MSS, read once);
    /// later records follow the policy.
    fn head_cap(&mut self, tcp: &mut impl TcpInfoSource) -> usize {
        if let Some(c) = self.head_cap {
            return c;
        }
        let c = tcp
            .tcp_info()
            .map(|t| t.snd_mss as usize)
            .filter(|&m| m > MAX_RECORD_OVERHEAD)
            .map_or(DEFAULT_SIZE_LO, |m| m - MAX_RECORD_OVERHEAD);
        self.head_cap = Some(c);
        c
    }

    /// A record of `len` bytes goes to rustls at `now`: the open record is closed.
    fn on_record(&mut self, now: Instant, released: bool, len: usize) {
        // The cap is spent by the first record it actually cut (the start of a response
        // longer than a segment); small records written meanwhile (an HTTP/2 SETTINGS ack,
        // WINDOW_UPDATE, a short response) do not spend it.
        if self.head_record && released && Some(len) == self.limit {
            self.head_record = false;
        }
        self.policy.on_record(now, len);
        self.limit = None;
        self.open = 0;
        self.queued += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::TcpInfo;
    use crate::record::{DynRecMode, RecordSettings, DEFAULT_SIZE_HI};
    use std::time::Duration;

    /// No `TCP_INFO` (counts the reads it was asked for).
    fn no_info(reads: &mut u32) -> impl TcpInfoSource + '_ {
        move || {
            *reads += 1;
            None
        }
    }

    /// `TCP_INFO` with this MSS.
    fn mss(snd_mss: u32) -> impl TcpInfoSource {
        move || {
            Some(TcpInfo {
                snd_mss,
                snd_cwnd: 10,
                rtt_us: 100_000,
                ..TcpInfo::default()
            })
        }
    }

    fn plan(tls13: bool, queued: bool) -> (WritePlan, Instant) {
        let now = Instant::now();
        let p = WritePlan::new(RecordSettings::nginx().policy(), now, tls13, queued);
        (p, now)
    }

    /// Feeds a write of `len` bytes (one slice) the way the shell does, each chunk chosen by
    /// `next` (given the bytes left); returns the records handed to rustls (plaintext sizes)
    /// and the bytes copied into the open record.
    fn feed(
        p: &mut WritePlan,
        released: bool,
        len: usize,
        mut next: impl FnMut(&mut WritePlan, usize) -> Chunk,
    ) -> (Vec<usize>, usize) {
        p.on_write(released, len);
        let (mut records, mut left, mut copied) = (Vec::new(), len, 0);
        while left > 0 {
            let open = p.open;
            match next(p, left) {
                Chunk::Record(n) => {
                    assert_eq!(open, 0, "a direct record with one open");
                    records.push(n);
                    left -= n;
                }
                Chunk::Gather { n, closes } => {
                    left -= n;
                    copied += n;
                    if closes {
                        records.push(open + n);
                    }
                }
            }
        }
        (records, copied)
    }

    /// A write of `len` bytes through [`WritePlan::next_chunk`]: the records and the bytes
    /// taken.
    fn write(
        p: &mut WritePlan,
        now: Instant,
        released: bool,
        len: usize,
        tcp: &mut impl TcpInfoSource,
    ) -> (Vec<usize>, usize) {
        let (records, _) = feed(p, released, len, |p, left| {
            p.next_chunk(now, released, left, tcp)
        });
        (records, len)
    }

    #[test]
    fn small_writes_share_a_record_that_a_flush_closes() {
        let (mut p, now) = plan(false, false);
        let mut reads = 0;
        let (recs, taken) = write(&mut p, now, false, 40, &mut no_info(&mut reads));
        assert_eq!((recs, taken), (vec![], 40));
        let (recs, _) = write(&mut p, now, false, 200, &mut no_info(&mut reads));
        assert!(recs.is_empty(), "still gathering: {recs:?}");
        assert_eq!(p.close_open(now, false), Some(240));
        assert_eq!(p.close_open(now, false), None, "closed once");
        assert_eq!(reads, 0, "the static policy never reads TCP_INFO");
    }

    /// A write of `len` bytes that a flush follows, the way the shell does for
    /// [`WritePlan::next_chunk_before_flush`]: the records (the flush's included) and the
    /// bytes copied.
    fn write_then_flush(
        p: &mut WritePlan,
        now: Instant,
        len: usize,
        tcp: &mut impl TcpInfoSource,
    ) -> (Vec<usize>, usize) {
        let (mut records, copied) = feed(p, true, len, |p, left| {
            p.next_chunk_before_flush(now, true, left, tcp)
        });
        records.extend(p.close_open(now, true));
        (records, copied)
    }

    #[test]
    fn a_write_before_a_flush_makes_the_records_a_gather_would_without_copying() {
        // Dynamic records (small first, then large): the sizes of gather-then-flush and of
        // the direct path agree write by write; the direct path copies nothing.
        let settings = RecordSettings {
            ssl_dyn_rec_enable: DynRecMode::On,
            ..RecordSettings::nginx()
        };
        let now = Instant::now();
        let mut gathered = WritePlan::new(settings.policy(), now, false, false);
        let mut direct = WritePlan::new(settings.policy(), now, false, false);
        for len in [100, 1369, 5000, 40_000, 3, 16_384, 20_000] {
            let (mut a, _) = write(&mut gathered, now, true, len, &mut mss(1448));
            a.extend(gathered.close_open(now, true));
            let (b, copied) = write_then_flush(&mut direct, now, len, &mut mss(1448));
            assert_eq!(a, b, "records of a {len}-byte write");
            assert_eq!(copied, 0, "copied of a {len}-byte write");
            assert_eq!(b.iter().sum::<usize>(), len);
        }
    }

    #[test]
    fn a_record_already_open_is_completed_before_a_flush() {
        let (mut p, now) = plan(false, false);
        let mut reads = 0;
        write(&mut p, now, true, 40, &mut no_info(&mut reads));
        let (recs, copied) = write_then_flush(&mut p, now, 200, &mut no_info(&mut reads));
        assert_eq!((recs, copied), (vec![240], 200));
    }

    #[test]
    fn records_follow_the_policy() {
        let settings = RecordSettings {
            ssl_buffer_size: 4096,
            ..RecordSettings::nginx()
        };
        let now = Instant::now();
        let mut p = WritePlan::new(settings.policy(), now, false, false);
        let mut reads = 0;
        let (recs, taken) = write(&mut p, now, false, 10_000, &mut no_info(&mut reads));
        assert_eq!(taken, 10_000);
        assert_eq!(
            recs,
            [4096, 4096],
            "whole records leave, the rest is gathered"
        );
        assert_eq!(p.close_open(now, false), Some(10_000 - 2 * 4096));

        // Cloudflare's ramp: 41 records of 1369 (the count must pass the threshold), 40 of
        // 4229, then 16k.
        let dynamic = RecordSettings {
            ssl_dyn_rec_enable: DynRecMode::On,
            ..RecordSettings::nginx()
        };
        let mut p = WritePlan::new(dynamic.policy(), now, false, false);
        let (sizes, _) = write(&mut p, now, false, 300_000, &mut no_info(&mut reads));
        assert!(
            sizes[..41].iter().all(|&s| s == DEFAULT_SIZE_LO),
            "{sizes:?}"
        );
        assert!(
            sizes[41..81].iter().all(|&s| s == DEFAULT_SIZE_HI),
            "{sizes:?}"
        );
        assert_eq!(sizes[81], 16_384);
    }

    #[test]
    fn a_record_opened_by_a_gather_is_completed_before_a_direct_one() {
        let (mut p, now) = plan(false, false);
        let mut reads = 0;
        let mut tcp = no_info(&mut reads);
        write(&mut p, now, false, 100, &mut tcp);
        // 100 open: the next 16 KB first fill that record, then go direct.
        p.on_write(false, 40_000);
        assert_eq!(
            p.next_chunk(now, false, 40_000, &mut tcp),
            Chunk::Gather {
                n: 16_284,
                closes: true
            }
        );
        assert_eq!(
            p.next_chunk(now, false, 40_000 - 16_284, &mut tcp),
            Chunk::Record(16_384)
        );
    }

    #[test]
    fn the_first_response_starts_with_one_segment() {
        let (mut p, now) = plan(true, true);
        // No TCP_INFO: 1369 bytes, then the policy's 16k.
        let mut reads = 0;
        let (recs, _) = write(&mut p, now, true, 20_000, &mut no_info(&mut reads));
        assert_eq!(recs, [1369, 16_384]);
        assert_eq!(reads, 1, "MSS read once, for the head only");
        // With TCP_INFO: the MSS less the largest overhead.
        let (mut p, now) = plan(true, true);
        let (recs, _) = write(&mut p, now, true, 20_000, &mut mss(1448));
        assert_eq!(recs, [1448 - MAX_RECORD_OVERHEAD, 16_384]);
        // Before the release (a preface), records are not capped.
        let (mut p, now) = plan(true, true);
        let (recs, _) = write(&mut p, now, false, 20_000, &mut mss(1448));
        assert_eq!(recs, [16_384]);
    }

    #[test]
    fn small_records_do_not_spend_the_head_cap() {
        let (mut p, now) = plan(true, true);
        let mut tcp = mss(1448);
        let cap = 1448 - MAX_RECORD_OVERHEAD;
        // A short response (or a SETTINGS ack) after the release, flushed: not cut.
        write(&mut p, now, true, 100, &mut tcp);
        assert_eq!(p.close_open(now, true), Some(100));
        // The next response still starts with one segment.
        let (recs, _) = write(&mut p, now, true, 5000, &mut tcp);
        assert_eq!(recs, [cap]);
        // Spent: the rest follows the policy.
        assert_eq!(p.close_open(now, true), Some(5000 - cap));
        let (recs, _) = write(&mut p, now, true, 20_000, &mut tcp);
        assert_eq!(recs, [16_384]);
    }

    #[test]
    fn a_preface_record_is_cut_when_the_response_joins_it() {
        let (mut p, now) = plan(true, true);
        let mut tcp = mss(1448);
        let cap = 1448 - MAX_RECORD_OVERHEAD;
        // 25 bytes gathered before the release: the record was opened at 16k.
        write(&mut p, now, false, 25, &mut tcp);
        // The response joins it: the record is closed at the head cap.
        let (recs, _) = write(&mut p, now, true, 10_000, &mut tcp);
        assert_eq!(recs, [cap]);
        assert_eq!(p.close_open(now, true), Some(10_000 + 25 - cap));
    }

    #[test]
    fn tickets_are_held_until_the_first_response_is_flushed() {
        let (mut p, now) = plan(true, true);
        assert!(p.holding());
        let deadline = now + MAX_HOLD;
        assert_eq!(p.send(false), Send::Hold(deadline));
        assert_eq!(p.send(true), Send::Hold(deadline), "nothing written yet");
        // Written before the release (an HTTP/2 preface): still held at its flush.
        let mut tcp = mss(1448);
        write(&mut p, now, false, 8, &mut tcp);
        p.close_open(now, false);
        assert_eq!(p.send(true), Send::Hold(deadline));
        // The response: a push or a read keeps holding, its flush sends.
        write(&mut p, now, true, 100, &mut tcp);
        assert_eq!(p.send(false), Send::Hold(deadline));
        assert!(p.holding());
        assert_eq!(p.send(true), Send::Write);
        assert!(!p.holding());
        assert_eq!(p.send(false), Send::Write);
    }

    #[test]
    fn the_hold_ends_at_its_deadline() {
        let (mut p, now) = plan(true, true);
        assert_eq!(p.send(false), Send::Hold(now + MAX_HOLD));
        assert_eq!(MAX_HOLD, Duration::from_millis(10));
        p.on_deadline();
        assert!(!p.holding());
        assert_eq!(p.send(false), Send::Write);
    }

    #[test]
    fn nothing_is_held_without_tickets_or_in_tls12() {
        assert!(!plan(true, false).0.holding(), "nothing queued");
        assert!(
            !plan(false, true).0.holding(),
            "TLS 1.2's last flight is the handshake's"
        );
        let (mut p, _) = plan(true, true);
        p.speak_first();
        assert!(
            !p.holding(),
            "a protocol that speaks first: the tickets leave with the first flush"
        );
        assert_eq!(p.send(true), Send::Write);
    }

    #[test]
    fn an_empty_write_does_not_count_as_the_response() {
        let (mut p, _) = plan(true, true);
        p.on_write(true, 0);
        assert!(matches!(p.send(true), Send::Hold(_)));
    }

    #[test]
    fn the_socket_must_take_64k_before_more_is_accepted() {
        let (mut p, now) = plan(false, false);
        let mut reads = 0;
        let (recs, _) = write(&mut p, now, false, PUSH_AT - 1, &mut no_info(&mut reads));
        assert_eq!(recs, [16_384; 3]);
        assert!(!p.must_push());
        assert_eq!(p.close_open(now, false), Some(PUSH_AT - 1 - 3 * 16_384));
        write(&mut p, now, false, 1, &mut no_info(&mut reads));
        assert_eq!(p.close_open(now, false), Some(1));
        assert!(p.must_push(), "four full records' worth queued");
        p.on_sent();
        assert!(!p.must_push());
    }

    #[test]
    fn shutdown_ends_the_hold() {
        let (mut p, _) = plan(true, true);
        p.shutdown();
        assert!(!p.holding());
    }
}
