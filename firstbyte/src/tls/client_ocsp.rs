//! `ssl_ocsp`: OCSP validation of a verified client chain, as nginx ≥ 1.19 does it
//! (`ngx_ssl_ocsp_validate` and what follows in `ngx_event_openssl_stapling.c`).
//!
//! After the handshake, before the first request, each certificate of the verified path is
//! checked in turn — `leaf`: the client's own only; `on`: every one but the self-signed
//! anchor — with the next one as its issuer. A certificate's status comes from the
//! `ssl_ocsp_cache` zone while an entry is current, else from its responder
//! (`ssl_ocsp_responder`, or the certificate's AIA): an HTTP/1.0 GET as stapling sends it
//! (`tls::stapler::exchange`), addresses tried in turn, the whole within 60 s. The response
//! must check out (`ocsp::Subject::examine`: signed by the issuer or a responder it delegated
//! to, for this certificate, current); its status is then cached (until `nextUpdate`, an hour
//! without one) and the first certificate that is not `good` ends the check. Any failure
//! (no responder, unresolvable name, connection refused, bad or unverifiable answer) is
//! nginx's `certificate status request failed`.
//!
//! Names: an address needs no resolving; a host name is asked of `resolver` (the caller's
//! [`NameResolver`]); without one, `ssl_ocsp_responder`'s host (which nginx resolves when it
//! loads the configuration) is looked up by the system resolver after a `[warn]`, and a
//! certificate's AIA host fails (`no resolver defined to resolve NAME`), as nginx.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;

use super::ocsp::{self, CertStatus, Responder, Subject};
use crate::conf::model::{OcspCacheZone, OcspMode, TlsConf};

/// What `$ssl_client_verify` says after `FAILED:` when the check fails (nginx's
/// `ngx_ssl_ocsp_get_status`).
pub const REQUEST_FAILED: &str = "certificate status request failed";
/// A certificate of the chain is revoked.
pub const REVOKED: &str = "certificate revoked";
/// The responder does not know a certificate of the chain.
pub const UNKNOWN: &str = "certificate status unknown";

/// How long a cache entry of a response without `nextUpdate` lasts (nginx: an hour).
const NO_NEXT_UPDATE: u64 = 3600;
/// Bytes of a zone per entry (nginx's node with its 60-byte key, in a 256-byte slab slot).
const ENTRY_BYTES: u64 = 256;

/// Resolves a responder's host name with `resolver` (implemented where the DNS client is).
pub trait NameResolver: Sync {
    /// The addresses of `name`, or nginx's reason (`NAME could not be resolved (...)`).
    fn resolve<'a>(
        &'a self,
        name: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, String>> + Send + 'a>>;
}

