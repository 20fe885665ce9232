package fleetsim.cluster

import com.typesafe.config.{Config, ConfigRenderOptions, ConfigValueFactory}
import fleetsim.run.{FleetDevices, FleetRun, RunSettings}
import fleetsim.CannotRun
import fleetsim.device.DeviceState
import fleetsim.fleet.Fleet
import fleetsim.metrics.{FleetMetrics, MetricsSnapshot}
import fleetsim.report.ClusterSummary
import io.micrometer.core.instrument.MeterRegistry
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.receptionist.Receptionist
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem}
import org.apache.pekko.cluster.MemberStatus
import org.apache.pekko.cluster.sharding.ShardRegion
import org.apache.pekko.cluster.typed.Cluster
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope
import org.apache.pekko.cluster.sharding.typed.scaladsl.{ClusterSharding, Entity}
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout

import java.nio.file.{Files, Path}
import java.util.concurrent.ConcurrentHashMap
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}
import scala.collection.immutable.ListMap
import scala.jdk.CollectionConverters.*

/** `run --cluster`: the run's process joins the cluster without devices of its own, waits for the
  * nodes, hands each the plan, wakes the run's blocks (Cluster Sharding spreads them over the nodes),
  * and gathers the nodes' figures into the fleet's, every second and at the end.
  */
object ClusterRun:
  /** Where the devices go: onto the cluster's nodes, once `nodes` of them are up. */
  def placement(settings: RunSettings, config: Config, join: String, nodes: Int)(using system: ActorSystem[?]): FleetRun.Placement =
    (url, _, registry) =>
      given ExecutionContext = system.executionContext
      for
        agents <- nodesUp(nodes, join, Deadline.now + 60.seconds)
        plan = RunPlan(java.util.UUID.randomUUID.toString.take(8), planConfig(config, settings, url.toString), profileText(config),
          System.currentTimeMillis + 1000, settings.fleet.devices, agents.size, Cluster(system).selfMember.address.toString)
        devices = ClusterDevices(plan, settings, registry)
        _ <- devices.prepare(agents)
        region = ClusterSharding(system).init(Entity(DeviceBlock.typeKey(plan.id))(_ => Behaviors.empty).withRole(NodeAgent.Role))
        _ <- regionsUp(plan, agents.size, Deadline.now + 30.seconds)
      yield
        (0 until (plan.devices + Fleet.GroupSize - 1) / Fleet.GroupSize).foreach(b => region ! ShardingEnvelope(b.toString, DeviceBlock.Start))
        devices

  /** The nodes' agents, once at least `wanted` are up; a one-line refusal after the deadline. */
  private def nodesUp(wanted: Int, join: String, deadline: Deadline)(using system: ActorSystem[?]): Future[Set[ActorRef[NodeAgent.Command]]] =
    given ExecutionContext = system.executionContext
    agents().flatMap { found =>
      if found.size >= wanted then Future.successful(found)
      else if deadline.isOverdue() then
        Future.failed(CannotRun(s"found ${found.size} of $wanted fleetsim nodes in the cluster at $join within 60 s: start them " +
          s"(./fleetsim node --cluster-port PORT --seed-nodes $join), or ask for fewer with --cluster-nodes"))
      else after(250.millis)(nodesUp(wanted, join, deadline))
    }

  /** Waits until the coordinator knows every node's region for the run: blocks woken before would
    * all go to the first nodes to register. Past the deadline the blocks go where they can.
    */
  private def regionsUp(plan: RunPlan, wanted: Int, deadline: Deadline)(using system: ActorSystem[?]): Future[Done] =
    given ExecutionContext = system.executionContext
    val proxy = org.apache.pekko.cluster.sharding.ClusterSharding(system.classicSystem).shardRegion(DeviceBlock.typeKey(plan.id).name)
    org.apache.pekko.pattern.ask(proxy, ShardRegion.GetCurrentRegions)(using Timeout(2.seconds)).mapTo[ShardRegion.CurrentRegions]
      .map(_.regions.size).recover { case _ => 0 }.flatMap { regions =>
        if regions >= wanted || deadline.isOverdue() then Future.successful(Done)
        else after(100.millis)(regionsUp(plan, wanted, deadline))
      }

  private[cluster] def agents()(using system: ActorSystem[?]): Future[Set[ActorRef[NodeAgent.Command]]] =
    system.receptionist.ask[Receptionist.Listing](Receptionist.Find(NodeAgent.Key))(using Timeout(5.seconds), system.scheduler)
      .map(_.serviceInstances(NodeAgent.Key))(using ExecutionContext.parasitic)

  /** The run's settings for the nodes, pointed at the controller (or broker) the runner found or started. */
  private def planConfig(config: Config, settings: RunSettings, url: String): String =
    // The runner plays the scenario and judges the thresholds; the nodes run devices, drawing from
    // the runner's seed (the one it picked, when none was asked for) as one process would.
    config.getConfig("fleetsim").withValue(settings.transport.serverKey, ConfigValueFactory.fromAnyRef(url))
      .withValue("run.seed", ConfigValueFactory.fromAnyRef(settings.seed))
      .withoutPath("run.scenario").withoutPath("run.thresholds").root.render(ConfigRenderOptions.concise())

  /** A profile named by file travels with the plan: a node on another machine lacks the file. */
  private def profileText(config: Config): Option[String] =
    val name = config.getString("fleetsim.device-profile")
    Option.when(name.nonEmpty && Files.isRegularFile(Path.of(name)))(Files.readString(Path.of(name)))

