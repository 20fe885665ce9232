package fleetsim.report

import fleetsim.metrics.{Sample, TunnelSample}

import java.io.PrintStream
import java.time.format.DateTimeFormatter
import java.time.{Instant, ZoneId}

/** The run on the console: what it runs at the start; then the once-a-second status line (devices
  * per state, replies per second, errors, p99 latency, and the devices' own sessions when they hold
  * any); the summary at the end, with the verdict table when the run has thresholds. On a terminal
  * the status line rewrites itself in place and shows a progress bar while ramping; otherwise it
  * prints plain lines, one per tick, for logs and pipes.
  *
  * @param sessions the sessions' fields, in their transport kind's words ([[fleetsim.run.TransportKind.statusFields]])
  */
final class ConsoleOutput(out: PrintStream, terminal: Boolean, sessions: TunnelSample => String) extends Output:
  private val clock = DateTimeFormatter.ofPattern("HH:mm:ss").withZone(ZoneId.systemDefault())
  private var errors = 0L

  override def sample(s: Sample): Unit = synchronized {
    val newErrors = s.errors - errors
    errors = s.errors
    // A second without replies has no latency: `-`, not 0.0 ms.
    val p99 = s.latencyMs.values.map(_.p99).maxOption.filter(_ => s.repliesPerS > 0).fold("-")(ms => f"$ms%.1f ms")
    val states = s.devices.filter(_._2 > 0).map((state, n) => s"$state $n").mkString(" ")
    val ramp = if terminal && s.running < s.target then progress(s.running, s.target) + " " else ""
    val own = s.tunnels.fold("")(t => " | " + sessions(t))
    val line = f"${clock.format(Instant.ofEpochMilli(s.t))} $ramp${s.running}/${s.target} devices | $states | " +
      f"${s.repliesPerS}%.0f msg/s | errors +$newErrors ($errors total) | p99 $p99$own"
    if terminal then out.print("\r" + line + "\u001b[K") else out.println(line)
    out.flush()
  }

  @volatile private var resultsDir = "the results folder"

  override def start(run: RunStart): Unit =
    resultsDir = run.resultsDir.toString
    run.servers.foreach(server => out.println(s"fleetsim: $server"))
    run.scenario match
      case Some((file, description)) =>
        out.println(s"fleetsim: scenario $file${if description.isEmpty then "" else s": $description"}; seed ${run.seed} (--seed ${run.seed} repeats its choices)")
        out.println(s"fleetsim: up to ${run.devices} ${run.transport} devices against ${run.against}, for ${run.duration.fold("ever")(_.toCoarsest.toString)}" +
          s"; results in ${run.resultsDir}")
      case None =>
        out.println(s"fleetsim: ${run.devices} ${run.transport} devices against ${run.against}, ramping at ${
            BigDecimal(run.rampRate).bigDecimal.stripTrailingZeros.toPlainString}/s, " +
          run.duration.fold("until Ctrl-C")(d => s"for ${d.toCoarsest}") + s"; seed ${run.seed}; results in ${run.resultsDir}")

  override def finish(summary: Summary): Unit = synchronized {
    if terminal then out.println() // ends the in-place line
    out.println(Summary.render(summary))
    val files = Seq(Summary.FileName, Report.FileName) ++ summary.verdict.map(_ => VerdictFile.FileName)
    out.println(s"fleetsim: ${files.init.mkString(", ")} and ${files.last} written to $resultsDir")
    out.flush()
  }

  private def progress(running: Long, target: Int): String =
    val width = 20
    val filled = (running * width / target.max(1)).toInt.min(width)
    "[" + "#" * filled + "." * (width - filled) + "]"

object ConsoleOutput:
  /** A second's p99 of handshakes or connects for people: `-` in a second without any (none takes
    * under a millisecond), not 0 ms.
    */
  def ms(p99: Double): String = if p99 > 0 then f"$p99%.0f ms" else "-"
