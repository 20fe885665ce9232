package fleetsim.run

import fleetsim.control.RunControl
import fleetsim.report.{ConsoleOutput, Output, ReportPage, SummaryFile, Timeseries, VerdictFile}
import fleetsim.web.Dashboard
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry
import org.apache.pekko.actor.typed.ActorSystem

import java.io.PrintStream
import scala.collection.immutable.ListMap
import scala.concurrent.Future

/** Every output a run can have, by name, in the order each is given the run's start, its samples
  * and its summary: the time series before the report that reads it, summary.json before the report
  * too, verdict.xml (a run with thresholds), the console last so that it prints once the files are
  * written. A new output is one class and one line here; an output that fails is named in the log,
  * and the others carry on.
  */
object Outputs:
  /** What outputs are made from.
    *
    * @param prometheus the registry `/metrics` scrapes, when the dashboard is on
    * @param control the run, once its devices are placed
    * @param console where the console output prints; none for a run without one (tests)
    */
  final case class Wiring(settings: RunSettings, prometheus: Option[PrometheusMeterRegistry], control: Future[RunControl],
      console: Option[PrintStream])(using val system: ActorSystem[?])

  /** Makes a run's output, or none when the run's settings leave it off. */
  type Maker = Wiring => Future[Option[Output]]

  private def always(make: Wiring => Output): Maker = w => Future.successful(Some(make(w)))

  val byName: ListMap[String, Maker] = ListMap(
    "timeseries" -> always(w => Timeseries.create(w.settings.resultsDir)),
    "dashboard" -> { w =>
      given ActorSystem[?] = w.system
      w.prometheus.fold(Future.successful(None)) { prometheus => // there is one only when the dashboard is on
        Dashboard.start(w.settings.dashboard, w.settings.described, prometheus, w.control).map(Some(_))(using w.system.executionContext)
      }
    },
    "summary" -> always(w => SummaryFile(w.settings.resultsDir)),
    "report" -> always(w => ReportPage(w.settings.resultsDir)),
    "verdict" -> (w => Future.successful(Option.when(w.settings.thresholds.nonEmpty)(VerdictFile(w.settings.resultsDir)))),
    "console" -> (w => Future.successful(w.console.map(ConsoleOutput(_, terminal = System.console() != null, w.settings.transport.statusFields)))))

  /** The run's outputs, by name, in order. */
  def make(wiring: Wiring): Future[ListMap[String, Output]] =
    given scala.concurrent.ExecutionContext = wiring.system.executionContext
    Future.traverse(byName.toSeq)((name, make) => make(wiring).map(_.map(name -> _))).map(made => ListMap.from(made.flatten))
