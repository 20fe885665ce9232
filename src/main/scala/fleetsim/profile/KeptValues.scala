package fleetsim.profile

import com.typesafe.config.{Config, ConfigObject}
import fleetsim.HoconChecks.inFileOrder
import fleetsim.device.Registers

import java.util.regex.{Pattern, PatternSyntaxException}
import scala.collection.mutable
import scala.jdk.CollectionConverters.*

/** What a profile's devices keep, and where: every value a reply or a push keeps, declared before
  * any template is compiled so that templates can name it, and the layout of a device's registers
  * — its own three a message, then the kept numbers, then the templates' random walks, then the
  * registers placed once all those are known (`stop after N` counters, a known device's flag).
  *
  * @param seeded the kept values a device's identity row gives it at boot
  */
private[profile] final class KeptValues(root: Config, outline: Outline, seeded: Set[String]):
  import ProfileChecks.*
  import outline.{callBlocks, messageBlocks, triggerBlocks}

  private final case class Declared(slot: Slot, explicitDefault: Boolean, keptAtJoin: Boolean)
  private val declared = mutable.LinkedHashMap.empty[String, Declared]
  private var numbers = 0
  private var textCount = 0
  private val late = mutable.ArrayBuffer.empty[LateRegister]

  // Declares every kept value before any template is compiled, so that templates can name them.
  private val profileBase: Int =
    Option.when(root.hasPath("join"))(blockAt(root, "join", "join")).foreach(declareKeeps(_, "join", atJoin = true))
    Option.when(root.hasPath("resume"))(blockAt(root, "resume", "resume")).foreach(declareKeeps(_, "resume", atJoin = true))
    for (name, m) <- messageBlocks; c <- callBlocks(m, "requests", s"messages.$name") do declareKeeps(c, s"messages.$name", atJoin = false)
    for (name, t) <- triggerBlocks; c <- callBlocks(t, "calls", s"triggers.$name") do declareKeeps(c, s"triggers.$name", atJoin = false)
    if root.hasPath("pushes") then declareKeeps(blockAt(root, "pushes", "pushes"), "pushes", atJoin = false)
    Registers.profileBase(messageBlocks.size)

  private def declareKeeps(call: ConfigObject, what: String, atJoin: Boolean): Unit =
    Option(call.get("keep")).foreach {
      case keep: ConfigObject =>
        for key <- inFileOrder(keep) do
          val spec = keep.get(key) match
            case o: ConfigObject => o
            case v => fail(v, s"$what.keep.$key must be a block, like { json = \"/token\" }")
          keysOf(spec, Set("json", "regex", "header", "digest", "type", "default"), s"$what.keep.$key")
          if spec.containsKey("digest") && !KeptValues.Digests.contains(String.valueOf(spec.get("digest").unwrapped)) then
            fail(spec.get("digest"), s"$what.keep.$key.digest must be md5, sha1 or sha256 (got '${spec.get("digest").unwrapped}')")
          declare(key, spec, atJoin, s"$what.keep.$key")
      case v => fail(v, s"$what.keep must be a block of values to keep, like { token { json = \"/token\" } }")
    }

  private def declare(name: String, spec: ConfigObject, atJoin: Boolean, what: String): Slot =
    val c = spec.toConfig
    // A digest is hex: text unless said otherwise, and never a number.
    val number = if !c.hasPath("type") then !c.hasPath("digest") else string(c, "type") match
      case "number" if c.hasPath("digest") => failAt(c, "type", s"$what: a digest is text (hex): remove type = number")
      case "number" => true
      case "text" => false
      case other => failAt(c, "type", s"$what.type must be number or text (got '$other')")
    val default = if c.hasPath("default") then String.valueOf(c.getValue("default").unwrapped) else if number then "0" else ""
    if number && c.hasPath("default") && ProfileValues.parseLong(default) == null then
      failAt(c, "default", s"$what.default must be a whole number, as the value is a number (or say type = text)")
    declared.get(name) match
      case Some(known) =>
        if known.slot.number != number then
          fail(spec, s"'$name' is kept as a ${if known.slot.number then "number" else "text"} elsewhere: give it one type everywhere")
        declared(name) = known.copy(explicitDefault = known.explicitDefault || c.hasPath("default"), keptAtJoin = known.keptAtJoin || atJoin)
        known.slot
      case None =>
        val slot = newSlot(name, number, default)
        // A value the identity row seeds is there from boot, like one with a default.
        declared(name) = Declared(slot, c.hasPath("default") || seeded(name), atJoin)
        slot

  private def newSlot(name: String, number: Boolean, default: String): Slot =
    if number then { numbers += 1; Slot(name, true, -numbers, default) } else { textCount += 1; Slot(name, false, textCount - 1, default) }

  /** A value the device sets itself (a trigger's `than`), unless a reply keeps it too; it starts at its default. */
  def own(name: String, like: Slot): Slot =
    declared.get(name).map { d =>
      declared(name) = d.copy(explicitDefault = true)
      d.slot
    }.getOrElse {
      val slot = newSlot(name, like.number, if like.number then "0" else "")
      declared(name) = Declared(slot, explicitDefault = true, keptAtJoin = false)
      slot
    }

  /** The kept value the setting at `path` names. */
  def slotNamed(config: Config, path: String, what: String): Slot =
    val name = string(config, path)
    declared.get(name).map(_.slot).getOrElse {
      val hint = fleetsim.Suggest.closest(name, declared.keys.toSeq).fold("")(k => s" (did you mean $k?)")
      failAt(config, path, s"$what names '$name', which no reply keeps$hint; declare it in a keep block")
    }

  /** Where the kept value `name` lives in a device. */
  def slot(name: String): Slot = resolved(declared(name).slot)

  /** Every kept value, as a forget puts them back to their defaults. */
  def forgotten: IndexedSeq[Slot] = declared.values.map(d => resolved(d.slot)).toIndexedSeq

  /** The names of the kept values, as templates may name them. */
  def names: Iterable[String] = declared.keys

  /** A kept value as a call's template reads it, or why it cannot there; None: no reply keeps it.
    *
    * @param atJoin in the join: only values with a default (the first join has read nothing yet)
    * @param replied read once the reply's values are kept (a check): every kept value may be named
    */
  def variable(name: String, atJoin: Boolean, replied: Boolean): Option[Either[String, Variable[CallScope]]] =
    declared.get(name).map { d =>
      val unread = !replied && !d.explicitDefault && (atJoin || !d.keptAtJoin)
      if unread then
        Left(s"'$name' is read from a reply ${if atJoin then "and the first join has read none yet" else "after the join, so the first calls would have no value for it"}: give it a default in its keep block")
      else
        val slot = resolved(d.slot)
        Right((s: CallScope, out: java.lang.StringBuilder) => slot.appendTo(s.device, out))
    }

  /** How each kept value stands in when a JSON body is checked ([[JsonBody]]). */
  def samples: Map[String, String] = declared.view.mapValues(d => if d.slot.number then JsonBody.Number else JsonBody.Text).toMap

  /** The values a call's reply (or a push) is read for, each with the way it is read. */
  def keepsOf(block: ConfigObject, what: String): IndexedSeq[Keep] =
    Option(block.get("keep")).collect { case k: ConfigObject => k }.toIndexedSeq.flatMap { keep =>
      keep.keySet.asScala.toSeq.map { key =>
        val spec = keep.get(key).asInstanceOf[ConfigObject].toConfig
        val ways = Seq("json", "regex", "header", "digest").filter(spec.hasPath)
        if ways.size != 1 then fail(keep.get(key), s"$what.keep.$key: say how to read it with one of json = \"/pointer\", regex = \"id: (\\\\S+)\", header = \"X-Name\", digest = sha256")
        val reading = ways.head match
          case "json" => Reading.Json(JsonPointer.compile(string(spec, "json")).fold(e => failAt(spec, "json", s"$what.keep.$key: $e"), t => t))
          case "regex" =>
            try Reading.Regex(Pattern.compile(string(spec, "regex"), Pattern.MULTILINE))
            catch case e: PatternSyntaxException => failAt(spec, "regex", s"$what.keep.$key: bad regular expression: ${e.getDescription} at ${e.getIndex}")
          case "digest" => Reading.Digest(KeptValues.Digests(string(spec, "digest")))
          case _ => Reading.Header(string(spec, "header"))
        Keep(slot(key), reading, required = !spec.hasPath("default"))
      }
    }

  // ---- the layout ----
  // Registers: the device's three per message, then numbers, then walks. Numbers were numbered -1, -2, ...
  // while they were declared; `resolved` gives each its place once all are known.

  /** The texts a device keeps. */
  def texts: Int = textCount

  /** The register where the templates' random walks start: after the kept numbers, all declared by then. */
  def walkBase: Int = profileBase + numbers

  def resolved(slot: Slot): Slot = if slot.number then slot.copy(index = profileBase - slot.index - 1) else slot

  /** A register placed once the whole profile is compiled ([[placeLate]]). */
  def lateRegister(): LateRegister =
    val register = LateRegister()
    late += register
    register

  /** Places the late registers from `base` on, last; the number of registers a device has. */
  def placeLate(base: Int): Int =
    for (register, i) <- late.zipWithIndex do register.index = base + i
    base + late.size

private[profile] object KeptValues:
  /** The digests a reply's body can be kept as, by the names a profile gives them. */
  val Digests: Map[String, Hash] = Map("md5" -> Hash.Md5, "sha1" -> Hash.Sha1, "sha256" -> Hash.Sha256)
