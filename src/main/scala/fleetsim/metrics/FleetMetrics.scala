package fleetsim.metrics

import fleetsim.device.{DeviceEvents, DeviceState}
import fleetsim.protocol.MessageKind
import fleetsim.transport.{FailureReason, Reply}
import org.HdrHistogram.{Histogram, Recorder}

import java.util.concurrent.atomic.LongAdder

/** The fleet's figures, kept by group (state, message kind, outcome), never per device, so their
  * number does not grow with the fleet. Writers are lock-free; [[snapshot]] is for one reader.
  */
final class FleetMetrics extends DeviceEvents:
  private val states = Array.fill(DeviceState.values.length)(LongAdder())
  private val transitions = Array.fill(DeviceState.values.length, DeviceState.values.length)(LongAdder())
  private val kinds = MessageKind.values.map(_ => KindCounters())
  private val tunnelsOpened = LongAdder()
  private val tunnelsUp = LongAdder()
  private val tunnelFailures = FailureReason.values.map(_ => LongAdder())
  private val handshakeMicros = Recorder(3)
  private val handshakeTotal = Histogram(3)

  private final class KindCounters:
    val sent = LongAdder()
    val ok = LongAdder()
    val forbidden = LongAdder()
    val failed = FailureReason.values.map(_ => LongAdder())
    val inFlight = LongAdder()
    val latencyMicros = Recorder(3)
    val total = Histogram(3)

  def moved(from: Option[DeviceState], to: DeviceState): Unit =
    from.foreach { s =>
      states(s.ordinal).decrement()
      transitions(s.ordinal)(to.ordinal).increment()
    }
    states(to.ordinal).increment()

  def stopped(state: DeviceState): Unit = states(state.ordinal).decrement()

  def sent(kind: MessageKind): Unit =
    val k = kinds(kind.ordinal)
    k.sent.increment()
    k.inFlight.increment()

  def replied(kind: MessageKind, reply: Reply, latencyNanos: Long): Unit =
    val k = kinds(kind.ordinal)
    reply match
      case Reply.Ok(_) => k.ok.increment()
      case Reply.Forbidden => k.forbidden.increment()
      case Reply.Failed(reason) => k.failed(reason.ordinal).increment()
    k.latencyMicros.recordValue((latencyNanos / 1000).max(0))
    k.inFlight.decrement()

  def tunnelOpened(handshakeNanos: Long): Unit =
    tunnelsOpened.increment()
    tunnelsUp.increment()
    handshakeMicros.recordValue((handshakeNanos / 1000).max(0))

  def tunnelFailed(reason: FailureReason): Unit = tunnelFailures(reason.ordinal).increment()
  def tunnelClosed(): Unit = tunnelsUp.decrement()
  def tunnelsUpNow: Long = tunnelsUp.sum

  /** Requests sent and not yet answered, across all kinds. */
  def inFlight: Long = kinds.map(_.inFlight.sum).sum

  /** Devices per state right now. */
  def devicesByState: Map[DeviceState, Long] = DeviceState.values.map(s => s -> states(s.ordinal).sum).toMap

  /** Counts so far, and latencies both since the previous snapshot and since the start. */
  def snapshot(): MetricsSnapshot = synchronized {
    val byKind = MessageKind.values.map { kind =>
      val k = kinds(kind.ordinal)
      val interval = k.latencyMicros.getIntervalHistogram()
      k.total.add(interval)
      kind -> KindSnapshot(
        sent = k.sent.sum,
        ok = k.ok.sum,
        forbidden = k.forbidden.sum,
        failures = FailureReason.values.map(r => r -> k.failed(r.ordinal).sum).toMap,
        recent = Latency.of(interval),
        overall = Latency.of(k.total))
    }.toMap
    val handshakes = handshakeMicros.getIntervalHistogram()
    handshakeTotal.add(handshakes)
    val retunnels = Seq(DeviceState.Reporting, DeviceState.ConfigDownloading).map(s => transitions(s.ordinal)(DeviceState.Tunneling.ordinal).sum).sum
    val tunnels = TunnelSnapshot(
      opened = tunnelsOpened.sum,
      up = tunnelsUp.sum,
      retunnels = retunnels,
      failures = FailureReason.values.map(r => r -> tunnelFailures(r.ordinal).sum).toMap,
      recent = Latency.of(handshakes),
      overall = Latency.of(handshakeTotal))
    MetricsSnapshot(devicesByState, byKind, tunnels)
  }

/** Latency percentiles in milliseconds. */
final case class Latency(p50: Double, p99: Double, max: Double, count: Long)
object Latency:
  def of(h: Histogram): Latency =
    def ms(micros: Long) = math.round(micros / 10.0) / 100.0
    Latency(ms(h.getValueAtPercentile(50)), ms(h.getValueAtPercentile(99)), ms(h.getMaxValue), h.getTotalCount)

final case class KindSnapshot(
    sent: Long,
    ok: Long,
    forbidden: Long,
    failures: Map[FailureReason, Long],
    recent: Latency,
    overall: Latency):
  def failed: Long = failures.values.sum

/** Tunnels: opened so far, up now, re-tunnels (Reporting back to Tunneling), failed opens by reason,
  * and handshake times.
  */
final case class TunnelSnapshot(
    opened: Long,
    up: Long,
    retunnels: Long,
    failures: Map[FailureReason, Long],
    recent: Latency,
    overall: Latency)

final case class MetricsSnapshot(byState: Map[DeviceState, Long], byKind: Map[MessageKind, KindSnapshot], tunnels: TunnelSnapshot):
  def devices: Long = byState.values.sum
  def total(f: KindSnapshot => Long): Long = byKind.values.map(f).sum
