//! Session tickets: the keys that encrypt them, and the process-wide [`TlsShared`].
//!
//! A ticket is `key name (16) ‖ nonce (12) ‖ AES-256-GCM(issued-at (8, big-endian seconds) ‖
//! session)` with the key name as associated data. Keys come either from a [`KeyRing`]
//! (generated at start, rotated every [`ROTATION_SECS`] or every `ssl_session_timeout` when
//! that is shorter, as nginx rotates them, the previous key still decrypting)
//! that [`TlsShared`] keeps across reloads, or from `ssl_session_ticket_key` files (nginx's 48-
//! or 80-byte format: the first 16 bytes name the key, an HKDF-SHA256 of the rest is the AEAD
//! key), so every machine of a fleet that reads the same file encrypts and decrypts alike; the
//! first file's key encrypts, all decrypt. Tickets are not interchangeable with nginx's.
//!
//! `ssl_session_timeout` is enforced twice: keys are erased on rotation (forward secrecy, as
//! rustls wants) and the issue time inside each ticket is checked, as OpenSSL checks a session's
//! age. A ticket from an unknown key, with a bad tag, or too old decrypts to `None`: the client
//! gets a full handshake. The time is an argument of the inner functions, so tests need no sleep.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::{ProducesTickets, ServerSessionMemoryCache};

use super::context::SessionContext;
use super::TlsError;

/// Generated keys encrypt for 6 hours, then decrypt only for 6 more: rustls' own `Ticketer`
/// figures, a bound on how long a stolen key reveals past sessions.
pub const ROTATION_SECS: u64 = 6 * 60 * 60;
/// RFC 8446 §4.6.1: a ticket lifetime MUST NOT exceed 7 days (604800 seconds).
pub const MAX_LIFETIME_SECS: u64 = 604_800;
/// Tickets issued up to 60 s "in the future" are accepted: fleet members' clocks differ a little.
const CLOCK_SKEW_SECS: u64 = 60;
/// Most sessions a stateful cache holds: rustls preallocates its table (~70 bytes a slot
/// before any session), so 2^20 slots (`shared:SSL:256m` in nginx's 4000-per-MB terms) caps
/// that at ~75 MB.
pub const MAX_CACHED_SESSIONS: usize = 1 << 20;

/// Length of a key name, nginx's.
const NAME_LEN: usize = 16;
/// Length of the issue-time prefix inside the sealed part.
const ISSUED_LEN: usize = 8;
/// AES-GCM tag length.
const TAG_LEN: usize = 16;

/// One ticket key: its public name and its AEAD key.
pub struct TicketKey {
    name: [u8; NAME_LEN],
    key: LessSafeKey,
}

impl fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TicketKey {
    /// A key from an `ssl_session_ticket_key` file's bytes (48 or 80, nginx's sizes).
    pub fn from_file_bytes(file: &str, bytes: &[u8]) -> Result<Self, TlsError> {
        if bytes.len() != 48 && bytes.len() != 80 {
            return Err(TlsError::TicketKeySize {
                name: file.to_string(),
                len: bytes.len(),
            });
        }
        let mut name = [0u8; NAME_LEN];
        name.copy_from_slice(&bytes[..NAME_LEN]);
        Self::derive(name, &bytes[NAME_LEN..])
    }

    /// A fresh random key.
    fn random(rng: &dyn SecureRandom) -> Result<Self, TlsError> {
        let mut name = [0u8; NAME_LEN];
        let mut secret = [0u8; 32];
        rng.fill(&mut name).map_err(|_| TlsError::Random)?;
        rng.fill(&mut secret).map_err(|_| TlsError::Random)?;
        Self::derive(name, &secret)
    }

    /// AES-256-GCM key = HKDF-SHA256(salt = fixed label, ikm = secret, info = key name).
    fn derive(name: [u8; NAME_LEN], secret: &[u8]) -> Result<Self, TlsError> {
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, b"firstbyte session ticket key v1");
        let info = [&name[..]];
        let prk = salt.extract(secret);
        let okm = prk
            .expand(&info, &AES_256_GCM)
            .map_err(|_| TlsError::Random)?;
        let key = LessSafeKey::new(UnboundKey::from(okm));
        Ok(Self { name, key })
    }

    /// Seals `plain` issued at `now` with a random nonce.
    fn seal(&self, plain: &[u8], now: u64, rng: &dyn SecureRandom) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + ISSUED_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&nonce);
        let mut body = Vec::with_capacity(ISSUED_LEN + plain.len() + TAG_LEN);
        body.extend_from_slice(&now.to_be_bytes());
        body.extend_from_slice(plain);
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&self.name),
                &mut body,
            )
            .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    /// Opens a ticket made by this key: `(issued-at, session)`, or `None` on any fault.
    fn open(&self, ticket: &[u8]) -> Option<(u64, Vec<u8>)> {
        let rest = ticket.strip_prefix(&self.name[..])?;
        if rest.len() < NONCE_LEN + ISSUED_LEN + TAG_LEN {
            return None;
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&self.name), &mut body)
            .ok()?;
        let (issued, session) = plain.split_at(ISSUED_LEN);
        let issued = u64::from_be_bytes(issued.try_into().ok()?);
        Some((issued, session.to_vec()))
    }
}

