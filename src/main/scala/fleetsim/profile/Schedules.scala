package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigObject, ConfigValueFactory}
import fleetsim.device.{DeviceScope, First, Periodic, Spread, Trigger}

/** When a profile's devices call: each message every interval (its jitter, its first round, the
  * failed rounds it allows), each trigger when a value a reply or push kept says the device is
  * behind, and a random pause before a booted device's first call.
  */
private[profile] final class Schedules(root: Config, outline: Outline, calls: CallCompiler, kept: KeptValues):
  import ProfileChecks.*
  import Schedules.*
  import outline.{CallKeys, callBlocks, messageBlocks, triggerBlocks}

  /** Each trigger's `when`, read before any call is compiled: templates may name the value a trigger sets itself. */
  def whens(): Seq[When] = triggerBlocks.map { (name, t) =>
    val c = t.toConfig
    if !c.hasPath("when") then fail(t, s"triggers.$name has no when: say which value, like when { newer = configSeq, than = appliedConfigSeq }")
    val when = blockAt(c, "when", s"triggers.$name.when")
    val w = when.toConfig
    val (test, mine) = keysOf(when, Set("newer", "than", "differs", "from"), s"triggers.$name.when").toSet match
      case k if k == Set("newer", "than") => ("newer", "than")
      case k if k == Set("differs", "from") => ("differs", "from")
      case _ => fail(when, s"triggers.$name.when is { newer = VALUE, than = OWN } (numbers) or { differs = VALUE, from = OWN }")
    val announced = kept.slotNamed(w, test, s"triggers.$name.when.$test")
    if test == "newer" && !announced.number then failAt(w, test, s"triggers.$name.when: newer compares numbers, and '${announced.name}' is text; use differs/from")
    val applied = kept.own(string(w, mine), announced)
    When(name, t, test == "newer", announced, applied)
  }

  /** The messages, each a round of calls on its schedule. */
  def messages(): IndexedSeq[Periodic] = messageBlocks.zipWithIndex.map { case ((name, m), i) =>
    keysOf(m, CallKeys ++ Set("interval", "jitter", "liveness", "max-failures", "requests", "first"), s"messages.$name")
    val c = m.toConfig
    val k = calls.kind(name, periodic = true, m)
    val round = callBlocks(m, "requests", s"messages.$name").map { block =>
      if block ne m then keysOf(block, CallKeys, s"messages.$name.requests")
      if block.containsKey("name") then
        fail(block.get("name"), s"messages.$name: a message's calls are counted under the message's name ($name): rename the block to name them, and remove name")
      calls.call(block, _ => k, s"messages.$name", atJoin = false, message = i, Set.empty)
    }
    if !c.hasPath("interval") then fail(m, s"messages.$name has no interval: like interval = 30s, or the name of a number kept at join (seconds)")
    val every =
      try Some(c.getDuration("interval").toNanos)
      catch case _: ConfigException.BadValue => None
    every.foreach(nanos => if nanos <= 0 then failAt(c, "interval", s"messages.$name.interval must be positive"))
    val interval: DeviceScope => Long = every match
      case Some(nanos) => _ => nanos
      case None =>
        val slot = kept.resolved(kept.slotNamed(c, "interval", s"messages.$name.interval"))
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
    val first = if !c.hasPath("first") then First.RandomPhase else string(c, "first").trim match
      case "random-phase" => First.RandomPhase
      case "at-join" => First.AtJoin
      case After(range) =>
        First.After(spread(ConfigFactory.empty.withValue("first", ConfigValueFactory.fromAnyRef(range).withOrigin(c.getValue("first").origin)), "first",
          s"messages.$name.first after"))
      case other => failAt(c, "first", s"messages.$name.first must be at-join, random-phase or \"after 5s..10s\" (got '$other')")
    Periodic(k, round.toIndexedSeq, interval, jitter, maxFailures, first, every)
  }.toIndexedSeq

  /** The triggers, each the calls that bring a device up to date when its `when` says it is behind. */
  def triggers(whens: Seq[When]): IndexedSeq[Trigger] = whens.map { when =>
    val (name, t) = (when.name, when.block)
    keysOf(t, CallKeys ++ Set("when", "calls"), s"triggers.$name")
    val blocks = callBlocks(t, "calls", s"triggers.$name")
    val compiled = blocks.zipWithIndex.map { (block, i) =>
      if block ne t then keysOf(block, CallKeys, s"triggers.$name.calls")
      val callName =
        if i == 0 && !block.toConfig.hasPath("name") then name
        else if block.toConfig.hasPath("name") then string(block.toConfig, "name")
        else fail(block, s"triggers.$name.calls: each call after the first needs a name (its message kind), like name = applied")
      calls.call(block, v => calls.kind(callName, periodic = false, v), s"triggers.$name", atJoin = false, message = -1, Set.empty)
    }
    val (announced, applied) = (kept.resolved(when.announced), kept.resolved(when.applied))
    val setsItself = blocks.exists(b => Option(b.get("keep")).collect { case k: ConfigObject => k.containsKey(applied.name) }.getOrElse(false))
    val due: DeviceScope => Boolean =
      if when.newer then d => announced.number(d) > applied.number(d)
      else d => announced.text(d) != applied.text(d)
    val record: DeviceScope => Unit = if setsItself then _ => () else d => applied.store(d, announced.text(d))
    Trigger(compiled.toIndexedSeq, due, record)
  }.toIndexedSeq

  /** The random pause before a booted device's first call, if the profile says one. */
  def startDelay: Option[Spread] = Option.when(root.hasPath("start-delay"))(spread(root, "start-delay", "start-delay"))

private[profile] object Schedules:
  import ProfileChecks.*

  /** A trigger's `when`: the value a reply or push announces, and the device's own, compared as numbers (`newer`) or texts. */
  final case class When(name: String, block: ConfigObject, newer: Boolean, announced: Slot, applied: Slot)

  private val After = "after (.+)".r

  /** A length of time, or a range a device picks from at random: `5s`, `2s..15s`. */
  def spread(c: Config, path: String, what: String): Spread =
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
