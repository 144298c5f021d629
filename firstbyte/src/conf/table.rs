//! The directive table: every directive firstbyte knows, as data.
//!
//! Each [`Spec`] says where a directive may appear, how many arguments it takes, whether it
//! opens a block, its default, how its value inherits (http → server → location), what it
//! does, and which function reads it. The walker (`build.rs`) checks context, block and
//! argument count from here before calling the handler, and `docs.rs` renders the same rows
//! as `docs/directives.md`. nginx directives that firstbyte does not implement are listed in
//! [`UNSUPPORTED`] so they fail with their own message instead of `unknown directive`.
//!
//! **Adding a directive.** If it takes one value that a level sets once and that inherits (or
//! not) as a whole, add one entry to the list of its level in `directives.rs` (main, loc,
//! compression, srv, tls, proxy, proxy_buffer, proxy_ssl): name, model field and type,
//! default, contexts, argument counts, the default as the docs show it, the merge kind, a
//! value parser (`args.rs` has `on_off`, `duration`, `bytes`, `count`, ...; add one there, or
//! a domain one next to its handlers), and the doc line. The model field, the settings field,
//! the handler, the row (through [`all`]), the inheritance and the default follow from that
//! entry; the runtime then reads the model's field. Only a directive whose parsing is special
//! (it accumulates, opens a block, depends on other directives or on where it is written)
//! gets a hand-written handler (`handlers.rs`, `server_handlers.rs`, `server_head.rs`,
//! `proxy.rs`), a field in `settings.rs` with its merge and default, and a row in
//! [`DIRECTIVES`]. Then run `cargo test -p firstbyte --lib docs_file` (twice: it rewrites
//! docs/directives.md when stale).

use super::access_conf as ac;
use super::args::R;
use super::cookies;
use super::cx::Cx;
use super::declare::{setters, spec_rows};
use super::directives::{
    compression_directives, fastcgi_directives, loc_directives, main_directives,
    proxy_buffer_directives, proxy_cache_directives, proxy_directives, proxy_ssl_directives,
    srv_directives, tls_directives,
};
use super::fastcgi as fcgi;
use super::handlers as h;
use super::limits as lim;
use super::parse::Directive;
use super::proxy as px;
use super::realip as rip;
use super::rewrite as rw;
use super::server_handlers as srv;
use super::server_head::{self, ServerHead};
use super::settings::{LocSettings, MainSettings, SrvSettings};

/// The top level of the file.
pub(crate) const MAIN: u8 = 1;
/// `events {}`.
pub(crate) const EVENTS: u8 = 2;
/// `http {}`.
pub(crate) const HTTP: u8 = 4;
/// `server {}` inside http.
pub(crate) const SERVER: u8 = 8;
/// `location {}`.
pub(crate) const LOCATION: u8 = 16;
/// http, server and location.
const HSL: u8 = HTTP | SERVER | LOCATION;
/// http and server.
const HS: u8 = HTTP | SERVER;
/// server and location.
const SL: u8 = SERVER | LOCATION;
/// "no upper limit" for `Spec::max_args`.
const ANY: u8 = u8::MAX;

/// Context names for the docs, in order.
#[cfg(test)]
pub(crate) const CONTEXT_NAMES: [(u8, &str); 5] = [
    (MAIN, "main"),
    (EVENTS, "events"),
    (HTTP, "http"),
    (SERVER, "server"),
    (LOCATION, "location"),
];

/// How a directive's value reaches inner levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// Main or events level: one value for the process.
    Global,
    /// An inner level that does not set it takes the outer level's value.
    Inherit,
    /// Array-like: an inner level takes the outer level's list only when it has none of its own.
    InheritIfNone,
    /// Applies to its own block only.
    Own,
    /// `return`: a server-level one answers every request of the server first (nginx's server
    /// rewrite phase); a location's applies to that location only.
    ServerFirst,
    /// Opens a block.
    Block,
    /// Accepted with a warning; means nothing to firstbyte.
    Ignored,
}

impl Merge {
    /// The phrase used in the docs.
    #[cfg(test)]
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Merge::Global => "global",
            Merge::Inherit => "inherited",
            Merge::InheritIfNone => "inherited if none set",
            Merge::Own => "not inherited",
            Merge::ServerFirst => "server level first",
            Merge::Block => "block",
            Merge::Ignored => "ignored (warns)",
        }
    }
}

/// What reads a directive.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// `events {}`.
    Events,
    /// `http {}`.
    Http,
    /// `server {}`.
    Server,
    /// `location {}`.
    Location,
    /// `if (...) {}` (server, location): read by `conf/rewrite`.
    If,
    /// A main/events value.
    Main(fn(&mut MainSettings, &Directive, &mut Cx) -> R),
    /// An http/server value.
    Srv(fn(&mut SrvSettings, &Directive, &mut Cx) -> R),
    /// A value of the server block itself (`listen`, `server_name`).
    Head(fn(&mut ServerHead, &Directive, &mut Cx) -> R),
    /// An http/server/location value.
    Loc(fn(&mut LocSettings, &Directive, &mut Cx) -> R),
    /// A value shared by the whole load (`log_format`).
    Shared(fn(&mut Cx, &Directive) -> R),
    /// Accepted with `"NAME" is ignored: REASON`.
    Ignored(&'static str),
}

/// One directive.
#[derive(Clone, Copy)]
pub(crate) struct Spec {
    /// Its name.
    pub name: &'static str,
    /// Where it may appear (`MAIN | EVENTS | ...`).
    pub contexts: u8,
    /// Fewest arguments.
    pub min_args: u8,
    /// Most arguments (`ANY`: no limit).
    pub max_args: u8,
    /// Ends with `{ ... }` rather than `;`.
    pub block: bool,
    /// The value when none is set, as nginx would write it ("" for none). This, `merge` and
    /// `doc` are read by the docs (`docs.rs`, built for tests only).
    #[cfg_attr(not(test), allow(dead_code))]
    pub default: &'static str,
    /// How its value inherits.
    #[cfg_attr(not(test), allow(dead_code))]
    pub merge: Merge,
    /// One line saying what it does in firstbyte.
    #[cfg_attr(not(test), allow(dead_code))]
    pub doc: &'static str,
    /// The function that reads it.
    pub handler: Handler,
}

