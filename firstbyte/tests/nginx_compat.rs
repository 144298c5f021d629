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

/// A TLS site in a new directory: a self-signed certificate `NAME.crt` (`v1`: X.509 v1),
/// `html/index.html` holding `index`, and a configuration with one server block on a free
/// port whose `listen` ends with `listen_tail` and which holds `directives`; `-t` must pass.
/// The directory, the port, the configuration and `-t`'s stderr.
fn tls_site(
    name: &str,
    v1: bool,
    listen_tail: &str,
    directives: &str,
    index: &str,
) -> (std::path::PathBuf, u16, String, String) {
    let dir = tempdir(name);
    self_signed(&dir, name, v1);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), index).unwrap();
    let port = free_port();
    let conf = fill(
        &format!(
            r#"
pid off;
error_log {{dir}}/error.log;
events {{}}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{{port0}}{listen_tail};
        {directives}
        ssl_certificate {{dir}}/{name}.crt;
        ssl_certificate_key {{dir}}/{name}.key;
        root {{dir}}/html;
    }}
}}
"#
        ),
        &dir,
        port,
    );
    std::fs::write(dir.join("t.conf"), &conf).unwrap();
    let t = firstbyte(&["-t", "-c", dir.join("t.conf").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&t.stderr).into_owned();
    assert!(t.status.success(), "{err}");
    (dir, port, conf, err)
}

