//! `ssl_ocsp`, `ssl_ocsp_responder`, `ssl_ocsp_cache`: client certificates checked with OCSP
//! after the handshake, as nginx ≥ 1.19. The responder here is a small HTTP server that
//! answers every request with `current.der` (or closes without answering when there is none)
//! and counts requests; the responses are made by `openssl ocsp` (good, revoked, forged by an
//! impostor CA) or built here (stale, signed by the real CA), the client is curl.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest;
use rcgen::SigningKey;
use support::*;
use x509_parser::prelude::{FromDer, X509Certificate};

fn sh(script: &str, dir: &Path) {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The CA, clients `good` (serial 1001) and `revoked` (1002) whose AIA names the responder
/// at 127.0.0.1:`rport`, `named` (1003) whose AIA names it `ocsp.test:rport`, an `impostor` CA with the real CA's name and another key, and the responses:
/// `good.der`, `revoked.der`, `named.der` (the CA's), `good-revoked.der` (the CA says `good` is revoked),
/// `forged.der` (the impostor says `revoked` is good).
fn pki(dir: &Path, rport: u16) {
    sh(
        &format!(
            r#"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=ocsp-client-ca -keyout ca.key -out ca.crt 2>/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=ocsp-client-ca -keyout impostor.key -out impostor.crt 2>/dev/null
printf 'extendedKeyUsage=clientAuth\nauthorityInfoAccess=OCSP;URI:http://127.0.0.1:{rport}/\n' > client.ext
printf 'extendedKeyUsage=clientAuth\nauthorityInfoAccess=OCSP;URI:http://ocsp.test:{rport}/\n' > named.ext
n=1000
for c in good revoked named; do
  n=$((n+1))
  ext=client.ext; [ $c = named ] && ext=named.ext
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$c \
    -keyout $c.key -out $c.csr 2>/dev/null
  openssl x509 -req -in $c.csr -CA ca.crt -CAkey ca.key -set_serial 0x$n -days 30 \
    -extfile $ext -out $c.crt 2>/dev/null
  openssl ocsp -issuer ca.crt -cert $c.crt -reqout $c.req >/dev/null 2>&1
done
end=$(date -u -d '+30 days' +%y%m%d%H%M%SZ)
line() {{ printf '%s\t%s\t%s\t%s\tunknown\t/CN=%s\n' "$1" "$end" "$2" "$3" "$4"; }}
{{ line V '' 1001 good; line R 261101000000Z 1002 revoked; line V '' 1003 named; }} > index.txt
{{ line R 261101000000Z 1001 good; line V '' 1002 revoked; }} > index-swapped.txt
resp() {{ openssl ocsp -index $1 -CA ca.crt -rsigner $2.crt -rkey $2.key -reqin $3.req \
  -respout $4 -ndays 1 >/dev/null 2>&1; }}
resp index.txt ca good good.der
resp index.txt ca revoked revoked.der
resp index.txt ca named named.der
resp index-swapped.txt ca good good-revoked.der
resp index-swapped.txt impostor revoked forged.der
chmod 644 *.key
"#
        ),
        dir,
    );
}

/// DER tag-length-value.
fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let b = n.to_be_bytes();
        let skip = b.iter().take_while(|x| **x == 0).count();
        out.push(0x80 | (b.len() - skip) as u8);
        out.extend_from_slice(&b[skip..]);
    }
    out.extend_from_slice(body);
    out
}

fn generalized(t: u64) -> Vec<u8> {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{t}"), "+%Y%m%d%H%M%SZ"])
        .output()
        .expect("date");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .as_bytes()
        .to_vec()
}

fn pem_der(path: &Path) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_file(path)
        .expect("certificate")
        .to_vec()
}

