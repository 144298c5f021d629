//! `ssi on` (nginx's SSI filter): `echo`, `set`, `if`, `config`, `include virtual` of static
//! files and proxied locations, `set=`, `stub`, the headers an SSI response loses, gzip after
//! it, and hostile pages (an unterminated command at the end, a page including itself, a huge
//! value, `..` in an include).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        http2 on;
        root {dir}/html;
        location / { ssi on; }
        location /silent/ { ssi on; ssi_silent_errors on; }
        location /long/ { ssi on; ssi_value_length 1024; }
        location /plain/ { ssi on; ssi_types text/plain; }
        location /gz/ { ssi on; gzip on; gzip_min_length 1; gzip_http_version 1.0; }
        location /keep/ { ssi on; ssi_last_modified on; }
        location /proxy/ { proxy_pass http://127.0.0.1:{port1}/; }
        location /secret/ { internal; }
        location /ret/ { ssi on; set $http_foo "set_foo"; return 200 'R<!--#echo var="http_foo" -->R'; }
        location /other/ { set $http_bar "set_bar"; }
        location /ret2/ { ssi on; return 200 'R<!--#echo var="http_bar" -->R'; }
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/up;
    }
    server {
        listen 127.0.0.1:{port0};
        server_name other.test;
        http2 on;
        root {dir}/other;
        ssi on;
    }
}
"#;

fn start() -> (Server, Vec<u16>) {
    let (mut server, ports) = Server::start("ssi", CONF, 2);
    server.wait_port(ports[1]);
    let d = &server.dir;
    for sub in [
        "html/silent",
        "html/long",
        "html/plain",
        "html/gz",
        "html/keep",
        "html/secret",
        "up",
    ] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    let w = |p: &str, s: &[u8]| std::fs::write(d.join(p), s).expect("write");
    w("html/vars.html", b"A<!--#set var=\"x\" value=\"<$arg_v>\" --><!--#echo var=\"x\" -->|<!--#echo var=\"x\" encoding=\"none\" -->|<!--#echo var=\"nope\" default=\"dflt\" -->|<!--#echo var=\"nope\" -->Z");
    w(
        "html/if.html",
        b"<!--#if expr=\"$arg_a = yes\" -->YES<!--#elif expr=\"$arg_a = /^n(o+)\\$/\" -->NO<!--#echo var=\"1\" --><!--#else -->OTHER<!--#endif -->",
    );
    w("html/part.html", b"[part <!--#echo var=\"arg_p\" -->]");
    w(
        "html/inc.html",
        b"1<!--#include virtual=\"part.html?p=rel\" -->2<!--#include virtual=\"/proxy/up.html\" -->3<!--#include virtual=\"/secret/s.html\" -->4",
    );
    w("up/up.html", b"(upstream)");
    std::fs::create_dir_all(d.join("other")).expect("mkdir");
    w("other/o.html", b"o<!--#include virtual=\"/part.html\" -->o");
    w("other/part.html", b"[other]");
    w("html/secret/s.html", b"(secret)");
    w(
        "html/set.html",
        b"<!--#include virtual=\"/part.html?p=v\" set=\"got\" -->=<!--#echo var=\"got\" encoding=\"none\" -->",
    );
    w(
        "html/stub.html",
        b"<!--#block name=\"s\" -->STUB(<!--#echo var=\"arg_q\" -->)<!--#endblock -->a<!--#include virtual=\"/missing\" stub=\"s\" -->b",
    );
    w(
        "html/self.html",
        b"x<!--#include virtual=\"/self.html\" -->",
    );
    w(
        "html/twice.html",
        b"y<!--#include virtual=\"/twice.html\" --><!--#include virtual=\"/twice.html\" -->",
    );
    w("html/open.html", b"body<!--#echo var=\"arg_v\"");
    w("html/silent/open.html", b"body<!--#echo var=\"arg_v\"");
    w("html/silent/bad.html", b"a<!--#nosuch -->b");
    let huge = format!(
        "h<!--#set var=\"v\" value=\"{}\" -->t<!--#echo var=\"v\" -->",
        "q".repeat(600)
    );
    w("html/huge.html", huge.as_bytes());
    w("html/long/huge.html", huge.as_bytes());
    w(
        "html/escape.html",
        b"<!--#include virtual=\"/../../etc/passwd\" -->e",
    );
    w("html/plain/p.txt", b"t<!--#echo var=\"arg_v\" -->t");
    w("html/t.txt", b"t<!--#echo var=\"arg_v\" -->t");
    w("html/keep/k.html", b"k<!--#echo var=\"arg_v\" -->");
    w("html/gz/g.html", b"gz<!--#echo var=\"arg_v\" -->gz");
    (server, ports)
}

fn get_with(port: u16, target: &str, extra: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(s, "GET {target} HTTP/1.0\r\nHost: localhost\r\n{extra}\r\n").expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    parse_response(&raw)
}

fn get(port: u16, target: &str) -> (u16, String) {
    let (code, _, body) = get_with(port, target, "");
    (code, String::from_utf8(body).expect("utf-8"))
}

const ERR: &str = "[an error occurred while processing the directive]";

