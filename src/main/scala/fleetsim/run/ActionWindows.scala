package fleetsim.run

import fleetsim.metrics.{MetricsSnapshot, Sample}
import fleetsim.report.ActionWindow

import scala.collection.mutable

/** What the controller went through while each action lasted: from the action's start until its
  * span is over and every device it cut is back (or the run ends), second by second from the run's
  * samples — the joins (or, for devices that join by opening a session, the connects) a second at
  * the peak, the errors, and the worst second's lateness. Fed one second at a time, by one caller.
  *
  * @param joins the fleet's joins so far in a snapshot: its join kind's ok replies, or its sessions opened
  */
final class ActionWindows(joins: MetricsSnapshot => Long):
  private final class Open(val number: Int, val until: Double, val reached: Long, val startErrors: Long):
    var peak = 0.0
    var errors = 0L
    var worstLateness = 0.0
    var seconds = 0.0
    var closed = false
    def window: ActionWindow = ActionWindow(seconds, peak, errors, worstLateness)

  private val windows = mutable.LinkedHashMap.empty[Int, Open]
  private var last: Option[(MetricsSnapshot, Double)] = None

  /** Action `number` started now, reaching `reached` devices, and lasts `forS` at least. */
  def open(number: Int, atS: Double, forS: Double, reached: Long): Unit = synchronized {
    windows(number) = Open(number, atS + forS, reached, last.fold(0L)((s, _) => errorsOf(s)))
  }

  /** A second of the run: its snapshot and sample. A window closes once its span is over and every
    * device its action cut is back.
    */
  def second(snapshot: MetricsSnapshot, sample: Sample): Unit = synchronized {
    val joinsNow = joins(snapshot)
    val (joinsBefore, before) = last.fold((joinsNow, sample.elapsedS - 1))((s, t) => (joins(s), t))
    val elapsed = (sample.elapsedS - before).max(1e-3)
    val lateness = sample.latenessMs.collect { case (k, l) if sample.rates.get(k).exists(_.sent > 0) => l.p99 }.maxOption.getOrElse(0.0)
    for w <- windows.values if !w.closed do
      w.peak = w.peak.max((joinsNow - joinsBefore) / elapsed)
      w.errors = errorsOf(snapshot) - w.startErrors
      w.worstLateness = w.worstLateness.max(lateness)
      w.seconds += elapsed
      // Back: every device it cut timed its recovery. One that reached none (a fault, a call) is back
      // at once; one that did waits for its devices to count the cut, which a drop's do only once it
      // drops them (its window closed a second in, before its reconnects, when the sample came first).
      val back = w.reached == 0 || snapshot.actions.get(w.number).exists(a => a.cut > 0 && a.recovery.count >= a.cut)
      if sample.elapsedS >= w.until && back then w.closed = true
    last = Some((snapshot, sample.elapsedS))
  }

  /** Action `number`'s window as it is: closed, or open until the run's end. */
  def of(number: Int): Option[ActionWindow] = synchronized(windows.get(number).map(_.window))

  private def errorsOf(s: MetricsSnapshot): Long = s.byKind.values.map(k => k.forbidden + k.failed).sum + s.tunnels.failures.values.sum
