//! `ssl_certificate /certs/$ssl_server_name.crt;`: certificates chosen at handshake time.
//!
//! A server block whose `ssl_certificate` has variables gets a [`DynamicResolver`]. Over TCP
//! the runtime calls [`DynamicResolver::resolve_vars`] once the ClientHello is read, with the
//! variables known then (`$ssl_server_name`, the connection's addresses and ports, and the
//! configuration's `geo`, `map` and `split_clients` variables over them), and makes that
//! handshake with the chosen pair ([`with_certificate`]); as the config's own rustls
//! `ResolvesServerCert` (HTTP/3) it knows `$ssl_server_name` only. It loads the
//! pair — through the `ssl_certificate_cache` ([`CertCache`]) when one is configured, keyed by
//! the evaluated paths and revalidated by the files' stamps. A missing or bad file fails that
//! handshake only (rustls sends an alert), with the reason in the error log. Certificate and
//! key are cached as one entry that counts as two against `max`, as nginx caches them as two
//! objects (`max=4` holds two pairs).

use std::borrow::Cow;
use std::fmt;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::certcache::{CacheLimits, CertCache, Lookup};
use super::error::{LoadReason, TlsError};
use super::store::{read_source_stamped, FileStamp};
use super::{certs, client::file_source};
use crate::conf::model::{CertificateCache, DynamicCertKey, Source, TlsConf};
use crate::conf::vars::Vars;

/// The stamps of a pair's two files (certificate, key); `None` for `data:` or unreadable.
pub type PairStamp = (Option<FileStamp>, Option<FileStamp>);

/// Variables known at handshake time.
pub struct HandshakeVars<'a> {
    /// `$ssl_server_name`.
    pub server_name: &'a str,
}

impl Vars for HandshakeVars<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "ssl_server_name" | "host" | "server_name" => Some(Cow::Borrowed(self.server_name)),
            _ => None,
        }
    }
}

/// Loads certificate/key pairs named with variables, per handshake.
pub struct DynamicResolver {
    pairs: Vec<DynamicCertKey>,
    /// `ssl_password_file`'s lines, read when the config was loaded (as nginx).
    passwords: Option<super::store::Passwords>,
    provider: Arc<CryptoProvider>,
    cache: Option<Mutex<CertCache<Arc<CertifiedKey>, PairStamp>>>,
    /// Names whose files failed to load, under the same limits but apart from `cache`, so
    /// that a client cycling through unknown names neither costs a file read and a log line
    /// per handshake nor evicts the certificates that exist. An entry is retried when a
    /// file's stamp changes (it appears, or is replaced) or after `valid`.
    failed: Option<Mutex<CertCache<(), PairStamp>>>,
}

impl fmt::Debug for DynamicResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicResolver")
            .field("pairs", &self.pairs.len())
            .field("cache", &self.cache.is_some())
            .finish_non_exhaustive()
    }
}

/// The cache limits of `ssl_certificate_cache`, if on.
pub fn cache_limits(c: CertificateCache) -> Option<CacheLimits> {
    match c {
        CertificateCache::Off => None,
        CertificateCache::On {
            max,
            inactive,
            valid,
        } => Some(CacheLimits {
            max,
            inactive,
            valid,
        }),
    }
}

/// The limits of a cache of certificate/key pairs: nginx's cache holds the certificate and
/// the key as two objects, so `max=N` holds N/2 pairs (at least one).
pub fn pair_limits(c: CertificateCache) -> Option<CacheLimits> {
    cache_limits(c).map(|l| CacheLimits {
        max: (l.max / 2).max(1),
        ..l
    })
}

impl DynamicResolver {
    /// A resolver for the server's `dynamic_certificates`.
    pub fn new(
        tls: &TlsConf,
        passwords: Option<super::store::Passwords>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        Self {
            pairs: tls.dynamic_certificates.clone(),
            passwords,
            provider,
            cache: pair_limits(tls.certificate_cache).map(|l| Mutex::new(CertCache::new(l))),
            failed: pair_limits(tls.certificate_cache).map(|l| Mutex::new(CertCache::new(l))),
        }
    }

