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
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

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

// ---------------------------------------------------------------------------------------
// HTTP/2

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;
const MAX_FRAME: usize = 16384;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

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

/// Preface, SETTINGS, HEADERS (and CONTINUATION) and DATA for stream 1.
fn h2_request(req: &Req) -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS_ENABLE_PUSH 0.
    frame(&mut out, SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]);
    let mut block = Vec::new();
    for (n, v) in field_list(req) {
        // Literal header field without indexing, new name (RFC 7541 §6.2.2).
        block.push(0);
        put_str(&mut block, &n);
        put_str(&mut block, &v);
    }
    let chunks: Vec<&[u8]> = block.chunks(MAX_FRAME).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len();
        let mut flags = if last { END_HEADERS } else { 0 };
        if i == 0 && req.body.is_none() {
            flags |= END_STREAM;
        }
        frame(
            &mut out,
            if i == 0 { HEADERS } else { CONTINUATION },
            flags,
            1,
            c,
        );
    }
    if let Some(body) = &req.body {
        if body.is_empty() {
            frame(&mut out, DATA, END_STREAM, 1, &[]);
        }
        let chunks: Vec<&[u8]> = body.chunks(MAX_FRAME).collect();
        for (i, c) in chunks.iter().enumerate() {
            let flags = if i + 1 == chunks.len() { END_STREAM } else { 0 };
            frame(&mut out, DATA, flags, 1, c);
        }
    }
    out
}

fn h2_code(code: u32) -> String {
    let name = match code {
        0 => "NO_ERROR",
        1 => "PROTOCOL_ERROR",
        2 => "INTERNAL_ERROR",
        3 => "FLOW_CONTROL_ERROR",
        5 => "STREAM_CLOSED",
        6 => "FRAME_SIZE_ERROR",
        7 => "REFUSED_STREAM",
        8 => "CANCEL",
        9 => "COMPRESSION_ERROR",
        11 => "ENHANCE_YOUR_CALM",
        _ => "?",
    };
    format!("{name} ({code:#x})")
}

/// Reads frames until stream 1 ends, is reset, or the connection ends.
fn h2_response(t: &mut Tls) -> Got {
    let mut buf = Vec::new();
    let mut dec = loona_hpack::Decoder::new();
    let mut status: Option<u16> = None;
    let mut body = Vec::new();
    let mut block: Vec<u8> = Vec::new();
    let mut block_end_stream = false;
    let got = |status: Option<u16>, body: Vec<u8>, otherwise: Outcome| match status {
        Some(s) => Got {
            outcome: Outcome::Status(s),
            body,
        },
        None => Got::new(otherwise),
    };
    loop {
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let kind = buf[3];
            let flags = buf[4];
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload: Vec<u8> = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match (kind, stream) {
                (SETTINGS, 0) if flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    frame(&mut ack, SETTINGS, ACK, 0, &[]);
                    let _ = t.send(&ack);
                }
                (PING, 0) if flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    frame(&mut ack, PING, ACK, 0, &payload);
                    let _ = t.send(&ack);
                }
                (GOAWAY, 0) => {
                    let code = payload
                        .get(4..8)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    return got(
                        status,
                        body,
                        Outcome::Refused(format!("GOAWAY {}", h2_code(code))),
                    );
                }
                (RST_STREAM, 1) => {
                    let code = payload
                        .get(..4)
                        .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                    return got(
                        status,
                        body,
                        Outcome::Refused(format!("RST_STREAM {}", h2_code(code))),
                    );
                }
                (HEADERS | CONTINUATION, 1) => {
                    let mut p: &[u8] = &payload;
                    if kind == HEADERS {
                        block.clear();
                        block_end_stream = flags & END_STREAM != 0;
                        if flags & 0x8 != 0 {
                            let pad = p.first().copied().unwrap_or(0) as usize;
                            p = p.get(1..p.len().saturating_sub(pad)).unwrap_or(&[]);
                        }
                        if flags & 0x20 != 0 {
                            p = p.get(5..).unwrap_or(&[]);
                        }
                    }
                    block.extend_from_slice(p);
                    if flags & END_HEADERS != 0 {
                        let fields = match dec.decode(&block) {
                            Ok(f) => f,
                            Err(e) => return Got::new(Outcome::Failed(format!("HPACK: {e:?}"))),
                        };
                        if status.is_none() {
                            let s = fields
                                .iter()
                                .find(|(n, _)| n == b":status")
                                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok());
                            if let Some(s) = s.filter(|s| !(100..200).contains(s)) {
                                status = Some(s);
                            }
                        }
                        if block_end_stream {
                            return got(status, body, Outcome::Closed);
                        }
                    }
                }
                (DATA, 1) => {
                    let mut p: &[u8] = &payload;
                    if flags & 0x8 != 0 {
                        let pad = p.first().copied().unwrap_or(0) as usize;
                        p = p.get(1..p.len().saturating_sub(pad)).unwrap_or(&[]);
                    }
                    body.extend_from_slice(p);
                    if flags & END_STREAM != 0 {
                        return got(status, body, Outcome::Closed);
                    }
                }
                _ => {}
            }
        }
        match t.recv(&mut buf) {
            Ok(0) => return got(status, body, Outcome::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return Got::new(Outcome::Failed("timeout".into()))
            }
            Err(_) => return got(status, body, Outcome::Closed),
        }
    }
}

