//! Shared test support: start the real `firstbyte` binary on loopback with a config written
//! into a temporary directory, make certificates with `openssl`, and talk to it with curl,
//! openssl s_client, or a Rust client.
#![allow(dead_code, unused_imports)]

mod chains;
mod clients;
mod ports;
pub mod proto;
mod upstreams;
pub use chains::{ca_shaped_chains, CHAINS};
pub use clients::{client_certs, h2_tls_client, rust_client_config, s_client_get, AnyCert};
pub use ports::{ephemeral_range, free_port, holds_listener, test_range};
pub use upstreams::{read_head, recording_upstream, silent_upstream, upstream, Seen};

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_firstbyte"))
}

/// A fresh directory for one test.
pub fn tempdir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "fbtest-{}-{}-{}",
        tag,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    exit_hook();
    if let Ok(mut l) = TEMP.lock() {
        l.push(d.clone());
    }
    d
}

/// Test directories, removed when the test process exits (after its servers are killed), so
/// a run leaves nothing behind; a failed test's files stay readable until then.
static TEMP: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Runs a command, returning its output; panics if it cannot start.
pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e} (scripts/test installs it)"))
}

/// Test certificates, made once per test process with openssl.
pub struct Certs {
    /// Directory holding them.
    pub dir: PathBuf,
}

impl Certs {
    /// `NAME.crt` / `NAME.key`.
    pub fn cert(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.crt"))
    }
    /// Key path.
    pub fn key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }
    /// The CA that signed every leaf.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

fn sh(script: &str, dir: &Path) {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "fixture script failed: {}\n{}",
        script,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ECDSA leaves for `a.test` (also `*.a.test`), `b.test`, `localhost`; an RSA leaf for
/// `a.test`; a leaf with a chain over 6 KB (`big.test`, three RSA-4096 intermediates).
pub fn certs() -> &'static Certs {
    static C: OnceLock<Certs> = OnceLock::new();
    C.get_or_init(|| {
        let dir = tempdir("certs");
        sh(
            r#"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj /CN=firstbyte-test-ca -keyout ca.key -out ca.crt 2>/dev/null
leaf() { # name keyspec sans
  openssl req -newkey $2 -nodes -subj /CN=$1 -keyout $1.key -out $1.csr 2>/dev/null
  printf 'subjectAltName=%s\n' "$3" > $1.ext
  openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile $1.ext -out $1.crt 2>/dev/null
}
leaf a.test "ec -pkeyopt ec_paramgen_curve:P-256" "DNS:a.test,DNS:*.a.test"
leaf b.test "ec -pkeyopt ec_paramgen_curve:P-256" "DNS:b.test"
leaf localhost "ec -pkeyopt ec_paramgen_curve:P-256" "DNS:localhost,IP:127.0.0.1,IP:::1"
openssl req -newkey rsa:2048 -nodes -subj /CN=a.test -keyout a-rsa.key -out a-rsa.csr 2>/dev/null
printf 'subjectAltName=DNS:a.test\n' > a-rsa.ext
openssl x509 -req -in a-rsa.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
  -extfile a-rsa.ext -out a-rsa.crt 2>/dev/null
# A long chain: leaf + 3 intermediates with 4096-bit RSA keys (> 6 KB of certificates).
prev=ca
for i in 1 2 3; do
  openssl req -newkey rsa:4096 -nodes -subj /CN=int$i -keyout int$i.key -out int$i.csr 2>/dev/null
  printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign\n' > int$i.ext
  openssl x509 -req -in int$i.csr -CA $prev.crt -CAkey $prev.key -CAcreateserial -days 30 \
    -extfile int$i.ext -out int$i.crt 2>/dev/null
  prev=int$i
done
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=big.test -keyout big.test.key -out big.test.csr 2>/dev/null
printf 'subjectAltName=DNS:big.test\n' > big.test.ext
openssl x509 -req -in big.test.csr -CA int3.crt -CAkey int3.key -CAcreateserial -days 30 \
  -extfile big.test.ext -out big.leaf 2>/dev/null
cat big.leaf int3.crt int2.crt int1.crt > big.test.crt
# An encrypted PKCS#8 key and a legacy encrypted PEM key (for ssl_password_file).
openssl pkcs8 -topk8 -v2 aes-256-cbc -passout pass:s3cret -in a.test.key -out a-enc.key
cp a.test.crt a-enc.crt
openssl ec -aes256 -passout pass:s3cret -in a.test.key -out a-legacy.key 2>/dev/null
cp a.test.crt a-legacy.crt
printf 'wrong\ns3cret\n' > passwords
# Readable by the serving user (nobody when a test starts firstbyte as root without "user"):
# certificates named by variables are read at handshake time, by the serving process, as nginx.
chmod 644 *.key
"#,
            &dir,
        );
        Certs { dir }
    })
}

