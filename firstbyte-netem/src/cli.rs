//! The command line: arguments in, an [`Options`] value (or a usage error) out.
//!
//! `firstbyte-netem [OPTIONS] -- CLIENT_CMD...` — everything before `--` (or before the first
//! argument that is not an option) configures the link; the rest is the client's argv, passed
//! through untouched (it may not even be UTF-8). Both `--delay 50ms` and `--delay=50ms` work.
//! clap reads it: a value that does not parse is a usage error (exit code 2) naming the
//! option and the value.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

use crate::loss::LossSpec;
use crate::sched::{LinkParams, DEFAULT_QUEUE_PACKETS};
use crate::units::{parse_duration, parse_percent, parse_rate};

/// Default MTU: 1500 bytes, Ethernet's, which is what WAN paths carry.
pub const DEFAULT_MTU: u32 = 1500;

/// Default congestion control in the server namespace: cubic, what most servers run (this
/// host defaults to bbr, which would flatter loss).
pub const DEFAULT_CC: &str = "cubic";

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Link parameters, the same for both directions.
    pub link: LinkParams,
    /// MTU of both TUN devices, bytes.
    pub mtu: u32,
    /// Congestion control for the server namespace.
    pub cc: String,
    /// Shell command for the server namespace.
    pub server: Option<String>,
    /// TCP port to wait for before starting the client.
    pub wait_port: Option<u16>,
    /// How long to wait for `wait_port`, ns.
    pub wait_timeout_ns: u64,
    /// Where to write the counters as JSON.
    pub stats_json: Option<PathBuf>,
    /// Seed for the random draws (`None`: from the clock and PID).
    pub seed: Option<u64>,
    /// The client command's argv.
    pub client: Vec<OsString>,
}

/// What `--help` says before the options.
const ABOUT: &str = "\
Joins two fresh network namespaces (client and server side) through TUN devices and forwards
packets between them in user space, applying a delay, jitter, loss and rate limit per
direction.";

/// What `--help` says after the options.
const AFTER: &str = "\
Both commands get FB_SERVER_ADDR and FB_CLIENT_ADDR. Exits with the client's exit code
(125 if the emulator itself failed, 2 for a usage error). Counters go to stderr at exit.";

/// The command line as clap reads it; [`parse`] turns it into [`Options`].
#[derive(Debug, Parser)]
#[command(
    name = "firstbyte-netem",
    version,
    about = ABOUT,
    after_help = AFTER,
    override_usage = "firstbyte-netem [OPTIONS] [--] CLIENT_CMD [ARGS...]"
)]
struct Args {
    /// Fixed one-way delay (50ms gives a 100 ms RTT).
    #[arg(long, value_name = "D", default_value = "0ms", value_parser = parse_duration)]
    delay: u64,
    /// Uniform extra delay in [-J, +J], without reordering.
    #[arg(long, value_name = "J", default_value = "0ms", value_parser = parse_duration)]
    jitter: u64,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// Bernoulli loss per packet [default: 0%].
    #[arg(long, value_name = "P%", value_parser = parse_percent, conflicts_with = "loss_model")]
    loss: Option<f64>,
    /// Gilbert-Elliott loss, in %: p = P(good->bad), r = P(bad->good), h = P(deliver in bad)
    /// [0], k = P(deliver in good) [100].
    #[arg(long, value_name = "gilbert:p,r[,h,k]", value_parser = gilbert_arg)]
    loss_model: Option<LossSpec>,
    /// Bottleneck rate (100mbit, 10Mbit, 1gbit, 500kbit) [default: none].
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    rate: Option<u64>,
    /// Bottleneck queue with --rate, tail drop, packets.
    #[arg(long, value_name = "PKTS", default_value_t = DEFAULT_QUEUE_PACKETS, value_parser = queue_arg)]
    queue: usize,
    /// MTU of both TUN devices, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MTU,
          value_parser = clap::value_parser!(u32).range(576..=65_535))]
    mtu: u32,
    /// net.ipv4.tcp_congestion_control in the server namespace.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CC, value_parser = cc_arg)]
    cc: String,
    /// Run this with sh -c in the server namespace.
    #[arg(long, value_name = "SHELL CMD")]
    server: Option<String>,
    /// Wait until FB_SERVER_ADDR:PORT accepts TCP (from the client side).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    wait_port: Option<u16>,
    /// Give up waiting for --wait-port after D.
    // 30 s: enough for a server to start on a busy machine even when lossy emulation costs
    // the probe a few SYN retransmissions (1 s, 2 s, 4 s ...).
    #[arg(long, value_name = "D", default_value = "30s", value_parser = parse_duration)]
    wait_timeout: u64,
    /// Write the counters as JSON at exit.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Seed for the loss and jitter draws [default: random].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// The client command and its arguments, passed through untouched (everything from the
    /// first argument that is not an option, or after `--`).
    #[arg(
        value_name = "CLIENT_CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        value_parser = clap::value_parser!(OsString)
    )]
    client: Vec<OsString>,
}

