#!/usr/bin/env bash
# bench/gc-cost.sh JAR N [run args]: what the fleet's JVM allocates and collects per delivered message,
# figures the noise of a shared machine barely moves (unlike CPU seconds): bytes allocated, young
# collections per minute, their pause time and phases (Scan Heap Roots = old cards pointing young),
# the cards scanned, and CPU seconds by thread group. N devices against the controller in its own
# process, the heap and collector the launcher gives N devices; the window is the STEADY (default 2m)
# after the ramp (N/10000 + 60 s), as in bench/scale.sh. JFR=1 also records allocation samples.
# Logs stay in bench/results/gc-DATE-N/. Prints a few lines; compare two builds run the same way, in
# turns (A B B A). On a busy machine G1's pauses overrun their 50 ms goal, it shrinks the young
# generation to its floor and collects 30-80 times a minute instead of 4-10, each time scanning the
# cards a million devices dirtied: CPU a message then doubles or worse, whatever the build. Such a
# run is flagged, and says nothing about the code.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jar="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; n="$2"; shift 2
steady="${STEADY:-2m}"
seconds() { python3 -c "import re; m=re.fullmatch(r'(\d+)([smh])','$1'); print(int(m[1])*{'s':1,'m':60,'h':3600}[m[2]])"; }
window=$(seconds "$steady")
ramp_s=$(( n / 10000 + 60 ))
out="$here/bench/results/gc-$(date -u +%Y%m%d-%H%M%S)-$n"
mkdir -p "$out"

need_mb=$(( 256 + n * 1000 * 2 / 1048576 )) # as the launcher (./fleetsim) sizes the heap
# JFR: each thread's bytes allocated so far, every second (the exact allocation over the window);
# with JFR=1 also the profile settings' allocation samples (where it comes from).
jfc="$out/allocation.jfc"
if [ "${JFR:-0}" = 0 ]; then
  printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' '<configuration version="2.0">' \
    '<event name="jdk.ThreadAllocationStatistics"><setting name="enabled">true</setting><setting name="period">1 s</setting></event>' \
    '</configuration>' > "$jfc"
else
  sed '/name="jdk.ThreadAllocationStatistics"/,/<\/event>/ s/everyChunk/1 s/' "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")/lib/jfr/profile.jfc" > "$jfc"
fi
jfr=("-XX:StartFlightRecording=settings=$jfc,filename=$out/fleet.jfr")

