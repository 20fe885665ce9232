package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigList, ConfigObject, ConfigValue}
import fleetsim.HoconChecks.{inFileOrder, positiveDuration}
import fleetsim.device.{Registers, Retry, Spread}
import fleetsim.transport.{MessageKind, UrlTransport}

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.util.regex.Pattern
import scala.collection.mutable
import scala.jdk.CollectionConverters.*

/** A profile's calls: each block compiled into a [[TemplateCall]] — its request (path or url,
  * method, headers, body) from templates of identity, per-call and kept values, and how it judges
  * the reply (`expect`, `reactions`, `check`), tries it again (`retry`) and waits for it (`timeout`).
  * Every call's kind is numbered here, in the order the calls are compiled.
  */
private[profile] final class CallCompiler(root: Config, outline: Outline, identity: Identity, kept: KeptValues, slots: Slots,
    sshKey: Option[String]):
  import CallCompiler.*
  import ProfileChecks.*
  import outline.BodyKeys

  private val kindsSoFar = mutable.ArrayBuffer.empty[MessageKind]

  /** Every kind of call compiled, `kinds(i).index == i`. */
  def kinds: IndexedSeq[MessageKind] = kindsSoFar.toIndexedSeq

  /** A new kind of call, named once in the profile. */
  def kind(name: String, periodic: Boolean, at: ConfigValue): MessageKind =
    if kindsSoFar.exists(_.key == name) then fail(at, s"two calls are named '$name': message kinds must be unique")
    val k = MessageKind(name, kindsSoFar.size, periodic)
    kindsSoFar += k
    k

  /** The profile's reactions, each made for a call as it is compiled: a `stop after N` counts per call. */
  private val reactions: Map[Int, MessageKind => Reaction] =
    val defaults = Map(401 -> Reaction.Reauthenticate, 403 -> Reaction.Rejoin, 429 -> Reaction.RetryAfter, 503 -> Reaction.RetryAfter)
      .map((status, r) => status -> ((_: MessageKind) => r))
    if !root.hasPath("reactions") then defaults else defaults ++ reactionsOf(blockAt(root, "reactions", "reactions"), "reactions")

  private val profileTimeout: Long =
    if !root.hasPath("timeout") then 0
    else positiveDuration(root, "timeout").getOrElse(failAt(root, "timeout", "timeout must be a positive duration, like 10s")).toNanos

  private val perCall: Map[String, Variable[CallScope]] = Map(
    "seq" -> ((s, out) => out.append(if s.message >= 0 then s.device.registers(Registers.seq(s.message)) else 0L)),
    "uptimeS" -> ((s, out) => out.append(s.device.uptimeS)),
    "nowMs" -> ((s, out) => out.append(s.nowMs)),
    "nowIso" -> ((s, out) => out.append(java.time.Instant.ofEpochMilli(s.nowMs).toString)),
    "state" -> ((s, out) => out.append(s.device.state.toString)),
    "sshKey" -> { val key = sshKey.getOrElse(""); (_, out) => out.append(key) })

  /** The per-call values that render as numbers; the others are texts. */
  private val perCallNumbers = Set("seq", "uptimeS", "nowMs")

  /** A device's first call, `join`, or a known device's, `resume` (`what`): counted under its own name if it gives one. */
  def joinCall(block: ConfigObject, what: String): TemplateCall =
    val j = block.toConfig
    // A join's 403 means not yet; a resume's means the controller no longer knows the device: it registers afresh.
    val notAdmitted =
      if !j.hasPath("not-admitted") then (if what == "join" then Set(403) else Set.empty[Int])
      else
        try j.getIntList("not-admitted").asScala.map(_.intValue).toSet
        catch case _: ConfigException => failAt(j, "not-admitted", s"$what.not-admitted must be a list of statuses, like [403]")
    call(block, v => kind(if j.hasPath("name") then string(j, "name") else what, periodic = false, v), what, atJoin = true, message = -1, notAdmitted)

  /** The call a block describes.
    *
    * @param kindOf its kind, made once its target is known (given where to say a name is taken twice)
    * @param message the periodic message it is part of, or -1
    * @param notAdmitted statuses that mean "not yet" (at join)
    */
  def call(block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, atJoin: Boolean, message: Int,
      notAdmitted: Set[Int]): TemplateCall =
    outline.section.call(this, kept, block, kindOf, what, atJoin, message, notAdmitted)

  /** A reactions block: status -> reaction, checked now, made per call. */
  private def reactionsOf(block: ConfigObject, what: String): Map[Int, MessageKind => Reaction] =
    block.asScala.toMap.map { (status, v) =>
      val code = status.toIntOption.filter(s => s >= 100 && s <= 599).getOrElse(fail(v, s"$what: '$status' is not an HTTP status"))
      val made: MessageKind => Reaction = String.valueOf(v.unwrapped).trim match
        case "stop" => kind => Reaction.Stop(1, s"${kind.key}: $code", null)
        case StopAfter(n) if n.toIntOption.exists(_ >= 1) =>
          val after = n.toInt
          kind => Reaction.Stop(after, s"${kind.key}: $code x$after", if after > 1 then kept.lateRegister() else null)
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
        compileCall(s"{{$text}}", v, atJoin = false, Escape.None, s"$what.check", replied = true, origin = 2) // its columns as the user wrote it
      }

  /** What `profile check` says of a call beyond its request: how it judges the reply, and tries it. */
  def notesOf(c: Config, retry: Option[Retry], timeout: Long): String =
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
  def retryOf(c: Config, what: String): Option[Retry] =
    Option.when(c.hasPath("retry")) {
      val block = blockAt(c, "retry", s"$what.retry")
      keysOf(block, Set("tries", "delay"), s"$what.retry")
      val r = block.toConfig
      if !r.hasPath("tries") then fail(block, s"$what.retry has no tries: say how many, the first included, like retry { tries = 3, delay = 2s..15s }")
      val tries = try r.getInt("tries") catch case _: ConfigException => failAt(r, "tries", s"$what.retry.tries must be a whole number")
      if tries < 2 || tries > 100 then failAt(r, "tries", s"$what.retry.tries must be from 2 to 100, the first try included (got $tries)")
      Retry(tries, if r.hasPath("delay") then Schedules.spread(r, "delay", s"$what.retry.delay") else Spread(1_000_000_000L, 1_000_000_000L))
    }

  /** How long a call waits for its reply, in nanoseconds: its own `timeout`, else the profile's; 0: the run's. */
  private def timeoutOf(c: Config, what: String): Long =
    if c.hasPath("timeout") then
      positiveDuration(c, "timeout").getOrElse(failAt(c, "timeout", s"$what.timeout must be a positive duration, like 10s")).toNanos
    else profileTimeout

  /** A variable set for templates of one place: identity, constants, per-call values, kept values
    * allowed there. `atJoin`: only values with a default (the first join has read nothing yet).
    */
  private def callVariables(atJoin: Boolean, replied: Boolean): String => Option[Either[String, Variable[CallScope]]] =
    name =>
      identity.fields.get(name).map(Right(_)).orElse(perCall.get(name).map(Right(_))).orElse(kept.variable(name, atJoin, replied))

  /** A template a call renders.
    *
    * @param replied read once the reply's values are kept (a check): every kept value may be named
    */
  def compileCall(text: String, at: ConfigValue, atJoin: Boolean, escape: Escape, what: String, replied: Boolean = false,
      origin: Int = 0): Template[CallScope] =
    val lookup = callVariables(atJoin, replied)
    val problems = mutable.ArrayBuffer.empty[String]
    val known = identity.fields.keys ++ perCall.keys ++ kept.names
    val template = Template.compile[CallScope](text, n => lookup(n).flatMap {
      case Right(v) => Some(v)
      case Left(problem) => problems += problem; None
    }, escape, slots, known, origin).fold(e => fail(at, s"$what: ${problems.headOption.getOrElse(e)}"), t => t)
    template

  /** A JSON or text body, and its content type; None when the call has no body. */
  def bodyOf(c: Config, what: String, atJoin: Boolean): Option[(Template[CallScope], String)] =
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

  /** An HTTP call to a path on the controller, or (`target` url) to an absolute URL. */
  def httpCall(block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String, atJoin: Boolean, message: Int,
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
    TemplateCall(kind, method, path, headers, body, kept.keepsOf(block, what), answersOf(c, kind, what, notAdmitted), message, kept.walkBase,
      toUrl = target == "url", checksOf(c, what), retry, timeout, notesOf(c, retry, timeout))

  /** A JSON body must be JSON whatever its values: checked as strict JSON with each {{...}} rendered as its type. */
  def checkJson(text: String, at: ConfigValue, samples: Map[String, String], escape: Escape, what: String): Unit =
    JsonBody.check(text, samples, escape).foreach(problem => fail(at, s"$what json body is not JSON after rendering $problem"))

  /** How each variable a call's template may name stands in when its JSON body is checked. */
  private def callSamples: Map[String, String] =
    kept.samples ++
      perCall.keys.map(k => k -> (if perCallNumbers(k) then JsonBody.Number else JsonBody.Text)) ++
      identity.samples

private[profile] object CallCompiler:
  private val Interpolation = Pattern.compile("\\{\\{.*?\\}\\}")
  private val StopAfter = "stop after (\\d+)".r

  /** Headers that say how the request is framed or the connection used: a profile's would contradict fleetsim's own. */
  private val FramingHeaders = Seq("Content-Length", "Transfer-Encoding", "Connection")

  /** Form-encodes the text around a template's {{...}}; the template encodes what they render. */
  private def encodeLiterals(text: String): String =
    val m = Interpolation.matcher(text)
    val out = StringBuilder()
    var at = 0
    while m.find() do
      out ++= java.net.URLEncoder.encode(text.substring(at, m.start), UTF_8) ++= m.group()
      at = m.end
    (out ++= java.net.URLEncoder.encode(text.substring(at), UTF_8)).toString
