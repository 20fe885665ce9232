package fleetsim.controller

import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.Http
import org.apache.pekko.http.scaladsl.settings.ServerSettings

import java.net.{BindException, InetSocketAddress}
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** A running reference controller: protocol v1 and the admin API on one HTTP port. */
final class Controller private (val registry: Registry, routes: ControllerRoutes, binding: Http.ServerBinding):
  def address: InetSocketAddress = binding.localAddress
  def url: String = s"http://${address.getHostString}:${address.getPort}"
  def faults: Faults = routes.currentFaults
  def setFaults(faults: Faults): Unit = routes.setFaults(faults)

  /** Stops accepting, and closes open connections after a short grace period. */
  def stop(): Future[Done] =
    binding.terminate(hardDeadline = 1.second).map(_ => Done)(using ExecutionContext.parasitic)

object Controller:
  /** The port asked for is taken: say which and how to choose another. */
  final class PortInUse(val port: Int) extends Exception(s"port $port is already in use")

  /** Binds the controller. The registry is passed in so that a restarted controller can keep it. */
  def start(settings: ControllerSettings, registry: Registry = Registry())(using system: ActorSystem[?]): Future[Controller] =
    given ExecutionContext = system.executionContext
    val routes = ControllerRoutes(registry, settings)
    val defaults = ServerSettings(system.classicSystem)
    val server = defaults.withTimeouts(defaults.timeouts.withIdleTimeout(settings.idleTimeout))
    Http(system.classicSystem)
      .newServerAt(settings.host, settings.port)
      .withSettings(server)
      .bind(routes.route)
      .map(binding => Controller(registry, routes, binding))
      .recoverWith {
        case e: BindException => Future.failed(PortInUse(settings.port))
        case e if e.getCause.isInstanceOf[BindException] => Future.failed(PortInUse(settings.port))
      }
