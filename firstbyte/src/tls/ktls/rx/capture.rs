//! Keeps a TLS 1.3 connection's client traffic secret for [`Reader`](super::Reader), which
//! derives the next one when the client sends a KeyUpdate. rustls' buffered connection
//! hands over keys (`dangerous_extract_secrets`), not the secret they come from; its one
//! door to the secret is the `KeyLog`, called synchronously inside the handshake step that
//! derives it. [`SecretLog`] (in the `ServerConfig` only with `Options KTLS`) takes only
//! `CLIENT_TRAFFIC_SECRET_0`, and only into the
//! [`HandshakeCx`](crate::tls::handshake_cx::HandshakeCx) current on the thread — the
//! connection whose step runs — so the secret goes to that connection alone. It is never
//! written anywhere else (no key log file, no log line), and is zeroed when dropped
//! (`OkmBlock`).

use rustls::crypto::tls13::OkmBlock;

use crate::tls::handshake_cx;

/// The one label kept.
const LABEL: &str = "CLIENT_TRAFFIC_SECRET_0";

/// The `KeyLog` of a config with kernel TLS: hands `CLIENT_TRAFFIC_SECRET_0` to the
/// handshake whose step runs on this thread, if any; everything else is dropped.
#[derive(Debug)]
pub struct SecretLog;

impl rustls::KeyLog for SecretLog {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        if label != LABEL || secret.len() > OkmBlock::MAX_LEN {
            return;
        }
        handshake_cx::with_current(|cx| cx.secret = Some(OkmBlock::new(secret)));
    }

    fn will_log(&self, label: &str) -> bool {
        label == LABEL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::handshake_cx::HandshakeCx;
    use rustls::KeyLog;

    #[test]
    fn only_the_client_secret_and_only_into_the_current_handshake() {
        let log = SecretLog;
        assert!(log.will_log(LABEL));
        assert!(!log.will_log("SERVER_TRAFFIC_SECRET_0"));
        assert!(!log.will_log("CLIENT_HANDSHAKE_TRAFFIC_SECRET"));
        // No handshake step running: dropped.
        log.log(LABEL, &[0; 32], &[7; 32]);
        let mut hs = HandshakeCx::default();
        hs.run(|| {});
        assert!(
            hs.secret.is_none(),
            "a secret logged outside a step was kept"
        );
        hs.run(|| {
            log.log("SERVER_TRAFFIC_SECRET_0", &[0; 32], &[1; 32]);
            log.log(LABEL, &[0; 32], &[9; 48]);
            // Longer than any hash's output: not a secret of ours.
            log.log(LABEL, &[0; 32], &[8; OkmBlock::MAX_LEN + 1]);
        });
        assert_eq!(
            hs.secret.as_ref().map(|s| s.as_ref().to_vec()),
            Some(vec![9; 48])
        );
        // After the step: a later log goes nowhere.
        log.log(LABEL, &[0; 32], &[5; 32]);
        let mut other = HandshakeCx::default();
        other.run(|| {});
        assert!(other.secret.is_none());
        assert_eq!(
            hs.secret.as_ref().map(|s| s.as_ref().to_vec()),
            Some(vec![9; 48])
        );
    }
}
