//! The built-in site: what firstbyte serves with no configuration file, and the
//! `connection_info` page it is made of — the visitor's own connection, as the server sees it.

use http::header::{self, HeaderValue};
use http::{HeaderMap, Response};
use serde::Serialize;

use super::body::Body;
use super::conn::Conn;

/// The built-in site's configuration: `{cert}` and `{key}` are replaced by the certificate
/// and key made at start, as quoted `data:` values (they are never written to a file). Bound
/// to loopback only.
pub const BUILTIN_CONF: &str = r#"# firstbyte's built-in site (no configuration file was found)
worker_processes 1;
pid off;
error_log stderr notice;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:8443 ssl default_server;
        listen [::1]:8443 ssl default_server;
        listen 127.0.0.1:8443 quic default_server;
        listen [::1]:8443 quic default_server;
        http2 on;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_session_cache builtin:1000;
        location / {
            connection_info;
        }
    }
}
"#;

/// What a QUIC connection's transport knows now (HTTP/3 only): read when the page is asked for.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct QuicInfo {
    /// The QUIC version (1: RFC 9000).
    pub version: u32,
    /// Smoothed RTT, µs.
    pub rtt_us: u64,
    /// The smallest RTT seen, µs.
    pub min_rtt_us: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// The largest UDP payload the path carries now (path MTU discovery), bytes.
    pub mtu: u16,
    /// Packets sent on the connection.
    pub sent_packets: u64,
    /// Packets declared lost (and sent again).
    pub lost_packets: u64,
    /// Congestion events (the window was cut).
    pub congestion_events: u64,
    /// UDP datagrams and bytes sent and received.
    pub udp_tx_datagrams: u64,
    /// Bytes in UDP datagrams sent.
    pub udp_tx_bytes: u64,
    /// UDP datagrams received.
    pub udp_rx_datagrams: u64,
    /// Bytes in UDP datagrams received.
    pub udp_rx_bytes: u64,
    /// Whether the client sent requests in 0-RTT (early data) on this connection.
    pub zero_rtt: bool,
    /// The congestion controller: `cubic`, or `bbr` with `tcp_congestion bbr`.
    pub congestion: &'static str,
}

/// Reads a QUIC connection's transport state (the runtime implements it on its connection).
pub trait QuicProbe: Send + Sync {
    /// The facts now.
    fn info(&self) -> QuicInfo;
}

/// What the page reports.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// `TLSv1.3`, or empty on plain HTTP.
    pub tls_version: String,
    /// OpenSSL-style cipher suite name.
    pub cipher: String,
    /// Key exchange group (`x25519`, `X25519MLKEM768`, ...).
    pub group: String,
    /// `h2` or `http/1.1` (empty without ALPN).
    pub alpn: String,
    /// Whether the TLS session was resumed.
    pub resumed: bool,
    /// Over TCP: whether the handshake accepted TLS 1.3 early data (0-RTT; over HTTP/3 see
    /// `quic.zero_rtt`).
    pub early_data: bool,
    /// Smoothed RTT, µs: from `TCP_INFO`, or QUIC's estimate over HTTP/3.
    pub rtt_us: u64,
    /// Congestion window from `TCP_INFO`, segments (0 over HTTP/3: see `quic.cwnd_bytes`).
    pub cwnd: u32,
    /// The TLS record-size policy of this connection.
    pub record_policy: String,
    /// Whether the kernel encrypts what this connection sends (kernel TLS).
    pub ktls_tx: bool,
    /// Whether the kernel decrypts what this connection receives (kernel TLS).
    pub ktls_rx: bool,
    /// Whether the kernel sends files without copying their pages (`TLS_TX_ZEROCOPY_RO`).
    pub ktls_tx_zerocopy: bool,
    /// Whether `TCP_NODELAY` is on for this socket (read back from the kernel).
    pub tcp_nodelay: bool,
    /// `TCP_NOTSENT_LOWAT` of this socket in bytes, read back from the kernel (0: unset).
    pub tcp_notsent_lowat: u32,
    /// The socket's congestion control (`TCP_CONGESTION`, read back), e.g. `bbr`.
    pub tcp_congestion: String,
    /// The client's address.
    pub client: String,
    /// `HTTP/3.0`, `HTTP/2.0` or `HTTP/1.1`.
    pub protocol: String,
    /// The QUIC transport's facts, over HTTP/3 (`null` over TCP).
    pub quic: Option<QuicInfo>,
}

