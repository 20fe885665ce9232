package fleetsim.report

/** A threshold judged: its figure's value at the end in the figure's `unit` (ms, %, or "" for a
  * count; none when nothing was measured), whether it held, and a sentence saying so.
  */
final case class Judged(threshold: String, figure: String, value: Option[Double], unit: String, passed: Boolean, message: String)

/** The run judged against its thresholds, on the figures of its summary: passed when every one held.
  * It is part of the summary (summary.json's `verdict`), so the console's table, verdict.xml and the
  * exit code all read the same judgement.
  */
final case class Verdict(passed: Boolean, failed: Int, thresholds: List[Judged])

object Verdict:
  /** Each threshold judged on `summary`'s figures; a figure with no value fails its threshold. */
  def judge(thresholds: Seq[Threshold], summary: Summary): Verdict =
    val judged = thresholds.toList.map { t =>
      val figure = t.figure
      figure.read(summary) match
        case Left(why) => Judged(t.text, figure.name, None, figure.measure.unit, passed = false, s"${figure.name}: $why")
        case Right(value) =>
          val held = t.holds(value)
          val was = s"${figure.name} was ${figure.measure.show(value)}"
          Judged(t.text, figure.name, Some(value), figure.measure.unit, held,
            if held then was else s"$was, not ${t.comparison.symbol} ${figure.measure.show(t.bound)}")
    }
    Verdict(judged.forall(_.passed), judged.count(!_.passed), judged)

  /** `summary` with its verdict on `thresholds`; as it was when there are none. `abortedBy` is the
    * threshold that aborted the run, its figure's value then, and why: failed with that value, whatever
    * its figure came to by the end.
    */
  def judged(summary: Summary, thresholds: Seq[Threshold], abortedBy: Option[(Threshold, Double, String)] = None): Summary =
    if thresholds.isEmpty then summary
    else
      val v = judge(thresholds, summary)
      val marked = abortedBy.fold(v) { (aborting, value, why) =>
        val list = v.thresholds.map(j => if j.threshold == aborting.text then j.copy(value = Some(value), passed = false, message = why) else j)
        Verdict(list.forall(_.passed), list.count(!_.passed), list)
      }
      summary.copy(verdict = Some(marked))

  /** The verdict table, for people: a line for the verdict, then one a threshold with its figure's value. */
  def render(v: Verdict): Seq[String] =
    val n = v.thresholds.size
    val head = if v.passed then s"  verdict: passed, $n of $n thresholds held" else s"  verdict: FAILED, ${v.failed} of $n thresholds failed"
    val width = v.thresholds.map(_.threshold.length).maxOption.getOrElse(0)
    head +: v.thresholds.map { j =>
      val value = j.value.fold(j.message.stripPrefix(s"${j.figure}: "))(Measure.of(j.unit).show)
      s"    ${if j.passed then "pass" else "FAIL"}  ${j.threshold.padTo(width, ' ')}  $value"
    }
