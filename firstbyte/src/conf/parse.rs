//! nginx's configuration syntax: bytes → a tree of [`Directive`]s, with `include` expanded.
//!
//! The tokenizer follows nginx's `ngx_conf_read_token` rule by rule: words end at white
//! space, `;` or `{` (except the `{` of `${var}`); `"..."` and `'...'` quote, `\"`, `\'`,
//! `\\`, `\t`, `\r`, `\n` are escapes (any other `\x` stays as written); `#` starts a comment
//! only where a word could start; a closing quote must be followed by space, `;` or `{`.
//! `include FILE|GLOB` is replaced, where it stands, by the directives of the files it names
//! (relative paths against the configuration directory, globs sorted, no match is fine), and
//! every file read is recorded. Which directives exist and where is `table`'s business.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::ConfError;
use super::model::Pos;

/// Nesting limit for blocks and includes together: deep enough for any real configuration,
/// shallow enough that a file including itself ends in an error, not a stack overflow.
pub(crate) const MAX_DEPTH: usize = 64;

/// One directive: its name, arguments (unquoted, unescaped) and block, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Directive {
    /// The first word.
    pub name: String,
    /// The other words.
    pub args: Vec<String>,
    /// Where the name was written.
    pub pos: Pos,
    /// `{ ... }`, when the directive ended with a block.
    pub block: Option<Vec<Directive>>,
}

/// How one statement ended.
enum End {
    /// `;`
    Semi,
    /// `{`
    BlockStart,
    /// `}` (with no words before it)
    BlockDone,
    /// End of the text (with no words pending)
    Eof,
}

/// A statement: its words, the line its first word is on, and how it ended.
struct Stmt {
    words: Vec<String>,
    line: usize,
    end: End,
}

/// The tokenizer over one file's bytes.
struct Lexer<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
    file: Arc<PathBuf>,
    /// The `-g` text: messages say `command line` and have no line number.
    cmdline: bool,
}

impl<'a> Lexer<'a> {
    fn pos(&self, line: usize) -> Pos {
        Pos {
            file: self.file.clone(),
            line: if self.cmdline { 0 } else { line },
        }
    }

    fn word(&self, start: usize, end: usize) -> Result<String, ConfError> {
        let raw = &self.text[start..end];
        if !raw.contains(&b'\\') {
            // Most words have no escapes: one check and one copy.
            return std::str::from_utf8(raw)
                .map(str::to_owned)
                .map_err(|_| ConfError::other("invalid UTF-8 in a word", &self.pos(self.line)));
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'\\' && i + 1 < raw.len() {
                match raw[i + 1] {
                    b'"' | b'\'' | b'\\' => {
                        out.push(raw[i + 1]);
                        i += 2;
                        continue;
                    }
                    b't' => {
                        out.push(b'\t');
                        i += 2;
                        continue;
                    }
                    b'r' => {
                        out.push(b'\r');
                        i += 2;
                        continue;
                    }
                    b'n' => {
                        out.push(b'\n');
                        i += 2;
                        continue;
                    }
                    _ => {}
                }
            }
            out.push(raw[i]);
            i += 1;
        }
        String::from_utf8(out)
            .map_err(|_| ConfError::other("invalid UTF-8 in a word", &self.pos(self.line)))
    }

