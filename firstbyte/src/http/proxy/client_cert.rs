//! `proxy_ssl_certificate /certs/$host.crt;`: client certificates for upstreams chosen per
//! request.
//!
//! At load, a location whose `proxy_ssl_certificate` or `_key` has variables gets a
//! [`DynamicClient`] instead of one fixed client config: the [`ClientBase`] (verifier, CAs,
//! CRLs, protocols: read once) and, with `proxy_ssl_certificate_cache`, a [`CertCache`] of
//! whole client configs keyed by the evaluated paths. Per request, the pipeline evaluates the
//! paths with the request's variables ([`paths`]: `$host`, `$http_*`, any request variable)
//! and [`DynamicClient::config`] gives the config — from the cache, or by reading the pair and
//! building a config from the base. Caching configs rather than only the pair also keeps each
//! certificate's TLS session cache, so resumption to the upstream works per certificate. A
//! missing or bad file fails that request only (502, the reason in the error log). Locations
//! with equal settings share one `DynamicClient`, so a cache at `http` level serves them all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::conf::model::{DynamicCertKey, ProxySsl};
use crate::conf::vars::Vars;
use crate::tls::{
    load_pair, pair_limits, stamp_of, CertCache, ClientBase, Lookup, PairStamp, TlsError,
};

/// A request's evaluated `proxy_ssl_certificate` and `_key` paths (or `data:` values).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientCertPaths {
    /// The certificate.
    pub cert: Arc<str>,
    /// The key.
    pub key: Arc<str>,
}

impl ClientCertPaths {
    /// One string naming the pair (the cache key and part of the pool key).
    pub fn joined(&self) -> String {
        format!("{}\n{}", self.cert, self.key)
    }
}

/// The paths of `ssl`'s variable certificate for a request with `vars`; `None` when the
/// location's client certificate is static or absent.
pub fn paths(ssl: &ProxySsl, vars: &dyn Vars) -> Option<ClientCertPaths> {
    let (cert, key) = ssl.dynamic.as_ref()?.eval(vars);
    Some(ClientCertPaths {
        cert: cert.into(),
        key: key.into(),
    })
}

/// How many pairs were read from files and how many requests the cache served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCertCounts {
    /// Pairs read and parsed (cache misses, or every request with the cache off).
    pub loaded: u64,
    /// Requests served from `proxy_ssl_certificate_cache`.
    pub hits: u64,
}

/// Per-request client configs for one `proxy_ssl_*` setting with a variable certificate.
pub struct DynamicClient {
    base: ClientBase,
    pair: DynamicCertKey,
    /// `proxy_ssl_password_file`'s lines, read at load.
    passwords: Option<crate::tls::Passwords>,
    cache: Option<Mutex<CertCache<Arc<rustls::ClientConfig>, PairStamp>>>,
    loaded: AtomicU64,
    hits: AtomicU64,
}

impl DynamicClient {
    /// The dynamic client of `ssl` (whose `dynamic` is set), on `base`.
    pub fn new(
        ssl: &ProxySsl,
        pair: DynamicCertKey,
        base: ClientBase,
        passwords: Option<crate::tls::Passwords>,
    ) -> Self {
        Self {
            base,
            pair,
            passwords,
            cache: pair_limits(ssl.certificate_cache).map(|l| Mutex::new(CertCache::new(l))),
            loaded: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// The pair as written (for messages).
    pub fn pair(&self) -> &DynamicCertKey {
        &self.pair
    }

    /// The client config for `paths` at `now`: cached, or read from the files.
    pub fn config(
        &self,
        paths: &ClientCertPaths,
        now: Instant,
    ) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        if paths.cert.is_empty() {
            // A certificate variable that came out empty: no client certificate, as nginx.
            return self.base.config(None);
        }
        let key = paths.joined();
        if let Some(c) = &self.cache {
            if let Ok(mut c) = c.lock() {
                let stamp = || Some((stamp_of(&paths.cert), stamp_of(&paths.key)));
                if let Lookup::Hit(cfg) = c.get(&key, now, stamp) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(cfg);
                }
            }
        }
        let (ck, stamp, encrypted) = load_pair(
            &paths.cert,
            &paths.key,
            self.passwords.as_deref(),
            self.base.provider(),
        )?;
        let n = self.loaded.fetch_add(1, Ordering::Relaxed) + 1;
        crate::fblog!(
            Debug,
            "proxy_ssl_certificate \"{}\" loaded ({n} loads, {} cache hits)",
            paths.cert,
            self.hits.load(Ordering::Relaxed)
        );
        let cfg = self.base.config(Some(ck))?;
        if let Some(c) = self.cache.as_ref().filter(|_| !encrypted) {
            if let Ok(mut c) = c.lock() {
                c.insert(key, cfg.clone(), stamp, now);
            }
        }
        Ok(cfg)
    }

