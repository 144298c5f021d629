//! The request as the rewrite interpreter's [`Env`]: its variables, URI, arguments, captures
//! and `set` values; file tests through `stat` (or, under `disable_symlinks`, the checked
//! walk); `rewrite_log` notices to the error log.

use std::borrow::Cow;
use std::path::Path;

use super::{server_name, Req};
use crate::conf::model::DocRoot;
use crate::conf::vars::{ComplexValue, Vars};
use crate::http::open_file::{self, SymlinkCheck};
use crate::http::rewrite::{Env, FileFacts};
use crate::http::static_files;

/// The request's variables with `$document_root` and `$request_filename` computed.
struct Files<'a> {
    root: &'a str,
    file: Option<&'a str>,
    inner: &'a dyn Vars,
}

impl Vars for Files<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        match name {
            "document_root" | "realpath_root" => Some(Cow::Borrowed(self.root)),
            "request_filename" => self.file.map(Cow::Borrowed),
            _ => self.inner.get(name),
        }
    }
}

impl Env for Req<'_> {
    fn eval(&self, v: &ComplexValue) -> String {
        // `$document_root` and `$request_filename` before the content phase: from the
        // location's root and the URI as it is now, as nginx computes them when read.
        if let Some(loc) = &self.rewrite_loc {
            if v.uses("request_filename") || v.uses("document_root") {
                let root = match &loc.root {
                    DocRoot::Root(r) | DocRoot::Alias(r) => Req::eval(self, r),
                };
                let file = static_files::map_path(loc, &self.uri, &root)
                    .map(|p| p.to_string_lossy().into_owned());
                let vars = self.vars();
                return v.eval(&Files {
                    root: &root,
                    file: file.as_deref(),
                    inner: &vars,
                });
            }
        }
        Req::eval(self, v)
    }

    fn uri(&self) -> &str {
        &self.uri
    }

    fn args(&self) -> Option<&str> {
        self.args.as_deref()
    }

    fn set_uri(&mut self, uri: String) {
        self.uri = uri;
        self.internal = true;
    }

    fn set_args(&mut self, args: Option<String>) {
        self.args = args;
    }

    fn set_limit_rate(&mut self, size: &str) {
        match crate::conf::units_size(size) {
            Some(n) => self.limit_rate = Some(n),
            None => crate::fblog!(Error, "invalid $limit_rate \"{size}\""),
        }
    }

    fn set_captures(&mut self, caps: Vec<Option<String>>) {
        self.captures = caps;
    }

    fn set_var(&mut self, slot: usize, value: String) {
        if let Some(u) = self.user.as_mut() {
            u.set(slot, value);
        }
    }

    fn file(&self, path: &str) -> FileFacts {
        use std::os::unix::fs::PermissionsExt;
        // `disable_symlinks` of the level whose directives run (the server's before a
        // location is chosen), as nginx's script file code.
        let loc = self
            .rewrite_loc
            .as_ref()
            .unwrap_or(&self.server.default_location);
        let from = loc
            .disable_symlinks
            .from
            .as_ref()
            .map(|v| Env::eval(self, v));
        let path = Path::new(path);
        match open_file::stat_path(path, SymlinkCheck::at(loc, from.as_deref(), path)) {
            Ok(m) => FileFacts {
                exists: true,
                file: m.is_file(),
                dir: m.is_dir(),
                exec: m.permissions().mode() & 0o111 != 0,
            },
            Err(_) => FileFacts::default(),
        }
    }

    fn var(&self, name: &str) -> String {
        self.vars()
            .get(name)
            .map(|v| v.into_owned())
            .unwrap_or_default()
    }

    fn quoted_uri(&self) -> bool {
        let path = self.request_uri.split('?').next().unwrap_or("");
        path.contains(['%', '+'])
    }

    fn notice(&self, msg: &str) {
        crate::fblog!(
            Notice,
            "{msg}, client: {}, server: {}, request: \"{} {} {}\"",
            self.conn.client_ip(),
            server_name(&self.server),
            self.method,
            self.request_uri,
            self.protocol
        );
    }
}
