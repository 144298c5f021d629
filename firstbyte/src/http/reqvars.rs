//! nginx's variables for one request: `$uri`, `$host`, `$remote_addr`, `$ssl_protocol`, ...
//!
//! A [`RequestVars`] borrows what the request pipeline already holds (the request head, the
//! connection's facts, the response status) and computes a variable only when a value that
//! uses it is evaluated: nothing is formatted for variables nobody reads.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Instant;

use http::HeaderMap;

use crate::conf::vars::Vars;

/// Facts of the connection a request arrived on.
#[derive(Debug, Clone, Default)]
pub struct ConnFacts {
    /// Client address.
    pub peer: Option<SocketAddr>,
    /// Local address.
    pub local: Option<SocketAddr>,
    /// Connection serial number (`$connection`).
    pub id: u64,
    /// TLS facts, on TLS connections.
    pub tls: Option<TlsFacts>,
    /// The record policy in force (`$record_policy`).
    pub record_policy: &'static str,
    /// The addresses of a `listen ... proxy_protocol` connection's PROXY header.
    pub proxy_protocol: Option<crate::net::proxy_protocol::ProxyAddrs>,
    /// The TLVs of that header, when it was version 2 with addresses (`$proxy_protocol_tlv_*`).
    pub proxy_protocol_tlvs: Option<std::sync::Arc<[u8]>>,
    /// The TCP socket, open for as long as the connection's requests are (`$tcpinfo_*`).
    pub socket: Option<std::os::fd::RawFd>,
    /// When the connection was accepted (`$connection_time`).
    pub accepted: Option<Instant>,
    /// `listen unix:PATH`: the path of the UNIX-domain socket the connection came in on
    /// (`peer` and `local` are then `None`).
    pub unix: Option<std::sync::Arc<str>>,
}

impl ConnFacts {
    /// The client's address as `$remote_addr` gives it before `set_real_ip_from`: its IP
    /// address, or `unix:` on a UNIX-domain socket (nginx's words for an unnamed peer).
    pub fn remote_addr(&self) -> Option<String> {
        match (self.peer, &self.unix) {
            (Some(p), _) => Some(p.ip().to_string()),
            (None, Some(_)) => Some("unix:".into()),
            (None, None) => None,
        }
    }

    /// `$server_addr`: the local IP address, or `unix:PATH` on a UNIX-domain socket.
    fn server_addr(&self) -> Option<String> {
        match (self.local, &self.unix) {
            (Some(l), _) => Some(l.ip().to_string()),
            (None, Some(p)) => Some(format!("unix:{p}")),
            (None, None) => None,
        }
    }
}

/// What the handshake settled.
#[derive(Debug, Clone, Default)]
pub struct TlsFacts {
    /// `TLSv1.3`.
    pub protocol: &'static str,
    /// `TLS_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// `x25519`.
    pub group: &'static str,
    /// `$ssl_curves`: the groups the client offered, their code points in its order (named
    /// when the variable is read: `x25519:prime256v1`).
    pub curves: Box<[u16]>,
    /// `$ssl_ciphers`: the cipher suites the client offered, their code points in its order
    /// (named when the variable is read).
    pub ciphers: Box<[u16]>,
    /// `h2`, `http/1.1` or empty.
    pub alpn: Cow<'static, str>,
    /// Whether the session was resumed.
    pub resumed: bool,
    /// `$ssl_session_id`: the session's id, the same on a resumption
    /// (`tls::session_id`); `None` (empty) where no handshake of firstbyte's made one.
    pub session_id: Option<crate::tls::session_id::SessionId>,
    /// SNI sent by the client.
    pub server_name: Option<String>,
    /// The client's certificate and its verification, when the handshake's server block
    /// asked for one and the client sent it.
    pub client: Option<crate::tls::peer::PeerCert>,
    /// Whether the kernel makes this connection's records (kernel TLS): sending, receiving.
    pub ktls: (bool, bool),
    /// Whether the kernel sends files without copying their pages (`TLS_TX_ZEROCOPY_RO`,
    /// `ssl_conf_command Options KTLSTxZerocopySendfile`).
    pub ktls_zerocopy: bool,
    /// Over TCP, when the handshake accepted early data (0-RTT): open until it completes.
    pub early: Option<crate::tls::stream::EarlyGate>,
}

