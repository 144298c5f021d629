#!/bin/bash
# The guest side of bench/ktls-profile.sh (run through `scripts/ktls-vm --profile`): where the
# server's CPU goes on one SINGLE_MB download (curl, HTTP/1.1, TLS 1.3 AES-128-GCM) from
# firstbyte with kernel TLS + sendfile (fb-ktls), firstbyte in user space (fb-user) and Debian's
# nginx with `ssl_conf_command Options KTLS; sendfile on;` (nginx-ktls) — the servers and
# configs of bench/ktls-guest.sh. Per server: ROUNDS clean downloads (server utime/stime from
# /proc/PID/stat), then one under `perf record -e cpu-clock -a -g`, reported by command for the
# whole CPU and, for the server's command, as self time per symbol.
# Prints the guest's CPU flags, /proc/crypto's AES/GCM drivers (refcnt during a kTLS download
# shows the one in use) and /proc/net/tls_stat. Every line starts with "bench-prof: "; a line
# "bench-prof: ==> FILE" starts the text of FILE (split on the host by bench/ktls-profile.sh).
set -u
fb=$1
single_mb=${2:-200}
rounds=${3:-2}
freq=${4:-999}
w=/tmp/kp
mkdir -p $w/html $w/nginx
cd $w || exit 1
out() { sed 's/^/bench-prof: /'; }
file() { echo "bench-prof: ==> $1"; }
die() {
    echo "bench-prof: ERROR $*"
    for f in curl.err nginx.err nginx/error.log fb-ktls.err fb-user.err perf.err; do
        [ -s $f ] && tail -5 $f | sed "s|^|bench-prof:   $f: |"
    done
    exit 1
}

echo 0 > /proc/sys/kernel/kptr_restrict
echo -1 > /proc/sys/kernel/perf_event_paranoid

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout key.pem -out cert.pem -days 2 2>/dev/null || die "certificate"
head -c $((single_mb * 1000000)) /dev/zero | openssl enc -aes-128-ctr -K 00 -iv 00 -nosalt 2>/dev/null > html/single.bin
head -c 100000 html/single.bin > html/s1.bin
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
        listen 127.0.0.1:9003 ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        ssl_conf_command Options KTLS;
        root $w/html;
    }
}
EOF

$fb -c fb-ktls.conf 2> fb-ktls.err &
p_ktls=$!
$fb -c fb-user.conf 2> fb-user.err &
p_user=$!
nginx -p $w/nginx -c $w/nginx/nginx.conf -e $w/nginx/error.log 2> nginx.err &
p_nginx=$!
pp=
trap 'kill $p_ktls $p_user $p_nginx $pp 2>/dev/null; wait 2>/dev/null' EXIT
for port in 9001 9002 9003; do
    for _ in $(seq 100); do
        curl -sk -o /dev/null https://127.0.0.1:$port/s1.bin && break
        sleep 0.2
    done
done

# The server's processes: nginx's master and its worker; firstbyte is one process.
procs() { echo "$1" $(ps -o pid= --ppid "$1" 2>/dev/null); }
# utime and stime (ticks) summed over a server's processes.
ticks() {
    local p files=()
    for p in $(procs "$1"); do
        [ -r /proc/$p/stat ] && files+=(/proc/$p/stat)
    done
    awk '{u += $14; s += $15} END {print u + 0, s + 0}' "${files[@]}"
}
tls_tx() { awk '/TlsTxSw/ {print $2}' /proc/net/tls_stat; }
hz=$(getconf CLK_TCK)
curl_opts=(-sSk --http1.1 --tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null)
crypto() { # the AES and GCM transforms the kernel has, with the driver and its refcnt
    awk -v RS= '/name *: (gcm\(aes\)|rfc4106\(gcm\(aes\)\)|aes|ctr\(aes\)|ghash|__gcm\(aes\)|__generic-gcm-aesni)\n/' /proc/crypto \
        | grep -E '^(name|driver|module|priority|refcnt|internal|type) ' | paste -d' ' - - - - - - - \
        | sed 's/  */ /g'
}

file env.txt
{
    echo "kernel: $(uname -r)"
    echo "cpu model: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "cpu flags (crypto-relevant): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' \
        | grep -xE 'aes|pclmulqdq|avx|avx2|vaes|vpclmulqdq|sse4_1|ssse3|sha_ni|erms|fsrm' | tr '\n' ' ')"
    echo "firstbyte: $fb ($(sha256sum "$fb" | cut -c1-16))"
    echo "nginx: $(nginx -v 2>&1)"
    echo "curl: $(curl --version | head -1)"
    echo "openssl: $(openssl version)"
    echo "perf: $(perf --version)"
    echo "clock ticks per second: $hz"
    echo "kernel crypto before any kTLS download:"
    crypto | sed 's/^/  /'
} | out

