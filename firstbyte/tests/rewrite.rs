//! The rewrite module, `map`, `split_clients` and `geo`, end to end: certbot's HTTP→HTTPS snippet,
//! `rewrite` with each flag and the ten-cycle limit, `set` and `if` with captures and file
//! tests, `map` (default, regex, hostnames) and `split_clients` buckets, and those variables
//! in the access log.

mod support;

use support::*;

const CONF: &str = r#"
pid {dir}/fb.pid;
error_log {dir}/error.log notice;
events {}
http {
    log_format rw '$uri map=$mapped bucket=$bucket tag=$tag';
    access_log {dir}/access.log rw;
    map $http_x_key $mapped {
        default none;
        alpha one;
        ~^re-(?<rest>\w+)$ "re:$rest";
    }
    map $host $hostkind {
        hostnames;
        default other;
        *.example.org wild;
        example.net exact;
    }
    split_clients "$arg_id" $bucket { 30% A; 30% B; * C; }
    geo $geo {
        default world;
        127.0.0.0/8 loopback;
        127.0.0.2/32 two;
        delete 127.0.0.3/32;
        127.0.0.3/32 three;
        proxy 127.0.0.1;
    }
    geo $arg_ip $geo_arg {
        ranges;
        default none;
        10.0.0.0-10.0.0.255 ten;
        10.0.0.10-10.0.0.20 inner;
    }

    server {
        listen 127.0.0.1:{port0};
        server_name example.com;
        if ($host = example.com) {
            return 301 https://$host$request_uri;
        } # managed by Certbot
        return 404; # managed by Certbot
    }

    server {
        listen 127.0.0.1:{port1};
        server_name rw.test;
        root {dir}/html;
        location / {
            rewrite ^/old/(.*)$ /new/$1 last;
            rewrite ^/brk/(.*)$ /new/$1 break;
            rewrite ^/tmp/(.*)$ /new/$1 redirect;
            rewrite ^/perm/(.*)$ /new/$1 permanent;
            rewrite ^/loop /loop last;
        }
        location /new/ { add_header X-Loc new; }
        location /er { error_page 302 http://example.net/e; return 302 "first"; }
        location /ep { error_page 404 /ep405; return 404; }
        location /ep405 { return 405; }
        location /m { return 200 "$mapped|$hostkind|$bucket\n"; }
        location /geo { return 200 "$geo|$geo_arg\n"; }
        location /s {
            set $tag "t-$arg_v";
            if ($arg_v ~ ^(?<num>\d+)$) { return 200 "num $1 $num $tag\n"; }
            return 200 "other $tag\n";
        }
        location ~ ^/sec/(?<section>[a-z]+)/(?<id>\d+)$ { return 200 "$section #$id $2\n"; }
        location /if/ {
            if (-f $request_filename) { add_header X-File yes; }
            if (!-e $request_filename) { return 404 "missing\n"; }
        }
    }
}
"#;

fn start(tag: &str) -> (Server, Vec<u16>) {
    let (s, p) = Server::start(tag, CONF, 2);
    let html = s.dir.join("html");
    std::fs::create_dir_all(html.join("new")).unwrap();
    std::fs::create_dir_all(html.join("if")).unwrap();
    std::fs::write(html.join("new/x.html"), "new x\n").unwrap();
    std::fs::write(html.join("if/here.html"), "here\n").unwrap();
    (s, p)
}

fn get(port: u16, host: &str, path: &str, extra: &[&str]) -> (u16, Vec<(String, String)>, String) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let h = format!("Host: {host}");
    let mut args = vec!["-H", h.as_str()];
    args.extend_from_slice(extra);
    args.push(url.as_str());
    let (code, headers, body) = curl_i(&args);
    (code, headers, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn certbot_redirect_snippet() {
    let (_s, p) = start("rw-certbot");
    let (code, h, _) = get(p[0], "example.com", "/a/b?c=d", &[]);
    assert_eq!(code, 301);
    assert_eq!(header(&h, "location"), Some("https://example.com/a/b?c=d"));
    let (code, h, _) = get(p[0], "other.example", "/a", &[]);
    assert_eq!(code, 404);
    assert_eq!(header(&h, "location"), None);
}

#[test]
fn rewrite_flags() {
    let (s, p) = start("rw-flags");
    // last: the location is found again for the new URI.
    let (code, h, body) = get(p[1], "rw.test", "/old/x.html", &[]);
    assert_eq!((code, body.as_str()), (200, "new x\n"));
    assert_eq!(header(&h, "x-loc"), Some("new"));
    // break: the new URI is served from the same location.
    let (code, h, body) = get(p[1], "rw.test", "/brk/x.html", &[]);
    assert_eq!((code, body.as_str()), (200, "new x\n"));
    assert_eq!(header(&h, "x-loc"), None);
    // redirect / permanent: made absolute, arguments kept.
    let (code, h, _) = get(p[1], "rw.test", "/tmp/x.html?q=1", &[]);
    assert_eq!(code, 302);
    let port = p[1];
    assert_eq!(
        header(&h, "location"),
        Some(format!("http://rw.test:{port}/new/x.html?q=1").as_str())
    );
    let (code, h, _) = get(p[1], "rw.test", "/perm/x.html", &[]);
    assert_eq!(code, 301);
    assert_eq!(
        header(&h, "location"),
        Some(format!("http://rw.test:{port}/new/x.html").as_str())
    );
    // An error_page for a redirect's code takes over (nginx finalizes `return 302` with its
    // code), replacing the Location.
    let (code, h, _) = get(p[1], "rw.test", "/er", &[]);
    assert_eq!(code, 302);
    assert_eq!(header(&h, "location"), Some("http://example.net/e"));
    // An error page whose location answers another error sends that one (rewrite.t).
    let (code, _, _) = get(p[1], "rw.test", "/ep", &[]);
    assert_eq!(code, 405);
    // A cycle stops after ten internal redirects with 500 and nginx's message.
    let (code, _, _) = get(p[1], "rw.test", "/loop", &[]);
    assert_eq!(code, 500);
    let log = std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default();
    assert!(
        log.contains("rewrite or internal redirection cycle while processing \"/loop\""),
        "{log}"
    );
}

#[test]
fn set_if_captures_and_file_tests() {
    let (s, p) = start("rw-set-if");
    let (code, _, body) = get(p[1], "rw.test", "/s?v=42", &[]);
    assert_eq!((code, body.as_str()), (200, "num 42 42 t-42\n"));
    let (code, _, body) = get(p[1], "rw.test", "/s?v=x", &[]);
    assert_eq!((code, body.as_str()), (200, "other t-x\n"));
    // A regex location's named groups are variables.
    let (code, _, body) = get(p[1], "rw.test", "/sec/news/17", &[]);
    assert_eq!((code, body.as_str()), (200, "news #17 17\n"));
    let (code, h, body) = get(p[1], "rw.test", "/if/here.html", &[]);
    assert_eq!((code, body.as_str()), (200, "here\n"));
    assert_eq!(header(&h, "x-file"), Some("yes"));
    let (code, h, body) = get(p[1], "rw.test", "/if/gone.html", &[]);
    assert_eq!((code, body.as_str()), (404, "missing\n"));
    assert_eq!(header(&h, "x-file"), None);
    // `set` variables reach the access log.
    assert!(wait_log(&s, "/s map=none bucket=A tag=t-42").contains("tag=t-42"));
}

#[test]
fn map_and_split_clients() {
    let (s, p) = start("rw-map");
    let m = |host: &str, key: &str, id: &str| {
        let k = format!("X-Key: {key}");
        get(p[1], host, &format!("/m?id={id}"), &["-H", &k]).2
    };
    assert_eq!(m("rw.test", "alpha", "0"), "one|other|A\n");
    assert_eq!(m("a.example.org", "zzz", "3"), "none|wild|B\n");
    assert_eq!(m("example.net", "re-xyz", "7"), "re:xyz|exact|C\n");
    // nginx's MurmurHash2 buckets for ids 0..19 over 30% / 30% / the rest (computed from
    // nginx's ngx_murmur_hash2 and ngx_conf_split_clients_block arithmetic).
    let buckets: String = (0..20)
        .map(|i| {
            let body = get(p[1], "rw.test", &format!("/m?id={i}"), &[]).2;
            body.trim_end().rsplit('|').next().unwrap_or("").to_string()
        })
        .collect();
    assert_eq!(buckets, "AAABABBCABAACACACBCB");
    // map and split_clients outputs in the access log.
    assert!(wait_log(&s, "/m map=re:xyz bucket=C tag=").contains("bucket=C"));
}

/// `geo`: the client's address (loopback: `127.0.0.0/8`), through a trusted proxy's
/// `X-Forwarded-For` (the client, 127.0.0.1, is a `proxy`), the longest network first; and
/// `ranges` on another variable's value (a later range wins inside an earlier one).
#[test]
fn geo_by_address_proxy_and_ranges() {
    let (_s, p) = start("rw-geo");
    let g = |extra: &[&str], q: &str| get(p[1], "rw.test", &format!("/geo{q}"), extra).2;
    assert_eq!(g(&[], ""), "loopback|none\n");
    assert_eq!(g(&["-H", "X-Forwarded-For: 127.0.0.2"], ""), "two|none\n");
    assert_eq!(g(&["-H", "X-Forwarded-For: 127.0.0.3"], ""), "three|none\n");
    assert_eq!(
        g(&["-H", "X-Forwarded-For: 192.0.2.1, 8.8.8.8"], ""),
        "world|none\n"
    );
    assert_eq!(g(&[], "?ip=10.0.0.5"), "loopback|ten\n");
    assert_eq!(g(&[], "?ip=10.0.0.15"), "loopback|inner\n");
    assert_eq!(g(&[], "?ip=junk"), "loopback|none\n");
}

/// The access log once it holds `needle` (lines are written when a body is done: 2 s at
/// most), failing with the log otherwise.
fn wait_log(s: &Server, needle: &str) -> String {
    let path = s.dir.join("access.log");
    let mut log = String::new();
    for _ in 0..100 {
        log = std::fs::read_to_string(&path).unwrap_or_default();
        if log.contains(needle) {
            return log;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{needle:?} not in the access log:\n{log}");
}
