//! One server block's TLS settings → one `rustls::ServerConfig`.
//!
//! [`server_config`] takes a merged [`TlsConf`], loads certificates through the load's
//! [`ObjectStore`], maps cipher and group lists (`ciphers`), and wires in the process-wide
//! ticket keys and session caches of [`TlsShared`]. The runtime calls it once per server block
//! per load and, after reading a ClientHello's SNI, serves that block's config. Inside a
//! config, [`choose_certificate`] picks among several pairs (ECDSA + RSA) per ClientHello.
//! [`ServerConfigs`] keeps one load's configs with what they were made from: on reload a
//! server whose settings are equal and whose files the store reused unchanged gets its
//! previous config back instead of a rebuild.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{
    ClientHello, NoServerSessionStorage, ResolvesServerCert, WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls::{
    CipherSuite, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureAlgorithm, SignatureScheme, SupportedCipherSuite,
};

use super::chain::ChainVerifier;
use super::ciphers;
use super::context::SessionContext;
use super::session_id;
use super::sessions::TimedSessions;
use super::stapler::{Stapler, StaplingConf};
use super::store::ObjectStore;
use super::tickets::{Ticketer, TlsShared};
use super::TlsError;
use crate::conf::model::{ServerConf, SessionCache, Source, TlsConf, TlsVersion, VerifyClient};

/// OpenSSL's (and so nginx's) number of TLS 1.3 tickets per full handshake: 2.
pub const DEFAULT_NUM_TICKETS: u32 = 2;

/// 0-RTT bytes accepted over TCP with `ssl_early_data on`: 16 KB, what nginx allows
/// (`SSL_CTX_set_max_early_data` with its 16 KB buffer) — a request head, not a body. rustls
/// accepts early data only on stateful resumption: with it on, the tickets are single-use
/// entries of `ssl_session_cache` (see [`build`]), which is the replay protection.
pub const EARLY_DATA_SIZE: u32 = 16 * 1024;

/// 0-RTT bytes accepted over TCP: [`EARLY_DATA_SIZE`] with `ssl_early_data on`, else none.
pub fn early_data_size(tls: &TlsConf) -> u32 {
    if tls.early_data {
        EARLY_DATA_SIZE
    } else {
        0
    }
}

/// ALPN protocols offered, most preferred first: `h2` (when HTTP/2 is on) then `http/1.1`.
pub fn alpn_protocols(alpn_h2: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(2);
    if alpn_h2 {
        out.push(b"h2".to_vec());
    }
    out.push(b"http/1.1".to_vec());
    out
}

/// Builds the rustls config of one server block (the runtime goes through [`ServerConfigs`],
/// which reuses the previous load's where nothing changed).
#[cfg(test)]
pub fn server_config(
    tls: &TlsConf,
    alpn_h2: bool,
    shared: &TlsShared,
    store: &mut ObjectStore,
) -> Result<Arc<ServerConfig>, TlsError> {
    let parts = check(tls)?;
    let inputs = load(tls, store)?;
    assemble(tls, alpn_h2, shared, parts, &inputs).map(|(c, _)| c)
}

/// What settings alone decide: versions, suites, groups.
struct Parts {
    tls12: bool,
    tls13: bool,
    suites12: Vec<SupportedCipherSuite>,
    suites13: Vec<SupportedCipherSuite>,
    provider: Arc<CryptoProvider>,
}

/// Validates the settings and maps them to rustls' terms.
fn check(tls: &TlsConf) -> Result<Parts, TlsError> {
    let tls12 = tls.protocols.contains(&TlsVersion::Tls12);
    let tls13 = tls.protocols.contains(&TlsVersion::Tls13);
    if !tls12 && !tls13 {
        return Err(TlsError::NoProtocols);
    }
    if tls.certificates.is_empty() && tls.dynamic_certificates.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let suites12 = ciphers::tls12_suites(&tls.ciphers, tls12)?;
    let suites13 = ciphers::tls13_suites(tls.ciphersuites.as_deref(), tls13)?;

    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = ciphers::kx_groups(&tls.ecdh_curve)?;
    provider.cipher_suites = Vec::new();
    if tls13 {
        provider.cipher_suites.extend(suites13.iter().copied());
    }
    if tls12 {
        provider.cipher_suites.extend(suites12.iter().copied());
    }
    Ok(Parts {
        tls12,
        tls13,
        suites12,
        suites13,
        provider: Arc::new(provider),
    })
}

/// The objects a server's config is made from, as the load's store handed them out: equal
/// settings and the very same objects make the very same config.
struct Inputs {
    certs: Vec<Arc<CertifiedKey>>,
    /// `ssl_client_certificate`, when `ssl_verify_client` is `on` or `optional`.
    roots: Option<Arc<RootCertStore>>,
    /// `ssl_trusted_certificate`, trusted for client chains beside `roots` (not named to
    /// clients), when `ssl_verify_client` is `on` or `optional`.
    trusted_roots: Option<Arc<RootCertStore>>,
    /// The certificates of `ssl_client_certificate` and `ssl_trusted_certificate`, when
    /// client chains are verified: the anchors of `tls::chain`.
    anchors: Vec<CertificateDer<'static>>,
    /// `ssl_crl`, when client chains are verified.
    crl: Option<Arc<Vec<CertificateRevocationListDer<'static>>>>,
    /// `ssl_session_ticket_key` files (name, bytes), when tickets are on.
    tickets: Vec<(String, Arc<[u8]>)>,
    /// `ssl_trusted_certificate` and `ssl_client_certificate` (PEM), when OCSP responses are
    /// fetched (`ssl_stapling on` without `ssl_stapling_file`).
    trusted: Vec<Arc<[u8]>>,
    /// `ssl_password_file`'s lines, read at load as nginx does (keys named with variables
    /// are decrypted with them later).
    passwords: Option<super::store::Passwords>,
}

