//! Raw clients for HTTP/1.1, HTTP/2 and HTTP/3 that send exactly what a test describes: the
//! method token as given (even lower case), the target, header fields in order and as bytes
//! (including those a polite client refuses: `transfer-encoding`, `connection`, duplicates,
//! control bytes), `Host` and `:authority` independently, a body with or without a
//! `content-length` (one that disagrees with the DATA sent, too), optionally in TLS 1.3 early
//! data after a first connection got a ticket. HTTP/1.1 is bytes over rustls; HTTP/2 is a
//! small frame writer and reader over rustls (ALPN h2; HPACK literals, the response decoded
//! with loona-hpack); HTTP/3 is frames on a raw quinn stream (QPACK literal field lines,
//! RFC 9204 §4.5.6; the response's `:status` read from the static table or a literal). One
//! outcome for all three: a status, a refusal (stream reset or connection error, with its
//! code), or a close without an answer.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

mod http2;
mod http3;

use http2::{h2_request, h2_response};
use http3::{h3_connect, h3_early, h3_endpoint, h3_exchange};

/// The three front ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    H1,
    H2,
    H3,
}

impl Proto {
    pub const ALL: [Proto; 3] = [Proto::H1, Proto::H2, Proto::H3];
    pub fn name(self) -> &'static str {
        match self {
            Proto::H1 => "HTTP/1.1",
            Proto::H2 => "HTTP/2",
            Proto::H3 => "HTTP/3",
        }
    }
}

/// How `content-length` is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Length {
    /// The body's length when there is a body, none without.
    Auto,
    /// No `content-length` field, whatever the body.
    Absent,
    /// This value, whatever the body.
    Value(String),
}

/// One request as it goes on the wire.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Vec<u8>,
    /// The request target (`:path` over HTTP/2 and HTTP/3).
    pub target: Vec<u8>,
    /// `:authority` over HTTP/2 and HTTP/3; over HTTP/1.1 a `Host` line first.
    pub authority: Option<Vec<u8>>,
    pub scheme: Vec<u8>,
    /// Header fields in order, names and values as bytes (lower-case names for HTTP/2 and 3).
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// Body bytes (DATA frames over HTTP/2 and HTTP/3); None: the head ends the request.
    pub body: Option<Vec<u8>>,
    pub length: Length,
    /// Sent as TLS 1.3 early data (0-RTT) on a resumed connection.
    pub early: bool,
}

impl Req {
    /// `method target` for `localhost`, no fields, no body.
    pub fn new(method: &str, target: &str) -> Req {
        Req {
            method: method.as_bytes().to_vec(),
            target: target.as_bytes().to_vec(),
            authority: Some(b"localhost".to_vec()),
            scheme: b"https".to_vec(),
            fields: Vec::new(),
            body: None,
            length: Length::Auto,
            early: false,
        }
    }
    pub fn get(target: &str) -> Req {
        Req::new("GET", target)
    }
    /// A field (name and value as bytes) after those already there.
    pub fn field(mut self, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Req {
        self.fields
            .push((name.as_ref().to_vec(), value.as_ref().to_vec()));
        self
    }
    pub fn authority(mut self, a: Option<&str>) -> Req {
        self.authority = a.map(|a| a.as_bytes().to_vec());
        self
    }
    pub fn body(mut self, b: impl AsRef<[u8]>) -> Req {
        self.body = Some(b.as_ref().to_vec());
        self
    }
    pub fn length(mut self, l: Length) -> Req {
        self.length = l;
        self
    }
    pub fn early(mut self) -> Req {
        self.early = true;
        self
    }
    /// The `content-length` value to send, if any.
    fn content_length(&self) -> Option<Vec<u8>> {
        match (&self.length, &self.body) {
            (Length::Auto, Some(b)) => Some(b.len().to_string().into_bytes()),
            (Length::Auto, None) | (Length::Absent, _) => None,
            (Length::Value(v), _) => Some(v.as_bytes().to_vec()),
        }
    }
}

/// How the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A final response with this status.
    Status(u16),
    /// A stream reset or connection error before any final response (with its code).
    Refused(String),
    /// The connection ended without an answer.
    Closed,
    /// The client could not run the case (a harness problem, not an answer).
    Failed(String),
}

/// An outcome and the response body (when there was a response).
#[derive(Debug, Clone)]
pub struct Got {
    pub outcome: Outcome,
    pub body: Vec<u8>,
}

