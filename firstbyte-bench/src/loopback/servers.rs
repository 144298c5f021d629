//! The servers under test, their equivalent configs, and starting and stopping them.
//!
//! Every server gets the same certificate, the same document root and the same settings: one
//! worker, access logs off, TLS 1.3 only with AES-128-GCM and X25519 where the server lets us
//! say so (h2o 2.2.5 has no TLS 1.3 suite directive, so the clients ask for that suite), no
//! limit on requests per connection (nginx's default `keepalive_requests 1000` would make
//! h2load reconnect). [`render`] turns a [`Kind`] and [`Paths`] into config text (pure);
//! [`Running::start_with`] writes it, starts the server under `taskset` on the server CPU, waits
//! for its port, and [`Running::stop`] ends it with SIGTERM (SIGKILL after 20 s).
//!
//! Caddy (Debian's 2.6) runs only the HTTP/3 measures, beside firstbyte ([`Kind::runs`]): one
//! site with HTTP/1.1, HTTP/2 and HTTP/3 on the port, TLS 1.3 with X25519 (Go picks the
//! TLS 1.3 suite; the client offers only AES-128-GCM), no access log, no admin endpoint, its
//! data and config directories in the server's work directory. For that measure firstbyte's
//! config also listens with `quic` on the port ([`render_for`]).
//!
//! The document root holds `/1k`, `/1g` and the page of the browser-like measures
//! ([`super::page`]); every server maps a path to a file under it as is (percent-escapes
//! decoded), with no compression: `accept-encoding` is sent, but none of the configs turns
//! on gzip, `compress` or `encode`, so every body is the file's bytes.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// firstbyte, `target/release/firstbyte`.
    Firstbyte,
    /// Debian's nginx, `/usr/sbin/nginx`.
    Nginx,
    /// Debian's h2o, `/usr/bin/h2o`.
    H2o,
    /// Debian's caddy, `/usr/bin/caddy` (the HTTP/3 measure only).
    Caddy,
}

impl Kind {
    /// All servers in run order (firstbyte first, then the peers).
    pub const ALL: [Kind; 4] = [Kind::Firstbyte, Kind::Nginx, Kind::H2o, Kind::Caddy];

    /// Whether this server takes part in `measure`: HTTP/3 is firstbyte against Caddy
    /// (Debian's nginx 1.22 and h2o 2.2 have none); Caddy takes part in nothing else.
    pub fn runs(self, measure: super::measures::Measure) -> bool {
        let h3 = measure.is_h3();
        match self {
            Kind::Firstbyte => true,
            Kind::Nginx | Kind::H2o => !h3,
            Kind::Caddy => h3,
        }
    }

    /// Short lowercase name, used in file names and tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Firstbyte => "firstbyte",
            Kind::Nginx => "nginx",
            Kind::H2o => "h2o",
            Kind::Caddy => "caddy",
        }
    }
}

