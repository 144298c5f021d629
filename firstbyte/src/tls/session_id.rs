//! `$ssl_session_id`: a 32-byte id per session that comes back when the session resumes.
//!
//! nginx reads OpenSSL's session id: the TLS 1.2 session id (the one in the ServerHello),
//! or the id OpenSSL keeps in a session sent as a ticket. rustls keeps its session ids to
//! itself, so firstbyte carries its own: [`Tickets`] seals `id ‖ session` in every ticket
//! and [`Sessions`] stores `id ‖ session` in the session cache; a ticket that decrypts (an
//! entry that is found) gives its id back. Ticket keys, rotation and lifetimes are the
//! wrapped ticketer's, untouched.
//!
//! The calls happen inside rustls while the accept path processes the ClientHello and polls
//! the handshake: the connection's [`Handshake`] is part of the
//! [`HandshakeCx`](super::handshake_cx::HandshakeCx) current on the thread around each such
//! step, so the wrappers know which connection a ticket or entry belongs to. The id of a connection is the first
//! of: the id of the session it resumed (the last ticket or entry that opened: rustls stops
//! at the one it accepts; [`Handshake::settle`] drops it when the handshake is full after
//! all), the TLS 1.2 session id it was given when that goes into the cache (so
//! `$ssl_session_id` is the id on the wire, as nginx's), a fresh random id. Every ticket
//! and entry the connection issues carries it: a resumption, and a resumption of that, shows
//! the id of the connection that made the session. Outside a handshake (QUIC's, driven by
//! quinn) the wrappers seal a fresh id and take none.

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::{ProducesTickets, StoresServerSessions};

/// Bytes of an id: OpenSSL's longest session id, and what nginx's tests expect (64 hex digits).
pub const ID_LEN: usize = 32;

/// A session id.
pub type SessionId = [u8; ID_LEN];

/// One connection's handshake, as far as ids go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handshake {
    id: Option<SessionId>,
    /// The connection speaks TLS 1.2: a key put in the cache is its session id.
    tls12: bool,
}

impl Handshake {
    /// Says whether the connection speaks TLS 1.2 (known once the ClientHello is processed).
    pub fn set_tls12(&mut self, tls12: bool) {
        self.tls12 = tls12;
    }

    /// After the ClientHello: a full handshake resumed nothing, though a ticket or entry may
    /// have opened (rustls refuses a session of another server name or cipher suite after
    /// opening it), so its id is not the connection's. (After a HelloRetryRequest the second
    /// ClientHello is processed with the rest of the handshake: the case is not told apart.)
    pub fn settle(&mut self, kind: Option<rustls::HandshakeKind>) {
        if kind == Some(rustls::HandshakeKind::Full) {
            self.id = None;
        }
    }

    /// The connection's id: the resumed session's or the one its tickets carry, else a
    /// fresh one (kept, so tickets issued later carry it too). All zeros only if the
    /// system's random source fails.
    pub fn id(&mut self) -> SessionId {
        *self.id.get_or_insert_with(|| fresh().unwrap_or_default())
    }
}

/// A random id.
fn fresh() -> Option<SessionId> {
    let mut id = [0u8; ID_LEN];
    SystemRandom::new().fill(&mut id).ok()?;
    Some(id)
}

/// The id a new ticket or cache entry carries: the current handshake's (given one first,
/// `key` for a TLS 1.2 cache entry), or a fresh one outside a handshake.
fn issuing(key: Option<&[u8]>) -> Option<SessionId> {
    super::handshake_cx::with_current(|cx| {
        let h = &mut cx.ids;
        let id = match h.id {
            Some(id) => id,
            None => match key.filter(|_| h.tls12).and_then(|k| k.try_into().ok()) {
                Some(k) => k,
                None => fresh()?,
            },
        };
        h.id = Some(id);
        Some(id)
    })
    .unwrap_or_else(fresh)
}

/// A ticket or entry that opened: its id becomes the current handshake's.
fn resumed(id: SessionId) {
    super::handshake_cx::with_current(|cx| cx.ids.id = Some(id));
}

