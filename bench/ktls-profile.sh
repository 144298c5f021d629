#!/usr/bin/env bash
# Where the server's CPU goes on a kernel-TLS download: boots the kTLS VM (scripts/ktls-vm
# --profile: Debian's 6.1 kernel under qemu TCG, this machine's root over 9p) and runs
# bench/ktls-profile-guest.sh there — fb-ktls (firstbyte, `ssl_conf_command Options KTLS`,
# sendfile), fb-user (firstbyte, user-space TLS) and nginx-ktls (Debian's nginx, OpenSSL kTLS,
# sendfile), one SINGLE_MB file downloaded by curl (HTTP/1.1, TLS 1.3 AES-128-GCM): ROUNDS clean
# downloads per server, then one under `perf record -e cpu-clock -a -g`. The guest's reports are
# written to OUTDIR. Then, on this machine's own CPU (no emulation; its kernel has no kTLS), the
# same fb-user download HOST_N (20) times, profiled the same way, and the AES-GCM and copy speed
# of both CPUs (openssl speed, dd). OUTDIR/summary.txt sorts each server's self-time samples into
# AES-GCM, copies, TCP/IP, syscall entry, sendfile/page cache, kTLS glue and the rest.
#
#   bench/ktls-profile.sh OUTDIR [FIRSTBYTE [SINGLE_MB [ROUNDS [PERF_FREQ]]]]
#                                 (default target/release/firstbyte, 200, 2, 999; ~7 minutes)
#   bench/ktls-profile.sh --from GUEST.txt OUTDIR ...   (the guest's saved console report
#                                 instead of a VM run; the host half runs again)
#   bench/ktls-profile.sh --summarize OUTDIR     (rewrites summary.txt from the saved reports)
#
# FIRSTBYTE must live outside /tmp (the guest mounts a tmpfs there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

