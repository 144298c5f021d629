//! The bench's HTTP clients: each makes one request on a new connection and times it.
//!
//! A `Fetcher` takes a `Target` (address, port, path) and returns a `Fetched`: connect,
//! TLS handshake done ("appconnect"), first response byte and end of body, all in ms from the
//! start of the connection, as curl's `time_connect`, `time_appconnect`,
//! `time_starttransfer` and `time_total`. Every request is a cold connection: a new TCP
//! connection and a full TLS handshake, no session resumption.
//!
//! - `curl`: runs `curl --http2` (as the seed did) or `--http1.1`, one process per request.
//! - `rust`: hyper over tokio-rustls (aws-lc-rs), in this process.
//! - `h3`: quinn + h3 (aws-lc-rs), in this process: "connect" is the server's first flight
//!   (its handshake data arrived, one round trip as a SYN-ACK), "appconnect" the handshake's
//!   completion.
//! - `warm`: the built-in client keeping its connection for a series of requests with idle
//!   gaps between them (`Fetcher::fetch_series`): the warm-connection regime of record sizing.
//! - `resumed`: TLS 1.3 session resumption over TCP (HTTP/2 or HTTP/1.1), with or without
//!   early data; `h3` also resumes with 0-RTT (`rust-h3-0rtt`). Each of their samples is a
//!   pair of connections: an unrecorded HEAD that gets a session ticket, then the measured GET
//!   that uses it. Every fetch says which handshake it really had ([`Handshake`]).

pub mod curl;
pub mod h3;
pub mod resumed;
pub mod rust;
#[cfg(test)]
mod testserver;
pub mod warm;

use std::net::SocketAddr;

/// Most a single request may take before it is recorded as failed, in seconds: far above a
/// 1 MB transfer on a lossy 100 ms link (~3 s), below a stuck connection's patience.
pub const REQUEST_TIMEOUT_S: u64 = 60;

/// A client of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKind {
    /// `curl --http2`.
    CurlH2,
    /// `curl --http1.1`.
    CurlH1,
    /// The built-in client, HTTP/2.
    RustH2,
    /// The built-in client, HTTP/1.1.
    RustH1,
    /// The built-in client, HTTP/3 (quinn + h3).
    RustH3,
    /// The built-in client, HTTP/2, one connection for a series of requests with gaps.
    RustH2Warm,
    /// The built-in client, HTTP/1.1, one connection for a series of requests with gaps.
    RustH1Warm,
    /// TLS 1.3 resumption over TCP, HTTP/2, the request after the handshake.
    RustH2Resumed,
    /// TLS 1.3 resumption over TCP, HTTP/2, the request as early data (0-RTT) when the ticket
    /// allows it.
    RustH2Early,
    /// TLS 1.3 resumption over TCP, HTTP/1.1, the request after the handshake.
    RustH1Resumed,
    /// TLS 1.3 resumption over TCP, HTTP/1.1, the request as early data when allowed.
    RustH1Early,
    /// HTTP/3 resumed, the request in 0-RTT when the ticket allows it.
    RustH3Early,
}

impl ClientKind {
    /// Every client, in table order.
    pub const ALL: [ClientKind; 12] = [
        ClientKind::CurlH2,
        ClientKind::CurlH1,
        ClientKind::RustH2,
        ClientKind::RustH1,
        ClientKind::RustH3,
        ClientKind::RustH2Warm,
        ClientKind::RustH1Warm,
        ClientKind::RustH2Resumed,
        ClientKind::RustH2Early,
        ClientKind::RustH1Resumed,
        ClientKind::RustH1Early,
        ClientKind::RustH3Early,
    ];

