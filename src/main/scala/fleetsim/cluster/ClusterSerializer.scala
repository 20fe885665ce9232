package fleetsim.cluster

import fleetsim.device.{Device, DeviceState, Selection}
import fleetsim.metrics.*
import fleetsim.control.Reach
import fleetsim.transport.{FailureReason, NetworkFault}
import org.apache.pekko.actor.ExtendedActorSystem
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.actor.typed.{ActorRef, ActorRefResolver}
import org.apache.pekko.serialization.SerializerWithStringManifest

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import scala.collection.immutable.ListMap
import scala.concurrent.duration.*

/** Writes [[ClusterMessage]]s as compact binary: every node runs the same build, so the enums'
  * orders agree. Times travel as HdrHistogram's compressed encoding, so nodes' figures add up
  * exactly where they are merged.
  */
final class ClusterSerializer(system: ExtendedActorSystem) extends SerializerWithStringManifest:
  private lazy val resolver = ActorRefResolver(system.toTyped)

  def identifier: Int = 730_501

  def manifest(o: AnyRef): String = o match
    case _: NodeAgent.Prepare => "prepare"
    case _: Prepared => "prepared"
    case _: NodeAgent.Collect => "collect"
    case _: NodeFigures => "figures"
    case _: NodeAgent.Quiesce => "quiesce"
    case _: NodeAgent.Finish => "finish"
    case _: NodeAgent.RestartStopped => "restart"
    case _: NodeAgent.Resize => "resize"
    case _: NodeAgent.Switch => "switch"
    case _: NodeAgent.Network => "network"
    case _: NodeDone => "done"
    case DeviceBlock.Start => "start"
    case DeviceBlock.Stop => "stop"
    case other => throw IllegalArgumentException(s"not a cluster message: ${other.getClass}")

  def toBinary(o: AnyRef): Array[Byte] =
    val bytes = ByteArrayOutputStream()
    val out = DataOutputStream(bytes)
    o match
      case NodeAgent.Prepare(plan, replyTo) =>
        out.writeUTF(plan.id); writeText(out, plan.config); out.writeBoolean(plan.profileText.isDefined); plan.profileText.foreach(writeText(out, _))
        out.writeLong(plan.startAtMs); out.writeInt(plan.devices); out.writeInt(plan.nodes); out.writeUTF(plan.runner); ref(out, replyTo)
      case Prepared(node, problem) => out.writeUTF(node); out.writeBoolean(problem.isDefined); problem.foreach(writeText(out, _))
      case NodeAgent.Collect(run, replyTo) => out.writeUTF(run); ref(out, replyTo)
      case NodeFigures(node, snapshot) => out.writeUTF(node); writeSnapshot(out, snapshot)
      case NodeAgent.Quiesce(run, replyTo) => out.writeUTF(run); ref(out, replyTo)
      case NodeAgent.Finish(run, replyTo) => out.writeUTF(run); ref(out, replyTo)
      case NodeAgent.RestartStopped(run) => out.writeUTF(run)
      case NodeAgent.Resize(run, devices, rate, from, atMs, goodbye) =>
        out.writeUTF(run); out.writeInt(devices); out.writeDouble(rate); out.writeInt(from); out.writeLong(atMs); out.writeBoolean(goodbye)
      case NodeAgent.Switch(run, switch) =>
        out.writeUTF(run); writeReach(out, Reach(switch.from, switch.until, switch.among)); out.writeInt(switch.cause)
        switch match
          case p: Device.Power => out.writeByte(0); out.writeBoolean(p.on); out.writeBoolean(p.goodbye)
          case a: Device.Affect => out.writeByte(1); out.writeByte(a.phase.ordinal); out.writeBoolean(a.applies)
      case NodeAgent.Network(run, action, reach, fault) =>
        out.writeUTF(run); out.writeInt(action); writeReach(out, reach)
        fault match
          case None => out.writeByte(0)
          case Some(NetworkFault.Partition) => out.writeByte(1)
          case Some(NetworkFault.Degrade(latency, loss)) => out.writeByte(2); out.writeLong(latency.toNanos); out.writeDouble(loss)
      case NodeDone(node) => out.writeUTF(node)
      case DeviceBlock.Start | DeviceBlock.Stop => ()
      case other => throw IllegalArgumentException(s"not a cluster message: ${other.getClass}")
    out.flush()
    bytes.toByteArray

  def fromBinary(bytes: Array[Byte], manifest: String): AnyRef =
    val in = DataInputStream(ByteArrayInputStream(bytes))
    manifest match
      case "prepare" =>
        val id = in.readUTF(); val config = readText(in); val profile = Option.when(in.readBoolean())(readText(in))
        NodeAgent.Prepare(RunPlan(id, config, profile, in.readLong(), in.readInt(), in.readInt(), in.readUTF()), ref(in))
      case "prepared" => Prepared(in.readUTF(), Option.when(in.readBoolean())(readText(in)))
      case "collect" => NodeAgent.Collect(in.readUTF(), ref(in))
      case "figures" => NodeFigures(in.readUTF(), readSnapshot(in))
      case "quiesce" => NodeAgent.Quiesce(in.readUTF(), ref(in))
      case "finish" => NodeAgent.Finish(in.readUTF(), ref(in))
      case "restart" => NodeAgent.RestartStopped(in.readUTF())
      case "resize" => NodeAgent.Resize(in.readUTF(), in.readInt(), in.readDouble(), in.readInt(), in.readLong(), in.readBoolean())
      case "switch" =>
        val (run, reach, cause) = (in.readUTF(), readReach(in), in.readInt())
        NodeAgent.Switch(run,
          if in.readByte() == 0 then Device.Power(reach.from, reach.until, in.readBoolean(), reach.among, cause, in.readBoolean())
          else Device.Affect(reach.from, reach.until, reach.among, cause, Device.Affect.Phase.fromOrdinal(in.readByte()), in.readBoolean()))
      case "network" =>
        val (run, action, reach) = (in.readUTF(), in.readInt(), readReach(in))
        val fault = in.readByte() match
          case 0 => None
          case 1 => Some(NetworkFault.Partition)
          case _ => Some(NetworkFault.Degrade(in.readLong().nanos, in.readDouble()))
        NodeAgent.Network(run, action, reach, fault)
      case "done" => NodeDone(in.readUTF())
      case "start" => DeviceBlock.Start
      case "stop" => DeviceBlock.Stop
      case other => throw IllegalArgumentException(s"unknown cluster message '$other'")

  private def writeReach(out: DataOutputStream, reach: Reach): Unit =
    out.writeInt(reach.from); out.writeInt(reach.until)
    reach.among match
      case Selection.All => out.writeByte(0)
      case Selection.Slice(from, until, seed) => out.writeByte(1); out.writeDouble(from); out.writeDouble(until); out.writeLong(seed)
  private def readReach(in: DataInputStream): Reach =
    val (from, until) = (in.readInt(), in.readInt())
    Reach(from, until, if in.readByte() == 0 then Selection.All else Selection.Slice(in.readDouble(), in.readDouble(), in.readLong()))

  private def ref(out: DataOutputStream, r: ActorRef[?]): Unit = out.writeUTF(resolver.toSerializationFormat(r))
  private def ref[T](in: DataInputStream): ActorRef[T] = resolver.resolveActorRef[T](in.readUTF())

  /** Text of any length (writeUTF stops at 64 KB; a profile or a config may be longer). */
  private def writeText(out: DataOutputStream, text: String): Unit =
    val bytes = text.getBytes(java.nio.charset.StandardCharsets.UTF_8)
    out.writeInt(bytes.length); out.write(bytes)
  private def readText(in: DataInputStream): String = String(in.readNBytes(in.readInt()), java.nio.charset.StandardCharsets.UTF_8)

  private def writeTimes(out: DataOutputStream, t: Times): Unit =
    val bytes = t.encoded
    out.writeInt(bytes.length); out.write(bytes)
  private def readTimes(in: DataInputStream): Times = Times.decode(in.readNBytes(in.readInt()))

  private def writeCounts[K](out: DataOutputStream, keys: Array[K], counts: Map[K, Long]): Unit = keys.foreach(k => out.writeLong(counts.getOrElse(k, 0L)))
  private def readCounts[K](in: DataInputStream, keys: Array[K]): Map[K, Long] = keys.map(k => k -> in.readLong()).toMap

  private val moves = for from <- DeviceState.values; to <- DeviceState.values yield (from, to)

  private def writeSnapshot(out: DataOutputStream, s: MetricsSnapshot): Unit =
    writeCounts(out, DeviceState.values, s.byState)
    out.writeInt(s.byKind.size)
    s.byKind.foreach { (key, k) =>
      out.writeUTF(key)
      out.writeLong(k.sent); out.writeLong(k.ok); out.writeLong(k.forbidden); writeCounts(out, FailureReason.values, k.failures); out.writeLong(k.inFlight)
      writeTimes(out, k.recent); writeTimes(out, k.overall); writeTimes(out, k.recentLateness); writeTimes(out, k.overallLateness)
    }
    val t = s.tunnels
    out.writeLong(t.opened); out.writeLong(t.up); out.writeLong(t.retunnels); writeCounts(out, FailureReason.values, t.failures)
    writeTimes(out, t.recent); writeTimes(out, t.overall)
    writeCounts(out, moves, s.transitions)
    out.writeLong(s.pushes.received); out.writeLong(s.pushes.acknowledged); writeTimes(out, s.pushes.recent); writeTimes(out, s.pushes.overall)
    out.writeInt(s.stopped.size); s.stopped.foreach { (reason, n) => out.writeUTF(reason); out.writeLong(n) }
    out.writeInt(s.actions.size); s.actions.foreach { (action, a) => out.writeInt(action); out.writeLong(a.cut); writeTimes(out, a.recovery) }

  private def readSnapshot(in: DataInputStream): MetricsSnapshot =
    val byState = readCounts(in, DeviceState.values)
    val byKind = ListMap.from((1 to in.readInt()).map { _ =>
      in.readUTF() -> KindSnapshot(in.readLong(), in.readLong(), in.readLong(), readCounts(in, FailureReason.values), in.readLong(),
        readTimes(in), readTimes(in), readTimes(in), readTimes(in))
    })
    val tunnels = TunnelSnapshot(in.readLong(), in.readLong(), in.readLong(), readCounts(in, FailureReason.values), readTimes(in), readTimes(in))
    val transitions = readCounts(in, moves)
    val pushes = PushSnapshot(in.readLong(), in.readLong(), readTimes(in), readTimes(in))
    val stopped = (1 to in.readInt()).map(_ => in.readUTF() -> in.readLong()).toMap
    MetricsSnapshot(byState, byKind, tunnels, transitions, pushes, stopped,
      (1 to in.readInt()).map(_ => in.readInt() -> ActionSnapshot(in.readLong(), readTimes(in))).toMap)
