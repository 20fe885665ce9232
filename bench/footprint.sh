#!/usr/bin/env bash
# bench/footprint.sh KIND N [JAR...]: what a device costs while it holds a connection or a tunnel of
# its own, against the reference controller in its own process, a heartbeat every 10 s. KIND:
#   tls         HTTPS, each device on a TLS connection of its own (bench/profiles/ap-v1-per-device.conf)
#   tls-shared  HTTPS on the fleet's shared connections (ap-v1)
#   ssh         an SSH tunnel each (--transport ssh), to the controller's SSH server
# Once all are Reporting and 15 s more, a 60 s window: the fleet's CPU a message and the controller's,
# then the fleet's live heap a device (after jcmd GC.run), RSS and threads; with HISTO=1 also the
# classes that hold the most of it. Each JAR in turn (default target/fleetsim.jar, with its lib/
# beside it): compare two builds in the same hour, A B B A on a noisy machine. RAMP (devices a
# second; default 100 for tls, the rate the controller takes TLS handshakes beside the fleet's ramp
# here, and 500 otherwise); HANDSHAKES, ssh's --max-handshakes (default 16: with 32 at a time the
# controller, on the same cores, spent so much on handshakes at 19,000 tunnels that its replies
# outlasted the fleet's timeout and devices re-tunnelled, bench/history/2026-11-27-ssh-channel-wire-storm-explained.md);
# FLEET_OPTS, JVM options for the fleet. Appends to
# bench/history/DATE-footprint.md and prints it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kind="$1"; n="$2"; shift 2
jars=("$@"); [ ${#jars[@]} -gt 0 ] || jars=("$here/target/fleetsim.jar")
shakes=""
case "$kind" in
  tls) controller_flags=(--tls=on); fleet_flags=(--device-profile "$here/bench/profiles/ap-v1-per-device.conf"); ramp="${RAMP:-100}" ;;
  tls-shared) controller_flags=(--tls=on); fleet_flags=(--device-profile ap-v1); ramp="${RAMP:-500}" ;;
  ssh) controller_flags=(--ssh-port 0); fleet_flags=(--transport ssh --max-handshakes "${HANDSHAKES:-16}" --known-hosts KNOWN); ramp="${RAMP:-500}"
    shakes=", ${HANDSHAKES:-16} handshakes at a time" ;;
  *) echo "bench/footprint.sh: KIND is tls, tls-shared or ssh, not '$kind'" >&2; exit 2 ;;
esac
history="$here/bench/history/$(date -u +%Y-%m-%d)-footprint.md"
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

[ -f "$history" ] || printf '# What a device holding a connection of its own costs\n\nRun by `bench/footprint.sh`; a line a build.\n\n' > "$history"
echo "### $(date -u '+%Y-%m-%d %H:%M') UTC, $kind, $n devices, ramp $ramp/s$shakes, $(nproc) cores" >> "$history"
for jar in "${jars[@]}"; do
  work=$(mktemp -d)
  java -Xmx5g -Dfleetsim.controller.idle-timeout=900s -jar "$jar" controller --port 0 "${controller_flags[@]}" --state-dir "$work/controller" > "$work/controller.log" 2>&1 &
  controller=$!
  fleet=""
  trap 'kill $fleet $controller 2>/dev/null || true' EXIT
  for _ in $(seq 1 240); do grep -q "listening" "$work/controller.log" && break; sleep 0.5; done
  url=$(grep -o "https\?://127.0.0.1:[0-9]*" "$work/controller.log" | head -1)
  trust=(); [[ "$kind" == tls* ]] && trust=(--ca-file "$work/controller/tls/ca.pem")
  flags=("${fleet_flags[@]/KNOWN/$work/known_hosts}") # the controller's host key, trusted on first use
  # The fleet's heap fixed, so that builds compare at the same heap; its connections kept past the window.
  java -Xmx2g -Dfleetsim.http.keep-alive-timeout=800s ${FLEET_OPTS:-} -jar "$jar" run --controller "$url" "${trust[@]}" "${flags[@]}" \
    --devices "$n" --ramp-rate "$ramp" --duration 1h --dashboard off --results "$work/results" > "$work/run.log" 2>&1 &
  fleet=$!
  for _ in $(seq 1 $(( n / ramp * 3 + 120 ))); do grep -q "Reporting $n |" "$work/run.log" && break; sleep 1; done
  grep -q "Reporting $n |" "$work/run.log" || { echo "not all $n Reporting: $(tail -1 "$work/run.log")" | tee -a "$history"; kill $fleet $controller; continue; }
  sleep 15
  f0=$(cpu $fleet); c0=$(cpu $controller); lines=$(wc -l < "$work/run.log")
  sleep 60
  f1=$(cpu $fleet); c1=$(cpu $controller)
  rate=$(tail -n +$((lines + 1)) "$work/run.log" | grep -o "| [0-9]* msg/s" | awk '{s += $2; k++} END {print s / k}')
  jcmd $fleet GC.run > /dev/null
  jcmd $fleet GC.class_histogram > "$work/histogram.txt"
  heap=$(awk '/^Total/ {print $3}' "$work/histogram.txt")
  line="- $jar: $rate messages a second; fleet $(echo "scale=1; ($f1 - $f0) * 1000000 / $tck / ($rate * 60)" | bc) µs a message, controller $(echo "scale=1; ($c1 - $c0) * 1000000 / $tck / ($rate * 60)" | bc) µs; fleet heap $((heap / n)) B a device, RSS $(( $(ps -o rss= -p $fleet) / 1024 )) MiB, $(ls /proc/$fleet/task | wc -l) threads"
  echo "$line" | tee -a "$history"
  if [ "${HISTO:-0}" = 1 ]; then # bytes a device by class, the ten largest
    awk -v n="$n" '$1 ~ /^[0-9]+:$/ && $3 / n >= 100 {printf "  - %s: %d B a device (%.1f instances)\n", $4, $3 / n, $2 / n}' "$work/histogram.txt" | head -10 | tee -a "$history"
  fi
  kill $fleet $controller; wait $fleet $controller 2>/dev/null || true
  trap - EXIT
done
echo "(appended to $history)"