impl TlsFacts {
    /// Whether a request taken now is taken in early data: the TCP handshake that accepted
    /// 0-RTT has not completed (QUIC marks its requests itself, see `pipeline::EarlyData`).
    pub fn in_early_data(&self) -> bool {
        self.early.as_ref().is_some_and(|g| g.handshaking())
    }
}

/// Everything a variable of one request can be computed from.
pub struct RequestVars<'a> {
    /// The connection.
    pub conn: &'a ConnFacts,
    /// `GET`.
    pub method: &'a str,
    /// The request target as received (`$request_uri`).
    pub request_uri: &'a str,
    /// Normalized path (`$uri`).
    pub uri: &'a str,
    /// Query string without `?`.
    pub args: Option<&'a str>,
    /// `HTTP/1.1`, `HTTP/2.0`.
    pub protocol: &'static str,
    /// Request headers.
    pub headers: &'a HeaderMap,
    /// The request head's size as received: the request line and header lines (HTTP/1.x),
    /// the header block (HTTP/2); `$request_length` adds the body's declared length.
    pub head_length: u64,
    /// `$host`: Host without port, lower-cased, or the server name.
    pub host: &'a str,
    /// `$request_port`: the port of the host that chose the server (the request line's
    /// absolute URI, else `Host` or `:authority`); 0 when it has none.
    pub request_port: u16,
    /// The first `server_name` of the chosen server.
    pub server_name: &'a str,
    /// `$document_root`, once known.
    pub document_root: Option<&'a str>,
    /// `$request_filename`, once known.
    pub request_filename: Option<&'a str>,
    /// The request came in TLS early data (0-RTT), before the handshake completed.
    pub early_data: bool,
    /// Response status (0 before there is one).
    pub status: u16,
    /// Response headers, for `$sent_http_*`.
    pub response_headers: Option<&'a HeaderMap>,
    /// Body bytes sent.
    pub body_bytes_sent: u64,
    /// `$limit_rate` (what `set $limit_rate` made it; 0 otherwise).
    pub limit_rate: u64,
    /// Response head bytes counted into `$bytes_sent` (known for an upgraded connection's
    /// 101; 0 otherwise, where `$bytes_sent` is the body's bytes).
    pub head_bytes: u64,
    /// When the request started.
    pub start: Instant,
    /// From the start until the response head was ready (`$ttfb`; known once it is).
    pub ttfb: Option<std::time::Duration>,
    /// The process's connection counts (`$connections_*`, as `stub_status`).
    pub stats: Option<&'a crate::http::site::Stats>,
    /// Requests served on this connection so far, this one included.
    pub connection_requests: u64,
    /// `$pipe`: the request was pipelined (HTTP/1.x: its head was read before the previous
    /// request's response ended).
    pub pipelined: bool,
    /// Regex captures of the matched location, `rewrite` or `if` (`$1`..).
    pub captures: &'a [Option<String>],
    /// `set`, `map` and `split_clients` variables (None when the configuration has none).
    pub user: Option<&'a crate::http::rewrite::uservars::UserVars>,
    /// What auth_basic, real IP and the limits decided (None for most requests).
    pub guard: Option<&'a GuardVars>,
    /// The servers a proxied request tried (`$upstream_addr`, ...).
    pub upstream: Option<&'a crate::http::proxy::UpstreamVars>,
    /// The location's `fastcgi_split_path_info` and `fastcgi_index`.
    pub fastcgi: Option<&'a crate::conf::model::FastcgiVars>,
    /// The body a proxied request read or streamed (`$request_body`, `$request_body_file`).
    pub request_body: Option<&'a crate::http::proxy::RequestBody>,
}

/// `1.234`: seconds with milliseconds, as `$request_time`.
fn seconds_ms(t: std::time::Duration) -> String {
    format!("{}.{:03}", t.as_secs(), t.subsec_millis())
}

