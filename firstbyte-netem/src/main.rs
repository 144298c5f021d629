//! firstbyte-netem: a user-space WAN emulator for hosts without `sch_netem` (see README.md).
//!
//! Flow: parse the command line ([`cli`]); block SIGINT/SIGTERM/SIGHUP into a signalfd; build
//! the link ([`link`]: two anonymous network namespaces, a TUN device in each); start one
//! forwarding thread per direction ([`forward`], deciding with the pure [`sched`] core);
//! start the server command and wait for its port; run the client command ([`child`]); then
//! stop the server, stop the threads, print the counters ([`stats`]) and exit with the
//! client's exit code. Everything the run created is owned by descriptors and child processes
//! that the kernel reclaims when this process exits, however it exits.

mod child;
mod cli;
mod forward;
mod hist;
mod link;
mod loss;
mod rng;
mod sched;
mod stats;
mod sys;
mod units;

use std::ffi::OsString;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::child::Mode;
use crate::cli::Options;
use crate::link::{Link, LinkConfig};
use crate::rng::Rng;
use crate::sched::Scheduler;
use crate::stats::{LinkInfo, Report};

/// Exit code when the emulator itself fails, as `env` and `timeout` use it.
const EXIT_EMULATOR_FAILED: i32 = 125;

/// Time a stopped command gets between SIGTERM and SIGKILL: 2 s, enough for a server to
/// close its listeners and flush logs.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Pause between `--wait-port` probes: 20 ms, short next to any server's start-up.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);

/// Longest single `--wait-port` connect: 3 s, so one lost SYN (1 s initial RTO) is retried.
const PROBE_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// SCHED_FIFO priority of the forwarding threads: low among real-time priorities, but above
/// every normal thread, so compilers and benchmarks sharing the cores do not make packets late.
const FORWARD_RT_PRIORITY: i32 = 10;

/// Busy-wait this long before a due time instead of sleeping, ns. 0: with SCHED_FIFO and a
/// 1 ns timer slack, `ppoll` alone measured lateness p50 ~0.1 ms and p90 ~0.2 ms idle on this
/// 2-vCPU VM (`netem` tests); the tail (p99 0.2–5.6 ms) is the host waking an idle vCPU late,
/// which spinning after a late wake-up cannot undo, so it would only burn a shared core.
const SPIN_NS: u64 = 0;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == child::INIT_ARG) {
        child::init_main(&args[1..]);
    }
    let opts = match cli::parse(&args) {
        Ok(opts) => opts,
        // A usage error (exit code 2) or --help/--version (exit code 0), printed by clap.
        Err(e) => e.exit(),
    };
    match run(&opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("firstbyte-netem: error: {e:#}");
            std::process::exit(EXIT_EMULATOR_FAILED);
        }
    }
}

/// How the run ended.
enum Outcome {
    /// The client exited with this code.
    Client(i32),
    /// We were asked to stop by this signal.
    Signal(i32),
}

/// Sets up, runs and tears down one emulation; returns the exit code.
fn run(opts: &Options) -> Result<i32> {
    // Before any thread starts, so every thread inherits the mask and signals queue here.
    let signals = sys::block_signals_to_fd().context("blocking SIGINT/SIGTERM")?;
    let link = Link::create(&LinkConfig {
        mtu: opts.mtu,
        cc: opts.cc.clone(),
    })
    .context("setting up the link")?;
    let env = [
        ("FB_SERVER_ADDR", link.server.addr.to_string()),
        ("FB_CLIENT_ADDR", link.client.addr.to_string()),
    ];
    let seed = opts.seed.unwrap_or_else(clock_seed);
    let stop = AtomicBool::new(false);
    let epoch = Instant::now();
    let steal_start = sys::steal_ns();
    let direction = |input, output, seed| forward::Direction {
        input,
        output,
        scheduler: Scheduler::new(opts.link.clone()),
        rng: Rng::seeded(seed),
        epoch,
        spin_ns: SPIN_NS,
        stop: &stop,
        realtime: false,
    };
    let (outcome, c2s, s2c) = std::thread::scope(|scope| {
        let forward_thread = |dir: forward::Direction<'_>| {
            // Without privilege this fails and the thread keeps normal priority (the report
            // says which).
            let realtime = sys::set_realtime(FORWARD_RT_PRIORITY).is_ok();
            forward::run(forward::Direction { realtime, ..dir })
        };
        let c2s_dir = direction(link.client.tun.as_fd(), link.server.tun.as_fd(), seed);
        let s2c_dir = direction(
            link.server.tun.as_fd(),
            link.client.tun.as_fd(),
            seed ^ 0x5DEE_CE66_D1CE_5EED,
        );
        let c2s = scope.spawn(move || forward_thread(c2s_dir));
        let s2c = scope.spawn(move || forward_thread(s2c_dir));
        let outcome = supervise(opts, &link, &env, signals.as_fd());
        stop.store(true, Ordering::Relaxed);
        let c2s = c2s.join().unwrap_or_default();
        let s2c = s2c.join().unwrap_or_default();
        (outcome, c2s, s2c)
    });
    let outcome = outcome?;
    let report = Report {
        server_addr: link.server.addr.to_string(),
        client_addr: link.client.addr.to_string(),
        link: LinkInfo {
            server_dev: link.server.dev.clone(),
            client_dev: link.client.dev.clone(),
            delay_us: opts.link.delay_ns as f64 / 1e3,
            jitter_us: opts.link.jitter_ns as f64 / 1e3,
            mean_loss: opts.link.loss.mean_loss(),
            rate_bps: opts.link.rate_bps,
            queue_packets: opts.link.queue_limit,
            mtu: opts.mtu,
            cc: opts.cc.clone(),
            seed,
        },
        elapsed_s: epoch.elapsed().as_secs_f64(),
        steal_ms: steal_start
            .zip(sys::steal_ns())
            .map(|(start, end)| end.saturating_sub(start) as f64 / 1e6),
        client_exit_code: match outcome {
            Outcome::Client(code) => Some(code),
            Outcome::Signal(_) => None,
        },
        client_to_server: c2s.report(),
        server_to_client: s2c.report(),
    };
    eprint!("{}", report.to_text());
    if let Some(path) = &opts.stats_json {
        if let Err(e) = std::fs::write(path, report.to_json() + "\n") {
            eprintln!("firstbyte-netem: cannot write {}: {e}", path.display());
        }
    }
    Ok(match outcome {
        Outcome::Client(code) => code,
        Outcome::Signal(sig) => 128 + sig,
    })
}

