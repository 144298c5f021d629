#!/bin/bash
# The guest side of `firstbyte-bench ktls` (run through `scripts/ktls-vm --bench`): three
# servers in one VM — firstbyte with kernel TLS + sendfile, firstbyte in user space, Debian's
# nginx with `ssl_conf_command Options KTLS; sendfile on;` — each downloaded from with curl
# (HTTP/1.1, TLS 1.3 AES-128-GCM): one file of SINGLE_MB over one connection, and SMALL_N
# files of SMALL_KB each on their own connection. Rounds interleave the servers (the order
# rotates). One line per run:
#   bench: SERVER CASE ROUND seconds=S cpu_ticks=T ticks_per_s=HZ bytes=B tls_tx=N
# (server CPU from /proc/PID/stat utime+stime of every server process; tls_tx: connections the
# kernel encrypted for, from /proc/net/tls_stat TlsTxSw).
#
# With a sixth argument `h2` the same three servers speak HTTP/2 and h2load downloads (TLS 1.3
# AES-128-GCM): the file of SINGLE_MB over one connection (`h2-single`), and the SMALL_N files
# over one connection, 10 streams at a time (`h2-small`). firstbyte's kTLS server runs with
# FIRSTBYTE_KTLS_H2=1, so its HTTP/2 connections switch to kernel TLS (frames written through
# the kernel's records, no sendfile); nginx's HTTP/2 writes through OpenSSL's kTLS the same way.
set -u
fb=$1
rounds=$2
single_mb=$3
small_n=$4
small_kb=$5
proto=${6:-h1}
h2=
[ "$proto" = h2 ] && h2="http2 on;"
w=/tmp/kb
mkdir -p $w/html $w/nginx
cd $w || exit 1
die() {
    echo "bench: ERROR $*"
    for f in curl.err nginx.err nginx/error.log fb-ktls.err; do
        [ -s $f ] && tail -5 $f | sed "s|^|bench:   $f: |"
    done
    exit 1
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout key.pem -out cert.pem -days 2 2>/dev/null || die "certificate"
head -c $((single_mb * 1000000)) /dev/zero | openssl enc -aes-128-ctr -K 00 -iv 00 -nosalt 2>/dev/null > html/single.bin
for i in $(seq "$small_n"); do
    head -c $((small_kb * 1000)) html/single.bin > html/s$i.bin
done
chmod -R a+rX $w

fbconf() { # PORT EXTRA
    cat <<EOF
pid off;
worker_processes 1;
error_log $w/fb-$1.log info;
events {}
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:$1 ssl;
        $h2
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        $2
        root $w/html;
    }
}
EOF
}
fbconf 9001 "ssl_conf_command Options KTLS;" > fb-ktls.conf
fbconf 9002 "" > fb-user.conf
cat > nginx/nginx.conf <<EOF
worker_processes 1;
daemon off;
pid $w/nginx/nginx.pid;
error_log $w/nginx/error.log info;
events {}
http {
    access_log off;
    sendfile on;
    client_body_temp_path $w/nginx/body;
    proxy_temp_path $w/nginx/proxy;
    fastcgi_temp_path $w/nginx/fastcgi;
    uwsgi_temp_path $w/nginx/uwsgi;
    scgi_temp_path $w/nginx/scgi;
    server {
        listen 127.0.0.1:9003 ssl${h2:+ http2};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        ssl_conf_command Options KTLS;
        root $w/html;
    }
}
EOF

FIRSTBYTE_KTLS_H2=$([ "$proto" = h2 ] && echo 1) $fb -c fb-ktls.conf 2> fb-ktls.err &
p_ktls=$!
$fb -c fb-user.conf 2> fb-user.err &
p_user=$!
nginx -p $w/nginx -c $w/nginx/nginx.conf -e $w/nginx/error.log 2> nginx.err &
p_nginx=$!
trap 'kill $p_ktls $p_user $p_nginx 2>/dev/null; wait 2>/dev/null' EXIT
for port in 9001 9002 9003; do
    for _ in $(seq 100); do
        curl -sk -o /dev/null https://127.0.0.1:$port/s1.bin && break
        sleep 0.2
    done
done

# utime + stime of a process and its children processes (nginx's workers).
ticks() {
    local total=0 p
    for p in $1 $(ps -o pid= --ppid "$1" 2>/dev/null); do
        [ -r /proc/$p/stat ] || continue
        total=$((total + $(awk '{print $14 + $15}' /proc/$p/stat)))
    done
    echo $total
}
tls_tx() { awk '/TlsTxSw/ {print $2}' /proc/net/tls_stat; }
hz=$(getconf CLK_TCK)

curl_opts=(-sSk --http1.1 --tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null)
small_urls() {
    for i in $(seq "$small_n"); do
        printf 'url = "https://127.0.0.1:%s/s%s.bin"\noutput = "/dev/null"\n' "$1" "$i"
    done
}

h2load_opts=(--tls13-ciphers TLS_AES_128_GCM_SHA256 -c 1)
# h2load's report must show every request succeeded and every byte of data arrived.
h2load_check() { # OUT REQUESTS BYTES
    grep -q "requests: $2 total, $2 started, $2 done, $2 succeeded, 0 failed" "$1" \
        && grep -q "($3) data" "$1" && grep -q "Application protocol: h2" "$1"
}

run() { # NAME PID PORT CASE ROUND
    local t0 c0 x0 t1 c1 x1 bytes
    c0=$(ticks "$2"); x0=$(tls_tx); t0=$(date +%s.%N)
    if [ "$4" = h2-single ]; then
        bytes=$((single_mb * 1000000))
        h2load "${h2load_opts[@]}" -n 1 "https://127.0.0.1:$3/single.bin" > h2load.out 2>&1 \
            && h2load_check h2load.out 1 $bytes || { cat h2load.out > curl.err; die "$1 h2-single"; }
    elif [ "$4" = h2-small ]; then
        bytes=$((small_n * small_kb * 1000))
        for i in $(seq "$small_n"); do echo "https://127.0.0.1:$3/s$i.bin"; done > urls.txt
        h2load "${h2load_opts[@]}" -m 10 -n "$small_n" -i urls.txt > h2load.out 2>&1 \
            && h2load_check h2load.out "$small_n" $bytes || { cat h2load.out > curl.err; die "$1 h2-small"; }
    elif [ "$4" = single ]; then
        curl "${curl_opts[@]}" "https://127.0.0.1:$3/single.bin" 2> curl.err || die "$1 single"
        bytes=$((single_mb * 1000000))
    else
        # A new connection per file (Connection: close), as many small-file visitors.
        small_urls "$3" | curl "${curl_opts[@]}" -H 'Connection: close' -K - 2> curl.err || die "$1 small"
        bytes=$((small_n * small_kb * 1000))
    fi
    t1=$(date +%s.%N); c1=$(ticks "$2"); x1=$(tls_tx)
    echo "bench: $1 $4 $5 seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') cpu_ticks=$((c1 - c0)) ticks_per_s=$hz bytes=$bytes tls_tx=$((x1 - x0))"
}

names=(fb-ktls fb-user nginx-ktls)
pids=($p_ktls $p_user $p_nginx)
ports=(9001 9002 9003)
cases=(single small)
[ "$proto" = h2 ] && cases=(h2-single h2-small)
for r in $(seq "$rounds"); do
    for case in "${cases[@]}"; do
        for k in 0 1 2; do
            i=$(((k + r) % 3))
            run "${names[$i]}" "${pids[$i]}" "${ports[$i]}" $case "$r"
        done
    done
done
echo "bench: done"
