//! Whole loads: text (or fixture files under `testdata/conf/`) in, a `Config` or nginx's
//! message out. The pieces have their own tests; these check that they fit together.

use std::time::Duration;

use super::model::*;
use super::testutil::{load_as, ok};
use super::*;

const NAME: &str = "/t/x.conf";

fn err(text: &str) -> String {
    match load_as(text, true) {
        Ok(_) => panic!("expected an error from:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// `text` inside `http {}` (line 2 onward).
fn http(text: &str) -> Config {
    ok(&format!("events {{}}\nhttp {{\n{text}\n}}\n"))
}

fn servers(c: &Config) -> &[Arc<ServerConf>] {
    c.http
        .as_ref()
        .map(|h| h.servers.as_slice())
        .unwrap_or_default()
}

fn prefix_loc<'a>(l: &'a Locations, p: &str) -> &'a Arc<LocationConf> {
    match l.prefix.iter().find(|x| x.prefix == p) {
        Some(x) => &x.conf,
        None => panic!("no location {p}"),
    }
}

fn root_of(l: &LocationConf) -> String {
    match &l.root {
        DocRoot::Root(v) => format!("root {}", v.as_static().unwrap_or("<var>")),
        DocRoot::Alias(v) => format!("alias {}", v.as_static().unwrap_or("<var>")),
    }
}

fn header_names(l: &LocationConf) -> Vec<&str> {
    l.add_header.iter().map(|h| h.name.as_str()).collect()
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/conf")
}

#[test]
fn errors_are_worded_as_nginx() {
    let cases: &[(&str, &str)] = &[
        ("events {}\nfoo;", "unknown directive \"foo\" in /t/x.conf:2"),
        (
            "http {\n server {\n  location / {\n   ssl_dyn_rec_enable on;\n  }\n }\n}",
            "\"ssl_dyn_rec_enable\" directive is not allowed here in /t/x.conf:4",
        ),
        ("root /x;", "\"root\" directive is not allowed here in /t/x.conf:1"),
        ("http { server { root; } }", "invalid number of arguments in \"root\" directive in /t/x.conf:1"),
        ("http { root /a /b; }", "invalid number of arguments in \"root\" directive in /t/x.conf:1"),
        ("http {\nroot /a;\nroot /b;\n}", "\"root\" directive is duplicate in /t/x.conf:3"),
        (
            "http { server { location / {\nroot /a;\nalias /b;\n} } }",
            "\"alias\" directive is duplicate, \"root\" directive was specified earlier in /t/x.conf:3",
        ),
        (
            "http { server { location / {\nalias /a/;\nroot /b;\n} } }",
            "\"root\" directive is duplicate, \"alias\" directive was specified earlier in /t/x.conf:3",
        ),
        ("http { server { alias /a; } }", "\"alias\" directive is not allowed here in /t/x.conf:1"),
        ("events {}\n}", "unexpected \"}\" in /t/x.conf:2"),
        ("http {\n server {\n", "unexpected end of file, expecting \"}\" in /t/x.conf:3"),
        ("http {\n sendfile on", "unexpected end of file, expecting \";\" or \"}\" in /t/x.conf:2"),
        ("http;", "directive \"http\" has no opening \"{\" in /t/x.conf:1"),
        ("http { server { root /x { } } }", "directive \"root\" is not terminated by \";\" in /t/x.conf:1"),
        (
            "http { sendfile maybe; }",
            "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\" in /t/x.conf:1",
        ),
        ("http { client_max_body_size 1q; }", "\"client_max_body_size\" directive invalid value in /t/x.conf:1"),
        ("http { send_timeout 5x; }", "\"send_timeout\" directive invalid value in /t/x.conf:1"),
        (
            "http { server { listen x:99999; } }",
            "invalid port in \"x:99999\" of the \"listen\" directive in /t/x.conf:1",
        ),
        ("http { server { listen 80 foo; } }", "invalid parameter \"foo\" in /t/x.conf:1"),
        ("http { server {\nreturn 200 $foo;\n} }", "unknown \"foo\" variable in /t/x.conf:2"),
        ("http { server { location ~ ( { } } }", "invalid regex \"(\": unclosed group in /t/x.conf:1"),
        ("http { proxy_pass http://x; }", "\"proxy_pass\" directive is not allowed here in /t/x.conf:1"),
        ("http { proxy_socket_keepalive on; }", "\"proxy_socket_keepalive\" directive is not supported by firstbyte yet in /t/x.conf:1"),
        ("http { proxy_store \"\"; }", "empty path in /t/x.conf:1"),
        ("http { proxy_store on; proxy_store off; }", "\"proxy_store\" directive is duplicate in /t/x.conf:1"),
        ("http { proxy_cache z; proxy_store on; }", "\"proxy_store\" directive is incompatible with \"proxy_cache\" in /t/x.conf:1"),
        ("http { proxy_store_access user:rw group:x; }", "invalid value \"group:x\" in /t/x.conf:1"),
        ("http { proxy_store_access user:rw all:r; proxy_store_access user:r; }", "\"proxy_store_access\" directive is duplicate in /t/x.conf:1"),
        ("http { proxy_cache z; }", "\"proxy_cache\" zone \"z\" is unknown in /t/x.conf:1"),
        ("http { lingering_close always; }", "\"lingering_close always\" is not supported by firstbyte yet in /t/x.conf:1"),
        ("http { lingering_close maybe; }", "\"lingering_close\" directive invalid value in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1; random two most_conn; } }", "invalid parameter \"most_conn\" in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1; zone z 32767; } }", "zone \"z\" is too small in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1; zone \"\"; } }", "invalid zone name \"\" in /t/x.conf:1"),
        ("http { random; }", "\"random\" directive is not allowed here in /t/x.conf:1"),
        // nginx's checks of `server NAME resolve` (ngx_http_upstream_server, and
        // ngx_http_upstream_init_round_robin once `http` is read).
        ("http { upstream b { zone z 1m; server localhost resolve; } }", "no resolver defined to resolve names at run time in upstream \"b\" in /t/x.conf:1"),
        ("http { resolver 127.0.0.1; upstream b { server localhost resolve; } }", "resolving names at run time requires upstream \"b\" in /t/x.conf:1 to be in shared memory"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; resolver 127.0.0.1; server 127.0.0.1; } }", "\"resolver\" directive is duplicate in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver_timeout 1s; resolver_timeout 2s; server 127.0.0.1; } }", "\"resolver_timeout\" directive is duplicate in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; server localhost:80 service=http resolve; } }", "service upstream \"localhost:80\" may not have port in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; server 127.0.0.1 service=http resolve; } }", "service upstream \"127.0.0.1\" requires domain name in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; server localhost service=http; } }", "service upstream \"localhost\" requires \"resolve\" parameter in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; server localhost service= resolve; } }", "service is empty in /t/x.conf:1"),
        ("http { upstream b { zone z 1m; resolver 127.0.0.1; hash $uri; server localhost resolve backup; } }", "invalid parameter \"backup\" of server \"localhost\" in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1 backup; hash $uri; } }", "invalid parameter \"backup\" of server \"127.0.0.1\" in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1; hash $uri foo; } }", "invalid parameter \"foo\" in /t/x.conf:1"),
        ("http { upstream b { server 127.0.0.1; ip_hash x; } }", "invalid number of arguments in \"ip_hash\" directive in /t/x.conf:1"),
        ("http { server { location / { proxy_redirect default; proxy_pass http://127.0.0.1; } } }", "\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive in /t/x.conf:1"),
        ("http { proxy_redirect off; proxy_redirect http://a/ /; }", "\"proxy_redirect\" directive is duplicate in /t/x.conf:1"),
        ("http { proxy_redirect http://a/ /; proxy_redirect off; }", "\"proxy_redirect\" directive is duplicate in /t/x.conf:1"),
        ("http { proxy_redirect on; }", "invalid parameter \"on\" in /t/x.conf:1"),
        ("http { proxy_redirect ~( /; }", "invalid regex \"(\": unclosed group in /t/x.conf:1"),
        ("http { server { location / { proxy_busy_buffers_size 4k; proxy_buffer_size 8k; proxy_pass http://127.0.0.1:9; } } }", "\"proxy_busy_buffers_size\" must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\" in /t/x.conf:1"),
        ("http { server { location / { proxy_buffers 2 4k; proxy_busy_buffers_size 8k; proxy_pass http://127.0.0.1:9; } } }", "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer in /t/x.conf:1"),
        ("http { server { location / { proxy_buffer_size 16k; proxy_busy_buffers_size 16k; proxy_temp_file_write_size 8k; proxy_pass http://127.0.0.1:9; } } }", "\"proxy_temp_file_write_size\" must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\" in /t/x.conf:1"),
        ("http { server { location / { proxy_max_temp_file_size 1k; proxy_pass http://127.0.0.1:9; } } }", "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal to or greater than the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\" in /t/x.conf:1"),
        ("http { server { location / { proxy_buffers 4 128; proxy_buffer_size 128; proxy_busy_buffers_size 512; proxy_pass http://127.0.0.1:9; } } }", "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer in /t/x.conf:1"),
        ("http { proxy_next_upstream error bogus; }", "invalid value \"bogus\" in /t/x.conf:1"),
        ("http { proxy_next_upstream error off; }", "invalid value \"off\" in /t/x.conf:1"),
        ("http { upstream b { } }", "no servers are inside upstream \"b\" in /t/x.conf:1"),
        ("http { server { location / { proxy_pass ftp://x; } } }", "invalid URL prefix in \"ftp://x\" in /t/x.conf:1"),
        // A server-level `if` takes rewrite directives only (nginx: `expires` is for `if` in a location).
        ("http { server { if ($host) { expires 1h; } } }", "\"expires\" directive is not allowed here in /t/x.conf:1"),
        ("http { server { if ($host) { root /x; } } }", "\"root\" directive is not allowed here in /t/x.conf:1"),
        ("http { server { if $host { } } }", "invalid condition \"$host\" in /t/x.conf:1"),
        ("http { ssl_certificate_cache inactive=10s; }", "\"ssl_certificate_cache\" must have \"max\" parameter in /t/x.conf:1"),
        ("http { server { location / { sub_filter a b; } } }", "\"sub_filter\" directive is not supported by firstbyte yet in /t/x.conf:1"),
        ("http { server { location / { ssi maybe; } } }", "invalid value \"maybe\" in \"ssi\" directive, it must be \"on\" or \"off\" in /t/x.conf:1"),
        ("http { server { empty_gif; } }", "\"empty_gif\" directive is not allowed here in /t/x.conf:1"),
        ("http { server { location / { autoindex_format yaml; } } }", "invalid value \"yaml\" in \"autoindex_format\" directive, it must be \"html\", \"json\", \"jsonp\" or \"xml\" in /t/x.conf:1"),
        ("http { ssl_certificate_cache max=0; }", "invalid parameter \"max=0\" in /t/x.conf:1"),
        (
            "http { ssl_conf_command Options PrioritizeChaCha; }",
            "ssl_conf_command \"Options PrioritizeChaCha\" is not supported by firstbyte yet in /t/x.conf:1",
        ),
        (
            "http {\n server {\n  listen 443 ssl; ssl_certificate c; ssl_certificate_key k;\n  ssl_conf_command PrivateKey o.key;\n }\n}",
            "ssl_conf_command \"PrivateKey\" without \"Certificate\" is not supported by firstbyte yet in /t/x.conf:4",
        ),
        (
            "http {\n server {\n  listen 443 ssl; ssl_certificate $ssl_server_name.crt; ssl_certificate_key k;\n  ssl_conf_command Certificate o.crt;\n }\n}",
            "ssl_conf_command \"Certificate\" beside \"ssl_certificate\" with variables is not supported by firstbyte yet in /t/x.conf:4",
        ),
        (
            "http {\n server {\n  listen 443 ssl;\n }\n}",
            "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in /t/x.conf:2",
        ),
        (
            "http {\n ssl_certificate a.pem;\n server { listen 443 ssl; }\n}",
            "no \"ssl_certificate_key\" is defined for certificate \"a.pem\" in /t/x.conf:2",
        ),
        (
            "http {\n proxy_ssl_certificate /c/$ssl_server_name.pem;\n server { location / {\n  proxy_pass https://127.0.0.1:9; } }\n}",
            "no \"proxy_ssl_certificate_key\" is defined for certificate \"/c/${ssl_server_name}.pem\" in /t/x.conf:4",
        ),
        ("events {}\nevents {}", "\"events\" directive is duplicate in /t/x.conf:2"),
        ("http { log_format combined x; }", "duplicate \"log_format\" name \"combined\" in /t/x.conf:1"),
        ("http { access_log /x nope; }", "unknown log format \"nope\" in /t/x.conf:1"),
        ("http { access_log /x combined flush=1s; }", "no buffer is defined for access_log \"/x\" in /t/x.conf:1"),
        ("http { access_log /x_$host combined buffer=4k; }", "buffered logs cannot have variables in name in /t/x.conf:1"),
        ("http { access_log /x_$nope; }", "unknown \"nope\" variable in /t/x.conf:1"),
        ("http { open_log_file_cache inactive=1s; }", "\"open_log_file_cache\" must have \"max\" parameter in /t/x.conf:1"),
        ("http { open_log_file_cache max=0; }", "invalid \"open_log_file_cache\" parameter \"max=0\" in /t/x.conf:1"),
        ("http { open_log_file_cache max=5 valid=forever; }", "invalid \"open_log_file_cache\" parameter \"valid=forever\" in /t/x.conf:1"),
        ("http {\n open_file_cache inactive=20s;\n}", "\"open_file_cache\" must have the \"max\" parameter in /t/x.conf:2"),
        ("http { open_file_cache max=0; }", "invalid \"open_file_cache\" parameter \"max=0\" in /t/x.conf:1"),
        ("http { server { location / { open_file_cache max=10 inactive=soon; } } }", "invalid \"open_file_cache\" parameter \"inactive=soon\" in /t/x.conf:1"),
        ("http { open_file_cache max=10 min_uses=2; }", "invalid \"open_file_cache\" parameter \"min_uses=2\" in /t/x.conf:1"),
        ("http { open_file_cache max=10; open_file_cache off; }", "\"open_file_cache\" directive is duplicate in /t/x.conf:1"),
        ("http { open_file_cache; }", "invalid number of arguments in \"open_file_cache\" directive in /t/x.conf:1"),
        ("http { open_file_cache_valid forever; }", "\"open_file_cache_valid\" directive invalid value in /t/x.conf:1"),
        ("http { open_file_cache_min_uses -1; }", "\"open_file_cache_min_uses\" directive invalid value in /t/x.conf:1"),
        ("http { open_file_cache_errors maybe; }", "invalid value \"maybe\" in \"open_file_cache_errors\" directive, it must be \"on\" or \"off\" in /t/x.conf:1"),
        ("http { server { location / { error_log /x loud; } } }", "invalid log level \"loud\" in /t/x.conf:1"),
        ("http { server { try_files $uri; } }", "invalid number of arguments in \"try_files\" directive in /t/x.conf:1"),
        ("http { server { try_files $uri =abc; } }", "invalid code \"=abc\" in /t/x.conf:1"),
        ("http { index \"\"; }", "index \"\" in \"index\" directive is invalid in /t/x.conf:1"),
        ("http { add_header X y sometimes; }", "invalid parameter \"sometimes\" in /t/x.conf:1"),
        ("http { server { location ! /x { } } }", "invalid location modifier \"!\" in /t/x.conf:1"),
        ("worker_processes 0;", "\"worker_processes\" directive invalid value in /t/x.conf:1"),
        ("error_log /x loud;", "invalid log level \"loud\" in /t/x.conf:1"),
        ("http { server { server_name a*.b; } }", "invalid server name or wildcard \"a*.b\" in /t/x.conf:1"),
        ("http { internal; }", "\"internal\" directive is not allowed here in /t/x.conf:1"),
        ("http { server { location / { internal x; } } }", "invalid number of arguments in \"internal\" directive in /t/x.conf:1"),
        ("worker_connections 10;", "\"worker_connections\" directive is not allowed here in /t/x.conf:1"),
        ("http { tcp_congestion BBR!; }", "\"tcp_congestion\" directive invalid value in /t/x.conf:1"),
        (
            "http { server { listen 80 default_server; }\nserver { listen 80 default; } }",
            "a duplicate default server for 0.0.0.0:80 in /t/x.conf:2",
        ),
        ("http { server { listen 80; listen 0.0.0.0:80; } }", "a duplicate listen 0.0.0.0:80 in /t/x.conf:1"),
        (
            "http { server { listen 443 ssl; ssl_certificate a; ssl_certificate_key b; ssl_verify_client on; } }",
            "no ssl_client_certificate for ssl_verify_client in /t/x.conf:1",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "from:\n{text}");
    }
}

