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
import java.util.concurrent.{ConcurrentLinkedQueue, FutureTask}
import java.util.concurrent.atomic.AtomicBoolean
import scala.concurrent.ExecutionContext
import scala.concurrent.duration.FiniteDuration
import scala.util.control.NonFatal

/** The HTTP client's TCP connections, on selector threads of the fleet's own (ADR 0014), as Netty's
  * event loops run them: a connection's loop does every read and write for it. A connection hands
  * its loop the bytes to write and wakes it, once for whatever comes while it wakes, so the calls of
  * a burst leave in one write. What it reads goes to the connection's stage ([[connect]], under
  * TLS), or, for a plain socket that is its own [[Wire]] ([[open]]), to its receiver on the loop,
  * which parses and answers it there. The loops are [[IoThreads]] too: a plain HTTP fleet's devices
  * run on them, and their wake-ups fire there, so a call is made, written, read and answered on one
  * thread, and none is woken for it (ADR 0016). Pekko IO took a hand-over to its connection actor
  * and one back for each read, and three for each write and its ack.
  *
  * A connection that cannot be made (refused, unreachable, timed out, its source address not
  * bindable) fails as a [[StreamTcpException]]: `connectFailed`. One that breaks after it was made
  * (a reset) fails as an IOException: a broken connection, `protocolError`.
  */
