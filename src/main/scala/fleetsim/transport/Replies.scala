package fleetsim.transport

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.pattern.after
import org.apache.pekko.stream.{BufferOverflowException, StreamTcpException}

import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future}
import scala.util.control.NonFatal

/** What every HTTP-speaking transport does with a response, an exception and a deadline. */
object Replies:
  /** The HTTP request for a call: GET without a body, POST with its JSON. */
  def httpRequest(request: Request, uri: Uri): HttpRequest = request.body match
    case Some(json) => HttpRequest(HttpMethods.POST, uri, entity = HttpEntity(ContentTypes.`application/json`, json))
    case None => HttpRequest(HttpMethods.GET, uri)

  /** Reads a response into a [[Reply]], consuming its entity whatever the status, or the
    * connection would stall.
    */
  def of(response: HttpResponse, timeout: FiniteDuration)(using system: ActorSystem[?]): Future[Reply] =
    given ExecutionContext = system.executionContext
    response.status match
      case StatusCodes.OK => response.entity.toStrict(timeout).map(e => Reply.Ok(e.data.toArray))
      case StatusCodes.Forbidden => response.discardEntityBytes().future.map(_ => Reply.Forbidden)
      case _ => response.discardEntityBytes().future.map(_ => Reply.Failed(FailureReason.Rejected))

  val failure: PartialFunction[Throwable, Reply] =
    case _: StreamTcpException => Reply.Failed(FailureReason.ConnectFailed)
    case _: BufferOverflowException => Reply.Failed(FailureReason.Overloaded)
    case _: java.util.concurrent.TimeoutException => Reply.Failed(FailureReason.TimedOut)
    case NonFatal(_) => Reply.Failed(FailureReason.ProtocolError)

  /** The reply, or TimedOut if it has not come within `timeout`. */
  def within(timeout: FiniteDuration)(reply: Future[Reply])(using ActorSystem[?]): Future[Reply] =
    orElse(timeout, Reply.Failed(FailureReason.TimedOut))(reply)

  /** The future's result, or `late` if it has not come within `timeout`. */
  def orElse[A](timeout: FiniteDuration, late: => A)(future: Future[A])(using system: ActorSystem[?]): Future[A] =
    Future.firstCompletedOf(Seq(future, after(timeout)(Future.successful(late))))(using ExecutionContext.parasitic)
