//! From the directive tree to the model: context checks, handlers, then nginx's merge.
//!
//! Reading happens in one pass over the tree, as nginx's: each directive is looked up in the
//! table (unknown, not supported yet, not allowed here, block or not, argument count) and its
//! handler sets a field of the current level's settings. Only when the whole tree is read do
//! levels merge, so an http-level value written after a server block still applies to it
//! (as nginx): http → server → location → nested location, then defaults. Last come checks
//! that need the whole picture (certificates of `listen ... ssl` servers, default servers);
//! grouping servers by address is `vhosts`' job.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::args::R;
use super::declare::finish_conf;
use super::directives::srv_directives;
use super::error::ConfError;
use super::model::{
    HttpConf, Listen, ListenKey, Locations, MainConf, MimeTypes, OcspMode, Pos, PrefixLocation,
    RegexLocation, ServerConf, ServerName, SessionCache, SocketConf, TlsVersion, VerifyClient,
};
use super::parse::Directive;
use super::rewrite::regex::Regex;
use super::rewrite::IfIn;
use super::server_head::{self, ServerHead};
use super::settings::{default_types, Cx, Here, LocSettings, MainSettings, SrvSettings};
use super::table::{self, Handler, Spec, EVENTS, HTTP, LOCATION, MAIN, SERVER};

/// The `http {}` block as read.
#[derive(Default)]
struct HttpPart {
    srv: SrvSettings,
    loc: LocSettings,
    servers: Vec<ServerPart>,
}

/// A `server {}` block as read.
struct ServerPart {
    pos: Pos,
    head: ServerHead,
    srv: SrvSettings,
    loc: LocSettings,
    locations: Vec<LocPart>,
}

/// What a location matches.
enum LocKind {
    Exact(String),
    Prefix { prefix: String, no_regex: bool },
    Regex(Regex),
    Named(String),
}

/// A `location {}` block as read.
struct LocPart {
    kind: LocKind,
    /// The URI, regex or `@name` without the modifier (nginx's `clcf->name`, for messages).
    uri: String,
    /// As written, e.g. `= /favicon.ico`.
    name: String,
    pos: Pos,
    loc: LocSettings,
    children: Vec<LocPart>,
}

/// Reads `globals` (`-g`) then `main` and merges everything.
pub(crate) fn build(
    globals: &[Directive],
    main: &[Directive],
    cx: &mut Cx,
) -> Result<(MainConf, Option<HttpConf>), ConfError> {
    let mut m = MainSettings::default();
    let mut http = None;
    // Variables defined anywhere (`set`, `map`, ...) may be used anywhere, as nginx.
    let mut names = Vec::new();
    super::rewrite::declared_names(main, &mut names);
    let _declared = super::vars::declare(names);
    walk_main(globals, &mut m, &mut http, cx)?;
    walk_main(main, &mut m, &mut http, cx)?;
    cx.daemon = m.daemon.unwrap_or(false);
    super::limits::check_refs(cx)?;
    super::upstream_zone::check_sizes(cx)?;
    super::cache::check_refs(cx)?;
    let http = http.map(|h| finish_http(h, cx)).transpose()?;
    let pid_written = m.pid.is_some();
    let mut main = m.finish();
    // `/run/firstbyte.pid` is root's: an ordinary user, who cannot write there, gets no pid
    // file unless the config names one, so a minimal config starts as anyone.
    if !pid_written && !cx.is_root {
        main.pid = None;
    }
    Ok((main, http))
}

/// The table's entry for `d` in context `ctx`, after nginx's checks in nginx's order.
pub(crate) fn spec_for(d: &Directive, ctx: u8) -> Result<&'static Spec, ConfError> {
    let name = || d.name.clone();
    let pos = || d.pos.clone();
    let Some(spec) = table::find(&d.name) else {
        if table::is_unsupported(&d.name) {
            if table::unsupported_contexts(&d.name).is_some_and(|c| c & ctx == 0) {
                return Err(ConfError::NotAllowedHere {
                    name: name(),
                    pos: pos(),
                });
            }
            return Err(ConfError::Unsupported {
                name: name(),
                pos: pos(),
            });
        }
        return Err(ConfError::UnknownDirective {
            name: name(),
            pos: pos(),
        });
    };
    if spec.contexts & ctx == 0 {
        return Err(ConfError::NotAllowedHere {
            name: name(),
            pos: pos(),
        });
    }
    if spec.block && d.block.is_none() {
        return Err(ConfError::NoOpeningBrace {
            name: name(),
            pos: pos(),
        });
    }
    if !spec.block && d.block.is_some() {
        return Err(ConfError::NotTerminated {
            name: name(),
            pos: pos(),
        });
    }
    let n = d.args.len();
    if n < usize::from(spec.min_args) || n > usize::from(spec.max_args) {
        return Err(ConfError::ArgCount {
            name: name(),
            pos: pos(),
        });
    }
    Ok(spec)
}

