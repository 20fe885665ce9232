package fleetsim.transport

import fleetsim.device.Draws
import org.apache.pekko.Done
import org.scalatest.wordspec.AnyWordSpec

import scala.concurrent.duration.*
import scala.concurrent.{Await, Future}

/** A degraded link loses the calls the run's seed says: the same ones run after run. */
class NetworkFaultsSpec extends AnyWordSpec:
  private val heartbeat = Request(MessageKind("heartbeat", 0, periodic = true), "POST", "/hb", Array.emptyByteArray, Array.emptyByteArray,
    timeout = 1.millis.toNanos)

  /** An answer to every call, at once. */
  private val answering = new Transport:
    def send(device: Int, request: Request): Future[Reply] = Future.successful(Reply.Response(200, Array.emptyByteArray))
    def close(): Future[Done] = Future.successful(Done)

  /** Which of devices 0 to 9's first 50 calls each a 30% loss loses, with `seed`, the calls drawn for as a device does before each. */
  private def lostWith(seed: Long): Seq[(Int, Int)] =
    val draws = Draws.seeded(seed)
    val faults = NetworkFaults(1.second, () => draws.current)
    faults.start(0, _ => true, NetworkFault.Degrade(Duration.Zero, 0.3))
    val link = faults.transport(answering)
    for
      device <- 0 until 10
      call <- 0 until 50
      _ = draws.at(device, 1, Draws.Render, 0, call.toLong) // as the device's render of the call leaves them
      reply = Await.result(link.send(device, heartbeat), 5.seconds)
      if reply == Reply.Failed(FailureReason.TimedOut)
    yield (device, call)

  "A degraded link" should {
    "lose about the share it is told, and the same calls for the same seed" in {
      val lost = lostWith(7)
      assert(lost.size > 100 && lost.size < 200, s"${lost.size} of 500 lost at 30%")
      assert(lostWith(7) == lost)
      assert(lostWith(8) != lost)
    }
  }
