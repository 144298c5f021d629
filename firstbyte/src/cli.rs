//! The command line, nginx's flags: `firstbyte [-c FILE] [-p PREFIX] [-e FILE|stderr] [-t]
//! [-T] [-q] [-s reload|reopen|stop|quit] [-g DIRECTIVES] [-v] [-V]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::conf::model::LogLevel;
use crate::log::stderr;
use crate::server::{PidFile, Server, Shared, Site, Source};

/// The default configuration file.
pub const DEFAULT_CONF: &str = "/etc/firstbyte/firstbyte.conf";

/// Parsed command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// `-c FILE`.
    pub conf: Option<PathBuf>,
    /// `-p PREFIX`.
    pub prefix: Option<PathBuf>,
    /// `-e FILE|stderr`: the error log when the configuration names none at the main level.
    pub error_log: Option<String>,
    /// `-t`.
    pub test: bool,
    /// `-T`: test and dump.
    pub dump: bool,
    /// `-q`: quiet test (errors only).
    pub quiet: bool,
    /// `-s SIGNAL`.
    pub signal: Option<String>,
    /// `-g DIRECTIVES`.
    pub globals: Option<String>,
    /// `-v`.
    pub version: bool,
    /// `-V`.
    pub version_long: bool,
    /// `-h`/`-?`.
    pub help: bool,
}

/// Why the command line was refused (nginx's words).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// `-x`.
    #[error("invalid option: \"{0}\"")]
    Invalid(String),
    /// `-c` without a value.
    #[error("option \"-{0}\" requires {1}")]
    Missing(char, &'static str),
    /// `-s foo`.
    #[error("invalid option: \"-s {0}\"")]
    BadSignal(String),
}

/// Parses arguments (without the program name). Flags may be grouped (`-tq`) and values may
/// be attached (`-cFILE`) or separate (`-c FILE`), as nginx accepts.
pub fn parse_args<I: IntoIterator<Item = String>>(it: I) -> Result<Args, ArgError> {
    let mut a = Args::default();
    let mut it = it.into_iter();
    while let Some(arg) = it.next() {
        let Some(flags) = arg.strip_prefix('-') else {
            return Err(ArgError::Invalid(arg));
        };
        if flags.is_empty() {
            return Err(ArgError::Invalid(arg));
        }
        let mut chars = flags.char_indices();
        while let Some((i, c)) = chars.next() {
            let mut value = |what: &'static str| -> Result<String, ArgError> {
                let rest = &flags[i + 1..];
                if !rest.is_empty() {
                    Ok(rest.to_string())
                } else {
                    it.next().ok_or(ArgError::Missing(c, what))
                }
            };
            match c {
                't' => a.test = true,
                'T' => {
                    a.test = true;
                    a.dump = true
                }
                'q' => a.quiet = true,
                'v' => a.version = true,
                'V' => a.version_long = true,
                'h' | '?' => a.help = true,
                'c' => {
                    a.conf = Some(PathBuf::from(value("file name")?));
                    break;
                }
                'p' => {
                    a.prefix = Some(PathBuf::from(value("directory name")?));
                    break;
                }
                'e' => {
                    a.error_log = Some(value("file name")?);
                    break;
                }
                'g' => {
                    a.globals = Some(value("parameter")?);
                    break;
                }
                's' => {
                    let s = value("parameter")?;
                    if !matches!(s.as_str(), "stop" | "quit" | "reopen" | "reload") {
                        return Err(ArgError::BadSignal(s));
                    }
                    a.signal = Some(s);
                    break;
                }
                _ => return Err(ArgError::Invalid(format!("-{}", &flags[i..]))),
            }
            let _ = &mut chars;
        }
    }
    Ok(a)
}

/// What `-h` prints; `firstbyte(8)` is rendered from it too (`man.rs`).
pub(crate) const USAGE: &str = "Usage: firstbyte [-?hvVtTq] [-s signal] [-p prefix]
             [-e filename] [-c filename] [-g directives]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to the running server: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: the configuration file's directory)
  -e filename   : set error log file when the configuration names none (default: stderr)
  -c filename   : set configuration file (default: /etc/firstbyte/firstbyte.conf)
  -g directives : set global directives out of configuration file
