package fleetsim.cluster

import fleetsim.device.DeviceState
import fleetsim.metrics.MetricsSnapshot
import fleetsim.transport.{FailureReason, MessageKind}
import io.micrometer.core.instrument.{FunctionCounter, Gauge, MeterRegistry}

/** The run's `/metrics` over a cluster: each node's counts, tagged with its address (`node`), under
  * the names a run in one process uses; the fleet's figure is their sum over `node`. Series grow with
  * nodes, never with devices. Latencies are not here: they are the dashboard's and the summary's.
  *
  * @param figures each node's latest snapshot
  */
final class NodeMeters(registry: MeterRegistry, kinds: IndexedSeq[MessageKind], figures: () => Map[String, MetricsSnapshot]):
  private var known = Set.empty[String]
  /** (node, reason) pairs with a meter: reasons come as devices stop. */
  private var reasons = Set.empty[(String, String)]
  private var held = List.empty[() => Double] // Micrometer holds a meter's source weakly: these are theirs

  /** Registers `node`'s meters, once, and one for each reason its devices stopped for as it first appears. */
  def add(node: String): Unit = synchronized {
    def of(figure: MetricsSnapshot => Long): () => Double = () => figures().get(node).fold(0.0)(figure(_).toDouble)
    def gauge(name: String, value: () => Double, tags: String*): Unit =
      held ::= value
      tags.grouped(2).foldLeft(Gauge.builder(name, value, (v: () => Double) => v()))((b, t) => b.tag(t(0), t(1))).tag("node", node).register(registry)
    def counter(name: String, value: () => Double, tags: String*): Unit =
      held ::= value
      tags.grouped(2).foldLeft(FunctionCounter.builder(name, value, (v: () => Double) => v()))((b, t) => b.tag(t(0), t(1))).tag("node", node).register(registry)
    if !known(node) then
      known += node
      DeviceState.values.foreach(s => gauge("fleetsim.devices", of(_.byState.getOrElse(s, 0L)), "state", s.toString))
      gauge("fleetsim.tunnels.up", of(_.tunnels.up))
      kinds.foreach { kind =>
        def byKind(figure: fleetsim.metrics.KindSnapshot => Long) = of(_.byKind.get(kind.key).fold(0L)(figure))
        counter("fleetsim.messages.sent", byKind(_.sent), "kind", kind.key)
        counter("fleetsim.messages", byKind(_.ok), "kind", kind.key, "outcome", "ok")
        counter("fleetsim.messages", byKind(_.forbidden), "kind", kind.key, "outcome", "forbidden")
        FailureReason.values.foreach(r => counter("fleetsim.messages", byKind(_.failures.getOrElse(r, 0L)), "kind", kind.key, "outcome", r.key))
      }
    for reason <- figures().get(node).fold(Set.empty[String])(_.stopped.keySet) if !reasons((node, reason)) do
      reasons += node -> reason
      counter("fleetsim.devices.stopped", of(_.stopped.getOrElse(reason, 0L)), "reason", reason)
  }