impl Spec {
    /// Arguments for the docs: `1`, `1–2`, `2+`, `none`.
    #[cfg(test)]
    pub(crate) fn args_text(&self) -> String {
        match (self.min_args, self.max_args) {
            (0, 0) => "none".into(),
            (a, ANY) => format!("{a}+"),
            (a, b) if a == b => a.to_string(),
            (a, b) => format!("{a}–{b}"),
        }
    }

    /// Context names joined with `, `.
    #[cfg(test)]
    pub(crate) fn contexts_text(&self) -> String {
        CONTEXT_NAMES
            .iter()
            .filter(|(bit, _)| self.contexts & bit != 0)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[allow(clippy::too_many_arguments)]
const fn d(
    name: &'static str,
    contexts: u8,
    min_args: u8,
    max_args: u8,
    default: &'static str,
    merge: Merge,
    handler: Handler,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        contexts,
        min_args,
        max_args,
        block: false,
        default,
        merge,
        doc,
        handler,
    }
}

const fn block(
    name: &'static str,
    contexts: u8,
    min: u8,
    max: u8,
    handler: Handler,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        contexts,
        min_args: min,
        max_args: max,
        block: true,
        default: "",
        merge: Merge::Block,
        doc,
        handler,
    }
}

const fn ignored(name: &'static str, contexts: u8, min: u8, max: u8, reason: &'static str) -> Spec {
    Spec {
        name,
        contexts,
        min_args: min,
        max_args: max,
        block: false,
        default: "",
        merge: Merge::Ignored,
        doc: reason,
        handler: Handler::Ignored(reason),
    }
}

use Handler::{Head, Loc, Main, Shared, Srv};
use Merge::{Global, Inherit, InheritIfNone, Own, ServerFirst};

/// Reason shared by the hash-size directives.
const HASH: &str = "firstbyte sizes its hash tables itself";