/// Generated ticket keys that rotate: `current` encrypts, `previous` still decrypts.
pub struct KeyRing {
    state: RwLock<RingState>,
    period: u64,
    rng: SystemRandom,
}

/// The keys of a [`KeyRing`] at one time.
struct RingState {
    /// `None` until a lazy ring's first use.
    current: Option<Arc<TicketKey>>,
    previous: Option<Arc<TicketKey>>,
    next_switch: u64,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl KeyRing {
    /// A ring whose first key was made at `now` and rotates every `period` seconds.
    pub fn new(now: u64, period: u64) -> Result<Self, TlsError> {
        let rng = SystemRandom::new();
        let current = Arc::new(TicketKey::random(&rng)?);
        Ok(Self {
            state: RwLock::new(RingState {
                current: Some(current),
                previous: None,
                next_switch: now.saturating_add(period),
            }),
            period,
            rng,
        })
    }

    /// A ring that makes its first key at its first use. `firstbyte -t` builds every
    /// server's ticketer but never issues a ticket: the random source is never touched, and
    /// aws-lc's one-time entropy seeding (~30 ms of CPU here) is not paid for a test.
    pub fn lazy(period: u64) -> Self {
        Self {
            state: RwLock::new(RingState {
                current: None,
                previous: None,
                next_switch: 0,
            }),
            period,
            rng: SystemRandom::new(),
        }
    }

    /// The keys valid at `now`, rotating first when due. A key older than two periods is
    /// gone. If making a new key fails, the old ones stay (the next call tries again).
    fn keys(&self, now: u64) -> Option<(Arc<TicketKey>, Option<Arc<TicketKey>>)> {
        {
            let s = self.state.read().ok()?;
            if let (Some(current), true) = (&s.current, now < s.next_switch) {
                return Some((current.clone(), s.previous.clone()));
            }
        }
        let fresh = TicketKey::random(&self.rng).ok().map(Arc::new);
        let mut s = self.state.write().ok()?;
        if s.current.is_none() || now >= s.next_switch {
            if let Some(fresh) = fresh {
                let stale = now >= s.next_switch.saturating_add(self.period);
                let old = s.current.replace(fresh);
                s.previous = if stale { None } else { old };
                s.next_switch = now.saturating_add(self.period);
            }
        }
        Some((s.current.clone()?, s.previous.clone()))
    }
}

/// Where a ticketer's keys come from.
#[derive(Debug, Clone)]
enum Keys {
    /// Generated and rotating, shared by every server of the process.
    Ring(Arc<KeyRing>),
    /// From `ssl_session_ticket_key` files; the first encrypts.
    Fixed(Arc<[TicketKey]>),
}

/// A `ProducesTickets` for one server config: keys plus that server's `ssl_session_timeout`.
pub struct Ticketer {
    keys: Keys,
    lifetime: u64,
    /// Sealed in front of every session: a ticket opens only in the context that made it.
    context: SessionContext,
    rng: SystemRandom,
    clock: fn() -> u64,
}

impl fmt::Debug for Ticketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticketer")
            .field("keys", &self.keys)
            .field("lifetime", &self.lifetime)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Ticketer {
    /// A ticketer over keys read from `ssl_session_ticket_key` files (`(file name, bytes)`, in
    /// directive order). `lifetime` is `ssl_session_timeout`.
    pub fn from_files(files: &[(String, Arc<[u8]>)], lifetime: Duration) -> Result<Self, TlsError> {
        let keys = files
            .iter()
            .map(|(name, bytes)| TicketKey::from_file_bytes(name, bytes))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::with_keys(Keys::Fixed(keys.into()), lifetime))
    }

    /// A ticketer over a generated, rotating ring.
    pub fn from_ring(ring: Arc<KeyRing>, lifetime: Duration) -> Self {
        Self::with_keys(Keys::Ring(ring), lifetime)
    }

