package fleetsim.transport

import org.apache.pekko.NotUsed
import org.apache.pekko.actor.typed.{ActorSystem, Extension, ExtensionId}
import org.apache.pekko.stream.scaladsl.Flow
import org.apache.pekko.stream.stage.{GraphStage, InHandler, OutHandler, TimerGraphStageLogic}
import org.apache.pekko.stream.{Attributes, FlowShape, Inlet, Outlet, StreamTcpException}
import org.apache.pekko.util.ByteString

import java.io.IOException
import java.net.{InetSocketAddress, StandardSocketOptions}
import java.nio.ByteBuffer
import java.nio.channels.{SelectionKey, Selector, SocketChannel}
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicBoolean
import scala.concurrent.ExecutionContext
import scala.concurrent.duration.FiniteDuration
import scala.util.control.NonFatal

/** The HTTP client's TCP connections, on one selector thread of the fleet's own (ADR 0014), as
  * Netty's event loop runs them: that thread does every read and write. A connection's stage hands
  * it the bytes to write and wakes it, once for whatever comes while it wakes, so the calls of a
  * burst leave in one write; what it reads goes straight to the stage. Pekko IO took a hand-over to
  * its connection actor and one back for each read, and three for each write and its ack.
  *
  * A connection that cannot be made (refused, unreachable, timed out, its source address not
  * bindable) fails as a [[StreamTcpException]]: `connectFailed`. One that breaks after it was made
  * (a reset) fails as an IOException: a broken connection, `protocolError`.
  */
