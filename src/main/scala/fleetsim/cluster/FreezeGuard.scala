package fleetsim.cluster

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.cluster.MemberStatus
import org.apache.pekko.cluster.typed.Cluster

import scala.concurrent.ExecutionContext
import scala.concurrent.duration.*

/** Holds a node's devices back ([[fleetsim.transport.HeldBack]]) once its process has been stopped
  * for longer than `limit` (SIGSTOP, a paused VM, a long GC). Meanwhile the others may have downed
  * this node and started its blocks again; its devices, woken with their sends overdue, would call
  * the controller alongside their own copies. They wait until this node has seen every member
  * reachable for `settle`, or it is downed, and its devices stop.
  *
  * A beat every 100 ms measures the stops; a device asking before the first beat after a stop sees
  * the last beat too old, so it is held back whichever thread wakes first.
  */
final class FreezeGuard(system: ActorSystem[?], say: String => Unit, limit: FiniteDuration = 3.seconds, settle: FiniteDuration = 5.seconds):
  @volatile private var lastBeat = System.nanoTime()
  /** When the current hold began, or last saw the cluster unsettled; 0: not holding. */
  @volatile private var heldSince = 0L

  def holding: Boolean = heldSince != 0 || System.nanoTime() - lastBeat > limit.toNanos

  private def beat(): Unit =
    val now = System.nanoTime()
    if now - lastBeat > limit.toNanos && heldSince == 0 then
      heldSince = now
      say(f"this node's process was stopped for ${(now - lastBeat) / 1e9}%.1f s: its devices hold back until it knows it is still a member")
    lastBeat = now
    if heldSince != 0 then
      val cluster = Cluster(system)
      if cluster.selfMember.status != MemberStatus.Up || cluster.state.unreachable.nonEmpty then heldSince = now
      else if now - heldSince > settle.toNanos then
        heldSince = 0
        say("this node is still a member, every other reachable: its devices go on")

  system.scheduler.scheduleAtFixedRate(100.millis, 100.millis)(() => beat())(using ExecutionContext.parasitic)
