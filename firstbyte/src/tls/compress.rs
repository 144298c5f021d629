//! `ssl_certificate_compression` (RFC 8879): the compressors a server config offers, and their
//! cache.
//!
//! rustls compresses the whole TLS 1.3 Certificate message (chain and stapled OCSP response)
//! in the first algorithm of ours the client offered, and keeps the result per config, keyed
//! by the message, so a chain is compressed once, not per handshake. Its own brotli compressor
//! uses quality 11 for cached compressions: 2–8 ms for a 1.5–3 KB chain here, paid by the
//! first handshake after a load (and by every handshake whose chain fell out of the cache).
//! Quality 5 takes 20–50 µs and leaves 0–4% more, about zlib's best
//! (bench/results/2026-11-26-cert-compression, `compressors.txt`).

use std::io::Write;
use std::sync::Arc;

use rustls::compress::{
    CertCompressor, CompressionCache, CompressionFailed, CompressionLevel, ZLIB_COMPRESSOR,
};
use rustls::CertificateCompressionAlgorithm;
use rustls::ServerConfig;

use crate::conf::model::TlsConf;

/// Brotli at quality 5 whatever the level (see the module doc).
#[derive(Debug)]
struct Brotli;

/// Brotli's quality: the figures in the module doc.
const QUALITY: u32 = 5;
/// Brotli's default window (4 MB). Measured: with a 64 KB window quality 5 took 1.5–3 ms on the
/// same chains, for the same sizes.
const LGWIN: u32 = 22;

impl CertCompressor for Brotli {
    fn compress(&self, input: Vec<u8>, _: CompressionLevel) -> Result<Vec<u8>, CompressionFailed> {
        let mut w =
            brotli::CompressorWriter::new(Vec::with_capacity(input.len()), 4096, QUALITY, LGWIN);
        w.write_all(&input).map_err(|_| CompressionFailed)?;
        Ok(w.into_inner())
    }

    fn algorithm(&self) -> CertificateCompressionAlgorithm {
        CertificateCompressionAlgorithm::Brotli
    }
}

static BROTLI: Brotli = Brotli;

/// Chains a config whose certificates are named with variables keeps compressed.
const DYNAMIC_CHAINS: usize = 64;

/// Sets `config`'s compressors from `tls`: brotli then zlib when on (rustls takes the first
/// of ours the client offers: Chrome offers brotli, Safari zlib, Firefox both), none when
/// off. The cache holds every pair of `ssl_certificate` (`pairs`) in both algorithms, or
/// [`DYNAMIC_CHAINS`] for certificates named with variables (`pairs` 0). Compressed client
/// certificates are never taken, as nginx (`SSL_OP_NO_RX_CERTIFICATE_COMPRESSION`).
pub fn configure(config: &mut ServerConfig, tls: &TlsConf, pairs: usize) {
    config.cert_decompressors = Vec::new();
    if !tls.certificate_compression {
        config.cert_compressors = Vec::new();
        config.cert_compression_cache = Arc::new(CompressionCache::Disabled);
        return;
    }
    config.cert_compressors = vec![&BROTLI, ZLIB_COMPRESSOR];
    let chains = if pairs == 0 {
        DYNAMIC_CHAINS
    } else {
        pairs.max(2)
    };
    let size = chains * config.cert_compressors.len();
    config.cert_compression_cache = Arc::new(CompressionCache::new(size));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::compress::BROTLI_DECOMPRESSOR;

    /// What [`Brotli`] makes, brotli's own decompressor (the one rustls clients use) restores,
    /// and it is smaller for repetitive input.
    #[test]
    fn brotli_round_trips() {
        let input: Vec<u8> = (0..3000u32).map(|i| (i % 97) as u8).collect();
        let packed = Brotli
            .compress(input.clone(), CompressionLevel::Amortized)
            .expect("compress");
        assert!(packed.len() < input.len() / 4, "{}", packed.len());
        let mut out = vec![0u8; input.len()];
        BROTLI_DECOMPRESSOR
            .decompress(&packed, &mut out)
            .expect("decompress");
        assert_eq!(out, input);
    }
}
