//! TLS: certificates and keys, SNI, session tickets and caches, as rustls configs.