summarize() { # DIR
    local d=$1 n
    {
        echo "Server self time by category (perf record -e cpu-clock -a -g, samples of the"
        echo "server command's samples only; first matching category wins, see bench/ktls-profile.sh)."
        echo
        printf '%-11s %8s %7s %7s | %7s %7s %7s %7s %7s %7s %7s\n' server samples user kernel \
            aes-gcm copies tcp/ip syscall sendfile tls-glue other
        for n in fb-user fb-ktls nginx-ktls host-fb-user; do
            [ -f "$d/$n-server-symbols.tsv" ] || continue
            awk -F'\t' -v n="$n" '
            function cat(sym,   s) {
                s = sym; sub(/^\[[^]]*\] /, "", s)
                if (s ~ /aes|gcm|ghash|gf128|clmul|polyval|crypto_aead|crypto_skcipher|scatterwalk|crypto_xor|gf_mul/) return "aes"
                # aesni_intel'"'"'s AVX GCM code: numbered local labels (_encrypt_by_8_new17529, _T_1629982)
                if (sym ~ /^\[k\] _[A-Za-z0-9_]*[A-Za-z_][0-9][0-9][0-9][0-9]+$/) return "aes"
                if (s ~ /memcpy|memmove|copy_user|copy_page|copy_to_iter|copy_from_iter|rep_movs|csum_partial_copy|skb_copy_datagram|copy_mc|copyin|copyout/) return "copy"
                if (s ~ /^(__)?(tcp|ip|ipv4|inet|skb|sk|sock|net|netif|dev|napi|qdisc|sch|nf|eth|loopback|alloc_skb|kfree_skb|consume_skb|lock_sock|release_sock|process_backlog|validate_xmit|bpf_skops|raw_local_deliver|sk_stream)_?/ || s ~ /_skb|^do_softirq|^__do_softirq|^net_rx_action|^__local_bh_enable_ip/) return "tcp"
                if (s ~ /^(entry_SYSCALL|do_syscall|syscall_|__x64_sys|__do_sys|__sys_|exit_to_user|syscall_exit|ksys_|__fdget|fput|fdget|__fget)/) return "sys"
                if (s ~ /splice|filemap|page_cache|folio|shmem|^do_sendfile|^generic_file_|^touch_atime|^pipe_/) return "sf"
                if (s ~ /^tls_|^bpf_exec_tx_verdict/) return "tls"
                return "other"
            }
            { t += $1; if ($3 ~ /^\[k\]/) k += $1; else u += $1; c[cat($3)] += $1 }
            END {
                if (t == 0) exit
                printf "%-11s %8d %6.1f%% %6.1f%% | %6.1f%% %6.1f%% %6.1f%% %6.1f%% %7.1f%% %7.1f%% %6.1f%%\n", n, t,
                    100*u/t, 100*k/t, 100*c["aes"]/t, 100*c["copy"]/t, 100*c["tcp"]/t, 100*c["sys"]/t,
                    100*c["sf"]/t, 100*c["tls"]/t, 100*c["other"]/t
            }' "$d/$n-server-symbols.tsv"
        done
        echo
        echo "Clean downloads (runs.txt, 1 tick = 1/clock-ticks-per-second s of server CPU):"
        awk '{ split($3, s, "="); split($4, u, "="); split($5, k, "="); split($6, b, "=")
               printf "  %-11s round %-4s %7.2f MB/s  server CPU %6.2f s/GiB (user %5.2f, sys %5.2f)\n", $1, $2,
                   b[2] / s[2] / 1e6, (u[2] + k[2]) / 100 / (b[2] / 2^30), u[2] / 100 / (b[2] / 2^30), k[2] / 100 / (b[2] / 2^30) }' \
            "$d/runs.txt"
        echo
        echo "(host-fb-user: the same server on this machine's own CPU, no emulation, HOST_N downloads"
        echo "a run; this kernel has no kTLS, so there is no host fb-ktls line.)"
        echo
        if [ -f "$d/host-runs.txt" ]; then
            echo "Host downloads (host-runs.txt):"
            awk '{ split($3, s, "="); split($4, u, "="); split($5, k, "="); split($6, b, "=")
                   printf "  %-11s round %-4s %7.2f MB/s  server CPU %6.3f s/GiB (user %5.3f, sys %5.3f)\n", $1, $2,
                       b[2] / s[2] / 1e6, (u[2] + k[2]) / 100 / (b[2] / 2^30), u[2] / 100 / (b[2] / 2^30), k[2] / 100 / (b[2] / 2^30) }' \
                "$d/host-runs.txt"
            echo
        fi
        echo "AES-128-GCM and copy speed, guest (TCG) and host (openssl speed 16 KiB; dd of the file, page cache -> user):"
        for f in calibration host-calibration; do
            [ -f "$d/$f.txt" ] && sed "s/^/  $f: /" "$d/$f.txt"
        done
        echo
        echo "If removing copies entirely were the only change, fb-user's server CPU per byte could"
        echo "fall at most by the copies' share X: the gain is capped at 1/(1-X) (CPU-bound case)."
        awk -F'\t' '
            { s = $3; sub(/^\[[^]]*\] /, "", s); t += $1
              if (s ~ /memcpy|memmove|copy_user|copy_page|copy_to_iter|copy_from_iter|rep_movs|csum_partial_copy|skb_copy_datagram|copy_mc|copyin|copyout/) c += $1 }
            END { f = FILENAME; sub(/.*\//, "", f); if (t) printf "%s: X = %.1f%% -> cap %.2fx\n", f, 100*c/t, 1/(1-c/t) }' \
            "$d/fb-user-server-symbols.tsv"
        [ -f "$d/host-fb-user-server-symbols.tsv" ] && awk -F'\t' '
            { s = $3; sub(/^\[[^]]*\] /, "", s); t += $1
              if (s ~ /memcpy|memmove|copy_user|copy_page|copy_to_iter|copy_from_iter|rep_movs|csum_partial_copy|skb_copy_datagram|copy_mc|copyin|copyout/) c += $1 }
            END { f = FILENAME; sub(/.*\//, "", f); if (t) printf "%s: X = %.1f%% -> cap %.2fx\n", f, 100*c/t, 1/(1-c/t) }' \
            "$d/host-fb-user-server-symbols.tsv"
    } > "$d/summary.txt"
    cat "$d/summary.txt"
}

if [ "${1:-}" = "--summarize" ]; then
    summarize "$2"
    exit
fi
from=
if [ "${1:-}" = "--from" ]; then
    from=$2
    shift 2
fi
out=${1:?usage: bench/ktls-profile.sh [--from GUEST.txt] OUTDIR [FIRSTBYTE [SINGLE_MB [ROUNDS [PERF_FREQ]]]]}
fb=${2:-$root/target/release/firstbyte}
mb=${3:-200}
rounds=${4:-2}
freq=${5:-999}
fb=$(cd "$(dirname "$fb")" && pwd)/$(basename "$fb")
[ -x "$fb" ] || { echo "ktls-profile: no $fb (cargo build --release -p firstbyte)" >&2; exit 1; }
case $fb in /tmp/*) echo "ktls-profile: $fb is under /tmp (the guest's /tmp is its own)" >&2; exit 1 ;; esac
mkdir -p "$out"
log=$out/guest.txt
if [ -n "$from" ]; then
    [ "$from" -ef "$log" ] || cp "$from" "$log"
else
    nice -n 19 "$root/scripts/ktls-vm" --profile "$fb" "$mb" "$rounds" "$freq" > "$log"
fi
grep -q '^bench-prof: done' "$log" || { echo "ktls-profile: the guest did not finish; see $log" >&2; exit 1; }
# Split the guest's report into its files.
awk -v d="$out" '
    { sub(/\r$/, "") }
    /^bench-prof: ==> / { f = d "/" substr($0, 17); printf "" > f; next }
    /^bench-prof: done$/ { f = ""; next }
    /^bench-prof: / && f { sub(/^bench-prof: /, ""); print >> f }' "$log"
# The same calibration on this machine's own CPU (no emulation), and fb-user profiled here
# the same way (this kernel has no kTLS): the shares on a CPU whose AES-NI is not emulated.
hw=$(mktemp -d /var/tmp/ktls-profile.XXXXXX)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$hw"' EXIT
mkdir -p "$hw/html"
head -c $((mb * 1000000)) /dev/zero | openssl enc -aes-128-ctr -K 00 -iv 00 -nosalt 2>/dev/null > "$hw/html/single.bin"
{
    openssl speed -evp aes-128-gcm -bytes 16384 -seconds 3 2> /dev/null | tail -1
    dd if="$hw/html/single.bin" of=/dev/null bs=64k 2>&1 | tail -1
    dd if="$hw/html/single.bin" of=/dev/null bs=64k 2>&1 | tail -1
} > "$out/host-calibration.txt"
chmod -R a+rX "$hw"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$hw/key.pem" -out "$hw/cert.pem" -days 2 2>/dev/null
port=$((20000 + RANDOM % 20000))
cat > "$hw/fb.conf" <<CONF
pid off;
worker_processes 1;
error_log $hw/error.log info;
events {}
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $hw/cert.pem;
        ssl_certificate_key $hw/key.pem;
        root $hw/html;
    }
}
CONF
nice -n 19 "$fb" -c "$hw/fb.conf" 2> "$hw/fb.err" &
spid=$!
for _ in $(seq 100); do
    curl -sk -o /dev/null "https://127.0.0.1:$port/" 2> /dev/null && break
    sleep 0.1
done
curl_opts=(-fsSk --http1.1 --tlsv1.3 --tls13-ciphers TLS_AES_128_GCM_SHA256 -o /dev/null)
# On this CPU one download takes a fraction of a second: HOST_N downloads (a connection each)
# make one run, so the tick counts and the sample counts mean something.
host_n=${HOST_N:-20}
host_run() { # ROUND: HOST_N downloads, with the server's CPU ticks
    local t0 t1 c0 c1 k
    c0=$(awk '{print $14, $15}' /proc/$spid/stat); t0=$(date +%s.%N)
    for k in $(seq $host_n); do
        nice -n 19 curl "${curl_opts[@]}" "https://127.0.0.1:$port/single.bin"
    done
    t1=$(date +%s.%N); c1=$(awk '{print $14, $15}' /proc/$spid/stat)
    echo "fb-user $1 seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') utime_ticks=$((${c1% *} - ${c0% *})) stime_ticks=$((${c1#* } - ${c0#* })) bytes=$((host_n * mb * 1000000))"
}
for r in $(seq "$rounds"); do host_run "$r"; done > "$out/host-runs.txt"
perf record -q -e cpu-clock -F $((freq * 5)) -g --no-buildid-cache -p $spid -o "$hw/perf.data" 2> /dev/null &
prec=$!
sleep 0.5
host_run perf > "$out/host-fb-user-run.txt"
kill -INT $prec
wait $prec || true
perf report -i "$hw/perf.data" --no-children --sort dso,sym --stdio -n -g none -t $'\t' 2> /dev/null \
    | grep -v '^#' | grep -v '^$' \
    | awk -F'\t' '{for (k = 2; k <= 4; k++) gsub(/^ +| +$/, "", $k); print $2 "\t" $3 "\t" $4}' \
    > "$out/host-fb-user-server-symbols.tsv"
perf report -i "$hw/perf.data" --no-children --percentage relative --sort dso,sym --stdio -n -g none 2> /dev/null \
    | grep -v '^$' | head -60 > "$out/host-fb-user-server-top.txt" || true
kill $spid
wait $spid 2> /dev/null || true
spid=
summarize "$out"