/// A running `firstbyte`.
pub struct Server {
    /// The child process.
    pub child: Child,
    /// Its directory (config, html root, logs).
    pub dir: PathBuf,
    /// The config file.
    pub conf: PathBuf,
    stderr: Arc<std::sync::Mutex<Vec<u8>>>,
    /// Set when the server's stderr reached its end (all of it is in `stderr`).
    stderr_eof: Arc<std::sync::atomic::AtomicBool>,
}

/// Replaces `{dir}`, `{certs}` and `{portN}` in a config template.
pub fn render(template: &str, dir: &Path, ports: &[u16]) -> String {
    let mut s = template
        .replace("{dir}", &dir.display().to_string())
        .replace("{certs}", &certs().dir.display().to_string());
    for (i, p) in ports.iter().enumerate() {
        s = s.replace(&format!("{{port{i}}}"), &p.to_string());
    }
    s
}

impl Server {
    /// Writes `conf` (a rendered config) into `dir` and starts the server; waits until `wait`
    /// accepts connections.
    pub fn start_in(dir: &Path, conf: &str, wait: u16) -> Server {
        let path = dir.join("firstbyte.conf");
        std::fs::write(&path, conf).expect("write conf");
        let mut child = Command::new(bin())
            .arg("-c")
            .arg(&path)
            // Unread: a config without `access_log` logs to stdout, which must not fill a pipe.
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start firstbyte");
        reap_at_exit(child.id());
        let stderr = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut err = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        let stderr_eof = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let eof = stderr_eof.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.extend_from_slice(&buf[..n]);
                }
            }
            eof.store(true, Ordering::SeqCst);
        });
        let mut s = Server {
            child,
            dir: dir.to_path_buf(),
            conf: path,
            stderr,
            stderr_eof,
        };
        s.wait_port(wait);
        s
    }

    /// Renders `template` with fresh ports and starts it in a new directory with an
    /// `html/` root holding `index.html`.
    pub fn start(tag: &str, template: &str, nports: usize) -> (Server, Vec<u16>) {
        let dir = tempdir(tag);
        std::fs::create_dir_all(dir.join("html")).expect("mkdir html");
        std::fs::write(
            dir.join("html/index.html"),
            "<h1>hello from firstbyte</h1>\n",
        )
        .expect("write index");
        let ports: Vec<u16> = (0..nports).map(|_| free_port()).collect();
        let conf = render(template, &dir, &ports);
        let s = Server::start_in(&dir, &conf, ports[0]);
        (s, ports)
    }

    /// Waits until this server listens on `port` (10 s at most), or exits. The listener must
    /// be this process's own (`/proc`): a port that accepts might be another socket's that
    /// took the port, while this server failed to bind. Where `/proc` does not say, a
    /// connection to 127.0.0.1:`port` that is accepted decides.
    pub fn wait_port(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                // Everything it wrote (its [emerg]) before saying it exited.
                let until = Instant::now() + Duration::from_secs(5);
                while !self.stderr_eof.load(Ordering::SeqCst) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                panic!("firstbyte exited early ({st}):\n{}", self.stderr_text());
            }
            match holds_listener(self.child.id(), port) {
                Some(true) => return,
                Some(false) => {}
                None if TcpStream::connect_timeout(
                    &SocketAddr::from(([127, 0, 0, 1], port)),
                    Duration::from_millis(200),
                )
                .is_ok() =>
                {
                    return
                }
                None => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "firstbyte did not listen on {port}:\n{}",
            self.stderr_text()
        );
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .map(|s| String::from_utf8_lossy(&s).into_owned())
            .unwrap_or_default()
    }

    /// Sends a signal.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for exit (5 s at most), returning whether it exited.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        forget_at_exit(self.child.id());
    }
}

