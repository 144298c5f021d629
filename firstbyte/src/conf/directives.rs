//! The declarative lists: one entry per plain-valued directive, from which its model field,
//! its settings field, its handler, its table row (and so its line in docs/directives.md), its
//! inheritance and its default all follow (`declare.rs` holds the generators).
//!
//! An entry reads
//!
//! ```text
//! "NAME" field: Type = DEFAULT => (CONTEXTS, MIN_ARGS, MAX_ARGS, "default as nginx writes it", Merge, parser) "doc line";
//! ```
//!
//! `Type` is the model's (`bool`, `Duration`, an enum); `DEFAULT` the value when nobody sets
//! it; `Merge` is `Inherit` (an inner level that does not set it takes the outer one's),
//! `Own` (its block only) or `Global` (main); the parser is a `fn(&Directive, &mut Cx) ->
//! Result<Type, ConfError>`, usually one of `args`' (`p::on_off`, `p::duration`, `p::bytes`,
//! `p::count`, ...). A second one in a block is `"NAME" directive is duplicate`. Directives
//! whose value accumulates, depends on other directives or on where it is written
//! (`listen`, `root`, `error_page`, `access_log`, `add_header`, `return`, `try_files`,
//! `ssl_certificate`, `proxy_pass`, ...) are hand-written in `table.rs`.
//!
//! A new group of values (a module's own model struct) gets a list here and one line in each
//! place that expands the others: `conf_struct!` in model.rs, `settings_struct!` (and
//! `finish_conf!`) in settings.rs or beside its settings, `setters!`, `spec_rows!`, `TABLES`
//! and `defaults_match_docs!` in table.rs.

/// Main and events level (`MainConf`, `MainSettings`).
#[rustfmt::skip]
macro_rules! main_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // None: nginx's `nobody` (see `user`), decided when privileges are dropped.
        "user" user: Option<User> = None =>
            (MAIN, 1, 2, "nobody nogroup", Global, p::user)
            "When started as root, serve as this user (and group; default: the user's name) with no capability left; a root broker process reads files and binds sockets for reloads. Without it, nginx's default: `nobody`, group `nogroup` (or `nobody` where there is no `nogroup`); `user root` stays root.";
        // 1: nginx's default.
        "worker_processes" worker_processes: WorkerProcesses = WorkerProcesses::Count(1) =>
            (MAIN, 1, 1, "1", Global, p::worker_processes)
            "Number of event-loop threads; `auto`: one per available CPU.";
        // firstbyte's name in nginx's place (`build` drops it for an ordinary user); `None`: `off`.
        "pid" pid: Option<PathBuf> = Some(PathBuf::from("/run/firstbyte.pid")) =>
            (MAIN, 1, 1, "/run/firstbyte.pid (root), off (others)", Global, p::pid_file)
            "File holding the process id, for `-s`; `off`: none. Unset: `/run/firstbyte.pid` as root; none for an ordinary user, who cannot write `/run`.";
        // None: wait for every connection, as nginx without the directive.
        "worker_shutdown_timeout" worker_shutdown_timeout: Option<Duration> = None =>
            (MAIN, 1, 1, "", Global, p::some_duration)
            "How long a graceful shutdown (`-s quit`) waits for open connections before it closes them; unset: as long as they take.";
        // off: foreground suits systemd and containers (firstbyte's choice; nginx's is on).
        "daemon" daemon: bool = false =>
            (MAIN, 1, 1, "off", Global, p::on_off)
            "`on`: detach from the terminal. firstbyte's default is off (foreground suits systemd and containers).";
        // 512 connections: nginx's default.
        "worker_connections" worker_connections: u32 = 512 =>
            (EVENTS, 1, 1, "512", Global, p::positive)
            "Most simultaneous connections per worker thread.";
        // on: nginx 1.27.4's default.
        "ssl_object_cache_inheritable" ssl_object_cache_inheritable: bool = true =>
            (MAIN, 1, 1, "on", Global, p::on_off)
            "A reload reuses certificates, keys and CA bundles whose files are unchanged (mtime, inode) from the running load; `off` marks this load as not to be reused (it takes two reloads to clear).";
        // None: the limit firstbyte was started with. Set before privileges are dropped.
        "worker_rlimit_nofile" worker_rlimit_nofile: Option<u64> = None =>
            (MAIN, 1, 1, "", Global, p::some_count)
            "`RLIMIT_NOFILE` (soft and hard) set at start; when `setrlimit` fails (raising the hard limit needs root), an `[alert]` and firstbyte goes on, as nginx.";
    } };
}
pub(crate) use main_directives;

