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

/// Write size: 64 KB, large enough that system calls cost nothing next to the link.
const CHUNK: usize = 64 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["sink", port] => sink(port),
        ["send", addr, port, bytes] => send(addr, port, bytes),
        _ => Err(anyhow::anyhow!(
            "usage: firstbyte-netem-probe sink PORT | send ADDR|server PORT BYTES"
        )),
    };
    if let Err(e) = result {
        eprintln!("firstbyte-netem-probe: {e:#}");
        std::process::exit(1);
    }
}

/// Serves connections until killed.
fn sink(port: &str) -> Result<()> {
    let port: u16 = port.parse().context("port")?;
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
fn send(addr: &str, port: &str, bytes: &str) -> Result<()> {
    let addr = if addr == "server" {
        std::env::var("FB_SERVER_ADDR").context("FB_SERVER_ADDR")?
    } else {
        addr.to_string()
    };
    let port: u16 = port.parse().context("port")?;
    let bytes: u64 = bytes.parse().context("byte count")?;
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
