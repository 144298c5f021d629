//! The loaded configuration: plain data the server runs on.
//!
//! `conf::load` turns a config file into a [`Config`]; every value here is already merged
//! (http → server → location, nginx's inheritance) and validated, so the runtime reads
//! fields and never re-checks them. Nothing here touches a socket or a certificate file:
//! TLS material is named ([`TlsConf`]) and turned into rustls objects by `tls`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::declare::{conf_struct, defaults_conf};
use super::directives::{
    compression_directives, fastcgi_directives, loc_directives, main_directives,
    proxy_buffer_directives, proxy_cache_directives, proxy_directives, proxy_ssl_directives,
    srv_directives, tls_directives,
};
use super::vars::ComplexValue;

/// Where a directive was written: for messages in nginx's form `in FILE:LINE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pos {
    /// The file that holds the directive (after `include` expansion).
    pub file: Arc<PathBuf>,
    /// 1-based line of the directive's name; 0 for text with no lines (the `-g` command line,
    /// whose `file` is `command line`): it then displays as the file alone, as nginx's `in command line`.
    pub line: usize,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            return write!(f, "{}", self.file.display());
        }
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A whole configuration, as one load produced it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The main config file (absolute).
    pub path: PathBuf,
    /// `-p PREFIX`: relative paths in the config resolve against it.
    pub prefix: PathBuf,
    /// Main-context settings.
    pub main: MainConf,
    /// The `http {}` block, if the file has one.
    pub http: Option<HttpConf>,
    /// `[warn]` lines the load produced, in nginx's words without the level and the `firstbyte: `
    /// prefix, e.g. `"ssl_dhparam" is ignored: ... in /etc/nginx/nginx.conf:12`.
    pub warnings: Vec<String>,
    /// Every file the load read, main file first, in order (for `-T`).
    pub files: Vec<PathBuf>,
}

main_directives! { conf_struct!
/// Main (top-level) and `events {}` settings.
#[derive(Debug, Clone)]
pub struct MainConf {
    /// `error_log FILE [LEVEL]`, possibly several. Empty: stderr at `error`.
    pub error_log: Vec<ErrorLog>,
}
}

/// `user NAME [GROUP]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// Group name; nginx's default is the user's name.
    pub group: Option<String>,
}

/// `worker_processes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerProcesses {
    /// `auto`: one per available CPU.
    Auto,
    /// A fixed count (≥ 1).
    Count(usize),
}

impl WorkerProcesses {
    /// The number of event-loop threads this means on this machine.
    pub fn threads(self) -> usize {
        match self {
            WorkerProcesses::Count(n) => n.max(1),
            WorkerProcesses::Auto => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

impl MainConf {
    /// Client connections served at once: `worker_connections` per event-loop thread, as
    /// nginx's limit is per worker process.
    pub fn max_connections(&self) -> u64 {
        u64::from(self.worker_connections) * self.worker_processes.threads() as u64
    }
}

/// Severity of a log line, nginx's levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warn`
    Warn,
    /// `error` (nginx's default for error_log)
    Error,
    /// `crit`
    Crit,
    /// `alert`
    Alert,
    /// `emerg`
    Emerg,
}

/// `error_log FILE [LEVEL]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorLog {
    /// `stderr` or a file path (absolute after prefix resolution).
    pub target: LogTarget,
    /// Lowest level written.
    pub level: LogLevel,
}

/// Where a log goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogTarget {
    /// The process's standard error.
    Stderr,
    /// The process's standard output: the default access log in the foreground.
    Stdout,
    /// A file, opened for append.
    File(PathBuf),
    /// An `access_log` path with variables (absolute after prefix resolution): evaluated
    /// per request, the file opened then (or kept by `open_log_file_cache`).
    Variable(crate::conf::vars::ComplexValue),
}

/// The `http {}` block.
#[derive(Debug, Clone)]
pub struct HttpConf {
    /// Server blocks in file order (the first on an address is its default unless one says `default_server`).
    pub servers: Vec<Arc<ServerConf>>,
}

srv_directives! { conf_struct!
/// One `server {}` block, merged.
#[derive(Debug)]
pub struct ServerConf {
    /// Where the block starts.
    pub pos: Pos,
    /// `listen` directives; nginx's default when none: `*:80` (`*:8000` when not root).
    pub listen: Vec<Listen>,
    /// `server_name`: the first one is `$server_name`. Default `""`.
    pub server_names: Vec<ServerName>,
    /// Its regex names with named groups, in order.
    pub name_captures: Vec<NameCaptures>,
    /// `$server_name`: the first name as written (`~^re$`, `*.example.com`, `www.example.*`),
    /// lower-cased unless a regex. Default `""`.
    pub server_name: String,
    /// TLS settings merged from http and server, when any `listen ... ssl` names this server.
    pub tls: Option<TlsConf>,
    /// `Alt-Svc: h3=":PORT"; ma=86400` when the block also listens with `quic`: sent on its
    /// TLS-over-TCP responses (unless the response has an `Alt-Svc` of its own) so browsers
    /// move to HTTP/3. nginx leaves this to `add_header`.
    pub alt_svc: Option<http::HeaderValue>,
    /// Socket options for connections of this server.
    pub socket: SocketConf,
    /// TLS record sizing (`ssl_buffer_size`, `ssl_dyn_rec_*`; http, server).
    pub record: crate::record::RecordSettings,
    /// `http2 on|off` (http, server). Default off, as nginx; `listen ... http2` also turns it on.
    pub http2: bool,
    /// The locations of this server, ready to match.
    pub locations: Locations,
    /// Server-level settings: used when no location matches, and for connection-wide values
    /// (keepalive, tcp_nodelay) before a request is routed.
    pub default_location: Arc<LocationConf>,
    /// The variables of `set`, `map` and `split_clients` (shared by all servers).
    pub vars: Arc<super::rewrite::VarDefs>,
}
}

