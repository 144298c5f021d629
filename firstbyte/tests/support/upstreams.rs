//! Plain-TCP upstreams for the proxy tests: a thread per connection, the handler reads what
//! it wants and answers what it wants.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A one-thread-per-connection upstream on an ephemeral port; `handler` gets each connection.
/// Returns the port and the number of connections accepted.
pub fn upstream(handler: impl Fn(TcpStream) + Send + Sync + 'static) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let port = l.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let h = handler.clone();
            std::thread::spawn(move || h(s));
        }
    });
    (port, accepted)
}

/// Reads one request head (up to and including the blank line); None at EOF.
pub fn read_head(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        head.push_str(&line);
        if line == "\r\n" {
            return Some(head);
        }
    }
}

/// An upstream that accepts and reads everything, and never answers; its port.
pub fn silent_upstream() -> u16 {
    upstream(|mut c| {
        let mut b = [0u8; 4096];
        while matches!(c.read(&mut b), Ok(n) if n > 0) {}
    })
    .0
}

/// One request a [`recording_upstream`] read: its head, and its body as framed (filled in
/// once read; a body that never completes stays as far as it came).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub head: String,
    pub body: Vec<u8>,
}

/// An upstream that records every request as soon as its head is in (then its body, by
/// `Content-Length` or chunked), and answers each with `200 up` and a close.
pub fn recording_upstream() -> (u16, Arc<std::sync::Mutex<Vec<Seen>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Seen>::new()));
    let log = seen.clone();
    let (port, _) = upstream(move |c| {
        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        let Ok(mut w) = c.try_clone() else { return };
        let mut r = BufReader::new(c);
        let Some(head) = read_head(&mut r) else {
            return;
        };
        let at = {
            let Ok(mut l) = log.lock() else { return };
            l.push(Seen {
                head: head.clone(),
                body: Vec::new(),
            });
            l.len() - 1
        };
        let lower = head.to_ascii_lowercase();
        let mut body = Vec::new();
        if lower.contains("transfer-encoding: chunked") {
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0u8; n + 2];
                if r.read_exact(&mut chunk).is_err() || n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            // (No read for a length of 0: BufReader would wait to fill its buffer.)
            while body.len() < n {
                let mut b = vec![0u8; n - body.len()];
                match r.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => body.extend_from_slice(&b[..k]),
                }
            }
        }
        if let Ok(mut l) = log.lock() {
            l[at].body = body;
        }
        use std::io::Write;
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nup");
    });
    (port, seen)
}
