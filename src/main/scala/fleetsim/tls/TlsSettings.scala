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
  * @param protocols the TLS versions devices offer, newest first
  */
final case class TlsSettings(
    caFile: Option[Path],
    insecure: Boolean,
    clientCa: Option[Path],
    clientCaKey: Option[Path],
    clientCerts: Option[Path],
    clientCertsName: String,
    protocols: Seq[String] = TlsSettings.versions("any")):
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
  /** --tls-version: 1.3, 1.2 (as many embedded devices speak it; its resumption needs no new key
    * exchange, so reconnects cost a quarter of 1.3's), or any (1.3, else 1.2).
    */
  def versions(choice: String): Seq[String] = choice match
    case "1.3" => Seq("TLSv1.3")
    case "1.2" => Seq("TLSv1.2")
    case "any" => Seq("TLSv1.3", "TLSv1.2")
    case other => throw IllegalArgumentException(s"fleetsim.tls.version must be 1.2, 1.3 or any (got '$other')")

  def apply(config: Config): TlsSettings =
    val c = config.getConfig("fleetsim.tls")
    def path(key: String) = Option(c.getString(key)).filter(_.nonEmpty).map(Paths.get(_))
    TlsSettings(path("ca-file"), c.getBoolean("insecure"), path("client-ca"), path("client-ca-key"), path("client-certs"),
      c.getString("client-certs-name"), versions(c.getString("version")))
