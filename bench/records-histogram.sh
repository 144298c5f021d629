#!/usr/bin/env bash
# The TLS records each policy writes on one busy loopback connection, counted from the server's
# own system calls: for each policy a fresh firstbyte (release build) serves one download of a
# sparse file over TLS 1.3 AES-128-GCM to curl, under `strace -f`; every iovec of a `writev`
# is one record (rustls hands firstbyte whole records), so the iovec lengths are the records'
# sizes on the wire (plaintext + 22 bytes). Prints, per policy, the writev calls, the records
# by size, and the TCP_INFO reads (getsockopt) the policy made. strace slows the server, so
# the times it prints mean nothing; the counts are exact.
#
#   bash bench/records-histogram.sh [MIB]     (default 256 MiB per download; ~1 min)
#
# Needs strace and curl (installed with apt-get when missing). Leaves nothing behind.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
mib=${1:-256}
bin=${FIRSTBYTE:-$root/target/release/firstbyte}
[ -x "$bin" ] || { echo "records-histogram: $bin missing: cargo build --release -p firstbyte" >&2; exit 1; }
for t in strace curl openssl perl; do
    command -v $t >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$t" >/dev/null
done

dir=$(mktemp -d /tmp/fb-records-hist.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then pkill -TERM -P "$pid" || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
chmod 755 "$dir"  # the server reads the file as `nobody`
mkdir -p "$dir/www"
truncate -s $((mib << 20)) "$dir/www/big.bin"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" \
    -out "$dir/cert.pem" -subj /CN=localhost -days 2 2>/dev/null

port=19471
echo "one ${mib} MiB download per policy, TLS 1.3 AES-128-GCM, HTTP/1.1, loopback; $("$bin" -v 2>&1 | head -1)"
for policy in "static 16k|ssl_buffer_size 16k; ssl_dyn_rec_enable off;" \
    "dynamic defaults|ssl_dyn_rec_enable on;" \
    "adaptive|ssl_dyn_rec_enable adaptive;"; do
    name=${policy%%|*}
    directives=${policy#*|}
    cat >"$dir/fb.conf" <<EOF
worker_processes 1;
pid off;
error_log $dir/error.log;
events {}
http {
    access_log off;
    types { application/octet-stream bin; }
    ssl_protocols TLSv1.3;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    root $dir/www;
    server { listen 127.0.0.1:$port ssl; $directives }
}
EOF
    strace -f -qq -e trace=writev,write,sendmsg,getsockopt -o "$dir/trace" "$bin" -c "$dir/fb.conf" &
    pid=$!
    for _ in $(seq 100); do
        curl -sk -o /dev/null "https://localhost:$port/nothing" 2>/dev/null && break
        sleep 0.1
    done
    : >"$dir/trace.mark"
    lines=$(wc -l <"$dir/trace")
    got=$(curl -sk --http1.1 --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null -w '%{size_download}' \
        "https://localhost:$port/big.bin")
    # strace detaches on SIGTERM and would leave firstbyte running: stop firstbyte.
    pkill -TERM -P "$pid" || true
    wait "$pid" 2>/dev/null || true
    pid=
    [ "$got" = $((mib << 20)) ] || { echo "records-histogram: $name: got $got bytes" >&2; exit 1; }
    echo
    echo "== $name ($directives)"
    tail -n +$((lines + 1)) "$dir/trace" | perl -ne '
        next unless /^\d+\s+(\w+)\(/;
        my $call = $1;
        if ($call eq "getsockopt") { $info++ if /TCP_INFO/; next }
        next unless $call eq "writev";
        $calls++;
        while (/iov_len=(\d+)/g) { $len{$1}++; $records++; $bytes += $1 }
        END {
            printf "writev calls %d, records %d, bytes %d, TCP_INFO reads %d\n",
                $calls, $records, $bytes, $info // 0;
            printf "records of %6d bytes: %6d (%.2f%%)\n", $_, $len{$_}, 100 * $len{$_} / $records
                for sort { $len{$b} <=> $len{$a} || $a <=> $b } grep { $len{$_} * 1000 >= $records } keys %len;
            my $small = 0;
            $small += $len{$_} for grep { $len{$_} * 1000 < $records } keys %len;
            printf "other sizes (each < 0.1%%):  %6d\n", $small if $small;
        }'
    port=$((port + 1))
done
