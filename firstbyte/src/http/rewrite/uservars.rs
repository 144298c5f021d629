//! The variables a configuration defines, for one request: `set` values, and `map` /
//! `split_clients` outputs computed when first read and kept for the request (a `volatile`
//! map is computed at each read).
//!
//! A request of a configuration that defines none carries no [`UserVars`] at all.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::conf::rewrite::{GeoDef, MapDef, MapKey, Slot, SplitDef, VarDefs};
use crate::conf::vars::Vars;

/// One request's values of the configuration's own variables.
#[derive(Debug)]
pub struct UserVars {
    defs: Arc<VarDefs>,
    set: Vec<Option<String>>,
    /// `map` outputs, then `split_clients` outputs, then `geo` outputs.
    cache: Vec<OnceLock<Option<String>>>,
    /// Being computed (a map whose source reads itself is a cycle).
    busy: Vec<AtomicBool>,
    /// `uninitialized_variable_warn` of the level whose directives run.
    pub warn_uninit: bool,
}

impl Clone for UserVars {
    fn clone(&self) -> Self {
        Self {
            defs: self.defs.clone(),
            set: self.set.clone(),
            cache: self.cache.clone(),
            busy: self.busy.iter().map(|_| AtomicBool::new(false)).collect(),
            warn_uninit: self.warn_uninit,
        }
    }
}

impl UserVars {
    /// State for a request, or None when the configuration defines no variable.
    pub fn new(defs: &Arc<VarDefs>) -> Option<Box<Self>> {
        if defs.is_empty() {
            return None;
        }
        let n = defs.maps.len() + defs.splits.len() + defs.geos.len();
        Some(Box::new(Self {
            defs: defs.clone(),
            set: vec![None; defs.set_names.len()],
            cache: (0..n).map(|_| OnceLock::new()).collect(),
            busy: (0..n).map(|_| AtomicBool::new(false)).collect(),
            warn_uninit: true,
        }))
    }

    /// Sets a `set` variable.
    pub fn set(&mut self, slot: usize, value: String) {
        if let Some(s) = self.set.get_mut(slot) {
            *s = Some(value);
        }
    }

    /// The value a `set` gave `$name` in this request, if one did (nginx: a `set` variable
    /// named like a prefix variable, `$http_foo`, is the header until it is set).
    pub fn assigned(&self, name: &str) -> Option<&str> {
        match *self.defs.slots.get(name)? {
            Slot::Set(i) => self.set.get(i)?.as_deref(),
            _ => None,
        }
    }

    /// The value of `$name` if the configuration defines it; `all` answers the variables its
    /// `map` and `split_clients` sources use.
    pub fn get<'a>(&'a self, name: &str, all: &dyn Vars) -> Option<Cow<'a, str>> {
        match *self.defs.slots.get(name)? {
            Slot::Set(i) => match self.set.get(i)? {
                Some(v) => Some(Cow::Borrowed(v)),
                None => {
                    if self.warn_uninit {
                        crate::fblog!(Warn, "using uninitialized \"{name}\" variable");
                    }
                    Some(Cow::Borrowed(""))
                }
            },
            Slot::Map(i) => {
                let m = self.defs.maps.get(i)?;
                if m.volatile {
                    return self.guarded(i, name, || map_value(m, all)).map(Cow::Owned);
                }
                self.cached(i, name, || map_value(m, all))
            }
            Slot::Split(k) => {
                let s = self.defs.splits.get(k)?;
                self.cached(self.defs.maps.len() + k, name, || {
                    Some(split_value(s, &s.source.eval(all)).to_string())
                })
            }
            Slot::Geo(k) => {
                let g = self.defs.geos.get(k)?;
                let i = self.defs.maps.len() + self.defs.splits.len() + k;
                if g.volatile {
                    return self
                        .guarded(i, name, || Some(geo_value(g, all).to_string()))
                        .map(Cow::Owned);
                }
                self.cached(i, name, || Some(geo_value(g, all).to_string()))
            }
        }
    }

    fn guarded(&self, i: usize, name: &str, f: impl FnOnce() -> Option<String>) -> Option<String> {
        let busy = self.busy.get(i)?;
        if busy.swap(true, Ordering::Relaxed) {
            crate::fblog!(Error, "cycle while evaluating variable \"{name}\"");
            return None;
        }
        let v = f();
        busy.store(false, Ordering::Relaxed);
        v
    }

    fn cached(
        &self,
        i: usize,
        name: &str,
        f: impl FnOnce() -> Option<String>,
    ) -> Option<Cow<'_, str>> {
        let cell = self.cache.get(i)?;
        if cell.get().is_none() {
            let v = self.guarded(i, name, f);
            let _ = cell.set(v);
        }
        cell.get()?.as_deref().map(Cow::Borrowed)
    }
}

