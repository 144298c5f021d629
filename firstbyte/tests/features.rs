//! Static-file and TLS features through the real binary: `gzip_static` (and `.br`), Brotli,
//! `disable_symlinks`, `ssl_session_ticket_key` shared by two processes, `ssl_verify_client`.

mod support;

use std::process::{Command, Stdio};

use support::*;

fn url(port: u16, path: &str) -> String {
    format!("https://localhost:{port}{path}")
}

#[test]
fn precompressed_and_dynamic_compression_and_symlinks() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    types { text/css css; text/html html; }
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    server {
        listen 127.0.0.1:{port0} ssl;
        root {dir}/html;
        location /static/ { gzip_static on; gzip_vary on; }
        location /br/ { brotli on; brotli_types text/css; }
        location /strict/ { disable_symlinks on; }
    }
}
"#;
    let (server, ports) = Server::start("features", conf, 1);
    let port = ports[0];
    let html = server.dir.join("html");
    for d in ["static", "br", "strict"] {
        std::fs::create_dir_all(html.join(d)).unwrap();
    }
    let css = "a { color: blue; }\n".repeat(200);
    std::fs::write(html.join("static/app.css"), &css).unwrap();
    std::fs::write(html.join("static/app.css.gz"), b"pretend-gzip").unwrap();
    std::fs::write(html.join("static/app.css.br"), b"pretend-brotli").unwrap();
    std::fs::write(html.join("br/app.css"), &css).unwrap();
    std::fs::write(server.dir.join("outside.txt"), "behind a link\n").unwrap();
    std::os::unix::fs::symlink(server.dir.join("outside.txt"), html.join("strict/link.txt"))
        .unwrap();
    std::os::unix::fs::symlink(server.dir.join("outside.txt"), html.join("link.txt")).unwrap();

    // gzip_static: the .gz file when the client takes gzip, the .br one when it takes br.
    let (code, h, body) = curl_i(&["-H", "Accept-Encoding: gzip", &url(port, "/static/app.css")]);
    assert_eq!((code, body.as_slice()), (200, b"pretend-gzip".as_slice()));
    assert_eq!(header(&h, "content-encoding"), Some("gzip"));
    assert_eq!(header(&h, "vary"), Some("Accept-Encoding"));
    let (_, h, body) = curl_i(&[
        "-H",
        "Accept-Encoding: gzip, br",
        &url(port, "/static/app.css"),
    ]);
    assert_eq!(body, b"pretend-brotli");
    assert_eq!(header(&h, "content-encoding"), Some("br"));
    let (_, h, body) = curl_i(&[&url(port, "/static/app.css")]);
    assert_eq!(body, css.as_bytes());
    assert_eq!(header(&h, "content-encoding"), None);

    // Dynamic Brotli, decoded by curl.
    let (_, h, raw) = curl_i(&["-H", "Accept-Encoding: br", &url(port, "/br/app.css")]);
    assert_eq!(header(&h, "content-encoding"), Some("br"));
    assert!(
        raw.len() < css.len() / 10,
        "brotli output {} bytes",
        raw.len()
    );
    let out = curl(&["--compressed", &url(port, "/br/app.css")]);
    assert_eq!(out.stdout, css.as_bytes());

    // disable_symlinks on refuses a link; off (the default) follows it.
    let (code, _, _) = curl_i(&[&url(port, "/strict/link.txt")]);
    assert_eq!(code, 403);
    let (code, _, body) = curl_i(&[&url(port, "/link.txt")]);
    assert_eq!(
        (code, body.as_slice()),
        (200, b"behind a link\n".as_slice())
    );
}

fn s_client(port: u16, args: &[&str]) -> String {
    let mut c = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "localhost",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    {
        use std::io::Write;
        let mut stdin = c.stdin.take().unwrap();
        let _ = stdin.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    }
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Two firstbyte processes with the same `ssl_session_ticket_key` resume each other's
/// sessions: what a fleet behind one name needs.
#[test]
fn ticket_keys_from_a_file_are_shared_by_processes() {
    let keydir = tempdir("ticket-key");
    let key = keydir.join("ticket.key");
    let bytes: Vec<u8> = (0..80u32).map(|i| (i * 37 + 11) as u8).collect();
    std::fs::write(&key, bytes).unwrap();
    let conf = format!(
        r#"
pid off;
error_log {{dir}}/error.log;
events {{}}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{{port0}} ssl;
        ssl_certificate {{certs}}/localhost.crt;
        ssl_certificate_key {{certs}}/localhost.key;
        ssl_session_ticket_key {};
        root {{dir}}/html;
    }}
}}
"#,
        key.display()
    );
    let (_a, pa) = Server::start("tickets-a", &conf, 1);
    let (_b, pb) = Server::start("tickets-b", &conf, 1);
    let sess = keydir.join("sess");
    let sess = sess.to_str().unwrap();
    let first = s_client(pa[0], &["-tls1_3", "-ign_eof", "-sess_out", sess]);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    let other = s_client(pb[0], &["-tls1_3", "-ign_eof", "-sess_in", sess]);
    assert!(
        other.contains("Reused, TLSv1.3"),
        "the other process must resume: {other}"
    );
    // A process with its own generated keys cannot.
    let own = conf.replace(&format!("ssl_session_ticket_key {};", key.display()), "");
    let (_c, pc) = Server::start("tickets-c", &own, 1);
    let third = s_client(pc[0], &["-tls1_3", "-ign_eof", "-sess_in", sess]);
    assert!(third.contains("New, TLSv1.3"), "{third}");
}

#[test]
fn client_certificates_are_required_and_verified() {
    let dir = tempdir("client-cert");
    client_certs(&dir);
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        ssl_verify_client on;
        ssl_client_certificate {certs}/ca.crt;
        root {dir}/html;
    }
}
"#;
    let (_server, ports) = Server::start("verify-client", conf, 1);
    let u = url(ports[0], "/");
    let code = |args: &[&str]| {
        let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        a.extend_from_slice(args);
        a.push(&u);
        String::from_utf8_lossy(&curl(&a).stdout).into_owned()
    };
    let cert = dir.join("client.crt");
    let key = dir.join("client.key");
    assert_eq!(
        code(&[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap()
        ]),
        "200"
    );
    // As nginx: the handshake completes, the request gets the 400 page (496, 495).
    assert_eq!(code(&[]), "400", "no certificate: the request is refused");
    let sc = dir.join("stranger.crt");
    let sk = dir.join("stranger.key");
    assert_eq!(
        code(&[
            "--cert",
            sc.to_str().unwrap(),
            "--key",
            sk.to_str().unwrap()
        ]),
        "400",
        "a certificate from another CA is refused"
    );
}
