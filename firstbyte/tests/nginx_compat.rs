//! What nginx's own test suite (and configurations written for nginx) expect of the binary:
//! X.509 v1 certificates serve, variable certificate paths read from the configuration
//! prefix, nginx's command line (`-e`, `-V`'s `configure arguments:`).

mod support;

use std::path::Path;
use std::process::Command;

use support::*;

/// `{dir}` and `{port0}` filled in (support's `render` would also make its certificate set,
/// which takes seconds, for nothing here).
fn fill(template: &str, dir: &Path, port: u16) -> String {
    template
        .replace("{dir}", &dir.display().to_string())
        .replace("{port0}", &port.to_string())
}

/// Makes `NAME.crt`/`NAME.key` for `localhost` in `dir`, self-signed. `v1`: an X.509 v1
/// certificate, as `openssl req -x509` writes it when its configuration has no extensions
/// section (nginx-tests makes all its certificates so); else v3 with a subjectAltName.
fn self_signed(dir: &Path, name: &str, v1: bool) {
    let cnf = dir.join("req.cnf");
    let ext = if v1 {
        ""
    } else {
        "x509_extensions = ext\n[ext]\nsubjectAltName = DNS:localhost\n"
    };
    std::fs::write(
        &cnf,
        format!("[req]\ndistinguished_name = dn\nprompt = no\n{ext}[dn]\nCN = localhost\n"),
    )
    .unwrap();
    let crt = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-config"])
        .arg(&cnf)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Served by `nobody` when the test runs as root.
    for f in [&crt, &key] {
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644);
        std::fs::set_permissions(f, mode).unwrap();
    }
    let text = run(
        "openssl",
        &["x509", "-noout", "-text", "-in", crt.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&text.stdout);
    let version = if v1 {
        "Version: 1 (0x0)"
    } else {
        "Version: 3 (0x2)"
    };
    assert!(text.contains(version), "{text}");
}

/// An X.509 v1 certificate loads (`-t`) and serves, as in nginx; webpki's end-entity parser
/// refused it with `UnsupportedCertVersion`.
#[test]
fn x509_v1_certificates_load_and_serve() {
    let dir = tempdir("v1cert");
    self_signed(&dir, "v1", true);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), "v1 served\n").unwrap();
    let port = free_port();
    let conf = fill(
        r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {dir}/v1.crt;
        ssl_certificate_key {dir}/v1.key;
        root {dir}/html;
    }
}
"#,
        &dir,
        port,
    );
    std::fs::write(dir.join("t.conf"), &conf).unwrap();
    let t = firstbyte(&["-t", "-c", dir.join("t.conf").to_str().unwrap()]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let server = Server::start_in(&dir, &conf, port);
    for proto in ["--http1.1", "--http2"] {
        let (code, _, body) = curl_i(&[proto, &format!("https://localhost:{port}/")]);
        assert_eq!((code, body.as_slice()), (200, b"v1 served\n".as_slice()));
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ssl_certificate $ssl_server_name.crt` (relative) reads the files next to the
/// configuration (nginx's conf prefix), not in the working directory: nginx-tests'
/// `ssl_certificate_cache.t` writes its configuration this way.
#[test]
fn relative_variable_certificates_resolve_against_the_configuration_prefix() {
    let dir = tempdir("varcert");
    self_signed(&dir, "localhost", false);
    let port = free_port();
    let conf = fill(
        r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    ssl_certificate $ssl_server_name.crt;
    ssl_certificate_key $ssl_server_name.key;
    server {
        listen 127.0.0.1:{port0} ssl;
        location / { return 200 "sni $ssl_server_name\n"; }
    }
}
"#,
        &dir,
        port,
    );
    // The working directory (the crate's, where cargo runs tests) holds no certificate.
    assert!(!Path::new("localhost.crt").exists());
    let server = Server::start_in(&dir, &conf, port);
    let (code, _, body) = curl_i(&["--http1.1", &format!("https://localhost:{port}/")]);
    assert_eq!(
        (code, body.as_slice()),
        (200, b"sni localhost\n".as_slice())
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
