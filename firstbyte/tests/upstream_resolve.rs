//! `server NAME resolve [service=NAME]` in an `upstream`: the name is asked of the resolver
//! at run time and the group's servers follow its answers. A tiny DNS server in the test
//! (UDP, A and SRV records, answers the test changes while firstbyte runs) and backends that
//! say who they are.

mod support;

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;

/// What the DNS server answers for one name.
#[derive(Clone, Default)]
struct Entry {
    a: Vec<Ipv4Addr>,
    /// (priority, weight, port, target).
    srv: Vec<(u16, u16, u16, String)>,
    /// An RCODE other than 0 (2: server failure).
    rcode: u8,
}

/// The names the DNS server knows (others: NXDOMAIN), and how many questions it answered.
#[derive(Clone)]
struct Dns {
    port: u16,
    zone: Arc<Mutex<HashMap<String, Entry>>>,
    asked: Arc<AtomicUsize>,
}

impl Dns {
    fn start() -> Dns {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind dns");
        let port = sock.local_addr().expect("addr").port();
        let dns = Dns {
            port,
            zone: Arc::default(),
            asked: Arc::default(),
        };
        let d = dns.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                if let Some(r) = d.answer(&buf[..n]) {
                    let _ = sock.send_to(&r, from);
                }
            }
        });
        dns
    }

    fn set(&self, name: &str, e: Entry) {
        self.zone.lock().expect("zone").insert(name.into(), e);
    }

    fn remove(&self, name: &str) {
        self.zone.lock().expect("zone").remove(name);
    }

    /// Waits until `n` more questions were answered (firstbyte asked again since the
    /// change): 20 s at most.
    fn wait_asked(&self, n: usize) {
        let from = self.asked.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.asked.load(Ordering::SeqCst) < from + n {
            assert!(Instant::now() < deadline, "firstbyte did not ask again");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answer(&self, q: &[u8]) -> Option<Vec<u8>> {
        let mut labels = Vec::new();
        let mut at = 12;
        while *q.get(at)? != 0 {
            let len = usize::from(q[at]);
            labels.push(String::from_utf8_lossy(q.get(at + 1..at + 1 + len)?).into_owned());
            at += 1 + len;
        }
        let end = at + 1;
        let qtype = u16::from_be_bytes([*q.get(end)?, *q.get(end + 1)?]);
        let name = labels.join(".").to_ascii_lowercase();
        let entry = self.zone.lock().ok()?.get(&name).cloned();
        let mut r = q.get(..end + 4)?.to_vec();
        r[2] = 0x81;
        r[3] = 0x80;
        let mut records: Vec<(u16, Vec<u8>)> = Vec::new();
        match &entry {
            None => r[3] |= 3,
            Some(e) if e.rcode != 0 => r[3] |= e.rcode,
            Some(e) => {
                if qtype == 1 {
                    records.extend(e.a.iter().map(|ip| (1, ip.octets().to_vec())));
                }
                if qtype == 33 {
                    for (prio, weight, port, target) in &e.srv {
                        let mut d = Vec::new();
                        d.extend_from_slice(&prio.to_be_bytes());
                        d.extend_from_slice(&weight.to_be_bytes());
                        d.extend_from_slice(&port.to_be_bytes());
                        for l in target.split('.') {
                            d.push(l.len() as u8);
                            d.extend_from_slice(l.as_bytes());
                        }
                        d.push(0);
                        records.push((33, d));
                    }
                }
            }
        }
        r[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (t, data) in records {
            // Owner: the question's name; TTL 1 s.
            r.extend_from_slice(&[0xc0, 12]);
            r.extend_from_slice(&t.to_be_bytes());
            r.extend_from_slice(&[0, 1, 0, 0, 0, 1]);
            r.extend_from_slice(&(data.len() as u16).to_be_bytes());
            r.extend_from_slice(&data);
        }
        self.asked.fetch_add(1, Ordering::SeqCst);
        Some(r)
    }
}

/// A backend on `ip:port` that answers every request with `id`.
fn backend(ip: Ipv4Addr, port: u16, id: &'static str) -> Option<()> {
    let l = TcpListener::bind((ip, port)).ok()?;
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut w = s;
                while read_head(&mut r).is_some() {
                    let a = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{id}",
                        id.len()
                    );
                    if w.write_all(a.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Some(())
}

/// One port with a backend on each of `ips`, saying its index.
fn backends_on_one_port(ips: &[Ipv4Addr], ids: &[&'static str]) -> u16 {
    for _ in 0..50 {
        let port = free_port();
        let ok = ips.iter().all(|ip| TcpListener::bind((*ip, port)).is_ok());
        if ok
            && ips
                .iter()
                .zip(ids)
                .all(|(ip, id)| backend(*ip, port, id).is_some())
        {
            return port;
        }
    }
    panic!("no port free on every address");
}

fn front(http: &str) -> (Server, u16) {
    let dir = tempdir("upstream-resolve");
    let port = free_port();
    let conf = format!(
        "pid {d}/fb.pid;\nerror_log {d}/error.log info;\nevents {{}}\nhttp {{\n access_log off;\n {http}\n \
         server {{ listen 127.0.0.1:{port};\n location / {{ proxy_pass http://u; proxy_connect_timeout 2s; }} }}\n}}\n",
        d = dir.display()
    );
    (Server::start_in(&dir, &conf, port), port)
}

/// (status, body) of `GET /`.
fn get(port: u16) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect front");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let (status, _, body) = parse_response(&buf);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Asks until the answer is `want` (20 s at most: the name is asked every 2 s).
fn until(port: u16, want: (u16, &str), s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = get(port);
        if got.0 == want.0 && got.1 == want.1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still {got:?}, not {want:?}:\n{}",
            error_log(s)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn error_log(s: &Server) -> String {
    std::fs::read_to_string(s.dir.join("error.log")).unwrap_or_default()
}

fn ip(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

fn a(ips: &[Ipv4Addr]) -> Entry {
    Entry {
        a: ips.to_vec(),
        ..Entry::default()
    }
}

#[test]
fn a_changed_address_takes_the_requests_once_the_answer_expires() {
    let dns = Dns::start();
    let p = backends_on_one_port(&[ip(11), ip(12)], &["one", "two"]);
    dns.set("backend.test", a(&[ip(11)]));
    let (s, port) = front(&format!(
        "resolver 127.0.0.1:{} valid=1s; resolver_timeout 1s;\n \
         upstream u {{ zone z 64k; server backend.test:{p} resolve; }}",
        dns.port
    ));
    until(port, (200, "one"), &s);
    // The address changes: after the next query, every request goes to the new one only.
    dns.set("backend.test", a(&[ip(12)]));
    until(port, (200, "two"), &s);
    for _ in 0..6 {
        assert_eq!(get(port), (200, "two".into()));
    }
    // Both: round robin over the two, in turn.
    dns.set("backend.test", a(&[ip(11), ip(12)]));
    until(port, (200, "one"), &s);
    let seen: Vec<String> = (0..4).map(|_| get(port).1).collect();
    assert_eq!(seen.iter().filter(|b| *b == "one").count(), 2, "{seen:?}");
    assert_eq!(seen.iter().filter(|b| *b == "two").count(), 2, "{seen:?}");
    drop(s);
}

#[test]
fn a_name_that_stops_resolving_loses_its_servers_but_a_failing_dns_keeps_them() {
    let dns = Dns::start();
    let p = backends_on_one_port(&[ip(13)], &["three"]);
    dns.set("gone.test", a(&[ip(13)]));
    let (s, port) = front(&format!(
        "resolver 127.0.0.1:{} valid=1s; resolver_timeout 1s;\n \
         upstream u {{ zone z 64k; server gone.test:{p} resolve; }}",
        dns.port
    ));
    until(port, (200, "three"), &s);
    // A server failure keeps what the last answer gave (nginx), however often it comes.
    dns.set(
        "gone.test",
        Entry {
            rcode: 2,
            ..Entry::default()
        },
    );
    dns.wait_asked(4);
    assert_eq!(get(port), (200, "three".into()), "{}", error_log(&s));
    assert!(error_log(&s).contains("gone.test could not be resolved (2: Server failure)"));
    // Host not found: the line has no server left (502, no live upstreams).
    dns.remove("gone.test");
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(port).0 != 502 {
        assert!(Instant::now() < deadline, "{}", error_log(&s));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        error_log(&s).contains("no live upstreams"),
        "{}",
        error_log(&s)
    );
    // It resolves again: served again (the next query comes valid= + 1 s later).
    dns.set("gone.test", a(&[ip(13)]));
    until(port, (200, "three"), &s);
    drop(s);
}

#[test]
fn srv_records_give_ports_weights_and_backups() {
    let dns = Dns::start();
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    backend(ip(1), pa, "a").expect("a");
    backend(ip(1), pb, "b").expect("b");
    backend(ip(1), pc, "c").expect("c");
    dns.set("a.test", a(&[ip(1)]));
    dns.set(
        "_http._tcp.svc.test",
        Entry {
            srv: vec![
                (1, 3, pa, "a.test".into()),
                (1, 1, pb, "a.test".into()),
                (2, 1, pc, "a.test".into()),
            ],
            ..Entry::default()
        },
    );
    let (s, port) = front(&format!(
        "resolver 127.0.0.1:{} valid=1s; resolver_timeout 1s;\n \
         upstream u {{ zone z 64k; server svc.test service=http resolve; }}",
        dns.port
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(port).0 != 200 {
        assert!(Instant::now() < deadline, "{}", error_log(&s));
        std::thread::sleep(Duration::from_millis(100));
    }
    // Weights 3:1 from the records, ports from the records; the priority-2 record is a
    // backup, unused while the others answer.
    let mut count: HashMap<String, usize> = HashMap::new();
    for _ in 0..8 {
        let (st, body) = get(port);
        assert_eq!(st, 200);
        *count.entry(body).or_default() += 1;
    }
    assert_eq!(count.get("a"), Some(&6), "{count:?}");
    assert_eq!(count.get("b"), Some(&2), "{count:?}");
    assert_eq!(count.get("c"), None, "{count:?}");
    // The primary records now name a port nothing listens on: the backup answers.
    let dead = free_port();
    dns.set(
        "_http._tcp.svc.test",
        Entry {
            srv: vec![(1, 3, dead, "a.test".into()), (2, 1, pc, "a.test".into())],
            ..Entry::default()
        },
    );
    until(port, (200, "c"), &s);
    assert!(
        error_log(&s).contains(&format!("127.0.0.1:{dead}")),
        "the primary was tried first:\n{}",
        error_log(&s)
    );
    drop(s);
}

#[test]
fn resolve_needs_a_zone_and_a_resolver() {
    let dir = tempdir("upstream-resolve-conf");
    for (http, want) in [
        (
            "upstream u { zone z 64k; server backend.test resolve; }",
            "no resolver defined to resolve names at run time in upstream \"u\"",
        ),
        (
            "resolver 127.0.0.1; upstream u { server backend.test resolve; }",
            "resolving names at run time requires upstream \"u\" in ",
        ),
        (
            "upstream u { zone z 64k; resolver 127.0.0.1; server backend.test:80 service=http resolve; }",
            "service upstream \"backend.test:80\" may not have port",
        ),
    ] {
        let conf = dir.join("t.conf");
        std::fs::write(
            &conf,
            format!("events {{}}\nhttp {{ {http} server {{ listen 127.0.0.1:1; }} }}\n"),
        )
        .expect("write");
        let out = firstbyte(&["-t", "-c", &conf.display().to_string()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(want), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reload_starts_from_the_last_answer_with_the_new_port() {
    let dns = Dns::start();
    let p1 = backends_on_one_port(&[ip(14)], &["old port"]);
    let p2 = backends_on_one_port(&[ip(14)], &["new port"]);
    dns.set("kept.test", a(&[ip(14)]));
    let http = |p: u16| {
        format!(
            "resolver 127.0.0.1:{} valid=1s; resolver_timeout 1s;\n \
             upstream u {{ zone z 64k; server kept.test:{p} resolve; }}",
            dns.port
        )
    };
    let (s, port) = front(&http(p1));
    until(port, (200, "old port"), &s);
    // The DNS fails from now on: the new load can only have the address from the old one.
    dns.set(
        "kept.test",
        Entry {
            rcode: 2,
            ..Entry::default()
        },
    );
    let conf = std::fs::read_to_string(&s.conf).expect("conf");
    let conf = conf.replace(&format!("kept.test:{p1}"), &format!("kept.test:{p2}"));
    std::fs::write(&s.conf, conf).expect("write");
    s.signal(libc::SIGHUP);
    until(port, (200, "new port"), &s);
    // It keeps it through the failures that follow.
    dns.wait_asked(2);
    assert_eq!(get(port), (200, "new port".into()), "{}", error_log(&s));
    drop(s);
}
