package fleetsim.control

import fleetsim.device.Selection
import fleetsim.report.Summary

import scala.concurrent.Future
import scala.concurrent.duration.*

/** What may change a run while it runs — the dashboard's controls and a scenario's timeline — the
  * same for a run in one process and over a cluster. [[fleetsim.run.FleetRun]] is one.
  */
trait RunControl:
  /** Devices the run was planned and checked for (`--devices`, a scenario's largest stage): the most the fleet may grow to. */
  def planned: Int
  /** Devices wanted now: what the run started with until a [[resize]]. */
  def target: Int
  /** Grows the fleet to `devices` at `rate` devices a second (the run's ramp rate when None; devices
    * that were taken out power on again, as after a reboot) or shrinks it at once (the devices
    * numbered `devices` and up power off, and `leave` as it says). Refused, with why, outside 0 to [[planned]].
    */
  def resize(devices: Int, rate: Option[Double] = None, leave: Leave = Leave.Vanish): Either[String, Int]
  /** Starts `action` on the fleet now, named `name` in the summary (its kind when None, numbered if
    * taken); how many devices it reaches.
    */
  def act(action: RunAction, name: Option[String] = None): Future[Long]
  /** Ends the run as its duration would: the calls in flight answered, then the summary. */
  def stop(reason: String): Future[Summary]

/** How the devices a shrink takes out leave: they vanish, cut off without a word (an MQTT broker
  * publishes their wills), or leave cleanly, closing their sessions (an MQTT DISCONNECT, an SSH
  * channel closed). A device with no session of its own leaves the same way either way.
  */
enum Leave:
  case Vanish, Cleanly
object Leave:
  def parse(text: String): Either[String, Leave] =
    values.find(_.toString.equalsIgnoreCase(text)).toRight(s"leave is vanish or cleanly, not '$text'")

/** What a run can be told to do to its devices. */
enum RunAction(val kind: String):
  /** Devices that stopped themselves (Stopped) start again, as after a reboot. */
  case RestartStopped extends RunAction("restart-stopped")
  /** The devices `reached` lose power without a word (Off) and, `outage` later, come back as after a
    * reboot: a fresh join, their config forgotten.
    */
  case PowerCut(reached: Reach, outage: FiniteDuration) extends RunAction("power-cut")
  /** A share of the devices drawn with `seed` reboot in a wave spread over `over`, a slice a second:
    * each is Off for `down`, then comes back as after a reboot (a firmware rollout's reboots).
    */
  case RebootWave(share: Double, seed: Long, over: FiniteDuration, down: FiniteDuration) extends RunAction("reboot-wave")
  /** The devices `reached` are cut off on the fleet's side of the network for `lasting`: their
    * sessions drop, their calls and session opens fail after their timeout, whatever the controller or broker.
    */
  case Partition(reached: Reach, lasting: FiniteDuration) extends RunAction("partition")
  /** The devices `reached` have a flapping link for `lasting`: cut off (as by a partition) for `down`
    * at the start of every `every`.
    */
  case Flapping(reached: Reach, every: FiniteDuration, down: FiniteDuration, lasting: FiniteDuration) extends RunAction("flapping")
  /** The devices `reached` have a bad link for `lasting`: each call waits `latency` more, and a share
    * `loss` (0 to 1) of them is lost.
    */
  case Degrade(reached: Reach, latency: FiniteDuration, loss: Double, lasting: FiniteDuration) extends RunAction("degrade")
  /** The embedded reference controller misbehaves for `lasting`: a share of its replies fail (500),
    * are throttled (429), and every reply waits `latency` more (docs/faults.md).
    */
  case ControllerFault(errorRate: Double, throttleRate: Double, latency: FiniteDuration, lasting: FiniteDuration)
      extends RunAction("controller-fault")
  /** The embedded broker drops every MQTT connection at once, as a broker fail-over does. */
  case BrokerDrop extends RunAction("broker-drop")
  /** The embedded controller's SSH server drops every tunnel at once, as its restart does. */
  case SshDrop extends RunAction("ssh-drop")
  /** New configuration for every device, `by` the user's call or command, else from the embedded
    * reference controller (HTTP devices hear of it in their next reply, MQTT devices in a push); the
    * action's recovery is each device applying it.
    */
  case ConfigPush(by: Option[UserCall] = None) extends RunAction("config-push")
  /** The user's call or command, and `undo`, if any, `lasting` later: a fault of their own turned on
    * and off, in any controller, broker or proxy. It reaches no device of the fleet's own.
    */
  case Call(call: UserCall, lasting: FiniteDuration, undo: Option[UserCall]) extends RunAction("call")

  /** It drops the devices' sessions on the embedded controller: a run whose devices hold others cannot take it. */
  def dropsSessions: Boolean = this == BrokerDrop || this == SshDrop

  /** It acts on the embedded reference controller (or its broker): a run against another cannot take it. */
  def onController: Boolean = this match
    case ControllerFault(_, _, _, _) | BrokerDrop | SshDrop | ConfigPush(None) => true
    case _ => false

  /** How long it acts, from its start: until the last of its devices is powered on again, or its fault ends. */
  def span: FiniteDuration = this match
    case RestartStopped | BrokerDrop | SshDrop | ConfigPush(_) => Duration.Zero
    case Call(_, lasting, _) => lasting
    case PowerCut(_, outage) => outage
    case RebootWave(_, _, over, down) => over + down
    case Partition(_, lasting) => lasting
    case Flapping(_, _, _, lasting) => lasting
    case Degrade(_, _, _, lasting) => lasting
    case ControllerFault(_, _, _, lasting) => lasting

/** The devices an action reaches: those numbered `from` until `until`, `among` those selected. */
final case class Reach(from: Int, until: Int, among: Selection):
  def contains(number: Int): Boolean = number >= from && number < until && among.contains(number)

object Reach:
  val All: Reach = Reach(0, Int.MaxValue, Selection.All)

  private val Percent = """(\d+(?:\.\d+)?)%""".r
  private val Numbers = """(\d+)-(\d+)""".r

  /** Devices as a user writes them: a share drawn with `seed` ("30%"), a range of device numbers
    * ("100-199", both included) or "all"; or what to write instead.
    */
  def parse(text: String, seed: Long): Either[String, Reach] = text.trim match
    case "all" => Right(All)
    case Percent(p) if p.toDouble <= 100 => Right(Reach(0, Int.MaxValue, Selection.Share(p.toDouble / 100, seed)))
    case Numbers(from, until) if from.toLong <= until.toLong && until.toLong < Int.MaxValue => Right(Reach(from.toInt, until.toInt + 1, Selection.All))
    case other => Left(s"devices must be a share (30%), a range of device numbers (100-199) or all (got '$other')")

  /** A share of the devices as a user writes it: "30%" or "all"; or what to write instead. */
  def share(text: String): Either[String, Double] = text.trim match
    case "all" => Right(1.0)
    case Percent(p) if p.toDouble <= 100 => Right(p.toDouble / 100)
    case other => Left(s"devices must be a share (30%) or all (got '$other')")
