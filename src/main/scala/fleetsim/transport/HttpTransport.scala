package fleetsim.transport

import com.typesafe.config.Config
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.Http
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.settings.{ClientConnectionSettings, ConnectionPoolSettings}

import fleetsim.finiteDuration
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** The HTTP client settings. Pekko HTTP's own defaults (4 connections, 5 silent retries, no
  * request timeout) would hide what a simulator must show, so each one is chosen here.
  *
  * @param maxConnections connections to the controller shared by the whole fleet; None = fitted to it
  */
final case class HttpSettings(
    maxConnections: Option[Int],
    requestTimeout: FiniteDuration,
    connectTimeout: FiniteDuration,
    keepAliveTimeout: FiniteDuration):
  require(maxConnections.forall(_ >= 1), "fleetsim.http.max-connections must be at least 1, or auto")
  require(requestTimeout > Duration.Zero, "fleetsim.http.request-timeout must be positive")
  require(connectTimeout > Duration.Zero, "fleetsim.http.connect-timeout must be positive")
  require(keepAliveTimeout > Duration.Zero, "fleetsim.http.keep-alive-timeout must be positive")

  /** The pool size for a fleet: a connection per ten devices, at least 8 and at most 512. */
  def connectionsFor(devices: Int): Int = maxConnections.getOrElse((devices / 10).max(8).min(512))

object HttpSettings:
  def apply(config: Config): HttpSettings =
    val c = config.getConfig("fleetsim.http")
    HttpSettings(
      maxConnections = if c.getString("max-connections") == "auto" then None else Some(c.getInt("max-connections")),
      requestTimeout = c.finiteDuration("request-timeout"),
      connectTimeout = c.finiteDuration("connect-timeout"),
      keepAliveTimeout = c.finiteDuration("keep-alive-timeout"))

/** One pooled Pekko HTTP client for the whole fleet. Every response entity is consumed, error
  * replies included, or the pool would stall.
  */
final class HttpTransport(base: Uri, settings: HttpSettings, devices: Int)(using system: ActorSystem[?])
    extends Transport:
  private given ExecutionContext = system.executionContext
  private val http = Http(system.classicSystem)
  private val origin = base.toString.stripSuffix("/")
  private val connections = settings.connectionsFor(devices)

  private val pool = ConnectionPoolSettings(system)
    .withMaxConnections(connections)
    .withMaxRetries(0) // devices retry on their own schedule, visibly
    .withMaxOpenRequests(Integer.highestOneBit((devices * 2).max(64) - 1) << 1) // a power of two
    .withKeepAliveTimeout(settings.keepAliveTimeout) // below the server's idle timeout
    .withBaseConnectionBackoff(Duration.Zero)
    .withConnectionSettings(
      ClientConnectionSettings(system)
        .withConnectingTimeout(settings.connectTimeout)
        .withIdleTimeout(settings.requestTimeout * 2))

  def send(request: Request): Future[Reply] =
    val httpRequest = Replies.httpRequest(request, Uri(origin + request.path))
    Replies.within(settings.requestTimeout) {
      http.singleRequest(httpRequest, settings = pool).flatMap(Replies.of(_, settings.requestTimeout)).recover(Replies.failure)
    }

  def close(): Future[Done] = http.shutdownAllConnectionPools().map(_ => Done)
