//! Location matching: which `location` block answers a request URI, by nginx's rules.
//!
//! The parser builds a server's [`Locations`] (exact, prefix, regex and named locations, each
//! holding its own nested ones); at request time [`Locations::find`] takes the normalised URI
//! (percent-decoded, `..` resolved — the caller's job) and returns the winning
//! [`LocationConf`] with the winning regex's captures for `$1`..`$9`.
//!
//! The algorithm is nginx's `ngx_http_core_find_location`, applied level by level:
//! 1. an exact (`=`) location equal to the URI wins at once;
//! 2. else the longest matching prefix location is remembered and matching continues inside
//!    it (its nested locations, the same way); a nested exact or regex match wins;
//! 3. else, unless that prefix location was `^~`, this level's regex locations are tried in file
//!    order and the first match wins (matching then continues inside it);
//! 4. else the remembered prefix location (the deepest one) wins.
//!
//! So regexes nested in the matched prefix location are tried before the server-level ones.
//! Prefix comparison is byte-wise and case-sensitive, as nginx on Linux.

use std::sync::Arc;

use super::model::{LocationConf, Locations, PrefixLocation};

/// The location a URI matched.
#[derive(Debug, Clone)]
pub struct Matched<'a> {
    /// The winning location's settings.
    pub conf: &'a Arc<LocationConf>,
    /// Captures of the last regex location that matched on the way, by group number:
    /// `captures[0]` is the whole match (`$0`), `captures[n]` is `$n` (`None` when group `n`
    /// did not take part). Empty when no regex location matched.
    pub captures: Vec<Option<String>>,
    /// nginx's automatic redirect: the URI is a `proxy_pass` prefix location's name without
    /// its trailing slash (`/app` for `location /app/`); the answer is 301 to `URI/`.
    pub auto_redirect: bool,
}

/// How a level of matching ended (nginx's return codes of `ngx_http_core_find_location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Nothing matched at this level.
    Declined,
    /// A prefix location matched (matching may still go on at the outer level).
    Inclusive,
    /// An exact or regex location matched: final.
    Final,
    /// The URI is a proxied prefix location's name less its slash: final, redirect.
    AutoRedirect,
}

impl Locations {
    /// The location that answers `uri`, or `None` when no location matches (the server's own
    /// level then answers).
    pub fn find(&self, uri: &str) -> Option<Matched<'_>> {
        let mut conf = None;
        let mut captures = Vec::new();
        let step = self.find_in(uri, &mut conf, &mut captures);
        conf.map(|conf| Matched {
            conf,
            captures,
            auto_redirect: step == Step::AutoRedirect,
        })
    }

    /// A named location (`location @name`), looked up with or without the leading `@`.
    pub fn named(&self, name: &str) -> Option<&Arc<LocationConf>> {
        if let Some(conf) = self.named.get(name) {
            return Some(conf);
        }
        match name.strip_prefix('@') {
            Some(bare) => self.named.get(bare),
            None => self.named.get(&format!("@{name}")),
        }
    }

    /// One level of nginx's matching; `conf` and `captures` carry the current winner.
    fn find_in<'a>(
        &'a self,
        uri: &str,
        conf: &mut Option<&'a Arc<LocationConf>>,
        captures: &mut Vec<Option<String>>,
    ) -> Step {
        if let Some(exact) = self.exact.get(uri) {
            *conf = Some(exact);
            return Step::Final;
        }
        // nginx's `auto_redirect`: `/app` when `location /app/` proxies answers 301 `/app/`,
        // before any regex location is tried.
        if let Some(p) = self.prefix.iter().find(|p| {
            p.conf.proxy.is_some()
                && p.prefix.len() == uri.len() + 1
                && p.prefix.ends_with('/')
                && p.prefix.starts_with(uri)
        }) {
            *conf = Some(&p.conf);
            return Step::AutoRedirect;
        }
        let mut step = Step::Declined;
        let mut no_regex = false;
        if let Some(prefix) = self.longest_prefix(uri) {
            *conf = Some(&prefix.conf);
            no_regex = prefix.no_regex;
            // nginx keeps the nested level's answer: if nothing nested matched, the prefix
            // location stays the winner (set just above) and the level reads as declined.
            step = match prefix.conf.locations.find_in(uri, conf, captures) {
                s @ (Step::Final | Step::AutoRedirect) => return s,
                Step::Declined | Step::Inclusive => Step::Inclusive,
            };
        }
        if !no_regex {
            for location in &self.regex {
                if let Some(caps) = location.regex.capture_texts(uri) {
                    *conf = Some(&location.conf);
                    *captures = caps;
                    location.conf.locations.find_in(uri, conf, captures);
                    return Step::Final;
                }
            }
        }
        step
    }

    /// The longest prefix location that `uri` starts with. The parser keeps them longest first,
    /// but the scan does not rely on it.
    fn longest_prefix(&self, uri: &str) -> Option<&PrefixLocation> {
        self.prefix
            .iter()
            .filter(|p| uri.as_bytes().starts_with(p.prefix.as_bytes()))
            .max_by_key(|p| p.prefix.len())
    }
}

