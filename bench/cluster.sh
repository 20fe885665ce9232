#!/usr/bin/env bash
# Benchmark: a fleet over a cluster of `fleetsim node`s against one process (issue 15). HTTP devices
# against the reference controller in its own process (heartbeat 20 s, stats 60 s). Each row is one
# run: in one process, or over 1, 2 and 3 nodes (-Xmx2g each) joined through the first, by
# `run --cluster`. For each: live heap per device of every fleet process (after a full GC, in steady
# state), CPU per delivered message (user + system seconds of the fleet processes over a steady
# window / messages delivered in it), the runner's CPU, and when all devices were Reporting. The
# last row kills one of its nodes (kill -9) and times the re-homing. Appends a table to
# bench/history/DATE-cluster.md.
#   bench/cluster.sh            rows: 1 process × D, 1 process × 3D, 1/2/3 nodes × 3D, 3 nodes × 9D (D = DEVICES, default 10000)
# Settings: DEVICES; WINDOW (steady window in seconds, default 60); SETTLE (seconds after all Reporting, default 40).
#
# An SSH fleet with more tunnels than one process may hold open (ulimit -n), over three nodes (-Xmx2600m
# each: a node's share over the two others, should one be lost, is 12,000 tunnels at about 100 KB
# each), its tunnels served by two `fleetsim ssh-gateway`s (-Xmx2g) in front of the reference
# controller: how long until all are Reporting, the tunnels up at the end, the spread, and every call
# the devices counted delivered received by the controller, every heartbeat through a gateway's
# tunnel. 7-9 minutes here (it was ClusterSpec's, with 24,000; the suite keeps a smaller one under a
# lowered budget). Appends a table to bench/history/DATE-cluster-ssh.md.
#   bench/cluster.sh ssh [TUNNELS...]   default: 24000
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
d="${DEVICES:-10000}"
window="${WINDOW:-60}"
settle="${SETTLE:-40}"
hz=$(getconf CLK_TCK)
mode=nodes
if [ "${1:-}" = ssh ]; then mode=ssh; shift; fi
tunnel_sizes=("$@")
[ $# -gt 0 ] || tunnel_sizes=(24000)

(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
cp -r "$here/target/fleetsim.jar" "$here/target/lib" "$work/" # nodes run from a copy: a rebuild must not pull jars from under them
results="$here/bench/results/cluster-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$results"
jar="$work/fleetsim.jar"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
live_heap() { # bytes of live objects: the total of a histogram taken after a full GC. (GC.run then
  # GC.heap_info also counted what the fleet allocated between the two commands: 1-190 MB on a busy node.)
  jmap -histo:live "$1" | awk '/^Total/ {print $3}'
}
reporting() { # the run's latest count of Reporting devices
  tail -1 "$1/timeseries.jsonl" 2>/dev/null | python3 -c 'import json,sys; l=sys.stdin.read().strip(); print(json.loads(l)["devices"].get("Reporting",0) if l else 0)'
}
await_reporting() { # waits for $2 devices Reporting in run $1 (at most $4 half-seconds, default 1200); prints the seconds it took from $3 (ms)
  for _ in $(seq "${4:-1200}"); do [ "$(reporting "$1")" = "$2" ] && { echo $(( ($(date +%s%3N) - $3) / 1000 )); return; }; sleep 0.5; done
  echo never
}

# An SSH fleet of $1 tunnels over three nodes, through two SSH gateways; appends its row to rows.
ssh_bench() {
  local n=$1 out="$results/ssh-$1"; mkdir -p "$out"
  local http g1 g2; http=$(free_port); g1=$(free_port); g2=$(free_port)
  local url="http://127.0.0.1:$http" pids=() gateways=()
  java -Xmx2g -jar "$jar" controller --port "$http" --ssh-gateways "127.0.0.1:$g1,127.0.0.1:$g2" --heartbeat-interval 30s \
    --stats-interval 300s --state-dir "$out/controller" > "$out/controller.log" 2>&1 &
  local controller=$!
  for _ in $(seq 300); do grep -q "listening on" "$out/controller.log" && break; sleep 0.2; done
  for g in "$g1" "$g2"; do
    java -Xmx2g -jar "$jar" ssh-gateway --controller "$url" --ssh-port "$g" --state-dir "$out/gateway-$g" > "$out/gateway-$g.log" 2>&1 &
    gateways+=($!)
  done
  for g in "$g1" "$g2"; do for _ in $(seq 300); do grep -q "SSH on" "$out/gateway-$g.log" && break; sleep 0.2; done; done
  local seed=""
  for i in 1 2 3; do
    local port; port=$(free_port); [ -n "$seed" ] || seed=$port
    java -Xmx2600m -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -jar "$jar" node --cluster-port "$port" --seed-nodes "127.0.0.1:$seed" > "$out/node$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2 3; do for _ in $(seq 600); do grep -q "fleetsim: node" "$out/node$i.log" && break; sleep 0.2; done; done
  local started; started=$(date +%s%3N)
  java -jar "$jar" run --cluster "127.0.0.1:$seed" --cluster-nodes 3 --controller "$url" --transport ssh --devices "$n" \
    --ramp-rate 500 --max-handshakes 32 --known-hosts "$out/known_hosts" --dashboard off --duration 0s --results "$out/run" > "$out/run.log" 2>&1 &
  local runner=$!
  local full; full=$(await_reporting "$out/run" "$n" "$started" 3600) # 30 minutes: it once took 15
  # Each node's open files now, against the limit it runs under.
  local files=(); for p in "${pids[@]}"; do files+=($(ls "/proc/$p/fd" | wc -l)); done
  kill "$runner"; wait "$runner" || true # SIGTERM: the run finishes and writes its summary
  python3 -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' "$url/admin/counts" > "$out/counts.json"
  for p in "${pids[@]}" "${gateways[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}" "${gateways[@]}"; do wait "$p" 2>/dev/null || true; done
  kill "$controller"; wait "$controller" 2>/dev/null || true
  rows+=("$(python3 - "$out" "$n" "$full" "${files[*]}" "$(ulimit -n)" <<'PY'
import json, sys
out, n, full, files, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5]
s = json.load(open(out + "/run/summary.json"))
c = json.load(open(out + "/counts.json"))
t, hb = s["tunnels"], s["messages"]["heartbeat"]
nodes = " / ".join(str(v) for v in sorted(s["cluster"]["nodes"].values()))
# Every call the devices counted delivered reached the controller, and it received none they did not send.
reconciled = all(m["ok"] <= c["received"].get(k, 0) <= m["ok"] + m["failed"] for k, m in s["messages"].items())
through = "all" if c["tunnelled"].get("heartbeat") == c["received"].get("heartbeat") else f"{c['tunnelled'].get('heartbeat')} of {c['received'].get('heartbeat')}"
print(f"| {n} | {s['devices']['byState'].get('Reporting', 0)} | {t['upAtEnd']} | {nodes} | {' / '.join(files)} of {limit} | {full} s | "
      f"{t['handshakeMs']['p50']:.0f} / {t['handshakeMs']['p99']:.0f} | {hb['ok']} | {hb['failed']} | {t['retunnels']} | {'yes' if reconciled else 'NO'} | {through} |")
PY
)")
}

if [ "$mode" = ssh ]; then
  rows=()
  for n in "${tunnel_sizes[@]}"; do ssh_bench "$n"; done
  history="$here/bench/history/$(date -u +%Y-%m-%d)-cluster-ssh.md" # a day's runs of it, newest last
  mkdir -p "$(dirname "$history")"
  {
    echo
    echo "### Cluster: an SSH fleet over three nodes, its tunnels served by two SSH gateways — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
    echo
    echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1), ulimit -n $(ulimit -n); every process on this one machine, on loopback."
    echo "Controller: \`java -Xmx2g -jar target/fleetsim.jar controller --ssh-gateways G1,G2 --heartbeat-interval 30s --stats-interval 300s\`; gateways: \`java -Xmx2g -jar target/fleetsim.jar ssh-gateway --controller URL --ssh-port G\`;"
    echo "nodes: \`java -Xmx2600m -jar target/fleetsim.jar node --cluster-port P --seed-nodes 127.0.0.1:FIRST\` (three). Each row:"
    echo "\`java -jar target/fleetsim.jar run --cluster 127.0.0.1:FIRST --cluster-nodes 3 --controller URL --transport ssh --devices N --ramp-rate 500 --max-handshakes 32 --duration 0s\`"
    echo "(run by \`bench/cluster.sh ssh ${tunnel_sizes[*]}\`), stopped with SIGTERM once all devices were Reporting. Open files: each node's, then."
    echo
    echo "| tunnels | Reporting at end | tunnels up at end | devices by node | open files by node | all Reporting after | handshake p50 / p99 ms | heartbeats ok | heartbeats failed | re-tunnels | delivered = received | heartbeats through a gateway |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
  } | tee -a "$history"
  echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
  rm -rf "$work"
  exit 0
