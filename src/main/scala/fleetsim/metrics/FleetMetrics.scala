package fleetsim.metrics

import fleetsim.device.{DeviceEvents, DeviceState}
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import io.micrometer.core.instrument.composite.CompositeMeterRegistry
import io.micrometer.core.instrument.{MeterRegistry, Timer}
import org.HdrHistogram.{Histogram, SingleWriterRecorder}

import java.util.concurrent.{ConcurrentHashMap, CopyOnWriteArrayList}
import java.util.concurrent.TimeUnit.NANOSECONDS
import java.util.concurrent.atomic.LongAdder
import scala.collection.immutable.ListMap
import scala.jdk.CollectionConverters.*

/** The fleet's figures, kept by group (state, message kind, outcome, transition), never per device,
  * so their number does not grow with the fleet. Writers are lock-free; [[snapshot]] is for one
  * reader. Every figure is also a Micrometer meter in `registry` (an empty composite registers
  * nothing and costs next to nothing), as the catalogue names it ([[Meters]]).
  *
  * @param kinds the profile's message kinds, `kinds(i).index == i`: bounded by the profile, never per device
  */
final class FleetMetrics(val kinds: IndexedSeq[MessageKind], registry: MeterRegistry = CompositeMeterRegistry()) extends DeviceEvents:
  import FleetMetrics.*

  private val states = DeviceState.values.map(s => gauge(Meters.Devices, s.toString))
  private val transitions = DeviceState.values.map(from => DeviceState.values.map(to => counter(Meters.Transitions, from.toString, to.toString)))
  private val figures = kinds.map(KindFigures(_)).toArray
  private val tunnelsOpened = counter(Meters.SessionsOpened)
  private val tunnelsUp = gauge(Meters.SessionsUp)
  private val tunnelFailures = FailureReason.values.map(r => counter(Meters.SessionsFailed, r.key))
  private val handshakes = Timing(Some(Meters.Handshake.timer(registry)))
  private val pushesReceived = counter(Meters.Pushes)
  private val pushesAcknowledged = counter(Meters.PushesAcknowledged)
  private val pushToAck = Timing(Some(Meters.PushToAck.timer(registry)))
  /** By reason: a profile has a few, so a map made as they come stays small. */
  private val halts = ConcurrentHashMap[String, LongAdder]()
  /** By action number: a run has a few. */
  private val actions = ConcurrentHashMap[Int, ActionFigures]()

  /** Devices an action cut the power of, and how long each took to be Reporting again once powered on. */
  private final class ActionFigures:
    val cut = LongAdder()
    val recovery = Timing(None)
  private def action(number: Int) = actions.computeIfAbsent(number, _ => ActionFigures())

  private final class KindFigures(kind: MessageKind):
    private def outcome(name: String) = counter(Meters.Replies, kind.key, name)
    val sent = counter(Meters.Sent, kind.key)
    val ok = outcome("ok")
    val forbidden = outcome("forbidden")
    val failed = FailureReason.values.map(r => outcome(r.key))
    val inFlight = LongAdder()
    val latency = Timing(Some(Meters.Latency.timer(registry, kind.key)))
    val lateness = Timing(Some(Meters.Lateness.timer(registry, kind.key)))

  private def counter(meter: Meters.Meter, tags: String*): LongAdder =
    val count = LongAdder()
    meter.counter(registry, count, _.sum.toDouble, tags*)
    count

  private def gauge(meter: Meters.Meter, tags: String*): LongAdder =
    val value = LongAdder()
    meter.gauge(registry, value, _.sum.toDouble, tags*)
    value

  // ---- writers: devices, transports and tunnels ----

  def moved(from: Option[DeviceState], to: DeviceState): Unit =
    from.foreach { s =>
      states(s.ordinal).decrement()
      transitions(s.ordinal)(to.ordinal).increment()
    }
    states(to.ordinal).increment()

  def stopped(state: DeviceState): Unit = states(state.ordinal).decrement()

  def late(kind: MessageKind, nanos: Long): Unit = figures(kind.index).lateness.record(nanos)

  def pushed(): Unit = pushesReceived.increment()

  def pushAcknowledged(nanos: Long): Unit =
    pushesAcknowledged.increment()
    pushToAck.record(nanos)

  def cut(number: Int): Unit = action(number).cut.increment()

  def recovered(number: Int, nanos: Long): Unit = action(number).recovery.record(nanos)

  def sent(kind: MessageKind): Unit =
    val k = figures(kind.index)
    k.sent.increment()
    k.inFlight.increment()

  /** A reply by its status: 2xx ok, 403 forbidden, the rest failed by what the status says. */
  def replied(kind: MessageKind, reply: Reply, latencyNanos: Long): Unit =
    val k = figures(kind.index)
    reply match
      case r: Reply.Response =>
        if r.ok then k.ok.increment()
        else if r.status == 403 then k.forbidden.increment()
        else k.failed(statusReason(r.status).ordinal).increment()
      case Reply.Failed(reason) => k.failed(reason.ordinal).increment()
    k.latency.record(latencyNanos)
    k.inFlight.decrement()

  def judged(kind: MessageKind, reply: Reply.Response, failure: Option[FailureReason]): Unit =
    val k = figures(kind.index)
    if reply.ok then k.ok.decrement()
    else if reply.status == 403 then k.forbidden.decrement()
    else k.failed(statusReason(reply.status).ordinal).decrement()
    failure match
      case Some(reason) => k.failed(reason.ordinal).increment()
      case None => k.ok.increment()

  def halted(reason: String): Unit =
    halts.computeIfAbsent(reason, r => counter(Meters.Stopped, r)).increment()

  def tunnelOpened(handshakeNanos: Long): Unit =
    tunnelsOpened.increment()
    tunnelsUp.increment()
    handshakes.record(handshakeNanos)

  def tunnelFailed(reason: FailureReason): Unit = tunnelFailures(reason.ordinal).increment()
  def tunnelClosed(): Unit = tunnelsUp.decrement()

  // ---- readers ----

  def tunnelsUpNow: Long = tunnelsUp.sum

  /** Requests sent and not yet answered, across all kinds. */
  def inFlight: Long = figures.map(_.inFlight.sum).sum

  /** Devices per state right now. */
  def devicesByState: Map[DeviceState, Long] = DeviceState.values.map(s => s -> states(s.ordinal).sum).toMap

  /** Counts so far, and times both since the previous snapshot and since the start. For one reader
    * at a time: each snapshot takes the interval since the last.
    */
  def snapshot(): MetricsSnapshot = synchronized {
    val byKind = ListMap.from(kinds.map { kind =>
      val k = figures(kind.index)
      val (recent, overall) = k.latency.take()
      val (recentLateness, overallLateness) = k.lateness.take()
      kind.key -> KindSnapshot(
        sent = k.sent.sum,
        ok = k.ok.sum,
        forbidden = k.forbidden.sum,
        failures = FailureReason.values.map(r => r -> k.failed(r.ordinal).sum).toMap,
        inFlight = k.inFlight.sum,
        recent = recent,
        overall = overall,
        recentLateness = recentLateness,
        overallLateness = overallLateness)
    })
    val (recentHandshakes, allHandshakes) = handshakes.take()
    val tunnels = TunnelSnapshot(
      opened = tunnelsOpened.sum,
      up = tunnelsUp.sum,
      retunnels = Seq(DeviceState.Reporting, DeviceState.ConfigDownloading)
        .map(s => transitions(s.ordinal)(DeviceState.Tunneling.ordinal).sum).sum,
      failures = FailureReason.values.map(r => r -> tunnelFailures(r.ordinal).sum).toMap,
      recent = recentHandshakes,
      overall = allHandshakes)
    val moves = for from <- DeviceState.values; to <- DeviceState.values yield (from, to) -> transitions(from.ordinal)(to.ordinal).sum
    val (recentPushes, allPushes) = pushToAck.take()
    val stopped = halts.entrySet.asScala.map(e => e.getKey -> e.getValue.sum).toMap
    val byAction = actions.entrySet.asScala.map(e => e.getKey.toInt -> ActionSnapshot(e.getValue.cut.sum, e.getValue.recovery.take()._2)).toMap
    MetricsSnapshot(devicesByState, byKind, tunnels, moves.toMap, PushSnapshot(pushesReceived.sum, pushesAcknowledged.sum, recentPushes, allPushes),
      stopped, byAction)
  }

