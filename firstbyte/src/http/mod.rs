//! HTTP: request routing, static files, compression, the built-in site.

pub mod body;
pub mod builtin;
pub mod compress;
pub mod conn;
pub(crate) mod h2;
pub mod h2limits;
pub mod open_file;
mod pages;
pub mod proxy;
pub mod reqvars;
mod send_watch;
pub mod service;
pub mod static_files;
pub mod uri;
