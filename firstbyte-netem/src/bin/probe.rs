//! firstbyte-netem-probe: a bulk TCP sender and sink for measuring an emulated link.
//!
//! `firstbyte-netem-probe sink PORT` accepts connections one at a time, reads each to EOF and
//! answers with the byte count (8 bytes, big-endian). `firstbyte-netem-probe send ADDR PORT
//! BYTES` connects (ADDR `server` means `$FB_SERVER_ADDR`), sends BYTES, half-closes, waits
//! for the sink's count, and prints `bytes=N seconds=S mbit_per_s=R` — goodput from the
//! moment the connection is up to the moment the sink has read the last byte (plus the
//! answer's one-way trip).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;

/// Write size: 64 KB, large enough that system calls cost nothing next to the link.
const CHUNK: usize = 64 * 1024;

/// A bulk TCP sender and sink for measuring an emulated link.
#[derive(Debug, Parser)]
#[command(name = "firstbyte-netem-probe", version)]
enum Probe {
    /// Accept connections one at a time, read each to EOF, answer with the byte count.
    Sink {
        /// TCP port to listen on (all addresses).
        port: u16,
    },
    /// Send BYTES to ADDR:PORT and print the goodput.
    Send {
        /// IPv4 address, or `server` for $FB_SERVER_ADDR.
        addr: String,
        /// TCP port.
        port: u16,
        /// Bytes to send.
        bytes: u64,
    },
}

fn main() {
    // A usage error exits with code 2 (clap), a failure with 1.
    let result = match Probe::parse() {
        Probe::Sink { port } => sink(port),
        Probe::Send { addr, port, bytes } => send(&addr, port, bytes),
    };
    if let Err(e) = result {
        eprintln!("firstbyte-netem-probe: {e:#}");
        std::process::exit(1);
    }
}

/// Serves connections until killed.
fn sink(port: u16) -> Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", port)).context("bind")?;
    let mut buf = vec![0u8; CHUNK];
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut total = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(_) => break,
            }
        }
        let _ = stream.write_all(&total.to_be_bytes());
    }
    Ok(())
}

/// Sends `bytes` and reports the goodput.
fn send(addr: &str, port: u16, bytes: u64) -> Result<()> {
    let addr = if addr == "server" {
        std::env::var("FB_SERVER_ADDR").context("FB_SERVER_ADDR")?
    } else {
        addr.to_string()
    };
    let mut stream = TcpStream::connect((addr.as_str(), port)).context("connect")?;
    let start = Instant::now();
    let chunk = vec![0u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        stream.write_all(&chunk[..n]).context("write")?;
        left -= n as u64;
    }
    stream.shutdown(Shutdown::Write).context("shutdown")?;
    let mut answer = [0u8; 8];
    stream
        .read_exact(&mut answer)
        .context("reading the sink's count")?;
    let seconds = start.elapsed().as_secs_f64();
    let received = u64::from_be_bytes(answer);
    if received != bytes {
        bail!("sink read {received} bytes, sent {bytes}");
    }
    println!(
        "bytes={bytes} seconds={seconds:.4} mbit_per_s={:.3}",
        bytes as f64 * 8.0 / seconds / 1e6
    );
    Ok(())
}