final class Sockets private (system: ActorSystem[?]) extends Extension:
  import Sockets.*

  @volatile private var open = true // before the loops, whose threads read it as they start
  /** One a core, all started at once: a fleet's threads do not grow with its size. The devices use
    * as many as they need ([[io]]); the others wait in their selectors.
    */
  private val loops = IndexedSeq.tabulate(Runtime.getRuntime.availableProcessors.max(1))(Loop(_))

  /** Loop `i`, any number (it wraps). */
  private def loop(i: Int): Loop = loops(i % loops.size)

  /** The first `wanted` loops ([[IoThreads.loopsFor]]), as many as there are at most. */
  def io(wanted: Int): IoThreads = new IoThreads:
    val size: Int = wanted.max(1).min(loops.size)
    private val mine = IndexedSeq.tabulate(size)(loop)
    def current: Int =
      val thread = Thread.currentThread
      var i = 0
      while i < size && (mine(i).thread ne thread) do i += 1
      if i < size then i else -1
    def execute(thread: Int, task: Runnable): Unit = mine(thread).execute(task)
    def after(thread: Int, delay: FiniteDuration)(task: () => Unit): java.util.concurrent.Future[?] = mine(thread).after(delay, task)

  /** A TCP connection to `remote`, from `local` when given, on loop `loop` (any number: it wraps),
    * that is its own wire: `receiver` hears what it reads on that loop.
    */
  def open(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration, receiver: Wire.Receiver,
      loop: Int): Wire =
    Socket(this.loop(loop), remote, local, connectTimeout, receiver, () => ())

  /** A TCP connection to `remote`, from `local` when given, on loop `loop` (any number: it wraps), as
    * a flow of bytes (under TLS). Finishing its input half-closes the socket once what was written
    * has left; cancelling its output closes it.
    */
  def connect(remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration,
      loop: Int): Flow[ByteString, ByteString, NotUsed] =
    Flow.fromGraph(Connection(this.loop(loop), remote, local, connectTimeout))

  private def close(): Unit =
    open = false
    loops.foreach(_.selector.wakeup())

  /** One selector thread: its sockets, the tasks handed to it, and its timers. */
  private final class Loop(index: Int):
    val selector: Selector = Selector.open()
    private val tasks = ConcurrentLinkedQueue[Runnable]()
    private val flushes = ConcurrentLinkedQueue[Socket]()
    private val woken = AtomicBoolean() // a wake-up is on its way: what is queued meanwhile rides on it
    private val timers = java.util.PriorityQueue[Timer]() // the loop's own
    // The loop's: every read lands in the one, copied out at its size; every write leaves from the other.
    val inBuffer: ByteBuffer = ByteBuffer.allocateDirect(ReadBuffer)
    val outBuffer: ByteBuffer = ByteBuffer.allocateDirect(WriteBuffer)
    val thread: Thread = Thread(() => loop(), s"${system.name}-sockets-$index") // "fleetsim-sockets-0" in a fleet
    thread.setDaemon(true)
    thread.start()

    /** Runs `task` on this loop, after what was handed to it before. */
    def execute(task: Runnable): Unit =
      tasks.add(task)
      wake()

    def flush(socket: Socket): Unit =
      flushes.add(socket)
      wake()

    /** Runs `task` once on this loop, `delay` from now, unless cancelled first. A cancelled timer
      * stays queued until its time and then does nothing: the wheel's rings, which set them, look
      * at most a second ahead.
      */
    def after(delay: FiniteDuration, task: () => Unit): java.util.concurrent.Future[?] =
      val timer = Timer(System.nanoTime() + delay.toNanos, task)
      if Thread.currentThread eq thread then timers.add(timer) else execute(() => timers.add(timer)) // the queue is the loop's
      timer

    /** From another thread; the loop itself looks at its queues before it waits again. */
    private def wake(): Unit = if (Thread.currentThread ne thread) && !woken.getAndSet(true) then selector.wakeup()

    /** Nanoseconds until the loop has something to do without a read: 0 when the loop queued work
      * itself (no wake-up comes for it), Long.MaxValue when no timer is set.
      */
    private def idle(): Long =
      if !tasks.isEmpty || !flushes.isEmpty then 0L
      else
        val next = timers.peek()
        if next == null then Long.MaxValue else next.due - System.nanoTime()

    private def loop(): Unit =
      val handler: java.util.function.Consumer[SelectionKey] = key => key.attachment.asInstanceOf[Socket].ready(key)
      // A turn a call: a loop's body in the one call that runs it for the process's life stays
      // interpreted until the JIT replaces it on the stack, minutes at a few hundred turns a second.
      try while open do turn(handler)
      finally
        selector.keys.forEach(key => try key.channel.close() catch case _: IOException => ())
        selector.close()

    /** Waits for a read, a wake-up or the next timer, then runs what is due. */
    private def turn(handler: java.util.function.Consumer[SelectionKey]): Unit =
      val wait = idle()
      if wait <= 0 then selector.selectNow(handler)
      else if wait == Long.MaxValue then selector.select(handler)
      else selector.select(handler, ((wait + 999_999) / 1_000_000).max(1)) // whole milliseconds, never early
      woken.set(false) // before the queues are read: what is queued after this wakes the selector again
      val now = System.nanoTime()
      while !timers.isEmpty && timers.peek().due - now <= 0 do timers.poll().run()
      var task = tasks.poll()
      while task != null do
        try task.run() catch case NonFatal(e) => Complaints.warn("sockets", s"a socket task failed: $e")
        task = tasks.poll()
      var socket = flushes.poll()
      while socket != null do
        try socket.write() catch case NonFatal(e) => socket.end(Some(e))
        socket = flushes.poll()

  /** A task due at `due` (System.nanoTime); cancelled, it does not run. */
  private final class Timer(val due: Long, task: () => Unit) extends FutureTask[Unit](() => task()), Comparable[Timer]:
    def compareTo(other: Timer): Int = java.lang.Long.compare(due - other.due, 0)

  /** One TCP connection. Its connect starts at once; all else happens on the loop, which
    * tells `receiver` what it read, and its end once: the server's close ends it too, as an HTTP
    * client never keeps a connection half-open. `outgoing` and the flags beside it are shared with
    * the threads that write, under the lock of `this`; the rest are the loop's.
    *
    * @param room called when so much had waited to be written that [[handOver]] said to stop, and it has gone
    */
  private final class Socket(loop: Loop, remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration,
      receiver: Wire.Receiver, room: () => Unit) extends Wire:
    private var channel: SocketChannel = null

    // Shared, under this lock.
    private var outgoing = ByteString.empty // handed over to be written
    private var queued = false // in the loop's flushes
    private var finishing = false // nothing more will be handed over: half-close once it is written
    private var shut = false // closed or aborted: nothing more is taken
    private var full = false // too much waits: the writer waits for room()

    // The loop's.
    private var key: SelectionKey = null
    private var unwritten = ByteString.empty // what the socket did not take yet
    private var writable = false // connected, and the output not yet shut
    private var connected = false
    private var ended = false // the receiver heard the end

    private var timeout: Cancellable = Cancellable.alreadyCancelled // the connect's; set before the loop sees the socket

    try
      channel = SocketChannel.open()
      channel.configureBlocking(false)
      channel.setOption(StandardSocketOptions.TCP_NODELAY, java.lang.Boolean.TRUE)
      local.foreach(channel.bind)
      channel.connect(remote)
      timeout = system.scheduler.scheduleOnce(connectTimeout,
        () => loop.execute(() => if !connected then end(Some(connectFailed(s"no connection to $remote within $connectTimeout")))))(
        using ExecutionContext.parasitic)
      loop.execute(() => register())
    catch case NonFatal(e) => loop.execute(() => end(Some(connectFailed(e.toString)))) // a descriptor it cannot have fails the connect

    /** False when the socket has ended: what it is handed then is dropped. */
    def write(bytes: ByteString): Boolean =
      synchronized(!shut) && { handOver(bytes, finish = false); true }

    def close(): Unit = shutAnd(() => { flushNow(); end(None) })

    def abort(cause: Throwable): Unit = shutAnd(() => end(Some(cause)))

    private def shutAnd(task: Runnable): Unit =
      val first = synchronized { val first = !shut; shut = true; first }
      if first then loop.execute(task)

    /** Hands `bytes` to the loop, queueing this socket to be written unless it is queued
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
      if first then loop.flush(this)
      hasRoom

    /** Stops reading, or reads again: the reader has not taken what came. */
    def pauseReading(paused: Boolean): Unit = loop.execute(() => reading(!paused))

    // What follows runs on the loop.

    /** The channel joins the selector, interested in what it waits for. */
    private def register(): Unit =
      if !ended then
        try
          key = channel.register(loop.selector, if channel.isConnected then SelectionKey.OP_READ else SelectionKey.OP_CONNECT, this)
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
      loop.inBuffer.clear()
      val n = channel.read(loop.inBuffer)
      if n > 0 then
        val bytes = new Array[Byte](n)
        loop.inBuffer.flip()
        loop.inBuffer.get(bytes)
        receiver.received(ByteString.fromArrayUnsafe(bytes))
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
      loop.outBuffer.clear()
      unwritten.copyToBuffer(loop.outBuffer)
      loop.outBuffer.flip()
      unwritten = unwritten.drop(channel.write(loop.outBuffer))
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
        receiver.ended(failure)

  /** A [[Socket]] as a stage, for TLS above it: what it reads waits for the stage's demand, and
    * reading stops while much waits.
    */
  private final class Connection(loop: Loop, remote: InetSocketAddress, local: Option[InetSocketAddress], connectTimeout: FiniteDuration)
      extends GraphStage[FlowShape[ByteString, ByteString]]:
    val in: Inlet[ByteString] = Inlet("Sockets.in")
    val out: Outlet[ByteString] = Outlet("Sockets.out")
    val shape: FlowShape[ByteString, ByteString] = FlowShape(in, out)

    def createLogic(attributes: Attributes): GraphStageLogic = new GraphStageLogic(shape) with Wire.Receiver:
      private var socket: Socket = null
      private var toDeliver = ByteString.empty // read, not yet pulled
      private var readingPaused = false
      private var serverDone = false // the server closed: what it sent is all it sends

      // Called from the loop: each runs on the stage's own.
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
        socket = Socket(loop, remote, local, connectTimeout, this, () => onRoom.invoke(()))
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
  /** Bytes read ahead of a stage before the socket stops being read. */
  private val ReadAhead = 256 * 1024
  /** A write: a burst of calls, or a slice of a larger one. */
  private val WriteBuffer = 64 * 1024
  /** Bytes handed over and not yet written before the stage takes no more. */
  private val WriteBatch = 256 * 1024

  def createExtension(system: ActorSystem[?]): Sockets =
    val sockets = new Sockets(system)
    system.whenTerminated.onComplete(_ => sockets.close())(using ExecutionContext.parasitic)
    sockets