/// The hand-written rows: directives whose parsing is special, blocks, and the ignored ones,
/// grouped by module as nginx's docs are.
#[rustfmt::skip]
pub(crate) static DIRECTIVES: &[Spec] = &[
    // core (main, events)
    d("error_log", MAIN | HSL, 1, 2, "stderr error", Global, Main(h::error_log), "Error log file (or `stderr`) and lowest level; several allowed. In http, server and location (inherited inward when a level has none of its own): a request's error lines go to its location's, or before a location is chosen its server's, instead of the main level's; the files are opened at load."),
    block("events", MAIN, 0, 0, Handler::Events, "Connection-processing settings."),
    ignored("multi_accept", EVENTS, 1, 1, "firstbyte accepts every pending connection on each wakeup"),
    ignored("use", EVENTS, 1, 1, "firstbyte's runtime picks epoll itself"),
    ignored("accept_mutex", EVENTS, 1, 1, "firstbyte runs one process, so there is no accept mutex"),
    ignored("accept_mutex_delay", EVENTS, 1, 1, "firstbyte runs one process, so there is no accept mutex"),
    ignored("load_module", MAIN, 1, 1, "modules are built into firstbyte"),
    block("http", MAIN, 0, 0, Handler::Http, "The HTTP server."),
    // http core
    block("server", HTTP, 0, 0, Handler::Server, "A virtual server."),
    d("listen", SERVER, 1, ANY, "*:80 (*:8000 when not root)", Own, Head(server_head::listen), "Address and port to accept on (a port range such as `127.0.0.1:8000-8010` listens on each port, as nginx 1.27.3), or `unix:PATH`, a UNIX-domain socket (made mode 0666 as nginx; a stale socket file nobody listens on is replaced, any other file there fails the bind; the file is removed when the socket closes; `$remote_addr` is `unix:`, `$server_addr` `unix:PATH`, the ports empty; TCP-only options do not apply there), with `ssl`, `http2`, `default_server`, `reuseport`, `deferred` (`TCP_DEFER_ACCEPT`: accepted once the ClientHello is in), `backlog=N`, `fastopen=N`, `ipv6only=on|off`, `bind`, `sndbuf=SIZE`, `rcvbuf=SIZE`, `so_keepalive=on|off|[idle]:[intvl]:[cnt]` (set on the listening socket, which the accepted connections inherit), `quic`, `proxy_protocol`."),
    d("server_name", SERVER, 1, ANY, "\"\"", Own, Head(server_head::server_name), "Names of the server: exact, `*.example.com`, `.example.com`, `www.example.*`, `~regex`."),
    block("location", SL, 1, 2, Handler::Location, "Settings for URIs: `= /exact`, `/prefix`, `^~ /prefix`, `~ regex`, `~* regex`, `@name`."),
    d("root", HSL, 1, 1, "html", Inherit, Loc(h::root), "Directory that request URIs are appended to."),
    d("alias", LOCATION, 1, 1, "", Inherit, Loc(h::alias), "Directory that replaces the location's prefix."),
    d("index", HSL, 1, ANY, "index.html", Inherit, Loc(h::index), "Files tried for a request ending in `/`."),
    d("try_files", SL, 2, ANY, "", Own, Loc(h::try_files), "Files tried in order, then `=CODE`, `@name` or a URI."),
    // rewrite, map, split_clients (conf/rewrite)
    d("return", SL, 1, 2, "", ServerFirst, Loc(rw::ret), "Stop and answer with a code (and text or a redirect URL; a URL alone: 302). In order with the other rewrite directives."),
    d("rewrite", SL, 2, 3, "", ServerFirst, Loc(rw::rewrite), "Replace a URI matching a regex (captures `$1`..`$9`, named groups); `last` finds the location again (at most 10 times, then 500), `break` stays, `redirect` (302) / `permanent` (301) answer; a replacement starting with `http://`, `https://` or `$scheme` redirects; a trailing `?` drops the arguments."),
    d("set", SL, 2, 2, "", ServerFirst, Loc(rw::set), "Set a variable for the rest of the request."),
    d("break", SL, 0, 0, "", ServerFirst, Loc(rw::brk), "Stop running the rewrite directives of this level."),
    block("limit_except", LOCATION, 1, ANY, Handler::Loc(super::limit_except::limit_except), "The methods not listed (`GET` lets `HEAD` through too; any other method, also one nginx does not know, is limited) get the block's own `allow`/`deny`, `auth_basic`, `auth_basic_user_file`, `access_log` and `proxy_pass`, inheriting the rest from the location; the location's rewrite directives do not run for them, as in nginx."),
    block("if", SL, 1, ANY, Handler::If, "Run the directives inside when the condition holds: `$var`, `=`, `!=`, `~`, `~*`, `!~`, `!~*`, `-f`, `-d`, `-e`, `-x` and their negations. In a location it may also hold `root`, `add_header`, `proxy_pass`, `fastcgi_pass`, `access_log`, `error_page`, `gzip`, `sendfile` (an implicit location, as nginx)."),
    d("rewrite_log", HSL, 1, 1, "off", Inherit, Loc(rw::rewrite_log), "Log regex matches and rewrites at `notice` to the error log."),
    d("uninitialized_variable_warn", HSL, 1, 1, "on", Inherit, Loc(rw::uninitialized_variable_warn), "Warn when a `set` variable is used before it is set."),
    block("geo", HTTP, 1, 2, Shared(rw::geo), "A variable whose value depends on the client's address (or the first parameter's): `CIDR value`, longest match; `default`, `delete`, `include`, `proxy CIDR` and `proxy_recursive` (trusted proxies' `X-Forwarded-For`), `ranges` (`FIRST-LAST value`), `volatile`."),
    block("map", HTTP, 2, 2, Shared(rw::map), "A variable whose value maps from another's: exact keys, `~regex`/`~*regex`, `default`, `hostnames`, `volatile`, `include`; evaluated when used, once per request."),
    block("split_clients", HTTP, 2, 2, Shared(rw::split_clients), "A variable that splits clients by percentage of nginx's MurmurHash2 of a value."),
    d("add_trailer", HSL, 2, 3, "", InheritIfNone, Loc(h::add_trailer), "Trailer field sent after the body of a 2xx/3xx response (`always`: of all), as nginx: an HTTP/2 HEADERS frame that ends the stream; over HTTP/1.1 the response is chunked and the trailer sent when the client's `TE` says `trailers` (the `Trailer` field names it). Evaluated once the body has ended, as nginx (`$request_time`, `$body_bytes_sent`, `$upstream_response_time` are the whole response's); `$sent_trailer_NAME` is a trailer added above (or passed by `proxy_pass_trailers`). An empty value adds none. Over HTTP/3 too."),
    d("add_header", HSL, 2, 3, "", InheritIfNone, Loc(h::add_header), "Response header added to 2xx/3xx responses (`always`: to all)."),
    d("error_page", HSL, 2, ANY, "", InheritIfNone, Loc(h::error_page), "URI served for the given error codes (`=CODE` changes the response code)."),
    block("charset_map", HTTP, 2, 2, Shared(super::charset::charset_map), "A recoding table from one 8-bit charset to another (`SRC_HEX DST_HEX;` per byte), used both ways by `source_charset` and `charset`; bytes not listed map to themselves below 0x80, to `?` above. Maps to `utf-8` are not supported."),
    block("types", HSL, 0, 0, Loc(h::types), "MIME types by file extension; the innermost block wins whole."),
    d("log_format", HTTP, 2, ANY, "combined", Global, Shared(h::log_format), "Named access-log line format (`escape=default|json|none`)."),
    d("access_log", HSL, 1, ANY, "stdout combined (daemon on: logs/access.log)", InheritIfNone, Loc(h::access_log), "Access log file (or `stderr`), format, `buffer=SIZE`, `flush=TIME` (accepted; each line is written when its response ends), `gzip[=LEVEL]` (a file only: each line is one gzip member, level 1 by default, so the file reads with `zcat`), `if=CONDITION` (the line is written unless the condition is empty or `0`); `off`: none. A path with variables names a file per request, opened then (or kept by `open_log_file_cache`), relative to the prefix, written only while the request's root directory exists, with neither `buffer` nor `gzip`; stricter than nginx, a path whose value has a `..` component or a NUL byte is refused (an `[error]` line, nothing written). None written: `combined` lines to stdout in the foreground, as the official nginx container; with `daemon on`, `logs/access.log` under the prefix."),
    d("http2", HS, 1, 1, "off", Inherit, Srv(srv::http2), "Offer HTTP/2 (ALPN `h2`)."),
    d("ssl_buffer_size", HS, 1, 1, "16k", Inherit, Srv(srv::ssl_buffer_size), "Plaintext bytes gathered into one TLS record (the most a record holds; small writes coalesce, a flush closes the record early)."),
    d("ssl_dyn_rec_enable", HS, 1, 1, "adaptive", Inherit, Srv(srv::ssl_dyn_rec_enable), "Dynamic TLS records: `adaptive` (firstbyte's own, and its default) sizes each record from the connection's live `TCP_INFO` window: one segment on a new connection or after the window restarts from idle, then a quarter of the window, up to `ssl_buffer_size`; `on` is Cloudflare's patch (small records first, full size after `2 x threshold` records, back to small after `timeout` idle); `off` is nginx's behaviour, every record `ssl_buffer_size`."),
    d("ssl_dyn_rec_size_lo", HS, 1, 1, "1369", Inherit, Srv(srv::ssl_dyn_rec_size_lo), "Record size of the first `threshold` records: 1369 = 1500 - 40 (IP) - 20 (TCP) - 10 (timestamps) - 61 (largest TLS overhead), one record in one segment."),
    d("ssl_dyn_rec_size_hi", HS, 1, 1, "4229", Inherit, Srv(srv::ssl_dyn_rec_size_hi), "Record size of records `threshold+1` to `2 x threshold`: 4229 = 3 x 1430 - 61, one record in three segments."),
    d("ssl_dyn_rec_threshold", HS, 1, 1, "40", Inherit, Srv(srv::ssl_dyn_rec_threshold), "Records per stage of the dynamic ramp."),
    d("ssl_dyn_rec_timeout", HS, 1, 1, "1s", Inherit, Srv(srv::ssl_dyn_rec_timeout), "Idle time after which dynamic records start small again; `0` turns dynamic records off (Cloudflare's meaning)."),
    d("tcp_notsent_lowat", HS, 1, 1, "", Inherit, Srv(srv::tcp_notsent_lowat), "firstbyte's own: `TCP_NOTSENT_LOWAT` in bytes (unset: the kernel's sysctl)."),
    d("tcp_congestion", HS, 1, 1, "", Inherit, Srv(srv::tcp_congestion), "firstbyte's own: per-socket `TCP_CONGESTION`, e.g. `bbr` (unset: the kernel's sysctl). QUIC listeners follow it: `bbr` gives their connections quinn's BBR, anything else CUBIC."),
    ignored("types_hash_max_size", HSL, 1, 1, HASH),
    ignored("types_hash_bucket_size", HSL, 1, 1, HASH),
    ignored("server_names_hash_max_size", HTTP, 1, 1, HASH),
    ignored("server_names_hash_bucket_size", HTTP, 1, 1, HASH),
    ignored("variables_hash_max_size", HTTP, 1, 1, HASH),
    ignored("variables_hash_bucket_size", HTTP, 1, 1, HASH),
    ignored("server_tokens", HSL, 1, 1, "firstbyte always sends \"Server: firstbyte\", without a version"),
    ignored("output_buffers", HSL, 1, 2, "firstbyte reads files in 64 KiB chunks (or sends them with sendfile), whatever the buffers"),
    d("lingering_close", HSL, 1, 1, "off", Own, Loc(h::lingering_close), "Only `off` (what firstbyte does: a connection is closed as soon as its response is sent, without reading on; nginx's default `on` lingers to read what a client still sends); `on` and `always` are refused rather than ignored."),
    ignored("lingering_time", HSL, 1, 1, "firstbyte closes without lingering (`lingering_close off`)"),
    ignored("lingering_timeout", HSL, 1, 1, "firstbyte closes without lingering (`lingering_close off`)"),
    ignored("connection_pool_size", HS, 1, 1, "firstbyte allocates per connection what it needs; nginx's pool size tunes its allocator only"),
    ignored("request_pool_size", HS, 1, 1, "firstbyte allocates per request what it needs; nginx's pool size tunes its allocator only"),
    // access, stub_status
    d("allow", HSL, 1, 1, "", InheritIfNone, Loc(h::allow), "Allow an address, a CIDR network, `unix:` (clients of UNIX-domain sockets) or `all` (rules apply in order)."),
    d("deny", HSL, 1, 1, "", InheritIfNone, Loc(h::deny), "Deny an address, a CIDR network, `unix:` (clients of UNIX-domain sockets) or `all` (rules apply in order)."),
    // auth_basic, realip, limit_req, limit_conn (conf/access_conf.rs, realip.rs, limits.rs)
    d("auth_basic", HSL, 1, 1, "off", Inherit, Loc(ac::auth_basic), "Ask for a user and password (HTTP Basic) with this realm; `off`: none. Needs `auth_basic_user_file`."),
    d("auth_basic_user_file", HSL, 1, 1, "", Inherit, Loc(ac::auth_basic_user_file), "htpasswd file (variables allowed; relative to the configuration directory), read on every request: `{PLAIN}`, `{SHA}`, `{SSHA}`, `$apr1$`, and whatever the C library's crypt(3) knows (`$1$`, `$5$`, `$6$`, `$2y$`/`$2b$` bcrypt, `$y$`, DES)."),
    d("satisfy", HSL, 1, 1, "all", Inherit, Loc(ac::satisfy), "`any`: `allow`/`deny` or `auth_basic` passing is enough; `all`: both must."),
    d("set_real_ip_from", HSL, 1, 1, "", InheritIfNone, Loc(rip::set_real_ip_from), "Trusted proxy address, CIDR network, `unix:` (any UNIX-domain client) or host name (its addresses, resolved at load as nginx): requests from it take `$remote_addr` from `real_ip_header`."),
    d("real_ip_header", HSL, 1, 1, "X-Real-IP", Inherit, Loc(rip::real_ip_header), "Where the real address is: `X-Real-IP`, `X-Forwarded-For`, `proxy_protocol` or another header."),
    d("real_ip_recursive", HSL, 1, 1, "off", Inherit, Loc(rip::real_ip_recursive), "`on`: walk `X-Forwarded-For` from the right past every trusted address; `off`: take the last one."),
    d("limit_req_zone", HTTP, 2, 4, "", Global, Shared(lim::limit_req_zone), "`KEY zone=NAME:SIZE rate=Nr/s|Nr/m`: a leaky bucket per key value (64 bytes a key; a full zone drops its least recently used key). `sync` is accepted and does nothing (one server)."),
    d("limit_req", HSL, 1, 3, "", InheritIfNone, Loc(lim::limit_req), "`zone=NAME [burst=N] [nodelay|delay=N]`: refuse (or, within the burst, delay) requests over the zone's rate."),
    d("limit_req_status", HSL, 1, 1, "503", Inherit, Loc(lim::limit_req_status), "Status of refused requests."),
    d("limit_req_log_level", HSL, 1, 1, "error", Inherit, Loc(lim::limit_req_log_level), "Error-log level of refusals (`info`, `notice`, `warn`, `error`); delays log one level lower."),
    d("limit_req_dry_run", HSL, 1, 1, "off", Inherit, Loc(lim::limit_req_dry_run), "Count and log, but refuse and delay nothing."),
    d("limit_conn_zone", HTTP, 2, 2, "", Global, Shared(lim::limit_conn_zone), "`KEY zone=NAME:SIZE`: requests in progress per key value (32 bytes a key; a full zone refuses new keys)."),
    d("limit_conn", HSL, 2, 2, "", InheritIfNone, Loc(lim::limit_conn), "`ZONE N`: at most N requests in progress per key at once."),
    d("limit_conn_status", HSL, 1, 1, "503", Inherit, Loc(lim::limit_conn_status), "Status of refused requests."),
    d("limit_conn_log_level", HSL, 1, 1, "error", Inherit, Loc(lim::limit_conn_log_level), "Error-log level of refusals."),
    d("limit_conn_dry_run", HSL, 1, 1, "off", Inherit, Loc(lim::limit_conn_dry_run), "Count and log, but refuse nothing."),
    // compression
    ignored("gzip_buffers", HSL, 2, 2, "firstbyte's compressor sizes its own buffers"),
    // ssl
    d("ssl_certificate", HS, 1, 1, "", InheritIfNone, Srv(srv::ssl_certificate), "Certificate chain (PEM file or `data:`); several for ECDSA + RSA. With variables, read per handshake when the ClientHello arrives: `$ssl_server_name`, `$remote_addr`, `$remote_port`, `$server_addr`, `$server_port` and `geo`/`map`/`split_clients` variables over them (over HTTP/3, `$ssl_server_name` only), through `ssl_certificate_cache` keyed by the evaluated paths."),
    d("ssl_certificate_key", HS, 1, 1, "", InheritIfNone, Srv(srv::ssl_certificate_key), "Private key of the certificate at the same position."),
    d("ssl_conf_command", HS, 2, 2, "", InheritIfNone, Srv(srv::ssl_conf_command), "OpenSSL commands rustls can honour, applied over the directives they overlap as nginx applies them last: `Ciphersuites LIST` (TLS 1.3 suites), `CipherString LIST` (as `ssl_ciphers`), `Groups LIST` or `Curves LIST` (as `ssl_ecdh_curve`), `Certificate FILE` with `PrivateKey FILE` (the certificate's file when none; it replaces the configured certificate of the same key type, else is added; not beside `ssl_certificate` with variables), `Options SessionTicket` / `-SessionTicket` (as `ssl_session_tickets`), `Options ServerPreference` / `-ServerPreference` (as `ssl_prefer_server_ciphers`), `NumTickets N` (tickets per handshake) and `Options KTLS` (kernel TLS and `sendfile` for HTTP/1.x where the kernel has the `tls` module; a `[warn]` at start and user-space TLS where it has not; HTTP/2 stays in user space; TLS 1.3 records from clients are decrypted in user space, so that a client's KeyUpdate is followed, and one asking for ours closes the connection) and `Options KTLSTxZerocopySendfile` (with `KTLS`: `sendfile` without the kernel's copy of the file's pages, `TLS_TX_ZEROCOPY_RO`, Linux ≥ 5.19, else ignored; only for files that never change while served: a page changed mid-send can reach the client as a record that fails authentication). Names and options are matched without case; any other command or option is an `[emerg]`."),
    ignored("ssl_dhparam", HS, 1, 1, "rustls offers only ECDHE key exchange"),
    d("ssl_session_ticket_key", HS, 1, 1, "", InheritIfNone, Srv(srv::ssl_session_ticket_key), "Ticket key file (the first encrypts, all decrypt); none: generated and rotated."),
    // upstream, proxy
    block("upstream", HTTP, 1, 1, Shared(px::upstream), "Group of upstream servers: `server ADDR|unix:/path [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] [backup] [down]` (`max_conns`: requests in flight to it at most) (round-robin by weight), `keepalive N` idle connections pooled; `least_conn`, `ip_hash`, `hash KEY [consistent]` choose the server as nginx (the same key picks the same server nginx would); `random` picks one at random by weight, `random two [least_conn]` two at random and of them the one with fewer active connections per weight unit (`down`, failed and full servers are passed over; no `backup`). `zone NAME [SIZE]` is accepted with nginx's checks (SIZE at least 32k; one size per NAME, which several upstreams may share; given on at least one of them): firstbyte is one process, so a group's state (failures, connection counts) is always shared by all its connections, zone or not. `server NAME[:PORT] resolve [service=NAME]` (nginx 1.27.3; needs a `zone`, and `resolver` in the block or at the `http` level; `resolver_timeout` likewise) is resolved at run time, not at load: a task per such line asks the resolver (A and AAAA, CNAMEs followed; with `service=`, SRV records of `_NAME._tcp.HOST`, or `NAME.HOST` when NAME has a dot, each target then resolved, its port from the record and its weight unless the line sets `weight=`; records of a higher priority number are backup servers with round robin and `least_conn`, left out with other methods) when the load starts serving and again one second after the answer expires (`valid=`, else the records' smallest TTL), and replaces that line's servers in the group, under the group's lock: an address still answered keeps its server and state (failures, connections, round-robin score), a new one is added, one no longer answered is removed (requests in flight to it finish). Until the first answer, and after \"Host not found\" or an empty answer, the line has no servers (requests get 502, `no live upstreams`); any other error (server failure, timeout) keeps the servers and asks again after `resolver_timeout` (at least 1 s). A reload keeps the last answers: an upstream of the same name with the same `server NAME` (and service) starts with them, with its new port. Each error is logged (`NAME could not be resolved (2: Server failure)`)."),
    d("proxy_pass", LOCATION, 1, 1, "", Own, Loc(px::proxy_pass), "Proxy requests to `http://` or `https://` HOST[:PORT][/URI], an upstream name, or a unix socket (`http://unix:/path.sock:/URI`); a URI part replaces the location's prefix."),
    d("proxy_set_header", HSL, 2, 2, "Host $proxy_host; Connection close", InheritIfNone, Loc(px::proxy_set_header), "Request header sent upstream (an empty value removes it); e.g. `X-Forwarded-For $proxy_add_x_forwarded_for`, `Upgrade $http_upgrade` for WebSocket."),
    d("proxy_buffers", HSL, 2, 2, "8 4k", Inherit, Loc(px::proxy_buffers), "Memory for a buffered response (`proxy_buffering on`): NUMBER buffers of SIZE (nginx's \"8 4k|8k\": one memory page each, 4k on x86_64 Linux)."),
    d("proxy_temp_path", HSL, 1, 4, "proxy_temp", Inherit, Loc(px::proxy_temp_path), "Directory of the temp files a buffered response spills to past its buffers (under the prefix when relative). Levels are accepted; the files are unlinked as soon as they are made."),
    d("proxy_store", HSL, 1, 1, "off", Inherit, Loc(px::proxy_store), "`on`: a 200 response from the upstream is written, as it goes to the client, to a temp file in `proxy_temp_path`, renamed once its body came whole to the file `root`/`alias` maps the URI to; PATH (variables allowed, evaluated once the response header came): to that file. Missing directories are made; the mode is `proxy_store_access`'s, the modification time the upstream's `Last-Modified`. Nothing is kept for a HEAD request, another status, or a body cut short (an upstream error, less than its `Content-Length`); the client leaving does not end the upstream's response (as `proxy_ignore_client_abort on`). The part of the path that comes from the request (the URI; in PATH, what follows the last `/` before the first variable) may not hold `.` or `..` and no symlink in it is followed, so a request cannot write outside that directory. After a `proxy_cache` of the same level it is refused, as nginx (written before one, the cache wins; nginx refuses that order too); at an inner level, either replaces the other's inherited value, as nginx."),
    d("client_body_temp_path", HSL, 1, 4, "client_body_temp", Inherit, Loc(px::client_body_temp_path), "Directory where a request body read whole before it goes upstream spills past `client_body_buffer_size` of memory (under the prefix when relative); as `proxy_temp_path`, made at start."),
    d("proxy_redirect", HSL, 1, 2, "default", InheritIfNone, Loc(px::proxy_redirect), "Rewrites the upstream's `Location` and `Refresh` URLs: `REDIRECT REPLACEMENT` replaces a leading REDIRECT (case-sensitive; variables allowed), `~REGEX`/`~*REGEX` replaces a matching URL whole (captures `$1`.. in REPLACEMENT); rules are tried in order. `default`: the `proxy_pass` URL becomes the location's prefix; `off`: none."),
    d("proxy_cookie_domain", HSL, 1, 2, "off", InheritIfNone, Loc(cookies::proxy_cookie_domain), "Rewrites the `Domain` attribute of the upstream's `Set-Cookie` fields: `DOMAIN REPLACEMENT` replaces a domain equal to DOMAIN (without case; a leading dot of either is ignored, the value's own kept), `~REGEX REPLACEMENT` (caseless) replaces a matching domain whole (captures `$1`..); variables allowed; rules tried in order; `off`: none."),
    d("proxy_cookie_path", HSL, 1, 2, "off", InheritIfNone, Loc(cookies::proxy_cookie_path), "Rewrites the `Path` attribute of the upstream's `Set-Cookie` fields: `PATH REPLACEMENT` replaces a leading PATH (case-sensitive), `~REGEX`/`~*REGEX` replaces a matching path whole (captures `$1`..); variables allowed; rules tried in order; `off`: none."),
    d("proxy_cookie_flags", HSL, 1, ANY, "off", InheritIfNone, Loc(cookies::proxy_cookie_flags), "Sets or clears flags of the upstream's `Set-Cookie` fields for cookie COOKIE (a name, any case, variables allowed, or `~REGEX`, caseless; the first rule that matches applies): `secure`, `httponly`, `samesite=strict|lax|none` add or correct the attribute, `nosecure`, `nohttponly`, `nosamesite` remove it (variables allowed); `off`: none."),
    d("proxy_pass_header", HSL, 1, 1, "", InheritIfNone, Loc(px::proxy_pass_header), "Pass an upstream header hidden by default (`Server`, `Date`)."),
    d("proxy_cache_path", HTTP, 2, ANY, "", Global, Shared(crate::conf::cache::proxy_cache_path), "`PATH [levels=1:2] keys_zone=NAME:SIZE [inactive=10m] [max_size=N]`: a cache zone for `proxy_cache` (PATH under the prefix when relative, made with mode 0700 when first written; files 0600). `levels`: up to three subdirectory levels of 1 or 2 hex characters from the end of the key's MD5. `inactive`: entries not used this long are removed (checked as the zone is used: no manager process); `max_size`: past it the least recently used are removed (a response larger than it is not stored). A stored file holds its key, validity and header, so after a restart or reload an entry is found again when first asked for (no loader process; those entries count toward `max_size` only from then). `use_temp_path`, `min_free`, `manager_*` and `loader_*` are accepted: temp files are always written in PATH itself."),
    d("proxy_ignore_headers", HSL, 1, ANY, "", InheritIfNone, Loc(px::proxy_ignore_headers), "Upstream header fields not acted on (nginx's names, any case; several directives add up): `X-Accel-Redirect` (an internal redirect to the URI or named location it gives), `X-Accel-Expires`, `Expires`, `Cache-Control`, `Set-Cookie`, `Vary` (what `proxy_cache` reads of a response), `X-Accel-Limit-Rate` (the response's rate limit, bytes per second: digits only, as nginx, `0` for none; it outranks `limit_rate`), `X-Accel-Buffering`, `X-Accel-Charset` (firstbyte acts on neither of these two)."),
    d("proxy_cache_bypass", HSL, 1, ANY, "", InheritIfNone, Loc(crate::conf::cache::proxy_cache_bypass), "Values (variables allowed): when any is non-empty and not `0`, the response is taken from the upstream, not the cache (`BYPASS`), and may still be stored. Several directives add up."),
    d("proxy_no_cache", HSL, 1, ANY, "", InheritIfNone, Loc(crate::conf::cache::proxy_no_cache), "Values (variables allowed): when any is non-empty and not `0`, the response is not stored. Several directives add up."),
    d("proxy_cache_valid", HSL, 1, ANY, "", InheritIfNone, Loc(crate::conf::cache::proxy_cache_valid), "`[CODE ...|any] TIME`: how long a response of these statuses is fresh (no code: 200, 301 and 302); several may be given. Without any, only a response whose upstream gives a time (`X-Accel-Expires`, `Cache-Control: max-age`, `Expires`) is cached, as nginx. The upstream's time comes first unless `proxy_ignore_headers` names it."),
    d("proxy_hide_header", HSL, 1, 1, "", InheritIfNone, Loc(px::proxy_hide_header), "Do not pass this upstream header."),
    d("proxy_ssl_certificate", HSL, 1, 1, "", Inherit, Loc(px::proxy_ssl_certificate), "Client certificate for HTTPS upstreams (file, `data:`, or with variables such as `$host`)."),
    d("proxy_ssl_certificate_key", HSL, 1, 1, "", Inherit, Loc(px::proxy_ssl_certificate_key), "Key of `proxy_ssl_certificate`."),
    // FastCGI (ngx_http_fastcgi_module); fastcgi_cache* and fastcgi_store* stay unsupported.
    d("fastcgi_pass", LOCATION, 1, 1, "", Own, Loc(fcgi::fastcgi_pass), "Pass requests to a FastCGI server (PHP-FPM): `HOST:PORT`, `unix:/path.sock`, or an `upstream` name (balancing, `max_fails`, `keepalive` as for `proxy_pass`). The CGI response's `Status:` sets the status (`Location:` without it: 302), its other headers and body go to the client, and each stderr record is logged as `FastCGI sent in stderr: \"...\"` at `error`."),
    d("fastcgi_param", HSL, 2, 3, "", InheritIfNone, Loc(fcgi::fastcgi_param), "Parameter sent to the FastCGI server: `NAME VALUE [if_not_empty]` (variables allowed; `if_not_empty`: not sent when empty). A level with any `fastcgi_param` replaces the outer level's whole list, as nginx. Debian's `fastcgi_params`, `fastcgi.conf` and `snippets/fastcgi-php.conf` load as written."),
    d("fastcgi_split_path_info", HSL, 1, 1, "", Inherit, Loc(fcgi::fastcgi_split_path_info), "Regular expression with two captures applied to the URI: the first is `$fastcgi_script_name`, the second `$fastcgi_path_info` (no match: the URI and nothing)."),
    d("fastcgi_buffers", HSL, 2, 2, "8 4k", Inherit, Loc(fcgi::fastcgi_buffers), "As `proxy_buffers`, for `fastcgi_buffering on`."),
    d("fastcgi_temp_path", HSL, 1, 4, "fastcgi_temp", Inherit, Loc(fcgi::fastcgi_temp_path), "As `proxy_temp_path`: where a buffered FastCGI response spills past its buffers."),
    d("fastcgi_pass_header", HSL, 1, 1, "", InheritIfNone, Loc(fcgi::fastcgi_pass_header), "Pass a header the FastCGI module hides by default (`Status`, `X-Accel-*`). firstbyte acts on no `X-Accel-*` header (no `X-Accel-Redirect` internal redirect): hidden or passed, they change nothing else."),
    d("fastcgi_hide_header", HSL, 1, 1, "", InheritIfNone, Loc(fcgi::fastcgi_hide_header), "Do not pass this header of the FastCGI response."),
    d("fastcgi_catch_stderr", HSL, 1, 1, "", InheritIfNone, Loc(fcgi::fastcgi_catch_stderr), "A string that, found in the FastCGI server's stderr before the response header, makes the response an invalid header (502, or the next server with `fastcgi_next_upstream invalid_header`), as nginx."),
    d("fastcgi_ignore_headers", HSL, 1, ANY, "", Inherit, Loc(fcgi::fastcgi_ignore_headers), "As `proxy_ignore_headers`: nginx's names (`X-Accel-Redirect`, `X-Accel-Expires`, `X-Accel-Limit-Rate`, `X-Accel-Buffering`, `X-Accel-Charset`, `Expires`, `Cache-Control`, `Set-Cookie`, `Vary`); `X-Accel-Redirect` (an internal redirect) and `X-Accel-Limit-Rate` (the rate limit) are the ones firstbyte acts on, so the ones that ignoring changes."),
];

