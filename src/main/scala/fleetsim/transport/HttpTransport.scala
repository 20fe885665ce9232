package fleetsim.transport

import com.typesafe.config.Config
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.util.ByteString

import fleetsim.finiteDuration
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.{AtomicInteger, AtomicReferenceArray}
import scala.annotation.tailrec
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** How much of a reply a device reads before it gives up on it as `tooLarge`: a server that sends
  * an endless body or a megabyte of headers must not run the fleet out of memory.
  *
  * @param statusLine bytes of the status line
  * @param headers header lines (and trailer lines of a chunked body)
  * @param head bytes of the status line and headers together
  * @param body bytes of a body, after chunked decoding
  */
final case class ReplyLimits(statusLine: Int, headers: Int, head: Int, body: Int):
  require(statusLine >= 16 && headers >= 1 && head >= statusLine && body >= 0, s"reply limits too small: $this")

object ReplyLimits:
  /** A config download of several megabytes passes; a runaway reply stops well before the heap notices. */
  val Default: ReplyLimits = ReplyLimits(statusLine = 1024, headers = 100, head = 64 * 1024, body = 8 * 1024 * 1024)

/** The HTTP client settings.
  *
  * @param maxConnections connections to the controller shared by the whole fleet; None = fitted to it
  * @param pipelining calls in flight on one connection at a time
  * @param limits what a reply may hold: the profile's `limits`, else the defaults
  */
final case class HttpSettings(
    maxConnections: Option[Int],
    pipelining: Int,
    requestTimeout: FiniteDuration,
    connectTimeout: FiniteDuration,
    keepAliveTimeout: FiniteDuration,
    limits: ReplyLimits = ReplyLimits.Default):
  require(maxConnections.forall(_ >= 1), "fleetsim.http.max-connections must be at least 1, or auto")
  require(pipelining >= 1, "fleetsim.http.pipelining must be at least 1")
  require(requestTimeout > Duration.Zero, "fleetsim.http.request-timeout must be positive")
  require(connectTimeout > Duration.Zero, "fleetsim.http.connect-timeout must be positive")
  require(keepAliveTimeout > Duration.Zero, "fleetsim.http.keep-alive-timeout must be positive")

  /** Connections for a fleet: one per 500 devices, at least 4 and at most 64. Few busy connections
    * carry more calls per write than many idle ones
    * (bench/history/2026-11-21-scale-http-1m-pipelined-client.md).
    */
  def connectionsFor(devices: Int): Int = maxConnections.getOrElse((devices / 500).max(4).min(64))

object HttpSettings:
  def apply(config: Config): HttpSettings =
    val c = config.getConfig("fleetsim.http")
    HttpSettings(
      maxConnections = if c.getString("max-connections") == "auto" then None else Some(c.getInt("max-connections")),
      pipelining = c.getInt("pipelining"),
      requestTimeout = c.finiteDuration("request-timeout"),
      connectTimeout = c.finiteDuration("connect-timeout"),
      keepAliveTimeout = c.finiteDuration("keep-alive-timeout"))

/** Calls to the controller over HTTP/1.1, on connections shared as `mode` says.
  *
  * Shared: a fixed set of pipelined connections carries the whole fleet. A call goes to the next
  * connection with room; when none has, it fails at once as Overloaded rather than queueing past
  * its deadline. A closed connection is opened again by its next call. Per device: each device's
  * own connection, opened by its first call and again after it closes. Per call: a new connection
  * for each call, which the client closes once the reply is read, as a curl run for each call does.
  * A call a closing connection did not answer is sent again where that is safe ([[PipelinedConnection]]).
  *
  * A plain connection is on one of the sockets' loops ([[Sockets]]), and so are the devices whose calls
  * it carries ([[io]]): device i's calls go on connections of loop `i % loops`, shared ones first
  * on its loop's share of them.
  *
  * Once the server has closed a shared connection after its first reply, shared connections carry
  * one call each, and a call that finds no room goes on a connection of its own, as per-call: a
  * server that closes every connection after one reply cannot share them. A shared call sent again goes
  * on a new connection of its own too: the others may be closing as well (an idle timeout ends
  * them all at once).
  */