/// A basic OCSP response saying `good` for `cert`, valid from `this` to `next`, signed by the
/// CA's own key (ECDSA P-256 with SHA-256), as a responder would make it.
fn response_by_ca(pki: &Path, cert: &str, this: u64, next: u64) -> Vec<u8> {
    let ca = pem_der(&pki.join("ca.crt"));
    let leaf = pem_der(&pki.join(format!("{cert}.crt")));
    let (_, ca) = X509Certificate::from_der(&ca).unwrap();
    let (_, leaf) = X509Certificate::from_der(&leaf).unwrap();
    let sha1 = |b: &[u8]| {
        digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, b)
            .as_ref()
            .to_vec()
    };
    let alg = tlv(
        0x30,
        &[tlv(0x06, &[0x2b, 0x0e, 0x03, 0x02, 0x1a]), vec![0x05, 0x00]].concat(),
    );
    let id = tlv(
        0x30,
        &[
            alg,
            tlv(0x04, &sha1(ca.subject().as_raw())),
            tlv(0x04, &sha1(&ca.public_key().subject_public_key.data)),
            tlv(0x02, leaf.raw_serial()),
        ]
        .concat(),
    );
    let (this, next) = (generalized(this), generalized(next));
    let single = [
        id,
        vec![0x80, 0x00],
        tlv(0x18, &this),
        tlv(0xa0, &tlv(0x18, &next)),
    ]
    .concat();
    let tbs = tlv(
        0x30,
        &[
            tlv(0xa1, ca.subject().as_raw()),
            tlv(0x18, &this),
            tlv(0x30, &tlv(0x30, &single)),
        ]
        .concat(),
    );
    let key_pem = std::fs::read_to_string(pki.join("ca.key")).unwrap();
    let key = rcgen::KeyPair::from_pem(&key_pem).expect("CA key");
    let sig = key.sign(&tbs).expect("sign");
    let sig_alg = tlv(
        0x30,
        &tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]),
    );
    let basic = tlv(
        0x30,
        &[tbs, sig_alg, tlv(0x03, &[&[0u8][..], &sig].concat())].concat(),
    );
    let bytes = tlv(
        0x30,
        &[
            tlv(
                0x06,
                &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01],
            ),
            tlv(0x04, &basic),
        ]
        .concat(),
    );
    tlv(0x30, &[vec![0x0a, 0x01, 0x00], tlv(0xa0, &bytes)].concat())
}

/// The responder: answers each request with `current.der`, counting requests.
struct Responder {
    port: u16,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Responder {
    fn start(dir: &Path) -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let (s, c, file) = (stop.clone(), count.clone(), dir.join("current.der"));
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if !head.starts_with(b"GET /") {
                    continue;
                }
                c.fetch_add(1, Ordering::SeqCst);
                if let Ok(body) = std::fs::read(&file) {
                    let _ = conn.write_all(
                        b"HTTP/1.0 200 OK\r\nContent-Type: application/ocsp-response\r\n\r\n",
                    );
                    let _ = conn.write_all(&body);
                }
            }
        });
        Responder {
            port,
            stop,
            count,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    ssl_verify_client on;
    ssl_client_certificate {dir}/pki/ca.crt;
    add_header X-Verify $ssl_client_verify always;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_ocsp on;
        location / { return 200 "ok"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_ocsp leaf;
        ssl_ocsp_responder http://127.0.0.1:{port3}/;
        location / { return 200 "ok"; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        ssl_ocsp leaf;
        ssl_ocsp_cache shared:CLIENTS:1m;
        location / { return 200 "ok"; }
    }
    server {
        listen 127.0.0.1:{port4} ssl;
        ssl_ocsp on;
        resolver 127.0.0.1:{dns} ipv6=off;
        location / { return 200 "ok"; }
    }
}
"#;

/// A DNS server on UDP answering every A question with 127.0.0.1 (anything else: no
/// records); its port and the questions it got.
fn dns_server() -> (u16, Arc<AtomicUsize>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind dns");
    let port = sock.local_addr().unwrap().port();
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let q = &buf[..n];
            let Some(end) = q
                .get(12..)
                .and_then(|b| b.iter().position(|b| *b == 0))
                .map(|p| 12 + p + 1)
                .filter(|e| e + 4 <= n)
            else {
                continue;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let qtype = u16::from_be_bytes([q[end], q[end + 1]]);
            let mut r = q[..end + 4].to_vec();
            r[2] = 0x81;
            r[3] = 0x80;
            if qtype == 1 {
                r[7] = 1;
                r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let _ = sock.send_to(&r, from);
        }
    });
    (port, asked)
}