#[test]
fn location_nesting_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "location = /a { location /a/b { } }",
            "location \"/a/b\" cannot be inside the exact location \"/a\"",
        ),
        (
            "location @n { location /a { } }",
            "location \"/a\" cannot be inside the named location \"@n\"",
        ),
        (
            "location /a { location @n { } }",
            "named location \"@n\" can be on the server level only",
        ),
        (
            "location /a { location /b { } }",
            "location \"/b\" is outside location \"/a\"",
        ),
        (
            "location /a { }\nlocation /a { }",
            "duplicate location \"/a\"",
        ),
        (
            "location /a { }\nlocation ^~ /a { }",
            "duplicate location \"/a\"",
        ),
        (
            "location = /a { }\nlocation = /a { }",
            "duplicate location \"/a\"",
        ),
        (
            "location @x { alias /y/; }",
            "the \"alias\" directive cannot be used inside the named location",
        ),
    ];
    for (inner, want) in cases {
        let text = format!("http {{ server {{ {inner} }} }}");
        let got = err(&text);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn warnings_say_what_firstbyte_does_instead() {
    let c = ok("load_module modules/x.so;\n\
         events { multi_accept on; use epoll; accept_mutex off; accept_mutex_delay 100ms; }\n\
         http {\n\
         types_hash_max_size 2048; types_hash_bucket_size 64;\n\
         server_names_hash_max_size 512; server_names_hash_bucket_size 64;\n\
         variables_hash_max_size 1024; variables_hash_bucket_size 64;\n\
         server_tokens off; ssl_dhparam dh.pem; gzip_buffers 16 8k;\n\
         ssl_protocols SSLv3 TLSv1 TLSv1.1 TLSv1.2;\n\
         }");
    let w = &c.warnings;
    let want = [
        "\"load_module\" is ignored: modules are built into firstbyte in /t/x.conf:1",
        "\"multi_accept\" is ignored: firstbyte accepts every pending connection on each wakeup in /t/x.conf:2",
        "\"use\" is ignored: firstbyte's runtime picks epoll itself in /t/x.conf:2",
        "\"accept_mutex\" is ignored: firstbyte runs one process, so there is no accept mutex in /t/x.conf:2",
        "\"accept_mutex_delay\" is ignored: firstbyte runs one process, so there is no accept mutex in /t/x.conf:2",
        "\"types_hash_max_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:4",
        "\"types_hash_bucket_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:4",
        "\"server_names_hash_max_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:5",
        "\"server_names_hash_bucket_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:5",
        "\"variables_hash_max_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:6",
        "\"variables_hash_bucket_size\" is ignored: firstbyte sizes its hash tables itself in /t/x.conf:6",
        "\"server_tokens\" is ignored: firstbyte always sends \"Server: firstbyte\", without a version in /t/x.conf:7",
        "\"ssl_dhparam\" is ignored: rustls offers only ECDHE key exchange in /t/x.conf:7",
        "\"gzip_buffers\" is ignored: firstbyte's compressor sizes its own buffers in /t/x.conf:7",
        "SSLv3 TLSv1 TLSv1.1 in \"ssl_protocols\" not offered: rustls speaks TLSv1.2 and TLSv1.3 only in /t/x.conf:8",
    ];
    assert_eq!(w, &want);
}

#[test]
fn more_warnings() {
    let c = http("types { text/a x; text/b x; }\nallow 10.0.0.1/8;");
    assert_eq!(
        c.warnings,
        [
            "duplicate extension \"x\", content type: \"text/b\", previous content type: \"text/a\" in /t/x.conf:3",
            "low address bits of 10.0.0.1/8 are meaningless in /t/x.conf:4",
        ]
    );
}

#[test]
fn includes_with_globs_and_nested_relative_paths() {
    let dir = testdata().join("includes");
    let c = load(&dir.join("main.conf"), None, None).unwrap();
    let names: Vec<String> = c
        .files
        .iter()
        .map(|f| f.strip_prefix(&dir).unwrap_or(f).display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "main.conf",
            "conf.d/a.conf",
            "conf.d/b.conf",
            "mime/types.conf",
            "sites/one.conf",
            "snippets/common.conf"
        ],
        "hidden files are not matched by *, a glob without match is fine"
    );
    assert_eq!(c.main.worker_processes, WorkerProcesses::Count(2));
    assert_eq!(c.main.worker_connections, 64);
    assert_eq!(
        c.prefix, dir,
        "the prefix defaults to the main file's directory"
    );
    let s = &servers(&c)[0];
    assert_eq!(s.listen[0].addr.to_string(), "0.0.0.0:8081");
    let l = &s.default_location;
    assert_eq!(root_of(l), format!("root {}", dir.join("www").display()));
    assert_eq!(l.index[0].as_static(), Some("start.html"));
    assert_eq!(
        l.types.get("mjs").map(String::as_str),
        Some("application/javascript")
    );
    assert_eq!(
        l.types.get("html"),
        None,
        "types {{}} replaces the defaults"
    );

    let e = load(&dir.join("broken.conf"), None, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "open() \"{}\" failed (2: No such file or directory) in {}:2",
            dir.join("missing.conf").display(),
            dir.join("broken.conf").display()
        )
    );
    let e = load(&dir.join("absent.conf"), None, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "open() \"{}\" failed (2: No such file or directory)",
            dir.join("absent.conf").display()
        )
    );
}

