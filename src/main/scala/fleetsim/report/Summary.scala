package fleetsim.report

import com.github.plokhotnyuk.jsoniter_scala.core.*
import com.github.plokhotnyuk.jsoniter_scala.macros.*
import fleetsim.metrics.ControllerCounts
import fleetsim.device.DeviceState
import fleetsim.metrics.{ActionSnapshot, KindSnapshot, MetricsSnapshot, ProcessFigures, Times}
import fleetsim.transport.FailureReason

import java.nio.file.{Files, Path}
import scala.collection.immutable.ListMap

/** summary.json: what a run did, for people and for scripts. Field names are a public contract. */
final case class Summary(
    run: RunInfo,
    devices: DevicesSummary,
    messages: Map[String, MessageCounts],
    latencyMs: Map[String, LatencySummary],
    /** How late scheduled sends left, over the run: the kinds sent on a schedule only. */
    latenessMs: Map[String, LatencySummary],
    errors: ErrorsSummary,
    tunnels: Option[TunnelsSummary],
    mqtt: Option[MqttSummary],
    pushes: Option[PushesSummary],
    process: ProcessSummary,
    controller: Option[ControllerCounts],
    cluster: Option[ClusterSummary] = None,
    /** What was done to the fleet while it ran (power cuts, reboot waves), in the order started. */
    actions: List[ActionSummary] = Nil,
    /** The run judged against its thresholds ([[Verdict.judge]]); none without thresholds. */
    verdict: Option[Verdict] = None)

final case class RunInfo(
    startedAt: String,
    endedAt: String,
    durationS: Double,
    stopReason: String,
    controllerUrl: String,
    controllerEmbedded: Boolean,
    transport: String,
    deviceProfile: String,
    /** What the run's random choices were drawn from: `--seed` gives the same choices again. */
    seed: Long = 0,
    /** The scenario file the run played, if any. */
    scenario: Option[String] = None)
/** A fleet over a cluster: devices running on each node (by its address) at the end, and the nodes
  * lost during the run (their blocks started again on the others).
  */
final case class ClusterSummary(nodes: Map[String, Long], lost: List[String])
/** @param byState devices per state at the end
  * @param stopped times devices stopped themselves during the run, by reason (a device restarted and
  *   stopped again counts twice); `byState.Stopped` is how many were Stopped at the end
  */
final case class DevicesSummary(target: Int, started: Int, byState: Map[String, Long], stopped: Map[String, Long])
final case class MessageCounts(sent: Long, ok: Long, forbidden: Long, failed: Long, failures: Map[String, Long])
final case class LatencySummary(p50: Double, p90: Double, p99: Double, max: Double)
/** What failed, as the status line counts errors: calls answered 403 or failed, and devices' own
  * sessions (SSH tunnels, MQTT connects) that failed to open; `attempts` is every call sent and
  * session tried, and `ratePct` the share of them that failed, in % (0 when nothing was tried).
  */
final case class ErrorsSummary(count: Long, attempts: Long, ratePct: Double)
final case class ProcessSummary(threadsPeak: Int, heapUsedPeakBytes: Long)
final case class TunnelsSummary(opened: Long, upAtEnd: Long, retunnels: Long, failures: Map[String, Long], handshakeMs: LatencySummary)
/** MQTT connections: CONNACKs accepted, connected at the end, sessions lost and joined again,
  * refused or failed connects by reason, CONNECT-to-CONNACK time.
  */
final case class MqttSummary(connects: Long, connectedAtEnd: Long, reconnects: Long, connectFailures: Map[String, Long], connectMs: LatencySummary)
final case class PushesSummary(received: Long, acknowledged: Long, pushToAckMs: LatencySummary)

/** An action a scenario or the dashboard started: when, for how long, and how its devices came back.
  *
  * @param atS when it started, in s since the run started
  * @param forS how long it acted: until the last of its devices was powered on again, or the run ended
  * @param devices devices it reached when it started
  * @param cut devices whose power it cut (one already Off is not cut again)
  * @param recovered of those, devices Reporting again before the run ended
  * @param neverBack of those, devices not Reporting again by the end
  * @param recoveryMs from each device's power-on to Reporting again, in percentiles of the devices
  *   cut: a percentile that devices never back fall in has none (p100 has none if any never came back)
  */
