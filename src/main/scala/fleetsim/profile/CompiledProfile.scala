package fleetsim.profile

import fleetsim.device.*
import fleetsim.transport.{FailureReason, MessageKind, Push, Reply, Request}
import fleetsim.transport.ssh.SshEndpoint
import fleetsim.transport.mqtt.MqttOptions

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.time.format.DateTimeFormatter
import java.time.{Instant, ZonedDateTime}
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import java.util.regex.Pattern

/** A device profile as [[ProfileLoader]] compiled it, held once for the whole fleet (not a device):
  * calls rendered from templates, replies read by JSON pointer, regular expression or header into
  * each device's registers and texts.
  */
final class CompiledProfile(
    val name: String,
    val kinds: IndexedSeq[MessageKind],
    val join: Option[Call],
    val resume: Option[Call],
    val messages: IndexedSeq[Periodic],
    val triggers: IndexedSeq[Trigger],
    val registers: Int,
    val texts: Int,
    loginTemplate: Template[CallScope],
    ssh: Option[(Slot, Slot)],
    forgotten: IndexedSeq[Slot],
    walks: Int,
    /** What the profile keeps of a push; empty: it takes none. */
    pushKeeps: IndexedSeq[Keep],
    val pushedAt: Int,
    /** An MQTT device's connection; None for HTTP devices. */
    val mqtt: Option[MqttOptions],
    /** Kept values a device starts with, from its identity row; and the register that says it has them all. */
    seeds: Seeds,
    /** The random pause before a booted device's first call; None: none. */
    val startDelayed: Option[Spread])
    extends DeviceProfile:
  def login(device: DeviceScope): String = loginTemplate.text(CallScope(device, -1, walks))
  def sshEndpoint(device: DeviceScope): Option[SshEndpoint] = ssh.flatMap { (host, port) =>
    Option(host.text(device)).filter(_.nonEmpty).map(SshEndpoint(_, port.number(device).toInt))
  }
  /** Forgets what the session kept: values back to their defaults, and those the identity row seeds
    * back to the row's; a device that resumed joins afresh next.
    */
  def forget(device: DeviceScope): Unit =
    forgotten.foreach(_.reset(device))
    seeds.plant(device, known = false)

  def resumes(device: DeviceScope): Boolean = resume.isDefined && seeds.known(device)

  /** As after a reboot: every register and text cleared (counters toward a stop, a push waiting),
    * then each kept value at its default, or as the identity row seeds it.
    */
  def boot(device: DeviceScope): Unit =
    java.util.Arrays.fill(device.registers, 0L)
    if device.texts != null then java.util.Arrays.fill(device.texts.asInstanceOf[Array[AnyRef]], null)
    forgotten.foreach(_.reset(device))
    seeds.plant(device, known = true)

  /** The longest a call of the profile waits for its reply, in nanoseconds; 0: none says. */
  val longestTimeout: Long = (join ++ resume ++ messages.flatMap(_.calls) ++ triggers.flatMap(_.calls)).map(_.timeout).maxOption.getOrElse(0L)

  def startDelay(random: RandomGenerator): Long = startDelayed.fold(0L)(_.pick(random))

  def pushed(push: Push, device: DeviceScope): Boolean =
    pushedAt >= 0 && Keep.all(pushKeeps, Reply.Response(200, push.payload), device)

  /** Device `number`'s name before it has joined (its login, the MAC for most profiles): the
    * subject of the client certificate issued for it, and the name its certificate file goes by.
    */
  def identityName(number: Int): String = login(Specimen(number, this))

/** One call a template is rendered for: the device, and the periodic message it is part of (-1 for
  * the join and triggers). Made per call: templates read the device through it.
  *
  * @param walks the register where the profile's random walks start
  */
final class CallScope(val device: DeviceScope, val message: Int, walks: Int) extends Scope:
  /** The call's time, the same wherever a template reads it (a signature over it must match the field). */
  val nowMs: Long = System.currentTimeMillis()
  def random: RandomGenerator = device.random
  def walk(slot: Int): Double = java.lang.Double.longBitsToDouble(device.registers(walks + slot))
  def setWalk(slot: Int, value: Double): Unit = device.registers(walks + slot) = java.lang.Double.doubleToRawLongBits(value)

