//! `listen unix:PATH`: HTTP/1.1, TLS and HTTP/2 over a UNIX-domain socket, nginx's variables
//! there (`$remote_addr` is `unix:`, `$server_addr` is `unix:PATH`, the ports are empty),
//! `proxy_pass http://unix:PATH:` to it with `set_real_ip_from unix:`, the TCP-only socket
//! options skipped without a word in the log, `allow`/`deny unix:`, the file's mode (0666, as
//! nginx), a reload that keeps the listener, a stale socket file replaced, the file removed
//! when the socket closes for good, and `ip_hash` hashing the address realip found.

mod support;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
pid {dir}/fb.pid;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    server {
        listen 127.0.0.1:{port0};
        listen unix:{dir}/plain.sock;
        listen unix:{dir}/tls.sock ssl;
        listen unix:{dir}/pp.sock proxy_protocol;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
        location /v {
            return 200 "ra=$remote_addr;rp=$remote_port;sa=$server_addr;sp=$server_port;rra=$realip_remote_addr;rtt=$tcpinfo_rtt;https=$https";
        }
        location /pp {
            return 200 "pp=$proxy_protocol_addr:$proxy_protocol_port;ra=$remote_addr";
        }
        # A location's set_real_ip_from applies after the rewrite phase (as nginx): read
        # $remote_addr in a header of a file response, not in a `return`.
        location /real {
            set_real_ip_from unix:;
            alias {dir}/html/index.html;
            add_header X-IP "$remote_addr/$realip_remote_addr";
        }
        location /notrust {
            set_real_ip_from 10.0.0.0/8;
            alias {dir}/html/index.html;
            add_header X-IP "$remote_addr/$realip_remote_addr";
        }
        # (Access rules run after the rewrite phase: a file, not a `return`.)
        location /only_unix {
            allow unix:;
            deny all;
            alias {dir}/html/index.html;
        }
        location /not_unix {
            deny unix:;
            alias {dir}/html/index.html;
        }
        location /proxy/ {
            proxy_pass http://unix:{dir}/plain.sock:/;
            proxy_set_header X-Real-IP 192.0.2.1;
        }
    }
}
"#;