fi

rows=()
bench() { # label nodes devices [kill]
  local label=$1 nodes=$2 n=$3 kill=${4:-}
  local out="$results/$label"; mkdir -p "$out"
  java -Xmx4g -jar "$jar" controller --port 0 --heartbeat-interval 20s --stats-interval 60s --state-dir "$out/controller" > "$out/controller.log" 2>&1 &
  local controller=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/controller.log" && break; sleep 0.2; done
  local url; url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/controller.log" | head -1)
  local pids=() seed="" where=()
  for i in $(seq "$nodes"); do
    local port; port=$(free_port); [ -n "$seed" ] || seed=$port
    java -Xmx2g -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -jar "$jar" node --cluster-port "$port" --seed-nodes "127.0.0.1:$seed" > "$out/node$i.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 300); do grep -q "fleetsim: node" "$out/node$i.log" && break; sleep 0.2; done
  done
  [ "$nodes" = 0 ] || where=(--cluster "127.0.0.1:$seed" --cluster-nodes "$nodes")
  local heap=(); [ "$nodes" != 0 ] || heap=(-Xmx4g)
  local started; started=$(date +%s%3N)
  java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -jar "$jar" run "${where[@]}" --controller "$url" --devices "$n" --ramp-rate 3000 \
    --dashboard off --duration 0s --results "$out/run" > "$out/run.log" 2>&1 &
  local runner=$!
  [ "$nodes" != 0 ] || pids=($runner)
  local full; full=$(await_reporting "$out/run" "$n" "$started")
  sleep "$settle"
  local t0 t1 c0=() c1=() r0 r1
  t0=$(date +%s%3N); for p in "${pids[@]}"; do c0+=($(ticks "$p")); done; r0=$(ticks "$runner")
  sleep "$window"
  t1=$(date +%s%3N); for p in "${pids[@]}"; do c1+=($(ticks "$p")); done; r1=$(ticks "$runner")
  local heaps=(); for p in "${pids[@]}"; do heaps+=($(live_heap "$p")); done
  echo "${heaps[*]}" > "$out/heaps"
  local rehomed="–"
  if [ -n "$kill" ]; then
    kill -9 "${pids[-1]}"; local killed; killed=$(date +%s%3N)
    for _ in $(seq 120); do [ "$(reporting "$out/run")" -lt "$n" ] && break; sleep 0.5; done
    rehomed="$(await_reporting "$out/run" "$n" "$killed") s"
  fi
  kill "$runner"; wait "$runner" || true # SIGTERM: the run finishes and writes its summary
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  kill "$controller"; wait "$controller" 2>/dev/null || true
  rows+=("$(python3 - "$out/run" "$label" "$nodes" "$n" "$full" "$rehomed" "$hz" "$t0" "$t1" "${c0[*]}" "${c1[*]}" "$r0" "$r1" "${heaps[*]}" <<'PY'
import json, sys
d, label, nodes, n, full, rehomed, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7])
t0, t1 = int(sys.argv[8]), int(sys.argv[9])
c0, c1 = [int(x) for x in sys.argv[10].split()], [int(x) for x in sys.argv[11].split()]
runner = (int(sys.argv[13]) - int(sys.argv[12])) / hz
heaps = [int(x) for x in sys.argv[14].split()]
samples = [json.loads(l) for l in open(d + "/timeseries.jsonl") if l.strip()]
delivered = sum(sum(r["ok"] for r in x["rates"].values()) * (x["elapsedS"] - p["elapsedS"])
                for p, x in zip(samples, samples[1:]) if t0 < x["t"] <= t1)
