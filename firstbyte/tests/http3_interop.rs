//! HTTP/3 with clients and links nobody here wrote: headless Chromium loads the
//! connection-info page over QUIC and sees `h3`; the page's JSON reports the QUIC transport
//! (and 0-RTT, with aioquic resuming); a 1 MB download survives 5% loss and reordering per
//! direction through `firstbyte-netem`; and the server's first flight fits QUIC's
//! anti-amplification limit (3× what the client sent) with the built-in certificate and
//! two-certificate ECDSA and RSA chains, measured by a UDP relay that holds the client's second
//! flight.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{certs, AnyCert, Server};

/// SHA-256 of `b`, hex.
fn sha256(b: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b)
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Runs `sh -ec script` in `dir`; panics with its stderr on failure.
fn sh(script: &str, dir: &Path) -> String {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Python venv with aioquic that `scripts/test` makes (`target/tools/aioquic`).
fn aioquic_python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/aioquic/bin/python");
    assert!(
        p.exists(),
        "{} is missing: bash scripts/test installs aioquic there",
        p.display()
    );
    p
}

const H3_GET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/h3-get.py");

// ---------------------------------------------------------------------------------------
// Chromium

/// The connection-info page on TCP and QUIC, IPv4 and IPv6 (Chromium resolves `localhost`
/// to `::1` first).
const INFO_CONF: &str = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log {dir}/access.log;
    ssl_session_cache shared:h3i:1m;
    ssl_early_data on;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        listen [::1]:{port0} ssl;
        listen [::1]:{port0} quic;
        server_name localhost a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        location / { connection_info; }
    }
}
"#;

/// The live processes (not zombies) of process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2] == pgid.to_string() {
            found.push(pid);
        }
    }
    found
}

/// Runs headless Chromium in a process group of its own with `args` and returns what it
/// printed; the whole group is killed afterwards and checked gone. A browser that has not
/// exited after a minute (headless Chromium now and then never leaves `--dump-dom` on a
/// loaded machine, whatever the page) is run once more with a fresh profile; a second
/// timeout, or any failure, fails the test.
fn chromium(args: &[String], profile: &Path) -> String {
    if let Some(out) = chromium_once(args, profile) {
        return out;
    }
    let again = profile.with_extension("retry");
    chromium_once(args, &again).expect("chromium did not exit, twice")
}

