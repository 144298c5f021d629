//! HTTP/1.1 request framing as nginx refuses it, from the head as received (hyper normalises
//! the head before the pipeline sees it): a second `Content-Length` (400), `Content-Length`
//! beside `Transfer-Encoding: chunked` (400), any coding other than exactly `chunked` (501),
//! a malformed chunked body a location does not read (400). Each refusal closes the
//! connection, so nothing sent after it on the connection is taken as a request, and none
//! reaches an upstream. Attacked over plain TCP and over TLS, with smuggled requests behind
//! the refused one.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use support::*;

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0};
        listen 127.0.0.1:{port1} ssl;
        ssl_certificate {certs}/localhost.crt;
        ssl_certificate_key {certs}/localhost.key;
        server_name localhost;
        location / { return 200 "ok"; }
        location /up { proxy_pass http://127.0.0.1:{upstream}; }
    }
}
"#;

/// An upstream that records every request it gets (head, then body as framed) and answers
/// each with "up".
fn recording_upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let (port, _) = upstream(move |c| {
        let mut w = c.try_clone().expect("clone");
        let mut r = BufReader::new(c);
        while let Some(head) = read_head(&mut r) {
            let lower = head.to_ascii_lowercase();
            let mut body = Vec::new();
            if lower.contains("transfer-encoding: chunked") {
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                    let mut chunk = vec![0u8; n + 2];
                    if r.read_exact(&mut chunk).is_err() {
                        return;
                    }
                    body.extend_from_slice(&chunk[..n]);
                    if n == 0 {
                        break;
                    }
                }
            } else if let Some(l) = lower
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                body.resize(l, 0);
                if r.read_exact(&mut body).is_err() {
                    return;
                }
            }
            log.lock()
                .unwrap()
                .push(format!("{head}{}", String::from_utf8_lossy(&body)));
            if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nup")
                .is_err()
            {
                return;
            }
        }
    });
    (port, seen)
}

/// The server (plain port, TLS port) with `/up` going to a recording upstream.
fn server(tag: &str) -> (Server, Vec<u16>, Arc<Mutex<Vec<String>>>) {
    let (up, seen) = recording_upstream();
    let conf = CONF.replace("{upstream}", &up.to_string());
    let (s, ports) = Server::start(tag, &conf, 2);
    (s, ports, seen)
}

/// Sends `req` on a new plain connection and reads until the server closes it (10 s at
/// most); `None` when it did not close.
fn plain(port: u16, req: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(req.as_bytes()).expect("write");
    until_eof(&mut s)
}

/// The same over TLS (HTTP/1.1 by ALPN).
fn tls(port: u16, req: &str) -> Option<String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let name = ServerName::try_from("localhost").expect("name");
    let conn =
        rustls::ClientConnection::new(rust_client_config(&[b"http/1.1"]), name).expect("client");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(req.as_bytes()).expect("write");
    until_eof(&mut s)
}

fn until_eof(s: &mut impl Read) -> Option<String> {
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(n) => out.extend_from_slice(&b[..n]),
            // A reset after the answer (the server closed with our smuggled bytes unread)
            // is a close too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&out).into_owned())
            }
            Err(_) => return None,
        }
    }
}

/// The statuses of the responses in `text`, in order.
fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

/// A request the attacker hides behind the refused one.
const SMUGGLED: &str = "GET /up/smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn error_log(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default()
}

#[test]
fn content_length_beside_chunked_is_refused_and_closes() {
    let (s, ports, seen) = server("framing-te-cl");
    for (name, fields) in [
        (
            "te then cl",
            "Transfer-Encoding: chunked\r\nContent-Length: 48\r\n",
        ),
        (
            "cl then te",
            "Content-Length: 48\r\nTransfer-Encoding: chunked\r\n",
        ),
        (
            "cl, te in other case",
            "content-length: 48\r\ntransfer-encoding: Chunked\r\n",
        ),
    ] {
        // Framed by the length, the body holds a second request; framed by the chunks, it
        // ends at "0": the two readings of a smuggling attack.
        let req =
            format!("POST /up HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n0\r\n\r\n{SMUGGLED}");
        for (via, text) in [("tcp", plain(ports[0], &req)), ("tls", tls(ports[1], &req))] {
            let text = text.unwrap_or_else(|| panic!("{name} over {via}: connection left open"));
            assert_eq!(statuses(&text), [400], "{name} over {via}: {text}");
            assert!(
                text.contains("Connection: close"),
                "{name} over {via}: {text}"
            );
        }
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the upstream: {:?}",
        seen.lock().unwrap()
    );
    assert!(error_log(&s).contains(
        "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time"
    ));
}

