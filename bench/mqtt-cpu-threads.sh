#!/usr/bin/env bash
# Where an MQTT fleet's CPU goes: N devices (default 1000) of iot-mqtt publishing QoS 1 once a
# second to a broker already listening at BROKER (default mqtt://127.0.0.1:1883); over 30 s of steady
# state, CPU ticks by thread name, context switches a second, and the run's telemetry counts.
#   bench/mqtt-cpu-threads.sh JAR [N]     JOPTS: extra JVM options
set -euo pipefail
jar=$1 n=${2:-1000} broker=${BROKER:-mqtt://127.0.0.1:1883} work="$(mktemp -d)"
java -jar "$jar" profile show iot-mqtt | sed "s/interval = 10s/interval = 1s/" > "$work/peer.conf"
java ${JOPTS:-} -Xmx1g -XX:+UseG1GC -jar "$jar" run --transport mqtt --broker "$broker" --device-profile "$work/peer.conf" \
  --devices "$n" --ramp-rate 2000 --duration 60s --dashboard off --results "$work/res" > "$work/run.log" 2>&1 &
pid=$!
sleep 20
snap() { for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(tr ' ' _ < "$t/comm" | cut -c1-13)"; done | sort; }
switches() { cat /proc/$pid/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
x0=$(switches); snap > "$work/a"; sleep 30; snap > "$work/b"; x1=$(switches)
echo "context switches a second: $(( (x1 - x0) / 30 ))"
join "$work/a" "$work/b" | awk '{d[$3] += $4 - $2; total += $4 - $2} END {for (k in d) print d[k], k; print total, "TOTAL (ticks in 30 s)"}' | sort -rn | head -12
wait $pid || true
python3 -c "import json; print('telemetry', json.load(open('$work/res/summary.json'))['messages']['telemetry'])"
