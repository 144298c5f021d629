//! The TLS part of accepting a connection: read the ClientHello, choose the server block by
//! its SNI (before any certificate is sent), run the handshake under one deadline, and note
//! what it settled (protocol, cipher, ALPN, client certificate) for the requests. With
//! `ssl_conf_command Options KTLS`, an HTTP/1.x connection then hands its records to the
//! kernel (`tls::ktls`), decided before rustls gives up anything.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::Proto;

/// A TLS alert record: fatal (2), unrecognized_name (112).
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];
use crate::conf::model::ServerConf;
use crate::http::conn::{Conn, TlsSettled};
use crate::http::reqvars::{ConnFacts, TlsFacts};
use crate::net::{IoControl, SocketStream};
use crate::server::{Shared, Site};
use crate::tls::ktls::{self, sys::KtlsSocket};

/// A TLS connection's stream after its handshake.
pub(super) enum Secured {
    /// Records made by rustls in user space. Boxed so the serving task holds a pointer, not
    /// the rustls connection.
    User(Box<crate::tls::stream::TlsStream<SocketStream<TcpStream>, crate::record::SocketInfo>>),
    /// Records made by the kernel (kernel TLS).
    Kernel(Box<SocketStream<KtlsSocket>>),
}

/// A TLS connection after its handshake, ready for HTTP.
pub(super) type TlsReady = (Secured, Arc<Conn>, Proto, Arc<ServerConf>);

/// Whether a connection on `addr` may switch to kernel TLS: a server there asks for it and
/// the kernel has it. Its handshake's reads then stop at record boundaries.
fn ktls_possible(addr: &crate::conf::vhosts::AddrServers) -> bool {
    let asked = addr
        .servers()
        .iter()
        .any(|s| s.tls.as_ref().is_some_and(|t| t.ktls));
    asked && matches!(ktls::sys::support(), ktls::Support::Ciphers(c) if !c.is_empty())
}

/// A client in log lines: its IP address, or `unix:` on a UNIX-domain socket (nginx's
/// words for an unnamed peer).
pub(super) struct Client(pub(super) Option<SocketAddr>);

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{}", a.ip()),
            None => f.write_str("unix:"),
        }
    }
}

/// A PROXY header's addresses and version 2 TLVs.
type ProxyHeader = (
    Option<crate::net::proxy_protocol::ProxyAddrs>,
    Option<Arc<[u8]>>,
);

/// Reads a `listen ... proxy_protocol` connection's PROXY header (before TLS), as nginx:
/// the header's bytes only, nothing after them (the socket is peeked, then exactly the
/// header's bytes are consumed), within `deadline`, at most
/// [`MAX_HEADER`](crate::net::proxy_protocol::MAX_HEADER) bytes. `Err` closes the connection
/// (the reason is logged); `Ok((None, _))`: a header without addresses (`UNKNOWN`, `LOCAL`).
/// With the addresses come a version 2 header's TLVs, if any.
pub(super) async fn read_proxy_protocol(
    stream: &TcpStream,
    peer: Option<SocketAddr>,
    deadline: Instant,
) -> Result<ProxyHeader, ()> {
    use crate::net::proxy_protocol::{parse, Parsed, MAX_HEADER};
    let deadline = tokio::time::Instant::from_std(deadline);
    let mut head: Vec<u8> = Vec::new();
    let mut peeked = vec![0u8; MAX_HEADER];
    loop {
        let room = MAX_HEADER - head.len();
        let n = match tokio::time::timeout_at(deadline, stream.peek(&mut peeked[..room])).await {
            Ok(Ok(0)) => return Err(()),
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                crate::fblog!(
                    Info,
                    "recv() failed ({e}) while reading PROXY protocol header, client: {}",
                    Client(peer)
                );
                return Err(());
            }
            Err(_) => {
                crate::fblog!(
                    Info,
                    "client timed out while reading PROXY protocol header, client: {}",
                    Client(peer)
                );
                return Err(());
            }
        };
        let mut all = head.clone();
        all.extend_from_slice(&peeked[..n]);
        let (take, done) = match parse(&all) {
            Parsed::Done(len, addrs) => {
                let tlvs = crate::net::proxy_protocol::v2_tlvs(&all[..len]).map(Arc::from);
                (len - head.len(), Some((addrs, tlvs)))
            }
            // Every byte so far belongs to the header: consume them and wait for more.
            Parsed::Incomplete if all.len() < MAX_HEADER => (n, None),
            Parsed::Incomplete => {
                crate::fblog!(
                    Error,
                    "header is too large while reading PROXY protocol, client: {}",
                    Client(peer)
                );
                return Err(());
            }
            Parsed::Invalid(why) => {
                crate::fblog!(
                    Error,
                    "{why} while reading PROXY protocol, client: {}",
                    Client(peer)
                );
                return Err(());
            }
        };
        let mut sink = vec![0u8; take];
        let read = async {
            let mut got = 0;
            while got < take {
                stream.readable().await?;
                match stream.try_read(&mut sink[got..]) {
                    Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            Ok::<(), std::io::Error>(())
        };
        match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(())) => {}
            _ => return Err(()),
        }
        head.extend_from_slice(&sink);
        if let Some(header) = done {
            return Ok(header);
        }
    }
}

