//! `server NAME resolve [service=NAME]` in an `upstream` (nginx ≥ 1.27.3): one task per such
//! line asks the group's resolver for the name again and again, and replaces the line's
//! peers in the group's balancer with each answer ([`Balancer::replace`]), as nginx's
//! `ngx_http_upstream_zone_resolve_handler`:
//! - the first query when the load starts serving (no peers until it answers);
//! - the next one second after the answer expires (the resolver's `valid=`, else its
//!   records' smallest TTL), as nginx's timer `valid - now + 1`;
//! - "Host not found" (or an answer without records) removes the line's peers, and the next
//!   query comes after `valid=` (10 s without it) and one second;
//! - any other error (a server failure, a timeout) keeps them, and asks again after
//!   `resolver_timeout` (at least 1 s).
//!
//! The answers are kept for the next load: after a reload, a line of an upstream of the same
//! name with the same name and service starts with the last answer (with its new port and
//! parameters) and asks again once that answer expires, as nginx's "preresolve" from its
//! old zone. The tasks end when their load is retired (or dropped).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::balance::Resolved;
use super::{dns, Balancer};
use crate::conf::model::{Resolver, Upstream};

/// The last answer of a line, by upstream, name and service.
type Key = (String, String, Option<String>);

/// A line's last answer and when it expires.
type Kept = HashMap<Key, (Vec<Resolved>, Instant)>;

/// Answers kept across loads.
static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// One line to keep resolving.
pub(crate) struct Job {
    balancer: Weak<Mutex<Balancer>>,
    key: Key,
    host: usize,
    resolver: Resolver,
    timeout: Duration,
    /// When the first query goes (now, or when a kept answer expires).
    first: Instant,
}

/// The jobs of upstream `u`, whose balancer is `balancer`; lines with a kept answer get it
/// now.
pub(crate) fn jobs(u: &Upstream, balancer: &Arc<Mutex<Balancer>>) -> Vec<Job> {
    let Some(resolver) = &u.resolver else {
        return Vec::new();
    };
    let now = Instant::now();
    let mut out = Vec::with_capacity(u.resolve.len());
    for (host, t) in u.resolve.iter().enumerate() {
        let key: Key = (u.name.clone(), t.host.clone(), t.service.clone());
        let mut first = now;
        if let Some((answer, until)) = kept(&key) {
            if let Ok(mut b) = balancer.lock() {
                b.replace(host, &answer);
            }
            first = until.max(now);
        }
        out.push(Job {
            balancer: Arc::downgrade(balancer),
            key,
            host,
            resolver: resolver.clone(),
            timeout: u.resolver_timeout.unwrap_or(Duration::from_secs(30)),
            first,
        });
    }
    out
}

fn kept(key: &Key) -> Option<(Vec<Resolved>, Instant)> {
    KEPT.lock().ok()?.as_ref()?.get(key).cloned()
}

fn keep(key: &Key, answer: Vec<Resolved>, until: Instant) {
    if let Ok(mut k) = KEPT.lock() {
        let map = k.get_or_insert_with(HashMap::new);
        // A bound on what one process keeps across many reloads of changing names.
        if map.len() >= 10_000 {
            map.clear();
        }
        map.insert(key.clone(), (answer, until));
    }
}

/// Starts a task per job, inside the runtime; each ends when `retired` says so.
pub(crate) fn start(jobs: &[Job], retired: &tokio::sync::watch::Receiver<bool>) {
    if jobs.is_empty() {
        return;
    }
    // Only this load's lines are kept for the next one.
    if let Ok(mut k) = KEPT.lock() {
        if let Some(map) = k.as_mut() {
            map.retain(|key, _| jobs.iter().any(|j| &j.key == key));
        }
    }
    for j in jobs {
        let job = Job {
            balancer: j.balancer.clone(),
            key: j.key.clone(),
            host: j.host,
            resolver: j.resolver.clone(),
            timeout: j.timeout,
            first: j.first,
        };
        let mut retired = retired.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = run(job) => {}
                _ = retired.wait_for(|r| *r) => {}
            }
        });
    }
}

/// What one query of a line gave.
enum Outcome {
    Answer(Vec<Resolved>, Duration),
    NotFound,
    Failed,
}

async fn run(job: Job) {
    let mut at = tokio::time::Instant::from_std(job.first);
    loop {
        tokio::time::sleep_until(at).await;
        if job.balancer.strong_count() == 0 {
            return;
        }
        let outcome = query(&job).await;
        let Some(balancer) = job.balancer.upgrade() else {
            return;
        };
        let wait = match outcome {
            Outcome::Answer(answer, valid) => {
                if let Ok(mut b) = balancer.lock() {
                    b.replace(job.host, &answer);
                }
                keep(&job.key, answer, Instant::now() + valid);
                valid + Duration::from_secs(1)
            }
            Outcome::NotFound => {
                if let Ok(mut b) = balancer.lock() {
                    b.replace(job.host, &[]);
                }
                let valid = job.resolver.valid.unwrap_or(Duration::from_secs(10));
                keep(&job.key, Vec::new(), Instant::now() + valid);
                valid + Duration::from_secs(1)
            }
            Outcome::Failed => job.timeout.max(Duration::from_secs(1)),
        };
        at = tokio::time::Instant::now() + wait;
    }
}

/// Asks for the line's name (or service) once; errors are logged as nginx logs them.
async fn query(job: &Job) -> Outcome {
    let (_, name, service) = &job.key;
    let got = match service {
        Some(s) => dns::lookup_srv(name, s, &job.resolver, job.timeout)
            .await
            .map(|(targets, valid)| {
                let answer = targets
                    .into_iter()
                    .map(|t| Resolved {
                        addr: t.addr,
                        srv: Some((t.name, t.priority, t.weight)),
                    })
                    .collect();
                (answer, valid)
            }),
        None => dns::lookup_fresh(name, &job.resolver, job.timeout)
            .await
            .map(|(addrs, valid)| {
                let answer = addrs
                    .into_iter()
                    .map(|ip| Resolved {
                        addr: SocketAddr::new(ip, 0),
                        srv: None,
                    })
                    .collect();
                (answer, valid)
            }),
    };
    match got {
        Ok((answer, valid)) => Outcome::Answer(answer, valid),
        Err(e) => {
            match service {
                Some(s) => {
                    crate::fblog!(Error, "service {s} of {name} could not be resolved ({e})")
                }
                None => crate::fblog!(Error, "{name} could not be resolved ({e})"),
            }
            if e.code == 3 {
                Outcome::NotFound
            } else {
                Outcome::Failed
            }
        }
    }
}
