package fleetsim

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigObject, ConfigOrigin, ConfigParseOptions, ConfigValue}

import java.nio.file.Path
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.jdk.CollectionConverters.*

/** What a HOCON file a user writes (a config file, a device profile, next a scenario) is held to,
  * said the same way for each: one line, the file:line of the value at fault first, "did you mean"
  * on a misspelt key. A reader makes one with its own kind of error.
  */
class HoconChecks(error: String => Exception):
  import HoconChecks.where

  def fail(value: ConfigValue, message: String): Nothing = throw error(s"${where(value)}: $message")
  def failAt(config: Config, path: String, message: String): Nothing = fail(config.getValue(path), message)

  /** The keys of a block in the file's order, each checked against the ones it may have. */
  def keysOf(block: ConfigObject, allowed: Set[String], what: String): Seq[String] =
    val keys = HoconChecks.inFileOrder(block)
    for key <- keys if !allowed(key) do
      val hint = Suggest.closest(key, allowed.toSeq).fold("")(k => s" (did you mean $k?)")
      fail(block.get(key), s"unknown key '$key' in $what$hint; it may have ${allowed.toSeq.sorted.mkString(", ")}")
    keys

  def blockAt(config: Config, path: String, what: String): ConfigObject = config.getValue(path) match
    case o: ConfigObject => o
    case v => fail(v, s"$what must be a block { ... }")

  def string(config: Config, path: String): String =
    try config.getString(path)
    catch case _: ConfigException.WrongType => failAt(config, path, s"$path must be one value, like \"text\"")

  def boolean(config: Config, path: String, what: String): Boolean =
    try config.getBoolean(path) catch case _: ConfigException => failAt(config, path, s"$what.$path must be true or false")

object HoconChecks:
  /** file:line of a value, as a user would look for it. */
  def where(value: ConfigValue): String = place(value.origin)

  /** file:line of an origin: its file, resource or URL, else its description (which says the line itself). */
  def place(origin: ConfigOrigin): String =
    Option(origin.filename).orElse(Option(origin.resource)).orElse(Option(origin.url).map(_.toString)) match
      case Some(file) if origin.lineNumber > 0 => s"$file:${origin.lineNumber}"
      case Some(file) => file
      case None => origin.description

  /** A block's keys in the order the file has them. */
  def inFileOrder(block: ConfigObject): Seq[String] = block.keySet.asScala.toSeq.sortBy(k => block.get(k).origin.lineNumber)

  /** A positive duration at `path`, or None when it is not one — nor one without its unit, which
    * HOCON would read as milliseconds (`for = 30` is not 30 ms to anyone who writes it).
    */
  def positiveDuration(config: Config, path: String): Option[FiniteDuration] =
    try
      if !hasUnit(config, path) then None
      else Some(config.getDuration(path).toNanos).filter(_ > 0).map(Duration.fromNanos)
    catch case _: ConfigException => None

  /** The duration at `path` is written with its unit (`30s`, not `30`). */
  def hasUnit(config: Config, path: String): Boolean = !unitless(String.valueOf(config.getValue(path).unwrapped))

  /** A duration written without its unit, which HOCON would read as milliseconds. */
  def unitless(text: String): Boolean = !text.trim.lastOption.exists(_.isLetter)

  /** Why `text`, a duration without its unit, is refused, and the fix. */
  def noUnit(text: String): String = s"'$text' has no unit: write ${text.trim}s for seconds, or a unit of ms, m, h, d"

  /** Why a file could not be read as HOCON. */
  enum Unreadable:
    /** Not UTF-8 text, or not a file that can be read: the problem with its file:line. */
    case NotText(problem: String)
    /** Text, but not HOCON: the parser's own words, with their file:line. */
    case NotHocon(problem: String)

  /** A user's file read strictly: UTF-8 checked first ([[TextFiles.utf8]]), so a stray byte is named, never replaced. */
  def read(file: Path): Either[Unreadable, Config] =
    TextFiles.utf8(file) match
      case Left(problem) => Left(Unreadable.NotText(problem))
      case Right(_) =>
        try Right(ConfigFactory.parseFile(file.toFile, ConfigParseOptions.defaults.setAllowMissing(false)))
        catch case e: ConfigException => Left(Unreadable.NotHocon(e.getMessage))