/// `listen ADDR[:PORT] [ssl] [http2] [default_server] [reuseport] [deferred] [backlog=N] [fastopen=N] [ipv6only=on|off]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// Where to bind. `listen 80` is `0.0.0.0:80`; `listen [::]:80` is `[::]:80`. Unused
    /// (`0.0.0.0:0`) when [`Listen::unix`] is set.
    pub addr: SocketAddr,
    /// `listen unix:PATH`: the UNIX-domain socket's path, instead of `addr`.
    pub unix: Option<Arc<str>>,
    /// `ssl`: connections on this socket speak TLS.
    pub ssl: bool,
    /// `http2` (old style parameter): allow h2 here.
    pub http2: bool,
    /// `default_server` (or the old `default`).
    pub default_server: bool,
    /// `reuseport`: `SO_REUSEPORT`.
    pub reuseport: bool,
    /// `backlog=N`. Default 511, as nginx on Linux.
    pub backlog: i32,
    /// `fastopen=N`: `TCP_FASTOPEN` queue length.
    pub fastopen: Option<u32>,
    /// `deferred`: `TCP_DEFER_ACCEPT`, a connection is accepted once its first bytes (the
    /// ClientHello) have arrived.
    pub deferred: bool,
    /// `ipv6only=on|off` (IPv6 addresses only). Default on.
    pub ipv6only: bool,
    /// `quic`: a UDP socket serving HTTP/3 (TLS 1.3 inside QUIC) instead of a TCP one.
    pub quic: bool,
    /// `proxy_protocol`: every connection starts with a PROXY protocol header.
    pub proxy_protocol: bool,
    /// `bind`: a socket of its own even under a wildcard address.
    pub bind: bool,
    /// `sndbuf=`, `rcvbuf=`, `so_keepalive=`.
    pub tuning: crate::net::SocketTuning,
    /// Where the directive was written.
    pub pos: Pos,
}

/// A listening address: IP address and port, or (with a placeholder address) a UNIX-domain path.
pub type ListenKey = (SocketAddr, Option<Arc<str>>);

/// `backlog=` when not given: 511, nginx's `NGX_LISTEN_BACKLOG` on Linux. A listen whose
/// backlog differs is taken to have set it (nginx's "listen options").
pub const DEFAULT_BACKLOG: i32 = 511;

impl Listen {
    /// The address as nginx writes it in messages: `127.0.0.1:80`, `unix:/path`.
    pub fn shown(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{p}"),
            None => self.addr.to_string(),
        }
    }

    /// What tells one listening address from another: the IP address and port, or the path.
    pub fn key(&self) -> ListenKey {
        (self.addr, self.unix.clone())
    }

    /// `listen ADDR` with no parameter: nginx's defaults for all of them.
    pub(crate) fn new(addr: SocketAddr, pos: Pos) -> Listen {
        Listen {
            addr,
            unix: None,
            ssl: false,
            http2: false,
            default_server: false,
            reuseport: false,
            backlog: DEFAULT_BACKLOG,
            fastopen: None,
            deferred: false,
            ipv6only: true,
            quic: false,
            proxy_protocol: false,
            bind: false,
            tuning: crate::net::SocketTuning::default(),
            pos,
        }
    }
}

/// One `server_name` entry.
#[derive(Debug, Clone)]
pub enum ServerName {
    /// `example.com` (lower-cased). `""` matches requests without a Host.
    Exact(String),
    /// `*.example.com` or `.example.com` (stored as `.example.com`); `.example.com` also adds an `Exact`.
    LeadingWildcard(String),
    /// `www.example.*` (stored as `www.example.`).
    TrailingWildcard(String),
    /// `~^www\d+\.example\.com$`.
    Regex(regex::Regex),
}

/// Per-connection socket settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketConf {
    /// `tcp_notsent_lowat SIZE` (http, server): `TCP_NOTSENT_LOWAT` in bytes. Default unset (kernel's sysctl).
    pub notsent_lowat: Option<u32>,
    /// `tcp_congestion NAME` (http, server): per-socket `TCP_CONGESTION`. Default unset (kernel's sysctl).
    pub congestion: Option<String>,
}

/// The locations of a server, in nginx's matching structure.
#[derive(Debug, Default)]
pub struct Locations {
    /// `location = /x`.
    pub exact: HashMap<String, Arc<LocationConf>>,
    /// `location /x` and `location ^~ /x`, longest first.
    pub prefix: Vec<PrefixLocation>,
    /// `location ~ re` and `location ~* re`, in file order.
    pub regex: Vec<RegexLocation>,
    /// `location @name`.
    pub named: HashMap<String, Arc<LocationConf>>,
}

/// A prefix location.
#[derive(Debug)]
pub struct PrefixLocation {
    /// The prefix.
    pub prefix: String,
    /// `^~`: a match here skips the regex locations.
    pub no_regex: bool,
    /// The location's settings (nested locations inside it are in its own `locations`).
    pub conf: Arc<LocationConf>,
}

/// A regex location.
#[derive(Debug)]
pub struct RegexLocation {
    /// The compiled expression (`~*` compiled case-insensitive; PCRE-only patterns such as
    /// look-around run on the backtracking engine, see `conf::rewrite::regex`).
    pub regex: super::rewrite::regex::Regex,
    /// The location's settings.
    pub conf: Arc<LocationConf>,
}

/// Where files come from.
#[derive(Debug, Clone)]
pub enum DocRoot {
    /// `root PATH`: file = PATH + URI. Default `html` under the prefix.
    Root(ComplexValue),
    /// `alias PATH`: file = PATH + (URI without the location's prefix).
    Alias(ComplexValue),
}

/// `try_files FILE ... FALLBACK`.
#[derive(Debug, Clone)]
pub struct TryFiles {
    /// Candidates; one ending in `/` means "a directory".
    pub files: Vec<ComplexValue>,
    /// What happens when none exists.
    pub fallback: TryFallback,
}

/// The last argument of `try_files`.
#[derive(Debug, Clone)]
pub enum TryFallback {
    /// `=404`: respond with this code.
    Code(u16),
    /// `/index.php?$args`: internal redirect to this URI.
    Uri(ComplexValue),
    /// `@name`: a named location.
    Named(String),
}

/// `return CODE [TEXT|URL]` or `return URL`.
#[derive(Debug, Clone)]
pub struct Return {
    /// Status code; `return URL` means 302.
    pub code: u16,
    /// Body text (for non-redirects) or `Location` (301, 302, 303, 307, 308).
    pub value: Option<ComplexValue>,
}

/// A size directive's value: fixed at load, or with variables (`limit_rate $rate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeValue {
    Fixed(u64),
    Var(ComplexValue),
}

impl SizeValue {
    /// The size for a request: `eval` gives the text of a value with variables; `Err` holds
    /// a text that is no size (nginx then uses 0 and logs it).
    pub fn get(&self, eval: impl FnOnce(&ComplexValue) -> String) -> Result<u64, String> {
        match self {
            SizeValue::Fixed(n) => Ok(*n),
            SizeValue::Var(v) => {
                let s = eval(v);
                super::units::size(&s).ok_or(s)
            }
        }
    }
}

