//! HTTP/3: a QUIC endpoint (quinn) per `listen ... quic` socket, and each connection's
//! requests served by the same pipeline as HTTP/1.1 and HTTP/2 (h3 over h3-quinn).
//!
//! One endpoint serves every server block of its address. Its TLS config is the default
//! server block's (versions, ciphers, tickets) with ALPN `h3`, and a certificate resolver that
//! picks the block by SNI and asks that block's own resolver — so SNI, certificates by
//! variable and the object cache work as over TCP. Per-block TLS settings other than the
//! certificate (protocols, ciphers) are the default block's; client certificates are refused
//! at load for QUIC listeners (see `conf::build`).
//!
//! The transport settings (`http3_max_concurrent_streams`, `http3_stream_buffer_size`,
//! `quic_gso`, `quic_retry`, `quic_host_key`) are the default server block's too, as nginx's;
//! `http3 off` is per block: the handshake of a client whose SNI names such a block fails, and
//! a request whose Host names one gets 421 (`http::pipeline`).
//!
//! Reload: the UDP socket and the endpoint stay; the endpoint gets the new site's TLS and
//! transport settings and keys for new connections, and connections keep the site they
//! started on. A retired site's connections (and all of them on `-s quit`) say GOAWAY and end
//! once their requests have.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::task::JoinHandle;

use super::quic_keys::{CidGenerator, HostKeys, ResetKey};
use super::quic_request;
use super::quic_tls::Configs;
use super::{Shared, Site};
use crate::conf::model::ServerConf;
use crate::http::conn::Conn;
use crate::http::reqvars::{ConnFacts, TlsFacts};

/// Unidirectional streams a client may open at once: its control and QPACK streams (3), with
/// room for extensions.
const UNI_STREAMS: u32 = 16;

/// A running QUIC endpoint on one UDP socket.
pub(super) struct Endpoint {
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    /// The stateless reset key and the connection IDs' key, swapped when a reload changes
    /// `quic_host_key` (quinn fixes the endpoint's own when it is made).
    reset_key: Arc<ResetKey>,
    cid_key: Arc<AtomicU64>,
    /// The address-validation tokens (NEW_TOKEN) already used, kept across reloads so a
    /// token is taken once per endpoint whatever the configuration.
    tokens: Arc<quinn::BloomTokenLog>,
    /// The anti-amplification accounts of the socket (`quic_socket`).
    amplification: Arc<super::quic_socket::Amplification>,
    /// The endpoint's current settings, each connection's own made from them.
    configs: Arc<ArcSwap<Configs>>,
    accept: JoinHandle<()>,
}

impl Endpoint {
    /// Starts serving `site`'s QUIC listeners on `udp` (bound to `addr`); new connections
    /// always use the current site of `current`.
    pub fn start(
        udp: std::net::UdpSocket,
        addr: SocketAddr,
        site: &Arc<Site>,
        shared: Arc<Shared>,
        current: &Arc<ArcSwap<Site>>,
    ) -> std::io::Result<Endpoint> {
        let tokens = Arc::new(quinn::BloomTokenLog::default());
        let (config, keys, tls) =
            server_config(site, addr, &tokens).map_err(std::io::Error::other)?;
        let configs = Arc::new(ArcSwap::from_pointee(Configs {
            quic: config.clone(),
            tls,
        }));
        let reset_key = ResetKey::new(keys.reset);
        let cid_key = Arc::new(AtomicU64::new(keys.cid));
        let mut endpoint_config = quinn::EndpointConfig::new(reset_key.clone());
        let key = cid_key.clone();
        endpoint_config.cid_generator(move || Box::new(CidGenerator(key.clone())));
        let runtime = Arc::new(quinn::TokioRuntime);
        // Every connection's requests arrive through this socket: its reads bound them.
        let reads = Arc::new(crate::net::ReadClock::default());
        let socket = quinn::Runtime::wrap_udp_socket(&*runtime, udp)?;
        let amplification =
            super::quic_socket::Amplification::new(cid_key.clone(), idle_timeout(site, addr));
        let socket = Arc::new(super::quic_socket::Stamped::new(
            socket,
            reads.clone(),
            amplification.clone(),
        ));
        let endpoint = quinn::Endpoint::new_with_abstract_socket(
            endpoint_config,
            Some(config),
            socket,
            runtime,
        )?;
        let accept = tokio::spawn(accept_loop(
            endpoint.clone(),
            addr,
            current.clone(),
            shared,
            reads,
            amplification.clone(),
            configs.clone(),
        ));
        Ok(Endpoint {
            endpoint,
            addr,
            reset_key,
            cid_key,
            tokens,
            amplification,
            configs,
            accept,
        })
    }

