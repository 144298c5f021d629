//! The `static` policy: every record is `ssl_buffer_size`, as in stock nginx.
//!
//! No counts, no clock, no `TCP_INFO`: the size is decided once, from the settings.

use std::time::Instant;

use super::RecordSettings;
use crate::net::TcpInfo;

/// Every record `ssl_buffer_size` bytes (capped at 16384).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixed {
    size: usize,
}

impl Fixed {
    /// The policy for `settings.ssl_buffer_size`.
    pub fn new(settings: &RecordSettings) -> Self {
        Self {
            size: settings.full_size(),
        }
    }

    /// Always `ssl_buffer_size`.
    pub fn next_size(&mut self, _now: Instant, _tcp: Option<&TcpInfo>) -> usize {
        self.size
    }

    /// Nothing to remember.
    pub fn on_record(&mut self, _now: Instant, _plaintext_len: usize) {}

    /// Never: a static size needs no `getsockopt`.
    pub fn wants_tcp_info(&self) -> bool {
        false
    }

    /// `"static"`.
    pub fn name(&self) -> &'static str {
        "static"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_is_the_buffer_size() {
        for size in [16_384, 4096, 1369] {
            let mut p = Fixed::new(&RecordSettings {
                ssl_buffer_size: size,
                ..RecordSettings::nginx()
            });
            let t0 = Instant::now();
            let busy = TcpInfo {
                snd_cwnd: 1,
                snd_mss: 500,
                ..TcpInfo::default()
            };
            for i in 0..100 {
                let tcp = (i % 2 == 0).then_some(&busy);
                assert_eq!(p.next_size(t0, tcp), size);
                p.on_record(t0, size);
            }
            assert!(!p.wants_tcp_info());
            assert_eq!(p.name(), "static");
        }
    }
}