/// The variables known when a TLS handshake starts, for `ssl_certificate` paths: the SNI
/// (`$ssl_server_name`), the connection's addresses and ports, and the configuration's `geo`,
/// `map` and `split_clients` variables computed from them (a `set` variable is empty then).
pub struct HandshakeVars<'a> {
    sni: &'a str,
    /// `None` on a UNIX-domain socket (then `$remote_addr` is `unix:`, the ports empty).
    peer: Option<std::net::SocketAddr>,
    local: Option<std::net::SocketAddr>,
    user: Option<Box<UserVars>>,
}

impl<'a> HandshakeVars<'a> {
    /// The variables of a handshake on `local` from `peer` asking for `sni`, with the
    /// configuration's own variables `defs`.
    pub fn new(
        defs: &Arc<VarDefs>,
        sni: &'a str,
        peer: Option<std::net::SocketAddr>,
        local: Option<std::net::SocketAddr>,
    ) -> Self {
        let user = UserVars::new(defs).map(|mut u| {
            u.warn_uninit = false;
            u
        });
        Self {
            sni,
            peer,
            local,
            user,
        }
    }
}

impl Vars for HandshakeVars<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        let addr = |a: Option<std::net::SocketAddr>| {
            Some(a.map_or(Cow::Borrowed("unix:"), |a| {
                Cow::Owned(a.ip().to_canonical().to_string())
            }))
        };
        let port = |a: Option<std::net::SocketAddr>| {
            Some(a.map_or(Cow::Borrowed(""), |a| Cow::Owned(a.port().to_string())))
        };
        match name {
            "ssl_server_name" => Some(Cow::Borrowed(self.sni)),
            "remote_addr" | "realip_remote_addr" => addr(self.peer),
            "remote_port" | "realip_remote_port" => port(self.peer),
            "server_addr" => addr(self.local),
            "server_port" => port(self.local),
            _ => self.user.as_ref()?.get(name, self),
        }
    }
}

/// A `geo`'s value for the request: by its source's value, or by the client's address
/// (`$remote_addr`, after `X-Forwarded-For` when the client is a trusted `proxy`).
pub fn geo_value<'a>(g: &'a GeoDef, all: &dyn Vars) -> &'a str {
    let ip = match &g.source {
        Some(src) => src.eval(all).trim().parse().ok(),
        None => {
            let client = all.get("remote_addr").and_then(|a| a.parse().ok());
            let xff = all.get("http_x_forwarded_for");
            g.address(client, xff.as_deref())
        }
    };
    g.lookup(ip)
}

/// A map's value for the request: exact key, then (with `hostnames`) the longest
/// `*.suffix` / `.suffix`, then the longest `prefix.*`, then the regexes in order, then
/// `default` (or empty).
pub fn map_value(m: &MapDef, all: &dyn Vars) -> Option<String> {
    let src = m.source.eval(all);
    Some(map_lookup(m, &src, all))
}