main_directives!(setters! main_set, crate::conf::settings::MainSettings);
main_directives!(spec_rows! MAIN_LISTED, Main, main_set);
loc_directives!(setters! loc_set, crate::conf::settings::LocSettings);
loc_directives!(spec_rows! LOC_LISTED, Loc, loc_set);
compression_directives!(setters! compression_set, crate::conf::settings::LocSettings, compression);
compression_directives!(spec_rows! COMPRESSION_LISTED, Loc, compression_set);
srv_directives!(setters! srv_set, crate::conf::settings::SrvSettings);
srv_directives!(spec_rows! SRV_LISTED, Srv, srv_set);
tls_directives!(setters! tls_set, crate::conf::settings::SrvSettings, tls);
tls_directives!(spec_rows! TLS_LISTED, Srv, tls_set);
proxy_directives!(setters! proxy_set, crate::conf::settings::LocSettings, proxy);
proxy_directives!(spec_rows! PROXY_LISTED, Loc, proxy_set);
proxy_buffer_directives!(setters! proxy_buffer_set, crate::conf::settings::LocSettings, proxy.bufs);
proxy_buffer_directives!(spec_rows! PROXY_BUFFER_LISTED, Loc, proxy_buffer_set);
proxy_cache_directives!(setters! proxy_cache_set, crate::conf::settings::LocSettings, proxy.cache);
proxy_cache_directives!(spec_rows! PROXY_CACHE_LISTED, Loc, proxy_cache_set);
proxy_ssl_directives!(setters! proxy_ssl_set, crate::conf::settings::LocSettings, proxy.ssl);
proxy_ssl_directives!(spec_rows! PROXY_SSL_LISTED, Loc, proxy_ssl_set);
fastcgi_directives!(setters! fastcgi_set, crate::conf::settings::LocSettings, fastcgi);
fastcgi_directives!(spec_rows! FASTCGI_LISTED, Loc, fastcgi_set);

