//! `firstbyte-bench`: controlled benchmarks that print numbers.
//!
//! - `firstbyte-bench run PLAN.toml [--quick] [--out DIR]`: the WAN bench (cold connections
//!   through `firstbyte-netem`, randomized interleave, percentiles with confidence intervals).
//! - `firstbyte-bench loopback [--quick] [--out DIR]`: firstbyte beside nginx and h2o on
//!   loopback, server CPU per operation.
//! - `firstbyte-bench records [--rounds N] [--size BYTES]`: single-connection throughput of each
//!   TLS record policy.
//! - `firstbyte-bench sslcache [--quick] [--out DIR]`: the SSL object cache (`-t` and reloads
//!   beside nginx, handshakes with certificates by variable).
//! - `firstbyte-bench idle-load [--quick] [--out DIR]`: request latency under h2load with and
//!   without 10,000 idle TLS connections, interleaved rounds.
//! - `firstbyte-bench burst-idle [--quick] [--variant LABEL=PATH ...] [--nginx]`: the
//!   server's memory after 10,000 idle TLS connections close, every second for 75 s.
//!
//! - `firstbyte-bench ktls [--h2] [--quick] [--out DIR]`: kernel TLS + sendfile against
//!   user-space TLS and nginx's kTLS, in a VM with Debian's kernel (`scripts/ktls-vm --bench`);
//!   `--h2`: HTTP/2 over kernel TLS against HTTP/2 in user space.
//!
//! One clap parser ([`cli`]) reads every subcommand's options (`firstbyte-bench SUBCOMMAND
//! --help` lists them); a bad value exits with code 2. Long runs print progress with an ETA
//! ([`progress`]).

mod burst_idle;
mod cli;
mod idle_load;
mod ktls;
mod loopback;
mod progress;
mod records;
mod sslcache;
mod tls;
mod wan;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    // Usage errors exit with code 2, --help and --version with 0.
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => wan::main(args),
        Command::Loopback(args) => loopback::main(args),
        Command::Records(args) => records::main(args),
        Command::Sslcache(args) => sslcache::main(args),
        Command::IdleLoad(args) => idle_load::main(args),
        Command::BurstIdle(args) => burst_idle::main(args),
        Command::Ktls(args) => ktls::main(args),
    };
    std::process::exit(code);
}
