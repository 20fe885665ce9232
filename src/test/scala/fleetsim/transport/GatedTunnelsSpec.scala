package fleetsim.transport

import org.apache.pekko.Done
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.scalatest.wordspec.AnyWordSpecLike

import java.util.concurrent.ConcurrentLinkedQueue
import scala.concurrent.{Future, Promise}
import scala.jdk.CollectionConverters.*

/** The gate in front of a fleet's tunnels: at most `limit` opening at once, the rest in order. */
class GatedTunnelsSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  /** Tunnels that open when the test says: each open is recorded with the promise that answers it. */
  private final class Manual extends Tunnels:
    val opening = ConcurrentLinkedQueue[(Int, Promise[Either[FailureReason, Tunnel]])]()
    def open(device: Int, login: String, offered: Option[SshEndpoint], pushed: Push => Unit): Future[Either[FailureReason, Tunnel]] =
      if device < 0 then throw IllegalStateException("no such device")
      val answer = Promise[Either[FailureReason, Tunnel]]()
      opening.add(device -> answer)
      answer.future
    def started: Seq[Int] = opening.asScala.map(_._1).toSeq
    def answer(device: Int, result: Either[FailureReason, Tunnel]): Unit = opening.asScala.find(_._1 == device).get._2.success(result)
    def publicKey: Option[String] = None
    def close(): Future[Done] = Future.successful(Done)

  private val tunnel = new Tunnel:
    def send(device: Int, request: Request): Future[Reply] = Future.successful(Reply.Failed(FailureReason.ProtocolError))
    def lost: Future[Done] = Promise[Done]().future
    def close(): Future[Done] = Future.successful(Done)

  private def open(gated: Tunnels, device: Int) = gated.open(device, s"device-$device", None, _ => ())

  "GatedTunnels" should {
    "open at most `limit` at once, and the others in the order they asked as turns free up" in {
      val inner = Manual()
      val gated = GatedTunnels(inner, 2)
      val results = (0 until 5).map(open(gated, _))
      eventually(assert(inner.started == Seq(0, 1)))
      inner.answer(1, Right(tunnel))
      assert(results(1).futureValue == Right(tunnel))
      eventually(assert(inner.started == Seq(0, 1, 2)))
      inner.answer(0, Left(FailureReason.AuthRejected)) // a refusal frees a turn as a tunnel does
      assert(results(0).futureValue == Left(FailureReason.AuthRejected))
      eventually(assert(inner.started == Seq(0, 1, 2, 3)))
      assert(!results(4).isCompleted)
      gated.close().futureValue
    }
    "keep its turns when an open fails or throws" in {
      val inner = Manual()
      val gated = GatedTunnels(inner, 1)
      val thrown = open(gated, -1)
      assert(thrown.failed.futureValue.getMessage == "no such device")
      val failed = open(gated, 7)
      eventually(assert(inner.started == Seq(7)))
      inner.opening.peek()._2.failure(RuntimeException("socket gone"))
      assert(failed.failed.futureValue.getMessage == "socket gone")
      val next = open(gated, 8)
      eventually(assert(inner.started == Seq(7, 8)))
      inner.answer(8, Right(tunnel))
      assert(next.futureValue == Right(tunnel))
      gated.close().futureValue
    }
  }