cpu = [(b - a) / hz for a, b in zip(c0, c1)]
share = n / max(len(heaps), 1)
per_device = " / ".join(f"{h / share:.0f}" for h in heaps)
per_node = " / ".join(f"{c / max(delivered / len(cpu), 1) * 1e6:.1f}" for c in cpu)
where = "one process" if nodes == 0 else f"{nodes} node{'s' if nodes > 1 else ''}"
runner_us = "–" if nodes == 0 else f"{runner / max(delivered, 1) * 1e6:.1f}"
print(f"| {label} | {where} | {n} | {share:.0f} | {per_device} | {sum(cpu) / max(delivered, 1) * 1e6:.1f} ({per_node}) | {runner_us} | "
      f"{delivered / ((t1 - t0) / 1000):.0f} | {full} s | {rehomed} |")
PY
)")
}

bench "single-$d" 0 "$d"
bench "single-$((3 * d))" 0 "$((3 * d))"
bench "nodes1-$((3 * d))" 1 "$((3 * d))"
bench "nodes2-$((3 * d))" 2 "$((3 * d))"
bench "nodes3-$((3 * d))" 3 "$((3 * d))"
bench "nodes3-$((9 * d))" 3 "$((9 * d))" kill

# Per device, a process's heap less what it holds with no devices: the slope between the runs of D and
# 3D devices a process (one process; each of the three nodes), and what is left at none.
slopes=$(python3 - "$results" "$d" <<'PY'
import sys
r, d = sys.argv[1], int(sys.argv[2])
heaps = lambda label: [int(x) for x in open(f"{r}/{label}/heaps").read().split()]
def line(what, small, large):
    slope = [(b - a) / (2 * d) for a, b in zip(small, large)]
    fixed = [(a - s * d) / 1e6 for a, s in zip(small, slope)]
    return f"- {what}: {' / '.join(f'{s:.0f}' for s in slope)} B a device, {' / '.join(f'{f:.1f}' for f in fixed)} MB with none"
print(line("one process", heaps(f"single-{d}"), heaps(f"single-{3 * d}")))
print(line("each of 3 nodes", heaps(f"nodes3-{3 * d}"), heaps(f"nodes3-{9 * d}")))
PY
)