final class HttpTransport(host: String, port: Int, dialer: Dialer, val mode: ConnectionMode, settings: HttpSettings, devices: Int, ioLoops: Int)(
    using system: ActorSystem[?])
    extends Transport:
  import PipelinedConnection.Call

  /** The loops the devices run on, so that a device's calls are written and read on its own thread:
    * None under TLS, whose devices stay on Pekko's pool.
    */
  val io: Option[IoThreads] = dialer.io(ioLoops)
  private val loops = io.fold(1)(_.size)
  /** The loop of device `n`, or of shared slot `n`: as the devices' own ([[IoThreads.of]]). */
  private def loopOf(n: Int): Int = io.fold(0)(_.of(n))
  private val size = if mode == ConnectionMode.Shared then settings.connectionsFor(devices) else 0
  private val busy = settings.pipelining.min(HttpTransport.Busy)
  private val shared = AtomicReferenceArray[PipelinedConnection](size)
  private val own = ConcurrentHashMap[Int, PipelinedConnection]()
  private val next = AtomicInteger()
  private val deadlines = Deadlines(settings.requestTimeout, Some(settings.keepAliveTimeout))
  private val renderer = Http1.Renderer(s"$host:$port")
  @volatile private var closesEach = false // a shared connection's first reply was its last
  private val ownOpen = AtomicInteger() // shared calls on connections of their own, open now

  def send(device: Int, request: Request): Future[Reply] = PipelinedConnection.send(renderer, request, deadlines)(place(device, _))

  /** Puts a call on a connection as the mode says; one that none takes fails at once as Overloaded. */
  private def place(device: Int, call: Call): Unit =
    val taken = mode match
      case ConnectionMode.Shared => placeShared(loopOf(device), call)
      // A connection whose last reply is read as the call comes refuses it, closing: the call goes on a new one.
      case ConnectionMode.PerDevice => deviceConnection(device).offer(call) || placeOn(deviceConnection(device), call)
      case ConnectionMode.PerCall => placeOn(connection(device, loopOf(device), oneCall = true), call)
    if !taken then call.reply.trySuccess(PipelinedConnection.Overloaded)

  /** A device's call on its connection. A connection that ended before it could take the call
    * (the device's certificate could not be read, the connect was refused) fails it as it failed,
    * once it has said why: nothing was in flight, so it was not overloaded.
    */
  private def placeOn(connection: PipelinedConnection, call: Call): Boolean =
    connection.offer(call) || !connection.isOpen && {
      connection.finished.onComplete(_ =>
        call.reply.trySuccess(connection.failedAs.fold(PipelinedConnection.Overloaded)(Reply.Failed(_))))(using ExecutionContext.parasitic)
      true
    }

  /** A shared call from a device on loop `loop` goes on the first of that loop's connections (slots
    * `loop`, `loop + loops`, ...), in their order, with fewer than [[busy]] calls in flight; when
    * every one has that many, on the next connection in turn with room, of any loop. So calls crowd
    * onto as few connections as the rate needs, each write and read carrying many (the others open
    * only when needed, and close when idle), and the fleet's full room is there for a burst. Spread evenly over
    * 64 connections, 10,000 calls a second cost a write, a read and a selector's wake-up each: about
    * half the fleet's CPU (bench/history/2026-11-26-cpu-calls-crowded.md).
    */
  private def placeShared(loop: Int, call: Call): Boolean =
    @tailrec def crowd(slot: Int): Boolean = slot < size && (sharedConnection(slot).offer(call, busy) || crowd(slot + loops))
    @tailrec def spread(first: Int, tried: Int): Boolean =
      tried < size && (sharedConnection(Math.floorMod(first + tried, size)).offer(call) || spread(first, tried + 1))
    // The shared turn is taken only when every connection is busy: a call that crowds on touches no shared counter.
    crowd(loop) || spread(next.getAndIncrement(), 0) || (closesEach && ownConnection(loop, call))

  /** A call on a new connection on loop `loop` that carries it alone; false when
    * [[HttpTransport.MaxOwn]] are open already: a slow first reply must not let a ramp open thousands.
    */
  private def ownConnection(loop: Int, call: Call): Boolean =
    if ownOpen.incrementAndGet() > HttpTransport.MaxOwn then
      ownOpen.decrementAndGet()
      false
    else
      val opened = connection(0, loop, oneCall = true)
      opened.finished.onComplete(_ => ownOpen.decrementAndGet())(using ExecutionContext.parasitic)
      opened.offer(call)

  private def sharedConnection(slot: Int): PipelinedConnection =
    val current = shared.get(slot)
    if current != null && current.isOpen then current
    else
      val fresh = PipelinedConnection(dialer.open(slot, loopOf(slot), _, _), settings.pipelining, deadlines, settings.limits, idles = true,
        resend = call => if !ownConnection(loopOf(slot), call) then call.reply.trySuccess(PipelinedConnection.Overloaded),
        closedAfterOne = () => closesEach = true, trusted = () => !closesEach)
      if shared.compareAndSet(slot, current, fresh) then fresh
      else
        fresh.close()
        shared.get(slot)

  /** A device's own connection, opened if it has none open; forgotten once it closes, so idle
    * devices hold nothing. It is forgotten by a callback registered once compute() has returned: a
    * connection that has already ended runs it at once, and a remove() from inside compute() is
    * ConcurrentHashMap's IllegalStateException "Recursive update".
    */
  private def deviceConnection(device: Int): PipelinedConnection =
    var opened: PipelinedConnection = null
    val kept = own.compute(device, (_, current) => {
      if current != null && current.isOpen then current
      else
        opened = connection(device, loopOf(device))
        opened
    })
    if opened != null then opened.finished.onComplete(_ => own.remove(device, opened))(using ExecutionContext.parasitic)
    kept

  /** A new connection for `device` on loop `loop`; what it leaves unanswered is placed again. */
  private def connection(device: Int, loop: Int, oneCall: Boolean = false): PipelinedConnection =
    PipelinedConnection(dialer.open(device, loop, _, _), if oneCall then 1 else settings.pipelining, deadlines, settings.limits, oneCall, idles = !oneCall,
      resend = place(device, _))

  def close(): Future[Done] =
    deadlines.close()
    (0 until size).flatMap(i => Option(shared.get(i))).foreach(_.close())
    own.values.forEach(_.close())
    Future.successful(Done)

object HttpTransport:
  /** Calls in flight that make a shared connection busy enough: the next call tries the next one. */
  val Busy = 32
  /** Connections of their own that shared calls may have open at once (descriptors: the fleet's budget leaves room for them). */
  val MaxOwn = 256
