#!/bin/bash
# The guest side of scripts/ktls-vm (runs as root, chrooted into the host's read-only root,
# with a tmpfs on /tmp). Prints "ktls: ..." lines; exits non-zero on the first failure.
set -u
fb=$1
testbin=$2
w=/tmp/ktls
mkdir -p $w/html
cd $w || exit 1
fail() {
    echo "ktls: FAIL: $*"
    echo "ktls: error log tail:"
    tail -30 $w/error.log | sed 's/^/ktls:   /'
    exit 1
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout key.pem -out cert.pem -days 2 2>/dev/null || fail "certificate"
size=3000017
head -c $size /dev/urandom > html/big.bin
head -c 8000000 /dev/urandom > html/huge.bin
echo "small file" > html/small.txt
chmod -R a+rX $w

cat > fb.conf <<EOF
pid off;
error_log $w/error.log debug;
events {}
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:8443 ssl;
        http2 on;
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
        ssl_conf_command Options KTLS;
        root $w/html;
    }
    server {
        listen 127.0.0.1:8444 ssl;
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        ssl_conf_command Options KTLS;
        ssl_buffer_size 4k;
        root $w/html;
    }
    server {
        listen 127.0.0.1:8445 ssl;
        ssl_certificate $w/cert.pem;
        ssl_certificate_key $w/key.pem;
        ssl_conf_command Options KTLS,KTLSTxZerocopySendfile;
        root $w/html;
        location = /info { connection_info; }
    }
}
EOF
$fb -c fb.conf 2> stderr.txt &
fbpid=$!
trap 'kill $fbpid 2>/dev/null; wait $fbpid 2>/dev/null' EXIT
for _ in $(seq 100); do
    curl -sk -o /dev/null https://127.0.0.1:8443/small.txt && break
    sleep 0.1
done
# The start-up probe's line (logged while the configuration loads: on stderr).
grep -q "kernel TLS available for" stderr.txt || fail "no kernel TLS at start: $(cat stderr.txt)"
grep -o "kernel TLS available for.*" stderr.txt | head -1 | sed 's/^/ktls: /'

n=0
n12=0
tlsstat() { awk -v k="$1" '$1 == k {print $2}' /proc/net/tls_stat; }
tx0=$(tlsstat TlsTxSw)
rx0=$(tlsstat TlsRxSw)
for v in 1.3 1.2; do
    for c in AES128-GCM AES256-GCM CHACHA20-POLY1305; do
        if [ $v = 1.3 ]; then
            case $c in
                AES128-GCM) s=TLS_AES_128_GCM_SHA256 ;;
                AES256-GCM) s=TLS_AES_256_GCM_SHA384 ;;
                *) s=TLS_CHACHA20_POLY1305_SHA256 ;;
            esac
            opts=(--tlsv1.3 --tls13-ciphers $s)
        else
            case $c in
                AES128-GCM) s=ECDHE-ECDSA-AES128-GCM-SHA256 ;;
                AES256-GCM) s=ECDHE-ECDSA-AES256-GCM-SHA384 ;;
                *) s=ECDHE-ECDSA-CHACHA20-POLY1305 ;;
            esac
            opts=(--tlsv1.2 --tls-max 1.2 --ciphers $s)
        fi
        before=$(grep -c "BIO_get_ktls_send(): 1" error.log)
        curl -sk --http1.1 "${opts[@]}" -o got.bin -w '%{http_code} %{ssl_verify_result}\n' \
            https://127.0.0.1:8443/big.bin > code.txt || fail "TLSv$v $s: curl failed"
        cmp -s got.bin html/big.bin || fail "TLSv$v $s: body differs"
        after=$(grep -c "BIO_get_ktls_send(): 1" error.log)
        [ "$after" -gt "$before" ] || fail "TLSv$v $s: not switched to kernel TLS"
        echo "ktls: TLSv$v $s: $size bytes identical, kernel TLS"
        n=$((n + 1))
        [ $v = 1.2 ] && n12=$((n12 + 1))
    done