impl Got {
    fn new(outcome: Outcome) -> Got {
        Got {
            outcome,
            body: Vec::new(),
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// A client for one server: 127.0.0.1:`port`, TLS name `sni`, trusting the tests' CA.
pub struct Client {
    port: u16,
    sni: String,
    rt: tokio::runtime::Runtime,
    ep: quinn::Endpoint,
}

impl Client {
    pub fn new(port: u16, sni: &str) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let ep = rt.block_on(async { h3_endpoint(false) });
        Client {
            port,
            sni: sni.to_string(),
            rt,
            ep,
        }
    }

    /// Sends `req` over `proto` on a new connection (after a first one for the ticket when
    /// `req.early`) and reads the answer.
    pub fn send(&self, proto: Proto, req: &Req) -> Got {
        match proto {
            Proto::H1 | Proto::H2 => self.send_tcp(proto, req),
            Proto::H3 => {
                let fut = async {
                    if req.early {
                        h3_early(self.port, &self.sni, req).await
                    } else {
                        match h3_connect(&self.ep, self.port, &self.sni).await {
                            Ok(c) => h3_exchange(&c, req).await,
                            Err(e) => Got::new(Outcome::Failed(e)),
                        }
                    }
                };
                self.rt.block_on(async {
                    tokio::time::timeout(TIMEOUT * 2, fut)
                        .await
                        .unwrap_or_else(|_| Got::new(Outcome::Failed("timeout".into())))
                })
            }
        }
    }

    fn send_tcp(&self, proto: Proto, req: &Req) -> Got {
        let alpn: &[u8] = if proto == Proto::H1 {
            b"http/1.1"
        } else {
            b"h2"
        };
        let mut cfg = (*super::rust_client_config(&[alpn])).clone();
        cfg.enable_early_data = req.early;
        let cfg = Arc::new(cfg);
        if req.early {
            // A first connection leaves a ticket (with early data allowed) in `cfg`'s store.
            let warm = Req::get("/");
            let g = self.tcp_exchange(&cfg, proto, &warm, false);
            if !matches!(g.outcome, Outcome::Status(_)) {
                return Got::new(Outcome::Failed(format!("first connection: {g:?}")));
            }
        }
        self.tcp_exchange(&cfg, proto, req, req.early)
    }

    fn tcp_exchange(
        &self,
        cfg: &Arc<rustls::ClientConfig>,
        proto: Proto,
        req: &Req,
        early: bool,
    ) -> Got {
        let bytes = match proto {
            Proto::H1 => h1_request(req),
            _ => h2_request(req),
        };
        let mut t = match Tls::open(cfg, self.port, &self.sni, &bytes, early) {
            Ok(t) => t,
            Err(e) => return Got::new(Outcome::Failed(e)),
        };
        match proto {
            Proto::H1 => h1_response(&mut t, req.method == b"HEAD"),
            _ => h2_response(&mut t),
        }
    }
}

/// A rustls connection over a blocking socket. `quiet`: the request went as early data and
/// nothing more is written (the client's Finished stays queued, so what the server answers
/// is answered to early data).
struct Tls {
    conn: rustls::ClientConnection,
    sock: TcpStream,
    quiet: bool,
}

impl Tls {
    fn open(
        cfg: &Arc<rustls::ClientConfig>,
        port: u16,
        sni: &str,
        first: &[u8],
        early: bool,
    ) -> Result<Tls, String> {
        let name =
            rustls_pki_types::ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| e.to_string())?;
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        let mut t = Tls {
            conn,
            sock,
            quiet: early,
        };
        if early {
            let mut ed = t.conn.early_data().ok_or("no ticket allowing early data")?;
            if ed.bytes_left() < first.len() {
                return Err(format!(
                    "early data limit {} < request {}",
                    ed.bytes_left(),
                    first.len()
                ));
            }
            ed.write_all(first).map_err(|e| e.to_string())?;
            let mut wire = Vec::new();
            while t.conn.wants_write() {
                t.conn.write_tls(&mut wire).map_err(|e| e.to_string())?;
            }
            t.sock.write_all(&wire).map_err(|e| e.to_string())?;
        } else {
            while t.conn.is_handshaking() {
                t.conn
                    .complete_io(&mut t.sock)
                    .map_err(|e| format!("handshake: {e}"))?;
            }
            t.send(first).map_err(|e| e.to_string())?;
        }
        Ok(t)
    }

    fn send(&mut self, b: &[u8]) -> std::io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        self.conn.writer().write_all(b)?;
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }

