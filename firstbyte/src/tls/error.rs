//! Errors of the TLS layer, worded as nginx words them.
//!
//! Loading a file yields a [`LoadReason`] (what was wrong with the bytes or the file);
//! [`ObjectStore`](super::ObjectStore) wraps it with the file's name into a [`TlsError`],
//! which the runtime prints after `[emerg]`. Nothing here formats positions: the caller
//! adds ` in FILE:LINE` where nginx does.

use std::fmt;
use std::io;

use crate::conf::model::Source;

/// An error building TLS objects from a [`TlsConf`](crate::conf::model::TlsConf).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `ssl_certificate` could not be loaded.
    #[error("cannot load certificate \"{name}\": {reason}")]
    Certificate {
        /// The file (or `data:...`) as written.
        name: String,
        /// What went wrong.
        reason: LoadReason,
    },
    /// `ssl_certificate_key` could not be loaded.
    #[error("cannot load certificate key \"{name}\": {reason}")]
    CertificateKey {
        /// The file (or `data:...`) as written.
        name: String,
        /// What went wrong.
        reason: LoadReason,
    },
    /// A certificate named with variables failed to load a moment ago and its files have
    /// not changed since (`ssl_certificate_cache` keeps the failure; it was logged then).
    #[error("certificate failed to load before and its files are unchanged")]
    KnownFailure,
    /// The key does not belong to the certificate.
    #[error("SSL_CTX_use_PrivateKey(\"{key}\") failed (key values mismatch with certificate \"{cert}\")")]
    KeyMismatch {
        /// The certificate's name.
        cert: String,
        /// The key's name.
        key: String,
    },
    /// `ssl_password_file` could not be read.
    #[error("open() \"{name}\" failed ({}) in \"ssl_password_file\"", crate::log::OsError(.error))]
    PasswordFile {
        /// The password file.
        name: String,
        /// The I/O error.
        error: io::Error,
    },
    /// `ssl_client_certificate` could not be loaded.
    #[error("SSL_CTX_load_verify_locations(\"{name}\") failed ({reason})")]
    ClientCertificate {
        /// The CA bundle.
        name: String,
        /// What went wrong.
        reason: LoadReason,
    },
    /// `ssl_verify_client on|optional` without `ssl_client_certificate`.
    #[error("no ssl_client_certificate for ssl_verify_client")]
    NoClientCertificate,
    /// A TLS server without `ssl_certificate`.
    #[error("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive")]
    NoCertificate,
    /// `ssl_protocols` leaves nothing rustls speaks.
    #[error("no protocols enabled in \"ssl_protocols\" (firstbyte speaks TLSv1.2 and TLSv1.3)")]
    NoProtocols,
    /// `ssl_ciphers` selects no TLS 1.2 suite while TLS 1.2 is enabled.
    #[error("SSL_CTX_set_cipher_list(\"{0}\") failed: no cipher match")]
    CipherList(String),
    /// `ssl_conf_command Ciphersuites` names an unknown suite, or selects none while TLS 1.3 is enabled.
    #[error("SSL_CONF_cmd(\"Ciphersuites\", \"{0}\") failed: no cipher match")]
    Ciphersuites(String),
    /// `ssl_ecdh_curve` names an unknown group, or none that rustls offers.
    #[error("SSL_CTX_set1_curves_list(\"{list}\") failed: {reason}")]
    Curves {
        /// The list as written.
        list: String,
        /// What was wrong.
        reason: String,
    },
    /// `ssl_session_ticket_key` could not be read.
    #[error("open() \"{name}\" failed ({}) in \"ssl_session_ticket_key\"", crate::log::OsError(.error))]
    TicketKeyFile {
        /// The key file.
        name: String,
        /// The I/O error.
        error: io::Error,
    },
    /// `ssl_session_ticket_key` has the wrong size.
    #[error("\"{name}\" must be 48 or 80 bytes (has {len})")]
    TicketKeySize {
        /// The key file.
        name: String,
        /// Its size in bytes.
        len: usize,
    },
    /// `ssl_stapling_file` could not be read or is not an OCSP response.
    #[error("cannot load OCSP response \"{name}\" from \"ssl_stapling_file\": {reason}")]
    StaplingFile {
        /// The response file.
        name: String,
        /// What went wrong.
        reason: LoadReason,
    },
    /// `proxy_ssl_crl` (or `ssl_crl`) could not be loaded.
    #[error("X509_load_crl_file(\"{name}\") failed ({reason})")]
    Crl {
        /// The CRL file.
        name: String,
        /// What went wrong.
        reason: LoadReason,
    },
    /// `proxy_ssl_name` (or the `proxy_pass` host) is not a valid TLS server name.
    #[error("invalid \"proxy_ssl_name\" \"{0}\"")]
    ServerName(String),
    /// The system's random generator failed.
    #[error("RAND_bytes() failed")]
    Random,
    /// Making the built-in self-signed certificate failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    SelfSigned(#[source] rcgen::Error),
    /// rustls refused the configuration.
    #[error("SSL_CTX_new() failed ({0})")]
    Rustls(#[from] rustls::Error),
}