done

sent=$(grep -o "SSL_sendfile: [0-9]*" error.log | awk '{s += $2} END {print s + 0}')
[ "$sent" -ge $((n * size)) ] || fail "SSL_sendfile sent $sent bytes, want >= $((n * size))"
echo "ktls: SSL_sendfile sent $sent bytes for $n downloads"
# Every download's sending went to the kernel, receiving only TLS 1.2's: TLS 1.3 records from
# the client are opened in user space (so that its KeyUpdate is followed).
tx=$(($(tlsstat TlsTxSw) - tx0))
rx=$(($(tlsstat TlsRxSw) - rx0))
[ "$tx" -eq $n ] && [ "$rx" -eq $n12 ] || fail "/proc/net/tls_stat: TlsTxSw +$tx TlsRxSw +$rx, want +$n +$n12"
echo "ktls: /proc/net/tls_stat TlsTxSw +$tx TlsRxSw +$rx: TLS_RX only for the $n12 TLSv1.2 downloads"

# The record policy still sizes the records: with ssl_buffer_size 4k every sendfile call is
# one record of at most 4096 bytes (the kernel closes a record at the end of each call).
lines_before=$(wc -l < error.log)
curl -sk --http1.1 -o got.bin https://127.0.0.1:8444/big.bin || fail "ssl_buffer_size 4k: curl"
cmp -s got.bin html/big.bin || fail "ssl_buffer_size 4k: body differs"
tail -n +$((lines_before + 1)) error.log | grep -o "SSL_sendfile: [0-9]*" | awk '{print $2}' > sizes.txt
calls=$(wc -l < sizes.txt)
max=$(sort -n sizes.txt | tail -1)
total=$(awk '{s += $1} END {print s + 0}' sizes.txt)
[ "$total" -eq $size ] && [ "$max" -le 4096 ] && [ "$calls" -ge $((size / 4096)) ] \
    || fail "ssl_buffer_size 4k: $calls sendfile calls, largest $max, $total bytes"
echo "ktls: ssl_buffer_size 4k: $calls sendfile calls of at most $max bytes, body identical"

# `ssl_conf_command Options KTLSTxZerocopySendfile`: the 6.1 kernel takes TLS_TX_ZEROCOPY_RO
# (its zerocopy path is device offload's; software kTLS encrypts as before); the file arrives
# byte for byte, the connection reports it, and the other servers' connections do not.
before=$(grep -c "sendfile zerocopy (TLS_TX_ZEROCOPY_RO)" error.log)
curl -sk --http1.1 -o got.bin https://127.0.0.1:8445/big.bin || fail "zerocopy: curl"
cmp -s got.bin html/big.bin || fail "zerocopy: body differs"
after=$(grep -c "sendfile zerocopy (TLS_TX_ZEROCOPY_RO)" error.log)
[ "$after" -eq $((before + 1)) ] || fail "zerocopy: not set on the connection ($before -> $after)"
grep -q "sendfile copies" error.log || fail "zerocopy: set where not asked"
curl -sk --http1.1 'https://127.0.0.1:8445/info?format=json' > zc.json || fail "zerocopy: info"
grep -q "\"ktls_tx_zerocopy\": true" zc.json || fail "zerocopy: info says $(cat zc.json)"
curl -sk --http1.1 'https://127.0.0.1:8445/info' | grep -q "zerocopy (TLS_TX_ZEROCOPY_RO)" \
    || fail "zerocopy: the info page does not say it"
echo "ktls: KTLSTxZerocopySendfile: TLS_TX_ZEROCOPY_RO set, $size bytes identical, shown in /info"
# The connection page tells where records are opened: TLS 1.2 in the kernel, TLS 1.3 here.
curl -sk --http1.1 --tlsv1.3 'https://127.0.0.1:8445/info?format=json' > i13.json || fail "info 1.3"
grep -q '"ktls_tx": true' i13.json && grep -q '"ktls_rx": false' i13.json \
    || fail "TLSv1.3 info says $(cat i13.json)"