/// Test fixtures shared with the other `conf` tests: model values built by hand.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::conf::declare::defaults_conf;
    use crate::conf::directives::{compression_directives, loc_directives};
    use crate::conf::model::{
        AccessLog, BodyInFileOnly, Compression, DocRoot, Expires, GzipStatic, LocationConf,
        Locations, Pos, SizeValue, Symlinks,
    };
    use crate::conf::vars::ComplexValue;

    /// A position in a dummy config file.
    pub(crate) fn pos(line: usize) -> Pos {
        Pos {
            file: Arc::new(PathBuf::from("/etc/firstbyte/test.conf")),
            line,
        }
    }

    /// A location with nginx's defaults, named `name`, holding `locations`.
    pub(crate) fn location(name: &str, locations: Locations) -> LocationConf {
        loc_directives!(defaults_conf! LocationConf {
            guard: None,
            name: name.to_string(),
            prefix: String::new(),
            root: DocRoot::Root(ComplexValue::literal("html")),
            alias_whole: false,
            index: vec![ComplexValue::literal("index.html")],
            try_files: None,
            limit_except: None,
            rewrite: Default::default(),
            add_header: Vec::new(),
            add_trailer: Vec::new(),
            error_page: Vec::new(),
            access_log: AccessLog::Off,
            error_log: Vec::new(),
            access: Vec::new(),
            compression: compression_directives!(defaults_conf! Compression {}),
            types: Arc::new(HashMap::new()),
            proxy: None,
            fastcgi_vars: None,
            charsets: Default::default(),
            locations,
            pos: pos(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::location;
    use super::*;
    use crate::conf::model::RegexLocation;

    /// Builds a [`Locations`] from `(kind, pattern, name, nested)` entries in file order, as
    /// the parser would: kind is `=`, `^~`, `` (prefix), `~`, `~*` or `@`.
    fn locs(entries: Vec<(&str, &str, &str, Locations)>) -> Locations {
        let mut l = Locations::default();
        for (kind, pattern, name, nested) in entries {
            let conf = Arc::new(location(name, nested));
            match kind {
                "=" => {
                    l.exact.insert(pattern.to_string(), conf);
                }
                "" | "^~" => l.prefix.push(PrefixLocation {
                    prefix: pattern.to_string(),
                    no_regex: kind == "^~",
                    conf,
                }),
                "~" | "~*" => l.regex.push(RegexLocation {
                    regex: crate::conf::rewrite::regex::Regex::compile(
                        pattern,
                        kind == "~*",
                        &crate::conf::model::Pos {
                            file: Arc::new(Default::default()),
                            line: 0,
                        },
                    )
                    .expect("test regex compiles"),
                    conf,
                }),
                "@" => {
                    l.named.insert(pattern.to_string(), conf);
                }
                other => panic!("unknown kind {other}"),
            }
        }
        l.prefix.sort_by_key(|p| std::cmp::Reverse(p.prefix.len()));
        l
    }

    fn none() -> Locations {
        Locations::default()
    }

    fn name_of(l: &Locations, uri: &str) -> Option<String> {
        l.find(uri).map(|m| m.conf.name.clone())
    }

    /// The example from nginx's documentation of `location`.
    fn nginx_doc_example() -> Locations {
        locs(vec![
            ("=", "/", "A", none()),
            ("", "/", "B", none()),
            ("", "/documents/", "C", none()),
            ("^~", "/images/", "D", none()),
            ("~*", r"\.(gif|jpg|jpeg)$", "E", none()),
        ])
    }

    #[test]
    fn nginx_documented_example() {
        let l = nginx_doc_example();
        assert_eq!(name_of(&l, "/").as_deref(), Some("A"));
        assert_eq!(name_of(&l, "/index.html").as_deref(), Some("B"));
        assert_eq!(
            name_of(&l, "/documents/document.html").as_deref(),
            Some("C")
        );
        assert_eq!(name_of(&l, "/images/1.gif").as_deref(), Some("D"));
        assert_eq!(name_of(&l, "/documents/1.jpg").as_deref(), Some("E"));
        // `~*` is case-insensitive; prefixes are not.
        assert_eq!(name_of(&l, "/documents/1.JPG").as_deref(), Some("E"));
        assert_eq!(name_of(&l, "/Documents/x").as_deref(), Some("B"));
    }

    #[test]
    fn no_match_is_none() {
        let l = locs(vec![("", "/api/", "api", none()), ("=", "/x", "x", none())]);
        assert!(l.find("/other").is_none());
        assert!(l.find("/x/").is_none(), "exact needs the whole URI");
        assert!(l.find("/api").is_none(), "prefix /api/ does not match /api");
        assert_eq!(name_of(&l, "/api/v1").as_deref(), Some("api"));
    }

    #[test]
    fn longest_prefix_wins_whatever_the_order() {
        let mut l = locs(vec![
            ("", "/a/", "short", none()),
            ("", "/a/b/c/", "long", none()),
            ("", "/a/b/", "mid", none()),
        ]);
        l.prefix.reverse(); // not longest first any more
        assert_eq!(name_of(&l, "/a/b/c/d").as_deref(), Some("long"));
        assert_eq!(name_of(&l, "/a/b/x").as_deref(), Some("mid"));
        assert_eq!(name_of(&l, "/a/x").as_deref(), Some("short"));
    }

    #[test]
    fn exact_beats_a_same_named_prefix() {
        let l = locs(vec![
            ("", "/x", "prefix", none()),
            ("=", "/x", "exact", none()),
            ("~", "x", "regex", none()),
        ]);
        assert_eq!(name_of(&l, "/x").as_deref(), Some("exact"));
        assert_eq!(name_of(&l, "/xy").as_deref(), Some("regex"));
    }

    #[test]
    fn regexes_in_file_order_first_match_wins() {
        let l = locs(vec![
            ("", "/", "root", none()),
            ("~", r"\.php$", "php", none()),
            ("~", r"^/admin/", "admin", none()),
        ]);
        assert_eq!(name_of(&l, "/admin/index.php").as_deref(), Some("php"));
        assert_eq!(name_of(&l, "/admin/x").as_deref(), Some("admin"));
        assert_eq!(name_of(&l, "/x.html").as_deref(), Some("root"));
    }

    #[test]
    fn captures_of_the_winning_regex() {
        let l = locs(vec![
            ("~", r"^/users/(\d+)(/edit)?$", "user", none()),
            ("", "/", "root", none()),
        ]);
        let m = l.find("/users/42").expect("matches");
        assert_eq!(m.conf.name, "user");
        assert_eq!(
            m.captures,
            vec![Some("/users/42".to_string()), Some("42".to_string()), None]
        );
        let m = l.find("/other").expect("matches");
        assert_eq!(m.conf.name, "root");
        assert!(m.captures.is_empty());
    }

    #[test]
    fn nested_regex_is_tried_before_server_level_regex() {
        let inner = locs(vec![("~", r"\.php$", "inner-php", none())]);
        let l = locs(vec![
            ("", "/app/", "app", inner),
            ("~", r"\.(php|html)$", "outer", none()),
        ]);
        assert_eq!(name_of(&l, "/app/x.php").as_deref(), Some("inner-php"));
        // Nothing nested matches: the server-level regex still gets its turn.
        assert_eq!(name_of(&l, "/app/x.html").as_deref(), Some("outer"));
        // Nothing matches at all below the prefix: the prefix wins.
        assert_eq!(name_of(&l, "/app/x.txt").as_deref(), Some("app"));
        assert_eq!(name_of(&l, "/x.php").as_deref(), Some("outer"));
    }

    #[test]
    fn nested_prefix_and_exact() {
        let inner = locs(vec![
            ("", "/static/img/", "img", none()),
            ("=", "/static/favicon.ico", "favicon", none()),
        ]);
        let l = locs(vec![
            ("", "/static/", "static", inner),
            ("~", r"\.png$", "png", none()),
        ]);
        assert_eq!(
            name_of(&l, "/static/favicon.ico").as_deref(),
            Some("favicon")
        );
        assert_eq!(name_of(&l, "/static/img/a.gif").as_deref(), Some("img"));
        assert_eq!(name_of(&l, "/static/a.gif").as_deref(), Some("static"));
        // The deepest prefix is not `^~`-protected from the server-level regex.
        assert_eq!(name_of(&l, "/static/img/a.png").as_deref(), Some("png"));
    }

    #[test]
    fn no_regex_prefix_shields_its_subtree_from_outer_regexes() {
        let inner = locs(vec![
            ("", "/assets/fonts/", "fonts", none()),
            ("~", r"\.css$", "inner-css", none()),
        ]);
        let l = locs(vec![
            ("^~", "/assets/", "assets", inner),
            ("~", r"\.(woff|css)$", "outer", none()),
        ]);
        assert_eq!(
            name_of(&l, "/assets/fonts/a.woff").as_deref(),
            Some("fonts")
        );
        // Regexes nested inside the `^~` location still apply.
        assert_eq!(name_of(&l, "/assets/a.css").as_deref(), Some("inner-css"));
        assert_eq!(name_of(&l, "/x.woff").as_deref(), Some("outer"));
    }

    #[test]
    fn locations_nested_in_a_regex_location() {
        let inner = locs(vec![("~", r"^/img/(\w+)\.png$", "img-png", none())]);
        let l = locs(vec![("~", r"^/(img)/", "img", inner)]);
        let m = l.find("/img/logo.png").expect("matches");
        assert_eq!(m.conf.name, "img-png");
        assert_eq!(
            m.captures.get(1).cloned().flatten().as_deref(),
            Some("logo")
        );
        let m = l.find("/img/logo.gif").expect("matches");
        assert_eq!(m.conf.name, "img");
        assert_eq!(m.captures.get(1).cloned().flatten().as_deref(), Some("img"));
    }

    #[test]
    fn named_locations() {
        let l = locs(vec![("@", "fallback", "@fallback", none())]);
        assert_eq!(
            l.named("@fallback").map(|c| c.name.as_str()),
            Some("@fallback")
        );
        assert_eq!(
            l.named("fallback").map(|c| c.name.as_str()),
            Some("@fallback")
        );
        assert!(l.named("@other").is_none());
        assert!(
            l.find("/fallback").is_none(),
            "named locations never match URIs"
        );
        let l = locs(vec![("@", "@up", "@up", none())]);
        assert_eq!(l.named("@up").map(|c| c.name.as_str()), Some("@up"));
        assert_eq!(l.named("up").map(|c| c.name.as_str()), Some("@up"));
    }

    #[test]
    fn odd_uris_do_not_panic() {
        let l = nginx_doc_example();
        assert_eq!(name_of(&l, "").as_deref(), None);
        assert_eq!(name_of(&l, "/é.gif").as_deref(), Some("E"));
        assert_eq!(name_of(&l, "/images").as_deref(), Some("B"));
    }
}
