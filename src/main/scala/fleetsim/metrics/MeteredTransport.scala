package fleetsim.metrics

import fleetsim.transport.{FailureReason, Push, Reply, Request, Session, SessionFailure, SessionOffer, Sessions, Transport}
import org.apache.pekko.Done

import scala.concurrent.{ExecutionContext, Future}

/** Counts and times every call through the transport it wraps. */
final class MeteredTransport(inner: Transport, metrics: FleetMetrics) extends Transport:
  def send(device: Int, request: Request): Future[Reply] =
    val started = System.nanoTime()
    metrics.sent(request.kind)
    val reply = inner.send(device, request)
    reply.onComplete { result =>
      metrics.replied(request.kind, result.getOrElse(Reply.Failed(FailureReason.ProtocolError)), System.nanoTime() - started)
    }(using ExecutionContext.parasitic)
    reply

  def close(): Future[Done] = inner.close()

/** Times handshakes, counts sessions up and failed (under the figures' names: `tunnels`), and meters
  * the calls through each session.
  */
final class MeteredSessions(inner: Sessions, metrics: FleetMetrics) extends Sessions:
  private given ExecutionContext = ExecutionContext.parasitic

  def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
    val started = System.nanoTime()
    inner.open(device, login, offered, pushed).map {
      case Right(session) =>
        metrics.tunnelOpened(System.nanoTime() - started)
        session.lost.foreach(_ => metrics.tunnelClosed())
        Right(MeteredSession(session))
      case failed @ Left(failure) =>
        metrics.tunnelFailed(failure.reason)
        failed
    }

  def close(): Future[Done] = inner.close()

  private final class MeteredSession(session: Session) extends Session:
    private val metered = MeteredTransport(session, metrics)
    def send(device: Int, request: Request): Future[Reply] = metered.send(device, request)
    def lost: Future[Done] = session.lost
    def close(): Future[Done] = session.close()
    override def cut(): Unit = session.cut()
