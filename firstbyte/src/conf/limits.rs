//! `limit_req_zone`, `limit_req`, `limit_req_status`, `limit_req_log_level`,
//! `limit_req_dry_run` and their `limit_conn` counterparts, as nginx's modules.
//!
//! Zones are declared at http level and named by the limits; a zone's state (`leaky.rs`)
//! lives as long as the configuration load (a reload starts every zone empty; nginx keeps a
//! zone of the same name and size across reloads).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::args::{arg0, flag, number, once, value, R};
use super::error::ConfError;
use super::leaky::{ConnTable, ReqTable};
use super::model::{LogLevel, Pos};
use super::parse::Directive;
use super::settings::{Cx, LocSettings};
use super::vars::ComplexValue;

/// A `limit_req_zone`.
#[derive(Debug)]
pub struct ReqZone {
    /// `zone=NAME`.
    pub name: String,
    /// The key (an empty value is not limited).
    pub key: ComplexValue,
    /// Milli-requests per second.
    pub rate: u64,
    /// The buckets.
    pub table: Mutex<ReqTable>,
}

/// A `limit_conn_zone`.
#[derive(Debug)]
pub struct ConnZone {
    /// `zone=NAME`.
    pub name: String,
    /// The key (an empty value is not limited).
    pub key: ComplexValue,
    /// Requests in progress per key.
    pub table: Mutex<ConnTable>,
}

/// One `limit_req`.
#[derive(Debug)]
pub struct LimitReq {
    /// Its zone.
    pub zone: Arc<ReqZone>,
    /// `burst=N` in milli-requests.
    pub burst: u64,
    /// `delay=N` in milli-requests (`nodelay`: u64::MAX).
    pub delay: u64,
}

/// A location's request limits.
#[derive(Debug)]
pub struct LimitReqConf {
    /// In order.
    pub limits: Vec<LimitReq>,
    /// `limit_req_status` (503).
    pub status: u16,
    /// `limit_req_log_level` (error); delays log one level lower, as nginx.
    pub log_level: LogLevel,
    /// `limit_req_dry_run`.
    pub dry_run: bool,
}

/// One `limit_conn`.
#[derive(Debug)]
pub struct LimitConn {
    /// Its zone.
    pub zone: Arc<ConnZone>,
    /// Most requests in progress per key.
    pub max: u32,
}

/// A location's connection limits.
#[derive(Debug)]
pub struct LimitConnConf {
    /// In order.
    pub limits: Vec<LimitConn>,
    /// `limit_conn_status` (503).
    pub status: u16,
    /// `limit_conn_log_level` (error).
    pub log_level: LogLevel,
    /// `limit_conn_dry_run`.
    pub dry_run: bool,
}

/// Zones of one load, and where limits name them (checked once the file is read).
#[derive(Debug, Default)]
pub(crate) struct Zones {
    req: HashMap<String, Arc<ReqZone>>,
    conn: HashMap<String, Arc<ConnZone>>,
    refs: Vec<(bool, String, Pos)>,
    /// `proxy_cache_path` zones.
    pub cache: super::cache::CacheZones,
    /// `zone` of `upstream` blocks.
    pub upstream: super::upstream_zone::UpstreamZones,
}

impl Zones {
    /// Whether `name` is a `limit_req_zone` or `limit_conn_zone` (not an upstream's zone).
    pub(crate) fn other_kind(&self, name: &str) -> bool {
        self.req.contains_key(name) || self.conn.contains_key(name)
    }
}

/// `limit_req` directives of one level as written: (zone, burst, delay).
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitReqSet {
    pub limits: Option<Vec<(String, u64, u64)>>,
    pub status: Option<u16>,
    pub log_level: Option<LogLevel>,
    pub dry_run: Option<bool>,
}

/// `limit_conn` directives of one level as written: (zone, number).
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitConnSet {
    pub limits: Option<Vec<(String, u32)>>,
    pub status: Option<u16>,
    pub log_level: Option<LogLevel>,
    pub dry_run: Option<bool>,
}