    /// Its name in plans and results.csv.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::CurlH2 => "curl-h2",
            ClientKind::CurlH1 => "curl-h1",
            ClientKind::RustH2 => "rust-h2",
            ClientKind::RustH1 => "rust-h1",
            ClientKind::RustH3 => "rust-h3",
            ClientKind::RustH2Warm => "rust-h2-warm",
            ClientKind::RustH1Warm => "rust-h1-warm",
            ClientKind::RustH2Resumed => "rust-h2-resumed",
            ClientKind::RustH2Early => "rust-h2-0rtt",
            ClientKind::RustH1Resumed => "rust-h1-resumed",
            ClientKind::RustH1Early => "rust-h1-0rtt",
            ClientKind::RustH3Early => "rust-h3-0rtt",
        }
    }

    /// The handshake its samples are meant to measure; a sample that had another one (a
    /// rejected 0-RTT, a ticket the server did not take) is reported in a column of its own.
    pub fn intended(self) -> Handshake {
        match self {
            ClientKind::RustH2Resumed | ClientKind::RustH1Resumed => Handshake::Resumed,
            ClientKind::RustH2Early | ClientKind::RustH1Early | ClientKind::RustH3Early => {
                Handshake::EarlyAccepted
            }
            _ => Handshake::Cold,
        }
    }

    /// Whether it speaks QUIC (the server needs a QUIC listener).
    pub fn is_h3(self) -> bool {
        matches!(self, ClientKind::RustH3 | ClientKind::RustH3Early)
    }

    /// Whether it makes a series of requests on one connection (the plan's `gaps`).
    pub fn is_warm(self) -> bool {
        matches!(self, ClientKind::RustH2Warm | ClientKind::RustH1Warm)
    }

    /// The client with this name.
    pub fn from_name(name: &str) -> Option<ClientKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether it needs the `curl` program.
    pub fn needs_curl(self) -> bool {
        matches!(self, ClientKind::CurlH2 | ClientKind::CurlH1)
    }
}

/// The handshake a sample really had, as recorded in results.csv's `handshake` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handshake {
    /// A full handshake; the client offered no ticket (resumption off): `cold`.
    Cold,
    /// A resuming client's full handshake: it had no ticket to offer (the server sent
    /// none) or the server did not take it: `full`.
    Full,
    /// The session was resumed, the request went after the handshake: `resumed`.
    Resumed,
    /// The request went as early data (0-RTT) and the server accepted it: `0rtt`.
    EarlyAccepted,
    /// The request went as early data and the server rejected it; it was sent again after
    /// the handshake: `0rtt-rejected`.
    EarlyRejected,
    /// HTTP/3 only: no 0-RTT keys (no ticket, or a ticket allowing no early data), so the
    /// request waited for the handshake; quinn does not say whether it resumed: `no-0rtt`.
    NoEarly,
}

impl Handshake {
    /// Its name in results.csv.
    pub fn name(self) -> &'static str {
        match self {
            Handshake::Cold => "cold",
            Handshake::Full => "full",
            Handshake::Resumed => "resumed",
            Handshake::EarlyAccepted => "0rtt",
            Handshake::EarlyRejected => "0rtt-rejected",
            Handshake::NoEarly => "no-0rtt",
        }
    }
}

/// What to fetch.
#[derive(Debug, Clone)]
pub struct Target {
    /// Server address and port (in the server namespace).
    pub addr: SocketAddr,
    /// Request path, e.g. `/f-10240.bin`.
    pub path: String,
}

impl Target {
    /// The URL of the target.
    pub fn url(&self) -> String {
        format!("https://{}{}", self.addr, self.path)
    }
}

/// The timings of one request, in ms from the start of the connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    /// TCP connection established.
    pub connect_ms: f64,
    /// TLS handshake complete.
    pub appconnect_ms: f64,
    /// First byte of the response.
    pub ttfb_ms: f64,
    /// Last byte of the body.
    pub total_ms: f64,
    /// `2`, `1.1`, or empty when it failed before a response.
    pub http_version: String,
    /// HTTP status; 0 when the request failed.
    pub status: u16,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The handshake it had; `None` when it failed before the handshake was known.
    pub handshake: Option<Handshake>,
}