/// `curl -s` through the UNIX-domain socket `sock` (`extra` before the URL); the body.
fn via(sock: &Path, extra: &[&str], url: &str) -> String {
    let mut a = vec!["--unix-socket", sock.to_str().expect("utf-8 path")];
    a.extend_from_slice(extra);
    a.push(url);
    let out = curl(&a);
    assert!(
        out.status.success(),
        "curl {a:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn error_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
}

#[test]
fn serves_http_tls_and_h2_on_a_unix_socket_with_nginx_variables() {
    let (mut server, ports) = Server::start("unix-listen", CONF, 1);
    let dir = server.dir.clone();
    let plain = dir.join("plain.sock");
    let tls = dir.join("tls.sock");

    // Every socket is bound before any accepts: the TCP port answering means the files are
    // there, unless the port answering was another process's (then the log says why).
    let meta = std::fs::symlink_metadata(&plain).unwrap_or_else(|e| {
        panic!(
            "socket file: {e}; exited: {:?}\n{}",
            server.child.try_wait(),
            server.stderr_text()
        )
    });
    assert!(meta.file_type().is_socket(), "a socket at {plain:?}");
    assert_eq!(meta.permissions().mode() & 0o777, 0o666, "nginx's chmod");

    let sa = format!("unix:{}", plain.display());
    assert_eq!(
        via(&plain, &[], "http://localhost/v"),
        format!("ra=unix:;rp=;sa={sa};sp=;rra=unix:;rtt=;https=")
    );
    // A static file: the plain-text path that uses sendfile and TCP_CORK on TCP.
    assert_eq!(
        via(&plain, &[], "http://localhost/index.html"),
        "<h1>hello from firstbyte</h1>\n"
    );

    // PROXY protocol on a UNIX-domain socket: the header is read before HTTP, as on TCP.
    {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(dir.join("pp.sock")).expect("pp");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.write_all(
            b"PROXY TCP4 192.0.2.5 192.0.2.6 1234 80\r\nGET /pp HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("read");
        let (status, _, body) = parse_response(&out);
        assert_eq!(status, 200);
        assert_eq!(body, b"pp=192.0.2.5:1234;ra=unix:");
    }

    let ca = certs().ca();
    let ca = ca.to_str().expect("utf-8 path");
    let tls_sa = format!("unix:{}", tls.display());
    assert_eq!(
        via(&tls, &["--cacert", ca, "--http1.1"], "https://localhost/v"),
        format!("ra=unix:;rp=;sa={tls_sa};sp=;rra=unix:;rtt=;https=on")
    );
    assert_eq!(
        via(
            &tls,
            &[
                "--cacert",
                ca,
                "--http2",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version}"
            ],
            "https://localhost/index.html"
        ),
        "2"
    );

    // Through the proxy: the upstream connection comes in on the UNIX-domain socket, and
    // only a location that trusts `unix:` takes X-Real-IP from it.
    let x_ip = |path: &str| {
        let (status, h, _) = curl_i(&[&format!("http://127.0.0.1:{}{path}", ports[0])]);
        assert_eq!(status, 200, "{path}");
        header(&h, "x-ip").unwrap_or("").to_string()
    };
    assert_eq!(x_ip("/proxy/real"), "192.0.2.1/unix:");
    assert_eq!(x_ip("/proxy/notrust"), "unix:/unix:");
    // And a client on TCP is not one from `unix:`.
    assert_eq!(x_ip("/real"), "127.0.0.1/127.0.0.1");

    // `allow unix:` / `deny unix:` match the clients of UNIX-domain sockets only.
    let code = |sock: Option<&Path>, path: &str| {
        let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        let url = match sock {
            Some(s) => {
                a.extend(["--unix-socket", s.to_str().expect("utf-8 path")]);
                format!("http://localhost{path}")
            }
            None => format!("http://127.0.0.1:{}{path}", ports[0]),
        };
        a.push(&url);
        String::from_utf8_lossy(&curl(&a).stdout).into_owned()
    };
    assert_eq!(code(Some(&plain), "/only_unix"), "200");
    assert_eq!(code(None, "/only_unix"), "403");
    assert_eq!(code(Some(&plain), "/not_unix"), "403");
    assert_eq!(code(None, "/not_unix"), "200");

    let log = error_log(&dir);
    let log: String = log
        .lines()
        .filter(|l| !l.contains("access forbidden by rule"))
        .collect();
    for word in ["setsockopt", "[alert]", "[crit]", "[emerg]"] {
        assert!(!log.contains(word), "no {word} in the log:\n{log}");
    }

    // The end of the process removes the socket files, as nginx's master does.
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some(), "exits");
    assert!(
        !plain.exists() && !tls.exists() && !dir.join("pp.sock").exists(),
        "socket files removed"
    );
}

/// `user root` keeps the process root with no broker: it removes socket files itself;
/// otherwise the broker (root) does, for the process that serves as `nobody`.
fn reload_conf(dir: &Path, port: u16, root: &str, unix: bool, user_root: bool) -> String {
    let unix = if unix {
        format!("listen unix:{}/r.sock;", dir.display())
    } else {
        String::new()
    };
    let user = if user_root { "user root;\n" } else { "" };
    format!(
        "{user}pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n server {{ listen 127.0.0.1:{port}; {unix} root {d}/{root}; }}\n}}\n",
        d = dir.display()
    )
}

#[test]
fn stale_socket_replaced_reload_keeps_the_listener_and_drops_it_when_gone() {
    reload_cycle(false);
}

#[test]
fn without_a_broker_the_server_removes_the_socket_file_itself() {
    reload_cycle(true);
}

