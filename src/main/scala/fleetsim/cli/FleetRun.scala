package fleetsim.cli

import fleetsim.controller.Controller
import fleetsim.fleet.Fleet
import fleetsim.metrics.*
import fleetsim.report.{Report, RunInfo, Summary, Timeseries}
import fleetsim.web.Dashboard
import org.apache.pekko.Done
import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem, DispatcherSelector, Props, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout

import java.nio.file.Files
import java.time.Instant
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** One run wired together: the embedded controller (unless pointed elsewhere), the shared metered
  * transport and tunnels, the fleet, a sample every second (to the time-series file, the dashboard
  * and whoever else listens), and summary.json and report.html at the end. The CLI and the
  * end-to-end tests both use it.
  */
final class FleetRun private (
    val settings: RunSettings,
    parts: FleetParts,
    val controller: Option[Controller],
    val controllerUrl: String,
    val dashboard: Option[Dashboard],
    fleet: ActorRef[Fleet.Command],
    exporters: Exporters,
    startedAt: Instant)(using system: ActorSystem[?]):
  private given ExecutionContext = system.executionContext
  val metrics: FleetMetrics = parts.metrics
  private val process = ProcessWatch()
  private val sampler = Sampler(metrics.kinds, () => metrics.snapshot(), process, settings.fleet.devices, settings.transport)
  private val timeseries = Timeseries.create(settings.resultsDir)
  @volatile private var listeners = List.empty[Sample => Unit]
  @volatile private var finishing: Option[Future[Summary]] = None

  private val ticker: Cancellable =
    val io = system.dispatchers.lookup(DispatcherSelector.blocking()) // the file and the console block
    system.scheduler.scheduleAtFixedRate(settings.statusInterval, settings.statusInterval)(() => tick())(using io)

  private def tick(): Unit =
    val sample = sampler.sample()
    timeseries.append(sample)
    dashboard.foreach(_.publish(sample))
    listeners.foreach(_(sample))

  /** Calls `listener` with every sample from now on (the status line, say). */
  def onSample(listener: Sample => Unit): Unit = synchronized { listeners = listeners :+ listener }

  /** Stops the devices sending, waits for the calls in flight to be answered, folds the figures into
    * a summary, writes summary.json and report.html, and stops the devices. Called once per run;
    * later calls get the same summary.
    */
  def finish(stopReason: String): Future[Summary] = synchronized {
    finishing.getOrElse {
      ticker.cancel()
      // Taken before the devices stop, leave their states and close their tunnels.
      val byState = metrics.devicesByState
      val tunnelsUp = metrics.tunnelsUpNow
      given Timeout = Timeout(30.seconds)
      val done = for
        _ <- fleet.ask[Done](Fleet.Quiesce(_))(using summon[Timeout], system.scheduler)
        _ <- drained(Deadline.now + settings.http.requestTimeout + 1.second)
        snapshot = metrics.snapshot()
        _ <- fleet.ask[Done](Fleet.Stop(_))(using summon[Timeout], system.scheduler)
      yield
        val ended = Instant.now
        val info = RunInfo(startedAt.toString, ended.toString, (ended.toEpochMilli - startedAt.toEpochMilli) / 1000.0,
          stopReason, controllerUrl, controller.isDefined, settings.transport, settings.profile.name)
        val summary = Summary.of(info, settings.fleet.devices, byState, Option.when(parts.tunnels.isDefined)(tunnelsUp), snapshot,
          process.sample(), controller.map(_.counts))
        timeseries.close()
        Summary.write(summary, settings.resultsDir)
        Report.write(settings.resultsDir)
        summary
      val closed = for
        summary <- done
        _ <- parts.close()
        _ <- controller.fold(Future.successful(Done))(_.stop())
      yield summary
      finishing = Some(closed)
      closed
    }
  }

  /** Every call sent has been answered or has timed out, so sent = ok + forbidden + failed. */
  private def drained(deadline: Deadline): Future[Done] =
    if metrics.inFlight == 0 || deadline.isOverdue() then Future.successful(Done)
    else after(10.millis)(drained(deadline))

object FleetRun:
  def start(settings: RunSettings)(using system: ActorSystem[SpawnProtocol.Command]): Future[FleetRun] =
    given ExecutionContext = system.executionContext
    Files.createDirectories(settings.resultsDir)
    Files.writeString(settings.resultsDir.resolve(Report.ConfigFile), settings.described)
    val exporters = Exporters(prometheus = settings.dashboard.enabled, statsd = settings.statsd)
    system.whenTerminated.foreach(_ => exporters.close()) // /metrics answers until the very end
    val mqtt = settings.transport == "mqtt"
    val embedded =
      if !settings.embedded then Future.successful(None)
      else Controller.start(settings.controller, ssh = settings.ssh.isDefined, mqtt = mqtt).map(Some(_))
    val dashboard = exporters.prometheus.filter(_ => settings.dashboard.enabled) match
      case Some(prometheus) => Dashboard.start(settings.dashboard, settings.described, prometheus).map(Some(_))
      case None => Future.successful(None)
    for
      controller <- embedded
      board <- dashboard
      // MQTT devices call the broker; the others the controller.
      url = Uri(if mqtt then settings.broker.orElse(controller.flatMap(_.mqtt).map(_.url)).get else settings.controllerUrl.orElse(controller.map(_.url)).get)
      parts = FleetParts(settings, url, controller.flatMap(_.tls).map(_.authority), exporters.registry, settings.fleet.devices)
      _ = controller.foreach(c => exporters.bindController(() => c.counts))
      fleet <- system.ask[ActorRef[Fleet.Command]](SpawnProtocol.Spawn(Fleet(settings.fleet, parts.device), "fleet", Props.empty, _))(using
        Timeout(10.seconds), system.scheduler)
    yield FleetRun(settings, parts, controller, url.toString, board, fleet, exporters, Instant.now)
