//! The access log: what a request leaves behind for its line ([`LogOnDone`]), written once
//! the response body is sent, and the escaping of variables in a line.

use std::sync::Arc;
use std::time::Instant;

use http::HeaderMap;

use crate::conf::model::{AccessLog, DocRoot, LocationConf, LogEscape, LogTarget};
use crate::conf::vars::ComplexValue;
use crate::http::reqvars::{ConnFacts, RequestVars};

/// What the access log needs once the body is sent.
pub(super) struct LogOnDone {
    pub(super) conn_facts: ConnFacts,
    pub(super) site: Arc<crate::http::Site>,
    pub(super) shared: Arc<crate::http::site::Shared>,
    pub(super) loc: Arc<LocationConf>,
    pub(super) method: String,
    pub(super) request_uri: String,
    pub(super) uri: String,
    pub(super) args: Option<String>,
    pub(super) protocol: &'static str,
    pub(super) headers: HeaderMap,
    pub(super) host: String,
    pub(super) request_port: u16,
    pub(super) server_name: String,
    pub(super) status: u16,
    pub(super) response_headers: HeaderMap,
    pub(super) start: Instant,
    /// From the start until the response head was ready.
    pub(super) ttfb: std::time::Duration,
    pub(super) nreq: u64,
    pub(super) pipelined: bool,
    pub(super) head_length: u64,
    pub(super) early_data: bool,
    pub(super) user: Option<Box<crate::http::rewrite::uservars::UserVars>>,
    pub(super) guard: Option<crate::http::reqvars::GuardVars>,
    pub(super) upstream: Option<crate::http::proxy::UpstreamVars>,
    /// The response head's bytes, when `$bytes_sent` counts them (an upgraded connection).
    pub(super) head_bytes: u64,
    /// `$limit_rate`: the rate the response was sent at (bytes per second, 0: unlimited).
    pub(super) limit_rate: u64,
    /// Held until the line is written: a temp file lives as long (nginx's request pool).
    pub(super) request_body: Option<crate::http::proxy::RequestBody>,
    /// The request's document root, when a log path has variables: a line is written there
    /// only while the root exists (nginx tests it before it opens such a file).
    pub(super) root: Option<String>,
}

impl LogOnDone {
    /// What the access log of `loc` needs of request `r` answered with `code` (None: the
    /// location logs nothing).
    pub(super) fn of(
        r: &super::Req<'_>,
        loc: &Arc<LocationConf>,
        code: u16,
        req_headers: &HeaderMap,
        response_headers: &HeaderMap,
        ttfb: std::time::Duration,
        upstream: Option<crate::http::proxy::UpstreamVars>,
    ) -> Option<Box<LogOnDone>> {
        match &loc.access_log {
            AccessLog::Logs(targets) if !targets.is_empty() => Some(Self::snapshot(
                r,
                loc,
                code,
                (req_headers, response_headers),
                ttfb,
                upstream,
            )),
            _ => None,
        }
    }

    /// The request's variables as they stand when the response head is ready, kept for
    /// when the body is sent (the access log, `add_trailer`).
    pub(super) fn snapshot(
        r: &super::Req<'_>,
        loc: &Arc<LocationConf>,
        code: u16,
        (req_headers, response_headers): (&HeaderMap, &HeaderMap),
        ttfb: std::time::Duration,
        upstream: Option<crate::http::proxy::UpstreamVars>,
    ) -> Box<LogOnDone> {
        let logs_to_variable = matches!(&loc.access_log, AccessLog::Logs(targets)
            if targets.iter().any(|t| matches!(t.target, LogTarget::Variable(_))));
        Box::new(LogOnDone {
            root: logs_to_variable.then(|| match &r.document_root {
                Some(d) => d.clone(),
                None => match &loc.root {
                    DocRoot::Root(v) | DocRoot::Alias(v) => r.eval(v),
                },
            }),
            conn_facts: r.conn.facts().clone(),
            site: r.conn.site().clone(),
            shared: r.conn.shared().clone(),
            loc: loc.clone(),
            method: r.method.to_string(),
            request_uri: r.request_uri.to_string(),
            uri: r.uri.clone(),
            args: r.args.clone(),
            protocol: r.protocol,
            headers: req_headers.clone(),
            host: r.host.clone(),
            request_port: r.request_port,
            server_name: super::server_name(&r.server).to_string(),
            status: code,
            response_headers: response_headers.clone(),
            start: r.start,
            ttfb,
            nreq: r.nreq,
            pipelined: r.pipelined,
            head_length: r.head_length,
            early_data: r.early_data,
            user: r.user.clone(),
            guard: r.guard.as_ref().map(|g| g.vars.clone()),
            upstream,
            head_bytes: 0,
            limit_rate: r.limit_rate.unwrap_or(0),
            request_body: r.request_body.get().cloned(),
        })
    }

