#!/usr/bin/env bash
# Benchmark: MQTT fleets (the iot-mqtt profile, telemetry every INTERVAL at QoS 1) against mosquitto
# in its own process on 127.0.0.1, plain and over TLS: for each size, threads, live heap and RSS per
# device, CPU per publish in steady state, connect time, connects a second (the busiest second of the
# ramp), time until all connected, and lateness. Appends to bench/history/DATE-mqtt-fleet.md. The same workload from a
# peer tool, side by side, is bench/mqtt-cpu-threads.sh's.
#   bench/mqtt-fleet.sh [SIZES...]     default: 1000 10000 19000
# Settings: STEADY seconds (default 60), SETTLE (seconds from the ramp's end to the steady window, 30),
# INTERVAL (10s), RAMP (devices/s, 2000), TLS_RAMP (500: each TLS connect is a full handshake, and
# mosquitto makes them on one thread), PLAIN_SIZES and TLS_SIZES (default: the sizes; empty skips
# them). fleetsim's own settings by their environment variables, e.g. FLEETSIM_MAX_CONNECTS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes=("$@"); [ $# -gt 0 ] || sizes=(1000 10000 19000)
read -r -a plain_sizes <<< "${PLAIN_SIZES-${sizes[*]}}"
read -r -a tls_sizes <<< "${TLS_SIZES-${sizes[*]}}"
steady="${STEADY:-60}" settle="${SETTLE:-30}" interval="${INTERVAL:-10s}" ramp="${RAMP:-2000}" tls_ramp="${TLS_RAMP:-500}"

(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/"
results="$here/bench/results/mqtt-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The broker: mosquitto with a plain and a TLS listener, certificates from a CA made here.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 -extfile "$work/san.ext" \
  -out "$work/server.pem" 2>/dev/null
plain=$(free_port) tls=$(free_port)
cat > "$work/mosquitto.conf" <<EOF
per_listener_settings false
allow_anonymous true
persistence false
max_queued_messages 100
log_dest file $work/mosquitto.log
log_type error
log_type warning
listener $plain 127.0.0.1
listener $tls 127.0.0.1
cafile $work/ca.pem
certfile $work/server.pem
keyfile $work/server.key
user $(id -un)
EOF
mosquitto -c "$work/mosquitto.conf" > "$work/mosquitto.out" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$plain) 2>/dev/null && break; sleep 0.2; done

profile="$work/iot-mqtt-bench.conf"
java -jar "$work/fleetsim.jar" profile show iot-mqtt | sed "s/interval = 10s/interval = $interval/" > "$profile"

# One fleet against the broker; prints a table row. $1 devices, $2 broker URL, $3 label, $4 ramp rate.
fleet_row() {
  local n=$1 url=$2 label=$3 ramp=$4 out="$results/$3-$1"
  local total=$(( n / ramp + settle + steady ))
  FLEETSIM_JAR="$work/fleetsim.jar" "$here/fleetsim" run --transport mqtt \
    --broker "$url" --ca-file "$work/ca.pem" --device-profile "$profile" --devices "$n" --ramp-rate "$ramp" \
    --duration "${total}s" --dashboard off --results "$out" > "$out.log" 2>&1 &
  local pid=$!
  sleep $(( n / ramp + settle ))
  local t0 c0 t1 c1
  t0=$(date +%s%3N); c0=$(ticks $pid)
  sleep $(( steady * 2 / 3 ))
  t1=$(date +%s%3N); c1=$(ticks $pid)
  local threads rss heap
  if ! kill -0 $pid 2>/dev/null; then echo "| $label | $n | the fleet ended early: see bench/results/$(basename "$results")/$label-$n.log | | | | | | | | | | |"; return; fi
  threads=$(ls /proc/$pid/task | wc -l)
  rss=$(awk '/VmRSS/ {print $2 * 1024}' /proc/$pid/status)
  jcmd $pid GC.run > /dev/null
  heap=$(jcmd $pid GC.heap_info | awk '/garbage-first heap|total/ && /used/ {for (i=1;i<=NF;i++) if ($i=="used") {v=$(i+1); sub("K","",v); printf "%.0f\n", v*1024; exit}}')
  wait $pid || true
  python3 - "$out" "$n" "$label" "$threads" "$rss" "$heap" "$(( c1 - c0 ))" "$hz" "$t0" "$t1" <<'PY'
import json, sys
d, n, label, threads, rss, heap, ticks, hz, t0, t1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
s = json.load(open(d + "/summary.json"))
samples = [json.loads(l) for l in open(d + "/timeseries.jsonl") if l.strip()]
full = next((x["elapsedS"] for x in samples if x["devices"]["Reporting"] == n), None)
# Connects a second: the busiest second of the ramp, from the samples' Discovering>Reporting moves.
connects = max((x["transitions"].get("Discovering>Reporting", 0) for x in samples), default=0)
window = [x for x in samples if t0 < x["t"] <= t1]
published = sum(x["rates"]["telemetry"]["ok"] for x in window) * ((t1 - t0) / 1000 / max(len(window), 1))
late = sorted(x["latenessMs"]["telemetry"]["p99"] for x in window) or [0]
m = s["mqtt"]
failed = sum(k["failed"] for k in s["messages"].values())
print(f"| {label} | {n} | {s['devices']['byState']['Reporting']} | {threads} | {heap / n:.0f} | {rss / n / 1024:.1f} | "
      f"{ticks / hz / max(published, 1) * 1e6:.0f} | {published / ((t1 - t0) / 1000):.0f} | {m['connectMs']['p50']:.0f} / {m['connectMs']['p99']:.0f} | {connects:.0f} | "
      f"{'never' if full is None else f'{full:.0f} s'} | {late[len(late) // 2]:.0f} / {late[-1]:.0f} | {failed} |")
PY
}

rows=()
for n in "${plain_sizes[@]}"; do rows+=("$(fleet_row "$n" "mqtt://127.0.0.1:$plain" plain "$ramp")"); done
for n in "${tls_sizes[@]}"; do rows+=("$(fleet_row "$n" "mqtts://127.0.0.1:$tls" tls "$tls_ramp")"); done

history="$here/bench/history/$(date -u +%Y-%m-%d)-mqtt-fleet.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### MQTT fleets against mosquitto in its own process — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1), $(mosquitto -h | head -1). \`bench/mqtt-fleet.sh ${sizes[*]}\`: the iot-mqtt profile, telemetry every $interval at QoS 1 (about 150 bytes), ramp $ramp devices/s ($tls_ramp over TLS), max-connects ${FLEETSIM_MAX_CONNECTS:-at its default}, $steady s of steady state from $settle s after the ramp; heap after \`jcmd GC.run\`; CPU: user + system of the fleet process over the first two thirds of the steady state / telemetry publishes PUBACK'd in it; connect = from the device's turn to its SUBACK (TCP and TLS included); connects/s: the busiest second's devices connected; lateness: median and worst of the per-second p99 in the window."
  echo
  echo "| broker | devices | Reporting at end | threads | live heap B/device | RSS KiB/device | CPU µs/publish | publishes/s | connect p50 / p99 ms | connects/s (busiest second) | all connected after | lateness p99 median / worst ms | failed |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