";

fn abs(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `-c FILE`: a relative name is under `-p PREFIX` when one is given, as nginx
/// (`nginx -p /srv/t/ -c nginx.conf` reads `/srv/t/nginx.conf`), else under the working
/// directory (firstbyte's prefix defaults to the configuration's own directory).
fn conf_path(conf: &Path, prefix: Option<&Path>) -> PathBuf {
    match prefix {
        Some(p) if conf.is_relative() => abs(p).join(conf),
        _ => abs(conf),
    }
}

/// The nginx release whose configuration language firstbyte follows (directive names,
/// defaults, error texts). Tools that parse `nginx version: NAME/X.Y.Z` from `nginx -v`/`-V`
/// read it: certbot's nginx plugin refuses versions below 0.8.48 (firstbyte's own "0.1.0"
/// would be one) and nginx's test harness gates checks of newer behaviour on it.
pub const NGINX_COMPAT_VERSION: &str = "1.28.0";

/// The second line of `-v` and `-V`, after firstbyte's own: `nginx version: nginx/1.28.0
/// (compatible; ...)`, as Tengine prints its own version and then nginx's.
pub fn nginx_version_line() -> String {
    format!(
        "nginx version: nginx/{NGINX_COMPAT_VERSION} (compatible; firstbyte/{} reads its configuration language)",
        env!("CARGO_PKG_VERSION")
    )
}

/// What `-V` prints after the version lines: nginx's lines, so that tools reading
/// `nginx -V` (nginx's test harness, certbot) learn what firstbyte can do. The library line
/// follows BoringSSL's and AWS-LC's convention ("OpenSSL 1.1.1 (compatible; ...)"): the TLS
/// features of OpenSSL 1.1.1 (TLS 1.3, SNI, ALPN, tickets), none of the 3.x additions.
pub fn version_details() -> String {
    format!(
        "built with OpenSSL 1.1.1 (compatible; rustls 0.23 with aws-lc-rs), hyper 1, tokio 1\n\
         TLS SNI support enabled\n\
         protocols: HTTP/1.1, HTTP/2, HTTP/3; TLSv1.2, TLSv1.3\n\
         configure arguments: {}\n",
        crate::conf::configure_arguments()
    )
}

/// Runs the command; returns the process exit code.
pub fn main(args: Vec<String>) -> i32 {
    let a = match parse_args(args.into_iter().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("firstbyte: {e}");
            eprint!("{USAGE}");
            return 1;
        }
    };
    if a.help {
        eprint!("{USAGE}");
        return 0;
    }
    if a.version || a.version_long {
        eprintln!("firstbyte version: firstbyte/{}", env!("CARGO_PKG_VERSION"));
        eprintln!("{}", nginx_version_line());
        if a.version_long {
            eprint!("{}", version_details());
        }
        if !a.test && a.signal.is_none() {
            return 0;
        }
    }

    let source = match &a.conf {
        Some(c) => Source {
            path: conf_path(c, a.prefix.as_deref()),
            prefix: a.prefix.as_deref().map(abs),
            globals: a.globals.clone(),
            error_log: a.error_log.clone(),
            builtin: None,
        },
        None if Path::new(DEFAULT_CONF).exists() || a.test || a.signal.is_some() => Source {
            path: PathBuf::from(DEFAULT_CONF),
            prefix: a.prefix.as_deref().map(abs),
            globals: a.globals.clone(),
            error_log: a.error_log.clone(),
            builtin: None,
        },
        None => return run_builtin(a.error_log.clone()),
    };

    if let Some(file) = a.error_log.as_deref().filter(|f| *f != "stderr") {
        // Under the prefix, which defaults to the configuration's directory.
        let base = source
            .prefix
            .clone()
            .or_else(|| source.path.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        crate::log::set_startup_file(base.join(file));
    }
    if let Some(sig) = &a.signal {
        return send_signal(&source, sig);
    }
    if a.test {
        return test_config(&source, a.dump, a.quiet);
    }
    run(source, None)
}

fn test_config(source: &Source, dump: bool, quiet: bool) -> i32 {
    let shared = Shared::for_test();
    let path = source.path.display().to_string();
    let result = source.load().and_then(|c| {
        if !quiet {
            crate::server::print_warnings(&c);
        }
        Site::build(c, &shared, None)
    });
    match result {
        Ok(site) => {
            if !quiet {
                for w in &site.warnings {
                    stderr(LogLevel::Warn, w);
                }
                eprintln!("firstbyte: the configuration file {path} syntax is ok");
                eprintln!("firstbyte: configuration file {path} test is successful");
            }
            if dump {
                for f in &site.config.files {
                    println!("# configuration file {}:", f.display());
                    match std::fs::read_to_string(f) {
                        Ok(t) => {
                            print!("{t}");
                            if !t.ends_with('\n') {
                                println!();
                            }
                        }
                        Err(e) => println!("# cannot read: {e}"),
                    }
                    println!();
                }
            }
            0
        }
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            eprintln!("firstbyte: configuration file {path} test failed");
            1
        }
    }
}

