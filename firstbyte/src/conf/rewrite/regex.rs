//! nginx's regular expressions (PCRE) on two engines.
//!
//! The `regex` crate runs every pattern it can express, in linear time. PCRE patterns it
//! refuses (look-around `(?=..)`, `(?<!..)`, backreferences `\1`, atomic groups) fall back to
//! `fancy-regex`, which backtracks as PCRE does, so real configs load. A pattern neither
//! accepts is the `regex` crate's error. PCRE's `\Q...\E` literal quoting is rewritten as
//! escaped text first. Both take PCRE's `\d`, `\w`, `\s`, classes, `(?i)`,
//! named groups `(?<name>..)` and `(?P<name>..)`; differences left: `$` matches only at the very
//! end (PCRE also before a final newline, which a URI never has), and Unicode classes are
//! Unicode-aware (PCRE's are ASCII unless `(*UCP)`).

use super::super::error::ConfError;
use super::super::model::Pos;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    engine: Engine,
    /// As written (for `rewrite_log` and messages).
    pub source: String,
}

#[derive(Debug, Clone)]
enum Engine {
    Fast(regex::Regex),
    Backtracking(Box<fancy_regex::Regex>),
}

/// Capture groups of one match: `(start, end)` per group, group 0 the whole match.
pub type Spans = Vec<Option<(usize, usize)>>;

impl Regex {
    /// Compiles `re` (`caseless`: `~*`).
    pub fn compile(written: &str, caseless: bool, pos: &Pos) -> Result<Self, ConfError> {
        let quoted = unquote(written);
        let re: &str = &quoted;
        match regex::RegexBuilder::new(re)
            .case_insensitive(caseless)
            .build()
        {
            Ok(r) => Ok(Self {
                engine: Engine::Fast(r),
                source: written.to_string(),
            }),
            Err(fast_err) => match fancy_regex::Regex::new(&if caseless {
                format!("(?i){re}")
            } else {
                re.to_string()
            }) {
                Ok(r) => Ok(Self {
                    engine: Engine::Backtracking(Box::new(r)),
                    source: written.to_string(),
                }),
                Err(_) => Err(super::super::server_head::regex(re, caseless, pos)
                    .err()
                    .unwrap_or_else(|| ConfError::Regex {
                        regex: re.to_string(),
                        reason: fast_err.to_string(),
                        pos: pos.clone(),
                    })),
            },
        }
    }

    /// Whether the backtracking engine runs it (for tests).
    #[cfg(test)]
    pub fn is_backtracking(&self) -> bool {
        matches!(self.engine, Engine::Backtracking(_))
    }

    /// Names of the named groups with their group numbers.
    pub fn names(&self) -> Vec<(usize, String)> {
        let names: Vec<Option<&str>> = match &self.engine {
            Engine::Fast(r) => r.capture_names().collect(),
            Engine::Backtracking(r) => r.capture_names().collect(),
        };
        names
            .into_iter()
            .enumerate()
            .filter_map(|(i, n)| n.map(|n| (i, n.to_string())))
            .collect()
    }

    /// The groups of the first match in `text`, or None. A backtracking pattern that hits its
    /// limit counts as no match (PCRE's `PCRE_ERROR_MATCHLIMIT` makes nginx answer 500; a
    /// miss is the stricter, quieter choice here).
    pub fn captures(&self, text: &str) -> Option<Spans> {
        match &self.engine {
            Engine::Fast(r) => {
                let c = r.captures(text)?;
                Some(c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect())
            }
            Engine::Backtracking(r) => {
                let c = r.captures(text).ok()??;
                Some(
                    (0..c.len())
                        .map(|i| c.get(i).map(|m| (m.start(), m.end())))
                        .collect(),
                )
            }
        }
    }

    /// `$0`, `$1`.. of the first match in `text` (one allocation per group, none for spans).
    pub fn capture_texts(&self, text: &str) -> Option<Vec<Option<String>>> {
        match &self.engine {
            Engine::Fast(r) => Some(
                r.captures(text)?
                    .iter()
                    .map(|m| m.map(|m| m.as_str().to_string()))
                    .collect(),
            ),
            Engine::Backtracking(_) => Some(texts(text, &self.captures(text)?)),
        }
    }

    /// Whether `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        match &self.engine {
            Engine::Fast(r) => r.is_match(text),
            Engine::Backtracking(r) => r.is_match(text).unwrap_or(false),
        }
    }
}

