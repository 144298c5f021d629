//! TLS record sizing: how much plaintext goes into each TLS record a connection sends.
//!
//! A 16 KB record straddles about twelve 1500-byte TCP segments, and the client can decrypt
//! none of it until the last one arrives: one lost segment, or a congestion window smaller
//! than the record, holds back every byte of it for at least one more round trip. Small
//! records avoid that but cost bytes, CPU and syscalls. Three policies choose the trade-off,
//! one file each, all plain code with no socket and no clock inside:
//!
//! - [`Fixed`] (`static`): every record is `ssl_buffer_size` (nginx's behaviour).
//! - [`Dynamic`] (`dynamic`): Cloudflare's nginx patch, exactly: small records after an idle
//!   period, larger after `ssl_dyn_rec_threshold` records, full size after twice that.
//! - [`Adaptive`] (`adaptive`, ours): sizes each record from the live connection's `TCP_INFO`
//!   (congestion window, MSS, RTT): one segment per record when fresh or idle, growing with
//!   the window, full size once the window is open.
//!
//! Data flow: the runtime turns the merged directives into a [`RecordSettings`] (one per server
//! block) and calls [`RecordSettings::policy`] once per connection; the [`RecordPolicy`] goes
//! into the connection's TLS stream (`tls::stream::TlsStream`). Before each record the stream
//! asks the policy for the record's size ([`RecordPolicy::next_size`], with `TCP_INFO` from a
//! [`TcpInfoSource`] only if [`RecordPolicy::wants_tcp_info`]), gathers that much plaintext,
//! hands it to rustls as one record, and reports it back ([`RecordPolicy::on_record`]).

mod adaptive;
mod dynamic;
mod fixed;
mod source;

use std::fmt;
use std::time::{Duration, Instant};

pub use adaptive::Adaptive;
pub use dynamic::Dynamic;
pub use fixed::Fixed;
pub use source::{SocketInfo, TcpInfoSource};

use crate::net::TcpInfo;

/// The largest plaintext a TLS record may carry, bytes (2^14, RFC 8446 §5.1, RFC 5246 §6.2.1).
/// Every policy caps its sizes here: a larger `ssl_buffer_size` would make rustls split the
/// write into a full record and a short remainder.
pub const MAX_RECORD_SIZE: usize = 16_384;

/// Default `ssl_buffer_size`, bytes: 16k, nginx's default (one full TLS record).
pub const DEFAULT_BUFFER_SIZE: usize = 16_384;

/// Default `ssl_dyn_rec_size_lo`, bytes: one record in one TCP segment.
/// 1369 = 1500 (Ethernet MTU) − 40 (IPv6 header) − 20 (TCP header) − 10 (TCP timestamps
/// option) − 61 (the largest TLS record overhead OpenSSL can add). Cloudflare's default.
pub const DEFAULT_SIZE_LO: usize = 1369;

/// Default `ssl_dyn_rec_size_hi`, bytes: one record in three TCP segments.
/// 4229 = 3 × (1500 − 40 − 20 − 10) − 61 = 3 × 1430 − 61. Cloudflare's default.
pub const DEFAULT_SIZE_HI: usize = 4229;

/// Default `ssl_dyn_rec_threshold`, records: 40 records of `size_lo`, then 40 of `size_hi`.
/// Cloudflare's default.
pub const DEFAULT_THRESHOLD: u32 = 40;

/// Default `ssl_dyn_rec_timeout`: 1 s of idle restarts the ramp. Cloudflare's default; near
/// Linux's minimum RTO (200 ms) times a few, after which the kernel restarts the congestion
/// window (RFC 5681 §4.1).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// TLS 1.3 record overhead with AEAD, bytes: 5 (header) + 1 (inner content type) + 16 (tag).
/// rustls adds no padding.
pub const TLS13_RECORD_OVERHEAD: usize = 22;

/// TLS 1.2 AES-GCM record overhead, bytes: 5 (header) + 8 (explicit nonce) + 16 (tag).
/// (TLS 1.2 ChaCha20-Poly1305 has no explicit nonce: 21.)
pub const TLS12_GCM_RECORD_OVERHEAD: usize = 29;

/// The largest record overhead any suite firstbyte offers, bytes: TLS 1.2 AES-GCM's 29.
/// rustls implements only AEAD suites, so the 61 bytes Cloudflare reserved (OpenSSL's CBC
/// suites with SHA-384 MACs and padding) cannot occur here.
pub const MAX_RECORD_OVERHEAD: usize = TLS12_GCM_RECORD_OVERHEAD;

/// `ssl_dyn_rec_enable off | on | adaptive`.
///
/// `on` keeps the meaning it has in Cloudflare's patch, so an nginx config moved to firstbyte
/// behaves the same. Our mode is spelt `adaptive` rather than a new directive or a second
/// `on`-like word because it is the same switch (which record-size ramp to use) and because
/// it says what the mode does: it adapts to the connection instead of counting records. The
/// built-in page shows the same word as the record policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DynRecMode {
    /// Every record is `ssl_buffer_size` (the default, as nginx).
    #[default]
    Off,
    /// Cloudflare's dynamic records.
    On,
    /// firstbyte's adaptive records, sized from `TCP_INFO`.
    Adaptive,
}

