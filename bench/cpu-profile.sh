#!/usr/bin/env bash
# bench/cpu-profile.sh JAR N [run args]: where the fleet's CPU goes at an everyday rate (issue 33):
# N devices, one join each and a heartbeat every HEARTBEAT seconds (default 10: N/10 messages a
# second; the same rate from fewer devices shows what a device's own memory costs), against the
# controller in its own process; JFR's execution samples (settings=profile: every 10-20 ms of a
# thread running Java code) over a steady window after the ramp, with the fleet's CPU seconds over
# the same window. Prints the share of samples by what the sampled code is (the top frame's
# package, grouped), the top methods by self samples, and the threads sampled. The recording and
# the printouts stay in bench/results/profile-DATE-N/; `jfr` reads the recording for anything else
# (`jfr print --events jdk.ExecutionSample fleet.jfr`, `jfr summary fleet.jfr`). Where perf runs,
# it also counts the fleet's system calls (all, futex, read, write, epoll_wait) and context
# switches over the window, a message each: the kernel's share that JFR cannot see.
# FLEET_JAVA_OPTS: more JVM options for the fleet (to try a setting: -Dpekko.actor...=...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jar="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; n="$2"; shift 2
window="${WINDOW:-60}"              # seconds of steady state recorded
hb="${HEARTBEAT:-10}"
ramp=$(( n / 5000 + 40 ))           # the ramp at 5,000 a second, every device's first heartbeat, JIT settling
out="$here/bench/results/profile-$(date -u +%Y%m%d-%H%M%S)-$n"
mkdir -p "$out"

java -Xmx4g -jar "$jar" controller --port 0 --profile large --heartbeat-interval "${hb}s" --stats-interval 3600s \
  --state-dir "$out/controller" > "$out/controller.log" 2>&1 &
controller=$!
fleet=""
cleanup() { [ -z "$fleet" ] || kill "$fleet" 2>/dev/null || true; kill "$controller" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 150); do grep -q "listening on" "$out/controller.log" && break; sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/controller.log" | head -1)

# Through the launcher, with the heap and collector it gives (it execs java: $! is the JVM).
FLEETSIM_JAR="$jar" JAVA_OPTS="${FLEET_JAVA_OPTS:-} -XX:StartFlightRecording=delay=${ramp}s,duration=${window}s,settings=profile,filename=$out/fleet.jfr" \
  "$here/fleetsim" run --controller "$url" --devices "$n" --ramp-rate 5000 --dashboard off \
  --duration "$(( ramp + window + 15 ))s" --results "$out/run" "$@" > "$out/fleet.log" 2>&1 &
