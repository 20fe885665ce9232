package fleetsim.transport

import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.util.ByteString
import org.apache.pekko.Done

import java.util.concurrent.{ConcurrentHashMap, TimeoutException}
import scala.concurrent.duration.*
import scala.concurrent.{Future, Promise}
import scala.util.{Failure, Success, Try}

/** One HTTP/1.1 connection over any [[Wire]] (a TCP socket, a TLS connection, an SSH channel) with up to `depth`
  * calls pipelined on it. Responses come back in request order, so each goes to the oldest waiting
  * call. A call unanswered at its deadline fails TimedOut but keeps its place, as its response
  * will still come on this connection.
  *
  * A connection closes as RFC 9112 §9.6 says: after a response that says it is the last (the
  * server's `Connection: close`, HTTP/1.0, or the one call of `oneCall`), or when the server
  * closes, this side closes too, so no socket waits in CLOSE-WAIT for the server to give up on it.
  * It is never written to again once either side has said it closes. Calls it ends without
  * answering go to `resend`, to be sent on another connection, when that is safe: the server said
  * it would read nothing behind the last response (then as often as it happens before the call's
  * deadline), or, once, the call is idempotent and the connection had answered before (the server
  * closed an idle connection as the call was written).
  *
  * Until its first reply, a connection carries one call when `trusted` says the server may not
  * keep connections open: a server that reads one request a connection (gunicorn's sync workers)
  * resets a connection it closes with more unread, and the reply it sent is lost with it. A
  * connection whose first reply is its last tells `closedAfterOne`.
  *
  * @param dial opens the connection's wire, given `depth` and what reads it
  * @param idles closed after the transport's keep-alive time with no call in flight ([[Deadlines]])
  */
