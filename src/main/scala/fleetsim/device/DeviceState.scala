package fleetsim.device

import fleetsim.transport.{FailureReason, MessageKind, Reply}

/** The lifecycle states, named as in the design notes and the summary. Stopped: the device stopped
  * itself, as its profile says a real agent does (a `stop` reaction, a status repeated too often),
  * and waits for a restart ([[Device.Restart]]). Off: powered off, or taken out of the fleet by a
  * resize, until powered on ([[Device.Power]]); not counted among the fleet's devices.
  */
enum DeviceState:
  case Discovering, Tunneling, Reporting, ConfigDownloading, Backoff, Stopped, Off

/** What a device tells the world about itself. Implemented by the metrics package; called from
  * device actors, so implementations must be thread-safe and must not block.
  */
trait DeviceEvents:
  /** The device moved from one state to another; `from` is None for a device that just started. */
  def moved(from: Option[DeviceState], to: DeviceState): Unit
  /** The device stopped while in `state`. */
  def stopped(state: DeviceState): Unit
  /** A scheduled send of `kind` left this long after the time it was scheduled for. */
  def late(kind: MessageKind, nanos: Long): Unit
  /** A reply of `kind` that its transport counted by its status (2xx ok, 403 forbidden, others
    * failed), which the profile judges otherwise: ok (`failure` None: a status the call expects) or
    * failed for `failure` (a 2xx it cannot use, a check that failed). It is counted as judged instead.
    */
  def judged(kind: MessageKind, reply: Reply.Response, failure: Option[FailureReason]): Unit
  /** The device stopped itself (it is now Stopped) for `reason`, one of its profile's few: "join: 403". */
  def halted(reason: String): Unit
  /** A push arrived (a message on the device's MQTT subscriptions). */
  def pushed(): Unit
  /** A push's configuration was applied and acknowledged this long after the push arrived. */
  def pushAcknowledged(nanos: Long): Unit
  /** The run's action number `action` cut the device off: its power ([[Device.Power]]), or on the fleet's side ([[Device.Affect]]). */
  def cut(action: Int): Unit
  /** Powered on again after action `action` cut its power, the device was Reporting this long after. */
  def recovered(action: Int, nanos: Long): Unit

/** When each action on the fleet's side ended, on this process's clock, as the first of its devices
  * heard it: what their recoveries are timed from ([[Device.Affect]]). A run has a few actions.
  */
final class ActionEnds:
  private val ends = java.util.concurrent.ConcurrentHashMap[Integer, java.lang.Long]()
  def stamp(action: Int, at: Long): Unit = ends.putIfAbsent(action, at)
  def has(action: Int): Boolean = ends.containsKey(action)
  def of(action: Int): Long = ends.get(action)
