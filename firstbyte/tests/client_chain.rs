//! Client and upstream chains verified as OpenSSL verifies them for nginx, attacked: a chain
//! past `ssl_verify_depth`, a certificate revoked by a version-1 CRL (what `openssl ca -gencrl`
//! makes without `crl_extensions`), a chain without a CRL for one of its issuers, a certificate
//! whose issuer name is the CA's but whose signature is another key's, an untrusted self-signed
//! certificate, a leaf sent without its intermediate. `ssl_verify_client on` completes the
//! handshake as nginx and refuses each request (400) unless the chain verified, over HTTP/1.1
//! and HTTP/2. Also `ssl_reject_handshake`, plain HTTP to a TLS port, a FIFO `ssl_password_file` read once, and
//! `proxy_ssl_verify` with an X.509 v1 upstream certificate named by its common name.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::*;

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

/// root → int → {end, revoked} (`openssl ca`, v1 CRLs: `root.crl` empty, `int.crl` revoking
/// `revoked`), `self` (a self-signed certificate of its own), `forged` (issuer name `/CN=root`,
/// signed by another key). `*-chain.pem` are a leaf with `int.crt`.
fn pki(dir: &Path) {
    sh(
        r#"
cat > ca.conf <<EOF
[ req ]
distinguished_name = dn
[ dn ]
[ v3_ca ]
basicConstraints = critical,CA:TRUE
keyUsage = critical, digitalSignature, cRLSign, keyCertSign
[ ca ]
default_ca = myca
[ myca ]
new_certs_dir = $PWD
database = $PWD/index
default_md = sha256
policy = pol
serial = $PWD/serial
default_days = 2
[ pol ]
commonName = supplied
EOF
: > index
echo 1000 > serial
openssl req -x509 -new -config ca.conf -extensions v3_ca -subj /CN=root/ -nodes \
  -newkey rsa:2048 -keyout root.key -out root.crt 2>/dev/null
openssl req -x509 -new -config ca.conf -subj /CN=self/ -nodes \
  -newkey rsa:2048 -keyout self.key -out self.crt 2>/dev/null
openssl req -x509 -new -config ca.conf -extensions v3_ca -subj /CN=root/ -nodes \
  -newkey rsa:2048 -keyout evil.key -out evil.crt 2>/dev/null
for n in int end revoked forged; do
  openssl req -new -config ca.conf -subj /CN=$n/ -nodes -newkey rsa:2048 \
    -keyout $n.key -out $n.csr 2>/dev/null
done
openssl ca -batch -config ca.conf -extensions v3_ca -keyfile root.key -cert root.crt \
  -subj /CN=int/ -in int.csr -out int.crt 2>/dev/null
for n in end revoked; do
  openssl ca -batch -config ca.conf -keyfile int.key -cert int.crt \
    -subj /CN=$n/ -in $n.csr -out $n.crt 2>/dev/null
  cat $n.crt int.crt > $n-chain.pem
done
openssl req -new -config ca.conf -subj /CN=old/ -nodes -newkey rsa:2048 \
  -keyout old.key -out old.csr 2>/dev/null
openssl ca -batch -config ca.conf -keyfile int.key -cert int.crt -subj /CN=old/ \
  -startdate 20200101000000Z -enddate 20200102000000Z -in old.csr -out old.crt 2>/dev/null
cat old.crt int.crt > old-chain.pem
openssl x509 -req -in forged.csr -CA evil.crt -CAkey evil.key -set_serial 66 -days 2 \
  -out forged.crt 2>/dev/null
openssl ca -gencrl -config ca.conf -keyfile root.key -cert root.crt -out root.crl \
  -crldays 1 2>/dev/null
openssl ca -config ca.conf -revoke revoked.crt -keyfile int.key -cert int.crt 2>/dev/null
openssl ca -gencrl -config ca.conf -keyfile int.key -cert int.crt -out int.crl \
  -crldays 1 2>/dev/null
cat root.crl int.crl > chain.crl
chmod 644 *.key
"#,
        dir,
    );
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    http2 on;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    ssl_verify_client on;
    ssl_client_certificate {dir}/root.crt;
    add_header X-Verify $ssl_client_verify always;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_crl {dir}/chain.crl;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_verify_depth 0;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        ssl_crl {dir}/root.crl;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port3} ssl;
        ssl_client_certificate {dir}/self.crt;
        location / { return 200 "ok\n"; }
    }
}
"#;