#[test]
fn prefix_and_conf_dir_resolve_different_paths() {
    let c = load_text(
        b"pid run/x.pid; error_log logs/e.log;\nhttp { ssl_certificate c.pem; ssl_certificate_key k.pem; ssl_password_file pw; \
          server { listen 443 ssl; root www; access_log logs/a.log; ssl_session_ticket_key t.key; ssl_stapling on; ssl_stapling_file o.der; } }",
        Path::new("/etc/fb/fb.conf"),
        Some(Path::new("/srv")),
        None,
        true,
    )
    .unwrap();
    assert_eq!(c.main.pid, Some(PathBuf::from("/srv/run/x.pid")));
    assert_eq!(
        c.main.error_log[0].target,
        LogTarget::File("/srv/logs/e.log".into())
    );
    let s = &servers(&c)[0];
    assert_eq!(root_of(&s.default_location), "root /srv/www");
    match &s.default_location.access_log {
        AccessLog::Logs(l) => assert_eq!(l[0].target, LogTarget::File("/srv/logs/a.log".into())),
        AccessLog::Off => panic!("access_log is on"),
    }
    let t = s.tls.as_ref().unwrap();
    assert_eq!(t.certificates[0].cert, Source::File("/etc/fb/c.pem".into()));
    assert_eq!(t.certificates[0].key, Source::File("/etc/fb/k.pem".into()));
    assert_eq!(t.password_file, Some("/etc/fb/pw".into()));
    assert_eq!(t.session_ticket_keys, [PathBuf::from("/etc/fb/t.key")]);
    assert_eq!(t.stapling_file, Some("/etc/fb/o.der".into()));
}

