//! `proxy_cache` end to end against a counting upstream: a stored response is answered
//! without reaching it (`HIT`), `proxy_cache_bypass`, `proxy_no_cache`, what the upstream
//! forbids (`Set-Cookie`, `Cache-Control: private`), expiry, a restart finding its files
//! again, `max_size`, ranges from the file (`max_ranges`), HEAD as GET, `proxy_cache_lock`,
//! stale answers (`updating`, `proxy_cache_background_update`, the upstream's
//! `stale-while-revalidate` and `stale-if-error`) and revalidation; and the files themselves
//! (mode, place).

mod support;

use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;

/// An upstream counting requests per path; `/N` paths answer with the count, and what the
/// query asks for: `?h=NAME:VALUE` header fields, `?size=N` a body of N bytes, `?status=N`,
/// `?slow` waits 300 ms before answering. Each request's head is kept.
struct Counting {
    port: u16,
    count: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

fn counting() -> Counting {
    let count = Arc::new(AtomicUsize::new(0));
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let (c, h) = (count.clone(), heads.clone());
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        h.lock().expect("lock").push(head.clone());
        let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let query = target.split_once('?').map_or("", |(_, q)| q).to_string();
        let mut fields = String::new();
        let mut body = format!("response {n}\n").into_bytes();
        let mut status = "200 OK".to_string();
        for p in query.split('&') {
            if let Some(v) = p.strip_prefix("h=") {
                let v = v.replace("%20", " ");
                let (name, value) = v.split_once(':').unwrap_or((&v, ""));
                fields.push_str(&format!("{name}: {value}\r\n"));
            } else if let Some(v) = p.strip_prefix("size=") {
                body = vec![b'x'; v.parse().unwrap_or(0)];
            } else if let Some(v) = p.strip_prefix("status=") {
                status = format!("{v} X");
            } else if p == "slow" {
                std::thread::sleep(Duration::from_millis(300));
            } else if p == "fail" && n > 1 {
                status = "503 Unavailable".to_string();
            }
        }
        if head
            .to_ascii_lowercase()
            .contains("if-modified-since: mon, 02 jan 2006")
        {
            status = "304 Not Modified".to_string();
            body.clear();
        }
        let mut s = s;
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{fields}\r\n",
            body.len()
        );
        let _ = s.write_all(&body);
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
    });
    Counting { port, count, heads }
}