/// A `server_name` regex with named groups: (group number, variable slot) for each.
#[derive(Debug, Clone)]
pub struct NameCaptures {
    pub regex: regex::Regex,
    pub slots: Vec<(usize, usize)>,
}

/// `limit_except METHOD ... { ... }`, merged.
#[derive(Debug)]
pub struct LimitExcept {
    /// The methods let through (`HEAD` with `GET`); any other method gets `conf`.
    pub methods: Vec<http::Method>,
    /// The block's location, inheriting from the enclosing one.
    pub conf: Arc<LocationConf>,
}

impl LocationConf {
    /// The implicit locations inside this one: its `limit_except` block and its `if` blocks
    /// (for what is set up per location at load: proxy routes, log files).
    pub fn implicit(&self) -> Vec<&LocationConf> {
        fn ifs<'a>(s: &'a [super::rewrite::Stmt], out: &mut Vec<&'a LocationConf>) {
            for st in s {
                if let super::rewrite::Stmt::If { body, loc, .. } = st {
                    if let Some(l) = loc {
                        out.push(l);
                    }
                    ifs(body, out);
                }
            }
        }
        let mut out = Vec::new();
        if let Some(le) = &self.limit_except {
            out.push(&*le.conf);
        }
        ifs(&self.rewrite.stmts, &mut out);
        out
    }
}

impl LimitExcept {
    /// Whether `m` gets the block's settings: every method not listed, exactly as the
    /// request named it (`get` is not `GET`).
    pub fn limits(&self, m: &http::Method) -> bool {
        !self.methods.contains(m)
    }
}

/// `add_header NAME VALUE [always]`.
#[derive(Debug, Clone)]
pub struct AddHeader {
    /// Header name as written.
    pub name: String,
    /// Value, with variables.
    pub value: ComplexValue,
    /// `always`: also on error responses (otherwise only on 200, 201, 204, 206, 301, 302, 303, 304, 307, 308).
    pub always: bool,
}

/// `error_page CODE ... [=[RESPONSE]] URI`.
#[derive(Debug, Clone)]
pub struct ErrorPage {
    /// The status codes it applies to.
    pub codes: Vec<u16>,
    /// `=` alone: the code of the page's own response (`Some(None)`); `=404`: that code; absent: keep the original code.
    pub response: Option<Option<u16>>,
    /// The page's URI (or `@name`, or an absolute URL for a redirect).
    pub uri: ComplexValue,
}

/// `access_log`.
#[derive(Debug, Clone)]
pub enum AccessLog {
    /// `access_log off`.
    Off,
    /// One or more logs. Default: `combined` to stdout, or with `daemon on` to
    /// `logs/access.log` under the prefix.
    Logs(Vec<AccessLogTarget>),
}

/// One `access_log PATH [FORMAT] [buffer=SIZE] [flush=TIME]`.
#[derive(Debug, Clone)]
pub struct AccessLogTarget {
    /// The file (absolute) or `stderr`.
    pub target: LogTarget,
    /// The format (`combined` when not named).
    pub format: Arc<LogFormat>,
    /// `buffer=SIZE`: bytes gathered before a write. None: write each line.
    pub buffer: Option<usize>,
    /// `flush=TIME`: the longest a buffered line waits.
    pub flush: Option<Duration>,
    /// `if=CONDITION`: the line is written only when it evaluates to neither "" nor "0".
    pub condition: Option<crate::conf::vars::ComplexValue>,
    /// `gzip[=LEVEL]`: each write is a gzip member of that level (1–9), so the file is one
    /// gzip stream (`zcat` reads it whole).
    pub gzip: Option<u32>,
}

/// `log_format NAME [escape=default|json|none] STRING ...`.
#[derive(Debug, Clone)]
pub struct LogFormat {
    /// Its name.
    pub name: String,
    /// How variable values are escaped.
    pub escape: LogEscape,
    /// The line, strings joined.
    pub value: ComplexValue,
}

/// `log_format ... escape=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEscape {
    /// `"`, `\` and bytes < 32 or ≥ 127 as `\xHH`.
    Default,
    /// JSON string escaping.
    Json,
    /// No escaping.
    None,
}

/// `allow`/`deny`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// `allow` (true) or `deny`.
    pub allow: bool,
    /// The addresses matched.
    pub net: Net,
}

/// An address set in `allow`/`deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// `all`.
    All,
    /// `ADDR[/BITS]`.
    Cidr(std::net::IpAddr, u8),
    /// `unix:`: every client of a UNIX-domain socket.
    Unix,
}

/// `gzip_proxied`: which responses to requests that came through a proxy (`Via`) may be
/// compressed, as nginx's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GzipProxied(pub u16);

impl GzipProxied {
    /// `off`: none (nginx's default).
    pub const OFF: u16 = 1 << 0;
    /// `expired`: `Expires` at or before `Date`.
    pub const EXPIRED: u16 = 1 << 1;
    /// `no-cache` in `Cache-Control`.
    pub const NO_CACHE: u16 = 1 << 2;
    /// `no-store` in `Cache-Control`.
    pub const NO_STORE: u16 = 1 << 3;
    /// `private` in `Cache-Control`.
    pub const PRIVATE: u16 = 1 << 4;
    /// No `Last-Modified`.
    pub const NO_LAST_MODIFIED: u16 = 1 << 5;
    /// No `ETag`.
    pub const NO_ETAG: u16 = 1 << 6;
    /// The request has `Authorization`.
    pub const AUTH: u16 = 1 << 7;
    /// All.
    pub const ANY: u16 = 1 << 8;

    /// Whether `flag` is set.
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

/// `gzip_disable`: user agents whose requests get no compression (regexes, case-insensitive,
/// and nginx's `msie6` mask).
#[derive(Debug, Clone, Default)]
pub struct GzipDisable {
    /// `msie6`: MSIE 4–6 without SV1.
    pub msie6: bool,
    /// The expressions.
    pub patterns: Vec<super::rewrite::regex::Regex>,
}

impl PartialEq for GzipDisable {
    fn eq(&self, other: &Self) -> bool {
        self.msie6 == other.msie6
            && self.patterns.len() == other.patterns.len()
            && self
                .patterns
                .iter()
                .zip(&other.patterns)
                .all(|(a, b)| a.source == b.source)
    }
}

impl GzipDisable {
    /// Whether a request with this `User-Agent` is refused compression.
    pub fn refuses(&self, user_agent: Option<&str>) -> bool {
        let Some(ua) = user_agent else {
            return false;
        };
        (self.msie6 && is_msie6(ua)) || self.patterns.iter().any(|p| p.is_match(ua))
    }
}

/// `keepalive_timeout TIME [HEADER_TIME]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveTimeout {
    /// How long an idle keep-alive connection stays open; zero: no keep-alive.
    pub idle: std::time::Duration,
    /// `Keep-Alive: timeout=N` on HTTP/1.x responses that keep the connection (whole
    /// seconds, as nginx).
    pub header: Option<std::time::Duration>,
}

