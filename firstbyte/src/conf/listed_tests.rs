//! Directives that come from the declarative lists (`directives.rs`): the ones added with
//! them, loaded whole, with nginx's messages for bad values.

use super::model::*;
use super::*;

fn load(text: &str) -> Result<Config, ConfError> {
    load_text(
        text.as_bytes(),
        Path::new("/t/x.conf"),
        Some(Path::new("/p")),
        None,
        true,
    )
}

fn ok(text: &str) -> Config {
    load(text).unwrap_or_else(|e| panic!("{e}\n--- in ---\n{text}"))
}

fn err(text: &str) -> String {
    match load(text) {
        Ok(_) => panic!("expected an error from:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// The server block and its first location of `http { server { ... } }`.
fn first(c: &Config) -> (&ServerConf, &LocationConf) {
    let s = &c.http.as_ref().expect("http").servers[0];
    let l = &s.locations.prefix.first().expect("a location").conf;
    (s, l)
}

#[test]
fn new_directives_load_inherit_and_default() {
    let c = ok(
        "worker_rlimit_nofile 4096;\nevents {}\nhttp {\n etag off;\n expires 1h;\n \
                client_body_buffer_size 64k;\n large_client_header_buffers 8 16k;\n \
                server {\n  client_header_buffer_size 2k;\n  log_not_found off;\n  \
                location / { expires modified -30s; }\n }\n}\n",
    );
    assert_eq!(c.main.worker_rlimit_nofile, Some(4096));
    let (s, l) = first(&c);
    assert_eq!(s.client_header_buffer_size, 2048);
    assert_eq!(s.large_client_header_buffers, (8, 16 << 10));
    assert!(
        !l.etag && !l.log_not_found,
        "inherited from http and server"
    );
    assert_eq!(l.client_body_buffer_size, 64 << 10);
    assert_eq!(l.expires, Expires::Modified(-30));
    assert_eq!(s.default_location.expires, Expires::Access(3600));

    let c = ok("events {}\nhttp { server { location / { } } }\n");
    let (s, l) = first(&c);
    assert_eq!(c.main.worker_rlimit_nofile, None);
    assert_eq!(s.client_header_buffer_size, 1024);
    assert_eq!(s.large_client_header_buffers, (4, 8192));
    assert!(l.etag && l.log_not_found);
    assert_eq!(l.client_body_buffer_size, 16 << 10);
    assert_eq!(l.expires, Expires::Off);
}

#[test]
fn expires_forms_and_messages_as_nginx() {
    let e = |v: &str| {
        let c = ok(&format!(
            "events {{}}\nhttp {{ expires {v}; server {{ }} }}\n"
        ));
        c.http.expect("http").servers[0]
            .default_location
            .expires
            .clone()
    };
    assert_eq!(e("epoch"), Expires::Epoch);
    assert_eq!(e("max"), Expires::Max);
    assert_eq!(e("off"), Expires::Off);
    assert_eq!(e("2048"), Expires::Access(2048));
    assert_eq!(e("+1m"), Expires::Access(60));
    assert_eq!(e("-2048"), Expires::Access(-2048));
    assert_eq!(e("@15h30m33s"), Expires::Daily(15 * 3600 + 30 * 60 + 33));
    assert_eq!(e("modified 2048"), Expires::Modified(2048));
    assert!(
        matches!(e("modified $arg_e"), Expires::Var { modified: true, .. }),
        "a value with variables is read per response"
    );
    let cases: &[(&str, &str)] = &[
        ("expires foo;", "\"expires\" directive invalid value in /t/x.conf:2"),
        ("expires modified max;", "\"expires\" directive invalid value in /t/x.conf:2"),
        ("expires access 1h;", "\"expires\" directive invalid value in /t/x.conf:2"),
        (
            "expires modified @1h;",
            "\"expires\" directive daily time cannot be used with \"modified\" parameter in /t/x.conf:2",
        ),
        (
            "expires @25h;",
            "\"expires\" directive daily time value must be less than 24 hours in /t/x.conf:2",
        ),
        ("expires 1h;\nexpires 2h;", "\"expires\" directive is duplicate in /t/x.conf:3"),
        ("expires 1 2 3;", "invalid number of arguments in \"expires\" directive in /t/x.conf:2"),
        (
            "etag maybe;",
            "invalid value \"maybe\" in \"etag\" directive, it must be \"on\" or \"off\" in /t/x.conf:2",
        ),
        (
            "large_client_header_buffers 0 8k;",
            "\"large_client_header_buffers\" directive invalid value in /t/x.conf:2",
        ),
        (
            "large_client_header_buffers 4;",
            "invalid number of arguments in \"large_client_header_buffers\" directive in /t/x.conf:2",
        ),
        (
            "client_body_buffer_size 1q;",
            "\"client_body_buffer_size\" directive invalid value in /t/x.conf:2",
        ),
        (
            "worker_rlimit_nofile 10;",
            "\"worker_rlimit_nofile\" directive is not allowed here in /t/x.conf:2",
        ),
    ];
    for (body, want) in cases {
        let got = err(&format!("events {{}}\nhttp {{ {body}\n}}\n"));
        assert_eq!(&got, want, "{body}");
    }
    assert_eq!(
        err("worker_rlimit_nofile x;\nevents {}\n"),
        "\"worker_rlimit_nofile\" directive invalid value in /t/x.conf:1"
    );
    assert_eq!(
        err("events {}\nhttp { server { location / {\nclient_header_buffer_size 2k;\n} } }\n"),
        "\"client_header_buffer_size\" directive is not allowed here in /t/x.conf:3"
    );
}

/// `proxy_store` and `proxy_store_access` as nginx reads and merges them: the user's `rw`
/// unless `user:` says otherwise; `proxy_store` at a level drops an inherited `proxy_cache`
/// and `proxy_cache` an inherited `proxy_store`.
#[test]
fn proxy_store_forms_access_and_merge_with_the_cache() {
    let proxy = |text: &str| {
        let c = ok(&format!(
            "events {{}}\nhttp {{ proxy_cache_path /p/c keys_zone=z:1m; {text} }}"
        ));
        first(&c).1.proxy.clone().expect("proxy")
    };
    let p = proxy("server { location / { proxy_pass http://127.0.0.1:9; } }");
    assert_eq!((p.store.clone(), p.store_access), (ProxyStore::Off, 0o600));
    let p = proxy(
        "proxy_store on; proxy_store_access group:rw all:r;\n server { location / { proxy_pass http://127.0.0.1:9; } }",
    );
    assert_eq!((p.store.clone(), p.store_access), (ProxyStore::On, 0o664));
    let p = proxy(
        "proxy_store_access user:r;\n server { location / { proxy_store /d$uri; proxy_pass http://127.0.0.1:9; } }",
    );
    assert!(matches!(p.store, ProxyStore::Path(_)), "{:?}", p.store);
    assert_eq!(p.store_access, 0o400);
    let p = proxy(
        "proxy_cache z;\n server { location / { proxy_store on; proxy_pass http://127.0.0.1:9; } }",
    );
    assert!(p.cache.is_none() && p.store == ProxyStore::On);
    let p = proxy(
        "proxy_store on;\n server { location / { proxy_cache z; proxy_pass http://127.0.0.1:9; } }",
    );
    assert!(p.cache.is_some() && p.store == ProxyStore::Off);
}
