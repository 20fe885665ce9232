package fleetsim.metrics

import com.github.plokhotnyuk.jsoniter_scala.core.JsonValueCodec
import com.github.plokhotnyuk.jsoniter_scala.macros.{CodecMakerConfig, JsonCodecMaker}
import fleetsim.device.DeviceState
import fleetsim.transport.MessageKind

import java.lang.management.ManagementFactory
import scala.collection.immutable.ListMap
import scala.jdk.CollectionConverters.*

/** One second of a run, as the status line, the dashboard, the time-series file and the report all
  * see it. Rates are per second over the interval since the previous sample; `errors` (403s, failed
  * calls, and failed SSH tunnels or MQTT connects) counts since the start; times in ms; `nodes`: the devices each cluster node runs (a
  * run over a cluster only; a node lost is gone from it).
  */
final case class Sample(
    t: Long,
    elapsedS: Double,
    target: Int,
    devices: Map[String, Long],
    rates: Map[String, Rates],
    errors: Long,
    latencyMs: Map[String, Percentiles],
    latenessMs: Map[String, Percentiles],
    transitions: Map[String, Double],
    tunnels: Option[TunnelSample],
    process: ProcessSample,
    nodes: Map[String, Long] = Map.empty,
    /** The actions started since the sample before: charts draw each over its span. */
    actions: List[ActionMark] = Nil):
  /** Devices in the fleet: all but those Off. */
  def running: Long = devices.iterator.collect { case (state, n) if state != "Off" => n }.sum
  def repliesPerS: Double = rates.values.map(r => r.ok + r.forbidden + r.failed).sum

final case class Rates(sent: Double, ok: Double, forbidden: Double, failed: Double)
/** An action as charts mark it: its name and kind, from `atS` (s since the run started) for `forS`. */
final case class ActionMark(name: String, kind: String, atS: Double, forS: Double)
final case class Percentiles(p50: Double, p90: Double, p99: Double, max: Double)
/** Devices' own sessions, as their transport kind fills them in ([[SessionFigures]]): SSH tunnels, or
  * MQTT connections (opening = Discovering, retunnels = reconnects, handshake = CONNECT to SUBACK).
  *
  * @param mqtt the sessions are MQTT connections: only for the readers of timeseries.jsonl and the
  *             dashboard's charts, which title them by it (a file format); code takes its words from the kind
  */
final case class TunnelSample(up: Long, opening: Long, retunnels: Long, retunnelsPerS: Double, handshakeP99Ms: Double, mqtt: Boolean = false)

/** How a transport's own sessions show in a second's sample: its kind supplies it
  * ([[fleetsim.run.TransportKind]]).
  */
trait SessionFigures:
  /** None when the devices hold no sessions of their own.
    *
    * @param rate a running total's rate a second since the previous sample
    */
  def sessionSample(s: MetricsSnapshot, rate: (MetricsSnapshot => Long) => Double): Option[TunnelSample]

object SessionFigures:
  /** Devices without sessions of their own. */
  val none: SessionFigures = (_, _) => None

final case class ProcessSample(threads: Int, heapUsedBytes: Long, gcMsPerS: Double, cpuPct: Double, openFiles: Long)

object Sample:
  given JsonValueCodec[Sample] = JsonCodecMaker.make(CodecMakerConfig.withTransientEmpty(false).withTransientDefault(false))

/** Turns a fleet's snapshots (running totals) into one [[Sample]] each, with rates since the last.
  * For one caller (the run's once-a-second tick).
  *
  * @param sessions the devices' own sessions' figures, as their transport kind has them
  */
final class Sampler(kinds: IndexedSeq[MessageKind], process: ProcessWatch, target: Int, sessions: SessionFigures):
  private val started = System.nanoTime()
  private var last = System.nanoTime()
  private var previous: Option[MetricsSnapshot] = None
  private val gc = ManagementFactory.getGarbageCollectorMXBeans.asScala
  private var lastGcMs = gcMs

  /** The sample of the fleet's figures `s`, with rates since the previous call's, the devices each
    * cluster node runs, and the devices wanted now (the target a resize set).
    */
  def sample(s: MetricsSnapshot, nodes: Map[String, Long] = Map.empty, wanted: Int = target): Sample = synchronized {
    val now = System.nanoTime()
    val seconds = ((now - last) / 1e9).max(1e-3)
    def rate(f: MetricsSnapshot => Long) = (f(s) - previous.fold(0L)(f)) / seconds
    val keys = kinds.map(_.key)
    val rates = ListMap.from(keys.map { k =>
      k -> Rates(rate(_.byKind(k).sent), rate(_.byKind(k).ok), rate(_.byKind(k).forbidden), rate(_.byKind(k).failed))
    })
    val moves = ListMap.from(s.transitions.toSeq.sortBy((k, _) => (k._1.ordinal, k._2.ordinal)).collect {
      case (key @ (from, to), _) if rate(_.transitions(key)) > 0 => s"$from>$to" -> rate(_.transitions(key))
    })
    val figures = process.sample()
    val gcNow = gcMs
    val sample = Sample(
      t = System.currentTimeMillis(),
      elapsedS = (now - started) / 1e9,
      target = wanted,
      devices = ListMap.from(DeviceState.values.map(st => st.toString -> s.byState(st))),
      rates = rates,
      errors = s.total(k => k.forbidden + k.failed) + s.tunnels.failures.values.sum, // a device that cannot connect sends nothing to fail
      latencyMs = ListMap.from(keys.map(k => k -> percentiles(s.byKind(k).recent))),
      latenessMs = ListMap.from(kinds.filter(_.periodic).map(k => k.key -> percentiles(s.byKind(k.key).recentLateness))),
      transitions = moves,
      tunnels = sessions.sessionSample(s, rate),
      process = ProcessSample(figures.threads, figures.heapUsedBytes, (gcNow - lastGcMs) / seconds, ProcessWatch.cpuPercent,
        ProcessWatch.openFiles.getOrElse(-1L)),
      nodes = nodes)
    previous = Some(s)
    last = now
    lastGcMs = gcNow
    sample
  }

  private def gcMs: Long = gc.map(_.getCollectionTime.max(0)).sum
  private def percentiles(times: Times) =
    val l = times.latency
    Percentiles(l.p50, l.p90, l.p99, l.max)
