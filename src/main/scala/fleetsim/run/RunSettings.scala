package fleetsim.run

import com.typesafe.config.{Config, ConfigRenderOptions}
import fleetsim.web.DashboardSettings
import fleetsim.controller.ControllerSettings
import fleetsim.device.DeviceSettings
import fleetsim.fleet.FleetSettings
import fleetsim.profile.{CompiledProfile, FleetContext, ProfileLoader}
import fleetsim.tls.TlsSettings
import fleetsim.transport.{ConnectionMode, HttpSettings, SourceAddresses}
import fleetsim.transport.ssh.SshSettings
import org.apache.sshd.common.config.keys.PublicKeyEntry

import java.nio.file.{Path, Paths}
import java.time.LocalDateTime
import java.time.format.DateTimeFormatter
import fleetsim.{finiteDuration, hostPort}
import scala.concurrent.duration.*

/** Everything a run needs, read from the layered config once.
  *
  * @param profile the device profile, compiled for this fleet
  * @param transport http, ssh or mqtt, as summary.json says it
  * @param broker the MQTT broker's URL (mqtt:// or mqtts://); None embeds one with the reference controller
  * @param maxConnects MQTT connects in progress at once in this process
  * @param controllerUrl None embeds the reference controller
  * @param described the effective `fleetsim` settings as JSON, secrets left out (passwords, URLs' credentials), for config.json
  */
final case class RunSettings(
    fleet: FleetSettings,
    device: DeviceSettings,
    http: HttpSettings,
    connection: ConnectionMode,
    sourceIps: Option[SourceAddresses],
    tls: TlsSettings,
    ssh: Option[SshSettings],
    transport: String,
    broker: Option[String],
    maxConnects: Int,
    profile: CompiledProfile,
    controller: ControllerSettings,
    controllerUrl: Option[String],
    resultsDir: Path,
    statusInterval: FiniteDuration,
    dashboard: DashboardSettings,
    statsd: Option[(String, Int)],
    described: String):
  require(statusInterval > Duration.Zero, "fleetsim.run.status-interval must be positive")
  require(maxConnects >= 1, "fleetsim.mqtt.max-connects must be at least 1")

  /** HTTP connections the fleet may hold open at once. */
  /** How long a stopping run waits for the calls in flight: the longest a call may wait, its own timeout or the run's, and a second. */
  def drainWait: FiniteDuration = http.requestTimeout.max(profile.longestTimeout.nanos) + 1.second

  def connections: Int =
    if transport == "mqtt" then 0
    else if connection == ConnectionMode.Shared then http.connectionsFor(fleet.devices)
    else fleet.devices

  /** Each device's own session, held open: an SSH tunnel or an MQTT connection. */
  def sessions: Int = if transport == "http" then 0 else fleet.devices

  /** The embedded controller (and broker) live in this process: every socket has both ends here. */
  def embedded: Boolean = if transport == "mqtt" then broker.isEmpty else controllerUrl.isEmpty

object RunSettings:
  def apply(config: Config): RunSettings =
    val run = config.getConfig("fleetsim.run")
    val explicitDir = run.getString("results-dir")
    val fleet = FleetSettings(config)
    // The command line's transport, else the profile's: the profile is parsed first to know which.
    val asked = Option(config.getString("fleetsim.fleet.transport")).filter(_.nonEmpty)
    if asked.exists(t => !Set("http", "ssh", "mqtt")(t)) then
      throw IllegalArgumentException(s"fleetsim.fleet.transport must be http, ssh or mqtt (got '${asked.get}')")
    val profileName = Option(config.getString("fleetsim.device-profile")).filter(_.nonEmpty)
      .getOrElse(ProfileLoader.defaultFor(asked.getOrElse("http")))
    val parsed = ProfileLoader.parse(profileName, config)
    val transport = parsed.transportFor(asked)
    val ssh = Option.when(transport == "ssh")(SshSettings(config))
    val broker = Option(config.getString("fleetsim.mqtt.broker")).filter(_.nonEmpty).map(_.stripSuffix("/"))
    if broker.isDefined && transport != "mqtt" then throw IllegalArgumentException("--broker is for MQTT devices: add --transport mqtt")
    val sourceIps = Option(config.getString("fleetsim.http.source-ips")).filter(_.nonEmpty).map { text =>
      SourceAddresses.parse(text).fold(problem => throw IllegalArgumentException(s"--source-ips: $problem"), addresses => addresses)
    }
    val tls = TlsSettings(config)
    val controller = ControllerSettings(config)
    val controllerUrl = Option(config.getString("fleetsim.controller.url")).filter(_.nonEmpty).map(_.stripSuffix("/"))
    val ownIdentity = Seq(
      Option.when(sourceIps.isDefined)("address (--source-ips)"),
      Option.when(tls.clientCertificates)("certificate (--client-ca or --client-certs)"),
      Option.when(controllerUrl.isEmpty && controller.clientCertsRequired)("certificate (--client-certs-required)")).flatten.headOption
    val sshKey = ssh.map(s => PublicKeyEntry.toString(s.keys.getPublic))
    val resultsDir =
      if explicitDir.nonEmpty then Paths.get(explicitDir)
      else Paths.get(run.getString("results-root"), LocalDateTime.now.format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")))
    RunSettings(
      fleet = fleet,
      device = DeviceSettings(config),
      http = { val http = HttpSettings(config); http.copy(limits = parsed.limits, connectTimeout = parsed.connectTimeout.getOrElse(http.connectTimeout)) },
      connection = parsed.connectionMode(ownIdentity),
      sourceIps = sourceIps,
      tls = tls,
      ssh = ssh,
      transport = transport,
      broker = broker,
      maxConnects = config.getInt("fleetsim.mqtt.max-connects"),
      profile = parsed.compile(FleetContext(fleet, sshKey, config)),
      controller = controller,
      controllerUrl = controllerUrl,
      resultsDir = resultsDir,
      statusInterval = run.finiteDuration("status-interval"),
      dashboard = DashboardSettings(config),
      statsd = Option(config.getString("fleetsim.metrics.statsd")).filter(_.nonEmpty).map(hostPort(_, "fleetsim.metrics.statsd")),
      described = fleetsim.Redact.urls(config.getConfig("fleetsim")
        .withoutPath("ssh.password").withoutPath("controller.ssh-password").withoutPath("controller.agent-secret")
        .root.render(ConfigRenderOptions.concise().setFormatted(true))))
