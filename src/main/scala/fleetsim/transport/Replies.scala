package fleetsim.transport

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.pattern.after
import org.apache.pekko.stream.StreamTcpException

import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future}

/** What every transport does with an exception and a deadline. */
object Replies:
  /** Why the calls on a connection failed, from the exception that ended it. */
  def reason(e: Throwable): FailureReason = e match
    case _: StreamTcpException => FailureReason.ConnectFailed
    case _: java.util.concurrent.TimeoutException => FailureReason.TimedOut
    case _ => FailureReason.ProtocolError

  /** The future's result, or `late` if it has not come within `timeout`. */
  def orElse[A](timeout: FiniteDuration, late: => A)(future: Future[A])(using system: ActorSystem[?]): Future[A] =
    Future.firstCompletedOf(Seq(future, after(timeout)(Future.successful(late))))(using ExecutionContext.parasitic)