#[test]
fn quoting_escapes_and_units() {
    let c = http(
        "client_max_body_size 4K; keepalive_timeout 1m30s 60; send_timeout 500ms; client_body_timeout 10;\n\
         gzip_min_length 1k; tcp_notsent_lowat 16k;\n\
         server {\n\
           return 200 \"say \\\"hi\\\"\\n\";\n\
           add_header 'X-Q' 'it\\'s' always;\n\
           location / { add_header X-T \"a\\tb\" ; }\n\
         }",
    );
    let s = &servers(&c)[0];
    let l = &s.default_location;
    assert_eq!(l.client_max_body_size, 4096);
    assert_eq!(l.keepalive_timeout.idle, Duration::from_secs(90));
    assert_eq!(l.keepalive_timeout.header, Some(Duration::from_secs(60)));
    assert_eq!(l.send_timeout, Duration::from_millis(500));
    assert_eq!(l.client_body_timeout, Duration::from_secs(10));
    assert_eq!(l.compression.gzip_min_length, 1024);
    assert_eq!(s.socket.notsent_lowat, Some(16384));
    let r = ret_of(l).unwrap();
    assert_eq!(
        (r.code, r.value.as_ref().and_then(|v| v.as_static())),
        (200, Some("say \"hi\"\n"))
    );
    assert_eq!(l.add_header[0].value.as_static(), Some("it's"));
    assert!(l.add_header[0].always);
    let loc = prefix_loc(&s.locations, "/");
    assert_eq!(loc.add_header[0].value.as_static(), Some("a\tb"));
}

#[test]
fn merge_http_server_location() {
    let c = http(
        "sendfile on; keepalive_requests 10; root /h; add_header X-H h; allow 10.0.0.0/8; deny all;\n\
         types { text/h h; } default_type text/x; gzip on; gzip_comp_level 3;\n\
         server {\n\
           keepalive_requests 20; add_header X-S s; error_page 404 /e.html;\n\
           location /a {\n\
             root /a; gzip_comp_level 4; try_files $uri =404;\n\
             location /a/b { add_header X-B b; types { text/b b; } }\n\
           }\n\
           location /c { alias /srv/c/; internal; stub_status; location /c/d { } }\n\
         }\n\
         server { listen 81; }\n\
         tcp_nopush on;",
    );
    let s1 = &servers(&c)[0];
    let s2 = &servers(&c)[1];
    // http → server
    let d = &s1.default_location;
    assert!(d.sendfile);
    assert!(
        d.tcp_nopush,
        "http values written after a server block still apply to it"
    );
    assert_eq!(d.keepalive_requests, 20);
    assert_eq!(
        header_names(d),
        ["X-S"],
        "add_header at server replaces http's"
    );
    assert_eq!(
        d.access.len(),
        2,
        "allow/deny inherited when none at server"
    );
    assert_eq!(root_of(d), "root /h");
    assert_eq!(s2.default_location.keepalive_requests, 10);
    assert_eq!(header_names(&s2.default_location), ["X-H"]);
    assert!(s2.default_location.error_page.is_empty());
    // server → location
    let a = prefix_loc(&s1.locations, "/a");
    assert_eq!(root_of(a), "root /a");
    assert_eq!(a.keepalive_requests, 20);
    assert_eq!(header_names(a), ["X-S"]);
    assert_eq!(a.error_page.len(), 1);
    assert_eq!(a.compression.gzip_comp_level, 4);
    assert!(a.compression.gzip);
    assert_eq!(a.types.get("h").map(String::as_str), Some("text/h"));
    assert_eq!(a.default_type, "text/x");
    assert!(a.try_files.is_some());
    assert_eq!(a.name, "/a");
    assert_eq!(a.prefix, "/a");
    // location → nested location
    let b = prefix_loc(&a.locations, "/a/b");
    assert_eq!(root_of(b), "root /a");
    assert_eq!(b.compression.gzip_comp_level, 4);
    assert_eq!(header_names(b), ["X-B"]);
    assert_eq!(b.types.get("b").map(String::as_str), Some("text/b"));
    assert_eq!(
        b.types.get("h"),
        None,
        "the innermost types {{}} wins whole"
    );
    assert!(b.try_files.is_none(), "try_files is not inherited");
    // alias, internal, stub_status
    let cl = prefix_loc(&s1.locations, "/c");
    assert_eq!(root_of(cl), "alias /srv/c/");
    assert!(cl.internal && cl.stub_status);
    let cd = prefix_loc(&cl.locations, "/c/d");
    assert_eq!(root_of(cd), "alias /srv/c/", "alias inherits as nginx");
    assert_eq!(cd.prefix, "/c", "with the prefix it replaces");
    assert!(
        !cd.internal && !cd.stub_status,
        "internal and stub_status are per location"
    );
    assert!(
        Arc::ptr_eq(&a.types, &d.types),
        "inherited types share one map"
    );
}

/// The first `return` of a level's rewrite directives.
fn ret_of(l: &LocationConf) -> Option<&super::model::Return> {
    l.rewrite.stmts.iter().find_map(|s| match s {
        super::rewrite::Stmt::Return(r) => Some(r),
        _ => None,
    })
}

#[test]
fn server_return_is_the_server_s_own() {
    // nginx runs a server's rewrite directives in the server rewrite phase, before any
    // location; the locations do not inherit them.
    let c = http("server { return 301 https://$host$request_uri; location / { return 404; } location /x { } }");
    let s = &servers(&c)[0];
    assert_eq!(ret_of(&s.default_location).map(|r| r.code), Some(301));
    assert_eq!(
        ret_of(prefix_loc(&s.locations, "/")).map(|r| r.code),
        Some(404)
    );
    assert!(ret_of(prefix_loc(&s.locations, "/x")).is_none());
    let c = http("server { location / { return 404; location /n { } } }");
    let s = &servers(&c)[0];
    let l = prefix_loc(&s.locations, "/");
    assert_eq!(ret_of(l).map(|r| r.code), Some(404));
    assert!(
        ret_of(prefix_loc(&l.locations, "/n")).is_none(),
        "a location's return is its own"
    );
    assert!(ret_of(&s.default_location).is_none());
}

#[test]
fn access_log_forms() {
    let c = http(
        "log_format j escape=json '{\"u\":\"$uri\"}';\naccess_log /a.log j buffer=16k flush=2s; access_log stderr;\n\
         server { location / { access_log off; } location /l { } }\n\
         server { access_log /b.log; }",
    );
    let s = &servers(&c)[0];
    match &s.default_location.access_log {
        AccessLog::Logs(l) => {
            assert_eq!(l.len(), 2);
            assert_eq!(l[0].format.name, "j");
            assert_eq!(l[0].format.escape, LogEscape::Json);
            assert_eq!(l[0].buffer, Some(16384));
            assert_eq!(l[0].flush, Some(Duration::from_secs(2)));
            assert_eq!(l[1].target, LogTarget::Stderr);
        }
        AccessLog::Off => panic!("on at server"),
    }
    assert!(matches!(
        prefix_loc(&s.locations, "/").access_log,
        AccessLog::Off
    ));
    assert!(
        matches!(&prefix_loc(&s.locations, "/l").access_log, AccessLog::Logs(l) if l.len() == 2)
    );
    match &servers(&c)[1].default_location.access_log {
        AccessLog::Logs(l) => {
            assert_eq!(l.len(), 1);
            assert_eq!(l[0].format.name, "combined");
        }
        AccessLog::Off => panic!("on"),
    }
}