impl Inputs {
    fn same_objects(&self, other: &Inputs) -> bool {
        self.passwords == other.passwords
            && self.certs.len() == other.certs.len()
            && self
                .certs
                .iter()
                .zip(&other.certs)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && match (&self.roots, &other.roots) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
            && self.tickets.len() == other.tickets.len()
            && self
                .tickets
                .iter()
                .zip(&other.tickets)
                .all(|((_, a), (_, b))| Arc::ptr_eq(a, b))
            && opt_ptr_eq(&self.trusted_roots, &other.trusted_roots)
            && opt_ptr_eq(&self.crl, &other.crl)
            && self.trusted.len() == other.trusted.len()
            && self
                .trusted
                .iter()
                .zip(&other.trusted)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// Reads (or reuses, through the store) every file the config needs.
fn load(tls: &TlsConf, store: &mut ObjectStore) -> Result<Inputs, TlsError> {
    let ocsp = if tls.stapling {
        tls.stapling_file.as_deref()
    } else {
        None
    };
    let passwords = match &tls.password_file {
        Some(path) => Some(store.passwords(path)?),
        None => None,
    };
    let mut certs = Vec::with_capacity(tls.certificates.len());
    for pair in &tls.certificates {
        certs.push(store.certified_key(pair, tls.password_file.as_deref(), ocsp)?);
    }
    if let Some(pair) = &tls.conf_certificate {
        // `ssl_conf_command Certificate`: OpenSSL keeps one certificate per kind of key, so
        // it takes the place of the configured one of its kind.
        let ck = store.certified_key(pair, tls.password_file.as_deref(), ocsp)?;
        certs.retain(|c| c.key.algorithm() != ck.key.algorithm());
        certs.push(ck);
    }
    let verify = matches!(tls.verify_client, VerifyClient::On | VerifyClient::Optional);
    // `optional_no_ca` still verifies against the CA files it has (nginx's `SUCCESS`).
    let check = verify || tls.verify_client == VerifyClient::OptionalNoCa;
    let roots = match &tls.client_certificate {
        Some(path) if check => Some(store.roots(path)?),
        _ => None,
    };
    let mut trusted_roots = None;
    if let Some(path) = &tls.trusted_certificate {
        // Loaded and checked as nginx does at start.
        let r = store.roots(path)?;
        trusted_roots = check.then_some(r);
    }
    if verify && roots.is_none() && trusted_roots.is_none() {
        return Err(TlsError::NoClientCertificate);
    }
    let crl = match &tls.crl {
        Some(path) if check => Some(store.crls(path)?),
        _ => None,
    };
    let mut anchors = Vec::new();
    if check {
        for path in [&tls.client_certificate, &tls.trusted_certificate]
            .into_iter()
            .flatten()
        {
            anchors.extend(store.ca_file(path)?.1.iter().cloned());
        }
    }
    let mut trusted = Vec::new();
    if tls.stapling && tls.stapling_file.is_none() {
        // Where the stapler looks for issuers and verification anchors: both CA files, as
        // nginx's certificate store holds both.
        for path in [&tls.trusted_certificate, &tls.client_certificate]
            .into_iter()
            .flatten()
        {
            let bytes = store.bytes(path).map_err(|e| TlsError::ClientCertificate {
                name: path.display().to_string(),
                reason: super::error::LoadReason::Io(e),
            })?;
            trusted.push(bytes);
        }
    }
    let mut tickets = Vec::new();
    if tls.session_tickets {
        tickets.reserve(tls.session_ticket_keys.len());
        for path in &tls.session_ticket_keys {
            let name = path.display().to_string();
            let bytes = store.bytes(path).map_err(|error| TlsError::TicketKeyFile {
                name: name.clone(),
                error,
            })?;
            tickets.push((name, bytes));
        }
    }
    Ok(Inputs {
        certs,
        roots,
        trusted_roots,
        anchors,
        crl,
        tickets,
        trusted,
        passwords,
    })
}

/// Puts a config together from checked settings and loaded objects.
fn assemble(
    tls: &TlsConf,
    alpn_h2: bool,
    shared: &TlsShared,
    parts: Parts,
    inputs: &Inputs,
) -> Result<(Arc<ServerConfig>, Option<Arc<super::DynamicResolver>>), TlsError> {
    let Parts {
        tls12,
        tls13,
        suites12,
        suites13,
        provider,
    } = parts;
    let mut versions = Vec::with_capacity(2);
    if tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if tls12 {
        versions.push(&rustls::version::TLS12);
    }
    // `ssl_certificate` with variables: loaded per handshake (tls::dynamic).
    let mut dynamic = None;
    let resolver: Arc<dyn ResolvesServerCert> = if inputs.certs.is_empty() {
        let d = Arc::new(super::DynamicResolver::new(
            tls,
            inputs.passwords.clone(),
            provider.clone(),
        ));
        dynamic = Some(d.clone());
        d
    } else {
        let mut r = CertResolver::new(
            inputs.certs.clone(),
            if tls13 { suites13 } else { Vec::new() },
            if tls12 { suites12 } else { Vec::new() },
        );
        if tls.stapling && tls.stapling_file.is_none() {
            r.staple(tls, &inputs.trusted);
        }
        Arc::new(r)
    };

    let verifier = client_verifier(tls, inputs, &provider)?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(resolver);

    config.alpn_protocols = alpn_protocols(alpn_h2);
    // Kernel TLS takes the traffic keys after the handshake (`tls::ktls`).
    config.enable_secret_extraction = tls.ktls;
    if tls.ktls {
        // TLS 1.3: the client's traffic secret, kept for its KeyUpdates (`ktls::rx::capture`).
        config.key_log = Arc::new(super::ktls::rx::capture::SecretLog);
        // Probed (and a `[warn]` logged when unusable) once, at the first load that asks.
        let _ = super::ktls::sys::support();
        if tls.ktls_tx_zerocopy {
            let _ = super::ktls::sys::zerocopy();
        }
    }
    config.ignore_client_order = tls.prefer_server_ciphers;
    super::compress::configure(&mut config, tls, inputs.certs.len());
    config.max_early_data_size = early_data_size(tls);
    // The answer to a request in early data leaves with the server's Finished (0.5-RTT data),
    // a round trip before the client's Finished; without it 0-RTT would save nothing. rustls
    // never sends it to a client it asked for a certificate, and the stream hands out the
    // connection before its handshake completes only when early data was accepted
    // (`tls::stream::handshake`), so no other handshake changes.
    config.send_half_rtt_data = tls.early_data;
    config.send_tls13_tickets =
        usize::try_from(tls.num_tickets.unwrap_or(DEFAULT_NUM_TICKETS)).unwrap_or(usize::MAX);
    // Sessions resume only on servers with the same certificates and client checks.
    let context = SessionContext::of(tls, &inputs.certs, inputs.roots.as_deref());
    config.session_storage = match tls.session_cache {
        SessionCache::Off | SessionCache::None | SessionCache::Sessions(0) => {
            Arc::new(NoServerSessionStorage {})
        }
        // Entries carry `$ssl_session_id` (`session_id`).
        SessionCache::Sessions(n) => Arc::new(session_id::Sessions(Arc::new(
            TimedSessions::new(shared.session_cache(n), tls.session_timeout.as_secs())
                .with_context(context),
        ))),
    };
    // With early data, tickets are single-use entries of the session cache (rustls accepts
    // 0-RTT only so; the configuration checks a cache is there): no stateless ticketer.
    if tls.session_tickets && !tls.early_data {
        let ticketer = if inputs.tickets.is_empty() {
            shared.generated_ticketer(tls.session_timeout)
        } else {
            Ticketer::from_files(&inputs.tickets, tls.session_timeout)?
        };
        // Tickets carry `$ssl_session_id` (`session_id`).
        config.ticketer = Arc::new(session_id::Tickets(Arc::new(
            ticketer.with_context(context),
        )));
    }
    Ok((Arc::new(config), dynamic))
}

/// Whether two servers' TLS settings make the same config, certificates aside (those are
/// compared as loaded objects). Where a directive was written does not matter. Every field is
/// named, so a new `TlsConf` field does not compile here until it is considered.
fn same_settings(a: &TlsConf, b: &TlsConf) -> bool {
    let TlsConf {
        certificates,
        password_file,
        reject_handshake,
        protocols,
        ciphers,
        ciphersuites,
        conf_certificate,
        num_tickets,
        ktls,
        ktls_tx_zerocopy,
        prefer_server_ciphers,
        certificate_compression,
        ecdh_curve,
        early_data,
        session_tickets,
        session_ticket_keys,
        session_timeout,
        session_cache,
        verify_client,
        client_certificate,
        stapling,
        stapling_file,
        stapling_verify,
        stapling_responder,
        crl,
        verify_depth,
        trusted_certificate,
        dynamic_certificates,
        certificate_cache,
        ocsp,
        ocsp_responder,
        ocsp_cache,
        ocsp_resolver,
    } = a;
    certificates.len() == b.certificates.len()
        && certificates
            .iter()
            .zip(&b.certificates)
            .all(|(x, y)| x.cert == y.cert && x.key == y.key)
        && *password_file == b.password_file
        && *reject_handshake == b.reject_handshake
        && *protocols == b.protocols
        && *ciphers == b.ciphers
        && *ciphersuites == b.ciphersuites
        && conf_certificate.as_ref().map(|c| (&c.cert, &c.key))
            == b.conf_certificate.as_ref().map(|c| (&c.cert, &c.key))
        && *num_tickets == b.num_tickets
        && *ktls == b.ktls
        && *ktls_tx_zerocopy == b.ktls_tx_zerocopy
        && *prefer_server_ciphers == b.prefer_server_ciphers
        && *certificate_compression == b.certificate_compression
        && *ecdh_curve == b.ecdh_curve
        && *early_data == b.early_data
        && *session_tickets == b.session_tickets
        && *session_ticket_keys == b.session_ticket_keys
        && *session_timeout == b.session_timeout
        && *session_cache == b.session_cache
        && *verify_client == b.verify_client
        && *client_certificate == b.client_certificate
        && *stapling == b.stapling
        && *stapling_file == b.stapling_file
        && *stapling_verify == b.stapling_verify
        && *stapling_responder == b.stapling_responder
        && *crl == b.crl
        && *verify_depth == b.verify_depth
        && *trusted_certificate == b.trusted_certificate
        // Handshake-time certificates keep a cache in their resolver: never carried over.
        && dynamic_certificates.is_empty()
        && b.dynamic_certificates.is_empty()
        && *certificate_cache == b.certificate_cache
        && *ocsp == b.ocsp
        && *ocsp_responder == b.ocsp_responder
        && *ocsp_cache == b.ocsp_cache
        && *ocsp_resolver == b.ocsp_resolver
}

/// One built config and what it was built from.
struct Built {
    /// The server block (its `tls` settings are what `same_settings` compares).
    server: Arc<ServerConf>,
    alpn_h2: bool,
    inputs: Inputs,
    config: Arc<ServerConfig>,
    /// The strict verifier of `ssl_verify_client on|optional` (see `tls::peer`).
    client_verifier: Option<Arc<ChainVerifier>>,
    /// The handshake-time loader of `ssl_certificate` with variables.
    dynamic: Option<Arc<super::DynamicResolver>>,
}

/// The rustls configs one load built, in server order, kept for the next load: a server
/// whose settings are equal and whose certificates, keys, CA bundle and ticket key files are
/// the very objects the store reused (files unchanged) gets the previous config itself,
/// skipping the rebuild (and the old one's teardown). Anything changed builds afresh.
#[derive(Default)]
pub struct ServerConfigs {
    built: Vec<Built>,
    /// Index of `built` by first certificate, made on the first server the next load does
    /// not find at the same position (servers added, removed or moved).
    by_cert: OnceLock<HashMap<Source, Vec<usize>>>,
    reused: usize,
}

impl fmt::Debug for ServerConfigs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfigs")
            .field("built", &self.built.len())
            .field("reused", &self.reused)
            .finish_non_exhaustive()
    }
}

