//! The command line: one clap parser for every subcommand.
//!
//! Each subcommand declares its options once, in its own module (`wan::Args`,
//! `loopback::Args`, ...); the options several share (`--quick`, `--out`) are [`Common`],
//! flattened into each. A value that does not parse or makes no sense (a count of zero, an
//! unknown server or measure name) is a usage error with exit code 2, never a silent default.
//! Defaults that depend on `--quick` are `None` here and filled in by each module.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{burst_idle, idle_load, ktls, loopback, records, sslcache, wan};

/// Controlled benchmarks of firstbyte that print numbers.
#[derive(Debug, Parser)]
#[command(name = "firstbyte-bench", version, propagate_version = true)]
pub struct Cli {
    /// Which bench to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The benches.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The WAN bench: cold connections through firstbyte-netem, randomized interleave,
    /// percentiles with confidence intervals.
    Run(wan::Args),
    /// firstbyte beside nginx and h2o on loopback: server CPU and memory per operation.
    Loopback(loopback::Args),
    /// Single-connection throughput of each TLS record policy.
    Records(records::Args),
    /// The SSL object cache: `-t` and reloads beside nginx, handshakes with certificates by
    /// variable.
    Sslcache(sslcache::Args),
    /// Request latency under h2load with and without many idle TLS connections.
    IdleLoad(idle_load::Args),
    /// Memory of the server after a burst of idle TLS connections closes, sampled every
    /// second (one curve per firstbyte build, nginx beside).
    BurstIdle(burst_idle::Args),
    /// Kernel TLS + sendfile against user-space TLS and nginx's kTLS, in a VM with Debian's
    /// kernel.
    Ktls(ktls::Args),
}

/// Options every long-running bench takes.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct Common {
    /// Fewer and shorter runs (a smoke test of the bench, not a result).
    #[arg(long)]
    pub quick: bool,
    /// Output directory (default: a new `bench/out/<bench>-<UTC stamp>/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// A count that must be at least 1; `_` may group digits (`10_000`).
pub fn positive(text: &str) -> Result<usize, String> {
    match text.replace('_', "").parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// A byte count that must be at least 1; `_` may group digits.
pub fn positive_u64(text: &str) -> Result<u64, String> {
    match text.replace('_', "").parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of bytes")),
    }
}

/// Parses a command line (program name first) the way `main` does, for tests.
#[cfg(test)]
pub fn parse(args: &[&str]) -> Result<Command, clap::Error> {
    use clap::Parser as _;
    Cli::try_parse_from(std::iter::once("firstbyte-bench").chain(args.iter().copied()))
        .map(|c| c.command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    #[test]
    fn counts_refuse_zero_and_non_numbers() {
        assert_eq!(positive("7"), Ok(7));
        assert_eq!(positive("10_000"), Ok(10_000));
        assert!(positive("0").is_err());
        assert!(positive("-1").is_err());
        assert!(positive("five").is_err());
        assert!(positive("").is_err());
        assert_eq!(positive_u64("1_073_741_824"), Ok(1 << 30));
        assert!(positive_u64("0").is_err());
        assert!(positive_u64("1G").is_err());
    }

    #[test]
    fn usage_errors_exit_2_and_help_exits_0() {
        let e = parse(&["bogus"]).expect_err("unknown subcommand");
        assert_eq!(e.exit_code(), 2);
        let e = parse(&[]).expect_err("no subcommand");
        assert_eq!(e.exit_code(), 2);
        let e = parse(&["loopback", "--runs", "x"]).expect_err("bad value");
        assert_eq!((e.kind(), e.exit_code()), (ErrorKind::ValueValidation, 2));
        let e = parse(&["loopback", "--help"]).expect_err("help is an early exit");
        assert_eq!((e.kind(), e.exit_code()), (ErrorKind::DisplayHelp, 0));
        let help = e.to_string();
        for opt in ["--quick", "--out", "--runs", "--only", "--servers"] {
            assert!(help.contains(opt), "{opt} missing from:\n{help}");
        }
    }

    #[test]
    fn the_parser_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
