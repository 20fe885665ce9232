#!/usr/bin/env bash
# Benchmark: SSH fleets, each device with its own tunnel, against the reference controller in its
# own process. Records peak threads, peak heap, peak RSS, open files, time until every tunnel is up,
# handshakes per second and heartbeat failures; appends a table to bench/history/DATE-ssh-fleet.md.
#   bench/ssh-fleet.sh [SIZES...]     default: 1000 4000 8000
# Settings: STEADY (steady state after the ramp, default 10m), HEARTBEAT (10s), STATS (30s), RAMP (500/s),
# HANDSHAKES (--max-handshakes, default 32: the reference controller takes more than OpenSSH's 10).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes=("$@")
[ $# -gt 0 ] || sizes=(1000 4000 8000)
steady="${STEADY:-10m}" heartbeat="${HEARTBEAT:-10s}" stats="${STATS:-30s}" ramp="${RAMP:-500}" handshakes="${HANDSHAKES:-32}"

(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/"
results="$here/bench/results/ssh-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
seconds() { python3 -c "import re,sys; m=re.fullmatch(r'(\d+)([smh])','$1'); print(int(m[1])*{'s':1,'m':60,'h':3600}[m[2]])"; }

rows=()
for n in "${sizes[@]}"; do
  # The controller in its own process, with its own descriptor budget.
  java -jar "$work/fleetsim.jar" controller --port 0 --ssh-port 0 --heartbeat-interval "$heartbeat" \
    --stats-interval "$stats" --state-dir "$work/controller" > "$results/$n-controller.log" 2>&1 &
  controller=$!
  for _ in $(seq 100); do grep -q "listening on" "$results/$n-controller.log" && break; sleep 0.2; done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$results/$n-controller.log" | head -1)
  duration=$(( $(seconds "$steady") + n / ramp + 60 ))s
  echo "bench: ./fleetsim run --controller $url --transport ssh --devices $n --ramp-rate $ramp --max-handshakes $handshakes --duration $duration" >&2
  java -jar "$work/fleetsim.jar" run --controller "$url" --transport ssh --devices "$n" --ramp-rate "$ramp" --max-handshakes "$handshakes" \
    --duration "$duration" --known-hosts "$work/known_hosts" --results "$results/$n" > "$results/$n.log" 2>&1 &
  fleet=$!
  # Sample the fleet process's open files and RSS every 5 s while it runs.
  maxfd=0
  while kill -0 "$fleet" 2>/dev/null; do
    fds=$(ls /proc/$fleet/fd 2>/dev/null | wc -l || echo 0)
    [ "$fds" -gt "$maxfd" ] && maxfd=$fds
    hwm=$(awk '/VmHWM/{print $2}' /proc/$fleet/status 2>/dev/null || true)
    [ -n "$hwm" ] && rss_kb=$hwm
    sleep 5
  done
  wait "$fleet" || true
  kill "$controller" 2>/dev/null || true
  wait "$controller" 2>/dev/null || true
  rows+=("$(python3 - "$results/$n.log" "$results/$n/summary.json" "$n" "$maxfd" "${rss_kb:-0}" <<'PY'
import json, re, sys
log, summary, n, maxfd, rss_kb = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
s = json.load(open(summary))
def secs(t):
    h, m, x = map(int, t.split(":")); return h * 3600 + m * 60 + x
lines = [l for l in open(log) if re.match(r"\d\d:\d\d:\d\d ", l)]
first = secs(lines[0][:8])
full = next((secs(l[:8]) for l in lines if f"tunnels {n} up" in l), None)
allup = "never" if full is None else f"{full - first + 1} s"
rate = "" if full is None else f"{s['tunnels']['opened'] / (full - first + 1):.0f}"
hb = s["messages"]["heartbeat"]
print(f"| {n} | {s['devices']['byState']['Reporting']} | {s['process']['threadsPeak']} | "
      f"{s['process']['heapUsedPeakBytes'] / 2**20:.0f} | {rss_kb / 1024:.0f} | {maxfd} | {allup} | {rate} | "
      f"{s['tunnels']['handshakeMs']['p50']} / {s['tunnels']['handshakeMs']['p99']} | {hb['ok']} | {hb['failed']} | {s['tunnels']['retunnels']} |")
PY
)")
done

history="$here/bench/history/$(date -u +%Y-%m-%d)-ssh-fleet.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### SSH fleet, controller in its own process — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1), ulimit -n $(ulimit -n)."
  echo "Controller: \`./fleetsim controller --port 0 --ssh-port 0 --heartbeat-interval $heartbeat --stats-interval $stats\`; each row:"
  echo "\`./fleetsim run --controller URL --transport ssh --devices N --ramp-rate $ramp --max-handshakes $handshakes --duration (ramp + 60 s + $steady)\`"
  echo "(run by \`bench/ssh-fleet.sh ${sizes[*]}\`). Threads, heap, RSS and open files are the fleet process's."
  echo
  echo "| devices | Reporting at end | peak threads | peak heap MiB | peak RSS MiB | open files (max) | all tunnels up after | handshakes/s | handshake p50 / p99 ms | heartbeats ok | heartbeats failed | re-tunnels |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
rm -rf "$work"