object FleetMetrics:
  private def statusReason(status: Int): FailureReason = status match
    case 401 => FailureReason.Unauthorized
    case 429 | 503 => FailureReason.Throttled
    case _ => FailureReason.Rejected

  /** A time kept twice: in HdrHistograms for exact percentiles (since the last look, and overall),
    * and in a Micrometer timer for exporters, if it has one.
    *
    * A recorder for each thread that records, merged when taken: the I/O loops record a latency and
    * a lateness a message, and one recorder shared by them bounced its atomic counters between the
    * cores (4% of the fleet's CPU at 100,000 devices, perf). A thread's own writes its plain
    * histogram with two uncontended atomics.
    */
  private final class Timing(timer: Option[Timer]):
    private val recorders = CopyOnWriteArrayList[SingleWriterRecorder]()
    private val recorder = ThreadLocal.withInitial[SingleWriterRecorder] { () =>
      val own = SingleWriterRecorder(3)
      recorders.add(own)
      own
    }
    private val overall = Histogram(3)

    def record(nanos: Long): Unit =
      val n = nanos.max(0)
      recorder.get.recordValue(n / 1000)
      timer.foreach(_.record(n, NANOSECONDS))

    // Plain, and refilled each time: percentiles walk thousands of counts.
    private val interval = Histogram(3)
    private val thread = Histogram(3) // one thread's, before it is added to interval
    private val none = Times.empty
    private var taken = none // the overall times the last take handed out, which nothing changes

    /** Since the last take, and since the start; for one reader at a time. A time with nothing new
      * (most of them, most seconds: no handshakes over HTTP, joins only in the ramp) copies nothing:
      * each copy is a histogram of thousands of counts, every second.
      */
    def take(): (Times, Times) =
      interval.reset()
      recorders.forEach { r =>
        r.getIntervalHistogramInto(thread)
        if thread.getTotalCount > 0 then interval.add(thread)
      }
      if interval.getTotalCount == 0 then (none, taken)
      else
        overall.add(interval)
        taken = Times(overall.copy())
        (Times(interval.copy()), taken)
