#!/usr/bin/env bash
# Benchmark: what metrics cost. The same 10,000-device HTTP run with the dashboard and Prometheus
# on, and with the dashboard off and no exporter (only the in-process figures summary.json needs),
# alternated ROUNDS times; records messages/s, CPU seconds and peak heap, medians, in
# bench/history/DATE-metrics-cost.md.
#   bench/metrics-cost.sh     settings: DEVICES (10000), DURATION (60s), HEARTBEAT (2s), ROUNDS (3)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
devices="${DEVICES:-10000}" duration="${DURATION:-60s}" heartbeat="${HEARTBEAT:-2s}" rounds="${ROUNDS:-3}"

(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/"
results="$here/bench/results/metrics-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"

run() { # $1 = on|off, $2 = round
  local dir="$results/$1-$2"
  java -jar "$work/fleetsim.jar" run --devices "$devices" --duration "$duration" --heartbeat-interval "$heartbeat" \
    --stats-interval 10s --ramp-rate 2000 --dashboard "$1" --results "$dir" > "$dir.log" 2>&1 &
  local pid=$!
  local cpu=0
  while kill -0 "$pid" 2>/dev/null; do
    # utime + stime of the JVM, in clock ticks, until it exits
    local t; t=$(awk '{print $14 + $15}' /proc/$pid/stat 2>/dev/null || echo "")
    [ -n "$t" ] && cpu=$t
    sleep 1
  done
  wait "$pid" || true
  python3 - "$dir/summary.json" "$cpu" "$(getconf CLK_TCK)" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); cpu = int(sys.argv[2]) / int(sys.argv[3])
ok = sum(k["ok"] for k in s["messages"].values())
print(f"{sys.argv[4]} {ok / s['run']['durationS']:.0f} {cpu:.1f} {s['process']['heapUsedPeakBytes'] / 2**20:.0f} {ok}")
PY
}

for round in $(seq "$rounds"); do
  for mode in on off; do
    echo "bench: metrics $mode, round $round" >&2
    run "$mode" "$round" >> "$results/rows.txt"
  done
done

history="$here/bench/history/$(date -u +%Y-%m-%d)-metrics-cost.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### Cost of metrics: dashboard + Prometheus on vs off — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1). Each run:"
  echo "\`./fleetsim run --devices $devices --duration $duration --heartbeat-interval $heartbeat --stats-interval 10s --ramp-rate 2000 --dashboard on|off\`"
  echo "(embedded controller, so the CPU is the controller's too), $rounds rounds alternating on/off, medians (run by \`bench/metrics-cost.sh\`)."
  echo
  python3 - "$results/rows.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {m: [statistics.median(float(r[i]) for r in rows if r[0] == m) for i in (1, 2, 3, 4)] for m in ("on", "off")}
print("| metrics | messages/s (median) | CPU s (median) | CPU µs per message | peak heap MiB (median) |")
print("| --- | --- | --- | --- | --- |")
for m in ("on", "off"):
    rate, cpu, heap, ok = med[m]
    print(f"| {m} | {rate:.0f} | {cpu:.1f} | {cpu / ok * 1e6:.1f} | {heap:.0f} |")
on, off = med["on"][0], med["off"][0]
print(f"\nMessages/s with metrics on are {100 * (on - off) / off:+.1f}% against off (target: within 5%). All rounds: " +
      ", ".join(f"{r[0]} {r[1]}/s {r[2]} s" for r in rows) + ".")
PY
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
rm -rf "$work"
