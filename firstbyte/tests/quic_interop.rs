//! The QUIC interop runner's cases that need no ns-3, run with quic-go's interop client
//! (`target/tools/quic-interop-client`, built by `scripts/test` from
//! `scripts/quic-interop/go.mod`) against firstbyte (`http3_hq on`), through a user-space
//! relay that stands in for the runner's link (15 ms each way, 10 Mbit/s, 25 packets of
//! queue; loss, corruption, drops and rebinding per case: `support/udp_relay.rs`).
//!
//! Each case checks what the runner checks, as far as the client's key log and qlog, the
//! relay's view of the server's datagrams and firstbyte's access log show it: the files
//! downloaded are the files served, the number of handshakes, Retry, resumption without a
//! certificate, 0-RTT, the server's stream limit, the amplification limit, rebinding.
//!
//! Files are the runner's sizes except where that would cost much time: `rebind-port` and
//! `rebind-addr` move 2 MB (runner: 10 MB; the relay rebinds at 0.3 s and every 0.7 s, so a
//! 2 MB transfer, at least 1.6 s at 10 Mbit/s, always sees two), `handshakeloss` and
//! `handshakecorruption` make 10 connections (runner: 50), `ipv6` moves 5 KB, 10 KB and 1 MB.
//! The cases that need the runner's ns-3 simulator (blackhole, the ns-3 `longrtt` uses a
//! 750 ms link here instead, `connectionmigration`, `v2`) are not run.
//!
//! The server has `ssl_early_data on` (as interop servers do), so every case also goes
//! through the 0-RTT-ready handshake path, where quic-go's two-packet ClientHello once left
//! hq connections without their ALPN and hung (multiplexing, resumption, zerortt).
//!
//! The client writes to `/downloads` and `/logs` (fixed paths): each run is in a private mount
//! namespace (`unshare -m`) with per-case directories bound there (the two empty mount points
//! are made in `/` when missing), so this needs root. The table of results is written to
//! stderr at the end; a case expected to pass that fails fails the test, and the cases
//! expected to fail are listed with their reason. `QUIC_INTEROP_CASES=a,b` runs only those
//! cases; `QUIC_INTEROP_KEEP=DIR` copies the server's directory (logs, client logs, qlogs)
//! there after each case.
//!
//! One file of a little over 800 lines: the cases, their checks and the runner's reasons read
//! side by side, as in the runner's own `testcases_quic.py`.

mod support;
#[path = "support/udp_relay.rs"]
mod udp_relay;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{certs, Server};
use udp_relay::{Impair, Relay, RelayConf};

const KB: usize = 1024;

/// How long one client run may take (a hang is a failure, not a wait).
const CLIENT_LIMIT: Duration = Duration::from_secs(60);

const CONF: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    log_format interop '$request_uri $status $body_bytes_sent $http3 $ssl_early_data $connection';
    access_log {dir}/access.log interop;
    ssl_session_cache shared:interop:1m;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        listen [::1]:{port0} quic;
        http3_hq on;
        ssl_early_data on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/www;
    }

    server {
        listen 127.0.0.1:{port1} quic;
        http3_hq on;
        quic_retry on;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/www;
    }
    server {
        listen 127.0.0.1:{port2} quic;
        http3_hq on;
        ssl_certificate {certs}/interop-long.crt;
        ssl_certificate_key {certs}/big.test.key;
        root {dir}/www;
    }
}
"#;

/// Which of the server's QUIC ports a case talks to.
#[derive(Clone, Copy, PartialEq)]
enum Port {
    Plain,
    Retry,
    BigChain,
}

/// One case: the runner's name, the client's TESTCASE, its files (sizes), the link, and the
/// checks beyond "every file arrived whole".
struct Case {
    name: &'static str,
    testcase: &'static str,
    sizes: Vec<usize>,
    relay: RelayConf,
    port: Port,
    ipv6: bool,
    /// Expected to fail, and why.
    expect_fail: Option<&'static str>,
    check: fn(&Run) -> Result<(), String>,
}