    /// New connections get `site`'s TLS and transport settings and keys (a reload).
    pub fn reconfigure(&self, site: &Arc<Site>) {
        match server_config(site, self.addr, &self.tokens) {
            Ok((c, keys, tls)) => {
                self.configs.store(Arc::new(Configs {
                    quic: c.clone(),
                    tls,
                }));
                self.reset_key.set(keys.reset);
                self.cid_key.store(keys.cid, Ordering::Relaxed);
                self.amplification
                    .idle_timeout(idle_timeout(site, self.addr));
                self.endpoint.set_server_config(Some(c));
            }
            Err(e) => crate::fblog!(Alert, "QUIC on {} keeps its old settings: {e}", self.addr),
        }
    }

    /// Accepts no more connections; those open finish on the socket.
    pub fn close(self) {
        self.endpoint.set_server_config(None);
        self.accept.abort();
    }
}

/// The index of `addr`'s QUIC socket in `site`'s sockets.
fn socket_of(site: &Site, addr: SocketAddr) -> Option<usize> {
    site.vhosts()
        .sockets()
        .iter()
        .position(|s| s.addr == addr && s.quic)
}

/// The idle timeout of `addr`'s QUIC connections in `site` (`keepalive_timeout` of the
/// default server block, see [`transport_config`]).
fn idle_timeout(site: &Site, addr: SocketAddr) -> Duration {
    socket_of(site, addr).map_or(Duration::ZERO, |s| {
        let servers = site.vhosts().addr_servers(s, addr);
        servers
            .default_server()
            .default_location
            .keepalive_timeout
            .idle
    })
}

/// The endpoint's settings for `site`, all from the address's default server block: TLS (ALPN
/// h3, certificates by SNI), transport limits, the Retry token key; and the endpoint's keys.
///
/// After a handshake the server gives the client two address-validation tokens (NEW_TOKEN,
/// quinn's default, sealed with the token key): a client that comes back with one is not held
/// to the anti-amplification limit (3× what it sent) before its address is proven, so a 0-RTT
/// answer leaves whole in the first flight instead of a round trip later, and `quic_retry on`
/// costs it no Retry. `tokens` remembers the tokens used, so each is taken once.
fn server_config(
    site: &Arc<Site>,
    addr: SocketAddr,
    tokens: &Arc<quinn::BloomTokenLog>,
) -> Result<(quinn::ServerConfig, HostKeys, Arc<rustls::ServerConfig>), String> {
    let socket = socket_of(site, addr).ok_or("the configuration has no such QUIC listener")?;
    let default = site.vhosts().addr_servers(socket, addr).default_server();
    let base = site
        .tls_for(default)
        .ok_or("the default server of a QUIC listener has no TLS settings")?;
    let mut tls = (**base).clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // `http3_hq on`: HTTP/0.9 over QUIC too (the client's preference decides; see quic_hq).
    if default.http3_hq {
        tls.alpn_protocols.push(super::quic_hq::ALPN.to_vec());
    }
    // QUIC's tickets say 0xffffffff or nothing (RFC 9001 §4.6.1); over TCP it stays 0.
    let early = default.tls.as_ref().is_some_and(|t| t.early_data);
    tls.max_early_data_size = if early { u32::MAX } else { 0 };
    tls.cert_resolver = Arc::new(BySni {
        site: site.clone(),
        socket,
        addr,
    });
    let tls = Arc::new(tls);
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls.clone())
        .map_err(|e| format!("TLS settings unusable for QUIC: {e}"))?;
    let keys = HostKeys::of(default);
    let mut config = quinn::ServerConfig::new(Arc::new(crypto), keys.token.clone());
    config.transport_config(Arc::new(transport_config(default)?));
    let mut validation = quinn::ValidationTokenConfig::default();
    validation.log(tokens.clone());
    config.validation_token_config(validation);
    Ok((config, keys, tls))
}

