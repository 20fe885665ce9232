package fleetsim.tls

import com.typesafe.config.Config

import java.nio.file.{Files, Path, Paths}

/** How a fleet speaks TLS to an https:// controller.
  *
  * @param caFile the CAs that sign the controller's certificate; None = the system's trust store
  * @param insecure trust any server certificate and skip the hostname check
  * @param clientCa with `clientCaKey`: one certificate per device, issued at start from this CA
  * @param clientCerts one certificate per device from this folder instead
  * @param clientCertsName a device's file name in `clientCerts`: `{mac}` (its MAC, - for :), `{n}` (its number)
  */
final case class TlsSettings(
    caFile: Option[Path],
    insecure: Boolean,
    clientCa: Option[Path],
    clientCaKey: Option[Path],
    clientCerts: Option[Path],
    clientCertsName: String):
  require(clientCa.isDefined == clientCaKey.isDefined, "--client-ca and --client-ca-key go together: give both, the CA's certificate and its key")
  require(clientCa.isEmpty || clientCerts.isEmpty, "--client-ca and --client-certs both give devices certificates: choose one")
  for (flag, file) <- Seq("--ca-file" -> caFile, "--client-ca" -> clientCa, "--client-ca-key" -> clientCaKey).collect { case (f, Some(p)) => f -> p } do
    require(Files.isReadable(file), s"$flag: cannot read $file")
  for dir <- clientCerts do require(Files.isDirectory(dir), s"--client-certs: $dir is not a folder")
  require(clientCertsName.contains("{mac}") || clientCertsName.contains("{n}"),
    s"fleetsim.tls.client-certs-name must contain {mac} or {n}, or every device would read the same file (got '$clientCertsName')")

  /** Devices present certificates of their own. */
  def clientCertificates: Boolean = clientCa.isDefined || clientCerts.isDefined

object TlsSettings:
  def apply(config: Config): TlsSettings =
    val c = config.getConfig("fleetsim.tls")
    def path(key: String) = Option(c.getString(key)).filter(_.nonEmpty).map(Paths.get(_))
    TlsSettings(path("ca-file"), c.getBoolean("insecure"), path("client-ca"), path("client-ca-key"), path("client-certs"),
      c.getString("client-certs-name"))
