//! `ssl_stapling` without `ssl_stapling_file`: fetches, checks, caches and refreshes the OCSP
//! response of one certificate, and hands the handshake the certificate with it stapled.
//!
//! As nginx, the first handshake that presents the certificate starts the fetch and goes out
//! without a staple; the handshake never waits. A background task then asks the responder
//! (HTTP/1.0 GET, as nginx; the host is resolved with the system resolver, as firstbyte resolves every
//! name: `resolver` is accepted but names are not re-resolved through it), checks the answer
//! with `ocsp` and swaps it in, then sleeps until `ocsp::refresh_after`. A failure is a
//! `[warn]` in the error log; the last good response keeps being stapled until its `nextUpdate`
//! (plus OpenSSL's leeway), after which the certificate goes out bare. The task holds the
//! stapler weakly and ends once the configuration that made it is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::ocsp::{self, Responder, Subject};

/// nginx's `ssl_ocsp` / stapling responder timeout (`ngx_ssl_ocsp_responder`'s default): 60 s
/// for the whole exchange.
pub(super) const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest responder answer read: 256 KiB (a response with a few certificates is ~4 KB).
const MAX_RESPONSE: u64 = 256 * 1024;

/// One certificate's stapling state.
pub struct Stapler {
    base: Arc<CertifiedKey>,
    plan: Result<Arc<Plan>, String>,
    current: ArcSwapOption<Stapled>,
    started: AtomicBool,
}

impl std::fmt::Debug for Stapler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stapler")
            .field("plan", &self.plan.as_ref().map(|p| &p.url))
            .finish_non_exhaustive()
    }
}

struct Plan {
    url: String,
    responder: Responder,
    subject: Subject,
    /// `ssl_stapling_verify on`: the certificates the issuer must be (or be signed by).
    trusted: Option<Vec<Vec<u8>>>,
}

struct Stapled {
    ck: Arc<CertifiedKey>,
    /// `nextUpdate` + leeway: not stapled after this (unix seconds).
    until: Option<u64>,
}

/// What the server block says about stapling, beside the certificate.
#[derive(Debug, Clone, Copy)]
pub struct StaplingConf<'a> {
    /// `ssl_stapling_responder`, overriding the certificate's AIA.
    pub responder: Option<&'a str>,
    /// `ssl_stapling_verify`.
    pub verify: bool,
    /// Certificates of `ssl_trusted_certificate` and `ssl_client_certificate` (DER): where the
    /// issuer is looked for when the chain lacks it, and the anchors of verification.
    pub trusted: &'a [Vec<u8>],
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Stapler {
    /// Prepares stapling for `base`; what cannot work (no issuer, no responder) is recorded
    /// and warned about at the first handshake, as nginx warns and serves without.
    pub fn new(base: Arc<CertifiedKey>, conf: StaplingConf<'_>) -> Arc<Stapler> {
        let plan = plan(&base, conf).map(Arc::new);
        Arc::new(Stapler {
            base,
            plan,
            current: ArcSwapOption::empty(),
            started: AtomicBool::new(false),
        })
    }

    /// The certificate to present: with the current response stapled when there is one.
    pub fn certified(self: &Arc<Self>) -> Arc<CertifiedKey> {
        if !self.started.load(Ordering::Relaxed) {
            self.start();
        }
        if let Some(s) = self.current.load().as_ref() {
            if s.until.is_none_or(|u| unix_now() <= u) {
                return s.ck.clone();
            }
        }
        self.base.clone()
    }

    fn start(self: &Arc<Self>) {
        match &self.plan {
            Err(why) => {
                if !self.started.swap(true, Ordering::Relaxed) {
                    crate::fblog!(Warn, "\"ssl_stapling\" ignored, {why}");
                }
            }
            Ok(_) => {
                let Ok(rt) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                if !self.started.swap(true, Ordering::Relaxed) {
                    rt.spawn(run(Arc::downgrade(self)));
                }
            }
        }
    }
}

