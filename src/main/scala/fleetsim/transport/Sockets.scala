package fleetsim.transport

import org.apache.pekko.NotUsed
import org.apache.pekko.actor.typed.{ActorSystem, Extension, ExtensionId}
import org.apache.pekko.stream.scaladsl.Flow
import org.apache.pekko.actor.Cancellable
import org.apache.pekko.stream.stage.{GraphStage, GraphStageLogic, InHandler, OutHandler}
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
  * Netty's event loop runs them: that thread does every read and write. A connection hands it the
  * bytes to write and wakes it, once for whatever comes while it wakes, so the calls of a burst
  * leave in one write. What it reads goes to the connection's stage ([[connect]], under TLS), or,
  * for a plain socket that is its own [[Wire]] ([[open]]), to its receiver in one task on the
  * devices' pool, which parses and answers it there: this thread only reads and writes (ADR 0014).
  * Pekko IO took a hand-over to its connection actor and one back for each read, and three for each
  * write and its ack.
  *
  * A connection that cannot be made (refused, unreachable, timed out, its source address not
  * bindable) fails as a [[StreamTcpException]]: `connectFailed`. One that breaks after it was made
  * (a reset) fails as an IOException: a broken connection, `protocolError`.
  */
final class Sockets private (system: ActorSystem[?]) extends Extension:
  import Sockets.*

  private val selector = Selector.open()
  private val tasks = ConcurrentLinkedQueue[Runnable]()
  private val flushes = ConcurrentLinkedQueue[Socket]()
  private val woken = AtomicBoolean() // a wake-up is on its way: what is queued meanwhile rides on it
  @volatile private var open = true
  // The selector thread's: every read lands in the one, copied out at its size; every write leaves from the other.
  private val inBuffer = ByteBuffer.allocateDirect(ReadBuffer)
  private val outBuffer = ByteBuffer.allocateDirect(WriteBuffer)
  private val thread = Thread(() => loop(), s"${system.name}-sockets") // "fleetsim-sockets" in a fleet
  thread.setDaemon(true)
  thread.start()

  /** A TCP connection to `remote`, from `local` when given, that is its own wire: `receiver` hears
    * what it reads on the pool, one task at a time.
    */
  def open(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration, receiver: Wire.Receiver): Wire =
    Socket(remote, local, connectTimeout, receiver, () => (), onPool = true)

  /** A TCP connection to `remote`, from `local` when given, as a flow of bytes (under TLS). Finishing
    * its input half-closes the socket once what was written has left; cancelling its output closes it.
    */
  def connect(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration): Flow[ByteString, ByteString, NotUsed] =
    Flow.fromGraph(Connection(remote, local, connectTimeout))

  /** Runs `task` on the selector thread. */
  private def execute(task: Runnable): Unit =
    tasks.add(task)
    wake()

  private def flush(socket: Socket): Unit =
    flushes.add(socket)
    wake()

  private def wake(): Unit = if !woken.getAndSet(true) then selector.wakeup()

  private def close(): Unit =
    open = false
    selector.wakeup()

  private def loop(): Unit =
    try
      while open do
        selector.select(key => key.attachment.asInstanceOf[Socket].ready(key))
        woken.set(false) // before the queues are read: what is queued after this wakes the selector again
        var task = tasks.poll()
        while task != null do
          try task.run() catch case NonFatal(e) => Complaints.warn("sockets", s"a socket task failed: $e")
          task = tasks.poll()
        var socket = flushes.poll()
        while socket != null do
          try socket.write() catch case NonFatal(e) => socket.end(Some(e))
          socket = flushes.poll()
    finally
      selector.keys.forEach(key => try key.channel.close() catch case _: IOException => ())
      selector.close()

  /** One TCP connection. Its connect starts at once; all else happens on the selector thread, which
    * tells `receiver` what it read, and its end once: the server's close ends it too, as an HTTP
    * client never keeps a connection half-open. `outgoing` and the flags beside it are shared with
    * the threads that write, under the lock of `this`; the rest are the selector thread's.
    *
    * @param room called when so much had waited to be written that [[handOver]] said to stop, and it has gone
    */
  private final class Socket(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration,
      receiver: Wire.Receiver, room: () => Unit, onPool: Boolean = false) extends Wire:
    private var channel: SocketChannel = null
    private val to: Wire.Receiver = if onPool then Inbox() else receiver

    // Shared, under this lock.
    private var outgoing = ByteString.empty // handed over to be written
    private var queued = false // in the selector thread's flushes
    private var finishing = false // nothing more will be handed over: half-close once it is written
    private var shut = false // closed or aborted: nothing more is taken
    private var full = false // too much waits: the writer waits for room()

    // The selector thread's.
    private var key: SelectionKey = null
    private var unwritten = ByteString.empty // what the socket did not take yet
    private var writable = false // connected, and the output not yet shut
    private var connected = false
    private var ended = false // the receiver heard the end

    private var timeout: Cancellable = Cancellable.alreadyCancelled // the connect's; set before the selector thread sees the socket

    try
      channel = SocketChannel.open()
      channel.configureBlocking(false)
      channel.setOption(StandardSocketOptions.TCP_NODELAY, java.lang.Boolean.TRUE)
      local.foreach(channel.bind)
      channel.connect(remote)
      timeout = system.scheduler.scheduleOnce(connectTimeout,
        () => execute(() => if !connected then end(Some(connectFailed(s"no connection to $remote within $connectTimeout")))))(
        using ExecutionContext.parasitic)
      execute(() => register())
    catch case NonFatal(e) => execute(() => end(Some(connectFailed(e.toString)))) // a descriptor it cannot have fails the connect

    /** False when the socket has ended: what it is handed then is dropped. */
    def write(bytes: ByteString): Boolean =
      synchronized(!shut) && { handOver(bytes, finish = false); true }

    def close(): Unit = shutAnd(() => { flushNow(); end(None) })

    def abort(cause: Throwable): Unit = shutAnd(() => end(Some(cause)))

    private def shutAnd(task: Runnable): Unit =
      val first = synchronized { val first = !shut; shut = true; first }
      if first then execute(task)

    /** Hands `bytes` to the selector thread, queueing this socket to be written unless it is queued
      * already; false when so much waits that the writer should wait for `room`. With `finish`,
      * nothing more comes: the socket half-closes once all of it is written.
      */
    def handOver(bytes: ByteString, finish: Boolean): Boolean =
      val (first, hasRoom) = synchronized {
        if !shut then
          outgoing ++= bytes
          finishing ||= finish
        full = outgoing.length >= WriteBatch
        val first = !queued && !shut
        queued ||= first
        (first, !full)
      }
      if first then flush(this)
      hasRoom

    /** Stops reading, or reads again: the reader has not taken what came. */
    def pauseReading(paused: Boolean): Unit = execute(() => reading(!paused))

    // What follows runs on the selector thread.

    /** The channel joins the selector, interested in what it waits for. */
    private def register(): Unit =
      if !ended then
        try
          key = channel.register(selector, if channel.isConnected then SelectionKey.OP_READ else SelectionKey.OP_CONNECT, this)
          if channel.isConnected then connectedNow()
        catch case NonFatal(e) => end(Some(connectFailed(e.toString)))

    /** Reads, or stops reading, from now on. */
    private def reading(on: Boolean): Unit =
      if key != null && key.isValid then
        if on then key.interestOpsOr(SelectionKey.OP_READ) else key.interestOpsAnd(~SelectionKey.OP_READ)

    private def connectedNow(): Unit =
      connected = true
      writable = true
      timeout.cancel()
      write() // what was handed over while connecting

    /** What the socket is ready for. A failure ends it. */
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
      catch case NonFatal(e) => end(Some(e))

    private def read(): Unit =
      inBuffer.clear()
      val n = channel.read(inBuffer)
      if n > 0 then
        val bytes = new Array[Byte](n)
        inBuffer.flip()
        inBuffer.get(bytes)
        to.received(ByteString.fromArrayUnsafe(bytes))
      else if n < 0 then end(None)

    /** Writes what the socket did not take before, then what was handed over since; the rest when
      * it is writable again. Once nothing more comes and all of it is written, half-closes.
      */
    def write(): Unit =
      if writable && key.isValid then
        if unwritten.nonEmpty then writeOut()
        if unwritten.isEmpty then
          val (taken, finish, wasFull) = synchronized {
            val taken = outgoing
            outgoing = ByteString.empty
            queued = false
            val wasFull = full
            full = false
            (taken, finishing, wasFull)
          }
          unwritten = taken
          if unwritten.nonEmpty then writeOut()
          if wasFull then room()
          if finish && unwritten.isEmpty then // nothing is handed over once it finishes
            writable = false
            channel.shutdownOutput()

    /** One write of as much as the write buffer holds. */
    private def writeOut(): Unit =
      outBuffer.clear()
      unwritten.copyToBuffer(outBuffer)
      outBuffer.flip()
      unwritten = unwritten.drop(channel.write(outBuffer))
      if unwritten.nonEmpty then key.interestOpsOr(SelectionKey.OP_WRITE)

    /** What is left goes if the socket takes it now (a TLS close_notify). */
    private def flushNow(): Unit =
      try write() catch case NonFatal(_) => ()

    /** Closes the channel, which drops its key as it closes: the descriptor is freed at once; then
      * the receiver hears why, once.
      */
    def end(failure: Option[Throwable]): Unit =
      if !ended then
        ended = true
        synchronized { shut = true }
        timeout.cancel()
        if channel != null then try channel.close() catch case _: IOException => ()
        to.ended(failure)

    /** The receiver's calls, in order, on the pool: the selector thread only reads, and each read's
      * replies are parsed and answered by one task there, which takes whatever came meanwhile too.
      * Reading stops while much waits for the pool.
      */
    private final class Inbox extends Wire.Receiver, Runnable:
      // Under the inbox's lock.
      private var waiting = ByteString.empty // read, not yet handed on
      private var end: Option[Option[Throwable]] = None // the end, once read
      private var handing = false // a task is on the pool, or running
      private var paused = false // reading stopped while much waits

      def received(bytes: ByteString): Unit =
        val (first, pause) = synchronized {
          waiting ++= bytes
          val pause = !paused && waiting.length > ReadAhead
          paused ||= pause
          (start(), pause)
        }
        if pause then reading(false) // on the selector thread already
        if first then system.executionContext.execute(this)

      def ended(failure: Option[Throwable]): Unit =
        if synchronized { end = Some(failure); start() } then system.executionContext.execute(this)

      /** True when no task is handing on: the caller starts one. */
      private def start(): Boolean = !handing && { handing = true; true }

      def run(): Unit =
        var more = true
        while more do
          val (bytes, last, resume) = synchronized {
            val bytes = waiting
            val last = end
            val resume = paused && bytes.nonEmpty // a paused socket reads again once what waited is taken
            waiting = ByteString.empty
            end = None
            if resume then paused = false
            handing = bytes.nonEmpty || last.nonEmpty // nothing came: the next read starts a task
            (bytes, last, resume)
          }
          if resume then pauseReading(false)
          if bytes.nonEmpty then receiver.received(bytes)
          last.foreach(receiver.ended)
          more = bytes.nonEmpty || last.nonEmpty

  /** A [[Socket]] as a stage, for TLS above it: what it reads waits for the stage's demand, and
    * reading stops while much waits.
    */
  private final class Connection(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration)
      extends GraphStage[FlowShape[ByteString, ByteString]]:
    val in: Inlet[ByteString] = Inlet("Sockets.in")
    val out: Outlet[ByteString] = Outlet("Sockets.out")
    val shape: FlowShape[ByteString, ByteString] = FlowShape(in, out)

    def createLogic(attributes: Attributes): GraphStageLogic = new GraphStageLogic(shape) with Wire.Receiver:
      private var socket: Socket = null
      private var toDeliver = ByteString.empty // read, not yet pulled
      private var readingPaused = false
      private var serverDone = false // the server closed: what it sent is all it sends

      // Called from the selector thread: each runs on the stage's own.
      private val onRead = getAsyncCallback[ByteString](got)
      private val onEnd = getAsyncCallback[Option[Throwable]] {
        case Some(e) => failStage(e)
        case None =>
          serverDone = true
          if toDeliver.isEmpty then completeStage()
      }
      private val onRoom = getAsyncCallback[Unit](_ => if !isClosed(in) && !hasBeenPulled(in) then pull(in))

      def received(bytes: ByteString): Unit = onRead.invoke(bytes)
      def ended(failure: Option[Throwable]): Unit = onEnd.invoke(failure)

      override def preStart(): Unit =
        socket = Socket(remote, local, connectTimeout, this, () => onRoom.invoke(()))
        pull(in)

      setHandler(in, new InHandler:
        def onPush(): Unit = if socket.handOver(grab(in), finish = false) then pull(in)
        override def onUpstreamFinish(): Unit = socket.handOver(ByteString.empty, finish = true))

      setHandler(out, new OutHandler:
        def onPull(): Unit = if toDeliver.nonEmpty then deliver()
        override def onDownstreamFinish(cause: Throwable): Unit = completeStage())

      private def got(bytes: ByteString): Unit =
        toDeliver ++= bytes
        if isAvailable(out) then deliver()
        else if toDeliver.length > ReadAhead && !readingPaused then
          readingPaused = true
          socket.pauseReading(true)

      private def deliver(): Unit =
        push(out, toDeliver)
        toDeliver = ByteString.empty
        if serverDone then completeStage()
        else if readingPaused then
          readingPaused = false
          socket.pauseReading(false)

      // The socket closes, after what is left if it takes it now.
      override def postStop(): Unit = if socket != null then socket.close()

  private def connectFailed(why: String) = StreamTcpException(s"no connection to the server: $why")

object Sockets extends ExtensionId[Sockets]:
  /** A read: as much as a whole pipelined burst of replies usually is. */
  private val ReadBuffer = 64 * 1024
  /** Bytes read ahead of the reader before the socket stops being read. */
  private val ReadAhead = 256 * 1024
  /** A write: a burst of calls, or a slice of a larger one. */
  private val WriteBuffer = 64 * 1024
  /** Bytes handed over and not yet written before the stage takes no more. */
  private val WriteBatch = 256 * 1024

  def createExtension(system: ActorSystem[?]): Sockets =
    val sockets = new Sockets(system)
    system.whenTerminated.onComplete(_ => sockets.close())(using ExecutionContext.parasitic)
    sockets