/// `keepalive_disable none|msie6|safari ...`: browsers whose requests close the connection
/// after the response (nginx's: old MSIE after a POST, Safari on macOS always).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveDisable {
    /// `msie6` (the default): MSIE 4–6 without SV1, after a POST.
    pub msie6: bool,
    /// `safari`: Safari on Mac OS X (not Chrome, which also says "Safari/").
    pub safari: bool,
}

impl KeepaliveDisable {
    /// Whether a request with this method and `User-Agent` gets no keep-alive.
    pub fn applies(&self, post: bool, user_agent: Option<&str>) -> bool {
        let Some(ua) = user_agent else {
            return false;
        };
        (self.msie6 && post && is_msie6(ua))
            || (self.safari
                && !ua.contains("MSIE ")
                && !ua.contains("Opera")
                && !ua.contains("Gecko/")
                && !ua.contains("Chrome/")
                && ua.contains("Safari/")
                && ua.contains("Mac OS X"))
    }
}

/// nginx's `msie6` mask: "MSIE 4.", "MSIE 5." or "MSIE 6." not followed (in the same
/// user agent) by "SV1" (XP SP2's MSIE 6, which handles gzip).
fn is_msie6(ua: &str) -> bool {
    let Some(at) = ua.find("MSIE ") else {
        return false;
    };
    let v = &ua[at + 5..];
    let old = v.len() >= 2 && matches!(v.as_bytes()[0], b'4'..=b'6') && v.as_bytes()[1] == b'.';
    old && !(v.as_bytes()[0] == b'6' && ua.contains("SV1"))
}

/// `if_modified_since off|exact|before`: how `If-Modified-Since` is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfModifiedSince {
    /// The header is ignored.
    Off,
    /// 304 only for the file's exact date (nginx's default).
    Exact,
    /// 304 for the file's date or a later one (RFC 9110; firstbyte's default).
    Before,
}

/// `autoindex_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoindexFormat {
    /// `html` (default): nginx's `Index of` page.
    Html,
    /// `json`: an array of `{ "name", "type", "mtime"[, "size"] }` objects.
    Json,
    /// `jsonp`: the JSON array wrapped in `$arg_callback(...)`; plain JSON without one.
    Jsonp,
    /// `xml`: `<list>` of `<file>`, `<directory>` and `<other>` elements.
    Xml,
}

/// `gzip_static`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GzipStatic {
    /// `off` (default).
    Off,
    /// `on`: send `FILE.gz` (and `FILE.br`) when the client accepts it.
    On,
    /// `always`: send `FILE.gz` whatever the client says.
    Always,
}

compression_directives! { conf_struct!
/// Dynamic compression (`gzip*` and `brotli*`).
#[derive(Debug, Clone)]
pub struct Compression {
}
}

/// `expires`: what `Expires` and `Cache-Control` say (seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expires {
    /// `off` (default): neither header is touched.
    Off,
    /// `epoch`: `Expires: Thu, 01 Jan 1970 00:00:01 GMT`, `Cache-Control: no-cache`.
    Epoch,
    /// `max`: `Expires: Thu, 31 Dec 2037 23:55:55 GMT`, `Cache-Control: max-age=315360000`.
    Max,
    /// `TIME`: from the time of the response (negative: in the past, `no-cache`).
    Access(i64),
    /// `modified TIME`: from the response's `Last-Modified` (from now when it has none).
    Modified(i64),
    /// `@TIME`: the next time this time of day comes, local time (seconds after midnight).
    Daily(i64),
    /// A value with variables (`expires $expires`, `expires modified $t`), read per response
    /// as one of the others.
    Var {
        /// `modified` was given.
        modified: bool,
        /// The value.
        value: Arc<super::vars::ComplexValue>,
    },
}

/// `client_body_in_file_only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyInFileOnly {
    /// `off` (default): memory up to `client_body_buffer_size`, then a temp file.
    Off,
    /// `on`: always a file, kept after the request.
    On,
    /// `clean`: always a file, removed after the request.
    Clean,
}

/// `disable_symlinks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableSymlinks {
    /// `off` (default): follow symlinks.
    Off,
    /// `on`: refuse a path any component of which is a symlink.
    On,
    /// `if_not_owner`: refuse a symlink whose owner differs from its target's.
    IfNotOwner,
}

/// `disable_symlinks`: the policy and its `from=` part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symlinks {
    /// `off`, `on` or `if_not_owner`.
    pub mode: DisableSymlinks,
    /// `from=VALUE`, evaluated per request: the leading part of a path that is not checked.
    pub from: Option<Arc<super::vars::ComplexValue>>,
}

impl Symlinks {
    /// `disable_symlinks off` (the default).
    pub const OFF: Symlinks = Symlinks {
        mode: DisableSymlinks::Off,
        from: None,
    };
}

impl From<DisableSymlinks> for Symlinks {
    fn from(mode: DisableSymlinks) -> Self {
        Symlinks { mode, from: None }
    }
}

/// MIME types by lower-cased file extension (from `types {}` / `mime.types`).
pub type MimeTypes = HashMap<String, String>;