/// A main-level directive also allowed in http, server and location (`error_log`): read as
/// at the main level, its values kept by the level (inherited by the levels inside).
fn below_main(
    f: fn(&mut MainSettings, &Directive, &mut Cx) -> R,
    loc: &mut LocSettings,
    d: &Directive,
    cx: &mut Cx,
) -> R {
    let mut m = MainSettings::default();
    f(&mut m, d, cx)?;
    loc.error_log
        .get_or_insert_with(Vec::new)
        .extend(m.error_log);
    Ok(())
}

/// Handlers every context shares: ignored directives.
fn common(spec: &Spec, d: &Directive, cx: &mut Cx) -> R {
    match spec.handler {
        Handler::Ignored(reason) => {
            cx.warn(format!("\"{}\" is ignored: {reason}", d.name), &d.pos);
            Ok(())
        }
        _ => Err(ConfError::NotAllowedHere {
            name: d.name.clone(),
            pos: d.pos.clone(),
        }),
    }
}

fn duplicate(d: &Directive) -> ConfError {
    ConfError::Duplicate {
        name: d.name.clone(),
        pos: d.pos.clone(),
    }
}

fn children(d: &Directive) -> &[Directive] {
    d.block.as_deref().unwrap_or_default()
}

fn walk_main(
    dirs: &[Directive],
    m: &mut MainSettings,
    http: &mut Option<HttpPart>,
    cx: &mut Cx,
) -> R {
    for d in dirs {
        let spec = spec_for(d, MAIN)?;
        match spec.handler {
            Handler::Main(f) => f(m, d, cx)?,
            Handler::Events => {
                if m.events {
                    return Err(duplicate(d));
                }
                m.events = true;
                for e in children(d) {
                    let spec = spec_for(e, EVENTS)?;
                    match spec.handler {
                        Handler::Main(f) => f(m, e, cx)?,
                        _ => common(spec, e, cx)?,
                    }
                }
            }
            Handler::Http => {
                if http.is_some() {
                    return Err(duplicate(d));
                }
                let mut h = HttpPart::default();
                walk_http(children(d), &mut h, cx)?;
                *http = Some(h);
            }
            _ => common(spec, d, cx)?,
        }
    }
    Ok(())
}

fn walk_http(dirs: &[Directive], h: &mut HttpPart, cx: &mut Cx) -> R {
    for d in dirs {
        let spec = spec_for(d, HTTP)?;
        match spec.handler {
            Handler::Server => h.servers.push(server_block(d, cx)?),
            Handler::Srv(f) => f(&mut h.srv, d, cx)?,
            Handler::Loc(f) => f(&mut h.loc, d, cx)?,
            Handler::Main(f) => below_main(f, &mut h.loc, d, cx)?,
            Handler::Shared(f) => f(cx, d)?,
            _ => common(spec, d, cx)?,
        }
    }
    Ok(())
}

fn server_block(d: &Directive, cx: &mut Cx) -> Result<ServerPart, ConfError> {
    let mut s = ServerPart {
        pos: d.pos.clone(),
        head: ServerHead::default(),
        srv: SrvSettings::default(),
        loc: LocSettings::default(),
        locations: Vec::new(),
    };
    for c in children(d) {
        let spec = spec_for(c, SERVER)?;
        match spec.handler {
            Handler::Location => s.locations.push(location_block(c, None, cx)?),
            Handler::If => super::rewrite::if_block(&mut s.loc, c, cx, IfIn::Server)?,
            Handler::Head(f) => f(&mut s.head, c, cx)?,
            Handler::Srv(f) => f(&mut s.srv, c, cx)?,
            Handler::Loc(f) => f(&mut s.loc, c, cx)?,
            Handler::Main(f) => below_main(f, &mut s.loc, c, cx)?,
            _ => common(spec, c, cx)?,
        }
    }
    Ok(s)
}

