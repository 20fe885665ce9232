package fleetsim

import com.typesafe.config.{Config, ConfigException}

import java.util.concurrent.TimeUnit.MILLISECONDS
import scala.concurrent.duration.FiniteDuration

/** HOCON durations ("30s") as Scala durations, for the settings classes. */
extension (config: Config)
  def finiteDuration(path: String): FiniteDuration =
    // HOCON reads a bare number as milliseconds: `backoff.min = 100` is refused, not 100 ms.
    if !HoconChecks.hasUnit(config, path) then
      val value = config.getValue(path)
      throw ConfigException.BadValue(value.origin, path, HoconChecks.noUnit(String.valueOf(value.unwrapped)))
    FiniteDuration(config.getDuration(path, MILLISECONDS), MILLISECONDS)

/** "host:port" as a pair, or an error naming the setting and the form it takes. */
def hostPort(text: String, setting: String): (String, Int) =
  val at = text.lastIndexOf(':')
  val port = if at > 0 then text.substring(at + 1).toIntOption.filter(p => p > 0 && p <= 65535) else None
  port match
    case Some(p) => (text.substring(0, at).stripPrefix("[").stripSuffix("]"), p)
    case None => throw IllegalArgumentException(s"$setting must look like HOST:PORT, e.g. 127.0.0.1:2222 (got '$text')")

/** "host:port,host:port" as pairs; empty for none. */
def hostPorts(text: String, setting: String): Seq[(String, Int)] =
  text.split(',').map(_.trim).filter(_.nonEmpty).toSeq.map(hostPort(_, setting))