struct Setup {
    dir: PathBuf,
    pki: PathBuf,
    responder: Responder,
    ports: Vec<u16>,
    dns_asked: Arc<AtomicUsize>,
    _server: Server,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let dir = tempdir(tag);
        let pki_dir = dir.join("pki");
        std::fs::create_dir_all(&pki_dir).unwrap();
        let responder = Responder::start(&pki_dir);
        pki(&pki_dir, responder.port);
        // port3: nobody listens there (a responder that is down).
        let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
        let (dns, dns_asked) = dns_server();
        let conf = render(&CONF.replace("{dns}", &dns.to_string()), &dir, &ports);
        let server = Server::start_in(&dir, &conf, ports[0]);
        Setup {
            dir,
            pki: pki_dir,
            responder,
            ports,
            dns_asked,
            _server: server,
        }
    }

    /// What the responder answers from now on (`None`: nothing).
    fn answer(&self, response: Option<&[u8]>) {
        let path = self.pki.join("current.der");
        match response {
            Some(r) => std::fs::write(path, r).unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    fn answer_file(&self, name: &str) {
        self.answer(Some(&std::fs::read(self.pki.join(name)).unwrap()));
    }

    /// (status, `$ssl_client_verify`) of a request to server `i` with client `client`.
    fn get(&self, i: usize, client: &str) -> (u16, String) {
        let cert = self.pki.join(format!("{client}.crt"));
        let key = self.pki.join(format!("{client}.key"));
        let (status, headers, _) = curl_i(&[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            &format!("https://127.0.0.1:{}/", self.ports[i]),
        ]);
        let verify = header(&headers, "x-verify").unwrap_or("").to_string();
        (status, verify)
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const FAILED: &str = "FAILED:certificate status request failed";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn good_accepted_revoked_forged_and_stale_refused() {
    let s = Setup::new("client-ocsp");
    s.answer_file("good.der");
    assert_eq!(s.get(0, "good"), (200, "SUCCESS".into()));

    s.answer_file("revoked.der");
    assert_eq!(
        s.get(0, "revoked"),
        (400, "FAILED:certificate revoked".into())
    );

    // An impostor with the CA's name but not its key says the revoked certificate is good.
    s.answer_file("forged.der");
    assert_eq!(s.get(0, "revoked"), (400, FAILED.into()));
    assert!(
        s.error_log().contains("OCSP response not verified"),
        "{}",
        s.error_log()
    );

    // Signed by the CA itself: current is taken, past its nextUpdate (and OpenSSL's 5
    // minutes of leeway) is not.
    let t = now();
    s.answer(Some(&response_by_ca(&s.pki, "good", t - 60, t + 3600)));
    assert_eq!(s.get(0, "good"), (200, "SUCCESS".into()));
    s.answer(Some(&response_by_ca(
        &s.pki,
        "good",
        t - 2 * 86_400,
        t - 86_400,
    )));
    assert_eq!(s.get(0, "good"), (400, FAILED.into()));
    assert!(
        s.error_log()
            .contains("OCSP response not valid at this time"),
        "{}",
        s.error_log()
    );

    // A responder that closes without answering.
    s.answer(None);
    assert_eq!(s.get(0, "good"), (400, FAILED.into()));
    // Every check above asked the responder: no cache without `ssl_ocsp_cache`.
    assert_eq!(s.responder.requests(), 6);
}

#[test]
fn responder_down_refused_and_cache_hit_does_not_refetch() {
    let s = Setup::new("client-ocsp-cache");
    // `ssl_ocsp_responder` names a port nobody listens on.
    assert_eq!(s.get(1, "good"), (400, FAILED.into()));
    assert!(
        s.error_log().contains("connect() to 127.0.0.1:"),
        "{}",
        s.error_log()
    );
    assert_eq!(s.responder.requests(), 0);

    s.answer_file("good.der");
    assert_eq!(s.get(2, "good"), (200, "SUCCESS".into()));
    assert_eq!(s.responder.requests(), 1);
    assert_eq!(s.get(2, "good"), (200, "SUCCESS".into()));
    assert_eq!(s.responder.requests(), 1, "cache hit asked the responder");

    // The responder now says revoked: the cached answer stands until its nextUpdate, while a
    // server without the cache asks and refuses.
    s.answer_file("good-revoked.der");
    assert_eq!(s.get(2, "good"), (200, "SUCCESS".into()));
    assert_eq!(s.responder.requests(), 1);
    assert_eq!(s.get(0, "good"), (400, "FAILED:certificate revoked".into()));
    assert_eq!(s.responder.requests(), 2);

    // Revoked answers are cached too.
    s.answer_file("revoked.der");
    assert_eq!(
        s.get(2, "revoked"),
        (400, "FAILED:certificate revoked".into())
    );
    s.answer(None);
    assert_eq!(
        s.get(2, "revoked"),
        (400, "FAILED:certificate revoked".into())
    );
    assert_eq!(s.responder.requests(), 3);
}

#[test]
fn bad_ocsp_settings_are_refused_at_load() {
    let dir = tempdir("client-ocsp-conf");
    let cases = [
        (
            "ssl_verify_client optional_no_ca; ssl_ocsp on;",
            "\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\"",
        ),
        (
            "ssl_ocsp_cache shared:X:16k;",
            "OCSP cache \"shared:X:16k\" is too small",
        ),
        ("ssl_ocsp_cache builtin;", "invalid OCSP cache \"builtin\""),
        (
            "ssl_ocsp_responder https://127.0.0.1/;",
            "invalid URL prefix in OCSP responder",
        ),
        ("ssl_ocsp maybe;", "ssl_ocsp"),
    ];
    for (directives, want) in cases {
        let conf = render(
            &format!(
                "pid off;\nerror_log stderr;\nevents {{}}\nhttp {{ server {{ listen 127.0.0.1:{{port0}} ssl;\n\
                 ssl_certificate {{certs}}/localhost.crt; ssl_certificate_key {{certs}}/localhost.key;\n\
                 ssl_client_certificate {{certs}}/ca.crt;\n{directives} }} }}\n"
            ),
            &dir,
            &[free_port()],
        );
        std::fs::write(dir.join("t.conf"), conf).unwrap();
        let out = firstbyte(&["-t", "-c", dir.join("t.conf").to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{directives}: {err}");
        assert!(err.contains(want), "{directives}: {err}");
        assert!(
            err.contains("t.conf:"),
            "{directives}: no file and line: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn responder_names_are_resolved_with_resolver_only() {
    let s = Setup::new("client-ocsp-dns");
    s.answer_file("named.der");
    // No `resolver`: the AIA's host name is not looked up (nginx's failure).
    assert_eq!(s.get(0, "named"), (400, FAILED.into()));
    assert!(
        s.error_log()
            .contains("no resolver defined to resolve ocsp.test"),
        "{}",
        s.error_log()
    );
    assert_eq!(s.responder.requests(), 0);
    // With one: asked of it, then the responder.
    assert_eq!(s.get(4, "named"), (200, "SUCCESS".into()));
    assert!(s.dns_asked.load(Ordering::SeqCst) >= 1);
    assert_eq!(s.responder.requests(), 1);
}
