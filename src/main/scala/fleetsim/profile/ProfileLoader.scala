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

    // ---- the calls ----

    private val kinds = mutable.ArrayBuffer.empty[MessageKind]
    private def kind(name: String, periodic: Boolean, at: ConfigValue): MessageKind =
      if kinds.exists(_.key == name) then fail(at, s"two calls are named '$name': message kinds must be unique")
      val k = MessageKind(name, kinds.size, periodic)
      kinds += k
      k

    /** The profile's reactions, each made for a call as it is compiled: a `stop after N` counts per call. */
    private val reactions: Map[Int, MessageKind => Reaction] =
      val defaults = Map(401 -> Reaction.Reauthenticate, 403 -> Reaction.Rejoin, 429 -> Reaction.RetryAfter, 503 -> Reaction.RetryAfter)
        .map((status, r) => status -> ((_: MessageKind) => r))
      if !root.hasPath("reactions") then defaults else defaults ++ reactionsOf(blockAt(root, "reactions", "reactions"), "reactions")

    /** A reactions block: status -> reaction, checked now, made per call. */
    private def reactionsOf(block: ConfigObject, what: String): Map[Int, MessageKind => Reaction] =
      block.asScala.toMap.map { (status, v) =>
        val code = status.toIntOption.filter(s => s >= 100 && s <= 599).getOrElse(fail(v, s"$what: '$status' is not an HTTP status"))
        val made: MessageKind => Reaction = String.valueOf(v.unwrapped).trim match
          case "stop" => kind => Reaction.Stop(1, s"${kind.key}: $code", null)
          case StopAfter(n) if n.toIntOption.exists(_ >= 1) =>
            val after = n.toInt
            kind => Reaction.Stop(after, s"${kind.key}: $code x$after", if after > 1 then lateRegister() else null)
          case key =>
            val reaction = Reaction.Keys.getOrElse(key, fail(v,
              s"$what.$status must be one of ${Reaction.Keys.keys.toSeq.sorted.mkString(", ")}, stop or \"stop after N\" (got '$key')"))
            _ => reaction
        code -> made
      }

    /** What a call makes of each status: its own `expect` and `reactions`, then the profile's. */
    private def answersOf(c: Config, kind: MessageKind, what: String, notAdmitted: Set[Int]): Answers =
      val expected = Option.when(c.hasPath("expect"))(c.getValue("expect")).map { value =>
        val listed = value match
          case l: ConfigList if !l.isEmpty => l.asScala.toSeq
          case v if String.valueOf(v.unwrapped) == "any" => Seq(v)
          case v => fail(v, s"$what.expect must be a list of statuses, like [201] or [200, 204, \"3xx\"], or any")
        val statuses = new Array[Boolean](600)
        for v <- listed do String.valueOf(v.unwrapped) match
          case "any" => java.util.Arrays.fill(statuses, 100, 600, true)
          case s if s.matches("[1-5]xx") => java.util.Arrays.fill(statuses, (s.head - '0') * 100, (s.head - '0') * 100 + 100, true)
          case s => s.toIntOption.filter(n => n >= 100 && n <= 599) match
            case Some(n) => statuses(n) = true
            case None => fail(v, s"$what.expect: '$s' is not a status, like 201, or a class, like \"2xx\"")
        statuses
      }
      val own = if !c.hasPath("reactions") then Map.empty[Int, Reaction]
        else reactionsOf(blockAt(c, "reactions", s"$what.reactions"), s"$what.reactions").map((s, r) => s -> r(kind))
      Answers(expected.orNull, own, notAdmitted, reactions.map((s, r) => s -> r(kind)))

    /** Conditions on a reply, after its values are kept: the call fails unless each holds. */
    private def checksOf(c: Config, what: String): IndexedSeq[Template[CallScope]] =
      if !c.hasPath("check") then IndexedSeq.empty
      else
        val values = c.getValue("check") match
          case l: ConfigList => l.asScala.toIndexedSeq
          case v => IndexedSeq(v)
        values.map { v =>
          val text = String.valueOf(v.unwrapped)
          if text.contains("{{") then fail(v, s"$what.check is an expression, without {{ }}: like check = \"archiveSha == checksum\"")
          compileCall(s"{{$text}}", v, atJoin = false, Escape.None, s"$what.check", replied = true)
        }

    /** What `profile check` says of a call beyond its request: how it judges the reply, and tries it. */
    private def notesOf(c: Config, retry: Option[Retry], timeout: Long): String =
      def listed(path: String) = c.getValue(path) match
        case l: ConfigList => l.asScala.map(_.unwrapped).mkString(", ")
        case v => String.valueOf(v.unwrapped)
      Seq(
        Option.when(c.hasPath("expect"))(s"expects ${listed("expect")}"),
        Option.when(c.hasPath("reactions"))(c.getObject("reactions").asScala.toSeq.sortBy(_._1).map((s, r) => s"$s: ${r.unwrapped}").mkString(", ")),
        Option.when(c.hasPath("check"))(s"checks ${listed("check")}"),
        retry.map(r => s"tried up to ${r.tries} times, ${r.delay} apart"),
        Option.when(timeout > 0)(s"times out after ${Spread.show(timeout)}")).flatten.mkString("; ")

    /** Tries of a failed call within its cycle: `retry { tries = 3, delay = 2s..15s }`. */
    private def retryOf(c: Config, what: String): Option[Retry] =
      Option.when(c.hasPath("retry")) {
        val block = blockAt(c, "retry", s"$what.retry")
        keysOf(block, Set("tries", "delay"), s"$what.retry")
        val r = block.toConfig
        if !r.hasPath("tries") then fail(block, s"$what.retry has no tries: say how many, the first included, like retry { tries = 3, delay = 2s..15s }")
        val tries = try r.getInt("tries") catch case _: ConfigException => failAt(r, "tries", s"$what.retry.tries must be a whole number")
        if tries < 2 || tries > 100 then failAt(r, "tries", s"$what.retry.tries must be from 2 to 100, the first try included (got $tries)")
        Retry(tries, if r.hasPath("delay") then spread(r, "delay", s"$what.retry.delay") else Spread(1_000_000_000L, 1_000_000_000L))
      }

    /** A length of time, or a range a device picks from at random: `5s`, `2s..15s`. */
    private def spread(c: Config, path: String, what: String): Spread =
      val value = c.getValue(path)
      val text = String.valueOf(value.unwrapped).trim
      val problem = s"$what must be a duration or a range of them, like 5s or 2s..15s (got '$text')"
      def nanos(t: String): Long =
        try ConfigFactory.empty.withValue("d", ConfigValueFactory.fromAnyRef(t.trim)).getDuration("d").toNanos
        catch case _: ConfigException => fail(value, problem)
      val (min, max) = text.split("\\.\\.", -1) match
        case Array(one) => (nanos(one), nanos(one))
        case Array(from, to) => (nanos(from), nanos(to))
        case _ => fail(value, problem)
      if min < 0 || max < min then fail(value, s"$what: the range must run from a duration to one as long or longer (got '$text')")
      if max > 180L * 24 * 3600 * 1_000_000_000L then fail(value, s"$what must be at most 180d (got '$text')")
      Spread(min, max)

    /** How long a call waits for its reply, in nanoseconds: its own `timeout`, else the profile's; 0: the run's. */
    private def timeoutOf(c: Config, what: String): Long =
      if c.hasPath("timeout") then
        positiveDuration(c, "timeout").getOrElse(failAt(c, "timeout", s"$what.timeout must be a positive duration, like 10s")).toNanos
      else profileTimeout

    private val profileTimeout: Long =
      if !root.hasPath("timeout") then 0
      else positiveDuration(root, "timeout").getOrElse(failAt(root, "timeout", "timeout must be a positive duration, like 10s")).toNanos


    /** A variable set for templates of one place: identity, constants, per-call values, kept values
      * allowed there. `atJoin`: only values with a default (the first join has read nothing yet).
      */
    private def callVariables(atJoin: Boolean, replied: Boolean): String => Option[Either[String, Variable[CallScope]]] =
      name =>
        identity.fields.get(name).map(Right(_)).orElse(perCall.get(name).map(Right(_))).orElse(kept.variable(name, atJoin, replied))

    private val perCall: Map[String, Variable[CallScope]] = Map(
      "seq" -> ((s, out) => out.append(if s.message >= 0 then s.device.registers(Registers.seq(s.message)) else 0L)),
      "uptimeS" -> ((s, out) => out.append(s.device.uptimeS)),
      "nowMs" -> ((s, out) => out.append(s.nowMs)),
      "nowIso" -> ((s, out) => out.append(java.time.Instant.ofEpochMilli(s.nowMs).toString)),
      "state" -> ((s, out) => out.append(s.device.state.toString)),
      "sshKey" -> { val key = context.sshKey.getOrElse(""); (_, out) => out.append(key) })

    /** The per-call values that render as numbers; the others are texts. */
    private val perCallNumbers = Set("seq", "uptimeS", "nowMs")

    /** @param replied read once the reply's values are kept (a check): every kept value may be named */
    private def compileCall(text: String, at: ConfigValue, atJoin: Boolean, escape: Escape, what: String, replied: Boolean = false): Template[CallScope] =
      val lookup = callVariables(atJoin, replied)
      val problems = mutable.ArrayBuffer.empty[String]
      val known = identity.fields.keys ++ perCall.keys ++ kept.names
      val template = Template.compile[CallScope](text, n => lookup(n).flatMap {
        case Right(v) => Some(v)
        case Left(problem) => problems += problem; None
      }, escape, slots, known).fold(e => fail(at, s"$what: ${problems.headOption.getOrElse(e)}"), t => t)
      template

    private def call(block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, atJoin: Boolean, message: Int,
        notAdmitted: Set[Int]): TemplateCall =
      if !mqtt then httpCall(block, kindOf, what, atJoin, message, notAdmitted, "path")
      // An MQTT device fetches a document over HTTP(S) by its URL, often one a push named: never through its session.
      else if block.containsKey("url") then httpCall(block, kindOf, what, atJoin, message, notAdmitted, "url")
      else publish(block, kindOf, what, message)

    /** An MQTT device's call: a publish to a topic, at QoS 0 or 1; it keeps nothing (a PUBACK says nothing). */
    private def publish(block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, message: Int): TemplateCall =
      val c = block.toConfig
      if !c.hasPath("topic") then fail(block, s"$what has no topic: say where it publishes, like topic = \"devices/{{clientId}}/telemetry\", or a url to fetch")
      HttpKeys.find(c.hasPath).foreach(k => failAt(c, k, s"$what.$k is for a call to a url; a publish has a topic, qos, retain, retry and a body"))
      val topic = compileCall(string(c, "topic"), c.getValue("topic"), atJoin = false, Escape.None, s"$what.topic")
      val qos = qosOf(c, "qos", what, default = 1)
      val retain = c.hasPath("retain") && boolean(c, "retain", what)
      val body = bodyOf(c, what, atJoin = false).map(_._1)
      val retry = retryOf(c, what)
      TemplateCall(kindOf(block.get("topic")), "PUBLISH", topic, Left(Array.emptyByteArray), body, IndexedSeq.empty, Answers(null, Map.empty, Set.empty, Map.empty),
        message, walkBase, qos, retain, retry = retry, notes = notesOf(c, retry, 0))

    private def qosOf(c: Config, path: String, what: String, default: Int): Int =
      if !c.hasPath(path) then default
      else
        val value = c.getValue(path)
        value.unwrapped match
          case n: Integer if n == 0 || n == 1 => n
          case _ => fail(value, s"$what.$path must be 0 or 1 (QoS 2 is not simulated)")

    /** A JSON or text body, and its content type; None when the call has no body. */
    private def bodyOf(c: Config, what: String, atJoin: Boolean): Option[(Template[CallScope], String)] =
      val bodies = BodyKeys.filter(c.hasPath)
      if bodies.size > 1 then failAt(c, bodies(1), s"$what has both ${bodies(0)} and ${bodies(1)}: a call has one body")
      bodies.headOption.map {
        case "json" =>
          val text = string(c, "json")
          val template = compileCall(text, c.getValue("json"), atJoin, Escape.Json, s"$what.json")
          checkJson(text, c.getValue("json"), callSamples, Escape.Json, what)
          (template, "application/json")
        case "text" => (compileCall(string(c, "text"), c.getValue("text"), atJoin, Escape.None, s"$what.text"), "text/plain; charset=utf-8")
        case _ =>
          val form = blockAt(c, "form", s"$what.form")
          val fields = inFileOrder(form)
          // key=value&key=value, in the order written: names encoded once here, values by the template.
          val text = fields.map(k => encodeLiterals(k) + "=" + encodeLiterals(String.valueOf(form.get(k).unwrapped))).mkString("&")
          (compileCall(text + formTrailer(c, what), form, atJoin, Escape.Url, s"$what.form"), "application/x-www-form-urlencoded")
      }

    /** What ends a form: `&` when its form-encoding asks for a trailing separator (a shell agent's `a=1&b=2&`). */
    private def formTrailer(c: Config, what: String): String =
      if !c.hasPath("form-encoding") then ""
      else
        val block = blockAt(c, "form-encoding", s"$what.form-encoding")
        keysOf(block, Set("trailing-separator"), s"$what.form-encoding")
        if block.toConfig.hasPath("trailing-separator") && boolean(block.toConfig, "trailing-separator", s"$what.form-encoding") then "&" else ""

    /** Headers that say how the request is framed or the connection used: a profile's would contradict fleetsim's own. */
    private val FramingHeaders = Seq("Content-Length", "Transfer-Encoding", "Connection")

    /** An HTTP call to a path on the controller, or (`target` url) to an absolute URL. */
    private def httpCall(block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, atJoin: Boolean, message: Int,
        notAdmitted: Set[Int], target: String): TemplateCall =
      val c = block.toConfig
      if !c.hasPath(target) then fail(block, s"$what has no path: say what it calls, like path = \"/api/v1/devices/{{mac}}/heartbeat\"")
      if c.hasPath("form-encoding") && !c.hasPath("form") then failAt(c, "form-encoding", s"$what.form-encoding is for a form body: add form { ... } or remove it")
      if target == "url" then
        if c.hasPath("topic") then failAt(c, "topic", s"$what has both a url and a topic: a call either fetches a url or publishes")
        if !string(c, "url").contains("{{") && UrlTransport.split(string(c, "url")).isEmpty then
          failAt(c, "url", s"$what.url must be an absolute http:// or https:// URL, like \"https://config.example.com/devices/{{clientId}}\" or \"{{configUrl}}\"")
        for key <- Seq("qos", "retain") if c.hasPath(key) do failAt(c, key, s"$what.$key is for a publish; a call to a url has none")
      val bodied = bodyOf(c, what, atJoin)
      val method = if c.hasPath("method") then string(c, "method").toUpperCase else if bodied.isEmpty then "GET" else "POST"
      if !method.matches("[A-Z]+") then failAt(c, "method", s"$what.method '$method' is not an HTTP method")
      if method == "HEAD" || method == "CONNECT" then failAt(c, "method", s"$what.method $method is not supported: a device's calls read a reply's body (use GET)")
      def literal(key: String, text: String, at: ConfigValue) =
        if TemplateCall.breaksLine(text) then fail(at, s"$what.$key holds CR, LF or NUL, which would end the request line or a header: remove it")
        text
      val path = compileCall(literal(target, string(c, target), c.getValue(target)), c.getValue(target), atJoin, Escape.None, s"$what.$target")
      val (body, contentType) = (bodied.map(_._1), bodied.map(_._2))
      val listed = if !c.hasPath("headers") then Seq.empty else
        val h = blockAt(c, "headers", s"$what.headers")
        inFileOrder(h).map { name =>
          if !name.matches("[A-Za-z0-9-]+") then fail(h.get(name), s"$what.headers: '$name' is not a header name")
          if FramingHeaders.exists(_.equalsIgnoreCase(name)) then
            fail(h.get(name), s"$what.headers: $name is fleetsim's to send (it frames the request and the connection): remove it; the connection key says how connections are used")
          name -> compileCall(literal(s"headers.$name", String.valueOf(h.get(name).unwrapped), h.get(name)), h.get(name), atJoin, Escape.None, s"$what.headers.$name")
        }
      val all = contentType.filterNot(_ => listed.exists(_._1.equalsIgnoreCase("Content-Type")))
        .map(t => "Content-Type" -> compileCall(t, block, atJoin, Escape.None, what)).toSeq ++ listed
      val headers =
        if all.forall(_._2.isConstant) then Left(all.map((n, t) => s"$n: ${t.text(null)}\r\n").mkString.getBytes(UTF_8))
        else Right(all.map((n, t) => (s"$n: ".getBytes(US_ASCII), t)).toIndexedSeq)
      val kind = kindOf(block.get(target))
      val (retry, timeout) = (retryOf(c, what), timeoutOf(c, what))
      TemplateCall(kind, method, path, headers, body, keepsOf(block, what), answersOf(c, kind, what, notAdmitted), message, walkBase,
        toUrl = target == "url", checksOf(c, what), retry, timeout, notesOf(c, retry, timeout))

    /** Form-encodes the text around a template's {{...}}; the template encodes what they render. */
    private def encodeLiterals(text: String): String =
      val m = Interpolation.matcher(text)
      val out = StringBuilder()
      var at = 0
      while m.find() do
        out ++= java.net.URLEncoder.encode(text.substring(at, m.start), UTF_8) ++= m.group()
        at = m.end
      (out ++= java.net.URLEncoder.encode(text.substring(at), UTF_8)).toString

    /** A JSON body must be JSON whatever its values: checked as strict JSON with each {{...}} rendered as its type. */
    private def checkJson(text: String, at: ConfigValue, samples: Map[String, String], escape: Escape, what: String): Unit =
      JsonBody.check(text, samples, escape).foreach(problem => fail(at, s"$what json body is not JSON after rendering $problem"))

    /** How each variable a call's template may name stands in when its JSON body is checked. */
    private def callSamples: Map[String, String] =
      kept.samples ++
        perCall.keys.map(k => k -> (if perCallNumbers(k) then JsonBody.Number else JsonBody.Text)) ++
        identity.samples

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
      // A join's 403 means not yet; a resume's means the controller no longer knows the device: it registers afresh.
      def notAdmitted(block: ConfigObject, what: String) =
        val j = block.toConfig
        if !j.hasPath("not-admitted") then (if what == "join" then Set(403) else Set.empty[Int])
        else
          try j.getIntList("not-admitted").asScala.map(_.intValue).toSet
          catch case _: ConfigException => failAt(j, "not-admitted", s"$what.not-admitted must be a list of statuses, like [403]")
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
      /** The join's and resume's kind: its name, if it gives one. */
      def named(block: ConfigObject, default: String) =
        (v: ConfigValue) => kind(if block.toConfig.hasPath("name") then string(block.toConfig, "name") else default, periodic = false, v)
      val join = joinBlock.map(b => call(b, named(b, "join"), "join", atJoin = true, message = -1, notAdmitted(b, "join")))
      val resume = resumeBlock.map(b => call(b, named(b, "resume"), "resume", atJoin = true, message = -1, notAdmitted(b, "resume")))
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
            First.After(spread(ConfigFactory.empty.withValue("first", ConfigValueFactory.fromAnyRef(range).withOrigin(c.getValue("first").origin)), "first",
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
      val startDelay = Option.when(root.hasPath("start-delay"))(spread(root, "start-delay", "start-delay"))
      val seeds = identity.seeds(kept.slot, if resume.isDefined then lateRegister() else LateRegister())
      // Last, after the walks and the push's register: the registers placed once all are known.
      val lateBase = walkBase + slots.count + pushes.size
      CompiledProfile(name, kinds.toIndexedSeq, join, resume, messages.toIndexedSeq, triggers.toIndexedSeq, kept.placeLate(lateBase), kept.texts,
        login, ssh, kept.forgotten, walkBase, transport, pushes.getOrElse(IndexedSeq.empty), pushedAt,
        mqttSession, seeds, startDelay)

  private val Interpolation = Pattern.compile("\\{\\{.*?\\}\\}")
  private val StopAfter = "stop after (\\d+)".r