/// The pid in a pid file: a number above 1. 0, -1 and negative numbers would make `kill`
/// signal a process group or every process, and 1 is init, so none of them is ever used.
fn parse_pid(text: &str) -> Option<i32> {
    let t = text.trim();
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<i32>().ok().filter(|p| *p > 1)
}

fn send_signal(source: &Source, sig: &str) -> i32 {
    let config = match source.load() {
        Ok(c) => c,
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            return 1;
        }
    };
    let Some(pid_path) = config.main.pid.clone() else {
        stderr(
            LogLevel::Error,
            "\"pid\" is off (the default when not root): no process to signal; name a pid file",
        );
        return 1;
    };
    let text = match std::fs::read_to_string(&pid_path) {
        Ok(t) => t,
        Err(e) => {
            stderr(
                LogLevel::Error,
                format!(
                    "open() \"{}\" failed ({})",
                    pid_path.display(),
                    crate::log::OsError(&e)
                ),
            );
            return 1;
        }
    };
    let Some(pid) = parse_pid(&text) else {
        stderr(
            LogLevel::Error,
            format!(
                "invalid PID number \"{}\" in \"{}\"",
                text.trim(),
                pid_path.display()
            ),
        );
        return 1;
    };
    let signo = match sig {
        "stop" => libc::SIGTERM,
        "quit" => libc::SIGQUIT,
        "reopen" => libc::SIGUSR1,
        _ => libc::SIGHUP,
    };
    // SAFETY: kill has no memory preconditions.
    if unsafe { libc::kill(pid, signo) } != 0 {
        let e = std::io::Error::last_os_error();
        stderr(
            LogLevel::Alert,
            format!("kill({pid}, {signo}) failed ({})", crate::log::OsError(&e)),
        );
        return 1;
    }
    0
}

/// Serves the built-in site: a self-signed certificate made now, loopback only. The
/// certificate and its key stay in memory (`data:` values in the built-in configuration): no
/// file holds the key, so no other local user can read or replace it.
fn run_builtin(a_error_log: Option<String>) -> i32 {
    let (chain, key) = match crate::tls::self_signed(&["localhost", "127.0.0.1", "::1"]) {
        Ok(made) => made,
        Err(e) => {
            stderr(
                LogLevel::Emerg,
                format!("cannot make the built-in certificate: {e}"),
            );
            return 1;
        }
    };
    let mut cert = String::new();
    for c in &chain {
        cert += &pem_encode("CERTIFICATE", c.as_ref());
    }
    let key = pem_encode("PRIVATE KEY", key.secret_der());
    let text = crate::http::builtin::BUILTIN_CONF
        .replace("{cert}", &format!("\"data:{cert}\""))
        .replace("{key}", &format!("\"data:{key}\""));
    let source = Source {
        path: PathBuf::from("<built-in>"),
        prefix: None,
        globals: None,
        error_log: a_error_log,
        builtin: Some(text),
    };
    run(
        source,
        Some("firstbyte: serving the built-in site on https://localhost:8443/ (no configuration file; see -c)"),
    )
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64_encode(der);
    let mut s = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(std::str::from_utf8(chunk).unwrap_or(""));
        s.push('\n');
    }
    s.push_str(&format!("-----END {label}-----\n"));
    s
}