/// (status, `X-Verify`) of a GET to `port` offering `cert` (a PEM chain) and `key`.
fn get(port: u16, client: Option<(&Path, &str, &str)>, extra: &[&str]) -> (u16, String) {
    let url = format!("https://127.0.0.1:{port}/");
    let (cert, key);
    let mut args: Vec<&str> = extra.to_vec();
    if let Some((dir, c, k)) = client {
        cert = dir.join(c).display().to_string();
        key = dir.join(k).display().to_string();
        args.extend(["--cert", &cert, "--key", &key]);
    }
    args.push(&url);
    let (code, headers, _) = curl_i(&args);
    (code, header(&headers, "x-verify").unwrap_or("").to_string())
}

fn start() -> (Server, Vec<u16>) {
    let dir = tempdir("client-chain");
    pki(&dir);
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let conf = render(CONF, &dir, &ports);
    let s = Server::start_in(&dir, &conf, ports[0]);
    (s, ports)
}

#[test]
fn chains_are_checked_as_openssl_and_attacks_fail() {
    let (s, p) = start();
    let d = s.dir.clone();
    let with = |c: &'static str, k: &'static str| Some((d.as_path(), c, k));
    // No certificate: the handshake completes, the request does not (nginx's 400).
    assert_eq!(get(p[0], None, &[]), (400, "NONE".into()));
    // A chain through the intermediate, no certificate of it revoked.
    assert_eq!(
        get(p[0], with("end-chain.pem", "end.key"), &[]),
        (200, "SUCCESS".into())
    );
    let failed = |why: &str| (400, format!("FAILED:{why}"));
    // Revoked by a version-1 CRL, over HTTP/1.1 and HTTP/2.
    for proto in ["--http1.1", "--http2"] {
        assert_eq!(
            get(p[0], with("revoked-chain.pem", "revoked.key"), &[proto]),
            failed("certificate revoked"),
            "{proto}"
        );
    }
    // Expired (2020), in a chain that is otherwise good.
    assert_eq!(
        get(p[0], with("old-chain.pem", "old.key"), &[]),
        failed("certificate has expired")
    );
    // The CA's name as issuer, another key's signature.
    assert_eq!(
        get(p[0], with("forged.crt", "forged.key"), &[]),
        failed("certificate signature failure")
    );
    // Self-signed and not trusted.
    assert_eq!(
        get(p[0], with("self.crt", "self.key"), &[]),
        failed("self-signed certificate")
    );
    // The leaf alone: its issuer is neither sent nor trusted.
    assert_eq!(
        get(p[0], with("end.crt", "end.key"), &[]),
        failed("unable to get local issuer certificate")
    );
    // One intermediate past `ssl_verify_depth 0`.
    assert_eq!(
        get(p[1], with("end-chain.pem", "end.key"), &[]),
        failed("certificate chain too long")
    );
    // `ssl_crl` without a CRL of the intermediate: every issuer needs one.
    assert_eq!(
        get(p[2], with("end-chain.pem", "end.key"), &[]),
        failed("unable to get certificate CRL")
    );
    // A self-signed (X.509 v1) certificate that is itself the CA file's: trusted, as OpenSSL.
    assert_eq!(
        get(p[3], with("self.crt", "self.key"), &[]),
        (200, "SUCCESS".into())
    );
    // ... and a certificate the CA file does not hold, on that server.
    assert_eq!(
        get(p[3], with("end-chain.pem", "end.key"), &[]),
        failed("unable to get local issuer certificate")
    );
}

const REJECT: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_reject_handshake on;
    }
    server {
        listen 127.0.0.1:{port0};
        server_name good.example;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / { return 200 "good\n"; }
    }
    server {
        listen 127.0.0.1:{port0};
        server_name plain.example;
        ssl_reject_handshake on;
        location / { return 200 "$ssl_server_name\n"; }
    }
}
"#;

