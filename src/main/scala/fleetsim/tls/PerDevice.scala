package fleetsim.tls

import fleetsim.transport.{Complaints, FailureReason, KnownFailure}

import java.util.concurrent.ConcurrentHashMap
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.util.{Failure, Success, Try}

/** What each device makes once from its certificate (a TLS context, an MQTT TLS configuration),
  * kept for its reconnects. A certificate that cannot be had is not kept: the device's next
  * connection reads it again, and meanwhile it fails as [[FailureReason.CertificateUnusable]], said
  * in one line of the log (at most one a second), never a stack trace.
  */
private[tls] final class PerDevice[A](certificates: DeviceCertificates, names: Int => String, make: KeyMaterial => A)(
    using ExecutionContext):
  private val made = ConcurrentHashMap[Int, Future[A]]()

  def apply(device: Int): Future[A] =
    val known = made.get(device)
    if known != null then known
    else
      val promise = Promise[A]()
      val raced = made.putIfAbsent(device, promise.future)
      if raced != null then raced
      else
        // Completed and forgotten outside the map's lock, never in a computeIfAbsent: a future
        // completed there runs its callbacks there, and one that touches the map again is
        // ConcurrentHashMap's IllegalStateException "Recursive update".
        promise.completeWith(certificates.forDevice(device, names(device)).transform {
          case Success(material) => Try(make(material)).recoverWith { case e => Failure(unusable(device, e)) }
          case Failure(e) => Failure(unusable(device, e))
        })
        promise.future.failed.foreach(_ => made.remove(device, promise.future))(using ExecutionContext.parasitic)
        promise.future

  private def unusable(device: Int, e: Throwable): KnownFailure =
    val words = e match
      case f: TlsFileError => f.getMessage
      case other => Option(other.getMessage).fold(other.getClass.getName)(m => s"${other.getClass.getSimpleName}: $m")
    val reason = FailureReason.CertificateUnusable
    Complaints.warn(reason.key, s"device $device has no usable client certificate ($words): its calls fail as ${reason.key} until it has one")
    KnownFailure(reason, s"device $device: $words")