/// `--servers` takes the names of [`Kind::name`].
impl clap::ValueEnum for Kind {
    fn value_variants<'a>() -> &'a [Self] {
        &Kind::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

/// Files shared by every server, and the per-server working directory.
#[derive(Debug, Clone)]
pub struct Paths {
    /// PEM certificate (ECDSA P-256, `localhost` and `127.0.0.1`).
    pub cert: PathBuf,
    /// PEM PKCS#8 private key.
    pub key: PathBuf,
    /// Document root holding `1k` and `1g`.
    pub docroot: PathBuf,
    /// Directory for this server's config, pid and error log.
    pub work: PathBuf,
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// The config of `kind` for `measure`: [`render`], and for HTTP/3 firstbyte also listening
/// with `quic` on the port (UDP).
pub fn render_for(
    measure: super::measures::Measure,
    kind: Kind,
    paths: &Paths,
    port: u16,
) -> String {
    let text = render(kind, paths, port);
    if measure.is_h3() && kind == Kind::Firstbyte {
        let tcp = format!("listen 127.0.0.1:{port} ssl;");
        text.replacen(
            &tcp,
            &format!("{tcp}\n        listen 127.0.0.1:{port} quic;"),
            1,
        )
    } else {
        text
    }
}

/// The config text of `kind` listening on 127.0.0.1:`port`.
pub fn render(kind: Kind, paths: &Paths, port: u16) -> String {
    let (cert, key, root, work) = (
        p(&paths.cert),
        p(&paths.key),
        p(&paths.docroot),
        p(&paths.work),
    );
    match kind {
        Kind::Firstbyte | Kind::Nginx => {
            let (pid, extra_main, extra_http, listen) = if kind == Kind::Firstbyte {
                (
                    "firstbyte.pid",
                    String::new(),
                    String::new(),
                    "ssl;\n        http2 on;".to_string(),
                )
            } else {
                (
                    "nginx.pid",
                    "worker_rlimit_nofile 8192;\n".to_string(),
                    ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
                        .iter()
                        .map(|t| format!("    {t}_temp_path {work}/tmp-{t};\n"))
                        .collect(),
                    "ssl http2;".to_string(),
                )
            };
            format!(
                "worker_processes 1;\ndaemon off;\npid {work}/{pid};\n\
                 error_log {work}/error.log error;\n{extra_main}\
                 events {{ worker_connections 4096; }}\n\
                 http {{\n    access_log off;\n    default_type application/octet-stream;\n\
                 \x20   keepalive_requests 1000000;\n{extra_http}\
                 \x20   server {{\n        listen 127.0.0.1:{port} {listen}\n\
                 \x20       server_name localhost;\n\
                 \x20       ssl_certificate {cert};\n        ssl_certificate_key {key};\n\
                 \x20       ssl_protocols TLSv1.3;\n\
                 \x20       ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;\n\
                 \x20       ssl_ecdh_curve X25519;\n        root {root};\n    }}\n}}\n"
            )
        }
        Kind::H2o => format!(
            "num-threads: 1\nmax-connections: 4096\npid-file: {work}/h2o.pid\n\
             error-log: {work}/error.log\nuser: root\n\
             listen:\n  host: 127.0.0.1\n  port: {port}\n  ssl:\n\
             \x20   certificate-file: {cert}\n    key-file: {key}\n\
             \x20   minimum-version: TLSv1.2\n    ocsp-update-interval: 0\n\
             hosts:\n  default:\n    paths:\n      /:\n        file.dir: {root}\n"
        ),
        Kind::Caddy => format!(
            "{{\n\tadmin off\n\tauto_https disable_redirects\n\tskip_install_trust\n\t\
             default_sni localhost\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
             https://localhost:{port}, https://127.0.0.1:{port} {{\n\tbind 127.0.0.1\n\t\
             tls {cert} {key} {{\n\t\tprotocols tls1.3 tls1.3\n\t\tcurves x25519\n\t}}\n\t\
             root * {root}\n\tfile_server\n}}\n"
        ),
    }
}

/// The command line that starts `kind` with config `conf`.
pub fn command_line(kind: Kind, firstbyte: &Path, conf: &Path, work: &Path) -> Vec<String> {
    match kind {
        Kind::Firstbyte => vec![p(firstbyte), "-c".into(), p(conf)],
        Kind::Nginx => vec![
            "/usr/sbin/nginx".into(),
            "-p".into(),
            format!("{}/", p(work)),
            "-e".into(),
            format!("{}/error.log", p(work)),
            "-c".into(),
            p(conf),
        ],
        Kind::H2o => vec!["/usr/bin/h2o".into(), "-c".into(), p(conf)],
        // `env` execs caddy: the pid stays the server's.
        Kind::Caddy => vec![
            "env".into(),
            format!("HOME={}", p(work)),
            format!("XDG_DATA_HOME={}/data", p(work)),
            format!("XDG_CONFIG_HOME={}/config", p(work)),
            "/usr/bin/caddy".into(),
            "run".into(),
            "--config".into(),
            p(conf),
            "--adapter".into(),
            "caddyfile".into(),
        ],
    }
}

/// A free TCP port on 127.0.0.1 (bound once and released; fine on a quiet loopback).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// A started server.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Process id of the root process (nginx's master).
    pub pid: i32,
    child: Child,
}

