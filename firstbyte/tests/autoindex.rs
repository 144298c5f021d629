//! `autoindex` (HTML, XML, JSON, JSONP listings as nginx renders them, names escaped, hidden
//! files left out, directories first, `index` first) and `empty_gif`.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        autoindex on;
        location /pub/ { }
        location /xml/ { alias {dir}/html/pub/; autoindex_format xml; }
        location /json/ { alias {dir}/html/pub/; autoindex_format json; }
        location /jsonp/ { alias {dir}/html/pub/; autoindex_format jsonp; }
        location /approx/ { alias {dir}/html/pub/; autoindex_exact_size off; }
        location /off/ { alias {dir}/html/pub/; autoindex off; }
        location /utf/ { charset utf-8; }
        location /withindex/ { }
        location /withtf/ { try_files $uri $uri/ =404; }
        location = /pixel.gif { empty_gif; }
    }
}
"#;

/// 1986-12-31 10:00:00 UTC, a Wednesday.
const MTIME: u64 = 536_407_200;
const ESCAPED: &str = "<script>&\"x\".txt";

fn touch(p: &Path) {
    let f = std::fs::File::open(p).expect("open for mtime");
    f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME))
        .expect("set mtime");
}

fn file(p: &Path, data: &[u8]) {
    std::fs::write(p, data).expect("write file");
    touch(p);
}

/// The tree: `pub/` with a directory, a hidden file, a name needing escaping, a small file
/// and a 3 MiB one; `utf/` with a long UTF-8 name; `withindex/` with an index file.
fn tree(dir: &Path) {
    let p = dir.join("html/pub");
    std::fs::create_dir_all(p.join("sub")).expect("mkdir");
    file(&p.join("a.txt"), b"hello");
    file(&p.join(".hidden"), b"secret");
    file(&p.join(ESCAPED), b"");
    file(&p.join("big.bin"), b"");
    let big = std::fs::OpenOptions::new()
        .write(true)
        .open(p.join("big.bin"))
        .expect("open big");
    big.set_len(3 << 20).expect("set_len");
    drop(big);
    touch(&p.join("big.bin"));
    touch(&p.join("sub"));
    let u = dir.join("html/utf");
    std::fs::create_dir_all(&u).expect("mkdir utf");
    file(&u.join("ф".repeat(45)), b"");
    file(&u.join(format!("<{}", "ф".repeat(60))), b"");
    let w = dir.join("html/withindex");
    std::fs::create_dir_all(&w).expect("mkdir withindex");
    file(&w.join("index.html"), b"the index\n");
    file(&w.join("other.txt"), b"x");
    let t = dir.join("html/withtf");
    std::fs::create_dir_all(&t).expect("mkdir withtf");
    file(&t.join("f.txt"), b"x");
}

fn start() -> (Server, u16) {
    let (server, ports) = Server::start("autoindex", CONF, 1);
    tree(&server.dir);
    (server, ports[0])
}

/// One HTTP/1.0 request with `extra` header lines; (status, headers, body).
fn request(
    port: u16,
    method: &str,
    target: &str,
    extra: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "{method} {target} HTTP/1.0\r\nHost: localhost\r\n{extra}\r\n"
    )
    .expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    parse_response(&raw)
}

fn get(port: u16, target: &str) -> (u16, Vec<(String, String)>, String) {
    let (code, h, body) = request(port, "GET", target, "");
    (code, h, String::from_utf8(body).expect("utf-8 body"))
}

fn line(text: &str, visible: usize, size: &str) -> String {
    format!(
        "{text}{} 31-Dec-1986 10:00 {size}\r\n",
        " ".repeat(50 - visible)
    )
}

#[test]
fn html_listing_is_nginx_s() {
    let (_server, port) = start();
    let (code, h, body) = get(port, "/pub/");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html"));
    let want = [
        "<html>\r\n<head><title>Index of /pub/</title></head>\r\n<body>\r\n",
        "<h1>Index of /pub/</h1><hr><pre><a href=\"../\">../</a>\r\n",
        &line("<a href=\"sub/\">sub/</a>", 4, "                  -"),
        &line(
            "<a href=\"%3Cscript%3E%26%22x%22.txt\">&lt;script&gt;&amp;&quot;x&quot;.txt</a>",
            16,
            &format!("{:>19}", 0),
        ),
        &line("<a href=\"a.txt\">a.txt</a>", 5, &format!("{:>19}", 5)),
        &line(
            "<a href=\"big.bin\">big.bin</a>",
            7,
            &format!("{:>19}", 3 << 20),
        ),
        "</pre><hr></body>\r\n</html>\r\n",
    ]
    .concat();
    assert_eq!(body, want);
    assert!(!body.contains("hidden"), "dot files are not listed");
    assert!(!body.contains("<script>"), "names are escaped");

    // `autoindex_exact_size off`: rounded, `-` narrower for directories.
    let (_, _, body) = get(port, "/approx/");
    assert!(body.contains(&line("<a href=\"sub/\">sub/</a>", 4, "      -")));
    assert!(body.contains(&line("<a href=\"a.txt\">a.txt</a>", 5, "      5")));
    assert!(body.contains(&line("<a href=\"big.bin\">big.bin</a>", 7, "     3M")));
}

#[test]
fn utf8_names_count_characters_with_charset_utf8() {
    let (_server, port) = start();
    let (code, h, body) = get(port, "/utf/");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html; charset=utf-8"));
    let name = "ф".repeat(45);
    let href: String = name.bytes().map(|b| format!("%{b:02X}")).collect();
    assert!(
        body.contains(&line(
            &format!("<a href=\"{href}\">{name}</a>"),
            45,
            &format!("{:>19}", 0)
        )),
        "{body}"
    );
    // Past 50 characters: 47 of them, escaped, then `..&gt;`.
    let cut = format!("&lt;{}..&gt;</a> 31-Dec-1986", "ф".repeat(46));
    assert!(body.contains(&cut), "{body}");
}

