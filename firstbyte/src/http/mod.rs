//! HTTP: request routing, static files, compression, the built-in site.

pub mod body;
pub mod compress;
pub mod static_files;
pub mod uri;
