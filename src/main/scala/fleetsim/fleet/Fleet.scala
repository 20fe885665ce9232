package fleetsim.fleet

import fleetsim.device.Device
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.Props
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.actor.typed.{ActorRef, Behavior}

import scala.concurrent.duration.*

/** Starts the fleet's devices at the ramp rate and stops them all on [[Fleet.Stop]]. It owns the
  * devices as children; if it stopped, so would they. Devices recover from their own failures
  * (see [[Device]]): a supervisor per device would cost a million of them 130 MB.
  */
object Fleet:
  sealed trait Command
  /** Stops starting devices and tells every device to stop sending; replies once all have heard. */
  final case class Quiesce(replyTo: ActorRef[Done]) extends Command
  /** Stops every device; replies once they have all stopped. */
  final case class Stop(replyTo: ActorRef[Done]) extends Command
  private case object RampTick extends Command
  private case object DeviceQuiesced extends Command

  /** @param device makes device i's props (injected, so tests can count or replace devices) */
  def apply(settings: FleetSettings, device: Int => Props): Behavior[Command] =
    Behaviors.withTimers { timers =>
      Behaviors.setup { context =>
        val started = System.nanoTime()
        def ramping(spawned: Int): Behavior[Command] =
          Behaviors.receiveMessage {
            case RampTick =>
              val due = Ramp.due((System.nanoTime() - started).nanos, settings.rampRate, settings.devices)
              (spawned until due).foreach(i => context.toClassic.actorOf(device(i)))
              if due == settings.devices then timers.cancel(RampTick)
              ramping(due)
            case Quiesce(replyTo) =>
              timers.cancel(RampTick)
              val devices = context.children.toSeq
              val heard = context.messageAdapter[Done](_ => DeviceQuiesced)
              devices.foreach(_.unsafeUpcast[Device.Command] ! Device.Quiesce(heard))
              quiescing(devices.size, replyTo)
            case Stop(replyTo) => stop(replyTo)
            case DeviceQuiesced => Behaviors.same
          }

        def quiescing(waiting: Int, replyTo: ActorRef[Done]): Behavior[Command] =
          if waiting <= 0 then replyTo ! Done
          Behaviors.receiveMessage {
            case DeviceQuiesced => quiescing(waiting - 1, replyTo)
            case Quiesce(again) => quiescing(waiting, again)
            case Stop(replyTo) => stop(replyTo)
            case RampTick => Behaviors.same
          }

        def stop(replyTo: ActorRef[Done]): Behavior[Command] = Behaviors.stopped(() => replyTo ! Done)

        timers.startTimerWithFixedDelay(RampTick, Duration.Zero, Ramp.Tick)
        ramping(spawned = 0)
      }
    }