loc_directives! { conf_struct!
/// One location (or a server's own level), merged from its parents.
#[derive(Debug)]
pub struct LocationConf {
    /// How the location was written, e.g. `= /favicon.ico`, `~* \.png$`, `/` (for logs). Empty at server level.
    pub name: String,
    /// The prefix of a prefix/exact location (used by `alias`).
    pub prefix: String,
    /// `root` or `alias`.
    pub root: DocRoot,
    /// The `alias` was written in this regex location: it is the whole path (with the
    /// URI's captures), and `try_files` appends its candidates to it (nginx's
    /// `add_uri_to_alias`).
    pub alias_whole: bool,
    /// `index FILE ...`. Default `index.html`.
    pub index: Vec<ComplexValue>,
    /// `try_files`.
    pub try_files: Option<TryFiles>,
    /// `limit_except`: the location the methods not listed get.
    pub limit_except: Option<Arc<LimitExcept>>,
    /// The rewrite directives (`set`, `if`, `rewrite`, `return`, `break`) of this level:
    /// the server's run before a location is chosen, a location's once it is.
    pub rewrite: super::rewrite::Program,
    /// `add_header` (inherited only when the location has none of its own, as nginx).
    pub add_header: Vec<AddHeader>,
    /// `add_trailer` (inherited likewise).
    pub add_trailer: Vec<AddHeader>,
    /// `error_page` (inherited only when the location has none of its own).
    pub error_page: Vec<ErrorPage>,
    /// `access_log`.
    pub access_log: AccessLog,
    /// `error_log` of this level or the nearest one above (http, server, location) that has
    /// one; empty: the main level's. A request's error lines go there once its server and
    /// then its location are known.
    pub error_log: Vec<ErrorLog>,
    /// `allow`/`deny` in order (inherited only when the location has none).
    pub access: Vec<AccessRule>,
    /// Dynamic compression.
    pub compression: Compression,
    /// `types {}` (the nearest one wins, as nginx).
    pub types: Arc<MimeTypes>,
    /// `proxy_pass` and the `proxy_*` settings of this location, when it proxies; or
    /// `fastcgi_pass` and the `fastcgi_*` settings in the same shape ([`ProxyConf::fastcgi`]).
    pub proxy: Option<Arc<ProxyConf>>,
    /// `fastcgi_split_path_info` and `fastcgi_index` of this location, for
    /// `$fastcgi_script_name` and `$fastcgi_path_info` (None: neither is set).
    pub fastcgi_vars: Option<Arc<FastcgiVars>>,
    /// Locations nested inside this one.
    pub locations: Locations,
    /// Where the location starts (server position for the server level).
    pub pos: Pos,
    /// auth_basic, real IP, limit_req, limit_conn: None when the location uses none.
    pub guard: Option<Arc<super::access_conf::Guard>>,
    /// The `http` block's `charset_map` tables (shared by every location).
    pub charsets: Arc<super::charset::CharsetMaps>,
}
}

/// `upstream NAME { server ADDR [weight=N] [max_fails=N] [fail_timeout=T]; keepalive N; }`.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its name, as `proxy_pass http://NAME` writes it.
    pub name: String,
    /// The servers, in file order.
    pub servers: Vec<UpstreamServer>,
    /// `keepalive N`: idle connections kept per worker. None: no pool (nginx's default).
    pub keepalive: Option<usize>,
    /// `keepalive_requests N`: a pooled connection is closed after this many requests.
    /// Default 1000 (nginx's).
    pub keepalive_requests: u32,
    /// `keepalive_timeout T`: an idle pooled connection is not used after this long.
    /// Default 60s.
    pub keepalive_timeout: Duration,
    /// `keepalive_time T`: a connection is not pooled again once it is this old. Default 1h.
    pub keepalive_time: Duration,
    /// The balancing method (`least_conn`, `ip_hash`, `hash`); round robin by default.
    pub method: BalanceMethod,
    /// Where the block starts.
    pub pos: Pos,
    /// `server NAME resolve`: the servers whose addresses are asked of the resolver at run
    /// time (nginx ≥ 1.27.3), in file order.
    pub resolve: Vec<ResolveServer>,
    /// The resolver those names are asked of: the block's `resolver`, else the `http`
    /// level's (set when the load is finished).
    pub resolver: Option<Resolver>,
    /// `resolver_timeout` of the block, else the `http` level's (30 s by default).
    pub resolver_timeout: Option<Duration>,
    /// Whether the block has a `zone` (nginx needs one for `resolve`).
    pub zone: bool,
}

/// `server NAME[:PORT] resolve [service=NAME] ...` inside `upstream`: a template for the peers
/// its name resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveServer {
    /// The host name, lower-case.
    pub host: String,
    /// The port (80 unless written; unused with `service=`, whose SRV records give it).
    pub port: u16,
    /// `service=NAME`: SRV records of `_NAME._tcp.HOST` (a name with a dot: `NAME.HOST`).
    pub service: Option<String>,
    /// The rest of the line: weight, max_fails, fail_timeout, backup, down, max_conns, and
    /// the name as written.
    pub params: UpstreamServer,
}

/// An upstream server's address: TCP or a unix-domain socket (`unix:/path`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerAddr {
    /// An IP address and port.
    Tcp(SocketAddr),
    /// A unix-domain socket's path.
    Unix(PathBuf),
}

impl std::fmt::Display for PeerAddr {
    /// As nginx writes it in logs and `$upstream_addr`: `127.0.0.1:8080`, `unix:/path`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddr::Tcp(a) => write!(f, "{a}"),
            PeerAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]` inside `upstream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    /// The address (a name resolves when the config loads, as nginx; each address is a peer).
    pub addr: PeerAddr,
    /// The name as written (`$upstream_addr` shows the address).
    pub name: String,
    /// `weight=N`. Default 1.
    pub weight: u32,
    /// `max_fails=N`: failures within `fail_timeout` that take the server out. Default 1; 0 never.
    pub max_fails: u32,
    /// `fail_timeout=T`: the failure window and the time out. Default 10s.
    pub fail_timeout: Duration,
    /// `backup`: used only when every other server is down.
    pub backup: bool,
    /// `down`: never used.
    pub down: bool,
    /// `max_conns=N`: requests in flight to it at most (0: no limit, the default).
    pub max_conns: u32,
}

/// How an `upstream` group chooses a server for a request.
#[derive(Debug, Clone, Default)]
pub enum BalanceMethod {
    /// nginx's default: smooth weighted round robin.
    #[default]
    RoundRobin,
    /// `least_conn`: fewest active connections per weight unit.
    LeastConn,
    /// `ip_hash`: the client's IPv4 /24 (or whole IPv6 address) picks the server.
    IpHash,
    /// `hash KEY [consistent]`: the evaluated key picks the server; `consistent` is ketama.
    Hash {
        /// The key, with variables.
        key: ComplexValue,
        /// `consistent`.
        consistent: bool,
    },
    /// `random [two [least_conn]]`: a server at random by weight; `two`: two at random,
    /// and of them the one with fewer active connections per weight unit.
    Random {
        /// `two`.
        two: bool,
    },
}

/// `proxy_next_upstream`: the conditions under which a request goes to the next server, as
/// nginx's `NGX_HTTP_UPSTREAM_FT_*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextUpstream(pub u16);

