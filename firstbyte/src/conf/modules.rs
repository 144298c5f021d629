//! nginx's modules as `nginx -V` names them, and which of them firstbyte has.
//!
//! Tools read `nginx -V`'s `configure arguments:` line to learn what a binary can do
//! (nginx's own test suite skips a test whose module is absent; certbot looks for
//! `--with-http_ssl_module`). firstbyte prints the same line, derived from its directive
//! table: a module counts as present when the directive that identifies it is one firstbyte
//! implements ([`table::find`], or [`UPSTREAM_DIRECTIVES`] inside `upstream {}`), so adding
//! the directive changes `-V` without anyone editing a list here.

use super::proxy::UPSTREAM_DIRECTIVES;
use super::table;

/// Where a module's identifying directive lives.
#[derive(Debug, Clone, Copy)]
enum Marker {
    /// A directive of the table (main, http, server or location level).
    Directive(&'static str),
    /// A directive inside `upstream {}`.
    Upstream(&'static str),
}

/// One nginx module.
#[derive(Debug, Clone, Copy)]
struct Module {
    /// The name in configure's flags: `http_ssl_module` for `--with-http_ssl_module`.
    name: &'static str,
    /// Built by nginx's configure unless `--without-NAME`: listed only when firstbyte lacks
    /// it. The others are listed (`--with-NAME`) only when firstbyte has them.
    default: bool,
    /// Present when this directive is implemented.
    marker: Marker,
}

const fn m(name: &'static str, default: bool, marker: Marker) -> Module {
    Module {
        name,
        default,
        marker,
    }
}

use Marker::{Directive as D, Upstream as U};

/// nginx's HTTP modules, in the order of `./configure --help` (stream and mail need
/// `--with-stream`/`--with-mail`, which firstbyte does not claim, so they are not listed).
#[rustfmt::skip]
static MODULES: &[Module] = &[
    m("http_ssl_module", false, D("ssl_certificate")),
    m("http_v2_module", false, D("http2")),
    m("http_v3_module", false, D("http3")),
    m("http_realip_module", false, D("set_real_ip_from")),
    m("http_addition_module", false, D("add_before_body")),
    m("http_xslt_module", false, D("xslt_stylesheet")),
    m("http_image_filter_module", false, D("image_filter")),
    m("http_geoip_module", false, D("geoip_country")),
    m("http_sub_module", false, D("sub_filter")),
    m("http_dav_module", false, D("dav_methods")),
    m("http_flv_module", false, D("flv")),
    m("http_mp4_module", false, D("mp4")),
    m("http_gunzip_module", false, D("gunzip")),
    m("http_gzip_static_module", false, D("gzip_static")),
    m("http_auth_request_module", false, D("auth_request")),
    m("http_random_index_module", false, D("random_index")),
    m("http_secure_link_module", false, D("secure_link")),
    m("http_degradation_module", false, D("degradation")),
    m("http_slice_module", false, D("slice")),
    m("http_stub_status_module", false, D("stub_status")),
    m("http_perl_module", false, D("perl")),
    m("http_charset_module", true, D("charset")),
    m("http_gzip_module", true, D("gzip")),
    m("http_ssi_module", true, D("ssi")),
    m("http_userid_module", true, D("userid")),
    m("http_access_module", true, D("allow")),
    m("http_auth_basic_module", true, D("auth_basic")),
    m("http_mirror_module", true, D("mirror")),
    m("http_autoindex_module", true, D("autoindex")),
    m("http_geo_module", true, D("geo")),
    m("http_map_module", true, D("map")),
    m("http_split_clients_module", true, D("split_clients")),
    m("http_referer_module", true, D("valid_referers")),
    m("http_rewrite_module", true, D("rewrite")),
    m("http_proxy_module", true, D("proxy_pass")),
    m("http_fastcgi_module", true, D("fastcgi_pass")),
    m("http_uwsgi_module", true, D("uwsgi_pass")),
    m("http_scgi_module", true, D("scgi_pass")),
    m("http_grpc_module", true, D("grpc_pass")),
    m("http_memcached_module", true, D("memcached_pass")),
    m("http_limit_conn_module", true, D("limit_conn")),
    m("http_limit_req_module", true, D("limit_req")),
    m("http_empty_gif_module", true, D("empty_gif")),
    m("http_browser_module", true, D("modern_browser")),
    m("http_upstream_hash_module", true, U("hash")),
    m("http_upstream_ip_hash_module", true, U("ip_hash")),
    m("http_upstream_least_conn_module", true, U("least_conn")),
    m("http_upstream_random_module", true, U("random")),
    m("http_upstream_keepalive_module", true, U("keepalive")),
    m("http_upstream_zone_module", true, U("zone")),
    // Not a module name but configure's flag for the cache (`proxy_cache` and friends).
    m("http-cache", true, D("proxy_cache")),
];

fn present(module: &Module) -> bool {
    match module.marker {
        Marker::Directive(name) => table::find(name).is_some(),
        Marker::Upstream(name) => UPSTREAM_DIRECTIVES.contains(&name),
    }
}

/// The flags of `-V`'s `configure arguments:` line: `--with-NAME` for each optional module
/// firstbyte has, `--without-NAME` for each default one it lacks.
pub fn configure_arguments() -> String {
    let mut flags = Vec::new();
    for module in MODULES {
        match (module.default, present(module)) {
            (false, true) => flags.push(format!("--with-{}", module.name)),
            (true, false) => flags.push(format!("--without-{}", module.name)),
            _ => {}
        }
    }
    flags.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_the_directive_table() {
        let args = configure_arguments();
        let flags: Vec<&str> = args.split(' ').collect();
        for f in [
            "--with-http_ssl_module",
            "--with-http_v2_module",
            // `http3` and the QUIC directives (issue 11).
            "--with-http_v3_module",
            "--with-http_gzip_static_module",
            "--with-http_stub_status_module",
            "--without-http_uwsgi_module",
        ] {
            assert!(flags.contains(&f), "{f} missing from {args}");
        }
        // Modules firstbyte has are never `--without-`, and absent optional ones never
        // appear: nginx's test harness matches module names anywhere in the output.
        for f in [
            "--without-http_rewrite_module",
            "--without-http_map_module",
            "--without-http_split_clients_module",
            "--without-http_proxy_module",
            "--without-http_fastcgi_module",
            "--without-http_gzip_module",
            "--without-http_access_module",
            "--without-http_upstream_keepalive_module",
            "--without-http_upstream_hash_module",
            "--without-http_upstream_ip_hash_module",
            "--without-http_upstream_least_conn_module",
            "--without-http_upstream_random_module",
            "--without-http_upstream_zone_module",
            "--with-http_dav_module",
            "--without-http_autoindex_module",
            "--without-http_empty_gif_module",
            "--without-http_ssi_module",
        ] {
            assert!(!flags.contains(&f), "{f} in {args}");
        }
        // Every marker names a directive nginx has, so each is either implemented or in
        // the table of known-unsupported ones (a typo would be neither).
        for module in MODULES {
            if let Marker::Directive(name) = module.marker {
                assert!(
                    table::find(name).is_some() || table::is_unsupported(name),
                    "{} marks {} with unknown directive {name}",
                    module.name,
                    module.name
                );
            }
        }
    }
}