fn or<T: Clone>(mine: &mut Option<T>, parent: &Option<T>) {
    if mine.is_none() {
        mine.clone_from(parent);
    }
}

impl LimitReqSet {
    pub fn inherit(&mut self, p: &LimitReqSet) {
        or(&mut self.limits, &p.limits);
        or(&mut self.status, &p.status);
        or(&mut self.log_level, &p.log_level);
        or(&mut self.dry_run, &p.dry_run);
    }

    pub fn finish(&self, cx: &Cx) -> Option<LimitReqConf> {
        let limits: Vec<LimitReq> = self
            .limits
            .as_ref()?
            .iter()
            .filter_map(|(name, burst, delay)| {
                Some(LimitReq {
                    zone: cx.zones.req.get(name)?.clone(),
                    burst: *burst,
                    delay: *delay,
                })
            })
            .collect();
        (!limits.is_empty()).then(|| LimitReqConf {
            limits,
            // 503 and error: nginx's defaults.
            status: self.status.unwrap_or(503),
            log_level: self.log_level.unwrap_or(LogLevel::Error),
            dry_run: self.dry_run.unwrap_or(false),
        })
    }
}

impl LimitConnSet {
    pub fn inherit(&mut self, p: &LimitConnSet) {
        or(&mut self.limits, &p.limits);
        or(&mut self.status, &p.status);
        or(&mut self.log_level, &p.log_level);
        or(&mut self.dry_run, &p.dry_run);
    }

    pub fn finish(&self, cx: &Cx) -> Option<LimitConnConf> {
        let limits: Vec<LimitConn> = self
            .limits
            .as_ref()?
            .iter()
            .filter_map(|(name, max)| {
                Some(LimitConn {
                    zone: cx.zones.conn.get(name)?.clone(),
                    max: *max,
                })
            })
            .collect();
        (!limits.is_empty()).then(|| LimitConnConf {
            limits,
            status: self.status.unwrap_or(503),
            log_level: self.log_level.unwrap_or(LogLevel::Error),
            dry_run: self.dry_run.unwrap_or(false),
        })
    }
}

/// Every zone a limit names exists (nginx: `zero size shared memory zone "NAME"`), checked
/// once the whole file is read, since a zone may be declared after its use.
pub(crate) fn check_refs(cx: &Cx) -> Result<(), ConfError> {
    for (req, name, pos) in &cx.zones.refs {
        let known = if *req {
            cx.zones.req.contains_key(name)
        } else {
            cx.zones.conn.contains_key(name)
        };
        if !known {
            return Err(ConfError::other(
                format!("zero size shared memory zone \"{name}\""),
                pos,
            ));
        }
    }
    Ok(())
}

/// `zone=NAME:SIZE` → (name, bytes). nginx's smallest zone is 8 pages (32k).
fn zone_param(d: &Directive, a: &str) -> Result<(String, u64), ConfError> {
    let spec = a.strip_prefix("zone=").unwrap_or_default();
    let Some((name, sz)) = spec.rsplit_once(':') else {
        return Err(ConfError::other(
            format!("invalid zone size \"{spec}\""),
            &d.pos,
        ));
    };
    if name.is_empty() {
        return Err(ConfError::other(
            format!("invalid zone name \"{a}\""),
            &d.pos,
        ));
    }
    let bytes = super::units::size(sz)
        .filter(|b| *b >= 8 * 4096)
        .ok_or_else(|| ConfError::other(format!("zone \"{name}\" is too small"), &d.pos))?;
    Ok((name.to_string(), bytes))
}

fn declared(cx: &Cx, d: &Directive, name: &str) -> R {
    if cx.zones.req.contains_key(name) || cx.zones.conn.contains_key(name) {
        return Err(ConfError::other(
            format!("duplicate zone \"{name}\""),
            &d.pos,
        ));
    }
    if cx.zones.upstream.contains_key(name) {
        return Err(ConfError::other(
            format!("the shared memory zone \"{name}\" is already declared for a different use"),
            &d.pos,
        ));
    }
    Ok(())
}

