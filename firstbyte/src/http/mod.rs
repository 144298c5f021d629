//! HTTP: request routing, static files, compression, the built-in site.

pub mod body;
pub mod builtin;
pub mod compress;
pub mod conn;
pub mod h2limits;
pub mod open_file;
mod pages;
pub mod pipeline;
pub mod proxy;
pub mod reqvars;
pub(crate) mod send_watch;
pub mod static_files;
pub mod uri;