/// Gathers the facts of `conn` now.
pub fn gather(conn: &Conn, protocol: &str) -> ConnectionInfo {
    let tls = conn.facts().tls.as_ref();
    let quic = conn.quic().map(|q| q.info());
    let ti = if quic.is_some() {
        crate::net::TcpInfo::default()
    } else {
        crate::net::tcp_info(conn.fd()).unwrap_or_default()
    };
    ConnectionInfo {
        tls_version: tls.map(|t| t.protocol.to_string()).unwrap_or_default(),
        cipher: tls.map(|t| t.cipher.to_string()).unwrap_or_default(),
        group: tls.map(|t| t.group.to_string()).unwrap_or_default(),
        alpn: tls.map(|t| t.alpn.to_string()).unwrap_or_default(),
        resumed: tls.is_some_and(|t| t.resumed),
        early_data: tls.is_some_and(|t| t.early.is_some()),
        rtt_us: quic.as_ref().map_or(ti.rtt_us.into(), |q| q.rtt_us),
        cwnd: ti.snd_cwnd,
        record_policy: conn.facts().record_policy.to_string(),
        ktls_tx: tls.is_some_and(|t| t.ktls.0),
        ktls_rx: tls.is_some_and(|t| t.ktls.1),
        ktls_tx_zerocopy: tls.is_some_and(|t| t.ktls_zerocopy),
        tcp_nodelay: crate::net::nodelay(conn.fd()).unwrap_or(false),
        tcp_notsent_lowat: crate::net::notsent_lowat(conn.fd()).unwrap_or(0),
        tcp_congestion: crate::net::congestion(conn.fd()).unwrap_or_default(),
        client: conn.client_ip(),
        protocol: protocol.to_string(),
        quic,
    }
}

/// Whether the client asked for JSON (`Accept: application/json` or `?format=json`).
pub fn wants_json(headers: &HeaderMap, args: Option<&str>) -> bool {
    let by_arg = args.is_some_and(|a| a.split('&').any(|kv| kv == "format=json"));
    let by_accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|m| m.split(';').next().map(str::trim) == Some("application/json"))
        });
    by_arg || by_accept
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn row(k: &str, v: &str) -> String {
    format!("<tr><th>{}</th><td>{}</td></tr>\n", esc(k), esc(v))
}

/// The rows of an HTTP/3 connection's transport, in place of TCP's.
fn quic_rows(q: &QuicInfo) -> String {
    let mut rows = String::new();
    let version = match q.version {
        1 => "1 (RFC 9000)".to_string(),
        v => format!("{v:#010x}"),
    };
    rows += &row("QUIC version", &version);
    rows += &row(
        "RTT (QUIC)",
        &format!("{} µs (min {} µs)", q.rtt_us, q.min_rtt_us),
    );
    rows += &row(
        "Congestion window",
        &format!("{} bytes ({})", q.cwnd_bytes, q.congestion),
    );
    rows += &row("Path MTU (UDP payload)", &format!("{} bytes", q.mtu));
    rows += &row(
        "Packets sent / lost",
        &format!("{} / {}", q.sent_packets, q.lost_packets),
    );
    rows += &row("Congestion events", &q.congestion_events.to_string());
    rows += &row(
        "UDP datagrams sent / received",
        &format!(
            "{} ({} bytes) / {} ({} bytes)",
            q.udp_tx_datagrams, q.udp_tx_bytes, q.udp_rx_datagrams, q.udp_rx_bytes
        ),
    );
    rows += &row("0-RTT", if q.zero_rtt { "used" } else { "not used" });
    rows
}

