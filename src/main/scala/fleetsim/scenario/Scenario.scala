package fleetsim.scenario

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigList, ConfigObject, ConfigValue, ConfigValueType}
import fleetsim.HoconChecks
import fleetsim.HoconChecks.Unreadable
import fleetsim.control.{Leave, Reach, RunAction, UserCall}

import java.nio.file.Path
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** An experiment on a fleet, as a HOCON file (`--scenario`): stages that size the fleet over time,
  * actions at set times, thresholds the run must pass, and settings under the command line's. It is
  * data, checked whole before anything starts and compiled into a [[Timeline]] the run's control
  * follows ([[ScenarioDriver]]).
  *
  * @param settings its `fleetsim { ... }` block, at the root: settings as a config file has them
  * @param thresholds as written, each with its file:line
  */
final case class Scenario(file: Path, description: String, seed: Option[Long], settings: Config, stages: Seq[Stage],
    actions: Seq[ScriptedAction], thresholds: Seq[ConfigValue]):
  /** The stages in time, growing at `rampRate` a second where a stage says no pace; or, as one line
    * with its file:line, an action that would start or still act after the run's end.
    */
  def timeline(rampRate: Double): Either[String, Timeline] =
    val timeline = Timeline(stages, rampRate)
    def end = s"the scenario's end at ${show(timeline.length)}"
    if timeline.length == Duration.Zero then return Left(s"$file: the stages last no time: give the last one a hold, like { hold = 1m }")
    actions.collectFirst {
      case a if a.at >= timeline.length => s"${a.where}: ${a.name} at ${show(a.at)} starts after $end: act earlier, or hold the last stage longer"
      case a if a.at + a.make(0).span >= timeline.length =>
        s"${a.where}: ${a.name} at ${show(a.at)} acts until ${show(a.at + a.make(0).span)}, after $end, so its devices could not come back: " +
          "act earlier, or hold the last stage longer"
    }.toLeft(timeline)

  private def show(d: FiniteDuration): String = d.toCoarsest.toString

  /** The actions' names: each has its figures (`action.<name>.recovery.p99`). */
  def actionNames: Seq[String] = actions.map(_.name)

/** How fast a stage changes the fleet's size. */
enum Pace:
  /** The run's ramp rate when growing; at once when shrinking. */
  case Default
  case Over(time: FiniteDuration)
  case Rate(perSecond: Double)

/** A stage: the fleet's size changed to `devices` (None keeps it) at `pace`, then held for `hold`;
  * the devices a shrink takes out `leave` as it says.
  */
final case class Stage(devices: Option[Int], pace: Pace, hold: FiniteDuration, leave: Leave = Leave.Vanish)

/** An action at `at` from the run's start, named `name` in the summary and in thresholds; `make`
  * gives it drawn with a seed (the run's, plus its place in the file, unless it names its own).
  */
final case class ScriptedAction(at: FiniteDuration, name: String, kind: String, seed: Option[Long], make: Long => RunAction,
    where: String)

/** A change of the fleet's size at `at`: to `devices`, growing at `rate` a second; shrinking, the devices taken out `leave` so. */
final case class Resize(at: FiniteDuration, devices: Int, rate: Double, leave: Leave = Leave.Vanish)

/** What the run does when: resizes in order, and the run's length. */
final case class Timeline(resizes: Seq[Resize], length: FiniteDuration):
  /** The most devices any stage has: what the run is planned and checked for. */
  def planned: Int = resizes.map(_.devices).maxOption.getOrElse(0)

object Timeline:
  def apply(stages: Seq[Stage], rampRate: Double): Timeline =
    val resizes = Seq.newBuilder[Resize]
    var at = Duration.Zero
    var size = 0
    for stage <- stages do
      val target = stage.devices.getOrElse(size)
      val change = (target - size).abs
      if change > 0 then
        val rate = stage.pace match
          case Pace.Default => if target > size then rampRate else Double.PositiveInfinity
          case Pace.Over(time) => change / (time.toNanos / 1e9)
          case Pace.Rate(r) => r
        if target > size then
          resizes += Resize(at, target, rate)
          at += seconds(change / rate)
        else if rate.isInfinite then resizes += Resize(at, target, rate, stage.leave)
        else
          // Shrinking, the fleet takes devices out at once: a step a second spreads them.
          val steps = math.ceil(change / rate).toInt
          for step <- 1 to steps do resizes += Resize(at + (step - 1).seconds, size - (change.toLong * step / steps).toInt, rate, stage.leave)
          at += seconds(change / rate)
      size = target
      at += stage.hold
    Timeline(resizes.result(), at)

  private def seconds(s: Double): FiniteDuration = (s * 1e9).round.nanos

