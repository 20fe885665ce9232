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

/** The HTTP client settings.
  *
  * @param maxConnections connections to the controller shared by the whole fleet; None = fitted to it
  * @param pipelining calls in flight on one connection at a time
  */
final case class HttpSettings(
    maxConnections: Option[Int],
    pipelining: Int,
    requestTimeout: FiniteDuration,
    connectTimeout: FiniteDuration,
    keepAliveTimeout: FiniteDuration):
  require(maxConnections.forall(_ >= 1), "fleetsim.http.max-connections must be at least 1, or auto")
  require(pipelining >= 1, "fleetsim.http.pipelining must be at least 1")
  require(requestTimeout > Duration.Zero, "fleetsim.http.request-timeout must be positive")
  require(connectTimeout > Duration.Zero, "fleetsim.http.connect-timeout must be positive")
  require(keepAliveTimeout > Duration.Zero, "fleetsim.http.keep-alive-timeout must be positive")

  /** Connections for a fleet: one per 500 devices, at least 4 and at most 64. Few busy connections
    * carry more calls per write than many idle ones (BENCHMARKS.md, "Scale").
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
  * for each call, closed by the server after its reply (`Connection: close`).
  */
final class HttpTransport(host: String, port: Int, dialer: Dialer, val mode: ConnectionMode, settings: HttpSettings, devices: Int)(
    using system: ActorSystem[?])
    extends Transport:
  private val size = if mode == ConnectionMode.Shared then settings.connectionsFor(devices) else 0
  private val shared = AtomicReferenceArray[PipelinedConnection](size)
  private val own = ConcurrentHashMap[Int, PipelinedConnection]()
  private val next = AtomicInteger()
  private val deadlines = Deadlines(settings.requestTimeout)
  private val renderer = Http1.Renderer(s"$host:$port", close = mode == ConnectionMode.PerCall)

  def send(device: Int, request: Request): Future[Reply] =
    val bytes = renderer.render(request)
    mode match
      case ConnectionMode.Shared => sendShared(bytes)
      case ConnectionMode.PerDevice =>
        orOverloaded(own.compute(device, (_, current) => if current != null && current.isOpen then current else open(device)).send(bytes))
      case ConnectionMode.PerCall => orOverloaded(PipelinedConnection(dialer.bytes(device), 1, deadlines).send(bytes))

  private def sendShared(bytes: ByteString): Future[Reply] =
    val first = next.getAndIncrement()
    @tailrec def attempt(tried: Int): Future[Reply] =
      if tried == size then overloaded
      else sharedConnection(Math.floorMod(first + tried, size)).send(bytes) match
        case Some(reply) => reply
        case None => attempt(tried + 1)
    attempt(0)

  private def sharedConnection(slot: Int): PipelinedConnection =
    val current = shared.get(slot)
    if current != null && current.isOpen then current
    else
      val fresh = PipelinedConnection(dialer.bytes(slot), settings.pipelining, deadlines)
      if shared.compareAndSet(slot, current, fresh) then fresh
      else
        fresh.close()
        shared.get(slot)

  /** A device's own connection; forgotten once it closes, so idle devices hold nothing. */
  private def open(device: Int): PipelinedConnection =
    val connection = PipelinedConnection(dialer.bytes(device), settings.pipelining, deadlines)
    connection.finished.onComplete(_ => own.remove(device, connection))(using ExecutionContext.parasitic)
    connection

  private val overloaded = Future.successful(Reply.Failed(FailureReason.Overloaded))
  private def orOverloaded(sent: Option[Future[Reply]]): Future[Reply] = sent.getOrElse(overloaded)

  def close(): Future[Done] =
    deadlines.close()
    (0 until size).flatMap(i => Option(shared.get(i))).foreach(_.close())
    own.values.forEach(_.close())
    Future.successful(Done)
