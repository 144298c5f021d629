#!/bin/bash
# Instructions per MiB of a bulk download, HTTP/1.1 and HTTP/2, counted with callgrind (no
# hardware counters here; instruction counts do not depend on the machine's load).
#
#   bash bench/callgrind-bulk/run.sh OUTDIR [FIRSTBYTE]
#
# One firstbyte under valgrind (configured as the loopback bench's: TLS 1.3, AES-128-GCM,
# access_log off, one worker, plus `user root` so valgrind can write its profile) serves two
# files of real (pseudo-random, deterministic: AES-128-CTR of zeros under a zero key) data, 4 MiB and
# 64 MiB, from the page cache. For each protocol the counters are zeroed, curl downloads the
# small file and the profile is dumped, then the same for the large one (one connection each):
# instructions per MiB = (large - small) / 60, which leaves out the handshake and the
# connection's set-up. Only user space is counted (the kernel's copies are not).
# PROTOS: which of "h1 h2" to run (default both). Writes OUTDIR/summary.txt,
# OUTDIR/PROTO.annotate.txt (callgrind_annotate of the large run, exclusive, top 60 lines),
# OUTDIR/PROTO.memcpy.txt (the large run's copies by function).
set -euo pipefail
OUT=$(realpath -m "$1")
FB=$(realpath "${2:-target/release/firstbyte}")
PROTOS=${PROTOS:-h1 h2}
HERE=$(dirname "$(realpath "$0")")
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fb-cg-bulk.XXXXXX)
VG=
cleanup() {
    if [ -n "$VG" ]; then kill "$VG" 2>/dev/null || true; wait "$VG" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/root"
real() { # N MiB of deterministic pseudo-random bytes
    openssl enc -aes-128-ctr -K 00000000000000000000000000000000 \
        -iv 00000000000000000000000000000000 -nosalt < /dev/zero 2>/dev/null \
        | head -c $(($1 << 20)) || true
}
real 4 > "$W/root/4m"
real 64 > "$W/root/64m"
cat "$W/root/4m" "$W/root/64m" > /dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$W/key.pem" -out "$W/cert.pem" -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$W/fb.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $W/firstbyte.pid;
error_log $W/error.log error;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/octet-stream;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$PORT ssl;
        http2 on;
        server_name localhost;
        ssl_certificate $W/cert.pem;
        ssl_certificate_key $W/key.pem;
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        ssl_ecdh_curve X25519;
        root $W/root;
    }
}
CONF
valgrind --tool=callgrind --callgrind-out-file="$W/cg.%p" "$FB" -c "$W/fb.conf" \
    > "$W/valgrind.log" 2>&1 &
VG=$!
URL=https://127.0.0.1:$PORT
for _ in $(seq 1 600); do
    curl -skf -o /dev/null "$URL/4m" && break
    sleep 0.5
done
total() { # the dump's "totals:" (or "summary:") line
    awk '/^(totals|summary):/ { print $2; exit }' "$1"
}
DUMPS=0
dump() { # zero, download "$2" over "$1", check it, dump: the dump is $W/cg.$VG.$DUMPS
    callgrind_control -z "$VG" > /dev/null 2>&1
    local flag=--http1.1
    [ "$1" = h2 ] && flag=--http2
    curl -sSk --tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 --curves X25519 "$flag" \
        -o "$W/got" -w '%{http_version}' "$URL/$2" > "$W/version"
    cmp -s "$W/got" "$W/root/$2" || { echo "$1 /$2: the body differs" >&2; exit 1; }
    [ "$(cat "$W/version")" = "${1#h}" ] || [ "$1" = h1 -a "$(cat "$W/version")" = 1.1 ] \
        || { echo "$1 /$2: got HTTP/$(cat "$W/version")" >&2; exit 1; }
    callgrind_control -d "$VG" > /dev/null 2>&1
    DUMPS=$((DUMPS + 1))
    for _ in $(seq 1 100); do [ -s "$W/cg.$VG.$DUMPS" ] && break; sleep 0.2; done
}
{
    echo "firstbyte: $FB"
    echo "label: ${LABEL:-$(git -C "$HERE" describe --always --dirty 2>/dev/null || echo '?')}"
    echo "per MiB: (Ir of 64 MiB - Ir of 4 MiB) / 60; memcpy: calls to and exclusive Ir of functions named mem(cpy|move), per MiB"
    echo "protocol  Ir_4m  Ir_64m  Ir_per_MiB  memcpy_calls_per_MiB  memcpy_Ir_per_MiB"
} > "$OUT/summary.txt"
for proto in $PROTOS; do
    dump "$proto" 4m; fs=$W/cg.$VG.$DUMPS
    dump "$proto" 64m; fl=$W/cg.$VG.$DUMPS
    a=$(total "$fs"); b=$(total "$fl")
    read -r ca ia < <(python3 "$HERE/calls_re.py" "$fs" 'mem(cpy|move)' | head -1)
    read -r cb ib < <(python3 "$HERE/calls_re.py" "$fl" 'mem(cpy|move)' | head -1)
    echo "$proto  $a  $b  $(( (b - a) / 60 ))  $(( (cb - ca) / 60 ))  $(( (ib - ia) / 60 ))" \
        >> "$OUT/summary.txt"
    python3 "$HERE/calls_re.py" "$fl" 'mem(cpy|move)' > "$OUT/$proto.memcpy.txt"
    # KEEP: a directory to keep the raw profiles in (large files: not for a commit).
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$fs" "$KEEP/$proto.4m.cg"; cp "$fl" "$KEEP/$proto.64m.cg"; fi
    callgrind_annotate --auto=no "$fl" 2>/dev/null | head -60 > "$OUT/$proto.annotate.txt" || true
done
cat "$OUT/summary.txt"