object Scenario:
  private val Percent = """(\d+(?:\.\d+)?)%""".r

  /** The blocks and keys of a scenario file. */
  private val TopKeys = Set("description", "seed", "fleetsim", "stages", "actions", "thresholds")
  private val StageKeys = Set("devices", "over", "rate", "hold", "leave")
  private val ActionKeys = Set("at", "name", "seed")

  /** The kinds of action a scenario may take, each with the keys of its block and how it is made. */
  private final case class Kind(name: String, keys: Set[String], example: String, make: (Checks, Config, ConfigValue) => Long => RunAction)

  private final class Checks extends HoconChecks(message => ScenarioError(message)):
    def duration(config: Config, path: String, what: String): FiniteDuration =
      HoconChecks.positiveDuration(config, path).getOrElse(failAt(config, path, s"$what must be a duration, like 20s or 2m"))
    def optionalDuration(config: Config, path: String, what: String): Option[FiniteDuration] =
      Option.when(config.hasPath(path))(duration(config, path, what))
    def text(config: Config, path: String, what: String): String =
      config.getValue(path).valueType match
        case ConfigValueType.STRING | ConfigValueType.NUMBER => config.getValue(path).unwrapped.toString
        case _ => failAt(config, path, s"$what must be one value, like \"30%\"")
    def required(config: Config, path: String, block: ConfigValue, what: String): Unit =
      if !config.hasPath(path) then fail(block, s"$what needs $path")
    /** Its `devices`, checked: a share, a range of numbers or all. */
    def reach(config: Config): String =
      val devices = text(config, "devices", "devices")
      Reach.parse(devices, 0).left.foreach(p => failAt(config, "devices", p))
      devices
    /** A share at `path` (0 when absent), written as a percentage like 5%. */
    def share(config: Config, path: String, what: String): Double =
      if !config.hasPath(path) then 0
      else text(config, path, what) match
        case Percent(p) if p.toDouble <= 100 => p.toDouble / 100
        case other => failAt(config, path, s"$what must be a percentage, like 5% (got '$other')")

  private val kinds: Seq[Kind] = Seq(
    Kind("power-cut", Set("devices", "for"), "power-cut { devices = 30%, for = 20s }", { (checks, c, block) =>
      checks.required(c, "devices", block, "a power cut"); checks.required(c, "for", block, "a power cut")
      val outage = checks.duration(c, "for", "a power cut's for")
      val devices = checks.reach(c)
      seed => RunAction.PowerCut(Reach.parse(devices, seed).toOption.get, outage)
    }),
    Kind("reboot-wave", Set("devices", "over", "down"), "reboot-wave { devices = 50%, over = 30s, down = 5s }", { (checks, c, block) =>
      checks.required(c, "devices", block, "a reboot wave"); checks.required(c, "over", block, "a reboot wave")
      val share = Reach.share(checks.text(c, "devices", "a reboot wave's devices")).fold(p => checks.failAt(c, "devices", p), identity)
      val over = checks.duration(c, "over", "a reboot wave's over")
      val down = checks.optionalDuration(c, "down", "a reboot wave's down").getOrElse(5.seconds)
      seed => RunAction.RebootWave(share, seed, over, down)
    }),
    Kind("partition", Set("devices", "for"), "partition { devices = 20%, for = 30s }", { (checks, c, block) =>
      checks.required(c, "devices", block, "a partition"); checks.required(c, "for", block, "a partition")
      val devices = checks.reach(c)
      val lasting = checks.duration(c, "for", "a partition's for")
      seed => RunAction.Partition(Reach.parse(devices, seed).toOption.get, lasting)
    }),
    Kind("flapping", Set("devices", "every", "down", "for"), "flapping { devices = 10%, every = 20s, down = 5s, for = 2m }", { (checks, c, block) =>
      for key <- Seq("devices", "every", "down", "for") do checks.required(c, key, block, "a flapping link")
      val devices = checks.reach(c)
      val every = checks.duration(c, "every", "a flapping link's every")
      val down = checks.duration(c, "down", "a flapping link's down")
      if down >= every then checks.failAt(c, "down", "a flapping link is down for less than every, or it never comes up")
      val lasting = checks.duration(c, "for", "a flapping link's for")
      if lasting < every then checks.failAt(c, "for", "a flapping link flaps for at least one every")
      seed => RunAction.Flapping(Reach.parse(devices, seed).toOption.get, every, down, lasting)
    }),
    Kind("degrade", Set("devices", "latency", "loss", "for"), "degrade { devices = all, latency = 200ms, loss = 5%, for = 1m }", { (checks, c, block) =>
      checks.required(c, "devices", block, "a degraded link"); checks.required(c, "for", block, "a degraded link")
      val devices = checks.reach(c)
      val latency = if c.hasPath("latency") then checks.duration(c, "latency", "a degraded link's latency") else Duration.Zero
      val loss = checks.share(c, "loss", "a degraded link's loss")
      if latency == Duration.Zero && loss == 0 then checks.fail(block, "a degraded link needs latency or loss, like latency = 200ms or loss = 5%")
      val lasting = checks.duration(c, "for", "a degraded link's for")
      seed => RunAction.Degrade(Reach.parse(devices, seed).toOption.get, latency, loss, lasting)
    }),
    Kind("controller-fault", Set("error-rate", "throttle-rate", "latency", "for"), "controller-fault { error-rate = 20%, for = 30s }",
      { (checks, c, block) =>
        checks.required(c, "for", block, "a controller fault")
        val errors = checks.share(c, "error-rate", "a controller fault's error-rate")
        val throttled = checks.share(c, "throttle-rate", "a controller fault's throttle-rate")
        if errors + throttled > 1 then checks.failAt(c, "throttle-rate", "error-rate and throttle-rate add up to more than 100%")
        val latency = if c.hasPath("latency") then checks.duration(c, "latency", "a controller fault's latency") else Duration.Zero
        if errors == 0 && throttled == 0 && latency == Duration.Zero then
          checks.fail(block, "a controller fault needs error-rate, throttle-rate or latency, like error-rate = 20%")
        val lasting = checks.duration(c, "for", "a controller fault's for")
        _ => RunAction.ControllerFault(errors, throttled, latency, lasting)
      }),
    Kind("broker-drop", Set.empty, "broker-drop {}", (_, _, _) => _ => RunAction.BrokerDrop),
    Kind("ssh-drop", Set.empty, "ssh-drop {}", (_, _, _) => _ => RunAction.SshDrop),
    Kind("config-push", Set("http", "command"), "config-push {}", { (checks, c, block) =>
      val by = userCall(checks, c, block, "a config push")
      _ => RunAction.ConfigPush(by)
    }),
    Kind("call", Set("http", "command", "for", "undo"), """call { command = ["./fault.sh", "on"], for = 30s, undo { command = ["./fault.sh", "off"] } }""",
      { (checks, c, block) =>
        val call = userCall(checks, c, block, "a call").getOrElse(checks.fail(block, "a call needs http { ... } or command = [...]"))
        val lasting = checks.optionalDuration(c, "for", "a call's for").getOrElse(Duration.Zero)
        val undo = Option.when(c.hasPath("undo")) {
          val u = checks.blockAt(c, "undo", "a call's undo")
          checks.keysOf(u, Set("http", "command"), "a call's undo")
          if lasting == Duration.Zero then checks.failAt(c, "undo", "a call's undo is made when its for is over: give it one, like for = 30s")
          userCall(checks, u.toConfig, u, "a call's undo").getOrElse(checks.fail(u, "a call's undo needs http { ... } or command = [...]"))
        }
        _ => RunAction.Call(call, lasting, undo)
      }))

  private val Methods = Set("GET", "POST", "PUT", "PATCH", "DELETE")

  /** `what`'s call of the user's, in its block `c`: `http { ... }` or `command = [...]`; None when neither. */
  private def userCall(checks: Checks, c: Config, block: ConfigValue, what: String): Option[UserCall] =
    if c.hasPath("http") && c.hasPath("command") then checks.fail(block, s"$what is by http { ... } or by command = [...], not both")
    if c.hasPath("http") then Some(httpCall(checks, checks.blockAt(c, "http", s"$what's http"), what))
    else if c.hasPath("command") then Some(command(checks, c, what))
    else None

  /** An HTTP(S) call: `http { method, url, body?, headers? }`. */
  private def httpCall(checks: Checks, block: ConfigObject, what: String): UserCall.Http =
    import checks.*
    val example = """http { method = POST, url = "https://ctl.example/api/rollout", body = "{}", headers { Authorization = "Bearer "${?TOKEN} } }"""
    keysOf(block, Set("method", "url", "body", "headers"), s"$what's http (like $example)")
    val c = block.toConfig
    if !c.hasPath("url") then fail(block, s"$what's http needs url, like $example")
    val url = string(c, "url")
    // Parsed as the call will parse it, so that a URL the check passes cannot fail the run when it is called.
    val parsed = scala.util.Try(java.net.URI(url)).toOption.filter(u => Set("http", "https")(String.valueOf(u.getScheme).toLowerCase) && u.getHost != null)
    if parsed.isEmpty then failAt(c, "url", s"$what's url is http:// or https://, like https://ctl.example/api/rollout")
    val method = if c.hasPath("method") then string(c, "method").toUpperCase else "POST"
    if !Methods(method) then failAt(c, "method", s"$what's method is one of ${Methods.toSeq.sorted.mkString(", ")}")
    val headers = if !c.hasPath("headers") then Map.empty[String, String] else
      val h = blockAt(c, "headers", s"$what's headers")
      h.keySet.asScala.toSeq.map(k => k -> string(h.toConfig, com.typesafe.config.ConfigUtil.joinPath(k))).toMap
    UserCall.Http(method, url, if c.hasPath("body") then string(c, "body") else "", headers)

  /** A command, run without a shell: `command = ["./rollout.sh", "v2"]`. */
  private def command(checks: Checks, c: Config, what: String): UserCall.Command =
    c.getValue("command") match
      case list: ConfigList if list.size > 0 && list.asScala.forall(_.valueType == ConfigValueType.STRING) =>
        UserCall.Command(list.asScala.map(_.unwrapped.toString).toSeq)
      case _ => checks.failAt(c, "command", s"""$what's command is the program and its arguments, like command = ["./rollout.sh", "v2"]""")

  /** The names of the actions a scenario may take. */
  val actionKinds: Seq[String] = kinds.map(_.name)

  /** The scenario in `file`, checked whole; or the first mistake, as one line that starts with its file:line. */
  def read(file: Path): Either[String, Scenario] =
    HoconChecks.read(file) match
      case Left(Unreadable.NotText(problem)) => Left(s"scenario $problem")
      case Left(Unreadable.NotHocon(problem)) => Left(s"scenario '$file' is not valid HOCON: $problem")
      case Right(config) =>
        try Right(compile(file, config.resolve()))
        catch
          case e: ScenarioError => Left(e.getMessage)
          case e: ConfigException => Left(s"scenario ${e.getMessage}")

  private def compile(file: Path, config: Config): Scenario =
    val checks = Checks()
    import checks.*
    val top = keysOf(config.root, TopKeys, s"scenario $file")
    if !top.contains("stages") then throw ScenarioError(s"$file: a scenario needs stages, like stages = [ { devices = 100, over = 10s }, { hold = 1m } ]")
    val stages = listAt(checks, config, "stages").map(stage(checks, _))
    if stages.isEmpty then failAt(config, "stages", "a scenario needs at least one stage, like { devices = 100, over = 10s }")
    if stages.head.devices.isEmpty then failAt(config, "stages", "the first stage must say how many devices, like { devices = 100, over = 10s }")
    if stages.flatMap(_.devices).max < 1 then failAt(config, "stages", "no stage has a device: give one devices = 1 or more")
    val seed = Option.when(config.hasPath("seed"))(
      try config.getLong("seed") catch case _: ConfigException => failAt(config, "seed", "seed must be a whole number, like 42"))
    val actions = if config.hasPath("actions") then listAt(checks, config, "actions").map(action(checks, _)) else Nil
    for (name, same) <- actions.groupBy(_.name) if same.size > 1 do
      throw ScenarioError(s"${same(1).where}: two actions are named $name (the other at ${same.head.where}): give each its own, like name = \"$name-2\"")
    val thresholds = if !config.hasPath("thresholds") then Nil else config.getValue("thresholds") match
      case list: ConfigList => list.asScala.toSeq
      case other => fail(other, "thresholds must be a list, like thresholds = [ \"errors.rate < 1%\" ]")
    val settings =
      if !config.hasPath("fleetsim") then ConfigFactory.empty
      else blockAt(config, "fleetsim", "fleetsim").atKey("fleetsim")
    val description = if config.hasPath("description") then string(config, "description") else ""
    Scenario(file, description, seed, settings, stages, actions, thresholds)

  private def listAt(checks: Checks, config: Config, path: String): Seq[ConfigObject] = config.getValue(path) match
    case list: ConfigList => list.asScala.toSeq.map {
      case o: ConfigObject => o
      case v => checks.fail(v, s"each of $path is a block { ... }")
    }
    case v => checks.fail(v, s"$path must be a list of blocks: $path = [ { ... }, { ... } ]")

  private def stage(checks: Checks, block: ConfigObject): Stage =
    import checks.*
    val keys = keysOf(block, StageKeys, "a stage")
    val c = block.toConfig
    if keys.isEmpty then fail(block, "a stage needs devices or hold, like { devices = 100, over = 10s } or { hold = 1m }")
    val devices = Option.when(c.hasPath("devices")) {
      val n = try c.getInt("devices") catch case _: ConfigException => failAt(c, "devices", "a stage's devices must be a whole number, like 100")
      if n < 0 then failAt(c, "devices", "a stage's devices must be 0 or more")
      n
    }
    if c.hasPath("over") && c.hasPath("rate") then failAt(c, "rate", "a stage takes over or rate, not both")
    val pace =
      if c.hasPath("over") then Pace.Over(duration(c, "over", "a stage's over"))
      else if c.hasPath("rate") then
        val rate = try c.getDouble("rate") catch case _: ConfigException => failAt(c, "rate", "a stage's rate must be devices a second, like 50")
        if rate <= 0 then failAt(c, "rate", "a stage's rate must be positive, like 50 (devices a second)")
        Pace.Rate(rate)
      else Pace.Default
    if pace != Pace.Default && devices.isEmpty then fail(block, "a stage with over or rate needs devices: how many to reach")
    val hold = if c.hasPath("hold") then duration(c, "hold", "a stage's hold") else Duration.Zero
    val leave = if !c.hasPath("leave") then Leave.Vanish else Leave.parse(text(c, "leave", "a stage's leave")).fold(p => failAt(c, "leave", s"a stage's $p"), identity)
    if c.hasPath("leave") && devices.isEmpty then failAt(c, "leave", "a stage's leave says how the devices it takes out go: give it devices, like { devices = 50, leave = cleanly }")
    Stage(devices, pace, hold, leave)

  private def action(checks: Checks, block: ConfigObject): ScriptedAction =
    import checks.*
    val allowed = ActionKeys ++ actionKinds
    val keys = keysOf(block, allowed, s"an action (its kinds: ${actionKinds.mkString(", ")})")
    val c = block.toConfig
    val named = keys.filter(actionKinds.contains)
    if named.size != 1 then
      fail(block, s"an action is one of ${actionKinds.mkString(", ")}, like { at = 30s, ${kinds.head.example} }")
    val kind = kinds.find(_.name == named.head).get
    if !c.hasPath("at") then fail(block, s"an action needs at: when it starts, like at = 30s")
    if !HoconChecks.hasUnit(c, "at") then failAt(c, "at", "at must be a duration with its unit, like 30s") // HOCON's milliseconds
    val at = try c.getDuration("at").toNanos.nanos catch case _: ConfigException => failAt(c, "at", "at must be a duration, like 30s")
    val inner = blockAt(c, kind.name, kind.name)
    keysOf(inner, kind.keys, s"a ${kind.name} (like ${kind.example})")
    val make = kind.make(checks, inner.toConfig, inner)
    val name = if c.hasPath("name") then string(c, "name") else kind.name
    if !name.matches("[A-Za-z0-9_-]+") then failAt(c, "name", s"an action's name is letters, digits, - and _, like building-a (got '$name')")
    val seed = Option.when(c.hasPath("seed"))(try c.getLong("seed") catch case _: ConfigException => failAt(c, "seed", "seed must be a whole number"))
    ScriptedAction(at, name, kind.name, seed, make, HoconChecks.where(block))

/** A mistake in a scenario file, said in one line with its file:line. */
final class ScenarioError(message: String) extends Exception(message)