impl NextUpstream {
    /// A connection or I/O error with the server.
    pub const ERROR: u16 = 1;
    /// A timeout connecting, sending or reading the header.
    pub const TIMEOUT: u16 = 1 << 1;
    /// An empty or invalid response header.
    pub const INVALID_HEADER: u16 = 1 << 2;
    /// Status 500.
    pub const HTTP_500: u16 = 1 << 3;
    /// Status 502.
    pub const HTTP_502: u16 = 1 << 4;
    /// Status 503.
    pub const HTTP_503: u16 = 1 << 5;
    /// Status 504.
    pub const HTTP_504: u16 = 1 << 6;
    /// Status 403.
    pub const HTTP_403: u16 = 1 << 7;
    /// Status 404.
    pub const HTTP_404: u16 = 1 << 8;
    /// Status 429.
    pub const HTTP_429: u16 = 1 << 9;
    /// Retry POST, LOCK and PATCH too once the request was sent.
    pub const NON_IDEMPOTENT: u16 = 1 << 10;
    /// nginx's default: `error timeout`.
    pub const DEFAULT: NextUpstream = NextUpstream(Self::ERROR | Self::TIMEOUT);

    /// The bit of a response status `proxy_next_upstream` can name.
    pub fn status_bit(status: u16) -> Option<u16> {
        Some(match status {
            500 => Self::HTTP_500,
            502 => Self::HTTP_502,
            503 => Self::HTTP_503,
            504 => Self::HTTP_504,
            403 => Self::HTTP_403,
            404 => Self::HTTP_404,
            429 => Self::HTTP_429,
            _ => return None,
        })
    }
}

/// One `proxy_redirect` rule: how a `Location` or `Refresh` URL from the upstream changes.
#[derive(Debug, Clone)]
pub enum Redirect {
    /// `proxy_redirect REDIRECT REPLACEMENT`: a value starting with REDIRECT (evaluated,
    /// case-sensitive) has that start replaced.
    Prefix {
        /// What the value starts with.
        pattern: ComplexValue,
        /// What replaces it.
        replacement: ComplexValue,
    },
    /// `proxy_redirect ~REGEX REPLACEMENT` (`~*`: caseless): a matching value is replaced
    /// whole by REPLACEMENT, which may use the captures (`$1`).
    Regex {
        /// The pattern.
        regex: super::rewrite::regex::Regex,
        /// What replaces the value.
        replacement: ComplexValue,
    },
}

/// Where `proxy_pass` sends requests.
#[derive(Debug, Clone)]
pub enum ProxyTarget {
    /// `http://NAME` naming an `upstream` block.
    Upstream(Arc<Upstream>),
    /// `http://HOST:PORT` with no upstream of that name: the addresses it resolved to at load
    /// (or `http://unix:/path:`'s socket).
    Addrs(Vec<PeerAddr>),
    /// `proxy_pass` with variables: the URL is evaluated per request.
    Dynamic(Arc<DynamicPass>),
}

/// `resolver ADDRESS ... [valid=TIME] [ipv4=on|off] [ipv6=on|off]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    /// The DNS servers, asked in turn (port 53 unless given).
    pub servers: Vec<SocketAddr>,
    /// Ask for IPv4 addresses (A).
    pub ipv4: bool,
    /// Ask for IPv6 addresses (AAAA).
    pub ipv6: bool,
    /// `valid=TIME`: how long an answer is kept, instead of its records' TTL.
    pub valid: Option<Duration>,
}

/// `proxy_bind ADDRESS [transparent]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyBind {
    /// `ADDRESS[:PORT]` (variables allowed; empty: no bind).
    pub addr: ComplexValue,
    /// `transparent`: `IP_TRANSPARENT`, for a non-local address.
    pub transparent: bool,
}

impl ProxyBind {
    /// `ADDRESS[:PORT]` as nginx's `ngx_parse_addr_port` reads it (`[v6]:port` or a bare
    /// IPv6 address; port 0 when none is given).
    pub fn parse(s: &str) -> Option<SocketAddr> {
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Some(a);
        }
        let bare = s
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(s);
        bare.parse::<std::net::IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 0))
    }
}

/// `proxy_pass` with variables, as nginx: the evaluated URL's host names an `upstream` (when
/// it has no port), else it must be an IP address (firstbyte resolves no names at request
/// time: nginx answers 502 "no resolver defined" without `resolver`); `unix:` sockets too.
#[derive(Debug, Clone)]
pub struct DynamicPass {
    /// The URL as written.
    pub url: ComplexValue,
    /// The load's `upstream` blocks by (lower-case) name.
    pub upstreams: HashMap<String, Arc<Upstream>>,
}

proxy_directives! { conf_struct!
/// `proxy_pass URL` and the `proxy_*` settings merged for one location.
#[derive(Debug, Clone)]
pub struct ProxyConf {
    /// `https://`: TLS to the upstream.
    pub tls: bool,
    /// The host part as written (`$proxy_host`, the default `Host` and TLS name), with `:port`
    /// when it is not the scheme's default.
    pub host: String,
    /// The URI part of the URL: `Some` replaces the location's prefix (nginx's rule); `None`
    /// passes the request URI unchanged.
    pub uri: Option<String>,
    /// Where to connect.
    pub target: ProxyTarget,
    /// `proxy_set_header` (inherited only when the location has none). nginx's defaults
    /// `Host $proxy_host` and `Connection close` apply unless overridden.
    pub set_headers: Vec<(String, ComplexValue)>,
    /// `proxy_buffers`, `proxy_buffer_size`, the temp file: how much of a response `proxy_buffering
    /// on` holds, and where.
    pub buffers: ProxyBuffers,
    /// `proxy_pass_header`: upstream headers passed that nginx hides by default (`Server`, `Date`).
    pub pass_headers: Vec<String>,
    /// `proxy_hide_header`: upstream headers not passed.
    pub hide_headers: Vec<String>,
    /// `proxy_redirect`: rules tried in order on `Location` and `Refresh` (empty: `off`).
    pub redirects: Vec<Redirect>,
    /// Upstream TLS (`proxy_ssl_*`), used when `tls`.
    pub ssl: ProxySsl,
    /// `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`.
    pub cookies: Arc<super::cookies::CookieRules>,
    /// `fastcgi_pass`: the upstream speaks FastCGI; the fields above hold the `fastcgi_*`
    /// values of the same meaning (timeouts, buffers, next upstream, headers).
    pub fastcgi: Option<Arc<FastcgiConf>>,
    /// `proxy_cache`: the location caches responses.
    pub cache: Option<Arc<CacheConf>>,
    /// `proxy_ignore_headers` (every directive's of the level), lower-cased.
    pub ignore_headers: Vec<String>,
    /// `proxy_store`: where a complete 200 response is kept.
    pub store: ProxyStore,
}
}

