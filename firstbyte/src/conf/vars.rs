//! Values with variables (`"https://$host$request_uri"`), nginx's "complex values".
//!
//! A value is parsed once at load into literal and variable parts; at request time it is
//! evaluated against anything that implements [`Vars`]. Unknown variable names are refused at
//! load, as nginx does (`unknown "foo" variable`).

use std::borrow::Cow;

/// Source of variable values at request (or handshake) time.
pub trait Vars {
    /// The value of `$name` (without the `$`), or `None` when it is not set (evaluates to "").
    fn get(&self, name: &str) -> Option<Cow<'_, str>>;

    /// The value's bytes, for a log line: `get`'s text but for values that are not text
    /// (`$binary_remote_addr`).
    fn get_bytes(&self, name: &str) -> Option<Cow<'_, [u8]>> {
        self.get(name).map(|v| match v {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        })
    }
}

/// One piece of a complex value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    /// Literal text.
    Lit(String),
    /// `$name` or `${name}`.
    Var(String),
}

/// A string with `$variables`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct ComplexValue {
    parts: Vec<Part>,
}

/// Why a value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    /// `$` followed by nothing usable, or `${` without `}`.
    #[error("invalid variable name in \"{0}\"")]
    InvalidName(String),
    /// A name firstbyte does not know.
    #[error("unknown \"{0}\" variable")]
    Unknown(String),
}

/// Variables with a fixed name.
pub const KNOWN: &[&str] = &[
    "limit_rate",
    "uri",
    "document_uri",
    "request_uri",
    "request",
    "request_method",
    "request_time",
    "request_id",
    "connection_time",
    "connections_active",
    "connections_reading",
    "connections_writing",
    "connections_waiting",
    "ttfb",
    "tcpinfo_rtt",
    "tcpinfo_rttvar",
    "tcpinfo_snd_cwnd",
    "tcpinfo_rcv_space",
    "request_length",
    "request_body",
    "request_body_file",
    "args",
    "query_string",
    "is_args",
    "request_port",
    "is_request_port",
    "host",
    "hostname",
    "scheme",
    "https",
    "server_name",
    "server_addr",
    "server_port",
    "server_protocol",
    "remote_addr",
    "remote_port",
    "remote_user",
    "realip_remote_addr",
    "realip_remote_port",
    "proxy_protocol_addr",
    "proxy_protocol_port",
    "proxy_protocol_server_addr",
    "proxy_protocol_server_port",
    "limit_req_status",
    "limit_conn_status",
    "binary_remote_addr",
    "status",
    "body_bytes_sent",
    "bytes_sent",
    "time_local",
    "time_iso8601",
    "msec",
    "date_gmt",
    "date_local",
    "pid",
    "connection",
    "connection_requests",
    "pipe",
    "content_type",
    "content_length",
    "document_root",
    "realpath_root",
    "request_filename",
    "ssl_protocol",
    "ssl_cipher",
    "ssl_curve",
    "ssl_curves",
    "ssl_ciphers",
    "ssl_server_name",
    "ssl_session_reused",
    "ssl_session_id",
    "ssl_alpn_protocol",
    "ssl_early_data",
    "ssl_client_verify",
    "ssl_client_s_dn",
    "ssl_client_i_dn",
    "ssl_client_s_dn_legacy",
    "ssl_client_i_dn_legacy",
    "ssl_client_v_start",
    "ssl_client_v_end",
    "ssl_client_v_remain",
    "ssl_client_serial",
    "ssl_client_fingerprint",
    "ssl_client_raw_cert",
    "ssl_client_escaped_cert",
    "ssl_client_cert",
    "http2",
    "http3",
    "gzip_ratio",
    "nginx_version",
    "firstbyte_version",
    "record_policy",
    "proxy_host",
    "proxy_port",
    "proxy_add_x_forwarded_for",
    "upstream_addr",
    "fastcgi_script_name",
    "fastcgi_path_info",
    "upstream_status",
    "upstream_connect_time",
    "upstream_header_time",
    "upstream_response_time",
    "upstream_response_length",
    "upstream_bytes_received",
    "upstream_bytes_sent",
    "upstream_cache_status",
];

/// Prefixes of variable families (`$http_user_agent`, `$arg_id`, ...).
pub const KNOWN_PREFIXES: &[&str] = &[
    "http_",
    "sent_http_",
    "cookie_",
    "arg_",
    "upstream_http_",
    "upstream_cookie_",
    "upstream_trailer_",
    "sent_trailer_",
];

