//! The error log, in nginx's form, and the per-second time strings every log line and
//! response header needs.
//!
//! Before a configuration is running, messages go to stderr as `firstbyte: [emerg] ...`
//! (what `-t` and a failed start print). Once running, they go to the `error_log` targets as
//! `2026/11/22 01:46:26 [error] 4242#4242: message`. Targets are swapped whole on reload and
//! reopened on `-s reopen`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::conf::model::{ErrorLog, LogLevel, LogTarget};

/// nginx's name for a level.
pub fn level_name(l: LogLevel) -> &'static str {
    match l {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Notice => "notice",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
        LogLevel::Crit => "crit",
        LogLevel::Alert => "alert",
        LogLevel::Emerg => "emerg",
    }
}

/// An I/O error as nginx prints `errno`: `13: Permission denied` (`N: strerror`, without
/// the ` (os error N)` std appends), or the error's text alone when it carries no OS error
/// number. Every log line and error message that reports a failed system call uses it:
/// `format!("open() \"{}\" failed ({})", path, OsError(&e))`.
pub struct OsError<'a>(pub &'a std::io::Error);

impl fmt::Display for OsError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        let text = text
            .find(" (os error ")
            .map_or(text.as_str(), |i| &text[..i]);
        match self.0.raw_os_error() {
            Some(code) => write!(f, "{code}: {text}"),
            None => f.write_str(text),
        }
    }
}

/// `-e FILE`: where start-up messages also go.
static STARTUP_FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the `-e` file: from now on [`stderr`]'s messages are also appended there in the
/// error log's form, as nginx writes to it before the configuration is read (so a failed
/// start leaves its `[emerg]` in the file nginx's test harness reads).
pub fn set_startup_file(path: PathBuf) {
    let _ = STARTUP_FILE.set(path);
}

/// Prints `firstbyte: [LEVEL] MSG` on stderr (start-up, `-t`, `-s`), and appends it to the
/// `-e` file when one is named.
pub fn stderr(level: LogLevel, msg: impl fmt::Display) {
    eprintln!("firstbyte: [{}] {}", level_name(level), msg);
    if let Some(path) = STARTUP_FILE.get() {
        if let Ok(mut f) = open_append(path) {
            let _ = writeln!(
                f,
                "{} [{}] {}#{}: {}",
                now().error_log,
                level_name(level),
                std::process::id(),
                thread_id(),
                msg
            );
        }
    }
}

/// A log file shared by every configuration that names it, reopened in place.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl LogFile {
    /// Opens `path` for append (creating it), or takes the file the privileged broker opened
    /// (a load replayed from its snapshot).
    pub fn open(path: &Path) -> std::io::Result<Arc<Self>> {
        let f = crate::files::open_log(path, open_append)?;
        Ok(Arc::new(Self {
            path: path.to_path_buf(),
            file: Mutex::new(Some(f)),
        }))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one write (a whole line or a buffer of lines).
    pub fn write(&self, bytes: &[u8]) {
        if let Ok(mut g) = self.file.lock() {
            if let Some(f) = g.as_mut() {
                let _ = f.write_all(bytes);
            }
        }
    }

    /// Reopens the path (after log rotation). On failure the old file stays in use.
    pub fn reopen(&self) -> std::io::Result<()> {
        self.replace(open_append(&self.path)?);
        Ok(())
    }

    /// Writes to `f` from now on (a file the broker reopened).
    pub fn replace(&self, f: File) {
        if let Ok(mut g) = self.file.lock() {
            *g = Some(f);
        }
    }
}

/// Opens a log file for append. In a directory the serving user can write, a symlink is not
/// followed (`O_NOFOLLOW`), and anything but a regular file with one link is refused: root
/// opens these files, and must not be led into appending to a file the user could not.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let careful = crate::privileges::untrusted_dir(path);
    let mut o = OpenOptions::new();
    o.create(true).append(true);
    if careful {
        // O_NONBLOCK: opening a planted FIFO must not hang; no effect on a regular file.
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let f = o.open(path)?;
    if careful {
        let m = f.metadata()?;
        if !m.file_type().is_file() || m.nlink() != 1 {
            return Err(std::io::Error::other(
                "not a regular file with one link, in a directory the \"user\" can write",
            ));
        }
    }
    Ok(f)
}