/// The congestion window a QUIC connection starts with: 32 packets of QUIC's first-flight
/// size (1,200 bytes), 38,400 bytes — what Google's QUIC and quic-go (Caddy) start with.
/// quinn's default, RFC 9002's 10 packets (12,000 bytes), is less than TCP's IW10 in bytes
/// (14,480 with a 1,448-byte MSS) and counts the handshake flight too: measured at 100 ms RTT
/// (`bench/h3.toml`), a cold 10 KB response then took a round trip more than Caddy's
/// (305.6 vs 203.1 ms) and 100 KB two more. With 32 packets firstbyte's first flight carries
/// the handshake, a 0-RTT answer of ~30 KB, or a first response of that size after it
/// (`bench/results/2026-11-26-quic-first-flight`).
const INITIAL_WINDOW: u64 = 32 * 1200;

/// The RTT a QUIC connection assumes before its first sample: 100 ms, as Chrome and quic-go
/// (Caddy), instead of quinn's default, RFC 9002's 333 ms. quinn paces a connection's window
/// over this RTT until the client's first acknowledgement; a 0-RTT answer starts before that,
/// so with 333 ms only ~26 KB of the 38,400-byte first window left in the first 100 ms and a
/// 100 KB 0-RTT response took half a round trip more than Caddy's (322.4 vs 268.2 ms at
/// 100 ms RTT, the run of 5bbba64 committed in 317b620; with 100 ms, 281.2 against Caddy's 302.1, `bench/results/2026-11-26-h3`).
/// The cost of guessing low on a longer path is
/// an early probe timeout: a spurious retransmission of the handshake flight.
const INITIAL_RTT: Duration = Duration::from_millis(100);

/// A QUIC integer, saturated at its largest value.
fn varint(n: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(n).unwrap_or(quinn::VarInt::MAX)
}

/// Transport parameters and sending, from `server`'s directives (nginx's meanings).
fn transport_config(server: &ServerConf) -> Result<quinn::TransportConfig, String> {
    let mut transport = quinn::TransportConfig::default();
    let streams = server.http3_max_concurrent_streams;
    transport.max_concurrent_bidi_streams(streams.into());
    transport.max_concurrent_uni_streams(UNI_STREAMS.into());
    // As nginx: each stream's window is the buffer size, the connection's that times the
    // streams allowed.
    let buffer = server.http3_stream_buffer_size;
    transport.stream_receive_window(varint(buffer));
    transport.receive_window(varint(
        buffer.saturating_mul(u64::from(streams) + u64::from(UNI_STREAMS)),
    ));
    transport.enable_segmentation_offload(server.quic_gso);
    transport.initial_rtt(INITIAL_RTT);
    let idle = server.default_location.keepalive_timeout.idle;
    let idle = quinn::IdleTimeout::try_from(idle.max(Duration::from_millis(1)))
        .map_err(|e| format!("keepalive_timeout too long for QUIC: {e}"))?;
    transport.max_idle_timeout(Some(idle));
    // `tcp_congestion bbr` chooses BBR for the address's QUIC connections too (quinn's); any
    // other value, or none, CUBIC. At 100 ms RTT and 1% loss a 1 MB HTTP/3 download took a
    // median 2.93 s with CUBIC against 1.26 s with BBR (HTTP/2 with BBR: 1.19 s); without loss
    // BBR is the slower (1.09 s against 0.73), as TCP's is (`bench/results/2026-11-26-h3`).
    if server.socket.congestion.as_deref() == Some("bbr") {
        let mut bbr = quinn::congestion::BbrConfig::default();
        bbr.initial_window(INITIAL_WINDOW);
        transport.congestion_controller_factory(Arc::new(bbr));
    } else {
        let mut cubic = quinn::congestion::CubicConfig::default();
        cubic.initial_window(INITIAL_WINDOW);
        transport.congestion_controller_factory(Arc::new(cubic));
    }
    Ok(transport)
}