/// `id ‖ session`.
fn with_id(id: SessionId, session: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ID_LEN + session.len());
    out.extend_from_slice(&id);
    out.extend_from_slice(session);
    out
}

/// Splits `id ‖ session`, noting the id; `None` for a value too short to hold one.
fn open(mut stored: Vec<u8>) -> Option<Vec<u8>> {
    let id: SessionId = stored.get(..ID_LEN)?.try_into().ok()?;
    resumed(id);
    stored.drain(..ID_LEN);
    Some(stored)
}

/// A ticketer whose tickets carry the session id.
pub struct Tickets(pub Arc<dyn ProducesTickets>);

impl fmt::Debug for Tickets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tickets").field(&self.0).finish()
    }
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        self.0.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.0.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.0.encrypt(&with_id(issuing(None)?, plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        open(self.0.decrypt(cipher)?)
    }
}

/// A session cache whose entries carry the session id.
pub struct Sessions(pub Arc<dyn StoresServerSessions>);

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Sessions").field(&self.0).finish()
    }
}

impl StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        match issuing(Some(&key)) {
            Some(id) => self.0.put(key, with_id(id, &value)),
            None => false,
        }
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        open(self.0.get(key)?)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        open(self.0.take(key)?)
    }

    fn can_cache(&self) -> bool {
        self.0.can_cache()
    }
}