// ---------------------------------------------------------------------------------------
// HTTP/3

/// A QUIC client endpoint trusting the tests' CA, ALPN h3 (TLS 1.3 early data if `early`).
fn h3_endpoint(early: bool) -> quinn::Endpoint {
    let mut tls = (*super::rust_client_config(&[b"h3"])).clone();
    tls.enable_early_data = early;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

/// A QUIC connection with its HTTP/3 control stream open (SETTINGS sent); the stream is held
/// open for the connection's life (closing it is a connection error).
struct H3Conn {
    conn: quinn::Connection,
    _control: quinn::SendStream,
}

async fn h3_control(conn: quinn::Connection) -> Result<H3Conn, String> {
    let mut control = conn.open_uni().await.map_err(|e| e.to_string())?;
    // Stream type 0x00 (control), SETTINGS (0x04) with nothing in it.
    control
        .write_all(&[0x00, 0x04, 0x00])
        .await
        .map_err(|e| e.to_string())?;
    Ok(H3Conn {
        conn,
        _control: control,
    })
}

async fn h3_connect(ep: &quinn::Endpoint, port: u16, sni: &str) -> Result<H3Conn, String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let conn = ep
        .connect(addr, sni)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| e.to_string())?;
    h3_control(conn).await
}

/// A first connection for a ticket, then `req` in 0-RTT on a second.
async fn h3_early(port: u16, sni: &str, req: &Req) -> Got {
    let ep = h3_endpoint(true);
    let first = match h3_connect(&ep, port, sni).await {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e)),
    };
    let g = h3_exchange(&first, &Req::get("/")).await;
    if !matches!(g.outcome, Outcome::Status(_)) {
        return Got::new(Outcome::Failed(format!("first connection: {g:?}")));
    }
    first.conn.close(0u32.into(), b"");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let connecting = match ep.connect(addr, sni) {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e.to_string())),
    };
    let Ok((conn, accepted)) = connecting.into_0rtt() else {
        return Got::new(Outcome::Failed("no 0-RTT ticket".into()));
    };
    let c = match h3_control(conn).await {
        Ok(c) => c,
        Err(e) => return Got::new(Outcome::Failed(e)),
    };
    let g = h3_exchange(&c, req).await;
    if !accepted.await {
        return Got::new(Outcome::Failed(format!("0-RTT not accepted (got {g:?})")));
    }
    g
}

fn varint(out: &mut Vec<u8>, v: u64) {
    if v < 64 {
        out.push(v as u8);
    } else if v < 16384 {
        out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

fn h3_frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    varint(out, kind);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// HEADERS (QPACK literal field lines with literal names, no table) and DATA frames.
fn h3_request(req: &Req) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0.
    let mut block = vec![0, 0];
    for (n, v) in field_list(req) {
        // 001NHxxx: literal field line with literal name, never-index 0, no Huffman.
        put_int(&mut block, 0x20, 3, n.len());
        block.extend_from_slice(&n);
        put_str(&mut block, &v);
    }
    let mut out = Vec::new();
    h3_frame(&mut out, 0x01, &block);
    if let Some(body) = &req.body {
        if !body.is_empty() {
            h3_frame(&mut out, 0x00, body);
        }
    }
    out
}

fn h3_code(code: u64) -> String {
    let name = match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        _ => "?",
    };
    format!("{name} ({code:#x})")
}

/// A QUIC variable-length integer at the start of `b`: (value, its size).
fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = (first & 0x3f) as u64;
    for x in &b[1..len] {
        v = (v << 8) | *x as u64;
    }
    Some((v, len))
}

/// A prefixed integer (`n`-bit prefix) at the start of `b`: (value, its size).
fn get_int(b: &[u8], n: u32) -> Option<(usize, usize)> {
    let max = (1usize << n) - 1;
    let mut v = (*b.first()? as usize) & max;
    if v < max {
        return Some((v, 1));
    }
    let mut shift = 0;
    for (i, x) in b[1..].iter().enumerate() {
        v += ((x & 0x7f) as usize) << shift;
        shift += 7;
        if x & 0x80 == 0 {
            return Some((v, i + 2));
        }
        if shift > 28 {
            return None;
        }
    }
    None
}

/// The QPACK static table's `:status` entries (RFC 9204 Appendix A).
fn static_status(index: usize) -> Option<&'static str> {
    Some(match index {
        24 => "103",
        25 => "200",
        26 => "304",
        27 => "404",
        28 => "503",
        63 => "100",
        64 => "204",
        65 => "206",
        66 => "302",
        67 => "400",
        68 => "403",
        69 => "421",
        70 => "425",
        71 => "500",
        _ => return None,
    })
}

