//! The interpreter against a fake request: programs come from configuration text, the
//! request is a map of variables, files are a map of facts. No socket, no file.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::uservars::{murmur2, split_value, UserVars};
use super::*;
use crate::conf::model::ServerConf;
use crate::conf::rewrite::Slot;
use crate::conf::vars::Vars;

/// The first server of `http { server { ... } }` with `body` inside the server block.
fn server(body: &str) -> Arc<ServerConf> {
    server_http("", body)
}

fn server_http(http: &str, body: &str) -> Arc<ServerConf> {
    let text = format!(
        "events {{}}\nhttp {{\n{http}\nserver {{ listen 127.0.0.1:8080; access_log off;\n{body}\n}}\n}}\n"
    );
    let c = crate::conf::load_str(&text, Path::new("/t.conf"), Path::new("/p")).unwrap();
    c.http.unwrap().servers[0].clone()
}

fn load_err(body: &str) -> String {
    let text = format!(
        "events {{}}\nhttp {{\nserver {{ listen 127.0.0.1:8080; access_log off;\n{body}\n}}\n}}\n"
    );
    match crate::conf::load_str(&text, Path::new("/t.conf"), Path::new("/p")) {
        Ok(_) => panic!("loaded: {body}"),
        Err(e) => e.to_string(),
    }
}

fn loc<'a>(s: &'a ServerConf, prefix: &str) -> &'a Arc<LocationConf> {
    &s.locations
        .prefix
        .iter()
        .find(|p| p.prefix == prefix)
        .unwrap_or_else(|| panic!("no location {prefix}"))
        .conf
}

struct Fake {
    vars: HashMap<String, String>,
    uri: String,
    args: Option<String>,
    caps: Vec<Option<String>>,
    user: Option<Box<UserVars>>,
    files: HashMap<String, FileFacts>,
    notices: std::cell::RefCell<Vec<String>>,
    quoted: bool,
}

impl Fake {
    fn new(s: &ServerConf, uri: &str, args: Option<&str>) -> Self {
        Fake {
            vars: HashMap::new(),
            uri: uri.into(),
            args: args.map(Into::into),
            caps: Vec::new(),
            user: UserVars::new(&s.vars),
            files: HashMap::new(),
            notices: Default::default(),
            quoted: false,
        }
    }
    fn var(mut self, k: &str, v: &str) -> Self {
        self.vars.insert(k.into(), v.into());
        self
    }
}

impl Vars for Fake {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "uri" => Some(Cow::Borrowed(&self.uri)),
            "args" => self.args.as_deref().map(Cow::Borrowed),
            "scheme" => Some(Cow::Borrowed("https")),
            _ => {
                if let Some(v) = self.vars.get(name) {
                    return Some(Cow::Borrowed(v));
                }
                if let Ok(n) = name.parse::<usize>() {
                    return self.caps.get(n)?.as_deref().map(Cow::Borrowed);
                }
                self.user.as_deref()?.get(name, self)
            }
        }
    }
}

impl Env for Fake {
    fn eval(&self, v: &ComplexValue) -> String {
        v.eval(self)
    }
    fn uri(&self) -> &str {
        &self.uri
    }
    fn args(&self) -> Option<&str> {
        self.args.as_deref()
    }
    fn set_uri(&mut self, uri: String) {
        self.uri = uri;
    }
    fn set_args(&mut self, args: Option<String>) {
        self.args = args;
    }
    fn set_captures(&mut self, caps: Vec<Option<String>>) {
        self.caps = caps;
    }
    fn set_var(&mut self, slot: usize, value: String) {
        self.user.as_mut().unwrap().set(slot, value);
    }
    fn file(&self, path: &str) -> FileFacts {
        self.files.get(path).copied().unwrap_or_default()
    }
    fn notice(&self, msg: &str) {
        self.notices.borrow_mut().push(msg.to_string());
    }
    fn var(&self, name: &str) -> String {
        self.get(name).map(|v| v.into_owned()).unwrap_or_default()
    }
    fn quoted_uri(&self) -> bool {
        self.quoted
    }
}