/// Servers still running: killed when the test process exits, for those that are never
/// dropped (a server in a `static` fixture lives until the process ends, and Rust runs no
/// destructor for statics).
static LIVE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// At process exit: kills the servers still running and removes the test directories.
extern "C" fn kill_live_servers() {
    let pids = match LIVE.lock() {
        Ok(mut l) => std::mem::take(&mut *l),
        Err(_) => return,
    };
    for pid in pids {
        // SAFETY: plain syscalls on a child of this process; a null status pointer is allowed.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
            libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
        }
    }
    if let Ok(mut dirs) = TEMP.lock() {
        for d in std::mem::take(&mut *dirs) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Registers [`kill_live_servers`] to run at process exit, once.
fn exit_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain extern "C" function with no arguments.
    HOOK.call_once(|| unsafe {
        libc::atexit(kill_live_servers);
    });
}

/// Kills `pid` at process exit unless [`forget_at_exit`] is called first.
pub fn reap_at_exit(pid: u32) {
    exit_hook();
    if let Ok(mut l) = LIVE.lock() {
        l.push(pid);
    }
}

/// `pid` was reaped by its owner.
pub fn forget_at_exit(pid: u32) {
    if let Ok(mut l) = LIVE.lock() {
        l.retain(|p| *p != pid);
    }
}

/// curl with `args`, `-sk` and a 10 s limit; returns (status code line, headers, body).
pub fn curl(args: &[&str]) -> Output {
    let mut a = vec!["-sk", "--max-time", "10"];
    a.extend_from_slice(args);
    run("curl", &a)
}

/// Response of a curl call with `-i` split into (status, headers lower-cased, body).
pub fn curl_i(args: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut a = vec!["-i"];
    a.extend_from_slice(args);
    let out = curl(&a);
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_response(&out.stdout)
}

/// Splits raw `HTTP/x status\r\nheaders\r\n\r\nbody` (the last response when curl printed several).
pub fn parse_response(raw: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut rest = raw;
    loop {
        let end = find(rest, b"\r\n\r\n").expect("header end");
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let body = &rest[end + 4..];
        let mut lines = head.lines();
        let status_line = lines.next().unwrap_or("");
        let code: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        // 1xx responses precede the real one.
        if (100..200).contains(&code) && body.starts_with(b"HTTP/") {
            rest = body;
            continue;
        }
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        return (code, headers, body.to_vec());
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// The value of header `name` in a parsed response.
pub fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Runs `firstbyte ARGS` to completion.
pub fn firstbyte(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run firstbyte")
}

/// The configuration corpus (real nginx configurations from public sources, kept outside the
/// repository): `CONF_CORPUS`, else `../shared/conf-corpus` beside the repository. A test that
/// needs it fails, saying where it looked, when it is not there.
pub fn conf_corpus() -> PathBuf {
    let dir = match std::env::var_os("CONF_CORPUS") {
        Some(d) => PathBuf::from(d),
        // CARGO_MANIFEST_DIR is REPO/firstbyte.
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap_or(Path::new("/"))
            .join("shared/conf-corpus"),
    };
    assert!(
        dir.join("debian/nginx.conf").is_file(),
        "the configuration corpus is not at {} (no debian/nginx.conf there): set CONF_CORPUS=DIR \
         or put it at ../shared/conf-corpus beside the repository (docs/conf-corpus.md)",
        dir.display()
    );
    dir
}