final case class ActionSummary(name: String, kind: String, atS: Double, forS: Double, devices: Long, cut: Long, recovered: Long, neverBack: Long,
    recoveryMs: RecoverySummary, during: Option[ActionWindow] = None)
/** What the controller went through while an action lasted: from its start until its span was over
  * and every device it cut was back (or the run ended), `seconds` long.
  *
  * @param joinsPerSPeak the most joins answered ok in a second (connects, for devices that join by connecting)
  * @param errors errors in it, as the run's errors count them
  * @param latenessP99MsWorst the worst second's lateness p99 of the scheduled sends, in ms
  */
final case class ActionWindow(seconds: Double, joinsPerSPeak: Double, errors: Long, latenessP99MsWorst: Double)
final case class RecoverySummary(p50: Option[Double], p90: Option[Double], p99: Option[Double], p100: Option[Double])

object ActionSummary:
  /** An action's summary from its devices' figures: `recovery` has a time per device recovered. */
  def of(name: String, kind: String, atS: Double, forS: Double, devices: Long, figures: ActionSnapshot, during: Option[ActionWindow]): ActionSummary =
    val recovered = figures.recovery.count.min(figures.cut)
    /** The time by which `q`% of the devices cut were back: a device never back counts as later than any. */
    def percentile(q: Double): Option[Double] =
      val rank = math.ceil(q / 100 * figures.cut).toLong.max(1)
      Option.when(figures.cut > 0 && rank <= recovered)(figures.recovery.percentile(100.0 * rank / recovered))
    ActionSummary(name, kind, atS, forS, devices, figures.cut, recovered, figures.cut - recovered,
      RecoverySummary(percentile(50), percentile(90), percentile(99), percentile(100)), during)

/** A transport's own section of the summary (SSH's `tunnels`, MQTT's `mqtt`): what its devices'
  * sessions did. Its kind supplies it ([[fleetsim.run.TransportKind]]).
  */
trait SessionsSection:
  /** `summary` with the section filled in from the end-of-run figures; `upAtEnd` taken before the devices stopped. */
  def withSessions(summary: Summary, metrics: MetricsSnapshot, upAtEnd: Long): Summary

object SessionsSection:
  /** Devices without sessions of their own. */
  val none: SessionsSection = (summary, _, _) => summary