/// http, server and location level (`LocationConf`, `LocSettings`).
#[rustfmt::skip]
macro_rules! loc_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // Defaults below are nginx's.
        "sendfile" sendfile: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Send files with sendfile(2) on plain-HTTP/1.1 connections, and on TLS ones that kernel TLS serves (`ssl_conf_command Options KTLS`).";
        "absolute_redirect" absolute_redirect: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Redirects firstbyte makes carry `scheme://host[:port]`; off: a relative `Location`.";
        "server_name_in_redirect" server_name_in_redirect: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Use the server's first name, not the request's Host, in redirects.";
        "port_in_redirect" port_in_redirect: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Put the listening port in redirects (unless 80 for http, 443 for https).";
        "tcp_nodelay" tcp_nodelay: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Set `TCP_NODELAY` on every connection, HTTP/2 included.";
        "tcp_nopush" tcp_nopush: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Set `TCP_CORK` while sending a response's headers and file together.";
        "keepalive_timeout" keepalive_timeout: crate::conf::model::KeepaliveTimeout = crate::conf::model::KeepaliveTimeout { idle: Duration::from_secs(75), header: None } =>
            (HSL, 1, 2, "75s", Inherit, p::keepalive_timeout)
            "`TIME [HEADER_TIME]`: how long an idle keep-alive connection stays open (0 disables keep-alive); HTTP/1.x connections wait the timeout of the location that served their last request. HEADER_TIME: `Keep-Alive: timeout=N` (whole seconds) on HTTP/1.x responses that keep the connection.";
        "if_modified_since" if_modified_since: crate::conf::model::IfModifiedSince = crate::conf::model::IfModifiedSince::Before =>
            (HSL, 1, 1, "before", Inherit, p::if_modified_since)
            "How `If-Modified-Since` is compared with a file's date: `before` (304 when the file is not newer than the date: RFC 9110, firstbyte's default), `exact` (only the same date: nginx's default), `off` (ignored).";
        "keepalive_disable" keepalive_disable: crate::conf::model::KeepaliveDisable = crate::conf::model::KeepaliveDisable { msie6: true, safari: false } =>
            (HSL, 1, ANY, "msie6", Inherit, p::keepalive_disable)
            "Browsers whose requests close the connection after the response: `msie6` (MSIE 4-6 without SV1, after a POST), `safari` (Safari on macOS), `none`.";
        "keepalive_time" keepalive_time: Duration = Duration::from_secs(3600) =>
            (HSL, 1, 1, "1h", Inherit, p::duration)
            "Longest time a keep-alive connection serves requests: the first response after it closes the connection (HTTP/1.x `Connection: close`, HTTP/2 GOAWAY).";
        "keepalive_requests" keepalive_requests: u32 = 1000 =>
            (HSL, 1, 1, "1000", Inherit, p::count)
            "Most requests served on one connection.";
        // 1 MiB; 0: no limit.
        "client_max_body_size" client_max_body_size: u64 = 1 << 20 =>
            (HSL, 1, 1, "1m", Inherit, p::bytes)
            "Largest request body accepted; 0: no limit.";
        "client_body_timeout" client_body_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, p::duration)
            "Longest pause between two reads of a request body.";
        // 1460: nginx's default.
        "postpone_output" postpone_output: u64 = 1460 =>
            (HSL, 1, 1, "1460", Inherit, p::bytes)
            "A streamed body (a buffered proxied or FastCGI response, a compressed one) goes out in writes of at least this many bytes: its small pieces are joined until they reach it, so the client gets fewer small writes and TLS records. Held bytes wait at most 1 ms for the next piece (nginx waits as long as it takes), and the last piece goes at once; `0`: each piece as it comes. An unbuffered upstream body (`proxy_buffering off`, firstbyte's default, or `fastcgi_buffering off`) is never held: nginx flushes each of its reads.";
        // 0: no limit (nginx's default).
        "limit_rate" limit_rate: SizeValue = SizeValue::Fixed(0) =>
            (HSL, 1, 1, "0", Inherit, p::size_value)
            "Most bytes per second of a response body, as nginx: `limit_rate_after` plus one second's worth go at once, then one second's worth each second; 0: no limit. May hold variables (`limit_rate $rate;`; an invalid size is an error-log line and no limit); `set $limit_rate 40k;` sets it for one request. A rate-limited file is read, not `sendfile`d.";
        "limit_rate_after" limit_rate_after: SizeValue = SizeValue::Fixed(0) =>
            (HSL, 1, 1, "0", Inherit, p::size_value)
            "Bytes of a response body sent at full speed before `limit_rate` applies (may hold variables).";
        // None: DATA frames fill TLS records (firstbyte's; nginx's default is 8k).
        "http2_chunk_size" http2_chunk_size: Option<u64> = None =>
            (HSL, 1, 1, "", Inherit, p::some_bytes)
            "HTTP/2: the most response body bytes per DATA frame. Unset, firstbyte sizes DATA frames so that each fills one TLS record (`ssl_buffer_size`, or 16 KiB), nginx cuts them at 8k.";
        "send_timeout" send_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, p::duration)
            "Longest pause between two writes of a response.";
        "internal" internal: bool = false =>
            (LOCATION, 0, 0, "", Own, p::present)
            "The location answers internal redirects only.";
        "disable_symlinks" disable_symlinks: Symlinks = Symlinks::OFF =>
            (HSL, 1, 2, "off", Inherit, p::disable_symlinks)
            "`on`: refuse a path any component of which is a symlink (a symlink as the last component: 403; as a directory on the way: 404, as nginx); `if_not_owner`: follow a symlink only to a target of the same owner. `from=PART` (variables allowed, `from=$document_root` the common form, evaluated per request): a path that starts with PART is checked only after it, PART itself opened as it is (so a root that is a symlink still serves); a path that does not start with it is checked whole. Applies to static files, `index`, `gzip_static`, `try_files` and `if (-f|-d|-e|-x ...)`.";
        "default_type" default_type: String = "text/plain".to_string() =>
            (HSL, 1, 1, "text/plain", Inherit, p::text)
            "MIME type of files whose extension has none.";
        "stub_status" stub_status: bool = false =>
            (SL, 0, 1, "", Own, p::on_unless_off)
            "Answer with nginx's basic status page.";
        "tuning_advisor_status" tuning_advisor_status: bool = false =>
            (SL, 0, 1, "", Own, p::on_unless_off)
            "Answer with the tuning advisor's JSON: per setting (`proxy_buffer_size`, `proxy_buffers`, `proxy_read_timeout`, `client_body_buffer_size`, `keepalive`, `ssl_buffer_size`) `observed {avg, max, p95_approx, p99_approx}`, `recommendation` (`OK`, `REDUCE`, `INCREASE`), `suggested_value` and `reason`; `dyn_rec_advisory` for bimodal response sizes; `record_policy` (which TLS record policy the traffic favours and why); `nginx_config.snippet` for an `http` block, which nginx and firstbyte both accept. `?reset` clears the histograms. Guard it with `allow`/`deny`.";
        "connection_info" connection_info: bool = false =>
            (SL, 0, 1, "off", Own, p::on_unless_off)
            "firstbyte's own: answer with the page showing the visitor their connection (TLS, ALPN, RTT, cwnd), HTML or JSON.";
        "metrics" metrics: bool = false =>
            (SL, 0, 1, "off", Own, p::on_unless_off)
            "firstbyte's own: answer with the process's counters in Prometheus' text format (OpenMetrics when the scraper's `Accept` asks for `application/openmetrics-text`): requests by protocol (`h1`, `h2`, `h3`) and status class, request-duration and TTFB histograms, response body bytes, active and idle connections, TLS handshakes (full, resumed, QUIC) and failures by reason, TLS versions and key-exchange groups, upstream header times and failed tries by reason, reloads by result, SSL object and certificate cache hits and misses, and each loaded certificate's expiry (`notAfter`, seconds since the epoch). Counters live for the process: a reload keeps them. Restrict it with `allow`/`deny`.";
        "gzip_static" gzip_static: GzipStatic = GzipStatic::Off =>
            (HSL, 1, 1, "off", Inherit, p::gzip_static)
            "Send `FILE.gz` (and `FILE.br`) when the client accepts it; `always`: whatever it says.";
        "etag" etag: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Send an `ETag` with static files and answer `If-None-Match`, `If-Match` and `If-Range` by it; off: no `ETag`, and only `*` matches.";
        "open_log_file_cache" open_log_file_cache: Option<std::sync::Arc<crate::conf::log_cache::LogFileCache>> = None =>
            (HSL, 1, 4, "off", Inherit, h::open_log_file_cache)
            "Keep the files of `access_log` paths with variables open between requests: `max=N` paths (a new one closes the least recently used), `inactive=TIME` (10s) unused before one is closed, `min_uses=N` (1) uses within it before a file stays open, `valid=TIME` (60s) before the path is opened again (following a rotated file); `off`: each line opens and closes its file.";
        "open_file_cache" open_file_cache: Option<std::sync::Arc<crate::conf::open_file_cache::OpenFileCacheConf>> = None =>
            (HSL, 1, 2, "off", Inherit, h::open_file_cache)
            "`max=N [inactive=TIME]`: keep static files open, with their size and dates, and (with `open_file_cache_errors`) failed lookups: at most N entries, one per path and `disable_symlinks` policy (a new one drops the least recently used), each dropped after `inactive` (60s) unused; levels that inherit the directive share one cache (it serves the static and index modules; `try_files` and `if (-f ...)` always look at the disk). A cached file's metadata is used for `open_file_cache_valid` without looking at the disk, as nginx: a file rewritten in place meanwhile is sent with its old length, `ETag` and `Last-Modified`. `off` (default): every response sees the file as it is now (firstbyte keeps a descriptor only while one `stat` of the path finds the same device, inode, size, mtime and ctime, to the nanosecond; otherwise, and always under `disable_symlinks on|if_not_owner`, it opens the file again, as nginx opens per request).";
        "open_file_cache_valid" open_file_cache_valid: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, p::duration)
            "How long an `open_file_cache` entry is used before the path is checked again (same inode: the descriptor stays and the size and dates are refreshed; otherwise the file is opened again).";
        "open_file_cache_min_uses" open_file_cache_min_uses: u32 = 1 =>
            (HSL, 1, 1, "1", Inherit, p::count)
            "Uses of a path (within `inactive`) before `open_file_cache` keeps its descriptor and trusts its metadata; until then each request opens the file.";
        "open_file_cache_errors" open_file_cache_errors: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: `open_file_cache` also keeps failed lookups (404 for a missing file, 403 for a forbidden one) for `open_file_cache_valid`: a file created meanwhile stays 404.";
        "open_file_cache_events" open_file_cache_events: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Accepted and without effect, as nginx's on Linux (it uses kqueue file events only).";
        "log_not_found" log_not_found: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Write a missing file's `open() \"...\" failed (2: No such file or directory)` to the error log.";
        "expires" expires: Expires = Expires::Off =>
            (HSL, 1, 2, "off", Inherit, h::expires)
            "`Expires` and `Cache-Control` for 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 responses: `TIME` from now (`max-age`; negative: `no-cache`), `modified TIME` from the file's mtime, `@TIME` the next time of day (local time), `epoch`, `max` (2037, 10 years), `off`; a value with variables (e.g. from a `map`) is read per response (an invalid one is logged and sets nothing).";
        "autoindex" autoindex: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "A request ending in `/` whose directory has no `index` file is answered with a listing of the directory (GET and HEAD), as nginx renders it: directories first, then files, by name; names starting with `.` are left out; names are percent-encoded in links and HTML-escaped in text, and cut at 50 characters in HTML (UTF-8 characters with `charset utf-8`, else bytes).";
        "autoindex_format" autoindex_format: crate::conf::model::AutoindexFormat = crate::conf::model::AutoindexFormat::Html =>
            (HSL, 1, 1, "html", Inherit, p::autoindex_format)
            "The listing's format: `html`, `xml`, `json`, or `jsonp` (the JSON wrapped in the function named by the `callback` argument: letters, digits, `_` and `.`, at most 128; another name is 400; without one, plain JSON).";
        "autoindex_exact_size" autoindex_exact_size: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "HTML listing: sizes in bytes; `off`: rounded to K, M or G.";
        "autoindex_localtime" autoindex_localtime: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "HTML listing: times in the local time zone; `off`: UTC.";
        "empty_gif" empty_gif: bool = false =>
            (LOCATION, 0, 0, "", Own, p::present)
            "Answer GET and HEAD with nginx's 1x1 transparent GIF (43 bytes, `image/gif`, `Last-Modified` 28 Sep 1970, so `If-Modified-Since` gets a 304); other methods: 405.";
        "charset" charset: Option<String> = None =>
            (HSL, 1, 1, "off", Inherit, p::charset)
            "Add `; charset=NAME` to the `Content-Type` of responses whose type is in `charset_types` and that name none; with `source_charset` (or a charset the response names, with `override_charset`) the body is recoded through their `charset_map` (not a response with a `Content-Encoding`).";
        "source_charset" source_charset: Option<String> = None =>
            (HSL, 1, 1, "off", Inherit, p::charset)
            "The charset of the files and responses that name none, recoded to `charset` through a `charset_map` (a location with both and no map between them is an `[emerg]`).";
        // None: unset, nginx's unlimited with its size bound.
        "max_ranges" max_ranges: Option<u32> = None =>
            (HSL, 1, 1, "", Inherit, p::some_u32)
            "Most ranges served from one `Range` header: more are answered with the whole file (200); `0` turns byte ranges off. Unset: no count limit, but several ranges whose total plus 256 bytes each exceeds the file plus 4096 bytes get the whole file, as nginx.";
        "charset_types" charset_types: Vec<String> = crate::conf::model::CHARSET_TYPES.iter().map(|t| t.to_string()).collect() =>
            (HSL, 1, ANY, "text/html text/xml text/plain text/vnd.wap.wml application/javascript application/rss+xml", Inherit, p::mime_types)
            "MIME types `charset` applies to (`text/html` always); `*`: all.";
        "override_charset" override_charset: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Replace a charset the response already names (a proxied one) with `charset`'s.";
        "ssi" ssi: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Run the SSI commands (`<!--#echo -->`, `set`, `if`/`elif`/`else`/`endif`, `config`, `include virtual=`/`file=` with `wait`, `set` and `stub`, `block`/`endblock`) in responses whose type is in `ssi_types`, as the body streams through; such a response loses `Content-Length`, `Accept-Ranges` and (unless `ssi_last_modified`) `Last-Modified` and `ETag`. An include is a subrequest run on the same connection (50 deep at most, 1000 per request); its answer is spliced in place, in order; includes run side by side (up to 16 ahead of the one being sent) unless `wait=yes` or `set=` holds the page until one is done.";
        "ssi_types" ssi_types: Vec<String> = vec!["text/html".to_string()] =>
            (HSL, 1, ANY, "text/html", Inherit, p::mime_types)
            "MIME types `ssi` applies to besides `text/html`; `*`: all.";
        "ssi_silent_errors" ssi_silent_errors: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "A failed or malformed SSI command writes nothing instead of the `errmsg` text (`[an error occurred while processing the directive]`).";
        // 256: nginx's default.
        "ssi_value_length" ssi_value_length: u64 = 256 =>
            (HSL, 1, 1, "256", Inherit, p::bytes)
            "Longest SSI parameter value; a command with a longer one is an error (and the parser skips it).";
        "ssi_last_modified" ssi_last_modified: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Keep `Last-Modified` (and a weak `ETag`) of a response SSI processes.";
        // 2m: nginx's default since 1.21.4.
        "sendfile_max_chunk" sendfile_max_chunk: u64 = 2 << 20 =>
            (HSL, 1, 1, "2m", Inherit, p::bytes)
            "Accepted as nginx; firstbyte's `sendfile` calls move at most 64 KB each already.";
        // 1k: nginx's default.
        "ssi_min_file_chunk" ssi_min_file_chunk: u64 = 1024 =>
            (HSL, 1, 1, "1k", Inherit, p::bytes)
            "Accepted as nginx (a buffering detail of its file reads); firstbyte parses every chunk as it arrives.";
        // 16k: nginx's default on 64-bit platforms.
        "client_body_buffer_size" client_body_buffer_size: u64 = 16 << 10 =>
            (HSL, 1, 1, "16k", Inherit, p::bytes)
            "Memory for a request body read whole before it goes upstream (`proxy_request_buffering on`, `fastcgi_request_buffering on`, or a body of unknown length to an HTTP/1.0 or FastCGI upstream); past it the body goes to a temp file in `client_body_temp_path`. A body that fits is `$request_body`.";
        "client_body_in_file_only" client_body_in_file_only: BodyInFileOnly = BodyInFileOnly::Off =>
            (HSL, 1, 1, "off", Inherit, p::body_in_file_only)
            "`on`: a request body read whole before it goes upstream is always written to a file in `client_body_temp_path` (`$request_body_file`), even an empty one, and the file is kept after the request; `clean`: the file is removed after the request; `off`: memory first, as `client_body_buffer_size` says. As nginx, it does not apply to a body streamed with `proxy_request_buffering off`.";
        "client_body_in_single_buffer" client_body_in_single_buffer: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Accepted as nginx; firstbyte's `$request_body` is the whole body whenever it fits `client_body_buffer_size`, with or without it.";
    } };
}
pub(crate) use loc_directives;