/// What was wrong with a certificate, key or CA file.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadReason {
    /// The file could not be opened or read.
    Io(io::Error),
    /// The PEM text is malformed (truncated, bad base64, bad armour).
    Pem(String),
    /// No `CERTIFICATE` section.
    NoCertificate,
    /// A certificate rustls/webpki cannot parse.
    BadCertificate(String),
    /// No private key section.
    NoKey,
    /// A key rustls cannot use (unsupported algorithm or malformed DER).
    UnsupportedKey(String),
    /// A legacy OpenSSL-encrypted PEM key (`Proc-Type: 4,ENCRYPTED`).
    LegacyEncrypted,
    /// An encrypted PKCS#8 key and no `ssl_password_file`.
    NoPassword,
    /// None of the passphrases decrypted the key.
    BadPassword {
        /// How many passphrases were tried.
        tried: usize,
    },
    /// An `ENCRYPTED PRIVATE KEY` that is malformed or uses an unsupported scheme.
    BadEncryptedKey(String),
    /// The empty file, or nothing usable in it.
    Empty,
}

impl fmt::Display for LoadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "BIO_new_file() failed ({})", crate::log::OsError(e)),
            Self::Pem(e) => write!(f, "PEM_read_bio() failed (bad PEM: {e})"),
            Self::NoCertificate => {
                f.write_str("PEM_read_bio_X509_AUX() failed (no start line: expecting CERTIFICATE)")
            }
            Self::BadCertificate(e) => write!(f, "d2i_X509() failed ({e})"),
            Self::NoKey => {
                f.write_str("PEM_read_bio_PrivateKey() failed (no start line: expecting PRIVATE KEY)")
            }
            Self::UnsupportedKey(e) => write!(f, "PEM_read_bio_PrivateKey() failed ({e})"),
            Self::LegacyEncrypted => f.write_str(
                "the key is encrypted in OpenSSL's legacy PEM format (Proc-Type: 4,ENCRYPTED), \
                 which firstbyte does not read; convert it to an encrypted PKCS#8 key with \
                 \"openssl pkcs8 -topk8 -in OLD.key -out NEW.key\"",
            ),
            Self::NoPassword => f.write_str(
                "PEM_read_bio_PrivateKey() failed (the key is encrypted and no \"ssl_password_file\" is set)",
            ),
            Self::BadPassword { tried } => write!(
                f,
                "PEM_read_bio_PrivateKey() failed (bad decrypt: none of the {tried} passphrase(s) in \"ssl_password_file\" fits)"
            ),
            Self::BadEncryptedKey(e) => {
                write!(f, "PEM_read_bio_PrivateKey() failed (encrypted key: {e})")
            }
            Self::Empty => f.write_str("the file is empty"),
        }
    }
}

/// How a [`Source`] is named in messages: the path, or `data:` and the first bytes.
pub fn source_name(source: &Source) -> String {
    /// Enough of inline PEM to recognise it, short enough for one log line.
    const DATA_SHOWN: usize = 24;
    match source {
        Source::File(p) => p.display().to_string(),
        Source::Data(d) => {
            let cut: String = d.chars().take(DATA_SHOWN).collect();
            if cut.len() < d.len() {
                format!("data:{cut}...")
            } else {
                format!("data:{cut}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn messages_in_nginx_words() {
        let e = TlsError::Certificate {
            name: "/etc/ssl/a.pem".into(),
            reason: LoadReason::NoCertificate,
        };
        assert!(e
            .to_string()
            .starts_with("cannot load certificate \"/etc/ssl/a.pem\": "));
        let e = TlsError::CertificateKey {
            name: "/k".into(),
            reason: LoadReason::LegacyEncrypted,
        };
        let s = e.to_string();
        assert!(s.starts_with("cannot load certificate key \"/k\": "));
        assert!(s.contains("openssl pkcs8 -topk8 -in OLD.key -out NEW.key"));
        assert_eq!(
            TlsError::CipherList("AES256-SHA".into()).to_string(),
            "SSL_CTX_set_cipher_list(\"AES256-SHA\") failed: no cipher match"
        );
    }

    #[test]
    fn source_names() {
        assert_eq!(
            source_name(&Source::File(PathBuf::from("/a/b.pem"))),
            "/a/b.pem"
        );
        let long = Source::Data("-----BEGIN CERTIFICATE-----\nMIIB".into());
        assert_eq!(source_name(&long), "data:-----BEGIN CERTIFICATE--...");
        assert_eq!(source_name(&Source::Data("x".into())), "data:x");
    }
}
