package fleetsim.profile

import com.typesafe.config.*
import fleetsim.device.{DeviceScope, First, Periodic, Registers, Retry, Spread, Trigger}
import fleetsim.{Csv, HoconChecks}
import fleetsim.HoconChecks.{Unreadable, inFileOrder, positiveDuration}
import fleetsim.fleet.FleetSettings
import fleetsim.transport.{ConnectionMode, MessageKind, ReplyLimits, UrlTransport}
import fleetsim.transport.mqtt.{MqttIdentity, MqttOptions}

import java.io.File
import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.nio.file.{Files, Path}
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import java.util.regex.{Pattern, PatternSyntaxException}
import scala.collection.mutable
import scala.jdk.CollectionConverters.*

/** A mistake in a device profile: one line that says where (file:line), what, and how to fix it. */
final class ProfileError(message: String) extends Exception(message)

/** The HOCON checks, failing with a [[ProfileError]]. */
private[profile] val ProfileChecks = HoconChecks(ProfileError(_))

/** What a profile is compiled for: who the devices are, and what the run gives them.
  *
  * @param settings the run's layered config: a profile may use its values (`${fleetsim.fleet.model}`)
  * @param sshKey the fleet's SSH public key, sent at join when devices tunnel (a template's `sshKey`)
  */
final case class FleetContext(fleet: FleetSettings, sshKey: Option[String], settings: Config)

/** Reads device profiles — HOCON files describing a controller's API (docs/profiles.md) —
  * into a [[CompiledProfile]]. Everything is checked and compiled here, once: a bad profile never
  * reaches a device.
  */
