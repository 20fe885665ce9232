package fleetsim.cli

import fleetsim.{HoconChecks, UsageError}
import fleetsim.HoconChecks.Unreadable

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigValueFactory}

import java.io.File
import java.net.URI
import scala.jdk.CollectionConverters.*


/** What kind of value a flag takes, and how to tell a user what is wrong with theirs. */
enum ValueKind(val expected: String):
  case Count extends ValueKind("a whole number of at least 1, like 1000")
  case CountOrAuto extends ValueKind("auto, or a whole number of at least 1")
  case Rate extends ValueKind("a number above 0, like 50 or 0.5")
  case Duration extends ValueKind(s"a duration with a unit, like 500ms, 30s, 5m or 1h, of at most ${ValueKind.MaxDays}d")
  case Port extends ValueKind("a port number from 0 to 65535 (0 picks a free port)")
  case Size extends ValueKind("a size, like 512, 4KiB or 1MiB")
  case Url extends ValueKind("an address like http://127.0.0.1:8080 or https://127.0.0.1:8443")
  case BrokerUrl extends ValueKind("a broker address like mqtt://127.0.0.1:1883 or mqtts://127.0.0.1:8883")
  case HostPort extends ValueKind("HOST:PORT, like 127.0.0.1:2222")
  case HostPorts extends ValueKind("HOST:PORT or a list of them, like 127.0.0.1:25520,127.0.0.1:25521")
  case Choice(options: String*) extends ValueKind(s"one of ${options.mkString(", ")}")
  /** On when named alone (`--insecure-tls`); `--insecure-tls=off` says off. */
  case Switch extends ValueKind("on or off")
  case Text extends ValueKind("a value")
  case Seed extends ValueKind("a whole number other than 0, like 42")
  /** A threshold's expression ([[fleetsim.report.Threshold]]); whether its figure exists is checked with the profile. */
  case Threshold extends ValueKind(s"a threshold, like ${fleetsim.report.Threshold.Examples}")
  /** A file fleetsim reads: it exists, is a file, and can be read. */
  case InputFile extends ValueKind("a file fleetsim can read")
  /** A folder fleetsim reads files from. */
  case InputFolder extends ValueKind("a folder fleetsim can read")
  /** A folder fleetsim writes to: it is one, or can be made in a folder that is. */
  case OutputFolder extends ValueKind("a folder fleetsim can write to (made if missing)")
  /** A file fleetsim reads and adds to: it is one, or can be made in a folder that is. */
  case OutputFile extends ValueKind("a file fleetsim can write to (made if missing)")

  /** None when `text` is a valid value of this kind. */
  def problem(text: String): Option[String] = this match
    case InputFile | InputFolder | OutputFolder | OutputFile => ValueKind.pathProblem(this, text)
    case Threshold => fleetsim.report.Threshold.parse(text).left.toOption
    case Duration if text.trim.toDoubleOption.exists(_ >= 0) => Some(fleetsim.HoconChecks.noUnit(text))
    case _ => Option.when(!valid(text))(s"'$text' is not $expected")

  private def valid(text: String): Boolean =
    def parsed[A](read: Config => A): Option[A] =
      try Some(read(ConfigFactory.parseMap(Map("v" -> text).asJava)))
      catch case _: ConfigException => None
    val ok = this match
      case Count => text.toIntOption.exists(_ >= 1)
      case CountOrAuto => text == "auto" || text.toIntOption.exists(_ >= 1)
      case Rate => text.toDoubleOption.exists(r => r > 0 && !r.isInfinite)
      // With its unit: HOCON reads a bare number as milliseconds, so `--duration 60` ran 60 ms.
      case Duration => !fleetsim.HoconChecks.unitless(text) && !text.trim.startsWith("-") &&
        parsed(_.getDuration("v")).exists(_.toDays <= ValueKind.MaxDays)
      case Port => text.toIntOption.exists(p => p >= 0 && p <= 65535)
      case Size => parsed(_.getBytes("v")).isDefined
      case Url => validUrl(text, "http", "https")
      case BrokerUrl => validUrl(text, "mqtt", "mqtts")
      case HostPort => scala.util.Try(fleetsim.hostPort(text, "")).isSuccess
      case HostPorts => text.split(',').map(_.trim).forall(t => scala.util.Try(fleetsim.hostPort(t, "")).isSuccess)
      case Choice(options*) => options.contains(text)
      case Switch => text == "on" || text == "off"
      case Seed => text.toLongOption.exists(_ != 0)
      case Text | Threshold | InputFile | InputFolder | OutputFolder | OutputFile => text.nonEmpty
    ok

  private def validUrl(text: String, schemes: String*): Boolean =
    try
      val uri = URI(text)
      schemes.contains(uri.getScheme) && uri.getHost != null && uri.getPort <= 65535 &&
        (uri.getPath == null || uri.getPath.isEmpty || uri.getPath == "/")
    catch case _: Exception => false

