package fleetsim.transport

import org.apache.pekko.Done
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.scalatest.wordspec.AnyWordSpecLike

import java.util.concurrent.ConcurrentLinkedQueue
import scala.concurrent.{Future, Promise}
import scala.jdk.CollectionConverters.*

/** The gate in front of a fleet's sessions: at most `limit` opening at once, the rest in order. */
class GatedSessionsSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  /** Sessions that open when the test says: each open is recorded with the promise that answers it. */
  private final class Manual extends Sessions:
    val opening = ConcurrentLinkedQueue[(Int, Promise[Either[SessionFailure, Session]])]()
    def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
      if device < 0 then throw IllegalStateException("no such device")
      val answer = Promise[Either[SessionFailure, Session]]()
      opening.add(device -> answer)
      answer.future
    def started: Seq[Int] = opening.asScala.map(_._1).toSeq
    def answer(device: Int, result: Either[SessionFailure, Session]): Unit = opening.asScala.find(_._1 == device).get._2.success(result)
    def close(): Future[Done] = Future.successful(Done)

  private val session = new Session:
    def send(device: Int, request: Request): Future[Reply] = Future.successful(Reply.Failed(FailureReason.ProtocolError))
    def lost: Future[Done] = Promise[Done]().future
    def close(): Future[Done] = Future.successful(Done)

  private def open(gated: Sessions, device: Int) = gated.open(device, s"device-$device", None, _ => ())

  "GatedSessions" should {
    "open at most `limit` at once, and the others in the order they asked as turns free up" in {
      val inner = Manual()
      val gated = GatedSessions(inner, 2)
      val results = (0 until 5).map(open(gated, _))
      eventually(assert(inner.started == Seq(0, 1)))
      inner.answer(1, Right(session))
      assert(results(1).futureValue == Right(session))
      eventually(assert(inner.started == Seq(0, 1, 2)))
      inner.answer(0, Left(SessionFailure.Refused(FailureReason.AuthRejected))) // a refusal frees a turn as a session does
      assert(results(0).futureValue == Left(SessionFailure.Refused(FailureReason.AuthRejected)))
      eventually(assert(inner.started == Seq(0, 1, 2, 3)))
      assert(!results(4).isCompleted)
      gated.close().futureValue
    }
    "keep its turns when an open fails or throws" in {
      val inner = Manual()
      val gated = GatedSessions(inner, 1)
      val thrown = open(gated, -1)
      assert(thrown.failed.futureValue.getMessage == "no such device")
      val failed = open(gated, 7)
      eventually(assert(inner.started == Seq(7)))
      inner.opening.peek()._2.failure(RuntimeException("socket gone"))
      assert(failed.failed.futureValue.getMessage == "socket gone")
      val next = open(gated, 8)
      eventually(assert(inner.started == Seq(7, 8)))
      inner.answer(8, Right(session))
      assert(next.futureValue == Right(session))
      gated.close().futureValue
    }
  }