curl -sk --http1.1 --tlsv1.2 --tls-max 1.2 'https://127.0.0.1:8445/info?format=json' > i12.json \
    || fail "info 1.2"
grep -q '"ktls_tx": true' i12.json && grep -q '"ktls_rx": true' i12.json \
    || fail "TLSv1.2 info says $(cat i12.json)"
echo "ktls: /info: TLSv1.2 send and receive in the kernel, TLSv1.3 send only"

# A first request in the same write as the client's Finished, larger than one read of the
# server's rustls (12 KB of headers; tests/ktls.rs): the handshake's reads stop at the Finished
# record, so the kernel gets the request's record whole.
KTLS_ADDR=127.0.0.1:8443 timeout 60 "$testbin" --ignored --exact vm_large_first_request \
    --nocapture > big.out 2>&1 || fail "a 12 KB first request: $(grep -v "^$" big.out | tail -6)"
echo "ktls: a 12 KB first request in the Finished's write: read whole by the kernel"

# A KeyUpdate(update_not_requested) from the client in the middle of an 8 MB download, for
# each TLS 1.3 cipher the kernel takes: TLS 1.3 records from the client are opened in user
# space, which follows the client to its new keys; the SAME connection then answers a second
# request byte for byte, and a close_notify under the new keys. (openssl s_client sends a
# KeyUpdate on "k", but reads its stdin only while the socket has nothing to read: during a
# download, never; and rustls' own KeyUpdate asks for ours. The client is a hand-made record
# layer on rustls' provider, in this checkout's test binary: tests/ktls.rs.)
hsize=$(stat -c %s html/huge.bin)
for s in TLS13_AES_128_GCM_SHA256 TLS13_AES_256_GCM_SHA384 TLS13_CHACHA20_POLY1305_SHA256; do
    case $s in
        TLS13_AES_128*) c=AES-128-GCM ;;
        TLS13_AES_256*) c=AES-256-GCM ;;
        *) c=CHACHA20-POLY1305 ;;
    esac
    grep -q "TLSv1.3 $c" stderr.txt || { echo "ktls: $s: not in this kernel, skipped"; continue; }
    before=$(grep -c "reading on under the new keys" error.log)
    KTLS_ADDR=127.0.0.1:8443 KTLS_FILE=$w/html/huge.bin KTLS_PATH=/huge.bin KTLS_SUITE=$s \
        timeout 300 "$testbin" --ignored --exact vm_keyupdate_mid_download --nocapture > ku.out 2>&1 \
        || fail "KeyUpdate client $s: $(grep -v "^$" ku.out | tail -8)"
    grep '^ktls:' ku.out
    after=$(grep -c "reading on under the new keys" error.log)
    [ "$after" -eq $((before + 1)) ] || fail "$s: the server did not follow the KeyUpdate ($before -> $after)"
done
grep -q -i "panic" error.log stderr.txt && fail "a panic"
kill -0 $fbpid 2>/dev/null || fail "the server exited"
echo "ktls: the server followed each KeyUpdate and served on ($hsize bytes per request)"

# rustls' KeyUpdate asks for ours (update_requested), which needs new sending keys the kernel
# cannot take: the connection ends cleanly at that record, with an [info] line.
before=$(grep -c "update_requested), which kernel TLS cannot send" error.log)
KTLS_ADDR=127.0.0.1:8443 timeout 60 "$testbin" --ignored --exact vm_keyupdate_requested \
    --nocapture > kr.out 2>&1 || fail "update_requested client: $(grep -v "^$" kr.out | tail -8)"
grep '^ktls:' kr.out
after=$(grep "\[info\]" error.log | grep -c "update_requested), which kernel TLS cannot send")
[ "$after" -gt "$before" ] || fail "update_requested: no [info] line"
echo "ktls: update_requested: closed cleanly with an [info] line"