/// A string literal with an `n`-bit length prefix whose H bit is the bit above it.
fn get_str(b: &[u8], n: u32) -> Option<(Vec<u8>, usize)> {
    let huffman = *b.first()? & (1 << n) != 0;
    let (len, at) = get_int(b, n)?;
    let raw = b.get(at..at + len)?;
    let s = if huffman {
        loona_hpack::huffman::HuffmanDecoder::new()
            .decode(raw)
            .ok()?
    } else {
        raw.to_vec()
    };
    Some((s, at + len))
}

/// The `:status` of a QPACK field section encoded without the dynamic table.
fn qpack_status(block: &[u8]) -> Option<u16> {
    let (_, a) = get_int(block, 8)?;
    let (_, b) = get_int(block.get(a..)?, 7)?;
    let mut p = block.get(a + b..)?;
    while let Some(&first) = p.first() {
        let (value, used): (Vec<u8>, usize) = if first & 0x80 != 0 {
            // Indexed field line; T=1: the static table.
            let (i, n) = get_int(p, 6)?;
            let v = if first & 0x40 != 0 {
                static_status(i)
            } else {
                None
            };
            (v.map(|v| v.as_bytes().to_vec()).unwrap_or_default(), n)
        } else if first & 0x40 != 0 {
            // Literal field line with name reference.
            let (i, n) = get_int(p, 4)?;
            let (v, m) = get_str(&p[n..], 7)?;
            let is_status = first & 0x10 != 0 && static_status(i).is_some();
            (if is_status { v } else { Vec::new() }, n + m)
        } else if first & 0x20 != 0 {
            // Literal field line with literal name.
            let (name, n) = get_str(p, 3)?;
            let (v, m) = get_str(&p[n..], 7)?;
            (if name == b":status" { v } else { Vec::new() }, n + m)
        } else {
            return None;
        };
        if !value.is_empty() {
            return std::str::from_utf8(&value).ok()?.parse().ok();
        }
        p = &p[used..];
    }
    None
}

/// One request on a new bidirectional stream of `c`; reads the answer.
async fn h3_exchange(c: &H3Conn, req: &Req) -> Got {
    let (mut send, mut recv) = match c.conn.open_bi().await {
        Ok(s) => s,
        Err(e) => return Got::new(Outcome::Refused(format!("connection: {e}"))),
    };
    // A write the server stops (STOP_SENDING) is no answer yet: the answer is read below.
    let bytes = h3_request(req);
    if send.write_all(&bytes).await.is_ok() {
        let _ = send.finish();
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut status = None;
    let mut body = Vec::new();
    let mut chunk = vec![0u8; 16384];
    let got = |status: Option<u16>, body: Vec<u8>, otherwise: Outcome| match status {
        Some(s) => Got {
            outcome: Outcome::Status(s),
            body,
        },
        None => Got::new(otherwise),
    };
    loop {
        // Whole frames first.
        while let Some((kind, a)) = get_varint(&buf) {
            let Some((len, b)) = buf.get(a..).and_then(get_varint) else {
                break;
            };
            let len = len as usize;
            if buf.len() < a + b + len {
                break;
            }
            let payload = buf[a + b..a + b + len].to_vec();
            buf.drain(..a + b + len);
            match kind {
                0x01 if status.is_none() => match qpack_status(&payload) {
                    Some(s) if (100..200).contains(&s) => {}
                    Some(s) => status = Some(s),
                    None => return Got::new(Outcome::Failed("no :status in HEADERS".into())),
                },
                0x00 => body.extend_from_slice(&payload),
                _ => {}
            }
        }
        let read = match tokio::time::timeout(TIMEOUT, recv.read(&mut chunk)).await {
            Ok(r) => r,
            Err(_) => {
                return Got::new(Outcome::Failed(format!(
                    "timeout (status {status:?}, {} body bytes, {} bytes unparsed)",
                    body.len(),
                    buf.len()
                )))
            }
        };
        match read {
            Ok(Some(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(None) => return got(status, body, Outcome::Closed),
            Err(quinn::ReadError::Reset(code)) => {
                return got(
                    status,
                    body,
                    Outcome::Refused(format!("stream reset {}", h3_code(code.into_inner()))),
                )
            }
            Err(quinn::ReadError::ConnectionLost(e)) => {
                let why = match &e {
                    quinn::ConnectionError::ApplicationClosed(a) => {
                        format!("connection closed {}", h3_code(a.error_code.into_inner()))
                    }
                    other => format!("connection lost: {other}"),
                };
                return got(status, body, Outcome::Refused(why));
            }
            Err(e) => return Got::new(Outcome::Failed(format!("read: {e}"))),
        }
    }
}