    /// Reads the next statement, as `ngx_conf_read_token` does.
    fn next(&mut self) -> Result<Stmt, ConfError> {
        // Most statements are a name and one to three arguments: no regrowth for those.
        let mut words = Vec::with_capacity(4);
        let mut first_line = self.line;
        let mut last_space = true;
        let mut need_space = false;
        let mut comment = false;
        let mut quoted = false;
        let mut d_quoted = false;
        let mut s_quoted = false;
        let mut variable = false;
        let mut start = self.at;
        loop {
            let Some(&ch) = self.text.get(self.at) else {
                if !words.is_empty() || !last_space {
                    if self.cmdline {
                        return Err(ConfError::UnexpectedEndOfParameter);
                    }
                    return Err(ConfError::UnexpectedEof {
                        expecting: "\";\" or \"}\"",
                        pos: self.pos(self.line),
                    });
                }
                return Ok(Stmt {
                    words,
                    line: self.line,
                    end: End::Eof,
                });
            };
            self.at += 1;
            if ch == b'\n' {
                self.line += 1;
                if comment {
                    comment = false;
                }
            }
            if comment {
                continue;
            }
            if quoted {
                quoted = false;
                continue;
            }
            if need_space {
                match ch {
                    b' ' | b'\t' | b'\r' | b'\n' => {
                        last_space = true;
                        need_space = false;
                        continue;
                    }
                    b';' => return Ok(self.stmt(words, first_line, End::Semi)),
                    b'{' => return Ok(self.stmt(words, first_line, End::BlockStart)),
                    b')' => {
                        last_space = true;
                        need_space = false;
                    }
                    _ => {
                        return Err(ConfError::Unexpected {
                            what: char::from(ch),
                            pos: self.pos(self.line),
                        })
                    }
                }
            }
            if last_space {
                if matches!(ch, b' ' | b'\t' | b'\r' | b'\n') {
                    continue;
                }
                start = self.at - 1;
                if words.is_empty() {
                    first_line = self.line;
                }
                match ch {
                    b';' | b'{' => {
                        if words.is_empty() {
                            return Err(ConfError::Unexpected {
                                what: char::from(ch),
                                pos: self.pos(self.line),
                            });
                        }
                        let end = if ch == b'{' {
                            End::BlockStart
                        } else {
                            End::Semi
                        };
                        return Ok(self.stmt(words, first_line, end));
                    }
                    b'}' => {
                        if !words.is_empty() {
                            return Err(ConfError::Unexpected {
                                what: '}',
                                pos: self.pos(self.line),
                            });
                        }
                        return Ok(self.stmt(words, self.line, End::BlockDone));
                    }
                    b'#' => {
                        comment = true;
                        continue;
                    }
                    b'\\' => {
                        quoted = true;
                        last_space = false;
                        continue;
                    }
                    b'"' => {
                        start += 1;
                        d_quoted = true;
                        last_space = false;
                        continue;
                    }
                    b'\'' => {
                        start += 1;
                        s_quoted = true;
                        last_space = false;
                        continue;
                    }
                    b'$' => {
                        variable = true;
                        last_space = false;
                        continue;
                    }
                    _ => {
                        last_space = false;
                        continue;
                    }
                }
            }
            // Inside a word.
            if ch == b'{' && variable {
                continue;
            }
            variable = false;
            if ch == b'\\' {
                quoted = true;
                continue;
            }
            if ch == b'$' {
                variable = true;
                continue;
            }
            let mut found = false;
            if d_quoted {
                if ch == b'"' {
                    d_quoted = false;
                    need_space = true;
                    found = true;
                }
            } else if s_quoted {
                if ch == b'\'' {
                    s_quoted = false;
                    need_space = true;
                    found = true;
                }
            } else if matches!(ch, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'{') {
                last_space = true;
                found = true;
            }
            if found {
                words.push(self.word(start, self.at - 1)?);
                if ch == b';' {
                    return Ok(self.stmt(words, first_line, End::Semi));
                }
                if ch == b'{' {
                    return Ok(self.stmt(words, first_line, End::BlockStart));
                }
            }
        }
    }

    fn stmt(&self, words: Vec<String>, line: usize, end: End) -> Stmt {
        Stmt { words, line, end }
    }
}

/// Parses files and text into directive trees, expanding `include`.
pub(crate) struct Parser<'a> {
    /// Where relative `include` paths point: the main file's directory.
    pub conf_dir: &'a Path,
    /// Every file read, in order.
    pub files: &'a mut Vec<PathBuf>,
}