fn conf(dir: &std::path::Path, port: u16, up: u16, cache_path: &str, location: &str) -> String {
    format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n proxy_cache_path {d}/cache {cache_path};\n server {{ listen 127.0.0.1:{port};\n location / {{ proxy_pass http://127.0.0.1:{up}; proxy_cache z; add_header X-Cache $upstream_cache_status always; {location} }}\n }}\n}}\n",
        d = dir.display()
    )
}

fn start(tag: &str, up: u16, cache_path: &str, location: &str) -> (Server, u16) {
    let dir = tempdir(tag);
    let port = free_port();
    let s = Server::start_in(&dir, &conf(&dir, port, up, cache_path, location), port);
    (s, port)
}

fn get(port: u16, path: &str, extra: &[&str]) -> (u16, Vec<(String, String)>, String) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let mut args: Vec<&str> = extra.to_vec();
    args.push(&url);
    let (code, h, b) = curl_i(&args);
    (code, h, String::from_utf8_lossy(&b).into_owned())
}

fn cache_status(h: &[(String, String)]) -> String {
    header(h, "x-cache").unwrap_or("").to_string()
}

fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_second_request_is_a_hit_without_the_upstream() {
    let up = counting();
    let (s, port) = start(
        "cache-hit",
        up.port,
        "levels=1:2 keys_zone=z:1m",
        "proxy_cache_valid 200 1h;",
    );
    let (code, h, body) = get(port, "/a", &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "MISS", "response 1\n")
    );
    let (code, h, body) = get(port, "/a", &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "HIT", "response 1\n")
    );
    assert_eq!(header(&h, "content-length"), Some("11"));
    assert_eq!(
        up.count.load(Ordering::SeqCst),
        1,
        "the hit did not reach the upstream"
    );
    // Another key is another entry.
    let (_, h, body) = get(port, "/b", &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("MISS", "response 2\n")
    );
    // A key made of `..` and slashes still names one file by its MD5 under the zone.
    let (code, h, _) = get(port, "/e?k=/../../../../escape", &["--path-as-is"]);
    assert_eq!((code, cache_status(&h).as_str()), (200, "MISS"));
    let outside: Vec<_> = files(&s.dir)
        .into_iter()
        .filter(|p| !p.starts_with(s.dir.join("cache")))
        .collect();
    assert!(
        outside
            .iter()
            .all(|p| !p.to_string_lossy().contains("escape")),
        "{outside:?}"
    );
    // The files: named by the key's MD5 under levels=1:2, mode 0600, nothing else left.
    let stored = files(&s.dir.join("cache"));
    assert_eq!(stored.len(), 3, "{stored:?}");
    for f in &stored {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert!(
            name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{f:?}"
        );
    }
    use md5::{Digest, Md5};
    let name: String = Md5::digest(format!("http127.0.0.1:{}/a", up.port))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let want = s
        .dir
        .join("cache")
        .join(&name[31..])
        .join(&name[29..31])
        .join(&name);
    assert!(stored.contains(&want), "{want:?} in {stored:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&want).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn no_validity_no_cache_and_what_the_upstream_forbids() {
    let up = counting();
    let (_s, port) = start(
        "cache-forbid",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 1h; proxy_no_cache $arg_nocache;",
    );
    for path in [
        "/c?h=Set-Cookie:a=b",
        "/p?h=Cache-Control:private",
        "/s?h=Cache-Control:no-store",
        "/v?h=Vary:*",
        "/x?h=X-Accel-Expires:0",
        "/n?nocache=1",
        "/e?status=404",
    ] {
        let before = up.count.load(Ordering::SeqCst);
        let (_, h, _) = get(port, path, &[]);
        assert_eq!(cache_status(&h), "MISS", "{path}");
        let (_, h, _) = get(port, path, &[]);
        assert_eq!(cache_status(&h), "MISS", "{path} was stored");
        assert_eq!(up.count.load(Ordering::SeqCst), before + 2, "{path}");
    }
    // Without `proxy_cache_valid`, the upstream's own time decides.
    let up2 = counting();
    let (_s2, port2) = start("cache-upstream-time", up2.port, "keys_zone=z:1m", "");
    let (_, h, _) = get(port2, "/plain", &[]);
    assert_eq!(cache_status(&h), "MISS");
    let (_, h, _) = get(port2, "/plain", &[]);
    assert_eq!(cache_status(&h), "MISS", "nothing stored without a time");
    let (_, h, _) = get(port2, "/m?h=Cache-Control:max-age=100", &[]);
    assert_eq!(cache_status(&h), "MISS");
    let (_, h, _) = get(port2, "/m?h=Cache-Control:max-age=100", &[]);
    assert_eq!(cache_status(&h), "HIT");
    let (_, h, _) = get(port2, "/x?h=X-Accel-Expires:100", &[]);
    assert_eq!(cache_status(&h), "MISS");
    let (_, h, _) = get(port2, "/x?h=X-Accel-Expires:100", &[]);
    assert_eq!(cache_status(&h), "HIT");
}

#[test]
fn bypass_goes_upstream_and_refreshes() {
    let up = counting();
    let (_s, port) = start(
        "cache-bypass",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h; proxy_cache_key $uri; proxy_cache_bypass $arg_fresh; proxy_cache_bypass $http_x_fresh;",
    );
    assert_eq!(get(port, "/k", &[]).2, "response 1\n");
    let (_, h, body) = get(port, "/k?fresh=1", &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("BYPASS", "response 2\n")
    );
    let (_, h, body) = get(port, "/k", &["-H", "X-Fresh: 0"]);
    // The bypassed response was stored in its place.
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("HIT", "response 2\n")
    );
    assert_eq!(up.count.load(Ordering::SeqCst), 2);
    // The second directive's value counts too.
    let (_, h, body) = get(port, "/k", &["-H", "X-Fresh: yes"]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("BYPASS", "response 3\n")
    );
}