/// Chooses the server block by SNI and asks its certificate resolver.
struct BySni {
    site: Arc<Site>,
    socket: usize,
    addr: SocketAddr,
}

impl fmt::Debug for BySni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BySni").field("addr", &self.addr).finish()
    }
}

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let servers = self.site.vhosts().addr_servers(self.socket, self.addr);
        let server = servers.find(hello.server_name());
        if !super::quic_hq::serves(server.http3, server.http3_hq, hello.alpn()) {
            // nginx refuses the ALPN; rustls has no per-name ALPN, so no certificate instead.
            // The directive that would take the client: `http3`, or `http3_hq` for hq alone.
            let off = if server.http3 { "http3_hq" } else { "http3" };
            crate::fblog!(
                Info,
                "QUIC handshake refused: \"{off}\" is off in the server block for SNI \"{}\"",
                hello.server_name().unwrap_or("")
            );
            return None;
        }
        self.site.tls_for(server)?.cert_resolver.resolve(hello)
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    addr: SocketAddr,
    current: Arc<ArcSwap<Site>>,
    shared: Arc<Shared>,
    reads: Arc<crate::net::ReadClock>,
    amplification: Arc<super::quic_socket::Amplification>,
    configs: Arc<ArcSwap<Configs>>,
) {
    while let Some(incoming) = endpoint.accept().await {
        // A client that came back with a token (Retry or NEW_TOKEN) proved its address:
        // quinn lifts its own limit, and the socket's follows.
        if incoming.remote_address_validated() {
            amplification.validated(incoming.remote_address());
        }
        let site = current.load_full();
        let Some(socket) = socket_of(&site, addr) else {
            incoming.refuse();
            continue;
        };
        // `quic_retry on`: an unvalidated client first gets a Retry packet with a token; it
        // comes back with the token (from the same address) and is validated.
        let servers = site.vhosts().addr_servers(socket, addr);
        if servers.default_server().quic_retry
            && !incoming.remote_address_validated()
            && incoming.may_retry()
        {
            if let Err(e) = incoming.retry() {
                e.into_incoming().ignore();
            }
            continue;
        }
        let limit = site.config.main.max_connections();
        if shared.http.stats.active.load(Ordering::Relaxed) >= limit {
            crate::fblog!(
                Alert,
                "{} worker_connections are not enough",
                site.config.main.worker_connections
            );
            incoming.refuse();
            continue;
        }
        let reads = reads.clone();
        let facts = Arc::new(super::quic_tls::Facts::default());
        let config = configs.load().for_connection(&facts).map(Arc::new);
        let incoming = (incoming, config, facts);
        tokio::spawn(serve(site, shared.clone(), socket, addr, reads, incoming));
    }
}