/** A run's devices on the cluster's nodes; figures are the sum of the nodes' snapshots. A node that
  * joins mid-run gets the plan too, so blocks rebalanced onto it can start.
  */
final class ClusterDevices(plan: RunPlan, settings: RunSettings, registry: MeterRegistry)(using system: ActorSystem[?]) extends FleetDevices:
  private given ExecutionContext = system.executionContext
  private val asked = ConcurrentHashMap.newKeySet[ActorRef[NodeAgent.Command]]() // answered the plan, either way
  private val zero = FleetMetrics(settings.profile.kinds).snapshot()
  /** Each node's last figures, by its address; a node gone from the cluster keeps what it counted. */
  @volatile private var byNode: Map[String, MetricsSnapshot] = Map.empty
  /** Nodes that left or died during the run. */
  @volatile private var lost: Set[String] = Set.empty
  /** The fleet's size after a resize: nodes that come later are told it too. */
  @volatile private var resized: Option[NodeAgent.Resize] = None
  private val meters = NodeMeters(registry, settings.profile.kinds, () => byNode)

  def sessions: Boolean = settings.transport.sessions.isDefined
  override def cluster: Option[ClusterSummary] =
    Some(ClusterSummary(ListMap.from(byNode.toSeq.filter((node, _) => !lost(node)).sortBy(_._1).map((node, s) => node -> s.devices)), lost.toList.sorted))

  /** Hands `agents` the plan, once each; fails with the first node's refusal. */
  def prepare(agents: Set[ActorRef[NodeAgent.Command]]): Future[Done] =
    given Timeout = Timeout(60.seconds)
    Future.sequence((agents -- asked.asScala).toSeq.map(a => a.ask[Prepared](NodeAgent.Prepare(plan, _)).map(a -> _))).flatMap { answers =>
      answers.foreach((a, _) => asked.add(a)) // a late node that refused is not asked again every second
      for resize <- resized; (a, _) <- answers do a ! resize
      answers.collectFirst { case (_, Prepared(node, Some(problem))) => Future.failed(CannotRun(s"node $node refused the run: $problem")) }
        .getOrElse(Future.successful(Done))
    }

  def snapshot(): Future[MetricsSnapshot] =
    given Timeout = Timeout(2.seconds)
    for
      agents <- ClusterRun.agents()
      _ <- prepare(agents).recover { case _ => Done } // a late node that cannot take blocks gets none: it has no entity region
      figures <- Future.sequence(agents.toSeq.map(_.ask[NodeFigures](NodeAgent.Collect(plan.id, _)).map(Some(_)).recover { case _ => None }))
    yield
      val answered = figures.flatten.map(f => f.node -> f.snapshot).toMap
      // Lost means no longer a member (downed, or left). A member the runner cannot reach for a while,
      // or too busy to answer in time, keeps its last figures: it is still running its devices.
      val members = Cluster(system).state.members.filterNot(_.status == MemberStatus.Down).map(_.address.toString)
      val silent = byNode -- answered.keySet
      lost ++= silent.keySet -- members
      byNode = answered ++ silent.map((node, s) => node -> (if members(node) then s.quiet else s.lost))
      answered.foreach(meters.add)
      byNode.values.foldLeft(zero)(_ + _)

  def quiesce(): Future[Done] = everyNode(NodeAgent.Quiesce(plan.id, _))
  def stop(): Future[Done] = everyNode(NodeAgent.Finish(plan.id, _))
  def close(): Future[Done] = Future.successful(Done)

  /** Tells every node; how many were Stopped as of the last snapshot (taken every second). */
  def restartStopped(): Long =
    ClusterRun.agents().foreach(_.foreach(_ ! NodeAgent.RestartStopped(plan.id)))
    byNode.values.map(_.byState.getOrElse(DeviceState.Stopped, 0L)).sum

  def switch(switch: fleetsim.device.Device.Switch): Unit = asked.asScala.foreach(_ ! NodeAgent.Switch(plan.id, switch))
  def network(action: Int, reach: fleetsim.control.Reach, fault: Option[fleetsim.transport.NetworkFault]): Unit =
    asked.asScala.foreach(_ ! NodeAgent.Network(plan.id, action, reach, fault))

  def resize(devices: Int, rate: Double, goodbye: Boolean): Unit =
    val resize = NodeAgent.Resize(plan.id, devices, rate, from = resized.fold(plan.devices)(_.devices), atMs = System.currentTimeMillis(), goodbye)
    resized = Some(resize)
    asked.asScala.foreach(_ ! resize)

  private def everyNode(message: ActorRef[NodeDone] => NodeAgent.Command): Future[Done] =
    given Timeout = Timeout(60.seconds)
    ClusterRun.agents().flatMap(agents => Future.sequence(agents.toSeq.map(_.ask[NodeDone](message).recover { case _ => NodeDone("") }))).map(_ => Done)