/// Runs one fetch on `runtime`, recorded as failed after [`REQUEST_TIMEOUT_S`].
pub fn bounded(
    runtime: &tokio::runtime::Runtime,
    fut: impl std::future::Future<Output = Fetched>,
) -> Fetched {
    let limit = std::time::Duration::from_secs(REQUEST_TIMEOUT_S);
    runtime.block_on(async move {
        match tokio::time::timeout(limit, fut).await {
            Ok(f) => f,
            Err(_) => Fetched {
                error: Some(format!("timed out after {REQUEST_TIMEOUT_S} s")),
                ..Fetched::default()
            },
        }
    })
}

/// Milliseconds since `since`.
pub fn ms(since: std::time::Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A client able to make one cold request.
pub trait Fetcher {
    /// Opens a new connection, fetches `target`, closes it, and times it.
    fn fetch(&mut self, target: &Target) -> Fetched;

    /// Fetches `target` once, then once more after each of `gaps`: one entry per request
    /// (`gaps.len() + 1`). Clients that keep no connection make one cold fetch per entry;
    /// the warm client makes them all on one connection.
    fn fetch_series(&mut self, target: &Target, gaps: &[std::time::Duration]) -> Vec<Fetched> {
        let mut out = vec![self.fetch(target)];
        for gap in gaps {
            std::thread::sleep(*gap);
            out.push(self.fetch(target));
        }
        out
    }
}

/// The fetcher for a client kind.
pub fn fetcher(kind: ClientKind) -> std::io::Result<Box<dyn Fetcher>> {
    Ok(match kind {
        ClientKind::CurlH2 => Box::new(curl::Curl { http2: true }),
        ClientKind::CurlH1 => Box::new(curl::Curl { http2: false }),
        ClientKind::RustH2 => Box::new(rust::RustClient::new(true)?),
        ClientKind::RustH1 => Box::new(rust::RustClient::new(false)?),
        ClientKind::RustH3 => Box::new(h3::H3Client::new()?),
        ClientKind::RustH2Warm => Box::new(warm::WarmClient::new(true)?),
        ClientKind::RustH1Warm => Box::new(warm::WarmClient::new(false)?),
        ClientKind::RustH2Resumed => Box::new(resumed::ResumedClient::new(true, false)?),
        ClientKind::RustH2Early => Box::new(resumed::ResumedClient::new(true, true)?),
        ClientKind::RustH1Resumed => Box::new(resumed::ResumedClient::new(false, false)?),
        ClientKind::RustH1Early => Box::new(resumed::ResumedClient::new(false, true)?),
        ClientKind::RustH3Early => Box::new(h3::H3Client::resuming()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ClientKind::ALL {
            assert_eq!(ClientKind::from_name(k.name()), Some(k));
        }
        assert_eq!(ClientKind::from_name("curl"), None);
        assert!(ClientKind::CurlH1.needs_curl());
        assert!(!ClientKind::RustH2.needs_curl());
        assert!(ClientKind::RustH1Warm.is_warm() && !ClientKind::RustH1.is_warm());
        assert_eq!(
            ClientKind::from_name("rust-h3-0rtt"),
            Some(ClientKind::RustH3Early)
        );
        assert_eq!(ClientKind::RustH2Early.intended(), Handshake::EarlyAccepted);
        assert_eq!(ClientKind::RustH1Resumed.intended(), Handshake::Resumed);
        assert_eq!(ClientKind::CurlH2.intended(), Handshake::Cold);
        assert!(ClientKind::RustH3Early.is_h3() && !ClientKind::RustH2Early.is_h3());
    }

    #[test]
    fn url_of_target() {
        let t = Target {
            addr: "198.18.0.1:9400".parse().expect("addr"),
            path: "/f.bin".into(),
        };
        assert_eq!(t.url(), "https://198.18.0.1:9400/f.bin");
    }
}
