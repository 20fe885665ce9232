package fleetsim.transport

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.pattern.after
import org.apache.pekko.stream.StreamTcpException

import java.security.cert.{CertPathBuilderException, CertPathValidatorException, CertificateException}
import javax.net.ssl.SSLException
import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future}

/** What every transport does with an exception and a deadline. */
object Replies:
  /** Why the calls on a connection failed, from the exception that ended it. */
  def reason(e: Throwable): FailureReason = tlsReason(e).getOrElse(e match
    case _: StreamTcpException => FailureReason.ConnectFailed
    case _: java.util.concurrent.TimeoutException => FailureReason.TimedOut
    case _ => FailureReason.ProtocolError)

  /** Alerts a server sends when it will not take the client's certificate. */
  private val Refusals = Seq("bad_certificate", "unknown_ca", "certificate_required", "certificate_unknown", "access_denied",
    "unsupported_certificate", "certificate_revoked", "certificate_expired")

  /** Why a TLS connection failed or could not start (a [[KnownFailure]]: the device's certificate
    * could not be had), in a device's terms; None when `e` is no TLS failure.
    */
  def tlsReason(e: Throwable): Option[FailureReason] =
    val chain = Iterator.iterate(e)(_.getCause).takeWhile(_ != null).toSeq
    def says(t: Throwable, words: String) = Option(t.getMessage).exists(_.contains(words))
    val known = chain.collectFirst { case k: KnownFailure => k.reason }
    if known.isDefined then known
    else if !chain.exists(_.isInstanceOf[SSLException]) then None
    else if chain.exists(t => t.isInstanceOf[CertPathBuilderException] || t.isInstanceOf[CertPathValidatorException]) then
      Some(FailureReason.ServerUntrusted)
    else if chain.exists(t => t.isInstanceOf[CertificateException] && (says(t, "No subject alternative") || says(t, "No name matching"))) then
      Some(FailureReason.HostnameMismatch)
    else if chain.exists(t => says(t, "Received fatal alert") && Refusals.exists(says(t, _))) then Some(FailureReason.CertificateRejected)
    else Some(FailureReason.TlsHandshakeFailed)

  /** The future's result, or `late` if it has not come within `timeout`. */
  def orElse[A](timeout: FiniteDuration, late: => A)(future: Future[A])(using system: ActorSystem[?]): Future[A] =
    Future.firstCompletedOf(Seq(future, after(timeout)(Future.successful(late))))(using ExecutionContext.parasitic)
