//! The QUIC directives' values that need more than a plain parser: `quic_host_key` (a file
//! read at load) and `quic_active_connection_id_limit` (the one value quinn can honour).

use std::path::PathBuf;
use std::sync::Arc;

use super::args::{arg0, invalid};
use super::cx::Cx;
use super::error::ConfError;
use super::parse::Directive;

/// The shortest `quic_host_key` file accepted: 128 bits of secret.
pub const MIN_HOST_KEY: usize = 16;

/// A `quic_host_key` file's contents: the secret that stateless reset and address-validation
/// tokens are derived from (by HKDF, in `server::quic_keys`).
#[derive(Clone, PartialEq, Eq)]
pub struct QuicHostKey {
    /// The file, as resolved (for messages).
    pub path: PathBuf,
    /// Its bytes.
    pub secret: Arc<[u8]>,
}

impl std::fmt::Debug for QuicHostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.debug_struct("QuicHostKey")
            .field("path", &self.path)
            .field("len", &self.secret.len())
            .finish()
    }
}

/// Most bytes read from a key file (a key is a few dozen bytes; this only bounds a mistake).
const MAX_HOST_KEY: u64 = 64 << 10;

/// `quic_host_key FILE`: read at load (relative to the configuration directory, as nginx), so
/// that `-t` reports an unreadable, empty or too short file.
pub(crate) fn host_key(d: &Directive, cx: &mut Cx) -> Result<Option<QuicHostKey>, ConfError> {
    let path = cx.in_conf_dir(arg0(d));
    let (bytes, _) = crate::files::read(&path, MAX_HOST_KEY)
        .map_err(|e| ConfError::open(&path, &e, Some(&d.pos)))?;
    if bytes.is_empty() {
        // nginx's words.
        return Err(ConfError::other(
            format!("\"{}\" zero key size", path.display()),
            &d.pos,
        ));
    }
    if bytes.len() < MIN_HOST_KEY {
        return Err(ConfError::other(
            format!(
                "\"{}\" is too short a key ({} bytes; \"quic_host_key\" needs at least {MIN_HOST_KEY})",
                path.display(),
                bytes.len()
            ),
            &d.pos,
        ));
    }
    Ok(Some(QuicHostKey {
        path,
        secret: bytes.into(),
    }))
}

/// The `active_connection_id_limit` quinn advertises: it keeps 5 of a client's connection IDs
/// (quinn-proto's `CidQueue::LEN`) and cannot be told otherwise.
pub const QUINN_CID_LIMIT: u32 = 5;

/// `quic_active_connection_id_limit N`: only the value quinn advertises, since any other
/// would be a setting firstbyte silently does not apply.
pub(crate) fn active_connection_id_limit(d: &Directive, _: &mut Cx) -> Result<u32, ConfError> {
    let n: u32 = arg0(d).parse().map_err(|_| invalid(d))?;
    if n == QUINN_CID_LIMIT {
        return Ok(n);
    }
    Err(ConfError::other(
        format!(
            "\"quic_active_connection_id_limit\" {n} cannot be honoured: firstbyte's QUIC stack (quinn) always stores {QUINN_CID_LIMIT} connection IDs of a client and advertises {QUINN_CID_LIMIT}; only {QUINN_CID_LIMIT} can be set"
        ),
        &d.pos,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::testutil::{directive, load_as, ok};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fb-quic-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn host_key_is_read_at_load() {
        let dir = tmp("key");
        let key = dir.join("host.key");
        std::fs::write(&key, [9u8; 32]).unwrap();
        let conf = format!(
            "events {{}}\nhttp {{\n quic_host_key {};\n server {{ quic_retry on; quic_gso off; }}\n}}\n",
            key.display()
        );
        let c = ok(&conf);
        let s = &c.http.as_ref().unwrap().servers[0];
        let k = s.quic_host_key.as_ref().expect("inherited from http");
        assert_eq!(&*k.secret, &[9u8; 32]);
        assert!(s.quic_retry && !s.quic_gso);
        assert!(!format!("{k:?}").contains("9, 9"), "Debug hides the secret");
        // Defaults: nginx's, but GSO on and the CID limit quinn keeps.
        let c = ok("events {}\nhttp { server {} }\n");
        let s = &c.http.as_ref().unwrap().servers[0];
        assert!(s.http3 && !s.quic_retry && s.quic_gso && s.quic_host_key.is_none());
        assert_eq!(s.http3_max_concurrent_streams, 128);
        assert_eq!(s.http3_stream_buffer_size, 64 << 10);
        assert_eq!(s.quic_active_connection_id_limit, QUINN_CID_LIMIT);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_host_keys_are_emerg_with_file_and_line() {
        let dir = tmp("bad");
        let empty = dir.join("empty.key");
        std::fs::write(&empty, b"").unwrap();
        let short = dir.join("short.key");
        std::fs::write(&short, [1u8; 15]).unwrap();
        let conf = |p: &std::path::Path| {
            format!(
                "events {{}}\nhttp {{\n server {{\n  quic_host_key {};\n }}\n}}\n",
                p.display()
            )
        };
        let e = load_as(&conf(&empty), true).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("\"{}\" zero key size in /t/x.conf:4", empty.display())
        );
        let e = load_as(&conf(&short), true).unwrap_err().to_string();
        assert!(
            e.contains("is too short a key (15 bytes") && e.ends_with("in /t/x.conf:4"),
            "{e}"
        );
        let e = load_as(&conf(&dir.join("missing.key")), true)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("open() \"")
                && e.contains("missing.key\" failed (2: No such file or directory)")
                && e.ends_with("in /t/x.conf:4"),
            "{e}"
        );
        // Relative to the configuration directory, as nginx's conf-prefixed files.
        let d = directive("quic_host_key", &["k"], 1);
        let e = host_key(&d, &mut crate::conf::testutil::cx()).unwrap_err();
        assert!(e.to_string().contains("\"/c/k\""), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn values_quinn_cannot_honour_are_refused() {
        let e = load_as(
            "events {}\nhttp {\n quic_active_connection_id_limit 2;\n}\n",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("\"quic_active_connection_id_limit\" 2 cannot be honoured")
                && e.ends_with("only 5 can be set in /t/x.conf:3"),
            "{e}"
        );
        let c = ok("events {}\nhttp {\n quic_active_connection_id_limit 5;\n server {}\n}\n");
        assert_eq!(
            c.http.as_ref().unwrap().servers[0].quic_active_connection_id_limit,
            5
        );
        let e = load_as(
            "events {}\nhttp {\n quic_active_connection_id_limit x;\n}\n",
            true,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "\"quic_active_connection_id_limit\" directive invalid value in /t/x.conf:3"
        );
    }

    #[test]
    fn http3_directives_parse_with_nginx_contexts() {
        let c = ok(
            "events {}\nhttp {\n http3 off;\n http3_max_concurrent_streams 2;\n \
                    http3_stream_buffer_size 16k;\n server {}\n server { http3 on; }\n}\n",
        );
        let h = c.http.as_ref().unwrap();
        assert!(!h.servers[0].http3 && h.servers[1].http3);
        assert_eq!(h.servers[1].http3_max_concurrent_streams, 2);
        assert_eq!(h.servers[1].http3_stream_buffer_size, 16 << 10);
        let e = load_as(
            "events {}\nhttp { server { location / { http3 off; } } }\n",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("\"http3\" directive is not allowed here"),
            "{e}"
        );
        let e = load_as("events {}\nhttp { http3 maybe; }\n", true)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid value \"maybe\""), "{e}");
    }
}