fleet=$!
# Each thread's name and CPU ticks (user + system), to say which threads the window's CPU went to.
threads() { for t in /proc/"$fleet"/task/*; do
  printf '%s\t%s\t%s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null)"; done; }
sleep "$ramp"; read -r ua sa < <(awk '{print $14, $15}' "/proc/$fleet/stat"); threads > "$out/threads-before.tsv"
events=context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait
perf stat -x, -e "$events" -o "$out/perf.csv" -p "$fleet" -- sleep "$window" 2> "$out/perf.err" || sleep "$window"
read -r ub sb < <(awk '{print $14, $15}' "/proc/$fleet/stat"); threads > "$out/threads-after.tsv"
jcmd "$fleet" Thread.print > "$out/jstack.txt" 2>/dev/null || true # Java's full thread names, by native id
wait "$fleet" || true
fleet=""
tck=$(getconf CLK_TCK)
cpu_s=$(python3 -c "print(($ub + $sb - $ua - $sa) / $tck)")
split=$(python3 -c "print(f'user {($ub - $ua) / $tck:.1f} s, system {($sb - $sa) / $tck:.1f} s')")
messages=$(python3 -c "
import json; s = json.load(open('$out/run/summary.json'))
print(s['messages']['heartbeat']['ok'])")

jfr print --events jdk.ExecutionSample "$out/fleet.jfr" > "$out/samples.txt"
python3 - "$out/samples.txt" "$cpu_s" "$n" "$window" > "$out/profile.txt" <<'EOF'
import collections, re, sys
path, cpu_s, n, window = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# Each event: "jdk.ExecutionSample {", "sampledThread = ...", "stackTrace = [", frames, "]".
events, frames, thread, inside = [], [], None, False
for line in open(path):
    s = line.strip()
    if s.startswith("jdk.ExecutionSample"): frames, thread, inside = [], None, False
    elif s.startswith("sampledThread"): thread = re.sub(r'\s*\(javaThreadId.*', '', s.split("=", 1)[1]).strip().strip('"')
    elif s.startswith("stackTrace = ["): inside = True
    elif inside and s == "]": inside = False; events.append((thread, frames))
    elif inside and s and s != "...": frames.append(re.sub(r'\s+line:.*', '', s))
total = len(events)
def group(frame):
    rules = [("fleetsim.transport", "fleetsim: HTTP client (render, parse, connections)"),
             ("fleetsim.device", "fleetsim: devices and their wheel"), ("fleetsim.profile", "fleetsim: profile (templates, reading replies)"),
             ("fleetsim.metrics", "fleetsim: metrics"), ("fleetsim.", "fleetsim: other"),
             ("org.apache.pekko.stream", "Pekko Streams (the connections' stages)"), ("org.apache.pekko.io", "Pekko IO (TCP, selectors)"),
             ("org.apache.pekko.http", "Pekko HTTP"), ("org.apache.pekko.dispatch", "Pekko dispatch (mailboxes, thread pool)"),
             ("org.apache.pekko.actor", "Pekko actors"), ("org.apache.pekko", "Pekko other"),
             ("sun.nio.ch", "JDK NIO (sockets, selector)"), ("java.util.concurrent", "JDK concurrency (pools, queues, futures)"),
             ("io.micrometer", "Micrometer"), ("org.HdrHistogram", "HdrHistogram"), ("scala.", "Scala library"),
             ("java.", "JDK other"), ("jdk.", "JDK other"), ("sun.", "JDK other")]
    return next((name for prefix, name in rules if frame.startswith(prefix)), "other")
groups = collections.Counter(group(f[0]) for _, f in events if f)
tops = collections.Counter(f[0] for _, f in events if f)
threads = collections.Counter(re.sub(r'-\d+$', '-N', t or "?") for t, _ in events)
print(f"{total} execution samples over {window} s; fleet CPU {cpu_s:.1f} s ({cpu_s / window * 100:.0f}% of a core). JFR samples a thread"
      " only while it runs Java code, every 10 ms at most: CPU spent in the kernel (system calls), the collector and the"
      " compilers is not in them, and few samples for much CPU say that is where it went.")
print("\nby what the sampled code is (its top frame):")
for name, c in groups.most_common(): print(f"  {c * 100 / total:5.1f}%  {name}")
print("\ntop methods by self samples:")
for name, c in tops.most_common(30): print(f"  {c * 100 / total:5.1f}%  {name}")
print("\nthreads sampled:")
for name, c in threads.most_common(12): print(f"  {c * 100 / total:5.1f}%  {name}")
EOF
cat "$out/profile.txt" # the samples; the figures below are printed and kept as they come
echo "bench: $n devices, a heartbeat every $hb s: $messages heartbeats in the run; fleet CPU $cpu_s s ($split) over ${window} s of steady state" | tee -a "$out/profile.txt"
python3 -c "print(f'bench: {1e6 * $cpu_s / ($n / $hb * $window):.1f} µs of fleet CPU a message in the window (at {$n / $hb:.0f} messages a second)')" | tee -a "$out/profile.txt"
python3 - "$out" "$tck" "$window" <<'EOF' | tee -a "$out/profile.txt"
import collections, re, sys
out, tck, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Linux cuts a thread's name to 15 characters; the JVM's thread dump has the whole name by native id.
names = {}
for line in open(f"{out}/jstack.txt", errors="replace"):
    m = re.match(r'"([^"]+)".*nid=0x([0-9a-f]+)', line)
    if m: names[str(int(m.group(2), 16))] = m.group(1)
def read(name):
    ticks = collections.Counter()
    for line in open(f"{out}/{name}"):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3 and parts[2]:
            ticks[re.sub(r'[-#]?\d+$', '-N', names.get(parts[0], parts[1]))] += int(parts[2])
    return ticks
spent = read("threads-after.tsv"); spent.subtract(read("threads-before.tsv"))
total = sum(v for v in spent.values() if v > 0) or 1
print("bench: the window's CPU by thread:")
for name, t in spent.most_common(10):
    if t > 0: print(f"bench:   {t * 100 / total:5.1f}%  {t / tck:6.2f} s  {name}")
EOF
if [ -s "$out/perf.csv" ]; then
  python3 - "$out/perf.csv" "$n" "$window" "$hb" <<'EOF' | tee -a "$out/profile.txt"
import sys
path, n, window, hb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
messages = n / hb * window
for line in open(path):
    parts = line.strip().split(",")
    if len(parts) > 2 and parts[0].isdigit():
        name = parts[2].replace("raw_syscalls:sys_enter", "system calls, all").replace("syscalls:sys_enter_", "")
        print(f"bench: {name}: {int(parts[0]) / messages:.2f} a message ({int(parts[0]) / window:.0f} a second)")
EOF
fi
echo "bench: recording and printouts in ${out#$here/}"
