//! HTTP: request routing, static files, compression, the built-in site.
//!
//! A request reads its connection ([`conn::Conn`]), its generation's [`Site`] and the
//! process's [`Shared`] state; the runtime (`server`) builds them and calls
//! [`pipeline::serve`]. Nothing here reaches back into the runtime.

pub mod auth_basic;
pub mod autoindex;
pub mod body;
pub mod builtin;
pub mod cache;
pub mod charset;
pub mod compress;
pub mod conn;
pub mod contract;
pub mod empty_gif;
mod expires;
pub(crate) mod h2;
pub mod h2limits;
pub mod head_pool;
pub mod open_file;
pub mod open_file_cache;
pub mod pages;
pub mod pipeline;
pub mod postpone;
pub mod proxy;
pub mod range;
pub mod rate;
pub mod reqvars;
pub mod rewrite;
pub(crate) mod send_watch;
mod site;
pub mod ssi;
pub mod static_files;
pub mod tuning;
pub mod uri;

pub use site::{Shared, Site, Stats};
