package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigValueFactory}
import fleetsim.device.Spread

private[profile] object Schedules:
  import ProfileChecks.*

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