run() { # NAME PID PORT ROUND
    local t0 t1 c0 c1 x0 x1
    c0=$(ticks "$2"); x0=$(tls_tx); t0=$(date +%s.%N)
    curl "${curl_opts[@]}" "https://127.0.0.1:$3/single.bin" 2> curl.err || die "$1 single"
    t1=$(date +%s.%N); c1=$(ticks "$2"); x1=$(tls_tx)
    echo "$1 $4 seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') utime_ticks=$((${c1% *} - ${c0% *})) stime_ticks=$((${c1#* } - ${c0#* })) bytes=$((single_mb * 1000000)) tls_tx=$((x1 - x0))"
}

names=(fb-ktls fb-user nginx-ktls)
pids=($p_ktls $p_user $p_nginx)
ports=(9001 9002 9003)

file runs.txt
for r in $(seq "$rounds"); do
    for k in 0 1 2; do
        i=$(((k + r) % 3))
        run "${names[$i]}" "${pids[$i]}" "${ports[$i]}" "$r" | out
    done
done

# One profiled download per server. The server's samples are those of its command name
# (firstbyte's threads, nginx's master and worker; the other two servers idle meanwhile).
comms=(firstbyte firstbyte nginx)
for i in 0 1 2; do
    n=${names[$i]}
    c=${comms[$i]}
    perf record -q -e cpu-clock -F "$freq" -a -g --no-buildid-cache -o $w/$n.data 2> perf.err &
    pp=$!
    sleep 2
    # The kernel's transforms while the download runs (refcnt > 1: in use).
    [ "$n" != fb-user ] && (sleep 4; crypto > $w/$n.crypto) &
    run "$n" "${pids[$i]}" "${ports[$i]}" perf > $w/$n.run
    kill -INT $pp
    wait $pp
    pp=
    [ -s $w/$n.data ] || die "perf record $n"
    file "$n-run.txt"
    out < $w/$n.run
    if [ -f $w/$n.crypto ]; then
        file "$n-crypto-during.txt"
        out < $w/$n.crypto
    fi
    # Whole CPU by command and thread (server, curl, idle, ...).
    file "$n-comm.txt"
    perf report -i $w/$n.data --no-children --sort comm,pid --stdio -n -g none 2> /dev/null | grep -v '^$' | out
    # Self time per command and symbol over all samples (tab separated: samples, command, dso,
    # symbol); the server's lines are picked out of it (perf report's --comm and --pid filters
    # lost the kernel copies' samples here), and its top entries printed.
    perf report -i $w/$n.data --no-children --sort comm,dso,sym --stdio -n -g none -t $'\t' \
        2> /dev/null | grep -v '^#' | grep -v '^$' \
        | awk -F'\t' '{for (k = 2; k <= 5; k++) gsub(/^ +| +$/, "", $k); print $2 "\t" $3 "\t" $4 "\t" $5}' \
        > $w/$n.all
    file "$n-server-symbols.tsv"
    awk -F'\t' -v c="$c" '$2 == c {print $1 "\t" $3 "\t" $4}' $w/$n.all | out
    file "$n-server-top.txt"
    awk -F'\t' -v c="$c" '$2 == c {t += $1; n++; s[n] = $1; l[n] = $3 "  " $4}
        END {printf "%d samples of command %s\n", t, c;
             for (i = 1; i <= n && i <= 50; i++) printf "%7.2f%% %7d  %s\n", 100 * s[i] / t, s[i], l[i]}' $w/$n.all | out
    rm -f $w/$n.data
done
# The emulated CPU's speed at the two costs kTLS trades: AES-128-GCM (OpenSSL, the
# instructions aws-lc and the kernel's aesni_intel use) and copying (reading the file from the
# page cache: copy_to_user). bench/ktls-profile.sh measures the same on the host.
file calibration.txt
{
    openssl speed -evp aes-128-gcm -bytes 16384 -seconds 3 2> /dev/null | tail -1
    dd if=html/single.bin of=/dev/null bs=64k 2>&1 | tail -1
    dd if=html/single.bin of=/dev/null bs=64k 2>&1 | tail -1
} | out
file tls_stat.txt
out < /proc/net/tls_stat
echo "bench-prof: done"
