//! `proxy_cache_background_update` with `proxy_cache_revalidate` and the upstream's
//! `stale-while-revalidate`, as nginx: the background request is conditional
//! (`If-Modified-Since`, `If-None-Match`); its 304 makes the stored response fresh for the
//! 304's own time, else the stored response's, else `proxy_cache_valid`'s; an upstream error
//! leaves the entry as it was (the next request refreshes again: `STALE`, not `UPDATING`);
//! and a client whose connection ends after the stale answer (`Connection: close`) sees it
//! close only once the background request is done, so what it asks next finds the update;
//! with `early_hints`, the `103 Early Hints` of the upstream's answer to a background update go
//! to no client (none lands before the next response on the connection).

mod support;

use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;

const LAST_MODIFIED: &str = "Mon, 02 Jan 2006 15:04:05 GMT";

/// An upstream whose responses carry `Last-Modified` and `ETag: "e"`. The query sets
/// `Cache-Control` (`cc=`, `%20` for spaces) on a 200, and on a 304 (`cc304=`); `e=1`
/// answers 500. A conditional request (`If-None-Match`) gets a 304, held while `hold` is
/// set. Every request's head is kept.
struct Up {
    port: u16,
    count: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    hold: Arc<AtomicBool>,
}

fn up() -> Up {
    let count = Arc::new(AtomicUsize::new(0));
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let hold = Arc::new(AtomicBool::new(false));
    let (c, h, held) = (count.clone(), heads.clone(), hold.clone());
    let (port, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        h.lock().expect("lock").push(head.clone());
        let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let query = target.split_once('?').map_or("", |(_, q)| q).to_string();
        let (mut cc, mut cc304, mut fail) = (None, None, false);
        for p in query.split('&') {
            if let Some(v) = p.strip_prefix("cc=") {
                cc = Some(v.replace("%20", " "));
            } else if let Some(v) = p.strip_prefix("cc304=") {
                cc304 = Some(v.replace("%20", " "));
            } else if p == "e=1" {
                fail = true;
            }
        }
        let conditional = head.to_ascii_lowercase().contains("\r\nif-none-match:");
        let mut s = s;
        let out = if fail {
            "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
        } else if conditional {
            // Bounded far past any test's wait for it.
            for _ in 0..2000 {
                if !held.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let cc = cc304.map_or(String::new(), |v| format!("Cache-Control: {v}\r\n"));
            format!("HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n{cc}Connection: close\r\n\r\n")
        } else {
            let body = format!("body {n}\n");
            let cc = cc.map_or(String::new(), |v| format!("Cache-Control: {v}\r\n"));
            format!(
                "HTTP/1.1 200 OK\r\nLast-Modified: {LAST_MODIFIED}\r\nETag: \"e\"\r\n{cc}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        let _ = s.write_all(out.as_bytes());
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
    });
    Up {
        port,
        count,
        heads,
        hold,
    }
}

fn start(tag: &str, up: u16) -> (Server, u16) {
    let dir = tempdir(tag);
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n proxy_cache_path {d}/cache keys_zone=z:1m;\n server {{ listen 127.0.0.1:{port};\n  location / {{ proxy_pass http://127.0.0.1:{up}; proxy_cache z; proxy_cache_key $uri; proxy_cache_revalidate on; proxy_cache_background_update on; add_header X-Cache $upstream_cache_status always;\n   location /rule/ {{ proxy_pass http://127.0.0.1:{up}; proxy_cache_valid 200 1s; }}\n  }}\n }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// Sends a `Connection: close` request; the connection, its response read.
fn send(port: u16, path: &str) -> (std::net::TcpStream, String, String) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut r = BufReader::new(c.try_clone().expect("clone"));
    let head = read_head(&mut r).expect("a response");
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("body");
    assert!(r.buffer().is_empty(), "nothing past the body");
    (c, head, String::from_utf8_lossy(&body).into_owned())
}

/// A `Connection: close` request read to the end of its connection: (X-Cache, body).
fn get(port: u16, path: &str) -> (String, String) {
    let (mut c, head, body) = send(port, path);
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).expect("closed");
    assert!(rest.is_empty(), "{rest:?}");
    (cache(&head), body)
}

fn cache(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("x-cache")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn the_stale_answers_connection_closes_after_its_conditional_update() {
    let up = up();
    let (_s, port) = start("cache-bg-close", up.port);
    let path = "/a?cc=max-age=1,%20stale-while-revalidate=30";
    assert_eq!(get(port, path), pair("MISS", "body 1\n"));
    std::thread::sleep(Duration::from_millis(2100));

    // Expired, within stale-while-revalidate: the stale answer at once, its connection
    // open while the background revalidation waits at the upstream.
    up.hold.store(true, Ordering::SeqCst);
    let (mut c, head, body) = send(port, "/a");
    assert_eq!((cache(&head), body), pair("STALE", "body 1\n"));
    let mut reached = false;
    for _ in 0..1000 {
        if up.count.load(Ordering::SeqCst) == 2 {
            reached = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(reached, "the update reached the upstream");
    let conditional = up.heads.lock().expect("lock")[1].to_ascii_lowercase();
    assert!(
        conditional.starts_with("get /a http/1.")
            && conditional.contains(&format!(
                "\r\nif-modified-since: {}\r\n",
                LAST_MODIFIED.to_ascii_lowercase()
            ))
            && conditional.contains("\r\nif-none-match: \"e\"\r\n"),
        "{conditional}"
    );
    // Meanwhile the key is being updated.
    let (_, head, body) = send(port, "/a");
    assert_eq!((cache(&head), body), pair("UPDATING", "body 1\n"));
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    let early = c.read(&mut buf);
    assert!(
        early.as_ref().is_err_and(|e| matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "the connection stays open while the update runs: {early:?}"
    );
    up.hold.store(false, Ordering::SeqCst);
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    assert_eq!(c.read(&mut buf).expect("closed"), 0);

    // Closed: the 304 (no time of its own) made it fresh for the stored max-age.
    assert_eq!(get(port, "/a"), pair("HIT", "body 1\n"));
    assert_eq!(up.count.load(Ordering::SeqCst), 2);
    // The stored stale-while-revalidate still holds after it: stale again, updated again.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(get(port, "/a"), pair("STALE", "body 1\n"));
    assert_eq!(get(port, "/a"), pair("HIT", "body 1\n"));
    assert_eq!(up.count.load(Ordering::SeqCst), 3);
}

#[test]
fn a_failed_background_update_leaves_the_entry_and_the_next_request_tries_again() {
    let up = up();
    let (_s, port) = start("cache-bg-error", up.port);
    let path = "/f?cc=max-age=1,%20stale-while-revalidate=30";
    assert_eq!(get(port, path), pair("MISS", "body 1\n"));
    std::thread::sleep(Duration::from_millis(2100));
    // The update gets a 500 (not stored); once the connection closed it is over, and the
    // next request finds the stale entry unlocked: STALE (another update), not UPDATING.
    assert_eq!(get(port, "/f?e=1"), pair("STALE", "body 1\n"));
    assert_eq!(up.count.load(Ordering::SeqCst), 2);
    assert_eq!(get(port, "/f"), pair("STALE", "body 1\n"));
    assert_eq!(up.count.load(Ordering::SeqCst), 3);
    assert_eq!(get(port, "/f"), pair("HIT", "body 1\n"));
}

#[test]
fn a_304_refreshes_for_its_own_time_else_the_stored_one_else_proxy_cache_valid() {
    let up = up();
    let (_s, port) = start("cache-bg-304", up.port);
    // own: the 304 says max-age=3 (and no stale-while-revalidate);
    // kept: a bare 304, the stored max-age=1 and stale-while-revalidate=30 again;
    // rule: nothing stored but stale-while-revalidate, `proxy_cache_valid 200 1s`.
    // Times are whole seconds, an answer fresh through its last one (as nginx): each check
    // is clear of its edge.
    let own = "/own?cc=max-age=1,%20stale-while-revalidate=30&cc304=max-age=3";
    let kept = "/kept?cc=max-age=1,%20stale-while-revalidate=30";
    let rule = "/rule/r?cc=stale-while-revalidate=30";
    for (n, p) in [own, kept, rule].into_iter().enumerate() {
        assert_eq!(get(port, p), pair("MISS", &format!("body {}\n", n + 1)));
    }
    std::thread::sleep(Duration::from_millis(2100));
    for (n, p) in [own, kept, rule].into_iter().enumerate() {
        let body = format!("body {}\n", n + 1);
        assert_eq!(get(port, p), pair("STALE", &body), "{p}");
        assert_eq!(get(port, p), pair("HIT", &body), "{p}");
    }
    let revalidated = std::time::Instant::now();
    assert_eq!(up.count.load(Ordering::SeqCst), 6);
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(get(port, own), pair("HIT", "body 1\n"));
    assert_eq!(get(port, kept), pair("STALE", "body 2\n"));
    assert_eq!(get(port, rule), pair("STALE", "body 3\n"));
    // Past the 304's three seconds: no stale-while-revalidate from it, so the expired
    // entry is revalidated in the foreground.
    std::thread::sleep(Duration::from_millis(4100).saturating_sub(revalidated.elapsed()));
    assert_eq!(get(port, own), pair("REVALIDATED", "body 1\n"));
    // Every request to the upstream after the first of each key was conditional.
    let heads = up.heads.lock().expect("lock");
    let conditional = heads
        .iter()
        .filter(|h| {
            h.to_ascii_lowercase()
                .contains("\r\nif-none-match: \"e\"\r\n")
        })
        .count();
    assert_eq!((heads.len(), conditional), (9, 6), "{heads:?}");
}

/// Reads one response (head and `Content-Length` body) from `r`: (head, body).
fn response(r: &mut BufReader<std::net::TcpStream>) -> (String, String) {
    let head = read_head(r).expect("a response");
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("body");
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// A background update is no client's request: the `103 Early Hints` (with a `Set-Cookie`)
/// the upstream sends before its new answer must not be written before the next response on
/// the connection whose request started the update.
#[test]
fn a_background_updates_early_hints_reach_no_client() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let (up, _) = upstream(move |s| {
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        if read_head(&mut r).is_none() {
            return;
        }
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        let mut s = s;
        if n > 1 {
            let _ = s.write_all(
                b"HTTP/1.1 103 Early Hints\r\nLink: </refresh.css>; rel=preload; as=style\r\n\
                  Set-Cookie: refresh=secret\r\n\r\n",
            );
        }
        let body = format!("body {n}\n");
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let dir = tempdir("cache-bg-hints");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n proxy_cache_path {d}/cache keys_zone=z:1m;\n server {{ listen 127.0.0.1:{port};\n  location / {{ proxy_pass http://127.0.0.1:{up}; proxy_cache z; proxy_cache_key $uri; proxy_cache_valid 200 1s; proxy_cache_use_stale updating; proxy_cache_background_update on; early_hints 1; add_header X-Cache $upstream_cache_status always; }}\n  location /other {{ return 200 \"other\\n\"; }}\n }}\n}}\n",
        d = dir.display()
    );
    let _s = Server::start_in(&dir, &conf, port);
    assert_eq!(get(port, "/a"), pair("MISS", "body 1\n"));
    std::thread::sleep(Duration::from_millis(2100));

    // One keep-alive connection: the stale answer, which starts the update.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut r = BufReader::new(c.try_clone().expect("clone"));
    write!(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    let (head, body) = response(&mut r);
    assert_eq!((cache(&head), body), pair("STALE", "body 1\n"));
    // The update is done (its 103 and its answer came) once another client gets its answer.
    let mut updated = false;
    for _ in 0..1000 {
        if get(port, "/a") == pair("HIT", "body 2\n") {
            updated = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(updated, "the background update was stored");
    // The next request on the first connection gets its own response, nothing before it.
    write!(
        c,
        "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let (head, body) = response(&mut r);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");
    assert_eq!(body, "other\n");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).expect("closed");
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}
