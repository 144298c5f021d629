//! TLS: certificates and keys, SNI-ready server configs, tickets, session caches, names.
//!
//! Data flows one way per config load: the runtime makes one [`ObjectStore`] per load (from
//! the previous one with [`ObjectStore::inherit`] on reload), and for each server block with
//! TLS calls [`server_config`] with that server's [`TlsConf`](crate::conf::model::TlsConf) and
//! the process-wide [`TlsShared`] (ticket keys and session caches that outlive reloads). The
//! store reads each file once and hands the same `Arc` to every server that names it
//! (`certs` parses, `store` caches); `ciphers` maps OpenSSL cipher and group lists to rustls;
//! `tickets` holds ticket keys (generated and rotating, or from `ssl_session_ticket_key` files)
//! and `sessions` the stateful cache with `ssl_session_timeout`; `server` assembles the
//! `rustls::ServerConfig`, including the certificate choice per ClientHello (ECDSA before RSA).
//! After reading a ClientHello's SNI (tokio-rustls `LazyConfigAcceptor`) the runtime picks a
//! server block and uses its config. `names` spells negotiated parameters as OpenSSL does, for
//! `$ssl_protocol`, `$ssl_cipher`, `$ssl_curve`; `selfsigned` makes the built-in site's
//! certificate. Errors are [`TlsError`], worded as nginx's `[emerg]` lines.
//!
//! Only the aws-lc-rs provider is used ([`provider`]); `ring` is never compiled in.
//! 0-RTT is not accepted yet: see [`early_data_size`].

mod certcache;
mod certs;
mod ciphers;
mod client;
mod context;
mod dynamic;
mod error;
mod hkdf;
mod names;
pub mod peer;
mod selfsigned;
mod server;
mod sessions;
mod store;
pub mod stream;
#[cfg(test)]
mod testutil;
mod tickets;

use std::sync::Arc;

pub use certcache::{CacheLimits, CertCache, Lookup};
pub use certs::{needs_password, parse_chain, parse_key, parse_passwords, parse_roots};
pub use ciphers::{kx_groups, tls12_suites, tls13_suites};
pub use client::{client_config, file_source, upstream_server_name, AnyServerCert, ClientBase};
pub use context::SessionContext;
pub use dynamic::{cache_limits, load_pair, stamp_of, DynamicResolver, HandshakeVars, PairStamp};
pub use error::{source_name, LoadReason, TlsError};
pub use names::{cipher_name, group_name, protocol_name};
pub use selfsigned::self_signed;
pub use server::{
    alpn_protocols, choose_certificate, early_data_size, server_config, ServerConfigs,
    DEFAULT_NUM_TICKETS,
};
pub use sessions::TimedSessions;
pub use store::{FileStamp, ObjectStore, StoreCounts};
pub use tickets::{
    unix_now, KeyRing, TicketKey, Ticketer, TlsShared, MAX_CACHED_SESSIONS, MAX_LIFETIME_SECS,
    ROTATION_SECS,
};

/// The crypto provider of every firstbyte config: rustls' aws-lc-rs provider.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}