/// A seed from the clock and the PID, for runs without `--seed`.
fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// Runs the server, waits for its port, runs the client; stops the server in every case.
fn supervise(
    opts: &Options,
    link: &Link,
    env: &[(&str, String)],
    signals: BorrowedFd<'_>,
) -> Result<Outcome> {
    let mut server = match &opts.server {
        Some(cmd) => {
            let argv = [
                OsString::from("sh"),
                OsString::from("-c"),
                OsString::from(cmd),
            ];
            let child = child::spawn_in_ns(link.server.ns.as_fd(), Mode::All, &argv, env)
                .context("starting the server command")?;
            Some(Managed::new(child)?)
        }
        None => None,
    };
    let result = (|| {
        if let Some(port) = opts.wait_port {
            let timeout = Duration::from_nanos(opts.wait_timeout_ns);
            let target = SocketAddr::from((link.server.addr, port));
            if let Some(sig) = wait_port(link, target, timeout, signals, server.as_mut())? {
                return Ok(Outcome::Signal(sig));
            }
        }
        let child = child::spawn_in_ns(link.client.ns.as_fd(), Mode::Main, &opts.client, env)
            .context("starting the client command")?;
        let mut client = Managed::new(child)?;
        match client.wait_or_signal(signals)? {
            Ended::Exited(code) => Ok(Outcome::Client(code)),
            Ended::Signalled(sig) => {
                client.stop();
                Ok(Outcome::Signal(sig))
            }
        }
    })();
    if let Some(s) = server.as_mut() {
        s.stop();
    }
    result
}

/// Waits until `target` accepts a TCP connection from the client namespace. Returns a signal
/// if one asked us to stop meanwhile; fails if the server exits or the time runs out.
fn wait_port(
    link: &Link,
    target: SocketAddr,
    timeout: Duration,
    signals: BorrowedFd<'_>,
    mut server: Option<&mut Managed>,
) -> Result<Option<i32>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(sig) = sys::take_signal(signals) {
            return Ok(Some(sig));
        }
        if let Some(code) = server.as_mut().and_then(|s| s.exited()) {
            bail!(
                "the server command exited with status {code} before port {} accepted connections",
                target.port()
            );
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            bail!(
                "{target} did not accept connections within {:.1} s (--wait-timeout)",
                timeout.as_secs_f64()
            );
        }
        let connect_timeout = remaining.min(PROBE_CONNECT_TIMEOUT);
        let attempt = link::in_netns(link.client.ns.as_fd(), || {
            TcpStream::connect_timeout(&target, connect_timeout)
        })
        .context("entering the client namespace")?;
        if attempt.is_ok() {
            return Ok(None);
        }
        std::thread::sleep(PROBE_INTERVAL.min(remaining));
    }
}

/// How a waited-for child ended.
enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal asked us to stop first.
    Signalled(i32),
}

/// A child process with a pidfd, stopped (SIGTERM, then SIGKILL) when dropped.
struct Managed {
    child: Child,
    pidfd: OwnedFd,
    code: Option<i32>,
}

impl Managed {
    fn new(child: Child) -> Result<Self> {
        let mut child = child;
        match sys::pidfd_open(child.id()) {
            Ok(pidfd) => Ok(Managed {
                child,
                pidfd,
                code: None,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(anyhow!("pidfd_open: {e}"))
            }
        }
    }

    /// The exit code, if the child has exited (reaps it).
    fn exited(&mut self) -> Option<i32> {
        if self.code.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.code = Some(child::exit_code(status));
            }
        }
        self.code
    }

    /// Waits until the child exits or a signal arrives.
    fn wait_or_signal(&mut self, signals: BorrowedFd<'_>) -> Result<Ended> {
        loop {
            if let Some(sig) = sys::take_signal(signals) {
                return Ok(Ended::Signalled(sig));
            }
            if let Some(code) = self.exited() {
                return Ok(Ended::Exited(code));
            }
            sys::wait_any(&[self.pidfd.as_fd(), signals], -1).context("waiting for the client")?;
        }
    }

    /// SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL; reaps the child.
    fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        sys::kill(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while self.exited().is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let _ = self.child.kill();
                if let Ok(status) = self.child.wait() {
                    self.code = Some(child::exit_code(status));
                }
                return;
            }
            let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            let _ = sys::wait_any(&[self.pidfd.as_fd()], ms);
        }
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
