package fleetsim.run

import fleetsim.control.Reach
import fleetsim.device.{Device, DeviceState}
import fleetsim.transport.NetworkFault
import fleetsim.fleet.Fleet
import fleetsim.metrics.MetricsSnapshot
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem}
import org.apache.pekko.util.Timeout

import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** Where a run's devices are: in this process, or spread over a cluster's nodes. A [[FleetRun]]
  * drives either the same way: figures every second, and at the end quiesce, drain, stop.
  */
trait FleetDevices:
  /** The whole fleet's figures now; each call takes the times since the previous one. */
  def snapshot(): Future[MetricsSnapshot]
  /** Calls sent and not answered yet, fleet-wide. */
  def inFlight(): Future[Long] = snapshot().map(_.inFlight)(using ExecutionContext.parasitic)
  /** No device starts or sends any more; done once every device has heard. */
  def quiesce(): Future[Done]
  /** Every device stopped. */
  def stop(): Future[Done]
  /** Starts again every device that stopped itself; how many were Stopped. */
  def restartStopped(): Long
  /** Grows the fleet to `devices` at `rate` a second, or shrinks it, 0 to the number planned, with or without a `goodbye` ([[fleetsim.fleet.Fleet.Resize]]). */
  def resize(devices: Int, rate: Double, goodbye: Boolean): Unit
  /** Tells the devices in the fleet now that the switch names ([[Device.Switch]]): power off or on, an action on the fleet's side. */
  def switch(switch: Device.Switch): Unit
  /** Starts (`fault` given) or ends action `action`'s fault on the fleet's side of the network for the devices `reach` names. */
  def network(action: Int, reach: Reach, fault: Option[NetworkFault]): Unit
  /** After the summary: closes what the devices shared (sessions, connections). */
  def close(): Future[Done]
  /** Devices hold sessions of their own: SSH tunnels or MQTT connections. */
  def sessions: Boolean
  /** Over a cluster: devices on each node as of the last snapshot, and the nodes lost. */
  def cluster: Option[fleetsim.report.ClusterSummary] = None

/** A run's devices in this process, under one [[Fleet]]. */
final class LocalDevices(val parts: FleetParts, fleet: ActorRef[Fleet.Command])(using system: ActorSystem[?]) extends FleetDevices:
  private given ExecutionContext = system.executionContext
  private given Timeout = Timeout(30.seconds)

  def snapshot(): Future[MetricsSnapshot] = Future.successful(parts.metrics.snapshot())
  override def inFlight(): Future[Long] = Future.successful(parts.metrics.inFlight)
  def quiesce(): Future[Done] = fleet.ask[Done](Fleet.Quiesce(_))
  def stop(): Future[Done] = fleet.ask[Done](Fleet.Stop(_))
  def restartStopped(): Long =
    val stopped = parts.metrics.devicesByState(DeviceState.Stopped)
    fleet ! Fleet.RestartStopped
    stopped
  def resize(devices: Int, rate: Double, goodbye: Boolean): Unit = fleet ! Fleet.Resize(devices, rate, goodbye)
  def switch(switch: Device.Switch): Unit = fleet ! Fleet.Switch(switch)
  def network(action: Int, reach: Reach, fault: Option[NetworkFault]): Unit = fault match
    case Some(f) => parts.faults.start(action, reach.contains, f)
    case None => parts.faults.end(action)
  def close(): Future[Done] = parts.close()
  def sessions: Boolean = parts.sessions.isDefined