    /// The pair for `vars`, from the cache or the files.
    pub fn load(
        &self,
        pair: &DynamicCertKey,
        vars: &dyn Vars,
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let (cert, key) = pair.eval(vars);
        let cache_key = format!("{cert}\n{key}");
        let now = Instant::now();
        if let Some(c) = &self.cache {
            if let Ok(mut c) = c.lock() {
                let stamp = || Some((stamp_of(&cert), stamp_of(&key)));
                if let Lookup::Hit(ck) = c.get(&cache_key, now, stamp) {
                    crate::metrics::cache(crate::metrics::Cache::Certificate, 1, 0);
                    return Ok(ck);
                }
                crate::metrics::cache(crate::metrics::Cache::Certificate, 0, 1);
            }
        }
        let stamp_now = || (stamp_of(&cert), stamp_of(&key));
        if let Some(f) = &self.failed {
            if let Ok(mut f) = f.lock() {
                if let Lookup::Hit(()) = f.get(&cache_key, now, || Some(stamp_now())) {
                    return Err(TlsError::KnownFailure);
                }
            }
        }
        let (ck, stamp, encrypted) =
            match load_pair(&cert, &key, self.passwords.as_deref(), &self.provider) {
                Ok(loaded) => loaded,
                Err(e) => {
                    if let Some(f) = &self.failed {
                        if let Ok(mut f) = f.lock() {
                            f.insert(cache_key, (), stamp_now(), now);
                        }
                    }
                    return Err(e);
                }
            };
        if let Some(c) = self.cache.as_ref().filter(|_| !encrypted) {
            if let Ok(mut c) = c.lock() {
                c.insert(cache_key, ck.clone(), stamp, now);
            }
        }
        Ok(ck)
    }
}

/// The current stamp of an evaluated certificate or key path (`None` for `data:`).
pub fn stamp_of(path: &str) -> Option<FileStamp> {
    match file_source(path) {
        Source::File(p) => FileStamp::current(&p),
        Source::Data(_) => None,
    }
}

/// Reads and parses one pair, with the stamps it was read under and whether its key was
/// encrypted (such a pair is never cached, as nginx exempts encrypted keys from its caches).
pub fn load_pair(
    cert: &str,
    key: &str,
    passwords: Option<&Vec<Vec<u8>>>,
    provider: &Arc<CryptoProvider>,
) -> Result<(Arc<CertifiedKey>, PairStamp, bool), TlsError> {
    let cert_src = file_source(cert);
    let key_src = file_source(key);
    let (cb, cs) = read_source_stamped(&cert_src).map_err(|e| TlsError::Certificate {
        name: cert.to_string(),
        reason: LoadReason::Io(e),
    })?;
    let chain = certs::parse_chain(&cb).map_err(|reason| TlsError::Certificate {
        name: cert.to_string(),
        reason,
    })?;
    let (kb, ks) = read_source_stamped(&key_src).map_err(|e| TlsError::CertificateKey {
        name: key.to_string(),
        reason: LoadReason::Io(e),
    })?;
    let encrypted = certs::needs_password(&kb);
    let passwords = passwords.filter(|_| encrypted);
    let signing =
        certs::parse_key(&kb, passwords.map(|p| p.as_slice()), provider).map_err(|reason| {
            TlsError::CertificateKey {
                name: key.to_string(),
                reason,
            }
        })?;
    let ck = CertifiedKey::new(chain, signing);
    if !certs::keys_match(&ck) {
        return Err(TlsError::KeyMismatch {
            cert: cert.to_string(),
            key: key.to_string(),
        });
    }
    Ok((Arc::new(ck), (cs, ks), encrypted))
}

impl DynamicResolver {
    /// The first pair that loads with `vars` (whose `$ssl_server_name` is `sni`); failures
    /// are logged (once per name while remembered).
    pub fn resolve_vars(&self, vars: &dyn Vars, sni: &str) -> Option<Arc<CertifiedKey>> {
        // rustls admits only DNS names as SNI; refuse anything path-like all the same.
        if sni.contains('/') || sni.starts_with('.') {
            return None;
        }
        for pair in &self.pairs {
            match self.load(pair, vars) {
                Ok(ck) => return Some(ck),
                // Logged when it first failed.
                Err(TlsError::KnownFailure) => {}
                Err(e) => crate::fblog!(Error, "{e} while SSL handshaking, server name: \"{sni}\""),
            }
        }
        None
    }
}

impl ResolvesServerCert for DynamicResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name().unwrap_or("");
        self.resolve_vars(&HandshakeVars { server_name: sni }, sni)
    }
}

/// One connection's certificate, chosen before its handshake (none: the handshake fails).
#[derive(Debug)]
struct Chosen(Option<Arc<CertifiedKey>>);

impl ResolvesServerCert for Chosen {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.clone()
    }
}