    fn with_keys(keys: Keys, lifetime: Duration) -> Self {
        Self {
            keys,
            lifetime: lifetime.as_secs().min(MAX_LIFETIME_SECS),
            context: SessionContext::default(),
            rng: SystemRandom::new(),
            clock: unix_now,
        }
    }

    /// Binds this ticketer's tickets to a server block's [`SessionContext`].
    pub fn with_context(mut self, context: SessionContext) -> Self {
        self.context = context;
        self
    }

    /// Seconds a ticket is good for, as told to clients: `ssl_session_timeout`, no more than
    /// RFC 8446 allows, and for generated keys no more than one rotation period (a ticket is
    /// sure to outlive its key only that long).
    pub fn lifetime_secs(&self) -> u32 {
        let cap = match self.keys {
            Keys::Ring(ref r) => r.period,
            Keys::Fixed(_) => MAX_LIFETIME_SECS,
        };
        u32::try_from(self.lifetime.min(cap)).unwrap_or(u32::MAX)
    }

    /// Encrypts a session at `now` with the current key.
    pub fn encrypt_at(&self, plain: &[u8], now: u64) -> Option<Vec<u8>> {
        let plain = self.context.prefix(plain);
        match &self.keys {
            Keys::Ring(ring) => ring.keys(now)?.0.seal(&plain, now, &self.rng),
            Keys::Fixed(keys) => keys.first()?.seal(&plain, now, &self.rng),
        }
    }

    /// Decrypts a ticket at `now`: `None` for an unknown key, a bad tag, a ticket older
    /// than the lifetime (or issued implausibly far in the future), or one made in another
    /// session context.
    pub fn decrypt_at(&self, ticket: &[u8], now: u64) -> Option<Vec<u8>> {
        let name = ticket.get(..NAME_LEN)?;
        let opened = match &self.keys {
            Keys::Ring(ring) => {
                let (current, previous) = ring.keys(now)?;
                [Some(current), previous]
                    .into_iter()
                    .flatten()
                    .find(|k| k.name[..] == *name)?
                    .open(ticket)
            }
            Keys::Fixed(keys) => keys.iter().find(|k| k.name[..] == *name)?.open(ticket),
        };
        let (issued, session) = opened?;
        let fresh = issued <= now.saturating_add(CLOCK_SKEW_SECS)
            && now.saturating_sub(issued) <= self.lifetime;
        if !fresh {
            return None;
        }
        self.context.strip(&session).map(<[u8]>::to_vec)
    }
}

impl ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime_secs()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.encrypt_at(plain, (self.clock)())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.decrypt_at(cipher, (self.clock)())
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// TLS state that lives as long as the process, across reloads: generated ticket keys (so
/// tickets issued before a reload still resume after it) and stateful session caches.
/// Create one at start and pass it to every [`server_config`](super::server_config) call.
pub struct TlsShared {
    ring: Arc<KeyRing>,
    /// Rings of servers whose `ssl_session_timeout` is shorter than [`ROTATION_SECS`]: as
    /// nginx (≥ 1.23.2), their keys rotate every timeout. By period.
    short: Mutex<HashMap<u64, Arc<KeyRing>>>,
    caches: Mutex<HashMap<usize, Weak<ServerSessionMemoryCache>>>,
}

impl fmt::Debug for TlsShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsShared")
            .field("ring", &self.ring)
            .finish_non_exhaustive()
    }
}

impl TlsShared {
    /// Generates the first ticket key.
    pub fn new() -> Result<Self, TlsError> {
        Ok(Self {
            ring: Arc::new(KeyRing::new(unix_now(), ROTATION_SECS)?),
            short: Mutex::new(HashMap::new()),
            caches: Mutex::new(HashMap::new()),
        })
    }

    /// For `firstbyte -t`: the ticket key is made only if a ticket is ever issued
    /// ([`KeyRing::lazy`]).
    pub fn for_test() -> Self {
        Self {
            ring: Arc::new(KeyRing::lazy(ROTATION_SECS)),
            short: Mutex::new(HashMap::new()),
            caches: Mutex::new(HashMap::new()),
        }
    }

    /// A ticketer over the generated keys with this server's lifetime: the process's ring,
    /// or for a lifetime under [`ROTATION_SECS`] a ring rotating every lifetime (nginx's key
    /// rotation per `ssl_session_timeout`), shared by the servers with that lifetime.
    pub fn generated_ticketer(&self, lifetime: Duration) -> Ticketer {
        let period = lifetime.as_secs().max(1);
        if period >= ROTATION_SECS {
            return Ticketer::from_ring(self.ring.clone(), lifetime);
        }
        let mut short = match self.short.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let ring = short
            .entry(period)
            .or_insert_with(|| Arc::new(KeyRing::lazy(period)))
            .clone();
        Ticketer::from_ring(ring, lifetime)
    }