java -Xmx6g -jar "$jar" controller --port 0 --profile large --state-dir "$out/controller" > "$out/controller.log" 2>&1 &
controller=$!
fleet_pid=""
cleanup() { [ -z "$fleet_pid" ] || kill "$fleet_pid" 2>/dev/null || true; kill "$controller" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do grep -q "listening on" "$out/controller.log" && break; sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/controller.log" | head -1)

java -Djava.security.egd=file:/dev/./urandom "-Xmx${need_mb}m" "-Xms$(( need_mb < 1024 ? need_mb : 1024 ))m" -XX:+UseG1GC \
  -XX:MaxGCPauseMillis=50 "-Xlog:gc*=debug,gc+phases=trace:file=$out/gc.log:timemillis,uptime,tags" "${jfr[@]}" \
  -jar "$jar" run --profile large --controller "$url" --devices "$n" --dashboard off \
  --duration "$(( ramp_s + window + 10 ))s" --results "$out/run" "$@" > "$out/fleet.log" 2>&1 &
fleet_pid=$!

threads() { # CPU ticks (user + system) by thread name, digits dropped: "GC Thread#" "G1 Refine#" ...
  for t in /proc/$fleet_pid/task/*; do
    name=$( (tr -d '\n' < "$t/comm") 2>/dev/null | sed 's/[0-9]*$//')
    [ -n "$name" ] || continue # a thread that ended meanwhile
    echo "$name	$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0)"
  done
}
sleep "$ramp_s"
from=$(date +%s%3N); threads > "$out/threads-from.tsv"; ticks_from=$(awk '{print $14 + $15}' "/proc/$fleet_pid/stat")
sleep "$window"
to=$(date +%s%3N); threads > "$out/threads-to.tsv"; ticks_to=$(awk '{print $14 + $15}' "/proc/$fleet_pid/stat")
echo "$from $to" > "$out/window"
wait "$fleet_pid" || true
fleet_pid=""
kill "$controller"; wait "$controller" 2>/dev/null || true

python3 - "$out" "$from" "$to" "$ticks_from" "$ticks_to" "$(getconf CLK_TCK)" "$jar" "$n" <<'PY'
import datetime, json, re, subprocess, sys, collections
out, t0, t1, c0, c1, hz, jar, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
samples = [json.loads(l) for l in open(out + "/run/timeseries.jsonl") if l.strip()]
msgs = sum(sum(r["ok"] for r in x["rates"].values()) * (x["elapsedS"] - p["elapsedS"])
           for p, x in zip(samples, samples[1:]) if t0 < x["t"] <= t1)
minutes = (t1 - t0) / 60000
# G1's log: each young pause "Pause Young (...) 900M->120M(2163M) 17.5ms", its phases at debug, their counts
# (cards) at trace, and the cards the mutators dirtied since the last pause (gc+refine+stats).
head = r"^\[[\d.]+s\]\[(\d+)ms\]\[[\w,]+\s*\] GC\((\d+)\)"
pause = re.compile(head + r" Pause Young.* (\d+)M->(\d+)M\(\d+M\) ([\d.]+)ms")
phase = re.compile(head + r"(\s+)(Merge Heap Roots|Scan Heap Roots|Object Copy|Ext Root Scanning|Code Root Scan|Log Buffers|Remembered Sets|Hot Card Cache|Evacuate Collection Set|Post Evacuate Collection Set|Pre Evacuate Collection Set)(?: \(ms\))?:\s+(?:Min:.*?Avg:\s*([\d.]+).*?Max:\s*([\d.]+)|([\d.]+)ms)")
count = re.compile(head + r"\s+(Scanned Cards|Dirty Cards|Merged Sparse|Merged Fine|Merged Coarse):\s+Min:.*Sum:\s*(\d+)")
refine = re.compile(head + r" Total refinement: ([\d.]+)ms, refined: (\d+), precleaned: \d+, dirtied: (\d+)")
gcs, phases, counts = [], collections.defaultdict(float), collections.defaultdict(int)
last_after, last_t, allocated, span, parent = None, None, 0, 0, ""
for line in open(out + "/gc.log"):
    m = pause.match(line)
    if m:
        t, before, after, ms = int(m[1]), int(m[3]), int(m[4]), float(m[5])
        if t0 < t <= t1 and last_after is not None:
            allocated += (before - last_after) * 1048576
            span += t - last_t
            gcs.append(ms)
        last_after, last_t = after, t
        continue
    m = phase.match(line)
    if m:
        parent = m[4]
        if t0 < int(m[1]) <= t1:
            phases[m[4]] += float(m[6] or m[7] or 0)  # a parallel phase: its slowest thread, what the pause waited for
        continue
    m = count.match(line)
    if m and t0 < int(m[1]) <= t1:
        counts[("" if m[3] == "Scanned Cards" else parent + ": ") + m[3]] += int(m[4])
        continue
    m = refine.match(line)
    if m and t0 < int(m[1]) <= t1:
        counts["cards dirtied by mutators"] += int(m[5])
        counts["refined concurrently"] += int(m[4])
        phases["refinement outside pauses"] += float(m[3])
def ticks(f):
    d = collections.defaultdict(int)
    for l in open(f):
        name, v = l.rstrip("\n").split("\t")
        d[name] += int(v)
    return d
a, b = ticks(out + "/threads-from.tsv"), ticks(out + "/threads-to.tsv")
groups = sorted(((name, (b[name] - a.get(name, 0)) / hz) for name in b), key=lambda x: -x[1])
k = max(len(gcs), 1)
# Bytes each thread allocated between the samples nearest the window's ends (JFR, every second).
stats = json.loads(subprocess.run(["jfr", "print", "--json", "--events", "jdk.ThreadAllocationStatistics", out + "/fleet.jfr"],
                                  capture_output=True, text=True).stdout)["recording"]["events"]
def epoch_ms(e):
    return datetime.datetime.fromisoformat(e["values"]["startTime"].replace("Z", "+00:00")[:26] + "+00:00").timestamp() * 1000
per_thread = collections.defaultdict(dict)
for e in stats:
    v = e["values"]
    per_thread[(v["thread"] or {}).get("javaThreadId")][epoch_ms(e)] = v["allocated"]
def at(samples, t):
    before = [s for s in samples if s <= t]
    return samples[max(before)] if before else 0
exact = sum(at(s, t1) - at(s, t0) for s in per_thread.values())
rate = allocated / max(span / 1000, 1e-9)  # GC log: bytes a second between the collections
print(f"{jar} N={n} window={minutes:.1f} min messages={msgs:.0f} ({msgs / minutes / 60:.0f}/s)  log: {out}")
print(f"  allocated {exact / max(msgs, 1):.0f} B/message ({exact / minutes / 60 / 1048576:.1f} MB/s; the GC log says {rate * minutes * 60 / max(msgs, 1):.0f} B/message); young GCs {len(gcs)} ({len(gcs) / minutes:.1f}/min), "
      f"pause total {sum(gcs):.0f} ms, mean {sum(gcs) / k:.1f} ms, {sum(gcs) / max(msgs, 1) * 1000:.2f} µs/message")
print("  phases per GC (ms, slowest thread): " + ", ".join(f"{p} {v / k:.1f}" for p, v in phases.items()))
print("  per GC: " + ", ".join(f"{c} {v / k:.0f}" for c, v in counts.items() if v))
if len(gcs) / minutes > 15 or (n == "1000000" and not 25000 < msgs / minutes / 60 < 29000):
    print("  NOT STEADY: too many young collections or messages/s off the usual 26,500-28,000; the machine was too busy. Discard this run.")
print(f"  CPU {(c1 - c0) / hz:.1f} s = {(c1 - c0) / hz / max(msgs, 1) * 1e6:.1f} µs/message; by thread: "
      + ", ".join(f"{name} {s:.1f}" for name, s in groups[:8]))
PY
