#!/bin/bash
# Interleaved rounds: firstbyte (e0e2849) and nginx, sparse and real 1 GiB, HTTP/1.1 and HTTP/2.
cd /tmp/h2bulk
for r in 1 2 3; do
  for s in fb:18443:fb.pid ng:18444:ng/nginx.pid; do
    IFS=: read name port pid <<< "$s"
    for f in sparse1g real1g; do for p in --http1.1 --http2; do
      echo "round=$r server=$name load=$(cut -d' ' -f1 /proc/loadavg) $(taskset -c 0 python3 cpu.py $pid $p https://127.0.0.1:$port/$f)"
    done; done
  done
done
