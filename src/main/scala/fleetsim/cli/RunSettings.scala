package fleetsim.cli

import com.typesafe.config.{Config, ConfigRenderOptions}
import fleetsim.web.DashboardSettings
import fleetsim.controller.ControllerSettings
import fleetsim.device.DeviceSettings
import fleetsim.fleet.FleetSettings
import fleetsim.profile.{FleetContext, ProfileLoader, ProfiledDevice}
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
  * @param controllerUrl None embeds the reference controller
  * @param described the effective `fleetsim` settings as JSON, secrets left out, for config.json
  */
final case class RunSettings(
    fleet: FleetSettings,
    device: DeviceSettings,
    http: HttpSettings,
    connection: ConnectionMode,
    sourceIps: Option[SourceAddresses],
    tls: TlsSettings,
    ssh: Option[SshSettings],
    profile: ProfiledDevice,
    controller: ControllerSettings,
    controllerUrl: Option[String],
    resultsDir: Path,
    statusInterval: FiniteDuration,
    dashboard: DashboardSettings,
    statsd: Option[(String, Int)],
    described: String):
  require(statusInterval > Duration.Zero, "fleetsim.run.status-interval must be positive")

  /** Connections the fleet may hold open at once. */
  def connections: Int = if connection == ConnectionMode.Shared then http.connectionsFor(fleet.devices) else fleet.devices

  /** "http" or "ssh", as summary.json says it. */
  def transport: String = if ssh.isDefined then "ssh" else "http"

object RunSettings:
  def apply(config: Config): RunSettings =
    val run = config.getConfig("fleetsim.run")
    val explicitDir = run.getString("results-dir")
    val fleet = FleetSettings(config)
    // The command line's transport, else the profile's: the profile is parsed first to know which.
    val parsed = ProfileLoader.parse(config.getString("fleetsim.device-profile"), config)
    val ssh = Option(config.getString("fleetsim.fleet.transport")).filter(_.nonEmpty).orElse(parsed.transport).getOrElse("http") match
      case "http" => None
      case "ssh" => Some(SshSettings(config))
      case other => throw IllegalArgumentException(s"fleetsim.fleet.transport must be http or ssh (got '$other')")
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
      http = HttpSettings(config),
      connection = parsed.connectionMode(ownIdentity),
      sourceIps = sourceIps,
      tls = tls,
      ssh = ssh,
      profile = parsed.compile(FleetContext(fleet, sshKey, config)),
      controller = controller,
      controllerUrl = controllerUrl,
      resultsDir = resultsDir,
      statusInterval = run.finiteDuration("status-interval"),
      dashboard = DashboardSettings(config),
      statsd = Option(config.getString("fleetsim.metrics.statsd")).filter(_.nonEmpty).map(hostPort(_, "fleetsim.metrics.statsd")),
      described = config.getConfig("fleetsim")
        .withoutPath("ssh.password").withoutPath("controller.ssh-password").withoutPath("controller.agent-secret")
        .root.render(ConfigRenderOptions.concise().setFormatted(true)))