impl Parser<'_> {
    /// Reads and parses `path`; `from` is the `include` that named it.
    pub fn file(
        &mut self,
        path: &Path,
        from: Option<&Pos>,
        depth: usize,
    ) -> Result<Vec<Directive>, ConfError> {
        let bytes = crate::files::read_config(path, super::MAX_FILE_BYTES)
            .map_err(|e| ConfError::open(path, &e, from))?
            .0;
        self.files.push(path.to_path_buf());
        self.text(&bytes, Arc::new(path.to_path_buf()), false, depth)
    }

    /// Parses `text` as the contents of `file` (`cmdline`: the `-g` text).
    pub fn text(
        &mut self,
        text: &[u8],
        file: Arc<PathBuf>,
        cmdline: bool,
        depth: usize,
    ) -> Result<Vec<Directive>, ConfError> {
        let mut lexer = Lexer {
            text,
            at: 0,
            line: 1,
            file,
            cmdline,
        };
        self.block(&mut lexer, false, depth)
    }

    fn block(
        &mut self,
        lx: &mut Lexer<'_>,
        inside: bool,
        depth: usize,
    ) -> Result<Vec<Directive>, ConfError> {
        let mut out = Vec::new();
        loop {
            let stmt = lx.next()?;
            let pos = lx.pos(stmt.line);
            let mut words = stmt.words.into_iter();
            match stmt.end {
                End::Eof if inside => {
                    return Err(ConfError::UnexpectedEof {
                        expecting: "\"}\"",
                        pos: lx.pos(lx.line),
                    })
                }
                End::Eof => return Ok(out),
                End::BlockDone if inside => return Ok(out),
                End::BlockDone => return Err(ConfError::Unexpected { what: '}', pos }),
                End::Semi | End::BlockStart => {
                    let name = words.next().unwrap_or_default();
                    let args: Vec<String> = words.collect();
                    let is_block = matches!(stmt.end, End::BlockStart);
                    if name == "include" {
                        if is_block {
                            return Err(ConfError::NotTerminated { name, pos });
                        }
                        if args.len() != 1 {
                            return Err(ConfError::ArgCount { name, pos });
                        }
                        out.extend(self.include(&args[0], &pos, depth + 1)?);
                        continue;
                    }
                    let block = if is_block {
                        if depth + 1 > MAX_DEPTH {
                            return Err(ConfError::TooDeep {
                                limit: MAX_DEPTH,
                                pos,
                            });
                        }
                        Some(self.block(lx, true, depth + 1)?)
                    } else {
                        None
                    };
                    out.push(Directive {
                        name,
                        args,
                        pos,
                        block,
                    });
                }
            }
        }
    }

    /// The directives of the files `include ARG` names.
    fn include(&mut self, arg: &str, pos: &Pos, depth: usize) -> Result<Vec<Directive>, ConfError> {
        if depth > MAX_DEPTH {
            return Err(ConfError::TooDeep {
                limit: MAX_DEPTH,
                pos: pos.clone(),
            });
        }
        let path = self.conf_dir.join(arg);
        let mut out = Vec::new();
        if !arg.contains(['*', '?', '[']) {
            return self.file(&path, Some(pos), depth);
        }
        let pattern = path.to_string_lossy().into_owned();
        // As glob(3): `*` does not match a leading dot (editor backups, `.swp` files).
        let matched = crate::files::glob(&pattern).map_err(|e| {
            ConfError::other(format!("invalid include pattern \"{arg}\": {e}"), pos)
        })?;
        for p in matched {
            out.extend(self.file(&p, Some(pos), depth)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Directive>, ConfError> {
        let mut files = Vec::new();
        let mut p = Parser {
            conf_dir: Path::new("/nonexistent"),
            files: &mut files,
        };
        p.text(
            text.as_bytes(),
            Arc::new(PathBuf::from("/t.conf")),
            false,
            0,
        )
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(d) => panic!("expected an error, got {d:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_include_of_a_device_is_refused_where_it_is_written() {
        // Before anything is read: /dev/zero would be read to the size limit, a FIFO would
        // block the load.
        assert_eq!(
            err("events {}\nhttp {\n  include /dev/zero;\n}\n"),
            "open() \"/dev/zero\" failed (not a regular file) in /t.conf:3"
        );
    }

    #[test]
    fn blocks_words_and_lines() {
        let d = parse("a 1 2;\n# c\nb {\n  c x;\n}\n").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "a");
        assert_eq!(d[0].args, ["1", "2"]);
        assert_eq!(d[0].pos.line, 1);
        assert_eq!(d[1].pos.line, 3);
        let inner = d[1].block.as_ref().unwrap();
        assert_eq!(inner[0].name, "c");
        assert_eq!(inner[0].pos.line, 4);
    }

    #[test]
    fn quotes_and_escapes() {
        let d = parse(r#"a "x y" 'it\'s' "q\"q" "b\\s" "t\tn\n" "\d" un\;q;"#).unwrap();
        assert_eq!(
            d[0].args,
            ["x y", "it's", "q\"q", "b\\s", "t\tn\n", "\\d", "un\\;q"]
        );
        let d = parse("a \"\";").unwrap();
        assert_eq!(d[0].args, [""]);
    }

    #[test]
    fn variables_braces_and_hash_inside_words() {
        let d = parse("return 200 ${host}x#y;").unwrap();
        assert_eq!(d[0].args, ["200", "${host}x#y"]);
        let d = parse("location ~ \\.php$ { }").unwrap();
        assert_eq!(d[0].args, ["~", "\\.php$"]);
        assert_eq!(d[0].block.as_deref(), Some(&[][..]));
    }

    #[test]
    fn syntax_errors_in_nginx_words() {
        assert_eq!(
            err("a {\n b;\n"),
            "unexpected end of file, expecting \"}\" in /t.conf:3"
        );
        assert_eq!(
            err("a b"),
            "unexpected end of file, expecting \";\" or \"}\" in /t.conf:1"
        );
        assert_eq!(err("a;\n}"), "unexpected \"}\" in /t.conf:2");
        assert_eq!(err("a { b }"), "unexpected \"}\" in /t.conf:1");
        assert_eq!(err(";"), "unexpected \";\" in /t.conf:1");
        assert_eq!(err("\n{"), "unexpected \"{\" in /t.conf:2");
        assert_eq!(err("a \"b\"c;"), "unexpected \"c\" in /t.conf:1");
        assert_eq!(
            err("include a b;"),
            "invalid number of arguments in \"include\" directive in /t.conf:1"
        );
        assert_eq!(
            err("include a {}"),
            "directive \"include\" is not terminated by \";\" in /t.conf:1"
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "a {".repeat(MAX_DEPTH + 5);
        assert!(err(&text).starts_with("too deep nesting"));
    }

    #[test]
    fn command_line_text() {
        let mut files = Vec::new();
        let mut p = Parser {
            conf_dir: Path::new("/"),
            files: &mut files,
        };
        let file = Arc::new(PathBuf::from("command line"));
        let e = p.text(b"daemon off", file.clone(), true, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected end of parameter, expecting \";\" in command line"
        );
        let d = p.text(b"daemon off; pid x;", file, true, 0).unwrap();
        assert_eq!(d[1].pos.to_string(), "command line");
    }
}