/// Where error-log lines go: files (None: stderr) with their lowest levels.
pub struct Sinks {
    targets: Vec<(Option<Arc<LogFile>>, LogLevel)>,
}

impl Sinks {
    /// Targets as [`open_error_logs`] makes them.
    pub fn new(targets: Vec<(Option<Arc<LogFile>>, LogLevel)>) -> Self {
        Self { targets }
    }
}

tokio::task_local! {
    /// The error log of the request a task is answering, once its server (then location)
    /// has one of its own (`error_log` in http, server or location): lines logged while
    /// the request's future runs go there instead of the main level's.
    static REQUEST_LOG: std::cell::RefCell<Option<Arc<Sinks>>>;
}

/// Runs `f` (a request's future) with its own error-log slot, empty until
/// [`set_request_log`] fills it.
pub async fn request_scope<F: std::future::Future>(f: F) -> F::Output {
    REQUEST_LOG.scope(std::cell::RefCell::new(None), f).await
}

/// The running request's error log from now on (None: the main level's). Outside
/// [`request_scope`], nothing.
pub fn set_request_log(sinks: Option<Arc<Sinks>>) {
    let _ = REQUEST_LOG.try_with(|s| *s.borrow_mut() = sinks);
}

static SINKS: std::sync::OnceLock<ArcSwap<Sinks>> = std::sync::OnceLock::new();

fn sinks() -> &'static ArcSwap<Sinks> {
    SINKS.get_or_init(|| {
        ArcSwap::from_pointee(Sinks {
            targets: vec![(None, LogLevel::Notice)],
        })
    })
}

/// Opens the targets of a configuration's `error_log` (files through `files`, so a file named
/// by two configurations is opened once). Empty `logs` means stderr at `error`.
pub fn open_error_logs(
    logs: &[ErrorLog],
    files: &mut impl FnMut(&Path) -> std::io::Result<Arc<LogFile>>,
) -> std::io::Result<Vec<(Option<Arc<LogFile>>, LogLevel)>> {
    if logs.is_empty() {
        return Ok(vec![(None, LogLevel::Error)]);
    }
    logs.iter()
        .map(|l| match &l.target {
            // `error_log` has no stdout target; stderr is the stream for errors.
            // (`error_log` has no path with variables.)
            LogTarget::Stderr | LogTarget::Stdout | LogTarget::Variable(_) => Ok((None, l.level)),
            LogTarget::File(p) => Ok((Some(files(p)?), l.level)),
        })
        .collect()
}

/// Makes `targets` the error log. Libraries' diagnostics (below) reach it only when one
/// target is at `debug`; otherwise the `log` facade's maximum level is off, and their log
/// statements cost one relaxed load.
pub fn set_error_logs(targets: Vec<(Option<Arc<LogFile>>, LogLevel)>) {
    let debug = targets.iter().any(|(_, l)| *l == LogLevel::Debug);
    sinks().store(Arc::new(Sinks { targets }));
    // Fails only when already set (a reload): the same logger stays.
    let _ = ::log::set_logger(&DIAGNOSTICS);
    ::log::set_max_level(if debug {
        ::log::LevelFilter::Debug
    } else {
        ::log::LevelFilter::Off
    });
}

/// rustls' diagnostics (its `logging` feature writes through the `log` facade), and h2's and
/// quinn's (they use `tracing`, whose `log` feature hands events to `log` when no tracing
/// subscriber is set, as here): written to the error log at `debug` as `TARGET: MESSAGE`, as
/// nginx writes OpenSSL's and its own debug lines at that level. Their `trace` level (every
/// record and frame) is left out.
struct Diagnostics;

static DIAGNOSTICS: Diagnostics = Diagnostics;

impl ::log::Log for Diagnostics {
    fn enabled(&self, m: &::log::Metadata<'_>) -> bool {
        m.level() <= ::log::max_level()
    }

    fn log(&self, r: &::log::Record<'_>) {
        if self.enabled(r.metadata()) {
            log(
                LogLevel::Debug,
                format_args!("{}: {}", r.target(), r.args()),
            );
        }
    }

    fn flush(&self) {}
}

/// Writes one error-log line at `level`.
pub fn log(level: LogLevel, args: fmt::Arguments<'_>) {
    match REQUEST_LOG.try_with(|s| s.borrow().clone()) {
        Ok(Some(s)) => write_line(&s, level, args),
        _ => write_line(&sinks().load(), level, args),
    }
}

