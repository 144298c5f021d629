#!/bin/bash
# Instructions per static 1 KiB request, per protocol, counted with callgrind (no hardware
# counters here; instruction counts do not depend on the machine's load).
#
#   bash bench/callgrind-static/run.sh OUTDIR [FIRSTBYTE]
#
# FIRSTBYTE defaults to target/release/firstbyte (profile.release has debug = 1); LABEL names
# it in the summary (default: the worktree's git describe). One server
# under valgrind serves /1k (1,024 bytes) over TLS 1.3 (HTTP/1.1, HTTP/2) and QUIC (HTTP/3),
# configured as the loopback bench's firstbyte (access_log off, one worker) plus `user root`
# (valgrind writes its profile as the user that started it). For each protocol the counters
# are zeroed, a small run is made and dumped, zeroed again, a large run made and dumped:
# instructions per request = (large - small) / (N - N_SMALL), which leaves out the
# connection's handshake, set-up and teardown (each run is one connection).
#   HTTP/2:   h2load -c 1 -m 10        (N=20000, N_SMALL=2000)
#   HTTP/1.1: h2load --h1 -c 1 -m 1    (same)
#   HTTP/3:   h3-load.py, 10 in flight (H3_N=3000, H3_SMALL=500; aioquic is slow)
#   h2b:      as h2, but a browser-like request: an asset path (1,024 bytes at
#             /assets/js/application-3f2a9c.js, Huffman-coded by nghttp2) with Chromium 131's
#             request headers (user-agent, accept*, sec-ch-ua*, sec-fetch-*, referer, priority,
#             a 317-byte cookie), so HPACK's Huffman decoding and dynamic table are in the count
#   h1b:      as h1, with h2b's path and headers (h2load --h1 -H ...)
#   h3b:      as h3, with h2b's path and headers (h3-load.py -H ...; aioquic's QPACK encoder
#             Huffman-codes them, with no dynamic table as the server's settings allow none)
# AIOQUIC_PYTHON: a python with aioquic (default target/tools/aioquic/bin/python, which
# `bash scripts/test` installs); PROTOS: which of "h2 h1 h3 h2b h1b h3b" to run (default the
# first three). Writes OUTDIR/summary.txt, OUTDIR/PROTO.annotate.txt
# (callgrind_annotate of the large run, inclusive) and OUTDIR/PROTO.callgrind.gz.
set -euo pipefail
OUT=$(realpath -m "$1")
FB=$(realpath "${2:-target/release/firstbyte}")
N=${N:-20000}
N_SMALL=${N_SMALL:-2000}
H3_N=${H3_N:-3000}
H3_SMALL=${H3_SMALL:-500}
PY=${AIOQUIC_PYTHON:-target/tools/aioquic/bin/python}
PROTOS=${PROTOS:-h2 h1 h3}
HERE=$(dirname "$(realpath "$0")")
mkdir -p "$OUT"
W=$(mktemp -d /tmp/fb-cg-static.XXXXXX)
VG=
cleanup() {
    if [ -n "$VG" ]; then kill "$VG" 2>/dev/null || true; wait "$VG" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/root"
head -c 1024 /dev/zero | tr '\0' 'x' > "$W/root/1k"
mkdir -p "$W/root/assets/js"
cp "$W/root/1k" "$W/root/assets/js/application-3f2a9c.js"
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
        listen 127.0.0.1:$PORT quic;
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
URL=https://127.0.0.1:$PORT/1k
for _ in $(seq 1 600); do
    curl -skf -o /dev/null "$URL" && break
    sleep 0.5
done
curl -skf -o /dev/null "$URL"

total() { # the dump's "totals:" (or "summary:") line
    awk '/^(totals|summary):/ { print $2; exit }' "$1"
}
DUMPS=0
dump() { # zero, run "$@", dump: the dump is $W/cg.$VG.$DUMPS
    callgrind_control -z "$VG" > /dev/null 2>&1
    "$@" > "$W/client.log" 2>&1 || { cat "$W/client.log" >&2; exit 1; }
    callgrind_control -d "$VG" > /dev/null 2>&1
    DUMPS=$((DUMPS + 1))
    for _ in $(seq 1 100); do [ -s "$W/cg.$VG.$DUMPS" ] && break; sleep 0.2; done
}
h2() { h2load -n "$1" -c 1 -m 10 "$URL"; }
h1() { h2load --h1 -n "$1" -c 1 -m 1 "$URL"; }
h3() { "$PY" "$HERE/h3-load.py" "https://localhost:$PORT/1k" "$1" 10; }
# Chromium 131's request for a script on Linux; the cookie is 317 bytes (a session id, a CSRF
# token, consent and analytics ids). The loopback bench sends the same set
# (firstbyte-bench/src/loopback/chromium.rs; a unit test there reads this file and compares).
COOKIE="_session_id=9f8e7d6c5b4a39281706f5e4d3c2b1a0; csrf_token=Yq3vXk9PzL2mN8rT5wB7cD1fG4hJ6sA0eU; cookie_consent=accepted.2026-11-30.v2; _ga=GA1.1.1234567890.1764460800; _ga_ABCDEF1234=GS1.1.1764460800.3.1.1764461234.0.0.0; theme=dark; lang=en-US; recently_viewed=sku-10442%2Csku-20931%2Csku-33107; ab_bucket=checkout-v3-b"
# The browser-like request's headers, in Chromium's order (h2b, h1b, h3b).
BROWSER=(
    -H 'sec-ch-ua: "Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'
    -H 'sec-ch-ua-mobile: ?0'
    -H 'user-agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
    -H 'sec-ch-ua-platform: "Linux"'
    -H 'accept: */*'
    -H 'sec-fetch-site: same-origin'
    -H 'sec-fetch-mode: no-cors'
    -H 'sec-fetch-dest: script'
    -H "referer: https://127.0.0.1:$PORT/"
    -H 'accept-encoding: gzip, deflate, br, zstd'
    -H 'accept-language: en-US,en;q=0.9'
    -H "cookie: $COOKIE"
    -H 'priority: u=1'
)
ASSET=/assets/js/application-3f2a9c.js
h2b() { h2load -n "$1" -c 1 -m 10 "${BROWSER[@]}" "https://127.0.0.1:$PORT$ASSET"; }
h1b() { h2load --h1 -n "$1" -c 1 -m 1 "${BROWSER[@]}" "https://127.0.0.1:$PORT$ASSET"; }
h3b() { "$PY" "$HERE/h3-load.py" "https://localhost:$PORT$ASSET" "$1" 10 "${BROWSER[@]}"; }

{
    echo "firstbyte: $FB"
    echo "label: ${LABEL:-$(git -C "$HERE" describe --always --dirty 2>/dev/null || echo '?')}"
    echo "per request: (large - small) / (large_n - small_n); statx, clock reads (Timespec::now), malloc: calls"
    echo "protocol  small_n  large_n  Ir_small  Ir_large  Ir_per_request  statx  clock_reads  malloc"
} > "$OUT/summary.txt"
for proto in $PROTOS; do
    case $proto in h3*) quic=1 ;; *) quic= ;; esac
    if [ -n "$quic" ]; then small=$H3_SMALL; large=$H3_N; else small=$N_SMALL; large=$N; fi
    if [ -n "$quic" ] && ! [ -x "$PY" ]; then
        echo "$proto: no aioquic python at $PY, skipped" >> "$OUT/summary.txt"
        continue
    fi
    dump "$proto" "$small"; fs=$W/cg.$VG.$DUMPS
    dump "$proto" "$large"; fl=$W/cg.$VG.$DUMPS
    if [ -z "$quic" ]; then
        grep -q "requests: $large total, $large started, $large done, $large succeeded" "$W/client.log" \
            || { cat "$W/client.log" >&2; echo "$proto: not every request succeeded" >&2; exit 1; }
    fi
    a=$(total "$fs"); b=$(total "$fl")
    per=$(( (b - a) / (large - small) ))
    calls=$(python3 - "$HERE/calls.py" "$fs" "$fl" "$small" "$large" <<'PY'
import subprocess, sys
tool, fs, fl, small, large = sys.argv[1:]
names = ["statx", "<std::sys::pal::unix::time::Timespec>::now", "malloc"]
def calls(f):
    out = subprocess.run(["python3", tool, f] + names, capture_output=True, text=True).stdout
    return {l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in out.splitlines()}
a, b = calls(fs), calls(fl)
print("  ".join(f"{(b[n] - a[n]) / (int(large) - int(small)):.2f}" for n in names))
PY
)
    echo "$proto  $small  $large  $a  $b  $per  $calls" >> "$OUT/summary.txt"
    callgrind_annotate --inclusive=yes "$fl" > "$W/annotate.txt" 2>/dev/null || true
    head -150 "$W/annotate.txt" > "$OUT/$proto.annotate.txt"
    gzip -9c "$fl" > "$OUT/$proto.callgrind.gz"
done
cat "$OUT/summary.txt"
