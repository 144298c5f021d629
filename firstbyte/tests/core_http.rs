//! Core HTTP and rewrite-module behaviour as nginx has it: `limit_except`, the response head
//! as nginx writes it (status line, header-name case), `add_header` on `ETag` and
//! `Last-Modified`, `index` as an internal redirect, and `error_page` after a redirect.
//! Real binary, raw sockets.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

/// Sends `raw` to 127.0.0.1:`port` and reads the whole answer (the request asks for close).
fn exchange(port: u16, raw: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw.as_bytes()).expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `METHOD path` over HTTP/1.0 with `extra` header lines.
fn req(port: u16, method: &str, path: &str, extra: &str) -> String {
    exchange(
        port,
        &format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n{extra}\r\n"),
    )
}

fn status(resp: &str) -> u16 {
    resp.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {resp:?}"))
}

const LIMIT_EXCEPT: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;

        location /read {
            limit_except GET {
                deny all;
            }
        }
        location /post {
            limit_except POST {
                allow 127.0.0.1;
                deny all;
            }
            return 200 "post-ok";
        }
        location /ret {
            # The location's rewrite directives do not run for a limited method: its
            # `return` cannot answer before the block's `deny`.
            limit_except GET {
                deny all;
            }
            return 200 "secret";
        }
        location /auth {
            limit_except GET {
                auth_basic "x";
                auth_basic_user_file {dir}/htpasswd;
            }
        }
        location /inner {
            internal;
            limit_except GET {
                allow all;
            }
        }
        location /lmt-proxy {
            proxy_pass http://127.0.0.1:{port1}/replacement;
            limit_except POST {
                proxy_pass http://127.0.0.1:{port1};
            }
        }
    }
    server {
        listen 127.0.0.1:{port1};
        location / {
            return 200 "uri:$uri";
        }
    }
}
"#;

#[test]
fn limit_except_refuses_every_method_not_listed() {
    let (server, ports) = Server::start("limit-except", LIMIT_EXCEPT, 2);
    std::fs::write(server.dir.join("html/read"), "file").unwrap();
    std::fs::write(server.dir.join("htpasswd"), "u:{PLAIN}p\n").unwrap();
    let p = ports[0];
    // GET and the HEAD it implies pass; any other method gets `deny all`.
    assert_eq!(status(&req(p, "GET", "/read", "")), 200);
    assert_eq!(status(&req(p, "HEAD", "/read", "")), 200);
    for m in [
        "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "FOO", "get", "Get",
    ] {
        let r = req(p, m, "/read", "Content-Length: 0\r\n");
        assert_ne!(status(&r), 200, "{m} /read went through: {r}");
        assert!(!r.contains("file"), "{m}: {r}");
    }
    assert_eq!(
        status(&req(p, "POST", "/read", "Content-Length: 0\r\n")),
        403
    );
    // A lower-case method is no method to nginx: 400 before any location (`http::contract`).
    assert_eq!(status(&req(p, "get", "/read", "")), 400);
    // HEAD is implied by GET only: `limit_except POST` limits HEAD and GET.
    assert_eq!(
        status(&req(p, "POST", "/post", "Content-Length: 0\r\n")),
        200
    );
    assert_eq!(status(&req(p, "GET", "/ret", "")), 200);
    let r = req(p, "POST", "/ret", "Content-Length: 0\r\n");
    assert_eq!(status(&r), 403, "{r}");
    assert!(!r.contains("secret"), "{r}");
    // auth_basic inside: only the limited methods must authenticate.
    std::fs::write(server.dir.join("html/auth"), "a").unwrap();
    assert_eq!(status(&req(p, "GET", "/auth", "")), 200);
    assert_eq!(
        status(&req(p, "PUT", "/auth", "Content-Length: 0\r\n")),
        401
    );
    // `internal` is checked on the enclosing location first.
    std::fs::write(server.dir.join("html/inner"), "i").unwrap();
    assert_eq!(
        status(&req(p, "POST", "/inner", "Content-Length: 0\r\n")),
        404
    );
    assert_eq!(status(&req(p, "GET", "/inner", "")), 404);
    // A `proxy_pass` of its own: the URI goes unchanged; the listed method keeps the
    // location's.
    let r = req(p, "GET", "/lmt-proxy", "");
    assert!(r.ends_with("uri:/lmt-proxy"), "{r}");
    let r = req(p, "POST", "/lmt-proxy", "Content-Length: 0\r\n");
    assert!(r.ends_with("uri:/replacement"), "{r}");
}

