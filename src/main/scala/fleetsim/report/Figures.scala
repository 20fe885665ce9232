package fleetsim.report

import fleetsim.Suggest
import fleetsim.device.DeviceState
import fleetsim.transport.MessageKind

import scala.collection.immutable.ListMap
import scala.math.BigDecimal.RoundingMode

/** What a figure measures, which says the unit its value is in and the units its bound takes. */
enum Measure(val unit: String, advice: String):
  case Time extends Measure("ms", "a time: give its bound in ms or s, like 200ms or 1s")
  case Share extends Measure("%", "a percentage: give its bound in %, like 1%")
  case Count extends Measure("", "a count: give its bound as a plain number, like 10")

  /** A bound of `number` in `unit` as a value in this measure's unit, or what to write instead. */
  def bound(figure: String, number: BigDecimal, unit: String): Either[String, Double] = (this, unit) match
    case (Time, "ms") | (Share, "%") | (Count, "") => Right(number.toDouble)
    case (Time, "s") => Right((number * 1000).toDouble)
    case _ => Left(s"$figure is $advice")

  /** `value` with its unit, as a person reads it: "12.5 ms", "0.25%", "10". */
  def show(value: Double): String =
    val number = BigDecimal(value).setScale(3, RoundingMode.HALF_UP).bigDecimal.stripTrailingZeros.toPlainString
    this match
      case Time => s"$number ms"
      case Share => s"$number%"
      case Count => number

object Measure:
  def of(unit: String): Measure = values.find(_.unit == unit).getOrElse(Count)

/** A figure of a run that a threshold can name, read from the run's summary. `read` gives Left, why
  * there is no value, for a figure nothing was measured for (a kind that sent nothing): a threshold
  * on it fails rather than pass on a latency of 0.
  */
final case class Figure(name: String, measure: Measure, read: Summary => Either[String, Double])

/** The figures a run of a device profile's message kinds has, named as summary.json names them
  * without the unit in its keys (`latencyMs.heartbeat.p99` is `latency.heartbeat.p99`) and read from
  * the same [[Summary]] the file is written from, so that a verdict and summary.json cannot disagree.
  * One list serves the check at start (an unknown figure is a mistake) and the judging at the end.
  *
  * @param actions the names of the actions a scenario will start, each with its figures
  */
