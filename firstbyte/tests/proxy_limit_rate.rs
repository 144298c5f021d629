//! `proxy_limit_rate` with variables (nginx 1.27.0+): evaluated for each response once the
//! upstream's header has come, so `$upstream_http_x_rate` is this response's `X-Rate`; with
//! `proxy_buffering` on and off. An invalid size (an empty one too) is nginx's error-log line
//! and no limit.

mod support;

use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        proxy_limit_rate $upstream_http_x_rate;
        location /unbuffered/ {
            proxy_pass http://127.0.0.1:{port1}/;
            proxy_buffering off;
        }
        location /buffered/ {
            proxy_pass http://127.0.0.1:{port1}/;
            proxy_buffering on;
        }
        location /arg/ {
            proxy_pass http://127.0.0.1:{port1}/;
            proxy_limit_rate $arg_r;
        }
    }
    server {
        listen 127.0.0.1:{port1};
        access_log off;
        location /data {
            alias {dir}/html/data;
            add_header X-Rate $arg_e;
        }
    }
}
"#;

#[test]
fn the_rate_from_an_upstream_header_paces_the_body() {
    let (server, ports) = Server::start("proxy-limit-rate-var", CONF, 2);
    let data = "X".repeat(3000);
    std::fs::write(server.dir.join("html/data"), &data).expect("data");
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", ports[0]);
    let timed = |p: &str| {
        let t = Instant::now();
        // A body that never ends (waiting for a rate that never comes) fails here.
        let (status, _, body) = curl_i(&["--max-time", "30", &url(p)]);
        (status, body, t.elapsed())
    };

    // 3000 bytes at 1000 bytes/s: 1000 at once, the rest over two more seconds.
    for loc in ["/unbuffered", "/buffered"] {
        let (status, body, took) = timed(&format!("{loc}/data?e=1000"));
        assert_eq!((status, body.as_slice()), (200, data.as_bytes()), "{loc}");
        assert!(took >= Duration::from_millis(1500), "{loc} paced: {took:?}");
    }
    // A variable that is not the upstream's: the same.
    let (status, body, took) = timed("/arg/data?r=1k");
    assert_eq!((status, body.len()), (200, 3000));
    assert!(took >= Duration::from_millis(1500), "paced: {took:?}");

    // An empty X-Rate, or one that is no size: logged, and no limit (the whole body, in
    // less time than 3000 bytes at even 100 bytes/s would take).
    for p in ["/unbuffered/data?e=", "/buffered/data?e=fast"] {
        let (status, body, took) = timed(p);
        assert_eq!((status, body.as_slice()), (200, data.as_bytes()), "{p}");
        assert!(took < Duration::from_secs(29), "{p} not paced: {took:?}");
    }
    let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("invalid size \"\""), "{log}");
    assert!(log.contains("invalid size \"fast\""), "{log}");
}