/// The result of the check: `None` when every certificate checked is good (or none needed
/// checking), else `$ssl_client_verify`'s reason.
pub type Outcome = Option<&'static str>;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks the verified `path` (leaf first, self-signed anchor last) as `tls` says
/// (`ssl_ocsp`, `ssl_ocsp_responder`, `ssl_ocsp_cache`); `resolver` is the server's
/// `resolver`, if any.
pub async fn validate(
    tls: &TlsConf,
    path: &[CertificateDer<'_>],
    resolver: Option<&dyn NameResolver>,
) -> Outcome {
    let n = path.len();
    let count = match tls.ocsp {
        OcspMode::Off => return None,
        OcspMode::Leaf => 1.min(n.saturating_sub(1)),
        OcspMode::On => n.saturating_sub(1),
    };
    let cache = tls.ocsp_cache.as_ref().map(zone);
    for i in 0..count {
        let (cert, issuer) = (path[i].as_ref(), path[i + 1].as_ref());
        let status = match check_one(tls, cert, issuer, cache.as_deref(), resolver).await {
            Ok(s) => s,
            Err(()) => return Some(REQUEST_FAILED),
        };
        match status {
            CertStatus::Good => {}
            CertStatus::Revoked => return Some(REVOKED),
            CertStatus::Unknown => return Some(UNKNOWN),
        }
    }
    None
}

/// nginx's log context: ` while requesting certificate status, responder: H, certificate: "S"`.
fn context(host: &str, cert: &[u8]) -> String {
    let subject = super::peer::subject_dn_legacy(&CertificateDer::from(cert)).unwrap_or_default();
    format!(" while requesting certificate status, responder: {host}, certificate: \"{subject}\"")
}

async fn check_one(
    tls: &TlsConf,
    cert: &[u8],
    issuer: &[u8],
    cache: Option<&OcspCache>,
    resolver: Option<&dyn NameResolver>,
) -> Result<CertStatus, ()> {
    let (url, configured) = match &tls.ocsp_responder {
        Some(u) => (u.clone(), true),
        None => match ocsp::responder_url(cert) {
            Some(u) => (u, false),
            None => {
                crate::fblog!(Error, "no OCSP responder URL in certificate");
                return Err(());
            }
        },
    };
    let Some(responder) = Responder::parse(&url) else {
        crate::fblog!(
            Error,
            "invalid URL prefix in OCSP responder \"{url}\" in certificate"
        );
        return Err(());
    };
    let ctx = context(&responder.host, cert);
    let subject = Subject::new(cert, issuer).map_err(|e| {
        crate::fblog!(Error, "{e}{ctx}");
    })?;
    let key = subject.cache_key();
    if let Some(s) = cache.and_then(|c| c.lookup(&key, unix_now())) {
        return Ok(s);
    }
    let fetched = tokio::time::timeout(
        super::stapler::TIMEOUT,
        fetch(&responder, configured, &subject, resolver),
    )
    .await;
    let der = match fetched {
        Ok(Ok(der)) => der,
        Ok(Err(e)) => {
            crate::fblog!(Error, "{e}{ctx}");
            return Err(());
        }
        Err(_) => {
            crate::fblog!(Error, "OCSP responder timed out{ctx}");
            return Err(());
        }
    };
    let now = unix_now();
    // The issuer is part of the verified path, so it is the anchor the response's signer
    // must lead to.
    let anchor = [issuer.to_vec()];
    let (status, validity) = subject.examine(&der, now, Some(&anchor)).map_err(|e| {
        crate::fblog!(Error, "{e}{ctx}");
    })?;
    if let Some(c) = cache {
        let valid = validity.next_update.unwrap_or(now + NO_NEXT_UPDATE);
        c.store(key, status, valid, now);
    }
    Ok(status)
}

async fn fetch(
    r: &Responder,
    configured: bool,
    subject: &Subject,
    resolver: Option<&dyn NameResolver>,
) -> Result<Vec<u8>, String> {
    let addrs: Vec<SocketAddr> = if let Ok(ip) = r.host.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, r.port)]
    } else if let Some(res) = resolver {
        res.resolve(&r.host)
            .await?
            .into_iter()
            .map(|ip| SocketAddr::new(ip, r.port))
            .collect()
    } else if configured {
        crate::fblog!(Warn, "no resolver defined to resolve {}", r.host);
        tokio::net::lookup_host((r.host.as_str(), r.port))
            .await
            .map_err(|e| format!("host not found in OCSP responder \"{}\" ({e})", r.host))?
            .collect()
    } else {
        return Err(format!("no resolver defined to resolve {}", r.host));
    };
    let request = subject.request();
    let mut last = format!("{} could not be resolved", r.host);
    for addr in addrs {
        match super::stapler::exchange(addr, r, &request).await {
            Ok(body) => return Ok(body),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One `ssl_ocsp_cache` zone: statuses by certificate, each until its response's
/// `nextUpdate`; when full, the oldest stored goes first (nginx's expire queue).
#[derive(Debug)]
pub struct OcspCache {
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    capacity: usize,
    entries: HashMap<Vec<u8>, (CertStatus, u64, u64)>,
    /// Insertion order: sequence number → key.
    order: BTreeMap<u64, Vec<u8>>,
    seq: u64,
}

impl OcspCache {
    /// A zone of at most `capacity` entries.
    pub fn new(capacity: usize) -> OcspCache {
        OcspCache {
            inner: Mutex::new(CacheInner {
                capacity: capacity.max(1),
                ..CacheInner::default()
            }),
        }
    }

    /// The cached status of `key` while current at `now`; an expired entry is dropped.
    pub fn lookup(&self, key: &[u8], now: u64) -> Option<CertStatus> {
        let mut c = self.inner.lock().ok()?;
        let &(status, valid, seq) = c.entries.get(key)?;
        if valid > now {
            return Some(status);
        }
        c.entries.remove(key);
        c.order.remove(&seq);
        None
    }

    /// Keeps `status` for `key` until `valid` (nothing when that is already past).
    pub fn store(&self, key: Vec<u8>, status: CertStatus, valid: u64, now: u64) {
        if valid < now {
            return;
        }
        let Ok(mut c) = self.inner.lock() else { return };
        if let Some((_, _, old)) = c.entries.remove(&key) {
            c.order.remove(&old);
        }
        while c.entries.len() >= c.capacity {
            let Some((_, oldest)) = c.order.pop_first() else {
                break;
            };
            c.entries.remove(&oldest);
        }
        c.seq += 1;
        let seq = c.seq;
        c.order.insert(seq, key.clone());
        c.entries.insert(key, (status, valid, seq));
    }

    fn set_capacity(&self, capacity: usize) {
        if let Ok(mut c) = self.inner.lock() {
            c.capacity = capacity.max(1);
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |c| c.entries.len())
    }

    /// Whether it holds none.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The zone named `z` (one per name for the process's life, as nginx's shared zones outlive
/// reloads; a reload's size applies).
fn zone(z: &OcspCacheZone) -> Arc<OcspCache> {
    static ZONES: Mutex<Option<HashMap<String, Arc<OcspCache>>>> = Mutex::new(None);
    let capacity = usize::try_from(z.size / ENTRY_BYTES).unwrap_or(usize::MAX);
    let Ok(mut zones) = ZONES.lock() else {
        return Arc::new(OcspCache::new(capacity));
    };
    let zones = zones.get_or_insert_with(HashMap::new);
    let c = zones
        .entry(z.name.clone())
        .or_insert_with(|| Arc::new(OcspCache::new(capacity)));
    c.set_capacity(capacity);
    c.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keeps_until_valid_and_drops_the_oldest_when_full() {
        let c = OcspCache::new(2);
        c.store(b"a".to_vec(), CertStatus::Good, 100, 10);
        c.store(b"b".to_vec(), CertStatus::Revoked, 100, 10);
        assert_eq!(c.lookup(b"a", 50), Some(CertStatus::Good));
        assert_eq!(c.lookup(b"b", 50), Some(CertStatus::Revoked));
        // Full: the first stored goes, even though it was looked up since.
        c.store(b"c".to_vec(), CertStatus::Good, 100, 10);
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(b"a", 50), None);
        assert_eq!(c.lookup(b"c", 50), Some(CertStatus::Good));
        // Expired at its nextUpdate, and dropped.
        assert_eq!(c.lookup(b"b", 100), None);
        assert_eq!(c.len(), 1);
        // Never stored when already stale.
        c.store(b"d".to_vec(), CertStatus::Good, 5, 10);
        assert_eq!(c.lookup(b"d", 6), None);
        // A second store replaces the first.
        c.store(b"c".to_vec(), CertStatus::Revoked, 200, 10);
        assert_eq!(c.lookup(b"c", 150), Some(CertStatus::Revoked));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn zones_are_shared_by_name() {
        let z = |name: &str| OcspCacheZone {
            name: name.into(),
            size: 1 << 20,
        };
        let a = zone(&z("client-ocsp-test-a"));
        a.store(b"k".to_vec(), CertStatus::Good, u64::MAX, 0);
        assert_eq!(
            zone(&z("client-ocsp-test-a")).lookup(b"k", 1),
            Some(CertStatus::Good)
        );
        assert!(zone(&z("client-ocsp-test-b")).is_empty());
    }
}
