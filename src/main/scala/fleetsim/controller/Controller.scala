package fleetsim.controller

import fleetsim.CannotBind
import fleetsim.metrics.ControllerCounts
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.{ConnectionContext, Http}
import org.apache.pekko.http.scaladsl.model.HttpRequest
import org.apache.pekko.stream.scaladsl.Flow
import org.apache.pekko.http.scaladsl.server.Route
import org.apache.pekko.http.scaladsl.settings.ServerSettings

import java.net.InetSocketAddress
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** A running reference controller: protocol v1, the other dialects and the admin API on one HTTP
  * (or, with `tls`, HTTPS) port.
  */
final class Controller private (val registry: Registry, routes: ControllerRoutes, binding: Http.ServerBinding, val ssh: Option[SshGateway],
    val tls: Option[ControllerTls], val mqtt: Option[MqttBroker]):
  def address: InetSocketAddress = binding.localAddress
  def url: String = s"${if tls.isDefined then "https" else "http"}://${address.getHostString}:${address.getPort}"
  def counts: ControllerCounts = routes.counts
  /** Devices of the ap-agent and iot-telemetry dialects that applied the current config. */
  def dialectsUpToDate: Int = routes.dialectsUpToDate
  /** Sets its fault switches, as `PUT /admin/faults` does (docs/faults.md). */
  def inject(faults: Faults): Unit = routes.inject(faults)

  /** New configuration for every device, as `POST /admin/config/bump` makes it (devices hear of it in
    * their next reply) and, with a broker, `POST /admin/config/push` tells it; its number.
    */
  def rollOut(): Long =
    val seq = registry.bumpConfig()
    mqtt.foreach(_.publish(MqttBroker.FleetTopic, MqttBroker.configPush(seq, url)))
    seq

  /** Drops every device's session at once, its broker's connections and its SSH server's tunnels,
    * as `POST /admin/mqtt/drop` and `/admin/ssh/drop` do; how many.
    */
  def dropSessions(): Int = mqtt.fold(0)(_.dropAll()) + ssh.fold(0)(_.drop(1.0))

  /** Stops accepting, and closes open connections and SSH sessions after a short grace period. */
  def stop(): Future[Done] =
    given ExecutionContext = ExecutionContext.parasitic
    val sshStopped = ssh.fold(Future.successful(Done))(_.stop())
    mqtt.foreach(_.stop())
    binding.terminate(hardDeadline = 1.second).flatMap(_ => sshStopped)

object Controller:
  /** Binds the controller, and its SSH server when `ssh` is set, and its MQTT broker when `mqtt` is.
    * The registry is passed in so that a restarted controller can keep it.
    */
  def start(settings: ControllerSettings, registry: Registry = Registry(), ssh: Boolean = false, mqtt: Boolean = false)(using
      system: ActorSystem[?]): Future[Controller] =
    given ExecutionContext = system.executionContext
    val routes = ControllerRoutes(registry, settings)
    val defaults = ServerSettings(system.classicSystem)
    val tls = Option.when(settings.tls)(ControllerTls(settings.stateDir, settings.host, settings.clientCertsRequired))
    val server = defaults
      .withTimeouts(defaults.timeouts.withIdleTimeout(settings.idleTimeout))
      // Pekko's default, 1,024, refused every device past it in per-device fleets: the open-files limit is the real one.
      .withMaxConnections(1 << 20)
      .withParserSettings(defaults.parserSettings.withIncludeSslSessionAttribute(settings.clientCertsRequired))
    val handler = Route.toFunction(routes.route)(using system.classicSystem)
    // Materialized once per connection: so it counts them.
    val connections = Flow.fromMaterializer { (_, _) =>
      registry.countConnection()
      Flow[HttpRequest].mapAsync(server.pipeliningLimit)(handler)
    }
    val at = Http(system.classicSystem).newServerAt(settings.host, settings.port).withSettings(server)
    tls.fold(at)(t => at.enableHttps(ConnectionContext.httpsServer(() => t.engine())))
      .bindFlow(connections)
      .recoverWith(CannotBind.whenBinding(settings.host, settings.port, "http"))
      .flatMap { binding =>
        val gateway =
          if !ssh then Future.successful(None)
          else SshGateway.start(settings, binding.localAddress, registry, Route.toFlow(routes.route)(using system.classicSystem)).map(Some(_))
        gateway.transform {
          case scala.util.Success(g) =>
            routes.gateway = g
            val broker = Option.when(mqtt)(MqttBroker.start(settings.host, settings.mqttPort, registry))
            routes.broker = broker
            scala.util.Success(Controller(registry, routes, binding, g, tls, broker))
          case scala.util.Failure(e) =>
            binding.unbind()
            scala.util.Failure(e)
        }
      }
