package fleetsim.transport.ssh

import fleetsim.transport.Wire
import org.apache.pekko.util.ByteString
import org.apache.sshd.client.channel.ChannelDirectTcpip
import org.apache.sshd.common.channel.StreamingChannel.Streaming

import java.io.EOFException
import scala.concurrent.ExecutionContext

/** A device's HTTP connection straight over a direct-tcpip channel of its SSH session, as a plain
  * socket is one ([[fleetsim.transport.Sockets]]): written through the channel's asynchronous
  * output, read through its input, its receiver called on the session's I/O thread. A stream
  * between them, as a TLS connection has, cost the fleet a dozen stages materialized a tunnel and
  * a hop through the pool a call.
  *
  * The channel takes one write at a time: what is written meanwhile leaves in the next write.
  *
  * @param pool where the receiver hears an end that did not come from a read (a write failed, an abort,
  *   a channel that could not open): never inside one of its own calls, nor on the thread opening the wire
  */
final class ChannelWire(channel: ChannelDirectTcpip, receiver: Wire.Receiver, pool: ExecutionContext) extends Wire:
  import ChannelWire.*
  private var waiting = ByteString.empty // guarded by this: written while the channel could take nothing
  private var busy = true // guarded by this: a write under way, or the channel not open yet
  private var closing = false // guarded by this: close() asked; the channel closes once what waits is sent
  @volatile private var over = false // set under this lock: the receiver hears nothing more but its end
  private val hearing = Object() // the receiver's calls, one at a time, as a wire promises
  // The read's callbacks, made once a wire rather than once a read (before the
  // channel opens: its listener starts the reads, maybe on another thread).
  private val heard: ByteString => Unit = bytes =>
    hearing.synchronized(if !over then receiver.received(bytes))
    read()
  private val readEnded: Option[Throwable] => Unit = failure =>
    if failure.isDefined then channel.close(true)
    if ending() then hearing.synchronized(receiver.ended(failure))

  channel.setStreaming(Streaming.Async)
  channel.open().addListener { opened =>
    if opened.isOpened then
      read()
      sent()
    else failed(Option(opened.getException).getOrElse(EOFException("channel refused")))
  }

  def write(bytes: ByteString): Boolean =
    val now = synchronized {
      if over || closing then Refused
      else if busy then
        waiting ++= bytes // leaves when the write under way is done
        Queued
      else
        busy = true
        Now
    }
    if now == Now then send(bytes)
    now != Refused

  /** Closing twice, or after the end, is harmless: the channel closes once. */
  def close(): Unit =
    val now = synchronized {
      closing = true
      !busy || over
    }
    if now then channel.close(false)

  def abort(cause: Throwable): Unit = failed(cause)

  private def send(bytes: ByteString): Unit =
    try SshStreams.writeOnce(channel.getAsyncIn, bytes)(_.fold(sent())(failed))
    catch case e: Exception => failed(e)

  /** The channel can take the next write: what waits, or, once closing, the channel's close. */
  private def sent(): Unit =
    val (next, close) = synchronized {
      if waiting.nonEmpty && !over then
        val next = waiting
        waiting = ByteString.empty
        (next, false)
      else
        busy = false
        (null, closing)
    }
    if next != null then send(next) else if close then channel.close(false)

  /** Ends the wire from outside its reads (a write, an abort, the channel's opening): the receiver
    * hears it on the pool, after any call it is in, never inside a call of its own to this wire.
    */
  private def failed(e: Throwable): Unit =
    channel.close(true)
    if ending() then pool.execute(() => hearing.synchronized(receiver.ended(Some(e))))

  /** A read always waits on the channel while it is open: the channel's window opens as it is read. */
  private def read(): Unit = SshStreams.readOnce(channel.getAsyncOut)(heard, readEnded)

  /** True the first time: the wire takes nothing more, and its receiver is to hear its end. */
  private def ending(): Boolean = synchronized {
    val first = !over
    over = true
    waiting = ByteString.empty
    first
  }

private object ChannelWire:
  // What a write does.
  private inline val Refused = 0
  private inline val Queued = 1
  private inline val Now = 2