/// Dynamic compression, http/server/location (`Compression`, `CompressionSettings`).
#[rustfmt::skip]
macro_rules! compression_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        "gzip" gzip: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Compress responses with gzip.";
        // 1.1: nginx's default; `true` means 1.0.
        "gzip_http_version" gzip_http10: bool = false =>
            (HSL, 1, 1, "1.1", Inherit, p::gzip_http_version)
            "Least HTTP version of requests whose responses gzip compresses: `1.1` or `1.0`.";
        // `text/html` is always compressed, as nginx; the list adds to it.
        "gzip_types" gzip_types: Vec<String> = Vec::new() =>
            (HSL, 1, ANY, "text/html", Inherit, p::mime_types)
            "MIME types compressed besides `text/html`; `*`: all.";
        // level 1: nginx's default, the cheapest.
        "gzip_comp_level" gzip_comp_level: u32 = 1 =>
            (HSL, 1, 1, "1", Inherit, p::between::<1, 9>)
            "gzip level, 1–9.";
        "gzip_min_length" gzip_min_length: u64 = 20 =>
            (HSL, 1, 1, "20", Inherit, p::bytes)
            "Smallest response (by Content-Length) compressed.";
        "gzip_proxied" gzip_proxied: crate::conf::model::GzipProxied = crate::conf::model::GzipProxied(crate::conf::model::GzipProxied::OFF) =>
            (HSL, 1, ANY, "off", Inherit, p::gzip_proxied)
            "Whether responses to requests that came through a proxy (`Via`) are compressed: `off`, `any`, or when the response says it is not cacheable (`expired`, `no-cache`, `no-store`, `private`, `no_last_modified`, `no_etag`) or the request has `auth`; nginx's rules, for Brotli too.";
        "gzip_disable" gzip_disable: crate::conf::model::GzipDisable = crate::conf::model::GzipDisable::default() =>
            (HSL, 1, ANY, "", Inherit, p::gzip_disable)
            "No compression for requests whose `User-Agent` matches one of these regular expressions (case-insensitive), or `msie6` (MSIE 4–6 without SV1).";
        "gzip_vary" gzip_vary: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Add `Vary: Accept-Encoding` to compressible responses.";
        "brotli" brotli: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Compress responses with Brotli (the ngx_brotli module's directive).";
        "brotli_types" brotli_types: Vec<String> = Vec::new() =>
            (HSL, 1, ANY, "text/html", Inherit, p::mime_types)
            "MIME types Brotli-compressed besides `text/html`; `*`: all.";
        // quality 6: the ngx_brotli module's default and the seed's advice.
        "brotli_comp_level" brotli_comp_level: u32 = 6 =>
            (HSL, 1, 1, "6", Inherit, p::between::<0, 11>)
            "Brotli quality, 0–11 (6: the module's default, a good speed/size balance).";
    } };
}
pub(crate) use compression_directives;

