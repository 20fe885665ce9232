package fleetsim.control

import fleetsim.device.Selection
import fleetsim.report.Summary

import scala.concurrent.Future
import scala.concurrent.duration.FiniteDuration

/** What may change a run while it runs — the dashboard's controls today, a scenario's timeline and
  * a control API next — the same for a run in one process and over a cluster. [[fleetsim.run.FleetRun]] is one; the dashboard drives it.
  */
trait RunControl:
  /** Devices the run was planned and checked for (`--devices`): the most the fleet may grow to. */
  def planned: Int
  /** Devices wanted now: [[planned]] until a [[resize]]. */
  def target: Int
  /** Grows the fleet to `devices` at the ramp rate (devices that were taken out power on again, as
    * after a reboot) or shrinks it (the devices numbered `devices` and up power off, leaving their
    * sessions). Refused, with why, outside 0 to [[planned]].
    */
  def resize(devices: Int): Either[String, Int]
  /** Starts `action` on the fleet now; how many devices it reaches. */
  def act(action: RunAction): Future[Long]
  /** Ends the run as its duration would: the calls in flight answered, then the summary. */
  def stop(reason: String): Future[Summary]

/** What a run can be told to do to its devices. */
enum RunAction:
  /** Devices that stopped themselves (Stopped) start again, as after a reboot. */
  case RestartStopped
  /** The devices numbered `from` until `until`, `among` those selected, lose power without a word
    * (Off) and, `outage` later, come back as after a reboot: a fresh join, their config forgotten.
    */
  case PowerCut(from: Int, until: Int, among: Selection, outage: FiniteDuration)
  /** A share of the devices drawn with `seed` reboot in a wave spread over `over`, a slice a second:
    * each is Off for `down`, then comes back as after a reboot (a firmware rollout's reboots).
    */
  case RebootWave(share: Double, seed: Long, over: FiniteDuration, down: FiniteDuration)
