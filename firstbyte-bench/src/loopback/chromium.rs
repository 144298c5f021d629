//! Chromium's request headers, in one table: what the browser-like measures (issue 29) send
//! with every request, over HTTP/1.1 and HTTP/2 (`h2load -H`) and HTTP/3 (the in-crate
//! client), and what `bench/callgrind-static/run.sh`'s `BROWSER` array sends (h2b, h1b, h3b) (a test reads run.sh
//! and compares, so the two cannot drift apart).
//!
//! The set is Chromium 131's request for a script on Linux, same-origin: client hints
//! (`sec-ch-ua*`), user-agent, `accept: */*`, fetch metadata (`sec-fetch-*`), referer, the
//! encodings and languages it accepts, a 317-byte cookie (a session id, a CSRF token, consent
//! and analytics ids) and the RFC 9218 `priority`. Every request of a run carries the same
//! set (a browser's `accept` and `sec-fetch-dest` differ by resource type; the header block's
//! size and the decoder's work do not depend much on that). The referer names the server's
//! own origin, so its port is filled in per run ([`headers`]).

/// The cookie: 317 bytes.
pub const COOKIE: &str = "_session_id=9f8e7d6c5b4a39281706f5e4d3c2b1a0; \
     csrf_token=Yq3vXk9PzL2mN8rT5wB7cD1fG4hJ6sA0eU; cookie_consent=accepted.2026-11-30.v2; \
     _ga=GA1.1.1234567890.1764460800; _ga_ABCDEF1234=GS1.1.1764460800.3.1.1764461234.0.0.0; \
     theme=dark; lang=en-US; recently_viewed=sku-10442%2Csku-20931%2Csku-33107; \
     ab_bucket=checkout-v3-b";

/// Where the server's port goes in a header value.
pub const PORT: &str = "{port}";

/// The headers, in Chromium's order; [`PORT`] and the cookie are filled in by [`headers`].
#[rustfmt::skip]
pub const HEADERS: [(&str, &str); 13] = [
    ("sec-ch-ua", r#""Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24""#),
    ("sec-ch-ua-mobile", "?0"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
    ("sec-ch-ua-platform", r#""Linux""#),
    ("accept", "*/*"),
    ("sec-fetch-site", "same-origin"),
    ("sec-fetch-mode", "no-cors"),
    ("sec-fetch-dest", "script"),
    ("referer", "https://127.0.0.1:{port}/"),
    ("accept-encoding", "gzip, deflate, br, zstd"),
    ("accept-language", "en-US,en;q=0.9"),
    ("cookie", COOKIE),
    ("priority", "u=1"),
];

/// The headers for a server on `port` (any text: run.sh's test passes `$PORT`).
pub fn headers(port: &str) -> Vec<(&'static str, String)> {
    HEADERS
        .iter()
        .map(|&(name, value)| (name, value.replace(PORT, port)))
        .collect()
}

/// h2load's arguments for them: `-H "name: value"` each.
pub fn h2load_args(port: u16) -> Vec<String> {
    headers(&port.to_string())
        .into_iter()
        .flat_map(|(name, value)| ["-H".to_string(), format!("{name}: {value}")])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `-H` headers of run.sh's `BROWSER=( ... )` array (what `h2b`, `h1b` and `h3b`
    /// send), with `$COOKIE` expanded (`$PORT` left as is).
    fn run_sh_headers(script: &str) -> Vec<(String, String)> {
        let cookie = script
            .lines()
            .find_map(|l| l.strip_prefix("COOKIE=\""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("run.sh sets COOKIE=\"...\"");
        let body = script
            .split_once("\nBROWSER=(")
            .and_then(|(_, rest)| rest.split_once("\n)"))
            .expect("run.sh has BROWSER=( ... )")
            .0;
        body.lines()
            .filter_map(|l| l.trim().strip_prefix("-H "))
            .map(|arg| {
                let arg = arg.trim_end_matches(" \\").trim();
                // One quoted word: '...' (literal) or "..." ($COOKIE expanded).
                let inner = &arg[1..arg.len() - 1];
                let text = if arg.starts_with('"') {
                    inner.replace("$COOKIE", cookie)
                } else {
                    inner.to_string()
                };
                let (name, value) = text.split_once(": ").expect("name: value");
                (name.to_string(), value.to_string())
            })
            .collect()
    }

    #[test]
    fn the_bench_and_run_sh_send_the_same_headers() {
        let script = include_str!("../../../bench/callgrind-static/run.sh");
        let theirs = run_sh_headers(script);
        let ours: Vec<(String, String)> = headers("$PORT")
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        assert_eq!(theirs, ours);
    }

    #[test]
    fn cookie_is_317_bytes_and_names_are_lowercase_and_unique() {
        assert_eq!(COOKIE.len(), 317);
        for (i, (name, value)) in HEADERS.iter().enumerate() {
            assert_eq!(name.to_ascii_lowercase(), *name);
            assert!(HEADERS[i + 1..].iter().all(|(n, _)| n != name), "{name}");
            assert!(!value.is_empty() && !value.contains('\n'));
            http::HeaderValue::from_str(value).expect("a valid header value");
        }
    }

    #[test]
    fn the_referer_gets_the_port() {
        let h = headers("8443");
        assert_eq!(h.len(), 13);
        assert!(h.contains(&("referer", "https://127.0.0.1:8443/".to_string())));
        assert!(h.iter().all(|(_, v)| !v.contains(PORT)));
        let args = h2load_args(9);
        assert_eq!(args.len(), 26);
        assert_eq!(args[0], "-H");
        assert_eq!(
            args[1],
            r#"sec-ch-ua: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24""#
        );
        assert!(args.contains(&"referer: https://127.0.0.1:9/".to_string()));
        assert!(args.contains(&format!("cookie: {COOKIE}")));
    }
}