/// Lower-case hex of `id`, as nginx prints `$ssl_session_id`.
pub fn hex(id: &SessionId) -> String {
    use std::fmt::Write;
    id.iter()
        .fold(String::with_capacity(2 * ID_LEN), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::handshake_cx::HandshakeCx;
    use rustls::server::ServerSessionMemoryCache;

    impl Handshake {
        /// `f` as a step of a handshake whose context holds these ids.
        fn run<R>(&mut self, f: impl FnOnce() -> R) -> R {
            let mut cx = HandshakeCx {
                ids: *self,
                ..HandshakeCx::default()
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cx.run(f)));
            *self = cx.ids;
            r.unwrap_or_else(|p| std::panic::resume_unwind(p))
        }
    }

    /// A ticketer that "encrypts" by reversing: enough to see what it was given.
    #[derive(Debug)]
    struct Reverse;

    impl ProducesTickets for Reverse {
        fn enabled(&self) -> bool {
            true
        }
        fn lifetime(&self) -> u32 {
            77
        }
        fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
            Some(plain.iter().rev().copied().collect())
        }
        fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
            (cipher != b"bad").then(|| cipher.iter().rev().copied().collect())
        }
    }

    fn tickets() -> Tickets {
        Tickets(Arc::new(Reverse))
    }

    #[test]
    fn a_resumed_ticket_gives_back_the_id_of_the_connection_that_got_it() {
        let t = tickets();
        let mut first = Handshake::default();
        let (t1, t2) = first.run(|| (t.encrypt(b"s1").unwrap(), t.encrypt(b"s2").unwrap()));
        let id = first.id();
        assert_ne!(id, [0; ID_LEN]);
        assert_eq!(t.lifetime(), 77);
        // Both tickets of one connection carry its id, in front of the session.
        assert_eq!(t.0.decrypt(&t1).unwrap(), with_id(id, b"s1"));
        assert_eq!(t.0.decrypt(&t2).unwrap(), with_id(id, b"s2"));

        let mut again = Handshake::default();
        let (plain, t3) = again.run(|| (t.decrypt(&t2), t.encrypt(b"s3").unwrap()));
        assert_eq!(plain.as_deref(), Some(&b"s2"[..]));
        assert_eq!(again.id(), id, "resumed: the same id");
        // Its own new ticket carries the id on: a resumption of a resumption.
        let mut third = Handshake::default();
        third.run(|| t.decrypt(&t3));
        assert_eq!(third.id(), id);

        let mut other = Handshake::default();
        other.run(|| t.encrypt(b"x"));
        assert_ne!(other.id(), id, "an unrelated connection has its own id");
    }

    #[test]
    fn a_ticket_that_opened_but_did_not_resume_gives_no_id() {
        let t = tickets();
        let mut first = Handshake::default();
        let ticket = first.run(|| t.encrypt(b"s").unwrap());
        let id = first.id();
        let mut refused = Handshake::default();
        assert!(refused.run(|| t.decrypt(&ticket)).is_some());
        refused.settle(Some(rustls::HandshakeKind::Full));
        assert_ne!(refused.id(), id);
        let mut resumed = Handshake::default();
        resumed.run(|| t.decrypt(&ticket));
        resumed.settle(Some(rustls::HandshakeKind::Resumed));
        assert_eq!(resumed.id(), id);
    }

    #[test]
    fn a_full_handshake_without_tickets_still_has_an_id() {
        let mut a = Handshake::default();
        let mut b = Handshake::default();
        let id = a.id();
        assert_eq!(a.id(), id, "stable");
        assert_ne!(b.id(), id);
        assert_eq!(hex(&id).len(), 64);
        assert!(hex(&id)
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn bad_or_short_tickets_give_nothing_and_set_no_id() {
        let t = tickets();
        let mut h = Handshake::default();
        h.run(|| {
            assert!(t.decrypt(b"bad").is_none());
            // Decrypts, but too short to hold an id (a ticket from before ids).
            assert!(t.decrypt(&[1; ID_LEN - 1]).is_none());
        });
        assert_eq!(h, Handshake::default());
    }

    #[test]
    fn outside_a_handshake_tickets_carry_a_fresh_id_and_none_is_kept() {
        let t = tickets();
        let a = t.0.decrypt(&t.encrypt(b"s").unwrap()).unwrap();
        let b = t.0.decrypt(&t.encrypt(b"s").unwrap()).unwrap();
        assert_ne!(a[..ID_LEN], b[..ID_LEN]);
        assert_eq!(
            t.decrypt(&t.encrypt(b"s").unwrap()).as_deref(),
            Some(&b"s"[..])
        );
        assert!(crate::tls::handshake_cx::with_current(|_| ()).is_none());
    }

    #[test]
    fn tls12_cache_entries_use_the_session_id_on_the_wire() {
        let s = Sessions(ServerSessionMemoryCache::new(8));
        assert!(s.can_cache());
        let key = [7u8; ID_LEN];
        let mut h = Handshake::default();
        h.set_tls12(true);
        assert!(h.run(|| s.put(key.to_vec(), b"v".to_vec())));
        assert_eq!(h.id(), key);
        let mut r = Handshake::default();
        assert_eq!(r.run(|| s.get(&key)).as_deref(), Some(&b"v"[..]));
        assert_eq!(r.id(), key);

        // TLS 1.3 stateful tickets: the key is the ticket itself, never shown as the id.
        let mut h13 = Handshake::default();
        assert!(h13.run(|| s.put(vec![9; ID_LEN], b"w".to_vec())));
        let id = h13.id();
        assert_ne!(id, [9; ID_LEN]);
        let mut r13 = Handshake::default();
        assert_eq!(r13.run(|| s.take(&[9; ID_LEN])).as_deref(), Some(&b"w"[..]));
        assert_eq!(r13.id(), id);
        assert!(s.take(&[9; ID_LEN]).is_none(), "taken once");
    }

    #[test]
    fn nesting_restores_the_outer_handshake_even_after_a_panic() {
        let t = tickets();
        let mut outer = Handshake::default();
        let mut inner = Handshake::default();
        outer.run(|| {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inner.run(|| {
                    t.encrypt(b"i");
                    panic!("boom")
                })
            }));
            assert!(r.is_err());
            t.encrypt(b"o");
        });
        let (o, i) = (
            outer.id.expect("outer id"),
            inner.id.expect("inner id kept"),
        );
        assert_ne!(o, i, "each ticket went to its own handshake");
        assert!(crate::tls::handshake_cx::with_current(|_| ()).is_none());
    }
}