/// What one client run left.
struct Run {
    /// The client's exit status (None: killed at the limit).
    code: Option<i32>,
    stdout: String,
    files_ok: Result<(), String>,
    nfiles: usize,
    keylog: String,
    /// Each connection's qlog (JSON-SEQ records), in no particular order.
    qlogs: Vec<Vec<serde_json::Value>>,
    /// The access log's lines for this case's files.
    access: Vec<String>,
    relay: std::sync::Arc<udp_relay::Stats>,
}

impl Run {
    /// Handshakes the client completed: one client handshake traffic secret each.
    fn handshakes(&self) -> usize {
        self.keylog
            .lines()
            .filter(|l| l.starts_with("CLIENT_HANDSHAKE_TRAFFIC_SECRET"))
            .count()
    }

    /// The qlog events named `name`, of every connection.
    fn events<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a serde_json::Value> + 'a {
        self.qlogs
            .iter()
            .flatten()
            .filter(move |e| e["name"] == name)
    }

    /// Packets of `kind` the client received (`packet_received`, header's `packet_type`).
    fn received(&self, kind: &str) -> usize {
        self.events("transport:packet_received")
            .filter(|e| e["data"]["header"]["packet_type"] == kind)
            .count()
    }

    fn sent(&self, kind: &str) -> usize {
        self.events("transport:packet_sent")
            .filter(|e| e["data"]["header"]["packet_type"] == kind)
            .count()
    }

    /// Per connection: the CRYPTO bytes the server sent in Handshake packets (the highest
    /// offset + length), where a certificate shows.
    fn handshake_crypto(&self) -> Vec<u64> {
        self.qlogs
            .iter()
            .map(|q| {
                q.iter()
                    .filter(|e| {
                        e["name"] == "transport:packet_received"
                            && e["data"]["header"]["packet_type"] == "handshake"
                    })
                    .flat_map(|e| e["data"]["frames"].as_array().cloned().unwrap_or_default())
                    .filter(|f| f["frame_type"] == "crypto")
                    .map(|f| f["offset"].as_u64().unwrap_or(0) + f["length"].as_u64().unwrap_or(0))
                    .max()
                    .unwrap_or(0)
            })
            .filter(|&n| n > 0)
            .collect()
    }

    /// Whether the run itself succeeded: exit 0, every file whole, every request logged 200.
    fn basics(&self) -> Result<(), String> {
        match self.code {
            Some(0) => {}
            Some(c) => return Err(format!("client exited {c}: {}", self.stdout.trim())),
            None => return Err(format!("client hung (killed after {CLIENT_LIMIT:?})")),
        }
        self.files_ok.clone()?;
        let ok = self
            .access
            .iter()
            .filter(|l| l.split(' ').nth(1) == Some("200"))
            .count();
        if ok < self.nfiles {
            return Err(format!("{ok} of {} requests logged 200", self.nfiles));
        }
        Ok(())
    }
}

fn handshakes(run: &Run, n: usize) -> Result<(), String> {
    match run.handshakes() {
        h if h == n => Ok(()),
        h => Err(format!("expected {n} handshake(s), got {h}")),
    }
}

fn no_retry(run: &Run) -> Result<(), String> {
    match run.received("retry") {
        0 => Ok(()),
        n => Err(format!("{n} Retry packets, none expected")),
    }
}

fn protocol(run: &Run, proto: &str) -> Result<(), String> {
    match run
        .access
        .iter()
        .find(|l| l.split(' ').nth(3) != Some(proto))
    {
        None => Ok(()),
        Some(l) => Err(format!("served as another protocol than {proto}: {l}")),
    }
}

fn check_handshake(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, 1)?;
    no_retry(run)?;
    protocol(run, "hq")
}

fn check_transfer(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, 1)?;
    protocol(run, "hq")
}

fn check_longrtt(run: &Run) -> Result<(), String> {
    check_handshake(run)?;
    // The runner wants the ClientHello sent at least twice (the first PTO fires before the
    // long round trip ends).
    match run.sent("initial") {
        n if n >= 2 => Ok(()),
        n => Err(format!("{n} Initial packets sent, at least 2 expected")),
    }
}