/// `proxy_store on|off|PATH`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProxyStore {
    /// `off` (the default).
    #[default]
    Off,
    /// `on`: the file `root`/`alias` maps the URI to.
    On,
    /// A path, variables allowed; the literal text before the first variable is trusted.
    Path(ComplexValue),
}

fastcgi_directives! { conf_struct!
/// `fastcgi_pass` and the `fastcgi_*` settings merged for one location.
#[derive(Debug, Clone)]
pub struct FastcgiConf {
    /// `fastcgi_param NAME VALUE [if_not_empty]`, in order (inherited only when the level
    /// has none, as nginx).
    pub params: Vec<FastcgiParam>,
    /// `fastcgi_split_path_info` and `fastcgi_index`.
    pub vars: Arc<FastcgiVars>,
    /// `fastcgi_ignore_headers`, lower-cased (also in the `ProxyConf`'s `ignore_headers`,
    /// where the response path reads it: `X-Accel-Redirect` is the one acted on).
    pub ignore_headers: Vec<String>,
    /// `fastcgi_catch_stderr`: strings that, in the stderr before the response header, make
    /// the response an invalid header.
    pub catch_stderr: Vec<String>,
}
}

/// One `fastcgi_param`.
#[derive(Debug, Clone)]
pub struct FastcgiParam {
    /// The parameter's name (`SCRIPT_FILENAME`).
    pub name: String,
    /// Its value.
    pub value: ComplexValue,
    /// `if_not_empty`: not sent when the value is empty.
    pub if_not_empty: bool,
}

/// What `$fastcgi_script_name` and `$fastcgi_path_info` are computed from.
#[derive(Debug, Clone, Default)]
pub struct FastcgiVars {
    /// `fastcgi_split_path_info REGEX`: two captures, the script name and the path info.
    pub split: Option<regex::Regex>,
    /// `fastcgi_index NAME`.
    pub index: Option<String>,
}

impl FastcgiVars {
    /// `$fastcgi_script_name` and `$fastcgi_path_info` of a request whose URI is `uri`, as
    /// nginx: the regex's two captures when it matches (else the URI and nothing), and the
    /// index appended to a script name ending in `/`.
    pub fn split<'a>(this: Option<&Self>, uri: &'a str) -> (std::borrow::Cow<'a, str>, &'a str) {
        use std::borrow::Cow;
        let (mut name, info) = match this
            .and_then(|v| v.split.as_ref())
            .and_then(|re| re.captures(uri))
        {
            Some(c) => {
                let name = c.get(1).map_or("", |m| m.as_str());
                let info = c.get(2).map_or("", |m| m.as_str());
                (Cow::Borrowed(name), info)
            }
            None => (Cow::Borrowed(uri), ""),
        };
        if let Some(index) = this.and_then(|v| v.index.as_deref()) {
            if name.ends_with('/') {
                name = Cow::Owned(format!("{name}{index}"));
            }
        }
        (name, info)
    }
}

proxy_cache_directives! { conf_struct!
/// `proxy_cache ZONE` and the `proxy_cache_*` values of a location that caches.
#[derive(Debug, Clone)]
pub struct CacheConf {
    /// The zone (`proxy_cache_path`); None when its name has variables.
    pub zone: Option<Arc<super::cache::CachePath>>,
    /// Every zone of the load by name, for a name with variables.
    pub zones: Arc<HashMap<String, Arc<super::cache::CachePath>>>,
    /// `proxy_cache_valid` rules, in order.
    pub valid: Vec<super::cache::ValidRule>,
    /// `proxy_cache_bypass` values (every directive's of the level).
    pub bypass: Vec<ComplexValue>,
    /// `proxy_no_cache` values (every directive's of the level).
    pub no_cache: Vec<ComplexValue>,
}
}

proxy_buffer_directives! { conf_struct!
/// What `proxy_buffering on` may hold of a response: `proxy_buffers` and `proxy_buffer_size`
/// in memory, the rest in an unlinked temp file under `proxy_temp_path`. Defaults are nginx's
/// on x86_64 Linux, where one memory page is 4 KiB (nginx: "8 4k|8k", one page per buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyBuffers {
    /// `proxy_buffers NUMBER SIZE`: the count. Default 8.
    pub count: usize,
    /// `proxy_buffers NUMBER SIZE`: bytes each. Default 4k.
    pub size: usize,
    /// `proxy_temp_path`: where temp files go. Default `proxy_temp` under the prefix.
    pub temp_path: PathBuf,
    /// `client_body_temp_path`: where a request body read whole before it goes upstream
    /// (chunked, to an HTTP/1.0 upstream) spills past memory. Default `client_body_temp`
    /// under the prefix.
    pub body_temp_path: PathBuf,
}
}

impl ProxyBuffers {
    /// Bytes of a response held in memory at most.
    pub fn memory(&self) -> usize {
        self.count
            .saturating_mul(self.size)
            .saturating_add(self.buffer_size)
    }
}

impl Default for ProxyBuffers {
    fn default() -> Self {
        proxy_buffer_directives!(defaults_conf! ProxyBuffers {
            count: 8,
            size: 4096,
            temp_path: PathBuf::from("proxy_temp"),
            body_temp_path: PathBuf::from("client_body_temp"),
        })
    }
}

proxy_ssl_directives! { conf_struct!
/// `proxy_ssl_*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySsl {
    /// `proxy_ssl_certificate` (client certificate). A variable makes it [`ProxySsl::dynamic`].
    pub certificate: Option<Source>,
    /// `proxy_ssl_certificate_key`.
    pub certificate_key: Option<Source>,
    /// `proxy_ssl_certificate` / `_key` written with variables: evaluated per request.
    pub dynamic: Option<DynamicCertKey>,
}
}

/// A certificate and key named with variables (`/certs/$ssl_server_name.crt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicCertKey {
    /// The certificate path as written.
    pub cert: ComplexValue,
    /// The key path as written.
    pub key: ComplexValue,
    /// The configuration prefix (the main file's directory) a relative path resolves against.
    pub conf_dir: PathBuf,
    /// Where `ssl_certificate` was written.
    pub pos: Pos,
}

