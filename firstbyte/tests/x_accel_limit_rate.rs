//! `X-Accel-Limit-Rate` from an upstream sets the response's rate limit, as nginx's proxy:
//! digits are bytes per second (it outranks the `limit_rate` of the location an
//! `X-Accel-Redirect` leads to), any other value is ignored, and `proxy_ignore_headers
//! X-Accel-Limit-Rate` turns it off. The header itself never reaches the client.

mod support;

use std::time::{Duration, Instant};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    log_format rate "$request_uri $limit_rate";
    server {
        listen 127.0.0.1:{port0};
        access_log {dir}/rate.log rate;
        location /on/ { proxy_pass http://127.0.0.1:{port1}/; }
        location /ignored/ {
            proxy_pass http://127.0.0.1:{port1}/;
            proxy_ignore_headers X-Accel-Limit-Rate;
        }
    }
    server {
        listen 127.0.0.1:{port1};
        access_log off;
        location /data {
            alias {dir}/html/data;
            add_header X-Accel-Limit-Rate $arg_xal;
            add_header X-Accel-Redirect $arg_xar;
        }
        location /fast { limit_rate 0; alias {dir}/html/data; }
    }
}
"#;

/// The access log's line for `uri`, waited for (the line is written as the response ends).
fn logged(dir: &std::path::Path, uri: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.join("rate.log")).unwrap_or_default();
        if let Some(l) = log.lines().find(|l| l.split(' ').next() == Some(uri)) {
            return l.to_string();
        }
        assert!(Instant::now() < deadline, "no log line for {uri}:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_upstreams_x_accel_limit_rate_sets_the_rate() {
    let (server, ports) = Server::start("x-accel-limit-rate", CONF, 2);
    let dir = server.dir.clone();
    std::fs::write(dir.join("html/data"), "X".repeat(30_000)).expect("data");
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", ports[0]);

    // 30,000 bytes at 10,000 bytes/s take two seconds at least.
    let t = Instant::now();
    let (status, h, body) = curl_i(&[&url("/on/data?xal=10000")]);
    let took = t.elapsed();
    assert_eq!((status, body.len()), (200, 30_000));
    assert!(took >= Duration::from_millis(1500), "paced: {took:?}");
    assert_eq!(header(&h, "x-accel-limit-rate"), None, "hidden as nginx");
    assert_eq!(
        logged(&dir, "/on/data?xal=10000"),
        "/on/data?xal=10000 10000"
    );

    // It outranks the `limit_rate 0` of the location X-Accel-Redirect leads to.
    let _ = curl_i(&[&url("/on/data?xal=50000&xar=/fast")]);
    assert_eq!(
        logged(&dir, "/on/data?xal=50000&xar=/fast"),
        "/on/data?xal=50000&xar=/fast 50000"
    );

    // Not digits: ignored (nginx's ngx_atoi), as is the header under proxy_ignore_headers.
    let _ = curl_i(&[&url("/on/data?xal=off")]);
    assert_eq!(logged(&dir, "/on/data?xal=off"), "/on/data?xal=off 0");
    let _ = curl_i(&[&url("/ignored/data?xal=10000")]);
    assert_eq!(
        logged(&dir, "/ignored/data?xal=10000"),
        "/ignored/data?xal=10000 0"
    );
}