object ValueKind:
  /** The longest duration a flag takes: Pekko's own scheduler, which a user may configure back,
    * refuses much beyond it, and a run meant to go on for ever says 0s (until Ctrl-C).
    */
  final val MaxDays = 180

  /** What is wrong with `text` as a path of `kind`, in words that say what to do. */
  private def pathProblem(kind: ValueKind, text: String): Option[String] =
    import java.nio.file.{Files, Path}
    scala.util.Try(Path.of(text)).toOption.filter(_ => text.nonEmpty) match
      case None => Some(s"'$text' is not a path: name ${kind.expected}")
      case Some(path) => pathProblem(kind, text, path)

  private def pathProblem(kind: ValueKind, text: String, path: java.nio.file.Path): Option[String] =
    import java.nio.file.Files
    kind match
      case InputFile =>
        if Files.isDirectory(path) then Some(s"'$text' is a folder, not a file")
        else if !Files.exists(path) then Some(s"no such file '$text'")
        else if !Files.isReadable(path) then Some(s"'$text' cannot be read: check its permissions")
        else None
      case InputFolder =>
        if Files.isRegularFile(path) then Some(s"'$text' is a file, not a folder")
        else if !Files.isDirectory(path) then Some(s"no such folder '$text'")
        else if !Files.isReadable(path) || !Files.isExecutable(path) then Some(s"folder '$text' cannot be read: check its permissions")
        else None
      case OutputFolder =>
        if Files.exists(path) && !Files.isDirectory(path) then Some(s"'$text' is a file, not a folder: name a folder")
        else writableFolder(path, text)
      case _ =>
        if Files.isDirectory(path) then Some(s"'$text' is a folder, not a file")
        else if Files.exists(path) then Option.when(!Files.isWritable(path) || !Files.isReadable(path))(s"'$text' cannot be read and written: check its permissions")
        else Option(path.toAbsolutePath.getParent).flatMap(writableFolder(_, text))

  /** None when `folder` is, or can be made in, a folder this process can write to. */
  private def writableFolder(folder: java.nio.file.Path, text: String): Option[String] =
    import java.nio.file.Files
    val existing = Iterator.iterate(folder.toAbsolutePath)(_.getParent).takeWhile(_ != null).find(Files.exists(_))
    existing match
      case Some(dir) if !Files.isDirectory(dir) => Some(s"cannot make '$text': '$dir' is a file, not a folder")
      case Some(dir) if !Files.isWritable(dir) => Some(s"cannot make '$text': folder '$dir' is not writable (check its permissions)")
      case _ => None

/** One definition of an option: its flag, its environment variable, its key in a config file.
  *
  * @param needs a flag without which this one does nothing: giving it alone is a mistake, not a no-op
  * @param repeatable its setting is a list: each time the flag is given adds a value, its environment
  *   variable holds them separated by ';', its config key is a list
  */
final case class Flag(name: String, path: String, kind: ValueKind, help: String, needs: Option[Flag] = None, repeatable: Boolean = false):
  def env: String = "FLEETSIM_" + name.toUpperCase.replace('-', '_')

  /** The values an environment variable holds: one, or for a repeatable flag each between ';'. */
  def fromEnv(text: String): List[String] = if repeatable then text.split(';').map(_.trim).filter(_.nonEmpty).toList else List(text)