#[test]
fn reject_handshake_refuses_names_of_its_server() {
    let (_s, p) = Server::start("reject-handshake", REJECT, 1);
    let at = |name: &str| {
        let resolve = format!("{name}:{}:127.0.0.1", p[0]);
        curl(&[
            "-S",
            "--resolve",
            &resolve,
            &format!("https://{name}:{}/", p[0]),
        ])
    };
    let good = at("good.example");
    assert_eq!(String::from_utf8_lossy(&good.stdout), "good\n");
    for name in ["other.example", "plain.example"] {
        let out = at(name);
        assert!(!out.status.success(), "{name} was served");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unrecognized name"),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // No SNI: the default server's, refused too.
    let out = curl(&[&format!("https://127.0.0.1:{}/", p[0])]);
    assert!(!out.status.success());
    // Plain HTTP to the TLS port: nginx's 400 page, in plain text.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", p[0])).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(b"GET / HTTP/1.1\r\nHost: good.example\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut c, &mut answer).expect("read");
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("The plain HTTP request was sent to HTTPS port"));
}

const PASSWORDS: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_certificate {dir}/enc.crt;
    ssl_certificate_key {dir}/enc.key;
    ssl_password_file {dir}/password.fifo;
    server {
        listen 127.0.0.1:{port0} ssl;
        location / { return 200 "one\n"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        location / { return 200 "two\n"; }
    }
    server {
        listen 127.0.0.1:{port2};
        ssl_password_file {dir}/unused.fifo;
        location / { return 200 "plain\n"; }
    }
}
"#;

/// Opens `path` (a FIFO) for writing, which waits for a reader, writes `text` once and says so
/// on the channel.
fn feed(path: std::path::PathBuf, text: &'static str) -> std::sync::mpsc::Receiver<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open fifo");
        f.write_all(text.as_bytes()).expect("write fifo");
        drop(f);
        let _ = tx.send(());
    });
    rx
}

#[test]
fn password_file_is_read_once_per_load_even_a_fifo() {
    let dir = tempdir("password-fifo");
    sh(
        r#"
openssl genrsa -aes128 -passout pass:secret -out enc.key 2048 2>/dev/null
grep -q 'BEGIN ENCRYPTED PRIVATE KEY' enc.key
openssl req -x509 -new -subj /CN=localhost/ -key enc.key -passin pass:secret -days 2 \
  -config /dev/null -out enc.crt 2>/dev/null || \
openssl req -x509 -new -subj /CN=localhost/ -key enc.key -passin pass:secret -days 2 \
  -out enc.crt 2>/dev/null
mkfifo password.fifo unused.fifo
"#,
        &dir,
    );
    let used = feed(dir.join("password.fifo"), "wrong\nsecret\n");
    let unused = feed(dir.join("unused.fifo"), "x\n");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let conf = render(PASSWORDS, &dir, &ports);
    // A second read of either FIFO would wait forever: the server would never listen.
    let mut s = Server::start_in(&dir, &conf, ports[0]);
    s.wait_port(ports[2]);
    // nginx reads every ssl_password_file at load, used or not.
    for rx in [used, unused] {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the FIFO was read");
    }
    for (port, body) in [(ports[0], "one\n"), (ports[1], "two\n")] {
        let out = curl(&[&format!("https://127.0.0.1:{port}/")]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), body);
    }
}

const UPSTREAM: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_certificate {dir}/self.crt;
        ssl_certificate_key {dir}/self.key;
        location / { return 200 "upstream\n"; }
    }
    server {
        listen 127.0.0.1:{port0};
        proxy_ssl_verify on;
        proxy_ssl_trusted_certificate {dir}/self.crt;
        location /cn { proxy_pass https://127.0.0.1:{port1}/; proxy_ssl_name self; }
        location /other { proxy_pass https://127.0.0.1:{port1}/; proxy_ssl_name other; }
        location /untrusted {
            proxy_pass https://127.0.0.1:{port1}/;
            proxy_ssl_name self;
            proxy_ssl_trusted_certificate {dir}/root.crt;
        }
    }
}
"#;

#[test]
fn upstream_v1_certificate_verifies_by_common_name_only() {
    let dir = tempdir("upstream-verify");
    pki(&dir);
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let conf = render(UPSTREAM, &dir, &ports);
    let _s = Server::start_in(&dir, &conf, ports[0]);
    let status = |path: &str| {
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("http://127.0.0.1:{}{path}", ports[0]),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(status("/cn"), "200");
    assert_eq!(status("/other"), "502", "a name the certificate is not for");
    assert_eq!(status("/untrusted"), "502", "a CA that did not sign it");
}
