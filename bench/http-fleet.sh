#!/usr/bin/env bash
# Benchmark: HTTP fleets against the embedded controller at several sizes, recording peak threads,
# peak heap and messages per second. Appends a table to bench/history/DATE-http-fleet-embedded.md.
#   bench/http-fleet.sh [SIZES...]     default: 100 1000 10000
# Settings: DURATION (default 60s), HEARTBEAT (2s), STATS (10s), RAMP (2000/s).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes=("${@:-100 1000 10000}")
[ $# -gt 0 ] || sizes=(100 1000 10000)
duration="${DURATION:-60s}" heartbeat="${HEARTBEAT:-2s}" stats="${STATS:-10s}" ramp="${RAMP:-2000}"

# Run from a copy of the build, so that editing or rebuilding the tree cannot disturb a measurement.
(cd "$here" && mvn -B -q -DskipTests package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/"
results="$here/bench/results/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"

rows=()
for n in "${sizes[@]}"; do
  cmd="./fleetsim run --devices $n --duration $duration --heartbeat-interval $heartbeat --stats-interval $stats --ramp-rate $ramp"
  echo "bench: $cmd" >&2
  java ${JAVA_OPTS:-} -jar "$work/fleetsim.jar" run --devices "$n" --duration "$duration" --heartbeat-interval "$heartbeat" \
    --stats-interval "$stats" --ramp-rate "$ramp" --results "$results/$n" > "$results/$n.log" 2>&1
  rows+=("$(python3 - "$results/$n/summary.json" "$n" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); n = sys.argv[2]
m = s["messages"]
ok = sum(k["ok"] for k in m.values()); failed = sum(k["failed"] for k in m.values())
rate = ok / s["run"]["durationS"]
print(f"| {n} | {s['devices']['byState']['Reporting']} | {s['process']['threadsPeak']} | "
      f"{s['process']['heapUsedPeakBytes'] / 2**20:.0f} | {rate:.0f} | {failed} | "
      f"{s['latencyMs']['heartbeat']['p50']} / {s['latencyMs']['heartbeat']['p99']} |")
PY
)")
done

history="$here/bench/history/$(date -u +%Y-%m-%d)-http-fleet-embedded.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### HTTP fleet, embedded controller — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1). Each row:"
  echo "\`./fleetsim run --devices N --duration $duration --heartbeat-interval $heartbeat --stats-interval $stats --ramp-rate $ramp\`"
  echo "(run by \`bench/http-fleet.sh ${sizes[*]}\`; the duration includes the ramp)."
  echo
  echo "| devices | Reporting at end | peak threads | peak heap MiB | messages/s (ok) | failed | heartbeat p50 / p99 ms |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
rm -rf "$work"
