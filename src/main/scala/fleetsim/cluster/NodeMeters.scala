package fleetsim.cluster

import fleetsim.device.DeviceState
import fleetsim.metrics.{KindSnapshot, Meters, MetricsSnapshot, Times}
import fleetsim.transport.{FailureReason, MessageKind}
import io.micrometer.core.instrument.{MeterRegistry, Timer}

import java.util.concurrent.TimeUnit.MICROSECONDS

/** The run's `/metrics` over a cluster: each node's figures under the names, descriptions and tags
  * a run in one process registers ([[Meters]]), tagged with the node's address (`node`); the fleet's
  * figure is their sum over `node`. Counts and gauges read the node's latest snapshot; times are
  * recorded as each snapshot brings them. Series grow with nodes, never with devices.
  *
  * @param figures each node's latest snapshot
  */
final class NodeMeters(registry: MeterRegistry, kinds: IndexedSeq[MessageKind], figures: () => Map[String, MetricsSnapshot]):
  /** A node's timers: latency and lateness by kind, handshakes, push to acknowledgement. */
  private final class Timers(node: String):
    val latency = kinds.map(k => Meters.Latency.timer(registry, k.key, "node", node))
    val lateness = kinds.map(k => Meters.Lateness.timer(registry, k.key, "node", node))
    val handshake = Meters.Handshake.timer(registry, "node", node)
    val pushToAck = Meters.PushToAck.timer(registry, "node", node)

  private var timers = Map.empty[String, Timers]
  /** (node, reason) pairs with a meter: reasons come as devices stop. */
  private var reasons = Set.empty[(String, String)]

  /** Registers `node`'s meters, once, and one for each reason its devices stopped for as it first
    * appears; records the times its `snapshot` brought since its last.
    */
  def add(node: String, snapshot: MetricsSnapshot): Unit = synchronized {
    val mine = timers.getOrElse(node, register(node))
    kinds.zipWithIndex.foreach { (kind, i) =>
      snapshot.byKind.get(kind.key).foreach { k =>
        record(mine.latency(i), k.recent)
        record(mine.lateness(i), k.recentLateness)
      }
    }
    record(mine.handshake, snapshot.tunnels.recent)
    record(mine.pushToAck, snapshot.pushes.recent)
    for reason <- snapshot.stopped.keySet if !reasons((node, reason)) do
      reasons += node -> reason
      Meters.Stopped.counter(registry, this, _.of(node, _.stopped.getOrElse(reason, 0L)), reason, "node", node)
  }

  /** Node `node`'s `figure` from its latest snapshot; 0 before it has one. */
  private def of(node: String, figure: MetricsSnapshot => Long): Double = figures().get(node).fold(0.0)(figure(_).toDouble)

  private def register(node: String): Timers =
    def counter(meter: Meters.Meter, figure: MetricsSnapshot => Long, tags: String*): Unit =
      meter.counter(registry, this, _.of(node, figure), tags :+ "node" :+ node*)
    def gauge(meter: Meters.Meter, figure: MetricsSnapshot => Long, tags: String*): Unit =
      meter.gauge(registry, this, _.of(node, figure), tags :+ "node" :+ node*)
    DeviceState.values.foreach(s => gauge(Meters.Devices, _.byState.getOrElse(s, 0L), s.toString))
    for from <- DeviceState.values; to <- DeviceState.values do
      counter(Meters.Transitions, _.transitions.getOrElse((from, to), 0L), from.toString, to.toString)
    kinds.foreach { kind =>
      def byKind(figure: KindSnapshot => Long): MetricsSnapshot => Long = _.byKind.get(kind.key).fold(0L)(figure)
      counter(Meters.Sent, byKind(_.sent), kind.key)
      counter(Meters.Replies, byKind(_.ok), kind.key, "ok")
      counter(Meters.Replies, byKind(_.forbidden), kind.key, "forbidden")
      FailureReason.values.foreach(r => counter(Meters.Replies, byKind(_.failures.getOrElse(r, 0L)), kind.key, r.key))
    }
    counter(Meters.SessionsOpened, _.tunnels.opened)
    gauge(Meters.SessionsUp, _.tunnels.up)
    FailureReason.values.foreach(r => counter(Meters.SessionsFailed, _.tunnels.failures.getOrElse(r, 0L), r.key))
    counter(Meters.Pushes, _.pushes.received)
    counter(Meters.PushesAcknowledged, _.pushes.acknowledged)
    val made = Timers(node)
    timers += node -> made
    made

  /** Each time in `times` into `timer`, as the devices' own timer would have had it. */
  private def record(timer: Timer, times: Times): Unit =
    times.foreach((micros, count) => { var i = 0L; while i < count do { timer.record(micros, MICROSECONDS); i += 1 } })
