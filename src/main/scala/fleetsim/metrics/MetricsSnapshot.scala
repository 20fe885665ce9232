package fleetsim.metrics

import fleetsim.device.DeviceState
import fleetsim.transport.FailureReason
import org.HdrHistogram.Histogram

import scala.collection.immutable.ListMap

/** A distribution of times in µs that adds up, over intervals and over processes: percentiles are
  * computed where they are shown ([[latency]]), never averaged.
  */
final class Times(private val histogram: Histogram):
  def count: Long = histogram.getTotalCount

  def +(other: Times): Times =
    val sum = Histogram(3) // resizes to hold both, whatever their ranges
    sum.add(histogram)
    sum.add(other.histogram)
    Times(sum)

  /** HdrHistogram's compressed encoding, for another process to [[Times.decode]]. */
  def encoded: Array[Byte] =
    val buffer = java.nio.ByteBuffer.allocate(histogram.getNeededByteBufferCapacity)
    val length = histogram.encodeIntoCompressedByteBuffer(buffer)
    java.util.Arrays.copyOf(buffer.array, length)

  def latency: Latency = Latency.of(histogram)

  /** The time in ms at `q`% (0 to 100) of the times recorded. */
  def percentile(q: Double): Double = math.round(histogram.getValueAtPercentile(q) / 10.0) / 100.0

  /** Each time recorded, in µs, with how often: `f(value, count)`. */
  def foreach(f: (Long, Long) => Unit): Unit =
    histogram.recordedValues().forEach(v => f(v.getValueIteratedTo, v.getCountAtValueIteratedTo))

object Times:
  def empty: Times = Times(Histogram(3))

  def decode(bytes: Array[Byte]): Times = Times(Histogram.decodeFromCompressedByteBuffer(java.nio.ByteBuffer.wrap(bytes), 0))

  /** Times from values in µs. */
  def of(micros: Long*): Times =
    val h = Histogram(3)
    micros.foreach(h.recordValue)
    Times(h)

/** Percentiles of a time, in milliseconds. */
final case class Latency(p50: Double, p90: Double, p99: Double, max: Double)
object Latency:
  def of(h: Histogram): Latency =
    def ms(micros: Long) = math.round(micros / 10.0) / 100.0
    Latency(ms(h.getValueAtPercentile(50)), ms(h.getValueAtPercentile(90)), ms(h.getValueAtPercentile(99)), ms(h.getMaxValue))

final case class KindSnapshot(
    sent: Long,
    ok: Long,
    forbidden: Long,
    failures: Map[FailureReason, Long],
    inFlight: Long,
    recent: Times,
    overall: Times,
    recentLateness: Times,
    /** How late scheduled sends left since the start: empty for a kind not sent on a schedule. */
    overallLateness: Times):
  def failed: Long = failures.values.sum

  def +(o: KindSnapshot): KindSnapshot =
    KindSnapshot(sent + o.sent, ok + o.ok, forbidden + o.forbidden, sum(failures, o.failures), inFlight + o.inFlight,
      recent + o.recent, overall + o.overall, recentLateness + o.recentLateness, overallLateness + o.overallLateness)

/** Tunnels: opened so far, up now, re-tunnels (Reporting back to Tunneling), failed opens by reason,
  * and handshake times.
  */
final case class TunnelSnapshot(
    opened: Long,
    up: Long,
    retunnels: Long,
    failures: Map[FailureReason, Long],
    recent: Times,
    overall: Times):
  def +(o: TunnelSnapshot): TunnelSnapshot =
    TunnelSnapshot(opened + o.opened, up + o.up, retunnels + o.retunnels, sum(failures, o.failures), recent + o.recent, overall + o.overall)

/** Pushes received and acknowledged so far, and the time from arrival to acknowledgement. */
final case class PushSnapshot(received: Long, acknowledged: Long, recent: Times, overall: Times):
  def +(o: PushSnapshot): PushSnapshot = PushSnapshot(received + o.received, acknowledged + o.acknowledged, recent + o.recent, overall + o.overall)

/** An action's devices: how many it cut the power of, and how long each took to be Reporting again
  * once powered on (one time per device recovered).
  */
final case class ActionSnapshot(cut: Long, recovery: Times):
  def +(o: ActionSnapshot): ActionSnapshot = ActionSnapshot(cut + o.cut, recovery + o.recovery)

/** A fleet's figures at one moment: counts and times that add up, so the figures of several
  * processes' fleets merge (`+`) into one fleet's.
  */
final case class MetricsSnapshot(
    byState: Map[DeviceState, Long],
    /** By kind key, in the profile's order. */
    byKind: ListMap[String, KindSnapshot],
    tunnels: TunnelSnapshot,
    transitions: Map[(DeviceState, DeviceState), Long],
    pushes: PushSnapshot,
    /** Times devices stopped themselves so far, by reason: a device restarted and stopped again counts twice. */
    stopped: Map[String, Long],
    /** By the run's action number ([[fleetsim.device.Device.Power]]), since the start. */
    actions: Map[Int, ActionSnapshot] = Map.empty):
  def total(f: KindSnapshot => Long): Long = byKind.values.map(f).sum

  /** Requests sent and not yet answered, across all kinds. */
  def inFlight: Long = total(_.inFlight)

  /** Sessions lost once up, each followed by a new join: MQTT's reconnects. */
  def reconnects: Long =
    Seq(DeviceState.Reporting, DeviceState.ConfigDownloading).map(s => transitions((s, DeviceState.Backoff))).sum

  /** The same counts with no times since the last look: a process that did not answer this time. */
  def quiet: MetricsSnapshot =
    copy(byKind = byKind.map((k, v) => k -> v.copy(recent = Times.empty, recentLateness = Times.empty)),
      tunnels = tunnels.copy(recent = Times.empty), pushes = pushes.copy(recent = Times.empty))

  /** What a process that is gone counted: its devices, calls in flight and sessions are no more. */
  def lost: MetricsSnapshot =
    val q = quiet
    q.copy(byState = Map.empty, byKind = q.byKind.map((k, v) => k -> v.copy(inFlight = 0)), tunnels = q.tunnels.copy(up = 0))

  /** Devices in the fleet, in any state but Off. */
  def devices: Long = byState.iterator.collect { case (state, n) if state != DeviceState.Off => n }.sum

  def +(o: MetricsSnapshot): MetricsSnapshot =
    MetricsSnapshot(sum(byState, o.byState), byKind.map((k, v) => k -> o.byKind.get(k).fold(v)(v + _)), tunnels + o.tunnels,
      sum(transitions, o.transitions), pushes + o.pushes, sum(stopped, o.stopped),
      (actions.keySet ++ o.actions.keySet).iterator.map(k => k -> Seq(actions.get(k), o.actions.get(k)).flatten.reduce(_ + _)).toMap)

object MetricsSnapshot:
  /** No devices, no figures: what a process without the run's devices answers. */
  val empty: MetricsSnapshot =
    MetricsSnapshot(Map.empty, ListMap.empty, TunnelSnapshot(0, 0, 0, Map.empty, Times.empty, Times.empty), Map.empty,
      PushSnapshot(0, 0, Times.empty, Times.empty), Map.empty)

/** Counts by key, added key by key. */
private def sum[K](a: Map[K, Long], b: Map[K, Long]): Map[K, Long] =
  (a.keySet ++ b.keySet).iterator.map(k => k -> (a.getOrElse(k, 0L) + b.getOrElse(k, 0L))).toMap
