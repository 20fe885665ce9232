package fleetsim.tls

import fleetsim.transport.{FailureReason, Replies, TlsClient}

import java.security.cert.X509Certificate
import javax.net.ssl.{SSLContext, SSLEngine, SSLSocket}
import scala.concurrent.{ExecutionContext, Future}
import scala.util.Success

/** The fleet's side of TLS: every connection checks the server as `trust` says and, with
  * `certificates`, each device presents its own. A device with a certificate keeps a TLS context of
  * its own, so that a reconnect resumes its own session: with one shared session cache, a device
  * could resume a session another device's certificate opened.
  *
  * @param names a device's name for its certificate (subject CN, file name), by its number
  * @param protocols the TLS versions devices offer
  */
final class FleetTls(host: String, port: Int, trust: Trust, certificates: Option[DeviceCertificates], names: Int => String,
    protocols: Seq[String])(
    using ExecutionContext)
    extends TlsClient:
  private val trustManagers = TlsContexts.trustManagers(trust)
  private val shared = TlsContexts.client(trustManagers, None)
  private val own = certificates.map(PerDevice(_, names, m => TlsContexts.client(trustManagers, Some(m))))

  def perDevice: Boolean = certificates.isDefined

  def engine(device: Int): Future[SSLEngine] = own match
    case None => Future.successful(engineOf(shared))
    case Some(contexts) =>
      val context = contexts(device)
      context.value match
        case Some(Success(ready)) => Future.successful(engineOf(ready))
        case _ => context.map(engineOf) // a failure is a KnownFailure: certificateUnusable

  private def engineOf(context: SSLContext): SSLEngine = TlsContexts.clientEngine(context, host, port, verifyHostname = trust != Trust.Insecure, protocols)

object FleetTls:
  /** Whom the fleet trusts: anyone with --insecure-tls; else --ca-file's CAs, the embedded
    * controller's CA, or the system's trust store.
    */
  def trust(settings: TlsSettings, embeddedCa: Option[X509Certificate]): Trust =
    if settings.insecure then Trust.Insecure
    else settings.caFile.map(f => Trust.Authorities(Pem.certificates(f)))
      .orElse(embeddedCa.map(ca => Trust.Authorities(Seq(ca))))
      .getOrElse(Trust.System)

  /** Where devices get their certificates: --client-ca, --client-certs, or the embedded controller's
    * CA when it requires them; None = devices present none.
    */
  def certificates(settings: TlsSettings, embeddedCa: Option[CertificateAuthority]): Option[DeviceCertificates] =
    (settings.clientCa, settings.clientCaKey) match
      case (Some(cert), Some(key)) => Some(DeviceCertificates.issued(CertificateAuthority.load(cert, key)))
      case _ => settings.clientCerts.map(DeviceCertificates.folder(_, settings.clientCertsName))
        .orElse(embeddedCa.map(DeviceCertificates.issued))

  private val Expired = "it expired"
  private val NotYetValid = "it is not valid yet"

  /** Whether [[serverRefused]]'s words say the certificate is out of its dates (signed all the same). */
  def outOfDates(words: String): Boolean = words.startsWith(Expired) || words.startsWith(NotYetValid)

  /** One handshake with the server, blocking the caller (the command line, before the fleet starts):
    * the reason its certificate is refused, if it is, and the TLS stack's words for it. Other
    * failures (the server is not up yet, it wants a client certificate) are the devices' to meet.
    */
  def serverRefused(host: String, port: Int, trust: Trust, timeoutMillis: Int): Option[(FailureReason, String)] =
    val context = TlsContexts.client(trust, None)
    val socket = context.getSocketFactory.createSocket().asInstanceOf[SSLSocket]
    try
      socket.setSSLParameters(TlsContexts.clientEngine(context, host, port, verifyHostname = trust != Trust.Insecure).getSSLParameters)
      socket.connect(java.net.InetSocketAddress(host, port), timeoutMillis)
      socket.setSoTimeout(timeoutMillis)
      socket.startHandshake()
      None
    catch
      case e: Exception =>
        val chain = Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).toSeq
        // A certificate out of its dates is signed all the same: say which date, not "not signed".
        val words = chain.collectFirst {
          case t: java.security.cert.CertificateExpiredException => s"$Expired: ${t.getMessage}"
          case t: java.security.cert.CertificateNotYetValidException => s"$NotYetValid: ${t.getMessage}"
        }.getOrElse(chain.last.getMessage)
        Replies.tlsReason(e).filter(r => r == FailureReason.ServerUntrusted || r == FailureReason.HostnameMismatch).map(_ -> words)
    finally socket.close()
