package fleetsim.run

import com.typesafe.config.Config
import fleetsim.control.RunAction
import fleetsim.controller.{Controller, ControllerSettings}
import fleetsim.device.DeviceState
import fleetsim.fleet.DescriptorBudget
import fleetsim.metrics.{MetricsSnapshot, TunnelSample}
import fleetsim.profile.{MqttSection, ProfileSection}
import fleetsim.report.{MqttSummary, Summary}
import fleetsim.tls.{FleetTls, MqttTls}
import fleetsim.transport.mqtt.MqttSessions
import org.apache.pekko.actor.typed.ActorSystem

import scala.concurrent.Future

/** Devices that publish to a broker over an MQTT connection each (docs/adr/0006): the connection
  * is their join, and a lost one sends them to join again. They call no controller; a call that
  * names a URL goes there over HTTP(S).
  *
  * @param broker the broker's URL (mqtt:// or mqtts://); None embeds one with the reference controller
  * @param maxConnects connects in progress at once in this process
  */
final class MqttKind(val broker: Option[String], val maxConnects: Int) extends TransportKind:
  def entry: TransportKinds.Entry = MqttKind

  override def server: DescriptorBudget.Server =
    DescriptorBudget.Server("broker", "run a broker in its own process (./fleetsim controller --mqtt)", "--broker")
  override def serverKey: String = "mqtt.broker"
  override def serverUrl(settings: RunSettings): Option[String] = broker
  override def serverTls(settings: RunSettings): Boolean = broker.exists(_.startsWith("mqtts://"))
  override def embed(settings: ControllerSettings)(using ActorSystem[?]): Future[Controller] = Controller.start(settings, mqtt = true)
  override def embeddedUrl(controller: Controller): Option[String] = controller.mqtt.map(_.url)

  override def sessions: Option[String] = Some("MQTT connections")
  /** No HTTP connections of the fleet's own: a call to a URL opens one to its server as it goes. */
  override def connections(settings: RunSettings): Int = 0
  /** Measured 9-10 KB at 10,000-19,000; TLS 57 KB at 1,000, fixed costs included. */
  def heapPerDevice(tls: Boolean, ownConnection: Boolean): Long = if tls then 40_000 else 12_000

  def parts(made: FleetParts.Making): TransportKind.Parts =
    import made.given
    val settings = made.settings
    val port = if made.url.authority.port != 0 then made.url.authority.port else if made.url.scheme == "mqtts" then 8883 else 1883
    val sessions = settings.profile.mqtt.map { options =>
      val tls = Option.when(made.url.scheme == "mqtts")(MqttTls(FleetTls.trust(settings.tls, None), FleetTls.certificates(settings.tls, None),
        settings.profile.identityName, settings.tls.protocols))
      MqttSessions(made.host, port, options, tls.map(t => t.forDevice), settings.sourceIps, settings.http.connectTimeout,
        settings.http.requestTimeout, made.ioLoops)
    }
    // Devices run on their connections' event loops (docs/adr/0009).
    TransportKind.Parts(made.byUrl, sessions.map(made.gated(_, maxConnects)), sessions.map(_.io))

  override def statusFields(t: TunnelSample): String =
    f"connections ${t.up} up, ${t.opening} connecting, ${t.retunnels} reconnects, connect p99 ${fleetsim.report.ConsoleOutput.ms(t.handshakeP99Ms)}"

  /** Connecting is Discovering (the connection is the join), and a reopened session a reconnect. */
  override def sessionSample(s: MetricsSnapshot, rate: (MetricsSnapshot => Long) => Double): Option[TunnelSample] =
    Some(TunnelSample(s.tunnels.up, s.byState(DeviceState.Discovering), s.reconnects, rate(_.reconnects), s.tunnels.recent.latency.p99, mqtt = true))

  override def withSessions(summary: Summary, metrics: MetricsSnapshot, upAtEnd: Long): Summary =
    val t = metrics.tunnels
    summary.copy(mqtt = Some(MqttSummary(t.opened, upAtEnd, metrics.reconnects, Summary.failures(t.failures), Summary.latencySummary(t.overall))))

object MqttKind extends TransportKinds.Entry("mqtt", defaultProfile = "iot-mqtt", help = "a connection per device to a broker"):
  override def sessionDrop: Option[RunAction] = Some(RunAction.BrokerDrop)
  def profileSection: ProfileSection = MqttSection
  private def broker(config: Config) = Option(config.getString("fleetsim.mqtt.broker")).filter(_.nonEmpty).map(_.stripSuffix("/"))
  private def maxConnects(config: Config) = config.getInt("fleetsim.mqtt.max-connects")

  def read(config: Config): TransportKind = MqttKind(broker(config), maxConnects(config))

  /** Whatever the run's kind: a broker named for devices that call none is a mistake. */
  override def check(config: Config, chosen: Boolean): Unit =
    if !chosen && broker(config).isDefined then throw IllegalArgumentException("--broker is for MQTT devices: add --transport mqtt")
    require(maxConnects(config) >= 1, "fleetsim.mqtt.max-connects must be at least 1")
