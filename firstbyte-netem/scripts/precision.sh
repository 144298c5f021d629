#!/usr/bin/env bash
# The figures of README.md's "Precision measured here": RUNS runs (default 6) of an idle
# `--delay 50ms` link (300 pings, 10 ms apart) and of one 25 MB TCP transfer through
# `--rate 100mbit`, with the release build; each run's report (JSON) and a table of lateness
# percentiles, goodput and host steal go to OUT.
#   bash firstbyte-netem/scripts/precision.sh OUT [RUNS]      (as root; ~1 minute)
set -euo pipefail
out=${1:?usage: precision.sh OUT [RUNS]}
runs=${2:-6}
cd "$(dirname "$0")/../.."
cargo build -q --release --locked -p firstbyte-netem
netem=target/release/firstbyte-netem
probe=target/release/firstbyte-netem-probe
mkdir -p "$out"
{
  echo "# firstbyte-netem precision, $(date -u +%FT%TZ)"
  echo
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- firstbyte-netem || echo ' (with uncommitted changes)'), $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "command: bash firstbyte-netem/scripts/precision.sh OUT $runs"
  echo
  echo "| run | link | goodput Mbit/s | c→s p50/p90/p99/max µs | s→c p50/p90/p99/max µs | steal ms | realtime |"
  echo "|---|---|---|---|---|---|---|"
} > "$out/summary.md"
row() {
  python3 - "$1" "$2" "$3" "$4" >> "$out/summary.md" <<'PY'
import json, sys
run, link, path, goodput = sys.argv[1:]
v = json.load(open(path))
def lat(d):
    l = v[d]["lateness"]
    return "/".join(f"{l[k]:.0f}" for k in ("p50_us", "p90_us", "p99_us", "max_us"))
rt = all(v[d]["realtime"] for d in ("client_to_server", "server_to_client"))
steal = v["steal_ms"]
print(f"| {run} | {link} | {goodput} | {lat('client_to_server')} | {lat('server_to_client')} | "
      f"{'n/a' if steal is None else f'{steal:.0f}'} | {'yes' if rt else 'no'} |")
PY
}
for i in $(seq 1 "$runs"); do
  timeout -s KILL 60 "$netem" --delay 50ms --stats-json "$out/idle-$i.json" -- \
    sh -c 'timeout 15 ping -n -q -c 300 -i 0.01 "$FB_SERVER_ADDR"' > "$out/idle-$i.txt" 2>&1
  row "$i" "delay 50ms, idle" "$out/idle-$i.json" "-"
  timeout -s KILL 60 "$netem" --rate 100mbit --server "exec $probe sink 5001" --wait-port 5001 \
    --stats-json "$out/load-$i.json" -- "$probe" send server 5001 25000000 > "$out/load-$i.txt" 2>&1
  mbit=$(grep -o 'mbit_per_s=[0-9.]*' "$out/load-$i.txt" | cut -d= -f2)
  row "$i" "rate 100mbit, TCP" "$out/load-$i.json" "$mbit"
done
cat "$out/summary.md"
