package fleetsim.metrics

import fleetsim.transport.{FailureReason, Push, Reply, Request, SshEndpoint, Transport, Tunnel, Tunnels}
import org.apache.pekko.Done

import scala.concurrent.{ExecutionContext, Future}

/** Counts and times every call through the transport it wraps. */
final class MeteredTransport(inner: Transport, metrics: FleetMetrics) extends Transport:
  def send(device: Int, request: Request): Future[Reply] =
    val started = System.nanoTime()
    metrics.sent(request.kind)
    val reply = inner.send(device, request)
    reply.onComplete { result =>
      metrics.replied(request.kind, result.getOrElse(Reply.Failed(FailureReason.ProtocolError)), System.nanoTime() - started)
    }(using ExecutionContext.parasitic)
    reply

  def close(): Future[Done] = inner.close()

/** Times handshakes, counts tunnels up and failed, and meters the calls through each tunnel. */
final class MeteredTunnels(inner: Tunnels, metrics: FleetMetrics) extends Tunnels:
  private given ExecutionContext = ExecutionContext.parasitic

  def publicKey: Option[String] = inner.publicKey

  def open(device: Int, login: String, offered: Option[SshEndpoint], pushed: Push => Unit): Future[Either[FailureReason, Tunnel]] =
    val started = System.nanoTime()
    inner.open(device, login, offered, pushed).map {
      case Right(tunnel) =>
        metrics.tunnelOpened(System.nanoTime() - started)
        tunnel.lost.foreach(_ => metrics.tunnelClosed())
        Right(MeteredTunnel(tunnel))
      case Left(reason) =>
        metrics.tunnelFailed(reason)
        Left(reason)
    }

  def close(): Future[Done] = inner.close()

  private final class MeteredTunnel(tunnel: Tunnel) extends Tunnel:
    private val metered = MeteredTransport(tunnel, metrics)
    def send(device: Int, request: Request): Future[Reply] = metered.send(device, request)
    def lost: Future[Done] = tunnel.lost
    def close(): Future[Done] = tunnel.close()
