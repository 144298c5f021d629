//! The `firstbyte` command: see `firstbyte -h`.
//!
//! The allocator is glibc's unless the build chooses another (features `jemalloc`,
//! `mimalloc`; see `server::trim` and bench/results/2026-12-02-burst-idle/).

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start: a background thread purges freed pages as they
/// age (without it, purging happens only when the program allocates, and an idle server
/// never does), dirty pages are returned after 1 s, and muzzy ones at once.
#[cfg(feature = "jemalloc")]
#[export_name = "_rjem_malloc_conf"]
#[used]
static JEMALLOC_CONF: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(firstbyte::cli::main(std::env::args().collect()));
}