fn check_multiplexing(run: &Run) -> Result<(), String> {
    check_transfer(run)?;
    let limits: Vec<u64> = run
        .events("transport:parameters_set")
        .filter(|e| e["data"]["initiator"] == "remote")
        .filter_map(|e| e["data"]["initial_max_streams_bidi"].as_u64())
        .collect();
    match limits.as_slice() {
        [] => Err("the server's initial_max_streams_bidi not seen".into()),
        l if l.iter().all(|&n| n <= 1000) => Ok(()),
        l => Err(format!("server stream limit over 1000: {l:?}")),
    }
}

fn check_retry(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, 1)?;
    if run.received("retry") == 0 {
        return Err("no Retry packet received".into());
    }
    Ok(())
}

fn check_resumption(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, 2)?;
    // A full handshake carries the certificate (several hundred bytes of CRYPTO in Handshake
    // packets); a resumed one only EncryptedExtensions and Finished.
    let mut c = run.handshake_crypto();
    c.sort_unstable();
    match c.as_slice() {
        [resumed, full] if *resumed < 300 && *full >= 500 => Ok(()),
        other => Err(format!(
            "Handshake CRYPTO bytes per connection {other:?}: expected one full, one resumed"
        )),
    }
}

fn check_zerortt(run: &Run) -> Result<(), String> {
    check_resumption(run)?;
    if run.sent("0RTT") == 0 {
        return Err("the client sent no 0-RTT packets".into());
    }
    if !run.access.iter().any(|l| l.split(' ').nth(4) == Some("1")) {
        return Err("firstbyte logged no request as early data".into());
    }
    Ok(())
}

fn check_http3(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, 1)?;
    protocol(run, "h3")
}

fn check_keyupdate(run: &Run) -> Result<(), String> {
    check_transfer(run)?;
    match run.events("security:key_updated").count() {
        0 => Err("no key update".into()),
        _ => Ok(()),
    }
}

fn check_chacha20(run: &Run) -> Result<(), String> {
    // The client offers TLS_CHACHA20_POLY1305_SHA256 alone: a completed handshake chose it.
    check_transfer(run)
}

fn check_versionnegotiation(run: &Run) -> Result<(), String> {
    // The client succeeds only on the error of a failed negotiation. quic-go v0.65.0's
    // client looks for "No compatible QUIC version found" while its transport now says "no
    // compatible ...": it exits 1 on the very error it wants, so that error is taken too.
    let negotiated = run
        .stdout
        .to_ascii_lowercase()
        .contains("no compatible quic version found");
    match run.code {
        Some(0) => {}
        Some(1) if negotiated => {}
        c => return Err(format!("client exit {c:?}: {}", run.stdout.trim())),
    }
    // What the runner looks for: a Version Negotiation packet (a long header with version 0)
    // from the server.
    let sent_vn = run
        .relay
        .trace
        .lock()
        .unwrap()
        .iter()
        .any(|&(to_server, h, _)| !to_server && h[0] & 0x80 != 0 && h[1..5] == [0; 4]);
    if !sent_vn {
        return Err("no Version Negotiation packet from the server".into());
    }
    Ok(())
}

fn check_multiconnect(run: &Run) -> Result<(), String> {
    run.basics()?;
    handshakes(run, run.nfiles)
}

/// The runner's amplification check on the server's side of the link: until the client's
/// first Handshake packet reaches the server, the server sends at most 3x (4x tolerated) what
/// it received in Initial packets; and it sent a long chain's worth of Handshake CRYPTO.
fn check_amplification(run: &Run) -> Result<(), String> {
    check_transfer(run)?;
    let crypto = run.handshake_crypto().into_iter().max().unwrap_or(0);
    if crypto < 7500 {
        return Err(format!(
            "only {crypto} bytes of Handshake CRYPTO: not the long chain?"
        ));
    }
    let (mut allowed, mut tolerated) = (0i64, 0i64);
    for &(to_server, head, len) in run.relay.trace.lock().unwrap().iter() {
        let first = head[0];
        let long = first & 0x80 != 0;
        let kind = (first >> 4) & 0x3;
        if to_server {
            if long && kind == 2 {
                return Ok(());
            }
            if long && kind == 0 {
                allowed += 3 * len as i64;
                tolerated += 4 * len as i64;
            }
        } else {
            if len as i64 >= tolerated {
                return Err(format!(
                    "a {len}-byte datagram with {tolerated} bytes left at 4x"
                ));
            }
            allowed -= len as i64;
            tolerated -= len as i64;
        }
    }
    let _ = allowed;
    Err("no client Handshake packet in the first datagrams".into())
}