#[test]
fn default_listen_depends_on_root() {
    let text = "http { server { } }";
    let root = load_as(text, true).unwrap();
    assert_eq!(build::addrs(&servers(&root)[0]), ["0.0.0.0:80"]);
    let user = load_as(text, false).unwrap();
    assert_eq!(build::addrs(&servers(&user)[0]), ["0.0.0.0:8000"]);
    let s = &servers(&root)[0];
    assert!(matches!(&s.server_names[..], [ServerName::Exact(n)] if n.is_empty()));
    assert!(s.tls.is_none() && !s.http2);
    assert_eq!(s.client_header_timeout, Duration::from_secs(60));
}

#[test]
fn listen_ssl_http2_and_tls() {
    let c = http(
        "ssl_certificate data:-----BEGIN; ssl_certificate_key k1; http2 on;\n\
         server { listen [::]:443 ssl; listen 443 ssl; ssl_session_cache builtin:100; ssl_protocols TLSv1.3; }\n\
         server { listen 8443 ssl http2; http2 off; ssl_certificate c2; ssl_certificate_key k2; ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384; }\n\
         server { listen 127.0.0.1:8080; http2 off; }",
    );
    let s = servers(&c);
    assert_eq!(build::addrs(&s[0]), ["[::]:443", "0.0.0.0:443"]);
    let t0 = s[0].tls.as_ref().unwrap();
    assert_eq!(t0.certificates[0].cert, Source::Data("-----BEGIN".into()));
    assert_eq!(t0.session_cache, SessionCache::Sessions(100));
    assert_eq!(t0.protocols, [TlsVersion::Tls13]);
    assert!(s[0].http2, "http2 on at http");
    let t1 = s[1].tls.as_ref().unwrap();
    assert_eq!(
        t1.certificates.len(),
        1,
        "certificates inherited only when none"
    );
    assert_eq!(t1.certificates[0].cert, Source::File("/t/c2".into()));
    assert_eq!(t1.ciphersuites.as_deref(), Some("TLS_AES_256_GCM_SHA384"));
    assert!(s[1].http2, "listen ... http2 turns it on");
    assert!(s[2].tls.is_none() && !s[2].http2);
}

/// `ssl_conf_command` goes over the directives it overlaps, whichever is written first, as
/// nginx applies the commands last; a server with its own commands inherits none.
#[test]
fn conf_commands_go_over_the_directives() {
    let c = http(
        "ssl_certificate c; ssl_certificate_key k;\n\
         ssl_conf_command Options SessionTicket,-serverpreference;\n\
         ssl_conf_command Certificate o.crt;\n\
         server { listen 443 ssl; ssl_session_tickets off; ssl_prefer_server_ciphers on; }\n\
         server { listen 444 ssl; ssl_conf_command Options -SessionTicket,ServerPreference;\n\
           ssl_conf_command CipherString ECDHE-RSA-AES128-GCM-SHA256; ssl_conf_command Curves X25519;\n\
           ssl_conf_command Certificate o.pem; ssl_conf_command PrivateKey /k/o.key; }\n\
         server { listen 445 ssl; ssl_ciphers HIGH; }",
    );
    let s = servers(&c);
    let t0 = s[0].tls.as_ref().unwrap();
    assert!(t0.session_tickets && !t0.prefer_server_ciphers);
    let pair = t0.conf_certificate.as_ref().expect("Certificate");
    assert_eq!(
        (&pair.cert, &pair.key),
        (
            &Source::File("/t/o.crt".into()),
            &Source::File("/t/o.crt".into())
        ),
        "the key from the certificate's file"
    );
    assert_eq!(pair.pos.line, 5, "where Certificate was written");
    assert_eq!(t0.certificates.len(), 1);
    let t1 = s[1].tls.as_ref().unwrap();
    assert!(!t1.session_tickets && t1.prefer_server_ciphers);
    assert_eq!(
        (t1.ciphers.as_str(), t1.ecdh_curve.as_str()),
        ("ECDHE-RSA-AES128-GCM-SHA256", "X25519")
    );
    let pair = t1.conf_certificate.as_ref().expect("Certificate");
    assert_eq!(pair.key, Source::File("/k/o.key".into()));
    let t2 = s[2].tls.as_ref().unwrap();
    assert_eq!(t2.ciphers, "HIGH", "no CipherString inherited");
    assert!(t2.session_tickets);
}

#[test]
fn deprecated_ssl_on_makes_the_default_servers_addresses_tls() {
    // nginx 1.22: `ssl on` in the default server of an address makes the address speak TLS
    // (with a warning); in a server that is not the default there, it changes nothing.
    let c = http(
        "ssl_certificate c; ssl_certificate_key k;\n\
         server { listen 8443; ssl on; }\n\
         server { listen 8443; server_name b; }\n\
         server { listen 8080; server_name plain; }\n\
         server { listen 8080; server_name late; ssl on; }\n\
         server { listen 8081; ssl off; }",
    );
    let s = servers(&c);
    assert!(s[0].tls.is_some() && s[1].tls.is_some(), "8443 speaks TLS");
    assert!(
        s[2].tls.is_none() && s[3].tls.is_none(),
        "8080's default says nothing"
    );
    assert!(s[4].tls.is_none());
    assert_eq!(
        c.warnings,
        [
            "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead in /t/x.conf:4",
            "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead in /t/x.conf:7",
            "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead in /t/x.conf:8",
        ]
    );
    // At http level it applies to every server (inherited), and needs a certificate as nginx.
    let e = err("http { ssl on; server { listen 8443; } }");
    assert!(e.starts_with("no \"ssl_certificate\" is defined"), "{e}");
    assert!(err("http { server { ssl maybe; } }").starts_with("invalid value \"maybe\""));
}

#[test]
fn locations_are_sorted_and_kinds_kept() {
    let c = http(
        "server {\n\
         location / { }\n\
         location /images/ { }\n\
         location ^~ /static/ { }\n\
         location =/exact { }\n\
         location = /e2 { }\n\
         location ~ \\.php$ { }\n\
         location ~* \\.(png|jpg)$ { }\n\
         location ~*\\.gif$ { }\n\
         location @fallback { }\n\
         location /img { location ~ \\.webp$ { } location /img/x { } }\n\
         }",
    );
    let l = &servers(&c)[0].locations;
    let prefixes: Vec<(&str, bool)> = l
        .prefix
        .iter()
        .map(|p| (p.prefix.as_str(), p.no_regex))
        .collect();
    assert_eq!(
        prefixes,
        [
            ("/images/", false),
            ("/static/", true),
            ("/img", false),
            ("/", false)
        ]
    );
    let mut exact: Vec<&str> = l.exact.keys().map(String::as_str).collect();
    exact.sort_unstable();
    assert_eq!(exact, ["/e2", "/exact"]);
    assert_eq!(l.exact["/exact"].name, "= /exact");
    assert_eq!(l.exact["/exact"].prefix, "/exact");
    let names: Vec<&str> = l.regex.iter().map(|r| r.conf.name.as_str()).collect();
    assert_eq!(names, ["~ \\.php$", "~* \\.(png|jpg)$", "~* \\.gif$"]);
    assert!(l.regex[1].regex.is_match("/A.PNG"), "~* is caseless");
    assert!(!l.regex[0].regex.is_match("/A.PHP"), "~ is not");
    assert!(l.named.contains_key("@fallback"));
    let img = prefix_loc(l, "/img");
    assert_eq!(img.locations.regex.len(), 1);
    assert_eq!(img.locations.prefix[0].prefix, "/img/x");
    assert_eq!(prefix_loc(l, "/static/").name, "^~ /static/");
}

