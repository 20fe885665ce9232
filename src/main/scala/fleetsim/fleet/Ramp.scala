package fleetsim.fleet

import scala.concurrent.duration.*

/** Ramp-up arithmetic: how many devices should have started by a point in time. */
object Ramp:
  /** How often the fleet checks whether more devices are due. */
  val Tick: FiniteDuration = 20.millis

  /** Devices due after `elapsed` at `rate` per second, never more than `target`. The first one is
    * due at once.
    */
  def due(elapsed: FiniteDuration, rate: Double, target: Int): Int =
    (1 + math.floor(elapsed.toNanos / 1e9 * rate)).min(target.toDouble).toInt
