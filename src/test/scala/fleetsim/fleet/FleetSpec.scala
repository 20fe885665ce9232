package fleetsim.fleet

import fleetsim.device.Device
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.{Actor, Props}
import org.scalatest.wordspec.AnyWordSpecLike

/** The fleet passes its commands on to every device, whichever group parents it. */
class FleetSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  /** A device that says when it started and when it was told to restart. */
  private final class StandIn(number: Int, heard: ActorRef[(String, Int)]) extends Actor:
    override def preStart(): Unit = heard ! ("started", number)
    def receive: Receive = { case Device.Restart => heard ! ("restart", number) }

  "Fleet.RestartStopped" should {
    "reach every device, in every group" in {
      val devices = Fleet.GroupSize + 2
      val heard = createTestProbe[(String, Int)]()
      val fleet = spawn(Fleet(FleetSettings(devices, 1_000_000, None, 0L), i => Props(StandIn(i, heard.ref))))
      assert(heard.receiveMessages(devices).map(_._2).toSet == (0 until devices).toSet)
      fleet ! Fleet.RestartStopped
      assert(heard.receiveMessages(devices).toSet == (0 until devices).map(("restart", _)).toSet)
      heard.expectNoMessage()
    }
  }