#[test]
fn limit_except_config_errors() {
    let dir = tempdir("limit-except-bad");
    for (body, want) in [
        (
            "limit_except GET TRACE { deny all; }",
            "invalid method \"TRACE\"",
        ),
        (
            "limit_except GET { root /x; }",
            "\"root\" directive is not allowed here",
        ),
        (
            "limit_except GET { deny all; } limit_except POST { deny all; }",
            "\"limit_except\" directive is duplicate",
        ),
    ] {
        let conf = dir.join("f.conf");
        std::fs::write(
            &conf,
            format!("events {{}} http {{ server {{ location / {{ {body} }} }} }}\n"),
        )
        .unwrap();
        let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body}: {err}");
        assert!(err.contains(want), "{body}: {err}");
        assert!(err.contains("f.conf:1"), "{body}: {err}");
    }
    // Method names in any case, as nginx.
    let conf = dir.join("ok.conf");
    std::fs::write(
        &conf,
        "events {} http { server { location / { limit_except get post { deny all; } } } }\n",
    )
    .unwrap();
    let out = firstbyte(&["-t", "-c", conf.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const HEADS: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        add_header X-URI $uri;
        add_header x-lower yes;

        location /noetag {
            add_header ETag foo;
            add_header ETag "";
        }
        location /lm {
            add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT";
        }
        location /loop/ {
            index /loop/;
        }
        location /abs/ {
            index /index.html;
        }
        location /err302 {
            error_page 302 /text;
            return 302 "http://example.com/first";
        }
        location /text {
            return 200 "text";
        }
    }
}
"#;

#[test]
fn heads_as_nginx_writes_them() {
    let (server, ports) = Server::start("heads", HEADS, 1);
    std::fs::write(server.dir.join("html/noetag"), "n").unwrap();
    std::fs::write(server.dir.join("html/lm"), "l").unwrap();
    let p = ports[0];
    // An HTTP/1.0 request gets nginx's HTTP/1.1 status line; names keep nginx's case.
    let r = req(p, "GET", "/index.html", "");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.contains("\r\nETag: \""), "{r}");
    assert!(r.contains("\r\nX-URI: /index.html\r\n"), "{r}");
    assert!(r.contains("\r\nx-lower: yes\r\n"), "{r}");
    // The body is not touched.
    assert!(r.ends_with("<h1>hello from firstbyte</h1>\n"), "{r}");
    // Over HTTP/1.1 too, on a keep-alive connection: each head.
    let two = exchange(
        p,
        "GET /index.html HTTP/1.1\r\nHost: a\r\n\r\nGET /index.html HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        two.matches("\r\nX-URI: /index.html\r\n").count(),
        2,
        "{two}"
    );
    assert_eq!(two.matches("\r\nETag: ").count(), 2, "{two}");
    // add_header ETag "" removes nginx's own ETag; Last-Modified is replaced, not added.
    let r = req(p, "GET", "/noetag", "");
    assert_eq!(status(&r), 200);
    assert!(!r.to_ascii_lowercase().contains("etag"), "{r}");
    let r = req(p, "GET", "/lm", "");
    assert_eq!(r.matches("Last-Modified").count(), 1, "{r}");
    assert!(
        r.contains("Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT"),
        "{r}"
    );
    // If-Range compares the date add_header gives (nginx's range filter runs after it).
    let ranged = |date: &str| {
        req(
            p,
            "GET",
            "/lm",
            &format!("Range: bytes=0-0\r\nIf-Range: {date}\r\n"),
        )
    };
    assert_eq!(status(&ranged("Mon, 28 Sep 1970 06:00:00 GMT")), 206);
    assert_eq!(status(&ranged("Tue, 29 Sep 1970 06:00:00 GMT")), 200);
}

#[test]
fn index_is_an_internal_redirect() {
    let (_server, ports) = Server::start("index-redirect", HEADS, 1);
    let p = ports[0];
    // `$uri` is the index file's URI, as after nginx's internal redirect.
    let r = req(p, "GET", "/", "");
    assert_eq!(status(&r), 200, "{r}");
    assert!(r.contains("\r\nX-URI: /index.html\r\n"), "{r}");
    // An absolute entry redirects whether or not a file is there.
    let r = req(p, "GET", "/abs/", "");
    assert!(r.contains("\r\nX-URI: /index.html\r\n"), "{r}");
    // An index naming its own location loops: 500 after nginx's 10 redirects.
    assert_eq!(status(&req(p, "GET", "/loop/", "")), 500);
}

#[test]
fn error_page_after_a_redirect_keeps_its_location() {
    let (_server, ports) = Server::start("err302", HEADS, 1);
    let r = req(ports[0], "GET", "/err302", "");
    assert_eq!(status(&r), 302, "{r}");
    assert!(
        r.contains("\r\nLocation: http://example.com/first\r\n"),
        "{r}"
    );
    assert!(r.ends_with("text"), "{r}");
}

