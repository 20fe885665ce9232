package fleetsim.fleet

import fleetsim.device.Device
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.{Actor, Props}
import org.scalatest.wordspec.AnyWordSpecLike

/** The fleet passes its commands on to every device, whichever group parents it. */
class FleetSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  /** A device that says when it started, when it was told to restart, and when it was powered off or on. */
  private final class StandIn(number: Int, heard: ActorRef[(String, Int)]) extends Actor:
    override def preStart(): Unit = heard ! ("started", number)
    def receive: Receive =
      case Device.Restart => heard ! ("restart", number)
      case Device.Power(from, until, on, among, _, goodbye) =>
        if number >= from && number < until && among.contains(number) then heard ! ((if on then "on" else if goodbye then "goodbye" else "off"), number)

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

  "Fleet.Resize" should {
    "power off the devices numbered from the new size up, power them on again when it grows, and start the rest" in {
      val devices = Fleet.GroupSize + 2
      val heard = createTestProbe[(String, Int)]()
      val fleet = spawn(Fleet(FleetSettings(devices, 1_000_000, None, 0L), i => Props(StandIn(i, heard.ref)), target = 900))
      assert(heard.receiveMessages(900).map(_._2).toSet == (0 until 900).toSet) // a resize before the start
      heard.expectNoMessage()
      fleet ! Fleet.Resize(500, 1_000_000)
      assert(heard.receiveMessages(400).toSet == (500 until 900).map(("off", _)).toSet)
      heard.expectNoMessage()
      fleet ! Fleet.Resize(devices + 10, 1_000_000) // no further than planned
      val grown = heard.receiveMessages(devices - 500).toSet
      assert(grown == ((500 until 900).map(("on", _)) ++ (900 until devices).map(("started", _))).toSet)
      heard.expectNoMessage()
      fleet ! Fleet.Resize(devices, 1_000_000)
      heard.expectNoMessage()
      fleet ! Fleet.Resize(devices - 2, 1_000_000, goodbye = true) // leaving cleanly
      assert(heard.receiveMessages(2).toSet == (devices - 2 until devices).map(("goodbye", _)).toSet)
    }
  }

  "Fleet.Switch" should {
    "reach the devices selected among those numbered so, and only those in the fleet now" in {
      val devices = Fleet.GroupSize + 2
      val heard = createTestProbe[(String, Int)]()
      val fleet = spawn(Fleet(FleetSettings(devices, 1_000_000, None, 0L), i => Props(StandIn(i, heard.ref))))
      heard.receiveMessages(devices)
      fleet ! Fleet.Resize(900, 1_000_000)
      heard.receiveMessages(devices - 900)
      val share = fleetsim.device.Selection.Share(0.5, 3)
      fleet ! Fleet.Switch(Device.Power(0, Int.MaxValue, on = false, share))
      val cut = (0 until 900).filter(share.contains)
      assert(heard.receiveMessages(cut.size).toSet == cut.map(("off", _)).toSet) // none of 900 and up: out of the fleet already
      fleet ! Fleet.Switch(Device.Power(100, 200, on = true))
      assert(heard.receiveMessages(100).toSet == (100 until 200).map(("on", _)).toSet)
      heard.expectNoMessage()
    }
  }
