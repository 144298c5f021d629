//! A location's [`Guard`]: nginx's post-read (real IP), preaccess (`limit_req`,
//! `limit_conn`) and access (`allow`/`deny`, `auth_basic`, `satisfy`) phases, for locations
//! that use any of them. The decisions are pure code elsewhere (`conf::realip`,
//! `conf::leaky`, `http::auth_basic`); this file applies them to a request.
//!
//! What a request carries from here ([`GuardState`]): its real address and `$remote_user`
//! for variables and the access log, the `WWW-Authenticate` of a 401, the `limit_req` delay
//! the pipeline waits before the content phase, and the `limit_conn` counts it holds until
//! its response body is done.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};

use super::access::access_rule;
use super::{server_name, Req};
use crate::conf::access_conf::{AuthBasic, Guard};
use crate::conf::leaky::{self, ConnRefusal, Verdict};
use crate::conf::limits::{ConnZone, LimitConnConf, LimitReqConf};
use crate::conf::model::{LocationConf, LogLevel};
use crate::conf::realip::RealIpHeader;
use crate::http::auth_basic;
use crate::http::reqvars::GuardVars;

/// What the guard phases leave on a request.
#[derive(Debug, Default)]
pub(crate) struct GuardState {
    /// The real address, `$remote_user`, `$limit_req_status`, `$limit_conn_status`.
    pub vars: GuardVars,
    /// Sent with a 401.
    pub www_authenticate: Option<HeaderValue>,
    /// `limit_req`'s wait before the content phase.
    pub delay: Option<Duration>,
    /// `limit_conn` counts held until the response is done.
    holds: Vec<ConnHold>,
    realip_done: bool,
    limit_req_done: bool,
    limit_conn_done: bool,
}

impl GuardState {
    /// What an internal redirect (an error page) keeps: the address, the user and the
    /// once-per-request marks; the counts stay with the original request.
    pub fn for_redirect(&self) -> GuardState {
        GuardState {
            vars: self.vars.clone(),
            realip_done: self.realip_done,
            limit_req_done: self.limit_req_done,
            limit_conn_done: self.limit_conn_done,
            ..Default::default()
        }
    }
}

/// One request counted in a limit_conn zone; uncounted when dropped.
#[derive(Debug)]
struct ConnHold {
    zone: Arc<ConnZone>,
    key: Box<[u8]>,
}

impl Drop for ConnHold {
    fn drop(&mut self) {
        if let Ok(mut t) = self.zone.table.lock() {
            t.release(&self.key);
        }
    }
}

/// Milliseconds on one clock for every zone (origin: first use).
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// nginx's post-read phase: the server's real-IP settings (`set_real_ip_from` at `http` or
/// `server` level), before the server's rewrite directives, so that a server-level
/// `return` already sees the real address.
pub(super) fn post_read(r: &mut Req, g: &Guard) {
    realip(r, g);
}

/// The real address from `g`'s `set_real_ip_from`, unless one was already taken. As
/// nginx's realip handler, a request whose header is absent (or whose peer is not trusted)
/// stays open to a later try: the location's settings in the preaccess phase.
fn realip(r: &mut Req, g: &Guard) {
    let Some(rip) = g.realip.as_ref() else {
        return;
    };
    if r.guard.as_ref().is_some_and(|s| s.realip_done) {
        return;
    }
    let conn_peer = r.conn.facts().peer.map(|p| p.ip());
    let proxy = r.conn.facts().proxy_protocol.map(|p| p.source);
    let value = match &rip.header {
        RealIpHeader::ProxyProtocol => None,
        // One header's value (nginx takes the first); X-Forwarded-For is every one.
        RealIpHeader::XRealIp => first_header(r.headers, "x-real-ip"),
        RealIpHeader::XForwardedFor => header_list(r.headers, "x-forwarded-for"),
        RealIpHeader::Other(n) => first_header(r.headers, n),
    };
    if let Some(real) = rip.resolve(conn_peer, value.as_deref(), proxy) {
        let state = r.guard.get_or_insert_with(Default::default);
        state.realip_done = true;
        state.vars.real_peer = Some(real);
    }
}

