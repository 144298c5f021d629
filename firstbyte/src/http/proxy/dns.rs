//! `resolver`: the addresses of a name a `proxy_pass` with variables evaluated to, asked of
//! the configured DNS servers over UDP (RFC 1035; TCP for a truncated answer), as nginx's
//! resolver asks them — an A query (and AAAA unless `ipv6=off`), both to the next server
//! for each name, resent to the next after 5 s without an answer, within
//! `resolver_timeout`. The answer's CNAME chain from the name asked is followed; records for
//! other names are ignored; a chain that ends without addresses is asked again for its last
//! name. An error answer to either query is the name's error (see [`decide`]). A name's
//! addresses are kept (per server list and name) for its records' smallest TTL, or
//! `valid=`; errors are not kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::conf::model::Resolver;

/// Why a name gave no address, in nginx's words (`could not be resolved (3: Host not found)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsError {
    /// nginx's code: the RCODE, or 110 for a timeout.
    pub code: u16,
    /// Its text.
    pub text: &'static str,
}

impl std::fmt::Display for DnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.text)
    }
}

/// nginx's `ngx_resolver_strerror`.
fn rcode_error(code: u16) -> DnsError {
    let text = match code {
        1 => "Format error",
        2 => "Server failure",
        3 => "Host not found",
        4 => "Unimplemented",
        5 => "Operation refused",
        _ => "Unknown error",
    };
    DnsError { code, text }
}

const TIMED_OUT: DnsError = DnsError {
    code: 110,
    text: "Operation timed out",
};

/// How long a query waits for its answer before it goes again (nginx's resend time).
const RESEND: Duration = Duration::from_secs(5);

const A: u16 = 1;
const CNAME: u16 = 5;
const AAAA: u16 = 28;
const SRV: u16 = 33;

mod srv;
pub use srv::lookup_srv;

/// One SRV record: where a service is (RFC 2782; a weight of 0 counts as 1, as nginx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvRecord {
    /// Lower first.
    pub priority: u16,
    /// Share within its priority.
    pub weight: u16,
    /// The service's port.
    pub port: u16,
    /// The host name to resolve.
    pub target: String,
}

/// What one query gave: the addresses, the smallest TTL of the records used, and the name the
/// CNAME chain ended at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    addrs: Vec<IpAddr>,
    /// SRV records (for an SRV query).
    srvs: Vec<SrvRecord>,
    /// None: no record was used.
    ttl: Option<u32>,
    end: String,
}

type CacheKey = (Vec<SocketAddr>, String, bool, bool);

/// Answers by name, with when they expire.
type Cache = std::collections::HashMap<CacheKey, (Vec<IpAddr>, Instant)>;

/// Answers kept until they expire.
static CACHE: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);

/// The addresses of `name` (from the cache while its answer is valid).
pub async fn resolve(name: &str, r: &Resolver, timeout: Duration) -> Result<Vec<IpAddr>, DnsError> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let key: CacheKey = (r.servers.clone(), name.clone(), r.ipv4, r.ipv6);
    if let Ok(mut c) = CACHE.lock() {
        let map = c.get_or_insert_with(Default::default);
        let now = Instant::now();
        map.retain(|_, (_, until)| *until > now);
        if let Some((addrs, _)) = map.get(&key) {
            return Ok(addrs.clone());
        }
    }
    let (addrs, ttl) = tokio::time::timeout(timeout, lookup(&name, r))
        .await
        .unwrap_or(Err(TIMED_OUT))?;
    let keep = r.valid.unwrap_or(Duration::from_secs(u64::from(ttl)));
    if !keep.is_zero() {
        if let Ok(mut c) = CACHE.lock() {
            let map = c.get_or_insert_with(Default::default);
            // A bound on what one process keeps: past 10,000 names it starts again.
            if map.len() >= 10_000 {
                map.clear();
            }
            map.insert(key, (addrs.clone(), Instant::now() + keep));
        }
    }
    Ok(addrs)
}

/// Where each server list's next name goes: nginx sends each name's queries to the next
/// server.
static ROTATION: std::sync::Mutex<Option<std::collections::HashMap<Vec<SocketAddr>, usize>>> =
    std::sync::Mutex::new(None);