fn check_rebind(run: &Run, addresses: bool) -> Result<(), String> {
    check_transfer(run)?;
    let answered = run.relay.answered.lock().unwrap().clone();
    let ips: std::collections::HashSet<_> = answered.iter().map(|a| a.ip()).collect();
    if answered.len() < 2 {
        return Err(format!("the server answered only {answered:?}"));
    }
    if addresses && ips.len() < 2 {
        return Err(format!("the server answered one address only: {ips:?}"));
    }
    Ok(())
}

fn check_rebind_port(run: &Run) -> Result<(), String> {
    check_rebind(run, false)
}

fn check_rebind_addr(run: &Run) -> Result<(), String> {
    check_rebind(run, true)
}

fn lossy(rate: u32, corrupt: bool) -> RelayConf {
    let i = Impair {
        rate,
        burst: 3,
        corrupt,
        drop_list: Vec::new(),
    };
    RelayConf {
        to_server: i.clone(),
        to_client: i,
        ..RelayConf::runner()
    }
}

fn cases() -> Vec<Case> {
    let case = |name, testcase, sizes: Vec<usize>, check| Case {
        name,
        testcase,
        sizes,
        relay: RelayConf::runner(),
        port: Port::Plain,
        ipv6: false,
        expect_fail: None,
        check,
    };
    const MB: usize = 1024 * KB;
    let mut longrtt = case(
        "longrtt",
        "handshake",
        vec![KB],
        check_longrtt as fn(&Run) -> _,
    );
    longrtt.relay.link.delay = Duration::from_millis(750);
    let mut retry = case("retry", "retry", vec![10 * KB], check_retry);
    retry.port = Port::Retry;
    let mut ecn = case("ecn", "ecn", vec![100 * KB], check_handshake);
    ecn.expect_fail = Some(
        "quic-go's interop client has no ecn case (exits 127), and the user-space relay does not carry ECN marks",
    );
    let mut amplification = case(
        "amplificationlimit",
        "transfer",
        vec![5 * KB],
        check_amplification,
    );
    amplification.port = Port::BigChain;
    amplification.relay.to_server.drop_list = vec![2, 3, 4, 5, 6, 7];
    let mut ipv6 = case(
        "ipv6",
        "transfer",
        vec![5 * KB, 10 * KB, MB],
        check_transfer,
    );
    ipv6.ipv6 = true;
    let mut rebind_port = case(
        "rebind-port",
        "transfer",
        vec![2 * 1024 * KB],
        check_rebind_port,
    );
    rebind_port.relay.rebind = Some((Duration::from_millis(300), Duration::from_millis(700)));
    let mut rebind_addr = case(
        "rebind-addr",
        "transfer",
        vec![2 * 1024 * KB],
        check_rebind_addr,
    );
    rebind_addr.relay.rebind = Some((Duration::from_millis(300), Duration::from_millis(700)));
    rebind_addr.relay.rebind_addr = true;
    let mut handshakeloss = case(
        "handshakeloss",
        "multiconnect",
        vec![KB; 10],
        check_multiconnect,
    );
    handshakeloss.relay = lossy(30, false);
    let mut transferloss = case("transferloss", "transfer", vec![2 * MB], check_transfer);
    transferloss.relay = lossy(2, false);
    let mut handshakecorruption = case(
        "handshakecorruption",
        "multiconnect",
        vec![KB; 10],
        check_multiconnect,
    );
    handshakecorruption.relay = lossy(30, true);
    let mut transfercorruption = case(
        "transfercorruption",
        "transfer",
        vec![2 * MB],
        check_transfer,
    );
    transfercorruption.relay = lossy(2, true);
    vec![
        case("handshake", "handshake", vec![KB], check_handshake),
        case(
            "transfer",
            "transfer",
            vec![2 * MB, 3 * MB, 5 * MB],
            check_transfer,
        ),
        longrtt,
        case("chacha20", "chacha20", vec![3 * MB], check_chacha20),
        case(
            "multiplexing",
            "transfer",
            vec![32; 1999],
            check_multiplexing,
        ),
        retry,
        case(
            "resumption",
            "resumption",
            vec![5 * KB, 10 * KB],
            check_resumption,
        ),
        case("zerortt", "zerortt", vec![32; 41], check_zerortt),
        case(
            "http3",
            "http3",
            vec![5 * KB, 10 * KB, 500 * KB],
            check_http3,
        ),
        case("keyupdate", "keyupdate", vec![3 * MB], check_keyupdate),
        ecn,
        amplification,
        ipv6,
        rebind_port,
        rebind_addr,
        case(
            "versionnegotiation",
            "versionnegotiation",
            vec![],
            check_versionnegotiation,
        ),
        handshakeloss,
        transferloss,
        handshakecorruption,
        transfercorruption,
    ]
}