fn base64_encode(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Loads, binds and serves until a signal says stop.
/// `setrlimit(RLIMIT_NOFILE)`, soft and hard to `n`, as nginx.
fn set_rlimit_nofile(n: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: `lim` is a valid rlimit that outlives the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn run(source: Source, banner: Option<&str>) -> i32 {
    let shared = match Shared::new() {
        Ok(s) => Arc::new(s),
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            return 1;
        }
    };
    // Before anything can fail or privileges drop: systemd's socket may be root's.
    crate::notify::init();
    let config = match source.load() {
        Ok(c) => c,
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            return 1;
        }
    };
    crate::server::print_warnings(&config);
    let workers = config.main.worker_processes.threads();
    let daemon = config.main.daemon;
    let pid_path = config.main.pid.clone();
    let rlimit_nofile = config.main.worker_rlimit_nofile;
    // Root serves as `user`, by default nobody (as nginx); `user root` stays root.
    let worker = match (&config.main.user, crate::privileges::is_root()) {
        (Some(_), false) => {
            stderr(
                LogLevel::Warn,
                "the \"user\" directive makes sense only if firstbyte runs with super-user privileges, ignored",
            );
            None
        }
        (None, false) => None,
        (user, true) => {
            crate::files::set_started_as_root();
            let user = user.clone().unwrap_or_else(crate::privileges::default_user);
            match crate::privileges::resolve(&user) {
                Ok(ids) if ids.uid == 0 => None,
                Ok(ids) => {
                    crate::privileges::set_worker(ids);
                    Some(ids)
                }
                Err(e) => {
                    stderr(
                        LogLevel::Emerg,
                        format!("cannot switch to user \"{}\": {e}", user.name),
                    );
                    return 1;
                }
            }
        }
    };
    let site = match Site::build(config, &shared, None) {
        Ok(s) => s,
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            return 1;
        }
    };
    for w in &site.warnings {
        stderr(LogLevel::Warn, w);
    }
    // Signals that arrive between the bind (the port answers) and the runtime's handlers
    // wait, blocked, instead of taking their default action (SIGHUP, SIGUSR1 end a process).
    let blocked = crate::server::Signals::block();
    // As nginx: bind, detach and write the pid file as root, then give up root.
    let fresh = match crate::server::bind_all(&site) {
        Ok(f) => f,
        Err(e) => {
            stderr(LogLevel::Emerg, &e);
            return 1;
        }
    };
    let ready = if daemon {
        match crate::daemon::daemonize() {
            Ok(r) => Some(r),
            Err(e) => {
                stderr(
                    LogLevel::Emerg,
                    format!("daemon() failed ({})", crate::log::OsError(&e)),
                );
                return 1;
            }
        }
    } else {
        None
    };
    let mut _pid = match PidFile::write(pid_path.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            stderr(
                LogLevel::Emerg,
                format!(
                    "open() \"{}\" failed ({})",
                    pid_path.as_deref().unwrap_or(Path::new("")).display(),
                    crate::log::OsError(&e)
                ),
            );
            return 1;
        }
    };
    // `worker_rlimit_nofile`: set while still root (raising the hard limit needs it), as
    // nginx's worker init; a failure is an alert, not the end.
    if let Some(n) = rlimit_nofile {
        if let Err(e) = set_rlimit_nofile(n) {
            stderr(
                LogLevel::Alert,
                format!(
                    "setrlimit(RLIMIT_NOFILE, {n}) failed ({})",
                    crate::log::OsError(&e)
                ),
            );
        }
    }
    // The broker keeps root; this process gives it up for good.
    let broker = match worker {
        None => None,
        Some(ids) => {
            let broker = match crate::broker::Broker::spawn(
                source.clone(),
                pid_path.clone(),
                shared.log_paths(),
                crate::server::unix_socket_paths(&site),
            ) {
                Ok(b) => b,
                Err(e) => {
                    stderr(
                        LogLevel::Emerg,
                        format!("cannot start the privileged process: {e}"),
                    );
                    return 1;
                }
            };
            _pid.disown();
            if let Err(e) = crate::privileges::prepare_temp_dirs(&site.temp_paths(), ids) {
                stderr(LogLevel::Crit, e);
            }
            if let Err(e) = crate::privileges::drop_all(ids) {
                stderr(
                    LogLevel::Emerg,
                    format!("cannot switch to the \"user\": {e}"),
                );
                return 1;
            }
            Some(broker)
        }
    };
    let rt = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            stderr(LogLevel::Emerg, format!("cannot start the runtime: {e}"));
            return 1;
        }
    };
    rt.block_on(async move {
        let error_logs = site.error_logs.clone();
        let signals = match crate::server::Signals::install() {
            Ok(s) => s,
            Err(e) => {
                stderr(
                    LogLevel::Emerg,
                    format!("cannot install signal handlers: {e}"),
                );
                return 1;
            }
        };
        drop(blocked);
        let http = shared.http.clone();
        // After a burst of connections closes, the heap they freed goes back to the kernel.
        tokio::spawn(crate::server::trim::run(move || {
            http.stats.active.load(std::sync::atomic::Ordering::Relaxed)
        }));
        let server = Server::start(source, site, shared, fresh, broker);
        crate::notify::ready(None);
        if let Some(r) = ready {
            r.done();
        }
        crate::log::set_error_logs(error_logs);
        if let Some(b) = banner {
            println!("{b}");
        }
        crate::fblog!(Notice, "firstbyte/{} started", env!("CARGO_PKG_VERSION"));
        server.run_signals(signals).await;
        // Closed (and UNIX-domain socket files removed) on every way out, as nginx's master.
        server.close_listeners();
        server.shutdown();
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[&str]) -> Result<Args, ArgError> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_as_nginx() {
        let a = p(&["-t", "-c", "/x.conf"]).unwrap();
        assert!(a.test && a.conf == Some("/x.conf".into()));
        let a = p(&["-tq", "-c/y.conf", "-p", "/pre", "-g", "daemon off;"]).unwrap();
        assert!(a.test && a.quiet);
        assert_eq!(a.conf, Some("/y.conf".into()));
        assert_eq!(a.prefix, Some("/pre".into()));
        assert_eq!(a.globals.as_deref(), Some("daemon off;"));
        // The harness of nginx's test suite: `-p DIR/ -c nginx.conf -e error.log -g ...`.
        let a = p(&[
            "-p",
            "/t/",
            "-c",
            "nginx.conf",
            "-e",
            "error.log",
            "-g",
            "pid x;",
        ])
        .unwrap();
        assert_eq!(a.error_log.as_deref(), Some("error.log"));
        assert_eq!(
            conf_path(a.conf.as_deref().unwrap(), a.prefix.as_deref()),
            PathBuf::from("/t/nginx.conf")
        );
        assert_eq!(
            conf_path(Path::new("/abs.conf"), Some(Path::new("/t"))),
            PathBuf::from("/abs.conf")
        );
        assert_eq!(
            p(&["-estderr"]).unwrap().error_log.as_deref(),
            Some("stderr")
        );
        assert_eq!(p(&["-e"]), Err(ArgError::Missing('e', "file name")));
        assert!(p(&["-T"]).unwrap().dump);
        assert_eq!(
            p(&["-s", "reload"]).unwrap().signal.as_deref(),
            Some("reload")
        );
        assert_eq!(
            p(&["-s", "restart"]),
            Err(ArgError::BadSignal("restart".into()))
        );
        assert_eq!(p(&["-c"]), Err(ArgError::Missing('c', "file name")));
        assert_eq!(p(&["-x"]), Err(ArgError::Invalid("-x".into())));
        assert_eq!(p(&["foo"]), Err(ArgError::Invalid("foo".into())));
    }

    #[test]
    fn pid_files_name_one_process_above_init() {
        assert_eq!(parse_pid("4242\n"), Some(4242));
        assert_eq!(parse_pid(" 2 "), Some(2));
        for bad in [
            "0",
            "1",
            "-1",
            "-4242",
            "+5",
            "",
            "garbage",
            "12x",
            "99999999999",
        ] {
            assert_eq!(parse_pid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
    }
}
