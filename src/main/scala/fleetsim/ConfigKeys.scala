package fleetsim

import com.typesafe.config.{Config, ConfigException, ConfigObject, ConfigOrigin, ConfigUtil, ConfigValue}

import scala.jdk.CollectionConverters.*

/** Finds settings in a user's config that the defaults do not have: a misspelt key would otherwise
  * be ignored in silence and the run would use the default.
  */
object ConfigKeys:
  private val Where = "the settings are listed in reference.conf and by --help"

  /** The first setting of `config` below the path `under` (by line) that `known` does not have, as one
    * line "file:line: what is wrong (did you mean ...?); where to look", or None when all are known.
    * Settings outside `under` are not checked, nor those below an empty object in `known` (free-form
    * entries). Nor is the type of a value (the settings classes say what it should look like); only a
    * block of settings where reference has one value, or one value where it has a block.
    */
  def unknown(config: Config, known: Config, under: String): Option[String] =
    val prefix = ConfigUtil.splitPath(under).asScala.toList
    (objectAt(config.root, prefix), objectAt(known.root, prefix)) match
      case (Some(mine), Some(reference)) =>
        problems(mine, reference, prefix, leaves(reference, prefix).map(_._1))
          .minByOption((origin, path, _) => (line(origin), path))
          .map((origin, _, problem) => s"${HoconChecks.place(origin)}: $problem; $Where")
      case _ => None

  /** Every problem below `path`: where it is, the path it sits at, what is wrong. */
  private def problems(mine: ConfigObject, reference: ConfigObject, path: List[String],
                       known: Seq[List[String]]): Seq[(ConfigOrigin, String, String)] =
    entries(mine).flatMap { (key, value) =>
      val at = path :+ key
      (Option(reference.get(key)), value) match
        case (None, _) =>
          leaves(value, at).map { (leaf, v) =>
            val hint = closest(leaf, known).fold("")(k => s" (did you mean ${show(k)}?)")
            (v.origin, show(leaf), s"unknown setting ${show(leaf)}$hint")
          }
        case (Some(r: ConfigObject), _) if r.isEmpty => Nil // free-form entries
        case (Some(r: ConfigObject), v: ConfigObject) => problems(v, r, at, known)
        case (Some(_: ConfigObject), v) if resolved(v) =>
          Seq((v.origin, show(at), s"${show(at)} is a block of settings, not one value (write ${show(at)}.<setting> = ...)"))
        case (Some(_: ConfigObject), _) => Nil // a substitution: known only once resolved
        case (Some(_), v: ConfigObject) =>
          Seq((v.origin, show(at), s"${show(at)} takes one value, not a block of settings (write ${show(at)} = ...)"))
        case (Some(_), _) => Nil
    }

  /** The object at `path`, if there is one. */
  private def objectAt(root: ConfigObject, path: List[String]): Option[ConfigObject] = path match
    case Nil => Some(root)
    case key :: rest =>
      entries(root).collectFirst { case (`key`, o: ConfigObject) => o }.flatMap(objectAt(_, rest))

  /** An object's entries; none when they are only known after resolving substitutions
    * (`a = ${b} { c = 1 }`), which this check leaves alone.
    */
  private def entries(o: ConfigObject): Seq[(String, ConfigValue)] =
    try o.asScala.toSeq
    catch case _: ConfigException.NotResolved => Nil

  private def resolved(value: ConfigValue): Boolean =
    try { value.valueType; true }
    catch case _: ConfigException.NotResolved => false

  /** The leaf paths below `path` with their values; an empty object counts as a leaf. */
  private def leaves(value: ConfigValue, path: List[String]): Seq[(List[String], ConfigValue)] = value match
    case o: ConfigObject =>
      val below = entries(o).flatMap((k, v) => leaves(v, path :+ k))
      if below.isEmpty then Seq(path -> value) else below
    case _ => Seq(path -> value)

  /** The known path a typo was meant to be: a sibling whose last segment is within two edits (a typo
    * usually sits there), else a whole path within two edits, else the one known path that ends in
    * the same key (a setting put in the wrong section).
    */
  private def closest(path: List[String], known: Seq[List[String]]): Option[List[String]] =
    Suggest.closestBy(path.last, known.filter(k => k.init == path.init))(_.last)
      .orElse(Suggest.closestBy(show(path), known)(show))
      .orElse(known.filter(_.last == path.last) match
        case Seq(only) => Some(only)
        case _ => None)

  private def show(path: List[String]): String = ConfigUtil.joinPath(path.asJava)

  private def line(origin: ConfigOrigin): Int = if origin.lineNumber > 0 then origin.lineNumber else Int.MaxValue