    /// More plaintext into `out`: the count, 0 at the end of the connection.
    fn recv(&mut self, out: &mut Vec<u8>) -> std::io::Result<usize> {
        let mut chunk = [0u8; 16384];
        loop {
            match self.conn.reader().read(&mut chunk) {
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // A close without close_notify is an end too.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(0),
                Err(e) => return Err(e),
            }
            self.conn
                .process_new_packets()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if !self.quiet {
                while self.conn.wants_write() {
                    self.conn.write_tls(&mut self.sock)?;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1

fn h1_request(req: &Req) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&req.method);
    b.push(b' ');
    b.extend_from_slice(&req.target);
    b.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = &req.authority {
        b.extend_from_slice(b"Host: ");
        b.extend_from_slice(a);
        b.extend_from_slice(b"\r\n");
    }
    for (n, v) in &req.fields {
        b.extend_from_slice(n);
        b.extend_from_slice(b": ");
        b.extend_from_slice(v);
        b.extend_from_slice(b"\r\n");
    }
    if let Some(l) = req.content_length() {
        b.extend_from_slice(b"content-length: ");
        b.extend_from_slice(&l);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"\r\n");
    if let Some(body) = &req.body {
        b.extend_from_slice(body);
    }
    b
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Reads one final response: its status and body (de-chunked).
fn h1_response(t: &mut Tls, head_request: bool) -> Got {
    let mut buf = Vec::new();
    loop {
        // Skip 1xx heads.
        while let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status: u16 = match head.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                Some(s) => s,
                None => return Got::new(Outcome::Failed(format!("bad status line: {head}"))),
            };
            if (100..200).contains(&status) {
                buf.drain(..end + 4);
                continue;
            }
            let rest = &buf[end + 4..];
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let chunked = head
                .lines()
                .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
            let bodiless = head_request || status == 204 || status == 304;
            let done = if bodiless {
                Some(Vec::new())
            } else if chunked {
                dechunk(rest)
            } else if let Some(l) = length {
                (rest.len() >= l).then(|| rest[..l].to_vec())
            } else {
                None
            };
            if let Some(body) = done {
                return Got {
                    outcome: Outcome::Status(status),
                    body,
                };
            }
            break;
        }
        match t.recv(&mut buf) {
            Ok(0) => {
                return match find(&buf, b"\r\n\r\n") {
                    // Read to the end (a body framed by the close).
                    Some(end) => Got {
                        outcome: Outcome::Status(
                            String::from_utf8_lossy(&buf[..end])
                                .split_whitespace()
                                .nth(1)
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(0),
                        ),
                        body: buf[end + 4..].to_vec(),
                    },
                    None if buf.is_empty() => Got::new(Outcome::Closed),
                    None => Got::new(Outcome::Failed(format!(
                        "partial head: {}",
                        String::from_utf8_lossy(&buf)
                    ))),
                };
            }
            Ok(_) => {}
            Err(e) if buf.is_empty() && e.kind() != ErrorKind::WouldBlock => {
                return Got::new(Outcome::Closed)
            }
            Err(e) => return Got::new(Outcome::Failed(format!("read: {e}"))),
        }
    }
}

/// A whole chunked body's data, None while incomplete.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = find(b, b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?;
        let n = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if n == 0 {
            return find(b, b"\r\n").map(|_| out);
        }
        if b.len() < n + 2 {
            return None;
        }
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

// Shared by the HTTP/2 and HTTP/3 encoders.

/// An integer with an `n`-bit prefix (RFC 7541 §5.1, RFC 9204 §4.1.1); `first` holds the
/// bits above the prefix.
fn put_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A string literal without Huffman coding, its length with a 7-bit prefix.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// The request's fields in order: pseudo-headers, then the fields, then `content-length`.
fn field_list(req: &Req) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut f = vec![
        (b":method".to_vec(), req.method.clone()),
        (b":scheme".to_vec(), req.scheme.clone()),
    ];
    if let Some(a) = &req.authority {
        f.push((b":authority".to_vec(), a.clone()));
    }
    f.push((b":path".to_vec(), req.target.clone()));
    f.extend(req.fields.iter().cloned());
    if let Some(l) = req.content_length() {
        f.push((b"content-length".to_vec(), l));
    }
    f
}
