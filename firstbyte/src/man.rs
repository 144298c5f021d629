//! The manual pages, `docs/man/firstbyte.8` and `docs/man/firstbyte.conf.5`, rendered from
//! the sources they describe so they cannot drift: the options of `firstbyte(8)` from the
//! text `firstbyte -h` prints (`cli::USAGE`), `firstbyte.conf(5)` from the directive reference
//! that `conf::docs` renders from the directive table (the same Markdown as
//! `docs/directives.md`, turned into roff here). A test rewrites the files when stale.

use std::fmt::Write as _;

/// Escapes text for roff: backslashes, and a leading `.` or `'` (a control line). Characters
/// beyond ASCII become `\[uXXXX]`, which groff and mandoc read without a preprocessor.
fn roff_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c if c.is_ascii() => out.push(c),
            c => {
                let _ = write!(out, "\\[u{:04X}]", c as u32);
            }
        }
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// One line of Markdown prose in roff: `code` in bold, *emphasis* in italics, links as their
/// text, `\|` (a pipe inside a table cell) as `|`.
fn inline(md: &str) -> String {
    let md = md.replace("\\|", "|");
    let mut out = String::new();
    let mut plain = String::new();
    let mut chars = md.chars().peekable();
    let flush = |plain: &mut String, out: &mut String| {
        out.push_str(&roff_text(plain));
        plain.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let code: String = chars.by_ref().take_while(|&c| c != '`').collect();
                flush(&mut plain, &mut out);
                let _ = write!(out, "\\fB{}\\fR", roff_text(&code));
            }
            '*' if chars.peek().is_some_and(|c| c.is_alphanumeric()) => {
                let em: String = chars.by_ref().take_while(|&c| c != '*').collect();
                flush(&mut plain, &mut out);
                let _ = write!(out, "\\fI{}\\fR", roff_text(&em));
            }
            '[' => {
                let text: String = chars.by_ref().take_while(|&c| c != ']').collect();
                if chars.peek() == Some(&'(') {
                    let _: String = chars.by_ref().take_while(|&c| c != ')').collect();
                }
                plain.push_str(&text);
            }
            c => plain.push(c),
        }
    }
    flush(&mut plain, &mut out);
    out
}

/// Splits a Markdown table row into its cells (a `\|` inside a cell is not a separator).
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                if let Some(last) = out.last_mut() {
                    last.push_str("\\|");
                }
            }
            '|' => out.push(String::new()),
            c => {
                if let Some(last) = out.last_mut() {
                    last.push(c)
                }
            }
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The Markdown that `conf::docs` writes (headings, paragraphs, tables) as roff. A table row
/// becomes a tagged paragraph: the first cell as the tag, the last cell as the text, the cells
/// between as `Header: value` after it.
fn markdown_to_roff(md: &str) -> String {
    let mut out = String::new();
    let mut header: Option<Vec<String>> = None;
    for line in md.lines() {
        // The title and the note on how the Markdown file is made are not the page's.
        if line.starts_with("# ") || line.starts_with("Generated from") {
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            header = None;
            let _ = writeln!(out, ".SH {}", roff_text(&h.to_uppercase()));
            continue;
        }
        if line.trim().is_empty() {
            header = None;
            continue;
        }
        if line.starts_with('|') {
            let row = cells(line);
            if row.iter().all(|c| c.chars().all(|ch| ch == '-')) {
                continue;
            }
            let Some(h) = &header else {
                header = Some(row);
                continue;
            };
            let last = row.len().saturating_sub(1);
            let _ = writeln!(out, ".TP\n{}", inline(&row[0]));
            let _ = writeln!(out, "{}", inline(&row[last]));
            let details: Vec<String> = (1..last)
                .map(|i| {
                    let name = h.get(i).map(String::as_str).unwrap_or("");
                    format!("{name}: {}", row[i])
                })
                .collect();
            if !details.is_empty() {
                let _ = writeln!(out, ".br\n{}", inline(&(details.join("; ") + ".")));
            }
            continue;
        }
        let _ = writeln!(out, ".PP\n{}", inline(line));
    }
    out
}

fn head(name: &str, section: u8, title: &str) -> String {
    format!(
        ".\\\" Generated by firstbyte/src/man.rs (cargo test -p firstbyte --lib man); do not edit.\n\
         .TH {} {section} \"\" \"firstbyte {}\" \"{title}\"\n",
        name.to_uppercase(),
        env!("CARGO_PKG_VERSION"),
    )
}