#[test]
fn a_second_content_length_is_refused_even_when_equal() {
    let (s, ports, seen) = server("framing-dup-cl");
    for (a, b) in [("0", "0"), ("5", "5"), ("5", "6")] {
        let req = format!(
            "POST /up?a#b HTTP/1.1\r\nHost: localhost\r\nContent-Length: {a}\r\nContent-Length: {b}\r\n\r\n{}{SMUGGLED}",
            "x".repeat(a.parse().unwrap())
        );
        for (via, text) in [("tcp", plain(ports[0], &req)), ("tls", tls(ports[1], &req))] {
            let text = text.unwrap_or_else(|| panic!("{a}/{b} over {via}: connection left open"));
            assert_eq!(statuses(&text), [400], "{a}/{b} over {via}: {text}");
        }
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(error_log(&s).contains(
        "client sent duplicate header line: \"Content-Length: 0\", previous value: \"Content-Length: 0\""
    ));
}

#[test]
fn an_unknown_coding_is_not_implemented_and_closes() {
    let (s, ports, seen) = server("framing-te");
    // The first two hyper would refuse itself (400), the third it takes as chunked.
    for te in ["identity", "chunked, identity", "gzip, chunked"] {
        for path in ["/", "/up", "/up?a=b#fragment"] {
            let req = format!(
                "POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n{SMUGGLED}"
            );
            for (via, text) in [("tcp", plain(ports[0], &req)), ("tls", tls(ports[1], &req))] {
                let text = text.unwrap_or_else(|| panic!("{te} over {via}: left open"));
                assert_eq!(statuses(&text), [501], "{te} {path} over {via}: {text}");
                assert!(text.contains("501 Not Implemented"), "{text}");
            }
        }
    }
    // Beside a length, still the coding's 501 (nginx checks the coding first).
    let req = "POST /up HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\nhello";
    assert_eq!(statuses(&plain(ports[0], req).expect("closed")), [501]);
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(error_log(&s).contains("client sent unknown \"Transfer-Encoding\": \"identity\""));
    // HTTP/1.0 with any coding: 400, as nginx.
    let req = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_eq!(statuses(&plain(ports[0], req).expect("closed")), [400]);
}

#[test]
fn a_malformed_chunk_in_an_unread_body_is_refused() {
    let (s, ports, _) = server("framing-chunk");
    let runaway = "GET / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nSEE-THIS\r\n0\r\n\r\n";
    let text = plain(ports[0], &format!("{runaway}{SMUGGLED}")).expect("closed");
    assert_eq!(statuses(&text), [400], "{text}");
    let text = tls(ports[1], &format!("{runaway}{SMUGGLED}")).expect("closed");
    assert_eq!(statuses(&text), [400], "{text}");
    assert!(error_log(&s)
        .contains("client sent invalid chunked body while reading client request body, client:"));
}

#[test]
fn sound_requests_on_one_connection_are_all_served() {
    let (_s, ports, seen) = server("framing-sound");
    // Bodies that look like refused heads are bodies; a chunked body with extensions and
    // trailers; a request split at every possible byte is still one request.
    let inner = "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n";
    let reqs = [
        format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{inner}",
            inner.len()
        ),
        format!(
            "POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n{:x};ext=1\r\n{inner}\r\n0\r\nX-Trailer: y\r\n\r\n",
            inner.len()
        ),
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_string(),
    ];
    let all = reqs.concat();
    let text = plain(ports[0], &all).expect("closed after the last");
    assert_eq!(statuses(&text), [200, 200, 200], "{text}");
    let text = tls(ports[1], &all).expect("closed after the last");
    assert_eq!(statuses(&text), [200, 200, 200], "{text}");
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the chunked body went up, twice"
    );
    assert!(seen.lock().unwrap()[0].ends_with(inner));

    // One byte at a time. The first body goes up (read whole before the answer): a body
    // `return` never reads may still be on its way when the answer is done, and hyper then
    // closes the connection rather than wait for it.
    let all = all.replacen("POST / HTTP/1.1", "POST /up HTTP/1.1", 1);
    let mut c = TcpStream::connect(("127.0.0.1", ports[0])).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.set_nodelay(true).expect("nodelay");
    for b in all.as_bytes() {
        c.write_all(std::slice::from_ref(b)).expect("write");
    }
    let text = until_eof(&mut c).expect("closed after the last");
    assert_eq!(statuses(&text), [200, 200, 200], "{text}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4, "both bodies went up whole");
    assert!(seen[2].ends_with(inner) && seen[3].ends_with(inner));
}

/// After a head the scanner cannot follow (an `Upgrade` request: the stream may leave HTTP),
/// hyper's own handling stands: `Content-Length` beside `chunked` is dropped, the body goes
/// up framed one way only, and the connection closes after the response (RFC 9112 §6.1).
#[test]
fn past_an_upgrade_request_hyper_still_drops_the_length_and_closes() {
    let (_s, ports, seen) = server("framing-fallback");
    let req = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: something\r\n\r\nPOST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 48\r\n\r\n0\r\n\r\n{SMUGGLED}"
    );
    let text = plain(ports[0], &req).expect("closed");
    let st = statuses(&text);
    assert_eq!(st.len(), 2, "{text}");
    assert_eq!(st[0], 200);
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter().all(|r| !r.contains("smuggled")),
        "smuggled: {seen:?}"
    );
    for r in seen.iter() {
        let l = r.to_ascii_lowercase();
        assert!(
            !(l.contains("content-length") && l.contains("transfer-encoding")),
            "both framings went up: {r}"
        );
    }
}
