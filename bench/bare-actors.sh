#!/usr/bin/env bash
# Benchmark: what Pekko itself keeps per actor, before any state of ours. Spawns 200,000 children
# that do nothing, typed and then classic, under one parent, and prints the live heap per child
# (`jmap -histo:live` total, less the same JVM with no children). Needs the jars in target/lib
# (`mvn package`). docs/adr/0004 rests on these figures.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cp="$(ls "$here"/target/lib/*.jar | tr '\n' ':')"
work="$(mktemp -d)"
n=200000

measure() { # $1 = name, $2 = java statements that spawn $n children (or none)
  cat > "$work/$1.jsh" <<JSH
import org.apache.pekko.actor.*;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Adapter;
public class Idle extends AbstractActor { final int i; public Idle(int i) { this.i = i; } public Receive createReceive() { return receiveBuilder().build(); } }
class Parent extends AbstractActor { public void preStart() { $2 } public Receive createReceive() { return receiveBuilder().build(); } }
org.apache.pekko.actor.typed.ActorSystem<Object> system = org.apache.pekko.actor.typed.ActorSystem.create(Behaviors.setup(ctx -> { $3 return Behaviors.empty(); }), "bare");
((ExtendedActorSystem) Adapter.toClassic(system)).systemActorOf(Props.create(Parent.class, () -> new Parent()), "parent");
Thread.sleep(10000);
System.out.println("READY " + ProcessHandle.current().pid());
Thread.sleep(600000);
JSH
  jshell --class-path "$cp" -R-Xmx1g "$work/$1.jsh" > "$work/$1.out" 2>&1 &
  local shell=$!
  for _ in $(seq 120); do grep -q READY "$work/$1.out" && break; sleep 1; done
  local pid; pid=$(grep -o 'READY [0-9]*' "$work/$1.out" | cut -d' ' -f2)
  jmap -histo:live "$pid" | awk '/^Total/ {print $3}'
  kill "$pid" "$shell" 2>/dev/null || true
}

base=$(measure none "" "")
typed=$(measure typed "" "for (int i = 0; i < $n; i++) ctx.spawnAnonymous(Behaviors.receiveMessage(m -> Behaviors.same()));")
classic=$(measure classic "for (int i = 0; i < $n; i++) { final int k = i; getContext().actorOf(Props.create(Idle.class, () -> new Idle(k))); }" "")
echo "bytes per idle child, $n children: typed $(( (typed - base) / n )), classic $(( (classic - base) / n ))"