/// nginx's answer to plain HTTP on a TLS port: the request head is read (8 KB at most, within
/// the handshake's deadline) and answered, in plain text, with its 400 page "The plain HTTP
/// request was sent to HTTPS port" (497); the connection then closes.
async fn plain_http_refused(
    mut stream: TcpStream,
    deadline: tokio::time::Instant,
    peer: Option<SocketAddr>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    crate::metrics::tls_failure("tcp", "plain_http");
    crate::fblog!(
        Info,
        "client sent plain HTTP request to HTTPS port, client: {}",
        Client(peer)
    );
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let body = crate::http::pages::status_page(497);
    let mut out = format!(
        "HTTP/1.1 400 Bad Request\r\nServer: firstbyte\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    let _ = tokio::time::timeout_at(deadline, stream.write_all(&out)).await;
    let _ = tokio::time::timeout_at(deadline, stream.shutdown()).await;
}

/// The TLS part of [`handle`](super::handle): ClientHello, server block by SNI, handshake. `None` when the
/// connection ends here (the reason is logged). `timer` is the accept's time and
/// `client_header_timeout`: one deadline for the whole handshake, and the first request's
/// header timer runs on from the same accept (nginx's one read timer).
#[allow(clippy::too_many_arguments)]
pub(super) async fn accept_tls(
    site: &Arc<Site>,
    shared: &Shared,
    socket: usize,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    local: SocketAddr,
    mut facts: ConnFacts,
    send_timeout: Duration,
    timer: (Instant, Duration),
) -> Option<TlsReady> {
    let (accepted, hs_timeout) = timer;
    let hs_deadline = tokio::time::Instant::from_std(accepted + hs_timeout);
    let mut first = [0u8; 1];
    if let Ok(Ok(1)) = tokio::time::timeout_at(hs_deadline, stream.peek(&mut first)).await {
        // A TLS record starts with 0x16; an HTTP request with its method's capital letter.
        if first[0].is_ascii_uppercase() {
            plain_http_refused(stream, hs_deadline, peer).await;
            return None;
        }
    }
    let addr = site.vhosts().addr_servers(socket, local);
    let default = addr.default_server().clone();
    let release = crate::tls::stream::Release::new();
    let io = Arc::new(IoControl::new(send_timeout, false));
    // Kernel TLS, and `TCP_INFO` for record sizes, on TCP only.
    let fd = facts.socket;
    let may_switch = fd.is_some() && ktls_possible(addr);
    io.set_record_reads(may_switch);
    let mut stream = SocketStream::new(stream, io.clone(), peer);
    let handshake_failed = |e: &dyn std::fmt::Display, reason: &'static str| {
        crate::metrics::tls_failure("tcp", reason);
        crate::fblog!(
            Info,
            "SSL_do_handshake() failed ({e}) while SSL handshaking, client: {}",
            Client(peer)
        );
    };
    let timed_out = || {
        crate::metrics::tls_failure("tcp", "timeout");
        crate::fblog!(
            Info,
            "client timed out while SSL handshaking, client: {}",
            Client(peer)
        );
    };
    let hello = match tokio::time::timeout_at(
        hs_deadline,
        crate::tls::stream::read_client_hello(&mut stream),
    )
    .await
    {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            handshake_failed(&e, crate::metrics::io_reason(&e));
            return None;
        }
        Err(_) => {
            timed_out();
            return None;
        }
    };
    let sni = hello
        .client_hello()
        .server_name()
        .map(str::to_ascii_lowercase);
    // `$ssl_curves` and `$ssl_ciphers`: the code points, named only if a variable is read.
    let curves: Box<[u16]> = (hello.client_hello().named_groups().unwrap_or(&[]).iter())
        .map(|&g| u16::from(g))
        .collect();
    let ciphers: Box<[u16]> = (hello.client_hello().cipher_suites().iter())
        .map(|&c| u16::from(c))
        .collect();
    // The block whose config makes the handshake (the SNI's, or the default's when the SNI's
    // has no certificate): its client checks are the connection's.
    let sni_block = addr.find(sni.as_deref()).clone();
    if sni_block.tls.as_ref().is_some_and(|t| t.reject_handshake) {
        // `ssl_reject_handshake on`: a fatal unrecognized_name alert, as nginx sends.
        crate::metrics::tls_failure("tcp", "rejected");
        let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &UNRECOGNIZED_NAME).await;
        crate::fblog!(
            Info,
            "handshake rejected (\"ssl_reject_handshake\") for server name \"{}\" while SSL handshaking, client: {}",
            sni.as_deref().unwrap_or(""),
            Client(peer)
        );
        return None;
    }
    let server = if site.tls_for(&sni_block).is_some() {
        sni_block
    } else {
        default.clone()
    };
    let Some(cfg) = site.tls_for(&server).cloned() else {
        crate::metrics::tls_failure("tcp", "no_certificate");
        crate::fblog!(
            Error,
            "no \"ssl_certificate\" is defined for server \"{}\", client: {}",
            sni.as_deref().unwrap_or(""),
            Client(peer)
        );
        return None;
    };
    // `ssl_certificate` with variables: evaluated now, with the connection's addresses and the
    // SNI, and the pair loaded (through the certificate cache, keyed by the evaluated paths).
    let cfg = match site.dynamic_for(&server) {
        Some(d) => {
            let name = sni.as_deref().unwrap_or("");
            let vars = crate::http::rewrite::uservars::HandshakeVars::new(
                &server.vars,
                name,
                peer,
                facts.local,
            );
            crate::tls::with_certificate(&cfg, d.resolve_vars(&vars, name))
        }
        None => cfg,
    };
    // What rustls' callbacks keep for this connection while its handshake steps run: the
    // tickets and cache entries it opens or issues (`$ssl_session_id`) and, with kernel TLS,
    // the client's TLS 1.3 traffic secret, to follow its KeyUpdates.
    let mut hs = crate::tls::handshake_cx::HandshakeCx::default();
    let tls_conn = match hs.run(|| hello.into_connection(cfg)) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let mut out = Vec::new();
            let _ = alert.write_all(&mut out);
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &out).await;
            handshake_failed(&e, crate::metrics::rustls_reason(&e));
            return None;
        }
    };
    hs.ids
        .set_tls12(tls_conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_2));
    hs.ids.settle(tls_conn.handshake_kind());
    // Boxed: the handshake's state is freed when it ends instead of widening the task.
    let handshake = Box::pin(crate::tls::stream::handshake(
        stream,
        tls_conn,
        record_policy(&server, &shared.http.advisor),
        crate::record::SocketInfo(fd),
        release.clone(),
    ));
    let mut tls = match tokio::time::timeout_at(hs_deadline, hs.polling(handshake)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            handshake_failed(&e, crate::metrics::io_reason(&e));
            return None;
        }
        Err(_) => {
            timed_out();
            return None;
        }
    };
    let secret = hs.secret.take();
    io.set_record_reads(false);
    // Before kernel TLS takes the socket: the OCSP check may wait on a responder.
    let sc = tls.connection();
    let mut client = server.tls.as_ref().and_then(|t| {
        crate::tls::peer::verify(
            t.verify_client,
            site.client_verifier_for(&server),
            sc.peer_certificates(),
            rustls::pki_types::UnixTime::now(),
        )
    });
    if let (Some(t), Some(c)) = (server.tls.as_ref(), client.as_mut()) {
        // `ssl_ocsp`: before the first request, as nginx (`tls::client_ocsp`). The path is
        // not kept for the connection's life.
        let path = std::mem::take(&mut c.path);
        if t.ocsp != crate::conf::model::OcspMode::Off
            && c.verify == crate::tls::peer::ClientVerify::Success
        {
            let resolver = t
                .ocsp_resolver
                .as_ref()
                .map(|(r, timeout)| OcspDns(r, *timeout));
            let resolver = resolver
                .as_ref()
                .map(|r| r as &dyn crate::tls::client_ocsp::NameResolver);
            if let Some(reason) = crate::tls::client_ocsp::validate(t, &path, resolver).await {
                c.verify = crate::tls::peer::ClientVerify::Failed(reason);
            }
        }
    }
    // A 0-RTT connection's handshake is not done: it stays in user space, and its tickets
    // (issued when the client's Finished arrives) carry the connection's id.
    let session_id = hs.ids.id();
    tls.carry_handshake(hs);
    let early = tls.early_gate().cloned();
    let decision = (may_switch && early.is_none() && server.tls.as_ref().is_some_and(|t| t.ktls))
        .then(|| {
            let sc = tls.connection();
            ktls::decide(
                ktls::sys::support(),
                sc.protocol_version(),
                sc.negotiated_cipher_suite().map(|s| s.suite()),
                sc.alpn_protocol()
                    .map_or("", |p| std::str::from_utf8(p).unwrap_or("")),
                ktls::sys::h2_in_kernel(),
            )
        });
    let mut kernel = None;
    if let (Some(d), Some(fd)) = (decision, fd) {
        match d {
            ktls::Decision::Kernel(v, c) => match ktls::sys::attach_ulp(fd) {
                Ok(()) => kernel = Some((v, c)),
                // rustls still has the connection: it goes on in user space.
                Err(e) => crate::fblog!(
                    Info,
                    "setsockopt(TCP_ULP, \"tls\") failed ({}), TLS stays in user space, client: {}",
                    crate::log::OsError(&e),
                    Client(peer)
                ),
            },
            ktls::Decision::User(why) => crate::fblog!(Debug, "BIO_get_ktls_send(): 0 ({why})"),
        }
    }
    let sc = tls.connection();
    // The protocols firstbyte offers need no allocation.
    let alpn: Cow<'static, str> = match sc.alpn_protocol() {
        None => Cow::Borrowed(""),
        Some(b"h2") => Cow::Borrowed("h2"),
        Some(b"http/1.1") => Cow::Borrowed("http/1.1"),
        Some(p) => Cow::Owned(String::from_utf8_lossy(p).into_owned()),
    };
    facts.tls = Some(TlsFacts {
        protocol: sc
            .protocol_version()
            .map(crate::tls::protocol_name)
            .unwrap_or(""),
        cipher: sc
            .negotiated_cipher_suite()
            .map(|s| crate::tls::cipher_name(s.suite()))
            .unwrap_or(""),
        group: sc
            .negotiated_key_exchange_group()
            .map(|g| crate::tls::group_name(g.name()))
            .unwrap_or(""),
        alpn: alpn.clone(),
        curves,
        ciphers,
        resumed: matches!(sc.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        session_id: Some(session_id),
        server_name: sni,
        client,
        // TLS 1.3 records from the client are opened in user space (`ktls::rx`).
        ktls: (
            kernel.is_some(),
            kernel.is_some_and(|(v, _)| v == ktls::KernelVersion::Tls12),
        ),
        ktls_zerocopy: false,
        early,
    });
    if let Some(t) = &facts.tls {
        crate::metrics::tls_handshake(t.resumed, t.protocol, t.group);
    }
    facts.record_policy = tls.policy().name();
    let (secured, io) = match kernel {
        Some((version, cipher)) => {
            let policy = tls.policy().clone();
            let (sock, conn) = tls.into_parts();
            let zerocopy = server
                .tls
                .as_ref()
                .is_some_and(|t| ktls::sys::zerocopy().used(t.ktls_tx_zerocopy));
            match ktls::sys::switch(sock.into_inner(), conn, version, policy, zerocopy, secret)
                .await
            {
                Ok(k) => {
                    crate::fblog!(
                        Debug,
                        "kTLS: {} {} in the kernel, sendfile {}, client: {}",
                        version.name(),
                        cipher.name(),
                        if k.zerocopy() {
                            "zerocopy (TLS_TX_ZEROCOPY_RO)"
                        } else {
                            "copies"
                        },
                        Client(peer)
                    );
                    if let Some(t) = facts.tls.as_mut() {
                        t.ktls_zerocopy = k.zerocopy();
                    }
                    // The socket now carries plaintext as it is: file bodies may `sendfile`.
                    let io = Arc::new(IoControl::new(send_timeout, true));
                    (
                        Secured::Kernel(Box::new(SocketStream::new(k, io.clone(), peer))),
                        io,
                    )
                }
                Err(e) => {
                    crate::fblog!(
                        Error,
                        "kernel TLS switch failed: {}, client: {}",
                        e.0,
                        Client(peer)
                    );
                    return None;
                }
            }
        }
        None => (Secured::User(Box::new(tls)), io),
    };
    let conn = Conn::new(
        site.http().clone(),
        shared.http.clone(),
        socket,
        local,
        facts,
        io,
    )
    .with_tls(TlsSettled {
        data_chunk: (alpn == "h2")
            .then(|| super::h2::h2_data_chunk(server.record.full_size()))
            .flatten(),
        first_response: release,
        server: server.clone(),
        accepted,
    });
    let conn = Arc::new(conn);
    let mut secured = secured;
    let proto = if alpn == "h2" {
        // firstbyte's HTTP/2 speaks first (SETTINGS) and writes once per turn itself.
        if let Secured::User(tls) = &mut secured {
            tls.speak_first();
        }
        Proto::H2
    } else {
        Proto::H1
    };
    Some((secured, conn, proto, server))
}

