package fleetsim.transport

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.stream.scaladsl.{BidiFlow, Flow, Keep, Sink, Source}
import org.apache.pekko.stream.{KillSwitches, QueueOfferResult}
import org.apache.pekko.util.ByteString

/** A connection's bytes, both ways, for an HTTP client connection ([[PipelinedConnection]]): written
  * by calls, read by a [[Wire.Receiver]]'s callbacks. A plain TCP socket is a wire with no stream in
  * between ([[Sockets.open]]), its receiver called on the socket's loop, and so is an SSH channel
  * ([[fleetsim.transport.ssh.ChannelWire]]), on its session's I/O thread; a TLS connection is a
  * stream of bytes, run as one ([[Wire.over]]), its receiver called on the pool.
  */
trait Wire:
  /** Sends `bytes` after those written before; false when the wire has ended and takes nothing. */
  def write(bytes: ByteString): Boolean

  /** Ends the wire: what was written goes if it can go now, then both ways close. The receiver hears
    * `ended(None)`, unless it heard its end already. Closing twice is harmless.
    */
  def close(): Unit

  /** Ends the wire now, as `cause` says: the receiver hears `ended(Some(cause))`, unless it heard its end already. */
  def abort(cause: Throwable): Unit

object Wire:
  /** What a wire read. Its calls come one after another, never two at once, and never on the thread
    * that opens the wire, while it opens it.
    */
  trait Receiver:
    /** Bytes the server sent, in order. */
    def received(bytes: ByteString): Unit

    /** The last call: the wire reads nothing more, as the server closed it (None) or as it failed.
      * Close it, if it is not closed yet: it may still be writing.
      */
    def ended(failure: Option[Throwable]): Unit

  /** A wire over a stream of bytes (a TLS connection), run as one stream: what is
    * written while a write is under way leaves in the next one, up to `depth` writes waiting.
    */
  def over(bytes: Flow[ByteString, ByteString, ?], depth: Int, receiver: Receiver)(using system: ActorSystem[?]): Wire =
    val ((requests, switch), done) = Source
      .queue[ByteString](depth)
      .batch(depth, identity)(_ ++ _)
      // Both ways: shut, it ends writing and stops reading, so the socket closes whoever spoke last (TLS included).
      .viaMat(BidiFlow.fromGraph(KillSwitches.singleBidi[ByteString, ByteString]).joinMat(bytes)(Keep.left))(Keep.both)
      .toMat(Sink.foreach(receiver.received))(Keep.both)
      .run()
    // On the pool, never parasitic: a stream that fails at once (a device's certificate that cannot be
    // had) would otherwise tell its receiver on the opening thread, before the wire is returned.
    done.onComplete(result => receiver.ended(result.failed.toOption))(using system.executionContext)
    new Wire:
      def write(bytes: ByteString): Boolean = requests.offer(bytes) == QueueOfferResult.Enqueued
      def close(): Unit = switch.shutdown()
      def abort(cause: Throwable): Unit = switch.abort(cause)
