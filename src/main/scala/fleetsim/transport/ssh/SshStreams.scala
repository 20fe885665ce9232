package fleetsim.transport.ssh

import org.apache.pekko.NotUsed
import org.apache.pekko.stream.scaladsl.{Flow, Sink, Source}
import org.apache.pekko.util.ByteString
import org.apache.sshd.common.future.SshFuture
import org.apache.sshd.common.io.{IoInputStream, IoOutputStream}
import org.apache.sshd.common.util.buffer.ByteArrayBuffer

import java.io.EOFException
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.util.Try

/** MINA SSHD's asynchronous channel streams as Pekko streams, for both ends of a tunnel: the
  * fleet's HTTP client and the controller's HTTP server speak through the same bridge.
  */
object SshStreams:
  private val ReadSize = 16 * 1024

  /** Bytes through an SSH channel. Reading asks for one buffer per demand, and the channel's
    * window is released only as bytes are read; writing waits for each write to be sent. When the
    * flow ends, either way, `close` is called.
    */
  def flow(in: IoInputStream, out: IoOutputStream, close: () => Unit): Flow[ByteString, ByteString, NotUsed] =
    val reads = Source.unfoldAsync(())(_ => read(in))
    val writes = Sink.foreachAsync[ByteString](1)(bytes => write(out, bytes))
    Flow.fromSinkAndSourceCoupled(writes, reads).watchTermination() { (_, done) =>
      done.onComplete(_ => close())(using ExecutionContext.parasitic)
      NotUsed
    }

  private def read(in: IoInputStream): Future[Option[(Unit, ByteString)]] =
    val buffer = ByteArrayBuffer(ReadSize, false)
    val result = Promise[Option[(Unit, ByteString)]]()
    in.read(buffer).addListener { f =>
      f.getException match
        case null => result.success(Some(((), ByteString.fromArray(buffer.array, buffer.rpos, buffer.available))))
        case _: EOFException => result.success(None)
        case e => result.failure(e)
    }
    result.future

  private def write(out: IoOutputStream, bytes: ByteString): Future[Unit] =
    val result = Promise[Unit]()
    out.writeBuffer(ByteArrayBuffer(bytes.toArrayUnsafe())).addListener { f =>
      if f.isWritten then result.success(()) else result.failure(Option(f.getException).getOrElse(EOFException("channel closed")))
    }
    result.future

  /** An SSHD future as a Scala future, completed from the listener: nothing waits on it. */
  def completion[F <: SshFuture[F], A](future: F)(outcome: F => Try[A]): Future[A] =
    val result = Promise[A]()
    future.addListener(f => result.complete(outcome(f)))
    result.future
