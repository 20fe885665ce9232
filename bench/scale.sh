#!/usr/bin/env bash
# Benchmark: how far one process goes. HTTP fleets with --profile large (heartbeat 60 s, stats every
# 300 s) against the reference controller in its own process; for each size: live heap per device
# (after a full GC, in steady state), threads, CPU per delivered message, messages/s, lateness of
# scheduled sends, ramp time, and the controller's live heap per registered device. Appends a table
# and a heap histogram of the largest fleet to bench/history/DATE-scale-http.md (-https with TLS=on).
#   bench/scale.sh [SIZES...]     default: 10000 100000 1000000
# Settings: STEADY (steady state after the ramp, default 3m); PROFILE (a device profile, default ap-v1,
# e.g. bench/profiles/ap-v1-heavy.conf for what templating costs); TLS=on (the controller serves
# HTTPS with --tls, the fleet trusts its CA with --ca-file); RAMP_RATE (devices a second, default the
# profile's 10,000); CONTROLLER_OPTS (JVM options of the controller, e.g. -Dfleetsim.controller.idle-timeout=600s).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes=("$@")
[ $# -gt 0 ] || sizes=(10000 100000 1000000)
steady="${STEADY:-3m}"
profile="${PROFILE:-ap-v1}"
tls="${TLS:-off}"
[ ! -f "$profile" ] || profile="$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile")"

