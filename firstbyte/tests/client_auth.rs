//! Client certificates hold per request and per session: a client that connects by IP
//! address (no SNI) cannot reach a server block that verifies clients, a session made on a port
//! without client checks does not resume on one with them (tickets and the session cache), and
//! `ssl_verify_client optional` answers nginx's 400 pages and fills `$ssl_client_*`.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::*;

/// The issue's four servers: a default block and `mtls.example` (client checks) on port0;
/// `api.example` without checks on port1 and with them on port2. `{optional}` is [`OPTIONAL`]
/// or nothing.
const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    ssl_session_cache shared:SSL:1m;
    server {
        listen 127.0.0.1:{port0} ssl default_server;
        server_name default.example;
        location / { return 200 "public\n"; }
    }
    server {
        listen 127.0.0.1:{port0} ssl;
        server_name mtls.example;
        ssl_verify_client on;
        ssl_client_certificate {certs}/ca.crt;
        location / { return 200 "protected\n"; }
    }
{optional}    server {
        listen 127.0.0.1:{port1} ssl;
        server_name api.example;
        location / { return 200 "api open\n"; }
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        server_name api.example;
        ssl_verify_client on;
        ssl_client_certificate {certs}/ca.crt;
        location / { return 200 "api protected\n"; }
    }
}
"#;

/// `opt.example` on port0: `ssl_verify_client optional`, echoing the client variables.
const OPTIONAL: &str = r#"
    server {
        listen 127.0.0.1:{port0} ssl;
        server_name opt.example;
        ssl_verify_client optional;
        ssl_client_certificate {certs}/ca.crt;
        location / { return 200 "$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn|$ssl_client_serial|$ssl_client_fingerprint\n"; }
        location /pem { return 200 "$ssl_client_escaped_cert"; }
    }
"#;

fn start(optional: bool) -> (Server, Vec<u16>, PathBuf) {
    let conf = CONF.replace("{optional}", if optional { OPTIONAL } else { "" });
    let (s, ports) = Server::start("client-auth", &conf, 3);
    let certdir = s.dir.join("clients");
    std::fs::create_dir_all(&certdir).unwrap();
    client_certs(&certdir);
    (s, ports, certdir)
}

/// (status, body) of a curl request; `extra` are curl options.
fn get(url: &str, extra: &[&str]) -> (u16, String) {
    let mut a = vec!["-w", "\n%{http_code}"];
    a.extend_from_slice(extra);
    a.push(url);
    let out = curl(&a);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.trim().parse().unwrap_or(0),
        body.trim_end_matches('\n').to_string(),
    )
}

fn resolve(name: &str, port: u16) -> String {
    format!("{name}:{port}:127.0.0.1")
}

#[test]
fn no_sni_cannot_reach_a_server_that_verifies_clients() {
    let (_s, p, dir) = start(false);
    let by_ip = format!("https://127.0.0.1:{}/", p[0]);
    // curl sends no SNI to an IP address.
    let (code, body) = get(&by_ip, &["-H", "Host: mtls.example"]);
    assert_eq!(code, 421, "no SNI, Host of a verifying server: {body}");
    assert!(!body.contains("protected"));
    let (code, body) = get(&by_ip, &["-H", "Host: default.example"]);
    assert_eq!((code, body.as_str()), (200, "public"));
    // With SNI and a certificate the protected server answers.
    let cert = dir.join("client.crt");
    let key = dir.join("client.key");
    let (code, body) = get(
        &format!("https://mtls.example:{}/", p[0]),
        &[
            "--resolve",
            &resolve("mtls.example", p[0]),
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!((code, body.as_str()), (200, "protected"));
    // SNI of the open server, Host of the protected one: 421, over HTTP/2 too.
    for proto in ["--http1.1", "--http2"] {
        let (code, _) = get(
            &format!("https://default.example:{}/", p[0]),
            &[
                proto,
                "--resolve",
                &resolve("default.example", p[0]),
                "-H",
                "Host: mtls.example",
            ],
        );
        assert_eq!(code, 421, "{proto}");
    }
}

/// `openssl s_client` to `port` with SNI `name`, one GET; stdout + stderr.
fn s_client(port: u16, name: &str, args: &[&str]) -> String {
    let mut c = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            name,
            "-ign_eof",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl");
    {
        let mut stdin = c.stdin.take().unwrap();
        let _ = write!(
            stdin,
            "GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"
        );
    }
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A session from the port without client checks does not resume where they are required;
/// the same session still resumes on its own port (so the test can see resumption at all).
/// TLS 1.3 tickets and TLS 1.2 session IDs from the cache, each.
#[test]
fn sessions_resume_only_where_they_were_made() {
    let (s, p, _dir) = start(false);
    for (ver, extra) in [("-tls1_3", None), ("-tls1_2", Some("-no_ticket"))] {
        let sess = s.dir.join(format!("sess{ver}"));
        let sess = sess.to_str().unwrap();
        let mut args = vec![ver, "-sess_out", sess];
        args.extend(extra);
        let first = s_client(p[1], "api.example", &args);
        assert!(first.contains("api open"), "{ver}: {first}");
        let mut again = vec![ver, "-sess_in", sess];
        again.extend(extra);
        let same = s_client(p[1], "api.example", &again);
        assert!(same.contains("Reused, "), "{ver}, same port: {same}");
        let other = s_client(p[2], "api.example", &again);
        assert!(!other.contains("Reused, "), "{ver}, other port: {other}");
        assert!(
            !other.contains("api protected"),
            "{ver}: the protected server answered without a certificate: {other}"
        );
    }
}

#[test]
fn optional_verification_answers_nginx_pages_and_variables() {
    let (_s, p, dir) = start(true);
    let url = format!("https://opt.example:{}/", p[0]);
    let r = resolve("opt.example", p[0]);
    let (code, body) = get(&url, &["--resolve", &r]);
    assert_eq!((code, body.as_str()), (200, "NONE||||"));

    let cert = dir.join("client.crt");
    let key = dir.join("client.key");
    let with = |c: &Path, k: &Path, u: &str| {
        get(
            u,
            &[
                "--resolve",
                &r,
                "--cert",
                c.to_str().unwrap(),
                "--key",
                k.to_str().unwrap(),
            ],
        )
    };
    let (code, body) = with(&cert, &key, &url);
    assert_eq!(code, 200, "{body}");
    let f: Vec<&str> = body.split('|').collect();
    assert_eq!(f[0], "SUCCESS");
    assert_eq!(f[1], "CN=client one,O=Acme\\, Inc");
    assert_eq!(f[2], "CN=firstbyte-test-ca");
    assert!(!f[3].is_empty() && f[3].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(f[4].len(), 40, "SHA-1 fingerprint: {body}");
    let (code, pem) = with(&cert, &key, &format!("{url}pem"));
    assert_eq!(code, 200);
    assert!(pem.starts_with("-----BEGIN%20CERTIFICATE-----%0A"), "{pem}");

    // A certificate the CA did not sign: the handshake completes, the request gets nginx's
    // "400 The SSL certificate error" page.
    let (code, body) = with(&dir.join("stranger.crt"), &dir.join("stranger.key"), &url);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("The SSL certificate error"), "{body}");
}