/// Two consecutive ports that were free a moment ago.
fn free_port_pair() -> u16 {
    loop {
        let p = free_port();
        if p < 65535 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

#[test]
fn listen_port_range_listens_on_each_port() {
    let p = free_port_pair();
    let conf = format!(
        "pid off;\nerror_log {{dir}}/error.log;\nevents {{}}\nhttp {{\n access_log off;\n server {{\n  listen 127.0.0.1:{}-{};\n  location / {{ return 200 \"port:$server_port\"; }}\n }}\n}}\n",
        p,
        p + 1
    );
    let dir = tempdir("listen-range");
    let _server = Server::start_in(&dir, &render(&conf, &dir, &[]), p);
    for port in [p, p + 1] {
        let r = req(port, "GET", "/", "");
        assert!(r.ends_with(&format!("port:{port}")), "{r}");
    }
    // A range that ends below its start is nginx's "invalid port range".
    let bad = dir.join("bad.conf");
    std::fs::write(
        &bad,
        "events {} http { server { listen 127.0.0.1:8001-8000; } }\n",
    )
    .unwrap();
    let out = firstbyte(&["-t", "-c", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("invalid port range in \"127.0.0.1:8001-8000\" of the \"listen\" directive"),
        "{err}"
    );
}

const NAMES: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        server_name localhost;
        return 200 "default:$server_name";
    }
    server {
        listen 127.0.0.1:{port0};
        server_name "~^(?<sub>[a-z]+)\.(?P<dom>example)\.com$" other.test;
        return 200 "sub:$sub dom:$dom name:$server_name";
    }
    server {
        listen 127.0.0.1:{port0};
        server_name .dot.test *.star.test;
        return 200 "name:$server_name";
    }
}
"#;

#[test]
fn server_name_regex_captures_are_variables() {
    let (_server, ports) = Server::start("server-names", NAMES, 1);
    let p = ports[0];
    let get = |host: &str| {
        let r = exchange(p, &format!("GET / HTTP/1.0\r\nHost: {host}\r\n\r\n"));
        r.rsplit("\r\n\r\n").next().unwrap_or_default().to_string()
    };
    assert_eq!(
        get("Shop.EXAMPLE.com"),
        r"sub:shop dom:example name:~^(?<sub>[a-z]+)\.(?P<dom>example)\.com$"
    );
    // Chosen by its exact name, the server's regex does not match: the groups stay empty.
    assert_eq!(
        get("other.test"),
        r"sub: dom: name:~^(?<sub>[a-z]+)\.(?P<dom>example)\.com$"
    );
    assert_eq!(get("a.dot.test"), "name:dot.test");
    assert_eq!(get("nothing.here"), "default:localhost");
}

const ALIAS: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location ~ ^/pics/(.+)$ {
            alias {dir}/data/$1;
        }
        location ~ /tried\.html$ {
            alias {dir}/data;
            try_files $uri =404;
        }
        location /d/ {
            try_files $uri $uri/ =404;
        }
        location /up {
            proxy_pass http://127.0.0.1:{port1};
        }
    }
    server {
        listen 127.0.0.1:{port1};
        location / {
            add_header X-MiXed-Case yes;
            return 200 "up";
        }
    }
}
"#;

#[test]
fn alias_in_regex_locations() {
    let (server, ports) = Server::start("alias-regex", ALIAS, 2);
    let d = &server.dir;
    std::fs::create_dir_all(d.join("data/sub")).unwrap();
    std::fs::create_dir_all(d.join("html/d/sub")).unwrap();
    std::fs::write(d.join("data/a.png"), "png").unwrap();
    std::fs::write(d.join("data/sub/tried.html"), "tried").unwrap();
    std::fs::write(d.join("secret"), "secret").unwrap();
    let p = ports[0];
    // The alias, with the URI's capture, is the whole path.
    let r = req(p, "GET", "/pics/a.png", "");
    assert_eq!(status(&r), 200, "{r}");
    assert!(r.ends_with("png"), "{r}");
    // A capture cannot climb out of the alias (hyper hands `..` on; the path must not).
    for evil in [
        "/pics/../secret",
        "/pics/..%2fsecret",
        "/pics/%2e%2e/secret",
    ] {
        let r = req(p, "GET", evil, "");
        assert!(!r.contains("secret"), "{evil}: {r}");
        assert_ne!(status(&r), 200, "{evil}: {r}");
    }
    // try_files appends its candidate to a regex location's own alias.
    let r = req(p, "GET", "/sub/tried.html", "");
    assert_eq!(status(&r), 200, "{r}");
    assert!(r.ends_with("tried"), "{r}");
    assert_eq!(status(&req(p, "GET", "/other/tried.html", "")), 404);
    // `$uri/` matching a directory continues without the slash: nginx's 301 to `$uri/`.
    let r = req(p, "GET", "/d/sub", "");
    assert_eq!(status(&r), 301, "{r}");
    assert!(r.contains("Location: http://localhost"), "{r}");
    assert!(r.contains("/d/sub/\r\n"), "{r}");
    // A proxied response keeps the upstream's header-name case.
    let r = req(p, "GET", "/up", "");
    assert!(r.contains("\r\nX-MiXed-Case: yes\r\n"), "{r}");
}

