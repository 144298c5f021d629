//! The `firstbyte` command.

fn main() {
    std::process::exit(0);
}