/// `firstbyte(8)`: the synopsis and options are `firstbyte -h`'s.
pub fn firstbyte_8() -> String {
    let mut out = head("firstbyte", 8, "System Manager's Manual");
    out.push_str(".SH NAME\nfirstbyte \\- HTTPS server and reverse proxy with nginx's configuration language\n");
    // No hyphenation or justification inside option names.
    out.push_str(".SH SYNOPSIS\n.nh\n.ad l\n");
    let usage = crate::cli::USAGE;
    let (synopsis, options) = usage.split_once("\nOptions:\n").unwrap_or((usage, ""));
    let synopsis = synopsis.trim().trim_start_matches("Usage:");
    let words: Vec<&str> = synopsis.split_whitespace().collect();
    let _ = writeln!(
        out,
        "{}",
        roff_text(&words.join(" ")).replacen("firstbyte", "\\fBfirstbyte\\fR", 1)
    );
    out.push_str(".ad\n.hy\n.SH DESCRIPTION\n");
    out.push_str(
        "\\fBfirstbyte\\fR serves HTTPS, HTTP/2 and plain HTTP and proxies to upstream servers. \
         Its configuration file uses nginx's syntax and directive names (see \
         \\fBfirstbyte.conf\\fR(5)); a directive it does not support is an error naming the \
         file and line, never silently ignored.\n.PP\n\
         With no \\fB\\-c\\fR and no default configuration file, it serves a built\\-in page \
         on https://localhost:8443/ with a certificate made at start, bound to the loopback \
         addresses only.\n.PP\n\
         It runs in the foreground by default (\\fBdaemon off\\fR), which suits systemd and \
         containers. Started as root, it binds its sockets, opens its logs and writes its pid \
         file, keeps a small privileged process for reloads, and serves as the \\fBuser\\fR \
         of the configuration (by default nobody) with no capability left.\n",
    );
    out.push_str(".SH OPTIONS\n");
    for l in options.lines() {
        let Some((flags, text)) = l.split_once(" : ") else {
            continue;
        };
        let _ = writeln!(
            out,
            ".TP\n\\fB{}\\fR\n{}",
            roff_text(flags.trim()),
            roff_text(text.trim())
        );
    }
    out.push_str(
        ".SH SIGNALS\n\
         .TP\n\\fBHUP\\fR\nReload: load the configuration beside the running one; on any \
         error the old one keeps serving (\\fB\\-s reload\\fR).\n\
         .TP\n\\fBQUIT\\fR\nGraceful stop: finish the requests in flight, within \
         \\fBworker_shutdown_timeout\\fR when set (\\fB\\-s quit\\fR).\n\
         .TP\n\\fBTERM\\fR, \\fBINT\\fR\nStop at once (\\fB\\-s stop\\fR).\n\
         .TP\n\\fBUSR1\\fR\nReopen the log files (\\fB\\-s reopen\\fR).\n",
    );
    out.push_str(
        ".SH ENVIRONMENT\n.TP\n\\fBNOTIFY_SOCKET\\fR\nSet by systemd for \\fBType=notify\\fR \
         units: firstbyte sends READY=1 once it listens, RELOADING=1 and READY=1 around a \
         reload, and STOPPING=1 when it stops.\n",
    );
    let _ = write!(
        out,
        ".SH FILES\n.TP\n{}\nThe default configuration file.\n\
         .TP\n/run/firstbyte.pid\nThe process id, when started as root (\\fBpid\\fR).\n\
         .TP\n/var/log/firstbyte/\nThe packaged configuration's logs.\n",
        roff_text(crate::cli::DEFAULT_CONF)
    );
    out.push_str(
        ".SH EXIT STATUS\n0 on success; 1 when the configuration or the command line is \
         refused (the message says why, in nginx's form).\n\
         .SH SEE ALSO\n\\fBfirstbyte.conf\\fR(5), \\fBnginx\\fR(8), \\fBsystemd.service\\fR(5)\n",
    );
    out
}

/// `firstbyte.conf(5)`: the directive reference.
pub fn firstbyte_conf_5() -> String {
    let mut out = head("firstbyte.conf", 5, "File Formats Manual");
    out.push_str(".SH NAME\nfirstbyte.conf \\- firstbyte configuration file\n");
    out.push_str(".SH DESCRIPTION\n");
    let _ = writeln!(
        out,
        "{} is read at start and at each reload. Its syntax is nginx's: directives end with \
         \\fB;\\fR, blocks are in braces, \\fB#\\fR starts a comment, and \\fBinclude\\fR \
         reads other files (glob patterns allowed, relative to the configuration's directory).",
        roff_text(crate::cli::DEFAULT_CONF)
    );
    out.push_str(&markdown_to_roff(&crate::conf::docs::directives_markdown()));
    out.push_str(".SH SEE ALSO\n\\fBfirstbyte\\fR(8)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_escapes() {
        assert_eq!(roff_text(".x a\\b"), "\\&.x a\\eb");
        assert_eq!(roff_text("-t — ≥"), "\\-t \\[u2014] \\[u2265]");
        assert_eq!(
            inline("Use `ssl_buffer_size` *inherited* [docs](x.md) a\\|b"),
            "Use \\fBssl_buffer_size\\fR \\fIinherited\\fR docs a|b"
        );
        assert_eq!(cells("| `a` | b\\|c | d |"), vec!["`a`", "b\\|c", "d"]);
    }

    #[test]
    fn tables_become_tagged_paragraphs() {
        let md = "# T\n\n## Directives\n\n| Directive | Contexts | Description |\n|---|---|---|\n\
                  | `root` | http, server | Directory. |\n\nText.\n";
        assert_eq!(
            markdown_to_roff(md),
            ".SH DIRECTIVES\n.TP\n\\fBroot\\fR\nDirectory.\n.br\nContexts: http, server.\n.PP\nText.\n"
        );
    }

    /// The committed pages are what the sources render now; a stale one is rewritten (run
    /// the test again and commit it).
    #[test]
    fn man_pages_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man");
        let mut stale = Vec::new();
        for (name, fresh) in [
            ("firstbyte.8", firstbyte_8()),
            ("firstbyte.conf.5", firstbyte_conf_5()),
        ] {
            let path = dir.join(name);
            if std::fs::read_to_string(&path).unwrap_or_default() != fresh {
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(&path, &fresh);
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "{stale:?} were stale and have been regenerated: run the test again and commit them"
        );
        let eight = firstbyte_8();
        // Every option `-h` lists is in the page.
        for flag in ["\\-?,\\-h", "\\-s signal", "\\-g directives", "\\-V"] {
            assert!(eight.contains(&format!("\\fB{flag}\\fR")), "{flag}");
        }
        let five = firstbyte_conf_5();
        assert!(five.contains(".TP\n\\fBssl_certificate\\fR\n"));
        assert!(five.contains(".SH NOT SUPPORTED YET"));
    }
}