thread_local! {
    /// Names the configuration being read defines (`set`, `map`, ...): see [`declare`].
    static DECLARED: std::cell::RefCell<std::collections::HashSet<String>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// While the guard lives, values parsed on this thread may use `names` (variables the
/// configuration being read defines somewhere, maybe further down, as nginx resolves names
/// once the whole file is read).
pub(crate) fn declare(names: Vec<String>) -> Declared {
    DECLARED.with(|d| d.borrow_mut().extend(names));
    Declared(())
}

/// Forgets the declared names when dropped.
pub(crate) struct Declared(());

impl Drop for Declared {
    fn drop(&mut self) {
        DECLARED.with(|d| d.borrow_mut().clear());
    }
}

fn known(name: &str) -> bool {
    KNOWN.contains(&name)
        || DECLARED.with(|d| d.borrow().contains(name))
        || KNOWN_PREFIXES
            .iter()
            // nginx takes the bare prefix too (`$arg_`: the argument with an empty name).
            .any(|p| name.starts_with(p))
        || name.chars().all(|c| c.is_ascii_digit()) // $1.. regex captures
        // `$proxy_protocol_tlv_NAME`: NAME one nginx resolves (refused here when not).
        || name
            .strip_prefix("proxy_protocol_tlv_")
            .is_some_and(|t| crate::net::proxy_protocol::TlvName::parse(t).is_some())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl ComplexValue {
    /// Parses `s`, refusing unknown variable names.
    pub fn parse(s: &str) -> Result<Self, VarError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('$') {
            lit.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let (name, consumed) = if let Some(inner) = after.strip_prefix('{') {
                let end = inner
                    .find('}')
                    .ok_or_else(|| VarError::InvalidName(s.to_string()))?;
                (&inner[..end], end + 2)
            } else {
                let end = after
                    .find(|c: char| !is_name_char(c))
                    .unwrap_or(after.len());
                (&after[..end], end)
            };
            if name.is_empty() || !name.chars().all(is_name_char) {
                return Err(VarError::InvalidName(s.to_string()));
            }
            if !known(name) {
                return Err(VarError::Unknown(name.to_string()));
            }
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var(name.to_string()));
            rest = &after[consumed..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Self { parts })
    }

    /// A value with no variables.
    pub fn literal(s: &str) -> Self {
        if s.is_empty() {
            return Self::default();
        }
        Self {
            parts: vec![Part::Lit(s.to_string())],
        }
    }

    /// The text when the value has no variables.
    pub fn as_static(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Lit(s)] => Some(s),
            _ => None,
        }
    }

    /// Whether the value uses `$name`.
    pub fn uses(&self, name: &str) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Var(v) if v == name))
    }

    /// The parsed parts.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Evaluates the value.
    pub fn eval(&self, vars: &dyn Vars) -> String {
        self.eval_with(vars, |s, out| out.push_str(s))
    }

    /// Evaluates a log format: each variable's text goes through `escape(mode, text, out)`, and
    /// a variable that is not set writes `missing` (nginx: `-`, nothing with `escape=none` or
    /// `escape=json`).
    pub fn eval_log<M: Copy>(
        &self,
        vars: &dyn Vars,
        mode: M,
        missing: &str,
        escape: impl Fn(M, &[u8], &mut Vec<u8>),
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.extend_from_slice(s.as_bytes()),
                Part::Var(name) => match vars.get_bytes(name) {
                    Some(v) => escape(mode, &v, &mut out),
                    None => out.extend_from_slice(missing.as_bytes()),
                },
            }
        }
        out
    }

    /// Evaluates the value, passing each variable's text through `escape` (for log formats).
    pub fn eval_with(&self, vars: &dyn Vars, mut escape: impl FnMut(&str, &mut String)) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(name) => {
                    if let Some(v) = vars.get(name) {
                        escape(&v, &mut out);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Map(HashMap<&'static str, &'static str>);
    impl Vars for Map {
        fn get(&self, name: &str) -> Option<Cow<'_, str>> {
            self.0.get(name).map(|v| Cow::Borrowed(*v))
        }
    }

    #[test]
    fn parses_and_evaluates() {
        let v = ComplexValue::parse("https://$host${request_uri}x").unwrap();
        let m = Map(HashMap::from([
            ("host", "a.example"),
            ("request_uri", "/p?q"),
        ]));
        assert_eq!(v.eval(&m), "https://a.example/p?qx");
        assert!(v.uses("host"));
        assert_eq!(v.as_static(), None);
    }

    #[test]
    fn refuses_unknown_and_invalid() {
        assert_eq!(
            ComplexValue::parse("$nope"),
            Err(VarError::Unknown("nope".into()))
        );
        assert!(matches!(
            ComplexValue::parse("a$"),
            Err(VarError::InvalidName(_))
        ));
        assert!(matches!(
            ComplexValue::parse("${host"),
            Err(VarError::InvalidName(_))
        ));
        assert!(ComplexValue::parse("$http_user_agent $arg_id $1").is_ok());
    }

    #[test]
    fn literal_is_static() {
        assert_eq!(
            ComplexValue::parse("/var/www").unwrap().as_static(),
            Some("/var/www")
        );
    }
}
