package fleetsim.fleet

import fleetsim.device.{Device, Identity}
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.{ActorRef, Behavior, SupervisorStrategy}

import scala.concurrent.duration.*

/** Starts the fleet's devices at the ramp rate and stops them all on [[Fleet.Stop]]. It owns the
  * devices as children; if it stopped, so would they.
  */
object Fleet:
  sealed trait Command
  /** Stops every device; replies once they have all stopped. */
  final case class Stop(replyTo: ActorRef[Done]) extends Command
  private case object RampTick extends Command

  /** @param device makes device i's behaviour (injected, so tests can count or replace devices) */
  def apply(settings: FleetSettings, device: Identity => Behavior[Device.Command]): Behavior[Command] =
    Behaviors.withTimers { timers =>
      Behaviors.setup { context =>
        val started = System.nanoTime()
        def supervised(i: Int) =
          Behaviors.supervise(device(settings.identity(i))).onFailure[Exception](SupervisorStrategy.restartWithBackoff(1.second, 30.seconds, 0.2))

        def ramping(spawned: Int): Behavior[Command] =
          Behaviors.receiveMessage {
            case RampTick =>
              val due = Ramp.due((System.nanoTime() - started).nanos, settings.rampRate, settings.devices)
              (spawned until due).foreach(i => context.spawnAnonymous(supervised(i)))
              if due == settings.devices then timers.cancel(RampTick)
              ramping(due)
            case Stop(replyTo) =>
              Behaviors.stopped(() => replyTo ! Done)
          }

        timers.startTimerWithFixedDelay(RampTick, Duration.Zero, Ramp.Tick)
        ramping(spawned = 0)
      }
    }
