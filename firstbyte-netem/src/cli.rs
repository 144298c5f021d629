//! The command line: arguments in, an [`Options`] value (or a usage error) out.
//!
//! `firstbyte-netem [OPTIONS] -- CLIENT_CMD...` — everything before `--` (or before the first
//! argument that is not an option) configures the link; the rest is the client's argv, passed
//! through untouched (it may not even be UTF-8). Both `--delay 50ms` and `--delay=50ms` work.

use std::ffi::OsString;
use std::path::PathBuf;

use thiserror::Error;

use crate::loss::LossSpec;
use crate::sched::{LinkParams, DEFAULT_QUEUE_PACKETS};
use crate::units::{parse_duration, parse_percent, parse_rate, UnitError};

/// Default MTU: 1500 bytes, Ethernet's, which is what WAN paths carry.
pub const DEFAULT_MTU: u32 = 1500;

/// Default congestion control in the server namespace: cubic, what most servers run (this
/// host defaults to bbr, which would flatter loss).
pub const DEFAULT_CC: &str = "cubic";

/// Default wait for `--wait-port`: 30 s, enough for a server to start on a busy machine even
/// when lossy emulation costs the probe a few SYN retransmissions (1 s, 2 s, 4 s ...).
pub const DEFAULT_WAIT_TIMEOUT_NS: u64 = 30_000_000_000;

/// Usage text for `--help` and usage errors.
pub const USAGE: &str = "\
usage: firstbyte-netem [OPTIONS] -- CLIENT_CMD [ARGS...]

Joins two fresh network namespaces (client and server side) through TUN devices and forwards
packets between them in user space, applying per direction:
  --delay D            fixed one-way delay (50ms gives a 100 ms RTT)          [0]
  --jitter J           uniform extra delay in [-J, +J], without reordering     [0]
  --reorder            let jitter reorder packets
  --loss P%            Bernoulli loss per packet                               [0%]
  --loss-model gilbert:p,r[,h,k]
                       Gilbert-Elliott loss, in %: p = P(good->bad), r = P(bad->good),
                       h = P(deliver in bad) [0], k = P(deliver in good) [100]
  --rate R             bottleneck rate (100mbit, 10Mbit, 1gbit, 500kbit)       [none]
  --queue PKTS         bottleneck queue with --rate, tail drop                 [1000]
  --mtu BYTES          MTU of both TUN devices                                 [1500]
  --cc NAME            net.ipv4.tcp_congestion_control in the server namespace [cubic]
  --server 'SHELL CMD' run this with sh -c in the server namespace
  --wait-port PORT     wait until FB_SERVER_ADDR:PORT accepts TCP (from the client side)
  --wait-timeout D     give up waiting for --wait-port after D                 [30s]
  --stats-json FILE    write the counters as JSON at exit
  --seed N             seed for the loss and jitter draws                      [random]
Both commands get FB_SERVER_ADDR and FB_CLIENT_ADDR. Exits with the client's exit code
(125 if the emulator itself failed). Counters go to stderr at exit.
";

/// A command line the tool cannot run.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum CliError {
    /// An option the tool does not know.
    #[error("unknown option \"{0}\"")]
    UnknownOption(String),
    /// An option given without its value.
    #[error("option \"{0}\" needs a value")]
    MissingValue(String),
    /// An option whose value does not parse.
    #[error("invalid value for \"{option}\": {source}")]
    BadValue {
        /// The option.
        option: String,
        /// What was wrong with the value.
        source: UnitError,
    },
    /// An option whose value is out of range or malformed (message says which).
    #[error("invalid value \"{value}\" for \"{option}\": {reason}")]
    Invalid {
        /// The option.
        option: String,
        /// The value given.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
    /// `--loss` and `--loss-model` together.
    #[error("\"--loss\" and \"--loss-model\" cannot be used together")]
    TwoLossModels,
    /// An option before `--` that is not UTF-8.
    #[error("arguments before \"--\" must be UTF-8")]
    NotUtf8,
    /// Nothing to run.
    #[error("no client command given after \"--\"")]
    NoClient,
}

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

/// The result of parsing: run, or print help.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Run the emulator.
    Run(Box<Options>),
    /// `--help` was asked for.
    Help,
}

