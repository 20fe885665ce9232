#!/usr/bin/env bash
# Benchmark: what an SSH fleet's ramp costs, for builds side by side. For each build (a folder with
# fleetsim.jar and its lib/, e.g. a copy of target/), in turn, ROUNDS times: the reference controller
# with its SSH server in its own process, and a fleet of N SSH devices ramping at 500/s for 100 s.
# Prints, per run: seconds until every tunnel was up, and the CPU seconds of the fleet and of the
# controller (whose SSH server does the other half of each handshake); and, while the tunnels up went
# from a quarter to three quarters of N (past the start, before the tail; on a machine too slow for
# that, to as many as came up), handshakes a second and each process's CPU milliseconds a handshake.
# Both run through this tree's launcher (FLEETSIM_JAR), with the JVM options it gives users; JAVA_OPTS
# reaches both. The fleet's heap is the launcher's: 19,000 SSH devices take 2,430 MiB.
#   bench/ssh-ramp.sh N BUILD [BUILD...]      e.g. bench/ssh-ramp.sh 6000 /tmp/base /tmp/new
# Settings: ROUNDS (default 2), RAMP (devices a second asked for, default 500).
set -euo pipefail
n="$1"; shift
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat" 2>/dev/null; } # user + system, seconds
launcher="$(cd "$(dirname "$0")/.." && pwd)/fleetsim"

for round in $(seq "${ROUNDS:-2}"); do
  for build in "$@"; do
    work="$(mktemp -d)"
    FLEETSIM_JAR="$build/fleetsim.jar" "$launcher" controller --port 0 --ssh-port 0 --heartbeat-interval 30s --stats-interval 300s \
      --state-dir "$work/state" > "$work/controller.log" 2>&1 &
    controller=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/controller.log" && break; sleep 0.3; done
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/controller.log" | head -1)
    start=$(date +%s.%N)
    FLEETSIM_JAR="$build/fleetsim.jar" "$launcher" run --controller "$url" --transport ssh --devices "$n" --ramp-rate "${RAMP:-500}" \
      --max-handshakes 32 --duration 100s --dashboard off --results "$work/results" > "$work/run.log" 2>&1 &
    fleet=$!
    up="" fleet_cpu=0
    while kill -0 "$fleet" 2>/dev/null; do
      tunnels=$(tail -1 "$work/run.log" | grep -o 'tunnels [0-9]* up' | grep -o '[0-9]*' || true)
      if [ -z "$up" ] && [ "${tunnels:-0}" = "$n" ]; then up=$(python3 -c "print(round($(date +%s.%N) - $start, 1))"); fi
      fleet_cpu=$(cpu "$fleet" || echo "$fleet_cpu")
      echo "$(date +%s.%N) ${tunnels:-0} $fleet_cpu $(cpu "$controller")" >> "$work/samples"
      sleep 0.5
    done
    controller_cpu=$(cpu "$controller")
    kill "$controller"; wait "$controller" 2>/dev/null || true
    rate=$(python3 - "$work/samples" "$n" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 4]
n = int(sys.argv[2])
a = next((r for r in rows if r[1] >= n / 4), None)
# Three quarters up, or, on a machine too slow for that within the run, as many as came up.
b = next((r for r in rows if r[1] >= n * 3 / 4), None) or (max(rows, key=lambda r: r[1]) if rows else None)
if a and b and b[1] > a[1]:
    made = b[1] - a[1]
    print(f"; from {n // 4} to {b[1]:.0f} tunnels up: {made / (b[0] - a[0]):.0f} handshakes a second, "
          f"CPU ms a handshake: fleet {(b[2] - a[2]) * 1000 / made:.2f}, controller {(b[3] - a[3]) * 1000 / made:.2f}")
PY
)
    echo "round $round $build: all $n tunnels up after ${up:-never} s; CPU s: fleet $fleet_cpu, controller $controller_cpu$rate"
    rm -rf "$work"
  done
done
