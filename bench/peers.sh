#!/usr/bin/env bash
# Benchmark (issue 33): fleetsim against Gatling on the same workload, and what the server spends to
# serve it. N devices (default 100,000), each one join then a heartbeat every 10 s (N/10 calls a
# second), against Debian's nginx answering every call with one fixed JSON body
# (bench/profiles/peer-device.conf for fleetsim, bench/gatling's DevicesSimulation for Gatling,
# built by Maven apart). Each tool runs twice, for each of DURATIONS (default "180 360" s, the ramp
# of RAMP s included), against a fresh nginx; whole-process user + system CPU (/usr/bin/time) over
# the calls nginx logged gives the CPU a call over a whole run, and the difference between the two
# runs the marginal CPU a call (start-up and the ramp cancel out). Peak RSS over N gives the memory
# a device. nginx's own CPU a call is its master and worker's over what it logged. Prints the table
# and appends it to bench/history/DATE-peers.md.
#   bench/peers.sh [DEVICES]
# Settings: DURATIONS ("180 360"), RAMP (20, seconds), TOOLS ("fleetsim gatling"), GATLING_HEAP
# (4g), GATLING_CONNECTIONS (the most its shared pool opens; unset: no limit, Gatling's default),
# JAR (a fleetsim.jar instead of this tree's build), JAVA_OPTS (the fleet's, as `./fleetsim` takes
# them). nginx keeps connections for a million requests and 300 s, so the tools' own costs are
# measured, not reconnects. Gatling's users share connections: 100,000 of their own would not fit
# this machine's 20,000 open files.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
devices="${1:-100000}" durations="${DURATIONS:-180 360}" ramp="${RAMP:-20}" tools="${TOOLS:-fleetsim gatling}"
for tool in nginx /usr/bin/time java mvn curl pgrep; do command -v "$tool" > /dev/null || { echo "needs $tool" >&2; exit 1; }; done