/// http and server level (`ServerConf`, `SrvSettings`).
#[rustfmt::skip]
macro_rules! srv_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // Defaults below are nginx's.
        "client_header_timeout" client_header_timeout: Duration = Duration::from_secs(60) =>
            (HS, 1, 1, "60s", Inherit, p::duration)
            "Time allowed to receive a request's headers.";
        "underscores_in_headers" underscores_in_headers: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Whether header names with underscores are valid (else, with ignore_invalid_headers, dropped).";
        "ignore_invalid_headers" ignore_invalid_headers: bool = true =>
            (HS, 1, 1, "on", Inherit, p::on_off)
            "Drop request headers with invalid names (nginx's rule: letters, digits, '-', and '_' if allowed).";
        // 1000: nginx's default (1.29.3).
        "max_headers" max_headers: u32 = 1000 =>
            (HS, 1, 1, "1000", Inherit, p::count)
            "Most header lines one request may have, as nginx: more is 400 \"Request Header Or Cookie Too Large\" (nginx's 494) and the connection closes. Dropped invalid lines do not count; in HTTP/2 and HTTP/3, `cookie` fields and pseudo-headers do not either. An HTTP/1.x head of more than 100 lines is refused by the HTTP/1 parser first (431), whatever this says.";
        "http2_max_concurrent_streams" http2_max_concurrent_streams: u32 = 128 =>
            (HS, 1, 1, "128", Inherit, p::count)
            "Streams one HTTP/2 connection may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`); more are refused with `REFUSED_STREAM`.";
        // 1m: firstbyte's (nginx's is 64k).
        "http2_body_preread_size" http2_body_preread_size: u64 = 1 << 20 =>
            (HS, 1, 1, "1m", Inherit, p::bytes)
            "HTTP/2: request body bytes a client may send on a stream before the server reads them (the stream's initial window, `SETTINGS_INITIAL_WINDOW_SIZE`; at most 2147483647). firstbyte's default is 1m, nginx's 64k: one upload can use the whole 1 MiB connection window in one round trip.";
        "client_header_buffer_size" client_header_buffer_size: u64 = 1 << 10 =>
            (HS, 1, 1, "1k", Inherit, p::bytes)
            "HTTP/1.x: the first buffer a request head fills, whole lines in order, before `large_client_header_buffers`; a head that fits it is never refused.";
        // off: nothing observed unless asked for (the tuning module's default).
        "tuning_advisor" tuning_advisor: crate::advisor::AdvisorMode = crate::advisor::AdvisorMode::Off =>
            (HS, 1, 1, "off", Inherit, p::tuning_advisor)
            "The tuning advisor (GetPageSpeed's ngx_http_tuning, built in): `on` observes every response of the server in fixed-memory histograms (upstream header and body sizes, time to the upstream's header, request bodies, TLS response bodies, keep-alive reuse, and per TLS record policy the RTT, congestion window and retransmissions from `TCP_INFO` at the first and last byte, time to first and last byte; `TCP_INFO` is read for up to 1,000 responses a second, a sample above that) for `tuning_advisor_status`; nothing is allocated per request. `apply` (firstbyte's own) also switches the record policy (`ssl_dyn_rec_enable`) of the servers with `apply` by itself when the evidence is clear: from `off` or `on` to `adaptive` when, after at least 200 responses, more than 5% of them (beyond 2 sigma) saw a retransmission and the median response is at most 256k; back to the configured policy when fewer than 1% did. A server on `adaptive` (the default) is never switched. Each switch is logged at `notice` with its reason; nothing else is ever changed, and a reload starts from the configured policy again.";
        // 4 buffers of 8k: nginx's default.
        "large_client_header_buffers" large_client_header_buffers: (usize, usize) = (4, 8 << 10) =>
            (HS, 2, 2, "4 8k", Inherit, p::buffers)
            "NUMBER SIZE. HTTP/1.x, as nginx: lines that do not fit `client_header_buffer_size` go whole into up to NUMBER buffers of SIZE; a request line that fits none gets 414, a header line (or the final CRLF) 400 \"Request Header Or Cookie Too Large\". firstbyte counts lines as `METHOD TARGET HTTP/1.1` and `Name: value`, each with CRLF (hyper keeps no spacing), and hyper refuses a head past 64k (or past all the buffers, when larger) first, with 431. HTTP/2: the decoded header list (name + value + 32 per field) is bounded by NUMBER x SIZE (`SETTINGS_MAX_HEADER_LIST_SIZE`; more: 431).";
        // nginx 1.15-1.24's form (removed in 1.25): accepted with their warning, so old configs load.
        "ssl" ssl: bool = false =>
            (HS, 1, 1, "off", Inherit, p::ssl_deprecated)
            "Deprecated (nginx 1.15; removed in 1.25, accepted here as nginx 1.22 does, with its `[warn]`): `on` makes every address whose default server block has it speak TLS, as if its `listen` said `ssl`; write `listen ... ssl` instead.";
        // HTTP/3 and QUIC (nginx's ngx_http_v3_module). Apart from `http3`, the values of an
        // address's default server block apply to every QUIC connection of that address, as in
        // nginx (one endpoint per UDP socket).
        "http3" http3: bool = true =>
            (HS, 1, 1, "on", Inherit, p::on_off)
            "Serve HTTP/3 for this server block on its `listen ... quic` sockets. As nginx, a client whose SNI (or, without SNI, the address's default server) names a block with `http3 off` is refused in the QUIC handshake (a TLS alert: nginx's is `no_application_protocol`, firstbyte's `access_denied`), and a request whose Host names such a block on a connection made for another gets 421 Misdirected Request. A block with `http3 off` sends no automatic `Alt-Svc`.";
        "http3_hq" http3_hq: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Also speak `hq-interop` (HTTP/0.9 over QUIC, the QUIC interop runner's protocol) on the block's `listen ... quic` sockets: the endpoint offers ALPN `hq-interop` beside `h3` when the address's default server block has it on, and a client that chooses it opens a bidirectional stream per request, sends `GET /path` and a line end, and gets the response body alone, then the stream's end. The request goes through the usual locations, access rules and logs, as an HTTP/0.9 request (GET only, no headers; `$server_protocol` empty, `$request` `GET /path`, `$http3` `hq`, error pages as bodies without a status line). As nginx, the client's SNI (or the address's default server) picks the block, and a block that speaks none of the protocols the client offers refuses the handshake: `http3 off` with `http3_hq on` speaks hq alone.";
        "http3_max_concurrent_streams" http3_max_concurrent_streams: u32 = 128 =>
            (HS, 1, 1, "128", Inherit, p::count)
            "Request streams (QUIC bidirectional streams) one HTTP/3 connection may have open at once (the `initial_max_streams_bidi` transport parameter); a client opens the next when one ends. The address's default server block decides.";
        "http3_stream_buffer_size" http3_stream_buffer_size: u64 = 64 << 10 =>
            (HS, 1, 1, "64k", Inherit, p::bytes)
            "HTTP/3: request body bytes a client may send on one stream before the server reads them (QUIC's per-stream receive window); the connection's window is this times the streams allowed (`http3_max_concurrent_streams` plus 16 unidirectional), as nginx. nginx also holds a response stream to this many unacknowledged bytes; firstbyte does not (quinn's connection send window bounds responses), so a download is not held to 64k per round trip. The address's default server block decides.";
        "quic_retry" quic_retry: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Validate a client's address before the handshake: its first Initial packet is answered with a Retry packet carrying a token, and only a client that echoes it from the same address gets a handshake (one more round trip; no server work or amplification for spoofed addresses). Tokens are sealed with a key derived from `quic_host_key` and last 15 s. The address's default server block decides.";
        "quic_gso" quic_gso: bool = true =>
            (HS, 1, 1, "on", Inherit, p::on_off)
            "Send a connection's packets in batches with UDP generic segmentation offload (`UDP_SEGMENT`, where the kernel has it): fewer system calls, the same datagrams on the wire. firstbyte's default is on, nginx's off: a deliberate difference, since GSO changes nothing a client sees. The address's default server block decides.";
        "quic_host_key" quic_host_key: Option<crate::conf::quic::QuicHostKey> = None =>
            (HS, 1, 1, "", Inherit, crate::conf::quic::host_key)
            "A file holding a secret (at least 16 bytes, e.g. `openssl rand 32`), read at load, from which the keys of stateless resets, of the connection-ID check that precedes a reset, and of address-validation (Retry) tokens are derived (HKDF-SHA256): a restarted server, or another instance at the same address, with the same file ends a client's stale connection with a stateless reset the client accepts, and takes the others' Retry tokens. Unset: a random secret made once when firstbyte starts and kept across reloads (nginx makes a new one at every reload). An unreadable, empty or shorter file is an `[emerg]`. The address's default server block decides.";
        "quic_active_connection_id_limit" quic_active_connection_id_limit: u32 = crate::conf::quic::QUINN_CID_LIMIT =>
            (HS, 1, 1, "5", Inherit, crate::conf::quic::active_connection_id_limit)
            "Connection IDs of a client the server keeps (the `active_connection_id_limit` transport parameter). firstbyte's QUIC stack (quinn) always keeps and advertises 5, so 5 is the default (nginx's is 2) and any other value is refused at load rather than silently not applied.";
    } };
}
pub(crate) use srv_directives;