/// One QUIC connection: the handshake, then HTTP/3 requests until the client or a shutdown
/// ends it.
async fn serve(
    site: Arc<Site>,
    shared: Arc<Shared>,
    socket: usize,
    addr: SocketAddr,
    reads: Arc<crate::net::ReadClock>,
    (incoming, config, handshake): (
        quinn::Incoming,
        Option<Arc<quinn::ServerConfig>>,
        Arc<super::quic_tls::Facts>,
    ),
) {
    let stats = &shared.http.stats;
    stats.accepts.fetch_add(1, Ordering::Relaxed);
    stats.handled.fetch_add(1, Ordering::Relaxed);
    stats.active.fetch_add(1, Ordering::Relaxed);
    let _guard = super::conn::ActiveGuard(shared.clone());
    let id = stats.accepts.load(Ordering::Relaxed);
    let peer = incoming.remote_address();
    let local = match incoming.local_ip() {
        Some(ip) if addr.ip().is_unspecified() => SocketAddr::new(ip, addr.port()),
        _ => addr,
    };
    let servers = site.vhosts().addr_servers(socket, local);
    let default = servers.default_server().clone();
    // With its own settings, the handshake's cipher and resumption are known (`quic_tls`).
    let accepted = match config {
        Some(c) => incoming.accept_with(c),
        None => incoming.accept(),
    };
    let connecting = match accepted {
        Ok(c) => c,
        Err(e) => {
            crate::metrics::tls_failure("quic", quic_reason(&e));
            crate::fblog!(Info, "QUIC handshake failed ({e}), client: {}", peer.ip());
            return;
        }
    };
    // With ssl_early_data, requests are taken before the handshake completes (0-RTT and 0.5-RTT
    // data); `handshaken` says when it has, and requests before are marked as early data.
    let early = default.tls.as_ref().is_some_and(|t| t.early_data);
    let handshaken = Arc::new(AtomicBool::new(!early));
    // Set once a request is taken from early data (the connection-info page's "0-RTT").
    let early_used = Arc::new(AtomicBool::new(false));
    let quic = if early {
        // Not before the whole ClientHello is in (it may span datagrams: a post-quantum key
        // share does): until then the client's transport parameters are unknown, so HTTP/3's
        // control stream cannot be opened — and quinn does not wake a stream opener when they
        // arrive — and the SNI and ALPN that choose the server block and the protocol
        // (HTTP/3 or hq-interop) are unknown too.
        let mut connecting = connecting;
        let hello = connecting.handshake_data();
        match tokio::time::timeout(default.client_header_timeout, hello).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return handshake_failed(&e, peer),
            Err(_) => return handshake_timed_out(peer),
        }
        // A server's conversion always succeeds (quinn).
        let Ok((quic, done)) = connecting.into_0rtt() else {
            return;
        };
        let (flag, conn, limit) = (
            handshaken.clone(),
            quic.clone(),
            default.client_header_timeout,
        );
        tokio::spawn(async move {
            match tokio::time::timeout(limit, done).await {
                Ok(_) => {
                    // Done, or the connection was lost on the way (quinn says `false` then,
                    // and for a server that took no 0-RTT data).
                    match conn.close_reason() {
                        None => crate::metrics::quic_handshake(),
                        Some(e) => crate::metrics::tls_failure("quic", quic_reason(&e)),
                    }
                    flag.store(true, Ordering::Release)
                }
                // A handshake that does not complete in time ends the connection, as without
                // early data.
                Err(_) => {
                    crate::metrics::tls_failure("quic", "timeout");
                    conn.close(0u32.into(), b"handshake timeout")
                }
            }
        });
        quic
    } else {
        match tokio::time::timeout(default.client_header_timeout, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return handshake_failed(&e, peer),
            Err(_) => return handshake_timed_out(peer),
        }
    };
    if !early {
        crate::metrics::quic_handshake();
    }
    let hello = quic
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok());
    let hq = hello
        .as_ref()
        .is_some_and(|d| d.protocol.as_deref() == Some(super::quic_hq::ALPN));
    let sni = hello.and_then(|d| d.server_name);
    let server: Arc<ServerConf> = servers.find(sni.as_deref()).clone();
    let facts = ConnFacts {
        peer: Some(peer),
        local: Some(local),
        id,
        tls: Some(TlsFacts {
            protocol: "TLSv1.3",
            cipher: handshake.cipher(),
            resumed: handshake.resumed(),
            alpn: if hq { "hq-interop" } else { "h3" }.into(),
            server_name: sni,
            ..TlsFacts::default()
        }),
        record_policy: "quic",
        proxy_protocol: None,
        proxy_protocol_tlvs: None,
        socket: None,
        accepted: Some(std::time::Instant::now()),
        unix: None,
    };
    let send_timeout = server.default_location.send_timeout;
    // The request head's bound: `large_client_header_buffers`, as over HTTP/2.
    let max_fields = crate::http::h2limits::max_header_list_size(&server);
    // A request's arrival bound (the open-file check's) is the endpoint's last read.
    let io = Arc::new(crate::net::IoControl::with_shared_reads(
        send_timeout,
        reads,
    ));
    let probe = Arc::new(Probe {
        quic: quic.clone(),
        early_used: early_used.clone(),
    });
    let conn = Arc::new(
        Conn::new(
            site.http().clone(),
            shared.http.clone(),
            socket,
            local,
            facts,
            io,
        )
        .with_quic(server, probe),
    );
    if hq {
        let (mut retired, mut draining) = (site.retired(), shared.draining());
        let stop = async move { stopping(&mut retired, &mut draining).await };
        let early = (handshaken, early_used);
        return super::quic_hq::serve(conn, quic, early, stop, send_timeout).await;
    }
    let handle = quic.clone();
    // No grease (RFC 9114 §7.2.8, §9: optional): a reserved frame type on a request stream
    // or a grease stream is what a strict peer cannot parse (nginx's own test client stops
    // at one); nginx sends none.
    let h3 = h3::server::builder()
        .max_field_section_size(max_fields.into())
        .send_grease(false)
        .build::<_, Bytes>(h3_quinn::Connection::new(quic))
        .await;
    let Ok(mut h3) = h3 else {
        return;
    };
    let mut retired = site.retired();
    let mut draining = shared.draining();
    // The requests in flight: after GOAWAY the connection closes when the last one is done
    // (an idle one at once), not at the idle timeout.
    let mut requests = tokio::task::JoinSet::new();
    let mut closing = false;
    loop {
        tokio::select! {
            r = h3.accept(), if !closing => match r {
                Ok(Some(resolver)) => {
                    let early = (handshaken.clone(), early_used.clone());
                    requests.spawn(request(conn.clone(), resolver, early));
                }
                // The client said GOAWAY and its requests are done, or the connection closed.
                Ok(None) | Err(_) => break,
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {
                if closing && requests.is_empty() {
                    break;
                }
            }
            _ = stopping(&mut retired, &mut draining), if !closing => {
                closing = true;
                let _ = h3.shutdown(0).await;
                if requests.is_empty() {
                    break;
                }
            }
        }
    }
    // Closed by the client: what is left ends with its streams.
    while requests.join_next().await.is_some() {}
    if closing {
        // A finished response may still sit in QUIC's send buffer: close once the client has
        // it (or closes itself), not when the last stream handle goes.
        linger(&handle, send_timeout).await;
        handle.close(H3_NO_ERROR.into(), b"");
    }
}

