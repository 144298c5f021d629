//! firstbyte: an HTTPS server and reverse proxy built to get the first byte of a response to
//! the user as early as the network allows, and the rest as fast as the machine allows.
//!
//! Layout, by layer:
//! - `conf`: the nginx-syntax configuration language, parsed and merged into plain data.
//! - `tls`: certificates, keys, SNI, tickets and sessions, turned into rustls configs.
//! - `http`: request routing, static files, compression, the built-in site.
//! - `advisor`: the tuning advisor's histograms and rules (pure; no I/O).
//! - `net`: listening sockets, socket options and `TCP_INFO`.
//! - `server`: the runtime that ties them together (accept, handshake, serve, reload).
//! - `log`, `metrics`: the error log and the process-wide counters, which every layer writes to.
//!
//! Imports run one way: runtime (`server`, `cli`, the daemon) → `http` → `tls` → [`conf`] →
//! `advisor` → `record` → `net`. `http` reads what the runtime built for it (`http::Site`, `http::Shared`,
//! `http::conn::Conn`) and never names the runtime.
#![warn(missing_docs)]

pub(crate) mod advisor;
mod broker;
pub mod cli;
pub(crate) mod conf;
mod daemon;
mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub(crate) mod log;
// Process-wide counters for the `metrics` location; like `log`, any layer counts into it.
pub(crate) mod metrics;
// Renders docs/man/ from `-h` and the directive table; a test keeps the pages current.
#[cfg(test)]
mod man;
pub(crate) mod net;
mod notify;
mod privileges;
pub(crate) mod record;
pub(crate) mod server;
#[cfg(test)]
pub(crate) mod testdir;
pub(crate) mod tls;
mod wire;