/// The hand-written rows, then each list's (`directives.rs`).
static TABLES: &[&[Spec]] = &[
    DIRECTIVES,
    MAIN_LISTED,
    LOC_LISTED,
    COMPRESSION_LISTED,
    SRV_LISTED,
    TLS_LISTED,
    PROXY_LISTED,
    PROXY_BUFFER_LISTED,
    PROXY_CACHE_LISTED,
    PROXY_SSL_LISTED,
    FASTCGI_LISTED,
];

/// Every directive firstbyte accepts.
pub(crate) fn all() -> impl Iterator<Item = &'static Spec> {
    TABLES.iter().flat_map(|t| t.iter())
}

/// nginx directives firstbyte does not implement yet (beyond [`UNSUPPORTED_PREFIXES`]).
#[rustfmt::skip]
pub(crate) static UNSUPPORTED: &[&str] = &[
    "absolute_redirect", "add_after_body", "add_before_body", "add_trailer", "addition_types",
    "aio", "aio_write", "chunked_transfer_encoding", 
    "create_full_put_path",
    "debug_connection", "debug_points", "degradation", "degrade", "directio", "directio_alignment", "env",
    "f4f", "f4f_buffer_size", "flv", "brotli_static", "brotli_min_length", "brotli_window",
    "brotli_buffers", "hash",
    "internal_redirect", "ip_hash", "keepalive",
    "least_conn", "least_time", "lock_file", "log_subrequest",
    "mail", "master_process", "merge_slashes", "msie_padding",
    "msie_refresh", "ntlm", "output_buffers", "pcre_jit",
    "quic", "random", "read_ahead",
    "recursive_error_pages", "reset_timedout_connection",
    "send_lowat",
    "slice",
    "slice_size", "ssl_engine", "ssl_handshake_timeout",
    "ssl_preread", "stream", "sticky",
    "subrequest_output_buffer_size", "thread_pool", "timer_resolution",
    "valid_referers", "worker_aio_requests",
    "worker_cpu_affinity", "worker_priority", "worker_rlimit_core", 
    "working_directory", "xml_entities", "zone",
    "google_perftools_profiles", "more_set_headers", "more_clear_headers",
];