/// Counts and logs a handshake that failed.
fn handshake_failed(e: &quinn::ConnectionError, peer: SocketAddr) {
    crate::metrics::tls_failure("quic", quic_reason(e));
    crate::fblog!(Info, "QUIC handshake failed ({e}), client: {}", peer.ip());
}

/// Counts and logs a handshake that did not complete in `client_header_timeout`.
fn handshake_timed_out(peer: SocketAddr) {
    crate::metrics::tls_failure("quic", "timeout");
    crate::fblog!(
        Info,
        "client timed out in QUIC handshake, client: {}",
        peer.ip()
    );
}

/// Reads a connection's transport state for the connection-info page.
struct Probe {
    quic: quinn::Connection,
    /// Whether a request was taken from early data.
    early_used: Arc<AtomicBool>,
}

impl crate::http::builtin::QuicProbe for Probe {
    fn info(&self) -> crate::http::builtin::QuicInfo {
        let s = self.quic.stats();
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        crate::http::builtin::QuicInfo {
            // quinn does not say which version a connection speaks. Its versions are 1 and
            // drafts 29-34, whose HTTP/3 ALPN tokens are `h3-NN`; the endpoint offers only
            // `h3`, which RFC 9114 binds to version 1, so a connection serving HTTP/3 is v1.
            version: 1,
            rtt_us: us(s.path.rtt),
            min_rtt_us: us(s.path.min_rtt),
            cwnd_bytes: s.path.cwnd,
            mtu: s.path.current_mtu,
            sent_packets: s.path.sent_packets,
            lost_packets: s.path.lost_packets,
            congestion_events: s.path.congestion_events,
            udp_tx_datagrams: s.udp_tx.datagrams,
            udp_tx_bytes: s.udp_tx.bytes,
            udp_rx_datagrams: s.udp_rx.datagrams,
            udp_rx_bytes: s.udp_rx.bytes,
            zero_rtt: self.early_used.load(Ordering::Relaxed),
            congestion: congestion_name(self.quic.congestion_state()),
        }
    }
}