#[test]
fn an_entry_expires_and_a_restart_keeps_it() {
    let up = counting();
    let dir = tempdir("cache-restart");
    let port = free_port();
    let text = conf(
        &dir,
        port,
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 1h; proxy_cache_valid 201 2s;",
    );
    let mut s = Server::start_in(&dir, &text, port);
    assert_eq!(get(port, "/r", &[]).2, "response 1\n");
    assert_eq!(cache_status(&get(port, "/short?status=201", &[]).1), "MISS");
    assert_eq!(cache_status(&get(port, "/short?status=201", &[]).1), "HIT");
    s.signal(libc::SIGTERM);
    assert!(s.wait_exit(Duration::from_secs(10)).is_some(), "stopped");
    let _s = Server::start_in(&dir, &text, port);
    let (_, h, body) = get(port, "/r", &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("HIT", "response 1\n")
    );
    // Past its 2 s (validity is in whole seconds): expired, fetched again and stored again,
    // then a hit (within the 1 s the stored copy surely has left).
    std::thread::sleep(Duration::from_millis(3100));
    assert_eq!(
        cache_status(&get(port, "/short?status=201", &[]).1),
        "EXPIRED"
    );
    assert_eq!(cache_status(&get(port, "/short?status=201", &[]).1), "HIT");
    assert_eq!(up.count.load(Ordering::SeqCst), 3);
}

#[test]
fn an_entry_is_fresh_through_its_last_second() {
    // As nginx (`valid_sec < now` is expired): `proxy_cache_valid 2s` stored just after a
    // second began is still a hit 2.4 s later, in its last second, and expired a second on.
    let up = counting();
    let (_s, port) = start(
        "cache-last-second",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 2s;",
    );
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let to_next = Duration::from_secs(1) - Duration::from_nanos(u64::from(since.subsec_nanos()));
    std::thread::sleep(to_next + Duration::from_millis(50));
    let stored = std::time::Instant::now();
    assert_eq!(cache_status(&get(port, "/l", &[]).1), "MISS");
    std::thread::sleep(Duration::from_millis(2400).saturating_sub(stored.elapsed()));
    let (_, h, body) = get(port, "/l", &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("HIT", "response 1\n")
    );
    std::thread::sleep(Duration::from_millis(3100).saturating_sub(stored.elapsed()));
    assert_eq!(cache_status(&get(port, "/l", &[]).1), "EXPIRED");
}

#[test]
fn max_size_removes_the_least_recently_used() {
    let up = counting();
    let (s, port) = start(
        "cache-max-size",
        up.port,
        "keys_zone=z:1m max_size=10k",
        "proxy_cache_valid 1h;",
    );
    for p in ["/1?size=4000", "/2?size=4000"] {
        assert_eq!(cache_status(&get(port, p, &[]).1), "MISS");
    }
    assert_eq!(cache_status(&get(port, "/1?size=4000", &[]).1), "HIT");
    // A third makes it too large: /2, the least recently used, goes.
    assert_eq!(cache_status(&get(port, "/3?size=4000", &[]).1), "MISS");
    assert_eq!(files(&s.dir.join("cache")).len(), 2);
    assert_eq!(cache_status(&get(port, "/1?size=4000", &[]).1), "HIT");
    assert_eq!(cache_status(&get(port, "/3?size=4000", &[]).1), "HIT");
    assert_eq!(cache_status(&get(port, "/2?size=4000", &[]).1), "MISS");
    // Larger than max_size: never stored.
    let (_, h, body) = get(port, "/big?size=20000", &[]);
    assert_eq!((cache_status(&h).as_str(), body.len()), ("MISS", 20000));
    assert_eq!(cache_status(&get(port, "/big?size=20000", &[]).1), "MISS");
    assert!(files(&s.dir.join("cache")).len() <= 2);
}

