package fleetsim.transport.ssh

import fleetsim.transport.*
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.Http
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.model.headers.Host
import org.apache.pekko.stream.scaladsl.{Flow, Keep, Sink, Source, TLSPlacebo}
import org.apache.pekko.stream.{BoundedSourceQueue, BufferOverflowException, QueueOfferResult}
import org.apache.sshd.common.channel.StreamingChannel.Streaming
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.util.net.SshdSocketAddress

import java.io.EOFException
import java.util.concurrent.ConcurrentLinkedQueue
import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.util.{Failure, Success, Try}

/** A device's SSH session. Its calls travel as HTTP/1.1 over a direct-tcpip channel, as OpenSSH
  * local port forwarding would carry them, but with no local listener and no extra descriptor.
  */
final class SshTunnel(session: ClientSession, target: SshdSocketAddress, requestTimeout: FiniteDuration)(using
    system: ActorSystem[?])
    extends Tunnel:
  private given ExecutionContext = system.executionContext
  private val closed = Promise[Done]()
  session.addCloseFutureListener(_ => closed.trySuccess(Done))
  private var connection: Option[ChannelConnection] = None

  def lost: Future[Done] = closed.future

  def send(request: Request): Future[Reply] =
    val httpRequest = Replies.httpRequest(request, Uri(request.path))
    Replies.within(requestTimeout) {
      // Opening a channel on a session that just closed throws: that too is a failed call, not a crash.
      Future.fromTry(Try(currentConnection()))
        .flatMap(_.send(httpRequest))
        .flatMap(Replies.of(_, requestTimeout))
        .recover(Replies.failure)
    }

  /** The open channel, or a new one when the last was closed (by the server's idle timeout, say). */
  private def currentConnection(): ChannelConnection = synchronized {
    connection.filter(_.isOpen).getOrElse {
      val fresh = ChannelConnection()
      connection = Some(fresh)
      fresh
    }
  }

  def close(): Future[Done] = SshStreams.completion(session.close(false))(_ => Success(Done))

  /** One HTTP connection over one channel. Responses come back in request order (HTTP/1.1), so each
    * is handed to the oldest waiting caller.
    */
  private final class ChannelConnection:
    private val waiting = ConcurrentLinkedQueue[Promise[HttpResponse]]()
    @volatile private var open = true
    private val channel = session.createDirectTcpipChannel(SshdSocketAddress("127.0.0.1", 0), target)
    channel.setStreaming(Streaming.Async)
    private val opened = SshStreams.completion(channel.open())(f => if f.isOpened then Success(channel) else Failure(f.getException))
    private val bytes = Flow
      .futureFlow(opened.map(c => SshStreams.flow(c.getAsyncOut, c.getAsyncIn, () => c.close(false))))
      .mapMaterializedValue(_ => org.apache.pekko.NotUsed)
    private val (requests, done) = Source
      .queue[HttpRequest](64)
      .via(Http(system.classicSystem).clientLayer(Host(target.getHostName, target.getPort)).atop(TLSPlacebo()).join(bytes))
      .mapAsync(1)(_.toStrict(requestTimeout))
      .toMat(Sink.foreach(response => Option(waiting.poll()).foreach(_.success(response))))(Keep.both)
      .run()
    done.onComplete { result =>
      open = false
      val why = result.fold(identity, _ => EOFException("tunnel channel closed"))
      Iterator.continually(waiting.poll()).takeWhile(_ != null).foreach(_.tryFailure(why))
    }

    def isOpen: Boolean = open

    def send(request: HttpRequest): Future[HttpResponse] = synchronized {
      val response = Promise[HttpResponse]()
      waiting.add(response)
      requests.offer(request) match
        case QueueOfferResult.Enqueued => response.future
        case _ =>
          waiting.remove(response)
          Future.failed(BufferOverflowException("tunnel request queue full"))
    }
