package fleetsim.report

import fleetsim.metrics.Sample

import java.nio.file.Path

/** Where a run's figures go: each second's sample while it runs, then its summary, once. The time
  * series, the dashboard, the status line and the result files are outputs; a verdict or another
  * exporter is one more class, added to the run ([[fleetsim.run.FleetRun.add]]).
  */
trait Output:
  /** A second's figures. One sample at a time, off the devices' threads: it may write a file or the console. */
  def sample(sample: Sample): Unit = ()
  /** The run's summary, after its last sample; outputs finish in the order they were added. */
  def finish(summary: Summary): Unit = ()

/** summary.json and report.html in the run's folder, written at the end (the report reads the time
  * series, so it comes after [[Timeseries]] in the run's outputs).
  */
final class ResultFiles(dir: Path) extends Output:
  override def finish(summary: Summary): Unit =
    Summary.write(summary, dir)
    Report.write(dir)