history="$here/bench/history/$(date -u +%Y-%m-%d)-cluster.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### Cluster: one fleet over 1, 2 and 3 nodes against one process — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(java -version 2>&1 | head -1); every process on this one machine, on loopback."
  echo "Controller: \`java -Xmx4g -jar target/fleetsim.jar controller --port 0 --heartbeat-interval 20s --stats-interval 60s\`. Nodes: \`java -Xmx2g -jar target/fleetsim.jar node --cluster-port P --seed-nodes 127.0.0.1:FIRST\`."
  echo "Each row: \`java -jar target/fleetsim.jar run [--cluster 127.0.0.1:FIRST --cluster-nodes N] --controller URL --devices D --ramp-rate 3000 --duration 0s\` (\`DEVICES=$d WINDOW=$window SETTLE=$settle bench/cluster.sh\`)."
  echo "Live heap: the total of \`jmap -histo:live\` in steady state, per device of each fleet process (its share of the fleet); CPU: user + system seconds of the fleet processes over a ${window} s window, ${settle} s after all devices were Reporting, per message delivered in it: all of them (each node's, with the fleet's messages split evenly), and the runner's (which merges the nodes' figures each second). The last row then kills one node with \`kill -9\` and times all devices Reporting again."
  echo
  echo "| row | fleet in | devices | devices per process | live heap B/device, each process | CPU µs/message (each process) | runner CPU µs/message | messages/s | all Reporting after | kill -9 to all Reporting |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Heap a device costs, apart from what a process holds with none (from the rows of $d and $((3 * d)) devices a process):"
  echo "$slopes"
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
rm -rf "$work"