impl Running {
    /// Writes the config text `conf_text(port)` ([`render`], [`render_for`]), starts the
    /// server pinned to `cpu`, and waits until it accepts.
    pub fn start_with(
        kind: Kind,
        paths: &Paths,
        firstbyte: &Path,
        cpu: usize,
        conf_text: impl FnOnce(u16) -> String,
    ) -> Result<Running> {
        std::fs::create_dir_all(&paths.work)?;
        let port = free_port()?;
        let conf = paths.work.join(if kind == Kind::Caddy {
            "Caddyfile".to_string()
        } else {
            format!("{}.conf", kind.name())
        });
        std::fs::write(&conf, conf_text(port))?;
        let argv = command_line(kind, firstbyte, &conf, &paths.work);
        let log = std::fs::File::create(paths.work.join("stderr.log"))?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpu.to_string())
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", argv.join(" ")))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut running = Running {
            addr,
            pid: child.id() as i32,
            child,
        };
        // 30 s: generous for a server started under valgrind for a profile.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(running);
            }
            if let Some(status) = running.child.try_wait()? {
                let log =
                    std::fs::read_to_string(paths.work.join("stderr.log")).unwrap_or_default();
                bail!(
                    "{} exited with {status} before listening:\n{log}",
                    kind.name()
                );
            }
            if Instant::now() > deadline {
                running.stop();
                bail!("{} did not listen on {addr} within 30 s", kind.name());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server: SIGTERM, then SIGKILL after 20 s (callgrind needs time to write its
    /// profile when the server runs under valgrind).
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Paths {
        Paths {
            cert: "/b/cert.pem".into(),
            key: "/b/key.pem".into(),
            docroot: "/b/www".into(),
            work: "/b/w".into(),
        }
    }

    #[test]
    fn nginx_style_configs_share_the_tls_and_worker_settings() {
        for kind in [Kind::Firstbyte, Kind::Nginx] {
            let c = render(kind, &paths(), 8443);
            for want in [
                "worker_processes 1;",
                "access_log off;",
                "listen 127.0.0.1:8443 ",
                "ssl_certificate /b/cert.pem;",
                "ssl_protocols TLSv1.3;",
                "Ciphersuites TLS_AES_128_GCM_SHA256;",
                "ssl_ecdh_curve X25519;",
                "keepalive_requests 1000000;",
                "root /b/www;",
                "worker_connections 4096;",
            ] {
                assert!(c.contains(want), "{kind:?} lacks {want:?}:\n{c}");
            }
        }
        assert!(render(Kind::Firstbyte, &paths(), 1).contains("http2 on;"));
        assert!(render(Kind::Nginx, &paths(), 1).contains("ssl http2;"));
        assert!(render(Kind::Nginx, &paths(), 1).contains("client_body_temp_path /b/w/"));
    }

    #[test]
    fn h2o_config_has_one_thread_and_no_access_log() {
        let c = render(Kind::H2o, &paths(), 9443);
        assert!(c.contains("num-threads: 1\n"));
        assert!(c.contains("port: 9443\n"));
        assert!(c.contains("file.dir: /b/www\n"));
        assert!(!c.contains("access-log"));
    }

    #[test]
    fn caddy_serves_http3_on_loopback_and_firstbyte_adds_quic_for_that_measure() {
        use super::super::measures::Measure;
        let c = render(Kind::Caddy, &paths(), 9443);
        for want in [
            "admin off",
            "protocols h1 h2 h3",
            "https://localhost:9443, https://127.0.0.1:9443 {",
            "bind 127.0.0.1",
            "tls /b/cert.pem /b/key.pem {",
            "protocols tls1.3 tls1.3",
            "curves x25519",
            "root * /b/www",
        ] {
            assert!(c.contains(want), "lacks {want:?}:\n{c}");
        }
        let fb = render_for(Measure::H3, Kind::Firstbyte, &paths(), 8443);
        assert!(
            fb.contains("listen 127.0.0.1:8443 ssl;\n        listen 127.0.0.1:8443 quic;"),
            "{fb}"
        );
        assert!(!render_for(Measure::H2, Kind::Firstbyte, &paths(), 8443).contains("quic"));
        assert!(Kind::Caddy.runs(Measure::H3) && !Kind::Caddy.runs(Measure::H2));
        assert!(!Kind::Nginx.runs(Measure::H3) && Kind::Firstbyte.runs(Measure::H3));
        use super::super::measures::Proto;
        for m in [Measure::Req(Proto::H3), Measure::Page(Proto::H3)] {
            assert!(Kind::Caddy.runs(m) && !Kind::H2o.runs(m) && !Kind::Nginx.runs(m));
            assert!(render_for(m, Kind::Firstbyte, &paths(), 1).contains(" quic;"));
        }
        for m in [Measure::Req(Proto::H1), Measure::Page(Proto::H2)] {
            assert!(!Kind::Caddy.runs(m) && Kind::H2o.runs(m) && Kind::Nginx.runs(m));
            assert!(!render_for(m, Kind::Firstbyte, &paths(), 1).contains("quic"));
        }
        let argv = command_line(
            Kind::Caddy,
            Path::new("/fb"),
            Path::new("/b/w/Caddyfile"),
            Path::new("/b/w"),
        );
        assert_eq!(argv[0], "env");
        assert!(argv.contains(&"XDG_DATA_HOME=/b/w/data".to_string()));
        assert_eq!(
            argv[4..],
            [
                "/usr/bin/caddy",
                "run",
                "--config",
                "/b/w/Caddyfile",
                "--adapter",
                "caddyfile"
            ]
        );
    }

    #[test]
    fn nginx_gets_its_own_prefix_and_error_log() {
        let argv = command_line(
            Kind::Nginx,
            Path::new("/fb"),
            Path::new("/b/w/nginx.conf"),
            Path::new("/b/w"),
        );
        assert_eq!(argv[1..5], ["-p", "/b/w/", "-e", "/b/w/error.log"]);
        let fb = command_line(
            Kind::Firstbyte,
            Path::new("/fb"),
            Path::new("/c"),
            Path::new("/w"),
        );
        assert_eq!(fb, ["/fb", "-c", "/c"]);
    }
}