fn write_line(s: &Sinks, level: LogLevel, args: fmt::Arguments<'_>) {
    if !s.targets.iter().any(|(_, l)| level >= *l) {
        return;
    }
    let line = format!(
        "{} [{}] {}#{}: {}\n",
        now().error_log,
        level_name(level),
        std::process::id(),
        thread_id(),
        args
    );
    for (t, l) in &s.targets {
        if level >= *l {
            match t {
                Some(f) => f.write(line.as_bytes()),
                None => {
                    let _ = std::io::stderr().write_all(line.as_bytes());
                }
            }
        }
    }
}

fn thread_id() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Logs at a level: `fblog!(Error, "open() \"{}\" failed", path)`.
#[macro_export]
macro_rules! fblog {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::log($crate::conf::model::LogLevel::$level, format_args!($($arg)*))
    };
}

/// Time strings for one second.
#[derive(Debug, Clone)]
pub struct Now {
    /// Unix seconds.
    pub secs: u64,
    /// `2026/11/22 01:46:26` (local time), for the error log.
    pub error_log: String,
    /// `22/Nov/2026:01:46:26 +0000` (local time), `$time_local`.
    pub time_local: String,
    /// `2026-11-22T01:46:26+00:00`, `$time_iso8601`.
    pub iso8601: String,
    /// `Sun, 22 Nov 2026 01:46:26 GMT`, the `Date` header.
    pub http_date: http::HeaderValue,
}

thread_local! {
    static NOW: std::cell::RefCell<Option<Arc<Now>>> = const { std::cell::RefCell::new(None) };
}

/// The time strings of the current second (cached per thread, rebuilt once a second).
pub fn now() -> Arc<Now> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    NOW.with(|c| {
        let mut c = c.borrow_mut();
        match c.as_ref() {
            Some(n) if n.secs == secs => n.clone(),
            _ => {
                let n = Arc::new(format_now(secs));
                *c = Some(n.clone());
                n
            }
        }
    })
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn format_now(secs: u64) -> Now {
    // SAFETY: tm is plain data; localtime_r only writes into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t = secs as libc::time_t;
    // SAFETY: both pointers are valid for the call.
    unsafe { libc::localtime_r(&t, &mut tm) };
    let off = tm.tm_gmtoff;
    let (sign, off) = if off < 0 { ('-', -off) } else { ('+', off) };
    let (oh, om) = (off / 3600, (off % 3600) / 60);
    let (y, mo, d, h, mi, s) = (
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
    );
    let date = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
    Now {
        secs,
        error_log: format!("{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}"),
        time_local: format!(
            "{d:02}/{}/{y:04}:{h:02}:{mi:02}:{s:02} {sign}{oh:02}{om:02}",
            MONTHS[(tm.tm_mon.clamp(0, 11)) as usize]
        ),
        iso8601: format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{oh:02}:{om:02}"),
        http_date: http::HeaderValue::from_str(&date)
            .unwrap_or_else(|_| http::HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_nginx_prints_errno() {
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(e.to_string(), "Permission denied (os error 13)");
        assert_eq!(OsError(&e).to_string(), "13: Permission denied");
        let e = std::fs::File::open("/nonexistent/firstbyte").unwrap_err();
        assert_eq!(OsError(&e).to_string(), "2: No such file or directory");
        // No errno (an error passed on as text, as the broker does): the text alone.
        let e = std::io::Error::other("13: Permission denied");
        assert_eq!(OsError(&e).to_string(), "13: Permission denied");
    }

    #[test]
    fn time_formats() {
        let n = format_now(0);
        assert_eq!(n.http_date, "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(n.error_log.len(), "1970/01/01 00:00:00".len());
        assert!(n.time_local.contains("/Jan/1970:") || n.time_local.contains("/Dec/1969:"));
    }

    #[test]
    fn log_file_appends_and_reopens() {
        let p = std::env::temp_dir().join(format!("fb-log-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let f = LogFile::open(&p).unwrap();
        f.write(b"one\n");
        std::fs::rename(&p, p.with_extension("1")).unwrap();
        f.reopen().unwrap();
        f.write(b"two\n");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(
            std::fs::read_to_string(p.with_extension("1")).unwrap(),
            "one\n"
        );
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(p.with_extension("1"));
    }
}