/** Where a value a profile keeps lives in a device: a register (a number) or a text. */
final case class Slot(name: String, number: Boolean, index: Int, default: String):
  private val defaultNumber = if number then ProfileValues.toLong(default) else 0L

  def text(device: DeviceScope): String =
    if number then java.lang.Long.toString(device.registers(index))
    else
      val t = device.texts(index)
      if t == null then default else t

  def number(device: DeviceScope): Long =
    if number then device.registers(index) else ProfileValues.toLong(text(device))

  /** The text last stored by any device: a value most devices share (a host, a checksum) is kept once. */
  @volatile private var lastText: String = null

  /** Stores what a reply said; false when a number is not one. */
  def store(device: DeviceScope, value: String): Boolean =
    if !number then
      val last = lastText
      device.texts(index) = if value == last then last else { lastText = value; value }
      true
    else
      val n = ProfileValues.parseLong(value)
      if n == null then false
      else
        device.registers(index) = n
        true

  def reset(device: DeviceScope): Unit =
    if number then device.registers(index) = defaultNumber else device.texts(index) = null

  def appendTo(device: DeviceScope, out: java.lang.StringBuilder): Unit =
    if number then out.append(device.registers(index))
    else out.append(text(device))

object ProfileValues:
  /** A whole number from a reply's text ("12", "12.0", " 12 "), or null. */
  def parseLong(text: String): java.lang.Long =
    if text == null then null
    else
      val t = text.trim
      try java.lang.Long.valueOf(t)
      catch
        case _: NumberFormatException =>
          try
            val d = t.toDouble
            if d.isNaN || d.isInfinite then null else java.lang.Long.valueOf(d.toLong)
          catch case _: NumberFormatException => null

  def toLong(text: String): Long = Option(parseLong(text)).fold(0L)(_.longValue)

/** How a value is read out of a reply. */
sealed trait Reading:
  /** The value, or null when the reply does not hold it. */
  def read(reply: Reply.Response): String

object Reading:
  final case class Json(pointer: JsonPointer) extends Reading:
    def read(reply: Reply.Response): String = pointer.read(reply.body)

  /** The first group (or the whole match) of the first match in the body, read as UTF-8 text. */
  final case class Regex(pattern: Pattern) extends Reading:
    def read(reply: Reply.Response): String =
      val m = pattern.matcher(String(reply.body, UTF_8))
      if !m.find() then null else if m.groupCount >= 1 then m.group(1) else m.group()

  final case class Header(name: String) extends Reading:
    def read(reply: Reply.Response): String = reply.header(name)

  /** Lowercase hex of a digest of the body's bytes (`md5`, `sha1`, `sha256`): what an agent checks an archive against. */
  private[profile] final case class Digest(hash: Hash) extends Reading:
    def read(reply: Reply.Response): String =
      val scratch = Scratch.get() // the thread's digester, as a template's md5(...) uses
      val digester = scratch.digester(hash)
      digester.update(reply.body)
      val length = digester.digest(scratch.digest, 0, scratch.digest.length)
      val hex = java.lang.StringBuilder(2 * length)
      Encoding.appendHex(hex, scratch.digest, length)
      hex.toString

/** A value kept from a reply: where it is read from, where it goes, and whether the reply is
  * unusable without it (no default).
  */
final case class Keep(slot: Slot, reading: Reading, required: Boolean):
  /** False when a required value is missing or is not what its type says. */
  def apply(reply: Reply.Response, device: DeviceScope): Boolean =
    val value = reading.read(reply)
    if value == null then !required
    else slot.store(device, value) || !required

object Keep:
  /** Stores every value `keeps` reads from the reply; false when any required one is unusable. */
  def all(keeps: IndexedSeq[Keep], reply: Reply.Response, device: DeviceScope): Boolean =
    var usable = true
    var i = 0
    while i < keeps.size do
      usable = keeps(i)(reply, device) && usable
      i += 1
    usable

/** What a status a call does not expect means: for every call of a profile (`reactions`), or one call's own. */
enum Reaction:
  case Reauthenticate, Rejoin, RetryAfter, Failed
  /** The device stops itself: at once, or at the `after`th such reply since the call last succeeded,
    * counted in `counter` (`stop after 5`: an agent that exits after five 404s on its poll).
    */
  case Stop(after: Int, reason: String, counter: LateRegister)

