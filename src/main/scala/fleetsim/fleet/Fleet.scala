package fleetsim.fleet

import fleetsim.device.Device
import fleetsim.protocol.Identity
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.{ActorRef, Behavior, SupervisorStrategy}

import scala.concurrent.duration.*

/** Starts the fleet's devices at the ramp rate and stops them all on [[Fleet.Stop]]. It owns the
  * devices as children; if it stopped, so would they.
  */
object Fleet:
  sealed trait Command
  /** Stops starting devices and tells every device to stop sending; replies once all have heard. */
  final case class Quiesce(replyTo: ActorRef[Done]) extends Command
  /** Stops every device; replies once they have all stopped. */
  final case class Stop(replyTo: ActorRef[Done]) extends Command
  private case object RampTick extends Command
  private case object DeviceQuiesced extends Command

  /** One strategy for every device: a strategy per device cost 128 bytes each at 100,000 devices. */
  private val restart = SupervisorStrategy.restartWithBackoff(1.second, 30.seconds, 0.2)

  /** @param device makes device i's behaviour (injected, so tests can count or replace devices) */
  def apply(settings: FleetSettings, device: Identity => Behavior[Device.Command]): Behavior[Command] =
    Behaviors.withTimers { timers =>
      Behaviors.setup { context =>
        val started = System.nanoTime()
        def supervised(i: Int) =
          Behaviors.supervise(device(settings.identity(i))).onFailure[Exception](restart)

        def ramping(spawned: Int): Behavior[Command] =
          Behaviors.receiveMessage {
            case RampTick =>
              val due = Ramp.due((System.nanoTime() - started).nanos, settings.rampRate, settings.devices)
              (spawned until due).foreach(i => context.spawnAnonymous(supervised(i)))
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