object ProfileLoader:
  import ProfileChecks.*

  /** The profiles inside fleetsim, by name: `--device-profile ap-v1`. */
  val BuiltIn: Seq[String] = Seq("ap-v1", "ap-agent", "ap-shell", "iot-telemetry", "iot-mqtt")

  /** The profile a transport's devices speak when the run names none. */
  def defaultFor(transport: String): String = if transport == "mqtt" then "iot-mqtt" else "ap-v1"

  private def resource(name: String) = s"fleetsim/device-profiles/$name.conf"

  /** The text of a built-in profile, for `profile show`. */
  def builtInText(name: String): Option[String] =
    Option(getClass.getClassLoader.getResourceAsStream(resource(name))).filter(_ => BuiltIn.contains(name)).map { in =>
      try String(in.readAllBytes(), UTF_8) finally in.close()
    }

  /** A profile read but not compiled yet: what the run needs to know before it can compile it. */
  final class Parsed private[ProfileLoader] (val name: String, config: Config, base: Option[Path]):
    /** The transport the profile asks for, if any: needed before it is compiled, so checked here. */
    val transport: Option[String] = Option.when(config.hasPath("transport"))(config.getValue("transport")).map { value =>
      value.unwrapped match
        case t @ ("http" | "ssh" | "mqtt") => t.asInstanceOf[String]
        case other => fail(value, s"transport must be http, ssh or mqtt (got '$other')")
    }
    private val connection = Option.when(config.hasPath("connection"))(config.getValue("connection"))

    /** How the devices share connections: what the profile says, else shared, unless something
      * that identifies a device lives in its connection (`identity`, the flag that asks for it).
      */
    /** Its devices speak MQTT: they publish to topics, and their connection is their join. */
    def mqtt: Boolean = transport.contains("mqtt")

    /** The profile's transport, checked against the one the command line asks for. */
    def transportFor(asked: Option[String]): String = (asked, transport) match
      case (Some("mqtt"), Some(own)) if own != "mqtt" =>
        failAt(config, "transport", s"profile $name is for $own devices, and --transport mqtt needs an MQTT profile (transport = mqtt, topics instead of paths), like the built-in iot-mqtt")
      case (Some("mqtt"), None) =>
        throw ProfileError(s"profile $name describes HTTP calls, and --transport mqtt needs an MQTT profile (transport = mqtt, topics instead of paths), like the built-in iot-mqtt")
      case (Some(other), Some("mqtt")) if other != "mqtt" =>
        failAt(config, "transport", s"profile $name is for MQTT devices: run it with --transport mqtt, not $other")
      case _ => asked.orElse(transport).getOrElse("http")

    def connectionMode(identity: Option[String]): ConnectionMode = connection match
      case None => if identity.isDefined then ConnectionMode.PerDevice else ConnectionMode.Shared
      case Some(value) =>
        val mode = ConnectionMode.values.find(_.key == value.unwrapped).getOrElse(
          fail(value, s"connection must be ${ConnectionMode.values.map(_.key).mkString(", ")} (got '${value.unwrapped}')"))
        for flag <- identity if mode == ConnectionMode.Shared do
          fail(value, s"connection = shared cannot carry each device's own ${flag}: say per-device or per-call")
        mode

    /** What a reply may hold before the call fails as tooLarge: the profile's `limits`, over the defaults. */
    val limits: ReplyLimits =
      if !config.hasPath("limits") then ReplyLimits.Default
      else
        val block = config.getValue("limits") match
          case o: ConfigObject => o
          case v => fail(v, s"limits must be a block, like limits { body = 16 MiB }")
        val keys = Map("status-line" -> "bytes", "headers" -> "lines", "head" -> "bytes", "body" -> "bytes")
        for key <- block.keySet.asScala if !keys.contains(key) do
          fail(block.get(key), s"unknown key '$key' in limits; it may have ${keys.keys.toSeq.sorted.mkString(", ")}")
        val c = block.toConfig
        def size(key: String, default: Int, min: Long): Int =
          if !c.hasPath(key) then default
          else
            val value = c.getValue(key)
            val n = try if keys(key) == "lines" then c.getLong(key) else c.getBytes(key).longValue
              catch case _: ConfigException => fail(value, s"limits.$key must be ${if keys(key) == "lines" then "a number of lines, like 100" else "a size, like 64 KiB or 8 MiB"}")
            if n < min || n > Int.MaxValue / 2 then fail(value, s"limits.$key must be from $min to ${Int.MaxValue / 2} (got $n)")
            n.toInt
        val d = ReplyLimits.Default
        val statusLine = size("status-line", d.statusLine, 16)
        ReplyLimits(statusLine, size("headers", d.headers, 1), size("head", d.head.max(statusLine), statusLine), size("body", d.body, 0))

    /** How long the devices wait for a connection: the profile's `connect-timeout`, if it says. */
    val connectTimeout: Option[scala.concurrent.duration.FiniteDuration] =
      Option.when(config.hasPath("connect-timeout"))(config.getValue("connect-timeout")).map { value =>
        positiveDuration(config, "connect-timeout").getOrElse(fail(value, s"connect-timeout must be a duration, like 5s"))
      }

    def compile(context: FleetContext): CompiledProfile = new Compiler(config, context, base, transport).profile

  /** A built-in profile by name, or a file by path, with its ${...} resolved against the run's settings. */
  def parse(nameOrFile: String, settings: Config): Parsed =
    val (parsed, base) =
      if BuiltIn.contains(nameOrFile) then
        ConfigFactory.parseResources(resource(nameOrFile), ConfigParseOptions.defaults.setAllowMissing(false)) -> None
      else
        val file = File(nameOrFile)
        if !file.isFile then
          val hint = fleetsim.Suggest.closest(nameOrFile, BuiltIn).fold("")(n => s" (did you mean $n?)")
          throw ProfileError(s"no device profile '$nameOrFile'$hint: name a file, or one of the built-in profiles ${BuiltIn.mkString(", ")}")
        HoconChecks.read(file.toPath).fold({
          case Unreadable.NotText(problem) => throw ProfileError(problem)
          case Unreadable.NotHocon(problem) => throw ProfileError(s"$problem (not valid HOCON)")
        }, _ -> Option(file.getAbsoluteFile.getParentFile))
    // Resolved with the run's settings under it, then cut back to the profile's own keys
    // (resolveWith cannot resolve `key = ${?ENV}` overriding an earlier value).
    val resolved =
      try
        val merged = parsed.withFallback(settings).resolve()
        parsed.root.keySet.asScala.foldLeft(ConfigFactory.empty)((own, key) => own.withFallback(merged.withOnlyPath(ConfigUtil.quoteString(key))))
      catch
        case e: ConfigException =>
          throw ProfileError(s"${e.getMessage.linesIterator.next().take(300)} (a $${...} must name a setting, or use $${?NAME} for an optional environment variable)")
    new Parsed(nameOrFile, resolved, base.map(_.toPath))

  def load(nameOrFile: String, context: FleetContext): CompiledProfile = parse(nameOrFile, context.settings).compile(context)

  // ---- the compiler: one profile, read once ----

  private final class Compiler(root: Config, context: FleetContext, base: Option[Path], transport: Option[String]):
    private val slots = Slots()

    private val outline = Outline(root, transport)
    import outline.{BodyKeys, CallKeys, HttpKeys, callBlocks, messageBlocks, mqtt, triggerBlocks}

    val name: String = if root.hasPath("name") then string(root, "name") else "profile"

    private val identity = Identity(root, context.fleet, base, outline, slots)
    import identity.seededColumns

    private val kept = KeptValues(root, outline, seededColumns.map(_._1).toSet)
    import kept.{keepsOf, lateRegister, own, resolved, slotNamed, walkBase}

    private val calls = CallCompiler(root, outline, identity, kept, slots, context.sshKey)
    import calls.*

    // ---- assembling it ----

    /** An MQTT device's connection: fleet-wide options, and per device its names rendered from templates. */
    private def mqttOptions: MqttOptions =
      val block = if root.hasPath("mqtt") then blockAt(root, "mqtt", "mqtt") else ConfigFactory.empty.root
      keysOf(block, Set("client-id", "username", "password", "version", "keepalive", "clean-start", "session-expiry", "will", "max-in-flight"), "mqtt")
      val c = block.toConfig
      def template(path: String, what: String): Option[Template[IdentityScope]] =
        Option.when(c.hasPath(path))(identity.template(string(c, path), c.getValue(path), what))
      def duration(path: String, default: scala.concurrent.duration.FiniteDuration) =
        if !c.hasPath(path) then default
        else
          try scala.concurrent.duration.Duration.fromNanos(c.getDuration(path).toNanos)
          catch case _: ConfigException => failAt(c, path, s"mqtt.$path must be a duration, like 60s")
      val version = if !c.hasPath("version") then 5 else String.valueOf(c.getValue("version").unwrapped) match
        case "5" | "5.0" => 5
        case "3.1.1" | "3" => 3
        case other => failAt(c, "version", s"mqtt.version must be 5 or 3.1.1 (got '$other')")
      val keepAlive = duration("keepalive", scala.concurrent.duration.Duration(60, "s"))
      if keepAlive.toSeconds > 65535 then failAt(c, "keepalive", "mqtt.keepalive must be at most 65535s")
      val inFlight = if c.hasPath("max-in-flight") then c.getInt("max-in-flight") else 16
      if inFlight < 1 then failAt(c, "max-in-flight", "mqtt.max-in-flight must be at least 1")
      val clientId = identity.template("{{clientId}}", block, "mqtt.client-id")
      val (username, password) = (template("username", "mqtt.username"), template("password", "mqtt.password"))
      val pushes = if root.hasPath("pushes") then Some(blockAt(root, "pushes", "pushes").toConfig) else None
      val topics = pushes.filter(_.hasPath("topics")).map { p =>
        val list = p.getValue("topics") match
          case l: ConfigList if !l.isEmpty => l.asScala.toSeq
          case v => fail(v, "pushes.topics must be a list of topic filters, like [\"devices/{{clientId}}/config\"]")
        list.map(v => identity.template(String.valueOf(v.unwrapped), v, "pushes.topics"))
      }.getOrElse(Nil)
      for p <- pushes if !p.hasPath("topics") do fail(root.getValue("pushes"), "pushes has no topics: say where pushes come, like topics = [\"devices/{{clientId}}/config\"]")
      val will = Option.when(c.hasPath("will")) {
        val w = blockAt(c, "will", "mqtt.will")
        keysOf(w, Set("topic", "text", "json", "qos", "retain"), "mqtt.will")
        val wc = w.toConfig
        if !wc.hasPath("topic") then fail(w, "mqtt.will has no topic: like will { topic = \"devices/{{clientId}}/status\", text = \"offline\" }")
        val payload = Seq("text", "json").find(wc.hasPath).map(k => identity.template(string(wc, k), wc.getValue(k), s"mqtt.will.$k"))
        if wc.hasPath("json") then checkJson(string(wc, "json"), wc.getValue("json"), identity.samples, Escape.None, "mqtt.will")
        (identity.template(string(wc, "topic"), wc.getValue("topic"), "mqtt.will.topic"), payload,
          qosOf(wc, "qos", "mqtt.will", 1), wc.hasPath("retain") && boolean(wc, "retain", "mqtt.will"))
      }
      val names = (n: Int) =>
        val scope = IdentityScope(n)
        MqttIdentity(clientId.text(scope), username.map(_.text(scope)), password.map(_.bytes(scope)), topics.map(_.text(scope)),
          will.map((topic, payload, _, _) => topic.text(scope) -> payload.fold(Array.emptyByteArray)(_.bytes(scope))))
      MqttOptions(version, keepAlive, !c.hasPath("clean-start") || boolean(c, "clean-start", "mqtt"), duration("session-expiry", scala.concurrent.duration.Duration.Zero),
        inFlight, pushes.fold(1)(qosOf(_, "qos", "pushes", 1)), will.fold(1)(_._3), will.exists(_._4), names)

    val profile: CompiledProfile =
      if !mqtt && !root.hasPath("join") then fail(root.root, s"a device profile needs a join block: the call a device makes first")
      if root.hasPath("pushes") then keysOf(blockAt(root, "pushes", "pushes"), Set("topics", "qos", "keep"), "pushes")
      val joinBlock = Option.when(!mqtt)(blockAt(root, "join", "join"))
      val resumeBlock = Option.when(root.hasPath("resume"))(blockAt(root, "resume", "resume"))
      for (b, what) <- joinBlock.map(_ -> "join") ++ resumeBlock.map(_ -> "resume") do keysOf(b, CallKeys + "not-admitted", what)
      if resumeBlock.isDefined && seededColumns.isEmpty then
        fail(root.getValue("resume"), "resume is the call of a device that starts known: give identity.csv columns named like the values it keeps (id, key, ...), and devices whose row holds them all resume")
      // Trigger values first: templates may name a trigger's own value.
      val triggerSpecs = triggerBlocks.map { (name, t) =>
        val c = t.toConfig
        if !c.hasPath("when") then fail(t, s"triggers.$name has no when: say which value, like when { newer = configSeq, than = appliedConfigSeq }")
        val when = blockAt(c, "when", s"triggers.$name.when")
        val w = when.toConfig
        val (test, mine) = keysOf(when, Set("newer", "than", "differs", "from"), s"triggers.$name.when").toSet match
          case k if k == Set("newer", "than") => ("newer", "than")
          case k if k == Set("differs", "from") => ("differs", "from")
          case _ => fail(when, s"triggers.$name.when is { newer = VALUE, than = OWN } (numbers) or { differs = VALUE, from = OWN }")
        val announced = slotNamed(w, test, s"triggers.$name.when.$test")
        if test == "newer" && !announced.number then failAt(w, test, s"triggers.$name.when: newer compares numbers, and '${announced.name}' is text; use differs/from")
        val applied = own(string(w, mine), announced)
        (name, t, test, announced, applied)
      }
      val join = joinBlock.map(joinCall(_, "join"))
      val resume = resumeBlock.map(joinCall(_, "resume"))
      val messages = messageBlocks.zipWithIndex.map { case ((name, m), i) =>
        keysOf(m, CallKeys ++ Set("interval", "jitter", "liveness", "max-failures", "requests", "first"), s"messages.$name")
        val c = m.toConfig
        val k = kind(name, periodic = true, m)
        val calls = callBlocks(m, "requests", s"messages.$name").map { block =>
          if block ne m then keysOf(block, CallKeys, s"messages.$name.requests")
          if block.containsKey("name") then
            fail(block.get("name"), s"messages.$name: a message's calls are counted under the message's name ($name): rename the block to name them, and remove name")
          call(block, _ => k, s"messages.$name", atJoin = false, message = i, Set.empty)
        }
        if !c.hasPath("interval") then fail(m, s"messages.$name has no interval: like interval = 30s, or the name of a number kept at join (seconds)")
        val interval: DeviceScope => Long =
          try
            val nanos = c.getDuration("interval").toNanos
            if nanos <= 0 then failAt(c, "interval", s"messages.$name.interval must be positive")
            _ => nanos
          catch
            case _: ConfigException.BadValue =>
              val slot = resolved(slotNamed(c, "interval", s"messages.$name.interval"))
              if !slot.number then failAt(c, "interval", s"messages.$name.interval: '${slot.name}' is text, not a number of seconds")
              d => slot.number(d) * 1_000_000_000L
        val jitter = Option.when(c.hasPath("jitter"))(c.getDouble("jitter"))
        jitter.foreach(j => if j < 0 || j >= 1 then failAt(c, "jitter", s"messages.$name.jitter must be at least 0 and below 1"))
        if c.hasPath("max-failures") && c.hasPath("liveness") then
          failAt(c, "liveness", s"messages.$name has both liveness and max-failures: say one (liveness = true is max-failures = --max-lost-heartbeats)")
        val maxFailures =
          if c.hasPath("max-failures") then Some(c.getInt("max-failures").max(0))
          else if c.hasPath("liveness") && c.getBoolean("liveness") then None
          else Some(0)
        val After = "after (.+)".r
        val first = if !c.hasPath("first") then First.RandomPhase else string(c, "first").trim match
          case "random-phase" => First.RandomPhase
          case "at-join" => First.AtJoin
          case After(range) =>
            First.After(Schedules.spread(ConfigFactory.empty.withValue("first", ConfigValueFactory.fromAnyRef(range).withOrigin(c.getValue("first").origin)), "first",
              s"messages.$name.first after"))
          case other => failAt(c, "first", s"messages.$name.first must be at-join, random-phase or \"after 5s..10s\" (got '$other')")
        Periodic(k, calls.toIndexedSeq, interval, jitter, maxFailures, first)
      }
      val triggers = triggerSpecs.map { (name, t, test, announced0, applied0) =>
        keysOf(t, CallKeys ++ Set("when", "calls"), s"triggers.$name")
        val blocks = callBlocks(t, "calls", s"triggers.$name")
        val calls = blocks.zipWithIndex.map { (block, i) =>
          if block ne t then keysOf(block, CallKeys, s"triggers.$name.calls")
          val callName =
            if i == 0 && !block.toConfig.hasPath("name") then name
            else if block.toConfig.hasPath("name") then string(block.toConfig, "name")
            else fail(block, s"triggers.$name.calls: each call after the first needs a name (its message kind), like name = applied")
          call(block, v => kind(callName, periodic = false, v), s"triggers.$name", atJoin = false, message = -1, Set.empty)
        }
        val (announced, applied) = (resolved(announced0), resolved(applied0))
        val setsItself = blocks.exists(b => Option(b.get("keep")).collect { case k: ConfigObject => k.containsKey(applied.name) }.getOrElse(false))
        val due: DeviceScope => Boolean =
          if test == "newer" then d => announced.number(d) > applied.number(d)
          else d => announced.text(d) != applied.text(d)
        val record: DeviceScope => Unit = if setsItself then _ => () else d => applied.store(d, announced.text(d))
        Trigger(calls.toIndexedSeq, due, record)
      }
      val (login, ssh) =
        if mqtt then (compileCall("{{clientId}}", root.root, atJoin = false, Escape.None, "mqtt.client-id"), None)
        else if !root.hasPath("ssh") then (compileCall("{{mac}}", root.root, atJoin = false, Escape.None, "ssh.login"), None)
        else
          val block = blockAt(root, "ssh", "ssh")
          keysOf(block, Set("host", "port", "login"), "ssh")
          val c = block.toConfig
          val login = if c.hasPath("login") then compileCall(string(c, "login"), c.getValue("login"), atJoin = false, Escape.None, "ssh.login")
            else compileCall("{{mac}}", block, atJoin = false, Escape.None, "ssh.login")
          val endpoint = Option.when(c.hasPath("host"))(resolved(slotNamed(c, "host", "ssh.host")) -> resolved(slotNamed(c, "port", "ssh.port")))
          (login, endpoint)
      val mqttSession = Option.when(mqtt)(mqttOptions)
      val pushes = Option.when(root.hasPath("pushes"))(keepsOf(blockAt(root, "pushes", "pushes"), "pushes"))
      // After the walks, which every template compiled so far has counted: when the oldest unacknowledged push came.
      val pushedAt = if pushes.isDefined then walkBase + slots.count else -1
      val startDelay = Option.when(root.hasPath("start-delay"))(Schedules.spread(root, "start-delay", "start-delay"))
      val seeds = identity.seeds(kept.slot, if resume.isDefined then lateRegister() else LateRegister())
      // Last, after the walks and the push's register: the registers placed once all are known.
      val lateBase = walkBase + slots.count + pushes.size
      CompiledProfile(name, kinds.toIndexedSeq, join, resume, messages.toIndexedSeq, triggers.toIndexedSeq, kept.placeLate(lateBase), kept.texts,
        login, ssh, kept.forgotten, walkBase, transport, pushes.getOrElse(IndexedSeq.empty), pushedAt,
        mqttSession, seeds, startDelay)