/// `limit_req_zone KEY zone=NAME:SIZE rate=Nr/s|Nr/m [sync]`.
pub(crate) fn limit_req_zone(cx: &mut Cx, d: &Directive) -> R {
    let key = value(d, arg0(d))?;
    let (mut zone, mut rate) = (None, None);
    for a in &d.args[1..] {
        if a.starts_with("zone=") {
            zone = Some(zone_param(d, a)?);
        } else if let Some(r) = a.strip_prefix("rate=") {
            let (n, per) = if let Some(n) = r.strip_suffix("r/s") {
                (n, 1)
            } else if let Some(n) = r.strip_suffix("r/m") {
                (n, 60)
            } else {
                (r, 0)
            };
            let n: u64 = number(d, n).map_err(|_| invalid_rate(d, a))?;
            if per == 0 || n == 0 {
                return Err(invalid_rate(d, a));
            }
            // Milli-requests per second, rounded down as nginx (1r/m = 16).
            rate = Some((n.saturating_mul(1000) / per).max(1));
        } else if a == "sync" {
            // nginx Plus's zone synchronization between cluster nodes: one server has
            // nothing to synchronize with; accepted as it changes nothing here.
        } else {
            return Err(super::args::param(d, a));
        }
    }
    let Some((name, bytes)) = zone else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"zone\" parameter", d.name),
            &d.pos,
        ));
    };
    declared(cx, d, &name)?;
    let zone = ReqZone {
        name: name.clone(),
        key,
        // nginx's default when no rate is given: 1r/s.
        rate: rate.unwrap_or(1000),
        table: Mutex::new(ReqTable::new(bytes)),
    };
    cx.zones.req.insert(name, Arc::new(zone));
    Ok(())
}

fn invalid_rate(d: &Directive, a: &str) -> ConfError {
    ConfError::other(format!("invalid rate \"{a}\""), &d.pos)
}

/// `limit_conn_zone KEY zone=NAME:SIZE`.
pub(crate) fn limit_conn_zone(cx: &mut Cx, d: &Directive) -> R {
    let key = value(d, arg0(d))?;
    let mut zone = None;
    for a in &d.args[1..] {
        if a.starts_with("zone=") {
            zone = Some(zone_param(d, a)?);
        } else {
            return Err(super::args::param(d, a));
        }
    }
    let Some((name, bytes)) = zone else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"zone\" parameter", d.name),
            &d.pos,
        ));
    };
    declared(cx, d, &name)?;
    cx.zones.conn.insert(
        name.clone(),
        Arc::new(ConnZone {
            name,
            key,
            table: Mutex::new(ConnTable::new(bytes)),
        }),
    );
    Ok(())
}

