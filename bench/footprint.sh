#!/usr/bin/env bash
# bench/tls-fleet.sh N [JAR...]: N devices against the reference controller serving HTTPS in its own
# process, each device on a TLS connection of its own (bench/profiles/ap-v1-per-device.conf; PROFILE=ap-v1
# for shared TLS connections), a heartbeat every 10 s. Once all are Reporting and 15 s more, a 60 s
# window: the fleet's CPU a message and the controller's, then the fleet's live heap a device (after
# jcmd GC.run), RSS and threads. Each JAR in turn (default target/fleetsim.jar): compare two builds in
# the same hour, A B B A on a noisy machine. RAMP (devices a second, default 100: the controller takes
# TLS handshakes at about 100 a second here beside the fleet's ramp). Appends to
# bench/history/DATE-tls-fleet.md and prints it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="$1"; shift
jars=("$@"); [ ${#jars[@]} -gt 0 ] || jars=("$here/target/fleetsim.jar")
profile="${PROFILE:-$here/bench/profiles/ap-v1-per-device.conf}"
ramp="${RAMP:-100}"
history="$here/bench/history/$(date -u +%Y-%m-%d)-tls-fleet.md"
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

[ -f "$history" ] || printf '# TLS fleets against the reference controller over HTTPS\n\nRun by `bench/tls-fleet.sh`; a line a build.\n\n' > "$history"
echo "### $(date -u '+%Y-%m-%d %H:%M') UTC, $n devices, profile $(basename "$profile"), ramp $ramp/s, $(nproc) cores" >> "$history"
for jar in "${jars[@]}"; do
  work=$(mktemp -d)
  java -Xmx5g -Dfleetsim.controller.idle-timeout=900s -jar "$jar" controller --port 0 --tls=on --state-dir "$work/controller" > "$work/controller.log" 2>&1 &
  controller=$!
  fleet=""
  trap 'kill $fleet $controller 2>/dev/null || true' EXIT
  for _ in $(seq 1 240); do grep -q "listening" "$work/controller.log" && break; sleep 0.5; done
  url=$(grep -o "https://127.0.0.1:[0-9]*" "$work/controller.log" | head -1)
  # The fleet's heap fixed, so that builds compare at the same heap; its connections kept past the window.
  java -Xmx2g -Dfleetsim.http.keep-alive-timeout=800s -jar "$jar" run --controller "$url" --ca-file "$work/controller/tls/ca.pem" \
    --device-profile "$profile" --devices "$n" --ramp-rate "$ramp" --duration 1h --dashboard off --results "$work/results" > "$work/run.log" 2>&1 &
  fleet=$!
  for _ in $(seq 1 $(( n / ramp * 3 + 120 ))); do grep -q "Reporting $n |" "$work/run.log" && break; sleep 1; done
  grep -q "Reporting $n |" "$work/run.log" || { echo "not all $n Reporting: $(tail -1 "$work/run.log")" | tee -a "$history"; kill $fleet $controller; continue; }
  sleep 15
  f0=$(cpu $fleet); c0=$(cpu $controller); lines=$(wc -l < "$work/run.log")
  sleep 60
  f1=$(cpu $fleet); c1=$(cpu $controller)
  rate=$(tail -n +$((lines + 1)) "$work/run.log" | grep -o "| [0-9]* msg/s" | awk '{s += $2; k++} END {print s / k}')
  jcmd $fleet GC.run > /dev/null
  heap=$(jcmd $fleet GC.class_histogram | awk '/^Total/ {print $3}')
  line="- $jar: $rate messages a second; fleet $(echo "scale=1; ($f1 - $f0) * 1000000 / $tck / ($rate * 60)" | bc) µs a message, controller $(echo "scale=1; ($c1 - $c0) * 1000000 / $tck / ($rate * 60)" | bc) µs; fleet heap $((heap / n)) B a device, RSS $(( $(ps -o rss= -p $fleet) / 1024 )) MiB, $(ls /proc/$fleet/task | wc -l) threads"
  echo "$line" | tee -a "$history"
  kill $fleet $controller; wait $fleet $controller 2>/dev/null || true
  trap - EXIT
done
echo "(appended to $history)"
