//! SRV lookups for `server NAME service=NAME resolve` in an `upstream` (nginx's
//! `ngx_resolver_process_srv` and `ngx_resolver_report_srv`): the SRV query of
//! `_SERVICE._tcp.NAME` (`SERVICE.NAME` when the service has a dot), its CNAME chain
//! followed; the records sorted by priority (stable, as nginx's insertion sort); each
//! target's addresses asked as any name's (A and AAAA, CNAMEs followed). A target that does
//! not resolve is logged and left out; when none resolves, the lookup's error is the first
//! target's (NXDOMAIN when any target's was), as nginx.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{lookup, next_server, query_servers, rcode_error, DnsError, SrvRecord, SRV, TIMED_OUT};
use crate::conf::model::Resolver;

/// One address of an SRV lookup, with its record's priority, weight and target name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The address, with the record's port.
    pub addr: SocketAddr,
    /// The record's priority (lower first).
    pub priority: u16,
    /// The record's weight (at least 1).
    pub weight: u16,
    /// The record's target name.
    pub name: String,
}

/// The SRV query's name for `service` of `name` (nginx: `_SERVICE._tcp.NAME`, or
/// `SERVICE.NAME` when the service is written with a dot, e.g. `_http._tcp`).
pub fn srv_name(service: &str, name: &str) -> String {
    if service.contains('.') {
        format!("{service}.{name}")
    } else {
        format!("_{service}._tcp.{name}")
    }
}

/// `service` of `name`: its targets' addresses in priority order, and how long they are
/// valid (the resolver's `valid=`, else the smallest TTL of the records used).
pub async fn lookup_srv(
    name: &str,
    service: &str,
    r: &Resolver,
    timeout: Duration,
) -> Result<(Vec<Target>, Duration), DnsError> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let qname = srv_name(service, &name);
    let (mut records, ttl) = tokio::time::timeout(timeout, records(&qname, r))
        .await
        .unwrap_or(Err(TIMED_OUT))?;
    records.sort_by_key(|s| s.priority);
    let secs = |t: u32| r.valid.unwrap_or(Duration::from_secs(u64::from(t)));
    let mut valid = secs(ttl);
    let mut asked: HashMap<String, Result<(Vec<IpAddr>, u32), DnsError>> = HashMap::new();
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for s in &records {
        let got = match asked.get(&s.target) {
            Some(g) => g.clone(),
            None => {
                let g = tokio::time::timeout(timeout, lookup(&s.target, r))
                    .await
                    .unwrap_or(Err(TIMED_OUT));
                asked.insert(s.target.clone(), g.clone());
                g
            }
        };
        match got {
            Ok((addrs, t)) => {
                valid = valid.min(secs(t));
                out.extend(addrs.into_iter().map(|a| Target {
                    addr: SocketAddr::new(a, s.port),
                    priority: s.priority,
                    weight: s.weight,
                    name: s.target.clone(),
                }));
            }
            Err(e) => {
                crate::fblog!(
                    Error,
                    "{} could not be resolved ({e}) while resolving service {service} of {name}",
                    s.target
                );
                errors.push(e);
            }
        }
    }
    if out.is_empty() {
        return Err(match errors.iter().find(|e| e.code == 3) {
            Some(e) => e.clone(),
            None => errors.into_iter().next().unwrap_or(rcode_error(3)),
        });
    }
    Ok((out, valid))
}

/// The SRV records of `name` (its CNAME chain followed, at most 8 names) and their
/// smallest TTL; an answer with neither is "Host not found", as nginx.
async fn records(name: &str, r: &Resolver) -> Result<(Vec<SrvRecord>, u32), DnsError> {
    let mut asking = name.to_string();
    let mut ttl = u32::MAX;
    for _ in 0..8 {
        let mut server = next_server(r);
        let a = query_servers(r, &mut server, &asking, SRV).await?;
        ttl = ttl.min(a.ttl.unwrap_or(u32::MAX));
        if !a.srvs.is_empty() {
            return Ok((a.srvs, ttl));
        }
        if a.end == asking {
            break;
        }
        asking = a.end;
    }
    Err(rcode_error(3))
}

#[cfg(test)]
mod tests {
    use super::super::{parse, query};
    use super::*;

    #[test]
    fn service_names_as_nginx() {
        assert_eq!(srv_name("http", "example.net"), "_http._tcp.example.net");
        assert_eq!(
            srv_name("_http._tcp", "example.net"),
            "_http._tcp.example.net"
        );
        assert_eq!(srv_name("_sip._udp", "x.test"), "_sip._udp.x.test");
    }

    #[test]
    fn srv_records_are_read_with_a_zero_weight_as_one() {
        let q = query(9, "_http._tcp.example.net", SRV).expect("q");
        let mut m = Vec::new();
        m.extend_from_slice(&9u16.to_be_bytes());
        m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0]);
        m.extend_from_slice(&q[12..]);
        for (prio, weight, port) in [(2u16, 0u16, 8081u16), (1, 5, 8080)] {
            m.extend_from_slice(&[0xc0, 12]);
            m.extend_from_slice(&SRV.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 0, 0, 30]);
            let target = b"\x01b\x04test\x00";
            m.extend_from_slice(&((6 + target.len()) as u16).to_be_bytes());
            m.extend_from_slice(&prio.to_be_bytes());
            m.extend_from_slice(&weight.to_be_bytes());
            m.extend_from_slice(&port.to_be_bytes());
            m.extend_from_slice(target);
        }
        let a = parse(&m, 9, "_http._tcp.example.net", SRV)
            .expect("ours")
            .expect("ok");
        assert_eq!(a.ttl, Some(30));
        assert_eq!(
            a.srvs,
            [
                SrvRecord {
                    priority: 2,
                    weight: 1,
                    port: 8081,
                    target: "b.test".into()
                },
                SrvRecord {
                    priority: 1,
                    weight: 5,
                    port: 8080,
                    target: "b.test".into()
                }
            ]
        );
        // The same message read as an A answer gives no SRV record.
        let m2 = {
            let mut x = m.clone();
            let qt = 12 + "_http._tcp.example.net".len() + 2;
            x[qt..qt + 2].copy_from_slice(&1u16.to_be_bytes());
            x
        };
        let a = parse(&m2, 9, "_http._tcp.example.net", 1)
            .expect("ours")
            .expect("ok");
        assert!(a.srvs.is_empty() && a.addrs.is_empty());
    }
}
