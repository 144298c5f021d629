//! `ssl_crl` and `ssl_trusted_certificate` for client certificates, as nginx: a revoked
//! client certificate fails (`$ssl_client_verify` says `FAILED:certificate revoked`), and a
//! chain may lead to `ssl_trusted_certificate`, whose names are not sent to the client.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

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

/// A CA (`ca.crt`), clients `good` and `revoked` signed by it, `ca.crl` revoking the second,
/// a `stranger` the CA never signed, and `deep` signed by an intermediate (sent with it).
fn pki(dir: &Path) {
    sh(
        r#"
printf '[ ca ]\ndefault_ca = myca\n[ myca ]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 1\n' > ca.conf
: > index.txt
echo 01 > crlnumber
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=crl-test-ca -keyout ca.key -out ca.crt 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
n=10
for c in good revoked; do
  n=$((n+1))
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$c \
    -keyout $c.key -out $c.csr 2>/dev/null
  openssl x509 -req -in $c.csr -CA ca.crt -CAkey ca.key -set_serial $n -days 30 \
    -extfile client.ext -out $c.crt 2>/dev/null
done
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=stranger -keyout stranger.key -out stranger.crt 2>/dev/null
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign\n' > int.ext
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=int \
  -keyout int.key -out int.csr 2>/dev/null
openssl x509 -req -in int.csr -CA ca.crt -CAkey ca.key -set_serial 20 -days 30 \
  -extfile int.ext -out int.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=deep \
  -keyout deep.key -out deep.csr 2>/dev/null
openssl x509 -req -in deep.csr -CA int.crt -CAkey int.key -set_serial 21 -days 30 \
  -extfile client.ext -out deep.leaf 2>/dev/null
cat deep.leaf int.crt > deep.crt
openssl ca -config ca.conf -revoke revoked.crt -keyfile ca.key -cert ca.crt 2>/dev/null
openssl ca -config ca.conf -gencrl -keyfile ca.key -cert ca.crt -out ca.crl 2>/dev/null
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
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_verify_client optional;
        ssl_client_certificate {dir}/pki/ca.crt;
        ssl_crl {dir}/pki/ca.crl;
        error_page 495 = /verify;
        location / { return 200 "$ssl_client_verify"; }
        location /verify { return 200 "$ssl_client_verify"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_verify_client optional;
        ssl_trusted_certificate {dir}/pki/ca.crt;
        error_page 495 = /verify;
        location / { return 200 "$ssl_client_verify"; }
        location /verify { return 200 "$ssl_client_verify"; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        ssl_verify_client optional;
        ssl_client_certificate {dir}/pki/ca.crt;
        ssl_verify_depth 0;
        error_page 495 = /verify;
        location / { return 200 "$ssl_client_verify"; }
        location /verify { return 200 "$ssl_client_verify"; }
    }
}
"#;

fn verify(port: u16, pki: &Path, client: &str) -> String {
    let cert = pki.join(format!("{client}.crt"));
    let key = pki.join(format!("{client}.key"));
    let out = curl(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        &format!("https://127.0.0.1:{port}/"),
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn s_client(port: u16) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn revoked_clients_fail_and_trusted_certificates_anchor_chains() {
    let dir = tempdir("client-crl");
    let pki_dir = dir.join("pki");
    std::fs::create_dir_all(&pki_dir).unwrap();
    pki(&pki_dir);
    let ports = [free_port(), free_port(), free_port()];
    let conf = render(CONF, &dir, &ports);
    let _s = Server::start_in(&dir, &conf, ports[0]);

    assert_eq!(verify(ports[0], &pki_dir, "good"), "SUCCESS");
    assert_eq!(
        verify(ports[0], &pki_dir, "revoked"),
        "FAILED:certificate revoked"
    );
    let stranger = verify(ports[0], &pki_dir, "stranger");
    assert!(stranger.starts_with("FAILED:"), "{stranger}");

    // ssl_trusted_certificate alone: chains lead to it, but its names are not sent.
    assert_eq!(verify(ports[1], &pki_dir, "good"), "SUCCESS");
    let stranger = verify(ports[1], &pki_dir, "stranger");
    assert!(stranger.starts_with("FAILED:"), "{stranger}");
    // ssl_verify_depth: 1 (the default) takes one intermediate, 0 none.
    assert_eq!(verify(ports[1], &pki_dir, "deep"), "SUCCESS");
    assert_eq!(verify(ports[2], &pki_dir, "good"), "SUCCESS");
    assert_eq!(
        verify(ports[2], &pki_dir, "deep"),
        "FAILED:certificate chain too long"
    );

    let text = s_client(ports[1]);
    assert!(
        text.contains("No client certificate CA names sent"),
        "{text}"
    );
    let text = s_client(ports[0]);
    assert!(text.contains("CN = crl-test-ca"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_without_crls_is_refused_at_load() {
    let dir = tempdir("client-crl-bad");
    std::fs::write(dir.join("empty.crl"), "not a CRL\n").unwrap();
    let conf = render(
        "pid off;\nerror_log stderr;\nevents {}\nhttp { server { listen 127.0.0.1:{port0} ssl;\n\
         ssl_certificate {certs}/localhost.crt; ssl_certificate_key {certs}/localhost.key;\n\
         ssl_verify_client on; ssl_client_certificate {certs}/ca.crt; ssl_crl {dir}/empty.crl; } }\n",
        &dir,
        &[free_port()],
    );
    std::fs::write(dir.join("t.conf"), conf).unwrap();
    let out = firstbyte(&["-t", "-c", dir.join("t.conf").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("empty.crl"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
