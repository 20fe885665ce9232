#!/usr/bin/env bash
# Where an MQTT fleet's CPU goes: N devices (default 1000) of iot-mqtt publishing QoS 1 every
# INTERVAL seconds (default 1) to a broker already listening at BROKER (default mqtt://127.0.0.1:1883);
# over WINDOW seconds of steady state (default 30) from START seconds in (default 20), CPU ticks and
# context switches by thread name (numbers dropped), and CPU and switches a publish.
# With MQTT_BENCHMARK (the peer tool mqtt-benchmark's binary), the same workload from it
# at the same time, measured over the same window: on a shared machine whose speed changes from
# minute to minute, only figures taken together compare. The peer uses the same broker unless
# PEER_BROKER gives it one of its own: one mosquitto cannot hold two fleets of 10,000 within its
# 20,000 open files.
# The Go proxy here refuses mqtt-benchmark itself; build it from its source (its dependencies come
# from the proxy): git clone https://github.com/krylovsk/mqtt-benchmark && (cd mqtt-benchmark && go build .)
#   bench/mqtt-cpu-threads.sh JAR [N]     JOPTS: extra JVM options (the fleet runs through ./fleetsim)
set -euo pipefail
jar=$1 n=${2:-1000} broker=${BROKER:-mqtt://127.0.0.1:1883} work="$(mktemp -d)"
peer_broker=${PEER_BROKER:-$broker}
interval=${INTERVAL:-1} start=${START:-20} window=${WINDOW:-30}
duration=$(( start + window + 10 ))
publishes=$(( n * window / interval )) # in the window
hz=$(getconf CLK_TCK)

# Samples process $1 over the window (START s into its run, for WINDOW s): ticks by thread, then one line of totals.
measure() {
  local pid=$1 name=$2
  snap() { for t in /proc/$pid/task/*; do
    echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(awk '/ctxt_switches/ {s += $2} END {print s}' "$t/status") $(tr ' ' _ < "$t/comm" | sed 's/-*[0-9]*$//' | cut -c1-24)"
  done 2>/dev/null | sort; }
  switches() { cat /proc/$pid/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
  sleep "$start"
  local x0 a b x1 threads
  x0=$(switches); snap > "$work/$name-a"; sleep "$window"; snap > "$work/$name-b"; x1=$(switches)
  threads=$(ls /proc/$pid/task | wc -l)
  # joined: tid ticks switches name ticks switches name
  echo "  ticks switches thread"
  join "$work/$name-a" "$work/$name-b" | awk '{t[$4] += $5 - $2; x[$4] += $6 - $3} END {for (k in t) print t[k], x[k], k}' | sort -rn | head -10 | sed 's/^/  /'
  local ticks; ticks=$(join "$work/$name-a" "$work/$name-b" | awk '{t += $5 - $2} END {print t}')
  echo "$name: $(python3 -c "print(round($ticks / $hz / $publishes * 1e6))") µs CPU a publish, $(python3 -c "print(round(($x1 - $x0) / $publishes, 2))") context switches a publish, $threads threads"
}

java -jar "$jar" profile show iot-mqtt | sed "s/interval = 10s/interval = ${interval}s/" > "$work/peer.conf"
# Through the launcher, with the heap and collector settings it gives users.
FLEETSIM_JAR="$jar" JAVA_OPTS="${JOPTS:-}" "$(dirname "$0")/../fleetsim" run --transport mqtt --broker "$broker" --device-profile "$work/peer.conf" \
  --devices "$n" --ramp-rate 2000 --duration "${duration}s" --dashboard off --results "$work/res" > "$work/run.log" 2>&1 &
pid=$!
if [ -n "${MQTT_BENCHMARK:-}" ]; then
  # Its clients start over one interval, so that their publishes spread over it as the devices'
  # phases do: started at once, they publish in bursts of N, which wake a process once for N publishes.
  "$MQTT_BENCHMARK" -broker "tcp://${peer_broker#mqtt://}" -clients "$n" -count $(( duration / interval )) -message-interval "$interval" \
    -ramp-up-time "$interval" -qos 1 -size 150 -topic devices/bench/telemetry -format json -quiet > "$work/peer.json" 2> "$work/peer.log" &
  peer=$!
  measure $peer mqtt-benchmark > "$work/peer.measure" &
fi
measure $pid fleetsim
wait $pid || true
python3 - "$work/res" "$start" "$window" <<'PY'
import json, statistics, sys
print('  fleetsim telemetry', json.load(open(sys.argv[1] + '/summary.json'))['messages']['telemetry'])
rows = [json.loads(l) for l in open(sys.argv[1] + '/timeseries.jsonl')]
late = [r['latenessMs']['telemetry'] for r in rows if int(sys.argv[2]) <= r['elapsedS'] <= int(sys.argv[2]) + int(sys.argv[3])]
print('  lateness in the window, median of the per-second p50 / p99: %.1f / %.1f ms' % (
    statistics.median(l['p50'] for l in late), statistics.median(l['p99'] for l in late)))
PY

if [ -n "${MQTT_BENCHMARK:-}" ]; then
  wait # the peer and its measurement
  cat "$work/peer.measure"
  python3 -c "import json; print('  mqtt-benchmark successes', json.load(open('$work/peer.json'))['totals']['successes'])"
fi