build="${JAR:+$(basename "$JAR")}"
if [ -z "${JAR:-}" ]; then
  (cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
  JAR="$here/target/fleetsim.jar" build="$(cd "$here" && git rev-parse --short HEAD)"
fi
(cd "$here/bench/gatling" && mvn -B -q package dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
gatling_cp="$here/bench/gatling/target/classes:$(cat "$here/bench/gatling/target/classpath.txt")"

results="$here/bench/results/peers-$(date -u +%Y%m%d-%H%M%S)-$devices"
mkdir -p "$results"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
nginx_pid=""
trap '[ -z "$nginx_pid" ] || kill "$nginx_pid" 2> /dev/null || true' EXIT

serve() { # a fresh nginx and access log for each run, in $1
  local home="$1"; mkdir -p "$home"
  cat > "$home/nginx.conf" <<CONF
daemon off;
user root;
worker_processes 1;
pid $home/nginx.pid;
error_log $home/error.log;
events { worker_connections 16384; }
http {
  access_log $home/access.log;
  client_body_temp_path $home/body;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$port backlog=4096;
    location / { default_type application/json; return 200 '{"id":"d1","ok":true}'; }
  }
}
CONF
  nginx -p "$home" -c "$home/nginx.conf" -e "$home/error.log" &
  nginx_pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "$url/" && return; sleep 0.1; done
  echo "nginx did not start: $(cat "$home/error.log")" >&2; exit 1
}
nginx_ticks() { # CPU ticks of nginx's master and its workers
  local total=0 p
  for p in "$nginx_pid" $(pgrep -P "$nginx_pid"); do total=$(( total + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done
  echo "$total"
}

rows=()
run() { # tool seconds
  local tool="$1" seconds="$2" home="$results/$1-$2s"
  serve "$home"
  local before; before=$(nginx_ticks)
  if [ "$tool" = fleetsim ]; then
    # Through the launcher, with the heap and collector it gives (it execs java: time sees the JVM).
    FLEETSIM_JAR="$JAR" /usr/bin/time -f "%U %S %M" -o "$home/time.txt" "$here/fleetsim" run \
      --controller "$url" --device-profile "$here/bench/profiles/peer-device.conf" --devices "$devices" \
      --ramp-rate $(( (devices + ramp - 1) / ramp )) --duration "${seconds}s" --dashboard off --results "$home/run" > "$home/tool.log" 2>&1
  else
    # The JVM options Gatling's own launchers give it (gatling-maven-plugin), with the heap asked.
    /usr/bin/time -f "%U %S %M" -o "$home/time.txt" java "-Xmx${GATLING_HEAP:-4g}" -XX:+UseG1GC -XX:MaxInlineLevel=20 -XX:MaxTrivialSize=12 \
      --add-opens=java.base/java.lang=ALL-UNNAMED -cp "$gatling_cp" \
      -Ddevices="$devices" -Dramp="$ramp" -Dseconds="$seconds" -Durl="$url" -Dconnections="${GATLING_CONNECTIONS:-0}" \
      io.gatling.app.Gatling -s DevicesSimulation -rf "$home/gatling" -nr > "$home/tool.log" 2>&1
  fi
  local after; after=$(nginx_ticks)
  kill "$nginx_pid"; wait "$nginx_pid" 2> /dev/null || true; nginx_pid=""
  local calls; calls=$(wc -l < "$home/access.log")
  local non200; non200=$(awk '$9 != 200' "$home/access.log" | wc -l)
  read -r user sys rss_kb < "$home/time.txt"
  rows+=("$tool $seconds $user $sys $rss_kb $calls $non200 $(( after - before ))")
  echo "bench: $tool, ${seconds} s: user $user s, system $sys s, peak RSS $rss_kb KB, $calls calls logged ($non200 not 200)"
}

for seconds in $durations; do for tool in $tools; do run "$tool" "$seconds"; done; done

table=$(python3 - "$devices" "$(getconf CLK_TCK)" "${rows[@]}" <<'PY'
import sys
devices, tck = int(sys.argv[1]), int(sys.argv[2])
runs = {}
for row in sys.argv[3:]:
    tool, seconds, user, sys_, rss, calls, non200, nginx = row.split()
    runs.setdefault(tool, []).append((int(seconds), float(user) + float(sys_), int(rss), int(calls), int(nginx) / tck))
print("| | CPU a call, whole run (" + " / ".join(f"{s} s" for s, *_ in next(iter(runs.values()))) + ") | marginal CPU a call | RSS a device | calls nginx logged |")
print("| --- | --- | --- | --- | --- |")
def cost(cpu, calls):
    whole = " / ".join(f"{1e6 * c / n:.1f} µs" for c, n in zip(cpu, calls))
    return whole, (f"{1e6 * (cpu[-1] - cpu[0]) / (calls[-1] - calls[0]):.1f} µs" if calls[-1] > calls[0] else "—")
served = []
for tool, rs in runs.items():
    calls = [n for *_, n, _ in rs]
    whole, marginal = cost([c for _, c, *_ in rs], calls)
    rss = " / ".join(f"{kb / devices:.1f} KB" for _, _, kb, _, _ in rs)
    print(f"| {tool} | {whole} | {marginal} | {rss} | " + " / ".join(f"{n:,}" for n in calls) + " |")
    served.append((tool, *cost([c for *_, c in rs], calls)))
for tool, whole, marginal in served:
    print(f"| nginx serving {tool}'s calls | {whole} | {marginal} | | |")
PY
)
echo "$table"
history="$here/bench/history/$(date -u +%F)-peers.md"
{
  echo
  echo "### fleetsim against Gatling 3.14.9, $devices devices, a heartbeat every 10 s — $(date -u +%F), build $build"
  echo
  echo "\`bench/peers.sh $devices\` (DURATIONS=\"$durations\", RAMP=$ramp, TOOLS=\"$tools\", GATLING_CONNECTIONS=${GATLING_CONNECTIONS:-unlimited}). Machine: $(nproc) cores, $(java -version 2>&1 | head -1); nginx $(nginx -v 2>&1 | sed 's/.*\///')."
  echo "Runs: fleetsim then Gatling at each duration, each against a fresh nginx; raw files in ${results#$here/}/ (not kept in git)."
  echo
  echo "$table"
} >> "$history"
echo "bench: appended to ${history#$here/}"
