package fleetsim.fleet

import fleetsim.device.Device
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.{Actor, Props}
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.actor.typed.{ActorRef, Behavior}

import scala.concurrent.duration.*

/** Starts the fleet's devices at the ramp rate and stops them all on [[Fleet.Stop]]. It owns the
  * devices, in groups of [[GroupSize]]; if it stopped, so would they. Devices recover from their
  * own failures (see [[Device]]): a supervisor per device would cost a million of them 130 MB.
  */
object Fleet:
  sealed trait Command
  /** Stops starting devices and tells every device to stop sending; replies once all have heard. */
  final case class Quiesce(replyTo: ActorRef[Done]) extends Command
  /** Stops every device; replies once they have all stopped. */
  final case class Stop(replyTo: ActorRef[Done]) extends Command
  /** Starts again every device that stopped itself (Stopped), as after a reboot. */
  case object RestartStopped extends Command
  /** Grows the fleet to `devices` (at most the settings' number) at `rate` devices a second, powering
    * on the devices a shrink took out before starting new ones; or shrinks it at once, powering off
    * the devices numbered `devices` and up: cut off, or closing their sessions with `goodbye`.
    */
  final case class Resize(devices: Int, rate: Double, goodbye: Boolean = false) extends Command
  /** Passes the switch on to its devices (the fleet's numbers: a block's start from its first) that are in the fleet now. */
  final case class Switch(switch: Device.Switch) extends Command
  private case object RampTick extends Command
  private case object DeviceQuiesced extends Command

  /** Devices a group parents. Pekko finds each new child's name in its parent's sorted map: in one
    * map of a million, that walk was a fifth of the fleet's CPU while ramping.
    */
  val GroupSize = 1000

  /** @param device makes device i's props (injected, so tests can count or replace devices)
    * @param target the devices to ramp up to first (a resize before the fleet started); all by default
    * @param first the number of its device 0: a cluster block's devices are numbered from the block's first
    */
  def apply(settings: FleetSettings, device: Int => Props, target: Int = -1, first: Int = 0): Behavior[Command] =
    Behaviors.withTimers { timers =>
      Behaviors.setup { context =>
        val groups = (0 until (settings.devices + GroupSize - 1) / GroupSize).map(_ => context.toClassic.actorOf(Props(DeviceGroup(device))))
        /** Tells each group its share of the devices numbered `from` until `until`, as a range. */
        def each(from: Int, until: Int)(tell: (org.apache.pekko.actor.ActorRef, Range) => Unit): Unit =
          var i = from
          while i < until do
            val end = ((i / GroupSize + 1) * GroupSize).min(until)
            tell(groups(i / GroupSize), i until end)
            i = end
        /** Tells the devices numbered `from` until `until` here (from 0) what `switch` tells those. */
        def power(from: Int, until: Int, switch: Device.Switch): Unit =
          each(from, until)((group, r) => group ! switch.within(first + r.start, first + r.end))
        def resizing(on: Boolean, goodbye: Boolean = false) = Device.Power(0, 0, on, goodbye = goodbye)

        /** Devices 0 until `on` are on, `on` until `spawned` were taken out (Off), and the fleet grows
          * towards `target`: from `base` devices at `since` (nanoTime), at `rate` a second.
          */
        def running(on: Int, spawned: Int, target: Int, base: Int, since: Long, rate: Double): Behavior[Command] =
          Behaviors.receiveMessage {
            case RampTick =>
              val due = base + Ramp.due((System.nanoTime() - since).nanos, rate, target - base)
              if on < spawned then power(on, due.min(spawned), resizing(on = true))
              if due > spawned then each(spawned, due)((group, devices) => group ! devices)
              if due == target then timers.cancel(RampTick)
              running(due, spawned.max(due), target, base, since, rate)
            case Resize(devices, newRate, goodbye) =>
              val wanted = devices.max(0).min(settings.devices)
              if wanted < on then
                timers.cancel(RampTick)
                power(wanted, on, resizing(on = false, goodbye))
                running(wanted, spawned, wanted, wanted, System.nanoTime(), newRate)
              else if wanted > on then
                timers.startTimerWithFixedDelay(RampTick, Duration.Zero, Ramp.Tick)
                running(on, spawned, wanted, on, System.nanoTime(), newRate)
              else running(on, spawned, wanted, base, since, rate)
            case Switch(switch) =>
              power((switch.from - first).max(0), (switch.until - first).min(on), switch) // never beyond the fleet's size now
              Behaviors.same
            case Quiesce(replyTo) =>
              timers.cancel(RampTick)
              // Each group starts its devices before it passes this on: every device started, on or
              // Off, hears it.
              val heard = context.messageAdapter[Done](_ => DeviceQuiesced)
              groups.foreach(_ ! Device.Quiesce(heard))
              quiescing(spawned, replyTo)
            case Stop(replyTo) => stop(replyTo)
            case RestartStopped =>
              groups.foreach(_ ! Device.Restart)
              Behaviors.same
            case DeviceQuiesced => Behaviors.same
          }

        def quiescing(waiting: Int, replyTo: ActorRef[Done]): Behavior[Command] =
          if waiting <= 0 then replyTo ! Done
          Behaviors.receiveMessage {
            case DeviceQuiesced => quiescing(waiting - 1, replyTo)
            case Quiesce(again) => quiescing(waiting, again)
            case Stop(replyTo) => stop(replyTo)
            case RampTick | RestartStopped | Resize(_, _, _) | Switch(_) => Behaviors.same
          }

        def stop(replyTo: ActorRef[Done]): Behavior[Command] = Behaviors.stopped(() => replyTo ! Done)

        timers.startTimerWithFixedDelay(RampTick, Duration.Zero, Ramp.Tick)
        running(on = 0, spawned = 0, target = if target < 0 then settings.devices else target.min(settings.devices), base = 0, since = System.nanoTime(),
          rate = settings.rampRate)
      }
    }

  /** Parents a group of devices: starts the ones it is given, and passes a quiesce, a restart or a
    * power switch on to them all (each device knows its number).
    */
  private final class DeviceGroup(device: Int => Props) extends Actor:
    def receive: Receive =
      case devices: Range => devices.foreach(i => context.actorOf(device(i)))
      case quiesce: Device.Quiesce => context.children.foreach(_ ! quiesce)
      case command @ (Device.Restart | _: Device.Switch) => context.children.foreach(_ ! command)
