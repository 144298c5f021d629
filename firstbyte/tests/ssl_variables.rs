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