/// What a run gave, in words: `next`, `rematch`, `redirect 301 URL`, `return CODE TEXT`,
/// `status 500`, with ` in-if` when an `if` location took over.
fn run_words(prog: &Program, env: &mut Fake) -> String {
    let o = run(prog, env);
    let mut s = match o.action {
        Action::Next { rematch: false } => "next".to_string(),
        Action::Next { rematch: true } => "rematch".to_string(),
        Action::Redirect { code, location } => format!("redirect {code} {location}"),
        Action::Return(r) => format!(
            "return {} {}",
            r.code,
            r.value.as_ref().map(|v| v.eval(&*env)).unwrap_or_default()
        ),
        Action::Status(c) => format!("status {c}"),
    };
    if o.loc.is_some() {
        s.push_str(" in-if");
    }
    s
}

#[test]
fn certbot_redirect_in_server() {
    let s = server(
        "server_name example.com;\n\
         if ($host = example.com) { return 301 https://$host$request_uri; } # managed by Certbot\n\
         return 404;",
    );
    let p = &s.default_location.rewrite;
    let mut e = Fake::new(&s, "/a", Some("b=1"))
        .var("host", "example.com")
        .var("request_uri", "/a?b=1");
    assert_eq!(run_words(p, &mut e), "return 301 https://example.com/a?b=1");
    let mut e = Fake::new(&s, "/a", None)
        .var("host", "www.example.com")
        .var("request_uri", "/a");
    assert_eq!(run_words(p, &mut e), "return 404 ");
}

#[test]
fn every_condition_form() {
    let s = server(
        "location / {\n\
           if ($arg_a) { return 200 var; }\n\
           if ($arg_b = x) { return 200 eq; }\n\
           if ($arg_b != y) { return 200 ne; }\n\
           if ($arg_c ~ ^A(\\d+)$) { return 200 \"re $1\"; }\n\
           if ($arg_c ~* ^b(\\d+)$) { return 200 \"rei $1\"; }\n\
           if ($arg_c !~ ^z) { return 200 nre; }\n\
         }\n\
         location /neg {\n\
           if ($arg_c !~* ^Z) { return 200 nrei; }\n\
           return 200 none;\n\
         }\n\
         location /f {\n\
           if (-f $arg_p) { return 200 f; }\n\
           if (-d $arg_p) { return 200 d; }\n\
           if (-x $arg_p) { return 200 x; }\n\
           if (-e $arg_p) { return 200 e; }\n\
           if (!-e $arg_p) { return 200 not-e; }\n\
         }\n\
         location /nf {\n\
           if (!-f $arg_p) { return 200 not-f; }\n\
           if (!-d $arg_p) { return 200 not-d; }\n\
           if (!-x $arg_p) { return 200 not-x; }\n\
           return 200 all;\n\
         }",
    );
    let p = &loc(&s, "/").rewrite;
    let case = |a: &str, b: &str, c: &str| {
        let mut e = Fake::new(&s, "/", None)
            .var("arg_a", a)
            .var("arg_b", b)
            .var("arg_c", c);
        run_words(p, &mut e)
    };
    assert_eq!(case("1", "", ""), "return 200 var in-if");
    // Empty and "0" are false.
    assert_eq!(case("0", "x", ""), "return 200 eq in-if");
    assert_eq!(case("", "z", ""), "return 200 ne in-if");
    assert_eq!(case("", "y", "A12"), "return 200 re 12 in-if");
    // `~` is case-sensitive, `~*` not.
    assert_eq!(case("", "y", "a12"), "return 200 nre in-if");
    assert_eq!(case("", "y", "B7"), "return 200 rei 7 in-if");
    assert_eq!(case("", "y", "zz"), "next");
    let neg = &loc(&s, "/neg").rewrite;
    let mut e = Fake::new(&s, "/neg", None).var("arg_c", "zz");
    assert_eq!(run_words(neg, &mut e), "return 200 none");
    let mut e = Fake::new(&s, "/neg", None).var("arg_c", "q");
    assert_eq!(run_words(neg, &mut e), "return 200 nrei in-if");

    let f = &loc(&s, "/f").rewrite;
    let nf = &loc(&s, "/nf").rewrite;
    let facts = |exists, file, dir, exec| FileFacts {
        exists,
        file,
        dir,
        exec,
    };
    let with = |prog: &Program, fx: Option<FileFacts>| {
        let mut e = Fake::new(&s, "/f", None).var("arg_p", "/x");
        if let Some(fx) = fx {
            e.files.insert("/x".into(), fx);
        }
        run_words(prog, &mut e)
    };
    assert_eq!(
        with(f, Some(facts(true, true, false, false))),
        "return 200 f in-if"
    );
    assert_eq!(
        with(f, Some(facts(true, false, true, true))),
        "return 200 d in-if"
    );
    assert_eq!(
        with(f, Some(facts(true, false, false, true))),
        "return 200 x in-if"
    );
    assert_eq!(
        with(f, Some(facts(true, false, false, false))),
        "return 200 e in-if"
    );
    assert_eq!(with(f, None), "return 200 not-e in-if");
    assert_eq!(with(nf, None), "return 200 not-f in-if");
    assert_eq!(
        with(nf, Some(facts(true, true, false, false))),
        "return 200 not-d in-if"
    );
    assert_eq!(
        with(nf, Some(facts(true, false, true, false))),
        "return 200 not-f in-if"
    );
    assert_eq!(
        with(nf, Some(facts(true, true, false, true))),
        "return 200 not-d in-if"
    );
    assert_eq!(
        with(nf, Some(facts(true, false, true, true))),
        "return 200 not-f in-if"
    );
}

