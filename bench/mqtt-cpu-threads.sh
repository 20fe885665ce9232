#!/usr/bin/env bash
# Where an MQTT fleet's CPU goes: N devices (default 1000) of iot-mqtt publishing QoS 1 once a
# second to a broker already listening at BROKER (default mqtt://127.0.0.1:1883); over 30 s of steady
# state (from 20 s in), CPU ticks by thread name, context switches, and CPU and switches a publish.
# With MQTT_BENCHMARK (the peer tool's binary, see bench/mqtt-fleet.sh), then the same workload from
# it, measured the same way over the same window.
#   bench/mqtt-cpu-threads.sh JAR [N]     JOPTS: extra JVM options
set -euo pipefail
jar=$1 n=${2:-1000} broker=${BROKER:-mqtt://127.0.0.1:1883} work="$(mktemp -d)"
hz=$(getconf CLK_TCK)

# Samples process $1 from 20 s to 50 s into its run: ticks by thread, then one line of totals.
measure() {
  local pid=$1 name=$2
  snap() { for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(tr ' ' _ < "$t/comm" | cut -c1-13)"; done 2>/dev/null | sort; }
  switches() { cat /proc/$pid/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
  sleep 20
  local x0 a b x1 threads
  x0=$(switches); snap > "$work/$name-a"; sleep 30; snap > "$work/$name-b"; x1=$(switches)
  threads=$(ls /proc/$pid/task | wc -l)
  join "$work/$name-a" "$work/$name-b" | awk '{d[$3] += $4 - $2} END {for (k in d) print d[k], k}' | sort -rn | head -10 | sed 's/^/  /'
  local ticks; ticks=$(join "$work/$name-a" "$work/$name-b" | awk '{t += $4 - $2} END {print t}')
  # n publishes a second for 30 s
  echo "$name: $(python3 -c "print(round($ticks / $hz / ($n * 30) * 1e6))") µs CPU a publish, $(python3 -c "print(round(($x1 - $x0) / ($n * 30), 2))") context switches a publish, $threads threads"
}

java -jar "$jar" profile show iot-mqtt | sed "s/interval = 10s/interval = 1s/" > "$work/peer.conf"
java ${JOPTS:-} -Xmx1g -XX:+UseG1GC -jar "$jar" run --transport mqtt --broker "$broker" --device-profile "$work/peer.conf" \
  --devices "$n" --ramp-rate 2000 --duration 60s --dashboard off --results "$work/res" > "$work/run.log" 2>&1 &
pid=$!
measure $pid fleetsim
wait $pid || true
python3 -c "import json; print('  fleetsim telemetry', json.load(open('$work/res/summary.json'))['messages']['telemetry'])"

if [ -n "${MQTT_BENCHMARK:-}" ]; then
  "$MQTT_BENCHMARK" -broker "tcp://${broker#mqtt://}" -clients "$n" -count 60 -message-interval 1 -qos 1 -size 150 \
    -topic devices/bench/telemetry -format json -quiet > "$work/peer.json" 2>&1 &
  pid=$!
  measure $pid mqtt-benchmark
  wait $pid || true
  python3 -c "import json; print('  mqtt-benchmark successes', json.load(open('$work/peer.json'))['totals']['successes'])"
fi
