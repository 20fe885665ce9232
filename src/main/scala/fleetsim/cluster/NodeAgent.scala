package fleetsim.cluster

import com.typesafe.config.{ConfigFactory, ConfigValueFactory}
import fleetsim.run.{FleetParts, Preflight, RunSettings}
import fleetsim.fleet.Fleet
import fleetsim.metrics.MetricsSnapshot
import io.micrometer.core.instrument.composite.CompositeMeterRegistry
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.receptionist.{Receptionist, ServiceKey}
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.{ActorRef, Behavior, DispatcherSelector}
import org.apache.pekko.cluster.sharding.typed.scaladsl.{ClusterSharding, Entity}
import org.apache.pekko.cluster.ClusterEvent
import org.apache.pekko.cluster.typed.{Cluster, Subscribe}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.util.Timeout

import java.nio.file.Files
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}
import scala.util.control.NonFatal

/** A run as one node carries it: the plan, the settings read from it, and the parts its devices share. */
final case class NodeRun(plan: RunPlan, settings: RunSettings, parts: FleetParts)

/** One per `fleetsim node`: takes runs' plans, hosts their blocks, and answers for its devices'
  * figures. Found by the runner through the receptionist.
  */
object NodeAgent:
  val Key: ServiceKey[Command] = ServiceKey[Command]("fleetsim-node")
  /** The role of nodes that carry devices (the runner has none). */
  val Role = "devices"

  sealed trait Command
  final case class Prepare(plan: RunPlan, replyTo: ActorRef[Prepared]) extends Command with ClusterMessage
  final case class Collect(run: String, replyTo: ActorRef[NodeFigures]) extends Command with ClusterMessage
  final case class Quiesce(run: String, replyTo: ActorRef[NodeDone]) extends Command with ClusterMessage
  final case class Finish(run: String, replyTo: ActorRef[NodeDone]) extends Command with ClusterMessage
  /** Starts again the run's devices here that stopped themselves. */
  final case class RestartStopped(run: String) extends Command with ClusterMessage
  /** The run's fleet is resized at `atMs` from `from` devices to `devices` ([[DeviceBlock.Resize]]). */
  final case class Resize(run: String, devices: Int, rate: Double, from: Int, atMs: Long, goodbye: Boolean = false) extends Command with ClusterMessage:
    def toBlock: DeviceBlock.Resize = DeviceBlock.Resize(devices, rate, from, atMs, goodbye)
  /** Tells the run's devices the switch names ([[fleetsim.device.Device.Switch]]). */
  final case class Switch(run: String, switch: fleetsim.device.Device.Switch) extends Command with ClusterMessage
  /** Starts (`fault` given) or ends action `action`'s fault on the network of the run's devices `reach` names, here. */
  final case class Network(run: String, action: Int, reach: fleetsim.control.Reach, fault: Option[fleetsim.transport.NetworkFault])
      extends Command with ClusterMessage
  final case class BlockUp(run: String, block: ActorRef[DeviceBlock.Command]) extends Command
  final case class BlockDown(run: String, block: ActorRef[DeviceBlock.Command]) extends Command
  private final case class MemberGone(address: String) extends Command
  private final case class PlanRead(plan: RunPlan, run: Either[String, NodeRun]) extends Command

  def apply(): Behavior[Command] = Behaviors.setup { context =>
    given system: org.apache.pekko.actor.typed.ActorSystem[?] = context.system
    given ExecutionContext = context.executionContext
    given Timeout = Timeout(30.seconds)
    val node = Cluster(context.system).selfMember.address.toString
    context.system.receptionist ! Receptionist.Register(Key, context.self)
    Cluster(context.system).subscriptions ! Subscribe(context.messageAdapter[ClusterEvent.MemberRemoved](e => MemberGone(e.member.address.toString)),
      classOf[ClusterEvent.MemberRemoved])
    val console = context.system.dispatchers.lookup(DispatcherSelector.blocking())
    def say(line: String): Unit = Future(println(s"fleetsim: $line"))(using console)
    val guard = FreezeGuard(context.system, say)
    var runs = Map.empty[String, NodeRun]
    var blocks = Map.empty[String, Set[ActorRef[DeviceBlock.Command]]]
    var waiting = Map.empty[String, Set[ActorRef[DeviceBlock.Command]]] // up before their plan came
    var reading = Map.empty[String, List[ActorRef[Prepared]]] // plans being read, and who waits for the answer
    var resized = Map.empty[String, Resize] // runs resized, for blocks that come here later

    Behaviors.receiveMessage {
      case Prepare(plan, replyTo) =>
        if runs.contains(plan.id) then replyTo ! Prepared(node, None)
        else if reading.contains(plan.id) then reading += plan.id -> (replyTo :: reading(plan.id))
        else
          // Reading files, generating keys and probing the controller's TLS block: not on this thread.
          reading += plan.id -> List(replyTo)
          context.pipeToSelf(Future(prepare(plan, guard))(using console))(read => PlanRead(plan, read.fold(e => Left(e.toString), identity)))
        Behaviors.same
      case PlanRead(plan, read) =>
        val replyTo = reading.getOrElse(plan.id, Nil)
        reading -= plan.id
        read match
          case Left(problem) => replyTo.foreach(_ ! Prepared(node, Some(problem)))
          case Right(run) =>
            runs += plan.id -> run
            ClusterSharding(context.system).init(Entity(DeviceBlock.typeKey(plan.id))(entity =>
              DeviceBlock(plan.id, entity.entityId.toInt, entity.shard, context.self)).withRole(Role).withStopMessage(DeviceBlock.Stop))
            waiting.getOrElse(plan.id, Set.empty).foreach(_ ! DeviceBlock.Ready(run))
            waiting -= plan.id
            replyTo.foreach(_ ! Prepared(node, None))
            say(s"run ${plan.id} of ${plan.devices} ${run.settings.transport.name} devices from ${plan.runner}: room here for up to ${shareOf(plan)}${if plan.nodes >= 3 then ", its share should a node be lost" else ""}")
        Behaviors.same
      case BlockUp(run, block) =>
        blocks += run -> (blocks.getOrElse(run, Set.empty) + block)
        resized.get(run).foreach(r => block ! r.toBlock) // before Ready: it starts no device it would then drop
        runs.get(run) match
          case Some(r) => block ! DeviceBlock.Ready(r)
          case None => waiting += run -> (waiting.getOrElse(run, Set.empty) + block)
        Behaviors.same
      case BlockDown(run, block) =>
        blocks += run -> (blocks.getOrElse(run, Set.empty) - block)
        Behaviors.same
      case Collect(run, replyTo) =>
        replyTo ! NodeFigures(node, runs.get(run).fold(MetricsSnapshot.empty)(_.parts.metrics.snapshot()))
        Behaviors.same
      case Quiesce(run, replyTo) =>
        val asked = blocks.getOrElse(run, Set.empty).toSeq.map(_.ask[Done](DeviceBlock.Quiesce(_)).recover { case _ => Done })
        Future.sequence(asked).foreach(_ => replyTo ! NodeDone(node))
        Behaviors.same
      case RestartStopped(run) =>
        blocks.getOrElse(run, Set.empty).foreach(_ ! DeviceBlock.RestartStopped)
        Behaviors.same
      case Switch(run, switch) =>
        blocks.getOrElse(run, Set.empty).foreach(_ ! DeviceBlock.Switch(switch))
        Behaviors.same
      case Network(run, action, reach, fault) =>
        for r <- runs.get(run) do fault.fold(r.parts.faults.end(action))(r.parts.faults.start(action, reach.contains, _))
        Behaviors.same
      case resize: Resize =>
        resized += resize.run -> resize
        blocks.getOrElse(resize.run, Set.empty).foreach(_ ! resize.toBlock)
        Behaviors.same
      case MemberGone(address) =>
        // A run whose runner is gone (killed, its machine lost) would never be told to finish.
        for r <- runs.values if r.plan.runner == address do
          say(s"run ${r.plan.id} ended: its runner $address left the cluster; stopping its devices here")
          context.self ! Finish(r.plan.id, context.system.ignoreRef)
        Behaviors.same
      case Finish(run, replyTo) =>
        val asked = blocks.getOrElse(run, Set.empty).toSeq.map(_.ask[Done](DeviceBlock.Finish(_)).recover { case _ => Done })
        val parts = runs.get(run).map(_.parts)
        runs -= run
        blocks -= run
        resized -= run
        Future.sequence(asked).flatMap(_ => parts.fold(Future.successful(Done))(_.close())).onComplete(_ => replyTo ! NodeDone(node))
        Behaviors.same
    }
  }

  /** The plan read as this node's settings, its share checked against what the node can hold, and
    * the parts made; or why not, in one line.
    */
  private def prepare(plan: RunPlan, guard: FreezeGuard)(using system: org.apache.pekko.actor.typed.ActorSystem[?]): Either[String, NodeRun] =
    try
      var config = ConfigFactory.parseString(plan.config).atKey("fleetsim")
      for text <- plan.profileText do
        val file = Files.createTempFile("fleetsim-profile-", ".conf")
        file.toFile.deleteOnExit()
        Files.writeString(file, text)
        config = config.withValue("fleetsim.device-profile", ConfigValueFactory.fromAnyRef(file.toString))
      val settings = RunSettings(config.withFallback(ConfigFactory.load()).resolve())
      val share = shareOf(plan)
      Preflight.check(settings.copy(fleet = settings.fleet.copy(devices = share)))
      val url = settings.transport.serverUrl(settings).get // the plan names it
      Right(NodeRun(plan, settings, FleetParts(settings, Uri(url), None, CompositeMeterRegistry(), share, Some(() => guard.holding))))
    catch
      case NonFatal(e) => Left(s"${Option(e.getMessage).getOrElse(e.toString)} (this node's share: up to ${shareOf(plan)} of ${plan.devices} devices)")

  /** The devices a node must have room for: its share of the blocks should one of the nodes be lost. */
  def shareOf(plan: RunPlan): Int =
    val blocks = (plan.devices + Fleet.GroupSize - 1) / Fleet.GroupSize
    val carriers = if plan.nodes >= 3 then plan.nodes - 1 else plan.nodes.max(1)
    (((blocks + carriers - 1) / carriers) * Fleet.GroupSize).min(plan.devices)