/// Renders the page as HTML.
pub fn html(i: &ConnectionInfo) -> String {
    let mut rows = String::new();
    rows += &row("TLS version", &i.tls_version);
    // quinn reports neither the cipher suite, the group nor resumption of a QUIC connection.
    if i.quic.is_none() {
        rows += &row("Cipher suite", &i.cipher);
        rows += &row("Key exchange group", &i.group);
    }
    rows += &row("ALPN", &i.alpn);
    if i.quic.is_none() {
        rows += &row("Resumed", if i.resumed { "yes" } else { "no" });
        rows += &row("0-RTT", if i.early_data { "used" } else { "not used" });
    }
    if let Some(q) = &i.quic {
        rows += &quic_rows(q);
    } else {
        rows += &row("RTT (TCP_INFO)", &format!("{} µs", i.rtt_us));
        rows += &row("Congestion window", &format!("{} segments", i.cwnd));
        rows += &row("Record policy", &i.record_policy);
        let on = |b: bool| if b { "kernel" } else { "user space" };
        rows += &row(
            "TLS records (kernel TLS)",
            &format!("send: {}, receive: {}", on(i.ktls_tx), on(i.ktls_rx)),
        );
        if i.ktls_tx {
            rows += &row(
                "sendfile (kernel TLS)",
                if i.ktls_tx_zerocopy {
                    "zerocopy (TLS_TX_ZEROCOPY_RO)"
                } else {
                    "copies"
                },
            );
        }
        rows += &row("TCP_NODELAY", if i.tcp_nodelay { "on" } else { "off" });
        rows += &row("TCP_NOTSENT_LOWAT", &i.tcp_notsent_lowat.to_string());
        rows += &row("TCP_CONGESTION", &i.tcp_congestion);
    }
    rows += &row("HTTP", &i.protocol);
    rows += &row("Your address", &i.client);
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>firstbyte</title>\
<style>body{{font-family:system-ui,sans-serif;margin:3em}}th{{text-align:left;padding-right:2em}}</style></head>\n\
<body><h1>firstbyte</h1><p>Your connection, as this server sees it:</p>\n<table>\n{rows}</table>\n\
<p>JSON: <a href=\"/?format=json\">/?format=json</a></p></body></html>\n"
    )
}

