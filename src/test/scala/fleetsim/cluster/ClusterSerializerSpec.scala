package fleetsim.cluster

import com.typesafe.config.ConfigFactory
import scala.concurrent.duration.*
import fleetsim.device.{Device, DeviceState}
import fleetsim.metrics.FleetMetrics
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import org.apache.pekko.actor.testkit.typed.scaladsl.ActorTestKit
import org.apache.pekko.serialization.{SerializationExtension, Serializers}
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** What crosses between a cluster's processes comes back as it left, through the serializer that
  * cluster.conf binds (Java serialization stays off).
  */
class ClusterSerializerSpec extends AnyFunSuite with BeforeAndAfterAll:
  private val testKit = ActorTestKit(ConfigFactory.parseString("pekko.actor.provider = local")
    .withFallback(ConfigFactory.parseResources("fleetsim/cluster.conf")).withFallback(ConfigFactory.load()).resolve())
  private val serialization = SerializationExtension(testKit.system.toClassic)
  override def afterAll(): Unit = testKit.shutdownTestKit()

  private def roundTrip[A <: AnyRef](message: A): A =
    val serializer = serialization.findSerializerFor(message)
    assert(serializer.isInstanceOf[ClusterSerializer], serializer)
    val bytes = serialization.serialize(message).get
    serialization.deserialize(bytes, serializer.identifier, Serializers.manifestFor(serializer, message)).get.asInstanceOf[A]

  test("a node's figures: counts, failures by reason, transitions and times all come back") {
    val kinds = IndexedSeq(MessageKind("heartbeat", 0, periodic = true))
    val metrics = FleetMetrics(kinds)
    metrics.moved(None, DeviceState.Discovering)
    metrics.moved(Some(DeviceState.Discovering), DeviceState.Reporting)
    (1 to 500).foreach { i =>
      metrics.sent(kinds(0))
      metrics.replied(kinds(0), if i % 100 == 0 then Reply.Failed(FailureReason.TimedOut) else Reply.Response(200, Array.emptyByteArray), i * 1_000_000L)
    }
    metrics.late(kinds(0), 12_000_000L)
    metrics.tunnelOpened(7_000_000L)
    metrics.halted("join: 403")
    metrics.halted("checksum: 404 x5")
    metrics.halted("join: 403")
    (1 to 3).foreach(_ => metrics.cut(1))
    Seq(2_000_000_000L, 3_000_000_000L).foreach(metrics.recovered(1, _))
    val snapshot = metrics.snapshot()
    val back = roundTrip(NodeFigures("pekko://fleetsim@127.0.0.1:25520", snapshot)).snapshot
    assert(back.byState == snapshot.byState)
    assert(back.transitions == snapshot.transitions)
    val (k, b) = (snapshot.byKind("heartbeat"), back.byKind("heartbeat"))
    assert((b.sent, b.ok, b.failures(FailureReason.TimedOut), b.inFlight) == (500, 495, 5, 0))
    assert(b.overall.latency == k.overall.latency && b.recent.count == 500)
    assert(b.overallLateness.latency == k.overallLateness.latency && b.overallLateness.count == 1 && b.recentLateness.count == 1)
    assert(back.tunnels.opened == 1 && back.tunnels.overall.latency == snapshot.tunnels.overall.latency)
    assert(back.stopped == Map("join: 403" -> 2, "checksum: 404 x5" -> 1))
    assert(back.actions.keySet == Set(1) && back.actions(1).cut == 3 && back.actions(1).recovery.count == 2)
    assert(back.actions(1).recovery.latency == snapshot.actions(1).recovery.latency)
  }

  test("a restart of a run's stopped devices") {
    assert(roundTrip(NodeAgent.RestartStopped("r1")) == NodeAgent.RestartStopped("r1"))
  }

  test("a plan with a long profile and its reply address") {
    val probe = testKit.createTestProbe[Prepared]()
    val plan = RunPlan("r1", "{\"fleet\":{\"devices\":3000}}", Some("x" * 100_000), 1234L, 3000, 3, "pekko://fleetsim@127.0.0.1:40000")
    val back = roundTrip(NodeAgent.Prepare(plan, probe.ref))
    assert(back.plan == plan)
    back.replyTo ! Prepared("n", Some("no room"))
    probe.expectMessage(Prepared("n", Some("no room")))
  }

  test("the run's controls: a resize, and power cuts of a share or of numbers") {
    for goodbye <- Seq(false, true) do
      assert(roundTrip(NodeAgent.Resize("r1", 2500, 12.5, 1200, 1_764_000_000_123L, goodbye)) == NodeAgent.Resize("r1", 2500, 12.5, 1200, 1_764_000_000_123L, goodbye))
    for message <- Seq(NodeAgent.Switch("r1", Device.Power(0, Int.MaxValue, on = false, fleetsim.device.Selection.Share(0.3, 42L), cause = 2)),
        NodeAgent.Switch("r1", Device.Power(100, 200, on = true)),
        NodeAgent.Switch("r1", Device.Power(100, 200, on = false, goodbye = true)),
        NodeAgent.Switch("r1", Device.Affect(0, Int.MaxValue, fleetsim.device.Selection.Share(0.3, 42L), 3, Device.Affect.Phase.End)),
        NodeAgent.Network("r1", 3, fleetsim.control.Reach(0, 500, fleetsim.device.Selection.All), Some(fleetsim.transport.NetworkFault.Partition)),
        NodeAgent.Network("r1", 4, fleetsim.control.Reach.All, Some(fleetsim.transport.NetworkFault.Degrade(200.millis, 0.1))),
        NodeAgent.Network("r1", 4, fleetsim.control.Reach.All, None),
        NodeAgent.Switch("r1", Device.Power(0, Int.MaxValue, on = false, fleetsim.device.Selection.Slice(0.1, 0.2, 42L), cause = 0))) do
      assert(roundTrip(message) == message)
  }