#[test]
fn echo_set_and_headers() {
    let (_s, p) = start();
    let (code, h, body) = get_with(p[0], "/vars.html?v=a%26b", "");
    assert_eq!(code, 200);
    assert_eq!(
        String::from_utf8(body).expect("utf-8"),
        "A&lt;a%26b&gt;|<a%26b>|dflt|(none)Z"
    );
    // The file's length, validators and ranges no longer describe the body.
    for name in ["content-length", "last-modified", "etag", "accept-ranges"] {
        assert_eq!(header(&h, name), None, "{name} kept");
    }
    // A range of the page is not served: the whole processed page is (nginx).
    let (code, h, body) = get_with(p[0], "/vars.html?v=r", "Range: bytes=0-3\r\n");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-range"), None);
    assert_eq!(body, b"A&lt;r&gt;|<r>|dflt|(none)Z");
    // ssi_last_modified keeps Last-Modified, with a weak ETag.
    let (_, h, _) = get_with(p[0], "/keep/k.html", "");
    assert!(header(&h, "last-modified").is_some());
    assert!(header(&h, "etag").is_some_and(|e| e.starts_with("W/")));
}

#[test]
fn conditions() {
    let (_s, p) = start();
    assert_eq!(get(p[0], "/if.html?a=yes").1, "YES");
    assert_eq!(get(p[0], "/if.html?a=nooo").1, "NOooo");
    assert_eq!(get(p[0], "/if.html?a=maybe").1, "OTHER");
    assert_eq!(get(p[0], "/if.html").1, "OTHER");
}

#[test]
fn includes_static_proxied_internal_set_and_stub() {
    let (_s, p) = start();
    assert_eq!(get(p[0], "/inc.html").1, "1[part rel]2(upstream)3(secret)4");
    // The client itself cannot reach the internal location.
    assert_eq!(get(p[0], "/secret/s.html").0, 404);
    assert_eq!(get(p[0], "/set.html").1, "=[part v]");
    assert_eq!(get(p[0], "/stub.html?q=z").1, "aSTUB(z)b");
}

#[test]
fn only_its_types() {
    let (_s, p) = start();
    assert_eq!(get(p[0], "/t.txt?v=1").1, "t<!--#echo var=\"arg_v\" -->t");
    assert_eq!(get(p[0], "/plain/p.txt?v=1").1, "t1t");
}

#[test]
fn gzip_after_ssi() {
    let (_s, p) = start();
    let (code, h, body) = get_with(p[0], "/gz/g.html?v=MID", "Accept-Encoding: gzip\r\n");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-encoding"), Some("gzip"));
    let mut out = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut out)
        .expect("gunzip");
    assert_eq!(out, "gzMIDgz");
}

#[test]
fn hostile_pages() {
    let (_s, p) = start();
    // A command the body ends inside: the error message, the text before it intact.
    assert_eq!(get(p[0], "/open.html?v=1").1, format!("body{ERR}"));
    assert_eq!(get(p[0], "/silent/open.html?v=1").1, "body");
    assert_eq!(get(p[0], "/silent/bad.html").1, "ab");
    // A value past ssi_value_length (256) is refused; the page goes on.
    assert_eq!(get(p[0], "/huge.html").1, format!("h{ERR}t(none)"));
    assert_eq!(
        get(p[0], "/long/huge.html").1,
        format!("ht{}", "q".repeat(600))
    );
    // No include climbs out of the root.
    assert_eq!(get(p[0], "/escape.html").1, format!("{ERR}e"));
    // A page including itself stops at nginx's 50 levels.
    let (code, body) = get(p[0], "/self.html");
    assert_eq!(code, 200);
    assert_eq!(body, format!("{}{ERR}", "x".repeat(51)));
    // Twice per level would be 2^50 includes: the per-request count stops it.
    let (code, body) = get(p[0], "/twice.html");
    assert_eq!(code, 200);
    let ys = body.matches('y').count();
    assert!((900..=1001).contains(&ys), "{ys} includes");
    // The server is still there.
    assert_eq!(get(p[0], "/if.html?a=yes").1, "YES");
}

/// `return`'s text is typed by the URI's extension (nginx's `ngx_http_set_content_type`), so
/// SSI runs in it; a `set` variable named like a header variable is the header until a `set`
/// in this request gives it a value (rewrite_set.t).
#[test]
fn return_text_and_set_header_variables() {
    let (_s, p) = start();
    let (code, h, body) = get_with(p[0], "/ret/x.html", "Foo: orig\r\n");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html"));
    assert_eq!(body, b"Rset_fooR");
    let (_, _, body) = get_with(p[0], "/ret2/x.html", "Bar: orig\r\n");
    assert_eq!(body, b"RorigR");
    // No html extension: the location's default_type, no SSI.
    let (_, h, body) = get_with(p[0], "/ret2/x", "Bar: orig\r\n");
    assert_eq!(header(&h, "content-type"), Some("text/plain"));
    assert_eq!(body, b"R<!--#echo var=\"http_bar\" -->R");
}

/// Over HTTP/2 the host is `:authority`, not a header: an include still goes to the page's
/// server block.
#[test]
fn http2_includes_stay_in_the_server() {
    let (_s, p) = start();
    let url = format!("http://127.0.0.1:{}/o.html", p[0]);
    let out = curl(&["--http2-prior-knowledge", "-H", "Host: other.test", &url]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "o[other]o");
}
