#!/bin/sh
# Regenerates the TLS key fixtures that firstbyte's unit tests (src/tls/certs.rs) read:
# keys in every format OpenSSL writes, so the loader is tested against the real thing.
# Most TLS tests make their certificates with rcgen at run time; these cover what only
# OpenSSL produces. Test keys only: never use them for anything else.
# Usage: sh testdata/tls/make.sh   (needs openssl 1.1.1 or later)
set -eu
cd "$(dirname "$0")"
PASS=firstbyte

# EC P-256 in SEC1 ("EC PRIVATE KEY", preceded by "EC PARAMETERS"), and its certificate.
openssl ecparam -name prime256v1 -genkey -out ec.key
openssl req -new -x509 -key ec.key -subj /CN=localhost -days 36500 -out ec.crt
# The same key in an X.509 v1 certificate: what `openssl req -x509` makes when its config has
# no extensions section (nginx's test suite, many old self-signed certificates).
printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = localhost\n' > v1.cnf
openssl req -new -x509 -key ec.key -config v1.cnf -days 36500 -out ec-v1.crt
rm v1.cnf
# The same key as encrypted PKCS#8 (PBES2, PBKDF2-SHA256, AES-256-CBC): readable with ssl_password_file.
openssl pkcs8 -topk8 -v2 aes-256-cbc -in ec.key -passout pass:$PASS -out ec-pkcs8-aes256.key
# The same key in OpenSSL's legacy encrypted PEM (Proc-Type: 4,ENCRYPTED): refused with advice.
openssl ec -in ec.key -aes256 -passout pass:$PASS -out ec-legacy.key
# RSA 2048 as PKCS#1 ("RSA PRIVATE KEY") and its certificate, and in legacy encrypted PEM.
openssl genrsa -traditional -out rsa-pkcs1.key 2048 2>/dev/null
openssl req -new -x509 -key rsa-pkcs1.key -subj /CN=localhost -days 36500 -out rsa.crt
openssl rsa -in rsa-pkcs1.key -aes256 -traditional -passout pass:$PASS -out rsa-legacy.key
# ssl_password_file: a wrong passphrase first, then the right one (nginx tries each line).
printf 'wrong\n%s\n' "$PASS" > password.txt
# ssl_dhparam for the configuration corpus (scripts/conf-corpus): RFC 7919's ffdhe2048 group.
openssl genpkey -genparam -algorithm DH -pkeyopt group:ffdhe2048 -out ffdhe2048.pem