final class Sockets private (name: String) extends Extension:
  import Sockets.*

  private val selector = Selector.open()
  private val tasks = ConcurrentLinkedQueue[Runnable]()
  private val flushes = ConcurrentLinkedQueue[Connection#Logic]()
  private val woken = AtomicBoolean() // a wake-up is on its way: what is queued meanwhile rides on it
  @volatile private var open = true
  // The selector thread's: every read lands in the one, copied out at its size; every write leaves from the other.
  private val inBuffer = ByteBuffer.allocateDirect(ReadBuffer)
  private val outBuffer = ByteBuffer.allocateDirect(WriteBuffer)
  private val thread = Thread(() => loop(), name)
  thread.setDaemon(true)
  thread.start()

  /** A TCP connection to `remote`, from `local` when given, as a flow of bytes. Finishing its input
    * half-closes the socket once what was written has left; cancelling its output closes it.
    */
  def connect(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration): Flow[ByteString, ByteString, NotUsed] =
    Flow.fromGraph(Connection(remote, local, connectTimeout))

  /** Runs `task` on the selector thread. */
  private def execute(task: Runnable): Unit =
    tasks.add(task)
    wake()

  private def flush(connection: Connection#Logic): Unit =
    flushes.add(connection)
    wake()

  private def wake(): Unit = if !woken.getAndSet(true) then selector.wakeup()

  private def close(): Unit =
    open = false
    selector.wakeup()

  private def loop(): Unit =
    try
      while open do
        selector.select(key => key.attachment.asInstanceOf[Connection#Logic].ready(key))
        woken.set(false) // before the queues are read: what is queued after this wakes the selector again
        var task = tasks.poll()
        while task != null do
          try task.run() catch case NonFatal(e) => Complaints.warn("sockets", s"a socket task failed: $e")
          task = tasks.poll()
        var connection = flushes.poll()
        while connection != null do
          try connection.write() catch case NonFatal(e) => connection.failed(e)
          connection = flushes.poll()
    finally
      selector.keys.forEach(key => try key.channel.close() catch case _: IOException => ())
      selector.close()

  private final class Connection(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration)
      extends GraphStage[FlowShape[ByteString, ByteString]]:
    val in: Inlet[ByteString] = Inlet("Sockets.in")
    val out: Outlet[ByteString] = Outlet("Sockets.out")
    val shape: FlowShape[ByteString, ByteString] = FlowShape(in, out)

    def createLogic(attributes: Attributes): Logic = Logic()

    /** The stage's own fields are its thread's; `outgoing` and the flags beside it are shared with
      * the selector thread, under the lock of `this`; the rest are the selector thread's.
      */
    final class Logic extends TimerGraphStageLogic(shape):
      private var channel: SocketChannel = null // opened as the stage starts: a descriptor it cannot have fails the connect

      // The stage's thread.
      private var toDeliver = ByteString.empty // read, not yet pulled
      private var readingPaused = false
      private var ended = false // the server closed its side: what it sent is all it sends
      private var writingEnded = false // the input finished, and the selector thread wrote all of it and half-closed

      // Shared, under this lock.
      private var outgoing = ByteString.empty // handed over to be written
      private var queued = false // in the selector thread's flushes
      private var inputDone = false // nothing more will be handed over
      private var full = false // too much waits: the stage takes no more until the selector thread has written it

      // The selector thread's.
      private var key: SelectionKey = null
      private var unwritten = ByteString.empty // what the socket did not take yet
      private var writable = false // connected, and the output not yet shut

      // Called from the selector thread: each runs on the stage's own.
      private val onConnected = getAsyncCallback[Unit](_ => cancelTimer(Timeout))
      private val onRead = getAsyncCallback[ByteString](received)
      private val onEnd = getAsyncCallback[Unit](_ => { ended = true; if toDeliver.isEmpty then complete(out); finishIfDone() })
      private val onFailure = getAsyncCallback[Throwable](failStage)
      private val onRoom = getAsyncCallback[Unit](_ => if !isClosed(in) && !hasBeenPulled(in) then pull(in))
      private val onWritingEnded = getAsyncCallback[Unit](_ => { writingEnded = true; finishIfDone() })

      override def preStart(): Unit =
        try
          channel = SocketChannel.open()
          channel.configureBlocking(false)
          channel.setOption(StandardSocketOptions.TCP_NODELAY, java.lang.Boolean.TRUE)
          local.foreach(channel.bind)
          channel.connect(remote)
          scheduleOnce(Timeout, connectTimeout)
          execute(() => register())
          pull(in)
        catch case NonFatal(e) => failStage(connectFailed(e.toString))

      setHandler(in, new InHandler:
        def onPush(): Unit = if handOver(grab(in), done = false) then pull(in)
        override def onUpstreamFinish(): Unit = handOver(ByteString.empty, done = true))

      /** Hands `bytes` to the selector thread, queueing this connection to be written unless it is
        * queued already; false when so much waits that the stage takes no more until it is written.
        */
      private def handOver(bytes: ByteString, done: Boolean): Boolean =
        val (first, room) = synchronized {
          outgoing ++= bytes
          inputDone = done
          full = outgoing.length >= WriteBatch
          val first = !queued
          queued = true
          (first, !full)
        }
        if first then flush(this)
        room

      setHandler(out, new OutHandler:
        def onPull(): Unit = if toDeliver.nonEmpty then deliver()
        override def onDownstreamFinish(cause: Throwable): Unit = completeStage())

      // Cancelled once connected.
      override protected def onTimer(timerKey: Any): Unit = failStage(connectFailed(s"no connection to $remote within $connectTimeout"))

      private def received(bytes: ByteString): Unit =
        toDeliver ++= bytes
        if isAvailable(out) then deliver()
        else if toDeliver.length > ReadAhead && !readingPaused then
          readingPaused = true
          execute(() => if key != null && key.isValid then key.interestOpsAnd(~SelectionKey.OP_READ))

      private def deliver(): Unit =
        push(out, toDeliver)
        toDeliver = ByteString.empty
        if ended then complete(out)
        else if readingPaused then
          readingPaused = false
          execute(() => if key != null && key.isValid then key.interestOpsOr(SelectionKey.OP_READ))
        finishIfDone()

      /** Both ways over: the server said all it will, and all there was to write has left. */
      private def finishIfDone(): Unit =
        if isClosed(out) && toDeliver.isEmpty && writingEnded then completeStage()

      // What follows runs on the selector thread.

      /** The channel joins the selector, interested in what it waits for. */
      private def register(): Unit =
        try
          key = channel.register(selector, if channel.isConnected then SelectionKey.OP_READ else SelectionKey.OP_CONNECT, this)
          if channel.isConnected then connectedNow()
        catch case NonFatal(e) => onFailure.invoke(connectFailed(e.toString)) // closed meanwhile: the stage has stopped

      private def connectedNow(): Unit =
        writable = true
        onConnected.invoke(())
        write() // what was handed over while connecting

      /** What the socket is ready for. A failure ends the stage (or nothing, when the stage ended
        * first and closed the channel under it).
        */
      def ready(key: SelectionKey): Unit =
        try
          if key.isConnectable then
            try
              channel.finishConnect()
              key.interestOps(SelectionKey.OP_READ)
            catch case NonFatal(e) => throw connectFailed(e.toString)
            connectedNow()
          else
            if key.isWritable then
              key.interestOpsAnd(~SelectionKey.OP_WRITE)
              write()
            if key.isReadable then read()
        catch case NonFatal(e) => failed(e)

      private def read(): Unit =
        inBuffer.clear()
        val n = channel.read(inBuffer)
        if n > 0 then
          val bytes = new Array[Byte](n)
          inBuffer.flip()
          inBuffer.get(bytes)
          onRead.invoke(ByteString.fromArrayUnsafe(bytes))
        else if n < 0 then
          key.interestOpsAnd(~SelectionKey.OP_READ)
          onEnd.invoke(())

      /** Writes what the socket did not take before, then what was handed over since; the rest when
        * it is writable again. Once the input is done and all of it written, half-closes.
        */
      def write(): Unit =
        if writable && key.isValid then
          if unwritten.nonEmpty then writeOut()
          if unwritten.isEmpty then
            val (taken, done, wasFull) = synchronized {
              val taken = outgoing
              outgoing = ByteString.empty
              queued = false
              val wasFull = full
              full = false
              (taken, inputDone, wasFull)
            }
            unwritten = taken
            if unwritten.nonEmpty then writeOut()
            if wasFull then onRoom.invoke(())
            if done && unwritten.isEmpty then // nothing is handed over once the input is done
              writable = false
              channel.shutdownOutput()
              onWritingEnded.invoke(())

      /** One write of as much as the write buffer holds. */
      private def writeOut(): Unit =
        outBuffer.clear()
        unwritten.copyToBuffer(outBuffer)
        outBuffer.flip()
        unwritten = unwritten.drop(channel.write(outBuffer))
        if unwritten.nonEmpty then key.interestOpsOr(SelectionKey.OP_WRITE)

      /** A failure on the selector thread ends the stage (or nothing, when the stage ended first). */
      def failed(e: Throwable): Unit =
        if key != null then key.cancel()
        onFailure.invoke(e)

      override def postStop(): Unit =
        // What is left goes if the socket takes it now (a TLS close_notify); then the channel closes on
        // the selector thread, which drops its key as it closes: the descriptor is freed at once.
        if channel != null then
          execute { () =>
            try write() catch case NonFatal(_) => ()
            try channel.close() catch case _: IOException => ()
          }

  private def connectFailed(why: String) = StreamTcpException(s"no connection to the server: $why")

object Sockets extends ExtensionId[Sockets]:
  private val Timeout = "connect-timeout"
  /** A read: as much as a whole pipelined burst of replies usually is. */
  private val ReadBuffer = 64 * 1024
  /** Bytes read ahead of the reader before the socket stops being read. */
  private val ReadAhead = 256 * 1024
  /** A write: a burst of calls, or a slice of a larger one. */
  private val WriteBuffer = 64 * 1024
  /** Bytes handed over and not yet written before the stage takes no more. */
  private val WriteBatch = 256 * 1024

  def createExtension(system: ActorSystem[?]): Sockets =
    val sockets = new Sockets(s"${system.name}-sockets") // "fleetsim-sockets" in a fleet
    system.whenTerminated.onComplete(_ => sockets.close())(using ExecutionContext.parasitic)
    sockets