/// Deterministic bytes for a file.
fn contents(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn client_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/quic-interop-client")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Runs `case` against the server; `www` is the server's root.
fn run_case(case: &Case, server: &Server, ports: &[u16], www: &Path, seq: usize) -> Run {
    let dir = server.dir.join("runs").join(case.name);
    let (downloads, logs) = (dir.join("downloads"), dir.join("logs"));
    std::fs::create_dir_all(&downloads).expect("mkdir downloads");
    std::fs::create_dir_all(&logs).expect("mkdir logs");
    let mut names = Vec::new();
    for (i, &size) in case.sizes.iter().enumerate() {
        let name = format!("{}-{i}.bin", case.name);
        std::fs::write(www.join(&name), contents((seq * 1000 + i) as u64, size)).expect("write");
        names.push(name);
    }
    let port = match case.port {
        Port::Plain => ports[0],
        Port::Retry => ports[1],
        Port::BigChain => ports[2],
    };
    let ip: std::net::IpAddr = if case.ipv6 {
        "::1".parse().unwrap()
    } else {
        "127.0.0.1".parse().unwrap()
    };
    let relay = Relay::start(
        SocketAddr::new(ip, port),
        case.relay.clone(),
        seq as u64 + 1,
    );
    let host = match relay.addr {
        SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
        SocketAddr::V4(a) => a.to_string(),
    };
    let mut urls: Vec<String> = names
        .iter()
        .map(|n| format!("https://{host}/{n}"))
        .collect();
    if urls.is_empty() {
        urls.push(format!("https://{host}/"));
    }
    let script = format!(
        "mkdir -p /downloads /logs && mount --bind '{}' /downloads && mount --bind '{}' /logs && exec '{}' \"$@\"",
        downloads.display(),
        logs.display(),
        client_binary().display()
    );
    let mut child = Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "client",
        ])
        .args(&urls)
        .env("TESTCASE", case.testcase)
        .env("REQUESTS", urls.join(" "))
        .env("SSLKEYLOGFILE", "/logs/keys.log")
        .env("QLOGDIR", "/logs/qlog")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start unshare");
    support::reap_at_exit(child.id());
    let deadline = Instant::now() + CLIENT_LIMIT;
    let code = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st.code(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stdout);
    }
    let files_ok = names.iter().try_for_each(|n| {
        let got = std::fs::read(downloads.join(n)).map_err(|e| format!("{n}: {e}"))?;
        let want = std::fs::read(www.join(n)).map_err(|e| format!("{n}: {e}"))?;
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "{n}: {} bytes, {} expected or different",
                got.len(),
                want.len()
            ))
        }
    });
    let keylog = std::fs::read_to_string(logs.join("keys.log")).unwrap_or_default();
    let qlogs = std::fs::read_dir(logs.join("qlog"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .split('\u{1e}')
                        .filter_map(|r| serde_json::from_str(r.trim()).ok())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    // A request is logged when its response is done on the server's side, which can be just
    // after the client has it all: wait for the lines (a bound for liveness only).
    let prefix = format!("/{}-", case.name);
    let logged = || -> Vec<String> {
        std::fs::read_to_string(server.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(String::from)
            .collect()
    };
    let until = Instant::now() + Duration::from_secs(10);
    let mut access = logged();
    while code == Some(0) && access.len() < names.len() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        access = logged();
    }
    let stats = relay.stats.clone();
    drop(relay);
    // For a look afterwards (the server's directory goes when the test ends).
    if let Ok(keep) = std::env::var("QUIC_INTEROP_KEEP") {
        let _ = Command::new("cp")
            .args(["-r", &server.dir.display().to_string(), &keep])
            .status();
    }
    Run {
        code,
        stdout,
        files_ok,
        nfiles: names.len(),
        keylog,
        qlogs,
        access,
        relay: stats,
    }
}

#[test]
fn quic_interop_runner_cases() {
    assert!(
        is_root(),
        "the QUIC interop cases need root: quic-go's interop client writes to /downloads and \
         /logs, bound per case in a private mount namespace (unshare -m); run as root (as CI does)"
    );
    assert!(
        client_binary().exists(),
        "{} is missing: scripts/test builds it (cd scripts/quic-interop && go build -o \
         ../../target/tools/quic-interop-client github.com/quic-go/quic-go/interop/client)",
        client_binary().display()
    );
    // The runner's amplificationlimit server sends a chain of 9 certificates (over 7,500
    // bytes of Handshake CRYPTO): big.test's chain with its three RSA-4096 intermediates
    // sent twice is of that size (the client verifies nothing).
    let dir = &certs().dir;
    let mut long = std::fs::read(dir.join("big.test.crt")).expect("big.test chain");
    for i in [3, 2, 1] {
        long.extend(std::fs::read(dir.join(format!("int{i}.crt"))).expect("intermediate"));
    }
    std::fs::write(dir.join("interop-long.crt"), long).expect("write the long chain");
    let (server, ports) = Server::start("quic-interop", CONF, 3);
    let www = server.dir.join("www");
    std::fs::create_dir_all(&www).expect("mkdir www");
    let only = std::env::var("QUIC_INTEROP_CASES").ok();
    let started = Instant::now();
    let mut rows = Vec::new();
    for (seq, case) in cases().iter().enumerate() {
        if let Some(only) = &only {
            if !only.split(',').any(|c| c == case.name) {
                continue;
            }
        }
        let t = Instant::now();
        let run = run_case(case, &server, &ports, &www, seq);
        let result = (case.check)(&run);
        let took = t.elapsed();
        let s = &run.relay;
        let link = format!(
            "relay: {} up, {} down, {} queue drops, {} impaired, {} rebinds",
            s.to_server.load(std::sync::atomic::Ordering::Relaxed),
            s.to_client.load(std::sync::atomic::Ordering::Relaxed),
            s.queue_drops.load(std::sync::atomic::Ordering::Relaxed),
            s.impaired.load(std::sync::atomic::Ordering::Relaxed),
            s.rebinds.load(std::sync::atomic::Ordering::Relaxed),
        );
        rows.push((case.name, case.expect_fail, result, took, link));
    }
    let mut failed = Vec::new();
    // Written to stderr itself, past the test harness's capture: the table shows in every run.
    let mut table = format!(
        "\nQUIC interop runner cases (quic-go client -> firstbyte), {:.1?} in all:\n{:<20} {:<14} {:>7}  detail\n",
        started.elapsed(),
        "case",
        "result",
        "time"
    );
    for (name, expect_fail, result, took, link) in &rows {
        let (verdict, detail) = match (result, expect_fail) {
            (Ok(()), None) => ("pass", link.clone()),
            (Ok(()), Some(why)) => (
                "PASS(unexp.)",
                format!("expected to fail ({why}); passes now: flip it"),
            ),
            (Err(e), None) => {
                failed.push(*name);
                ("FAIL", format!("{e}; {link}"))
            }
            (Err(e), Some(why)) => ("expected-fail", format!("{why} — {e}")),
        };
        table += &format!(
            "{name:<20} {verdict:<14} {:>6.1}s  {detail}\n",
            took.as_secs_f64()
        );
    }
    let passed = rows.iter().filter(|r| r.2.is_ok()).count();
    let expected = rows.iter().filter(|r| r.1.is_some()).count();
    table += &format!(
        "interop: {passed} of {} cases pass; {expected} expected to fail\n",
        rows.len()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), table.as_bytes());
    assert!(
        failed.is_empty(),
        "interop cases failed: {failed:?}\n{}",
        server.stderr_text()
    );
}