/// An X.509 v1 certificate loads (`-t`) and serves, as in nginx; webpki's end-entity parser
/// refused it with `UnsupportedCertVersion`.
#[test]
fn x509_v1_certificates_load_and_serve() {
    let (dir, port, conf, _) = tls_site("v1", true, " ssl", "", "v1 served\n");
    let server = Server::start_in(&dir, &conf, port);
    for proto in ["--http1.1", "--http2"] {
        let (code, _, body) = curl_i(&[proto, &format!("https://localhost:{port}/")]);
        assert_eq!((code, body.as_slice()), (200, b"v1 served\n".as_slice()));
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The deprecated `ssl on` (nginx up to 1.24; tutorials still write it) loads with nginx
/// 1.22's warning and makes the server's address speak TLS, as `listen ... ssl` would.
#[test]
fn deprecated_ssl_on_serves_tls_with_a_warning() {
    let (dir, port, conf, err) = tls_site("on", false, "", "ssl on;", "ssl on served\n");
    assert!(
        err.contains("[warn] the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead in"),
        "{err}"
    );
    let server = Server::start_in(&dir, &conf, port);
    let (code, _, body) = curl_i(&["--http1.1", &format!("https://localhost:{port}/")]);
    assert_eq!(
        (code, body.as_slice()),
        (200, b"ssl on served\n".as_slice())
    );
    // Plain HTTP on it gets nginx's 400 page for a plain request on a TLS port.
    let (code, _, _) = curl_i(&["--http1.1", &format!("http://localhost:{port}/")]);
    assert_eq!(code, 400);
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

/// `-V` ends with nginx's `configure arguments:` line, derived from the directive table,
/// and the lines nginx's test harness reads (`has_module`, `has_feature('openssl:...')`).
#[test]
fn dash_big_v_prints_configure_arguments() {
    let o = firstbyte(&["-V"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("configure arguments: "))
        .unwrap_or_else(|| panic!("no configure arguments line:\n{text}"));
    let flags: Vec<&str> = line.split(' ').collect();
    for f in [
        "--with-http_ssl_module",
        "--with-http_v2_module",
        "--with-http_stub_status_module",
        "--with-http_gzip_static_module",
        "--without-http_uwsgi_module",
    ] {
        assert!(flags.contains(&f), "{f}: {line}");
    }
    assert!(!line.contains("http_proxy_module"), "{line}");
    assert!(!line.contains("http_fastcgi_module"), "{line}");
    assert!(!line.contains("http_rewrite_module"), "{line}");
    assert!(!line.contains("http_map_module"), "{line}");
    assert!(text.contains("TLS SNI support enabled"), "{text}");
    assert!(
        text.contains("built with OpenSSL 1.1.1 (compatible; rustls"),
        "{text}"
    );
}

/// nginx's test harness runs `BINARY -p DIR/ -c nginx.conf -e error.log`: the config is read
/// under the prefix (not the working directory), and `-e` is the error log of a
/// configuration that names none.
#[test]
fn prefix_relative_conf_and_dash_e_error_log() {
    let dir = tempdir("dash-e");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let port = free_port();
    std::fs::write(
        dir.join("nginx.conf"),
        fill(
            "pid nginx.pid;\nevents {}\nhttp {\n access_log off;\n server { listen 127.0.0.1:{port0}; root html; }\n}\n",
            &dir,
            port,
        ),
    )
    .unwrap();
    let mut child = Command::new(bin())
        .arg("-p")
        .arg(format!("{}/", dir.display()))
        .args(["-c", "nginx.conf", "-e", "error.log"])
        .current_dir("/")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start firstbyte");
    reap_at_exit(child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e);
            panic!("firstbyte exited ({st}): {e}");
        }
        assert!(std::time::Instant::now() < deadline, "no listener");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(dir.join("nginx.pid").exists(), "pid under the prefix");
    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://127.0.0.1:{port}/missing.html"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
    let mut log = String::new();
    for _ in 0..100 {
        log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
        if log.contains("missing.html") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    forget_at_exit(child.id());
    assert!(
        log.contains("[error]") && log.contains("missing.html"),
        "{log:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The simplest config — `events {}`, one `listen ... ssl` server with a certificate and a
/// root, no `access_log` — passes `-t` and serves with no `logs/` directory beside it (it
/// failed with `open() ".../logs/access.log" failed`): in the foreground the default access
/// log is `combined` lines on stdout.
#[test]
fn minimal_config_loads_and_logs_access_to_stdout() {
    let dir = tempdir("minimal");
    self_signed(&dir, "site", false);
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/index.html"), "minimal\n").unwrap();
    let port = free_port();
    let conf = dir.join("minimal.conf");
    std::fs::write(
        &conf,
        fill(
            "events {}\nhttp {\n server {\n  listen 127.0.0.1:{port0} ssl;\n  ssl_certificate site.crt;\n  ssl_certificate_key site.key;\n  root {dir}/www;\n }\n}\n",
            &dir,
            port,
        ),
    )
    .unwrap();
    let t = Command::new(bin())
        .args(["-t", "-c"])
        .arg(&conf)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    assert!(!dir.join("logs").exists());
    // `-g "pid off;"` only keeps this test from writing /run/firstbyte.pid.
    let mut child = Command::new(bin())
        .args(["-g", "pid off;", "-c"])
        .arg(&conf)
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start firstbyte");
    let pid = child.id();
    reap_at_exit(pid);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "firstbyte exited");
        assert!(std::time::Instant::now() < deadline, "no listener");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, _, body) = curl_i(&["--http1.1", &format!("https://localhost:{port}/")]);
    assert_eq!((code, body.as_slice()), (200, b"minimal\n".as_slice()));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    forget_at_exit(pid);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"GET / HTTP/1.1\" 200 8 \"-\" \"curl/"),
        "{stdout:?}"
    );
    assert!(!dir.join("logs").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A start that fails leaves its `[emerg]` in the `-e` file too (nginx opens it before it
/// reads the configuration), where nginx's test harness looks for it.
#[test]
fn dash_e_file_receives_startup_errors() {
    let dir = tempdir("dash-e-emerg");
    std::fs::write(
        dir.join("nginx.conf"),
        "events {}\nhttp { no_such_directive; }\n",
    )
    .unwrap();
    let o = Command::new(bin())
        .arg("-p")
        .arg(format!("{}/", dir.display()))
        .args(["-c", "nginx.conf", "-e", "error.log"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("[emerg]") && log.contains("unknown directive \"no_such_directive\""),
        "{log:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mozilla's SSL Configuration Generator output (the configuration corpus's mozilla/, as generated for
/// nginx 1.22) loads as written once its placeholder paths name real files: `ssl_stapling`
/// and `ssl_stapling_verify` load without a word (responses are fetched at run time),
/// `resolver` loads (it serves `proxy_pass` with variables), `ssl_trusted_certificate` is
/// loaded and checked.
#[test]
fn mozilla_generator_configurations_load() {
    let dir = tempdir("mozilla");
    self_signed(&dir, "site", false);
    let dh = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tls/ffdhe2048.pem");
    for name in ["intermediate", "modern"] {
        let text =
            std::fs::read_to_string(conf_corpus().join(format!("mozilla/{name}.conf"))).unwrap();
        let site = dir.join("site.crt").display().to_string();
        let key = dir.join("site.key").display().to_string();
        let text = text
            .replace("/path/to/signed_cert_plus_intermediates", &site)
            .replace("/path/to/private_key", &key)
            .replace("/path/to/root_CA_cert_plus_intermediates", &site)
            .replace("/path/to/dhparam", dh);
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(&conf, format!("pid off;\nerror_log stderr;\n{text}")).unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        // Stapling is fetched at run time (tests/ocsp_stapling.rs): nothing to warn about here.
        assert!(!err.contains("ssl_stapling"), "{err}");
        assert!(!err.contains("resolver"), "{err}");
        // A trusted-certificate file that is not one is refused, as nginx refuses it.
        std::fs::write(dir.join("bad.pem"), "not a certificate\n").unwrap();
        let bad = text.replace(
            &format!("ssl_trusted_certificate {site};"),
            &format!("ssl_trusted_certificate {};", dir.join("bad.pem").display()),
        );
        std::fs::write(&conf, format!("pid off;\nerror_log stderr;\n{bad}")).unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        assert!(
            !out.status.success(),
            "{name}: a bad trusted certificate file loads"
        );
        // Beside client certificates it also anchors client chains, as nginx: loads.
        let verify = text.replace(
            "ssl_prefer_server_ciphers off;",
            &format!("ssl_prefer_server_ciphers off; ssl_verify_client on; ssl_client_certificate {site};"),
        );
        std::fs::write(&conf, format!("pid off;\nerror_log stderr;\n{verify}")).unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
    }
}

/// `ssl_certificate` paths with variables other than `$ssl_server_name`, evaluated when the
/// ClientHello is read with what is known then (nginx-tests' `ssl_certificate.t`): a `geo` on
/// the client's address, a `map` of `$ssl_server_name`, a `map` of `$server_port`. Each
/// handshake is checked against the test CA with the name asked, so the wrong leaf fails it.
#[test]
fn certificate_paths_with_connection_variables() {
    let (server, ports) = Server::start(
        "conncert",
        r#"
pid {dir}/fb.pid;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    geo $leaf { default a.test; 127.0.0.2 b.test; }
    map $ssl_server_name $named { b.test b.test; default a.test; }
    map $server_port $by_port { {port2} b.test; default a.test; }
    server {
        listen 127.0.0.1:{port0} ssl;
        ssl_certificate {certs}/$leaf.crt;
        ssl_certificate_key {certs}/$leaf.key;
        return 200 "geo\n";
    }
    server {
        listen 127.0.0.1:{port1} ssl;
        ssl_certificate {certs}/$named.crt;
        ssl_certificate_key {certs}/$named.key;
        return 200 "map\n";
    }
    server {
        listen 127.0.0.1:{port2} ssl;
        ssl_certificate {certs}/$by_port.crt;
        ssl_certificate_key {certs}/$by_port.key;
        return 200 "port\n";
    }
}
"#,
        3,
    );
    let ca = certs().ca();
    let verified = |host: &str, port: u16, from: &str| {
        let resolve = format!("{host}:{port}:127.0.0.1");
        let url = format!("https://{host}:{port}/");
        let out = run(
            "curl",
            &[
                "-s",
                "--max-time",
                "10",
                "--cacert",
                ca.to_str().unwrap(),
                "--interface",
                from,
                "--resolve",
                &resolve,
                &url,
            ],
        );
        out.status.success()
    };
    // geo on $remote_addr: a.test for 127.0.0.1, b.test for 127.0.0.2.
    assert!(verified("a.test", ports[0], "127.0.0.1"));
    assert!(!verified("b.test", ports[0], "127.0.0.1"));
    assert!(verified("b.test", ports[0], "127.0.0.2"));
    assert!(!verified("a.test", ports[0], "127.0.0.2"));
    // map of $ssl_server_name: each name gets its own leaf.
    assert!(verified("a.test", ports[1], "127.0.0.1"));
    assert!(verified("b.test", ports[1], "127.0.0.1"));
    // map of $server_port: this port's leaf is b.test whatever the name.
    assert!(verified("b.test", ports[2], "127.0.0.1"));
    assert!(!verified("a.test", ports[2], "127.0.0.1"));
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