    /// The session cache of `sessions` slots (capped at [`MAX_CACHED_SESSIONS`]): every server
    /// asking for the same size shares one, and it survives a reload as long as some config
    /// still holds it (the runtime builds the new configs before dropping the old).
    /// nginx shares `shared:NAME:SIZE` by name; the model keeps only the size, so equal
    /// sizes stand for equal names (rustls still refuses to resume across SNI names).
    pub fn session_cache(&self, sessions: usize) -> Arc<ServerSessionMemoryCache> {
        let sessions = sessions.clamp(1, MAX_CACHED_SESSIONS);
        let mut caches = match self.caches.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        caches.retain(|_, w| w.strong_count() > 0);
        if let Some(cache) = caches.get(&sessions).and_then(Weak::upgrade) {
            return cache;
        }
        let cache = ServerSessionMemoryCache::new(sessions);
        caches.insert(sessions, Arc::downgrade(&cache));
        cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_800_000_000;

    fn file_key(fill: u8, len: usize) -> (String, Arc<[u8]>) {
        (format!("/k{fill}"), vec![fill; len].into())
    }

    #[test]
    fn file_keys_round_trip_across_instances() {
        let a = Ticketer::from_files(&[file_key(1, 80)], Duration::from_secs(300)).expect("a");
        let b = Ticketer::from_files(&[file_key(1, 80)], Duration::from_secs(300)).expect("b");
        let t = a.encrypt_at(b"session", T0).expect("ticket");
        assert_eq!(&t[..16], &[1u8; 16]);
        assert_eq!(b.decrypt_at(&t, T0 + 10).as_deref(), Some(&b"session"[..]));
    }

    #[test]
    fn first_file_encrypts_all_decrypt() {
        let old = Ticketer::from_files(&[file_key(2, 48)], Duration::from_secs(300)).expect("old");
        let t_old = old.encrypt_at(b"s", T0).expect("ticket");
        let both = Ticketer::from_files(
            &[file_key(3, 48), file_key(2, 48)],
            Duration::from_secs(300),
        )
        .expect("both");
        assert_eq!(both.decrypt_at(&t_old, T0).as_deref(), Some(&b"s"[..]));
        let t_new = both.encrypt_at(b"s", T0).expect("ticket");
        assert_eq!(&t_new[..16], &[3u8; 16]);
        assert!(old.decrypt_at(&t_new, T0).is_none(), "unknown key name");
    }

    #[test]
    fn bad_tickets_are_none() {
        let k = Ticketer::from_files(&[file_key(4, 80)], Duration::from_secs(300)).expect("k");
        let mut t = k.encrypt_at(b"session", T0).expect("ticket");
        assert!(k.decrypt_at(&[], T0).is_none());
        assert!(k.decrypt_at(&t[..20], T0).is_none());
        assert!(k.decrypt_at(&t[..16 + 12 + 8 + 15], T0).is_none());
        let last = t.len() - 1;
        t[last] ^= 1;
        assert!(k.decrypt_at(&t, T0).is_none(), "bad tag");
        let other_key_same_name = {
            let mut bytes = vec![4u8; 80];
            bytes[40] = 0;
            Ticketer::from_files(&[("/x".into(), bytes.into())], Duration::from_secs(300))
                .expect("k")
        };
        let t = k.encrypt_at(b"session", T0).expect("ticket");
        assert!(other_key_same_name.decrypt_at(&t, T0).is_none());
    }

    #[test]
    fn lifetime_is_enforced() {
        let k = Ticketer::from_files(&[file_key(5, 80)], Duration::from_secs(300)).expect("k");
        let t = k.encrypt_at(b"s", T0).expect("ticket");
        assert!(k.decrypt_at(&t, T0 + 300).is_some());
        assert!(k.decrypt_at(&t, T0 + 301).is_none());
        assert!(k.decrypt_at(&t, T0 - 3600).is_none(), "from the future");
        assert_eq!(k.lifetime_secs(), 300);
        let long =
            Ticketer::from_files(&[file_key(5, 80)], Duration::from_secs(30 * 86400)).expect("k");
        assert_eq!(long.lifetime_secs(), 604_800);
    }

    #[test]
    fn wrong_sized_key_file_is_an_error() {
        let e = Ticketer::from_files(&[file_key(6, 47)], Duration::from_secs(1)).expect_err("err");
        assert_eq!(e.to_string(), "\"/k6\" must be 48 or 80 bytes (has 47)");
    }

    #[test]
    fn lazy_ring_makes_its_key_at_first_use_then_rotates() {
        let ring = Arc::new(KeyRing::lazy(100));
        assert!(
            ring.state.read().unwrap().current.is_none(),
            "no key before use"
        );
        let tk = Ticketer::from_ring(ring.clone(), Duration::from_secs(1000));
        let t = tk.encrypt_at(b"s", T0).expect("ticket");
        assert!(ring.state.read().unwrap().current.is_some());
        assert_eq!(tk.decrypt_at(&t, T0 + 50).as_deref(), Some(&b"s"[..]));
        // The first key is not discarded at once: it rotates one period after its use.
        let t2 = tk.encrypt_at(b"s", T0 + 50).expect("ticket");
        assert_eq!(t[..16], t2[..16], "same key within the period");
        let t3 = tk.encrypt_at(b"s", T0 + 150).expect("ticket");
        assert_ne!(t[..16], t3[..16]);
        assert!(
            tk.decrypt_at(&t, T0 + 150).is_some(),
            "previous key still decrypts"
        );
    }

    #[test]
    fn ring_rotates_and_forgets() {
        let ring = Arc::new(KeyRing::new(T0, 100).expect("ring"));
        let tk = Ticketer::from_ring(ring, Duration::from_secs(1000));
        assert_eq!(tk.lifetime_secs(), 100);
        let t = tk.encrypt_at(b"s", T0).expect("ticket");
        assert!(tk.decrypt_at(&t, T0 + 50).is_some());
        // After one rotation the old key still decrypts, and new tickets use a new key.
        let t2 = tk.encrypt_at(b"s", T0 + 150).expect("ticket");
        assert_ne!(t[..16], t2[..16]);
        assert!(tk.decrypt_at(&t, T0 + 150).is_some());
        // After the next rotation it is erased.
        assert!(tk.encrypt_at(b"s", T0 + 260).is_some());
        assert!(tk.decrypt_at(&t, T0 + 260).is_none());
        assert!(tk.decrypt_at(&t2, T0 + 260).is_some());
    }

    #[test]
    fn ring_skips_a_generation_after_a_long_idle() {
        let ring = Arc::new(KeyRing::new(T0, 100).expect("ring"));
        let tk = Ticketer::from_ring(ring, Duration::from_secs(100_000));
        let t = tk.encrypt_at(b"s", T0).expect("ticket");
        assert!(tk.decrypt_at(&t, T0 + 500).is_none());
    }

    #[test]
    fn shared_caches_by_size() {
        let shared = TlsShared::new().expect("shared");
        let a = shared.session_cache(1000);
        let b = shared.session_cache(1000);
        let c = shared.session_cache(10);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        drop((a, b));
        let d = shared.session_cache(1000);
        assert_eq!(Arc::strong_count(&d), 1, "a dropped cache is not kept");
        let t1 = shared.generated_ticketer(Duration::from_secs(300));
        let t2 = shared.generated_ticketer(Duration::from_secs(300));
        let t3 = shared.generated_ticketer(Duration::from_secs(60));
        let now = unix_now();
        let t = t1.encrypt_at(b"x", now).expect("ticket");
        assert!(
            t2.decrypt_at(&t, now).is_some(),
            "one ring for the servers of one ssl_session_timeout"
        );
        assert!(t3.decrypt_at(&t, now).is_none(), "keys rotating every 60 s");
        let days = Duration::from_secs(ROTATION_SECS * 4);
        let long = shared.generated_ticketer(days);
        let t = long.encrypt_at(b"x", now).expect("ticket");
        assert!(
            shared
                .generated_ticketer(days)
                .decrypt_at(&t, now)
                .is_some(),
            "longer timeouts share the process's ring"
        );
    }

    /// A ticket sealed in one session context does not open in another, even under the same
    /// key (the same file, or the process's generated ring).
    #[test]
    fn tickets_open_only_in_their_context() {
        use super::super::context::SessionContext;
        let life = Duration::from_secs(300);
        let a = Ticketer::from_files(&[file_key(9, 80)], life)
            .expect("a")
            .with_context(SessionContext([1; 16]));
        let b = Ticketer::from_files(&[file_key(9, 80)], life)
            .expect("b")
            .with_context(SessionContext([2; 16]));
        let a2 = Ticketer::from_files(&[file_key(9, 80)], life)
            .expect("a2")
            .with_context(SessionContext([1; 16]));
        let t = a.encrypt_at(b"session", 1000).expect("sealed");
        assert_eq!(a2.decrypt_at(&t, 1001).as_deref(), Some(&b"session"[..]));
        assert!(b.decrypt_at(&t, 1001).is_none(), "other context");
    }
}
