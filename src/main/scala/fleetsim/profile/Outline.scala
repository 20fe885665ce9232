package fleetsim.profile

import com.typesafe.config.{Config, ConfigList, ConfigObject, ConfigUtil}
import fleetsim.HoconChecks.inFileOrder

import scala.jdk.CollectionConverters.*

/** A profile's outline, read before any of it is compiled: the top-level keys its transport's
  * section lets it have (checked first), the keys a call may have, its messages and triggers in the
  * file's order with the blocks of their calls, and every name a reply keeps.
  */
private[profile] final class Outline(root: Config, val section: ProfileSection):
  import Outline.HttpKeys
  import ProfileChecks.*

  val BodyKeys: Seq[String] = section.bodyKeys
  val CallKeys: Set[String] = Set("name") ++ section.targetKeys ++ HttpKeys ++ BodyKeys + "retry"
  keysOf(root.root, Set("name", "transport", "identity", "constants", "messages", "triggers", "limits", "start-delay", "timeout") ++ section.keys,
    section.described)

  lazy val messageBlocks: Seq[(String, ConfigObject)] = namedBlocks("messages")
  lazy val triggerBlocks: Seq[(String, ConfigObject)] = namedBlocks("triggers")

  /** The named blocks inside `path`, in the file's order. */
  private def namedBlocks(path: String): Seq[(String, ConfigObject)] =
    if !root.hasPath(path) then Nil
    else
      val block = blockAt(root, path, path)
      inFileOrder(block).map(k => k -> blockAt(block.toConfig, ConfigUtil.quoteString(k), s"$path.$k"))

  /** The call blocks of a message or trigger: itself, or each entry of its `requests`/`calls` list. */
  def callBlocks(block: ConfigObject, list: String, what: String): Seq[ConfigObject] =
    Option(block.get(list)) match
      case Some(l: ConfigList) =>
        if l.isEmpty then fail(l, s"$what.$list needs at least one request")
        // Its calls are the list's: a call's own key beside the list would be read by none of them.
        for key <- (CallKeys - "name").toSeq.sorted if block.containsKey(key) do
          fail(block.get(key), s"$what has both $list and $key: put $key in the calls of $list")
        l.asScala.toSeq.map {
          case o: ConfigObject => o
          case v => fail(v, s"each of $what.$list is a block { method, path, ... }")
        }
      case Some(v) => fail(v, s"$what.$list must be a list [ { ... }, ... ]")
      case None => Seq(block)

  /** Every name a reply keeps, read before anything is declared: an identity.csv column named like one seeds it. */
  def keptNames: Set[String] =
    val blocks = Seq("join", "resume", "pushes").filter(root.hasPath).map(p => root.getValue(p)).collect { case o: ConfigObject => o } ++
      (messageBlocks ++ triggerBlocks).flatMap((_, b) => Seq(b) ++ Option(b.get("requests")).orElse(Option(b.get("calls"))).toSeq.flatMap {
        case l: ConfigList => l.asScala.collect { case o: ConfigObject => o }
        case _ => Nil
      })
    blocks.flatMap(b => Option(b.get("keep")).collect { case k: ConfigObject => k.keySet.asScala }.getOrElse(Nil)).toSet

private[profile] object Outline:
  /** What a call to a path or url may have and a publish may not. */
  val HttpKeys: Set[String] = Set("method", "headers", "keep", "expect", "reactions", "check", "timeout", "form-encoding")