fn plan(base: &CertifiedKey, conf: StaplingConf<'_>) -> Result<Plan, String> {
    let leaf = base.cert.first().ok_or("no certificate")?;
    let issuer = match base.cert.get(1) {
        Some(i) => i.to_vec(),
        None => find_issuer(leaf, conf.trusted)
            .ok_or("issuer certificate not found for the certificate")?,
    };
    let url = match conf.responder {
        Some(r) => r.to_string(),
        None => ocsp::responder_url(leaf).ok_or("no OCSP responder URL in the certificate")?,
    };
    let responder =
        Responder::parse(&url).ok_or_else(|| format!("invalid OCSP responder URL \"{url}\""))?;
    let subject = Subject::new(leaf, &issuer).map_err(|e| e.to_string())?;
    Ok(Plan {
        url,
        responder,
        subject,
        trusted: conf.verify.then(|| conf.trusted.to_vec()),
    })
}

fn find_issuer(leaf: &[u8], candidates: &[Vec<u8>]) -> Option<Vec<u8>> {
    let (_, leaf) = X509Certificate::from_der(leaf).ok()?;
    candidates
        .iter()
        .find(|c| {
            X509Certificate::from_der(c)
                .is_ok_and(|(_, c)| c.subject().as_raw() == leaf.issuer().as_raw())
        })
        .cloned()
}

async fn run(stapler: Weak<Stapler>) {
    loop {
        let Some((plan, base)) = stapler
            .upgrade()
            .and_then(|s| Some((s.plan.as_ref().ok()?.clone(), s.base.clone())))
        else {
            return;
        };
        let got = match tokio::time::timeout(TIMEOUT, fetch(&plan)).await {
            Ok(Ok(der)) => {
                let now = unix_now();
                match plan.subject.check(&der, now, plan.trusted.as_deref()) {
                    Ok(v) => Some((der, v)),
                    Err(e) => {
                        crate::fblog!(Warn, "{e} from \"{}\" (OCSP stapling)", plan.url);
                        None
                    }
                }
            }
            Ok(Err(e)) => {
                crate::fblog!(
                    Warn,
                    "{e} while requesting certificate status, responder: {}",
                    plan.url
                );
                None
            }
            Err(_) => {
                crate::fblog!(Warn, "OCSP responder timed out, responder: {}", plan.url);
                None
            }
        };
        let next = ocsp::refresh_after(unix_now(), got.as_ref().map(|(_, v)| v));
        if let Some((der, v)) = got {
            let Some(s) = stapler.upgrade() else { return };
            let mut ck = (*base).clone();
            ck.ocsp = Some(der);
            s.current.store(Some(Arc::new(Stapled {
                ck: Arc::new(ck),
                until: v.next_update.map(|n| n + ocsp::LEEWAY),
            })));
        }
        let wait = next.saturating_sub(unix_now());
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
}

async fn fetch(plan: &Plan) -> Result<Vec<u8>, String> {
    let r = &plan.responder;
    let addr = tokio::net::lookup_host((r.host.as_str(), r.port))
        .await
        .map_err(|e| format!("{} could not be resolved ({e})", r.host))?
        .next()
        .ok_or_else(|| format!("{} could not be resolved", r.host))?;
    exchange(addr, r, &plan.subject.request()).await
}

/// One OCSP request to the responder at `addr` (HTTP/1.0, read to the end): the response's
/// body (DER, unchecked), or what went wrong in nginx's words.
pub(super) async fn exchange(
    addr: std::net::SocketAddr,
    r: &Responder,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    let mut sock = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect() to {addr} failed ({e})"))?;
    sock.write_all(&r.get(request))
        .await
        .map_err(|e| format!("send() to {addr} failed ({e})"))?;
    let mut resp = Vec::new();
    (&mut sock)
        .take(MAX_RESPONSE)
        .read_to_end(&mut resp)
        .await
        .map_err(|e| format!("recv() from {addr} failed ({e})"))?;
    ocsp::http_body(&resp).map(<[u8]>::to_vec)
}
