//! `ssl_stapling on` without `ssl_stapling_file`: firstbyte fetches the OCSP response from the
//! responder named in the certificate's AIA, checks it and staples it. The responder is
//! OpenSSL's own (`openssl ocsp -index ... -port ...`), the client `openssl s_client -status`.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{forget_at_exit, free_port, reap_at_exit, tempdir, Server};

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

/// A CA, a leaf whose AIA names `http://127.0.0.1:PORT/`, a delegated responder certificate,
/// and an OpenSSL CA index listing the leaf as `status` (`V` valid or `R` revoked).
fn pki(dir: &Path, port: u16, status: char) {
    let revoked = if status == 'R' { "261101000000Z" } else { "" };
    sh(
        &format!(
            r#"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=ocsp-test-ca \
  -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -keyout leaf.key -out leaf.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost\nauthorityInfoAccess=OCSP;URI:http://127.0.0.1:{port}/\n' > leaf.ext
openssl x509 -req -in leaf.csr -CA ca.crt -CAkey ca.key -set_serial 0x1234 -days 30 \
  -extfile leaf.ext -out leaf.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=ocsp-responder -keyout resp.key -out resp.csr 2>/dev/null
printf 'extendedKeyUsage=OCSPSigning\n' > resp.ext
openssl x509 -req -in resp.csr -CA ca.crt -CAkey ca.key -set_serial 0x99 -days 30 \
  -extfile resp.ext -out resp.crt 2>/dev/null
end=$(date -u -d '+30 days' +%y%m%d%H%M%SZ)
printf '{status}\t%s\t{revoked}\t1234\tunknown\t/CN=localhost\n' "$end" > index.txt
chmod 644 *.key
"#
        ),
        dir,
    );
}

/// OpenSSL's OCSP responder on 127.0.0.1:`port`, signing with the delegated responder key.
struct Responder(Child);

impl Responder {
    fn start(dir: &Path, port: u16) -> Responder {
        let child = Command::new("openssl")
            .args([
                "ocsp",
                "-index",
                "index.txt",
                "-port",
                &port.to_string(),
                "-rsigner",
                "resp.crt",
                "-rkey",
                "resp.key",
                "-CA",
                "ca.crt",
                "-nmin",
                "10",
                "-ignore_err",
                "-timeout",
                "5",
            ])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start openssl ocsp");
        reap_at_exit(child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        // Probed by binding, not connecting: `openssl ocsp` serves one connection at a time
        // and would wait on a probe that sends no request.
        while std::net::TcpListener::bind(("::", port)).is_ok() {
            assert!(Instant::now() < deadline, "openssl ocsp did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Responder(child)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        forget_at_exit(self.0.id());
    }
}

/// `openssl s_client -status` output for one handshake.
fn status(port: u16) -> String {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "localhost",
            "-status",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn start(dir: &Path, port: u16, extra: &str) -> Server {
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let conf = format!(
        "pid off;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n\
         server {{ listen 127.0.0.1:{port} ssl; root {d}/html;\n\
         ssl_certificate {d}/leaf.crt; ssl_certificate_key {d}/leaf.key;\n\
         ssl_stapling on; ssl_trusted_certificate {d}/ca.crt; {extra} }} }}\n",
        d = dir.display()
    );
    Server::start_in(dir, &conf, port)
}

/// Handshakes until one carries a staple (10 s at most); returns the last output.
fn until_stapled(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = status(port);
        if out.contains("OCSP Response Status: successful") || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn error_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
}

#[test]
fn fetched_response_is_verified_and_stapled() {
    let dir = tempdir("ocsp-good");
    let (rport, port) = (free_port(), free_port());
    pki(&dir, rport, 'V');
    let _responder = Responder::start(&dir, rport);
    let _server = start(&dir, port, "ssl_stapling_verify on;");
    let out = until_stapled(port);
    assert!(
        out.contains("OCSP Response Status: successful") && out.contains("Cert Status: good"),
        "no staple:\n{out}\n{}",
        error_log(&dir)
    );
    assert!(out.contains("Responder Id: CN = ocsp-responder"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn revoked_or_unverifiable_responses_are_not_stapled() {
    // Revoked: the responder answers, firstbyte refuses to staple and says why.
    let dir = tempdir("ocsp-revoked");
    let (rport, port) = (free_port(), free_port());
    pki(&dir, rport, 'R');
    let _responder = Responder::start(&dir, rport);
    let _server = start(&dir, port, "");
    let _ = status(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !error_log(&dir).contains("certificate status \"revoked\"") {
        assert!(Instant::now() < deadline, "{}", error_log(&dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(status(port).contains("OCSP response: no response sent"));
    let _ = std::fs::remove_dir_all(&dir);

    // Good, but verification on with a trusted file that is not its CA.
    let dir = tempdir("ocsp-untrusted");
    let (rport, port) = (free_port(), free_port());
    pki(&dir, rport, 'V');
    sh(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
         -subj /CN=other -keyout other.key -out other.crt 2>/dev/null; cat leaf.crt ca.crt > chain.crt",
        &dir,
    );
    let _responder = Responder::start(&dir, rport);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let conf = format!(
        "pid off;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{ access_log off;\n\
         server {{ listen 127.0.0.1:{port} ssl; root {d}/html;\n\
         ssl_certificate {d}/chain.crt; ssl_certificate_key {d}/leaf.key;\n\
         ssl_stapling on; ssl_stapling_verify on; ssl_trusted_certificate {d}/other.crt; }} }}\n",
        d = dir.display()
    );
    let _server = Server::start_in(&dir, &conf, port);
    let _ = status(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !error_log(&dir).contains("OCSP response not verified") {
        assert!(Instant::now() < deadline, "{}", error_log(&dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(status(port).contains("OCSP response: no response sent"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_responder_warns_and_serves_without() {
    let dir = tempdir("ocsp-down");
    let (rport, port) = (free_port(), free_port());
    pki(&dir, rport, 'V');
    let _server = start(&dir, port, "");
    let first = status(port);
    assert!(first.contains("OCSP response: no response sent"), "{first}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !error_log(&dir).contains("while requesting certificate status") {
        assert!(Instant::now() < deadline, "{}", error_log(&dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = error_log(&dir);
    assert!(log.contains("[warn]") && log.contains("connect()"), "{log}");
    // Still serving.
    assert!(status(port).contains("Verify return code"));
    let _ = std::fs::remove_dir_all(&dir);
}
