package fleetsim.transport

import org.apache.pekko.Done

import scala.concurrent.{ExecutionContext, Future}

/** Calls and sessions that fail at once, as [[FailureReason.HeldBack]], while `holding` says so. A
  * cluster node holds its devices back after its process was stopped (SIGSTOP, a paused VM, a long
  * GC): meanwhile the cluster may have downed it and started its devices on another node, and one
  * device must never call from two places at once.
  */
object HeldBack:
  private val refused: Future[Reply] = Future.successful(Reply.Failed(FailureReason.HeldBack))
  private val notOpened: Future[Either[SessionFailure, Session]] = Future.successful(Left(SessionFailure.Failed(FailureReason.HeldBack)))

  def transport(inner: Transport, holding: () => Boolean): Transport = new Transport:
    def send(device: Int, request: Request): Future[Reply] = if holding() then refused else inner.send(device, request)
    def close(): Future[Done] = inner.close()

  def sessions(inner: Sessions, holding: () => Boolean): Sessions = new Sessions:
    def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
      if holding() then notOpened
      else inner.open(device, login, offered, pushed).map(_.map(session(_, holding)))(using ExecutionContext.parasitic)
    def close(): Future[Done] = inner.close()

  private def session(inner: Session, holding: () => Boolean): Session = new Session:
    def send(device: Int, request: Request): Future[Reply] = if holding() then refused else inner.send(device, request)
    def lost: Future[Done] = inner.lost
    def close(): Future[Done] = inner.close()
    override def cut(): Unit = inner.cut()
