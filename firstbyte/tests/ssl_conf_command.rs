//! `ssl_conf_command` as nginx applies OpenSSL's commands: after the directives, so
//! `Options SessionTicket` / `-SessionTicket` go over `ssl_session_tickets`,
//! `ServerPreference` / `-ServerPreference` over `ssl_prefer_server_ciphers`, and
//! `Certificate` / `PrivateKey` take the place of the configured certificate of the same key
//! type (or join one of another type). What rustls cannot do is refused at `-t`.

mod support;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256;
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        ssl_certificate {certs}/a-rsa.crt;
        ssl_certificate_key {certs}/a-rsa.key;
        ssl_session_tickets off;
        ssl_conf_command Options SessionTicket;
        ssl_prefer_server_ciphers on;
        ssl_conf_command Options -ServerPreference;
        ssl_conf_command Certificate {certs}/b.test.crt;
        ssl_conf_command PrivateKey {certs}/b.test.key;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        ssl_conf_command Options ServerPreference,-SessionTicket;
        ssl_conf_command Certificate {certs}/a-rsa.crt;
        ssl_conf_command PrivateKey {certs}/a-rsa.key;
        location / { return 200 "ok\n"; }
    }
}
"#;

/// `openssl s_client` to `port` with `args`, one request; stdout.
fn s_client(port: u16, args: &[&str]) -> String {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    String::from_utf8_lossy(&s_client_get(port, &args).stdout).into_owned()
}

/// The leaf's subject line (`subject=CN = b.test`).
fn subject(out: &str) -> &str {
    out.lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or_else(|| panic!("no certificate: {out}"))
}

#[test]
fn conf_commands_go_over_the_directives() {
    let (_s, ports) = Server::start("ssl-conf-command", CONF, 2);
    let dir = tempdir("ssl-conf-command-client");
    let sess = dir.join("sess").display().to_string();

    // Certificate: the ECDSA pair of `Certificate` took the configured ECDSA one's place;
    // the RSA pair stays for RSA-only clients.
    let ec = s_client(ports[0], &["-tls1_2", "-sigalgs", "ECDSA+SHA256"]);
    assert_eq!(subject(&ec), "subject=CN = b.test", "{ec}");
    let rsa = s_client(ports[0], &["-tls1_2", "-sigalgs", "RSA+SHA256"]);
    assert_eq!(subject(&rsa), "subject=CN = a.test", "{rsa}");
    // An RSA `Certificate` beside an ECDSA `ssl_certificate`: both are served.
    let ec = s_client(ports[1], &["-tls1_2", "-sigalgs", "ECDSA+SHA256"]);
    assert_eq!(subject(&ec), "subject=CN = localhost", "{ec}");
    let rsa = s_client(ports[1], &["-tls1_2", "-sigalgs", "RSA+SHA256"]);
    assert_eq!(subject(&rsa), "subject=CN = a.test", "{rsa}");

    // Options SessionTicket over `ssl_session_tickets off` (no session cache: tickets are
    // the only way to resume), and -SessionTicket over the default `on`.
    let first = s_client(ports[0], &["-tls1_2", "-sess_out", &sess]);
    assert!(first.contains("New, "), "{first}");
    let again = s_client(ports[0], &["-tls1_2", "-sess_in", &sess]);
    assert!(again.contains("Reused, "), "{again}");
    std::fs::remove_file(&sess).unwrap();
    // Without a ticket or a session id, s_client has no session to save.
    let first = s_client(ports[1], &["-tls1_2", "-sess_out", &sess]);
    assert!(first.contains("New, "), "{first}");
    assert!(
        !std::path::Path::new(&sess).exists(),
        "no resumable session"
    );

    // -ServerPreference over `ssl_prefer_server_ciphers on`: the client's order; and
    // ServerPreference: the server's (`ssl_ciphers` names AES256 first).
    let client_order = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384";
    for (port, chosen) in [
        (ports[0], "ECDHE-ECDSA-AES128-GCM-SHA256"),
        (ports[1], "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ] {
        let out = s_client(port, &["-tls1_2", "-cipher", client_order]);
        assert!(
            out.contains(&format!("Cipher is {chosen}")),
            "port {port}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What rustls cannot honour is an `[emerg]` naming the file and line.
#[test]
fn commands_firstbyte_cannot_honour_are_refused() {
    let dir = tempdir("ssl-conf-command-t");
    let certs = certs();
    for (command, refused) in [
        (
            "ssl_conf_command Options PrioritizeChaCha;",
            "ssl_conf_command \"Options PrioritizeChaCha\" is not supported by firstbyte yet",
        ),
        (
            "ssl_conf_command PrivateKey other.key;",
            "ssl_conf_command \"PrivateKey\" without \"Certificate\" is not supported by firstbyte yet",
        ),
        (
            "ssl_conf_command MinProtocol TLSv1.3;",
            "ssl_conf_command \"MinProtocol\" is not supported by firstbyte yet",
        ),
    ] {
        let conf = dir.join("t.conf");
        std::fs::write(
            &conf,
            format!(
                "pid off;\nevents {{}}\nhttp {{\n access_log off;\n server {{\n  listen 127.0.0.1:9 ssl;\n  ssl_certificate {};\n  ssl_certificate_key {};\n  {command}\n }}\n}}\n",
                certs.cert("localhost").display(),
                certs.key("localhost").display()
            ),
        )
        .unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: {err}");
        assert!(
            err.contains(&format!("[emerg] {refused} in {}:9", conf.display())),
            "{command}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