/// Runs the guard phases for `loc`: Some(status) refuses the request.
pub(super) fn check(r: &mut Req, loc: &LocationConf, g: &Guard) -> Option<u16> {
    realip(r, g);
    let state = r.guard.get_or_insert_with(Default::default);
    if let Some(lr) = &g.limit_req {
        if !state.limit_req_done {
            state.limit_req_done = true;
            if let Some(code) = limit_req(r, lr) {
                return Some(code);
            }
        }
    }
    if let Some(lc) = &g.limit_conn {
        let state = r.guard.get_or_insert_with(Default::default);
        if !state.limit_conn_done {
            state.limit_conn_done = true;
            if let Some(code) = limit_conn(r, lc) {
                return Some(code);
            }
        }
    }
    access(r, loc, g)
}

fn first_header(h: &http::HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// Every value of header `name`, joined with commas (nginx walks repeated X-Forwarded-For
/// headers as one list).
fn header_list(h: &http::HeaderMap, name: &str) -> Option<String> {
    let mut out: Option<String> = None;
    for v in h.get_all(name) {
        let s = String::from_utf8_lossy(v.as_bytes());
        match &mut out {
            Some(o) => {
                o.push(',');
                o.push_str(&s);
            }
            None => out = Some(s.into_owned()),
        }
    }
    out
}

fn client(r: &Req) -> String {
    match r.guard.as_ref().and_then(|g| g.vars.real_peer) {
        Some(p) => p.ip().to_string(),
        None => r.conn.client_ip(),
    }
}

fn log_request(r: &Req, level: LogLevel, msg: std::fmt::Arguments<'_>) {
    crate::log::log(
        level,
        format_args!(
            "{msg}, client: {}, server: {}, request: \"{} {} {}\", host: \"{}\"",
            client(r),
            server_name(&r.server),
            r.method,
            r.request_uri,
            r.protocol,
            r.host
        ),
    );
}

/// One level more verbose (nginx logs delays at `limit_req_log_level + 1`).
fn lower(l: LogLevel) -> LogLevel {
    match l {
        LogLevel::Error => LogLevel::Warn,
        LogLevel::Warn => LogLevel::Notice,
        LogLevel::Notice => LogLevel::Info,
        _ => LogLevel::Debug,
    }
}

fn limit_req(r: &mut Req, lr: &LimitReqConf) -> Option<u16> {
    let now = now_ms();
    // First every limit's verdict, then (nothing refused) every bucket stored: a refused
    // request counts in no zone, as nginx's unlock of the zones before the refusing one.
    let mut seen = Vec::with_capacity(lr.limits.len());
    for l in &lr.limits {
        let key = r.eval(&l.zone.key);
        if key.is_empty() || key.len() > 65535 {
            continue;
        }
        let rate = leaky::Rate {
            rate: l.zone.rate,
            burst: l.burst,
            delay: l.delay,
        };
        let Ok(table) = l.zone.table.lock() else {
            return Some(500);
        };
        let (verdict, excess, bucket) = leaky::bucket(now, table.get(key.as_bytes()), rate);
        drop(table);
        if verdict == Verdict::Reject {
            log_request(
                r,
                lr.log_level,
                format_args!(
                    "limiting requests{}, excess: {}.{:03} by zone \"{}\"",
                    if lr.dry_run { ", dry run" } else { "" },
                    excess / 1000,
                    excess % 1000,
                    l.zone.name
                ),
            );
            return req_refused(r, lr);
        }
        seen.push((l, key, verdict, excess, bucket));
    }
    let counted = !seen.is_empty();
    let mut delay: Option<(u64, u64, &str)> = None;
    for (l, key, verdict, excess, bucket) in seen {
        let Ok(mut table) = l.zone.table.lock() else {
            return Some(500);
        };
        if !table.put(key.as_bytes(), bucket) {
            drop(table);
            crate::fblog!(
                Alert,
                "could not allocate node in limit_req zone \"{}\"",
                l.zone.name
            );
            return req_refused(r, lr);
        }
        if let Verdict::Delay(ms) = verdict {
            if delay.is_none_or(|(d, _, _)| ms > d) {
                delay = Some((ms, excess, &l.zone.name));
            }
        }
    }
    if let Some((ms, excess, zone)) = delay {
        log_request(
            r,
            lower(lr.log_level),
            format_args!(
                "delaying request{}, excess: {}.{:03}, by zone \"{zone}\"",
                if lr.dry_run { ", dry run" } else { "" },
                excess / 1000,
                excess % 1000,
            ),
        );
        if let Some(s) = r.guard.as_mut() {
            if lr.dry_run {
                s.vars.limit_req_status = Some("DELAYED_DRY_RUN");
            } else {
                s.vars.limit_req_status = Some("DELAYED");
                s.delay = Some(Duration::from_millis(ms));
            }
        }
    } else if counted {
        if let Some(s) = r.guard.as_mut() {
            s.vars.limit_req_status = Some("PASSED");
        }
    }
    None
}

/// A refusal by `limit_req` (`$limit_req_status` set): the status, or None in a dry run.
fn req_refused(r: &mut Req, lr: &LimitReqConf) -> Option<u16> {
    if let Some(s) = r.guard.as_mut() {
        s.vars.limit_req_status = Some(if lr.dry_run {
            "REJECTED_DRY_RUN"
        } else {
            "REJECTED"
        });
    }
    (!lr.dry_run).then_some(lr.status)
}

fn limit_conn(r: &mut Req, lc: &LimitConnConf) -> Option<u16> {
    let mut holds = Vec::with_capacity(lc.limits.len());
    for l in &lc.limits {
        let key = r.eval(&l.zone.key);
        if key.is_empty() || key.len() > 255 {
            continue;
        }
        let Ok(mut table) = l.zone.table.lock() else {
            return Some(500);
        };
        let got = table.acquire(key.as_bytes(), l.max);
        drop(table);
        match got {
            Ok(()) => holds.push(ConnHold {
                zone: l.zone.clone(),
                key: key.into_bytes().into_boxed_slice(),
            }),
            Err(why) => {
                // The counts taken so far are given back (holds dropped).
                drop(holds);
                if why == ConnRefusal::Full {
                    crate::fblog!(
                        Alert,
                        "could not allocate node in limit_conn zone \"{}\"",
                        l.zone.name
                    );
                } else {
                    log_request(
                        r,
                        lc.log_level,
                        format_args!(
                            "limiting connections{} by zone \"{}\"",
                            if lc.dry_run { ", dry run" } else { "" },
                            l.zone.name
                        ),
                    );
                }
                if let Some(s) = r.guard.as_mut() {
                    s.vars.limit_conn_status = Some(if lc.dry_run {
                        "REJECTED_DRY_RUN"
                    } else {
                        "REJECTED"
                    });
                }
                return (!lc.dry_run).then_some(lc.status);
            }
        }
    }
    if let Some(s) = r.guard.as_mut() {
        s.holds.extend(holds);
        s.vars.limit_conn_status = Some("PASSED");
    }
    None
}

/// nginx's access phase: `allow`/`deny` then `auth_basic`; with `satisfy all` the first
/// refusal answers, with `satisfy any` the first success lets the request through and a
/// 401 outranks a 403.
fn access(r: &mut Req, loc: &LocationConf, g: &Guard) -> Option<u16> {
    let ip = r
        .guard
        .as_ref()
        .and_then(|s| s.vars.real_peer)
        .or(r.conn.facts().peer)
        .map(|p| p.ip());
    let rule = access_rule(&loc.access, ip);
    if rule == Some(false) {
        log_request(r, LogLevel::Error, format_args!("access forbidden by rule"));
        if !g.satisfy_any {
            return Some(403);
        }
    }
    if g.satisfy_any && rule == Some(true) {
        return None;
    }
    let outcome = match &g.auth {
        Some(a) => auth(r, a),
        None => Auth::Declined,
    };
    match outcome {
        Auth::Passed => None,
        Auth::Refused(code) => Some(code),
        // Neither refused: the request passes, as nginx when every access handler declines.
        Auth::Declined => rule.and_then(|allow| (!allow).then_some(403)),
    }
}

/// What `auth_basic` decided.
enum Auth {
    /// Off for this request (no realm, or a realm evaluating to `off`).
    Declined,
    /// The user and password matched.
    Passed,
    /// 401 (with `WWW-Authenticate`), 403 (no user file) or 500.
    Refused(u16),
}

/// `auth_basic` for one request.
fn auth(r: &mut Req, a: &AuthBasic) -> Auth {
    let realm = r.eval(&a.realm);
    if realm == "off" {
        return Auth::Declined;
    }
    let ask = |r: &mut Req| {
        let v = HeaderValue::from_maybe_shared(format!(
            "Basic realm=\"{}\"",
            realm.replace(['"', '\\'], "")
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic realm=\"\""));
        if let Some(s) = r.guard.as_mut() {
            s.www_authenticate = Some(v);
        }
        Auth::Refused(401)
    };
    let creds = r
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|h| auth_basic::credentials(h.as_bytes()));
    let Some((user, password)) = creds else {
        log_request(
            r,
            LogLevel::Info,
            format_args!("no user/password was provided for basic authentication"),
        );
        return ask(r);
    };
    let file = r.eval(&a.user_file);
    let path = a.conf_dir.join(&file);
    let mut bytes = match read_user_file(&path) {
        Ok(b) => b,
        Err(e) => {
            // nginx: a missing file is 403 at error, any other failure 500 at crit.
            let (level, code) = if e.kind() == std::io::ErrorKind::NotFound {
                (LogLevel::Error, 403)
            } else {
                (LogLevel::Crit, 500)
            };
            log_request(
                r,
                level,
                format_args!(
                    "open() \"{}\" failed ({})",
                    path.display(),
                    crate::log::OsError(&e)
                ),
            );
            return Auth::Refused(code);
        }
    };
    let user_text = String::from_utf8_lossy(&user).into_owned();
    let verdict = auth_basic::find_user(&bytes, &user).map(|h| auth_basic::verify(&password, h));
    bytes.fill(0);
    match verdict {
        None => {
            log_request(
                r,
                LogLevel::Error,
                format_args!(
                    "user \"{user_text}\" was not found in \"{}\"",
                    path.display()
                ),
            );
            ask(r)
        }
        Some(Ok(true)) => {
            if let Some(s) = r.guard.as_mut() {
                s.vars.remote_user = Some(user_text);
            }
            Auth::Passed
        }
        Some(Ok(false)) => {
            log_request(
                r,
                LogLevel::Error,
                format_args!("user \"{user_text}\": password mismatch"),
            );
            ask(r)
        }
        // Debian's nginx gets crypt(3)'s failure token here, which matches nothing: 401.
        Some(Err(auth_basic::CryptError::Crypt(setting))) => {
            log_request(
                r,
                LogLevel::Error,
                format_args!("user \"{user_text}\": crypt() refused the stored hash \"{setting}\""),
            );
            ask(r)
        }
    }
}

