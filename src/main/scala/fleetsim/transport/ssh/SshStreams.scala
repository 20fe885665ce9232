package fleetsim.transport.ssh

import org.apache.pekko.NotUsed
import org.apache.pekko.stream.scaladsl.{Flow, Sink, Source}
import org.apache.pekko.util.ByteString
import org.apache.sshd.common.PropertyResolver
import org.apache.sshd.common.future.SshFuture
import org.apache.sshd.common.io.{IoInputStream, IoOutputStream}
import org.apache.sshd.common.util.Readable
import org.apache.sshd.common.util.buffer.ByteArrayBuffer
import org.apache.sshd.core.CoreModuleProperties

import java.io.EOFException
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.util.Try

/** MINA SSHD's asynchronous channel streams as Pekko streams, for the controller's end of a tunnel,
  * where its HTTP server is a stream; and what both ends of a tunnel set alike. The fleet's end is a
  * [[ChannelWire]].
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
    val result = Promise[Option[(Unit, ByteString)]]()
    readOnce(in)(bytes => result.success(Some(((), bytes))), {
      case None => result.success(None)
      case Some(e) => result.failure(e)
    })
    result.future

  /** One read of a channel: what came to `read`, or its end to `ended` (None: the other side's EOF).
    * Callbacks rather than a future: the fleet's end ([[ChannelWire]]) reads on the session's I/O thread.
    */
  def readOnce(in: IoInputStream)(read: ByteString => Unit, ended: Option[Throwable] => Unit): Unit =
    val taken = Taken()
    in.read(taken).addListener { f =>
      f.getException match
        case null => read(taken.bytes)
        case _: EOFException => ended(None)
        case e => ended(Some(e))
    }

  /** A read's buffer that holds nothing while it waits: the channel hands it what came (`putBuffer`),
    * up to `ReadSize`, and that becomes the bytes read, in an array of their size. A read is always
    * waiting on every open channel, and a buffer of `ReadSize` bytes for each was most of what an
    * idle tunnel held.
    */
  private final class Taken extends ByteArrayBuffer(Array.emptyByteArray, false):
    var bytes: ByteString = ByteString.empty
    override def putBuffer(src: Readable, expand: Boolean): Int =
      val array = new Array[Byte](math.min(src.available, ReadSize))
      src.getRawBytes(array, 0, array.length)
      bytes = ByteString.fromArrayUnsafe(array)
      array.length

  private def write(out: IoOutputStream, bytes: ByteString): Future[Unit] =
    val result = Promise[Unit]()
    writeOnce(out, bytes)(failure => result.complete(failure.toLeft(()).toTry))
    result.future

  /** One write to a channel; `done` hears when it has been sent (None) or why it could not be. */
  def writeOnce(out: IoOutputStream, bytes: ByteString)(done: Option[Throwable] => Unit): Unit =
    out.writeBuffer(ByteArrayBuffer(bytes.toArrayUnsafe())).addListener { f =>
      done(if f.isWritten then None else Some(Option(f.getException).getOrElse(EOFException("channel closed"))))
    }

  /** What a tunnel holds between calls, at either end, kept small. Its socket always has a read
    * waiting, into a buffer of its own (32 KB by default). What comes on a channel is copied whole
    * into the channel's buffer, and the session's decoder buffer takes each read behind what is left
    * of the last packet: both grow to the largest they were given and never shrink (8 KB each once a
    * config came). A device's calls and replies are a few hundred bytes: with reads of 2 KB and
    * packets of at most 1.5 KB the three stay at 2, 2 and 4 KB, and a large reply takes a few more
    * packets (bench/history/2026-11-26-footprint.md).
    */
  def smallBuffers(end: PropertyResolver): Unit =
    CoreModuleProperties.NIO2_READ_BUFFER_SIZE.set(end, Integer.valueOf(2048))
    CoreModuleProperties.MAX_PACKET_SIZE.set(end, java.lang.Long.valueOf(1536L))

  /** MINA's I/O threads at either end, before it starts: one per two cores, not its default of one
    * a core and one more. Its threads take turns at every session's reads, handed each event by the
    * JDK's epoll thread; on two cores its three, beside the actors' threads, cost an SSH handshake
    * 1.3 times the CPU of one at both ends (bench/history/2026-12-07-ssh-io-threads.md).
    */
  def fewIoThreads(end: PropertyResolver): Unit =
    CoreModuleProperties.NIO_WORKERS.set(end, Integer.valueOf((Runtime.getRuntime.availableProcessors / 2).max(1)))

  /** An SSHD future as a Scala future, completed from the listener: nothing waits on it. */
  def completion[F <: SshFuture[F], A](future: F)(outcome: F => Try[A]): Future[A] =
    val result = Promise[A]()
    future.addListener(f => result.complete(outcome(f)))
    result.future
