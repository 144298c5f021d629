//! TLS: certificates and keys, SNI-ready server configs, tickets, session caches, names.
//!
//! Data flows one way per config load: the runtime makes one [`ObjectStore`] per load (from
//! the previous one with [`ObjectStore::inherit`] on reload), and for each server block with
//! TLS builds its config (`server::server_config`, through [`ServerConfigs`], which reuses
//! the previous load's where nothing changed) with that server's [`TlsConf`](crate::conf::model::TlsConf) and
//! the process-wide [`TlsShared`] (ticket keys and session caches that outlive reloads). The
//! store reads each file once and hands the same `Arc` to every server that names it
//! (`certs` parses, `store` caches); `ciphers` maps OpenSSL cipher and group lists to rustls;
//! `tickets` holds ticket keys (generated and rotating, or from `ssl_session_ticket_key` files)
//! and `sessions` the stateful cache with `ssl_session_timeout`; `session_id` puts an id in both that comes back on resumption (`$ssl_session_id`); `server` assembles the
//! `rustls::ServerConfig`, including the certificate choice per ClientHello (ECDSA before RSA).
//! After reading a ClientHello's SNI (tokio-rustls `LazyConfigAcceptor`) the runtime picks a
//! server block and uses its config. `names` spells negotiated parameters as OpenSSL does, for
//! `$ssl_protocol`, `$ssl_cipher`, `$ssl_curve`; `chain` verifies client chains as OpenSSL
//! does for nginx (v1 certificates and CRLs, `ssl_verify_depth`, `ssl_crl`), and
//! `upstream_verify` upstream chains and names; `selfsigned` makes the built-in site's
//! certificate. `ocsp` builds and checks OCSP messages and `stapler` fetches and refreshes
//! them for `ssl_stapling`, stapled by the server config's certificate resolver. Errors are [`TlsError`], worded as nginx's `[emerg]` lines.
//!
//! Only the aws-lc-rs provider is used ([`provider`]); `ring` is never compiled in.
//! 0-RTT is not accepted yet: see `server::early_data_size`.

mod certcache;
mod certs;
mod chain;
mod ciphers;
mod client;
pub mod client_ocsp;
mod compress;
mod context;
mod dynamic;
mod error;
pub mod handshake_cx;
mod hkdf;
pub mod ktls;
mod names;
mod ocsp;
pub mod peer;
mod selfsigned;
mod server;
pub mod session_id;
mod sessions;
mod stapler;
mod store;
pub mod stream;
#[cfg(test)]
mod testutil;
mod tickets;
mod upstream_verify;

use std::sync::Arc;

pub use certcache::{CertCache, Lookup};
pub use chain::ChainVerifier;
pub use client::{client_config, upstream_server_name, ClientBase};
pub use dynamic::{load_pair, pair_limits, stamp_of, with_certificate, DynamicResolver, PairStamp};
pub use error::TlsError;
pub use names::{cipher_name, ciphers_list, curves_list, group_name, protocol_name};
pub use selfsigned::self_signed;
pub use server::ServerConfigs;
pub use store::{ObjectStore, Passwords};
pub use tickets::TlsShared;

/// `tls::testutil::encrypt_pkcs8` for the other modules' tests.
#[cfg(test)]
pub fn encrypt_pkcs8_for_tests(key_pem: &str, password: &[u8]) -> String {
    testutil::encrypt_pkcs8(key_pem, password)
}

/// The crypto provider of every firstbyte config: rustls' aws-lc-rs provider.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}
