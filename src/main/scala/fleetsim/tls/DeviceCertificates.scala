package fleetsim.tls

import java.nio.file.{Files, Path}
import java.time.Instant
import java.time.temporal.ChronoUnit
import java.util.concurrent.Executors
import scala.concurrent.duration.Duration
import scala.concurrent.{Await, ExecutionContext, Future}
import scala.util.control.NonFatal

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

  /** Read from `dir` as [[read]] says, NAME being `template` with `{mac}` the device's name (':'
    * written '-') and `{n}` its number.
    */
  def folder(dir: Path, template: String): DeviceCertificates = (number, name) =>
    Future(read(dir, fileName(template, number, name), Instant.now))(using pool)

  def fileName(template: String, number: Int, name: String): String =
    template.replace("{mac}", name.replace(':', '-')).replace("{n}", number.toString)

  /** NAME.p12 (password from FLEETSIM_CLIENT_CERTS_PASSWORD), else NAME.pem with NAME.key, from
    * `dir`: a certificate and its key, of one pair, the certificate valid at `at`.
    *
    * @throws TlsFileError naming the file at fault and why it cannot be used
    */
  def read(dir: Path, name: String, at: Instant): KeyMaterial =
    val p12 = dir.resolve(s"$name.p12")
    val pem = dir.resolve(s"$name.pem")
    val (file, material) =
      if Files.exists(p12) then p12 -> Pem.pkcs12(p12, sys.env.getOrElse("FLEETSIM_CLIENT_CERTS_PASSWORD", "").toCharArray)
      else if !Files.exists(pem) then throw TlsFileError(s"$dir: no $name.pem (with $name.key) or $name.p12", Some(pem), "missing")
      else pem -> Pem.keyMaterial(pem, dir.resolve(s"$name.key"))
    val leaf = material.chain.head
    def shown(d: java.util.Date) = d.toInstant.truncatedTo(ChronoUnit.SECONDS)
    if at.isAfter(leaf.getNotAfter.toInstant) then
      throw TlsFileError(s"$file: the certificate expired at ${shown(leaf.getNotAfter)}", Some(file), s"certificate expired ${shown(leaf.getNotAfter)}")
    if at.isBefore(leaf.getNotBefore.toInstant) then
      throw TlsFileError(s"$file: the certificate is not valid until ${shown(leaf.getNotBefore)}", Some(file),
        s"certificate not valid until ${shown(leaf.getNotBefore)}")
    material

  /** A device whose files cannot be used: the file at fault, and why in a few words. */
  final case class Unusable(device: Int, file: Path, why: String):
    override def toString: String = s"device $device (${file.getFileName}: $why)"

  /** What checking a folder found: how many devices' files cannot be used, the first few of them. */
  final case class Checked(unusable: Int, first: Seq[Unusable]):
    def ++(other: Checked): Checked = Checked(unusable + other.unusable, (first ++ other.first).sortBy(_.device).take(Checked.Named))

  object Checked:
    /** How many a one-line refusal names. */
    val Named = 3
    val Empty: Checked = Checked(0, Nil)

  /** Devices 0 until `devices` as a run would read them ([[read]]), on the certificates' two
    * threads, before the run starts: a device found lacking mid-run fails every call it makes. A
    * device's files cost about 0.13 ms of a warm thread (certificate 40 µs, key 15 µs, public keys
    * compared 75 µs, where signing and verifying took 1.6 ms): 10,000 devices took 2.9 s at the
    * start of a run, 0.7-1.3 s in a warm process, on two shared cores.
    */
  def check(dir: Path, template: String, devices: Int, names: Int => String, at: Instant = Instant.now): Checked =
    val slices = (0 until devices).grouped(Slice).toSeq.map { slice =>
      Future {
        slice.foldLeft(Checked.Empty) { (found, n) =>
          val name = fileName(template, n, names(n))
          try
            read(dir, name, at)
            found
          catch
            case e: TlsFileError => found ++ Checked(1, Seq(Unusable(n, e.file.getOrElse(dir.resolve(name)), e.why)))
            case NonFatal(e) => found ++ Checked(1, Seq(Unusable(n, dir.resolve(name), e.toString)))
        }
      }(using pool)
    }
    // No deadline: a slow disk makes the check slow, not wrong, and Ctrl-C still ends it.
    slices.map(Await.result(_, Duration.Inf)).foldLeft(Checked.Empty)(_ ++ _)

  /** Devices a task of [[check]] reads: enough that scheduling is noise, few enough that both threads stay busy. */
  private val Slice = 500

  /** [[check]]'s findings as the one line that refuses the run, or None when every device has its files. */
  def refusal(dir: Path, template: String, devices: Int, checked: Checked): Option[String] =
    Option.when(checked.unusable > 0) {
      val more = checked.unusable - checked.first.size
      val fewer = checked.first.headOption.map(_.device).filter(_ > 0).fold("")(first => s" (--devices $first)")
      s"--client-certs $dir: ${checked.unusable} of $devices devices have no usable certificate: ${checked.first.mkString(", ")}" +
        (if more > 0 then s", and $more more" else "") +
        s"; give devices 0..${devices - 1} each a NAME.pem with NAME.key, or a NAME.p12 (NAME from fleetsim.tls.client-certs-name, '$template'), " +
        s"or run fewer devices$fewer, or use --client-ca and --client-ca-key to issue them at start"
    }

  /** Refuses, in one line ([[TlsFileError]]), a run of `devices` devices that some would meet without a usable certificate. */
  def checkFolder(dir: Path, template: String, devices: Int, names: Int => String): Unit =
    refusal(dir, template, devices, check(dir, template, devices, names)).foreach(line => throw TlsFileError(line))
