//! The access log: what a request leaves behind for its line ([`LogOnDone`]), written once
//! the response body is sent, and the escaping of variables in a line.

use std::sync::Arc;
use std::time::Instant;

use http::HeaderMap;

use crate::conf::model::{AccessLog, LocationConf, LogEscape};
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
    pub(super) server_name: String,
    pub(super) status: u16,
    pub(super) response_headers: HeaderMap,
    pub(super) start: Instant,
    /// From the start until the response head was ready.
    pub(super) ttfb: std::time::Duration,
    pub(super) nreq: u64,
    pub(super) head_length: u64,
    pub(super) early_data: bool,
    pub(super) user: Option<Box<crate::http::rewrite::uservars::UserVars>>,
    pub(super) guard: Option<crate::http::reqvars::GuardVars>,
    pub(super) upstream: Option<crate::http::proxy::UpstreamVars>,
    /// The response head's bytes, when `$bytes_sent` counts them (an upgraded connection).
    pub(super) head_bytes: u64,
    /// Held until the line is written: a temp file lives as long (nginx's request pool).
    pub(super) request_body: Option<crate::http::proxy::RequestBody>,
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
            AccessLog::Logs(targets) if !targets.is_empty() => Some(Box::new(LogOnDone {
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
                server_name: super::server_name(&r.server).to_string(),
                status: code,
                response_headers: response_headers.clone(),
                start: r.start,
                ttfb,
                nreq: r.nreq,
                head_length: r.head_length,
                early_data: r.early_data,
                user: r.user.clone(),
                guard: r.guard.as_ref().map(|g| g.vars.clone()),
                upstream,
                head_bytes: 0,
                request_body: r.request_body.get().cloned(),
            })),
            _ => None,
        }
    }

    pub(super) fn write(&self, sent: u64) {
        let AccessLog::Logs(targets) = &self.loc.access_log else {
            return;
        };
        let vars = RequestVars {
            conn: &self.conn_facts,
            method: &self.method,
            request_uri: &self.request_uri,
            uri: &self.uri,
            args: self.args.as_deref(),
            protocol: self.protocol,
            headers: &self.headers,
            head_length: self.head_length,
            host: &self.host,
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
            captures: &[],
            user: self.user.as_deref(),
            guard: self.guard.as_ref(),
            upstream: self.upstream.as_ref(),
            limit_rate: 0,
            request_body: self.request_body.as_ref(),
        };
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
            line.push('\n');
            match t.gzip {
                Some(level) => {
                    let member = gzip_member(line.as_bytes(), level);
                    self.site.write_access_log(&t.target, &member);
                }
                None => self.site.write_access_log(&t.target, line.as_bytes()),
            }
        }
    }
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
pub fn log_escape(mode: LogEscape, v: &str, out: &mut String) {
    match mode {
        LogEscape::None => out.push_str(v),
        LogEscape::Default => {
            for b in v.bytes() {
                if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
                    out.push_str(&format!("\\x{b:02X}"));
                } else {
                    out.push(b as char);
                }
            }
        }
        LogEscape::Json => {
            for c in v.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
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
        let mut s = String::new();
        log_escape(LogEscape::Default, "a\"b\\c\x01é", &mut s);
        assert_eq!(s, "a\\x22b\\x5Cc\\x01\\xC3\\xA9");
        let mut j = String::new();
        log_escape(LogEscape::Json, "a\"\n", &mut j);
        assert_eq!(j, "a\\\"\\n");
    }
}