/// PCRE's `\Q...\E` (everything between taken literally), which neither engine reads,
/// rewritten as escaped text.
pub(crate) fn unquote(re: &str) -> std::borrow::Cow<'_, str> {
    if !re.contains("\\Q") {
        return std::borrow::Cow::Borrowed(re);
    }
    let mut out = String::with_capacity(re.len() + 8);
    let mut rest = re;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.chars().next() {
            Some('Q') => {
                let lit = &after[1..];
                let (text, tail) = match lit.find("\\E") {
                    Some(e) => (&lit[..e], &lit[e + 2..]),
                    None => (lit, ""),
                };
                out.push_str(&regex::escape(text));
                rest = tail;
            }
            Some(c) => {
                out.push('\\');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
            None => {
                out.push('\\');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `$1`.. values of a match: group texts, group 0 first.
pub fn texts(text: &str, spans: &Spans) -> Vec<Option<String>> {
    spans
        .iter()
        .map(|s| s.map(|(a, b)| text[a..b].to_string()))
        .collect()
}

/// Named groups in a pattern as written (`(?<name>`, `(?P<name>`, `(?'name'`), found before
/// anything is compiled so that later values may use them.
pub fn group_names(re: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = re.as_bytes();
    let mut i = 0;
    while i + 3 < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == b'(' && b[i + 1] == b'?' {
            let start = match (b[i + 2], b.get(i + 3)) {
                (b'<', Some(c)) if *c != b'=' && *c != b'!' => i + 3,
                (b'\'', _) => i + 3,
                (b'P', Some(b'<')) => i + 4,
                _ => {
                    i += 1;
                    continue;
                }
            };
            let end = re[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(re.len(), |e| start + e);
            if end > start {
                out.push(re[start..end].to_string());
            }
            i = end;
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos() -> Pos {
        Pos {
            file: std::sync::Arc::new("t.conf".into()),
            line: 1,
        }
    }

    #[test]
    fn fast_engine_for_plain_patterns_with_captures() {
        let r = Regex::compile(r"^/(\w+)/(\d+)$", false, &pos()).unwrap();
        assert!(!r.is_backtracking());
        let s = r.captures("/abc/42").unwrap();
        assert_eq!(
            texts("/abc/42", &s),
            vec![
                Some("/abc/42".into()),
                Some("abc".into()),
                Some("42".into())
            ]
        );
        assert!(r.captures("/abc/x").is_none());
    }

    #[test]
    fn look_around_and_backreferences_fall_back() {
        let r = Regex::compile(r"^/(?!admin)(\w+)$", false, &pos()).unwrap();
        assert!(r.is_backtracking());
        assert!(r.is_match("/user"));
        assert!(!r.is_match("/admin"));
        let b = Regex::compile(r"^/(\w)\1$", false, &pos()).unwrap();
        assert!(b.is_match("/aa") && !b.is_match("/ab"));
    }

    #[test]
    fn caseless_and_errors() {
        let r = Regex::compile("^/ABC", true, &pos()).unwrap();
        assert!(r.is_match("/abc/d"));
        let r = Regex::compile("(?<=a)B", true, &pos()).unwrap();
        assert!(r.is_match("ab"));
        let e = Regex::compile("^/(unclosed", false, &pos()).unwrap_err();
        assert!(e.to_string().contains("invalid regex"), "{e}");
    }

    #[test]
    fn pcre_quoting() {
        let r = Regex::compile(r"^(?P<name>[a-z]+)\Q.example.com\E$", false, &pos()).unwrap();
        assert!(r.is_match("www.example.com"));
        assert!(!r.is_match("wwwXexampleYcom"));
        assert_eq!(r.source, r"^(?P<name>[a-z]+)\Q.example.com\E$");
        assert!(Regex::compile(r"^/a\Q+*", false, &pos())
            .unwrap()
            .is_match("/a+*"));
        assert!(Regex::compile(r"\\Q", false, &pos())
            .unwrap()
            .is_match("\\Q"));
    }

    #[test]
    fn named_groups_are_found_in_the_source() {
        assert_eq!(
            group_names(r"^/(?<user>\w+)/(?P<id>\d+)/(?'x'.)(?<=y)(?<!z)\(?<no>"),
            vec!["user", "id", "x"]
        );
        let r = Regex::compile(r"^/(?<user>\w+)$", false, &pos()).unwrap();
        assert_eq!(r.names(), vec![(1, "user".to_string())]);
    }
}