/// `$request_id`: 32 hex digits naming one request — a keyed hash (two SipHash keys drawn
/// at process start) of the connection's serial number and the request's number on it, so
/// every use within a request (a header to the upstream, the log line) agrees without the
/// request storing it, and ids are unique within the process and unpredictable outside it.
/// nginx draws 16 random bytes per request; the format is the same.
fn request_id(connection: u64, request: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    static KEYS: std::sync::OnceLock<[std::collections::hash_map::RandomState; 2]> =
        std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    let half = |k: &std::collections::hash_map::RandomState| {
        let mut h = k.build_hasher();
        h.write_u64(connection);
        h.write_u64(request);
        h.finish()
    };
    format!("{:016x}{:016x}", half(&keys[0]), half(&keys[1]))
}

/// The port a request's host names (`host:8080`, `[::1]:8080`), as nginx's
/// `ngx_http_validate_host` reads it for `$request_port`: 0 when there is none, it is empty,
/// 0, or not a port.
pub fn host_port(host: &str) -> u16 {
    let port = match host.strip_prefix('[') {
        Some(h) => h.split_once(']').and_then(|(_, r)| r.strip_prefix(':')),
        None => host.split_once(':').map(|(_, p)| p),
    };
    match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().unwrap_or(0),
        _ => 0,
    }
}

/// What auth_basic, real IP and the limits decided for a request, for its variables.
#[derive(Debug, Clone, Default)]
pub struct GuardVars {
    /// The real client address from `set_real_ip_from` (None: the connection's).
    pub real_peer: Option<SocketAddr>,
    /// `$remote_user` after `auth_basic`.
    pub remote_user: Option<String>,
    /// `$limit_req_status`: `PASSED`, `DELAYED`, `REJECTED`, `DELAYED_DRY_RUN`, `REJECTED_DRY_RUN`.
    pub limit_req_status: Option<&'static str>,
    /// `$limit_conn_status`: `PASSED`, `REJECTED`, `REJECTED_DRY_RUN`.
    pub limit_conn_status: Option<&'static str>,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<Cow<'a, str>> {
    // `$http_user_agent` names the header `user-agent`.
    let name = name.replace('_', "-");
    let mut vals = h.get_all(name.as_str()).iter();
    let first = vals.next()?;
    let mut s = String::from_utf8_lossy(first.as_bytes()).into_owned();
    for v in vals {
        // nginx joins repeated headers: cookies with "; ", others with ", ".
        s.push_str(if name == "cookie" { "; " } else { ", " });
        s.push_str(&String::from_utf8_lossy(v.as_bytes()));
    }
    Some(Cow::Owned(s))
}

fn arg<'a>(args: Option<&'a str>, name: &str) -> Option<Cow<'a, str>> {
    args?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k.eq_ignore_ascii_case(name).then_some(Cow::Borrowed(v))
    })
}

fn cookie<'a>(h: &'a HeaderMap, name: &str) -> Option<Cow<'a, str>> {
    h.get_all(http::header::COOKIE).iter().find_map(|v| {
        let s = v.to_str().ok()?;
        s.split(';').find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then(|| Cow::Owned(v.to_string()))
        })
    })
}

/// The client's leaf certificate, when it sent one.
fn client_leaf(tls: Option<&TlsFacts>) -> Option<&rustls::pki_types::CertificateDer<'static>> {
    tls?.client.as_ref()?.chain.first()
}

impl RequestVars<'_> {
    /// The client's address: the real one when `set_real_ip_from` trusted the peer.
    fn peer(&self) -> Option<SocketAddr> {
        self.guard.and_then(|g| g.real_peer).or(self.conn.peer)
    }

    /// `$remote_addr`: the real address when `set_real_ip_from` trusted the peer, else the
    /// peer's (`unix:` on a UNIX-domain socket).
    fn remote_addr(&self) -> Option<String> {
        match self.guard.and_then(|g| g.real_peer) {
            Some(real) => Some(real.ip().to_string()),
            None => self.conn.remote_addr(),
        }
    }

    /// A port variable: the port of `a`, empty on a UNIX-domain socket (no port, as nginx).
    fn port_of(&self, a: Option<SocketAddr>) -> Option<Cow<'_, str>> {
        match a {
            Some(a) => Some(Cow::Owned(a.port().to_string())),
            None => self.conn.unix.as_ref().map(|_| Cow::Borrowed("")),
        }
    }

    /// When the upstream variables are read: now once the response head is out (the log
    /// line); before it (`add_header`), a try still being read has no response time yet
    /// (`-`, as nginx).
    fn read_at(&self) -> Option<Instant> {
        self.ttfb.map(|_| Instant::now())
    }
}