#[test]
fn rewrite_flags_and_arguments() {
    let s = server(
        "location / {\n\
           rewrite ^/last/(.*)$ /l/$1 last;\n\
           rewrite ^/brk/(.*)$ /b/$1 break;\n\
           rewrite ^/red/(.*)$ /r/$1 redirect;\n\
           rewrite ^/perm/(.*)$ /p/$1 permanent;\n\
           rewrite ^/url/(.*)$ https://example.net/$1;\n\
           rewrite ^/scheme/(.*)$ $scheme://example.net/$1;\n\
           rewrite ^/drop/(.*)$ /d/$1?;\n\
           rewrite ^/newargs/(.*)$ /n?x=$1;\n\
           rewrite ^/newargs2/(.*)$ /n?x=$1?;\n\
           rewrite ^/urlargs/(.*)$ https://example.net/?x=$1 permanent;\n\
           rewrite ^/plain/(.*)$ /q/$1;\n\
           rewrite ^/q/(.*)$ /qq/$1;\n\
         }",
    );
    let p = &loc(&s, "/").rewrite;
    let go = |uri: &str, args: Option<&str>| {
        let mut e = Fake::new(&s, uri, args);
        let w = run_words(p, &mut e);
        format!("{w} | {} ? {}", e.uri, e.args.unwrap_or_default())
    };
    assert_eq!(go("/last/a", Some("k=v")), "rematch | /l/a ? k=v");
    assert_eq!(go("/brk/a", None), "next | /b/a ? ");
    assert_eq!(
        go("/red/a", Some("k=v")),
        "redirect 302 /r/a?k=v | /red/a ? k=v"
    );
    assert_eq!(go("/perm/a", None), "redirect 301 /p/a | /perm/a ? ");
    assert_eq!(
        go("/url/a", Some("k=v")),
        "redirect 302 https://example.net/a?k=v | /url/a ? k=v"
    );
    assert_eq!(
        go("/scheme/a", None),
        "redirect 302 https://example.net/a | /scheme/a ? "
    );
    assert_eq!(go("/drop/a", Some("k=v")), "rematch | /d/a ? ");
    assert_eq!(go("/newargs/a", Some("k=v")), "rematch | /n ? x=a&k=v");
    assert_eq!(go("/newargs2/a", Some("k=v")), "rematch | /n ? x=a");
    assert_eq!(
        go("/urlargs/a", Some("k=v")),
        "redirect 301 https://example.net/?x=a&k=v | /urlargs/a ? k=v"
    );
    // Without a flag the next directives see the new URI; a changed URI means a new search.
    assert_eq!(go("/plain/a", None), "rematch | /qq/a ? ");
    // No match: nothing changes.
    assert_eq!(go("/other", Some("k=v")), "next | /other ? k=v");
}

