package fleetsim.transport

import org.apache.pekko.Done

import java.net.{URI, URISyntaxException}
import java.util.concurrent.ConcurrentHashMap
import scala.concurrent.{ExecutionContext, Future}
import scala.jdk.CollectionConverters.*

/** Calls whose path is an absolute URL (`https://host:port/path?query`): MQTT devices fetching a
  * document a push named. Each server gets a transport of its own from `to(scheme, host, port)` on
  * its first call, made on `blocking` (it resolves the host, and may read trust stores), and kept
  * for the run.
  */
final class UrlTransport(to: (String, String, Int) => Transport, blocking: ExecutionContext) extends Transport:
  private val servers = ConcurrentHashMap[(String, String, Int), Future[Transport]]()
  private val unusable = Future.successful(Reply.Failed(FailureReason.ProtocolError))

  def send(device: Int, request: Request): Future[Reply] =
    UrlTransport.split(request.path) match
      case None => unusable
      case Some((server, pathAndQuery)) =>
        servers.computeIfAbsent(server, (scheme, host, port) => Future(to(scheme, host, port))(using blocking))
          .flatMap(_.send(device, request.copy(path = pathAndQuery)))(using ExecutionContext.parasitic)
          .recover { case _ => Reply.Failed(FailureReason.ConnectFailed) }(using ExecutionContext.parasitic) // the host did not resolve

  def close(): Future[Done] =
    given ExecutionContext = ExecutionContext.parasitic
    Future.sequence(servers.values.asScala.map(_.flatMap(_.close()).recover { case _ => Done })).map(_ => Done)

object UrlTransport:
  /** (scheme, host, port) and the path with its query; None unless an http or https URL. */
  def split(url: String): Option[((String, String, Int), String)] =
    try
      val uri = URI(url)
      val scheme = uri.getScheme
      if (scheme != "http" && scheme != "https") || uri.getHost == null then None
      else
        val port = if uri.getPort >= 0 then uri.getPort else if scheme == "https" then 443 else 80
        val path = Option(uri.getRawPath).filter(_.nonEmpty).getOrElse("/") + Option(uri.getRawQuery).fold("")("?" + _)
        Some(((scheme, uri.getHost, port), path))
    catch case _: URISyntaxException => None