impl Vars for RequestVars<'_> {
    fn get_bytes(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        if name == "binary_remote_addr" {
            // nginx: the address in network order, 4 bytes (IPv4) or 16 (IPv6).
            return self.peer().map(|a| {
                Cow::Owned(match a.ip() {
                    std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
                    std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
                })
            });
        }
        self.get(name).map(|v| match v {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        })
    }

    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        let s = |v: &str| Some(Cow::Owned(v.to_string()));
        let tls = self.conn.tls.as_ref();
        match name {
            "uri" | "document_uri" => Some(Cow::Borrowed(self.uri)),
            "request_uri" => Some(Cow::Borrowed(self.request_uri)),
            "args" | "query_string" => self.args.map(Cow::Borrowed),
            "is_args" => Some(Cow::Borrowed(if self.args.is_some() { "?" } else { "" })),
            "request_method" => Some(Cow::Borrowed(self.method)),
            // An HTTP/0.9 line (hq over QUIC) has no version: nginx's `$request` is the line.
            "request" => Some(Cow::Owned(match self.protocol {
                "" => format!("{} {}", self.method, self.request_uri),
                p => format!("{} {} {p}", self.method, self.request_uri),
            })),
            "server_protocol" => Some(Cow::Borrowed(self.protocol)),
            "host" => Some(Cow::Borrowed(self.host)),
            "request_port" => Some(match self.request_port {
                0 => Cow::Borrowed(""),
                p => Cow::Owned(p.to_string()),
            }),
            "is_request_port" => Some(Cow::Borrowed(if self.request_port == 0 { "" } else { ":" })),
            "hostname" => s(&hostname()),
            "server_name" => Some(Cow::Borrowed(self.server_name)),
            "scheme" => Some(Cow::Borrowed(if tls.is_some() { "https" } else { "http" })),
            "https" => Some(Cow::Borrowed(if tls.is_some() { "on" } else { "" })),
            // As text where a value is text (a `limit_req_zone` key: one per address);
            // the 4 or 16 bytes in a log line (`get_bytes`).
            "remote_addr" | "binary_remote_addr" => self.remote_addr().map(Cow::Owned),
            "remote_port" => self.port_of(self.peer()),
            "realip_remote_addr" => self.conn.remote_addr().map(Cow::Owned),
            "realip_remote_port" => self.port_of(self.conn.peer),
            // auth_basic's user when it ran; else, as nginx, the user the `Authorization`
            // field names (Basic), checked or not.
            "remote_user" => match self.guard.and_then(|g| g.remote_user.as_deref()) {
                Some(u) => Some(Cow::Borrowed(u)),
                None => {
                    let (user, _) = crate::http::auth_basic::credentials(
                        self.headers.get(http::header::AUTHORIZATION)?.as_bytes(),
                    )?;
                    Some(Cow::Owned(String::from_utf8_lossy(&user).into_owned()))
                }
            },
            "limit_req_status" => self.guard?.limit_req_status.map(Cow::Borrowed),
            "limit_conn_status" => self.guard?.limit_conn_status.map(Cow::Borrowed),
            "proxy_protocol_addr" => self
                .conn
                .proxy_protocol
                .map(|p| Cow::Owned(p.source.ip().to_string())),
            "proxy_protocol_port" => self
                .conn
                .proxy_protocol
                .map(|p| Cow::Owned(p.source.port().to_string())),
            "proxy_protocol_server_addr" => self
                .conn
                .proxy_protocol
                .map(|p| Cow::Owned(p.destination.ip().to_string())),
            "proxy_protocol_server_port" => self
                .conn
                .proxy_protocol
                .map(|p| Cow::Owned(p.destination.port().to_string())),
            "server_addr" => self.conn.server_addr().map(Cow::Owned),
            "server_port" => self.port_of(self.conn.local),
            "status" => Some(Cow::Owned(format!("{:03}", self.status))),
            // nginx: the proxy module's, set once `proxy_pass` ran (empty before).
            "proxy_host" => self.upstream?.proxy_host.as_deref().map(Cow::Borrowed),
            "proxy_port" => self.upstream?.proxy_host.as_deref().map(|h| {
                Cow::Borrowed(
                    h.rsplit_once(':')
                        .filter(|(h, _)| !h.ends_with(':'))
                        .map(|(_, p)| p)
                        .unwrap_or(""),
                )
            }),
            "proxy_add_x_forwarded_for" => Some(Cow::Owned(
                crate::http::proxy::headers::add_x_forwarded_for(
                    self.headers,
                    self.remote_addr().as_deref(),
                ),
            )),
            "upstream_addr"
            | "upstream_status"
            | "upstream_connect_time"
            | "upstream_header_time"
            | "upstream_response_time"
            | "upstream_response_length"
            | "upstream_bytes_received"
            | "upstream_bytes_sent"
            | "upstream_cache_status" => self.upstream?.get(name, self.read_at()).map(Cow::Owned),
            _ if name.starts_with("upstream_http_")
                || name.starts_with("upstream_cookie_")
                || name.starts_with("upstream_trailer_") =>
            {
                self.upstream?.get(name, self.read_at()).map(Cow::Owned)
            }
            "body_bytes_sent" => Some(Cow::Owned(self.body_bytes_sent.to_string())),
            "bytes_sent" => Some(Cow::Owned(
                (self.head_bytes + self.body_bytes_sent).to_string(),
            )),
            "request_length" => {
                let body = self
                    .headers
                    .get(http::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                Some(Cow::Owned(
                    self.head_length.saturating_add(body).to_string(),
                ))
            }
            "request_body" => {
                self.request_body?
                    .body()
                    .map(|b| match String::from_utf8(b.to_vec()) {
                        Ok(s) => Cow::Owned(s),
                        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
                    })
            }
            "request_body_file" => self
                .request_body?
                .file()
                .map(|p| Cow::Owned(p.display().to_string())),
            "request_time" => Some(Cow::Owned(seconds_ms(self.start.elapsed()))),
            "connection_time" => self
                .conn
                .accepted
                .map(|t| Cow::Owned(seconds_ms(t.elapsed()))),
            "ttfb" => self.ttfb.map(|t| Cow::Owned(seconds_ms(t))),
            "connections_active"
            | "connections_reading"
            | "connections_writing"
            | "connections_waiting" => {
                let s = self.stats?;
                let (active, reading, writing) = s.connections();
                let v = match name {
                    "connections_active" => active,
                    "connections_reading" => reading,
                    "connections_writing" => writing,
                    _ => active.saturating_sub(reading + writing),
                };
                Some(Cow::Owned(v.to_string()))
            }
            "request_id" => Some(Cow::Owned(request_id(
                self.conn.id,
                self.connection_requests,
            ))),
            "tcpinfo_rtt" | "tcpinfo_rttvar" | "tcpinfo_snd_cwnd" | "tcpinfo_rcv_space" => {
                let info = crate::net::tcp_info(self.conn.socket?).ok()?;
                Some(Cow::Owned(
                    match name {
                        "tcpinfo_rtt" => info.rtt_us,
                        "tcpinfo_rttvar" => info.rttvar_us,
                        "tcpinfo_snd_cwnd" => info.snd_cwnd,
                        _ => info.rcv_space,
                    }
                    .to_string(),
                ))
            }
            "time_local" => Some(Cow::Owned(crate::log::now().time_local.clone())),
            "time_iso8601" => Some(Cow::Owned(crate::log::now().iso8601.clone())),
            // nginx's SSI module's: the time in its default `timefmt` (the SSI filter's
            // own `config timefmt` applies inside a page).
            "date_gmt" | "date_local" => {
                let now = i64::try_from(crate::log::now().secs).unwrap_or(0);
                Some(Cow::Owned(crate::http::ssi::format_time(
                    now,
                    crate::http::ssi::TIMEFMT,
                    name == "date_gmt",
                )))
            }
            "msec" => {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                Some(Cow::Owned(format!(
                    "{}.{:03}",
                    d.as_secs(),
                    d.subsec_millis()
                )))
            }
            "pid" => Some(Cow::Owned(std::process::id().to_string())),
            "limit_rate" => Some(Cow::Owned(self.limit_rate.to_string())),
            "connection" => Some(Cow::Owned(self.conn.id.to_string())),
            "connection_requests" => Some(Cow::Owned(self.connection_requests.to_string())),
            "pipe" => Some(Cow::Borrowed(if self.pipelined { "p" } else { "." })),
            "content_type" => header(self.headers, "content_type"),
            "content_length" => header(self.headers, "content_length"),
            "document_root" | "realpath_root" => self.document_root.map(Cow::Borrowed),
            "fastcgi_script_name" => {
                Some(crate::conf::model::FastcgiVars::split(self.fastcgi, self.uri).0)
            }
            "fastcgi_path_info" => Some(Cow::Borrowed(
                crate::conf::model::FastcgiVars::split(self.fastcgi, self.uri).1,
            )),
            "request_filename" => self.request_filename.map(Cow::Borrowed),
            "ssl_protocol" => tls.map(|t| Cow::Borrowed(t.protocol)),
            "ssl_cipher" => tls.map(|t| Cow::Borrowed(t.cipher)),
            "ssl_curve" => tls.map(|t| Cow::Borrowed(t.group)),
            "ssl_curves" => tls.map(|t| Cow::Owned(crate::tls::curves_list(&t.curves))),
            "ssl_ciphers" => tls.map(|t| Cow::Owned(crate::tls::ciphers_list(&t.ciphers))),
            "ssl_server_name" => tls.and_then(|t| t.server_name.as_deref().map(Cow::Borrowed)),
            "ssl_session_reused" => tls.map(|t| Cow::Borrowed(if t.resumed { "r" } else { "." })),
            "ssl_session_id" => tls.map(|t| {
                Cow::Owned(
                    t.session_id
                        .as_ref()
                        .map(crate::tls::session_id::hex)
                        .unwrap_or_default(),
                )
            }),
            "ssl_alpn_protocol" => tls.map(|t| Cow::Borrowed(t.alpn.as_ref())),
            "ssl_early_data" => Some(Cow::Borrowed(if self.early_data { "1" } else { "" })),
            "ssl_client_verify" => tls.map(|t| {
                Cow::Owned(t.client.as_ref().map_or_else(
                    || crate::tls::peer::ClientVerify::None.as_var(),
                    |c| c.verify.as_var(),
                ))
            }),
            "ssl_client_s_dn" => client_leaf(tls)
                .and_then(crate::tls::peer::subject_dn)
                .map(Cow::Owned),
            "ssl_client_i_dn" => client_leaf(tls)
                .and_then(crate::tls::peer::issuer_dn)
                .map(Cow::Owned),
            "ssl_client_s_dn_legacy" => client_leaf(tls)
                .and_then(crate::tls::peer::subject_dn_legacy)
                .map(Cow::Owned),
            "ssl_client_i_dn_legacy" => client_leaf(tls)
                .and_then(crate::tls::peer::issuer_dn_legacy)
                .map(Cow::Owned),
            "ssl_client_v_start" => client_leaf(tls)
                .and_then(|c| crate::tls::peer::validity(c, false))
                .map(Cow::Owned),
            "ssl_client_v_end" => client_leaf(tls)
                .and_then(|c| crate::tls::peer::validity(c, true))
                .map(Cow::Owned),
            "ssl_client_v_remain" => client_leaf(tls)
                .and_then(|c| {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                    crate::tls::peer::days_remaining(c, now)
                })
                .map(Cow::Owned),
            "ssl_client_serial" => client_leaf(tls)
                .and_then(crate::tls::peer::serial)
                .map(Cow::Owned),
            "ssl_client_fingerprint" => {
                client_leaf(tls).map(|c| Cow::Owned(crate::tls::peer::fingerprint(c)))
            }
            "ssl_client_raw_cert" => client_leaf(tls).map(|c| Cow::Owned(crate::tls::peer::pem(c))),
            "ssl_client_escaped_cert" => {
                client_leaf(tls).map(|c| Cow::Owned(crate::tls::peer::escaped_pem(c)))
            }
            "ssl_client_cert" => {
                client_leaf(tls).map(|c| Cow::Owned(crate::tls::peer::tabbed_pem(c)))
            }
            "http2" => match (self.protocol, tls.is_some()) {
                ("HTTP/2.0", true) => Some(Cow::Borrowed("h2")),
                ("HTTP/2.0", false) => Some(Cow::Borrowed("h2c")),
                _ => Some(Cow::Borrowed("")),
            },
            // HTTP/0.9 arrives only as hq over QUIC (`http3_hq`).
            "http3" => Some(Cow::Borrowed(match self.protocol {
                "HTTP/3.0" => "h3",
                "" => "hq",
                _ => "",
            })),
            "gzip_ratio" => None,
            "nginx_version" | "firstbyte_version" => Some(Cow::Borrowed(env!("CARGO_PKG_VERSION"))),
            "record_policy" => Some(Cow::Borrowed(self.conn.record_policy)),
            _ => {
                if let Some(v) = self.user.and_then(|u| u.assigned(name)) {
                    Some(Cow::Borrowed(v))
                } else if let Some(h) = name.strip_prefix("http_") {
                    header(self.headers, h)
                } else if let Some(h) = name.strip_prefix("sent_http_") {
                    self.response_headers.and_then(|rh| header(rh, h))
                } else if let Some(a) = name.strip_prefix("arg_") {
                    arg(self.args, a)
                } else if let Some(c) = name.strip_prefix("cookie_") {
                    cookie(self.headers, c)
                } else if let Some(t) = name.strip_prefix("proxy_protocol_tlv_") {
                    let tlvs = self.conn.proxy_protocol_tlvs.as_deref()?;
                    let v = crate::net::proxy_protocol::TlvName::parse(t)?.lookup(tlvs)?;
                    Some(Cow::Owned(String::from_utf8_lossy(&v).into_owned()))
                } else if let Ok(n) = name.parse::<usize>() {
                    self.captures
                        .get(n)
                        .and_then(|c| c.as_deref().map(Cow::Borrowed))
                } else {
                    self.user.and_then(|u| u.get(name, self))
                }
            }
        }
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::vars::ComplexValue;

    #[test]
    fn common_variables() {
        let mut h = HeaderMap::new();
        h.insert("user-agent", "curl/8".parse().unwrap());
        h.append("cookie", "a=1; b=2".parse().unwrap());
        let conn = ConnFacts {
            peer: Some("192.0.2.7:5555".parse().unwrap()),
            local: Some("127.0.0.1:8443".parse().unwrap()),
            id: 9,
            proxy_protocol: None,
            proxy_protocol_tlvs: None,
            tls: Some(TlsFacts {
                protocol: "TLSv1.3",
                cipher: "TLS_AES_128_GCM_SHA256",
                ..Default::default()
            }),
            record_policy: "static",
            socket: None,
            accepted: None,
            unix: None,
        };
        let v = RequestVars {
            conn: &conn,
            method: "GET",
            request_uri: "/a%20b?x=1&Id=7",
            uri: "/a b",
            args: Some("x=1&Id=7"),
            protocol: "HTTP/1.1",
            headers: &h,
            head_length: 0,
            host: "example.com",
            request_port: 0,
            server_name: "example.com",
            document_root: None,
            request_filename: None,
            early_data: false,
            status: 200,
            response_headers: None,
            body_bytes_sent: 123,
            limit_rate: 0,
            head_bytes: 0,
            start: Instant::now(),
            ttfb: None,
            stats: None,
            connection_requests: 1,
            pipelined: false,
            captures: &[],
            user: None,
            guard: None,
            upstream: None,
            fastcgi: None,
            request_body: None,
        };
        let cv = ComplexValue::parse(
            "$scheme://$host$request_uri $remote_addr $http_user_agent $arg_id $cookie_b $status $ssl_protocol $request",
        )
        .unwrap();
        assert_eq!(
            cv.eval(&v),
            "https://example.com/a%20b?x=1&Id=7 192.0.2.7 curl/8 7 2 200 TLSv1.3 GET /a%20b?x=1&Id=7 HTTP/1.1"
        );
        assert!(v.get("http_referer").is_none());
    }
}
