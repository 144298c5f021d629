//! `$ssl_curve` and `$ssl_curves` as nginx: the group of the key exchange, and the groups
//! the client offered, in its order, by OpenSSL's names.

mod support;

use support::*;

#[test]
fn curve_variables_name_the_groups() {
    let (_s, ports) = Server::start(
        "ssl-vars",
        r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        location / { return 200 "$ssl_curve|$ssl_curves"; }
    }
}
"#,
        1,
    );
    let url = format!("https://127.0.0.1:{}/", ports[0]);
    let out = curl(&["--curves", "P-256:X25519", &url]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "prime256v1|prime256v1:x25519"
    );
    let out = curl(&["--curves", "X25519", &url]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x25519|x25519");
}

/// A client certificate of X.509 v1 (what `openssl req -x509` makes with a config that names
/// no extensions, as nginx's tests do) is taken with `ssl_verify_client optional_no_ca`, as
/// OpenSSL takes it: the handshake completes and the variables describe it.
#[test]
fn x509_v1_client_certificates_are_taken() {
    let dir = tempdir("ssl-vars-v1");
    std::fs::write(
        dir.join("openssl.conf"),
        "[ req ]\ndefault_bits = 2048\nencrypt_key = no\ndistinguished_name = dn\n[ dn ]\n",
    )
    .unwrap();
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-new",
            "-config",
            "openssl.conf",
            "-subj",
            "/CN=v1client/",
            "-out",
            "v1.crt",
            "-keyout",
            "v1.key",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = run(
        "openssl",
        &[
            "x509",
            "-noout",
            "-text",
            "-in",
            dir.join("v1.crt").to_str().unwrap(),
        ],
    );
    assert!(String::from_utf8_lossy(&text.stdout).contains("Version: 1 (0x0)"));
    let (_s, ports) = Server::start(
        "ssl-vars-v1-srv",
        r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        ssl_verify_client optional_no_ca;
        location / { return 200 "$ssl_client_verify|$ssl_client_s_dn"; }
    }
}
"#,
        1,
    );
    let out = curl(&[
        "--tlsv1.3",
        "--cert",
        dir.join("v1.crt").to_str().unwrap(),
        "--key",
        dir.join("v1.key").to_str().unwrap(),
        &format!("https://127.0.0.1:{}/", ports[0]),
    ]);
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.ends_with("|CN=v1client"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}