/// The server a new name's queries go to first (nginx's `rn->last_connection`).
fn next_server(r: &Resolver) -> usize {
    ROTATION.lock().map_or(0, |mut m| {
        let next = m
            .get_or_insert_with(Default::default)
            .entry(r.servers.clone())
            .or_default();
        let i = *next;
        *next = next.wrapping_add(1);
        if m.as_ref().is_some_and(|m| m.len() > 1000) {
            m.take();
        }
        i
    })
}

/// One query, to the servers in turn from server `server`, moving on (and around) while
/// none answers; the caller's `resolver_timeout` ends it. `server` is left at the one that
/// answered, where the name's next query goes (nginx resends both of a name's queries to
/// the next server).
async fn query_servers(
    r: &Resolver,
    server: &mut usize,
    name: &str,
    qtype: u16,
) -> Result<Answer, DnsError> {
    let n = r.servers.len();
    if n == 0 {
        return Err(TIMED_OUT);
    }
    loop {
        let began = tokio::time::Instant::now();
        match ask(r.servers[*server % n], name, qtype).await {
            // Never sooner than the resend time, even when the socket failed at once (a
            // refused port): no busy loop until `resolver_timeout`.
            Err(e) if e == TIMED_OUT => {
                tokio::time::sleep_until(began + RESEND).await;
                *server = server.wrapping_add(1);
            }
            other => return other,
        }
    }
}

/// What one name's answers (A, then AAAA) decide.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// These addresses.
    Addrs(Vec<IpAddr>),
    /// No address; ask again for the name a CNAME gave.
    Follow(String),
    /// An error.
    Fail(DnsError),
}

/// nginx's `ngx_resolver_process_a` over one name's answers in the order they came (A, then
/// AAAA), for `asked`: an error in either is the name's error, even beside addresses of the
/// other type; addresses of either type are the answer; with none, the CNAME of the last
/// answer is followed; an answer without records after one without addresses is "Host not
/// found" (a CNAME of the first answer is not followed then).
fn decide(asked: &str, answers: Vec<Result<Answer, DnsError>>) -> Decision {
    let n = answers.len();
    let mut failed: Option<DnsError> = None;
    let mut addrs = Vec::new();
    for (i, a) in answers.into_iter().enumerate() {
        let pending = i + 1 < n;
        let a = match (a, &failed) {
            (Err(e), _) if pending => {
                failed.get_or_insert(e);
                continue;
            }
            (Err(e), _) => return Decision::Fail(e),
            (Ok(_), Some(e)) if !pending => return Decision::Fail(e.clone()),
            (Ok(_), Some(_)) => continue,
            (Ok(a), None) => a,
        };
        addrs.extend(a.addrs);
        if pending {
            continue;
        }
        if !addrs.is_empty() {
            return Decision::Addrs(addrs);
        }
        if a.end != asked {
            return Decision::Follow(a.end);
        }
    }
    Decision::Fail(rcode_error(3))
}

/// `name`'s addresses asked afresh (no cache), with the time they are valid for: the
/// resolver's `valid=`, else the records' smallest TTL (what `server NAME resolve` in an
/// `upstream` re-resolves with).
pub async fn lookup_fresh(
    name: &str,
    r: &Resolver,
    timeout: Duration,
) -> Result<(Vec<IpAddr>, Duration), DnsError> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let (addrs, ttl) = tokio::time::timeout(timeout, lookup(&name, r))
        .await
        .unwrap_or(Err(TIMED_OUT))?;
    Ok((
        addrs,
        r.valid.unwrap_or(Duration::from_secs(u64::from(ttl))),
    ))
}

/// A and AAAA (as configured) for `name`, both to one server (the next one for each name,
/// as nginx); a CNAME chain that ends without addresses is asked again for its last name
/// (at most 8 names). See [`decide`].
async fn lookup(name: &str, r: &Resolver) -> Result<(Vec<IpAddr>, u32), DnsError> {
    let mut asking = name.to_string();
    let mut ttl = u32::MAX;
    for _ in 0..8 {
        let mut server = next_server(r);
        let mut answers = Vec::new();
        for (qtype, wanted) in [(A, r.ipv4), (AAAA, r.ipv6)] {
            if !wanted {
                continue;
            }
            let a = query_servers(r, &mut server, &asking, qtype).await;
            if let Ok(a) = &a {
                ttl = ttl.min(a.ttl.unwrap_or(u32::MAX));
            }
            answers.push(a);
        }
        match decide(&asking, answers) {
            Decision::Addrs(addrs) => return Ok((addrs, ttl)),
            Decision::Follow(next) => asking = next,
            Decision::Fail(e) => return Err(e),
        }
    }
    Err(rcode_error(3))
}

