package fleetsim.cli

import fleetsim.controller.Controller
import fleetsim.device.Device
import fleetsim.fleet.Fleet
import fleetsim.metrics.{FleetMetrics, MeteredTransport, ProcessWatch}
import fleetsim.report.{RunInfo, Summary}
import fleetsim.transport.HttpTransport
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem, Props, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout

import java.time.Instant
import java.util.concurrent.ThreadLocalRandom
import java.util.random.RandomGenerator
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** One run wired together: the embedded controller (unless pointed elsewhere), the shared metered
  * transport, the fleet, and the summary at the end. The CLI and the end-to-end tests both use it.
  */
final class FleetRun private (
    val settings: RunSettings,
    val metrics: FleetMetrics,
    val process: ProcessWatch,
    val controller: Option[Controller],
    val controllerUrl: String,
    transport: HttpTransport,
    fleet: ActorRef[Fleet.Command],
    startedAt: Instant)(using system: ActorSystem[?]):
  private given ExecutionContext = system.executionContext
  @volatile private var finishing: Option[Future[Summary]] = None

  /** Stops the devices, waits for their last calls to be answered, and folds the figures into a
    * summary. Called once per run; later calls get the same summary.
    */
  def finish(stopReason: String): Future[Summary] = synchronized {
    finishing.getOrElse {
      val byState = metrics.devicesByState // before the devices stop and leave their states
      val done = for
        _ <- fleet.ask[Done](Fleet.Stop(_))(using Timeout(30.seconds), system.scheduler)
        _ <- drained(Deadline.now + settings.http.requestTimeout + 1.second)
      yield
        val ended = Instant.now
        val info = RunInfo(startedAt.toString, ended.toString, (ended.toEpochMilli - startedAt.toEpochMilli) / 1000.0,
          stopReason, controllerUrl, controller.isDefined, "http")
        Summary.of(info, settings.fleet.devices, byState.values.sum.toInt, byState, metrics.snapshot(), process.sample(), controller.map(_.registry.counts))
      val closed = done.flatMap(summary => transport.close().flatMap(_ => controller.fold(Future.successful(Done))(_.stop())).map(_ => summary))
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
    val embedded = settings.controllerUrl match
      case Some(_) => Future.successful(None)
      case None => Controller.start(settings.controller).map(Some(_))
    for
      controller <- embedded
      url = settings.controllerUrl.orElse(controller.map(_.url)).get
      metrics = FleetMetrics()
      http = HttpTransport(Uri(url), settings.http, settings.fleet.devices)
      transport = MeteredTransport(http, metrics)
      random: RandomGenerator = () => ThreadLocalRandom.current().nextLong()
      fleet <- system.ask[ActorRef[Fleet.Command]](
        SpawnProtocol.Spawn(Fleet(settings.fleet, identity => Device(identity, settings.device, transport, metrics, random)), "fleet", Props.empty, _))(
        using Timeout(10.seconds), system.scheduler)
    yield FleetRun(settings, metrics, ProcessWatch(), controller, url, http, fleet, Instant.now)