    /// Loads and cache hits so far.
    pub fn counts(&self) -> ClientCertCounts {
        ClientCertCounts {
            loaded: self.loaded.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::{CertificateCache, Pos, TlsVersion};
    use crate::conf::vars::ComplexValue;
    use crate::tls::ObjectStore;
    use std::borrow::Cow;
    use std::path::PathBuf;
    use std::time::Duration;

    struct Host(&'static str);

    impl Vars for Host {
        fn get(&self, name: &str) -> Option<Cow<'_, str>> {
            (name == "host").then_some(Cow::Borrowed(self.0))
        }
    }

    fn ssl(dir: &std::path::Path, cache: CertificateCache) -> ProxySsl {
        let v = |ext: &str| {
            ComplexValue::parse(&format!("{}/$host.{ext}", dir.display())).expect("value")
        };
        ProxySsl {
            certificate: None,
            certificate_key: None,
            password_file: None,
            trusted_certificate: None,
            crl: None,
            verify_depth: 1,
            verify: false,
            server_name: false,
            name: None,
            session_reuse: true,
            protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            dynamic: Some(DynamicCertKey {
                cert: v("crt"),
                key: v("key"),
                conf_dir: PathBuf::from("/"),
                pos: Pos {
                    file: Arc::new(PathBuf::from("/t")),
                    line: 1,
                },
            }),
            certificate_cache: cache,
        }
    }

    fn client(dir: &std::path::Path, cache: CertificateCache) -> DynamicClient {
        let s = ssl(dir, cache);
        let base = ClientBase::new(&s, &mut ObjectStore::new()).expect("base");
        let pair = s.dynamic.clone().expect("dynamic");
        DynamicClient::new(&s, pair, base, None)
    }

    /// A directory of this test's own: tests run in parallel threads of one process, and
    /// two of them rewriting one pair made a certificate meet the other test's key.
    fn dir(test: &str) -> crate::testdir::TempDir {
        let d = crate::testdir::TempDir::new(&format!("pxcert-{test}"));
        let ck = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).expect("rcgen");
        std::fs::write(d.join("a.test.crt"), ck.cert.pem()).expect("w");
        std::fs::write(d.join("a.test.key"), ck.signing_key.serialize_pem()).expect("w");
        d
    }

    #[test]
    fn paths_follow_the_request() {
        let d = dir("paths");
        let s = ssl(&d, CertificateCache::Off);
        let p = paths(&s, &Host("a.test")).expect("dynamic");
        assert_eq!(&*p.cert, format!("{}/a.test.crt", d.display()));
        assert_eq!(&*p.key, format!("{}/a.test.key", d.display()));
        let mut fixed = s.clone();
        fixed.dynamic = None;
        assert_eq!(paths(&fixed, &Host("a.test")), None);
    }

    #[test]
    fn cache_serves_repeats_and_off_reads_each_time() {
        let d = dir("cache");
        let t = Instant::now();
        let cached = client(
            &d,
            CertificateCache::On {
                max: 4,
                inactive: Duration::from_secs(10),
                valid: Duration::from_secs(60),
            },
        );
        let p = paths(&ssl(&d, CertificateCache::Off), &Host("a.test")).expect("p");
        let a = cached.config(&p, t).expect("a");
        let b = cached.config(&p, t + Duration::from_secs(1)).expect("b");
        assert!(Arc::ptr_eq(&a, &b), "served from the cache");
        assert!(a.client_auth_cert_resolver.has_certs());
        assert_eq!(cached.counts(), ClientCertCounts { loaded: 1, hits: 1 });

        let off = client(&d, CertificateCache::Off);
        off.config(&p, t).expect("x");
        off.config(&p, t).expect("y");
        assert_eq!(off.counts(), ClientCertCounts { loaded: 2, hits: 0 });

        let missing = paths(&ssl(&d, CertificateCache::Off), &Host("b.test")).expect("p");
        let e = off.config(&missing, t).expect_err("no such file");
        assert!(e.to_string().contains("b.test.crt"), "{e}");
        assert_eq!(off.counts().loaded, 2, "a failed load is not counted");
    }

    /// nginx keeps encrypted keys out of its certificate caches: each request decrypts.
    #[test]
    fn encrypted_pairs_are_not_cached() {
        let d = dir("encrypted");
        let ck = rcgen::generate_simple_self_signed(vec!["e.test".to_string()]).expect("rcgen");
        std::fs::write(d.join("e.test.crt"), ck.cert.pem()).expect("w");
        let enc = crate::tls::encrypt_pkcs8_for_tests(&ck.signing_key.serialize_pem(), b"pw");
        std::fs::write(d.join("e.test.key"), enc).expect("w");
        let s = ssl(
            &d,
            CertificateCache::On {
                max: 4,
                inactive: Duration::from_secs(10),
                valid: Duration::from_secs(60),
            },
        );
        let base = ClientBase::new(&s, &mut ObjectStore::new()).expect("base");
        let pair = s.dynamic.clone().expect("dynamic");
        let c = DynamicClient::new(&s, pair, base, Some(Arc::new(vec![b"pw".to_vec()])));
        let p = paths(&s, &Host("e.test")).expect("p");
        let t = Instant::now();
        c.config(&p, t).expect("decrypted");
        c.config(&p, t).expect("again");
        assert_eq!(c.counts(), ClientCertCounts { loaded: 2, hits: 0 });
        // Without the password: an error (the request gets 500, as nginx).
        let none = client(&d, CertificateCache::Off);
        assert!(none.config(&p, t).is_err());
    }
}
