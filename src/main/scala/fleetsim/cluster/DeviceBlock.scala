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
  /** The fleet is resized at `atMs` (wall clock) from `from` devices to `devices`: the block keeps
    * those of its devices numbered below. Growing, the new devices start one after another at `rate`
    * a second, as in one process: the block's first new one once those below it have. Shrinking, its
    * devices numbered above leave, with or without a `goodbye`.
    */
  final case class Resize(devices: Int, rate: Double, from: Int, atMs: Long, goodbye: Boolean = false) extends Command
  /** Tells its devices the switch names ([[fleetsim.device.Device.Switch]]). */
  final case class Switch(switch: fleetsim.device.Device.Switch) extends Command
  /** The run is over: stop the devices, and let sharding forget the block. */
  final case class Finish(replyTo: ActorRef[Done]) extends Command
  /** From the node: the run's parts, once the node has them. */
  final case class Ready(run: NodeRun) extends Command
  private case object Begin extends Command
  /** Its turn to grow, after a [[Resize]]. */
  private final case class Grow(rate: Double) extends Command
  /** Its devices have stopped, after [[Finish]]. */
  private case object DevicesStopped extends Command

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
        var finishing = Option.empty[ActorRef[Done]] // told once the devices have stopped, or the block has
        def finished(): Unit = { finishing.foreach(_ ! Done); finishing = None }
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
            finishing = Some(replyTo)
            // Passivated only once the devices have stopped: passivated at once, the block could stop
            // before its fleet had read the Stop, and its reply would never come (a node's finish then
            // waited out its 30 s timeout).
            devices match
              case Some(fleet) =>
                context.watchWith(fleet, DevicesStopped)
                fleet ! Fleet.Stop(context.system.ignoreRef)
              case None => context.self ! DevicesStopped
            devices = None
            Behaviors.same
          case DevicesStopped =>
            finished()
            shard ! ClusterSharding.Passivate(context.self)
            Behaviors.same
          case RestartStopped =>
            devices.foreach(_ ! Fleet.RestartStopped)
            Behaviors.same
          case Switch(switch) =>
            devices.foreach(_ ! Fleet.Switch(switch))
            Behaviors.same
          case Resize(fleet, rate, from, atMs, goodbye) =>
            target = local(fleet)
            timers.cancel(Grow)
            val turn = if fleet > from && rate > 0 then atMs + ((first - from).max(0) / rate * 1000).toLong - System.currentTimeMillis() else 0L
            if turn > 0 then timers.startSingleTimer(Grow, Grow(rate), turn.millis)
            else devices.foreach(_ ! Fleet.Resize(target, rate, goodbye))
            Behaviors.same
          case Grow(rate) =>
            devices.foreach(_ ! Fleet.Resize(target, rate))
            Behaviors.same
          case Start => Behaviors.same
          case Stop => Behaviors.stopped
        }.receiveSignal { case (_, PostStop) =>
          finished() // a hand-over mid-finish stops the devices too
          node ! NodeAgent.BlockDown(run, context.self)
          Behaviors.same
        }
      }
    }
