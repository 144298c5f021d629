//! What the upstream sees and what comes back: nginx's header rules for a proxied request.
//!
//! Plain functions from the client's request, the location's [`ProxyConf`] and variable
//! values to the upstream request's URI and headers, and from the upstream's response headers
//! to the client's. Request side (nginx's `ngx_http_proxy_headers`): `Host $proxy_host` and
//! `Connection close` unless `proxy_set_header` says otherwise; `TE`, `Keep-Alive`, `Expect`
//! and `Upgrade` are not passed unless set (WebSocket configs set `Upgrade $http_upgrade` and
//! `Connection "upgrade"`); a header set to an empty value is removed; every other client
//! header passes. Response side: hop-by-hop headers stop here, and `Date`, `Server`, `X-Pad`
//! and `X-Accel-*` are hidden unless `proxy_pass_header` names them (firstbyte then adds its
//! own `Server` and `Date`, as nginx).

use std::borrow::Cow;

use http::header::{self, Entry as HeaderMapEntry, HeaderMap, HeaderName, HeaderValue};

use crate::conf::model::{ProxyConf, Redirect};
use crate::conf::vars::{ComplexValue, Vars};

/// Request headers nginx sets by default (an empty value: not passed).
const DEFAULTS: [(&str, &str); 6] = [
    ("host", "$proxy_host"),
    ("connection", "close"),
    ("te", ""),
    ("keep-alive", ""),
    ("expect", ""),
    ("upgrade", ""),
];

/// The request target sent upstream.
///
/// With a URI part in `proxy_pass`, the location's `prefix` of the (decoded) `$uri` is
/// replaced by it; without one, the client's request line goes unchanged unless an internal
/// redirect changed the URI.
pub fn upstream_uri(
    conf: &ProxyConf,
    prefix: &str,
    internal: bool,
    request_uri: &str,
    uri: &str,
    args: Option<&str>,
) -> String {
    let (path, rebuilt) = match &conf.uri {
        Some(base) => {
            let rest = uri.strip_prefix(prefix).unwrap_or(uri);
            // A decoded `$uri` goes back on the wire escaped (nginx's `ngx_escape_uri`).
            let rest = crate::http::uri::encode_path(rest);
            (format!("{base}{rest}"), true)
        }
        None if internal => (crate::http::uri::encode_path(uri), true),
        None => (request_uri.to_string(), false),
    };
    match args {
        Some(a) if rebuilt => format!("{path}?{a}"),
        _ => path,
    }
}

/// `$proxy_add_x_forwarded_for`: the client's `X-Forwarded-For` with `$remote_addr` added.
pub fn add_x_forwarded_for(client: &HeaderMap, remote: Option<&str>) -> String {
    let prior: Vec<&str> = client
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let remote = remote.unwrap_or("");
    if prior.is_empty() {
        return remote.to_string();
    }
    format!("{}, {remote}", prior.join(", "))
}

/// Variables of a proxied request: `$proxy_host`, `$proxy_add_x_forwarded_for` and
/// `$proxy_port`, then the request's own.
pub struct ProxyVars<'a> {
    /// The request's variables.
    pub inner: &'a dyn Vars,
    /// `$proxy_host`.
    pub proxy_host: &'a str,
    /// `$proxy_add_x_forwarded_for`.
    pub forwarded_for: &'a str,
}

impl Vars for ProxyVars<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "proxy_host" => Some(Cow::Borrowed(self.proxy_host)),
            "proxy_add_x_forwarded_for" => Some(Cow::Borrowed(self.forwarded_for)),
            "proxy_port" => Some(Cow::Borrowed(
                self.proxy_host
                    .rsplit_once(':')
                    .filter(|(h, _)| !h.ends_with(':'))
                    .map(|(_, p)| p)
                    .unwrap_or(""),
            )),
            _ => self.inner.get(name),
        }
    }
}

