package fleetsim.run

import fleetsim.device.{Device, DeviceDispatcher, TimingWheel}
import fleetsim.metrics.{FleetMetrics, MeteredTransport, MeteredTunnels}
import fleetsim.tls.{CertificateAuthority, FleetTls, MqttTls}
import fleetsim.transport.mqtt.MqttSessions
import fleetsim.transport.ssh.SshTunnels
import fleetsim.transport.{Dialer, GatedTunnels, HeldBack, HttpTransport, Transport, Tunnels, UrlTransport}
import io.micrometer.core.instrument.MeterRegistry
import org.apache.pekko.Done
import org.apache.pekko.actor.Props
import org.apache.pekko.actor.typed.{ActorSystem, DispatcherSelector}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.sshd.common.util.net.SshdSocketAddress

import java.util.concurrent.ThreadLocalRandom
import java.util.random.RandomGenerator
import scala.concurrent.{ExecutionContext, Future}

/** What one process's devices share, made once from the run's settings: their metrics, the metered
  * transport, their SSH tunnels or MQTT sessions, and the timing wheel; `device(i)` makes device i.
  * A run in one process makes one; so does each node of a cluster for its share of the fleet.
  */
final class FleetParts private (val metrics: FleetMetrics, http: Transport, val tunnels: Option[Tunnels], wheel: TimingWheel, shared: Device.Shared):
  def device(i: Int): Props = Device.props(i, shared)

  /** After the devices have stopped: closes their sessions, connections and the wheel. */
  def close()(using ExecutionContext): Future[Done] =
    wheel.close()
    for
      _ <- tunnels.fold(Future.successful(Done))(_.close())
      _ <- http.close()
    yield Done

object FleetParts:
  /** @param url the controller's (or, for MQTT, the broker's) URL
    * @param embeddedCa the embedded controller's certificate authority, when it speaks TLS
    * @param devices how many of the fleet's devices this process runs
    * @param holding on a cluster node: whether its devices are held back ([[HeldBack]])
    */
  def apply(settings: RunSettings, url: Uri, embeddedCa: Option[CertificateAuthority], registry: MeterRegistry, devices: Int,
      holding: Option[() => Boolean] = None)(using system: ActorSystem[?]): FleetParts =
    given ExecutionContext = system.executionContext
    val metrics = FleetMetrics(settings.profile.kinds, registry)
    val host = url.authority.host.address
    val port = if url.authority.port != 0 then url.authority.port else url.scheme match
      case "mqtts" => 8883
      case "mqtt" => 1883
      case _ => url.effectivePort
    /** HTTP(S) to one server: the controller; for MQTT devices, a server a call names by its URL. */
    def httpTo(scheme: String, host: String, port: Int, clientCa: Option[CertificateAuthority]): Transport =
      val tls = Option.when(scheme == "https") {
        FleetTls(host, port, FleetTls.trust(settings.tls, embeddedCa.map(_.certificate)), FleetTls.certificates(settings.tls, clientCa),
          settings.profile.identityName, settings.tls.protocols)
      }
      HttpTransport(host, port, Dialer(host, port, settings.http, tls, settings.sourceIps), settings.connection, settings.http, devices)
    val direct: Transport =
      if settings.transport == "mqtt" then UrlTransport(httpTo(_, _, _, None), system.dispatchers.lookup(DispatcherSelector.blocking()))
      else httpTo(url.scheme, host, port, embeddedCa.filter(_ => settings.controller.clientCertsRequired))
    /** Sessions as the devices see them: metered, held back on a held node, and `atOnce` opening at a time. */
    def gated(t: Tunnels, atOnce: Int) = GatedTunnels(MeteredTunnels(holding.fold(t)(HeldBack.tunnels(t, _)), metrics), atOnce)
    val sshTunnels = settings.ssh.map { ssh =>
      val (sshHost, sshPort) = ssh.target.getOrElse(host -> url.effectivePort)
      gated(SshTunnels(ssh, SshdSocketAddress(sshHost, sshPort), settings.http), ssh.maxHandshakes)
    }
    val mqttSessions = settings.profile.mqtt.filter(_ => settings.transport == "mqtt").map { options =>
      val mqttTls = Option.when(url.scheme == "mqtts")(MqttTls(FleetTls.trust(settings.tls, None), FleetTls.certificates(settings.tls, None),
        settings.profile.identityName, settings.tls.protocols))
      MqttSessions(host, port, options, mqttTls.map(t => t.forDevice), settings.sourceIps, settings.http.connectTimeout,
        settings.http.requestTimeout, devices)
    }
    val http = holding.fold(direct)(HeldBack.transport(direct, _))
    val tunnels = sshTunnels.orElse(mqttSessions.map(gated(_, settings.maxConnects)))
    val random: RandomGenerator = () => ThreadLocalRandom.current().nextLong()
    // MQTT devices run, and their wheels tick, on their sessions' event loops (bench/history/2026-11-23-mqtt-cpu-event-loops.md).
    val io = mqttSessions.map(_.io)
    val wheel = TimingWheel(on = io)
    val dispatchers = io.fold(IndexedSeq.empty)(DeviceDispatcher.register(system.classicSystem, _))
    new FleetParts(metrics, http, tunnels, wheel,
      Device.Shared(settings.profile, settings.device, MeteredTransport(http, metrics), tunnels, metrics, wheel, random, dispatchers = dispatchers))