final class PipelinedConnection(dial: (Int, Wire.Receiver) => Wire, depth: Int, deadlines: Deadlines,
    limits: ReplyLimits = ReplyLimits.Default, oneCall: Boolean = false, idles: Boolean = false,
    resend: PipelinedConnection.Call => Unit, closedAfterOne: () => Unit = () => (),
    trusted: () => Boolean = () => true)(
    using system: ActorSystem[?]):
  import PipelinedConnection.*

  private val calls = java.util.ArrayDeque[Call]() // guarded by this
  private var closing = false // guarded by this
  private var why: Option[FailureReason] = None // guarded by this: set when this side ends the connection
  private var replies = 0 // guarded by this: responses read
  private var lastResponseRead = false // guarded by this: the server reads nothing behind it
  private var lastActive = System.nanoTime() // guarded by this
  @volatile private var written = 0L // requests handed to the wire; only offer writes it
  private var failure: Option[FailureReason] = None // guarded by this: why it ended, when it ended failing
  private var over = false // guarded by this: closed() has begun
  private val finish = Promise[Done]() // once closed() has said why, and placed or failed what was left
  // The wire's reads, one after another: only the receiver touches it.
  private val reader = Http1.ResponseReader(limits, oneCall, () => lastResponse(), () => written)

  if idles then deadlines.opened(this) // before closed() can run: a connection that ended at once must not stay listed
  // Set under the lock, and read only after taking it: a receiver that acts on the wire before dial() has returned waits for it.
  private var wire: Wire = null
  synchronized { wire = dial(depth, Receiver) }

  /** Completes when the connection has closed, for any reason, and [[failedAs]] says which. */
  def finished: Future[Done] = finish.future

  def isOpen: Boolean = synchronized(!closing)

  /** Why the connection ended, once it has ended failing (a certificate that could not be had, a
    * refused connect, a broken reply); None while it is open, or when it closed cleanly.
    */
  def failedAs: Option[FailureReason] = synchronized(failure)

  /** Writes a call rendered by [[Http1.Renderer]]; false when the connection is full (or has `room`
    * calls in flight already) or closing: the caller tries another.
    */
  def offer(call: Call, room: Int = depth): Boolean =
    synchronized {
      !closing && calls.size < (if replies == 0 && !trusted() then 1 else room) && {
        written += 1 // before its bytes can reach the server, so its reply is never taken for stray bytes
        if wire.write(call.bytes) then
          calls.add(call)
          lastActive = System.nanoTime()
          if calls.size == 1 then deadlines.watch(this)
          true
        else // the wire has ended: its receiver is about to say why
          written -= 1
          closing = true
          false
      }
    }

  /** Closes the connection now: a call still in flight fails (the fleet closes its transports
    * once its devices' last calls are answered).
    */
  def close(): Unit =
    synchronized { closing = true }
    wire.close()

  /** Fails the calls past their deadline; their replies, should they come, are dropped. A call
    * unanswered a whole timeout past its deadline means the server is stuck, and ends the connection.
    */
  private[transport] def expire(now: Long): Unit =
    val stuck = synchronized {
      val oldest = calls.peek()
      if oldest == null then false
      else
        // A call's own timeout (a profile's) may end it before the calls ahead of it: every call is looked at.
        calls.forEach(call => if call.deadline - now < 0 then call.reply.trySuccess(TimedOut))
        val stuck = oldest.deadline + deadlines.timeout.toNanos - now < 0 && why.isEmpty
        if stuck then
          why = Some(FailureReason.TimedOut)
          closing = true
        stuck
    }
    if stuck then wire.abort(TimeoutException("server stuck: a call unanswered a timeout past its deadline"))

  /** Closes the connection when it has carried no call for `keepAlive`: a connection with a call in
    * flight is not idle, however long its server takes.
    */
  private[transport] def closeIfIdle(now: Long, keepAlive: Long): Unit =
    val idle = synchronized {
      !closing && calls.isEmpty && now - lastActive > keepAlive && { closing = true; true }
    }
    if idle then wire.close()

  /** The reader read the last response the server sends here: write nothing more. */
  private def lastResponse(): Unit =
    synchronized {
      closing = true
      lastResponseRead = true
    }
    wire.close()

  /** The wire's reads: replies answer the oldest calls; a reply that breaks the rules ends the connection. */
  private object Receiver extends Wire.Receiver:
    private var broken = false // a reply broke the rules: what follows it is not read

    def received(bytes: ByteString): Unit =
      if !broken then
        try reader.read(bytes, answer)
        catch case e @ (_: Http1.MalformedResponse | _: Http1.TooLarge) =>
          broken = true
          wire.abort(e) // before closed() closes it: the socket ends now, not after what is left is written
          closed(Failure(e))

    def ended(failure: Option[Throwable]): Unit =
      val result = failure match
        case Some(e) => Failure(reader.broke(e))
        case None =>
          try
            reader.end(answer)
            Success(Done)
          catch case e: Http1.MalformedResponse => Failure(e)
      closed(result)

  /** A reply answers the oldest call (none when it was failed already: the connection closed). */
  private def answer(reply: Reply): Unit =
    val (call, onlyOne) = synchronized {
      val call = calls.poll()
      replies += 1
      lastActive = System.nanoTime()
      if calls.isEmpty then deadlines.unwatch(this)
      (call, lastResponseRead && replies == 1)
    }
    if onlyOne then closedAfterOne()
    if call != null then call.reply.trySuccess(reply)

  /** The connection has ended (the first time it is said: a broken reply says it before its wire
    * does): it places or fails what it leaves unanswered.
    */
  private def closed(result: Try[Done]): Unit =
    val first = synchronized {
      val first = !over
      over = true
      first
    }
    if first then
      wire.close() // reading has ended, so writing ends too and the socket closes: never half-open in CLOSE-WAIT
      deadlines.unwatch(this)
      deadlines.closed(this)
      val (left, reused, announced, ours) = synchronized {
        closing = true
        // With closing, so that an offer this refuses finds why.
        failure = why.orElse(result.failed.toOption.map(Replies.reason))
        (Iterator.continually(calls.poll()).takeWhile(_ != null).toList, replies > 0, lastResponseRead, why)
      }
      // A reply that broke off or broke the rules fails the call it answers; the calls behind it were never answered.
      val unanswered = result match
        case Failure(e) if left.nonEmpty && (e.isInstanceOf[Http1.MalformedResponse] || e.isInstanceOf[Http1.TooLarge]) =>
          val reason = if e.isInstanceOf[Http1.TooLarge] then FailureReason.TooLarge else FailureReason.ProtocolError
          Complaints.warn(reason.key, s"${e.getMessage}: the call fails as ${reason.key}, and its connection is closed")
          left.head.reply.trySuccess(Reply.Failed(reason))
          left.tail
        case _ => left
      val reason = ours.getOrElse(result match
        case Failure(e) => Replies.reason(e)
        case Success(_) => FailureReason.ProtocolError) // the server closed with calls unanswered
      val now = System.nanoTime()
      unanswered.foreach { call =>
        if !call.reply.isCompleted then
          // Behind a last response the server read nothing, so the call goes again, as often as that
          // happens before its deadline; after an unannounced close it may have been read: once, if idempotent.
          val again = call.deadline - now > 0 && (announced || (call.idempotent && reused && !call.resent))
          if again then
            call.resent = true
            resend(call)
          else call.reply.trySuccess(Reply.Failed(reason))
      }
      finish.trySuccess(Done)

