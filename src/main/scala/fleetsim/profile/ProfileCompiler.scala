package fleetsim.profile

import com.typesafe.config.Config

import java.nio.file.Path

/** One profile compiled, read once: its outline, who its devices are, what they keep, its calls,
  * when they are made, and its transport's section — read in that order, so that of several
  * mistakes a profile is always told the same one first.
  */
private[profile] final class ProfileCompiler(root: Config, context: FleetContext, base: Option[Path], section: ProfileSection):
  import ProfileChecks.*

  private val slots = Slots()
  private val outline = Outline(root, section)
  private val name: String = if root.hasPath("name") then string(root, "name") else "profile"
  private val identity = Identity(root, context.fleet, base, outline, slots)
  private val kept = KeptValues(root, outline, identity.seededColumns.map(_._1).toSet)
  private val calls = CallCompiler(root, outline, identity, kept, slots, context.sshKey)
  private val schedules = Schedules(root, outline, calls, kept)

  val profile: CompiledProfile =
    section.checkKeys(root)
    val joinBlock = Option.when(root.hasPath("join"))(blockAt(root, "join", "join"))
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
    val parts = section.compile(root, identity, kept, calls)
    val pushes = Option.when(root.hasPath("pushes"))(kept.keepsOf(blockAt(root, "pushes", "pushes"), "pushes"))
    // After the walks, which every template compiled so far has counted: when the oldest unacknowledged push came.
    val pushedAt = if pushes.isDefined then kept.walkBase + slots.count else -1
    val startDelay = schedules.startDelay
    val seeds = identity.seeds(kept.slot, if resume.isDefined then kept.lateRegister() else LateRegister())
    // Last, after the walks and the push's register: the registers placed once all are known.
    val registers = kept.placeLate(kept.walkBase + slots.count + pushes.size)
    CompiledProfile(name, calls.kinds, join, resume, messages, triggers, registers, kept.texts,
      parts.login, parts.ssh, kept.forgotten, kept.walkBase, pushes.getOrElse(IndexedSeq.empty), pushedAt,
      parts.mqtt, seeds, startDelay)
