package fleetsim.controller

import fleetsim.tls.{CertificateAuthority, KeyMaterial, Pem, TlsContexts}

import java.nio.file.{Files, Path}
import javax.net.ssl.{SSLContext, SSLEngine}

/** The reference controller's TLS: a CA and a server certificate made once in its state folder and
  * kept there, so that a fleet trusts it across restarts (`--ca-file <state-dir>/tls/ca.pem`).
  *
  * @param clientCertificates admit only clients that present a certificate this CA signed
  */
final class ControllerTls private (val authority: CertificateAuthority, val caFile: Path, server: KeyMaterial, clientCertificates: Boolean):
  private val context: SSLContext = TlsContexts.server(server, Option.when(clientCertificates)(authority.certificate))
  def engine(): SSLEngine = TlsContexts.serverEngine(context, clientCertificates)

object ControllerTls:
  /** The state folder's CA and server certificate, made first if missing; the server certificate
    * names 127.0.0.1, ::1, localhost and `host`.
    */
  def apply(stateDir: Path, host: String, clientCertificates: Boolean): ControllerTls =
    val dir = stateDir.resolve("tls")
    Files.createDirectories(dir)
    val (caCert, caKey, serverCert, serverKey) = (dir.resolve("ca.pem"), dir.resolve("ca.key"), dir.resolve("server.pem"), dir.resolve("server.key"))
    val authority =
      if Files.exists(caCert) && Files.exists(caKey) then CertificateAuthority.load(caCert, caKey)
      else
        val made = CertificateAuthority.create("fleetsim reference controller CA")
        Pem.write(made.material, caCert, Some(caKey))
        Files.deleteIfExists(serverCert) // one signed by an older CA
        made
    val server =
      if Files.exists(serverCert) && Files.exists(serverKey) then Pem.keyMaterial(serverCert, serverKey)
      else
        val made = authority.issueServer(Seq("127.0.0.1", "::1", "localhost", host).distinct)
        Pem.write(made, serverCert, Some(serverKey))
        made
    new ControllerTls(authority, caCert, server, clientCertificates)
