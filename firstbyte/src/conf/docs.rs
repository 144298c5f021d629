//! `docs/directives.md`, rendered from the directive table so the two never disagree.
//!
//! A test regenerates the file and fails (after rewriting it) when the committed copy is stale.

use std::fmt::Write as _;

use super::table::{self, Merge, Spec, UNSUPPORTED, UNSUPPORTED_PREFIXES};

/// The directive reference as Markdown.
pub fn directives_markdown() -> String {
    let mut out = String::new();
    out.push_str("# firstbyte configuration directives\n\n");
    out.push_str(
        "Generated from `firstbyte/src/conf/table.rs` (`cargo test -p firstbyte --lib conf::docs` \
         rewrites it when stale). firstbyte reads nginx's syntax and directive names; defaults \
         are nginx's unless the description says otherwise.\n\n",
    );
    out.push_str(
        "Inheritance: *inherited* — a level that does not set it takes the enclosing level's \
         value (http → server → location → nested location); *inherited if none set* — \
         array-like: a level takes the enclosing level's list only when it has none of that \
         directive itself; *not inherited* — applies to its own block only; *server level \
         first* — a server-level `return` answers every request of the server before any \
         location's.\n\n",
    );
    out.push_str("## Directives\n\n");
    out.push_str("| Directive | Contexts | Arguments | Default | Inheritance | Description |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    let mut specs: Vec<&Spec> = table::all().collect();
    specs.sort_by_key(|s| s.name);
    for s in specs.iter().filter(|s| s.merge != Merge::Ignored) {
        let default = if s.default.is_empty() {
            "—".to_string()
        } else {
            format!("`{}`", s.default)
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            s.name,
            s.contexts_text(),
            s.args_text(),
            default,
            s.merge.describe(),
            s.doc.replace('|', "\\|"),
        );
    }
    out.push_str("\n## Accepted with a warning\n\n");
    out.push_str(
        "These mean nothing to firstbyte; each use prints one `[warn]` line saying why.\n\n",
    );
    out.push_str("| Directive | Contexts | Why |\n|---|---|---|\n");
    for s in specs.iter().filter(|s| s.merge == Merge::Ignored) {
        let _ = writeln!(out, "| `{}` | {} | {} |", s.name, s.contexts_text(), s.doc);
    }
    out.push_str("\n## Not supported yet\n\n");
    out.push_str(
        "These nginx directives are an error (`\"NAME\" directive is not supported by firstbyte \
         yet`), never silently ignored:\n\n",
    );
    // Only those firstbyte does not implement (`is_unsupported` says the same at load time).
    let mut names: Vec<&str> = UNSUPPORTED
        .iter()
        .copied()
        .filter(|n| table::find(n).is_none())
        // Those of `upstream {}` are implemented there.
        .filter(|n| !super::proxy::UPSTREAM_DIRECTIVES.contains(n))
        .collect();
    names.sort_unstable();
    let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    out.push_str(&list.join(", "));
    out.push_str(".\n\nAnd every directive whose name starts with: ");
    let list: Vec<String> = UNSUPPORTED_PREFIXES
        .iter()
        .map(|n| format!("`{n}`"))
        .collect();
    out.push_str(&list.join(", "));
    out.push_str(".\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_file_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/directives.md");
        let fresh = directives_markdown();
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != fresh {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let wrote = std::fs::write(&path, &fresh).is_ok();
            panic!(
                "{} was stale; {} — run the test again and commit the file",
                path.display(),
                if wrote {
                    "it has been regenerated"
                } else {
                    "could not rewrite it"
                }
            );
        }
        assert!(fresh.contains("| `ssl_certificate` | http, server |"));
        assert!(fresh.contains("`ssl_dhparam`"));
        assert!(fresh.contains("`proxy_`"));
    }
}