object Flag:
  val Devices = Flag("devices", "fleetsim.fleet.devices", ValueKind.Count, "devices to simulate")
  val Duration = Flag("duration", "fleetsim.fleet.duration", ValueKind.Duration, "how long to run; 0s runs until Ctrl-C")
  val RampRate = Flag("ramp-rate", "fleetsim.fleet.ramp-rate", ValueKind.Rate, "devices started per second while ramping up")
  val Controller = Flag("controller", "fleetsim.controller.url", ValueKind.Url, "the controller under test, speaking the device profile's API; omit to embed the reference controller")
  val ControllerPort = Flag("controller-port", "fleetsim.controller.port", ValueKind.Port, "HTTP port of the embedded reference controller")
  val HeartbeatInterval = Flag("heartbeat-interval", "fleetsim.controller.heartbeat-interval", ValueKind.Duration, "heartbeat interval the reference controller hands out at join")
  val StatsInterval = Flag("stats-interval", "fleetsim.controller.stats-interval", ValueKind.Duration, "stats interval the reference controller hands out at join")
  val Results = Flag("results", "fleetsim.run.results-dir", ValueKind.OutputFolder, "folder for summary.json (default: results/<timestamp>/)")
  val MaxConnections = Flag("max-connections", "fleetsim.http.max-connections", ValueKind.CountOrAuto, "HTTP connections shared by the fleet")
  val Pipelining = Flag("pipelining", "fleetsim.http.pipelining", ValueKind.Count, "calls in flight on one HTTP connection (1 = no pipelining)")
  val RequestTimeout = Flag("request-timeout", "fleetsim.http.request-timeout", ValueKind.Duration, "a call unanswered this long counts as failed")
  val MaxLostHeartbeats = Flag("max-lost-heartbeats", "fleetsim.device.max-lost-heartbeats", ValueKind.Count, "heartbeats lost in a row that send a device to Backoff")
  val ClusterPort = Flag("cluster-port", "fleetsim.cluster.port", ValueKind.Port, "port this node listens on for the cluster")
  val ClusterHost = Flag("cluster-host", "fleetsim.cluster.host", ValueKind.Text, "address the other cluster members reach this one at (and it binds)")
  val SeedNodes = Flag("seed-nodes", "fleetsim.cluster.seed-nodes", ValueKind.HostPorts, "cluster members to join through, HOST:PORT,HOST:PORT (default: this node starts a cluster)")
  val Discovery = Flag("discovery", "fleetsim.cluster.discovery", ValueKind.Choice(fleetsim.cluster.ClusterConfig.DiscoveryMethods*),
    "instead of --seed-nodes: find the other nodes by Pekko Cluster Bootstrap with this discovery method")
  val ManagementPort = Flag("management-port", "fleetsim.cluster.management-port", ValueKind.Port, "with --discovery: port of this node's Pekko Management",
    needs = Some(Discovery))
  val ManagementHost = Flag("management-host", "fleetsim.cluster.management-host", ValueKind.Text,
    "with --discovery: the address Pekko Management is reached at and binds, as discovery names it (default: --cluster-host)",
    needs = Some(Discovery))
  val Cluster = Flag("cluster", "fleetsim.cluster.join", ValueKind.HostPort, "run the fleet on the cluster a fleetsim node at HOST:PORT belongs to")
  val ClusterNodes = Flag("cluster-nodes", "fleetsim.cluster.nodes", ValueKind.Count, "with --cluster: wait for this many nodes before the ramp")
  val Host = Flag("host", "fleetsim.controller.host", ValueKind.Text, "address the reference controller binds to")
  val Port = Flag("port", "fleetsim.controller.port", ValueKind.Port, "HTTP port of the reference controller")
  val Transport = Flag("transport", "fleetsim.fleet.transport", ValueKind.Choice(fleetsim.run.TransportKinds.names*),
    s"how devices carry their calls: ${fleetsim.run.TransportKinds.described}")
  val Broker = Flag("broker", "fleetsim.mqtt.broker", ValueKind.BrokerUrl, "the MQTT broker under test (--transport mqtt); omit to embed one with the reference controller")
  val MaxConnects = Flag("max-connects", "fleetsim.mqtt.max-connects", ValueKind.Count, "MQTT connects (TCP, TLS, CONNECT, SUBSCRIBE) in progress at once, in each process of the fleet")
  val ControllerSsh = Flag("controller-ssh", "fleetsim.ssh.endpoint", ValueKind.HostPort, "SSH server for the tunnels (default: the one the controller names at join)")
  val SshUser = Flag("ssh-user", "fleetsim.ssh.user", ValueKind.Text, "user name for every tunnel (default: each device's MAC)")
  val SshKey = Flag("ssh-key", "fleetsim.ssh.key", ValueKind.InputFile, "private key file for the tunnels (default: one generated for the run)")
  val SshPassword = Flag("ssh-password", "fleetsim.ssh.password", ValueKind.Text, "a password to offer besides the key (prefer the environment variable)")
  val HostKeys = Flag("host-keys", "fleetsim.ssh.host-keys", ValueKind.Choice("strict", "accept-new", "insecure"), "SSH host-key checking")
  val KnownHosts = Flag("known-hosts", "fleetsim.ssh.known-hosts", ValueKind.OutputFile, "known_hosts file for host-key checking")
  val MaxHandshakes = Flag("max-handshakes", "fleetsim.ssh.max-handshakes", ValueKind.Count, "SSH handshakes in progress at once")
  val SshTarget = Flag("ssh-target", "fleetsim.ssh.target", ValueKind.HostPort, "where tunnels lead, as the SSH server sees it (default: the controller URL's address)")
  val Mqtt = Flag("mqtt", "fleetsim.controller.mqtt", ValueKind.Switch, "also start the MQTT broker, for fleets run with --transport mqtt --broker")
  val MqttPort = Flag("mqtt-port", "fleetsim.controller.mqtt-port", ValueKind.Port, "with --mqtt: port of the controller's MQTT broker", needs = Some(Mqtt))
  val SshPort = Flag("ssh-port", "fleetsim.controller.ssh-port", ValueKind.Port, "SSH port of the reference controller")
  val ControllerSshPassword = Flag("ssh-password", "fleetsim.controller.ssh-password", ValueKind.Text, "also admit joined devices that log in with this password")
  val StateDir = Flag("state-dir", "fleetsim.controller.state-dir", ValueKind.OutputFolder, "where the controller keeps its SSH host key")
  val SshGateways = Flag("ssh-gateways", "fleetsim.controller.ssh-gateways", ValueKind.HostPorts,
    "SSH servers started with ./fleetsim ssh-gateway, HOST:PORT,HOST:PORT: joins send each device to one of them, by MAC")
  val Dashboard = Flag("dashboard", "fleetsim.dashboard.enabled", ValueKind.Choice("on", "off"), "serve the live dashboard and /metrics")
  val DashboardHost = Flag("dashboard-host", "fleetsim.dashboard.host", ValueKind.Text, "address the dashboard binds to")
  val DashboardPort = Flag("dashboard-port", "fleetsim.dashboard.port", ValueKind.Port, "port of the dashboard and /metrics")
  val DashboardToken = Flag("dashboard-token", "fleetsim.dashboard.token", ValueKind.Text,
    "what the run's controls ask of callers on other hosts (Authorization: Bearer); prefer the environment variable")
  val Statsd = Flag("statsd", "fleetsim.metrics.statsd", ValueKind.HostPort, "also push the metrics to a StatsD agent at HOST:PORT")
  val Profile = Flag("profile", "fleetsim.profile", ValueKind.Choice("large"), "a bundle of settings under yours: large (100,000 devices and up)")
  val DeviceProfile = Flag("device-profile", "fleetsim.device-profile", ValueKind.Text,
    s"how devices speak to the controller: a built-in profile (${fleetsim.profile.ProfileLoader.BuiltIn.mkString(", ")}) or a profile file")
  val DevicesCsv = Flag("devices-csv", "fleetsim.fleet.devices-csv", ValueKind.InputFile,
    "a CSV of per-device values (tokens, ids) for device profiles that read one, like iot-telemetry")
  val AgentKeyLifetime = Flag("agent-key-lifetime", "fleetsim.controller.agent-key-lifetime", ValueKind.Duration,
    "ap-agent dialect: how long a device's key lasts before its calls get 401 (0s: forever)")
  val IotTokens = Flag("iot-tokens", "fleetsim.controller.iot-tokens", ValueKind.InputFile,
    "iot-telemetry dialect: a CSV of provisioned tokens (column token); empty admits any")
  val SourceIps = Flag("source-ips", "fleetsim.http.source-ips", ValueKind.Text,
    "local addresses devices call from, each device always the same one: a block (127.0.1.0/24) or a list; each device then keeps its own connection")
  val CaFile = Flag("ca-file", "fleetsim.tls.ca-file", ValueKind.InputFile, "PEM file of the CAs that sign an https:// controller's certificate (default: the system's)")
  val InsecureTls = Flag("insecure-tls", "fleetsim.tls.insecure", ValueKind.Switch, "trust any server certificate, no hostname check (warned about once)")
  val ClientCa = Flag("client-ca", "fleetsim.tls.client-ca", ValueKind.InputFile, "a CA certificate (PEM) to issue each device its own client certificate from, at start")
  val ClientCaKey = Flag("client-ca-key", "fleetsim.tls.client-ca-key", ValueKind.InputFile, "the private key (PEM) of --client-ca")
  val ClientCerts = Flag("client-certs", "fleetsim.tls.client-certs", ValueKind.InputFolder, "a folder of per-device certificates: NAME.pem + NAME.key or NAME.p12 (see fleetsim.tls.client-certs-name)")
  val TlsVersion = Flag("tls-version", "fleetsim.tls.version", ValueKind.Choice("any", "1.3", "1.2"), "TLS versions devices offer: any (1.3, else 1.2), 1.3 or 1.2")
  val Tls = Flag("tls", "fleetsim.controller.tls", ValueKind.Switch, "the reference controller serves HTTPS, its CA and certificate kept in its state directory's tls/ (controller --state-dir; for run's own, fleetsim.controller.state-dir, default .fleetsim/controller)")
  val ClientCertsRequired = Flag("client-certs-required", "fleetsim.controller.client-certs-required", ValueKind.Switch,
    "with --tls: the reference controller admits only clients with a certificate its CA signed")
  val ConfigSize = Flag("config-size", "fleetsim.controller.config-size", ValueKind.Size, "size of the config document devices download")
  val Threshold = Flag("threshold", "fleetsim.run.thresholds", ValueKind.Threshold,
    "a threshold the run must pass, judged at the end, like 'latency.heartbeat.p99 < 200ms' or 'errors.rate < 1%'; give it again for more; exit code 3 when one fails",
    repeatable = true)
  val Scenario = Flag("scenario", "fleetsim.run.scenario", ValueKind.InputFile,
    "a scenario file: stages, actions (power cuts, reboot waves) and thresholds; its stages set the devices and the duration")
  val Seed = Flag("seed", "fleetsim.run.seed", ValueKind.Seed, "the seed of the run's random choices (which devices an action hits); picked and printed when not given")

