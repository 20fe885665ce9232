package fleetsim.run

import com.typesafe.config.{Config, ConfigRenderOptions}
import fleetsim.web.DashboardSettings
import fleetsim.controller.ControllerSettings
import fleetsim.device.DeviceSettings
import fleetsim.fleet.FleetSettings
import fleetsim.profile.{CompiledProfile, FleetContext, ProfileLoader}
import fleetsim.report.{Figures, Threshold}
import fleetsim.scenario.{Scenario, Timeline}
import fleetsim.tls.TlsSettings
import fleetsim.transport.{ConnectionMode, HttpSettings, SourceAddresses}

import java.nio.file.{Path, Paths}
import java.time.LocalDateTime
import java.time.format.DateTimeFormatter
import fleetsim.{finiteDuration, hostPort}
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** Everything a run needs, read from the layered config once.
  *
  * @param profile the device profile, compiled for this fleet
  * @param transport how the devices carry their calls, with that kind's own settings
  * @param controllerUrl None embeds the reference controller
  * @param thresholds what the run must pass, judged at its end on its summary's figures (exit code 3 when one fails)
  * @param scenario what the run plays ([[fleetsim.scenario.ScenarioDriver]]), with its timeline
  * @param seed what the run's random choices are drawn from: the one asked for, else one picked
  * @param described the effective `fleetsim` settings as JSON, secrets left out (passwords, URLs' credentials), for config.json
  */
final case class RunSettings(
    fleet: FleetSettings,
    device: DeviceSettings,
    http: HttpSettings,
    connection: ConnectionMode,
    sourceIps: Option[SourceAddresses],
    tls: TlsSettings,
    transport: TransportKind,
    profile: CompiledProfile,
    controller: ControllerSettings,
    controllerUrl: Option[String],
    resultsDir: Path,
    statusInterval: FiniteDuration,
    dashboard: DashboardSettings,
    statsd: Option[(String, Int)],
    described: String,
    thresholds: Seq[Threshold],
    scenario: Option[(Scenario, Timeline)] = None,
    seed: Long = 1):
  require(statusInterval > Duration.Zero, "fleetsim.run.status-interval must be positive")

  /** How long a stopping run waits for the calls in flight: the longest a call may wait, its own timeout or the run's, and a second. */
  def drainWait: FiniteDuration = http.requestTimeout.max(profile.longestTimeout.nanos) + 1.second

  /** HTTP connections the fleet may hold open at once. */
  def connections: Int = transport.connections(this)

  /** Each device's own session, held open: an SSH tunnel or an MQTT connection. */
  def sessions: Int = if transport.sessions.isDefined then fleet.devices else 0

  /** Devices the run starts with: a scenario's stages resize it from none. */
  def startsWith: Int = if scenario.isDefined then 0 else fleet.devices

  /** The embedded controller (and broker) live in this process: every socket has both ends here. */
  def embedded: Boolean = transport.serverUrl(this).isEmpty

object RunSettings:
  def apply(config: Config): RunSettings =
    val run = config.getConfig("fleetsim.run")
    val explicitDir = run.getString("results-dir")
    val fleet = FleetSettings(config)
    // The command line's transport, else the profile's: the profile is parsed first to know which.
    val asked = Option(config.getString("fleetsim.fleet.transport")).filter(_.nonEmpty).map { name =>
      TransportKinds.named(name).getOrElse(
        throw IllegalArgumentException(s"fleetsim.fleet.transport must be ${TransportKinds.listed} (got '$name')"))
    }
    val profileName = Option(config.getString("fleetsim.device-profile")).filter(_.nonEmpty)
      .getOrElse(asked.getOrElse(TransportKinds.default).defaultProfile)
    val parsed = ProfileLoader.parse(profileName, config, TransportKinds)
    // The profile checks its own transport key against the kinds, and the one asked for against its section.
    val kind = parsed.transportFor(asked, TransportKinds.default)
    val transport = kind.read(config)
    TransportKinds.all.foreach(entry => entry.check(config, chosen = entry eq kind))
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
    val resultsDir =
      if explicitDir.nonEmpty then Paths.get(explicitDir)
      else Paths.get(run.getString("results-root"), LocalDateTime.now.format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")))
    val profile = parsed.compile(FleetContext(fleet, transport.joinKey, config))
    // Read again on the node that runs it, checked whole already (cli.Options); a cluster's other nodes have none.
    val scenario = Option(run.getString("scenario")).filter(_.nonEmpty).map { file =>
      val read = Scenario.read(Path.of(file)).fold(p => throw IllegalArgumentException(p), identity)
      read -> read.timeline(fleet.rampRate).fold(p => throw IllegalArgumentException(p), identity)
    }
    val seed = Some(run.getLong("seed")).filter(_ != 0).orElse(scenario.flatMap(_._1.seed))
      .getOrElse(java.util.concurrent.ThreadLocalRandom.current().nextLong(1, 1L << 31))
    val settings = RunSettings(
      fleet = fleet,
      device = DeviceSettings(config),
      http = { val http = HttpSettings(config); http.copy(limits = parsed.limits, connectTimeout = parsed.connectTimeout.getOrElse(http.connectTimeout)) },
      connection = parsed.connectionMode(ownIdentity),
      sourceIps = sourceIps,
      tls = tls,
      transport = transport,
      profile = profile,
      controller = controller,
      controllerUrl = controllerUrl,
      resultsDir = resultsDir,
      statusInterval = run.finiteDuration("status-interval"),
      dashboard = DashboardSettings(config),
      statsd = Option(config.getString("fleetsim.metrics.statsd")).filter(_.nonEmpty).map(hostPort(_, "fleetsim.metrics.statsd")),
      described = fleetsim.Redact.urls(config.getConfig("fleetsim")
        .withoutPath("ssh.password").withoutPath("dashboard.token").withoutPath("controller.ssh-password").withoutPath("controller.agent-secret")
        .root.render(ConfigRenderOptions.concise().setFormatted(true))),
      thresholds = thresholds(config, Figures(profile.kinds, profile.name, scenario.toSeq.flatMap(_._1.actionNames))),
      scenario = scenario,
      seed = seed)
    scenario.foreach((s, _) => checkActions(s, settings))
    settings

  /** A scenario's actions on the embedded controller or broker, in a run that has it. */
  private def checkActions(scenario: Scenario, settings: RunSettings): Unit =
    for action <- scenario.actions; made = action.make(0) if made.onController do
      if !settings.embedded then throw IllegalArgumentException(s"${action.where}: ${action.kind} acts on the embedded reference controller, " +
        s"and this run's ${settings.transport.server.name} is its own (${settings.transport.server.flag}): leave the action out, or the flag")
      if !settings.transport.takes(made) then
        throw IllegalArgumentException(s"${action.where}: ${action.kind} drops sessions this run's ${settings.transport.name} devices do not hold: " +
          s"run the scenario with --transport ${TransportKinds.dropped(made).fold("?")(_.name)}")

  /** The run's thresholds, each checked against the figures its profile's runs have: a mistake names
    * where the threshold came from (--threshold, its variable, or a file's file:line). In a file, one
    * may be a block, `{ threshold = "errors.rate < 5%", abort-on-fail = true, abort-after = 30s }`.
    */
  private def thresholds(config: Config, figures: Figures): Seq[Threshold] =
    val checks = fleetsim.HoconChecks(IllegalArgumentException(_))
    config.getList("fleetsim.run.thresholds").asScala.toSeq.map { value =>
      def refuse(problem: String) = checks.fail(value, problem)
      val (text, abortsFrom) = value match
        case block: com.typesafe.config.ConfigObject =>
          val c = block.toConfig
          checks.keysOf(block, Set("threshold", "abort-on-fail", "abort-after"), "a threshold block")
          if !c.hasPath("threshold") then refuse("""a threshold block needs threshold, like { threshold = "errors.rate < 5%", abort-on-fail = true }""")
          val aborts = try c.hasPath("abort-on-fail") && c.getBoolean("abort-on-fail")
            catch case _: com.typesafe.config.ConfigException => checks.failAt(c, "abort-on-fail", "abort-on-fail must be true or false")
          // k6's delayAbortEval: a run's first seconds (connections opening, caches cold) are not its verdict.
          val after =
            if !c.hasPath("abort-after") then Duration.Zero
            else if !aborts then checks.failAt(c, "abort-after", "abort-after delays abort-on-fail, which this block does not have: add abort-on-fail = true")
            else fleetsim.HoconChecks.positiveDuration(c, "abort-after")
              .getOrElse(checks.failAt(c, "abort-after", "abort-after must be a time into the run, like 30s"))
          (String.valueOf(c.getValue("threshold").unwrapped), Option.when(aborts)(after))
        case _ => (String.valueOf(value.unwrapped), None)
      Threshold.parse(text).flatMap(figures.threshold) match
        case Right(threshold) => threshold.copy(abortsFrom = abortsFrom)
        case Left(problem) => refuse(if problem.startsWith(s"'$text'") then problem else s"'$text': $problem")
    }