fn location_block(
    d: &Directive,
    parent: Option<&LocPart>,
    cx: &mut Cx,
) -> Result<LocPart, ConfError> {
    let other = |msg: String| ConfError::other(msg, &d.pos);
    let (kind, uri, name) = match d.args.as_slice() {
        [m, uri] => {
            let kind = match m.as_str() {
                "=" => LocKind::Exact(uri.clone()),
                "^~" => LocKind::Prefix {
                    prefix: uri.clone(),
                    no_regex: true,
                },
                "~" => LocKind::Regex(Regex::compile(uri, false, &d.pos)?),
                "~*" => LocKind::Regex(Regex::compile(uri, true, &d.pos)?),
                _ => return Err(other(format!("invalid location modifier \"{m}\""))),
            };
            (kind, uri.clone(), format!("{m} {uri}"))
        }
        [one] => {
            if let Some(u) = one.strip_prefix('=').filter(|_| one.len() > 1) {
                (
                    LocKind::Exact(u.to_string()),
                    u.to_string(),
                    format!("= {u}"),
                )
            } else if let Some(u) = one.strip_prefix("^~") {
                let kind = LocKind::Prefix {
                    prefix: u.to_string(),
                    no_regex: true,
                };
                (kind, u.to_string(), format!("^~ {u}"))
            } else if let Some(re) = one.strip_prefix("~*").filter(|_| one.len() > 2) {
                (
                    LocKind::Regex(Regex::compile(re, true, &d.pos)?),
                    re.to_string(),
                    format!("~* {re}"),
                )
            } else if let Some(re) = one.strip_prefix('~').filter(|_| one.len() > 1) {
                (
                    LocKind::Regex(Regex::compile(re, false, &d.pos)?),
                    re.to_string(),
                    format!("~ {re}"),
                )
            } else if one.starts_with('@') {
                (LocKind::Named(one.clone()), one.clone(), one.clone())
            } else {
                let kind = LocKind::Prefix {
                    prefix: one.clone(),
                    no_regex: false,
                };
                (kind, one.clone(), one.clone())
            }
        }
        _ => {
            return Err(ConfError::ArgCount {
                name: d.name.clone(),
                pos: d.pos.clone(),
            })
        }
    };
    if let Some(p) = parent {
        match p.kind {
            LocKind::Exact(_) => {
                return Err(other(format!(
                    "location \"{uri}\" cannot be inside the exact location \"{}\"",
                    p.uri
                )))
            }
            LocKind::Named(_) => {
                return Err(other(format!(
                    "location \"{uri}\" cannot be inside the named location \"{}\"",
                    p.uri
                )))
            }
            _ => {}
        }
        if matches!(kind, LocKind::Named(_)) {
            return Err(other(format!(
                "named location \"{uri}\" can be on the server level only"
            )));
        }
        if !matches!(kind, LocKind::Regex(_)) && !uri.starts_with(&p.uri) {
            return Err(other(format!(
                "location \"{uri}\" is outside location \"{}\"",
                p.uri
            )));
        }
    }
    let here = Here {
        prefix: match &kind {
            LocKind::Exact(u) | LocKind::Prefix { prefix: u, .. } => u.clone(),
            _ => String::new(),
        },
        regex: matches!(kind, LocKind::Regex(_)),
        named: matches!(kind, LocKind::Named(_)),
    };
    let mut part = LocPart {
        kind,
        uri,
        name,
        pos: d.pos.clone(),
        loc: LocSettings {
            here,
            ..Default::default()
        },
        children: Vec::new(),
    };
    if let LocKind::Regex(re) = &part.kind {
        part.loc.rewrite.location_captures = super::rewrite::location_captures(re, cx, d)?;
    }
    for c in children(d) {
        let spec = spec_for(c, LOCATION)?;
        match spec.handler {
            Handler::Location => {
                let child = location_block(c, Some(&part), cx)?;
                part.children.push(child);
            }
            Handler::Loc(f) => f(&mut part.loc, c, cx)?,
            Handler::Main(f) => below_main(f, &mut part.loc, c, cx)?,
            Handler::If => super::rewrite::if_block(&mut part.loc, c, cx, IfIn::Location)?,
            _ => common(spec, c, cx)?,
        }
    }
    Ok(part)
}