#[test]
fn globals_come_before_the_file() {
    let text = b"events {}\nhttp { }";
    let c = load_text(
        text,
        Path::new(NAME),
        None,
        Some("daemon on; worker_processes 3;"),
        true,
    )
    .unwrap();
    assert!(c.main.daemon);
    assert_eq!(c.main.worker_processes, WorkerProcesses::Count(3));
    assert_eq!(c.files, [PathBuf::from(NAME)]);
    let e = load_text(text, Path::new(NAME), None, Some("bogus on;"), true).unwrap_err();
    assert_eq!(e.to_string(), "unknown directive \"bogus\" in command line");
    let e = load_text(
        b"daemon off;",
        Path::new(NAME),
        None,
        Some("daemon on;"),
        true,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "\"daemon\" directive is duplicate in /t/x.conf:1"
    );
    let e = load_text(text, Path::new(NAME), None, Some("daemon on"), true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unexpected end of parameter, expecting \";\" in command line"
    );
}

#[test]
fn worker_shutdown_timeout_is_a_main_time() {
    assert_eq!(ok("events {}").main.worker_shutdown_timeout, None);
    assert_eq!(
        ok("worker_shutdown_timeout 1m;")
            .main
            .worker_shutdown_timeout,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(
        err("worker_shutdown_timeout soon;"),
        "\"worker_shutdown_timeout\" directive invalid value in /t/x.conf:1"
    );
    assert_eq!(
        err("http { worker_shutdown_timeout 1s; }"),
        "\"worker_shutdown_timeout\" directive is not allowed here in /t/x.conf:1"
    );
}

#[test]
fn main_settings() {
    let c = ok("user www-data;\nworker_processes auto;\npid off;\nerror_log /var/log/e.log info;\nerror_log stderr;\nevents { worker_connections 4096; }");
    let m = &c.main;
    assert_eq!(
        m.user,
        Some(User {
            name: "www-data".into(),
            group: None
        })
    );
    assert_eq!(m.worker_processes, WorkerProcesses::Auto);
    assert_eq!(m.pid, None);
    assert_eq!(
        m.error_log[0],
        ErrorLog {
            target: LogTarget::File("/var/log/e.log".into()),
            level: LogLevel::Info
        }
    );
    assert_eq!(
        m.error_log[1],
        ErrorLog {
            target: LogTarget::Stderr,
            level: LogLevel::Error
        }
    );
    assert_eq!(m.worker_connections, 4096);
    assert!(c.http.is_none());
}

#[test]
fn full_fixture() {
    let path = testdata().join("full.conf");
    let c = load(&path, Some(Path::new("/srv/fb")), None).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.main.pid, Some(PathBuf::from("/srv/fb/run/fb.pid")));
    assert!(c.main.daemon);
    let s = servers(&c);
    assert_eq!(s.len(), 2);
    let tls = s[0].tls.as_ref().unwrap();
    assert_eq!(tls.certificates.len(), 2, "ECDSA + RSA pairs");
    assert_eq!(tls.num_tickets, Some(1));
    assert_eq!(tls.session_ticket_keys.len(), 2);
    assert_eq!(tls.session_cache, SessionCache::Sessions(40000));
    assert_eq!(tls.session_timeout, Duration::from_secs(3600));
    assert_eq!(s[0].socket.congestion.as_deref(), Some("bbr"));
    assert!(s[0].http2);
    assert!(s[0].listen[0].default_server);
    let d = &s[0].default_location;
    assert_eq!(
        root_of(d),
        "root /srv/www",
        "one trailing slash of root is dropped"
    );
    assert_eq!(d.compression.gzip_types, ["text/css", "application/json"]);
    assert!(d.compression.brotli);
    let fav = &s[0].locations.exact["/favicon.ico"];
    assert!(matches!(fav.access_log, AccessLog::Off));
    match &prefix_loc(&s[0].locations, "/").try_files {
        Some(TryFiles {
            files,
            fallback: TryFallback::Code(404),
        }) => assert_eq!(files.len(), 2),
        other => panic!("try_files: {other:?}"),
    }
    match &d.access_log {
        AccessLog::Logs(l) => {
            assert_eq!(l[0].format.name, "main");
            assert!(l[0].format.value.uses("request"));
        }
        AccessLog::Off => panic!("on"),
    }
    assert!(
        matches!(&s[1].server_names[..], [ServerName::Exact(a), ServerName::LeadingWildcard(b)] if a == "example.org" && b == ".example.org")
    );
    assert!(s[1].tls.is_none());
}

/// Debian's stock configuration (package nginx): the acceptance test of the language.
#[test]
fn debian_stock_nginx_conf() {
    let path = Path::new("/etc/nginx/nginx.conf");
    assert!(
        path.exists(),
        "/etc/nginx/nginx.conf is missing: install Debian's nginx package (apt-get install nginx); the project's test command does"
    );
    let c = load(path, None, None).unwrap_or_else(|e| panic!("firstbyte: [emerg] {e}"));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("\"types_hash_max_size\" is ignored")),
        "{:?}",
        c.warnings
    );
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("TLSv1 TLSv1.1 in \"ssl_protocols\" not offered")),
        "{:?}",
        c.warnings
    );
    assert_eq!(
        c.main.user.as_ref().map(|u| u.name.as_str()),
        Some("www-data")
    );
    assert_eq!(c.main.worker_processes, WorkerProcesses::Auto);
    assert!(c.files.contains(&PathBuf::from("/etc/nginx/mime.types")));
    let s = servers(&c);
    assert_eq!(s.len(), 1, "one server: the default site");
    let mut addrs = build::addrs(&s[0]);
    addrs.sort();
    assert_eq!(addrs, ["0.0.0.0:80", "[::]:80"]);
    assert!(s[0].listen.iter().all(|l| l.default_server && !l.ssl));
    let d = &s[0].default_location;
    assert_eq!(root_of(d), "root /var/www/html");
    let index: Vec<&str> = d.index.iter().filter_map(|v| v.as_static()).collect();
    assert_eq!(
        index,
        ["index.html", "index.htm", "index.nginx-debian.html"]
    );
    assert_eq!(d.types.get("css").map(String::as_str), Some("text/css"));
    assert_eq!(d.types.get("html").map(String::as_str), Some("text/html"));
    assert_eq!(d.default_type, "application/octet-stream");
    assert!(d.sendfile && d.tcp_nopush && d.compression.gzip);
    let root = prefix_loc(&s[0].locations, "/");
    let tf = root.try_files.as_ref().unwrap();
    assert!(tf.files[0].uses("uri"));
    assert!(matches!(tf.fallback, TryFallback::Code(404)));
    match &root.access_log {
        AccessLog::Logs(l) => assert_eq!(
            l[0].target,
            LogTarget::File("/var/log/nginx/access.log".into())
        ),
        AccessLog::Off => panic!("Debian logs access"),
    }
}

/// Mangled configurations give an error or a config, never a panic.
#[test]
fn mangled_input_never_panics() {
    let base = std::fs::read(testdata().join("full.conf")).unwrap_or_default();
    assert!(!base.is_empty(), "testdata/conf/full.conf is missing");
    let alphabet = b"{};\"'\\$#~*=@/: \n0aZ";
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64: deterministic, so a failure reproduces.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut errors = 0;
    for _ in 0..3000 {
        let mut text = base.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % text.len().max(1);
            match next() % 3 {
                0 => text[at] = alphabet[(next() as usize) % alphabet.len()],
                1 => {
                    text.remove(at);
                }
                _ => text.truncate(at),
            }
            if text.is_empty() {
                break;
            }
        }
        if load_text(&text, Path::new(NAME), Some(Path::new("/p")), None, true).is_err() {
            errors += 1;
        }
    }
    assert!(
        errors > 100,
        "mutations should mostly be errors, got {errors}"
    );
}