impl DynamicCertKey {
    /// The certificate and key paths for one handshake or request. A relative result resolves
    /// against the configuration prefix, as nginx's `ngx_get_full_name(.., conf_prefix, ..)`
    /// once the variables are evaluated (so `$ssl_server_name.crt` is read next to the
    /// configuration, never in the working directory); `data:` values stay as they are.
    pub fn eval(&self, vars: &dyn super::vars::Vars) -> (String, String) {
        let full = |v: &ComplexValue| {
            let s = v.eval(vars);
            // Empty stays empty: no certificate (nginx's `proxy_ssl_certificate $empty`).
            if s.is_empty() || s.starts_with('/') || s.starts_with("data:") {
                s
            } else {
                self.conf_dir.join(s).to_string_lossy().into_owned()
            }
        };
        (full(&self.cert), full(&self.key))
    }
}

/// `proxy_http_version 1.0 | 1.1 | 2`: the protocol spoken to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProxyHttpVersion {
    /// HTTP/1.0 (firstbyte's default, as nginx before 1.29): one request per connection.
    #[default]
    V10,
    /// HTTP/1.1: keepalive pools, chunked bodies, WebSocket.
    V11,
    /// HTTP/2 (nginx 1.29's `2`): h2c with prior knowledge for `http://`, ALPN `h2` for
    /// `https://`; one stream at a time on a connection, as nginx.
    V2,
}

impl ProxyHttpVersion {
    /// Whether a connection may carry another request after this one (1.1 and 2).
    pub fn persistent(self) -> bool {
        !matches!(self, ProxyHttpVersion::V10)
    }

    /// Whether it is HTTP/2.
    pub fn is_h2(self) -> bool {
        matches!(self, ProxyHttpVersion::V2)
    }
}

/// `ssl_certificate_cache off | max=N [inactive=time] [valid=time]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CertificateCache {
    /// `off` (default, as nginx): each handshake reads the files.
    Off,
    /// A cache of `max` entries (certificates and keys count separately).
    On {
        /// `max=N`: entries kept; the least recently used goes first.
        max: usize,
        /// `inactive=time`: an entry unused this long is dropped. Default 10s, as nginx.
        inactive: Duration,
        /// `valid=time`: after this, an entry is revalidated by mtime and inode. Default 60s, as nginx.
        valid: Duration,
    },
}

tls_directives! { conf_struct!
/// TLS settings of a server (http → server merged).
#[derive(Debug, Clone)]
pub struct TlsConf {
    /// `ssl_certificate` / `ssl_certificate_key` pairs, in order (e.g. ECDSA then RSA).
    pub certificates: Vec<CertKey>,
    /// `ssl_conf_command Ciphersuites ...` (TLS 1.3 suites, OpenSSL names).
    pub ciphersuites: Option<String>,
    /// `ssl_conf_command Certificate FILE` (with `PrivateKey FILE`): replaces the configured
    /// pair whose key is of the same kind (RSA, ECDSA, Ed25519), else is added, as OpenSSL's
    /// certificate slots do.
    pub conf_certificate: Option<CertKey>,
    /// `ssl_conf_command NumTickets N`: TLS 1.3 tickets per handshake. Default 2 (OpenSSL's, as nginx).
    pub num_tickets: Option<u32>,
    /// `ssl_conf_command Options KTLS`: kernel TLS for HTTP/1.x after the handshake, so file
    /// bodies go out with `sendfile` (`tls::ktls`). Off by default, as nginx.
    pub ktls: bool,
    /// `ssl_conf_command Options KTLSTxZerocopySendfile`: with kernel TLS, `sendfile` asks the
    /// kernel not to copy the file's pages (`TLS_TX_ZEROCOPY_RO`), which is safe only while
    /// the files served do not change during a send. Off by default, as OpenSSL.
    pub ktls_tx_zerocopy: bool,
    /// `ssl_session_ticket_key FILE` (several: the first encrypts, all decrypt).
    pub session_ticket_keys: Vec<PathBuf>,
    /// `ssl_certificate` / `ssl_certificate_key` pairs written with variables, loaded at
    /// handshake time (the static `certificates` then stay empty).
    pub dynamic_certificates: Vec<DynamicCertKey>,
    /// `resolver` and `resolver_timeout` of the server level, for `ssl_ocsp` responders
    /// named by host name (nginx resolves them with the server's resolver).
    pub ocsp_resolver: Option<(Resolver, std::time::Duration)>,
}
}

/// A certificate chain and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertKey {
    /// The chain (PEM).
    pub cert: Source,
    /// The private key (PEM; may be an encrypted PKCS#8).
    pub key: Source,
    /// Where `ssl_certificate` was written.
    pub pos: Pos,
}

/// Where a TLS object comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// A file (absolute after prefix resolution).
    File(PathBuf),
    /// `data:PEM...` inline.
    Data(String),
}

/// A TLS protocol version firstbyte speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2
    Tls12,
    /// TLS 1.3
    Tls13,
}

/// `ssl_session_cache off | none | [builtin[:SIZE]] [shared:NAME:SIZE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCache {
    /// `off`: no stateful cache, and say so to clients.
    Off,
    /// `none` (nginx's default): no stateful cache.
    None,
    /// A stateful cache of this many sessions (`builtin:N`, or `shared:NAME:SIZE` at ~4000 sessions per MB, nginx's figure).
    Sessions(usize),
}

/// `ssl_ocsp`: which certificates of a verified client chain are checked with OCSP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OcspMode {
    /// `off` (default).
    Off,
    /// `on`: every certificate of the chain but the self-signed anchor.
    On,
    /// `leaf`: the client's certificate only.
    Leaf,
}

/// `ssl_ocsp_cache shared:NAME:SIZE`: a cache of OCSP results shared by the servers naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcspCacheZone {
    /// The zone's name.
    pub name: String,
    /// Its size in bytes (bounds the number of entries).
    pub size: u64,
}

/// `ssl_verify_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyClient {
    /// `off` (default).
    Off,
    /// `on`: a valid client certificate is required.
    On,
    /// `optional`: asked for, verified if sent.
    Optional,
    /// `optional_no_ca`: asked for, not verified.
    OptionalNoCa,
}

/// `charset_types`' default, nginx's.
pub const CHARSET_TYPES: [&str; 6] = [
    "text/html",
    "text/xml",
    "text/plain",
    "text/vnd.wap.wml",
    "application/javascript",
    "application/rss+xml",
];
