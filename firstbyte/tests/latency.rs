//! No delayed-ACK stall: over loopback, no first response on a new HTTP/2 connection takes
//! 30 ms or more after the handshake (a Nagle/delayed-ACK stall is ~40 ms; a healthy first
//! response is well under 1 ms, so this bound never flakes on a correct build).

mod support;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        http2 on;
        server_name localhost;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        root {dir}/html;
    }
}
"#;

fn first_response_ms(port: u16, proto: &str, path: &str) -> f64 {
    let out = curl(&[
        proto,
        "-o",
        "/dev/null",
        "-w",
        "%{time_appconnect} %{time_starttransfer} %{http_code}",
        &format!("https://localhost:{port}{path}"),
    ]);
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(v.get(2), Some(&"200"), "{s}");
    let app: f64 = v[0].parse().unwrap();
    let first: f64 = v[1].parse().unwrap();
    (first - app) * 1000.0
}

#[test]
fn no_first_response_stalls_on_new_http2_connections() {
    let (server, ports) = Server::start("latency", CONF, 1);
    std::fs::write(server.dir.join("html/small.txt"), "x".repeat(1500)).unwrap();
    let mut worst: f64 = 0.0;
    for i in 0..20 {
        let proto = if i % 2 == 0 { "--http2" } else { "--http1.1" };
        let path = if i % 4 < 2 { "/" } else { "/small.txt" };
        let ms = first_response_ms(ports[0], proto, path);
        worst = worst.max(ms);
        assert!(
            ms < 30.0,
            "{proto} {path}: first response {ms:.1} ms after the handshake"
        );
    }
    eprintln!("worst first-response time after handshake: {worst:.2} ms");
}
