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
