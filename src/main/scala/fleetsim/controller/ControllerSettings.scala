package fleetsim.controller

import com.typesafe.config.Config

import fleetsim.finiteDuration
import fleetsim.transport.ssh.SshEndpoint
import java.nio.file.{Path, Paths}
import scala.concurrent.duration.*

/** The reference controller's settings; the intervals are what it hands devices at join. */
final case class ControllerSettings(
    host: String,
    port: Int,
    heartbeatInterval: FiniteDuration,
    statsInterval: FiniteDuration,
    configBytes: Int,
    idleTimeout: FiniteDuration,
    sshPort: Int,
    sshIdleTimeout: FiniteDuration,
    sshPassword: Option[String],
    stateDir: Path,
    agentSecret: String,
    agentKeyLifetime: FiniteDuration,
    iotTokens: Option[Set[String]],
    tls: Boolean,
    clientCertsRequired: Boolean,
    mqttPort: Int = 0,
    sshGateways: Seq[SshEndpoint] = Nil):
  require(port >= 0 && port <= 65535, "the controller port must be between 0 and 65535")
  require(heartbeatInterval >= 1.second, "the heartbeat interval must be at least 1s")
  require(statsInterval >= 1.second, "the stats interval must be at least 1s")
  require(configBytes >= 0, "fleetsim.controller.config-size must not be negative")
  require(idleTimeout > Duration.Zero, "fleetsim.controller.idle-timeout must be positive")
  require(sshPort >= 0 && sshPort <= 65535, "the controller's SSH port must be between 0 and 65535")
  require(mqttPort >= 0 && mqttPort <= 65535, "the controller's MQTT port must be between 0 and 65535")
  require(sshIdleTimeout > Duration.Zero, "fleetsim.controller.ssh-idle-timeout must be positive")

  require(!clientCertsRequired || tls, "--client-certs-required needs --tls: client certificates travel in TLS")
  require(agentKeyLifetime >= Duration.Zero, "fleetsim.controller.agent-key-lifetime must not be negative")

  override def toString: String = s"ControllerSettings($host:$port, ssh port $sshPort, state in $stateDir)" // no password, no secret

object ControllerSettings:
  def apply(config: Config): ControllerSettings =
    val c = config.getConfig("fleetsim.controller")
    ControllerSettings(
      host = c.getString("host"),
      port = c.getInt("port"),
      heartbeatInterval = c.finiteDuration("heartbeat-interval"),
      statsInterval = c.finiteDuration("stats-interval"),
      configBytes = c.getBytes("config-size").toInt,
      idleTimeout = c.finiteDuration("idle-timeout"),
      sshPort = c.getInt("ssh-port"),
      sshIdleTimeout = c.finiteDuration("ssh-idle-timeout"),
      sshPassword = Option(c.getString("ssh-password")).filter(_.nonEmpty),
      stateDir = Paths.get(c.getString("state-dir")),
      agentSecret = c.getString("agent-secret"),
      agentKeyLifetime = c.finiteDuration("agent-key-lifetime"),
      iotTokens = Option(c.getString("iot-tokens")).filter(_.nonEmpty).map(file => tokens(Paths.get(file))),
      tls = c.getBoolean("tls"),
      clientCertsRequired = c.getBoolean("client-certs-required"),
      mqttPort = c.getInt("mqtt-port"),
      sshGateways = fleetsim.hostPorts(c.getString("ssh-gateways"), "--ssh-gateways").map(SshEndpoint.apply))

  /** The tokens of a CSV with a header: the column named token, or the first. */
  private def tokens(file: Path): Set[String] =
    val csv = fleetsim.Csv.read(file).fold(problem => throw IllegalArgumentException(s"fleetsim.controller.iot-tokens: $problem"), identity)
    val column = csv.columns.indexOf("token").max(0)
    csv.rows.map(_(column).trim).toSet