object Reaction:
  /** The reactions a profile's file may name, as it names them. */
  val Keys: Map[String, Reaction] =
    Map("reauthenticate" -> Reauthenticate, "rejoin" -> Rejoin, "retry-after" -> RetryAfter, "failed" -> Failed)

/** A register a device keeps for the profile whose place is known only once the whole profile is
  * compiled (after the random walks every template may add): set before any device exists.
  */
final class LateRegister:
  var index: Int = -1

/** Kept values seeded from the identity row: a known device starts with them, and with `known` set,
  * which says it joins with `resume`; a device whose row leaves one empty is new, and joins.
  *
  * @param rows each device's seeded values, by its number, in the order of `slots`
  */
final class Seeds(slots: IndexedSeq[Slot], rows: Int => IndexedSeq[String], known: LateRegister):
  /** Stores the row's values; `known`: the device resumes if the row holds them all (at boot, not after a forget). */
  def plant(device: DeviceScope, known: Boolean): Unit =
    if slots.nonEmpty then
      val row = rows(device.number)
      var all = true
      var i = 0
      while i < slots.size do
        val value = row(i)
        if value.isEmpty then all = false else slots(i).store(device, value)
        i += 1
      if this.known.index >= 0 then device.registers(this.known.index) = if known && all then 1 else 0

  def known(device: DeviceScope): Boolean = known.index >= 0 && device.registers(known.index) == 1

object Seeds:
  val None: Seeds = Seeds(IndexedSeq.empty, _ => IndexedSeq.empty, LateRegister())

/** What a call makes of a reply's status.
  *
  * @param expected the statuses that are success; null: any 2xx. A 2xx not expected is a failure
  *                 (`unexpectedStatus`); an expected status other than 2xx is counted ok
  * @param own the call's own reactions, which come first
  * @param notAdmitted statuses that mean "not yet" (at join)
  * @param shared the profile's reactions (401, 403, 429 and 503 have defaults); any other status fails
  */
final class Answers(expected: Array[Boolean], own: Map[Int, Reaction], notAdmitted: Set[Int], shared: Map[Int, Reaction]):
  def expects(status: Int): Boolean = if expected == null then status / 100 == 2 else status < expected.length && expected(status)
  def reaction(status: Int): Option[Reaction] = own.get(status)
  def otherwise(status: Int): Option[Reaction] = if notAdmitted(status) then None else Some(shared.getOrElse(status, Reaction.Failed))
  /** Every counter a `stop after N` of this call keeps. */
  val counters: IndexedSeq[LateRegister] = (own.values ++ shared.values).collect { case Reaction.Stop(_, _, c) if c != null => c }.toIndexedSeq
  /** Whether the default: any 2xx is success and means it, and no reply is counted toward a stop. */
  def plain: Boolean = expected == null && own.isEmpty && counters.isEmpty

/** A call rendered from templates.
  *
  * @param headers rendered header lines; constant ones rendered once
  * @param checks conditions on the reply, after its values are kept: the call fails (`checkFailed`) unless each renders `true`
  * @param timeout how long the call waits for its reply, in nanoseconds; 0: the run's request timeout
  * @param notes what `profile check` says of it beyond its request (what it expects, its retries)
  */