/// One query of `qtype` for `name` to `server`, over UDP; waits for the answer whose id and
/// question match (others are dropped, as nginx drops them) for 5 s.
async fn ask(server: SocketAddr, name: &str, qtype: u16) -> Result<Answer, DnsError> {
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = tokio::net::UdpSocket::bind(bind)
        .await
        .map_err(|_| TIMED_OUT)?;
    sock.connect(server).await.map_err(|_| TIMED_OUT)?;
    let id: u16 = rand_id();
    let q = query(id, name, qtype).ok_or(rcode_error(1))?;
    let mut buf = vec![0u8; 4096];
    // nginx resends a query that got no usable answer after 5 s (to the next server; until
    // `resolver_timeout`, which the caller enforces).
    sock.send(&q).await.map_err(|_| TIMED_OUT)?;
    let resend = tokio::time::Instant::now() + RESEND;
    loop {
        match tokio::time::timeout_at(resend, sock.recv(&mut buf)).await {
            Err(_) | Ok(Err(_)) => return Err(TIMED_OUT),
            Ok(Ok(n)) => {
                if let Some(r) = parse(&buf[..n], id, name, qtype) {
                    // Truncated (TC): the whole answer over TCP, as nginx asks again.
                    if r.is_ok() && buf[2] & 0x02 != 0 {
                        return ask_tcp(server, &q, id, name, qtype).await;
                    }
                    return r;
                }
            }
        }
    }
}

/// The query `q` over TCP (RFC 1035 §4.2.2: each message after its 2-byte length).
async fn ask_tcp(
    server: SocketAddr,
    q: &[u8],
    id: u16,
    name: &str,
    qtype: u16,
) -> Result<Answer, DnsError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = async {
        let mut s = tokio::net::TcpStream::connect(server).await?;
        let mut msg = (q.len() as u16).to_be_bytes().to_vec();
        msg.extend_from_slice(q);
        s.write_all(&msg).await?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    let buf = io.await.map_err(|_| TIMED_OUT)?;
    parse(&buf, id, name, qtype).unwrap_or(Err(rcode_error(1)))
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() as u16
}

/// A query message: header (recursion desired), one question.
fn query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let mut q = Vec::with_capacity(name.len() + 18);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    (q.len() <= 512).then_some(q)
}

/// Reads a (possibly compressed) name at `at`; the name and the offset after it.
fn read_name(m: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    let mut end = None;
    for _ in 0..128 {
        let len = *m.get(at)? as usize;
        if len & 0xc0 == 0xc0 {
            let ptr = ((len & 0x3f) << 8) | *m.get(at + 1)? as usize;
            end.get_or_insert(at + 2);
            at = ptr;
            continue;
        }
        if len & 0xc0 != 0 {
            return None;
        }
        if len == 0 {
            return Some((name, end.unwrap_or(at + 1)));
        }
        let label = m.get(at + 1..at + 1 + len)?;
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        if name.len() > 255 {
            return None;
        }
        at += 1 + len;
    }
    None
}

fn u16_at(m: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]))
}

