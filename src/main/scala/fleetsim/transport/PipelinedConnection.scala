package fleetsim.transport

import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.stream.scaladsl.{Flow, Keep, Sink, Source}
import org.apache.pekko.stream.{KillSwitches, QueueOfferResult}
import org.apache.pekko.util.ByteString
import org.apache.pekko.Done

import java.util.concurrent.{ConcurrentHashMap, TimeoutException}
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.jdk.CollectionConverters.*
import scala.util.{Failure, Success, Try}

/** One HTTP/1.1 connection over any byte stream (a TCP socket, an SSH channel) with up to `depth`
  * calls pipelined on it. Responses come back in request order, so each goes to the oldest waiting
  * call. A call unanswered at its deadline fails TimedOut but keeps its place, as its response
  * will still come on this connection.
  */
final class PipelinedConnection(bytes: Flow[ByteString, ByteString, ?], depth: Int, deadlines: Deadlines)(
    using system: ActorSystem[?]):
  private final class Call(val deadline: Long, val reply: Promise[Reply])

  private val calls = java.util.ArrayDeque[Call]() // guarded by this
  private var closing = false // guarded by this
  private var why: Option[FailureReason] = None // guarded by this: set when this side ends the connection

  private val ((requests, switch), done) = Source
    .queue[ByteString](depth)
    .batch(depth, identity)(_ ++ _) // what queues during a write leaves in the next one
    .viaMat(KillSwitches.single)(Keep.both)
    .via(bytes)
    .via(Http1.ResponseParser())
    .toMat(Sink.foreach(answer))(Keep.both)
    .run()
  done.onComplete(closed)(using ExecutionContext.parasitic)

  /** Completes when the connection has closed, for any reason. */
  def finished: Future[Done] = done.transform(_ => Success(Done))(using ExecutionContext.parasitic)

  def isOpen: Boolean = synchronized(!closing)

  /** The reply to a call rendered by [[Http1.Renderer]], or None when the connection is full or
    * closing: the caller tries another with the same bytes.
    */
  def send(request: ByteString): Option[Future[Reply]] =
    synchronized {
      if closing || calls.size >= depth then None
      else
        val call = Call(System.nanoTime() + deadlines.timeout.toNanos, Promise())
        requests.offer(request) match
          case QueueOfferResult.Enqueued =>
            calls.add(call)
            if calls.size == 1 then deadlines.watch(this)
            Some(call.reply.future)
          case _ => None
    }

  /** No new calls; the ones in flight are answered or time out. */
  def close(): Unit =
    synchronized { closing = true }
    switch.shutdown() // the server still answers what it has read

  /** Fails the calls past their deadline; their replies, should they come, are dropped. A call
    * unanswered a whole timeout past its deadline means the server is stuck, and ends the connection.
    */
  private[transport] def expire(now: Long): Unit =
    val stuck = synchronized {
      val oldest = calls.peek()
      if oldest == null || oldest.deadline - now >= 0 then false // nothing overdue: most connections, most ticks
      else
        val overdue = calls.iterator.asScala.takeWhile(_.deadline - now < 0) // deadlines rise along the queue
        overdue.foreach(_.reply.trySuccess(Reply.Failed(FailureReason.TimedOut)))
        val stuck = oldest.deadline + deadlines.timeout.toNanos - now < 0 && why.isEmpty
        if stuck then
          why = Some(FailureReason.TimedOut)
          closing = true
        stuck
    }
    if stuck then switch.abort(TimeoutException("server stuck: a call unanswered a timeout past its deadline"))

  private def answer(reply: Reply): Unit =
    val call = synchronized {
      val call = calls.poll()
      if calls.isEmpty then deadlines.unwatch(this)
      call
    }
    if call != null then call.reply.trySuccess(reply)

  private def closed(result: Try[Done]): Unit =
    val (left, reason) = synchronized {
      closing = true
      val left = Iterator.continually(calls.poll()).takeWhile(_ != null).toList
      val reason = why.getOrElse(result match
        case Failure(e) => Replies.reason(e)
        case Success(_) => FailureReason.ProtocolError) // the server closed with calls unanswered
      (left, reason)
    }
    left.foreach(_.reply.trySuccess(Reply.Failed(reason)))
    deadlines.unwatch(this)

/** One ticker that fails overdue calls on all of a transport's connections, instead of a timer per
  * call. It looks only at connections with calls in flight: a fleet of SSH tunnels has one connection
  * a device, nearly all idle between reports, and scanning them all ten times a second took 7-9% of
  * a 6,000-tunnel fleet's CPU samples (BENCHMARKS.md, "SSH ramp").
  *
  * @param timeout how long a call may wait for its reply
  */
final class Deadlines(val timeout: FiniteDuration, tick: FiniteDuration = 100.millis)(using system: ActorSystem[?]):
  private val connections = ConcurrentHashMap.newKeySet[PipelinedConnection]()
  private val ticker: Cancellable = system.scheduler.scheduleAtFixedRate(tick, tick) { () =>
    val now = System.nanoTime()
    connections.forEach(_.expire(now))
  }(using system.executionContext)

  def watch(connection: PipelinedConnection): Unit = connections.add(connection)
  def unwatch(connection: PipelinedConnection): Unit = connections.remove(connection)
  def close(): Unit = ticker.cancel()
