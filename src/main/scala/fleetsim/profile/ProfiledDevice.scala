package fleetsim.profile

import fleetsim.device.*
import fleetsim.transport.{MessageKind, Push, Reply, Request, SshEndpoint}
import fleetsim.transport.mqtt.MqttOptions

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import java.time.format.DateTimeFormatter
import java.time.{Instant, ZonedDateTime}
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import java.util.regex.Pattern

/** A device profile read from a file ([[ProfileLoader]]): calls rendered from templates, replies
  * read by JSON pointer, regular expression or header into the device's registers and texts.
  */
final class ProfiledDevice(
    val name: String,
    val kinds: IndexedSeq[MessageKind],
    val join: Option[Call],
    val messages: IndexedSeq[Periodic],
    val triggers: IndexedSeq[Trigger],
    val registers: Int,
    val texts: Int,
    loginTemplate: Template[CallScope],
    ssh: Option[(Slot, Slot)],
    forgotten: IndexedSeq[Slot],
    walks: Int,
    /** The transport the profile asks for (http, ssh, mqtt); the command line's wins, but for mqtt. */
    val transport: Option[String],
    /** What the profile keeps of a push; empty: it takes none. */
    pushKeeps: IndexedSeq[Keep],
    val pushedAt: Int,
    /** An MQTT device's connection; None for HTTP devices. */
    val mqtt: Option[MqttOptions])
    extends DeviceProfile:
  def login(device: DeviceScope): String = loginTemplate.text(CallScope(device, -1, walks))
  def sshEndpoint(device: DeviceScope): Option[SshEndpoint] = ssh.flatMap { (host, port) =>
    Option(host.text(device)).filter(_.nonEmpty).map(SshEndpoint(_, port.number(device).toInt))
  }
  def forget(device: DeviceScope): Unit = forgotten.foreach(_.reset(device))

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

/** What a status other than 2xx means, for every call of a profile. */
enum Reaction(val key: String):
  case Reauthenticate extends Reaction("reauthenticate")
  case Rejoin extends Reaction("rejoin")
  case RetryAfter extends Reaction("retry-after")
  case Failed extends Reaction("failed")

/** A call rendered from templates.
  *
  * @param headers rendered header lines; constant ones rendered once
  * @param notAdmitted statuses that mean "not yet" (at join)
  */
final class TemplateCall(
    val kind: MessageKind,
    method: String,
    path: Template[CallScope],
    headers: Either[Array[Byte], IndexedSeq[(Array[Byte], Template[CallScope])]],
    body: Option[Template[CallScope]],
    keeps: IndexedSeq[Keep],
    reactions: Map[Int, Reaction],
    notAdmitted: Set[Int],
    message: Int,
    walks: Int,
    qos: Int = 0,
    retain: Boolean = false,
    override val toUrl: Boolean = false)
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
    Request(kind, method, path.text(scope), lines, bytes, qos, retain, unsafe)

  override val keepsNothing: Boolean = keeps.isEmpty

  def read(reply: Reply, device: DeviceScope): Outcome = reply match
    case r: Reply.Response if r.ok => if Keep.all(keeps, r, device) then Outcome.Ok else Outcome.Unreadable
    case r: Reply.Response if notAdmitted(r.status) => Outcome.NotAdmitted
    case r: Reply.Response =>
      reactions.getOrElse(r.status, Reaction.Failed) match
        case Reaction.Reauthenticate => Outcome.Reauthenticate
        case Reaction.Rejoin => Outcome.Rejoin
        case Reaction.RetryAfter => Outcome.RetryAfter(retryAfter(r.header("Retry-After")))
        case Reaction.Failed => Outcome.Failed
    case _: Reply.Failed => Outcome.Failed

object TemplateCall:
  private val Empty = Array.emptyByteArray

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
  profile.forget(this) // every kept value at its default