/// TLS, http and server level (`TlsConf`, `TlsSettings`).
#[rustfmt::skip]
macro_rules! tls_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // Defaults below are nginx's.
        "ssl_password_file" password_file: Option<PathBuf> = None =>
            (HS, 1, 1, "", Inherit, p::conf_file)
            "Passphrases, one a line, for encrypted PKCS#8 keys.";
        "ssl_reject_handshake" reject_handshake: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Refuse TLS handshakes that select this server (by SNI, or as the address's default server when the name matches none or none is sent) with an `unrecognized_name` alert, as nginx. A server with it needs no `ssl_certificate`; on a default server it keeps unknown names from seeing another site's certificate. Not with `listen ... quic`.";
        "ssl_protocols" protocols: Vec<TlsVersion> = vec![TlsVersion::Tls12, TlsVersion::Tls13] =>
            (HS, 1, ANY, "TLSv1.2 TLSv1.3", Inherit, srv::protocols)
            "TLS versions offered (TLSv1 and TLSv1.1 are dropped with a warning).";
        "ssl_ciphers" ciphers: String = "HIGH:!aNULL:!MD5".to_string() =>
            (HS, 1, 1, "HIGH:!aNULL:!MD5", Inherit, p::text)
            "TLS 1.2 cipher suites, OpenSSL syntax.";
        "ssl_prefer_server_ciphers" prefer_server_ciphers: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Choose the cipher suite by the server's order.";
        // on: firstbyte's default (nginx 1.29.1's is off, for OpenSSL's cost of compressing
        // per handshake, which firstbyte does not pay); measured in
        // bench/results/2026-11-26-cert-compression.
        "ssl_certificate_compression" certificate_compression: bool = true =>
            (HS, 1, 1, "on", Inherit, p::on_off)
            "TLS 1.3 certificate compression (RFC 8879): a client that offers it gets the certificate chain (with its OCSP staple) as a CompressedCertificate, brotli or zlib (the first of these it offers; Chrome offers brotli, Safari zlib), compressed once per chain (~50 µs), not per handshake; clients that do not, and TLS 1.2, get the plain Certificate. Measured, the server's first flight (ServerHello..Finished): the built-in site's 688 → 643 bytes, an ECDSA P-256 leaf + intermediate 1,838 → 1,420 (2 segments of 1,448 bytes → 1), RSA 2048 leaf + intermediate 2,616 → 2,225, with a cross-signed root 3,697 → 2,945. Over TCP all of these fit the initial window either way; over QUIC the last one fits a one-datagram client's anti-amplification limit (3,600 bytes) only compressed: one round trip fewer. firstbyte's default is `on` (nginx's is `off`, for OpenSSL's cost of compressing at run time, which firstbyte does not pay). Compressed client certificates are never taken, as nginx. Unlike nginx, works with `ssl_stapling`. On `listen ... quic`, the address's default server decides.";
        "ssl_ecdh_curve" ecdh_curve: String = "auto".to_string() =>
            (HS, 1, 1, "auto", Inherit, p::text)
            "Key-exchange groups, e.g. `X25519:prime256v1`.";
        "ssl_early_data" early_data: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Accept TLS 1.3 early data (0-RTT) over TCP (up to 16 KB, answered with the server's Finished) and HTTP/3: a resumed client's GET or HEAD without a body is answered a round trip sooner; other requests in early data (taken before the client's Finished) get `425 Too Early` (RFC 8470). Tickets are then single-use entries of `ssl_session_cache` (required), so early data cannot be replayed.";
        "ssl_session_tickets" session_tickets: bool = true =>
            (HS, 1, 1, "on", Inherit, p::on_off)
            "Resume sessions with stateless tickets.";
        // 5 minutes.
        "ssl_session_timeout" session_timeout: Duration = Duration::from_secs(300) =>
            (HS, 1, 1, "5m", Inherit, p::duration)
            "How long a session can be resumed.";
        "ssl_session_cache" session_cache: SessionCache = SessionCache::None =>
            (HS, 1, 2, "none", Inherit, srv::session_cache_value)
            "Stateful session cache: `off`, `none`, `builtin[:N]`, `shared:NAME:SIZE` (~4000 sessions per MB).";
        "ssl_verify_client" verify_client: VerifyClient = VerifyClient::Off =>
            (HS, 1, 1, "off", Inherit, srv::verify_client)
            "Ask for a client certificate: `on`, `off`, `optional`, `optional_no_ca`. As nginx, the handshake completes with any certificate whose key the client proves it holds (or none), and the chain is verified as OpenSSL does: it must lead to a self-signed certificate of `ssl_client_certificate` or `ssl_trusted_certificate` (X.509 v1 taken, a CA file's own certificate taken as the client's); every certificate current, issuers CAs, a critical extension other than basic constraints, key usage, extended key usage and subject alternative name refused. With `on`, a request without a verified certificate gets 400 (`No required SSL certificate was sent`, `The SSL certificate error`); with `optional`, 400 for a certificate that failed; `$ssl_client_verify` says why.";
        "ssl_client_certificate" client_certificate: Option<PathBuf> = None =>
            (HS, 1, 1, "", Inherit, p::conf_file)
            "CA certificates that client certificates must chain to.";
        "ssl_stapling" stapling: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Staple an OCSP response: from `ssl_stapling_file`, else fetched from the certificate's responder (AIA, or `ssl_stapling_responder`) by HTTP/1.0 GET as nginx sends it, cached and refreshed before `nextUpdate` (at most hourly). As nginx, the first handshake starts the fetch and goes without; a failure is a `[warn]` and the certificate goes out bare. The issuer comes from the certificate chain or `ssl_trusted_certificate`; the responder's host is resolved by the system resolver.";
        "ssl_stapling_verify" stapling_verify: bool = false =>
            (HS, 1, 1, "off", Inherit, p::on_off)
            "Check fetched OCSP responses: signed by the issuer, or by a responder it delegated to (`id-kp-OCSPSigning`), with the issuer in (or signed by a certificate of) `ssl_trusted_certificate` or `ssl_client_certificate`. An unverified response is not stapled.";
        "ssl_stapling_responder" stapling_responder: Option<String> = None =>
            (HS, 1, 1, "", Inherit, srv::stapling_responder)
            "OCSP responder URL (`http://` only, as nginx), instead of the certificate's Authority Information Access.";
        "ssl_trusted_certificate" trusted_certificate: Option<PathBuf> = None =>
            (HS, 1, 1, "", Inherit, p::conf_file)
            "CA certificates trusted but not sent to clients: for client certificates (`ssl_verify_client`, beside `ssl_client_certificate`, whose names alone are sent) and for OCSP stapling (the issuer, and the anchors of `ssl_stapling_verify`).";
        "ssl_verify_depth" verify_depth: u32 = 1 =>
            (HS, 1, 1, "1", Inherit, p::count)
            "Most intermediate certificates between a client certificate and the self-signed CA its chain ends at, as nginx with OpenSSL ≥ 1.1.0 counts them (0: signed by that CA itself; an intermediate CA in `ssl_client_certificate` still counts); a longer chain fails with `certificate chain too long`.";
        "ssl_crl" crl: Option<PathBuf> = None =>
            (HS, 1, 1, "", Inherit, p::conf_file)
            "CRLs (PEM; version 1 as `openssl ca -gencrl` makes them, or 2) client certificates are checked against with `ssl_verify_client`: as nginx (OpenSSL's `CRL_CHECK_ALL`), every certificate of the chain, the CA's own included, needs a CRL signed by its issuer (`unable to get certificate CRL`), and an expired CRL fails the check. A CRL with a critical extension is not used.";
        "ssl_ocsp" ocsp: crate::conf::model::OcspMode = crate::conf::model::OcspMode::Off =>
            (HS, 1, 1, "off", Inherit, srv::ocsp_mode)
            "OCSP check of client certificates (with `ssl_verify_client`), as nginx ≥ 1.19: after the handshake and before the first request, each certificate of the verified chain (`leaf`: the client's own only; the self-signed CA never) is asked of its responder (AIA, or `ssl_ocsp_responder`) by HTTP/1.0 GET. The response must be signed by the certificate's issuer or by a responder the issuer delegated to (`id-kp-OCSPSigning`), and current (`thisUpdate`/`nextUpdate`, 5 minutes of leeway). A revoked or unknown certificate, or a failed request (responder down, bad response; 60 s at most), gets 400 with `$ssl_client_verify` `FAILED:certificate revoked`, `FAILED:certificate status unknown` or `FAILED:certificate status request failed`. A responder named by host name is resolved with `resolver` (none: `no resolver defined to resolve NAME`, a failure), except `ssl_ocsp_responder`'s, which falls back to the system resolver. Not with `ssl_verify_client optional_no_ca`.";
        "ssl_ocsp_responder" ocsp_responder: Option<String> = None =>
            (HS, 1, 1, "", Inherit, srv::ocsp_responder)
            "OCSP responder URL (`http://` only, as nginx) for `ssl_ocsp`, instead of each certificate's Authority Information Access.";
        "ssl_ocsp_cache" ocsp_cache: Option<crate::conf::model::OcspCacheZone> = None =>
            (HS, 1, 1, "off", Inherit, srv::ocsp_cache)
            "`off` or `shared:NAME:SIZE` (at least 32k): `ssl_ocsp` results (good, revoked or unknown, as nginx) kept until the response's `nextUpdate` (an hour without one) in a cache shared by the servers naming it (about 4000 entries per MB; the oldest go when full). Without it every connection asks the responder.";
        "ssl_stapling_file" stapling_file: Option<PathBuf> = None =>
            (HS, 1, 1, "", Inherit, p::conf_file)
            "DER OCSP response to staple.";
        "ssl_certificate_cache" certificate_cache: CertificateCache = CertificateCache::Off =>
            (HS, 1, 3, "off", Inherit, p::certificate_cache)
            "Cache of certificates and keys named with variables (`ssl_certificate /certs/$ssl_server_name.crt`): `max=N` entries (LRU; a certificate and its key are two, as nginx), dropped after `inactive=` (10s) unused, revalidated by mtime and inode after `valid=` (60s).";
    } };
}
pub(crate) use tls_directives;

