//! `ssl_certificate_compression` (RFC 8879, TLS 1.3): a client that offers
//! `compress_certificate` gets its chain as a CompressedCertificate in an algorithm it named
//! (it decompresses it, and the handshake signature checks against the result); a client that
//! does not, or a TLS 1.2 handshake, gets the plain Certificate; `off` never compresses. On
//! is firstbyte's default (nginx's is off). The
//! proof on the wire is the size of the server's first flight (ServerHello..Finished), counted
//! by a rustls client driven by hand: every byte the server sends before the client's Finished.
//!
//! `first_flight_sizes` measures that flight for the built-in site's certificate and for
//! chains shaped like a public CA's (`support::ca_shaped_chains`), and prints the table of
//! bench/results/2026-11-26-cert-compression with `--nocapture`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::compress::{CertDecompressor, BROTLI_DECOMPRESSOR, ZLIB_DECOMPRESSOR};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use support::{AnyCert, Server};

/// What the client was given: the chain and the stapled OCSP response.
#[derive(Debug, Default)]
struct Given {
    chain: Vec<Vec<u8>>,
    ocsp: Vec<u8>,
}

/// [`AnyCert`] that also keeps what it was asked to verify.
#[derive(Debug)]
struct Recording(AnyCert, Arc<Mutex<Given>>);

