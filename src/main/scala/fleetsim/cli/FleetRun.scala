package fleetsim.cli

import fleetsim.controller.Controller
import fleetsim.device.Device
import fleetsim.fleet.Fleet
import fleetsim.metrics.{FleetMetrics, MeteredTransport, MeteredTunnels, ProcessWatch}
import fleetsim.protocol.Identity
import fleetsim.report.{RunInfo, Summary}
import fleetsim.transport.{HttpTransport, Tunnels}
import fleetsim.transport.ssh.SshTunnels
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem, Props, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout
import org.apache.sshd.common.util.net.SshdSocketAddress

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
    tunnels: Option[Tunnels],
    fleet: ActorRef[Fleet.Command],
    startedAt: Instant)(using system: ActorSystem[?]):
  private given ExecutionContext = system.executionContext
  @volatile private var finishing: Option[Future[Summary]] = None

  /** Stops the devices, waits for their last calls to be answered, and folds the figures into a
    * summary. Called once per run; later calls get the same summary.
    */
  def finish(stopReason: String): Future[Summary] = synchronized {
    finishing.getOrElse {
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
          stopReason, controllerUrl, controller.isDefined, settings.transport)
        Summary.of(info, settings.fleet.devices, byState, Option.when(tunnels.isDefined)(tunnelsUp), snapshot, process.sample(),
          controller.map(_.counts))
      val closed = for
        summary <- done
        _ <- tunnels.fold(Future.successful(Done))(_.close())
        _ <- transport.close()
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
    val embedded = settings.controllerUrl match
      case Some(_) => Future.successful(None)
      case None => Controller.start(settings.controller, ssh = settings.ssh.isDefined).map(Some(_))
    for
      controller <- embedded
      url = Uri(settings.controllerUrl.orElse(controller.map(_.url)).get)
      metrics = FleetMetrics()
      http = HttpTransport(url, settings.http, settings.fleet.devices)
      transport = MeteredTransport(http, metrics)
      tunnels = settings.ssh.map { ssh =>
        val (host, port) = ssh.target.getOrElse(url.authority.host.address -> url.effectivePort)
        MeteredTunnels(SshTunnels(ssh, SshdSocketAddress(host, port), settings.http.requestTimeout), metrics)
      }
      random: RandomGenerator = () => ThreadLocalRandom.current().nextLong()
      device = (identity: Identity) => Device(identity, settings.device, transport, tunnels, metrics, random)
      fleet <- system.ask[ActorRef[Fleet.Command]](SpawnProtocol.Spawn(Fleet(settings.fleet, device), "fleet", Props.empty, _))(using
        Timeout(10.seconds), system.scheduler)
    yield FleetRun(settings, metrics, ProcessWatch(), controller, url.toString, http, tunnels, fleet, Instant.now)
