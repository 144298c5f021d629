//! Certificate chains shaped like a public CA's, for first-flight measurements (QUIC's
//! anti-amplification limit in `http3_interop.rs`, certificate compression in
//! `cert_compression.rs`).

use std::path::Path;

/// In `dir`, `NAME.crt`/`NAME.key` for each NAME of [`CHAINS`]: the built-in site's kind
/// (made as it is made), and two-level chains (leaf + intermediate) shaped like a public CA's:
/// AIA, CRL distribution point, policies, key identifiers, and an SCT list of two SCTs' size.
/// Serial numbers are kept in `dir` (tests running at once share the test CA).
pub fn ca_shaped_chains(dir: &Path) {
    // As `tls::self_signed` makes it for the built-in site (ECDSA P-256, self-signed).
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let names = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "firstbyte built-in site");
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("builtin.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("builtin.key"), key.serialize_pem()).unwrap();
    let ca = super::certs().ca();
    let ca_key = super::certs().dir.join("ca.key");
    let sct: String = (0..240)
        .map(|i| format!("{:02x}", (i * 37 + 11) % 256))
        .collect();
    super::sh(
        &format!(
            r#"
cat > int.ext <<EOF
basicConstraints=critical,CA:TRUE,pathlen:0
keyUsage=critical,digitalSignature,keyCertSign,cRLSign
extendedKeyUsage=serverAuth,clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
authorityInfoAccess=caIssuers;URI:http://x1.i.lencr.org/
crlDistributionPoints=URI:http://x1.c.lencr.org/
certificatePolicies=2.23.140.1.2.1
EOF
cat > leaf.ext <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
authorityInfoAccess=OCSP;URI:http://r11.o.lencr.org,caIssuers;URI:http://r11.i.lencr.org/
subjectAltName=DNS:localhost,DNS:www.localhost
certificatePolicies=2.23.140.1.2.1
crlDistributionPoints=URI:http://r11.c.lencr.org/42.crl
1.3.6.1.4.1.11129.2.4.2=ASN1:FORMAT:HEX,OCTETSTRING:{sct}
EOF
chain() {{ # name keyspec
  openssl req -newkey $2 -nodes -subj "/C=US/O=Let's Encrypt/CN=$1-int" -keyout $1-int.key -out $1-int.csr 2>/dev/null
  openssl x509 -req -in $1-int.csr -CA '{ca}' -CAkey '{ca_key}' -CAcreateserial -CAserial serial.srl -days 30 -extfile int.ext -out $1-int.crt 2>/dev/null
  openssl req -newkey $2 -nodes -subj /CN=localhost -keyout $1.key -out $1.csr 2>/dev/null
  openssl x509 -req -in $1.csr -CA $1-int.crt -CAkey $1-int.key -CAcreateserial -CAserial serial.srl -days 30 -extfile leaf.ext -out $1.leaf 2>/dev/null
  cat $1.leaf $1-int.crt > $1.crt
}}
chain ecdsa "ec -pkeyopt ec_paramgen_curve:P-256"
chain rsa rsa:2048
# Three certificates: the RSA chain plus a cross-signed RSA 4096 root, as Let's Encrypt served
# until 2024 (ISRG Root X1 signed by DST Root CA X3).
openssl req -newkey rsa:4096 -nodes -subj "/C=US/O=Internet Security Research Group/CN=ISRG Root X1" -keyout x1.key -out x1.csr 2>/dev/null
openssl x509 -req -in x1.csr -CA '{ca}' -CAkey '{ca_key}' -CAcreateserial -CAserial serial.srl -days 30 -extfile int.ext -out x1.crt 2>/dev/null
cat rsa.crt x1.crt > rsa3.crt
cp rsa.key rsa3.key
chmod 644 *.key
"#,
            ca = ca.display(),
            ca_key = ca_key.display(),
        ),
        dir,
    );
}

/// The chains [`ca_shaped_chains`] makes: the built-in site's certificate, leaf + intermediate
/// in ECDSA P-256 and in RSA 2048, and the RSA chain with a cross-signed RSA 4096 root.
pub const CHAINS: [&str; 4] = ["builtin", "ecdsa", "rsa", "rsa3"];