/// `proxy_*`, http/server/location (`ProxyConf`, `ProxySettings`).
#[rustfmt::skip]
macro_rules! proxy_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // HTTP/1.0: nginx's default.
        "proxy_http_version" http_version: crate::conf::model::ProxyHttpVersion = crate::conf::model::ProxyHttpVersion::V10 =>
            (HSL, 1, 1, "1.0", Inherit, px::http_version)
            "HTTP version to the upstream: `1.0`, `1.1` (keepalive pools and WebSocket) or `2`: HTTP/2 as nginx 1.29, with prior knowledge (h2c) to an `http://` upstream and ALPN `h2` to an `https://` one (an upstream that accepts only another protocol by ALPN fails the handshake: 502); one request at a time on a connection, which `keepalive` keeps for the next; connection-specific request headers (`Connection`, `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding`, `Upgrade`, a `TE` other than `trailers`) are not sent and `Host` goes as `:authority`; response headers may total at most `proxy_buffer_size` or 64k, whichever is larger.";
        // 60 s: nginx's default for the three timeouts.
        "proxy_connect_timeout" connect_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Time allowed to connect (and finish TLS) to an upstream.";
        "proxy_read_timeout" read_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Longest wait for the upstream's response header, and between two reads of its body.";
        "proxy_send_timeout" send_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Longest wait between two writes of the request to the upstream.";
        // off: firstbyte streams (seed 001: never hold back bytes that could be sent); nginx's default is on.
        "proxy_buffering" buffering: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "firstbyte's default is off: the upstream's bytes go to the client as they arrive. nginx buffers by default; `on` reads the upstream as fast as it sends, into `proxy_buffers` and then a temp file, as nginx.";
        // off: nginx's default.
        "proxy_ignore_client_abort" ignore_client_abort: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: a client that closes its connection (or resets its stream) does not end the request to the upstream: it runs to its end and the rest of the response is read and discarded, as nginx; `off`: the upstream connection is closed then (the access log shows 499).";
        "proxy_force_ranges" force_ranges: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: byte ranges of a proxied 200 with a length whether or not the upstream sent `Accept-Ranges` (one range; several from a cached response); the upstream's own `Accept-Ranges` is replaced by `bytes`.";
        // off: nginx's default.
        "proxy_intercept_errors" intercept_errors: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "An upstream response with a status of 300 or more that an `error_page` names is replaced by that page, as nginx.";
        // nginx's default.
        "proxy_next_upstream" next_upstream: NextUpstream = NextUpstream::DEFAULT =>
            (HSL, 1, ANY, "error timeout", Inherit, px::next_upstream)
            "When a request goes to the next server: `error`, `timeout`, `invalid_header`, `http_500`, `http_502`, `http_503`, `http_504`, `http_403`, `http_404`, `http_429`, `non_idempotent` (POST, LOCK and PATCH are retried once sent only with it), or `off`. As nginx, nothing is retried once the response has started, nor a request whose body was streamed (`proxy_request_buffering off`) once it was sent.";
        // on: nginx's default.
        "proxy_request_buffering" request_buffering: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "`on` (nginx's default): the request body is read whole (memory up to `client_body_buffer_size`, then a temp file in `client_body_temp_path`) before the upstream is connected, and sent with its `Content-Length`, so a slow client holds no upstream connection and the body can go to the next server; `off`: it streams to the upstream as it arrives (chunked when its length is unknown, over `proxy_http_version 1.1`).";
        "proxy_method" method: Option<crate::conf::vars::ComplexValue> = None =>
            (HSL, 1, 1, "", Inherit, px::method)
            "The method of the request to the upstream (variables allowed); unset: the client's.";
        "resolver" resolver: Option<crate::conf::model::Resolver> = None =>
            (HSL, 1, ANY, "", Inherit, px::resolver)
            "DNS servers (`ADDRESS[:PORT]`, port 53 by default; `ipv4=off`, `ipv6=off`, `valid=TIME`) that a `proxy_pass` with variables asks for a name that is neither an `upstream` nor an address: A and AAAA over UDP (TCP for a truncated answer), both to the next server for each name and again to the next after 5 s without an answer (a format error counts as none), CNAMEs followed; an error answer to either is the name's error (502), as nginx; the addresses are kept for its records' smallest TTL (or `valid=`). Without it such a name is 502 (`no resolver defined to resolve NAME`). `ssl_ocsp` responders are resolved with it too; `ssl_stapling`'s by the system resolver. The `http` level's (or an `upstream` block's own) re-resolves that block's `server NAME resolve` lines (see `upstream`).";
        "resolver_timeout" resolver_timeout: Duration = Duration::from_secs(30) =>
            (HSL, 1, 1, "30s", Inherit, px::timeout)
            "Longest wait for the `resolver`'s answer (then 502, `could not be resolved (110: Operation timed out)`). The `http` level's (or an `upstream` block's own) bounds each query of its `server NAME resolve` lines.";
        "proxy_bind" bind: Option<crate::conf::model::ProxyBind> = None =>
            (HSL, 1, 2, "off", Inherit, px::bind)
            "Local address (`ADDRESS[:PORT]`, variables allowed; an empty value binds none) that connections to the upstream come from; `transparent` sets `IP_TRANSPARENT` so a non-local address can be used (needs `CAP_NET_ADMIN` or `CAP_NET_RAW`). `off`: the system's choice.";
        "proxy_set_body" set_body: Option<crate::conf::vars::ComplexValue> = None =>
            (HSL, 1, 1, "", Inherit, px::method)
            "The request body sent to the upstream instead of the client's (variables allowed), with its `Content-Length`.";
        // 0: no limit (nginx's default).
        "proxy_limit_rate" limit_rate: crate::conf::model::SizeValue = crate::conf::model::SizeValue::Fixed(0) =>
            (HSL, 1, 1, "0", Inherit, p::size_value)
            "Most bytes per second read from the upstream for one response (with `proxy_buffering` off, the rate at which it reaches the client); one second's worth goes at once, as `limit_rate`. 0: no limit. May hold variables, evaluated once the upstream's response header has come (`proxy_limit_rate $upstream_http_x_rate;`); an invalid size (an empty one too) is an error-log line and no limit.";
        "proxy_pass_request_headers" pass_request_headers: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "`off`: the client's request headers are not passed (only those `proxy_set_header` makes).";
        // off: nginx's default (nginx 1.27.2).
        "proxy_pass_trailers" pass_trailers: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: the trailer fields of a chunked HTTP/1.1 upstream response, or of any response of an HTTP/2 upstream (`proxy_http_version 2`), go to the client after the body (before `add_trailer`'s), as nginx: over HTTP/2 and HTTP/3, and over HTTP/1.1 to a client whose `TE` names `trailers` (those the upstream's `Trailer` field announced). Hop-by-hop fields, `Date`, `Server`, `X-Pad`, `X-Accel-*` and `proxy_hide_header`'s stay out, as from the header. `off`: they are dropped; `$upstream_trailer_NAME` reads them either way.";
        "early_hints" early_hints: Vec<crate::conf::vars::ComplexValue> = Vec::new() =>
            (HSL, 1, ANY, "", Inherit, px::predicates)
            "Values (variables allowed; nginx 1.29): when any is non-empty and not `0`, an upstream's `103 Early Hints` goes on to the client as it comes, before the final response (HTTP/1.1, HTTP/2, HTTP/3; not HTTP/1.0), its fields filtered as the header's (`proxy_hide_header`, hop-by-hop ones); at most `proxy_buffer_size` bytes of 103s per try, as nginx (the rest dropped, `upstream sent too big early hints` at `info`). Evaluated when the request goes upstream (nginx: when the 103 comes). Over HTTP/1.1 a 103 that comes while the connection still has an earlier response's bytes to write is dropped: it would have to go before them.";
        "proxy_pass_request_body" pass_request_body: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "`off`: the client's request body is not passed (nor its length).";
        // user:rw: nginx's default.
        "proxy_store_access" store_access: u32 = 0o600 =>
            (HSL, 1, 3, "user:rw", Inherit, px::store_access)
            "The mode of a file `proxy_store` keeps: `user:rw|r`, `group:rw|r`, `all:rw|r` (the user's `rw` unless `user:` says otherwise); the directories it makes get `x` beside each `r` (less the umask).";
        // 0: no limit but the number of servers (nginx's default).
        "proxy_next_upstream_tries" next_upstream_tries: u32 = 0 =>
            (HSL, 1, 1, "0", Inherit, p::count)
            "Most servers one request tries (0: every server once).";
        // 0: no limit (nginx's default).
        "proxy_next_upstream_timeout" next_upstream_timeout: Duration = Duration::ZERO =>
            (HSL, 1, 1, "0", Inherit, p::duration)
            "No next server once this long has passed since the first try (0: no limit).";
    } };
}
pub(crate) use proxy_directives;

