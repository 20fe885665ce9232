package fleetsim.transport.ssh

import fleetsim.transport.*
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.util.net.SshdSocketAddress

import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.util.Success

/** A device's SSH tunnel: its [[Session]]. Its calls travel as HTTP/1.1 over a direct-tcpip channel, as OpenSSH
  * local port forwarding would carry them, but with no local listener and no extra descriptor.
  */
final class SshTunnel(session: ClientSession, target: SshdSocketAddress, pipelining: Int, limits: ReplyLimits, deadlines: Deadlines)(using
    system: ActorSystem[?])
    extends Session:
  private given ExecutionContext = system.executionContext
  private val closed = Promise[Done]()
  session.addCloseFutureListener(_ => closed.trySuccess(Done))
  private val renderer = Http1.Renderer(s"${target.getHostName}:${target.getPort}")
  private var connection: Option[PipelinedConnection] = None

  def lost: Future[Done] = closed.future

  def send(device: Int, request: Request): Future[Reply] = PipelinedConnection.send(renderer, request, deadlines)(place)

  /** On the open channel; a call the channel ended without answering comes back here, once. */
  private def place(call: PipelinedConnection.Call): Unit =
    // Opening a channel on a session that just closed throws: that too is a failed call, not a crash.
    val failed =
      try Option.unless(currentConnection().offer(call))(FailureReason.Overloaded)
      catch case e: Exception => Some(Replies.reason(e))
    failed.foreach(reason => call.reply.trySuccess(Reply.Failed(reason)))

  /** The open channel, or a new one when the last was closed (by the server's idle timeout, say). */
  private def currentConnection(): PipelinedConnection = synchronized {
    connection.filter(_.isOpen).getOrElse {
      val fresh = PipelinedConnection(
        (_, receiver) => ChannelWire(session.createDirectTcpipChannel(SshdSocketAddress("127.0.0.1", 0), target), receiver, summon[ExecutionContext]),
        pipelining, deadlines, limits, resend = place)
      connection = Some(fresh)
      fresh
    }
  }

  def close(): Future[Done] = SshStreams.completion(session.close(false))(_ => Success(Done))
  /** The socket closed at once: no channel closed in turn, no disconnect message. */
  override def cut(): Unit = session.close(true)