#[test]
fn set_break_and_order() {
    let s = server(
        "location / {\n\
           set $a \"one-$uri\";\n\
           rewrite ^/x /y;\n\
           set $b \"$a two-$uri\";\n\
           break;\n\
           return 500;\n\
         }\n\
         location /r {\n\
           set $v 1;\n\
           return 200 \"v=$v\";\n\
           set $v 2;\n\
         }",
    );
    let p = &loc(&s, "/").rewrite;
    let mut e = Fake::new(&s, "/x", None);
    // `break` after a rewrite without flag stays in the location (no new search).
    assert_eq!(run_words(p, &mut e), "next");
    assert_eq!(e.get("b").as_deref(), Some("one-/x two-/y"));
    assert_eq!(e.uri, "/y");
    let mut e = Fake::new(&s, "/r", None);
    assert_eq!(run_words(&loc(&s, "/r").rewrite, &mut e), "return 200 v=1");
}

#[test]
fn captures_named_groups_and_misses() {
    let s = server(
        "location / {\n\
           if ($uri ~ ^/(?<user>\\w+)/(\\d+)$) { set $id $2; }\n\
           if ($uri ~ ^/nomatch(.*)) { }\n\
           return 200 \"$user $id [$1]\";\n\
         }",
    );
    let p = &loc(&s, "/").rewrite;
    let mut e = Fake::new(&s, "/bob/42", None);
    // The second regex did not match: nginx empties the captures, named groups stay set.
    assert_eq!(run_words(p, &mut e), "return 200 bob 42 [] in-if");
}

#[test]
fn look_around_patterns_load_and_match() {
    let s = server("location / { rewrite ^/(?!keep)(\\w+)$ /other/$1 last; }");
    let p = &loc(&s, "/").rewrite;
    let mut e = Fake::new(&s, "/abc", None);
    assert_eq!(run_words(p, &mut e), "rematch");
    assert_eq!(e.uri, "/other/abc");
    let mut e = Fake::new(&s, "/keep", None);
    assert_eq!(run_words(p, &mut e), "next");
}

#[test]
fn empty_rewritten_uri_is_500() {
    let s = server("location / { rewrite ^ $arg_none; }");
    let mut e = Fake::new(&s, "/a", None);
    assert_eq!(run_words(&loc(&s, "/").rewrite, &mut e), "status 500");
}

#[test]
fn rewrite_log_notices() {
    let s = server("rewrite_log on; location / { rewrite ^/a(.*) /b$1; rewrite ^/z /y; }");
    let mut e = Fake::new(&s, "/ax", Some("q=1"));
    run(&loc(&s, "/").rewrite, &mut e);
    assert_eq!(
        e.notices.into_inner(),
        vec![
            "\"^/a(.*)\" matches \"/ax\"".to_string(),
            "rewritten data: \"/bx\", args: \"q=1\"".to_string(),
            "\"^/z\" does not match \"/bx\"".to_string(),
        ]
    );
}