/// `limit_req zone=NAME [burst=N] [nodelay|delay=N]`.
pub(crate) fn limit_req(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let (mut zone, mut burst, mut delay, mut nodelay) = (None, 0u64, 0u64, false);
    for a in &d.args {
        if let Some(n) = a.strip_prefix("zone=") {
            zone = Some(n.to_string());
        } else if let Some(n) = a.strip_prefix("burst=") {
            burst = positive(d, a, n)?;
        } else if let Some(n) = a.strip_prefix("delay=") {
            delay = positive(d, a, n)?;
        } else if a == "nodelay" {
            nodelay = true;
        } else {
            return Err(super::args::param(d, a));
        }
    }
    let Some(zone) = zone.filter(|z| !z.is_empty()) else {
        return Err(ConfError::other(
            format!("\"{}\" must have \"zone\" parameter", d.name),
            &d.pos,
        ));
    };
    let list = s.guard.limit_req.limits.get_or_insert_with(Vec::new);
    if list.iter().any(|(z, _, _)| *z == zone) {
        return Err(ConfError::Duplicate {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    let delay = if nodelay { u64::MAX } else { delay * 1000 };
    list.push((zone.clone(), burst * 1000, delay));
    cx.zones.refs.push((true, zone, d.pos.clone()));
    Ok(())
}

fn positive(d: &Directive, a: &str, n: &str) -> Result<u64, ConfError> {
    match number::<u64>(d, n) {
        Ok(v) if v > 0 && v < u64::MAX / 1000 => Ok(v),
        _ => Err(ConfError::other(
            format!("invalid {} \"{a}\"", a.split('=').next().unwrap_or("value")),
            &d.pos,
        )),
    }
}

/// `limit_conn ZONE N`.
pub(crate) fn limit_conn(s: &mut LocSettings, d: &Directive, cx: &mut Cx) -> R {
    let zone = arg0(d).to_string();
    let n = d.args.get(1).map(String::as_str).unwrap_or("");
    let max = match number::<u32>(d, n) {
        Ok(v) if v > 0 && v <= 65535 => v,
        _ => {
            return Err(ConfError::other(
                format!("invalid number of connections \"{n}\""),
                &d.pos,
            ))
        }
    };
    let list = s.guard.limit_conn.limits.get_or_insert_with(Vec::new);
    if list.iter().any(|(z, _)| *z == zone) {
        return Err(ConfError::Duplicate {
            name: d.name.clone(),
            pos: d.pos.clone(),
        });
    }
    list.push((zone.clone(), max));
    cx.zones.refs.push((false, zone, d.pos.clone()));
    Ok(())
}

/// A status in 400..=599 (`limit_req_status`, `limit_conn_status`).
fn status(d: &Directive) -> Result<u16, ConfError> {
    let a = arg0(d);
    match number::<u16>(d, a) {
        Ok(v) if (400..=599).contains(&v) => Ok(v),
        _ => Err(ConfError::InvalidChoice {
            value: a.to_string(),
            name: d.name.clone(),
            expected: "between 400 and 599".into(),
            pos: d.pos.clone(),
        }),
    }
}

/// `info|notice|warn|error`.
fn level(d: &Directive) -> Result<LogLevel, ConfError> {
    super::args::choice(
        d,
        arg0(d),
        &[
            ("info", LogLevel::Info),
            ("notice", LogLevel::Notice),
            ("warn", LogLevel::Warn),
            ("error", LogLevel::Error),
        ],
    )
}

/// `limit_req_status CODE`.
pub(crate) fn limit_req_status(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_req.status, d)?;
    s.guard.limit_req.status = Some(status(d)?);
    Ok(())
}

/// `limit_req_log_level LEVEL`.
pub(crate) fn limit_req_log_level(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_req.log_level, d)?;
    s.guard.limit_req.log_level = Some(level(d)?);
    Ok(())
}

/// `limit_req_dry_run on|off`.
pub(crate) fn limit_req_dry_run(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_req.dry_run, d)?;
    s.guard.limit_req.dry_run = Some(flag(d)?);
    Ok(())
}

/// `limit_conn_status CODE`.
pub(crate) fn limit_conn_status(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_conn.status, d)?;
    s.guard.limit_conn.status = Some(status(d)?);
    Ok(())
}

/// `limit_conn_log_level LEVEL`.
pub(crate) fn limit_conn_log_level(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_conn.log_level, d)?;
    s.guard.limit_conn.log_level = Some(level(d)?);
    Ok(())
}