fn finish_http(h: HttpPart, cx: &mut Cx) -> Result<HttpConf, ConfError> {
    let default_types: Arc<MimeTypes> = Arc::new(default_types());
    let mut servers = Vec::with_capacity(h.servers.len());
    let HttpPart {
        srv,
        loc,
        servers: parts,
    } = h;
    let vars = Arc::new(std::mem::take(&mut cx.user_vars));
    super::proxy::finish_upstreams(
        cx,
        loc.proxy.resolver.as_ref().and_then(|r| r.as_ref()),
        loc.proxy.resolver_timeout,
    )?;
    let mut parts = parts;
    // The default server of each address: the one saying `default_server`, else the first.
    let mut defaults: HashMap<ListenKey, usize> = HashMap::new();
    for (i, sp) in parts.iter().enumerate() {
        for l in &sp.head.listen {
            if l.default_server {
                defaults.insert(l.key(), i);
            } else {
                defaults.entry(l.key()).or_insert(i);
            }
        }
    }
    // The deprecated `ssl on` (nginx 1.22): an address speaks TLS when its default server says
    // so, as if that server's `listen` there said `ssl`.
    for (i, sp) in parts.iter_mut().enumerate() {
        if sp.srv.ssl.or(srv.ssl) == Some(true) {
            for l in sp.head.listen.iter_mut().filter(|l| !l.quic) {
                if defaults.get(&l.key()) == Some(&i) {
                    l.ssl = true;
                }
            }
        }
    }
    // `ssl` belongs to the address: a server whose own `listen` lacks it still speaks TLS
    // there when another server's `listen` on the same address says `ssl` (nginx).
    let ssl_addrs: Vec<ListenKey> = parts
        .iter()
        .flat_map(|sp| sp.head.listen.iter())
        .filter(|l| l.ssl)
        .map(Listen::key)
        .collect();
    for (i, sp) in parts.into_iter().enumerate() {
        let default_on_ssl = sp
            .head
            .listen
            .iter()
            .any(|l| ssl_addrs.contains(&l.key()) && defaults.get(&l.key()) == Some(&i));
        servers.push(Arc::new(finish_server(
            sp,
            &srv,
            &loc,
            cx,
            &default_types,
            &vars,
            SslPlace {
                addrs: &ssl_addrs,
                default_on_ssl,
            },
        )?));
    }
    check_addresses(&servers)?;
    // A default server that rejects handshakes makes none for the blocks without a
    // certificate on its address: they need one (or to reject too), as nginx.
    for s in &servers {
        let Some(t) = s.tls.as_ref() else { continue };
        if t.reject_handshake || !t.certificates.is_empty() || !t.dynamic_certificates.is_empty() {
            continue;
        }
        let rejecting_default = s.listen.iter().any(|l| {
            defaults
                .get(&l.key())
                .and_then(|&i| servers.get(i))
                .and_then(|d| d.tls.as_ref())
                .is_some_and(|d| d.reject_handshake && d.certificates.is_empty())
        });
        if rejecting_default {
            return Err(ConfError::NoCertificate { pos: s.pos.clone() });
        }
    }
    Ok(HttpConf { servers })
}

/// Where a server block stands among `ssl` addresses.
struct SslPlace<'a> {
    /// The addresses some `listen ... ssl` names.
    addrs: &'a [ListenKey],
    /// Whether the block is the default server of one of them.
    default_on_ssl: bool,
}

/// The most an `ssl_password_file` may hold (nginx reads at most 64 KB of one too).
const MAX_PASSWORD_FILE: u64 = 64 * 1024;