#[test]
fn if_in_location_makes_an_implicit_location() {
    let s = server(
        "location / { root /www; add_header X-A a;\n\
           if ($arg_x) { add_header X-If yes; root /other; }\n\
         }",
    );
    let p = &loc(&s, "/").rewrite;
    let o = run(p, &mut Fake::new(&s, "/", None).var("arg_x", "1"));
    let l = o.loc.expect("if location");
    assert_eq!(l.add_header.len(), 1);
    assert_eq!(l.add_header[0].name, "X-If");
    assert!(
        matches!(&l.root, crate::conf::model::DocRoot::Root(v) if v.as_static() == Some("/other"))
    );
    let o = run(p, &mut Fake::new(&s, "/", None));
    assert!(o.loc.is_none());
}

#[test]
fn load_errors_name_the_directive() {
    assert!(
        load_err("location / { if ($arg_x) { try_files $uri =404; } }")
            .contains("\"try_files\" directive is not allowed here"),
    );
    assert!(load_err("if ($arg_x) { root /x; }").contains("\"root\" directive is not allowed here"));
    assert!(load_err("location / { if ($arg_x) { if ($arg_y) { } } }")
        .contains("\"if\" directive is not allowed here"));
    assert!(load_err("location / { if ($arg_x =) { } }").contains("invalid condition"));
    assert!(
        load_err("location / { if ($arg_x <> y) { } }").contains("unexpected \"<>\" in condition")
    );
    assert!(load_err("location / { if (-q /x) { } }").contains("invalid condition \"-q\""));
    assert!(load_err("location / { if $arg_x { } }").contains("invalid condition \"$arg_x\""));
    assert!(load_err("location / { rewrite ^ /x bogus; }").contains("invalid parameter \"bogus\""));
    assert!(load_err("location / { rewrite ^ \"\"; }").contains("empty replacement"));
    assert!(load_err("location / { rewrite ^(x /x; }").contains("invalid regex"));
    assert!(load_err("location / { set x 1; }").contains("invalid variable name \"x\""));
    assert!(load_err("location / { set $uri 1; }").contains("the duplicate \"uri\" variable"));
    assert!(load_err("location / { return 1000; }").contains("invalid return code \"1000\""));
    assert!(load_err("location / { return /rel; }").contains("invalid return code \"/rel\""));
    assert!(load_err("location / { return 200 $nope; }").contains("unknown \"nope\" variable"));
}

#[test]
fn variables_defined_later_in_the_file_load() {
    let s = server_http(
        "",
        "location / { return 200 \"$later\"; }\nlocation /s { set $later x; }",
    );
    assert!(s.vars.slots.contains_key("later"));
}

#[test]
fn map_lookups() {
    let s = server_http(
        "map $arg_h $m {\n\
           hostnames;\n\
           default d;\n\
           example.com exact;\n\
           *.example.com head;\n\
           .dot.example.com dot;\n\
           www.example.* tail;\n\
           ~^RE(?<rest>.*)$ \"re-$rest-$1\";\n\
           ~*^ci ci;\n\
           \\default escaped;\n\
         }\n\
         map $arg_h $plain { Foo bar; }
         map $arg_h $upgrade { default upgrade; '' close; }",
        "location / { return 200 $m; }",
    );
    let m = |h: &str| {
        let e = Fake::new(&s, "/", None).var("arg_h", h);
        e.get("m").unwrap().into_owned()
    };
    assert_eq!(m("example.com"), "exact");
    assert_eq!(m("EXAMPLE.COM."), "exact");
    assert_eq!(m("a.example.com"), "head");
    assert_eq!(m("dot.example.com"), "dot");
    assert_eq!(m("a.dot.example.com"), "dot");
    assert_eq!(m("www.example.org"), "tail");
    assert_eq!(m("REabc"), "re-abc-abc");
    assert_eq!(m("reabc"), "d");
    assert_eq!(m("CIx"), "ci");
    assert_eq!(m("default"), "escaped");
    assert_eq!(m("zzz"), "d");
    let e = Fake::new(&s, "/", None).var("arg_h", "foo");
    assert_eq!(e.get("plain").as_deref(), Some("bar"));
    let e = Fake::new(&s, "/", None).var("arg_h", "nope");
    assert_eq!(e.get("plain").as_deref(), Some(""));
    assert_eq!(e.get("upgrade").as_deref(), Some("upgrade"));
    // The websocket idiom: an empty source takes the `''` key.
    let e = Fake::new(&s, "/", None);
    assert_eq!(e.get("upgrade").as_deref(), Some("close"));
}