object Summary:
  given JsonValueCodec[Summary] = JsonCodecMaker.makeWithRequiredCollectionFields

  /** A kind's counts. Calls still unanswered when the summary is taken (the run was stopped without
    * waiting for them: Ctrl-C twice) count as failed, `interrupted`, so that sent = ok + 403 + failed.
    */
  private def counts(k: KindSnapshot): MessageCounts =
    val unanswered = (k.sent - k.ok - k.forbidden - k.failed).max(0)
    val known = failures(k.failures)
    MessageCounts(k.sent, k.ok, k.forbidden, k.failed + unanswered,
      if unanswered == 0 then known else known + (Interrupted -> (known.getOrElse(Interrupted, 0L) + unanswered)))

  /** The reason of calls a run did not wait for. */
  val Interrupted = "interrupted"

  /** Folds the end-of-run figures into a summary. `byState` and `tunnelsUp` (None without sessions)
    * are taken before the devices stopped; `sessions` writes the transport's own section; `periodic`
    * names the kinds sent on a schedule, whose lateness it gives.
    */
  def of(
      run: RunInfo,
      target: Int,
      byState: Map[DeviceState, Long],
      tunnelsUp: Option[Long],
      metrics: MetricsSnapshot,
      process: ProcessFigures,
      controller: Option[ControllerCounts],
      cluster: Option[ClusterSummary] = None,
      sessions: SessionsSection = SessionsSection.none,
      periodic: Seq[String] = Nil): Summary =
    def byKind[A](f: KindSnapshot => A) = metrics.byKind.map((k, v) => k -> f(v))
    val messages = byKind(k => counts(k))
    val summary = Summary(
      run,
      DevicesSummary(target, byState.values.sum.toInt, ListMap.from(DeviceState.values.map(s => s.toString -> byState.getOrElse(s, 0L))),
        ListMap.from(metrics.stopped.toSeq.sortBy(_._1))),
      messages,
      byKind(k => latencySummary(k.overall)),
      ListMap.from(metrics.byKind.collect { case (k, v) if periodic.contains(k) => k -> latencySummary(v.overallLateness) }),
      errors(messages.values, metrics.tunnels.opened, metrics.tunnels.failures.values.sum),
      None,
      None,
      Option.when(metrics.pushes.received > 0)(metrics.pushes).map(p => PushesSummary(p.received, p.acknowledged, latencySummary(p.overall))),
      ProcessSummary(process.threadsPeak, process.heapUsedPeakBytes),
      controller,
      cluster)
    tunnelsUp.fold(summary)(sessions.withSessions(summary, metrics, _))

  def latencySummary(times: Times): LatencySummary =
    val l = times.latency
    LatencySummary(l.p50, l.p90, l.p99, l.max)

  private def errors(messages: Iterable[MessageCounts], sessionsOpened: Long, sessionsFailed: Long): ErrorsSummary =
    val count = messages.map(m => m.forbidden + m.failed).sum + sessionsFailed
    val attempts = messages.map(_.sent).sum + sessionsOpened + sessionsFailed
    ErrorsSummary(count, attempts, if attempts == 0 then 0.0 else 100.0 * count / attempts)
  /** Counts by reason's key, in the reasons' order, those above 0. */
  def failures(byReason: Map[FailureReason, Long]): Map[String, Long] =
    ListMap.from(FailureReason.values.map(r => r.key -> byReason(r)).filter(_._2 > 0))

  val FileName = "summary.json"

  def write(summary: Summary, dir: Path): Path =
    Files.createDirectories(dir)
    val file = dir.resolve(FileName)
    Files.write(file, writeToArray(summary, WriterConfig.withIndentionStep(2)))
    file

  def read(file: Path): Summary = readFromArray[Summary](Files.readAllBytes(file))

  /** The summary for people: a few lines, the same figures as the file. */
  def render(s: Summary): String =
    val lines = Seq.newBuilder[String]
    lines += f"fleetsim: ${s.run.stopReason} after ${s.run.durationS}%.1f s, ${s.devices.started} of ${s.devices.target} devices started"
    lines += "  devices: " + s.devices.byState.map((k, v) => s"$k $v").mkString(", ")
    if s.devices.stopped.nonEmpty then lines += "  stopped themselves: " + s.devices.stopped.map((reason, n) => s"$n for $reason").mkString(", ")
    lines += f"  ${"kind"}%-10s ${"sent"}%10s ${"ok"}%10s ${"403"}%8s ${"failed"}%8s ${"p50 ms"}%8s ${"p99 ms"}%8s ${"max ms"}%8s"
    s.messages.foreach { (kind, m) =>
      val l = s.latencyMs(kind)
      // A kind none of whose calls came back (none sent, or all interrupted by a second Ctrl-C) has no latency.
      def ms(v: Double) = if m.sent == m.failures.getOrElse(Interrupted, 0L) then f"${"-"}%8s" else f"$v%8.2f"
      lines += f"  $kind%-10s ${m.sent}%10d ${m.ok}%10d ${m.forbidden}%8d ${m.failed}%8d ${ms(l.p50)} ${ms(l.p99)} ${ms(l.max)}"
    }
    // Why calls failed, as summary.json has it: a wrong port says connectFailed here, not only in the file.
    val failed = s.messages.collect { case (kind, m) if m.failures.nonEmpty => s"$kind " + m.failures.map((k, v) => s"$k $v").mkString(", ") }
    if failed.nonEmpty then lines += "  failed calls: " + failed.mkString("; ")
    val late = s.latenessMs.filter((kind, _) => s.messages.get(kind).exists(_.sent > 0)) // a kind that sent nothing was never late
    if late.nonEmpty then
      lines += "  lateness: " + late.map((kind, l) => f"$kind p50 ${l.p50}%.2f ms, p99 ${l.p99}%.2f ms, max ${l.max}%.2f ms").mkString("; ")
    lines += f"  errors: ${s.errors.count} of ${s.errors.attempts} calls and session opens (${s.errors.ratePct}%.2f%%)"
    s.tunnels.foreach { t =>
      val failed = if t.failures.isEmpty then "" else ", failed opens: " + t.failures.map((k, v) => s"$k $v").mkString(", ")
      lines += f"  tunnels: ${t.opened} opened, ${t.upAtEnd} up at the end, ${t.retunnels} re-tunnels$failed; handshake p50 ${t.handshakeMs.p50}%.1f ms, p99 ${t.handshakeMs.p99}%.1f ms"
    }
    s.mqtt.foreach { m =>
      val failed = if m.connectFailures.isEmpty then "" else ", failed connects: " + m.connectFailures.map((k, v) => s"$k $v").mkString(", ")
      lines += f"  mqtt: ${m.connects} connects, ${m.connectedAtEnd} connected at the end, ${m.reconnects} reconnects$failed; connect p50 ${m.connectMs.p50}%.1f ms, p99 ${m.connectMs.p99}%.1f ms"
    }
    s.pushes.foreach { p =>
      lines += f"  pushes: ${p.received} received, ${p.acknowledged} acknowledged; push to ack p50 ${p.pushToAckMs.p50}%.1f ms, p99 ${p.pushToAckMs.p99}%.1f ms"
    }
    s.controller.foreach { c =>
      // The kinds the fleet sends, or the controller got (an MQTT fleet sends none of protocol v1's);
      // registrations where it keeps any (protocol v1's joins; the other dialects keep none).
      val got = c.received.filter((kind, n) => n > 0 || s.messages.contains(kind))
      val registered = if c.registered > 0 then s"; ${c.registered} registered" else ""
      lines += "  controller received: " + (if got.isEmpty then "nothing" else got.map((k, v) => s"$k $v").mkString(", ")) + registered
      if c.duplicates > 0 then lines += s"  controller saw ${c.duplicates} heartbeats from a second device with the same MAC"
    }
    s.cluster.foreach { c =>
      val lost = if c.lost.isEmpty then "" else s"; lost: ${c.lost.mkString(", ")}"
      lines += s"  cluster: ${c.nodes.size} nodes: " + c.nodes.map((node, n) => s"$node $n devices").mkString(", ") + lost
    }
    lines += f"  process: peak ${s.process.threadsPeak} threads, peak heap ${s.process.heapUsedPeakBytes / 1048576.0}%.0f MiB"
    s.actions.foreach { a =>
      def time(p: Option[Double]) = p.fold("-")(ms => if ms < 1000 then f"$ms%.1f ms" else f"${ms / 1000}%.2f s")
      val back = s"${a.recovered} of ${a.cut} cut back" + (if a.neverBack > 0 then s", ${a.neverBack} not back by the end" else "")
      val kind = if a.kind == a.name then "" else s" (${a.kind})"
      val at = f"  action ${a.name}$kind at ${a.atS}%.1f s for ${a.forS}%.1f s"
      // An action on the controller alone (a fault, a call) reaches no device: it has no recovery of its own.
      lines += (if a.devices == 0 && a.cut == 0 then at else s"$at: ${a.devices} devices, $back; recovery p50 ${time(a.recoveryMs.p50)}, " +
        s"p90 ${time(a.recoveryMs.p90)}, p99 ${time(a.recoveryMs.p99)}, p100 ${time(a.recoveryMs.p100)}")
      a.during.foreach(w => lines += f"    over ${w.seconds}%.0f s: joins at most ${w.joinsPerSPeak}%.0f/s, ${w.errors} errors, lateness p99 at worst ${w.latenessP99MsWorst}%.1f ms")
    }
    s.verdict.foreach(v => lines ++= Verdict.render(v))
    lines.result().mkString("\n")
