#!/usr/bin/env bash
# bench/ab-cpu.sh JAR [run args]: the fleet CPU seconds over the same 60 s of steady state (90-150 s) for
# 100,000 devices against the controller in its own process, to compare two builds back to back
# (run each twice, in both orders: this machine is shared and noisy). Prints one line.
set -euo pipefail
jar="$1"; shift
log=$(mktemp)
java -Xmx4g -jar "$jar" controller --port 0 --profile large --state-dir "$(mktemp -d)" > "$log" 2>&1 &
ctl=$!
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
java -Xmx512m -Xms512m -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -jar "$jar" run --profile large --controller "$url" --devices 100000 \
  --dashboard off --duration 160s --results "$(mktemp -d)" "$@" > /dev/null 2>&1 &
sleep 1
fleet=$(pgrep -f "$jar run --profile large --controller $url" | head -1)
sleep 89; a=$(awk '{print $14 + $15}' /proc/$fleet/stat)
sleep 60; b=$(awk '{print $14 + $15}' /proc/$fleet/stat)
wait %2 || true
kill $ctl; wait $ctl 2>/dev/null || true
echo "$(basename $(dirname $(dirname $jar))) cpu_s_per_60s=$(python3 -c "print(($b-$a)/$(getconf CLK_TCK))")"