#[test]
fn map_values_are_cached_unless_volatile() {
    let s = server_http(
        "map $arg_h $cached { default $arg_h; }\nmap $arg_h $vol { volatile; default $arg_h; }",
        "location / { return 200 $cached$vol; }",
    );
    let Slot::Map(_) = s.vars.slots["cached"] else {
        panic!()
    };
    let mut e = Fake::new(&s, "/", None).var("arg_h", "one");
    assert_eq!(e.get("cached").as_deref(), Some("one"));
    assert_eq!(e.get("vol").as_deref(), Some("one"));
    e.vars.insert("arg_h".into(), "two".into());
    assert_eq!(e.get("cached").as_deref(), Some("one"));
    assert_eq!(e.get("vol").as_deref(), Some("two"));
}

#[test]
fn map_cycle_is_empty_not_a_hang() {
    let s = server_http(
        "map $b $a { default $b; }\nmap $a $b { default $a; }",
        "location / { return 200 $a; }",
    );
    let e = Fake::new(&s, "/", None);
    assert_eq!(e.get("a"), None);
}

#[test]
fn murmur_hash_is_nginx_s() {
    // nginx's split_clients.t: `$connection` 1..20 over 51.2% / 10% / * gives 12, 2, 6.
    let s = server_http(
        "split_clients $arg_h $v { 51.2% .one; 10% .two; * .three; }",
        "location / { return 200 $v; }",
    );
    let mut counts = HashMap::new();
    for n in 1..=20 {
        *counts
            .entry(split_value(&s.vars.splits[0], &n.to_string()))
            .or_insert(0) += 1;
    }
    assert_eq!(counts[".one"], 12);
    assert_eq!(counts[".two"], 2);
    assert_eq!(counts[".three"], 6);
    // The empty string hashes to 0; tails of 1, 2 and 3 bytes take their own branch.
    assert_eq!(murmur2(b""), 0);
    assert_eq!(murmur2(b"1"), 0x4934_2faf);
    assert_eq!(murmur2(b"hello"), 0xe561_29cb);
    assert_eq!(murmur2(b"abcd"), 0x2687_3021);
}

#[test]
fn split_clients_buckets() {
    let s = server_http(
        "split_clients \"$arg_h\" $v { 51.2% one; 10% two; * three; }",
        "location / { return 200 $v; }",
    );
    let split = &s.vars.splits[0];
    // nginx's bounds: 51.2% and 61.2% of 2^32 - 1.
    assert_eq!(split.parts[0].0, (5120u64 * 0xffff_ffff / 10000) as u32);
    assert_eq!(
        split.parts[1].0,
        ((5120u64 * 0xffff_ffff / 10000) + (1000u64 * 0xffff_ffff / 10000)) as u32
    );
    assert_eq!(split.parts[2].0, 0);
    for i in 0..200 {
        let src = i.to_string();
        let h = murmur2(src.as_bytes());
        let want = if h < split.parts[0].0 {
            "one"
        } else if h < split.parts[1].0 {
            "two"
        } else {
            "three"
        };
        assert_eq!(split_value(split, &src), want);
        let e = Fake::new(&s, "/", None).var("arg_h", &src);
        assert_eq!(e.get("v").as_deref(), Some(want));
    }
}