impl DynRecMode {
    /// Parses the directive's argument: `off`, `on` or `adaptive` (nginx flags are
    /// case-insensitive). `None` for anything else.
    pub fn parse(arg: &str) -> Option<Self> {
        if arg.eq_ignore_ascii_case("off") {
            Some(Self::Off)
        } else if arg.eq_ignore_ascii_case("on") {
            Some(Self::On)
        } else if arg.eq_ignore_ascii_case("adaptive") {
            Some(Self::Adaptive)
        } else {
            None
        }
    }
}

impl fmt::Display for DynRecMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Adaptive => "adaptive",
        })
    }
}

/// Why a [`RecordSettings`] cannot be used; messages in nginx's words (the caller appends
/// ` in FILE:LINE`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A size directive is 0: no record could carry a byte.
    #[error("\"{0}\" directive invalid value")]
    ZeroSize(&'static str),
}

/// The record-size directives of one server block, named as in nginx and Cloudflare's patch.
/// `Default` gives their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSettings {
    /// `ssl_buffer_size`, bytes: the full record size. Default 16k (nginx).
    pub ssl_buffer_size: usize,
    /// `ssl_dyn_rec_enable`: which policy. Default `adaptive` (firstbyte's; nginx has no such
    /// directive and always behaves as `off`): see the README's "TLS records".
    pub ssl_dyn_rec_enable: DynRecMode,
    /// `ssl_dyn_rec_size_lo`, bytes. Default 1369 (`DEFAULT_SIZE_LO`).
    pub ssl_dyn_rec_size_lo: usize,
    /// `ssl_dyn_rec_size_hi`, bytes. Default 4229 (`DEFAULT_SIZE_HI`).
    pub ssl_dyn_rec_size_hi: usize,
    /// `ssl_dyn_rec_threshold`, records. Default 40.
    pub ssl_dyn_rec_threshold: u32,
    /// `ssl_dyn_rec_timeout`. Default 1 s. As in Cloudflare's patch, 0 turns dynamic records
    /// off (every record `ssl_buffer_size`); for `adaptive`, 0 leaves only the RTO-based idle
    /// rule.
    pub ssl_dyn_rec_timeout: Duration,
}

