#!/usr/bin/env bash
# Benchmark (issue 33): fleetsim against Gatling on the same workload, and what the server spends to
# serve it. N devices (default 100,000), each one join then a heartbeat every 10 s (N/10 calls a
# second), against Debian's nginx answering every call with one fixed JSON body
# (bench/profiles/peer-device.conf for fleetsim, bench/gatling's DevicesSimulation for Gatling,
# built by Maven apart). Each tool runs twice, for each of DURATIONS (default "180 360" s, the ramp
# of RAMP s included), against a fresh nginx; whole-process user + system CPU (/usr/bin/time) over
# the calls nginx logged gives the CPU a call over a whole run, and the difference between the two
# runs the marginal CPU a call (start-up and the ramp cancel out). Within each run, the median over
# 10 s intervals from a minute after the ramp of the CPU over the requests nginx served in them gives
# the steady CPU a call, which one noisy stretch of a run cannot move, and the same median of the
# tool's CPU over nginx's, which the machine's drifting speed moves less than either. Peak RSS over
# N gives the memory a device. nginx's own CPU a call is its master and worker's over what it
# logged. Prints the table and appends it to bench/history/DATE-peers.md.
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
    location = /nginx-status { stub_status; access_log off; }
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

served() { curl -s "$url/nginx-status" | awk 'NR == 3 {print $3}'; } # requests nginx has served
sample() { # every 10 s while the tool runs: seconds in, the tool's CPU ticks, nginx's, requests served
  local parent="$1" out="$2" start=$SECONDS pid="" ticks
  while kill -0 "$parent" 2> /dev/null; do
    [ -n "$pid" ] || pid=$(pgrep -P "$parent" | head -1) || true
    if [ -n "$pid" ] && ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2> /dev/null); then
      echo "$(( SECONDS - start )) $ticks $(nginx_ticks) $(served)" >> "$out"
    fi
    sleep 10
  done
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
      --ramp-rate $(( (devices + ramp - 1) / ramp )) --duration "${seconds}s" --dashboard off --results "$home/run" > "$home/tool.log" 2>&1 &
  else
    # The JVM options Gatling's own launchers give it (gatling-maven-plugin), with the heap asked.
    /usr/bin/time -f "%U %S %M" -o "$home/time.txt" java "-Xmx${GATLING_HEAP:-4g}" -XX:+UseG1GC -XX:MaxInlineLevel=20 -XX:MaxTrivialSize=12 \
      --add-opens=java.base/java.lang=ALL-UNNAMED -cp "$gatling_cp" \
      -Ddevices="$devices" -Dramp="$ramp" -Dseconds="$seconds" -Durl="$url" -Dconnections="${GATLING_CONNECTIONS:-0}" \
      io.gatling.app.Gatling -s DevicesSimulation -rf "$home/gatling" -nr > "$home/tool.log" 2>&1 &
  fi
  local timed=$!
  sample "$timed" "$home/samples.tsv" &
  local sampler=$!
  local failed=0
  wait "$timed" || failed=$?
  kill "$sampler" 2> /dev/null || true
  [ "$failed" = 0 ] || { echo "bench: $tool, ${seconds} s: exited with $failed: $(tail -n 2 "$home/tool.log")" >&2; exit 1; }
  local after; after=$(nginx_ticks)
  kill "$nginx_pid"; wait "$nginx_pid" 2> /dev/null || true; nginx_pid=""
  local calls; calls=$(wc -l < "$home/access.log")
  local non200; non200=$(awk '$9 != 200' "$home/access.log" | wc -l)
  read -r user sys rss_kb < "$home/time.txt"
  rows+=("$tool $seconds $user $sys $rss_kb $calls $non200 $(( after - before )) $home/samples.tsv")
  echo "bench: $tool, ${seconds} s: user $user s, system $sys s, peak RSS $rss_kb KB, $calls calls logged ($non200 not 200)"
}

for seconds in $durations; do for tool in $tools; do run "$tool" "$seconds"; done; done

table=$(python3 - "$devices" "$(getconf CLK_TCK)" "$ramp" "${rows[@]}" <<'PY'
import statistics, sys
devices, tck, ramp = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
runs = {}
def steady(samples):
    # The median, over the 10 s between two samples from a minute after the ramp, of the tool's and
    # nginx's CPU over the requests nginx served in them: no start-up, no ramp, no one bad interval.
    rows = [tuple(map(int, line.split())) for line in open(samples) if len(line.split()) == 4]
    rows = [r for r in rows if r[0] >= ramp + 60]
    pairs = [(b[1] - a[1], b[2] - a[2], b[3] - a[3] - 1) for a, b in zip(rows, rows[1:]) if b[3] - a[3] > 1]
    if not pairs:
        return None, None, None
    # The tool's CPU over nginx's in the same 10 s: the machine's speed, which drifts over a run and
    # between runs, moves both alike.
    return (1e6 / tck * statistics.median(t / n for t, _, n in pairs), 1e6 / tck * statistics.median(g / n for _, g, n in pairs),
            statistics.median(t / g for t, g, _ in pairs if g > 0))
for row in sys.argv[4:]:
    tool, seconds, user, sys_, rss, calls, non200, nginx, samples = row.split()
    runs.setdefault(tool, []).append((int(seconds), float(user) + float(sys_), int(rss), int(calls), int(nginx) / tck, *steady(samples)))
durations = " / ".join(f"{s} s" for s, *_ in next(iter(runs.values())))
print(f"| | CPU a call, whole run ({durations}) | marginal CPU a call | steady CPU a call ({durations}) | steady, ÷ nginx's | RSS a device | calls nginx logged |")
print("| --- | --- | --- | --- | --- | --- | --- |")
def cost(cpu, calls):
    whole = " / ".join(f"{1e6 * c / n:.1f} µs" for c, n in zip(cpu, calls))
    return whole, (f"{1e6 * (cpu[-1] - cpu[0]) / (calls[-1] - calls[0]):.1f} µs" if calls[-1] > calls[0] else "—")
def figures(values):
    return " / ".join("—" if v is None else f"{v:.1f} µs" for v in values)
served = []
for tool, rs in runs.items():
    calls = [r[3] for r in rs]
    whole, marginal = cost([r[1] for r in rs], calls)
    rss = " / ".join(f"{r[2] / devices:.1f} KB" for r in rs)
    ratios = " / ".join("—" if r[7] is None else f"{r[7]:.2f}×" for r in rs)
    print(f"| {tool} | {whole} | {marginal} | {figures(r[5] for r in rs)} | {ratios} | {rss} | " + " / ".join(f"{n:,}" for n in calls) + " |")
    served.append((tool, *cost([r[4] for r in rs], calls), figures(r[6] for r in rs)))
for tool, whole, marginal, steady_ in served:
    print(f"| nginx serving {tool}'s calls | {whole} | {marginal} | {steady_} | | | |")
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