(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$here/fleetsim" "$work/"
mkdir -p "$work/target" && mv "$work/fleetsim.jar" "$work/lib" "$work/target/" && touch "$work/target/fleetsim.jar"
mkdir -p "$work/src/main" && touch -d '2000-01-01' "$work/src/main" "$work/fleetsim" # the copied launcher must not rebuild
results="$here/bench/results/scale-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
seconds() { python3 -c "import re; m=re.fullmatch(r'(\d+)([smh])','$1'); print(int(m[1])*{'s':1,'m':60,'h':3600}[m[2]])"; }
live_heap() { # bytes of live heap after a full GC
  jcmd "$1" GC.run > /dev/null
  jcmd "$1" GC.heap_info | awk '/garbage-first heap|total/ && /used/ {for (i=1;i<=NF;i++) if ($i=="used") {v=$(i+1); sub("K","",v); printf "%.0f\n", v*1024; exit}}'
}

rows=()
for n in "${sizes[@]}"; do
  java -Xmx6g ${CONTROLLER_OPTS:-} -jar "$work/target/fleetsim.jar" controller --port 0 --profile large --tls="$tls" --state-dir "$work/controller" > "$results/$n-controller.log" 2>&1 &
  controller=$!
  for _ in $(seq 100); do grep -q "listening on" "$results/$n-controller.log" && break; sleep 0.2; done
  url=$(grep -o 'https\?://127.0.0.1:[0-9]*' "$results/$n-controller.log" | head -1)
  trust=(); [ "$tls" = off ] || trust=(--ca-file "$work/controller/tls/ca.pem")
  ramp=(); [ -z "${RAMP_RATE:-}" ] || ramp=(--ramp-rate "$RAMP_RATE")
  ramp_s=$(( n / ${RAMP_RATE:-10000} + 60 )) # the profile ramps at 10,000 devices/s, as fast as the controller admits them
  total=$(( ramp_s + $(seconds "$steady") ))
  cmd="./fleetsim run --profile large --device-profile $profile --controller $url --devices $n --dashboard off --duration ${total}s"
  echo "bench: $cmd" >&2
  (cd "$work" && ./fleetsim run --profile large --device-profile "$profile" --controller "$url" --devices "$n" --dashboard off --duration "${total}s" \
     --results "$results/$n" "${trust[@]}" "${ramp[@]}") > "$results/$n.log" 2>&1 &
  launcher=$!
  sleep 2
  fleet=$(pgrep -f "fleetsim.jar run --profile large --device-profile $profile --controller $url" | head -1)
  # Steady state: CPU over its first two thirds, then the live heap of both processes.
  sleep "$ramp_s"
  steady_from=$(date +%s%3N); steady_ticks_from=$(awk '{print $14 + $15}' "/proc/$fleet/stat")
  sleep $(( $(seconds "$steady") * 2 / 3 ))
  steady_to=$(date +%s%3N); steady_ticks_to=$(awk '{print $14 + $15}' "/proc/$fleet/stat")
  fleet_heap=$(live_heap "$fleet")
  controller_heap=$(live_heap "$controller")
  threads=$(ls /proc/$fleet/task | wc -l)
  if [ "$n" = "${sizes[-1]}" ]; then jmap -histo:live "$fleet" | head -30 > "$results/histogram-$n.txt"; fi
  cpu_ticks=0
  while kill -0 "$fleet" 2>/dev/null; do # user + system time of the fleet's JVM, until it exits
    t=$(awk '{print $14 + $15}' "/proc/$fleet/stat" 2>/dev/null || true)
    [ -n "$t" ] && cpu_ticks=$t
    sleep 1
  done
  wait "$launcher" || true
  kill "$controller"; wait "$controller" 2>/dev/null || true
  rows+=("$(python3 - "$results/$n" "$n" "$fleet_heap" "$controller_heap" "$threads" "$cpu_ticks" "$(getconf CLK_TCK)" \
     "$steady_from" "$steady_to" "$steady_ticks_from" "$steady_ticks_to" <<'PY'
import json, sys
d, n, fheap, cheap, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
hz = int(sys.argv[7])
cpu = int(sys.argv[6]) / hz  # user + system seconds of the fleet process
t0, t1, steady_cpu = int(sys.argv[8]), int(sys.argv[9]), (float(sys.argv[11]) - float(sys.argv[10])) / hz
s = json.load(open(d + "/summary.json"))
samples = [json.loads(l) for l in open(d + "/timeseries.jsonl") if l.strip()]
full = next((x["elapsedS"] for x in samples if x["devices"]["Reporting"] == n), None)
steady = [x for x in samples if full is not None and x["elapsedS"] > full + 60]
late = sorted(x["latenessMs"]["heartbeat"]["p99"] for x in steady) or [0]
late50 = sorted(x["latenessMs"]["heartbeat"]["p50"] for x in steady) or [0]
ok = sum(k["ok"] for k in s["messages"].values())
def delivered(since):  # messages delivered between the samples after `since` and t1
    return sum(sum(r["ok"] for r in x["rates"].values()) * (x["elapsedS"] - p["elapsedS"])
               for p, x in zip(samples, samples[1:]) if since < x["t"] <= t1)
steady_ok, run_ok = delivered(t0), delivered(0)
run_cpu = float(sys.argv[11]) / hz  # from the start to the end of the steady window, before the bench's own full GCs
failed = sum(k["failed"] for k in s["messages"].values())
print(f"| {n} | {s['devices']['byState']['Reporting']} | {fheap / n:.0f} | {cheap / n:.0f} | {threads} | "
      f"{cpu / max(ok, 1) * 1e6:.1f} / {run_cpu / max(run_ok, 1) * 1e6:.1f} / {steady_cpu / max(steady_ok, 1) * 1e6:.1f} | {ok / s['run']['durationS']:.0f} | {failed} | "
      f"{late50[len(late50)//2]:.0f} / {late[len(late)//2]:.0f} / {late[len(late)*9//10]:.0f} / {late[-1]:.0f} | {'never' if full is None else f'{full:.0f} s'} |")
PY
)")
done

history="$here/bench/history/$(date -u +%Y-%m-%d)-scale-$([ "$tls" = off ] && echo http || echo https).md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### Scale: HTTP fleets against the controller in its own process$([ "$tls" = off ] || echo ", over TLS") — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1), G1 with -XX:MaxGCPauseMillis=50 and the heap from the launcher."
  echo "Controller: \`java -Xmx6g -jar target/fleetsim.jar controller --port 0 --profile large\`; each row:"
  echo "\`./fleetsim run --profile large --controller URL --devices N --dashboard off --duration (N/10000 + 60 s + $steady)\`"
  echo "(run by \`TLS=$tls PROFILE=$profile STEADY=$steady bench/scale.sh ${sizes[*]}\`). Live heap after \`jcmd GC.run\`, two thirds into the steady state;"
  echo "CPU: user + system seconds of the fleet process / messages delivered: over the whole process (with the bench's forced full collections and the shutdown), from the start to the end of the steady window (ramp included, before those collections), and over the steady window, the first two thirds of the steady state; lateness: median over the steady-state seconds of each second's p50 / p99, the p99 of the second at the 90th percentile of those, and the worst p99."
  echo
  echo "| devices | Reporting at end | fleet live heap B/device | controller live heap B/device | threads | CPU µs/message process / ramp + steady / steady | messages/s | failed | heartbeat lateness p50 / p99 / p99 of the 90th-percentile second / worst ms | all Reporting after |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  last="${sizes[-1]}"
  if [ -f "$results/histogram-$last.txt" ]; then
    echo
    echo "Heap histogram of the fleet process at $last devices (\`jmap -histo:live\`, top entries):"
    echo
    echo '```'
    cat "$results/histogram-$last.txt"
    echo '```'
  fi
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
rm -rf "$work"