/// The `connection_info` response.
pub fn connection_info(
    conn: &Conn,
    headers: &HeaderMap,
    args: Option<&str>,
    protocol: &str,
) -> Response<Body> {
    let info = gather(conn, protocol);
    let (body, ct) = if wants_json(headers, args) {
        let mut s = serde_json::to_string_pretty(&info).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        (s, "application/json")
    } else {
        (html(&info), "text/html; charset=utf-8")
    };
    let mut r = Response::new(Body::full(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in configuration itself (not a copy) loads, and its QUIC listeners sit
    /// beside the TCP ones (each a default server of its own transport).
    #[test]
    fn the_builtin_configuration_loads() {
        let text = BUILTIN_CONF
            .replace("{cert}", "/run/fb/cert.pem")
            .replace("{key}", "/run/fb/key.pem");
        let dir = std::path::Path::new("/");
        let c = crate::conf::load_str(&text, &dir.join("builtin.conf"), dir).expect("loads");
        let s = &c.http.as_ref().expect("http").servers[0];
        let quic: Vec<String> = s
            .listen
            .iter()
            .filter(|l| l.quic)
            .map(|l| l.addr.to_string())
            .collect();
        assert_eq!(quic, ["127.0.0.1:8443", "[::1]:8443"]);
        assert!(s.listen.iter().all(|l| l.default_server));
        assert_eq!(
            s.alt_svc.as_ref().map(|v| v.to_str().unwrap()),
            Some("h3=\":8443\"; ma=86400")
        );
    }

    #[test]
    fn json_is_chosen_by_accept_or_arg() {
        let mut h = HeaderMap::new();
        assert!(!wants_json(&h, None));
        assert!(wants_json(&h, Some("a=1&format=json")));
        h.insert(
            header::ACCEPT,
            "text/html, application/json;q=0.9".parse().unwrap(),
        );
        assert!(wants_json(&h, None));
    }

    #[test]
    fn html_escapes_and_lists_fields() {
        let i = ConnectionInfo {
            tls_version: "TLSv1.3".into(),
            cipher: "<x>".into(),
            group: "x25519".into(),
            alpn: "h2".into(),
            resumed: false,
            early_data: false,
            rtt_us: 42,
            cwnd: 10,
            record_policy: "static".into(),
            ktls_tx: true,
            ktls_rx: false,
            ktls_tx_zerocopy: true,
            tcp_nodelay: true,
            tcp_notsent_lowat: 16384,
            tcp_congestion: "bbr".into(),
            client: "127.0.0.1".into(),
            protocol: String::new(),
            quic: None,
        };
        let h = html(&i);
        assert!(h.contains("TLSv1.3") && h.contains("&lt;x&gt;") && h.contains("42 µs"));
        assert!(h.contains("send: kernel, receive: user space"), "{h}");
        assert!(h.contains("zerocopy (TLS_TX_ZEROCOPY_RO)"), "{h}");
        let j: serde_json::Value = serde_json::to_value(&i).unwrap();
        for k in [
            "tls_version",
            "cipher",
            "group",
            "alpn",
            "resumed",
            "rtt_us",
            "cwnd",
            "record_policy",
            "ktls_tx",
            "ktls_rx",
            "ktls_tx_zerocopy",
            "tcp_notsent_lowat",
            "tcp_congestion",
        ] {
            assert!(j.get(k).is_some(), "{k}");
        }
    }

    /// Over HTTP/3 the page shows the QUIC transport in place of TCP's socket options, and
    /// the JSON carries it under `quic`.
    #[test]
    fn http3_connections_show_the_quic_transport() {
        let i = ConnectionInfo {
            tls_version: "TLSv1.3".into(),
            cipher: String::new(),
            group: String::new(),
            alpn: "h3".into(),
            resumed: false,
            early_data: false,
            rtt_us: 1234,
            cwnd: 0,
            record_policy: "quic".into(),
            ktls_tx: false,
            ktls_rx: false,
            ktls_tx_zerocopy: false,
            tcp_nodelay: false,
            tcp_notsent_lowat: 0,
            tcp_congestion: String::new(),
            client: "127.0.0.1".into(),
            protocol: "HTTP/3.0".into(),
            quic: Some(QuicInfo {
                version: 1,
                rtt_us: 1234,
                min_rtt_us: 1000,
                cwnd_bytes: 14720,
                mtu: 1452,
                sent_packets: 9,
                lost_packets: 2,
                zero_rtt: true,
                congestion: "bbr",
                ..QuicInfo::default()
            }),
        };
        let h = html(&i);
        for want in [
            "<th>QUIC version</th><td>1 (RFC 9000)</td>",
            "<th>RTT (QUIC)</th><td>1234 µs (min 1000 µs)</td>",
            "<th>Congestion window</th><td>14720 bytes (bbr)</td>",
            "<th>Packets sent / lost</th><td>9 / 2</td>",
            "<th>0-RTT</th><td>used</td>",
            "<th>ALPN</th><td>h3</td>",
            "<th>HTTP</th><td>HTTP/3.0</td>",
        ] {
            assert!(h.contains(want), "{want} in {h}");
        }
        assert!(
            !h.contains("TCP_NODELAY") && !h.contains("Cipher suite"),
            "{h}"
        );
        let j: serde_json::Value = serde_json::to_value(&i).unwrap();
        assert_eq!(j["quic"]["version"], 1);
        assert_eq!(j["quic"]["cwnd_bytes"], 14720);
        assert_eq!(j["quic"]["lost_packets"], 2);
        assert_eq!(j["quic"]["zero_rtt"], true);
        assert_eq!(j["rtt_us"], 1234);
        let tcp = ConnectionInfo { quic: None, ..i };
        assert!(serde_json::to_value(&tcp).unwrap()["quic"].is_null());
        assert!(!html(&tcp).contains("QUIC version"));
    }
}