impl ServerConfigs {
    /// None built yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many configs were taken whole from the previous load.
    #[cfg(test)]
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// The rustls config of `server` (which must have `tls` settings: `None` otherwise):
    /// `previous`'s when nothing it was made from changed, else a new one (as
    /// [`server_config`]). Files are checked through `store` either way.
    pub fn config_for(
        &mut self,
        server: &Arc<ServerConf>,
        alpn_h2: bool,
        shared: &TlsShared,
        store: &mut ObjectStore,
        previous: Option<&ServerConfigs>,
    ) -> Result<Option<Arc<ServerConfig>>, TlsError> {
        let Some(tls) = server.tls.as_ref() else {
            return Ok(None);
        };
        if tls.reject_handshake
            || (tls.certificates.is_empty() && tls.dynamic_certificates.is_empty())
        {
            // Handshakes are refused before a config is chosen (`server::conn::accept`), or
            // made by the address's default server (a block without a certificate).
            return Ok(None);
        }
        if let Some(p) = previous.filter(|_| self.built.is_empty()) {
            self.built.reserve(p.built.len());
        }
        let candidate = previous.and_then(|p| p.candidate(self.built.len(), tls, alpn_h2));
        let ((config, dynamic), inputs, client_verifier) = match candidate {
            // Equal settings built before, so they check; only the files can differ.
            Some(prev) => {
                let inputs = load(tls, store)?;
                if inputs.same_objects(&prev.inputs) {
                    self.reused += 1;
                    (
                        (prev.config.clone(), prev.dynamic.clone()),
                        inputs,
                        prev.client_verifier.clone(),
                    )
                } else {
                    let parts = check(tls)?;
                    let v = strict_client_verifier(tls, &inputs, &parts.provider)?;
                    (assemble(tls, alpn_h2, shared, parts, &inputs)?, inputs, v)
                }
            }
            None => {
                let parts = check(tls)?;
                let inputs = load(tls, store)?;
                let v = strict_client_verifier(tls, &inputs, &parts.provider)?;
                (assemble(tls, alpn_h2, shared, parts, &inputs)?, inputs, v)
            }
        };
        self.built.push(Built {
            server: server.clone(),
            alpn_h2,
            inputs,
            config: config.clone(),
            client_verifier,
            dynamic,
        });
        Ok(Some(config))
    }

    /// The strict client verifier of the server last given to [`Self::config_for`] (`on` and
    /// `optional` only): what `tls::peer::verify` checks a client's chain with.
    pub fn last_client_verifier(&self) -> Option<Arc<ChainVerifier>> {
        self.built.last()?.client_verifier.clone()
    }

