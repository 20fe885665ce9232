package fleetsim.transport

import com.typesafe.config.Config
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.stream.scaladsl.Tcp

import fleetsim.finiteDuration
import java.net.InetSocketAddress
import java.util.concurrent.atomic.{AtomicInteger, AtomicReferenceArray}
import scala.annotation.tailrec
import scala.concurrent.duration.*
import scala.concurrent.Future

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

/** A fixed set of pipelined HTTP/1.1 connections to the controller, shared by the whole fleet. A
  * call goes to the next connection with room; when none has, it fails at once as Overloaded
  * rather than queueing past its deadline. A closed connection is opened again by its next call.
  */
final class HttpTransport(host: String, port: Int, settings: HttpSettings, devices: Int)(using system: ActorSystem[?])
    extends Transport:
  private val size = settings.connectionsFor(devices)
  private val connections = AtomicReferenceArray[PipelinedConnection](size)
  private val next = AtomicInteger()
  private val deadlines = Deadlines(settings.requestTimeout)
  private val renderer = Http1.Renderer(s"$host:$port")
  private val address = InetSocketAddress(host, port)
  // Closes a connection idle for keep-alive-timeout, before the server's own idle timeout can
  // close one the client is about to use.
  private val tcp = Tcp(system).outgoingConnection(address, connectTimeout = settings.connectTimeout, idleTimeout = settings.keepAliveTimeout)

  def send(device: Int, request: Request): Future[Reply] =
    val bytes = renderer.render(request) // once, however many connections it tries
    val first = next.getAndIncrement()
    @tailrec def attempt(tried: Int): Future[Reply] =
      if tried == size then Future.successful(Reply.Failed(FailureReason.Overloaded))
      else connection(Math.floorMod(first + tried, size)).send(bytes) match
        case Some(reply) => reply
        case None => attempt(tried + 1)
    attempt(0)

  private def connection(slot: Int): PipelinedConnection =
    val current = connections.get(slot)
    if current != null && current.isOpen then current
    else
      val fresh = PipelinedConnection(tcp, settings.pipelining, deadlines)
      if connections.compareAndSet(slot, current, fresh) then fresh
      else
        fresh.close()
        connections.get(slot)

  def close(): Future[Done] =
    deadlines.close()
    (0 until size).flatMap(i => Option(connections.get(i))).foreach(_.close())
    Future.successful(Done)