/// The name of a connection's congestion controller (see [`transport_config`]).
fn congestion_name(c: Box<dyn quinn::congestion::Controller>) -> &'static str {
    let any = c.into_any();
    if any.is::<quinn::congestion::Bbr>() {
        "bbr"
    } else if any.is::<quinn::congestion::Cubic>() {
        "cubic"
    } else {
        "other"
    }
}

/// HTTP/3's "no error" code (RFC 9114 §8.1).
const H3_NO_ERROR: u32 = 0x100;

/// Waits until the connection has sent nothing for a while — every byte acknowledged, since
/// QUIC retransmits what is not (at least once per probe timeout) — or the client closed it,
/// or `max` passed (`send_timeout`: a client that takes nothing).
pub(super) async fn linger(quic: &quinn::Connection, max: Duration) {
    let start = tokio::time::Instant::now();
    let mut sent = quic.stats().udp_tx.bytes;
    let mut quiet_since = start;
    loop {
        tokio::select! {
            _ = quic.closed() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let now = tokio::time::Instant::now();
        let tx = quic.stats().udp_tx.bytes;
        // Quiet for three round trips (and at least a second): no probe left unanswered.
        let quiet = (quic.rtt() * 3).max(Duration::from_secs(1));
        if tx != sent {
            sent = tx;
            quiet_since = now;
        } else if now - quiet_since >= quiet || now - start >= max {
            return;
        }
    }
}

/// Resolves when the connection's site is retired (a reload) or the server drains (`-s quit`).
async fn stopping(
    retired: &mut tokio::sync::watch::Receiver<bool>,
    draining: &mut tokio::sync::watch::Receiver<bool>,
) {
    tokio::select! {
        _ = retired.wait_for(|r| *r) => {}
        _ = draining.wait_for(|d| *d) => {}
    }
}

/// One request stream: the head, the pipeline, the response.
async fn request(
    conn: Arc<Conn>,
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    (handshaken, early_used): (Arc<AtomicBool>, Arc<AtomicBool>),
) {
    let Ok((req, stream)) = resolver.resolve_request().await else {
        return;
    };
    let early = !handshaken.load(Ordering::Acquire);
    let Some((mut parts, body, mut send)) = quic_request::head(&conn, req, stream, early).await
    else {
        return;
    };
    let head = parts.method == http::Method::HEAD;
    if early {
        parts.extensions.insert(crate::http::pipeline::EarlyData);
        early_used.store(true, Ordering::Relaxed);
    }
    let mut hints = None;
    if conn.site().proxies.early_hints() {
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        parts
            .extensions
            .insert(crate::http::proxy::EarlyHints::Queue(to));
        hints = Some(from);
    }
    let req = http::Request::from_parts(parts, body);
    // Boxed: held across the Early Hints sends below, the service's state would otherwise
    // sit inline beside theirs and widen every request's task (copied whole when spawned).
    let mut serving = Box::pin(crate::http::pipeline::serve(conn, req, None));
    // 103 Early Hints the service passes on (`early_hints`) go before its answer.
    let early = |h: http::HeaderMap| {
        let mut r = http::Response::new(());
        *r.status_mut() = http::StatusCode::EARLY_HINTS;
        *r.headers_mut() = h;
        r
    };
    let resp = loop {
        tokio::select! {
            biased;
            Some(h) = std::future::poll_fn(|cx| match &mut hints {
                Some(q) => q.poll_recv(cx),
                None => Poll::Ready(None),
            }) => {
                if send.send_response(early(h)).await.is_err() {
                    return;
                }
            }
            r = &mut serving => {
                let Ok(resp) = r;
                break resp;
            }
        }
    };
    while let Some(Ok(h)) = hints.as_mut().map(|q| q.try_recv()) {
        if send.send_response(early(h)).await.is_err() {
            return;
        }
    }
    if resp.status().as_u16() == crate::http::pipeline::CLOSE {
        // nginx's 444: no response, the stream is reset.
        send.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
        return;
    }
    let (parts, body) = resp.into_parts();
    if send
        .send_response(http::Response::from_parts(parts, ()))
        .await
        .is_err()
    {
        return;
    }
    if !head {
        let mut body = Box::pin(body);
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return;
            };
            match frame.into_data() {
                Ok(data) => {
                    if !data.is_empty() && send.send_data(data).await.is_err() {
                        return;
                    }
                }
                // The trailer section ends the response (a HEADERS frame, RFC 9114 §4.1).
                Err(frame) => {
                    if let Ok(t) = frame.into_trailers() {
                        if send.send_trailers(t).await.is_err() {
                            return;
                        }
                        break;
                    }
                }
            }
        }
    }
    let _ = send.finish().await;
}

