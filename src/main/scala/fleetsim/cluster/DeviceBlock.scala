package fleetsim.cluster

import fleetsim.fleet.Fleet
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.{ActorRef, Behavior, PostStop}
import org.apache.pekko.cluster.sharding.typed.scaladsl.{ClusterSharding, EntityTypeKey}

import scala.concurrent.duration.*

/** A block of [[Fleet.GroupSize]] devices, the unit Cluster Sharding places on nodes: block b runs
  * devices b × 1,000 up to the next thousand, so device numbers (and MACs) are unique across the
  * cluster. Sharding remembers it: if its node dies it starts again on another, and its devices
  * join afresh, as after a reboot.
  */
object DeviceBlock:
  sealed trait Command
  /** Wakes the block (the runner sends it to every block once); it then starts on its own. */
  case object Start extends Command with ClusterMessage
  /** Sharding's stop, at a hand-over or after [[Finish]]: the block and its devices stop. */
  case object Stop extends Command with ClusterMessage
  final case class Quiesce(replyTo: ActorRef[Done]) extends Command
  /** Starts again the block's devices that stopped themselves. */
  case object RestartStopped extends Command
  /** The fleet is resized to `devices`: the block keeps those of its devices numbered below, growing at `rate` a second. */
  final case class Resize(devices: Int, rate: Double) extends Command
  /** Tells its devices the switch names ([[fleetsim.device.Device.Switch]]). */
  final case class Switch(switch: fleetsim.device.Device.Switch) extends Command
  /** The run is over: stop the devices, and let sharding forget the block. */
  final case class Finish(replyTo: ActorRef[Done]) extends Command
  /** From the node: the run's parts, once the node has them. */
  final case class Ready(run: NodeRun) extends Command
  private case object Begin extends Command

  /** Each run's blocks are an entity type of their own, so runs one after another never mix. */
  def typeKey(run: String): EntityTypeKey[Command] = EntityTypeKey[Command](s"devices-$run")

  def apply(run: String, block: Int, shard: ActorRef[ClusterSharding.ShardCommand], node: ActorRef[NodeAgent.Command]): Behavior[Command] =
    Behaviors.setup { context =>
      node ! NodeAgent.BlockUp(run, context.self)
      val first = block * Fleet.GroupSize
      Behaviors.withTimers { timers =>
        var parts = Option.empty[NodeRun]
        var devices = Option.empty[ActorRef[Fleet.Command]]
        var quiet = false // quiesced or finished: start nothing more
        var target = -1 // of its devices, after a resize; -1 all
        def local(devices: Int) = (devices - first).max(0).min(Fleet.GroupSize)
        Behaviors.receiveMessage[Command] {
          case Ready(r) =>
            parts = Some(r)
            // Due as in a one-process run; a block re-homed after its time starts at once.
            val due = r.plan.startAtMs + (first * 1000L / r.settings.fleet.rampRate).toLong - System.currentTimeMillis()
            if !quiet then timers.startSingleTimer(Begin, due.max(0).millis)
            Behaviors.same
          case Begin =>
            for r <- parts if devices.isEmpty && !quiet do
              val count = (r.plan.devices - first).min(Fleet.GroupSize)
              devices = Some(context.spawn(Fleet(r.settings.fleet.copy(devices = count), i => r.parts.device(first + i), target, first), "devices"))
            Behaviors.same
          case Quiesce(replyTo) =>
            quiet = true
            timers.cancel(Begin)
            devices.fold(replyTo ! Done)(_ ! Fleet.Quiesce(replyTo))
            Behaviors.same
          case Finish(replyTo) =>
            quiet = true
            timers.cancel(Begin)
            shard ! ClusterSharding.Passivate(context.self)
            devices.fold(replyTo ! Done)(_ ! Fleet.Stop(replyTo))
            devices = None
            Behaviors.same
          case RestartStopped =>
            devices.foreach(_ ! Fleet.RestartStopped)
            Behaviors.same
          case Switch(switch) =>
            devices.foreach(_ ! Fleet.Switch(switch))
            Behaviors.same
          case Resize(fleet, rate) =>
            target = local(fleet)
            devices.foreach(_ ! Fleet.Resize(target, rate))
            Behaviors.same
          case Start => Behaviors.same
          case Stop => Behaviors.stopped
        }.receiveSignal { case (_, PostStop) =>
          node ! NodeAgent.BlockDown(run, context.self)
          Behaviors.same
        }
      }
    }
