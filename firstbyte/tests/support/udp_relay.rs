//! A user-space UDP relay that stands in for the QUIC interop runner's simulated link (ns-3's
//! point-to-point link; no netem on this kernel): each direction delays packets, sends them
//! at a fixed rate through a tail-drop queue of so many packets, and may drop or corrupt some
//! (in bursts, as the runner's `drop-rate`/`corrupt-rate`, or by index, as `droplist`). It
//! can also rebind the client's side: every so often the relay's socket towards the server
//! is replaced by one on a new port (or a new loopback address), as a NAT rebinding.
//!
//! The decisions ([`Queue`], [`Impair`]) are plain code over sizes and times; the relay around
//! them is a tokio runtime on its own thread. Clients talk to [`Relay::addr`]; every client
//! address gets its own socket towards the server (a NAT mapping).
#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

/// One direction's link: `delay` one way, `rate` bits per second, `queue` packets at most
/// waiting to be sent.
#[derive(Debug, Clone, Copy)]
pub struct LinkConf {
    pub delay: Duration,
    pub rate: u64,
    pub queue: usize,
}

/// The runner's link: 15 ms each way, 10 Mbit/s, 25 packets of queue.
pub const RUNNER_LINK: LinkConf = LinkConf {
    delay: Duration::from_millis(15),
    rate: 10_000_000,
    queue: 25,
};

/// A rate-limited tail-drop queue: when each packet leaves the link, or that it is dropped.
#[derive(Debug)]
pub struct Queue {
    conf: LinkConf,
    /// When each queued packet's transmission ends (non-decreasing).
    ends: VecDeque<Instant>,
}

impl Queue {
    pub fn new(conf: LinkConf) -> Queue {
        Queue {
            conf,
            ends: VecDeque::new(),
        }
    }

    /// A packet of `len` bytes arriving `now`: the time it reaches the other side, or `None`
    /// (the queue is full).
    pub fn admit(&mut self, now: Instant, len: usize) -> Option<Instant> {
        while self.ends.front().is_some_and(|&e| e <= now) {
            self.ends.pop_front();
        }
        if self.ends.len() >= self.conf.queue {
            return None;
        }
        let start = self.ends.back().copied().unwrap_or(now).max(now);
        let bits = len as u64 * 8;
        let send = Duration::from_nanos(bits * 1_000_000_000 / self.conf.rate.max(1));
        let end = start + send;
        self.ends.push_back(end);
        Some(end + self.conf.delay)
    }
}

/// What happens to packets besides the link: the runner's `drop-rate`/`corrupt-rate`
/// (`rate` percent of packets, in bursts of up to `burst`) and `droplist` (1-based indexes).
#[derive(Debug, Clone, Default)]
pub struct Impair {
    pub rate: u32,
    pub burst: u32,
    pub corrupt: bool,
    pub drop_list: Vec<u64>,
}

/// What becomes of one packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    Pass,
    Drop,
    /// Flip the byte at this index (mod the packet's length).
    Corrupt(usize),
}

/// One direction's running impairment: a small xorshift generator and the burst in course.
#[derive(Debug)]
pub struct Impairing {
    conf: Impair,
    rng: u64,
    left: u32,
    count: u64,
}