/// The `metrics` reason of a failed QUIC handshake.
fn quic_reason(e: &quinn::ConnectionError) -> &'static str {
    use quinn::ConnectionError as E;
    match e {
        E::TimedOut => "timeout",
        // CRYPTO_ERROR: 0x100 + a TLS alert (RFC 9001 §4.8).
        E::TransportError(t) if (0x100..0x200).contains(&u64::from(t.code)) => "tls_alert",
        E::TransportError(_) => "transport_error",
        E::ConnectionClosed(_) | E::ApplicationClosed(_) | E::Reset => "client_closed",
        E::VersionMismatch => "version_mismatch",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(extra: &str) -> Arc<ServerConf> {
        let text = format!("events {{}}\nhttp {{ {extra}\n server {{ listen 127.0.0.1:1; }} }}\n");
        let dir = std::env::temp_dir();
        let c =
            crate::conf::load_str(&text, &dir.join("quic-transport.conf"), &dir).expect("config");
        c.http.expect("http block").servers[0].clone()
    }

    /// quinn keeps its settings private; its `Debug` output is what it exposes.
    fn transport(extra: &str) -> String {
        format!("{:?}", transport_config(&server(extra)).expect("transport"))
    }

    /// The congestion controller and its window are not in quinn's `Debug` output; the
    /// interop test reads them from a live connection (`tests/http3_interop.rs`).
    #[test]
    fn first_flight_assumes_100ms() {
        assert!(transport("").contains("initial_rtt: 100ms"));
        assert!(transport("tcp_congestion bbr;").contains("initial_rtt: 100ms"));
    }

    #[test]
    fn stream_windows_follow_nginx() {
        let t = transport("http3_stream_buffer_size 32k; http3_max_concurrent_streams 10;");
        assert!(t.contains("stream_receive_window: 32768"), "{t}");
        // 32k × (10 bidirectional + the unidirectional streams).
        let conn = 32768 * (10 + u64::from(UNI_STREAMS));
        assert!(t.contains(&format!("receive_window: {conn}")), "{t}");
    }
}
