package fleetsim.tls

import java.nio.file.{Files, Path}
import java.util.concurrent.Executors
import scala.concurrent.{ExecutionContext, Future}

/** Where devices get their client certificates. */
trait DeviceCertificates:
  /** The certificate of device `number`, whose name is `name` (its MAC, for most profiles); made or
    * read on threads of its own, never the caller's (an actor's).
    */
  def forDevice(number: Int, name: String): Future[KeyMaterial]

object DeviceCertificates:
  /** Two threads for the whole fleet: key generation and file reading are CPU and I/O, and the
    * fleet's thread count must not grow with its devices.
    */
  private lazy val pool: ExecutionContext =
    ExecutionContext.fromExecutor(Executors.newFixedThreadPool(2, fleetsim.DaemonThreads("fleetsim-certificates")))

  /** Issued from `ca` as devices ask for them, each with its own EC P-256 key, subject CN = the device's name. */
  def issued(ca: CertificateAuthority): DeviceCertificates = (_, name) => Future(ca.issueClient(name))(using pool)

  /** Read from `dir`: NAME.pem with NAME.key, or NAME.p12 (password from FLEETSIM_CLIENT_CERTS_PASSWORD),
    * NAME being `template` with `{mac}` the device's name (':' written '-') and `{n}` its number.
    */
  def folder(dir: Path, template: String): DeviceCertificates = (number, name) =>
    Future {
      val file = fileName(template, number, name)
      val p12 = dir.resolve(s"$file.p12")
      if Files.exists(p12) then Pem.pkcs12(p12, sys.env.getOrElse("FLEETSIM_CLIENT_CERTS_PASSWORD", "").toCharArray)
      else
        val pem = dir.resolve(s"$file.pem")
        if !Files.exists(pem) then throw TlsFileError(s"$dir: no $file.pem (with $file.key) or $file.p12 for device $number")
        Pem.keyMaterial(pem, dir.resolve(s"$file.key"))
    }(using pool)

  def fileName(template: String, number: Int, name: String): String =
    template.replace("{mac}", name.replace(':', '-')).replace("{n}", number.toString)
