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

/// One `openssl s_client` GET of `/` on `port` (`version`: `-tls1_2` or `-tls1_3`),
/// resuming the session saved in `from` if given, saving the session to `to`. Returns the
/// body (`$ssl_session_reused|$ssl_session_id|$ssl_protocol`) and the TLS 1.2 `Session-ID`
/// that s_client printed (lower case; empty when none).
fn session_get(
    port: u16,
    version: &str,
    from: Option<&std::path::Path>,
    to: &std::path::Path,
) -> (String, String) {
    session_get_as("localhost", port, version, from, to)
}

/// [`session_get`] with the server name `sni`.
fn session_get_as(
    sni: &str,
    port: u16,
    version: &str,
    from: Option<&std::path::Path>,
    to: &std::path::Path,
) -> (String, String) {
    let first = ["-servername", sni, version, "-sess_out"];
    let mut args: Vec<&std::ffi::OsStr> = first.iter().map(std::ffi::OsStr::new).collect();
    args.push(to.as_os_str());
    if let Some(from) = from {
        args.push(std::ffi::OsStr::new("-sess_in"));
        args.push(from.as_os_str());
    }
    // A request and -ign_eof keep s_client reading until the server closes, so the TLS 1.3
    // tickets that follow the handshake are received and saved.
    let out = s_client_get(port, &args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let body = text
        .lines()
        .find(|l| l.contains("|TLSv1."))
        .unwrap_or_else(|| panic!("no body: {text}{}", String::from_utf8_lossy(&out.stderr)))
        .trim()
        .to_string();
    let wire = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Session-ID:"))
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    (body, wire)
}

/// `$ssl_session_id` as nginx's: 64 hex digits on a full handshake, and a resumed session
/// shows the id of the connection it resumes, with the stateful cache and with tickets, in
/// TLS 1.2 and TLS 1.3; unrelated connections differ. With the TLS 1.2 cache it is the
/// session id on the wire.
#[test]
fn session_id_is_stable_across_resumption() {
    let (_s, ports) = Server::start(
        "ssl-vars-sessid",
        r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_certificate {certs}/localhost.crt;
    ssl_certificate_key {certs}/localhost.key;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_session_cache shared:SSL:1m;
        ssl_session_tickets off;
        location / { return 200 "$ssl_session_reused|$ssl_session_id|$ssl_protocol\n"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_session_tickets on;
        location / { return 200 "$ssl_session_reused|$ssl_session_id|$ssl_protocol\n"; }
    }
}
"#,
        2,
    );
    let dir = tempdir("ssl-vars-sessid-client");
    let mut seen = Vec::new();
    for (port, what) in [(ports[0], "cache"), (ports[1], "tickets")] {
        for version in ["-tls1_2", "-tls1_3"] {
            let sess = |n: u32| dir.join(format!("{what}{version}-{n}"));
            let (first, wire) = session_get(port, version, None, &sess(0));
            let parts: Vec<&str> = first.split('|').collect();
            assert_eq!(parts.len(), 3, "{first}");
            let id = parts[1].to_string();
            assert_eq!(parts[0], ".", "{what} {version}: full handshake: {first}");
            assert_eq!(id.len(), 64, "{what} {version}: {first}");
            assert!(
                id.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
                "{first}"
            );
            if (what, version) == ("cache", "-tls1_2") {
                assert_eq!(wire, id, "the TLS 1.2 session id on the wire");
            }
            // A resumption, then a resumption of that: with the TLS 1.3 tickets the resumed
            // connection got (s_client saves no TLS 1.2 session it reused: the first again).
            for round in 0..2 {
                let from = (0..=round).rev().map(sess).find(|p| p.exists());
                let (again, _) = session_get(port, version, from.as_deref(), &sess(round + 1));
                assert_eq!(
                    again,
                    format!("r|{id}|{}", parts[2]),
                    "{what} {version} resumption {round}"
                );
            }
            seen.push(id);
        }
    }
    // A connection that resumes nothing gets an id of its own; so does one whose ticket
    // opens but is refused (made for another server name: rustls then does a full handshake).
    let (other, _) = session_get(ports[1], "-tls1_3", None, &dir.join("fresh"));
    seen.push(other.split('|').nth(1).unwrap().to_string());
    let from = dir.join("tickets-tls1_3-0");
    let (refused, _) = session_get_as(
        "other.test",
        ports[1],
        "-tls1_3",
        Some(&from),
        &dir.join("x"),
    );
    assert!(refused.starts_with(".|"), "{refused}");
    seen.push(refused.split('|').nth(1).unwrap().to_string());
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        seen.len(),
        "unrelated sessions differ: {seen:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
