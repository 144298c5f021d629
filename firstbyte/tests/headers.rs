//! Request headers as nginx reads them: with `ignore_invalid_headers on` (the default) a
//! header name with `_` (unless `underscores_in_headers on`) or another character nginx does
//! not take is dropped before anything reads it, so a client cannot send `X_Real_IP` beside
//! the `X-Real-IP` a proxy sets (applications that map both to `HTTP_X_REAL_IP` would believe
//! either). The default (dropped, over HTTP/1.1, HTTP/2 and HTTP/3) is in
//! `request_contract.rs`; here the directives that keep them.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use support::*;

/// An upstream that answers every request with 200 and sends each request head it read.
fn upstream() -> (u16, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut r = BufReader::new(s);
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let _ = tx.send(head);
                let mut s = r.into_inner();
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    (port, rx)
}

fn conf(up: u16, server_extra: &str) -> String {
    format!(
        r#"
pid off;
error_log {{dir}}/error.log info;
events {{}}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{{port0}};
        {server_extra}
        location / {{
            proxy_pass http://127.0.0.1:{up};
            proxy_set_header X-Real-IP $remote_addr;
        }}
        location /echo {{ return 200 "[$http_x_real_ip]"; }}
    }}
}}
"#
    )
}

/// Sends a raw HTTP/1.1 request with `extra` header lines; returns the response.
fn raw(port: u16, path: &str, extra: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn lower(head: &str) -> String {
    head.to_ascii_lowercase()
}

#[test]
fn underscores_in_headers_on_and_ignore_invalid_headers_off_keep_them() {
    let (up, heads) = upstream();
    let (_s, p) = Server::start(
        "headers-underscores",
        &conf(up, "underscores_in_headers on;"),
        1,
    );
    raw(p[0], "/", "X_Custom: 1\r\nX.Dot: 2\r\n");
    let head = lower(&heads.recv_timeout(Duration::from_secs(10)).unwrap());
    assert!(head.contains("x_custom: 1"), "{head}");
    assert!(!head.contains("x.dot"), "{head}");

    let (up, heads) = upstream();
    let (_s, p) = Server::start(
        "headers-keep-invalid",
        &conf(up, "ignore_invalid_headers off;"),
        1,
    );
    raw(p[0], "/", "X_Custom: 1\r\nX.Dot: 2\r\n");
    let head = lower(&heads.recv_timeout(Duration::from_secs(10)).unwrap());
    assert!(
        head.contains("x_custom: 1") && head.contains("x.dot: 2"),
        "{head}"
    );
}
