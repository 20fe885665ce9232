package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigList}
import fleetsim.transport.mqtt.{MqttIdentity, MqttOptions}

import java.nio.file.Path
import scala.jdk.CollectionConverters.*

/** One profile compiled, read once: its outline, who its devices are, what they keep, its calls,
  * when they are made, and its transport's section — read in that order, so that of several
  * mistakes a profile is always told the same one first.
  */
private[profile] final class ProfileCompiler(root: Config, context: FleetContext, base: Option[Path], transport: Option[String]):
  import ProfileChecks.*

  private val slots = Slots()
  private val outline = Outline(root, transport)
  private val name: String = if root.hasPath("name") then string(root, "name") else "profile"
  private val identity = Identity(root, context.fleet, base, outline, slots)
  private val kept = KeptValues(root, outline, identity.seededColumns.map(_._1).toSet)
  private val calls = CallCompiler(root, outline, identity, kept, slots, context.sshKey)
  private val schedules = Schedules(root, outline, calls, kept)

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
      if wc.hasPath("json") then calls.checkJson(string(wc, "json"), wc.getValue("json"), identity.samples, Escape.None, "mqtt.will")
      (identity.template(string(wc, "topic"), wc.getValue("topic"), "mqtt.will.topic"), payload,
        calls.qosOf(wc, "qos", "mqtt.will", 1), wc.hasPath("retain") && boolean(wc, "retain", "mqtt.will"))
    }
    val names = (n: Int) =>
      val scope = IdentityScope(n)
      MqttIdentity(clientId.text(scope), username.map(_.text(scope)), password.map(_.bytes(scope)), topics.map(_.text(scope)),
        will.map((topic, payload, _, _) => topic.text(scope) -> payload.fold(Array.emptyByteArray)(_.bytes(scope))))
    MqttOptions(version, keepAlive, !c.hasPath("clean-start") || boolean(c, "clean-start", "mqtt"), duration("session-expiry", scala.concurrent.duration.Duration.Zero),
      inFlight, pushes.fold(1)(calls.qosOf(_, "qos", "pushes", 1)), will.fold(1)(_._3), will.exists(_._4), names)

  val profile: CompiledProfile =
    if !outline.mqtt && !root.hasPath("join") then fail(root.root, s"a device profile needs a join block: the call a device makes first")
    if root.hasPath("pushes") then keysOf(blockAt(root, "pushes", "pushes"), Set("topics", "qos", "keep"), "pushes")
    val joinBlock = Option.when(!outline.mqtt)(blockAt(root, "join", "join"))
    val resumeBlock = Option.when(root.hasPath("resume"))(blockAt(root, "resume", "resume"))
    for (b, what) <- joinBlock.map(_ -> "join") ++ resumeBlock.map(_ -> "resume") do keysOf(b, outline.CallKeys + "not-admitted", what)
    if resumeBlock.isDefined && identity.seededColumns.isEmpty then
      fail(root.getValue("resume"), "resume is the call of a device that starts known: give identity.csv columns named like the values it keeps (id, key, ...), and devices whose row holds them all resume")
    // Trigger values first: templates may name a trigger's own value.
    val whens = schedules.whens()
    val join = joinBlock.map(calls.joinCall(_, "join"))
    val resume = resumeBlock.map(calls.joinCall(_, "resume"))
    val messages = schedules.messages()
    val triggers = schedules.triggers(whens)
    val (login, ssh) =
      if outline.mqtt then (calls.compileCall("{{clientId}}", root.root, atJoin = false, Escape.None, "mqtt.client-id"), None)
      else if !root.hasPath("ssh") then (calls.compileCall("{{mac}}", root.root, atJoin = false, Escape.None, "ssh.login"), None)
      else
        val block = blockAt(root, "ssh", "ssh")
        keysOf(block, Set("host", "port", "login"), "ssh")
        val c = block.toConfig
        val login = if c.hasPath("login") then calls.compileCall(string(c, "login"), c.getValue("login"), atJoin = false, Escape.None, "ssh.login")
          else calls.compileCall("{{mac}}", block, atJoin = false, Escape.None, "ssh.login")
        val endpoint = Option.when(c.hasPath("host"))(kept.resolved(kept.slotNamed(c, "host", "ssh.host")) -> kept.resolved(kept.slotNamed(c, "port", "ssh.port")))
        (login, endpoint)
    val mqttSession = Option.when(outline.mqtt)(mqttOptions)
    val pushes = Option.when(root.hasPath("pushes"))(kept.keepsOf(blockAt(root, "pushes", "pushes"), "pushes"))
    // After the walks, which every template compiled so far has counted: when the oldest unacknowledged push came.
    val pushedAt = if pushes.isDefined then kept.walkBase + slots.count else -1
    val startDelay = schedules.startDelay
    val seeds = identity.seeds(kept.slot, if resume.isDefined then kept.lateRegister() else LateRegister())
    // Last, after the walks and the push's register: the registers placed once all are known.
    val registers = kept.placeLate(kept.walkBase + slots.count + pushes.size)
    CompiledProfile(name, calls.kinds, join, resume, messages, triggers, registers, kept.texts,
      login, ssh, kept.forgotten, kept.walkBase, transport, pushes.getOrElse(IndexedSeq.empty), pushedAt,
      mqttSession, seeds, startDelay)