/// Largest user file read (a wrong path such as `/dev/zero` must not exhaust memory).
const MAX_USER_FILE: u64 = 16 << 20;

fn read_user_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    f.take(MAX_USER_FILE).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::model::{AccessRule, Net};

    #[test]
    fn access_rules_decline_when_none_matches() {
        let ip = |s: &str| Some(s.parse::<std::net::IpAddr>().unwrap());
        let rules = vec![AccessRule {
            allow: true,
            net: Net::Cidr("10.0.0.0".parse().unwrap(), 8),
        }];
        assert_eq!(access_rule(&rules, ip("10.1.1.1")), Some(true));
        assert_eq!(access_rule(&rules, ip("192.0.2.1")), None);
        assert_eq!(access_rule(&[], ip("192.0.2.1")), None);
        let all = vec![AccessRule {
            allow: false,
            net: Net::All,
        }];
        assert_eq!(access_rule(&all, None), Some(false));
        let unix = [AccessRule {
            allow: true,
            net: Net::Unix,
        }];
        assert_eq!(access_rule(&unix, None), Some(true), "a UNIX-domain client");
        assert_eq!(access_rule(&unix, ip("127.0.0.1")), None, "not a TCP one");
    }

    #[test]
    fn delays_log_one_level_lower() {
        assert_eq!(lower(LogLevel::Error), LogLevel::Warn);
        assert_eq!(lower(LogLevel::Info), LogLevel::Debug);
    }
}
