package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigList, ConfigObject, ConfigValue}
import fleetsim.transport.MessageKind
import fleetsim.transport.mqtt.{MqttIdentity, MqttOptions}

import scala.jdk.CollectionConverters.*

/** MQTT's part of a device profile, the MQTT kind's section: its `mqtt` block (the session's
  * options, and each device's client id, credentials and will), its `pushes` (the topics a device
  * subscribes to), and its calls that publish to a topic. Its devices make no join: their
  * connection is it.
  */
object MqttSection extends ProfileSection:
  import ProfileChecks.*

  private[profile] val keys: Set[String] = Set("mqtt", "pushes")
  private[profile] val described = "an MQTT device profile (its connection is its join)"
  private[profile] val profileIs = "is for MQTT devices"
  private[profile] def needs(transport: String): String = s"an MQTT profile (transport = $transport, topics instead of paths)"
  private[profile] val targetKeys: Set[String] = Set("topic", "qos", "retain", "url")
  private[profile] val bodyKeys: Seq[String] = Seq("json", "text")

  /** A device's clientId: `mqtt.client-id`, its MAC unless it says. */
  private[profile] override def identityTemplates(root: Config): Seq[IdentityTemplate] =
    val (text, at) = if root.hasPath("mqtt.client-id") then (string(root, "mqtt.client-id"), root.getValue("mqtt.client-id")) else ("{{mac}}", root.root)
    Seq(IdentityTemplate("clientId", text, at, "mqtt.client-id"))

  private[profile] override def checkKeys(root: Config): Unit =
    if root.hasPath("pushes") then keysOf(blockAt(root, "pushes", "pushes"), Set("topics", "qos", "keep"), "pushes")

  /** A publish to a topic; or a document fetched over HTTP(S) by its url, often one a push named: never through its session. */
  private[profile] def call(calls: CallCompiler, kept: KeptValues, block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String,
      atJoin: Boolean, message: Int, notAdmitted: Set[Int]): TemplateCall =
    if block.containsKey("url") then calls.httpCall(block, kindOf, what, atJoin, message, notAdmitted, "url")
    else publish(calls, kept, block, kindOf, what, message)

  /** A device logs in with its client id; its connection is its session. */
  private[profile] def compile(root: Config, identity: Identity, kept: KeptValues, calls: CallCompiler): TransportParts =
    val login = calls.compileCall("{{clientId}}", root.root, atJoin = false, Escape.None, "mqtt.client-id")
    TransportParts(login, None, Some(options(root, identity, calls)))

  /** An MQTT device's connection: fleet-wide options, and per device its names rendered from templates. */
  private def options(root: Config, identity: Identity, calls: CallCompiler): MqttOptions =
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
        qosOf(wc, "qos", "mqtt.will", 1), wc.hasPath("retain") && boolean(wc, "retain", "mqtt.will"))
    }
    val names = (n: Int) =>
      val scope = IdentityScope(n)
      MqttIdentity(clientId.text(scope), username.map(_.text(scope)), password.map(_.bytes(scope)), topics.map(_.text(scope)),
        will.map((topic, payload, _, _) => topic.text(scope) -> payload.fold(Array.emptyByteArray)(_.bytes(scope))))
    MqttOptions(version, keepAlive, !c.hasPath("clean-start") || boolean(c, "clean-start", "mqtt"), duration("session-expiry", scala.concurrent.duration.Duration.Zero),
      inFlight, pushes.fold(1)(qosOf(_, "qos", "pushes", 1)), will.fold(1)(_._3), will.exists(_._4), names)

  /** An MQTT device's call: a publish to a topic, at QoS 0 or 1; it keeps nothing (a PUBACK says nothing). */
  private def publish(calls: CallCompiler, kept: KeptValues, block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, message: Int): TemplateCall =
    val c = block.toConfig
    if !c.hasPath("topic") then fail(block, s"$what has no topic: say where it publishes, like topic = \"devices/{{clientId}}/telemetry\", or a url to fetch")
    Outline.HttpKeys.find(c.hasPath).foreach(k => failAt(c, k, s"$what.$k is for a call to a url; a publish has a topic, qos, retain, retry and a body"))
    val topic = calls.compileCall(string(c, "topic"), c.getValue("topic"), atJoin = false, Escape.None, s"$what.topic")
    val qos = qosOf(c, "qos", what, default = 1)
    val retain = c.hasPath("retain") && boolean(c, "retain", what)
    val body = calls.bodyOf(c, what, atJoin = false).map(_._1)
    val retry = calls.retryOf(c, what)
    TemplateCall(kindOf(block.get("topic")), "PUBLISH", topic, Left(Array.emptyByteArray), body, IndexedSeq.empty, Answers(null, Map.empty, Set.empty, Map.empty),
      message, kept.walkBase, qos, retain, retry = retry, notes = calls.notesOf(c, retry, 0))

  private def qosOf(c: Config, path: String, what: String, default: Int): Int =
    if !c.hasPath(path) then default
    else
      val value = c.getValue(path)
      value.unwrapped match
        case n: Integer if n == 0 || n == 1 => n
        case _ => fail(value, s"$what.$path must be 0 or 1 (QoS 2 is not simulated)")
