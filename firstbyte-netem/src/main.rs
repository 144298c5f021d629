//! firstbyte-netem: a user-space network emulator (see README).

fn main() {
    eprintln!("firstbyte-netem: not built yet");
    std::process::exit(2);
}