fn reload_cycle(user_root: bool) {
    let dir = tempdir("unix-reload");
    for v in ["v1", "v2"] {
        std::fs::create_dir_all(dir.join(v)).expect("mkdir");
        std::fs::write(dir.join(v).join("index.html"), v).expect("write");
    }
    let sock = dir.join("r.sock");
    let port = free_port();

    // A regular file where the socket goes is not removed: the start fails, as nginx's.
    std::fs::write(&sock, "not a socket").expect("write");
    let conf = dir.join("firstbyte.conf");
    std::fs::write(&conf, reload_conf(&dir, port, "v1", true, user_root)).expect("conf");
    let o = firstbyte(&["-c", conf.to_str().expect("utf-8 path")]);
    assert!(!o.status.success(), "a file in the way stops the start");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("bind() to unix:{} failed", sock.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&sock).expect("kept"), b"not a socket");
    std::fs::remove_file(&sock).expect("rm");

    // A socket file nobody listens on (a process that did not end cleanly) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("stale socket"));
    assert!(sock.exists());
    let mut server = Server::start_in(&dir, &reload_conf(&dir, port, "v1", true, user_root), port);
    assert_eq!(via(&sock, &[], "http://x/"), "v1");
    let ino = std::fs::metadata(&sock).expect("socket").ino();

    // A reload that keeps the listen keeps the socket (same file) and serves the new config.
    std::fs::write(&server.conf, reload_conf(&dir, port, "v2", true, user_root)).expect("conf");
    server.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while via(&sock, &[], "http://x/") != "v2" {
        assert!(std::time::Instant::now() < deadline, "reload took effect");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::metadata(&sock).expect("socket").ino(), ino);

    // A reload without it closes the socket and removes its file.
    std::fs::write(
        &server.conf,
        reload_conf(&dir, port, "v2", false, user_root),
    )
    .expect("conf");
    server.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sock.exists() {
        assert!(std::time::Instant::now() < deadline, "socket file removed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_err());
    // The broker (started as root) may remove the file before the server's line is written.
    let want = format!("deleting socket {}", sock.display());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !error_log(&dir).contains(&want) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(error_log(&dir).contains(&want), "{}", error_log(&dir));

    // Back again by a reload, then gone with the process.
    std::fs::write(&server.conf, reload_conf(&dir, port, "v1", true, user_root)).expect("conf");
    server.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(std::time::Instant::now() < deadline, "listening again");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(via(&sock, &[], "http://x/"), "v1");
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some(), "exits");
    assert!(!sock.exists(), "socket file removed at exit");
}

#[test]
fn bad_unix_listens_are_refused_at_load() {
    let dir = tempdir("unix-bad");
    let long = format!("/tmp/{}", "x".repeat(120));
    for (listen, want) in [
        (
            "unix:".to_string(),
            "no path in the unix domain socket in \"unix:\"",
        ),
        (
            format!("unix:{long}"),
            "too long path in the unix domain socket",
        ),
        (
            "unix:/tmp/q.sock quic".to_string(),
            "\"quic\" parameter is incompatible with a UNIX-domain socket",
        ),
    ] {
        let conf = dir.join("bad.conf");
        std::fs::write(
            &conf,
            format!("events {{}}\nhttp {{\n server {{ listen {listen}; }}\n}}\n"),
        )
        .expect("conf");
        let o = firstbyte(&["-t", "-c", conf.to_str().expect("utf-8 path")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{listen}: refused");
        assert!(err.contains(want), "{listen}: {err}");
        assert!(
            err.contains("bad.conf:3"),
            "{listen}: names the line: {err}"
        );
    }
}

const IP_HASH: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    upstream u {
        ip_hash;
        server 127.0.0.1:{port1};
        server 127.0.0.1:{port2};
    }
    server {
        listen 127.0.0.1:{port0};
        location / {
            proxy_pass http://unix:{dir}/u.sock;
            proxy_set_header X-Real-IP $http_x_real_ip;
        }
    }
    server {
        listen unix:{dir}/u.sock;
        location / {
            set_real_ip_from unix:;
            proxy_pass http://u;
        }
        location /none {
            proxy_pass http://u;
        }
    }
    server {
        listen 127.0.0.1:{port1};
        listen 127.0.0.1:{port2};
        location / { return 200 "$server_port"; }
    }
}
"#;

#[test]
fn ip_hash_hashes_the_real_address_and_a_unix_client_as_one() {
    let (_server, ports) = Server::start("unix-ip-hash", IP_HASH, 3);
    let spread = |path: &str| {
        let mut seen = std::collections::BTreeMap::new();
        for i in 1..=30 {
            let out = curl(&[
                "-H",
                &format!("X-Real-IP: 127.0.{i}.2"),
                &format!("http://127.0.0.1:{}{path}", ports[0]),
            ]);
            *seen
                .entry(String::from_utf8_lossy(&out.stdout).into_owned())
                .or_insert(0) += 1;
        }
        seen
    };
    // Each /24 of the real addresses is a client of its own: both servers get some (nginx's
    // hash splits these 30 evenly).
    let real = spread("/");
    let (a, b) = (ports[1].to_string(), ports[2].to_string());
    assert_eq!(real.get(&a), Some(&15), "{real:?}");
    assert_eq!(real.get(&b), Some(&15), "{real:?}");
    // Without realip every request comes from `unix:`: one server for all.
    let none = spread("/none");
    assert_eq!(none.len(), 1, "{none:?}");
    assert_eq!(none.values().sum::<i32>(), 30);
}
