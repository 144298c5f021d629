//! Loads that nginx's own test suite and nginx configs depend on (issue 14): certificate
//! paths with variables, `-e`, the pid default, the upstream directives `-V` reports.

use super::model::*;
use super::testutil::{load_as, ok};
use super::*;

/// `ssl_certificate $ssl_server_name.crt` (relative, variables) reads from the configuration
/// prefix, the main file's directory, as nginx — not from the working directory; the same for
/// `proxy_ssl_certificate`. Absolute values stay as they are.
#[test]
fn variable_certificate_paths_resolve_against_the_configuration_prefix() {
    struct Sni(&'static str);
    impl vars::Vars for Sni {
        fn get(&self, name: &str) -> Option<std::borrow::Cow<'_, str>> {
            matches!(name, "ssl_server_name" | "host").then_some(self.0.into())
        }
    }
    let c = ok(&format!(
        "events {{}}\nhttp {{\n{}\n}}\n",
        "server { listen 443 ssl; ssl_certificate $ssl_server_name.crt; ssl_certificate_key keys/$ssl_server_name.key; }\n\
         server { listen 443 ssl; ssl_certificate /abs/$ssl_server_name.crt; ssl_certificate_key /abs/$ssl_server_name.key; \
                  location / { proxy_ssl_certificate $host.pem; proxy_ssl_certificate_key /k/$host.key; proxy_pass https://127.0.0.1:9; } }",
    ));
    let s = c.http.as_ref().expect("http").servers.as_slice();
    let tls = |i: usize| s[i].tls.as_ref().expect("tls");
    let d = &tls(0).dynamic_certificates[0];
    assert_eq!(
        d.eval(&Sni("a.test")),
        ("/t/a.test.crt".into(), "/t/keys/a.test.key".into())
    );
    let d = &tls(1).dynamic_certificates[0];
    assert_eq!(
        d.eval(&Sni("b.test")),
        ("/abs/b.test.crt".into(), "/abs/b.test.key".into())
    );
    let proxy = s[1]
        .locations
        .find("/")
        .expect("location")
        .conf
        .proxy
        .clone();
    let d = proxy.expect("proxy").ssl.dynamic.clone().expect("dynamic");
    assert_eq!(
        d.eval(&Sni("up.test")),
        ("/t/up.test.pem".into(), "/k/up.test.key".into())
    );
}

/// `-V` reports the upstream modules from `proxy::UPSTREAM_DIRECTIVES`: each directive of
/// an upstream module loads exactly when that list says firstbyte reads it.
#[test]
fn upstream_directives_list_matches_the_upstream_parser() {
    for (name, args) in [
        ("server", "127.0.0.1:2"),
        ("keepalive", "4"),
        ("hash", "$remote_addr"),
        ("ip_hash", ""),
        ("least_conn", ""),
        ("random", ""),
        ("zone", "z 64k"),
    ] {
        let text = format!(
            "events {{}}\nhttp {{ upstream u {{ server 127.0.0.1:1; {name} {args}; }} }}\n"
        );
        assert_eq!(
            load_as(&text, true).is_ok(),
            proxy::UPSTREAM_DIRECTIVES.contains(&name),
            "{name}"
        );
    }
}

/// `-e FILE|stderr` names the error log only when the configuration has none at the main
/// level; a relative file is under the prefix.
#[test]
fn dash_e_is_the_default_error_log() {
    let mut c = ok("events {}\n");
    default_error_log(&mut c, Some("error.log"));
    assert_eq!(
        c.main.error_log,
        vec![ErrorLog {
            target: LogTarget::File("/p/error.log".into()),
            level: LogLevel::Error
        }]
    );
    let mut c = ok("events {}\n");
    default_error_log(&mut c, Some("stderr"));
    assert_eq!(c.main.error_log[0].target, LogTarget::Stderr);
    let mut c = ok("error_log /var/log/x.log warn;\nevents {}\n");
    default_error_log(&mut c, Some("/other.log"));
    assert_eq!(
        c.main.error_log,
        vec![ErrorLog {
            target: LogTarget::File("/var/log/x.log".into()),
            level: LogLevel::Warn
        }]
    );
}

/// The pid file by default: `/run/firstbyte.pid` as root, none for an ordinary user (who
/// could not write it, so a minimal config would not start); a written `pid` always counts.
#[test]
fn default_pid_depends_on_root() {
    let text = "events {}\n";
    assert_eq!(
        load_as(text, true).expect("root").main.pid,
        Some("/run/firstbyte.pid".into())
    );
    assert_eq!(load_as(text, false).expect("user").main.pid, None);
    let c = load_as("pid run/x.pid;\nevents {}\n", false).expect("user with pid");
    assert_eq!(c.main.pid, Some("/p/run/x.pid".into()));
}