impl ServerCertVerifier for Recording {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut g = self.1.lock().unwrap();
        g.chain = std::iter::once(end_entity)
            .chain(intermediates)
            .map(|c| c.to_vec())
            .collect();
        g.ocsp = ocsp.to_vec();
        self.0
            .verify_server_cert(end_entity, intermediates, name, ocsp, now)
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(m, c, d)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(m, c, d)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One handshake's result.
#[derive(Debug)]
struct Flight {
    /// Bytes the server sent before the client's Finished: ServerHello..Finished.
    bytes: usize,
    given: Given,
    version: rustls::ProtocolVersion,
}

/// A full handshake with 127.0.0.1:`port` by a rustls client offering `offer` in
/// `compress_certificate` (none: no extension), then one request, answered 200.
fn handshake(port: u16, offer: &[&'static dyn CertDecompressor], tls12: bool) -> Flight {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let given = Arc::new(Mutex::new(Given::default()));
    let verifier = Arc::new(Recording(AnyCert(provider.clone()), given.clone()));
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.cert_decompressors = offer.to_vec();
    config.resumption = rustls::client::Resumption::disabled();
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut bytes = 0;
    while conn.is_handshaking() {
        while conn.wants_write() {
            conn.write_tls(&mut sock).unwrap();
        }
        if !conn.is_handshaking() {
            break;
        }
        let n = conn.read_tls(&mut sock).unwrap();
        assert!(n > 0, "the server closed during the handshake");
        bytes += n;
        conn.process_new_packets().expect("handshake");
    }
    let version = conn.protocol_version().unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    assert!(
        response.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    let given = std::mem::take(&mut *given.lock().unwrap());
    Flight {
        bytes,
        given,
        version,
    }
}

/// The DER certificates of a PEM file.
fn chain_of(pem: &Path) -> Vec<Vec<u8>> {
    CertificateDer::pem_file_iter(pem)
        .unwrap()
        .map(|c| c.unwrap().to_vec())
        .collect()
}

const BOTH: &[&'static dyn CertDecompressor] = &[BROTLI_DECOMPRESSOR, ZLIB_DECOMPRESSOR];
const ZLIB: &[&'static dyn CertDecompressor] = &[ZLIB_DECOMPRESSOR];
const BROTLI: &[&'static dyn CertDecompressor] = &[BROTLI_DECOMPRESSOR];

/// Starts one firstbyte with, per chain of `support::CHAINS`, a server without the directive
/// (port 2i: firstbyte's default, on) and one with `ssl_certificate_compression off` (2i + 1,
/// nginx's default). `extra` goes into every server block.
fn servers(tag: &str, extra: &str) -> (Server, Vec<u16>, std::path::PathBuf) {
    let dir = support::tempdir(tag);
    support::ca_shaped_chains(&dir);
    let mut blocks = String::new();
    for (i, name) in support::CHAINS.iter().enumerate() {
        for (j, directive) in ["", "ssl_certificate_compression off;"].iter().enumerate() {
            blocks += &format!(
                "    server {{\n        listen 127.0.0.1:{{port{p}}} ssl;\n        server_name localhost;\n        ssl_certificate {d}/{name}.crt;\n        ssl_certificate_key {d}/{name}.key;\n        {directive}\n        {extra}\n        location / {{ return 200 ok; }}\n    }}\n",
                p = 2 * i + j,
                d = dir.display(),
            );
        }
    }
    let template = format!(
        "error_log {{dir}}/error.log info;\nevents {{}}\nhttp {{\n    access_log off;\n{blocks}}}\n"
    );
    let sdir = dir.join("server");
    std::fs::create_dir_all(&sdir).unwrap();
    let ports: Vec<u16> = (0..2 * support::CHAINS.len())
        .map(|_| support::free_port())
        .collect();
    let conf = support::render(&template, &sdir, &ports);
    let mut server = Server::start_in(&sdir, &conf, ports[0]);
    for &p in &ports[1..] {
        server.wait_port(p);
    }
    (server, ports, dir)
}

fn stop(mut server: Server, dir: &Path) {
    server.signal(libc::SIGTERM);
    server.wait_exit(Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(dir);
}

/// On (the default): a client offering brotli and zlib, zlib only or brotli only gets the chain compressed
/// in an algorithm it offered (one it cannot decompress would fail the handshake), whole and
/// as the file has it, in a first flight smaller than a client that offers nothing receives.
/// TLS 1.2 has no compression. Off: the same flight whatever the client offers.
#[test]
fn compressed_only_when_on_and_offered() {
    let (server, ports, dir) = servers("certcomp", "");
    // rsa3: the three-certificate RSA chain (3.2 KB DER); RSA signatures have a fixed length,
    // so flights without compression are equal to the byte.
    let i = support::CHAINS.iter().position(|c| *c == "rsa3").unwrap();
    let (on, off) = (ports[2 * i], ports[2 * i + 1]);
    let chain = chain_of(&dir.join("rsa3.crt"));
    let der: usize = chain.iter().map(Vec::len).sum();

    let plain = handshake(on, &[], false);
    assert_eq!(plain.version, rustls::ProtocolVersion::TLSv1_3);
    assert_eq!(plain.given.chain, chain);
    assert!(plain.bytes > der, "{plain:?}");
    for (label, offer) in [("brotli+zlib", BOTH), ("zlib", ZLIB), ("brotli", BROTLI)] {
        let f = handshake(on, offer, false);
        assert_eq!(
            f.given.chain, chain,
            "{label}: the chain decompressed whole"
        );
        // Two RSA 2048 keys and signatures and an RSA 4096 key and signature (~2.1 KB of
        // random bytes) do not compress; names, extensions and DER framing do.
        assert!(
            f.bytes + 300 < plain.bytes,
            "{label}: compressed flight {} B, plain {} B",
            f.bytes,
            plain.bytes
        );
    }

    let tls12 = handshake(on, BOTH, true);
    assert_eq!(tls12.version, rustls::ProtocolVersion::TLSv1_2);
    assert_eq!(tls12.given.chain, chain);
    assert!(
        tls12.bytes > der,
        "TLS 1.2 sends the plain chain: {tls12:?}"
    );

    let off_plain = handshake(off, &[], false);
    let off_offered = handshake(off, BOTH, false);
    assert_eq!(off_offered.given.chain, chain);
    assert_eq!(
        off_offered.bytes, off_plain.bytes,
        "off: the offer changes nothing"
    );
    assert_eq!(
        off_plain.bytes, plain.bytes,
        "the same plain flight on and off"
    );
    stop(server, &dir);
}

/// A stapled OCSP response travels inside the compressed Certificate message and reaches the
/// client as the file has it (nginx refuses `ssl_stapling` with compression: OpenSSL
/// compresses a chain once, without the staple).
#[test]
fn the_staple_is_compressed_with_the_chain() {
    let staple_dir = support::tempdir("certcomp-ocsp");
    // An OCSPResponse of status `successful` without a body is all firstbyte asks of the file;
    // padded with a repeated field so that compression has something to take.
    let mut staple = vec![0x30, 0x82, 0x00, 0x00, 0x0a, 0x01, 0x00];
    let filler: Vec<u8> = [0x04, 0x20]
        .into_iter()
        .chain(std::iter::repeat_n(0x5a, 32))
        .collect();
    for _ in 0..20 {
        staple.extend_from_slice(&filler);
    }
    let len = staple.len() - 4;
    staple[2] = (len >> 8) as u8;
    staple[3] = len as u8;
    let file = staple_dir.join("ocsp.der");
    std::fs::write(&file, &staple).unwrap();
    let extra = format!("ssl_stapling on; ssl_stapling_file {};", file.display());
    let (server, ports, dir) = servers("certcomp-staple", &extra);
    let i = support::CHAINS.iter().position(|c| *c == "ecdsa").unwrap();
    let (on, off) = (ports[2 * i], ports[2 * i + 1]);
    let compressed = handshake(on, BOTH, false);
    assert_eq!(compressed.given.ocsp, staple);
    assert_eq!(compressed.given.chain, chain_of(&dir.join("ecdsa.crt")));
    let plain = handshake(off, BOTH, false);
    assert_eq!(plain.given.ocsp, staple);
    assert!(
        compressed.bytes + 300 < plain.bytes,
        "compressed {} B, plain {} B",
        compressed.bytes,
        plain.bytes
    );
    stop(server, &dir);
    let _ = std::fs::remove_dir_all(&staple_dir);
}

/// The server's first flight with and without compression, per chain: the figures of
/// bench/results/2026-11-26-cert-compression (`--nocapture` prints them). Each compressed
/// flight is smaller than the plain one.
#[test]
fn first_flight_sizes() {
    let (server, ports, dir) = servers("certcomp-sizes", "");
    let mss = 1448;
    let mut table = vec![
        "| chain | DER | plain flight | brotli | zlib | saved (brotli) | 1448-B segments plain → brotli |".to_string(),
        "|---|---|---|---|---|---|---|".to_string(),
    ];
    for (i, name) in support::CHAINS.iter().enumerate() {
        let der: usize = chain_of(&dir.join(format!("{name}.crt")))
            .iter()
            .map(Vec::len)
            .sum();
        let on = ports[2 * i];
        let plain = handshake(ports[2 * i + 1], BOTH, false).bytes;
        let brotli = handshake(on, BROTLI, false).bytes;
        let zlib = handshake(on, ZLIB, false).bytes;
        assert!(
            brotli < plain && zlib < plain,
            "{name}: {plain} {brotli} {zlib}"
        );
        table.push(format!(
            "| {name} | {der} | {plain} | {brotli} | {zlib} | {} ({:.0}%) | {} → {} |",
            plain - brotli,
            100.0 * (plain - brotli) as f64 / plain as f64,
            plain.div_ceil(mss),
            brotli.div_ceil(mss),
        ));
    }
    eprintln!("{}", table.join("\n"));
    stop(server, &dir);
}