/// Families of nginx directives firstbyte does not implement yet.
#[rustfmt::skip]
pub(crate) static UNSUPPORTED_PREFIXES: &[&str] = &[
    "proxy_", "fastcgi_", "uwsgi_", "scgi_", "grpc_", "memcached_", "limit_", "auth_",
    "charset", "http2_", "http3_", "quic_", "js_",
    "perl", "geoip_", "image_filter", "mp4", "xslt_", "sub_filter", "secure_link",
    "userid", "map_hash_", "referer_hash_", "modern_browser",
    "ancient_browser", "gunzip", "mirror", "random_index", "real_ip_", "dav_", "keyval",
    "smtp_", "imap_", "pop3_", "health_check", "session_log", "status_zone",
    "mqtt", "zone_sync", "hls", "api",
];

/// The spec of `name`, if firstbyte knows it.
pub(crate) fn find(name: &str) -> Option<&'static Spec> {
    all().find(|s| s.name == name)
}

/// Whether `name` is an nginx directive firstbyte does not implement yet.
pub(crate) fn is_unsupported(name: &str) -> bool {
    find(name).is_none()
        && (UNSUPPORTED.contains(&name) || UNSUPPORTED_PREFIXES.iter().any(|p| name.starts_with(p)))
}

/// nginx's contexts of some unsupported directives, so that one in the wrong place says
/// `not allowed here` as nginx would, before `not supported yet`. None: not checked.
pub(crate) fn unsupported_contexts(name: &str) -> Option<u8> {
    match name {
        n if n.starts_with("ssl_") => Some(HS),
        "upstream" | "map" | "geo" | "split_clients" => Some(HTTP),
        // Read inside `upstream {}` only (`proxy::upstream`): anywhere else, not allowed.
        n if super::proxy::UPSTREAM_DIRECTIVES.contains(&n) => Some(0),
        "limit_except" => Some(LOCATION),
        "if" | "set" | "rewrite" | "break" => Some(SL),
        n if n.starts_with("worker_") || n == "env" || n == "master_process" => Some(MAIN),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::conf::declare::defaults_match_docs;
    use crate::conf::model::{
        BodyInFileOnly, CertificateCache, Expires, GzipStatic, NextUpstream, SessionCache,
        SizeValue, Symlinks, TlsVersion, User, VerifyClient, WorkerProcesses,
    };

    // The lists' defaults as docs/directives.md shows them parse to the values the model
    // gets, so the docs cannot drift from the code.
    main_directives!(defaults_match_docs! main_defaults_match_docs, ["user", "pid"]);
    loc_directives!(defaults_match_docs! loc_defaults_match_docs, []);
    compression_directives!(defaults_match_docs! compression_defaults_match_docs, ["gzip_types", "brotli_types"]);
    srv_directives!(defaults_match_docs! srv_defaults_match_docs, []);
    tls_directives!(defaults_match_docs! tls_defaults_match_docs, []);
    proxy_directives!(defaults_match_docs! proxy_defaults_match_docs, []);
    proxy_buffer_directives!(defaults_match_docs! proxy_buffer_defaults_match_docs, []);
    proxy_cache_directives!(defaults_match_docs! proxy_cache_defaults_match_docs, ["proxy_cache_key"]);
    proxy_ssl_directives!(defaults_match_docs! proxy_ssl_defaults_match_docs, []);
    fastcgi_directives!(defaults_match_docs! fastcgi_defaults_match_docs, []);

    #[test]
    fn every_directive_has_doc_contexts_and_sane_arguments() {
        for s in all() {
            assert!(!s.doc.trim().is_empty(), "{} has no doc line", s.name);
            assert!(s.contexts != 0, "{} has no context", s.name);
            assert!(s.min_args <= s.max_args, "{} argument range", s.name);
            assert!(!s.contexts_text().is_empty(), "{}", s.name);
            assert_eq!(
                s.block,
                s.merge == Merge::Block,
                "{}: block and merge agree",
                s.name
            );
            assert!(
                !is_unsupported(s.name),
                "{} is both supported and not",
                s.name
            );
        }
    }

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        for s in all() {
            assert!(seen.insert(s.name), "{} twice", s.name);
        }
        let mut seen = HashSet::new();
        for n in UNSUPPORTED {
            assert!(seen.insert(*n), "{n} twice");
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(find("root").map(|s| s.args_text()), Some("1".to_string()));
        assert_eq!(
            find("listen").map(|s| s.args_text()),
            Some("1+".to_string())
        );
        assert_eq!(
            find("location").map(|s| s.args_text()),
            Some("1–2".to_string())
        );
        assert_eq!(
            find("internal").map(|s| s.args_text()),
            Some("none".to_string())
        );
        assert_eq!(
            find("add_header").map(|s| s.contexts_text()),
            Some("http, server, location".to_string())
        );
        assert!(find("proxy_pass").is_some());
        assert!(!is_unsupported("proxy_pass"));
        assert!(!is_unsupported("proxy_store"));
        assert!(is_unsupported("proxy_socket_keepalive"));
        assert!(!is_unsupported("proxy_cache"));
        assert!(!is_unsupported("ssl_certificate_cache"));
        assert!(!is_unsupported("upstream"));
        assert!(!is_unsupported("foo"));
    }
}