/// The built-in site's configuration (a copy of `http::builtin::BUILTIN_CONF`) loads, with
/// firstbyte's own `connection_info` at `/`.
#[test]
fn builtin_site_conf_loads() {
    let text = r#"worker_processes 1;
pid off;
error_log stderr notice;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:8443 ssl default_server;
        listen [::1]:8443 ssl default_server;
        listen 127.0.0.1:8443 quic default_server;
        listen [::1]:8443 quic default_server;
        http2 on;
        server_name localhost;
        ssl_certificate /run/fb/cert.pem;
        ssl_certificate_key /run/fb/key.pem;
        ssl_session_cache builtin:1000;
        location / {
            connection_info;
        }
    }
}
"#;
    let c = load_str(text, Path::new("/builtin.conf"), Path::new("/")).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.main.pid, None);
    let s = &servers(&c)[0];
    assert!(s.http2 && s.tls.is_some());
    assert!(prefix_loc(&s.locations, "/").connection_info);
    assert!(!s.default_location.connection_info);
    assert!(matches!(s.default_location.access_log, AccessLog::Off));
}

#[test]
fn proxy_client_certificate_needs_its_key_only_for_https() {
    // A key alone, or a certificate for a plain-http upstream, is accepted as nginx does.
    ok("http { server { location / { proxy_ssl_certificate_key k.pem; proxy_pass https://127.0.0.1:9; } } }");
    ok("http { server { location / { proxy_ssl_certificate c.pem; proxy_pass http://127.0.0.1:9; } } }");
    let e = err("http { proxy_ssl_certificate c.pem; server { location / { proxy_pass https://127.0.0.1:9; } } }");
    assert!(
        e.starts_with("no \"proxy_ssl_certificate_key\" is defined for certificate \"/t/c.pem\""),
        "{e}"
    );
}

#[test]
fn proxy_buffer_directives_with_nginx_defaults_and_checks() {
    let c = http("server { location / { proxy_pass http://127.0.0.1:9; } }");
    let p = servers(&c)[0].locations.prefix[0]
        .conf
        .proxy
        .clone()
        .expect("proxy");
    assert_eq!(
        p.buffers,
        ProxyBuffers {
            temp_path: "/p/proxy_temp".into(),
            body_temp_path: "/p/client_body_temp".into(),
            ..ProxyBuffers::default()
        }
    );
    assert_eq!(p.buffers.memory(), 8 * 4096 + 4096);
    let c = http(
        "proxy_buffers 4 16k; proxy_temp_path tmp 1 2; client_body_temp_path /cbt 2;\n server { proxy_max_temp_file_size 0;\n location / { proxy_buffer_size 8k; proxy_busy_buffers_size 32k; proxy_temp_file_write_size 64k; proxy_pass http://127.0.0.1:9; } }",
    );
    let b = &servers(&c)[0].locations.prefix[0]
        .conf
        .proxy
        .clone()
        .expect("proxy")
        .buffers;
    assert_eq!(
        (b.count, b.size, b.buffer_size, b.busy_size),
        (4, 16384, 8192, 32768)
    );
    assert_eq!(b.temp_path, std::path::PathBuf::from("/p/tmp"));
    assert_eq!(b.body_temp_path, std::path::PathBuf::from("/cbt"));
    assert_eq!((b.max_temp_file_size, b.temp_file_write_size), (0, 65536));
    for bad in [
        "proxy_buffers 1 4k;",
        "proxy_buffers 8 0;",
        "proxy_buffer_size x;",
        "proxy_temp_path t 3;",
        "client_body_temp_path t 1 3;",
    ] {
        let e = err(&format!("events {{}}\nhttp {{ {bad} }}"));
        assert!(e.contains("invalid value"), "{bad}: {e}");
    }
}

#[test]
fn proxy_redirect_default_off_and_inherited_rules() {
    use crate::conf::model::Redirect;
    let rules = |c: &Config, i: usize| {
        servers(c)[0].locations.prefix[i]
            .conf
            .proxy
            .clone()
            .expect("proxy")
            .redirects
            .clone()
    };
    let texts = |r: &[Redirect]| -> Vec<(String, String)> {
        r.iter()
            .map(|r| match r {
                Redirect::Prefix {
                    pattern,
                    replacement,
                } => (
                    pattern.as_static().unwrap_or("?").to_string(),
                    replacement.as_static().unwrap_or("?").to_string(),
                ),
                Redirect::Regex { regex, .. } => (regex.source.clone(), "regex".into()),
            })
            .collect()
    };
    // Unset: nginx's default, from the URL as written and the location's prefix.
    let c = http(
        "server { location /one/ { proxy_pass http://127.0.0.1:9/app/; }\n location /two/ { proxy_pass http://127.0.0.1:9; } }",
    );
    assert_eq!(
        texts(&rules(&c, 0)),
        vec![("http://127.0.0.1:9/app/".into(), "/one/".into())]
    );
    assert_eq!(
        texts(&rules(&c, 1)),
        vec![("http://127.0.0.1:9/".into(), "/".into())]
    );
    // Rules of an outer level are inherited whole; `off` leaves none; `default` in place.
    let c = http(
        "proxy_redirect http://a/ /a/; proxy_redirect ~^http://b/(.*) /b/$1;\n server { location /x/ { proxy_pass http://127.0.0.1:9; }\n location /y/ { proxy_pass http://127.0.0.1:9; proxy_redirect off; }\n location /z/ { proxy_pass http://127.0.0.1:9/z/; proxy_redirect default; proxy_redirect http://c/ /c/; } }",
    );
    assert_eq!(
        texts(&rules(&c, 0)),
        vec![
            ("http://a/".into(), "/a/".into()),
            ("^http://b/(.*)".into(), "regex".into())
        ]
    );
    assert!(rules(&c, 1).is_empty());
    assert_eq!(
        texts(&rules(&c, 2)),
        vec![
            ("http://127.0.0.1:9/z/".into(), "/z/".into()),
            ("http://c/".into(), "/c/".into())
        ]
    );
}

#[test]
fn proxy_busy_and_write_sizes_follow_the_buffers_when_unset() {
    let c = http("server { location / { proxy_buffer_size 128; proxy_buffers 4 128; proxy_pass http://127.0.0.1:9; } }");
    let b = servers(&c)[0].locations.prefix[0]
        .conf
        .proxy
        .clone()
        .expect("proxy")
        .buffers
        .clone();
    assert_eq!((b.busy_size, b.temp_file_write_size), (256, 256));
    let c = http("server { location / { proxy_pass http://127.0.0.1:9; } }");
    let b = servers(&c)[0].locations.prefix[0]
        .conf
        .proxy
        .clone()
        .expect("proxy")
        .buffers
        .clone();
    assert_eq!((b.busy_size, b.temp_file_write_size), (8192, 8192));
}

/// `keepalive_disable`: nginx's browser masks.
#[test]
fn keepalive_disable_masks() {
    use super::model::KeepaliveDisable;
    let msie6 = KeepaliveDisable {
        msie6: true,
        safari: false,
    };
    let old = Some("Mozilla/4.0 (compatible; MSIE 5.0; Windows 98)");
    assert!(msie6.applies(true, old), "old MSIE after a POST");
    assert!(!msie6.applies(false, old), "not after a GET");
    assert!(!msie6.applies(true, Some("Mozilla/4.0 (compatible; MSIE 7.0)")));
    let safari = KeepaliveDisable {
        msie6: false,
        safari: true,
    };
    let mac = Some("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15) Safari/605.1.15");
    assert!(safari.applies(false, mac));
    assert!(!msie6.applies(false, mac));
    let chrome = Some("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15) Chrome/120 Safari/537.36");
    assert!(!safari.applies(false, chrome), "Chrome also says Safari/");
    assert!(!safari.applies(false, None));
}