#[test]
fn ranges_and_head_from_the_file() {
    let up = counting();
    let (_s, port) = start(
        "cache-range",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h;",
    );
    // HEAD first: the upstream gets GET, and the body is stored for the next GET.
    let out = curl(&["-I", &format!("http://127.0.0.1:{port}/h")]);
    let (code, h, _) = parse_response(&out.stdout);
    assert_eq!((code, cache_status(&h).as_str()), (200, "MISS"));
    assert!(up.heads.lock().expect("lock")[0].starts_with("GET /h "));
    let mut hit = false;
    for _ in 0..100 {
        let (_, h, body) = get(port, "/h", &[]);
        if cache_status(&h) == "HIT" {
            assert_eq!(body, "response 1\n");
            hit = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(hit, "the HEAD's GET was stored");
    // Range: the upstream does not see it; the stored body answers it.
    let (code, h, body) = get(port, "/h", &["-H", "Range: bytes=2-5"]);
    assert_eq!((code, body.as_str()), (206, "spon"));
    assert_eq!(header(&h, "content-range"), Some("bytes 2-5/11"));
    let (code, _, _) = get(port, "/h", &["-H", "Range: bytes=50-"]);
    assert_eq!(code, 416);
    for head in up.heads.lock().expect("lock").iter() {
        assert!(!head.to_ascii_lowercase().contains("range:"), "{head}");
    }
}

#[test]
fn lock_lets_one_request_fetch() {
    let up = counting();
    let (_s, port) = start(
        "cache-lock",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h; proxy_cache_lock on;",
    );
    let ts: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || get(port, "/l?slow", &[])))
        .collect();
    let mut statuses: Vec<String> = ts
        .into_iter()
        .map(|t| {
            let (_, h, body) = t.join().expect("join");
            assert_eq!(body, "response 1\n");
            cache_status(&h)
        })
        .collect();
    statuses.sort();
    assert_eq!(up.count.load(Ordering::SeqCst), 1, "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|s| *s == "MISS").count(),
        1,
        "{statuses:?}"
    );
}

#[test]
fn stale_and_revalidated() {
    let up = counting();
    let (_s, port) = start(
        "cache-stale",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 2s; proxy_cache_use_stale http_503; proxy_cache_revalidate on;",
    );
    assert_eq!(get(port, "/f?fail", &[]).2, "response 1\n");
    let lm = "/lm?h=Last-Modified:Mon,%2002%20Jan%202006%2015:04:05%20GMT";
    assert_eq!(cache_status(&get(port, lm, &[]).1), "MISS");
    std::thread::sleep(Duration::from_millis(3100));
    let (code, h, body) = get(port, "/f?fail", &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "STALE", "response 1\n")
    );
    let (code, h, body) = get(port, lm, &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "REVALIDATED", "response 2\n")
    );
    assert_eq!(cache_status(&get(port, lm, &[]).1), "HIT");
}