fn map_lookup(m: &MapDef, src: &str, all: &dyn Vars) -> String {
    let key = if m.hostnames {
        src.strip_suffix('.').unwrap_or(src)
    } else {
        src
    };
    let lower = key.to_ascii_lowercase();
    if let Some(v) = m.exact.get(&lower) {
        return v.eval(all);
    }
    if m.hostnames && !lower.is_empty() {
        let head = m
            .wildcards
            .iter()
            .filter_map(|(k, v)| match k {
                MapKey::Head(sfx) if lower.len() > sfx.len() && lower.ends_with(sfx.as_str()) => {
                    Some((sfx.len(), v))
                }
                MapKey::Dot(sfx) if lower.ends_with(sfx.as_str()) || lower == sfx[1..] => {
                    Some((sfx.len(), v))
                }
                _ => None,
            })
            .max_by_key(|(n, _)| *n);
        if let Some((_, v)) = head {
            return v.eval(all);
        }
        let tail = m
            .wildcards
            .iter()
            .filter_map(|(k, v)| match k {
                MapKey::Tail(pfx) if lower.len() > pfx.len() && lower.starts_with(pfx.as_str()) => {
                    Some((pfx.len(), v))
                }
                _ => None,
            })
            .max_by_key(|(n, _)| *n);
        if let Some((_, v)) = tail {
            return v.eval(all);
        }
    }
    if !src.is_empty() {
        for (c, v) in &m.regexes {
            if let Some(spans) = c.regex.captures(src) {
                let caps = crate::conf::rewrite::regex::texts(src, &spans);
                let names = c.regex.names();
                return v.eval(&Overlay {
                    caps: &caps,
                    names: &names,
                    inner: all,
                });
            }
        }
    }
    m.default.as_ref().map(|v| v.eval(all)).unwrap_or_default()
}

/// A map regex's captures over the request's variables (for `$1` and named groups in the
/// map's value).
struct Overlay<'a> {
    caps: &'a [Option<String>],
    names: &'a [(usize, String)],
    inner: &'a dyn Vars,
}

impl Vars for Overlay<'_> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        if let Ok(n) = name.parse::<usize>() {
            return self.caps.get(n)?.as_deref().map(Cow::Borrowed);
        }
        if let Some((g, _)) = self.names.iter().find(|(_, n)| n == name) {
            return self.caps.get(*g)?.as_deref().map(Cow::Borrowed);
        }
        self.inner.get(name)
    }
}

/// The `split_clients` value for `src`: nginx's MurmurHash2 against the parts' bounds.
pub fn split_value<'a>(s: &'a SplitDef, src: &str) -> &'a str {
    let h = murmur2(src.as_bytes());
    s.parts
        .iter()
        .find(|(bound, _)| h < *bound || *bound == 0)
        .map_or("", |(_, v)| v.as_str())
}

/// nginx's `ngx_murmur_hash2` (MurmurHash2, seed 0, little-endian words).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        if rest.len() >= 3 {
            h ^= u32::from(rest[2]) << 16;
        }
        if rest.len() >= 2 {
            h ^= u32::from(rest[1]) << 8;
        }
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an `ssl_certificate` path can read at handshake time: the connection's own
    /// variables, and `geo`/`map` over them; a `set` variable is empty (and not warned about).
    #[test]
    fn handshake_variables() {
        let c = crate::conf::testutil::ok(
            "http { geo $g { default d; 10.0.0.0/8 ten; } \
             map $ssl_server_name $m { a.test one; default other; } \
             map $server_port $p { 8443 alt; default main; } \
             server { listen 127.0.0.1:8080; set $s x; } }",
        );
        let defs = c.http.unwrap().servers[0].vars.clone();
        let peer = "10.1.2.3:5555".parse().unwrap();
        let local = "[::ffff:127.0.0.1]:8443".parse().unwrap();
        let v = HandshakeVars::new(&defs, "a.test", Some(peer), Some(local));
        let get = |n: &str| v.get(n).map(|s| s.into_owned());
        assert_eq!(get("ssl_server_name").as_deref(), Some("a.test"));
        assert_eq!(get("remote_addr").as_deref(), Some("10.1.2.3"));
        assert_eq!(get("remote_port").as_deref(), Some("5555"));
        assert_eq!(get("server_addr").as_deref(), Some("127.0.0.1"));
        assert_eq!(get("server_port").as_deref(), Some("8443"));
        assert_eq!(get("g").as_deref(), Some("ten"));
        assert_eq!(get("m").as_deref(), Some("one"));
        assert_eq!(get("p").as_deref(), Some("alt"));
        assert_eq!(get("s").as_deref(), Some(""));
        assert_eq!(get("request_uri"), None);
        let other = HandshakeVars::new(&defs, "", "192.0.2.1:1".parse().ok(), Some(local));
        assert_eq!(other.get("g").as_deref(), Some("d"));
        assert_eq!(other.get("m").as_deref(), Some("other"));
    }
}
