//! The bench clients' "accept any certificate" verifier (the bench's certificates are
//! self-made). The bench keeps its own rather than using `firstbyte::tls::AnyServerCert`: it
//! runs the server as a binary beside nginx and h2o and does not link the server crate.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// Accepts any certificate chain for any name.
#[derive(Debug)]
pub struct AnyCert {
    provider: Arc<CryptoProvider>,
    /// Whether handshake signatures are checked (the client then does a browser's work).
    check_signatures: bool,
}

impl AnyCert {
    /// Checks the handshake signature with the provider's algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> Arc<Self> {
        Arc::new(Self {
            provider,
            check_signatures: true,
        })
    }

    /// Checks nothing: a handshake-rate bench measures the server, and the client's CPU
    /// must not be what limits the rate.
    pub fn unchecked(provider: Arc<CryptoProvider>) -> Arc<Self> {
        Arc::new(Self {
            provider,
            check_signatures: false,
        })
    }
}

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if !self.check_signatures {
            return Ok(HandshakeSignatureValid::assertion());
        }
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if !self.check_signatures {
            return Ok(HandshakeSignatureValid::assertion());
        }
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