/// Parses the arguments after the program name.
pub fn parse(args: &[OsString]) -> Result<Parsed, CliError> {
    let mut link = LinkParams {
        delay_ns: 0,
        jitter_ns: 0,
        loss: LossSpec::None,
        rate_bps: None,
        queue_limit: DEFAULT_QUEUE_PACKETS,
        reorder: false,
    };
    let mut opts = Options {
        link: link.clone(),
        mtu: DEFAULT_MTU,
        cc: DEFAULT_CC.to_string(),
        server: None,
        wait_port: None,
        wait_timeout_ns: DEFAULT_WAIT_TIMEOUT_NS,
        stats_json: None,
        seed: None,
        client: Vec::new(),
    };
    let (mut bernoulli, mut gilbert) = (None, None);
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "--" {
            opts.client = args[i + 1..].to_vec();
            break;
        }
        let text = arg.to_str().ok_or(CliError::NotUtf8)?;
        if !text.starts_with('-') {
            opts.client = args[i..].to_vec();
            break;
        }
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (text, None),
        };
        match name {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--reorder" => {
                link.reorder = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                let v = args
                    .get(i)
                    .ok_or_else(|| CliError::MissingValue(name.to_string()))?;
                v.to_str().ok_or(CliError::NotUtf8)?.to_string()
            }
        };
        i += 1;
        let unit = |r: Result<u64, UnitError>| {
            r.map_err(|source| CliError::BadValue {
                option: name.to_string(),
                source,
            })
        };
        let invalid = |reason| CliError::Invalid {
            option: name.to_string(),
            value: value.clone(),
            reason,
        };
        match name {
            "--delay" => link.delay_ns = unit(parse_duration(&value))?,
            "--jitter" => link.jitter_ns = unit(parse_duration(&value))?,
            "--wait-timeout" => opts.wait_timeout_ns = unit(parse_duration(&value))?,
            "--rate" => link.rate_bps = Some(unit(parse_rate(&value))?),
            "--loss" => {
                let p = parse_percent(&value).map_err(|source| CliError::BadValue {
                    option: name.to_string(),
                    source,
                })?;
                bernoulli = Some(p);
            }
            "--loss-model" => {
                gilbert = Some(parse_gilbert(&value).ok_or_else(|| {
                    invalid("expected gilbert:p,r[,h,k] with percentages from 0 to 100")
                })?)
            }
            "--queue" => {
                link.queue_limit = value
                    .parse()
                    .ok()
                    .filter(|&q| q >= 1)
                    .ok_or_else(|| invalid("expected a number of packets, at least 1"))?
            }
            "--mtu" => {
                opts.mtu = value
                    .parse()
                    .ok()
                    .filter(|m| (576..=65_535).contains(m))
                    .ok_or_else(|| invalid("expected a number of bytes from 576 to 65535"))?
            }
            "--cc" => {
                let ok = !value.is_empty()
                    && value.len() < 16
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if !ok {
                    return Err(invalid(
                        "expected a congestion control name like cubic or bbr",
                    ));
                }
                opts.cc = value.clone();
            }
            "--server" => opts.server = Some(value.clone()),
            "--wait-port" => {
                opts.wait_port = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|&p: &u16| p >= 1)
                        .ok_or_else(|| invalid("expected a TCP port from 1 to 65535"))?,
                )
            }
            "--stats-json" => opts.stats_json = Some(PathBuf::from(&value)),
            "--seed" => {
                opts.seed = Some(
                    value
                        .parse()
                        .map_err(|_| invalid("expected an unsigned integer"))?,
                )
            }
            _ => return Err(CliError::UnknownOption(name.to_string())),
        }
    }
    link.loss = match (bernoulli, gilbert) {
        (Some(_), Some(_)) => return Err(CliError::TwoLossModels),
        (Some(p), None) if p > 0.0 => LossSpec::Bernoulli { p },
        (None, Some(g)) => g,
        _ => LossSpec::None,
    };
    if opts.client.is_empty() {
        return Err(CliError::NoClient);
    }
    opts.link = link;
    Ok(Parsed::Run(Box::new(opts)))
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

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> Options {
        match parse(&args(list)) {
            Ok(Parsed::Run(o)) => *o,
            other => panic!("{list:?} gave {other:?}"),
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
            assert!(matches!(
                parse(&args(&["--loss-model", bad, "--", "true"])),
                Err(CliError::Invalid { .. })
            ));
        }
    }

    #[test]
    fn usage_errors() {
        let err = |list: &[&str]| parse(&args(list)).err();
        assert_eq!(
            err(&["--delay"]),
            Some(CliError::MissingValue("--delay".into()))
        );
        assert_eq!(
            err(&["--bogus", "1", "--", "true"]),
            Some(CliError::UnknownOption("--bogus".into()))
        );
        assert_eq!(err(&["--delay", "50ms"]), Some(CliError::NoClient));
        assert_eq!(err(&["--delay", "50ms", "--"]), Some(CliError::NoClient));
        assert_eq!(
            err(&["--loss", "1%", "--loss-model", "gilbert:1,2", "--", "true"]),
            Some(CliError::TwoLossModels)
        );
        assert!(matches!(
            err(&["--delay", "50", "--", "true"]),
            Some(CliError::BadValue { .. })
        ));
        assert!(matches!(
            err(&["--queue", "0", "--", "true"]),
            Some(CliError::Invalid { .. })
        ));
        assert!(matches!(
            err(&["--mtu", "100", "--", "true"]),
            Some(CliError::Invalid { .. })
        ));
        assert!(matches!(
            err(&["--wait-port", "0", "--", "true"]),
            Some(CliError::Invalid { .. })
        ));
        assert!(matches!(
            err(&["--cc", "../x", "--", "true"]),
            Some(CliError::Invalid { .. })
        ));
        assert_eq!(parse(&args(&["--help"])), Ok(Parsed::Help));
    }

    #[test]
    fn error_messages_name_option_and_value() {
        let e = parse(&args(&["--rate", "fast", "--", "true"])).err();
        let text = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("--rate") && text.contains("\"fast\""),
            "{text}"
        );
    }
}