fn queue_arg(text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|&q| q >= 1)
        .ok_or_else(|| "expected a number of packets, at least 1".into())
}

fn cc_arg(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() < 16
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(text.to_string())
    } else {
        Err("expected a congestion control name like cubic or bbr".into())
    }
}

fn gilbert_arg(text: &str) -> Result<LossSpec, String> {
    parse_gilbert(text)
        .ok_or_else(|| "expected gilbert:p,r[,h,k] with percentages from 0 to 100".into())
}

/// Parses the arguments after the program name. `Err` is clap's: a usage error (exit code
/// 2) or `--help`/`--version` (exit code 0); `main` prints it and exits with its code.
pub fn parse(args: &[OsString]) -> Result<Options, clap::Error> {
    let program = std::iter::once(OsString::from("firstbyte-netem"));
    let a = Args::try_parse_from(program.chain(args.iter().cloned()))?;
    let loss = match (a.loss, a.loss_model) {
        (Some(p), _) if p > 0.0 => LossSpec::Bernoulli { p },
        (_, Some(g)) => g,
        _ => LossSpec::None,
    };
    Ok(Options {
        link: LinkParams {
            delay_ns: a.delay,
            jitter_ns: a.jitter,
            loss,
            rate_bps: a.rate,
            queue_limit: a.queue,
            reorder: a.reorder,
        },
        mtu: a.mtu,
        cc: a.cc,
        server: a.server,
        wait_port: a.wait_port,
        wait_timeout_ns: a.wait_timeout,
        stats_json: a.stats_json,
        seed: a.seed,
        client: a.client,
    })
}

