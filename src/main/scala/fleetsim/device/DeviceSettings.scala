package fleetsim.device

import com.typesafe.config.Config

import fleetsim.finiteDuration
import scala.concurrent.duration.*

/** Exponential backoff with full jitter: the delay before retry n is uniform in
  * [0, min(max, min * 2^n)], so a herd that failed together does not come back together.
  */
final case class BackoffSettings(min: FiniteDuration, max: FiniteDuration):
  require(min > Duration.Zero, "fleetsim.device.backoff.min must be positive")
  require(max >= min, "fleetsim.device.backoff.max must be at least fleetsim.device.backoff.min")

  /** @param failures failures in a row so far (0 for the first retry); u uniform in [0, 1) */
  def delay(failures: Int, u: Double): FiniteDuration =
    val ceiling = (min.toMillis.toDouble * math.pow(2, failures.min(30))).min(max.toMillis.toDouble)
    (ceiling * u).toLong.millis

/** How a device behaves, whatever controller it talks to.
  *
  * @param maxLostHeartbeats failed sends in a row of a message that watches liveness (the heartbeat)
  *                          that send a device to Backoff
  * @param jitter each periodic send moves by up to this fraction of its interval, either way
  */
final case class DeviceSettings(maxLostHeartbeats: Int, jitter: Double, backoff: BackoffSettings):
  require(maxLostHeartbeats >= 1, "fleetsim.device.max-lost-heartbeats must be at least 1")
  require(jitter >= 0 && jitter < 1, "fleetsim.device.jitter must be at least 0 and below 1")

  /** An interval in nanoseconds moved by up to `fraction` of itself either way, at least 1 ms; u uniform in [0, 1). */
  def jittered(nanos: Long, u: Double, fraction: Double = jitter): Long =
    (nanos * (1 + fraction * (2 * u - 1))).toLong.max(1_000_000L)

object DeviceSettings:
  def apply(config: Config): DeviceSettings =
    val c = config.getConfig("fleetsim.device")
    DeviceSettings(
      maxLostHeartbeats = c.getInt("max-lost-heartbeats"),
      jitter = c.getDouble("jitter"),
      backoff = BackoffSettings(c.finiteDuration("backoff.min"), c.finiteDuration("backoff.max")))