/** What a command line asked for. */
enum Parsed:
  case Help(text: String)
  case Settings(config: Config)

/** Parses `--flag value` and `--flag=value` into a Config layered as flag > environment variable >
  * `--config FILE` > reference.conf.
  */
object Options:
  private val ConfigFlag = "config"

  def parse(command: String, flags: Seq[Flag], args: List[String], env: Map[String, String] = sys.env): Parsed =
    if args.exists(a => a == "--help" || a == "-h") then Parsed.Help(help(command, flags))
    else
      val (fromFlags, configFile) = collect(command, flags, args)
      val fromEnv = flags.flatMap(f => env.get(f.env).map(f -> f.fromEnv(_))).filterNot((f, _) => fromFlags.contains(f))
      for (flag, values) <- fromEnv; value <- values; p <- flag.kind.problem(value) do throw UsageError(s"${flag.env}: $p", command)
      // Each value's origin names its flag or variable, so that an error found later in it says where it came from.
      val supplied = fromFlags.toSeq.map((f, v) => (f, v, s"--${f.name}")) ++ fromEnv.map((f, v) => (f, v, f.env))
      def setting(flag: Flag, values: List[String]): AnyRef = if flag.repeatable then values.asJava else values.last
      val overrides = supplied.foldLeft(ConfigFactory.empty)((c, g) =>
        c.withFallback(ConfigFactory.parseMap(Map(g._1.path -> setting(g._1, g._2)).asJava, g._3)))
      val fromFile = configFile.fold(ConfigFactory.empty)(path => readFile(command, path, flags))
      val scenario = scenarioOf(command, overrides.withFallback(fromFile))
      val chosen = overrides.withFallback(scenario.fold(ConfigFactory.empty)(s => checked(command, s.settings, flags))).withFallback(fromFile)
      val unscripted = chosen.withFallback(profile(command, chosen)).withFallback(ConfigFactory.load()).resolve()
      val layered = scenario.fold(unscripted)(scripted(command, _, unscripted, supplied.map(_._1).toSet))
      for (flag, _) <- fromFlags; needed <- flag.needs if !isSet(layered, needed) do
        throw UsageError(s"--${flag.name} does nothing without --${needed.name}: add --${needed.name}, or leave --${flag.name} out", command)
      Parsed.Settings(layered)

  /** The scenario the settings name, if any, read and checked whole. */
  private def scenarioOf(command: String, chosen: Config): Option[fleetsim.scenario.Scenario] =
    val path = if chosen.hasPath(Flag.Scenario.path) then chosen.getString(Flag.Scenario.path) else ""
    Option.when(path.nonEmpty)(fleetsim.scenario.Scenario.read(java.nio.file.Path.of(path)).fold(p => throw UsageError(p, command), identity))

  /** `config` with what a scenario sets: the fleet's size (its largest stage), the run's duration
    * (its stages' length) and its thresholds after the run's; refused where the user set those too.
    */
  private def scripted(command: String, scenario: fleetsim.scenario.Scenario, config: Config, supplied: Set[Flag]): Config =
    for flag <- Seq(Flag.Devices, Flag.Duration) do
      if supplied(flag) then
        throw UsageError(s"--${flag.name} (or ${flag.env}): the stages of scenario ${scenario.file} set it: leave it out, or change the stages", command)
      if scenario.settings.hasPath(flag.path) then
        throw UsageError(s"${HoconChecks.where(scenario.settings.getValue(flag.path))}: ${flag.path}: the scenario's stages set it: leave it out", command)
    val timeline = scenario.timeline(config.getDouble("fleetsim.fleet.ramp-rate")).fold(p => throw UsageError(p, command), identity)
    val thresholds = config.getList(Flag.Threshold.path).asScala ++ scenario.thresholds
    config
      .withValue(Flag.Devices.path, ConfigValueFactory.fromAnyRef(timeline.planned))
      .withValue(Flag.Duration.path, ConfigValueFactory.fromAnyRef(s"${timeline.length.toMillis}ms"))
      .withValue(Flag.Threshold.path, ConfigValueFactory.fromIterable(thresholds.asJava))

  /** Whether a flag's setting asks for something: a switch that is on, a text that is not empty. */
  private def isSet(config: Config, flag: Flag): Boolean = config.getValue(flag.path).unwrapped match
    case on: java.lang.Boolean => on
    case text: String => text.nonEmpty && text != "off"
    case _ => true

  /** The profile the user named, if any: a layer of settings under theirs and above the defaults. */
  private def profile(command: String, chosen: Config): Config =
    val name = if chosen.hasPath(Flag.Profile.path) then chosen.getString(Flag.Profile.path) else ""
    if name.isEmpty then ConfigFactory.empty
    else
      Option(getClass.getClassLoader.getResource(s"fleetsim/profiles/$name.conf")) match
        case Some(resource) => ConfigFactory.parseURL(resource)
        case None => throw UsageError(s"no profile '$name' (there is: large)", command)

  /** The flags given, checked one by one, each with its values in order (the last counts, but for a
    * repeatable flag), and the --config file if one was named.
    */
  private def collect(command: String, flags: Seq[Flag], args: List[String]): (Map[Flag, List[String]], Option[String]) =
    val byName = flags.map(f => f.name -> f).toMap
    def loop(rest: List[String], acc: Map[Flag, List[String]], file: Option[String]): (Map[Flag, List[String]], Option[String]) = rest match
      case Nil => (acc, file)
      case arg :: tail if arg.startsWith("--") =>
        val (name, inline) = arg.drop(2).split("=", 2) match
          case Array(n, v) => (n, Some(v))
          case Array(n) => (n, None)
        val switch = byName.get(name).exists(_.kind == ValueKind.Switch)
        val (value, next) = inline match
          case Some(v) => (v, tail)
          case None if switch => ("on", tail)
          case None =>
            tail match
              case v :: more => (v, more)
              case Nil => throw UsageError(s"--$name needs a value", command)
        if name == ConfigFlag then loop(next, acc, Some(value))
        else
          val flag = byName.getOrElse(name, throw UsageError(s"unknown flag --$name${suggest(name, byName.keys.toSeq :+ ConfigFlag)}", command))
          flag.kind.problem(value).foreach(p => throw UsageError(s"--$name: $p", command))
          loop(next, acc + (flag -> (acc.getOrElse(flag, Nil) :+ value)), file)
      case arg :: _ => throw UsageError(s"unexpected argument '$arg' (flags start with --)", command)
    loop(args, Map.empty, None)

  private def readFile(command: String, path: String, flags: Seq[Flag]): Config =
    val file = File(path)
    if !file.isFile || !file.canRead then throw UsageError(s"cannot read config file '$path': no such readable file", command)
    val config = HoconChecks.read(file.toPath).fold({
      case Unreadable.NotText(problem) => throw UsageError(s"config file $problem", command)
      case Unreadable.NotHocon(problem) => throw UsageError(s"config file '$path' is not valid HOCON: $problem", command)
    }, identity)
    checked(command, config, flags)

  /** A user's settings (a config file's, a scenario's block), each known and each flag's as that flag would take it. */
  private def checked(command: String, config: Config, flags: Seq[Flag]): Config =
    val reference = ConfigFactory.defaultReference()
    for problem <- fleetsim.ConfigKeys.unknown(config, reference, "fleetsim") do throw UsageError(problem, command)
    // A flag's setting in the file is held to what the flag would take (its default is taken as it is).
    for flag <- flags; value <- scala.util.Try(config.getValue(flag.path)).toOption do // unset, or a ${...} resolved later
      val default = if reference.hasPath(flag.path) then reference.getValue(flag.path).unwrapped else null
      def problemOf(unwrapped: AnyRef): Option[String] = unwrapped match
        case _: java.util.Map[?, ?] if flag == Flag.Threshold => None // a block with abort-on-fail: checked with the figures
        case text: String => flag.kind.problem(text)
        case n: java.lang.Number => flag.kind.problem(n.toString)
        case b: java.lang.Boolean => flag.kind.problem(if b then "on" else "off")
        case _ => Some(s"not ${flag.kind.expected}")
      val problem = (value.unwrapped, flag.repeatable) match
        case (list: java.util.List[?], true) => list.asScala.iterator.flatMap(v => problemOf(v.asInstanceOf[AnyRef])).nextOption()
        case (_, true) => Some(s"not a list: write its values in [ ], each in quotes, each ${flag.kind.expected}")
        case (one, false) => problemOf(one)
      for p <- problem if value.unwrapped != default do throw UsageError(s"${HoconChecks.where(value)}: ${flag.path}: $p", command)
    config

  /** " (did you mean --x?)" when a known name is within two edits of the typo. */
  def suggest(name: String, known: Seq[String]): String =
    fleetsim.Suggest.closest(name, known).fold("")(k => s" (did you mean --$k?)")

  def help(command: String, flags: Seq[Flag]): String =
    val defaults = ConfigFactory.load()
    val rows = flags.map { f =>
      val default = if !defaults.hasPath(f.path) then "" else defaults.getValue(f.path).unwrapped match
        case list: java.util.List[?] => list.asScala.mkString(", ")
        case value => value.toString
      val shown = if default.isEmpty then "" else s" (default: $default)"
      f"  --${f.name}%-22s ${f.help}$shown%n  ${""}%-24s env ${f.env}, config ${f.path}"
    }
    (Seq(s"usage: ./fleetsim $command [flags]", "", "flags:") ++ rows ++ Seq(
      "  --config FILE            a HOCON file of settings (keys as in reference.conf)",
      "  --help                   this text",
      "",
      // The layers this command has, in order (a scenario and --profile only where it takes them).
      ("Flags override environment variables, which override " + (Option.when(flags.contains(Flag.Scenario))("a scenario's settings") ++
        Seq("--config FILE") ++ Option.when(flags.contains(Flag.Profile))("--profile") ++ Seq("the defaults.")).mkString(", then "))))
      .mkString("\n")