    /// The handshake-time certificate loader of the server last given to
    /// [`Self::config_for`], when its `ssl_certificate` has variables.
    pub fn last_dynamic(&self) -> Option<Arc<super::DynamicResolver>> {
        self.built.last()?.dynamic.clone()
    }

    /// A config built for equal settings: the one at the same position, else any.
    fn candidate(&self, index: usize, tls: &TlsConf, alpn_h2: bool) -> Option<&Built> {
        let fits = |b: &Built| {
            b.alpn_h2 == alpn_h2 && b.server.tls.as_ref().is_some_and(|t| same_settings(t, tls))
        };
        if let Some(b) = self.built.get(index).filter(|b| fits(b)) {
            return Some(b);
        }
        let first = &tls.certificates.first()?.cert;
        let by_cert = self.by_cert.get_or_init(|| {
            let mut m: HashMap<Source, Vec<usize>> = HashMap::new();
            for (i, b) in self.built.iter().enumerate() {
                if let Some(c) = b.server.tls.as_ref().and_then(|t| t.certificates.first()) {
                    m.entry(c.cert.clone()).or_default().push(i);
                }
            }
            m
        });
        by_cert
            .get(first)?
            .iter()
            .filter_map(|&i| self.built.get(i))
            .find(|b| fits(b))
    }
}

/// `ssl_verify_client` (+ `ssl_client_certificate`, loaded as `roots`) as the handshake's
/// client verifier: every mode but `off` accepts any certificate whose key the client proves it
/// holds, as nginx, and the chain is checked after the handshake ([`strict_client_verifier`],
/// `tls::peer`), so a request gets nginx's 495 or 496 page.
fn client_verifier(
    tls: &TlsConf,
    inputs: &Inputs,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    match tls.verify_client {
        VerifyClient::Off => Ok(WebPkiClientVerifier::no_client_auth()),
        // `on` too: as nginx, the handshake takes any certificate whose key the client
        // holds (or none), and each request is refused (495, 496) unless the chain verified.
        VerifyClient::OptionalNoCa | VerifyClient::Optional | VerifyClient::On => {
            Ok(Arc::new(AnyClientCert {
                provider: provider.clone(),
                hints: hints(inputs),
            }))
        }
    }
}

/// The verifier a client's chain must pass for `ssl_verify_client on` or `optional`: the
/// chain leads to a certificate of `ssl_client_certificate` or `ssl_trusted_certificate`
/// (only the former's names are sent to the client, as nginx), and no certificate of it is
/// revoked by `ssl_crl`. `None` for `off` and `optional_no_ca`.
fn strict_client_verifier(
    tls: &TlsConf,
    inputs: &Inputs,
    provider: &Arc<CryptoProvider>,
) -> Result<Option<Arc<ChainVerifier>>, TlsError> {
    match tls.verify_client {
        VerifyClient::Off => return Ok(None),
        VerifyClient::OptionalNoCa if inputs.anchors.is_empty() => return Ok(None),
        _ if inputs.anchors.is_empty() => return Err(TlsError::NoClientCertificate),
        _ => {}
    }
    // Only `ssl_client_certificate`'s names are sent to clients, as nginx.
    let hints = hints(inputs);
    let verifier = ChainVerifier::new(
        super::chain::Purpose::Client,
        inputs.anchors.clone(),
        inputs.crl.as_deref().map(Vec::as_slice),
        tls.verify_depth,
        hints,
        provider.clone(),
    )
    .map_err(|e| TlsError::Rustls(rustls::Error::General(e)))?;
    Ok(Some(Arc::new(verifier)))
}

/// The CA names sent to clients: `ssl_client_certificate`'s subjects, each once.
fn hints(inputs: &Inputs) -> Vec<DistinguishedName> {
    let mut names = inputs
        .roots
        .as_ref()
        .map(|r| r.subjects())
        .unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.as_ref().to_vec()));
    names
}

fn opt_ptr_eq<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// `ssl_verify_client optional` / `optional_no_ca` at the handshake: ask for a certificate
/// (naming the CA's subjects, if any), accept any; the handshake signature is still checked,
/// proving the client holds the key.
#[derive(Debug)]
struct AnyClientCert {
    provider: Arc<CryptoProvider>,
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::chain::tls12_signature(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        super::chain::tls13_signature(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Picks one of a server's certificates per ClientHello.
struct CertResolver {
    /// ECDSA (and EdDSA) first, then RSA; otherwise in directive order.
    certs: Vec<Arc<CertifiedKey>>,
    /// Per certificate, its OCSP fetcher (`ssl_stapling on` without `ssl_stapling_file`).
    staplers: Vec<Option<Arc<Stapler>>>,
    tls13: Vec<SupportedCipherSuite>,
    tls12: Vec<SupportedCipherSuite>,
}

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertResolver")
            .field("certs", &self.certs.len())
            .finish_non_exhaustive()
    }
}

impl CertResolver {
    fn new(
        all: Vec<Arc<CertifiedKey>>,
        tls13: Vec<SupportedCipherSuite>,
        tls12: Vec<SupportedCipherSuite>,
    ) -> Self {
        // OpenSSL keeps one certificate per key type (`SSL_CTX_use_certificate`): a later
        // pair of a type replaces the earlier one, which nginx then never serves.
        let mut certs: Vec<Arc<CertifiedKey>> = Vec::with_capacity(all.len());
        for ck in all {
            match certs
                .iter()
                .position(|c| c.key.algorithm() == ck.key.algorithm())
            {
                Some(i) => certs[i] = ck,
                None => certs.push(ck),
            }
        }
        certs.sort_by_key(|c| c.key.algorithm() == SignatureAlgorithm::RSA);
        Self {
            staplers: vec![None; certs.len()],
            certs,
            tls13,
            tls12,
        }
    }