#[test]
fn xml_json_and_jsonp() {
    let (_server, port) = start();
    let (code, h, body) = get(port, "/xml/");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/xml; charset=utf-8"));
    let at = "mtime=\"1986-12-31T10:00:00Z\"";
    let want = format!(
        "<?xml version=\"1.0\"?>\r\n<list>\r\n<directory {at}>sub</directory>\r\n\
         <file {at} size=\"0\">&lt;script&gt;&amp;&quot;x&quot;.txt</file>\r\n\
         <file {at} size=\"5\">a.txt</file>\r\n<file {at} size=\"3145728\">big.bin</file>\r\n</list>\r\n"
    );
    assert_eq!(body, want);

    let (code, h, body) = get(port, "/json/");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("application/json"));
    let at = "\"mtime\":\"Wed, 31 Dec 1986 10:00:00 GMT\"";
    let json = format!(
        "[\r\n{{ \"name\":\"sub\", \"type\":\"directory\", {at} }},\
         \r\n{{ \"name\":\"<script>&\\\"x\\\".txt\", \"type\":\"file\", {at}, \"size\":0 }},\
         \r\n{{ \"name\":\"a.txt\", \"type\":\"file\", {at}, \"size\":5 }},\
         \r\n{{ \"name\":\"big.bin\", \"type\":\"file\", {at}, \"size\":3145728 }}\r\n]"
    );
    assert_eq!(body, json);

    let (code, h, body) = get(port, "/jsonp/?callback=cb.f_1");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("application/javascript"));
    assert_eq!(body, format!("/* callback */\r\ncb.f_1({json});"));
    // No callback: plain JSON.
    let (code, h, body) = get(port, "/jsonp/");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("application/json"));
    assert_eq!(body, json);
    // A callback that is not a plain name (script injection) is refused.
    assert_eq!(get(port, "/jsonp/?callback=alert(1)").0, 400);
    assert_eq!(get(port, "/jsonp/?callback=a%3Bb").0, 400);
}

#[test]
fn methods_index_and_errors() {
    let (_server, port) = start();
    // HEAD: the listing's status and type, no body.
    let (code, h, body) = request(port, "HEAD", "/pub/", "");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("text/html"));
    assert!(body.is_empty());
    assert_eq!(
        request(port, "POST", "/pub/", "Content-Length: 0\r\n").0,
        405
    );
    // `index` first: the directory's index.html, not its listing.
    let (code, _, body) = get(port, "/withindex/");
    assert_eq!((code, body.as_str()), (200, "the index\n"));
    // Debian's `try_files $uri $uri/ =404`: the `$uri/` candidate is listed.
    let (code, _, body) = get(port, "/withtf/");
    assert_eq!(code, 200);
    assert!(body.contains("<a href=\"f.txt\">f.txt</a>"), "{body}");
    assert_eq!(get(port, "/withtf/nope").0, 404);
    // A directory without its slash is redirected by the static module.
    let (code, h, _) = get(port, "/pub/sub");
    assert_eq!(code, 301);
    assert!(header(&h, "location").is_some_and(|l| l.ends_with("/pub/sub/")));
    // An empty directory lists `../` only.
    let (code, _, body) = get(port, "/pub/sub/");
    assert_eq!(code, 200);
    assert!(body.ends_with("<a href=\"../\">../</a>\r\n</pre><hr></body>\r\n</html>\r\n"));
    assert_eq!(get(port, "/pub/missing/").0, 404);
    assert_eq!(get(port, "/off/").0, 403);
    // A request that names an escaped directory gets an escaped title.
    std::fs::create_dir_all(_server.dir.join("html/pub/<b>&")).expect("mkdir");
    let (code, _, body) = get(port, "/pub/%3Cb%3E&/");
    assert_eq!(code, 200);
    assert!(
        body.contains("<title>Index of /pub/&lt;b&gt;&amp;/</title>"),
        "{body}"
    );
    // Deliberate (nginx lists it): a raw `<` or `>` is not a request-target byte (RFC 9112,
    // RFC 3986), and hyper's parser (the `http` crate's URI table, no lenient option) refuses
    // the request line with 400 before a location is chosen.
    assert_eq!(get(port, "/pub/<b>&/").0, 400);
}

#[test]
fn empty_gif_is_nginx_s_pixel() {
    let (_server, port) = start();
    let (code, h, body) = request(port, "GET", "/pixel.gif", "");
    assert_eq!(code, 200);
    assert_eq!(header(&h, "content-type"), Some("image/gif"));
    assert_eq!(header(&h, "content-length"), Some("43"));
    let lm = "Mon, 28 Sep 1970 06:00:00 GMT";
    assert_eq!(header(&h, "last-modified"), Some(lm));
    let gif: [u8; 43] = [
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00,
        0x00, 0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, 0x2c, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x4c, 0x01, 0x00, 0x3b,
    ];
    assert_eq!(body, gif);
    let (code, h, body) = request(port, "HEAD", "/pixel.gif", "");
    assert_eq!((code, body.len()), (200, 0));
    assert_eq!(header(&h, "content-type"), Some("image/gif"));
    let (code, _, body) = request(
        port,
        "GET",
        "/pixel.gif",
        &format!("If-Modified-Since: {lm}\r\n"),
    );
    assert_eq!((code, body.len()), (304, 0));
    let post = request(port, "POST", "/pixel.gif", "Content-Length: 0\r\n");
    assert_eq!(post.0, 405);
    // The directive makes the location's content: nothing on disk is read.
    assert!(!_server.dir.join("html/pixel.gif").exists());
}