const RATES: &str = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location /var/ {
            alias {dir}/html/;
            limit_rate $arg_l;
            limit_rate_after $arg_a;
        }
        location /set/ {
            alias {dir}/html/;
            set $limit_rate $arg_l;
            add_header X-Rate $limit_rate;
        }
    }
}
"#;

#[test]
fn limit_rate_with_variables() {
    let (server, ports) = Server::start("limit-rate-var", RATES, 1);
    let body: Vec<u8> = (0..30 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.dir.join("html/f.bin"), &body).unwrap();
    let p = ports[0];
    let timed = |path: &str| {
        let t = std::time::Instant::now();
        let r = exchange(p, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n"));
        (t.elapsed(), r)
    };
    // 10k a second, 10k at once: 30 KiB take at least 2 s.
    let (took, r) = timed("/var/f.bin?l=10k");
    assert_eq!(status(&r), 200);
    assert!(r.len() > body.len(), "{} bytes", r.len());
    assert!(took >= Duration::from_millis(1950), "{took:?}");
    // limit_rate_after from a variable: 10k, plus a second's 10k, at once; the last 10k
    // a second later.
    let (took, _) = timed("/var/f.bin?l=10k&a=10k");
    assert!(took >= Duration::from_millis(950), "{took:?}");
    // `set $limit_rate`: the variable reads back as bytes, and paces the body.
    let (took, r) = timed("/set/f.bin?l=10k");
    assert!(r.contains("\r\nX-Rate: 10240\r\n"), "{}", &r[..300]);
    assert!(r.len() > body.len(), "{} bytes: {}", r.len(), &r[..300]);
    assert!(took >= Duration::from_millis(1950), "{took:?}");
    // Not a size: nginx's error-log line, and no limit ($limit_rate stays 0).
    let (_, r) = timed("/set/f.bin?l=fast");
    assert!(r.contains("\r\nX-Rate: 0\r\n"), "{}", &r[..300]);
    let (_, r) = timed("/var/f.bin?l=fast");
    assert_eq!(status(&r), 200);
    let log = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
    assert!(log.contains("invalid $limit_rate \"fast\""), "{log}");
    assert!(log.contains("invalid size \"fast\""), "{log}");
}

#[test]
fn access_log_missing_variables_per_escape() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    log_format dflt '[$arg_x]';
    log_format raw escape=none '[$arg_x]';
    log_format js escape=json '[$arg_x]';
    server {
        listen 127.0.0.1:{port0};
        access_log {dir}/dflt.log dflt;
        access_log {dir}/raw.log raw;
        access_log {dir}/js.log js;
        return 204;
    }
}
"#;
    let (server, ports) = Server::start("log-missing", conf, 1);
    assert_eq!(status(&req(ports[0], "GET", "/", "")), 204);
    assert_eq!(status(&req(ports[0], "GET", "/?x=1", "")), 204);
    let read = |f: &str| {
        // The line is written when the response is done: wait a little for it.
        for _ in 0..100 {
            let s = std::fs::read_to_string(server.dir.join(f)).unwrap_or_default();
            if s.lines().count() >= 2 {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{f}: no lines");
    };
    // nginx: `-` for a variable with no value by default, nothing with escape=none|json.
    assert_eq!(read("dflt.log"), "[-]\n[1]\n");
    assert_eq!(read("raw.log"), "[]\n[1]\n");
    assert_eq!(read("js.log"), "[]\n[1]\n");
}

#[test]
fn proxy_pass_inside_if_reaches_its_upstream() {
    let conf = r#"
pid off;
error_log {dir}/error.log;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        location /p {
            if ($arg_up) {
                proxy_pass http://127.0.0.1:{port1};
            }
        }
    }
    server {
        listen 127.0.0.1:{port1};
        location / { return 200 "upstream:$uri"; }
    }
}
"#;
    let (_server, ports) = Server::start("if-proxy", conf, 2);
    let r = req(ports[0], "GET", "/p?up=1", "");
    assert!(r.ends_with("upstream:/p"), "{r}");
    // Without it, the location's own content: no file.
    assert_eq!(status(&req(ports[0], "GET", "/p", "")), 404);
}