final class TemplateCall(
    val kind: MessageKind,
    method: String,
    path: Template[CallScope],
    headers: Either[Array[Byte], IndexedSeq[(Array[Byte], Template[CallScope])]],
    body: Option[Template[CallScope]],
    keeps: IndexedSeq[Keep],
    answers: Answers,
    message: Int,
    walks: Int,
    qos: Int = 0,
    retain: Boolean = false,
    override val toUrl: Boolean = false,
    checks: IndexedSeq[Template[CallScope]] = IndexedSeq.empty,
    override val retry: Option[Retry] = None,
    override val timeout: Long = 0,
    val notes: String = "")
    extends Call:
  import TemplateCall.*

  def render(device: DeviceScope): Request =
    val scope = CallScope(device, message, walks)
    var unsafe: String = null
    val lines = headers match
      case Left(constant) => constant
      case Right(templates) =>
        val out = java.lang.StringBuilder()
        templates.foreach { (name, value) =>
          out.append(String(name, US_ASCII))
          val from = out.length
          value.render(scope, out)
          // A value kept from a reply may hold a line break: sent, it would end this header and start another.
          if unsafe == null && breaksLine(out, from) then unsafe = s"header ${String(name, US_ASCII).stripSuffix(": ")} holds CR, LF or NUL"
          out.append("\r\n")
        }
        out.toString.getBytes(UTF_8)
    val bytes = body match
      case Some(template) => template.bytes(scope)
      case None => Empty
    Request(kind, method, path.text(scope), lines, bytes, qos, retain, unsafe, timeout)

  override val keepsNothing: Boolean = keeps.isEmpty && checks.isEmpty && answers.plain

  override def expects(status: Int): Boolean = answers.expects(status)

  def read(reply: Reply, device: DeviceScope): Outcome = reply match
    case r: Reply.Response =>
      answers.reaction(r.status) match
        case Some(reaction) => react(reaction, r, device)
        case None =>
          if answers.expects(r.status) then
            answers.counters.foreach(c => device.registers(c.index) = 0)
            if !Keep.all(keeps, r, device) then Unreadable
            else if !passes(device) then CheckFailed
            else Outcome.Ok
          else if r.ok then UnexpectedStatus
          else answers.otherwise(r.status).fold(Outcome.NotAdmitted)(react(_, r, device))
    case _: Reply.Failed => Outcome.Failed

  private def react(reaction: Reaction, r: Reply.Response, device: DeviceScope): Outcome = reaction match
    case Reaction.Reauthenticate => Outcome.Reauthenticate
    case Reaction.Rejoin => Outcome.Rejoin
    case Reaction.RetryAfter => Outcome.RetryAfter(retryAfter(r.header("Retry-After")))
    case Reaction.Failed => Outcome.Failed
    case Reaction.Stop(after, reason, counter) =>
      if after <= 1 then Outcome.Stop(reason)
      else
        val seen = device.registers(counter.index) + 1
        device.registers(counter.index) = seen
        if seen >= after then Outcome.Stop(reason) else Outcome.Failed

  private def passes(device: DeviceScope): Boolean =
    checks.isEmpty || {
      val scope = CallScope(device, message, walks)
      checks.forall(_.text(scope) == "true")
    }

object TemplateCall:
  private val Empty = Array.emptyByteArray
  private val Unreadable = Outcome.Unusable(FailureReason.Unreadable)
  private val CheckFailed = Outcome.Unusable(FailureReason.CheckFailed)
  private val UnexpectedStatus = Outcome.Unusable(FailureReason.UnexpectedStatus)

  /** Whether `text` from `from` on holds CR, LF or NUL: bytes no header value may carry (RFC 9110 §5.5). */
  def breaksLine(text: CharSequence, from: Int = 0): Boolean =
    var i = from
    while i < text.length && { val c = text.charAt(i); c != '\r' && c != '\n' && c != 0 } do i += 1
    i < text.length

  /** Retry-After in nanoseconds: delay-seconds or an HTTP date; 0 (the device's backoff) when absent or unreadable. */
  def retryAfter(value: String): Long =
    if value == null then 0
    else
      val seconds = ProfileValues.parseLong(value)
      if seconds != null then seconds.longValue.max(0) * 1_000_000_000L
      else
        try (ZonedDateTime.parse(value.trim, DateTimeFormatter.RFC_1123_DATE_TIME).toInstant.toEpochMilli - Instant.now.toEpochMilli).max(0) * 1_000_000L
        catch case _: java.time.format.DateTimeParseException => 0

/** A device as it is before it joins: Reporting, just started, nothing kept yet. `profile check`
  * renders its calls; a certificate is named after it.
  */
final class Specimen(val number: Int, profile: DeviceProfile) extends DeviceScope:
  def state: DeviceState = DeviceState.Reporting
  def uptimeS: Long = 0
  val random: RandomGenerator = SplittableRandom(number)
  val registers: Array[Long] = new Array[Long](profile.registers)
  val texts: Array[String] = if profile.texts == 0 then null else new Array[String](profile.texts)
  profile.boot(this) // every kept value at its default, or as its identity row seeds it
