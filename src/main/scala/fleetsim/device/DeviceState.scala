package fleetsim.device

import fleetsim.transport.MessageKind

/** The lifecycle states, named as in the design notes and the summary. */
enum DeviceState:
  case Discovering, Tunneling, Reporting, ConfigDownloading, Backoff

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
  /** A call of `kind` was answered 2xx, counted ok by its transport, but the reply lacks what the
    * profile needs from it: it counts as failed (`unreadable`) instead.
    */
  def unreadable(kind: MessageKind): Unit
  /** A push arrived (a message on the device's MQTT subscriptions). */
  def pushed(): Unit
  /** A push's configuration was applied and acknowledged this long after the push arrived. */
  def pushAcknowledged(nanos: Long): Unit