fn finish_server(
    sp: ServerPart,
    http_srv: &SrvSettings,
    http_loc: &LocSettings,
    cx: &mut Cx,
    default_types: &Arc<MimeTypes>,
    vars: &Arc<super::rewrite::VarDefs>,
    ssl: SslPlace<'_>,
) -> Result<ServerConf, ConfError> {
    let SslPlace {
        addrs: ssl_addrs,
        default_on_ssl,
    } = ssl;
    let mut srv = sp.srv;
    srv.inherit(http_srv);
    let mut loc = sp.loc;
    loc.inherit(http_loc);
    let listen = if sp.head.listen.is_empty() {
        vec![server_head::default_listen(cx.is_root, &sp.pos)]
    } else {
        sp.head.listen
    };
    let (certificates, dynamic) = srv.tls.cert_keys(&cx.conf_dir)?;
    let quic = listen.iter().any(|l| l.quic);
    let has_cert = !(certificates.is_empty() && dynamic.is_empty());
    // On an address another server made `ssl`, a server with a certificate makes its own
    // handshakes (SNI); one without falls back to the address's default server's, as nginx.
    let shared_ssl = has_cert && listen.iter().any(|l| ssl_addrs.contains(&l.key()));
    let reject = srv.tls.reject_handshake.unwrap_or(false);
    let on_ssl_addr = listen.iter().any(|l| l.ssl || ssl_addrs.contains(&l.key()));
    let tls = if quic || shared_ssl || on_ssl_addr {
        // nginx asks a certificate (or `ssl_reject_handshake on`) of the default server of an
        // `ssl` address only: another block without one has the default's make its handshakes
        // (`tls::ServerConfigs` builds it no config), its own client checks still applying.
        if !has_cert && !reject && (quic || default_on_ssl) {
            return Err(ConfError::NoCertificate { pos: sp.pos });
        }
        if reject && quic {
            return Err(ConfError::other(
                "\"ssl_reject_handshake\" is not supported with \"listen ... quic\" by firstbyte yet",
                &sp.pos,
            ));
        }
        let mut t = srv.tls.finish(certificates, dynamic);
        if t.ocsp != OcspMode::Off {
            if t.verify_client == VerifyClient::OptionalNoCa {
                return Err(ConfError::other(
                    "\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\"",
                    &sp.pos,
                ));
            }
            // nginx asks the server level's resolver.
            let p = &loc.proxy;
            t.ocsp_resolver = p
                .resolver
                .clone()
                .flatten()
                .map(|r| (r, p.resolver_timeout.unwrap_or(Duration::from_secs(30))));
        }
        if matches!(t.verify_client, VerifyClient::On | VerifyClient::Optional)
            && has_cert
            && t.client_certificate.is_none()
            && t.trusted_certificate.is_none()
        {
            return Err(ConfError::other(
                "no ssl_client_certificate for ssl_verify_client",
                &sp.pos,
            ));
        }
        if quic && !t.protocols.contains(&TlsVersion::Tls13) {
            return Err(ConfError::other(
                "\"listen ... quic\" needs TLSv1.3 in \"ssl_protocols\" (QUIC carries TLS 1.3 only)",
                &sp.pos,
            ));
        }
        if quic && t.verify_client != VerifyClient::Off {
            // Refused rather than served without the check: one QUIC endpoint serves every
            // server block of its address, and client certificates are not wired through it.
            return Err(ConfError::other(
                "\"ssl_verify_client\" is not supported with \"listen ... quic\" by firstbyte yet",
                &sp.pos,
            ));
        }
        if t.early_data {
            // rustls takes early data only with single-use (stateful) tickets: the replay
            // protection. Shared ticket keys would make tickets reusable across a fleet.
            if matches!(
                t.session_cache,
                SessionCache::Off | SessionCache::None | SessionCache::Sessions(0)
            ) {
                return Err(ConfError::other(
                    "\"ssl_early_data\" needs \"ssl_session_cache\": 0-RTT tickets are single-use entries of the session cache (replay protection)",
                    &sp.pos,
                ));
            }
            if !t.session_ticket_keys.is_empty() {
                return Err(ConfError::other(
                    "\"ssl_early_data\" cannot be combined with \"ssl_session_ticket_key\": 0-RTT needs single-use tickets kept by this server, not tickets any server with the key accepts",
                    &sp.pos,
                ));
            }
        }
        Some(t)
    } else {
        None
    };
    // The store reads it with the keys of a block that makes handshakes with them.
    let keys_loaded = has_cert && tls.as_ref().is_some_and(|t| !t.reject_handshake);
    if !keys_loaded {
        if let Some(Some(path)) = &srv.tls.password_file {
            // nginx reads every `ssl_password_file` when it parses it, used or not.
            crate::files::read(path, MAX_PASSWORD_FILE).map_err(|e| {
                ConfError::other(
                    format!(
                        "cannot open \"{}\" ({}) in \"ssl_password_file\"",
                        path.display(),
                        crate::log::OsError(&e)
                    ),
                    &sp.pos,
                )
            })?;
        }
    }
    let http2 = srv.http2.unwrap_or(false) || listen.iter().any(|l| l.http2);
    let locations = build_locations(sp.locations, &loc, cx, default_types)?;
    let default_location = loc.finish(
        cx,
        String::new(),
        sp.pos.clone(),
        default_types,
        Locations::default(),
    );
    check_charset(&default_location)?;
    Ok(srv_directives!(finish_conf! (srv) ServerConf {
        pos: sp.pos,
        // A block that does not serve HTTP/3 does not advertise it.
        alt_svc: alt_svc(&listen).filter(|_| srv.http3.unwrap_or(true)),
        listen,
        name_captures: sp.head.name_captures,
        server_name: sp.head.first_name.unwrap_or_default(),
        server_names: sp
            .head
            .names
            .unwrap_or_else(|| vec![ServerName::Exact(String::new())]),
        tls,
        record: srv.record(),
        socket: SocketConf {
            notsent_lowat: srv.notsent_lowat,
            congestion: srv.congestion.clone(),
        },
        http2,
        locations,
        default_location: Arc::new(default_location),
        vars: vars.clone(),
    }))
}

