//! Redirects firstbyte makes itself (a directory without its slash, `return 301 /path`) are
//! built as nginx builds them: the validated Host (never the raw header: its port and case
//! are not copied), or the server's name with `server_name_in_redirect on`; the port the
//! connection came to (`port_in_redirect`); relative with `absolute_redirect off`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

fn conf() -> &'static str {
    r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        server_name main.example;
        root {dir}/html;
        location /named/ { server_name_in_redirect on; }
        location /noport/ { port_in_redirect off; }
        location /relative/ { absolute_redirect off; }
        location = /go { return 301 /there; }
    }
}
"#
}

fn location(port: u16, path: &str, host: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 301"), "{out}");
    out.lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .unwrap_or_else(|| panic!("no Location: {out}"))
        .to_string()
}

#[test]
fn redirects_use_the_validated_host_and_the_local_port() {
    let (s, p) = Server::start("redirects", conf(), 1);
    for d in ["dir", "named/dir", "noport/dir", "relative/dir"] {
        std::fs::create_dir_all(s.dir.join("html").join(d)).unwrap();
    }
    let port = p[0];
    assert_eq!(
        location(port, "/dir", "Evil.Example.:9999"),
        format!("http://evil.example:{port}/dir/")
    );
    assert_eq!(
        location(port, "/go", "other.example"),
        format!("http://other.example:{port}/there")
    );
    assert_eq!(
        location(port, "/named/dir", "evil.example"),
        format!("http://main.example:{port}/named/dir/")
    );
    assert_eq!(
        location(port, "/noport/dir", "a.example:9999"),
        "http://a.example/noport/dir/"
    );
    assert_eq!(
        location(port, "/relative/dir", "a.example"),
        "/relative/dir/"
    );
}