impl Impairing {
    pub fn new(conf: Impair, seed: u64) -> Impairing {
        Impairing {
            conf,
            rng: seed | 1,
            left: 0,
            count: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// The fate of the next packet.
    pub fn fate(&mut self) -> Fate {
        self.count += 1;
        let hit = if self.conf.drop_list.contains(&self.count) {
            true
        } else if self.left > 0 {
            self.left -= 1;
            true
        } else if self.conf.rate > 0 {
            // Bursts of 1..=burst packets (mean (1 + burst) / 2), started so that `rate`
            // percent of packets are hit on average.
            let burst = u64::from(self.conf.burst.max(1));
            let start = self.next() % (100 * (1 + burst)) < 2 * u64::from(self.conf.rate);
            if start {
                self.left = (self.next() % burst) as u32;
            }
            start
        } else {
            false
        };
        match (hit, self.conf.corrupt) {
            (false, _) => Fate::Pass,
            (true, false) => Fate::Drop,
            (true, true) => Fate::Corrupt(self.next() as usize),
        }
    }
}

/// Both directions' settings and the rebinding.
#[derive(Debug, Clone)]
pub struct RelayConf {
    pub link: LinkConf,
    pub to_server: Impair,
    pub to_client: Impair,
    /// Replace the sockets towards the server first after this, then every `rebind_every`.
    pub rebind: Option<(Duration, Duration)>,
    /// With `rebind`: a new loopback address each time too (127.0.0.2, .3, ...).
    pub rebind_addr: bool,
}

impl RelayConf {
    pub fn runner() -> RelayConf {
        RelayConf {
            link: RUNNER_LINK,
            to_server: Impair::default(),
            to_client: Impair::default(),
            rebind: None,
            rebind_addr: false,
        }
    }
}

/// Counters of a relay's run.
#[derive(Debug, Default)]
pub struct Stats {
    pub to_server: AtomicU64,
    pub to_client: AtomicU64,
    pub queue_drops: AtomicU64,
    pub impaired: AtomicU64,
    pub rebinds: AtomicU64,
    /// The relay's addresses towards the server that the server answered.
    pub answered: Mutex<HashSet<SocketAddr>>,
    /// The first datagrams as the server sees them: (towards the server, first 5 bytes — the
    /// header's form and type bits and a long header's version —, length).
    pub trace: Mutex<Vec<(bool, [u8; 5], usize)>>,
}

/// Datagrams kept in [`Stats::trace`].
const TRACE: usize = 256;

impl Stats {
    fn record(&self, to_server: bool, bytes: &[u8]) {
        let mut t = self.trace.lock().unwrap();
        if t.len() < TRACE {
            let mut head = [0u8; 5];
            let n = bytes.len().min(5);
            head[..n].copy_from_slice(&bytes[..n]);
            t.push((to_server, head, bytes.len()));
        }
    }
}

/// A running relay; stops when dropped.
pub struct Relay {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Mapping = Arc<Mutex<HashMap<SocketAddr, (Arc<UdpSocket>, tokio::task::AbortHandle)>>>;

impl Relay {
    /// Starts a relay towards `server` (its own side on `server`'s loopback, port chosen).
    pub fn start(server: SocketAddr, conf: RelayConf, seed: u64) -> Relay {
        let stats = Arc::new(Stats::default());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let s = stats.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("relay runtime");
            rt.block_on(async move {
                let front = UdpSocket::bind(SocketAddr::new(server.ip(), 0))
                    .await
                    .expect("relay bind");
                let _ = addr_tx.send(front.local_addr().expect("relay addr"));
                tokio::select! {
                    _ = run(Arc::new(front), server, conf, seed, s) => {}
                    _ = stopped => {}
                }
            });
        });
        let addr = addr_rx.recv().expect("relay started");
        Relay {
            addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// A packet on its way: when it arrives, its bytes, the client it belongs to.
type Held = (Instant, Vec<u8>, SocketAddr);

async fn run(
    front: Arc<UdpSocket>,
    server: SocketAddr,
    conf: RelayConf,
    seed: u64,
    stats: Arc<Stats>,
) {
    let map: Mapping = Arc::default();
    let (up_tx, mut up_rx) = tokio::sync::mpsc::unbounded_channel::<Held>();
    let (down_tx, mut down_rx) = tokio::sync::mpsc::unbounded_channel::<Held>();
    let down = Arc::new(Mutex::new((
        Queue::new(conf.link),
        Impairing::new(conf.to_client.clone(), seed ^ 0x5eed),
    )));
    let next_ip = Arc::new(AtomicU64::new(2));
    // Towards the server: at the due time, through the client's mapping (made on first use).
    let deliver_up = {
        let (map, down, down_tx, stats) =
            (map.clone(), down.clone(), down_tx.clone(), stats.clone());
        async move {
            while let Some((due, bytes, client)) = up_rx.recv().await {
                tokio::time::sleep_until(due).await;
                let sock = {
                    let found = map.lock().unwrap().get(&client).map(|m| m.0.clone());
                    match found {
                        Some(s) => s,
                        None => {
                            let bind = SocketAddr::new(server.ip(), 0);
                            let Ok(s) = UdpSocket::bind(bind).await else {
                                continue;
                            };
                            let s = Arc::new(s);
                            let h = tokio::spawn(from_server(
                                s.clone(),
                                client,
                                down.clone(),
                                down_tx.clone(),
                                stats.clone(),
                            ));
                            map.lock()
                                .unwrap()
                                .insert(client, (s.clone(), h.abort_handle()));
                            s
                        }
                    }
                };
                stats.record(true, &bytes);
                let _ = sock.send_to(&bytes, server).await;
            }
        }
    };
    // Towards the client.
    let deliver_down = {
        let front = front.clone();
        async move {
            while let Some((due, bytes, client)) = down_rx.recv().await {
                tokio::time::sleep_until(due).await;
                let _ = front.send_to(&bytes, client).await;
            }
        }
    };
    // NAT rebinding: every mapping gets a new socket (new port; new address with rebind_addr).
    let rebind = {
        let (map, down, down_tx, stats, conf) = (
            map.clone(),
            down.clone(),
            down_tx.clone(),
            stats.clone(),
            conf.clone(),
        );
        async move {
            let Some((first, every)) = conf.rebind else {
                return std::future::pending::<()>().await;
            };
            tokio::time::sleep(first).await;
            loop {
                let ip = match (conf.rebind_addr, server.ip()) {
                    (true, IpAddr::V4(_)) => {
                        let n = next_ip.fetch_add(1, Ordering::Relaxed) as u8;
                        IpAddr::from([127, 0, 0, n.max(2)])
                    }
                    (_, ip) => ip,
                };
                let clients: Vec<SocketAddr> = map.lock().unwrap().keys().copied().collect();
                for client in clients {
                    let Ok(s) = UdpSocket::bind(SocketAddr::new(ip, 0)).await else {
                        continue;
                    };
                    let s = Arc::new(s);
                    let h = tokio::spawn(from_server(
                        s.clone(),
                        client,
                        down.clone(),
                        down_tx.clone(),
                        stats.clone(),
                    ));
                    if let Some((_, old)) =
                        map.lock().unwrap().insert(client, (s, h.abort_handle()))
                    {
                        old.abort();
                    }
                    stats.rebinds.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(every).await;
            }
        }
    };
    // From clients: the link towards the server.
    let from_clients = {
        let stats = stats.clone();
        let mut up = (
            Queue::new(conf.link),
            Impairing::new(conf.to_server.clone(), seed),
        );
        async move {
            let mut buf = vec![0u8; 65536];
            loop {
                let Ok((n, client)) = front.recv_from(&mut buf).await else {
                    return;
                };
                let mut bytes = buf[..n].to_vec();
                match up.1.fate() {
                    Fate::Pass => {}
                    Fate::Drop => {
                        stats.impaired.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Fate::Corrupt(i) => {
                        stats.impaired.fetch_add(1, Ordering::Relaxed);
                        bytes[i % n.max(1)] ^= 0x5a;
                    }
                }
                match up.0.admit(Instant::now(), n) {
                    Some(due) => {
                        stats.to_server.fetch_add(1, Ordering::Relaxed);
                        let _ = up_tx.send((due, bytes, client));
                    }
                    None => {
                        stats.queue_drops.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    };
    tokio::join!(deliver_up, deliver_down, rebind, from_clients);
}

/// Reads the server's packets on one mapping's socket into the link towards the client.
async fn from_server(
    sock: Arc<UdpSocket>,
    client: SocketAddr,
    down: Arc<Mutex<(Queue, Impairing)>>,
    down_tx: tokio::sync::mpsc::UnboundedSender<Held>,
    stats: Arc<Stats>,
) {
    let mut buf = vec![0u8; 65536];
    let mut seen = false;
    loop {
        let Ok((n, _)) = sock.recv_from(&mut buf).await else {
            return;
        };
        if !seen {
            seen = true;
            if let Ok(a) = sock.local_addr() {
                stats.answered.lock().unwrap().insert(a);
            }
        }
        let mut bytes = buf[..n].to_vec();
        stats.record(false, &bytes);
        let due = {
            let mut d = down.lock().unwrap();
            match d.1.fate() {
                Fate::Pass => {}
                Fate::Drop => {
                    stats.impaired.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Fate::Corrupt(i) => {
                    stats.impaired.fetch_add(1, Ordering::Relaxed);
                    bytes[i % n.max(1)] ^= 0x5a;
                }
            }
            d.0.admit(Instant::now(), n)
        };
        match due {
            Some(due) => {
                stats.to_client.fetch_add(1, Ordering::Relaxed);
                let _ = down_tx.send((due, bytes, client));
            }
            None => {
                stats.queue_drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_paces_and_drops_at_its_length() {
        let start = Instant::now();
        let mut q = Queue::new(LinkConf {
            delay: Duration::from_millis(15),
            rate: 8_000_000,
            queue: 2,
        });
        // 1,000 bytes at 8 Mbit/s: 1 ms each.
        assert_eq!(
            q.admit(start, 1000),
            Some(start + Duration::from_millis(16))
        );
        assert_eq!(
            q.admit(start, 1000),
            Some(start + Duration::from_millis(17))
        );
        assert_eq!(q.admit(start, 1000), None);
        let later = start + Duration::from_millis(1);
        assert_eq!(
            q.admit(later, 1000),
            Some(start + Duration::from_millis(18))
        );
    }

    #[test]
    fn impairments_hit_about_their_rate_and_the_list() {
        let mut i = Impairing::new(
            Impair {
                rate: 30,
                burst: 3,
                ..Impair::default()
            },
            7,
        );
        let hits = (0..10_000).filter(|_| i.fate() != Fate::Pass).count();
        assert!((2_500..3_500).contains(&hits), "{hits}");
        let mut l = Impairing::new(
            Impair {
                drop_list: vec![2, 3],
                ..Impair::default()
            },
            1,
        );
        let f: Vec<Fate> = (0..4).map(|_| l.fate()).collect();
        assert_eq!(f, [Fate::Pass, Fate::Drop, Fate::Drop, Fate::Pass]);
    }
}
