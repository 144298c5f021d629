//! (being written)

/// Entry point of the `wan` subcommand; returns the exit code.
pub fn main(_args: &[String]) -> i32 {
    eprintln!("firstbyte-bench: not built yet");
    2
}
