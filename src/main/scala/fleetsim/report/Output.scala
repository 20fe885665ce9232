package fleetsim.report

import fleetsim.metrics.Sample

import java.nio.file.Path
import scala.concurrent.duration.FiniteDuration

/** Where a run's figures go: what the run is at its start, each second's sample while it runs,
  * then its summary, once. The console, the time series, the dashboard, summary.json and
  * report.html are outputs, each one class; a verdict or another exporter is one more, registered by
  * name in [[fleetsim.run.Outputs]].
  */
trait Output:
  /** The run, once its devices are placed and before its first sample. */
  def start(run: RunStart): Unit = ()
  /** A second's figures. One sample at a time, off the devices' threads: it may write a file or the console. */
  def sample(sample: Sample): Unit = ()
  /** The run's summary, after its last sample; outputs finish in the order they are registered. */
  def finish(summary: Summary): Unit = ()

/** What a run is, as its outputs first see it.
  *
  * @param against the controller's (or broker's) URL as shown: credentials redacted
  * @param servers the servers the run started (dashboard, reference controller), a line each
  */
/** What a run is, as it starts.
  *
  * @param scenario the scenario it plays: its file and what it does
  * @param seed what its random choices are drawn from (given, or picked)
  */
final case class RunStart(devices: Int, transport: String, against: String, rampRate: Double, duration: Option[FiniteDuration], resultsDir: Path,
    servers: Seq[String], scenario: Option[(String, String)] = None, seed: Long = 0)

/** summary.json in the run's folder, written at the end. */
final class SummaryFile(dir: Path) extends Output:
  override def finish(summary: Summary): Unit = Summary.write(summary, dir)

/** report.html in the run's folder, written at the end from the time series and summary.json, so it
  * finishes after both.
  */
final class ReportPage(dir: Path) extends Output:
  override def finish(summary: Summary): Unit = Report.write(dir)