/// nginx asks a certificate of the default server of an `ssl` address only (or
/// `ssl_reject_handshake on`); other blocks without one have the default make their handshakes,
/// unless the default rejects them.
#[test]
fn certificates_on_ssl_addresses_as_nginx() {
    let load = |text: &str| load_str(text, Path::new("/t/x.conf"), Path::new("/t"));
    let c = load(
        "http {\n server { listen 127.0.0.1:443 ssl; ssl_certificate a.pem; ssl_certificate_key a.key; }\n server { listen 127.0.0.1:443 ssl; server_name other; ssl_verify_client on; }\n}",
    )
    .expect("a non-default block without a certificate loads");
    let other = &servers(&c)[1];
    let t = other.tls.as_ref().expect("its client checks are kept");
    assert!(t.certificates.is_empty());
    assert_eq!(t.verify_client, crate::conf::model::VerifyClient::On);
    let c = load("http {\n server { listen 127.0.0.1:443 ssl; ssl_reject_handshake on; }\n}")
        .expect("a rejecting default needs no certificate");
    assert!(servers(&c)[0]
        .tls
        .as_ref()
        .is_some_and(|t| t.reject_handshake));
    let e = load(
        "http {\n server { listen 127.0.0.1:443 ssl; ssl_reject_handshake on; }\n server { listen 127.0.0.1:443; server_name b; }\n}",
    )
    .map(|_| ())
    .expect_err("a block without a certificate behind a rejecting default");
    assert_eq!(
        e.to_string(),
        "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in /t/x.conf:3"
    );
}

#[test]
fn error_log_is_inherited_inward_as_a_whole() {
    use super::model::{ErrorLog, LogLevel, LogTarget};
    let c = ok("error_log /main.log;\nhttp {\n error_log /http.log;\n server {\n  listen 127.0.0.1:8080;\n  location /a { error_log /a1.log warn; error_log /a2.log; location /a/b { } }\n  location /c { }\n }\n server { listen 127.0.0.1:8081; error_log /s.log info; }\n}");
    let f = |p: &str, level| ErrorLog {
        target: LogTarget::File(p.into()),
        level,
    };
    assert_eq!(c.main.error_log, [f("/main.log", LogLevel::Error)]);
    let http = c.http.as_ref().expect("http");
    let s0 = &http.servers[0];
    assert_eq!(
        s0.default_location.error_log,
        [f("/http.log", LogLevel::Error)]
    );
    let loc = |prefix: &str| {
        s0.locations
            .prefix
            .iter()
            .find(|l| l.conf.prefix == prefix)
            .map(|l| l.conf.clone())
            .expect(prefix)
    };
    let a = loc("/a");
    assert_eq!(
        a.error_log,
        [f("/a1.log", LogLevel::Warn), f("/a2.log", LogLevel::Error)]
    );
    let b = &a.locations.prefix[0].conf;
    assert_eq!(b.error_log, a.error_log);
    assert_eq!(loc("/c").error_log, [f("/http.log", LogLevel::Error)]);
    assert_eq!(
        http.servers[1].default_location.error_log,
        [f("/s.log", LogLevel::Info)]
    );
}

/// A tuning guide's `open_file_cache` lines load; levels that inherit the directive share its
/// one cache, a level with its own line has another, `off` turns it off; nginx's defaults.
#[test]
fn open_file_cache_directives() {
    let c = http(
        "open_file_cache max=1000 inactive=20s; open_file_cache_valid 30s;\n\
         open_file_cache_min_uses 2; open_file_cache_errors on; open_file_cache_events on;\n\
         server {\n\
           location /a { }\n\
           location /b { open_file_cache max=5; open_file_cache_valid 2s; }\n\
           location /c { open_file_cache off max=7; }\n\
         }",
    );
    let s = &servers(&c)[0];
    let d = &s.default_location;
    let shared = d.open_file_cache.as_ref().unwrap();
    assert_eq!(
        (shared.max, shared.inactive),
        (1000, Duration::from_secs(20))
    );
    assert_eq!(d.open_file_cache_valid, Duration::from_secs(30));
    assert_eq!(d.open_file_cache_min_uses, 2);
    assert!(d.open_file_cache_errors);
    let a = prefix_loc(&s.locations, "/a");
    assert!(Arc::ptr_eq(a.open_file_cache.as_ref().unwrap(), shared));
    let b = prefix_loc(&s.locations, "/b");
    let own = b.open_file_cache.as_ref().unwrap();
    assert!(!Arc::ptr_eq(own, shared));
    assert_eq!((own.max, own.inactive), (5, Duration::from_secs(60)));
    assert_eq!(b.open_file_cache_valid, Duration::from_secs(2));
    assert_eq!(b.open_file_cache_min_uses, 2, "inherited");
    assert!(prefix_loc(&s.locations, "/c").open_file_cache.is_none());
    // nginx's defaults.
    let c = http("server { }");
    let d = &servers(&c)[0].default_location;
    assert!(d.open_file_cache.is_none());
    assert_eq!(d.open_file_cache_valid, Duration::from_secs(60));
    assert_eq!(d.open_file_cache_min_uses, 1);
    assert!(!d.open_file_cache_errors);
}

/// `server NAME resolve` is not resolved at load: the line is kept as a template with its
/// port, service and parameters; the block takes `http`'s `resolver` and
/// `resolver_timeout` unless it has its own; an address with `resolve` is a plain server.
#[test]
fn resolvable_upstream_servers_are_templates() {
    let c = http(
        "resolver 127.0.0.1:5353 valid=3s;\nresolver_timeout 7s;\n\
         upstream a { zone z 1m; server name.invalid:8080 resolve weight=2 max_fails=0; \
         server 127.0.0.1:81 resolve; server srv.invalid service=http resolve backup; }\n\
         upstream b { zone z 1m; server name.invalid resolve; resolver 127.0.0.2; }\n\
         server { listen 127.0.0.1:8080; location /a { proxy_pass http://a; } \
         location /b { proxy_pass http://b; } }",
    );
    let s = &servers(&c)[0];
    let up = |p: &str| match &prefix_loc(&s.locations, p)
        .proxy
        .as_ref()
        .expect("proxy")
        .target
    {
        ProxyTarget::Upstream(u) => u.clone(),
        other => panic!("{other:?}"),
    };
    let a = up("/a");
    assert_eq!(a.servers.len(), 1, "the address is a plain server");
    assert_eq!(a.resolve.len(), 2);
    let (t, srv) = (&a.resolve[0], &a.resolve[1]);
    assert_eq!(
        (t.host.as_str(), t.port, t.service.as_deref()),
        ("name.invalid", 8080, None)
    );
    assert_eq!((t.params.weight, t.params.max_fails), (2, 0));
    assert_eq!(
        (srv.service.as_deref(), srv.params.backup),
        (Some("http"), true)
    );
    let r = a.resolver.as_ref().expect("http's resolver");
    assert_eq!(r.servers, ["127.0.0.1:5353".parse().expect("addr")]);
    assert_eq!(r.valid, Some(Duration::from_secs(3)));
    assert_eq!(a.resolver_timeout, Some(Duration::from_secs(7)));
    let b = up("/b");
    assert_eq!(
        b.resolver.as_ref().expect("own").servers,
        ["127.0.0.2:53".parse().expect("addr")]
    );
    assert_eq!(b.resolve[0].port, 80);
}