#[test]
fn bad_config_is_refused() {
    let dir = tempdir("cache-conf");
    for (text, want) in [
        ("proxy_cache_path {d}/c keys_zone=z:1m; server { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:1; proxy_cache y; } }", "\"proxy_cache\" zone \"y\" is unknown"),
        ("proxy_cache_path {d}/c levels=3 keys_zone=z:1m;", "invalid parameter \"levels=3\""),
        ("proxy_cache_path {d}/c levels=1:2;", "must have \"keys_zone\" parameter"),
        ("proxy_cache_path {d}/c keys_zone=z:1m; proxy_cache_path {d}/d keys_zone=z:1m;", "duplicate zone \"z\""),
        ("proxy_cache_path {d}/c keys_zone=z:1m; server { location / { proxy_cache_valid 99 1m; } }", "invalid value \"99\""),
    ] {
        let text = text.replace("{d}", &dir.display().to_string());
        let path = dir.join("t.conf");
        std::fs::write(&path, format!("events {{}}\nhttp {{\n{text}\n}}\n")).expect("write");
        let out = firstbyte(&["-t", "-c", path.to_str().expect("path")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[test]
fn updating_serves_the_stale_entry_while_one_request_refreshes() {
    let up = counting();
    let (_s, port) = start(
        "cache-updating",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 2s; proxy_cache_use_stale updating; proxy_cache_key $uri;",
    );
    assert_eq!(get(port, "/u", &[]).2, "response 1\n");
    std::thread::sleep(Duration::from_millis(3100));
    // A refreshes slowly; B, while A is at the upstream, gets the stale entry.
    let a = std::thread::spawn(move || get(port, "/u?slow", &[]));
    let mut at_upstream = false;
    for _ in 0..500 {
        if up.count.load(Ordering::SeqCst) == 2 {
            at_upstream = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(at_upstream, "A reached the upstream");
    let (_, h, body) = get(port, "/u", &[]);
    let (_, ha, body_a) = a.join().expect("join");
    assert_eq!(
        (cache_status(&ha).as_str(), body_a.as_str()),
        ("EXPIRED", "response 2\n")
    );
    // B ran while A held the key, or after A stored its answer: never a third fetch.
    let b = (cache_status(&h), body);
    assert!(
        b == ("UPDATING".to_string(), "response 1\n".to_string())
            || b == ("HIT".to_string(), "response 2\n".to_string()),
        "{b:?}"
    );
    assert_eq!(up.count.load(Ordering::SeqCst), 2);
}

#[test]
fn ignored_headers_add_up_over_directives() {
    let up = counting();
    let (_s, port) = start(
        "cache-ignore",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h; proxy_ignore_headers Set-Cookie; proxy_ignore_headers Cache-Control;",
    );
    let path = "/i?h=Set-Cookie:a=b&h=Cache-Control:private";
    assert_eq!(cache_status(&get(port, path, &[]).1), "MISS");
    let (_, h, body) = get(port, path, &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("HIT", "response 1\n")
    );
    // As nginx: an ignored Set-Cookie is stored and served with the response.
    assert_eq!(header(&h, "set-cookie"), Some("a=b"));
}

/// Polls `path` until the cache answers `HIT` with `want`; every answer before is the stale
/// one while the refresh runs (`UPDATING`, `response 1`). Bounded far past any refresh.
fn until_refreshed(port: u16, path: &str, want: &str) {
    until_refreshed_from(port, path, "response 1\n", want);
}

/// [`until_refreshed`] with `stale` the stale body.
fn until_refreshed_from(port: u16, path: &str, stale: &str, want: &str) {
    for _ in 0..1000 {
        let (_, h, body) = get(port, path, &[]);
        match cache_status(&h).as_str() {
            "HIT" => {
                assert_eq!(body, want);
                return;
            }
            "UPDATING" => assert_eq!(body, stale),
            other => panic!("{other}: {body}"),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{path}: never refreshed");
}

#[test]
fn background_update_answers_stale_at_once_then_the_fresh_copy() {
    let up = counting();
    let (_s, port) = start(
        "cache-background",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 2s; proxy_cache_use_stale updating; proxy_cache_background_update on; proxy_cache_key $uri;",
    );
    assert_eq!(get(port, "/b", &[]).2, "response 1\n");
    std::thread::sleep(Duration::from_millis(3100));
    // The expired entry answers (STALE) while its refresh (slow at the upstream) runs.
    let (code, h, body) = get(port, "/b?slow", &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "STALE", "response 1\n")
    );
    until_refreshed(port, "/b", "response 2\n");
    // One refresh for the key, however many requests came while it ran.
    assert_eq!(up.count.load(Ordering::SeqCst), 2);

    // A client that leaves once it has the stale answer, while the refresh waits on the
    // slow upstream: the refresh still runs to its end and is stored.
    assert_eq!(get(port, "/c", &[]).2, "response 3\n");
    std::thread::sleep(Duration::from_millis(3100));
    {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.write_all(b"GET /c?slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("send");
        let mut r = BufReader::new(c);
        let head = read_head(&mut r).expect("an answer");
        assert!(
            head.to_ascii_lowercase().contains("x-cache: stale"),
            "{head}"
        );
    }
    // Only that request can have started the refresh: wait for it at the upstream, then
    // for its copy.
    let mut reached = false;
    for _ in 0..1000 {
        if up.count.load(Ordering::SeqCst) == 4 {
            reached = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(reached, "the refresh reached the upstream");
    until_refreshed_from(port, "/c", "response 3\n", "response 4\n");
    assert_eq!(up.count.load(Ordering::SeqCst), 4);
}

#[test]
fn a_graceful_stop_waits_for_a_background_refresh() {
    let up = counting();
    let (mut s, port) = start(
        "cache-background-stop",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 200 1s; proxy_cache_use_stale updating; proxy_cache_background_update on; proxy_cache_key $uri;",
    );
    assert_eq!(get(port, "/q", &[]).2, "response 1\n");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(cache_status(&get(port, "/q?slow", &[]).1), "STALE");
    // SIGQUIT while the refresh waits on the upstream: it ends, stored, before the exit.
    s.signal(libc::SIGQUIT);
    assert!(s.wait_exit(Duration::from_secs(20)).is_some(), "exited");
    let stored: Vec<_> = files(&s.dir.join("cache"));
    assert_eq!(stored.len(), 1, "{stored:?}");
    let text = std::fs::read(&stored[0]).expect("read");
    assert!(text.ends_with(b"response 2\n"), "the refreshed copy");
}

#[test]
fn stale_while_revalidate_from_the_upstream_runs_out() {
    let up = counting();
    let (_s, port) = start(
        "cache-swr",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_background_update on; proxy_cache_key $uri;",
    );
    // Fresh for 1 s, then 3 s (w1) or 1 s (w2) of stale-while-revalidate; in whole seconds.
    let w1 = "/w1?h=Cache-Control:max-age=1,%20stale-while-revalidate=3";
    let w2 = "/w2?h=Cache-Control:max-age=1,%20stale-while-revalidate=1";
    assert_eq!(get(port, w1, &[]).2, "response 1\n");
    assert_eq!(get(port, w2, &[]).2, "response 2\n");
    // Expired (past its last second), within its stale-while-revalidate: answered stale,
    // refreshed behind (no `proxy_cache_use_stale` at all).
    std::thread::sleep(Duration::from_millis(2100));
    let (_, h, body) = get(port, w1, &[]);
    assert_eq!(
        (cache_status(&h).as_str(), body.as_str()),
        ("STALE", "response 1\n")
    );
    // Past it: to the upstream as any expired entry.
    std::thread::sleep(Duration::from_millis(1000));
    let (_, h, body) = get(port, w2, &[]);
    assert_eq!(cache_status(&h), "EXPIRED");
    assert!(body.starts_with("response "), "{body}");
    assert_ne!(body, "response 2\n");
}

/// An upstream answering its first request only (then it closes its port: a connect
/// error); the header fields of that answer are `fields`.
fn one_shot(fields: &'static str) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        if let Ok((s, _)) = l.accept() {
            drop(l);
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            let _ = read_head(&mut r);
            let mut s = s;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n{fields}\r\nonce"
            );
        }
    });
    port
}

#[test]
fn stale_if_error_answers_an_upstream_that_is_gone_for_its_time() {
    // Within stale-if-error: the stored answer instead of a 502.
    let up = one_shot("Cache-Control: max-age=1, stale-if-error=2\r\n");
    let (_s, port) = start("cache-sie", up, "keys_zone=z:1m", "");
    assert_eq!(get(port, "/e", &[]).2, "once");
    std::thread::sleep(Duration::from_millis(2100));
    let (code, h, body) = get(port, "/e", &[]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.as_str()),
        (200, "STALE", "once")
    );
    // Past it (whole seconds): the error.
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(get(port, "/e", &[]).0, 502);

    // Ignored (`proxy_ignore_headers Cache-Control`, `proxy_cache_valid` for the time):
    // the error at once.
    let up = one_shot("Cache-Control: stale-if-error=100\r\n");
    let (_s, port) = start(
        "cache-sie-ignored",
        up,
        "keys_zone=z:1m",
        "proxy_cache_valid 1s; proxy_ignore_headers Cache-Control;",
    );
    assert_eq!(get(port, "/e", &[]).2, "once");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(get(port, "/e", &[]).0, 502);
}

#[test]
fn stale_if_error_leaves_an_upstream_status_as_nginx_with_one_server() {
    // nginx applies stale-if-error where it gives up on the upstream (error, timeout,
    // invalid header); a 503 from the only server is that server's answer.
    let up = counting();
    let (_s, port) = start("cache-sie-status", up.port, "keys_zone=z:1m", "");
    let path = "/s?fail&h=Cache-Control:max-age=1,%20stale-if-error=100";
    assert_eq!(get(port, path, &[]).2, "response 1\n");
    std::thread::sleep(Duration::from_millis(2100));
    let (code, h, _) = get(port, path, &[]);
    assert_eq!((code, cache_status(&h).as_str()), (503, "EXPIRED"));
}

#[test]
fn max_ranges_and_an_upstream_content_range_in_stored_answers() {
    let up = counting();
    let (_s, port) = start(
        "cache-max-ranges",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h; max_ranges 1;",
    );
    let path = "/r?size=10&h=Content-Range:stub";
    assert_eq!(get(port, path, &[]).0, 200);
    // One range: 206; two, past `max_ranges 1`: the whole.
    let (code, h, body) = get(port, path, &["-H", "Range: bytes=0-1"]);
    assert_eq!((code, body.as_str()), (206, "xx"));
    assert_eq!(header(&h, "content-range"), Some("bytes 0-1/10"));
    let (code, h, body) = get(port, path, &["-H", "Range: bytes=0-1,3-4"]);
    assert_eq!((code, body.len()), (200, 10));
    assert_eq!(header(&h, "accept-ranges"), Some("bytes"));

    // `max_ranges 0`: no range, none offered, also while the answer is being stored.
    let (_s, port) = start(
        "cache-max-ranges-0",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h; max_ranges 0;",
    );
    let (code, h, body) = get(port, "/r0?size=10", &["-H", "Range: bytes=0-1"]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.len()),
        (200, "MISS", 10)
    );
    let (code, h, body) = get(port, "/r0?size=10", &["-H", "Range: bytes=0-1"]);
    assert_eq!(
        (code, cache_status(&h).as_str(), body.len()),
        (200, "HIT", 10)
    );
    assert_eq!(header(&h, "accept-ranges"), None);

    // Unlimited: several ranges are one multipart answer, without the upstream's own
    // Content-Range (each part has its own).
    let (_s, port) = start(
        "cache-multipart",
        up.port,
        "keys_zone=z:1m",
        "proxy_cache_valid 1h;",
    );
    assert_eq!(get(port, path, &[]).0, 200);
    let (code, h, body) = get(port, path, &["-H", "Range: bytes=0-1,3-4"]);
    assert_eq!(code, 206);
    assert!(
        header(&h, "content-type").is_some_and(|t| t.starts_with("multipart/byteranges")),
        "{h:?}"
    );
    assert_eq!(header(&h, "content-range"), None, "{h:?}");
    assert!(body.contains("Content-Range: bytes 0-1/10"), "{body}");
    assert!(!body.contains("stub"), "{body}");
}