/// The addresses an answer gives for `name`; None: not the answer to this query (ignored).
fn parse(m: &[u8], id: u16, name: &str, qtype: u16) -> Option<Result<Answer, DnsError>> {
    if u16_at(m, 0)? != id {
        return None;
    }
    let flags = u16_at(m, 2)?;
    if flags & 0x8000 == 0 {
        return None;
    }
    // As nginx: a format error (or an RCODE past 5: Refused), or an answer with other than
    // one question, is logged and otherwise ignored; the query waits for its resend, to
    // the next server.
    let rcode = flags & 0x000f;
    if rcode == 1 || rcode > 5 {
        crate::fblog!(
            Error,
            "DNS error ({}), query id:{id}, name:\"{name}\"",
            rcode_error(rcode)
        );
        return None;
    }
    let (qd, an) = (u16_at(m, 4)?, u16_at(m, 6)?);
    if qd != 1 {
        crate::fblog!(Error, "invalid number of questions in DNS response");
        return None;
    }
    let (qname, at) = read_name(m, 12)?;
    let want = name.trim_end_matches('.').to_ascii_lowercase();
    if qname != want || u16_at(m, at)? != qtype {
        return None;
    }
    if rcode != 0 {
        return Some(Err(rcode_error(rcode)));
    }
    let mut at = at + 4;
    // The names that lead to the one asked, through CNAMEs.
    let mut names = vec![want];
    let mut out = Vec::new();
    let mut srvs = Vec::new();
    let mut ttl = u32::MAX;
    for _ in 0..an {
        let Some((owner, next)) = read_name(m, at) else {
            return Some(Err(rcode_error(1)));
        };
        let (Some(rtype), Some(hi), Some(lo), Some(len)) = (
            u16_at(m, next),
            u16_at(m, next + 4),
            u16_at(m, next + 6),
            u16_at(m, next + 8),
        ) else {
            return Some(Err(rcode_error(1)));
        };
        let rttl = (u32::from(hi) << 16) | u32::from(lo);
        let data = next + 10;
        let Some(rdata) = m.get(data..data + len as usize) else {
            return Some(Err(rcode_error(1)));
        };
        let ours = names.contains(&owner);
        match rtype {
            A if ours && rdata.len() == 4 => {
                ttl = ttl.min(rttl);
                out.push(IpAddr::from([rdata[0], rdata[1], rdata[2], rdata[3]]));
            }
            AAAA if ours && rdata.len() == 16 => {
                ttl = ttl.min(rttl);
                let mut b = [0u8; 16];
                b.copy_from_slice(rdata);
                out.push(IpAddr::from(b));
            }
            SRV if ours && qtype == SRV && rdata.len() >= 7 => {
                if let (Some((target, _)), Some(priority), Some(weight), Some(port)) = (
                    read_name(m, data + 6),
                    u16_at(m, data),
                    u16_at(m, data + 2),
                    u16_at(m, data + 4),
                ) {
                    ttl = ttl.min(rttl);
                    srvs.push(SrvRecord {
                        priority,
                        weight: weight.max(1),
                        port,
                        target,
                    });
                }
            }
            CNAME if ours => {
                if let Some((target, _)) = read_name(m, data) {
                    ttl = ttl.min(rttl);
                    names.push(target);
                }
            }
            _ => {}
        }
        at = data + len as usize;
    }
    let end = names.pop().unwrap_or_default();
    Some(Ok(Answer {
        addrs: out,
        srvs,
        ttl: (ttl != u32::MAX).then_some(ttl),
        end,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: u16, q: &[u8], records: &[(&[u8], u16, &[u8])], rcode: u8) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&id.to_be_bytes());
        m.extend_from_slice(&[0x81, 0x80 | rcode]);
        m.extend_from_slice(&[0, 1]);
        m.extend_from_slice(&(records.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&q[12..]);
        for (owner, t, data) in records {
            m.extend_from_slice(owner);
            m.extend_from_slice(&t.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            m.extend_from_slice(&(data.len() as u16).to_be_bytes());
            m.extend_from_slice(data);
        }
        m
    }

    #[test]
    fn a_records_and_a_cname_chain_from_the_name_asked() {
        let q = query(7, "www.Example.net", A).expect("query");
        // Owner by pointer to the question's name (offset 12).
        let ptr: &[u8] = &[0xc0, 12];
        let m = answer(
            7,
            &q,
            &[(ptr, A, &[127, 0, 0, 1]), (ptr, A, &[127, 0, 0, 2])],
            0,
        );
        let a = parse(&m, 7, "www.example.net", A)
            .expect("ours")
            .expect("ok");
        assert_eq!(
            a.addrs,
            [IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 2])]
        );
        assert_eq!((a.ttl, a.end.as_str()), (Some(60), "www.example.net"));
        // A CNAME to another name, then its A; an A of an unrelated name is not taken.
        let target: &[u8] = b"\x01b\x07example\x03net\x00";
        let other: &[u8] = b"\x05other\x03net\x00";
        let m = answer(
            8,
            &query(8, "www.example.net", A).expect("query"),
            &[
                (ptr, CNAME, target),
                (other, A, &[10, 0, 0, 9]),
                (target, A, &[10, 0, 0, 1]),
            ],
            0,
        );
        let a = parse(&m, 8, "www.example.net", A)
            .expect("ours")
            .expect("ok");
        assert_eq!(a.addrs, [IpAddr::from([10, 0, 0, 1])]);
        assert_eq!(a.end, "b.example.net");
        // Another id or question: not ours.
        assert_eq!(parse(&m, 9, "www.example.net", A), None);
        assert_eq!(parse(&m, 8, "other.example.net", A), None);
        // NXDOMAIN in nginx's words.
        let m = answer(3, &query(3, "nx.example.net", A).expect("q"), &[], 3);
        let e = parse(&m, 3, "nx.example.net", A)
            .expect("ours")
            .expect_err("nx");
        assert_eq!(e.to_string(), "3: Host not found");
        // A format error, or an RCODE past Refused, is no answer: the query waits for its
        // resend to the next server (nginx); so is an answer with two questions.
        for rcode in [1, 6, 15] {
            let m = answer(4, &query(4, "fe.example.net", A).expect("q"), &[], rcode);
            assert_eq!(parse(&m, 4, "fe.example.net", A), None, "rcode {rcode}");
        }
        let mut m = answer(5, &query(5, "q.example.net", A).expect("q"), &[], 0);
        m[5] = 2;
        assert_eq!(parse(&m, 5, "q.example.net", A), None);
    }

    fn ok(addrs: &[&str], end: &str) -> Result<Answer, DnsError> {
        Ok(Answer {
            addrs: addrs.iter().map(|a| a.parse().expect("ip")).collect(),
            srvs: Vec::new(),
            ttl: Some(60),
            end: end.into(),
        })
    }

    #[test]
    fn one_names_answers_decide_as_nginx() {
        let q = "q.test";
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let fail = |c| Err(rcode_error(c));
        // Addresses of both types; of one type beside an empty or CNAME answer.
        assert_eq!(
            decide(q, vec![ok(&["10.0.0.1"], q), ok(&["fe80::1"], q)]),
            Decision::Addrs(vec![ip("10.0.0.1"), ip("fe80::1")])
        );
        assert_eq!(
            decide(q, vec![ok(&["10.0.0.1"], q), ok(&[], "alias.test")]),
            Decision::Addrs(vec![ip("10.0.0.1")])
        );
        assert_eq!(
            decide(q, vec![ok(&[], "alias.test"), ok(&["fe80::1"], q)]),
            Decision::Addrs(vec![ip("fe80::1")])
        );
        // An error in either answer is the name's error, addresses or not.
        assert_eq!(
            decide(q, vec![ok(&["10.0.0.1"], q), fail(2)]),
            Decision::Fail(rcode_error(2))
        );
        assert_eq!(
            decide(q, vec![fail(2), ok(&["fe80::1"], q)]),
            Decision::Fail(rcode_error(2))
        );
        assert_eq!(
            decide(q, vec![fail(2), fail(3)]),
            Decision::Fail(rcode_error(3))
        );
        // No address: the last answer's CNAME is followed; none after an empty last answer.
        assert_eq!(
            decide(q, vec![ok(&[], q), ok(&[], "b.test")]),
            Decision::Follow("b.test".into())
        );
        assert_eq!(
            decide(q, vec![ok(&[], "a.test"), ok(&[], "b.test")]),
            Decision::Follow("b.test".into())
        );
        assert_eq!(
            decide(q, vec![ok(&[], "a.test"), ok(&[], q)]),
            Decision::Fail(rcode_error(3))
        );
        assert_eq!(
            decide(q, vec![ok(&[], q), ok(&[], q)]),
            Decision::Fail(rcode_error(3))
        );
        // One type asked (`ipv6=off`).
        assert_eq!(
            decide(q, vec![ok(&[], "a.test")]),
            Decision::Follow("a.test".into())
        );
        assert_eq!(decide(q, vec![fail(2)]), Decision::Fail(rcode_error(2)));
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        let q = query(1, "a.b", A).expect("q");
        let mut m = answer(1, &q, &[(&[0xc0, 12], A, &[1, 2, 3, 4])], 0);
        for cut in 0..m.len() {
            let _ = parse(&m[..cut], 1, "a.b", A);
        }
        // A pointer loop.
        let len = m.len();
        m[len - 16] = 0xc0;
        m[len - 15] = (len - 16) as u8;
        let _ = parse(&m, 1, "a.b", A);
        assert!(query(1, "a..b", A).is_none());
    }
}
