package fleetsim.transport

import org.apache.pekko.stream.scaladsl.BidiFlow
import org.apache.pekko.stream.stage.{GraphStage, GraphStageLogic, InHandler, OutHandler}
import org.apache.pekko.stream.{Attributes, BidiShape, Inlet, Outlet}
import org.apache.pekko.util.ByteString

import java.nio.ByteBuffer
import javax.net.ssl.SSLEngineResult.{HandshakeStatus, Status}
import javax.net.ssl.{SSLEngine, SSLException, SSLHandshakeException}

/** TLS for one client connection: `engine` driven in the connection's own stream, its records
  * wrapped and unwrapped through buffers of the thread that runs it. Between reads a connection holds
  * only its engine and the bytes of a record not yet whole: a keep-alive connection waiting for its
  * next call holds no buffer (Pekko's TLS stage keeps four of 16 KB and an actor a connection: about
  * 96 KB of heap each, ADR 0013).
  *
  * Closing as Pekko's `TLSClosing.ignoreComplete`: the plaintext side finishing stops the writing
  * once the reading has ended too; the plaintext output cancelled ends the connection, after a
  * close_notify. A server's close_notify, or its end of the TCP stream, ends the plaintext output.
  */
object TlsClientStage:
  /** Plaintext in and out on top, TLS records below: joins a TCP connection's flow. */
  def apply(engine: SSLEngine): BidiFlow[ByteString, ByteString, ByteString, ByteString, ?] =
    BidiFlow.fromGraph(Stage(engine))

  /** A thread's buffers for what one wrap or unwrap writes, and for a read's records: each is used
    * within one call and copied out, so the threads that run connections share them all.
    */
  private final class Scratch:
    var out: ByteBuffer = ByteBuffer.allocate(17 * 1024)
    var in: ByteBuffer = ByteBuffer.allocate(17 * 1024)
  private val scratch = ThreadLocal.withInitial(() => Scratch())

  private final class Stage(engine: SSLEngine) extends GraphStage[BidiShape[ByteString, ByteString, ByteString, ByteString]]:
    val plainIn: Inlet[ByteString] = Inlet("TlsClientStage.plainIn")
    val cipherOut: Outlet[ByteString] = Outlet("TlsClientStage.cipherOut")
    val cipherIn: Inlet[ByteString] = Inlet("TlsClientStage.cipherIn")
    val plainOut: Outlet[ByteString] = Outlet("TlsClientStage.plainOut")
    val shape: BidiShape[ByteString, ByteString, ByteString, ByteString] = BidiShape(plainIn, cipherOut, cipherIn, plainOut)

    def createLogic(attributes: Attributes): GraphStageLogic = new GraphStageLogic(shape):
      private var toWrap = ByteString.empty // plaintext waiting for the handshake to finish
      private var partial = ByteString.empty // the start of a record whose rest has not come
      private var toSend = ByteString.empty // records for the socket, waiting for it to take them
      private var toDeliver = ByteString.empty // plaintext for the reader, waiting for it to take it
      private var inboundDone = false // the server's close_notify, or the end of its stream
      private var closing = false // close_notify queued: the records go out, then the stage ends

      // The engine's own status says FINISHED only in a wrap's or unwrap's result, never here.
      private def handshaking: Boolean = engine.getHandshakeStatus != HandshakeStatus.NOT_HANDSHAKING

      override def preStart(): Unit =
        guarded {
          engine.beginHandshake()
          advance()
        }

      setHandler(plainIn, new InHandler:
        def onPush(): Unit =
          toWrap ++= grab(plainIn)
          step()
        override def onUpstreamFinish(): Unit = step())

      setHandler(cipherIn, new InHandler:
        def onPush(): Unit =
          partial ++= grab(cipherIn)
          step()
        override def onUpstreamFinish(): Unit =
          if handshaking then failStage(SSLHandshakeException("the server closed the connection during the TLS handshake"))
          else
            inboundDone = true
            step())

      setHandler(cipherOut, new OutHandler:
        def onPull(): Unit = step()
        override def onDownstreamFinish(cause: Throwable): Unit = cancelStage(cause))

      setHandler(plainOut, new OutHandler:
        def onPull(): Unit = step()
        override def onDownstreamFinish(cause: Throwable): Unit = guarded(close()))

      private def step(): Unit = guarded(advance())

      /** A TLS failure fails the reader, but the alert the engine queued for it goes out first, and
        * the connection closes after it: the server sees why, as from Pekko's TLS stage, not a reset.
        */
      private def guarded(body: => Unit): Unit =
        try body
        catch case e: SSLException =>
          try wrapClosing()
          catch case _: SSLException => ()
          if !isClosed(plainOut) then fail(plainOut, e)
          if !isClosed(plainIn) then cancel(plainIn)
          if !isClosed(cipherIn) then cancel(cipherIn)
          closing = true
          flush()

      /** Does what the engine and the ports allow now: unwraps what came, wraps what waits, hands
        * both on, and asks for more where there is room.
        */
      private def advance(): Unit =
        if closing then flush() // only the records already queued go out now
        else
          var progress = true
          while progress do
            progress = false
            engine.getHandshakeStatus match
              case HandshakeStatus.NEED_TASK =>
                // Certificate checks and key agreement, on this thread as Pekko's TLS stage runs them.
                var task = engine.getDelegatedTask
                while task != null do { task.run(); task = engine.getDelegatedTask }
                progress = true
              case HandshakeStatus.NEED_WRAP =>
                progress = wrap(ByteString.empty)
                // An engine that asks to wrap and writes nothing would hold the connection until its calls time out.
                if !progress && !engine.isOutboundDone && engine.getHandshakeStatus == HandshakeStatus.NEED_WRAP then
                  throw IllegalStateException("the TLS engine asks to write and writes nothing")
              case _ =>
                if wholeRecord && !inboundDone then progress = unwrap()
                if !progress && !handshaking && toWrap.nonEmpty && !engine.isOutboundDone then
                  val plain = toWrap
                  toWrap = ByteString.empty
                  wrap(plain)
          flush()
          if !isClosed(cipherIn) && !hasBeenPulled(cipherIn) && !inboundDone && toDeliver.isEmpty then pull(cipherIn)
          if !isClosed(plainIn) && !hasBeenPulled(plainIn) && !handshaking && !engine.isOutboundDone && toSend.isEmpty then
            pull(plainIn)
          if inboundDone && toDeliver.isEmpty && !isClosed(plainOut) then complete(plainOut)
          // Nothing more to write (or no way to: a TLS 1.2 server's close_notify answered), and no one
          // reading: the connection ends.
          if !closing && isClosed(plainIn) && (toWrap.isEmpty || engine.isOutboundDone) && isClosed(plainOut) then close()

      /** A whole record has come (its 5-byte header says how long it is): unwrapping less would copy
        * the start of a record again at each read until the rest came.
        */
      private def wholeRecord: Boolean =
        partial.length >= 5 && partial.length >= 5 + ((partial(3) & 0xff) << 8 | (partial(4) & 0xff))

      /** Sends close_notify, then ends the stage once the socket has taken every record; mid-handshake,
        * at once (a server that closed first would read as a failed handshake).
        */
      private def close(): Unit =
        if !closing then
          closing = true
          if handshaking then toSend = ByteString.empty
          else
            engine.closeOutbound()
            wrapClosing()
          flush()

      /** Wraps what the engine has left to say as it closes: close_notify, or the alert for a failure. */
      private def wrapClosing(): Unit =
        while !engine.isOutboundDone && wrap(ByteString.empty) do ()

      private def flush(): Unit =
        if toSend.nonEmpty && isAvailable(cipherOut) then
          push(cipherOut, toSend)
          toSend = ByteString.empty
        if toDeliver.nonEmpty && isAvailable(plainOut) then
          push(plainOut, toDeliver)
          toDeliver = ByteString.empty
        if closing && toSend.isEmpty then completeStage()

      /** Wraps `plain` (a handshake message when empty) into records for the socket; false when the engine wrote nothing. */
      private def wrap(plain: ByteString): Boolean =
        val buffers = scratch.get
        val src = plain.asByteBuffer
        var wrote = false
        var more = true
        while more do
          buffers.out.clear()
          val result = engine.wrap(src, buffers.out)
          result.getStatus match
            case Status.BUFFER_OVERFLOW =>
              buffers.out = ByteBuffer.allocate(engine.getSession.getPacketBufferSize.max(buffers.out.capacity * 2))
            case status =>
              if buffers.out.position > 0 then
                toSend ++= ByteString.fromArray(buffers.out.array, 0, buffers.out.position)
                wrote = true
              more = status == Status.OK && src.hasRemaining && (result.bytesConsumed > 0 || result.bytesProduced > 0)
        wrote

      /** Unwraps the whole records among the bytes come; false when there was none. */
      private def unwrap(): Boolean =
        val buffers = scratch.get
        if buffers.in.capacity < partial.length then buffers.in = ByteBuffer.allocate(partial.length.max(buffers.in.capacity * 2))
        buffers.in.clear()
        partial.copyToBuffer(buffers.in)
        buffers.in.flip()
        var read = false
        var more = true
        while more do
          buffers.out.clear()
          val result = engine.unwrap(buffers.in, buffers.out)
          result.getStatus match
            case Status.BUFFER_OVERFLOW =>
              buffers.out = ByteBuffer.allocate(engine.getSession.getApplicationBufferSize.max(buffers.out.capacity * 2))
            case Status.BUFFER_UNDERFLOW =>
              more = false
            case status =>
              if buffers.out.position > 0 then toDeliver ++= ByteString.fromArray(buffers.out.array, 0, buffers.out.position)
              read = read || result.bytesConsumed > 0
              if status == Status.CLOSED then
                inboundDone = true
                more = false
              else
                // A handshake message may want an answer, or a task run, before the next record.
                more = buffers.in.hasRemaining && result.getHandshakeStatus != HandshakeStatus.NEED_WRAP &&
                  result.getHandshakeStatus != HandshakeStatus.NEED_TASK
        partial = if buffers.in.hasRemaining then ByteString.fromByteBuffer(buffers.in) else ByteString.empty
        read