object PipelinedConnection:
  /** A call in flight: its request's bytes are kept, so that a connection that ends without
    * answering can hand it to another ([[PipelinedConnection]]'s `resend`).
    *
    * @param deadline on System.nanoTime: it stays the call's own on whichever connection it is sent
    */
  final class Call(val bytes: ByteString, val idempotent: Boolean, val deadline: Long):
    val reply: Promise[Reply] = Promise()
    @volatile private[PipelinedConnection] var resent = false

  /** What a call no connection takes gets: one instance for all. */
  val Overloaded: Reply = Reply.Failed(FailureReason.Overloaded)
  private val TimedOut: Reply = Reply.Failed(FailureReason.TimedOut)

  /** Renders `request` and hands the call to `place`, which puts it on a connection; an unsafe
    * request is refused unsent ([[Http1.refuse]]).
    */
  def send(renderer: Http1.Renderer, request: Request, deadlines: Deadlines)(place: Call => Unit): Future[Reply] =
    val bytes = renderer.render(request)
    if bytes == null then Http1.refuse(request)
    else
      val call = Call(bytes, request.idempotent, deadlines.deadline(request.timeout))
      place(call)
      call.reply.future

/** One ticker that fails overdue calls on all of a transport's connections, instead of a timer per
  * call. It looks only at connections with calls in flight: a fleet of SSH tunnels has one connection
  * a device, nearly all idle between reports, and scanning them all ten times a second took 7-9% of
  * a 6,000-tunnel fleet's CPU samples (bench/history/2026-11-24-ssh-ramp.md). Once a second it
  * closes the connections idle for
  * `keepAlive`, the ones that asked for it.
  *
  * @param timeout how long a call may wait for its reply
  * @param keepAlive how long a connection may carry no call before it is closed; None: it stays open
  */
final class Deadlines(val timeout: FiniteDuration, keepAlive: Option[FiniteDuration] = None, tick: FiniteDuration = 100.millis)(
    using system: ActorSystem[?]):
  private val connections = ConcurrentHashMap.newKeySet[PipelinedConnection]()
  private val idling = ConcurrentHashMap.newKeySet[PipelinedConnection]()
  private val idleEvery = (1.second / tick).toInt.max(1)
  private var ticks = 0 // the ticker's own: its runs never overlap
  private val ticker: Cancellable = system.scheduler.scheduleAtFixedRate(tick, tick) { () =>
    val now = System.nanoTime()
    connections.forEach(_.expire(now))
    ticks += 1
    for limit <- keepAlive if ticks % idleEvery == 0 do idling.forEach(_.closeIfIdle(now, limit.toNanos))
  }(using system.executionContext)

  /** The deadline of a call sent now that may wait `own` nanoseconds for its reply; 0: the timeout. */
  def deadline(own: Long = 0): Long = System.nanoTime() + (if own > 0 then own else timeout.toNanos)

  def watch(connection: PipelinedConnection): Unit = connections.add(connection)
  def unwatch(connection: PipelinedConnection): Unit = connections.remove(connection)
  /** A connection that closes when idle for keepAlive, from now until it [[closed]]. */
  def opened(connection: PipelinedConnection): Unit = if keepAlive.isDefined then idling.add(connection)
  def closed(connection: PipelinedConnection): Unit = idling.remove(connection)
  def close(): Unit = ticker.cancel()
