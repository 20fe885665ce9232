package fleetsim.metrics

import fleetsim.transport.{Reply, Request, Transport}
import org.apache.pekko.Done

import scala.concurrent.{ExecutionContext, Future}

/** Counts and times every call through the transport it wraps. */
final class MeteredTransport(inner: Transport, metrics: FleetMetrics) extends Transport:
  def send(request: Request): Future[Reply] =
    val started = System.nanoTime()
    metrics.sent(request.kind)
    val reply = inner.send(request)
    reply.onComplete { result =>
      metrics.replied(request.kind, result.getOrElse(Reply.Failed(fleetsim.transport.FailureReason.ProtocolError)), System.nanoTime() - started)
    }(using ExecutionContext.parasitic)
    reply

  def close(): Future[Done] = inner.close()