    /// Fetches OCSP responses for every certificate (`trusted`: the PEM CA files).
    fn staple(&mut self, tls: &TlsConf, trusted: &[Arc<[u8]>]) {
        use rustls::pki_types::pem::PemObject;
        let trusted: Vec<Vec<u8>> = trusted
            .iter()
            .flat_map(|pem| CertificateDer::pem_slice_iter(pem).flatten())
            .map(|c| c.to_vec())
            .collect();
        let conf = StaplingConf {
            responder: tls.stapling_responder.as_deref(),
            verify: tls.stapling_verify,
            trusted: &trusted,
        };
        self.staplers = self
            .certs
            .iter()
            .map(|ck| Some(Stapler::new(ck.clone(), conf)))
            .collect();
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let i = choose_certificate(
            &self.certs,
            hello.signature_schemes(),
            hello.cipher_suites(),
            &self.tls13,
            &self.tls12,
        )?;
        if let Some(Some(s)) = self.staplers.get(i) {
            return Some(s.certified());
        }
        self.certs.get(i).cloned()
    }
}

/// The index of the certificate to present: the first (ECDSA before RSA) whose key can sign
/// with a scheme the client offers, and for which some suite both sides enable works (any
/// TLS 1.3 suite; a TLS 1.2 suite of the key's type). When none fits, the first certificate,
/// as OpenSSL does, and the handshake fails on its own terms. `None` only without certificates.
pub fn choose_certificate(
    certs: &[Arc<CertifiedKey>],
    schemes: &[SignatureScheme],
    offered: &[CipherSuite],
    tls13: &[SupportedCipherSuite],
    tls12: &[SupportedCipherSuite],
) -> Option<usize> {
    if certs.is_empty() {
        return None;
    }
    let via13 = tls13.iter().any(|s| offered.contains(&s.suite()));
    let fits = |ck: &CertifiedKey| {
        let alg = ck.key.algorithm();
        ck.key.choose_scheme(schemes).is_some()
            && (via13
                || tls12
                    .iter()
                    .any(|s| offered.contains(&s.suite()) && s.usable_for_signature_algorithm(alg)))
    };
    Some(certs.iter().position(|c| fits(c)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use rustls::client::Resumption;
    use rustls::crypto::aws_lc_rs::cipher_suite as cs;
    use rustls::{ClientConfig, HandshakeKind, ProtocolVersion};
    use rustls_pki_types::pem::PemObject;

    use super::super::names::{cipher_name, group_name};
    use super::super::testutil::{
        any_server_cert, any_server_cert_only, client_config, ecdsa_pem, handshake, provider,
        rsa_pem, CountingStore,
    };
    use super::*;
    use crate::conf::model::{CertKey, Pos, Source};

    fn dir(tag: &str) -> crate::testdir::TempDir {
        crate::testdir::TempDir::new(&format!("server-{tag}"))
    }

    fn write_pair(d: &Path, name: &str, pem: (String, String)) -> CertKey {
        std::fs::write(d.join(format!("{name}.crt")), pem.0).expect("write");
        std::fs::write(d.join(format!("{name}.key")), pem.1).expect("write");
        CertKey {
            cert: Source::File(d.join(format!("{name}.crt"))),
            key: Source::File(d.join(format!("{name}.key"))),
            pos: Pos {
                file: Arc::new(PathBuf::from("/t.conf")),
                line: 1,
            },
        }
    }

    /// nginx's defaults with one certificate pair.
    fn conf(certificates: Vec<CertKey>) -> TlsConf {
        TlsConf {
            certificates,
            password_file: None,
            reject_handshake: false,
            protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            ciphers: "HIGH:!aNULL:!MD5".into(),
            ciphersuites: None,
            conf_certificate: None,
            num_tickets: None,
            ktls: false,
            ktls_tx_zerocopy: false,
            prefer_server_ciphers: false,
            certificate_compression: false,
            ecdh_curve: "auto".into(),
            early_data: false,
            session_tickets: true,
            session_ticket_keys: Vec::new(),
            session_timeout: Duration::from_secs(300),
            session_cache: SessionCache::None,
            verify_client: VerifyClient::Off,
            client_certificate: None,
            stapling: false,
            stapling_file: None,
            stapling_verify: false,
            stapling_responder: None,
            crl: None,
            verify_depth: 1,
            trusted_certificate: None,
            dynamic_certificates: vec![],
            certificate_cache: crate::conf::model::CertificateCache::Off,
            ocsp: crate::conf::model::OcspMode::Off,
            ocsp_responder: None,
            ocsp_cache: None,
            ocsp_resolver: None,
        }
    }

    fn ecdsa_conf(tag: &str) -> (crate::testdir::TempDir, TlsConf) {
        let d = dir(tag);
        let pair = write_pair(&d, "ec", ecdsa_pem(&["localhost"]));
        (d, conf(vec![pair]))
    }

    fn build(tls: &TlsConf, shared: &TlsShared) -> Arc<ServerConfig> {
        server_config(tls, true, shared, &mut ObjectStore::new()).expect("server config")
    }

    fn client(versions: &[&'static rustls::SupportedProtocolVersion]) -> ClientConfig {
        client_config(provider(), versions, any_server_cert())
    }

    const BOTH: &[&rustls::SupportedProtocolVersion] =
        &[&rustls::version::TLS13, &rustls::version::TLS12];

    #[test]
    fn defaults_handshake_tls13_with_h2() {
        let (_d, tls) = ecdsa_conf("defaults");
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        assert_eq!(
            cfg.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert_eq!(cfg.send_tls13_tickets, 2);
        assert_eq!(cfg.max_early_data_size, 0);
        let mut c = client(BOTH);
        c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let (c, s) = handshake(cfg, Arc::new(c)).expect("handshake");
        assert_eq!(s.protocol_version(), Some(ProtocolVersion::TLSv1_3));
        assert_eq!(s.alpn_protocol(), Some(&b"h2"[..]));
        assert_eq!(c.alpn_protocol(), Some(&b"h2"[..]));
        let group = s.negotiated_key_exchange_group().expect("group").name();
        assert_eq!(group_name(group), "x25519");
    }

    #[test]
    fn alpn_without_h2() {
        let (_d, tls) = ecdsa_conf("alpn");
        let shared = TlsShared::new().expect("shared");
        let cfg = server_config(&tls, false, &shared, &mut ObjectStore::new()).expect("cfg");
        let mut c = client(BOTH);
        c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let (_, s) = handshake(cfg, Arc::new(c)).expect("handshake");
        assert_eq!(s.alpn_protocol(), Some(&b"http/1.1"[..]));
    }

    #[test]
    fn tls13_only_server_refuses_tls12_client() {
        let (_d, mut tls) = ecdsa_conf("proto");
        tls.protocols = vec![TlsVersion::Tls13];
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        assert!(handshake(cfg.clone(), Arc::new(client(&[&rustls::version::TLS12]))).is_err());
        assert!(handshake(cfg, Arc::new(client(BOTH))).is_ok());
        tls.protocols = Vec::new();
        assert!(matches!(
            server_config(&tls, true, &shared, &mut ObjectStore::new()),
            Err(TlsError::NoProtocols)
        ));
    }

    #[test]
    fn cipher_list_restricts_tls12() {
        let d = dir("cipher");
        let pair = write_pair(&d, "rsa", rsa_pem(&["localhost"]));
        let mut tls = conf(vec![pair]);
        tls.ciphers = "ECDHE-RSA-AES128-GCM-SHA256".into();
        tls.protocols = vec![TlsVersion::Tls12];
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        let (_, s) = handshake(cfg, Arc::new(client(BOTH))).expect("handshake");
        assert_eq!(s.protocol_version(), Some(ProtocolVersion::TLSv1_2));
        let suite = s.negotiated_cipher_suite().expect("suite").suite();
        assert_eq!(cipher_name(suite), "ECDHE-RSA-AES128-GCM-SHA256");

        tls.ciphers = "AES256-SHA".into();
        let e = server_config(&tls, true, &shared, &mut ObjectStore::new()).expect_err("error");
        assert_eq!(
            e.to_string(),
            "SSL_CTX_set_cipher_list(\"AES256-SHA\") failed: no cipher match"
        );
    }

    #[test]
    fn ciphersuites_and_server_order() {
        let (_d, mut tls) = ecdsa_conf("suites13");
        tls.ciphersuites = Some("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256".into());
        tls.prefer_server_ciphers = true;
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        assert!(cfg.ignore_client_order);
        // The client prefers AES-128; the server's order wins.
        let mut p = provider();
        p.cipher_suites = vec![
            cs::TLS13_AES_128_GCM_SHA256,
            cs::TLS13_CHACHA20_POLY1305_SHA256,
        ];
        let c = client_config(p, &[&rustls::version::TLS13], any_server_cert());
        let (_, s) = handshake(cfg, Arc::new(c)).expect("handshake");
        let suite = s.negotiated_cipher_suite().expect("suite").suite();
        assert_eq!(cipher_name(suite), "TLS_CHACHA20_POLY1305_SHA256");
    }

    #[test]
    fn ecdh_curve_limits_groups() {
        let (_d, mut tls) = ecdsa_conf("curve");
        tls.ecdh_curve = "secp384r1".into();
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        let (_, s) = handshake(cfg, Arc::new(client(BOTH))).expect("handshake");
        let group = s.negotiated_key_exchange_group().expect("group").name();
        assert_eq!(group_name(group), "secp384r1");
        tls.ecdh_curve = "nonsense".into();
        assert!(matches!(
            server_config(&tls, true, &shared, &mut ObjectStore::new()),
            Err(TlsError::Curves { .. })
        ));
    }

    #[test]
    fn ecdsa_first_rsa_for_rsa_only_clients() {
        let d = dir("dual");
        // RSA written first: ECDSA must still be preferred.
        let rsa = write_pair(&d, "rsa", rsa_pem(&["localhost"]));
        let ec = write_pair(&d, "ec", ecdsa_pem(&["localhost"]));
        let tls = conf(vec![rsa, ec]);
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);

        let alg_of =
            |c: &rustls::ClientConnection| c.peer_certificates().expect("certs")[0].clone();
        let (c, _) = handshake(cfg.clone(), Arc::new(client(BOTH))).expect("any client");
        let ec_cert = std::fs::read(d.join("ec.crt")).expect("read");
        let ec_der = rustls_pki_types::CertificateDer::from_pem_slice(&ec_cert).expect("der");
        assert_eq!(alg_of(&c), ec_der);

        let rsa_only = client_config(
            provider(),
            BOTH,
            any_server_cert_only(|s| {
                !matches!(
                    s,
                    SignatureScheme::ECDSA_NISTP256_SHA256
                        | SignatureScheme::ECDSA_NISTP384_SHA384
                        | SignatureScheme::ECDSA_NISTP521_SHA512
                        | SignatureScheme::ED25519
                )
            }),
        );
        let (c, _) = handshake(cfg.clone(), Arc::new(rsa_only)).expect("rsa client");
        assert_ne!(alg_of(&c), ec_der);

        // A TLS 1.2 client offering only ECDHE-RSA suites gets the RSA certificate too.
        let mut p = provider();
        p.cipher_suites = vec![cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384];
        let c = client_config(p, &[&rustls::version::TLS12], any_server_cert());
        let (c, _) = handshake(cfg, Arc::new(c)).expect("rsa-suite client");
        assert_ne!(alg_of(&c), ec_der);
    }

    /// As OpenSSL (nginx's `ssl_certificate_compression.t`, "catch replaced certificates"): a
    /// second pair with a key of the same type replaces the first, which is never served.
    #[test]
    fn a_later_pair_of_a_key_type_replaces_the_earlier() {
        let d = dir("replaced");
        let first = write_pair(&d, "rsa1", rsa_pem(&["localhost"]));
        let ec = write_pair(&d, "ec", ecdsa_pem(&["localhost"]));
        let second = write_pair(&d, "rsa2", rsa_pem(&["localhost"]));
        let cfg = build(
            &conf(vec![first, ec, second]),
            &TlsShared::new().expect("shared"),
        );
        let rsa_only = client_config(
            provider(),
            BOTH,
            any_server_cert_only(|s| {
                !matches!(
                    s,
                    SignatureScheme::ECDSA_NISTP256_SHA256
                        | SignatureScheme::ECDSA_NISTP384_SHA384
                        | SignatureScheme::ECDSA_NISTP521_SHA512
                        | SignatureScheme::ED25519
                )
            }),
        );
        let (c, _) = handshake(cfg, Arc::new(rsa_only)).expect("rsa client");
        let pem = std::fs::read(d.join("rsa2.crt")).expect("read");
        let want = rustls_pki_types::CertificateDer::from_pem_slice(&pem).expect("der");
        assert_eq!(c.peer_certificates().expect("certs")[0], want);
    }

    /// `ssl_certificate_compression`: brotli then zlib when on, nothing when off; compressed
    /// client certificates are refused either way (nginx's `NO_RX_CERTIFICATE_COMPRESSION`).
    #[test]
    fn certificate_compression_settings() {
        use rustls::CertificateCompressionAlgorithm as A;
        let (_d, mut tls) = ecdsa_conf("certcomp");
        let shared = TlsShared::new().expect("shared");
        tls.certificate_compression = true;
        let on = build(&tls, &shared);
        let algs: Vec<A> = on.cert_compressors.iter().map(|c| c.algorithm()).collect();
        assert_eq!(algs, [A::Brotli, A::Zlib]);
        assert!(on.cert_decompressors.is_empty());
        handshake(on, Arc::new(client(BOTH))).expect("a client offering both");
        tls.certificate_compression = false;
        let off = build(&tls, &shared);
        assert!(off.cert_compressors.is_empty());
        assert!(off.cert_decompressors.is_empty());
    }

    #[test]
    fn num_tickets_counted_at_the_client() {
        let (_d, mut tls) = ecdsa_conf("numtickets");
        let shared = TlsShared::new().expect("shared");
        for (n, want) in [(None, 2), (Some(4), 4), (Some(0), 0)] {
            tls.num_tickets = n;
            let cfg = build(&tls, &shared);
            let store = CountingStore::new();
            let mut c = client(BOTH);
            c.resumption = Resumption::store(store.clone());
            handshake(cfg, Arc::new(c)).expect("handshake");
            assert_eq!(store.count(), want, "NumTickets {n:?}");
        }
    }

    fn resumes(
        first: Arc<ServerConfig>,
        second: Arc<ServerConfig>,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> bool {
        let c = Arc::new(client(versions));
        let (_, s1) = handshake(first, c.clone()).expect("first");
        assert_eq!(s1.handshake_kind(), Some(HandshakeKind::Full));
        let (_, s2) = handshake(second, c).expect("second");
        s2.handshake_kind() == Some(HandshakeKind::Resumed)
    }

    #[test]
    fn ticket_key_file_resumes_across_configs() {
        let (d, mut tls) = ecdsa_conf("ticketfile");
        std::fs::write(d.join("ticket.key"), [0x5au8; 80]).expect("write");
        tls.session_ticket_keys = vec![d.join("ticket.key")];
        // Two processes: separate TlsShared, separate stores; only the file is common.
        let a = build(&tls, &TlsShared::new().expect("a"));
        let b = build(&tls, &TlsShared::new().expect("b"));
        assert!(resumes(a.clone(), b.clone(), BOTH), "TLS 1.3");
        assert!(resumes(a, b, &[&rustls::version::TLS12]), "TLS 1.2");
    }

    #[test]
    fn unknown_ticket_key_means_full_handshake() {
        let (d, mut tls) = ecdsa_conf("ticketunknown");
        std::fs::write(d.join("one.key"), [1u8; 48]).expect("write");
        std::fs::write(d.join("two.key"), [2u8; 48]).expect("write");
        tls.session_ticket_keys = vec![d.join("one.key")];
        let shared = TlsShared::new().expect("shared");
        let a = build(&tls, &shared);
        tls.session_ticket_keys = vec![d.join("two.key")];
        let b = build(&tls, &shared);
        assert!(!resumes(a.clone(), b, BOTH));
        // The old key as a second (decrypt-only) key still resumes.
        tls.session_ticket_keys = vec![d.join("two.key"), d.join("one.key")];
        let c = build(&tls, &shared);
        assert!(resumes(a, c, BOTH));
    }

    #[test]
    fn generated_tickets_survive_a_reload() {
        let (_d, tls) = ecdsa_conf("reload");
        let shared = TlsShared::new().expect("shared");
        let mut store = ObjectStore::new();
        let before = server_config(&tls, true, &shared, &mut store).expect("before");
        let mut next = ObjectStore::inherit(&store);
        let after = server_config(&tls, true, &shared, &mut next).expect("after");
        assert_eq!(next.parses(), 0);
        assert!(resumes(before.clone(), after, BOTH));
        // Another process's keys do not decrypt them.
        let other = build(&tls, &TlsShared::new().expect("other"));
        assert!(!resumes(before, other, BOTH));
    }

    /// With `ssl_early_data on`, TLS 1.3 tickets are single-use cache entries (rustls takes
    /// early data only so), 16 KB of early data are taken and answered at 0.5-RTT.
    #[test]
    fn early_data_means_stateful_tickets() {
        let (_d, mut tls) = ecdsa_conf("early");
        tls.early_data = true;
        tls.session_cache = SessionCache::Sessions(100);
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        assert!(!cfg.ticketer.enabled(), "no stateless tickets");
        assert!(cfg.session_storage.can_cache());
        assert_eq!(cfg.max_early_data_size, EARLY_DATA_SIZE);
        assert!(cfg.send_half_rtt_data);
        assert!(resumes(cfg.clone(), cfg, BOTH));
        tls.early_data = false;
        let off = build(&tls, &shared);
        assert_eq!(off.max_early_data_size, 0);
        assert!(!off.send_half_rtt_data);
    }

    #[test]
    fn tickets_off_and_stateful_cache() {
        let (_d, mut tls) = ecdsa_conf("cache");
        tls.session_tickets = false;
        let shared = TlsShared::new().expect("shared");
        // No tickets, no cache: no resumption at all.
        let cfg = build(&tls, &shared);
        assert!(!cfg.ticketer.enabled());
        assert!(!cfg.session_storage.can_cache());
        assert!(!resumes(cfg.clone(), cfg, BOTH));
        // A cache: stateful resumption, shared by configs of the same size.
        tls.session_cache = SessionCache::Sessions(1000);
        let a = build(&tls, &shared);
        let b = build(&tls, &shared);
        assert!(a.session_storage.can_cache());
        assert!(resumes(a.clone(), b.clone(), BOTH), "TLS 1.3 stateful");
        assert!(
            resumes(a, b, &[&rustls::version::TLS12]),
            "TLS 1.2 session id"
        );
    }

    #[test]
    fn session_cache_size_bounds_resumption() {
        let (_d, mut tls) = ecdsa_conf("cachesize");
        tls.session_tickets = false;
        tls.num_tickets = Some(1);
        tls.session_cache = SessionCache::Sessions(1);
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        let first = Arc::new(client(BOTH));
        handshake(cfg.clone(), first.clone()).expect("first");
        // A second client's session evicts the first's from the one-slot cache.
        handshake(cfg.clone(), Arc::new(client(BOTH))).expect("second");
        let (_, s) = handshake(cfg, first).expect("first again");
        assert_eq!(s.handshake_kind(), Some(HandshakeKind::Full));
    }

    #[test]
    fn ticket_lifetime_follows_session_timeout() {
        let (_d, mut tls) = ecdsa_conf("lifetime");
        tls.session_timeout = Duration::from_secs(600);
        let shared = TlsShared::new().expect("shared");
        let cfg = build(&tls, &shared);
        assert_eq!(cfg.ticketer.lifetime(), 600);
    }

    #[test]
    fn client_certificates() {
        let d = dir("mtls");
        let (_d2, mut tls) = ecdsa_conf("mtls-server");
        let (ca_cert, ca_key) = ecdsa_pem(&["client"]);
        std::fs::write(d.join("ca.crt"), &ca_cert).expect("write");
        let shared = TlsShared::new().expect("shared");

        tls.verify_client = VerifyClient::On;
        assert!(matches!(
            server_config(&tls, true, &shared, &mut ObjectStore::new()),
            Err(TlsError::NoClientCertificate)
        ));
        tls.client_certificate = Some(d.join("ca.crt"));
        let on = build(&tls, &shared);
        tls.verify_client = VerifyClient::Optional;
        let optional = build(&tls, &shared);
        tls.verify_client = VerifyClient::OptionalNoCa;
        tls.client_certificate = None;
        let no_ca = build(&tls, &shared);

        let anon = || Arc::new(client(BOTH));
        let with_cert = |cert: &str, key: &str| {
            let chain = vec![
                rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert"),
            ];
            let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
            Arc::new(
                ClientConfig::builder_with_provider(Arc::new(provider()))
                    .with_protocol_versions(BOTH)
                    .expect("versions")
                    .dangerous()
                    .with_custom_certificate_verifier(any_server_cert())
                    .with_client_auth_cert(chain, key)
                    .expect("client auth"),
            )
        };
        // `on`, as nginx, completes the handshake with or without a certificate; requests are
        // refused after it unless the chain verified (tls::peer, tests/client_chain.rs).
        assert!(handshake(on.clone(), anon()).is_ok());
        assert!(handshake(on.clone(), with_cert(&ca_cert, &ca_key)).is_ok());
        let (stranger_cert, stranger_key) = ecdsa_pem(&["stranger"]);
        let (_, s) = handshake(on, with_cert(&stranger_cert, &stranger_key)).expect("on");
        assert!(s.peer_certificates().is_some());
        assert!(handshake(optional.clone(), anon()).is_ok());
        // `optional` completes the handshake with any certificate; its chain is checked
        // after it (tls::peer), so the request can get nginx's 495 page.
        let (_, s) = handshake(optional, with_cert(&stranger_cert, &stranger_key))
            .expect("optional takes any certificate at the handshake");
        assert!(s.peer_certificates().is_some());
        let (_, s) =
            handshake(no_ca.clone(), with_cert(&stranger_cert, &stranger_key)).expect("no_ca");
        assert!(s.peer_certificates().is_some());
        assert!(handshake(no_ca, anon()).is_ok());
    }

    #[test]
    fn stapling_file_is_served() {
        let (d, mut tls) = ecdsa_conf("staple");
        let response = [0x30u8, 0x03, 0x0a, 0x01, 0x00];
        std::fs::write(d.join("ocsp.der"), response).expect("write");
        tls.stapling_file = Some(d.join("ocsp.der"));
        let shared = TlsShared::new().expect("shared");
        let mut store = ObjectStore::new();
        // `ssl_stapling off`: the file is not even read.
        server_config(&tls, true, &shared, &mut store).expect("off");
        assert_eq!(store.parses(), 2);
        tls.stapling = true;
        let cfg = server_config(&tls, true, &shared, &mut store).expect("on");
        assert_eq!(store.parses(), 3);
        let verifier = any_server_cert();
        let c = client_config(provider(), BOTH, verifier.clone());
        handshake(cfg, Arc::new(c)).expect("handshake");
        assert_eq!(verifier.last_ocsp(), response);
    }

    /// The TLS servers of a configuration text.
    fn servers(text: &str) -> Vec<Arc<ServerConf>> {
        let c = crate::conf::load_str(text, Path::new("/t.conf"), Path::new("/")).expect("conf");
        c.http.expect("http").servers
    }

    fn server_text(d: &Path, names: &[&str], extra: &str) -> String {
        let mut s = String::from("events {} http {\n");
        for n in names {
            s.push_str(&format!(
                "server {{ listen 127.0.0.1:8443 ssl; server_name {n}; \
                 ssl_certificate {0}/{n}.crt; ssl_certificate_key {0}/{n}.key; {extra} }}\n",
                d.display()
            ));
        }
        s.push('}');
        s
    }

    /// One load: each server's config, and the store and configs kept for the next.
    fn load_all(
        servers: &[Arc<ServerConf>],
        shared: &TlsShared,
        prev: Option<&(ObjectStore, ServerConfigs)>,
    ) -> (Vec<Arc<ServerConfig>>, (ObjectStore, ServerConfigs)) {
        let mut store = prev.map_or_else(ObjectStore::new, |(s, _)| ObjectStore::inherit(s));
        let mut configs = ServerConfigs::new();
        let out = servers
            .iter()
            .map(|s| {
                configs
                    .config_for(s, true, shared, &mut store, prev.map(|(_, c)| c))
                    .expect("config")
                    .expect("tls server")
            })
            .collect();
        store.finish();
        (out, (store, configs))
    }

    #[test]
    fn unchanged_server_keeps_its_config_changed_one_gets_a_new_one() {
        let d = dir("reuse");
        for n in ["a", "b"] {
            write_pair(&d, n, ecdsa_pem(&["localhost"]));
        }
        let shared = TlsShared::new().expect("shared");
        let text = server_text(&d, &["a", "b"], "");
        let (first, kept) = load_all(&servers(&text), &shared, None);
        assert_eq!(kept.1.reused(), 0);

        // Nothing changed: the very same configs.
        let (second, kept) = load_all(&servers(&text), &shared, Some(&kept));
        assert!(Arc::ptr_eq(&first[0], &second[0]));
        assert!(Arc::ptr_eq(&first[1], &second[1]));
        assert_eq!(kept.1.reused(), 2);

        // b's certificate and key replaced: a new config for b only, serving the new one.
        write_pair(&d, "b", ecdsa_pem(&["localhost"]));
        let (third, kept) = load_all(&servers(&text), &shared, Some(&kept));
        assert!(Arc::ptr_eq(&second[0], &third[0]));
        assert!(!Arc::ptr_eq(&second[1], &third[1]));
        assert_eq!(kept.1.reused(), 1);
        let (c, _) = handshake(third[1].clone(), Arc::new(client(BOTH))).expect("handshake");
        let der = std::fs::read(d.join("b.crt")).expect("read");
        let want = rustls_pki_types::CertificateDer::from_pem_slice(&der).expect("der");
        assert_eq!(c.peer_certificates().expect("certs")[0], want);

        // A setting changed: a new config, with the setting.
        let text2 = server_text(&d, &["a", "b"], "ssl_prefer_server_ciphers on;");
        let (fourth, kept) = load_all(&servers(&text2), &shared, Some(&kept));
        assert!(!Arc::ptr_eq(&third[0], &fourth[0]));
        assert!(fourth[0].ignore_client_order);
        assert_eq!(kept.1.reused(), 0);
    }

    #[test]
    fn moved_servers_still_reuse_and_inheritable_off_rebuilds() {
        let d = dir("reuse-moved");
        for n in ["a", "b", "c"] {
            write_pair(&d, n, ecdsa_pem(&["localhost"]));
        }
        let shared = TlsShared::new().expect("shared");
        let (first, kept) = load_all(&servers(&server_text(&d, &["a", "b"], "")), &shared, None);
        // A server added in front: the others are found by their certificate.
        let (second, mut kept) = load_all(
            &servers(&server_text(&d, &["c", "a", "b"], "")),
            &shared,
            Some(&kept),
        );
        assert!(Arc::ptr_eq(&first[0], &second[1]));
        assert!(Arc::ptr_eq(&first[1], &second[2]));
        assert_eq!(kept.1.reused(), 2);
        // `ssl_object_cache_inheritable off`: every object is read again, so no config is kept.
        kept.0.set_inheritable(false);
        let (third, kept) = load_all(
            &servers(&server_text(&d, &["c", "a", "b"], "")),
            &shared,
            Some(&kept),
        );
        assert!(!Arc::ptr_eq(&second[0], &third[0]));
        assert_eq!(kept.1.reused(), 0);
        assert_eq!(kept.0.counts().reused, 0);
    }

    #[test]
    fn choose_without_certificates_is_none() {
        assert_eq!(choose_certificate(&[], &[], &[], &[], &[]), None);
    }
}