/// `resolver` (and `resolver_timeout`) for `ssl_ocsp` responders.
struct OcspDns<'a>(&'a crate::conf::model::Resolver, std::time::Duration);

impl crate::tls::client_ocsp::NameResolver for OcspDns<'_> {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Vec<std::net::IpAddr>, String>> + Send + 'a>,
    > {
        Box::pin(async move {
            crate::http::proxy::dns::resolve(name, self.0, self.1)
                .await
                .map_err(|e| format!("{name} could not be resolved ({e})"))
        })
    }
}

/// The record policy of a new connection to `server`: its own, or the one `tuning_advisor
/// apply` switched to.
fn record_policy(
    server: &crate::conf::model::ServerConf,
    advisor: &crate::advisor::Advisor,
) -> crate::record::RecordPolicy {
    match (server.tuning_advisor, advisor.applied()) {
        (crate::advisor::AdvisorMode::Apply, Some(mode)) => crate::record::RecordSettings {
            ssl_dyn_rec_enable: mode,
            ..server.record
        }
        .policy(),
        _ => server.record.policy(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::IoSlice;
    use std::os::fd::RawFd;
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll};

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
    use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Event {
        Read(usize),
        Write(usize),
    }

    /// A socket that logs its read and write calls (a write takes every slice, as writev).
    struct LoggingSocket {
        inner: DuplexStream,
        log: Arc<Mutex<Vec<Event>>>,
    }

    impl LoggingSocket {
        fn push(&self, e: Event) {
            self.log.lock().unwrap().push(e);
        }
    }

    impl AsyncRead for LoggingSocket {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            let before = buf.filled().len();
            let r = Pin::new(&mut this.inner).poll_read(cx, buf);
            let n = buf.filled().len() - before;
            if n > 0 {
                this.push(Event::Read(n));
            }
            r
        }
    }

    impl AsyncWrite for LoggingSocket {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(b)])
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            // The duplex buffer (1 MiB) takes any flight whole.
            let r = Pin::new(&mut this.inner).poll_write(cx, &all);
            if let Poll::Ready(Ok(n)) = r {
                this.push(Event::Write(n));
            }
            r
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    impl crate::net::Sendfile for LoggingSocket {
        fn poll_sendfile(
            &mut self,
            _: &mut Context<'_>,
            _: RawFd,
            _: u64,
            _: usize,
        ) -> Poll<std::io::Result<usize>> {
            Poll::Ready(Err(std::io::ErrorKind::Unsupported.into()))
        }
        fn raw_fd(&self) -> Option<RawFd> {
            None
        }
    }

    /// Accepts any server certificate; checks handshake signatures.
    #[derive(Debug)]
    struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

    impl ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &CertificateDer<'_>,
            d: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                m,
                c,
                d,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    /// The server's first flight (ServerHello..Finished in TLS 1.3, ServerHello..
    /// ServerHelloDone in TLS 1.2) with a certificate over 6 KB goes to the socket in one
    /// write call, through the connection's real stack (`TlsStream` over `SocketStream`).
    #[tokio::test]
    async fn first_flight_leaves_in_one_write() {
        let names: Vec<String> = (0..400)
            .map(|i| format!("host-{i:03}.first-flight.test"))
            .collect();
        let ck = rcgen::generate_simple_self_signed(names).unwrap();
        let cert = ck.cert.der().clone();
        assert!(cert.len() > 6 * 1024, "chain is {} bytes", cert.len());
        let provider = crate::tls::provider();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let key = PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der());
            let mut server = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[version])
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert.clone()], key.into())
                .unwrap();
            // The chain goes whole (its compressed form would be smaller than itself).
            server.cert_compressors = Vec::new();
            let server = Arc::new(server);
            let client = Arc::new(
                ClientConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyCert(provider.clone())))
                    .with_no_client_auth(),
            );
            let (client_io, server_io) = tokio::io::duplex(1 << 20);
            let log = Arc::new(Mutex::new(Vec::new()));
            let sock = LoggingSocket {
                inner: server_io,
                log: log.clone(),
            };
            let io = Arc::new(IoControl::new(Duration::from_secs(60), false));
            let mut stream = SocketStream::new(sock, io, None);
            let server_side = async {
                let accepted = crate::tls::stream::read_client_hello(&mut stream)
                    .await
                    .expect("client hello");
                let conn = accepted
                    .into_connection(server)
                    .map_err(|(e, _)| e)
                    .expect("server connection");
                crate::tls::stream::handshake(
                    stream,
                    conn,
                    crate::record::RecordSettings::default().policy(),
                    crate::record::SocketInfo(None),
                    crate::tls::stream::Release::new(),
                )
                .await
                .expect("server handshake")
            };
            let name = ServerName::try_from("host-001.first-flight.test").unwrap();
            let client_side = tokio_rustls::TlsConnector::from(client).connect(name, client_io);
            let (_s, c) = tokio::join!(server_side, client_side);
            c.expect("client handshake");

            let log = log.lock().unwrap().clone();
            let first = log
                .iter()
                .position(|e| matches!(e, Event::Write(_)))
                .expect("server wrote");
            let next_read = log[first..]
                .iter()
                .position(|e| matches!(e, Event::Read(_)))
                .map_or(log.len(), |i| first + i);
            let flight = &log[first..next_read];
            assert_eq!(flight.len(), 1, "{version:?}: flight in pieces: {log:?}");
            assert!(
                matches!(flight[0], Event::Write(n) if n > cert.len()),
                "{version:?}: {log:?}"
            );
        }
    }
}