/// `config` for one handshake whose certificate is `ck` (a retried ClientHello gets the same
/// one); sessions, tickets and every other setting are `config`'s own.
pub fn with_certificate(
    config: &Arc<rustls::ServerConfig>,
    ck: Option<Arc<CertifiedKey>>,
) -> Arc<rustls::ServerConfig> {
    let mut c = rustls::ServerConfig::clone(config);
    c.cert_resolver = Arc::new(Chosen(ck));
    Arc::new(c)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ecdsa_pem;
    use super::*;
    use crate::conf::model::Pos;
    use crate::conf::vars::ComplexValue;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    fn dir() -> crate::testdir::TempDir {
        crate::testdir::TempDir::new("dyn")
    }

    fn resolver(d: &Path, cache: CertificateCache) -> DynamicResolver {
        DynamicResolver {
            pairs: vec![DynamicCertKey {
                cert: ComplexValue::parse(&format!("{}/$ssl_server_name.crt", d.display()))
                    .expect("v"),
                key: ComplexValue::parse(&format!("{}/$ssl_server_name.key", d.display()))
                    .expect("v"),
                conf_dir: PathBuf::from("/nonexistent"),
                pos: Pos {
                    file: Arc::new(PathBuf::from("/t")),
                    line: 1,
                },
            }],
            passwords: None,
            provider: super::super::provider(),
            cache: pair_limits(cache).map(|l| Mutex::new(CertCache::new(l))),
            failed: pair_limits(cache).map(|l| Mutex::new(CertCache::new(l))),
        }
    }

    #[test]
    fn loads_by_name_caches_and_fails_cleanly() {
        let d = dir();
        let (c, k) = ecdsa_pem(&["one.test"]);
        std::fs::write(d.join("one.test.crt"), c).expect("w");
        std::fs::write(d.join("one.test.key"), k).expect("w");
        let r = resolver(
            &d,
            CertificateCache::On {
                max: 10,
                inactive: Duration::from_secs(10),
                valid: Duration::from_secs(60),
            },
        );
        let one = HandshakeVars {
            server_name: "one.test",
        };
        let a = r.load(&r.pairs[0], &one).expect("one");
        let b = r.load(&r.pairs[0], &one).expect("one again");
        assert!(
            Arc::ptr_eq(&a, &b),
            "second handshake served from the cache"
        );
        let missing = HandshakeVars {
            server_name: "two.test",
        };
        let e = r.load(&r.pairs[0], &missing).expect_err("no file");
        assert!(e.to_string().contains("two.test.crt"), "{e}");
        // The failure is remembered: no file read (and no log line) for the next handshake
        // with the same unknown name...
        let again = r.load(&r.pairs[0], &missing).expect_err("still no file");
        assert!(matches!(again, TlsError::KnownFailure), "{again}");
        // ...until its files appear (seen at the first lookup after `valid`).
        let quick = resolver(
            &d,
            CertificateCache::On {
                max: 10,
                inactive: Duration::from_secs(10),
                valid: Duration::ZERO,
            },
        );
        let three = HandshakeVars {
            server_name: "three.test",
        };
        quick.load(&quick.pairs[0], &three).expect_err("no file");
        let again = quick.load(&quick.pairs[0], &three).expect_err("unchanged");
        assert!(matches!(again, TlsError::KnownFailure), "{again}");
        let (c3, k3) = ecdsa_pem(&["three.test"]);
        std::fs::write(d.join("three.test.crt"), c3).expect("w");
        std::fs::write(d.join("three.test.key"), k3).expect("w");
        quick
            .load(&quick.pairs[0], &three)
            .expect("the new files are loaded");

        let uncached = resolver(&d, CertificateCache::Off);
        let x = uncached.load(&uncached.pairs[0], &one).expect("x");
        let y = uncached.load(&uncached.pairs[0], &one).expect("y");
        assert!(!Arc::ptr_eq(&x, &y), "no cache: read per handshake");
    }

    /// `max=4` holds two pairs, as nginx's four objects: a third name evicts the first.
    #[test]
    fn max_counts_certificate_and_key() {
        let d = dir();
        for name in ["e1.test", "e2.test", "e3.test"] {
            let (c, k) = ecdsa_pem(&[name]);
            std::fs::write(d.join(format!("{name}.crt")), c).expect("w");
            std::fs::write(d.join(format!("{name}.key")), k).expect("w");
        }
        let r = resolver(
            &d,
            CertificateCache::On {
                max: 4,
                inactive: Duration::from_secs(10),
                valid: Duration::from_secs(60),
            },
        );
        let vars = |server_name| HandshakeVars { server_name };
        let first = r.load(&r.pairs[0], &vars("e1.test")).expect("e1");
        r.load(&r.pairs[0], &vars("e2.test")).expect("e2");
        r.load(&r.pairs[0], &vars("e3.test")).expect("e3");
        let again = r.load(&r.pairs[0], &vars("e1.test")).expect("e1 again");
        assert!(!Arc::ptr_eq(&first, &again), "e1 was evicted");
    }
}