/// `limit_conn_dry_run on|off`.
pub(crate) fn limit_conn_dry_run(s: &mut LocSettings, d: &Directive, _: &mut Cx) -> R {
    once(&s.guard.limit_conn.dry_run, d)?;
    s.guard.limit_conn.dry_run = Some(flag(d)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    fn load(http: &str) -> Result<crate::conf::model::Config, crate::conf::ConfError> {
        crate::conf::load_str(
            &format!("events {{}}\nhttp {{\n{http}\n}}\n"),
            std::path::Path::new("/etc/fb/limits.conf"),
            std::path::Path::new("/srv"),
        )
    }

    #[test]
    fn zones_and_limits_load_with_nginx_units() {
        let conf = load(
            r#"limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
limit_req_zone $host zone=two:10m rate=20r/s sync;
limit_conn_zone $binary_remote_addr zone=addr:64k;
server { listen 127.0.0.1:8080;
  limit_req zone=one burst=5 nodelay;
  limit_req zone=two delay=3 burst=10;
  limit_req_status 429; limit_req_log_level warn;
  limit_conn addr 2; limit_conn_dry_run on;
  location /own { limit_req zone=two; }
}"#,
        )
        .expect("loads");
        let s = &conf.http.as_ref().expect("http").servers[0];
        let g = s.default_location.guard.as_ref().expect("guard");
        let r = g.limit_req.as_ref().expect("limit_req");
        assert_eq!(r.limits.len(), 2);
        assert_eq!(
            r.limits[0].zone.rate, 16,
            "1r/m in milli-requests per second"
        );
        assert_eq!((r.limits[0].burst, r.limits[0].delay), (5000, u64::MAX));
        assert_eq!(r.limits[1].zone.rate, 20_000);
        assert_eq!((r.limits[1].burst, r.limits[1].delay), (10_000, 3000));
        assert_eq!(r.status, 429);
        assert_eq!(r.log_level, crate::conf::model::LogLevel::Warn);
        let c = g.limit_conn.as_ref().expect("limit_conn");
        assert_eq!((c.limits[0].max, c.status, c.dry_run), (2, 503, true));
        // A location's own limit_req replaces the list; the status is inherited.
        let own = s.locations.find("/own").expect("/own").conf.clone();
        let r = own.guard.as_ref().unwrap().limit_req.as_ref().unwrap();
        assert_eq!((r.limits.len(), r.status), (1, 429));
        assert!(std::sync::Arc::ptr_eq(&r.limits[0].zone, &{
            let g = s.default_location.guard.as_ref().unwrap();
            g.limit_req.as_ref().unwrap().limits[1].zone.clone()
        }));
    }

    #[test]
    fn mistakes_are_refused_as_nginx() {
        for (conf, msg) in [
            ("server { listen 127.0.0.1:8080; limit_req zone=nope; }", "zero size shared memory zone \"nope\""),
            ("limit_req_zone $binary_remote_addr zone=a:1m rate=1r/h;", "invalid rate \"rate=1r/h\""),
            ("limit_req_zone $binary_remote_addr zone=a:1m rate=0r/s;", "invalid rate"),
            ("limit_req_zone $binary_remote_addr zone=a:1k rate=1r/s;", "zone \"a\" is too small"),
            ("limit_req_zone $binary_remote_addr rate=1r/s;", "must have \"zone\" parameter"),
            ("limit_req_zone $binary_remote_addr zone=a:1m; limit_conn_zone $host zone=a:1m;", "duplicate zone \"a\""),
            ("limit_req_zone $host zone=a:1m rate=1r/s bogus;", "invalid parameter \"bogus\""),
            ("limit_conn_zone $binary_remote_addr zone=a:1m; server { listen 127.0.0.1:8080; limit_conn a 0; }", "invalid number of connections \"0\""),
            ("limit_req_zone $binary_remote_addr zone=a:1m; server { listen 127.0.0.1:8080; limit_req zone=a burst=x; }", "invalid burst \"burst=x\""),
            ("limit_req_zone $binary_remote_addr zone=a:1m; server { listen 127.0.0.1:8080; limit_req zone=a; limit_req zone=a; }", "\"limit_req\" directive is duplicate"),
            ("limit_req_status 200;", "it must be between 400 and 599"),
            ("limit_conn_log_level debug;", "it must be"),
        ] {
            let e = load(conf).expect_err(conf).to_string();
            assert!(e.contains(msg), "{conf}: {e}");
        }
    }
}
