#!/usr/bin/env bash
# Benchmark: what the default fleet costs. For each build in turn (a folder with fleetsim.jar and its
# lib/, e.g. a copy of target/; name one twice, in A B B A order, to compare two on this noisy
# machine): the reference controller in its own process with its defaults (a heartbeat every 10 s,
# stats every 30 s), and a fleet of N ap-v1 devices, the default profile, against it. Prints per run
# the fleet's and the controller's CPU a message (user + system over the replies counted from 60 s to
# 150 s, well past the ramp), the replies a second, and the fleet's heartbeat latency and lateness.
#   bench/default-profile.sh N BUILD [BUILD...]     e.g. bench/default-profile.sh 25000 /tmp/new /tmp/base /tmp/base /tmp/new
# Settings: RAMP (devices a second, default 2000, so that 50,000 are up within 25 s).
set -euo pipefail
n="$1"; shift
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; } # user + system, seconds

for build in "$@"; do
  work="$(mktemp -d)"
  java -jar "$build/fleetsim.jar" controller --port 0 --state-dir "$work/state" > "$work/controller.log" 2>&1 &
  controller=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/controller.log" && break; sleep 0.3; done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/controller.log" | head -1)
  java -Xmx2g -jar "$build/fleetsim.jar" run --controller "$url" --devices "$n" --ramp-rate "${RAMP:-2000}" --duration 160s \
    --dashboard off --results "$work/results" > "$work/run.log" 2>&1 &
  fleet=$!
  sleep 60; f0=$(cpu "$fleet"); c0=$(cpu "$controller"); t0=$(date +%s.%N)
  sleep 90; f1=$(cpu "$fleet"); c1=$(cpu "$controller"); t1=$(date +%s.%N)
  wait "$fleet" || true
  kill "$controller"; wait "$controller" 2>/dev/null || true
  # The status lines of those 90 s: replies a second.
  rate=$(grep -o '| [0-9]* msg/s' "$work/run.log" | tail -100 | head -90 | awk '{s += $2} END {print s / NR}')
  python3 - "$build" "$f0" "$f1" "$c0" "$c1" "$t0" "$t1" "$rate" <<'PY'
import sys
build, f0, f1, c0, c1, t0, t1, rate = sys.argv[1], *map(float, sys.argv[2:])
per = lambda a, b: (b - a) / (t1 - t0) / rate * 1e6
print(f"{build}: fleet {per(f0, f1):.2f} µs a message, controller {per(c0, c1):.2f} µs; {rate:.0f} messages a second")
PY
  grep -E "^  heartbeat |lateness:" "$work/run.log" | sed 's/^/    /'
  rm -rf "$work"
done