    /// The variables once `sent` body bytes went out.
    pub(super) fn vars(&self, sent: u64) -> RequestVars<'_> {
        RequestVars {
            conn: &self.conn_facts,
            method: &self.method,
            request_uri: &self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: &self.headers,
            head_length: self.head_length,
            host: &self.host,
            request_port: self.request_port,
            server_name: &self.server_name,
            document_root: None,
            request_filename: None,
            fastcgi: None,
            early_data: self.early_data,
            status: self.status,
            response_headers: Some(&self.response_headers),
            body_bytes_sent: sent,
            head_bytes: self.head_bytes,
            start: self.start,
            ttfb: Some(self.ttfb),
            stats: Some(&self.shared.stats),
            connection_requests: self.nreq,
            pipelined: self.pipelined,
            captures: &[],
            user: self.user.as_deref(),
            guard: self.guard.as_ref(),
            upstream: self.upstream.as_ref(),
            limit_rate: self.limit_rate,
            request_body: self.request_body.as_ref(),
        }
    }

    pub(super) fn write(&self, sent: u64) {
        let AccessLog::Logs(targets) = &self.loc.access_log else {
            return;
        };
        let vars = self.vars(sent);
        for t in targets {
            if let Some(c) = &t.condition {
                let v = c.eval(&vars);
                if v.is_empty() || v == "0" {
                    continue;
                }
            }
            // A variable with no value: `-` by default; nothing with `escape=json` or
            // `escape=none` (nginx's unescaped and JSON variable writers).
            let missing = if t.format.escape == LogEscape::Default {
                "-"
            } else {
                ""
            };
            let mut line = t
                .format
                .value
                .eval_log(&vars, t.format.escape, missing, log_escape);
            line.push(b'\n');
            if let LogTarget::Variable(path) = &t.target {
                self.write_variable(path, &vars, &line);
                continue;
            }
            match t.gzip {
                Some(level) => {
                    let member = gzip_member(&line, level);
                    self.site.write_access_log(&t.target, &member);
                }
                None => self.site.write_access_log(&t.target, &line),
            }
        }
    }

    /// Appends `line` to the file `path` names for this request, as nginx's
    /// `ngx_http_log_script_write`: only while the request's root exists, the file opened
    /// now (or kept by `open_log_file_cache`); errors go to the error log, the response is
    /// not affected. Stricter than nginx: a path with a `..` component or a NUL byte (a
    /// variable's value from the request) is refused.
    fn write_variable(&self, path: &ComplexValue, vars: &RequestVars<'_>, line: &[u8]) {
        if let Some(root) = &self.root {
            if let Err(e) = root_is_dir(root) {
                crate::fblog!(
                    Error,
                    "testing \"{root}\" existence failed ({})",
                    crate::log::OsError(&e)
                );
                return;
            }
        }
        let name = path.eval(vars);
        if !log_path_allowed(&name) {
            crate::fblog!(
                Error,
                "access_log path \"{}\" refused: it leaves its directory",
                name.escape_debug()
            );
            return;
        }
        let name = std::path::Path::new(&name);
        let r = match &self.loc.open_log_file_cache {
            Some(cache) => cache.write(name, line, crate::log::open_append),
            None => crate::log::open_append(name).and_then(|f| {
                use std::io::Write;
                (&f).write_all(line)
            }),
        };
        if let Err(e) = r {
            crate::fblog!(
                Crit,
                "open() \"{}\" failed ({})",
                name.display(),
                crate::log::OsError(&e)
            );
        }
    }
}

/// Ok when `root` is a directory.
fn root_is_dir(root: &str) -> std::io::Result<()> {
    let m = std::fs::metadata(root)?;
    if m.is_dir() {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::ENOTDIR))
    }
}

/// Whether an evaluated log path may be opened: no NUL byte, no `..` component.
fn log_path_allowed(path: &str) -> bool {
    !path.contains('\0') && !path.split('/').any(|c| c == "..")
}

/// `bytes` as one gzip member (`access_log ... gzip`): members written one after another
/// make one gzip file.
fn gzip_member(bytes: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 2 + 32),
        flate2::Compression::new(level),
    );
    // Writes to a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

/// Escapes a variable's value for a log line (`escape=default|json|none`).
pub fn log_escape(mode: LogEscape, v: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    match mode {
        LogEscape::None => out.extend_from_slice(v),
        LogEscape::Default => {
            for &b in v {
                if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
                    out.extend_from_slice(&[
                        b'\\',
                        b'x',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]);
                } else {
                    out.push(b);
                }
            }
        }
        LogEscape::Json => {
            for &b in v {
                match b {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    // nginx's `\u001B`.
                    b if b < 0x20 => out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]),
                    b => out.push(b),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_members_make_one_stream() {
        use std::io::Read;
        let mut file = gzip_member(b"/a:200\n", 1);
        file.extend(gzip_member(b"/b:404\n", 9));
        let mut out = String::new();
        flate2::read::MultiGzDecoder::new(&file[..])
            .read_to_string(&mut out)
            .expect("gzip");
        assert_eq!(out, "/a:200\n/b:404\n");
    }

    #[test]
    fn default_log_escape() {
        let mut s = Vec::new();
        log_escape(LogEscape::Default, "a\"b\\c\x01é".as_bytes(), &mut s);
        assert_eq!(s, b"a\\x22b\\x5Cc\\x01\\xC3\\xA9");
        let mut j = Vec::new();
        log_escape(LogEscape::Json, "a\"\n\x1Bé".as_bytes(), &mut j);
        assert_eq!(j, "a\\\"\\n\\u001Bé".as_bytes());
        let mut b = Vec::new();
        log_escape(LogEscape::Default, &[127, 0, 0, 1], &mut b);
        assert_eq!(b, b"\\x7F\\x00\\x00\\x01");
    }

    #[test]
    fn variable_log_paths_stay_in_their_directory() {
        assert!(log_path_allowed("/var/log/x_filename"));
        assert!(log_path_allowed("/var/log/x_..a"));
        assert!(!log_path_allowed("/var/log/x_/../../etc/passwd"));
        assert!(!log_path_allowed("/var/log/.."));
        assert!(!log_path_allowed("/var/log/a\0b"));
    }
}