impl Default for RecordSettings {
    fn default() -> Self {
        Self {
            ssl_buffer_size: DEFAULT_BUFFER_SIZE,
            ssl_dyn_rec_enable: DynRecMode::Adaptive,
            ssl_dyn_rec_size_lo: DEFAULT_SIZE_LO,
            ssl_dyn_rec_size_hi: DEFAULT_SIZE_HI,
            ssl_dyn_rec_threshold: DEFAULT_THRESHOLD,
            ssl_dyn_rec_timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl RecordSettings {
    /// Checks the sizes (for config load). The policies never panic on unchecked settings —
    /// they clamp every size to 1..=16384 — but a zero size is a config error.
    pub fn check(&self) -> Result<(), RecordError> {
        if self.ssl_buffer_size == 0 {
            return Err(RecordError::ZeroSize("ssl_buffer_size"));
        }
        if self.ssl_dyn_rec_size_lo == 0 {
            return Err(RecordError::ZeroSize("ssl_dyn_rec_size_lo"));
        }
        if self.ssl_dyn_rec_size_hi == 0 {
            return Err(RecordError::ZeroSize("ssl_dyn_rec_size_hi"));
        }
        Ok(())
    }

    /// A fresh policy for one connection.
    pub fn policy(&self) -> RecordPolicy {
        match self.ssl_dyn_rec_enable {
            DynRecMode::Off => RecordPolicy::Static(Fixed::new(self)),
            DynRecMode::On => RecordPolicy::Dynamic(Dynamic::new(self)),
            DynRecMode::Adaptive => RecordPolicy::Adaptive(Adaptive::new(self)),
        }
    }

    /// `ssl_buffer_size` as a record size: clamped to 1..=[`MAX_RECORD_SIZE`].
    pub fn full_size(&self) -> usize {
        clamp_size(self.ssl_buffer_size)
    }
}

#[cfg(test)]
impl RecordSettings {
    /// nginx's behaviour (`ssl_dyn_rec_enable off`): every record `ssl_buffer_size`.
    pub(crate) fn nginx() -> Self {
        Self {
            ssl_dyn_rec_enable: DynRecMode::Off,
            ..Self::default()
        }
    }
}

/// Clamps a configured size to what one record can carry: at least 1 byte (so a write always
/// progresses), at most [`MAX_RECORD_SIZE`].
pub(crate) fn clamp_size(n: usize) -> usize {
    n.clamp(1, MAX_RECORD_SIZE)
}

/// One connection's record-size policy.
#[derive(Debug, Clone)]
pub enum RecordPolicy {
    /// `ssl_dyn_rec_enable off`: every record `ssl_buffer_size`.
    Static(Fixed),
    /// `ssl_dyn_rec_enable on`: Cloudflare's algorithm.
    Dynamic(Dynamic),
    /// `ssl_dyn_rec_enable adaptive`: sized from `TCP_INFO`.
    Adaptive(Adaptive),
}

impl RecordPolicy {
    /// The plaintext size of the next record, bytes (1..=16384), decided at `now`, just before
    /// the record's first byte is gathered. `tcp` is the connection's `TCP_INFO` when
    /// [`wants_tcp_info`](Self::wants_tcp_info) said so and the read worked.
    pub fn next_size(&mut self, now: Instant, tcp: Option<&TcpInfo>) -> usize {
        match self {
            Self::Static(p) => p.next_size(now, tcp),
            Self::Dynamic(p) => p.next_size(now, tcp),
            Self::Adaptive(p) => p.next_size(now, tcp),
        }
    }

    /// Reports a record of `plaintext_len` bytes handed to the TLS stream at `now`.
    pub fn on_record(&mut self, now: Instant, plaintext_len: usize) {
        match self {
            Self::Static(p) => p.on_record(now, plaintext_len),
            Self::Dynamic(p) => p.on_record(now, plaintext_len),
            Self::Adaptive(p) => p.on_record(now, plaintext_len),
        }
    }

    /// Whether the next [`next_size`](Self::next_size) wants `TCP_INFO` (one `getsockopt`);
    /// never for `static` and `dynamic`.
    pub fn wants_tcp_info(&self) -> bool {
        match self {
            Self::Static(p) => p.wants_tcp_info(),
            Self::Dynamic(p) => p.wants_tcp_info(),
            Self::Adaptive(p) => p.wants_tcp_info(),
        }
    }

    /// Sets the TLS record overhead, bytes, for policies that size records to segments
    /// (adaptive): [`TLS13_RECORD_OVERHEAD`] once the handshake chose TLS 1.3. The default,
    /// [`MAX_RECORD_OVERHEAD`], is right for every suite; the others ignore it.
    pub fn set_record_overhead(&mut self, bytes: usize) {
        if let Self::Adaptive(p) = self {
            p.set_record_overhead(bytes);
        }
    }

    /// `"static"`, `"dynamic"` or `"adaptive"`, as the built-in page shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Static(p) => p.name(),
            Self::Dynamic(p) => p.name(),
            Self::Adaptive(p) => p.name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nginx_and_cloudflare_but_adaptive() {
        let s = RecordSettings::default();
        assert_eq!(s.ssl_buffer_size, 16 * 1024);
        // firstbyte's default policy is its own (issue 17's run); the sizes are nginx's and
        // Cloudflare's.
        assert_eq!(s.ssl_dyn_rec_enable, DynRecMode::Adaptive);
        assert_eq!(s.policy().name(), "adaptive");
        assert_eq!(s.ssl_dyn_rec_size_lo, 1500 - 40 - 20 - 10 - 61);
        assert_eq!(s.ssl_dyn_rec_size_hi, 3 * (1500 - 40 - 20 - 10) - 61);
        assert_eq!(s.ssl_dyn_rec_threshold, 40);
        assert_eq!(s.ssl_dyn_rec_timeout, Duration::from_secs(1));
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn mode_parses_and_names_the_policy() {
        for (arg, mode, name) in [
            ("off", DynRecMode::Off, "static"),
            ("on", DynRecMode::On, "dynamic"),
            ("Adaptive", DynRecMode::Adaptive, "adaptive"),
        ] {
            assert_eq!(DynRecMode::parse(arg), Some(mode));
            assert_eq!(mode.to_string(), arg.to_ascii_lowercase());
            let s = RecordSettings {
                ssl_dyn_rec_enable: mode,
                ..RecordSettings::nginx()
            };
            let p = s.policy();
            assert_eq!(p.name(), name);
            assert_eq!(p.wants_tcp_info(), mode == DynRecMode::Adaptive);
        }
        assert_eq!(DynRecMode::parse("yes"), None);
    }

    #[test]
    fn zero_sizes_are_config_errors() {
        let s = RecordSettings {
            ssl_buffer_size: 0,
            ..RecordSettings::nginx()
        };
        let e = s.check().unwrap_err();
        assert_eq!(e.to_string(), "\"ssl_buffer_size\" directive invalid value");
        let s = RecordSettings {
            ssl_dyn_rec_size_hi: 0,
            ..RecordSettings::nginx()
        };
        assert_eq!(s.check(), Err(RecordError::ZeroSize("ssl_dyn_rec_size_hi")));
        // Unchecked, the policy still never produces a 0-byte record.
        let s = RecordSettings {
            ssl_buffer_size: 0,
            ..RecordSettings::nginx()
        };
        assert_eq!(s.policy().next_size(Instant::now(), None), 1);
    }

    #[test]
    fn oversized_buffer_is_capped_at_one_record() {
        let s = RecordSettings {
            ssl_buffer_size: 1 << 20,
            ..RecordSettings::nginx()
        };
        assert_eq!(s.full_size(), MAX_RECORD_SIZE);
        assert_eq!(s.policy().next_size(Instant::now(), None), MAX_RECORD_SIZE);
    }
}
