//! The configuration loader on any text: tokenizer, `include`, the directive table, the
//! handlers and the http → server → location merge (`conf::load_str`). It must answer every
//! input with a `Config` or a `ConfError`, never a panic, and its message must format.
//!
//! The configuration directory is a private temporary directory holding a few small files,
//! so `include` is exercised (found, missing, globbed, including itself) without reading the
//! rest of the machine: an input that says `include` and has a `/` anywhere is skipped, since
//! only a `/` lets a path leave that directory (absolute, or through `..`), and `include
//! /dev/zero` would read forever. No other directive reads a file while loading.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use firstbyte::fuzzing::load_str;
use libfuzzer_sys::fuzz_target;

/// Files the inputs may `include` (relative names only; none of them globs).
const FILES: &[(&str, &str)] = &[
    (
        "mime.types",
        "types { text/html html htm; image/png png; }\n",
    ),
    (
        "server.conf",
        "server { listen 8443; root html; location / { index index.html; } }\n",
    ),
    ("self.conf", "include self.conf;\n"),
    ("broken.conf", "worker_processes\n"),
];

fn conf_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("firstbyte-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("html")).expect("temporary directory");
        for (name, text) in FILES {
            std::fs::write(dir.join(name), text).expect("temporary file");
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if text.contains("include") && text.contains('/') {
        return;
    }
    let dir = conf_dir();
    match load_str(&text, &dir.join("fuzz.conf"), dir) {
        Ok(config) => {
            let _ = format!("{config:?}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
        }
    }
});
