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
  private case object RampTick extends Command
  private case object DeviceQuiesced extends Command

  /** Devices a group parents. Pekko finds each new child's name in its parent's sorted map: in one
    * map of a million, that walk was a fifth of the fleet's CPU while ramping.
    */
  val GroupSize = 1000

  /** @param device makes device i's props (injected, so tests can count or replace devices) */
  def apply(settings: FleetSettings, device: Int => Props): Behavior[Command] =
    Behaviors.withTimers { timers =>
      Behaviors.setup { context =>
        val started = System.nanoTime()
        val groups = (0 until (settings.devices + GroupSize - 1) / GroupSize).map(_ => context.toClassic.actorOf(Props(DeviceGroup(device))))
        def ramping(spawned: Int): Behavior[Command] =
          Behaviors.receiveMessage {
            case RampTick =>
              val due = Ramp.due((System.nanoTime() - started).nanos, settings.rampRate, settings.devices)
              var from = spawned
              while from < due do // each group its share, as a range
                val until = ((from / GroupSize + 1) * GroupSize).min(due)
                groups(from / GroupSize) ! (from until until)
                from = until
              if due == settings.devices then timers.cancel(RampTick)
              ramping(due)
            case Quiesce(replyTo) =>
              timers.cancel(RampTick)
              // Each group starts its devices before it passes this on: every device started hears it.
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
            case RampTick | RestartStopped => Behaviors.same
          }

        def stop(replyTo: ActorRef[Done]): Behavior[Command] = Behaviors.stopped(() => replyTo ! Done)

        timers.startTimerWithFixedDelay(RampTick, Duration.Zero, Ramp.Tick)
        ramping(spawned = 0)
      }
    }

  /** Parents a group of devices: starts the ones it is given, and passes a quiesce on to them all. */
  private final class DeviceGroup(device: Int => Props) extends Actor:
    def receive: Receive =
      case devices: Range => devices.foreach(i => context.actorOf(device(i)))
      case quiesce: Device.Quiesce => context.children.foreach(_ ! quiesce)
      case Device.Restart => context.children.foreach(_ ! Device.Restart)