/// `proxy_*` buffers (`ProxyBuffers`, `ProxyBufferSettings`).
#[rustfmt::skip]
macro_rules! proxy_buffer_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // nginx's defaults on x86_64 Linux, where a memory page is 4 KiB.
        "proxy_buffer_size" buffer_size: usize = 4096 =>
            (HSL, 1, 1, "4k", Inherit, px::buffer_size)
            "Memory for the start of a buffered response, beside `proxy_buffers`.";
        "proxy_busy_buffers_size" busy_size: usize = 8192 =>
            (HSL, 1, 1, "8k", Inherit, px::buffer_size)
            "Checked as nginx (unset: twice the larger of `proxy_buffer_size` and one of `proxy_buffers`); firstbyte sends from any buffer as the client takes it.";
        "proxy_max_temp_file_size" max_temp_file_size: u64 = 1024 << 20 =>
            (HSL, 1, 1, "1024m", Inherit, p::bytes)
            "Largest temp file of one buffered response; past it (or with 0) the upstream is read only as fast as the client takes the response.";
        "proxy_temp_file_write_size" temp_file_write_size: usize = 8192 =>
            (HSL, 1, 1, "8k", Inherit, px::buffer_size)
            "Largest write to a temp file at once (unset: twice the larger of `proxy_buffer_size` and one of `proxy_buffers`).";
    } };
}
pub(crate) use proxy_buffer_directives;

/// `proxy_cache*` of a location (`CacheConf`, `ProxyCacheSettings`); `proxy_cache_path` and
/// `proxy_cache_valid` are hand-written (`cache.rs`).
#[rustfmt::skip]
macro_rules! proxy_cache_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        "proxy_cache" zone_name: Option<crate::conf::cache::ZoneRef> = None =>
            (HSL, 1, 1, "off", Inherit, crate::conf::cache::zone_ref)
            "Cache responses in the `proxy_cache_path` zone of this name (with variables: evaluated per request; an empty value caches nothing, an unknown zone is a 500); `off`: none. A response is stored (in a file named by the MD5 of `proxy_cache_key`, written to a temp file and renamed once its body is complete) when its status has a `proxy_cache_valid` time or the upstream gives one (`X-Accel-Expires`, then `Cache-Control: max-age`/`s-maxage`, then `Expires`), and not when it has `Set-Cookie`, `Cache-Control: no-cache|no-store|private`, `Vary: *` (unless `proxy_ignore_headers` names them) or a true `proxy_no_cache`. A stored response is served with its stored header fields; `$upstream_cache_status` is `MISS`, `BYPASS`, `EXPIRED`, `STALE`, `UPDATING`, `REVALIDATED` or `HIT`. A client that leaves before the body is complete leaves nothing stored.";
        "proxy_cache_key" key: crate::conf::vars::ComplexValue = crate::conf::cache::default_key() =>
            (HSL, 1, 1, "$scheme$proxy_host$request_uri", Inherit, crate::conf::cache::key)
            "What identifies a cached response (variables allowed).";
        "proxy_cache_methods" methods: Vec<String> = vec!["GET".to_string(), "HEAD".to_string()] =>
            (HSL, 1, ANY, "GET HEAD", Inherit, crate::conf::cache::methods)
            "Request methods whose responses are cached: `GET`, `HEAD` or `POST`, as nginx (GET and HEAD always are; any other is `invalid value`).";
        "proxy_cache_min_uses" min_uses: u32 = 1 =>
            (HSL, 1, 1, "1", Inherit, p::positive)
            "A response is stored once this many requests asked for its key.";
        "proxy_cache_lock" lock: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: while one request fetches a missing key from the upstream, others for it wait (up to `proxy_cache_lock_timeout`) and are then answered from the cache.";
        "proxy_cache_lock_timeout" lock_timeout: Duration = Duration::from_secs(5) =>
            (HSL, 1, 1, "5s", Inherit, p::duration)
            "Longest wait on `proxy_cache_lock`; then the request goes to the upstream and its response is not stored.";
        "proxy_cache_lock_age" lock_age: Duration = Duration::from_secs(5) =>
            (HSL, 1, 1, "5s", Inherit, p::duration)
            "After this long one more request for a locked key may go to the upstream.";
        "proxy_cache_use_stale" use_stale: u32 = 0 =>
            (HSL, 1, ANY, "off", Inherit, crate::conf::cache::use_stale)
            "An expired stored response is served (`STALE`) instead of an upstream `error`, `timeout`, `invalid_header` or `http_500`, `http_502`, `http_503`, `http_504`, `http_403`, `http_404`, `http_429` answer; `updating`: while another request refreshes it (`UPDATING`). The upstream's `Cache-Control: stale-while-revalidate=N` allows `updating` (and `error`, `timeout`, `invalid_header`), `stale-if-error=N` those errors, for N seconds past its expiry (unless `proxy_ignore_headers Cache-Control`).";
        "proxy_cache_revalidate" revalidate: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: an expired stored response with `Last-Modified` or `ETag` is revalidated with `If-Modified-Since`/`If-None-Match`; the upstream's 304 makes it fresh again (`REVALIDATED`) for the time the 304 gives (`X-Accel-Expires`, `Cache-Control`, `Expires`, with its `stale-*` times), else for the stored response's own, else `proxy_cache_valid`'s, as nginx.";
        // None: nginx's default (no limit).
        "proxy_cache_max_range_offset" max_range_offset: Option<u64> = None =>
            (HSL, 1, 1, "", Inherit, p::some_count)
            "A request whose (first) range starts at this offset or later, or is a suffix range (`bytes=-N`), is not cached: it goes to the upstream with its `Range`, as nginx.";
        "proxy_cache_convert_head" convert_head: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "`on`: a HEAD request that may be cached goes to the upstream as GET, so the stored response has its body (the key should then not hold `$request_method`).";
        "proxy_cache_background_update" background_update: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "`on`: an expired stored response that may be served while it is updated (`proxy_cache_use_stale updating`, or the upstream's `Cache-Control: stale-while-revalidate=N` still running) is answered at once (`STALE`) while a background request refreshes it: one per key at a time (conditional with `proxy_cache_revalidate`), finished even when the client leaves. An HTTP/1.x connection that ends after that answer (`Connection: close`) closes once the background request is done, as nginx's; a keep-alive one serves its next request at once.";
    } };
}
pub(crate) use proxy_cache_directives;

