package fleetsim.transport

import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.stream.QueueOfferResult
import org.apache.pekko.stream.scaladsl.{Sink, Source}

import scala.concurrent.ExecutionContext.parasitic
import scala.concurrent.{Future, Promise}
import scala.util.Success

/** Sessions opened at most `limit` at a time in this process; the other devices wait their turn, in
  * the order they asked. A fleet then never storms a server with more handshakes than it takes at
  * once: OpenSSH's MaxStartups starts dropping at 10, and a broker making TLS handshakes on one
  * thread falls behind a fast ramp until the connects piled up on it time out, back off and come
  * again (bench/history/2026-11-24-mqtt-connects-bounded.md). Wrap it around the metered sessions,
  * so that a connect's time is the server's, not the wait for a turn.
  */
final class GatedSessions(inner: Sessions, limit: Int)(using system: ActorSystem[?]) extends Sessions:
  require(limit >= 1, s"at least one session must be allowed to open (got $limit)")

  // A device asks for one session at a time, so the queue never holds more than this process's
  // devices; past its bound (more than the descriptors allow anyway) an open fails as overloaded.
  private val gate = Source
    .queue[() => Future[Unit]](1 << 16)
    .mapAsyncUnordered(limit)(turn => turn())
    .to(Sink.ignore)
    .run()

  def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
    val result = Promise[Either[SessionFailure, Session]]()
    val turn = () =>
      // delegate: an open that throws fails its own result, never the gate.
      result.completeWith(Future.delegate(inner.open(device, login, offered, pushed))(using parasitic))
      result.future.transform(_ => Success(()))(using parasitic)
    gate.offer(turn) match
      case QueueOfferResult.Enqueued => result.future
      case _ => GatedSessions.overloaded

  def close(): Future[Done] =
    gate.complete()
    inner.close()

object GatedSessions:
  private val overloaded: Future[Either[SessionFailure, Session]] = Future.successful(Left(SessionFailure.Failed(FailureReason.Overloaded)))