#[test]
fn redirects_unescape_as_nginx_and_never_split_headers() {
    assert_eq!(
        unescape_redirect("http%3A%2F%2Fexample.com%2F%3Ffrom"),
        "http://example.com/?from"
    );
    // CR, LF, space and "%" stay escaped; after a literal "?" nothing is decoded.
    assert_eq!(
        unescape_redirect("http://e.com%0D%0Asplit%20%25?a=%2F"),
        "http://e.com%0D%0Asplit%20%25?a=%2F"
    );
    assert_eq!(unescape_redirect("%zz%4"), "%zz%4");
    let s = server("location / { rewrite ^ $arg_r? redirect; }");
    let mut e = Fake::new(&s, "/", None).var("arg_r", "http%3A%2F%2Fexample.com%0D%0AX-A:%20b");
    assert_eq!(
        run_words(&loc(&s, "/").rewrite, &mut e),
        "redirect 302 http://example.com%0D%0AX-A:%20b"
    );
}

#[test]
fn captures_are_escaped_in_arguments_of_a_quoted_uri() {
    let mut out = String::new();
    escape_args("a b&c%d+e?é", &mut out);
    assert_eq!(out, "a%20b%26c%25d%2Be%3F%C3%A9");
    let s = server("location / { rewrite ^(.*) $1?c=$1; }");
    let mut e = Fake::new(&s, "/x%y", Some("a=b"));
    e.quoted = true;
    run(&loc(&s, "/").rewrite, &mut e);
    assert_eq!(e.uri, "/x%y");
    assert_eq!(e.args.as_deref(), Some("c=/x%25y&a=b"));
    let mut e = Fake::new(&s, "/xy", Some("a=b"));
    run(&loc(&s, "/").rewrite, &mut e);
    assert_eq!(e.args.as_deref(), Some("c=/xy&a=b"));
}

#[test]
fn valid_location_is_lost_when_the_uri_changes_and_stays() {
    let s = server(
        "location /a { rewrite ^ /x; break; }\n\
         location /b { rewrite ^ /x break; }\n\
         location /c { break; }\n\
         location /d { rewrite ^ /x last; }",
    );
    let valid = |prefix: &str| {
        let mut e = Fake::new(&s, prefix, None);
        run(&loc(&s, prefix).rewrite, &mut e).valid_location
    };
    assert!(!valid("/a"));
    assert!(!valid("/b"));
    assert!(valid("/c"));
    assert!(valid("/d"));
}

#[test]
fn regex_locations_take_pcre_only_patterns() {
    let s = server(
        "location ~ ^/(?!api)(\\w+)$ { return 200 page; }\n\
         location ~* ^/(?<kind>IMG)/\\Q*.x\\E$ { return 200 img; }",
    );
    let m = s
        .locations
        .find("/abc")
        .expect("look-ahead location matches");
    assert_eq!(m.captures, vec![Some("/abc".into()), Some("abc".into())]);
    assert!(s.locations.find("/api").is_none());
    let m = s.locations.find("/img/*.x").expect("caseless, quoted");
    assert_eq!(m.conf.rewrite.location_captures.len(), 1);
}

#[test]
fn split_clients_totals_over_100_percent_are_refused_not_overflowed() {
    let text = "events {}\nhttp {\nsplit_clients $uri $v { 40000000% a; 40000000% b; }\n}\n";
    let e = crate::conf::load_str(text, Path::new("/t.conf"), Path::new("/p")).unwrap_err();
    assert!(
        e.to_string().contains("percent total is greater than 100%"),
        "{e}"
    );
}

#[test]
fn set_args_changes_the_arguments() {
    let s = server("location / { set $args \"x=$arg_y\"; } location /e { set $args \"\"; }");
    let mut e = Fake::new(&s, "/", Some("y=2")).var("arg_y", "2");
    assert_eq!(run_words(&loc(&s, "/").rewrite, &mut e), "next");
    assert_eq!(e.args.as_deref(), Some("x=2"));
    let mut e = Fake::new(&s, "/e", Some("y=2"));
    run(&loc(&s, "/e").rewrite, &mut e);
    assert_eq!(e.args, None);
}