/// `proxy_ssl_*` (`ProxySsl`, `ProxySslSettings`).
#[rustfmt::skip]
macro_rules! proxy_ssl_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // Defaults below are nginx's.
        "proxy_ssl_password_file" password_file: Option<PathBuf> = None =>
            (HSL, 1, 1, "", Inherit, p::conf_file)
            "Passphrases for an encrypted `proxy_ssl_certificate_key`.";
        "proxy_ssl_trusted_certificate" trusted_certificate: Option<PathBuf> = None =>
            (HSL, 1, 1, "", Inherit, p::conf_file)
            "CA certificates an upstream's certificate is verified against (`proxy_ssl_verify on`).";
        "proxy_ssl_crl" crl: Option<PathBuf> = None =>
            (HSL, 1, 1, "", Inherit, p::conf_file)
            "Revoked certificates (PEM CRLs) for upstream verification.";
        "proxy_ssl_verify_depth" verify_depth: u32 = 1 =>
            (HSL, 1, 1, "1", Inherit, p::count)
            "Most intermediate certificates between the upstream's certificate and a self-signed certificate of `proxy_ssl_trusted_certificate`, as nginx with OpenSSL ≥ 1.1.0 counts them; a longer chain fails (`certificate chain too long`).";
        "proxy_ssl_verify" verify: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Verify the upstream's certificate and name, as OpenSSL does for nginx: the chain leads to a self-signed certificate of `proxy_ssl_trusted_certificate` (X.509 v1 taken; every certificate current; issuers are CAs; the extended key usage, if any, allows a TLS server), and the name matches a DNS subject alternative name (`*` as a whole leftmost label), else the subject's common name.";
        "proxy_ssl_server_name" server_name: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Send SNI to the upstream.";
        "proxy_ssl_name" name: Option<String> = None =>
            (HSL, 1, 1, "", Inherit, px::ssl_name)
            "Name verified and sent as SNI (default: the `proxy_pass` host); a port in it is cut off, as nginx (`backend:123` is `backend`).";
        "proxy_ssl_session_reuse" session_reuse: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Resume TLS sessions to upstreams.";
        "proxy_ssl_protocols" protocols: Vec<TlsVersion> = vec![TlsVersion::Tls12, TlsVersion::Tls13] =>
            (HSL, 1, ANY, "TLSv1.2 TLSv1.3", Inherit, px::ssl_protocols)
            "TLS versions offered to upstreams.";
        "proxy_ssl_certificate_cache" certificate_cache: CertificateCache = CertificateCache::Off =>
            (HSL, 1, 3, "off", Inherit, p::certificate_cache)
            "Cache of `proxy_ssl_certificate` files named with variables, as `ssl_certificate_cache`.";
    } };
}
pub(crate) use proxy_ssl_directives;

/// `fastcgi_*`, http/server/location (`FastcgiConf`, `FastcgiSettings`): the same meanings as
/// the `proxy_*` ones of the same name.
#[rustfmt::skip]
macro_rules! fastcgi_directives {
    ($gen:ident ! $($pre:tt)*) => { $gen! { $($pre)* ;
        // 60 s: nginx's default for the three timeouts.
        "fastcgi_connect_timeout" connect_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Time allowed to connect to a FastCGI server.";
        "fastcgi_read_timeout" read_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Longest wait for the FastCGI server's response header, and between two reads of its answer.";
        "fastcgi_send_timeout" send_timeout: Duration = Duration::from_secs(60) =>
            (HSL, 1, 1, "60s", Inherit, px::timeout)
            "Longest wait between two writes of the request (parameters and body) to the FastCGI server.";
        // off: as `proxy_buffering` in firstbyte (nginx's default is on).
        "fastcgi_buffering" buffering: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "As `proxy_buffering`: firstbyte's default is off (the script's output goes to the client as it arrives); `on` reads the FastCGI server as fast as it sends into `fastcgi_buffers` and then a temp file in `fastcgi_temp_path`.";
        "fastcgi_ignore_client_abort" ignore_client_abort: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "As `proxy_ignore_client_abort`: `on` lets the script run to its end and reads its whole output when the client leaves.";
        "fastcgi_intercept_errors" intercept_errors: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "A FastCGI response with a status of 300 or more that an `error_page` names is replaced by that page, as nginx.";
        "fastcgi_next_upstream" next_upstream: NextUpstream = NextUpstream::DEFAULT =>
            (HSL, 1, ANY, "error timeout", Inherit, px::next_upstream)
            "When a request goes to the next server of an `upstream`: `error`, `timeout`, `invalid_header`, `http_500`, `http_503`, `http_403`, `http_404`, `http_429`, `non_idempotent`, `off`, as `proxy_next_upstream` (a request whose body was sent is not retried).";
        "fastcgi_next_upstream_tries" next_upstream_tries: u32 = 0 =>
            (HSL, 1, 1, "0", Inherit, p::count)
            "Most servers one request tries (0: every server once).";
        "fastcgi_next_upstream_timeout" next_upstream_timeout: Duration = Duration::ZERO =>
            (HSL, 1, 1, "0", Inherit, p::duration)
            "No next server once this long has passed since the first try (0: no limit).";
        "fastcgi_keep_conn" keep_conn: bool = false =>
            (HSL, 1, 1, "off", Inherit, p::on_off)
            "Ask the FastCGI server to keep the connection open (`FCGI_KEEP_CONN`); with `keepalive N` in the `upstream` block, idle connections are pooled and reused, as nginx.";
        "fastcgi_index" index: Option<String> = None =>
            (HSL, 1, 1, "", Inherit, crate::conf::fastcgi::index)
            "File name appended to `$fastcgi_script_name` when it ends with `/`.";
        "fastcgi_pass_request_headers" pass_request_headers: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Pass the request's headers as `HTTP_*` parameters (one named by a `fastcgi_param` is not passed again).";
        "fastcgi_request_buffering" request_buffering: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "`on` (nginx's default): the request body is read whole (memory up to `client_body_buffer_size`, then a temp file in `client_body_temp_path`) before the FastCGI server is asked, so a slow client holds none of its workers, the body can go to the next server, and one of unknown length (chunked, HTTP/2) gets its `CONTENT_LENGTH`; `off`: it streams as it arrives, as nginx (`CONTENT_LENGTH` is empty for one of unknown length).";
        "fastcgi_pass_request_body" pass_request_body: bool = true =>
            (HSL, 1, 1, "on", Inherit, p::on_off)
            "Pass the request body as the FastCGI stdin stream.";
        // nginx's defaults on x86_64 Linux, where a memory page is 4 KiB.
        "fastcgi_buffer_size" buffer_size: usize = 4096 =>
            (HSL, 1, 1, "4k", Inherit, px::buffer_size)
            "Most bytes of the script's response header (a longer one is `upstream sent too big header`, 502, as nginx); and, as `proxy_buffer_size`, memory for the start of a buffered response.";
        "fastcgi_busy_buffers_size" busy_size: usize = 8192 =>
            (HSL, 1, 1, "8k", Inherit, px::buffer_size)
            "As `proxy_busy_buffers_size`.";
        "fastcgi_max_temp_file_size" max_temp_file_size: u64 = 1024 << 20 =>
            (HSL, 1, 1, "1024m", Inherit, p::bytes)
            "As `proxy_max_temp_file_size`.";
        "fastcgi_temp_file_write_size" temp_file_write_size: usize = 8192 =>
            (HSL, 1, 1, "8k", Inherit, px::buffer_size)
            "As `proxy_temp_file_write_size`.";
    } };
}
pub(crate) use fastcgi_directives;