/// A location that recodes needs a `charset_map` (nginx's check at the end of `http {}`).
fn check_charset(l: &super::model::LocationConf) -> Result<(), ConfError> {
    super::charset::check(
        &l.charsets,
        l.charset.as_deref(),
        l.source_charset.as_deref(),
        &l.pos,
    )
}

/// The `Alt-Svc` value that advertises a block's first QUIC port.
fn alt_svc(listen: &[super::model::Listen]) -> Option<http::HeaderValue> {
    let port = listen.iter().find(|l| l.quic)?.addr.port();
    http::HeaderValue::from_str(&format!("h3=\":{port}\"; ma=86400")).ok()
}

/// Merges and finishes `parts` under `parent` (already merged). A server's rewrite
/// directives are not the locations': nginx runs them in the server rewrite phase, before.
fn build_locations(
    parts: Vec<LocPart>,
    parent: &LocSettings,
    cx: &Cx,
    default_types: &Arc<MimeTypes>,
) -> Result<Locations, ConfError> {
    let mut out = Locations::default();
    // Prefixes seen: a set, as a linear scan per location is quadratic (10,000 locations:
    // half the load's instructions).
    let mut prefixes: HashSet<String> = HashSet::new();
    for p in parts {
        let mut s = p.loc;
        s.inherit(parent);
        s.proxy.resolve(cx)?;
        let proxied = s.proxy.pass.is_some();
        s.fastcgi.resolve(cx, proxied)?;
        let nested = build_locations(p.children, &s, cx, default_types)?;
        let conf = Arc::new(s.finish(cx, p.name, p.pos.clone(), default_types, nested));
        check_charset(&conf)?;
        let dup = || ConfError::other(format!("duplicate location \"{}\"", p.uri), &p.pos);
        match p.kind {
            LocKind::Exact(u) => {
                if out.exact.insert(u, conf).is_some() {
                    return Err(dup());
                }
            }
            LocKind::Prefix { prefix, no_regex } => {
                if !prefixes.insert(prefix.clone()) {
                    return Err(dup());
                }
                out.prefix.push(PrefixLocation {
                    prefix,
                    no_regex,
                    conf,
                });
            }
            LocKind::Regex(regex) => out.regex.push(RegexLocation { regex, conf }),
            LocKind::Named(n) => {
                if out.named.insert(n, conf).is_some() {
                    return Err(dup());
                }
            }
        }
    }
    // Longest first; equal lengths keep file order (the sort is stable).
    out.prefix
        .sort_by_key(|p| std::cmp::Reverse(p.prefix.len()));
    Ok(out)
}

/// One `default_server` per address and transport (TCP, QUIC), as nginx checks at load.
/// (Conflicting server names are a warning `vhosts` gives when it groups servers by address.)
fn check_addresses(servers: &[Arc<ServerConf>]) -> R {
    let mut defaults: HashSet<(ListenKey, bool)> = HashSet::new();
    for s in servers {
        for l in &s.listen {
            if l.default_server && !defaults.insert((l.key(), l.quic)) {
                return Err(ConfError::other(
                    format!("a duplicate default server for {}", l.shown()),
                    &l.pos,
                ));
            }
        }
    }
    Ok(())
}

/// The listen addresses of a server, for tests and messages.
#[cfg(test)]
pub(crate) fn addrs(s: &ServerConf) -> Vec<String> {
    s.listen.iter().map(Listen::shown).collect()
}