# openssl s_client between requests on one connection: "k" (update_not_requested): both
# requests answered; "K" (update_requested): the first answered, the connection closed.
sk() { # KEY: one connection, two requests with KEY between them (answers in sk.raw)
    rm -f sk.in && mkfifo sk.in
    timeout 60 openssl s_client -tls1_3 -connect 127.0.0.1:8443 < sk.in > sk.raw 2> sk.err &
    skpid=$!
    exec 3> sk.in
    printf 'GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n' >&3
    seen "small file" || fail "s_client $1: no first answer"
    echo "$1" >&3
    seen KEYUPDATE || fail "s_client sent no KeyUpdate: $(tail -3 sk.err)"
    # After "K" the server may have closed and s_client gone: the write then fails (EPIPE).
    (trap '' PIPE; printf 'GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n' >&3) 2>/dev/null || true
    if [ "$1" = k ]; then
        for _ in $(seq 300); do
            [ "$(grep -c "^HTTP/1.1 200" sk.raw)" -ge 2 ] && break
            sleep 0.1
        done
        exec 3>&-
    fi
    # s_client ends when the server closes (or, for "k", when its stdin ends).
    wait $skpid
    exec 3>&-
}
seen() { # PATTERN: waits (at most 30 s) until s_client has printed it
    for _ in $(seq 300); do
        cat sk.raw sk.err | grep -q "$1" && return 0
        sleep 0.1
    done
    return 1
}
before=$(grep -c "reading on under the new keys" error.log)
sk k
[ "$(grep -c "^HTTP/1.1 200" sk.raw)" -eq 2 ] || fail "s_client k: $(grep -c "^HTTP/1.1 200" sk.raw) answers, want 2"
[ "$(grep -c "reading on under the new keys" error.log)" -gt "$before" ] || fail "s_client k: not followed"
echo "ktls: openssl s_client k between requests: both answered on one connection"
before=$(grep -c "update_requested), which kernel TLS cannot send" error.log)
sk K
[ "$(grep -c "^HTTP/1.1 200" sk.raw)" -eq 1 ] || fail "s_client K: $(grep -c "^HTTP/1.1 200" sk.raw) answers, want 1"
[ "$(grep -c "update_requested), which kernel TLS cannot send" error.log)" -gt "$before" ] \
    || fail "s_client K: no close logged"
echo "ktls: openssl s_client K between requests: first answered, then closed with an [info] line"

# The client's close_notify on a kept-alive connection: the server reads it and closes —
# through the kernel for TLS 1.2, in user space for TLS 1.3. (s_client sends it when its stdin
# ends: here once the answer has arrived.)
for v in 1_2 1_3; do
    before=$(grep -c "close_notify received" error.log)
    rm -f cn.in && mkfifo cn.in
    timeout 60 openssl s_client -brief -tls$v -connect 127.0.0.1:8443 < cn.in > cn.raw 2> cn.err &
    cnpid=$!
    exec 3> cn.in
    printf 'GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n' >&3
    for _ in $(seq 300); do
        grep -q "small file" cn.raw && break
        sleep 0.1
    done
    exec 3>&-
    wait $cnpid
    grep -q "small file" cn.raw || fail "TLSv$v close_notify: no response"
    for _ in $(seq 300); do
        [ "$(grep -c "close_notify received" error.log)" -gt "$before" ] && break
        sleep 0.1
    done
    [ "$(grep -c "close_notify received" error.log)" -gt "$before" ] \
        || fail "TLSv$v: client close_notify not read"
    echo "ktls: TLSv${v/_/.}: client close_notify read"
done

# HTTP/2 stays in user space (as nginx's kTLS: HTTP/1.x sendfile only).
curl -sk --http2 -o got.bin https://127.0.0.1:8443/big.bin || fail "h2 download"
cmp -s got.bin html/big.bin || fail "h2 body differs"
grep -q "BIO_get_ktls_send(): 0 (HTTP/2 stays in user space)" error.log || fail "h2 not in user space"
echo "ktls: HTTP/2 served in user space"
echo "ktls: PASS"
