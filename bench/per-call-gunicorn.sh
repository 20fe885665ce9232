#!/usr/bin/env bash
# Benchmark: a fleet that opens a connection for every call (profile connection = per-call, as agents
# built on curl do) against gunicorn's sync workers, the default server of Django and Flask apps:
# they answer one request a connection, close it, and wait (up to 2 s) for the client to close its
# end before they take the next. Beside it, `ab` without keep-alive on the same server says what the
# server itself can do. Reports calls a second, failures, what the server logged, and the most
# sockets the fleet left in CLOSE-WAIT at once (0: it closes its end after every reply). Appends a
# table to bench/history/DATE-per-call-gunicorn.md.
#   bench/per-call-gunicorn.sh [DEVICES]      default 300
# Settings: DURATION (60s), HEARTBEAT (each device's call interval, 2s), WORKERS (gunicorn's, 2),
# JAR (a fleetsim.jar to measure instead of this tree's build, e.g. an older one to compare).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
devices="${1:-300}" duration="${DURATION:-60s}" workers="${WORKERS:-2}"
export HEARTBEAT="${HEARTBEAT:-2s}"
command -v gunicorn > /dev/null && command -v ab > /dev/null || { echo "needs gunicorn and ab: apt-get install gunicorn apache2-utils" >&2; exit 1; }

work="$(mktemp -d)"
build="${JAR:-$(cd "$here" && git rev-parse --short HEAD)}"
if [ -z "${JAR:-}" ]; then
  (cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
  cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/"
  JAR="$work/fleetsim.jar"
fi
results="$here/bench/results/per-call-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

serve() { # a fresh server and access log for each measurement
  gunicorn --chdir "$here/bench/gunicorn" -w "$workers" -k sync -b "127.0.0.1:$port" --access-logfile "$1" app:app \
    > "$results/gunicorn.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/heartbeat/x" && return; sleep 0.1; done
  echo "gunicorn did not start: $(cat "$results/gunicorn.log")" >&2; exit 1
}
stop() { kill "$server"; wait "$server" 2> /dev/null || true; }
trap 'kill $server 2> /dev/null || true; rm -rf "$work"' EXIT

# The server alone: ab opens a connection a request and closes it once the reply is read, as curl does.
serve "$results/ab-access.log"
ab -q -n 3000 -c 10 "http://127.0.0.1:$port/heartbeat/x" > "$results/ab.txt" 2>&1
ab_rate="$(awk '/Requests per second/{print $4}' "$results/ab.txt")"
stop

# The fleet, its sockets to the server sampled every second in /proc/net/tcp and tcp6 (a JVM's sockets
# are IPv6 ones): how many are in CLOSE-WAIT (state 08) at once, and how many were still there a
# second later (left there, rather than caught between the server's close and the fleet's).
serve "$results/fleet-access.log"
java ${JAVA_OPTS:-} -jar "$JAR" run --controller "http://127.0.0.1:$port" --device-profile "$here/bench/profiles/per-call-agent.conf" \
  --devices "$devices" --duration "$duration" --results "$results/fleet" > "$results/fleet.log" 2>&1 &
fleet=$!
read -r most left < <(python3 - "$port" "$fleet" <<'PY'
import os, sys, time
hexport, fleet = ":%04X" % int(sys.argv[1]), int(sys.argv[2])
def waiting():
    lines = [l.split() for f in ("/proc/net/tcp", "/proc/net/tcp6") for l in open(f).readlines()[1:]]
    return {l[1] for l in lines if l[2].endswith(hexport) and l[3] == "08"}
most, left, before = 0, 0, set()
while os.path.exists(f"/proc/{fleet}") and open(f"/proc/{fleet}/stat").read().split()[2] != "Z":
    now = waiting()
    most, left, before = max(most, len(now)), max(left, len(now & before)), now
    time.sleep(1)
print(most, left)
PY
)
wait "$fleet" || true
stop

history="$here/bench/history/$(date -u +%Y-%m-%d)-per-call-gunicorn.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
python3 - "$results" "$devices" "$duration" "$HEARTBEAT" "$workers" "$ab_rate" "$most" "$left" "$build" <<'PY' | tee -a "$history"
import json, sys, os, subprocess
results, devices, duration, heartbeat, workers, ab_rate, most, left, build = sys.argv[1:]
s = json.load(open(f"{results}/fleet/summary.json"))
m = s["messages"]
sent = sum(k["sent"] for k in m.values()); ok = sum(k["ok"] for k in m.values()); failed = sum(k["failed"] for k in m.values())
reasons = {}
for k in m.values():
    for r, n in k.get("failures", {}).items(): reasons[r] = reasons.get(r, 0) + n
logged = sum(1 for _ in open(f"{results}/fleet-access.log")) - 1 # less the probe that saw the server up
seconds = s["run"]["durationS"]
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
print(f"""
### Per-call connections against gunicorn sync workers — {os.popen('date -u +%Y-%m-%d').read().strip()}, build {build}

`bench/per-call-gunicorn.sh {devices}` (DURATION={duration}, HEARTBEAT={heartbeat}, WORKERS={workers}): {os.cpu_count()} cores, {model}.
The server alone, `ab -n 3000 -c 10` without keep-alive: {float(ab_rate):.0f} requests a second.

| devices | Reporting at end | calls sent | ok | failed | ok a second | server logged | in CLOSE-WAIT at once, most | of them still there a second later |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| {devices} | {s['devices']['byState'].get('Reporting', 0)} | {sent} | {ok} | {failed} {reasons if reasons else ''} | {ok / seconds:.0f} | {logged} | {most} | {left} |""")
PY
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