/// One run of [`chromium`]: `None` when the browser did not exit in time.
fn chromium_once(args: &[String], profile: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let bin = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| {
            Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium is missing: bash scripts/test installs it (Debian package chromium)");
    let mut cmd = Command::new(bin);
    cmd.arg("--headless=new")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
        ]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Chromium's sandbox refuses to run as root.
        cmd.arg("--no-sandbox");
    }
    let mut child = cmd
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let pgid = child.id() as i32;
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // Generous: Chromium starts slowly on a loaded machine; a load normally takes 1-3 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever is left of the browser (zygotes, utility processes, crashpad) goes with it.
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
    let gone = Instant::now() + Duration::from_secs(10);
    while !group_members(pgid).is_empty() {
        assert!(
            Instant::now() < gone,
            "chromium processes survive: {:?}",
            group_members(pgid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let status = status?;
    assert!(status.success(), "chromium {status:?}: {stderr}");
    Some(stdout)
}

/// base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate, as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it.
fn spki_hash(cert: &Path) -> String {
    sh(
        &format!(
            "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | openssl base64 -A",
            cert.display()
        ),
        Path::new("/"),
    )
    .trim()
    .to_string()
}

/// A real browser: headless Chromium, forced onto QUIC for the origin, loads the
/// connection-info page, and the page says the connection is HTTP/3 over QUIC version 1.
#[test]
fn chromium_loads_the_connection_info_page_over_http3() {
    let (server, ports) = Server::start("h3i-chromium", INFO_CONF, 1);
    let port = ports[0];
    let profile = server.dir.join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let dom = chromium(
        &[
            format!("--origin-to-force-quic-on=localhost:{port}"),
            format!(
                "--ignore-certificate-errors-spki-list={}",
                spki_hash(&certs().cert("a.test"))
            ),
            "--dump-dom".into(),
            format!("https://localhost:{port}/"),
        ],
        &profile,
    );
    for want in [
        "<th>ALPN</th><td>h3</td>",
        "<th>HTTP</th><td>HTTP/3.0</td>",
        "<th>QUIC version</th><td>1 (RFC 9000)</td>",
        "<th>0-RTT</th><td>not used</td>",
    ] {
        assert!(
            dom.contains(want),
            "{want} not in the page Chromium loaded:\n{dom}\n{}",
            server.stderr_text()
        );
    }
    let log = std::fs::read_to_string(server.dir.join("access.log")).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("\"GET / HTTP/3.0\" 200") && l.contains("HeadlessChrome")),
        "access log: {log}"
    );
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// The page's JSON carries the QUIC transport's facts over HTTP/3, `null` over TCP; a
/// resumed aioquic connection whose request rode in 0-RTT is reported as such.
#[test]
fn connection_info_json_reports_quic_facts_and_0rtt() {
    let (server, ports) = Server::start("h3i-json", INFO_CONF, 1);
    let port = ports[0];
    let session = server.dir.join("session.bin");
    let url = format!("https://a.test:{port}/?format=json");
    let get = || {
        let out = Command::new(aioquic_python())
            .arg(H3_GET)
            .args(["--ca", certs().ca().to_str().unwrap()])
            .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
            .args(["--session-file", session.to_str().unwrap(), "--body", &url])
            .output()
            .expect("run aioquic");
        assert!(
            out.status.success(),
            "aioquic: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            server.stderr_text()
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let start = text.find('{').expect("JSON body");
        let end = text.rfind('}').expect("JSON body");
        let json: serde_json::Value = serde_json::from_str(&text[start..=end]).expect("JSON");
        (text, json)
    };
    // Cold: a full handshake, no early data.
    let (text, j) = get();
    assert!(text.contains("early_data=no"), "{text}");
    assert_eq!(j["protocol"], "HTTP/3.0", "{j}");
    assert_eq!(j["alpn"], "h3", "{j}");
    let q = &j["quic"];
    assert_eq!(q["version"], 1, "{j}");
    assert!(q["rtt_us"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["rtt_us"], q["rtt_us"], "{j}");
    // firstbyte starts QUIC at 32 packets (38,400 bytes; quinn's default is 12,000), and
    // the window only grows before the first loss.
    assert!(q["cwnd_bytes"].as_u64().unwrap() >= 38_400, "{j}");
    assert!(q["sent_packets"].as_u64().unwrap() > 0, "{j}");
    assert!(q["udp_rx_bytes"].as_u64().unwrap() >= 1200, "{j}");
    assert!(q["lost_packets"].is_u64(), "{j}");
    assert_eq!(q["zero_rtt"], false, "{j}");
    assert_eq!(q["congestion"], "cubic", "{j}");
    // Resumed with the ticket: the GET goes in 0-RTT and the page says so.
    let (text, j) = get();
    assert!(text.contains("early_data=yes"), "{text}");
    assert_eq!(j["quic"]["zero_rtt"], true, "{j}");
    // `tcp_congestion bbr` gives new QUIC connections BBR (after a reload).
    let conf = std::fs::read_to_string(&server.conf).unwrap();
    std::fs::write(
        &server.conf,
        conf.replace(
            "ssl_early_data on;",
            "ssl_early_data on;\n    tcp_congestion bbr;",
        ),
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut j = get().1;
    while j["quic"]["congestion"] != "bbr" && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        j = get().1;
    }
    assert_eq!(j["quic"]["congestion"], "bbr", "{j}");
    // Over TCP the same page has no QUIC facts.
    let out = support::curl(&[
        "--cacert",
        certs().ca().to_str().unwrap(),
        "--resolve",
        &format!("a.test:{port}:127.0.0.1"),
        &url,
    ]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON over TCP");
    assert!(j["quic"].is_null(), "{j}");
    assert_ne!(j["protocol"], "HTTP/3.0", "{j}");
    let dir = server.dir.clone();
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------------------------------
// Loss and reordering

/// firstbyte-netem, built beside the server binary (`cargo build` of the workspace).
fn netem_bin() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_firstbyte")).with_file_name("firstbyte-netem");
    assert!(
        p.exists(),
        "{} is missing: build the workspace (cargo build -p firstbyte-netem)",
        p.display()
    );
    p
}

/// A 1 MB download over HTTP/3 (aioquic) through an emulated link that drops 5% of the
/// packets in each direction and reorders them (jitter with `--reorder`): the body arrives
/// byte for byte, and the link did drop packets both ways.
#[test]
fn a_1mb_http3_download_survives_5_percent_loss_and_reordering() {
    let dir = support::tempdir("h3i-netem");
    std::fs::create_dir_all(dir.join("html")).unwrap();
    let big: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.join("html/big.bin"), &big).unwrap();
    // The server namespace's address is known only inside it: listen on the wildcard.
    let conf = support::render(
        r#"
error_log {dir}/error.log info;
pid {dir}/firstbyte.pid;
events {}
http {
    access_log {dir}/access.log;
    server {
        listen 8443 ssl;
        listen 8443 quic;
        server_name a.test;
        ssl_certificate {certs}/a.test.crt;
        ssl_certificate_key {certs}/a.test.key;
        root {dir}/html;
    }
}
"#,
        &dir,
        &[],
    );
    std::fs::write(dir.join("firstbyte.conf"), conf).unwrap();
    let stats = dir.join("netem.json");
    let server = format!(
        "exec '{}' -c '{}' -g 'daemon off;'",
        support::bin().display(),
        dir.join("firstbyte.conf").display()
    );
    let client = format!(
        "exec '{}' '{H3_GET}' --ca '{}' --resolve a.test:8443:$FB_SERVER_ADDR https://a.test:8443/big.bin",
        aioquic_python().display(),
        certs().ca().display()
    );
    let out = Command::new(netem_bin())
        .args(["--delay", "10ms", "--jitter", "4ms", "--reorder"])
        .args(["--loss", "5%", "--seed", "11"])
        .args(["--stats-json", stats.to_str().unwrap()])
        .args(["--server", &server, "--wait-port", "8443"])
        .args(["--", "sh", "-c", &client])
        .output()
        .expect("run firstbyte-netem");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "netem/aioquic failed ({}): {err}\nserver log: {}",
        out.status,
        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The emulator's counters (with --nocapture).
    eprintln!("{err}");
    assert_eq!(
        stdout.lines().next().unwrap_or(""),
        format!("200 {} {} alt-svc=", big.len(), sha256(&big)),
        "{stdout}\n{err}"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("netem stats")).unwrap();
    for dir_ in ["client_to_server", "server_to_client"] {
        assert!(
            s[dir_]["dropped_loss"].as_u64().unwrap_or(0) > 0,
            "no loss {dir_}: {s}"
        );
    }
    // Over 1 MB at 5% loss, dozens of the server's packets were lost and sent again.
    assert!(
        s["server_to_client"]["dropped_loss"].as_u64().unwrap() >= 20,
        "{s}"
    );
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    assert!(
        log.contains(&format!("\"GET /big.bin HTTP/3.0\" 200 {}", big.len())),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// Anti-amplification

/// What a relay between a QUIC client and the server saw of a cold handshake.
#[derive(Debug, Default, Clone)]
struct Flight {
    /// The client's datagrams before the server's first answer (its first flight).
    client: Vec<usize>,
    /// The server's datagrams before the client's second flight reached it.
    server: Vec<usize>,
}

impl Flight {
    fn client_bytes(&self) -> usize {
        self.client.iter().sum()
    }
    fn server_bytes(&self) -> usize {
        self.server.iter().sum()
    }
}

/// A UDP relay in front of `server`: it forwards the client's first flight, then every
/// server datagram, but holds every later client datagram until `release` is notified — so
/// the server never hears the client's second flight, and what it sends meanwhile is
/// bounded by the amplification limit alone.
async fn relay(
    server: SocketAddr,
    tally: Arc<Mutex<Flight>>,
    release: Arc<tokio::sync::Notify>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let front = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let back = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    back.connect(server).await.unwrap();
    let addr = front.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut client: Option<SocketAddr> = None;
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut holding = true;
        let mut answered = false;
        let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
        let released = release.notified();
        tokio::pin!(released);
        loop {
            tokio::select! {
                r = front.recv_from(&mut a) => {
                    let Ok((n, from)) = r else { return };
                    client = Some(from);
                    if !answered {
                        tally.lock().unwrap().client.push(n);
                        let _ = back.send(&a[..n]).await;
                    } else if holding {
                        held.push(a[..n].to_vec());
                    } else {
                        let _ = back.send(&a[..n]).await;
                    }
                }
                r = back.recv(&mut b) => {
                    let Ok(n) = r else { return };
                    answered = true;
                    if holding {
                        tally.lock().unwrap().server.push(n);
                    }
                    if let Some(c) = client {
                        let _ = front.send_to(&b[..n], c).await;
                    }
                }
                _ = &mut released, if holding => {
                    holding = false;
                    for d in held.drain(..) {
                        let _ = back.send(&d).await;
                    }
                }
            }
        }
    });
    (addr, task)
}

/// A quinn client; `x25519_only` offers only X25519 (a ClientHello in one 1200-byte
/// datagram), else X25519MLKEM768 first, as Chromium (two datagrams: the hybrid key share
/// alone is 1,216 bytes).
fn amp_client(x25519_only: bool) -> quinn::Endpoint {
    amp_client_with(x25519_only, true)
}

/// [`amp_client`], with TLS session resumption on or off (off: every handshake sends the
/// whole certificate chain).
fn amp_client_with(x25519_only: bool, resume: bool) -> quinn::Endpoint {
    amp_client_offering(x25519_only, resume, &[])
}

/// [`amp_client_with`], offering `decompressors` in `compress_certificate` (RFC 8879; none:
/// no offer, the chain comes whole).
fn amp_client_offering(
    x25519_only: bool,
    resume: bool,
    decompressors: &[&'static dyn rustls::compress::CertDecompressor],
) -> quinn::Endpoint {
    use rustls::crypto::aws_lc_rs::kx_group;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = if x25519_only {
        vec![kx_group::X25519]
    } else {
        vec![kx_group::X25519MLKEM768, kx_group::X25519]
    };
    let provider = Arc::new(provider);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.cert_decompressors = decompressors.to_vec();
    if !resume {
        tls.resumption = rustls::client::Resumption::disabled();
    }
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client");
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).expect("client endpoint");
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

/// One cold handshake through the relay to `port`: what each side sent before the client's
/// second flight, and whether the client completed its handshake on the server's first
/// flight alone.
fn first_flight(port: u16, x25519_only: bool) -> (Flight, bool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in = rt.enter();
    rt.block_on(flight_of(&amp_client(x25519_only), port, Duration::ZERO))
}

/// One handshake of `ep`'s through a relay to `port` (see [`first_flight`]); the connection
/// stays open `linger` after it completes (for the server's NEW_TOKEN frames).
async fn flight_of(ep: &quinn::Endpoint, port: u16, linger: Duration) -> (Flight, bool) {
    {
        let tally = Arc::new(Mutex::new(Flight::default()));
        let release = Arc::new(tokio::sync::Notify::new());
        let (addr, task) = relay(
            ([127, 0, 0, 1], port).into(),
            tally.clone(),
            release.clone(),
        )
        .await;
        let connecting = ep.connect(addr, "localhost").expect("connect");
        // A flight cut short by the limit never completes while the relay holds the client's
        // second flight; a whole one completes in milliseconds. Generous for a loaded machine.
        let done = tokio::time::timeout(Duration::from_secs(10), connecting).await;
        let complete = matches!(done, Ok(Ok(_)));
        let flight = tally.lock().unwrap().clone();
        // The client's second flight goes through now: the handshake completes either way.
        release.notify_one();
        let conn = match done {
            Ok(Ok(c)) => c,
            _ => ep
                .connect(addr, "localhost")
                .expect("connect")
                .await
                .expect("a handshake without the relay's hold"),
        };
        tokio::time::sleep(linger).await;
        conn.close(0u32.into(), b"");
        ep.wait_idle().await;
        task.abort();
        (flight, complete)
    }
}

/// DER bytes of the certificates in a PEM file.
fn chain_der_len(pem: &Path) -> usize {
    use rustls_pki_types::pem::PemObject;
    let data = std::fs::read(pem).unwrap();
    rustls_pki_types::CertificateDer::pem_slice_iter(&data)
        .map(|c| c.unwrap().len())
        .sum()
}

/// QUIC's anti-amplification limit (RFC 9000 §8.1): before the client's address is
/// validated the server sends at most 3× what it received. With the built-in certificate,
/// a two-certificate ECDSA P-256 chain and a two-certificate RSA 2048 chain, the server's
/// whole first flight (through its Finished) fits: the client completes its handshake while a
/// relay holds back everything it sends after its first flight. The client's first flight is
/// one 1200-byte datagram (X25519 only: the tightest budget, 3,600 bytes) or two
/// (X25519MLKEM768, as Chromium sends). A three-certificate RSA chain (with a cross-signed
/// root) is measured and reported, not required to fit (it does not, for one datagram).
/// The figures print with `--nocapture`; the README's HTTP/3 section quotes them.
#[test]
fn the_first_flight_fits_the_anti_amplification_limit() {
    let dir = support::tempdir("h3i-amp");
    support::ca_shaped_chains(&dir);
    let conf = |cert: &str, port: u16| {
        support::render(
            &format!(
                r#"
error_log {{dir}}/error.log info;
events {{}}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{{port0}} ssl;
        listen 127.0.0.1:{{port0}} quic;
        server_name localhost;
        ssl_certificate {{dir}}/../{cert}.crt;
        ssl_certificate_key {{dir}}/../{cert}.key;
    }}
}}
"#
            ),
            &dir.join(cert),
            &[port],
        )
    };
    let mut report = Vec::new();
    for cert in ["builtin", "ecdsa", "rsa", "rsa3"] {
        let sdir = dir.join(cert);
        std::fs::create_dir_all(&sdir).unwrap();
        let port = support::free_port();
        let mut server = Server::start_in(&sdir, &conf(cert, port), port);
        for x25519_only in [true, false] {
            let (f, complete) = first_flight(port, x25519_only);
            let line = format!(
                "{cert} ({}): chain {} B DER; client {} datagram(s) {} B, limit {} B; server {} datagram(s) {} B before the client's second flight; handshake {} on the first flight",
                if x25519_only { "X25519" } else { "X25519MLKEM768" },
                chain_der_len(&dir.join(format!("{cert}.crt"))),
                f.client.len(),
                f.client_bytes(),
                3 * f.client_bytes(),
                f.server.len(),
                f.server_bytes(),
                if complete { "completes" } else { "stalls" },
            );
            eprintln!("{line}");
            assert!(
                f.client.iter().all(|&n| n >= 1200),
                "client Initial datagrams are padded to 1200: {line}"
            );
            assert!(
                f.server_bytes() <= 3 * f.client_bytes(),
                "the server exceeded 3x: {line}"
            );
            if cert != "rsa3" {
                assert!(
                    complete,
                    "the first flight does not fit the limit: {line}\n{}",
                    server.stderr_text()
                );
            }
            report.push(line);
        }
        server.signal(libc::SIGTERM);
        server.wait_exit(Duration::from_secs(10));
    }
    eprintln!("{}", report.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ssl_certificate_compression on` brings the three-certificate RSA chain, whose plain first
/// flight stops at the limit of a one-datagram client (the test above), under it for a client
/// that offers brotli or zlib: its handshake completes on the server's first flight. The
/// figures print with `--nocapture` (bench/results/2026-11-26-cert-compression).
#[test]
fn a_compressed_chain_fits_the_amplification_limit() {
    use rustls::compress::{BROTLI_DECOMPRESSOR, ZLIB_DECOMPRESSOR};
    let dir = support::tempdir("h3i-certcomp");
    support::ca_shaped_chains(&dir);
    let port = support::free_port();
    let conf = support::render(
        r#"
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    ssl_certificate_compression on;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name localhost;
        ssl_certificate {dir}/rsa3.crt;
        ssl_certificate_key {dir}/rsa3.key;
    }
}
"#,
        &dir,
        &[port],
    );
    let mut server = Server::start_in(&dir, &conf, port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in = rt.enter();
    let offers: [(&str, &[&'static dyn rustls::compress::CertDecompressor]); 3] = [
        ("none", &[]),
        ("brotli", &[BROTLI_DECOMPRESSOR]),
        ("zlib", &[ZLIB_DECOMPRESSOR]),
    ];
    for (label, offer) in offers {
        let ep = amp_client_offering(true, false, offer);
        let (f, complete) = rt.block_on(flight_of(&ep, port, Duration::ZERO));
        let line = format!(
            "rsa3, X25519 client offering {label}: client {} B, limit {} B; server {} datagram(s) {} B before the client's second flight; handshake {} on the first flight",
            f.client_bytes(),
            3 * f.client_bytes(),
            f.server.len(),
            f.server_bytes(),
            if complete { "completes" } else { "stalls" },
        );
        eprintln!("{line}");
        assert!(f.server_bytes() <= 3 * f.client_bytes(), "{line}");
        // Without an offer the plain chain stalls, as in the test above; with one it fits.
        assert_eq!(
            complete,
            label != "none",
            "{line}\n{}",
            server.stderr_text()
        );
    }
    server.signal(libc::SIGTERM);
    server.wait_exit(Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that comes back with an address-validation token (NEW_TOKEN, from its last
/// connection) is not held to the anti-amplification limit: the chain that stalls a cold
/// first flight at 3x (`rsa3`, a full handshake: resumption off) leaves whole.
#[test]
fn a_returning_client_with_a_token_skips_the_amplification_limit() {
    let dir = support::tempdir("h3i-token");
    support::ca_shaped_chains(&dir);
    let conf = r#"
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    server {
        listen 127.0.0.1:{port0} ssl;
        listen 127.0.0.1:{port0} quic;
        server_name localhost;
        ssl_certificate {dir}/rsa3.crt;
        ssl_certificate_key {dir}/rsa3.key;
    }
}
"#;
    let port = support::free_port();
    let _server = Server::start_in(&dir, &support::render(conf, &dir, &[port]), port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in = rt.enter();
    let ep = amp_client_with(true, false);
    // The first connection: held at 3x; it then stays up long enough for the tokens.
    let (first, complete) = rt.block_on(flight_of(&ep, port, Duration::from_millis(300)));
    assert!(!complete, "a cold rsa3 flight fits 3x: {first:?}");
    // The second: the token proves the address, the whole flight leaves at once.
    let (second, complete) = rt.block_on(flight_of(&ep, port, Duration::ZERO));
    assert!(complete, "held although the client had a token: {second:?}");
    assert!(
        second.server_bytes() > 3 * second.client_bytes(),
        "{second:?}"
    );
}
