//! firstbyte's own HTTP/2 server layer (TLS `h2`): a sans-IO core ([`core::Core`]: frames,
//! stream states, flow control, request checks) and a thin I/O shell that runs the
//! connection's requests inside its own task and writes each turn's frames in one write.
//!
//! Data flow: the shell reads plaintext from the TLS stream into a buffer (held only while
//! it holds an incomplete frame), the core turns it into events, the shell starts a service
//! future per request and polls them and their response bodies, and the core encodes the
//! response frames straight into its output buffer, which the shell writes to the TLS stream
//! once per turn (freed when empty while the connection idles).

pub mod body;
pub mod core;
pub mod frame;
pub mod headers;
pub mod hpack;
mod names;
pub mod serve;

pub use serve::serve;