/// The upstream request's headers.
pub fn request_headers(conf: &ProxyConf, client: &HeaderMap, vars: &dyn Vars) -> HeaderMap {
    let mut set: Vec<(String, Cow<'_, ComplexValue>)> = DEFAULTS
        .iter()
        .map(|(n, v)| {
            let v = ComplexValue::parse(v).unwrap_or_default();
            (n.to_string(), Cow::Owned(v))
        })
        .collect();
    for (name, v) in &conf.set_headers {
        let lower = name.to_ascii_lowercase();
        match set.iter_mut().find(|(n, _)| *n == lower) {
            Some(slot) => slot.1 = Cow::Borrowed(v),
            None => set.push((lower, Cow::Borrowed(v))),
        }
    }
    let mut out = HeaderMap::with_capacity(client.len() + set.len());
    for (name, v) in &set {
        let value = match v.as_static() {
            Some(s) => s.to_string(),
            None => v.eval(vars),
        };
        if value.is_empty() {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            out.append(n, v);
        }
    }
    for (name, value) in client {
        let n = name.as_str();
        if set.iter().any(|(s, _)| s == n) || n == "transfer-encoding" {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

pub(super) fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "proxy-connection"
            | "upgrade"
    )
}

/// Whether the upstream's field `name` (lower case) stays from the client by
/// `proxy_hide_header` (`hide`), or by default unless `proxy_pass_header` (`pass`) names it:
/// the rule for its header, its trailers and its 103s alike.
pub fn hidden(name: &str, hide: &[String], pass: &[String]) -> bool {
    (hidden_by_default(name) && !pass.iter().any(|p| p == name)) || hide.iter().any(|h| h == name)
}

fn hidden_by_default(name: &str) -> bool {
    matches!(name, "date" | "server" | "x-pad") || name.starts_with("x-accel-")
}

/// Why an upstream response head cannot be relayed safely, in nginx's words: two lengths,
/// or a transfer coding other than one `chunked`, or both (request smuggling hides in the
/// disagreement between two readers of such a head). nginx answers 502.
pub fn invalid_framing(headers: &HeaderMap) -> Option<String> {
    let line =
        |name: &str, v: &HeaderValue| format!("{name}: {}", String::from_utf8_lossy(v.as_bytes()));
    for (name, shown) in [
        (header::CONTENT_LENGTH, "Content-Length"),
        (header::TRANSFER_ENCODING, "Transfer-Encoding"),
    ] {
        let mut all = headers.get_all(&name).iter();
        if let (Some(first), Some(second)) = (all.next(), all.next()) {
            return Some(format!(
                "upstream sent duplicate header line: \"{}\", previous value: \"{}\"",
                line(shown, second),
                line(shown, first)
            ));
        }
    }
    if let Some(te) = headers.get(header::TRANSFER_ENCODING) {
        if !te.as_bytes().eq_ignore_ascii_case(b"chunked") {
            return Some(format!(
                "upstream sent unknown \"Transfer-Encoding\": \"{}\"",
                String::from_utf8_lossy(te.as_bytes())
            ));
        }
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Some(
                "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time"
                    .to_string(),
            );
        }
    }
    None
}

/// Fields nginx takes once from an upstream: a repeated one is ignored ("upstream sent
/// duplicate header line ... ignoring it"), for the client and for `$upstream_http_*`.
const SINGLE: &[&str] = &[
    "content-type",
    "date",
    "etag",
    "server",
    "location",
    "refresh",
    "last-modified",
    "expires",
    "x-accel-redirect",
    "x-accel-expires",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// A response extension: `Date` or `Server` that `proxy_pass_header` lets through from an
/// upstream that sent none. nginx's proxy module then adds an empty one in the upstream's
/// place, which the header filter takes for the response's own: the client gets neither the
/// upstream's nor the server's.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassedAbsent {
    /// `proxy_pass_header Date` and the upstream sent no `Date`.
    pub date: bool,
    /// `proxy_pass_header Server` and the upstream sent no `Server`.
    pub server: bool,
}

impl PassedAbsent {
    /// What `conf`'s `proxy_pass_header` makes of `headers` (the upstream's, filtered).
    pub fn of(conf: &ProxyConf, headers: &HeaderMap) -> Self {
        let absent = |name: &str| {
            !hidden(name, &conf.hide_headers, &conf.pass_headers) && !headers.contains_key(name)
        };
        PassedAbsent {
            date: absent("date"),
            server: absent("server"),
        }
    }
}

/// Keeps only the first of each field nginx takes once ([`SINGLE`]).
pub fn drop_repeated(headers: &mut HeaderMap) {
    for name in SINGLE {
        if headers.get_all(*name).iter().nth(1).is_some() {
            if let Some(first) = headers.get(*name).cloned() {
                headers.insert(*name, first);
            }
        }
    }
}

/// Filters the upstream's response headers in place. `switching` keeps `Connection` and
/// `Upgrade` for a 101 answer to an upgrade.
pub fn response_headers(conf: &ProxyConf, headers: &mut HeaderMap, switching: bool) {
    // RFC 9112 §6.3: with Transfer-Encoding, Content-Length is ignored (and must go: the
    // body's length is the decoded one, not what the upstream declared beside it).
    if headers.contains_key(header::TRANSFER_ENCODING) {
        headers.remove(header::CONTENT_LENGTH);
    }
    let dropped = |name: &HeaderName| {
        let n = name.as_str();
        // nginx passes an `Upgrade` of any answer (a 426 names the protocol to switch to);
        // the caller drops it for HTTP/2 and HTTP/3 clients, where it has no meaning.
        (hop_by_hop(n) && !switching && n != "upgrade")
            || hidden(n, &conf.hide_headers, &conf.pass_headers)
    };
    if headers.keys().any(dropped) {
        // Rebuilt rather than `remove`d: HeaderMap's remove moves its last field into the
        // hole, and the client gets the upstream's fields in the upstream's order.
        let mut kept = HeaderMap::with_capacity(headers.len());
        let mut current: Option<HeaderName> = None;
        for (name, value) in std::mem::take(headers) {
            if let Some(n) = name {
                current = Some(n);
            }
            if let Some(n) = current.as_ref().filter(|n| !dropped(n)) {
                kept.append(n.clone(), value);
            }
        }
        *headers = kept;
    }
    if switching {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// The request's variables with a `proxy_redirect` regex's captures as `$1`...
pub(super) struct Captures<'a> {
    pub(super) inner: &'a dyn Vars,
    pub(super) caps: Vec<Option<String>>,
}

impl Vars for Captures<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name.parse::<usize>() {
            Ok(n) => self
                .caps
                .get(n)
                .and_then(|c| c.as_deref().map(Cow::Borrowed)),
            Err(_) => self.inner.get(name),
        }
    }
}