final class Figures(kinds: Seq[MessageKind], profile: String, actions: Seq[String] = Nil):
  import Figures.*

  private def answered(m: MessageCounts) = m.sent - m.failures.getOrElse(Summary.Interrupted, 0L)

  /** A kind's time percentiles in `section`, with no value when `measured` says nothing was timed. */
  private def times(section: String, kind: String, of: Summary => Map[String, LatencySummary], measured: MessageCounts => Long,
      none: String): Seq[Figure] =
    Percentiles.toSeq.map { (p, value) =>
      Figure(s"$section.$kind.$p", Measure.Time, s =>
        if s.messages.get(kind).forall(measured(_) == 0) then Left(s"no data: $none")
        else of(s).get(kind).map(value).toRight(s"no data: $none"))
    }

  val byName: ListMap[String, Figure] = ListMap.from((
    kinds.flatMap(k => times("latency", k.key, _.latencyMs, answered, s"no ${k.key} call was answered")) ++
      kinds.filter(_.periodic).flatMap(k => times("lateness", k.key, _.latenessMs, _.sent, s"no ${k.key} was sent")) ++
      kinds.flatMap(k => Counts.toSeq.map((c, value) =>
        Figure(s"messages.${k.key}.$c", Measure.Count, s => s.messages.get(k.key).map(value(_).toDouble).toRight("no data")))) ++
      Seq(
        Figure("errors.count", Measure.Count, s => Right(s.errors.count.toDouble)),
        Figure("errors.rate", Measure.Share, s => if s.errors.attempts == 0 then Left("no data: nothing was sent") else Right(s.errors.ratePct)),
        Figure("devices.target", Measure.Count, s => Right(s.devices.target.toDouble)),
        Figure("devices.started", Measure.Count, s => Right(s.devices.started.toDouble))) ++
      DeviceState.values.toSeq.map(state =>
        Figure(s"devices.byState.$state", Measure.Count, s => Right(s.devices.byState.getOrElse(state.toString, 0L).toDouble))) ++
      actions.flatMap(actionFigures)
  ).map(f => f.name -> f))

  /** An action's figures: its recovery percentiles, with no value where devices that never came back
    * fall (so `action.x.recovery.p100 < 60s` fails if any never did), and its counts.
    */
  private def actionFigures(name: String): Seq[Figure] =
    def acted(s: Summary) = s.actions.find(_.name == name).toRight(s"no data: action $name never started (the run ended first)")
    Recovery.toSeq.map { (p, value) =>
      Figure(s"action.$name.recovery.$p", Measure.Time, s => acted(s).flatMap { a =>
        if a.cut == 0 then Left(s"no data: action $name cut no device's power")
        else value(a.recoveryMs).toRight(s"no data: ${a.neverBack} of ${a.cut} devices not back by the run's end")
      })
    } ++ ActionCounts.toSeq.map((c, value) => Figure(s"action.$name.$c", Measure.Count, s => acted(s).map(value(_).toDouble))) ++
      Window.toSeq.map { case (f, (measure, value)) => Figure(s"action.$name.$f", measure, s => acted(s).flatMap(_.during.map(value).toRight(
        s"no data: the run ended before a second of action $name was sampled"))) } :+
      Figure(s"action.$name.convergence", Measure.Time, s => acted(s).flatMap { a => // recovery.p100, by the name a rollout's is known by
        if a.cut == 0 then Left(s"no data: action $name reached no device")
        else a.recoveryMs.p100.toRight(s"no data: ${a.neverBack} of ${a.cut} devices had not applied it by the run's end")
      })

  /** The figures there are, in a line: what an unknown figure's refusal lists. */
  def described: String =
    def names(keys: Seq[String]) = keys.mkString(", ")
    val periodic = kinds.filter(_.periodic).map(_.key)
    val lateness = if periodic.isEmpty then "" else s"; lateness.<kind>.{${names(Percentiles.keys.toSeq)}} for ${names(periodic)}"
    val scripted = if actions.isEmpty then "" else
      s"; action.<name>.recovery.{${names(Recovery.keys.toSeq)}} and action.<name>.{${names((ActionCounts.keys ++ Seq("convergence") ++ Window.keys).toSeq)}} for ${names(actions)}"
    s"the figures of device profile $profile are latency.<kind>.{${names(Percentiles.keys.toSeq)}} and " +
      s"messages.<kind>.{${names(Counts.keys.toSeq)}} for ${names(kinds.map(_.key))}$lateness; errors.{count, rate}; " +
      s"devices.{target, started}; devices.byState.{${names(DeviceState.values.toSeq.map(_.toString))}}$scripted"

  /** A threshold as written, checked against these figures: its figure exists and its bound's unit fits. */
  def threshold(written: Threshold.Written): Either[String, Threshold] =
    byName.get(written.figure) match
      case None =>
        val hint = Suggest.closest(written.figure, byName.keys).fold(s"; $described")(name => s" (did you mean $name?)")
        Left(s"no figure ${written.figure}$hint")
      case Some(figure) =>
        figure.measure.bound(figure.name, written.number, written.unit).map(Threshold(written.text, figure, written.comparison, _))

object Figures:
  /** A time's figures, as [[LatencySummary]] has them. */
  val Percentiles: ListMap[String, LatencySummary => Double] = ListMap("p50" -> (_.p50), "p90" -> (_.p90), "p99" -> (_.p99), "max" -> (_.max))
  /** A kind's counts, as [[MessageCounts]] has them. */
  val Counts: ListMap[String, MessageCounts => Long] = ListMap("sent" -> (_.sent), "ok" -> (_.ok), "forbidden" -> (_.forbidden), "failed" -> (_.failed))
  /** An action's recovery percentiles, as [[RecoverySummary]] has them. */
  val Recovery: ListMap[String, RecoverySummary => Option[Double]] = ListMap("p50" -> (_.p50), "p90" -> (_.p90), "p99" -> (_.p99), "p100" -> (_.p100))
  /** What the controller went through while an action lasted, as [[ActionWindow]] has it. */
  val Window: ListMap[String, (Measure, ActionWindow => Double)] = ListMap(
    "joins-per-s" -> (Measure.Count, _.joinsPerSPeak), "errors" -> (Measure.Count, _.errors.toDouble), "lateness.p99" -> (Measure.Time, _.latenessP99MsWorst))
  /** An action's counts, as [[ActionSummary]] has them. */
  val ActionCounts: ListMap[String, ActionSummary => Long] =
    ListMap("devices" -> (_.devices), "cut" -> (_.cut), "recovered" -> (_.recovered), "never-back" -> (_.neverBack))
