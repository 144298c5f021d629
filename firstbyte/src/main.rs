//! The `firstbyte` command: see `firstbyte -h`.

fn main() {
    std::process::exit(firstbyte::cli::main(std::env::args().collect()));
}