/// Parses `gilbert:p,r[,h[,k]]` (each a percentage, `%` optional).
fn parse_gilbert(text: &str) -> Option<LossSpec> {
    let params = text.strip_prefix("gilbert:")?;
    let values: Vec<f64> = params
        .split(',')
        .map(|v| parse_percent(v).ok())
        .collect::<Option<_>>()?;
    match values[..] {
        [p, r] => Some(LossSpec::Gilbert {
            p,
            r,
            h: 0.0,
            k: 1.0,
        }),
        [p, r, h] => Some(LossSpec::Gilbert { p, r, h, k: 1.0 }),
        [p, r, h, k] => Some(LossSpec::Gilbert { p, r, h, k }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> Options {
        match parse(&args(list)) {
            Ok(o) => o,
            Err(e) => panic!("{list:?} gave {e}"),
        }
    }

    #[test]
    fn the_contract_command_line() {
        let o = run(&[
            "--delay",
            "50ms",
            "--jitter",
            "5ms",
            "--loss",
            "1%",
            "--rate",
            "100mbit",
            "--queue",
            "500",
            "--mtu",
            "1400",
            "--cc",
            "bbr",
            "--server",
            "nginx -g 'daemon off;'",
            "--wait-port",
            "8443",
            "--stats-json",
            "/tmp/s.json",
            "--",
            "curl",
            "-s",
            "--http2",
        ]);
        assert_eq!(o.link.delay_ns, 50_000_000);
        assert_eq!(o.link.jitter_ns, 5_000_000);
        assert_eq!(o.link.loss, LossSpec::Bernoulli { p: 0.01 });
        assert_eq!(o.link.rate_bps, Some(100_000_000));
        assert_eq!(o.link.queue_limit, 500);
        assert!(!o.link.reorder);
        assert_eq!(o.mtu, 1400);
        assert_eq!(o.cc, "bbr");
        assert_eq!(o.server.as_deref(), Some("nginx -g 'daemon off;'"));
        assert_eq!(o.wait_port, Some(8443));
        assert_eq!(o.stats_json, Some(PathBuf::from("/tmp/s.json")));
        assert_eq!(o.client, args(&["curl", "-s", "--http2"]));
    }

    #[test]
    fn defaults() {
        let o = run(&["--", "true"]);
        assert_eq!(o.link.delay_ns, 0);
        assert_eq!(o.link.loss, LossSpec::None);
        assert_eq!(o.link.rate_bps, None);
        assert_eq!(o.link.queue_limit, 1000);
        assert_eq!(o.mtu, 1500);
        assert_eq!(o.cc, "cubic");
        assert_eq!(o.wait_timeout_ns, 30_000_000_000);
        assert_eq!(o.client, args(&["true"]));
    }

    #[test]
    fn equals_form_and_client_without_separator() {
        let o = run(&[
            "--delay=10ms",
            "--reorder",
            "--seed=7",
            "ping",
            "-c",
            "1",
            "--",
            "x",
        ]);
        assert_eq!(o.link.delay_ns, 10_000_000);
        assert!(o.link.reorder);
        assert_eq!(o.seed, Some(7));
        // Options after the client's name belong to the client.
        assert_eq!(o.client, args(&["ping", "-c", "1", "--", "x"]));
    }

    #[test]
    fn gilbert_model() {
        let o = run(&["--loss-model", "gilbert:1%,25%", "--", "true"]);
        assert_eq!(
            o.link.loss,
            LossSpec::Gilbert {
                p: 0.01,
                r: 0.25,
                h: 0.0,
                k: 1.0
            }
        );
        let o = run(&["--loss-model", "gilbert:1,25,10,99", "--", "true"]);
        assert_eq!(
            o.link.loss,
            LossSpec::Gilbert {
                p: 0.01,
                r: 0.25,
                h: 0.1,
                k: 0.99
            }
        );
        for bad in [
            "gilbert:1",
            "gilbert:1,2,3,4,5",
            "gemodel:1,2",
            "gilbert:1,200",
        ] {
            let e = parse(&args(&["--loss-model", bad, "--", "true"])).expect_err(bad);
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{bad}");
        }
    }

    #[test]
    fn usage_errors() {
        let kind = |list: &[&str]| parse(&args(list)).err().map(|e| (e.kind(), e.exit_code()));
        let usage = |k| Some((k, 2));
        assert_eq!(kind(&["--delay"]), usage(ErrorKind::InvalidValue));
        assert_eq!(
            kind(&["--bogus", "1", "--", "true"]),
            usage(ErrorKind::UnknownArgument)
        );
        assert_eq!(
            kind(&["--delay", "50ms"]),
            usage(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            kind(&["--delay", "50ms", "--"]),
            usage(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            kind(&["--loss", "1%", "--loss-model", "gilbert:1,2", "--", "true"]),
            usage(ErrorKind::ArgumentConflict)
        );
        for bad in [
            &["--delay", "50"][..],
            &["--queue", "0"],
            &["--queue", "many"],
            &["--mtu", "100"],
            &["--mtu", "70000"],
            &["--wait-port", "0"],
            &["--cc", "../x"],
            &["--seed", "-1"],
            &["--loss", "150%"],
            &["--rate", "fast"],
        ] {
            let list = [bad, &["--", "true"]].concat();
            let e = parse(&args(&list)).expect_err(&format!("{bad:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
        assert_eq!(kind(&["--help"]), Some((ErrorKind::DisplayHelp, 0)));
        assert_eq!(kind(&["-h"]), Some((ErrorKind::DisplayHelp, 0)));
    }

    #[test]
    fn non_utf8_client_arguments_pass_through() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'x', 0xff]);
        let o = parse(&[OsString::from("--"), OsString::from("echo"), odd.clone()])
            .expect("non-UTF-8 client argument");
        assert_eq!(o.client, vec![OsString::from("echo"), odd]);
    }

    #[test]
    fn error_messages_name_option_and_value() {
        let e = parse(&args(&["--rate", "fast", "--", "true"])).expect_err("bad rate");
        let text = e.to_string();
        assert!(text.contains("--rate") && text.contains("fast"), "{text}");
        let e = parse(&args(&["--delay", "50", "--", "true"])).expect_err("no unit");
        assert!(e.to_string().contains("invalid time value \"50\""), "{e}");
    }

    #[test]
    fn the_parser_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
