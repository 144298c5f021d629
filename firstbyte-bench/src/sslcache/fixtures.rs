//! The bench's inputs: certificate files and the configs both servers load.
//!
//! Certificates are ECDSA P-256, self-signed, made with rcgen once into a directory that
//! later runs reuse (a `count` file says how many pairs it holds). The configs are plain text
//! from plain parameters ([`locations_conf`], [`servers_conf`], [`handshake_conf`]) so a unit
//! test can check them; the `-t` configs are the same bytes for firstbyte and nginx (nginx
//! gets only `-p` and `-e` on its command line, for its prefix and early error log).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Certificate pair `i`: (`cI.crt`, `cI.key`).
pub fn pair(dir: &Path, i: usize) -> (PathBuf, PathBuf) {
    (dir.join(format!("c{i}.crt")), dir.join(format!("c{i}.key")))
}

/// Makes sure `dir` holds pairs `c0`..`c{n-1}` (names `cI.test`), generating what is missing.
pub fn ensure_pairs(dir: &Path, n: usize) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let count_file = dir.join("count");
    let have: usize = std::fs::read_to_string(&count_file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    for i in have..n {
        write_pair(dir, &format!("c{i}"), &format!("c{i}.test"))?;
    }
    if n > have {
        std::fs::write(&count_file, n.to_string())?;
    }
    Ok(())
}

/// Writes `NAME.crt` and `NAME.key` for a self-signed ECDSA P-256 certificate of `dns`.
pub fn write_pair(dir: &Path, name: &str, dns: &str) -> Result<()> {
    let ck = rcgen::generate_simple_self_signed(vec![dns.to_string()]).context("rcgen")?;
    std::fs::write(dir.join(format!("{name}.crt")), ck.cert.pem())?;
    std::fs::write(
        dir.join(format!("{name}.key")),
        ck.signing_key.serialize_pem(),
    )?;
    Ok(())
}

/// How many distinct files `n` references use at `percent` uniqueness (at least one).
pub fn unique_count(n: usize, percent: u32) -> usize {
    (n * percent as usize / 100).max(1)
}

fn head(work: &Path) -> String {
    format!(
        "worker_processes 1;\ndaemon off;\npid {w}/server.pid;\nerror_log {w}/error.log info;\n\
         events {{ }}\n",
        w = work.display()
    )
}

/// One server with `n` locations, each with `proxy_ssl_certificate`; location `i` names
/// pair `i mod unique_count(n, percent)` (the seed's uniqueness percentage). `None`: the
/// same locations without a client certificate (the baseline: what the locations cost).
pub fn locations_conf(
    work: &Path,
    certs: &Path,
    port: u16,
    n: usize,
    percent: Option<u32>,
) -> String {
    let mut s = head(work);
    s.push_str("http {\n    access_log off;\n    server {\n");
    let _ = writeln!(s, "        listen 127.0.0.1:{port};");
    for i in 0..n {
        let Some(percent) = percent else {
            let _ = writeln!(
                s,
                "        location /l{i} {{ proxy_pass https://127.0.0.1:9; }}"
            );
            continue;
        };
        let (c, k) = pair(certs, i % unique_count(n, percent));
        let _ = writeln!(
            s,
            "        location /l{i} {{ proxy_pass https://127.0.0.1:9; \
             proxy_ssl_certificate {}; proxy_ssl_certificate_key {}; }}",
            c.display(),
            k.display()
        );
    }
    s.push_str("    }\n}\n");
    s
}

/// `n` TLS servers on one port, each with its own certificate (`server_name cI.test`).
pub fn servers_conf(work: &Path, certs: &Path, port: u16, n: usize) -> String {
    let mut s = head(work);
    s.push_str("http {\n    access_log off;\n    server_names_hash_max_size 16384;\n");
    for i in 0..n {
        let (c, k) = pair(certs, i);
        let _ = writeln!(
            s,
            "    server {{ listen 127.0.0.1:{port} ssl; server_name c{i}.test; \
             ssl_certificate {}; ssl_certificate_key {}; return 200 \"ok\"; }}",
            c.display(),
            k.display()
        );
    }
    s.push_str("}\n");
    s
}

/// The handshake bench's server: a static certificate on `static_port`, and
/// `ssl_certificate $ssl_server_name` with `ssl_certificate_cache` on `dynamic_port` (pairs
/// `NAME.crt`/`NAME.key` in `certs`). No session tickets or cache: every handshake is full.
pub fn handshake_conf(work: &Path, certs: &Path, static_port: u16, dynamic_port: u16) -> String {
    let d = certs.display();
    format!(
        "{head}http {{\n    access_log off;\n    ssl_session_tickets off;\n    ssl_session_cache off;\n\
         \x20   keepalive_timeout 0;\n\
         \x20   server {{ listen 127.0.0.1:{static_port} ssl; server_name _;\n\
         \x20       ssl_certificate {d}/c0.crt; ssl_certificate_key {d}/c0.key;\n\
         \x20       return 200 \"ok\"; }}\n\
         \x20   server {{ listen 127.0.0.1:{dynamic_port} ssl; server_name _;\n\
         \x20       ssl_certificate {d}/$ssl_server_name.crt; ssl_certificate_key {d}/$ssl_server_name.key;\n\
         \x20       ssl_certificate_cache max=1000 inactive=1m valid=1m;\n\
         \x20       return 200 \"ok\"; }}\n}}\n",
        head = head(work)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniqueness_counts_files_not_references() {
        assert_eq!(unique_count(10_000, 0), 1);
        assert_eq!(unique_count(10_000, 10), 1_000);
        assert_eq!(unique_count(10_000, 100), 10_000);
        let c = locations_conf(Path::new("/w"), Path::new("/c"), 8080, 10, Some(50));
        assert_eq!(c.matches("location /l").count(), 10);
        assert_eq!(
            c.matches("/c/c4.crt").count(),
            2,
            "5 files, each named twice"
        );
        assert!(!c.contains("/c/c5.crt"));
        let base = locations_conf(Path::new("/w"), Path::new("/c"), 8080, 10, None);
        assert_eq!(base.matches("location /l").count(), 10);
        assert!(!base.contains("proxy_ssl_certificate"));
    }

    #[test]
    fn server_and_handshake_configs() {
        let c = servers_conf(Path::new("/w"), Path::new("/c"), 8443, 3);
        assert_eq!(c.matches("server {").count(), 3);
        assert!(c.contains("server_name c2.test; ssl_certificate /c/c2.crt;"));
        let h = handshake_conf(Path::new("/w"), Path::new("/c"), 1, 2);
        assert!(h.contains("ssl_certificate /c/$ssl_server_name.crt;"));
        assert!(h.contains("ssl_session_tickets off;"));
    }
}
