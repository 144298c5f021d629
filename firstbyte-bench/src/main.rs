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

mod idle_load;
mod loopback;
mod records;
mod sslcache;
mod tls;
mod wan;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("run") => wan::main(&args[1..]),
        Some("loopback") => loopback::main(&args[1..]),
        Some("records") => records::main(&args[1..]),
        Some("sslcache") => sslcache::main(&args[1..]),
        Some("idle-load") => idle_load::main(&args[1..]),
        _ => {
            eprintln!("usage: firstbyte-bench run PLAN.toml [--quick] [--out DIR]");
            eprintln!("       firstbyte-bench loopback [--quick] [--out DIR]");
            eprintln!("       firstbyte-bench records [--rounds N] [--size BYTES]");
            eprintln!("       firstbyte-bench sslcache [--quick] [--out DIR] [--rounds N]");
            eprintln!(
                "       firstbyte-bench idle-load [--quick] [--out DIR] [--rounds N] [--idle N] [--requests N]"
            );
            2
        }
    };
    std::process::exit(code);
}