/// `value` with `proxy_redirect`'s first matching rule applied to what follows `prefix`
/// bytes (nginx's `ngx_http_proxy_rewrite_redirect`); None: no rule matched.
pub fn rewrite_redirect(
    rules: &[Redirect],
    value: &str,
    prefix: usize,
    vars: &dyn Vars,
) -> Option<String> {
    let (head, rest) = (value.get(..prefix)?, value.get(prefix..)?);
    for rule in rules {
        match rule {
            Redirect::Prefix {
                pattern,
                replacement,
            } => {
                let pattern = pattern.eval(vars);
                if let Some(tail) = rest.strip_prefix(pattern.as_str()) {
                    return Some(format!("{head}{}{tail}", replacement.eval(vars)));
                }
            }
            Redirect::Regex { regex, replacement } => {
                if let Some(caps) = regex.capture_texts(rest) {
                    let vars = Captures { inner: vars, caps };
                    return Some(format!("{head}{}", replacement.eval(&vars)));
                }
            }
        }
    }
    None
}

/// Applies `proxy_redirect` to the upstream's `Location` headers and to the URL of its
/// `Refresh` headers (after `url=`, any case), as nginx. A rewritten `Location` goes through
/// `complete` (nginx's header filter then makes a relative one absolute, per
/// `absolute_redirect`); one no rule matched stays as the upstream sent it.
pub fn redirect_headers(
    rules: &[Redirect],
    headers: &mut HeaderMap,
    vars: &dyn Vars,
    complete: &dyn Fn(&str) -> String,
) {
    if rules.is_empty() {
        return;
    }
    for name in [header::LOCATION, HeaderName::from_static("refresh")] {
        let is_refresh = name != header::LOCATION;
        let HeaderMapEntry::Occupied(mut entry) = headers.entry(name) else {
            continue;
        };
        for v in entry.iter_mut() {
            let Ok(text) = v.to_str() else {
                continue;
            };
            let prefix = if is_refresh {
                match text.to_ascii_lowercase().find("url=") {
                    Some(i) => i + 4,
                    None => continue,
                }
            } else {
                0
            };
            if let Some(mut new) = rewrite_redirect(rules, text, prefix, vars) {
                if !is_refresh {
                    new = complete(&new);
                }
                if let Ok(h) = HeaderValue::from_str(&new) {
                    *v = h;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::{CertificateCache, ProxySsl, ProxyTarget};
    use std::time::Duration;

    struct NoVars;
    impl Vars for NoVars {
        fn get(&self, name: &str) -> Option<Cow<'_, str>> {
            (name == "http_upgrade").then_some(Cow::Borrowed("websocket"))
        }
    }

    fn conf(uri: Option<&str>, set: &[(&str, &str)]) -> ProxyConf {
        ProxyConf {
            tls: false,
            host: "backend:8080".into(),
            uri: uri.map(str::to_string),
            target: ProxyTarget::Addrs(vec![]),
            buffers: Default::default(),
            set_headers: set
                .iter()
                .map(|(n, v)| (n.to_string(), ComplexValue::parse(v).expect("value")))
                .collect(),
            http_version: Default::default(),
            connect_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            buffering: false,
            intercept_errors: false,
            ignore_client_abort: false,
            force_ranges: false,
            next_upstream: crate::conf::model::NextUpstream::DEFAULT,
            next_upstream_tries: 0,
            next_upstream_timeout: Duration::ZERO,
            method: None,
            ignore_headers: vec![],
            cookies: Default::default(),
            bind: None,
            cache: None,
            store: Default::default(),
            store_access: 0o600,
            set_body: None,
            limit_rate: crate::conf::model::SizeValue::Fixed(0),
            resolver: None,
            resolver_timeout: Duration::from_secs(30),
            pass_request_headers: true,
            pass_request_body: true,
            pass_trailers: false,
            early_hints: vec![],
            request_buffering: true,
            pass_headers: vec!["server".into()],
            hide_headers: vec!["x-secret".into()],
            redirects: vec![],
            ssl: ProxySsl {
                certificate: None,
                certificate_key: None,
                password_file: None,
                trusted_certificate: None,
                crl: None,
                verify_depth: 1,
                verify: false,
                server_name: false,
                name: None,
                session_reuse: true,
                protocols: vec![],
                dynamic: None,
                certificate_cache: CertificateCache::Off,
            },
            fastcgi: None,
        }
    }

    #[test]
    fn uri_replacement_as_nginx() {
        let c = conf(Some("/api/"), &[]);
        assert_eq!(
            upstream_uri(
                &c,
                "/app/",
                false,
                "/app/x%20y?q=1",
                "/app/x y",
                Some("q=1")
            ),
            "/api/x%20y?q=1"
        );
        let c = conf(None, &[]);
        assert_eq!(
            upstream_uri(
                &c,
                "/app/",
                false,
                "/app/x%20y?q=1",
                "/app/x y",
                Some("q=1")
            ),
            "/app/x%20y?q=1"
        );
        assert_eq!(
            upstream_uri(&c, "/", true, "/orig", "/fallback", None),
            "/fallback"
        );
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        assert_eq!(add_x_forwarded_for(&h, Some("10.0.0.1")), "10.0.0.1");
        h.append("x-forwarded-for", HeaderValue::from_static("1.1.1.1"));
        h.append("x-forwarded-for", HeaderValue::from_static("2.2.2.2"));
        assert_eq!(
            add_x_forwarded_for(&h, Some("10.0.0.1")),
            "1.1.1.1, 2.2.2.2, 10.0.0.1"
        );
    }

    #[test]
    fn request_headers_defaults_and_overrides() {
        let mut client = HeaderMap::new();
        client.insert("host", HeaderValue::from_static("front"));
        client.insert("connection", HeaderValue::from_static("keep-alive"));
        client.insert("upgrade", HeaderValue::from_static("websocket"));
        client.insert("accept", HeaderValue::from_static("*/*"));
        client.insert("x-drop", HeaderValue::from_static("1"));
        let inner = NoVars;
        let vars = ProxyVars {
            inner: &inner,
            proxy_host: "backend:8080",
            forwarded_for: "10.0.0.1",
        };
        let c = conf(
            None,
            &[("X-Drop", ""), ("X-FF", "$proxy_add_x_forwarded_for")],
        );
        let h = request_headers(&c, &client, &vars);
        assert_eq!(h["host"], "backend:8080");
        assert_eq!(h["connection"], "close");
        assert!(h.get("upgrade").is_none());
        assert!(h.get("x-drop").is_none());
        assert_eq!(h["x-ff"], "10.0.0.1");
        assert_eq!(h["accept"], "*/*");

        let ws = conf(
            None,
            &[("Upgrade", "$http_upgrade"), ("Connection", "upgrade")],
        );
        let h = request_headers(&ws, &client, &vars);
        assert_eq!(h["upgrade"], "websocket");
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h.get_all("connection").iter().count(), 1);
    }

    #[test]
    fn response_headers_hidden_and_passed() {
        let c = conf(None, &[]);
        let mut h = HeaderMap::new();
        h.insert("server", HeaderValue::from_static("backend"));
        h.insert("date", HeaderValue::from_static("x"));
        h.insert("x-accel-redirect", HeaderValue::from_static("/x"));
        h.insert("x-secret", HeaderValue::from_static("s"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-type", HeaderValue::from_static("text/plain"));
        response_headers(&c, &mut h, false);
        assert_eq!(h["server"], "backend", "proxy_pass_header Server");
        assert!(h.get("date").is_none());
        assert!(h.get("x-accel-redirect").is_none());
        assert!(h.get("x-secret").is_none());
        assert!(h.get("transfer-encoding").is_none());
        assert_eq!(h["content-type"], "text/plain");
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        let head = |fields: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (n, v) in fields {
                h.append(*n, HeaderValue::from_static(v));
            }
            invalid_framing(&h)
        };
        assert_eq!(head(&[("content-length", "5")]), None);
        assert_eq!(head(&[("transfer-encoding", "Chunked")]), None);
        let dup = head(&[("content-length", "0"), ("content-length", "0")]).expect("dup");
        assert!(
            dup.contains("duplicate header line: \"Content-Length: 0\""),
            "{dup}"
        );
        assert!(head(&[
            ("transfer-encoding", "chunked"),
            ("transfer-encoding", "chunked")
        ])
        .is_some());
        let unknown = head(&[("transfer-encoding", "foo")]).expect("unknown");
        assert!(
            unknown.contains("unknown \"Transfer-Encoding\": \"foo\""),
            "{unknown}"
        );
        assert!(head(&[("transfer-encoding", "gzip, chunked")]).is_some());
        assert!(head(&[("transfer-encoding", "chunked"), ("content-length", "0")]).is_some());
    }

    #[test]
    fn repeated_single_fields_keep_the_first() {
        let mut h = HeaderMap::new();
        h.append("expires", HeaderValue::from_static("foo"));
        h.append("expires", HeaderValue::from_static("bar"));
        h.append("vary", HeaderValue::from_static("a"));
        h.append("vary", HeaderValue::from_static("b"));
        drop_repeated(&mut h);
        let all = |n: &str| {
            h.get_all(n)
                .iter()
                .map(|v| v.to_str().unwrap_or(""))
                .collect::<Vec<_>>()
        };
        assert_eq!(all("expires"), ["foo"]);
        assert_eq!(all("vary"), ["a", "b"]);
    }

    #[test]
    fn upgrade_of_a_non_101_answer_stays() {
        let c = conf(None, &[]);
        let mut h = HeaderMap::new();
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        h.insert("connection", HeaderValue::from_static("upgrade"));
        response_headers(&c, &mut h, false);
        assert_eq!(h["upgrade"], "websocket");
        assert!(h.get("connection").is_none());
    }

    #[test]
    fn content_length_beside_transfer_encoding_goes() {
        let c = conf(None, &[]);
        let mut h = HeaderMap::new();
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-length", HeaderValue::from_static("100"));
        response_headers(&c, &mut h, false);
        assert!(h.get("content-length").is_none());
        assert!(h.get("transfer-encoding").is_none());
        // Alone, it stays.
        let mut h = HeaderMap::new();
        h.insert("content-length", HeaderValue::from_static("5"));
        response_headers(&c, &mut h, false);
        assert_eq!(h["content-length"], "5");
    }

    fn prefix(p: &str, r: &str) -> Redirect {
        Redirect::Prefix {
            pattern: ComplexValue::parse(p).expect("pattern"),
            replacement: ComplexValue::parse(r).expect("replacement"),
        }
    }

    fn regex(re: &str, caseless: bool, r: &str) -> Redirect {
        let pos = crate::conf::model::Pos {
            file: std::sync::Arc::new("t".into()),
            line: 1,
        };
        Redirect::Regex {
            regex: crate::conf::rewrite::regex::Regex::compile(re, caseless, &pos).expect("re"),
            replacement: ComplexValue::parse(r).expect("replacement"),
        }
    }

    #[test]
    fn redirect_prefix_rules_in_order_case_sensitive() {
        let rules = [
            prefix("http://backend:8080/app/", "/front/"),
            prefix("http://backend:8080/", "/"),
        ];
        let v = NoVars;
        assert_eq!(
            rewrite_redirect(&rules, "http://backend:8080/app/x?y=1", 0, &v).as_deref(),
            Some("/front/x?y=1")
        );
        assert_eq!(
            rewrite_redirect(&rules, "http://backend:8080/other", 0, &v).as_deref(),
            Some("/other")
        );
        assert_eq!(
            rewrite_redirect(&rules, "http://BACKEND:8080/x", 0, &v),
            None
        );
        assert_eq!(rewrite_redirect(&rules, "http://elsewhere/", 0, &v), None);
        // Variables in the replacement ($http_upgrade is "websocket" in NoVars).
        let with_var = [prefix("http://b/", "https://$http_upgrade/")];
        assert_eq!(
            rewrite_redirect(&with_var, "http://b/p", 0, &v).as_deref(),
            Some("https://websocket/p")
        );
    }

    #[test]
    fn redirect_regex_replaces_the_whole_value_with_captures() {
        let rules = [regex(r"^http://([^:/]+):\d+(/.*)$", false, "https://$1$2")];
        let v = NoVars;
        assert_eq!(
            rewrite_redirect(&rules, "http://host:8080/a/b", 0, &v).as_deref(),
            Some("https://host/a/b")
        );
        assert_eq!(rewrite_redirect(&rules, "/relative", 0, &v), None);
        let caseless = [regex("^HTTP://X/(.*)", true, "/x/$1")];
        assert_eq!(
            rewrite_redirect(&caseless, "http://x/y", 0, &v).as_deref(),
            Some("/x/y")
        );
        let cased = [regex("^HTTP://X/(.*)", false, "/x/$1")];
        assert_eq!(rewrite_redirect(&cased, "http://x/y", 0, &v), None);
    }

    #[test]
    fn location_and_refresh_url_are_rewritten() {
        let rules = [prefix("http://backend/", "/")];
        let mut h = HeaderMap::new();
        h.insert("location", HeaderValue::from_static("http://backend/next"));
        h.insert(
            "refresh",
            HeaderValue::from_static("5; URL=http://backend/later"),
        );
        h.insert(
            "content-location",
            HeaderValue::from_static("http://backend/c"),
        );
        redirect_headers(&rules, &mut h, &NoVars, &|l| format!("http://front{l}"));
        assert_eq!(h["location"], "http://front/next");
        assert_eq!(h["refresh"], "5; URL=/later");
        assert_eq!(
            h["content-location"], "http://backend/c",
            "not nginx's either"
        );
        // `off` is no rules: nothing changes.
        let mut h2 = HeaderMap::new();
        h2.insert("location", HeaderValue::from_static("http://backend/next"));
        redirect_headers(&[], &mut h2, &NoVars, &|l| format!("http://front{l}"));
        assert_eq!(h2["location"], "http://backend/next");
    }
}
