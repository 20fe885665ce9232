package fleetsim.transport.ssh

import org.apache.sshd.client.config.hosts.KnownHostEntry
import org.apache.sshd.client.keyverifier.{KnownHostsServerKeyVerifier, RejectAllServerKeyVerifier, ServerKeyVerifier}
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.AttributeRepository.AttributeKey
import org.apache.sshd.common.config.keys.{KeyUtils, PublicKeyEntryResolver}
import org.slf4j.LoggerFactory

import java.net.SocketAddress
import java.nio.file.{Files, Path}
import java.security.PublicKey
import java.util.concurrent.atomic.AtomicBoolean
import scala.util.Try

/** Host-key checking per [[HostKeyMode]]. A refused key marks the session, so the transport can
  * tell a host-key refusal from any other failed handshake, and is logged once with what to do.
  * Checking fails closed: a known_hosts file that cannot be read, parsed or (with accept-new) written
  * refuses the run at start ([[check]]), and refuses the key if that happens later — never trusts.
  */
object HostKeys:
  private val log = LoggerFactory.getLogger(getClass)
  /** Set on a session whose server key was refused. */
  val Refused = AttributeKey[String]()

  /** Why the known_hosts file cannot serve `settings.hostKeys`, in one line that says what to do. */
  def check(settings: SshSettings): Either[String, Unit] =
    val file = settings.knownHosts
    def fix = s"fix it, or name another with --known-hosts"
    if settings.hostKeys == HostKeyMode.Insecure then Right(())
    else if Files.isDirectory(file) then Left(s"--known-hosts: $file is a folder, not a known_hosts file: $fix")
    else if Files.exists(file) then
      unreadable(file).map(problem => s"--known-hosts: $problem: $fix") match
        case Some(problem) => Left(problem)
        case None if settings.hostKeys == HostKeyMode.AcceptNew && !Files.isWritable(file) =>
          Left(s"--known-hosts: $file cannot be written, so accept-new cannot pin new keys: $fix, or use --host-keys strict")
        case None => Right(())
    else if settings.hostKeys == HostKeyMode.Strict then Right(()) // every key is refused, each saying where to add it
    else
      try
        Option(file.toAbsolutePath.getParent).foreach(Files.createDirectories(_))
        Either.cond(Files.isWritable(Option(file.toAbsolutePath.getParent).getOrElse(file)), (),
          s"--known-hosts: the folder of $file cannot be written, so accept-new cannot pin keys: $fix")
      catch case e: java.io.IOException => Left(s"--known-hosts: cannot make the folder of $file (${e.getClass.getSimpleName}: ${e.getMessage}): $fix")

  /** What keeps `file` from being read whole: not UTF-8, or a line that is not a key. MINA skips a
    * line it cannot parse, and a pin skipped would let accept-new pin another key in its place.
    */
  private def unreadable(file: Path): Option[String] =
    if !Files.exists(file) then None // nothing pinned yet: nothing to lose
    else fleetsim.TextFiles.utf8(file) match
      case Left(problem) => Some(problem)
      case Right(text) =>
        text.linesIterator.zipWithIndex.collectFirst {
          case (line, i) if line.trim.nonEmpty && !line.trim.startsWith("#") && !Try(key(line.trim)).getOrElse(false) =>
            s"$file:${i + 1} is not a known_hosts line fleetsim can read ('${line.take(40)}')"
        }

  /** Whether a known_hosts line holds a key, of the type it says. */
  private def key(line: String): Boolean =
    val entry = KnownHostEntry.parseKnownHostEntry(line).getKeyEntry
    KeyUtils.getKeyType(entry.resolvePublicKey(null, java.util.Map.of(), PublicKeyEntryResolver.FAILING)) == entry.getKeyType

  def verifier(settings: SshSettings): ServerKeyVerifier = settings.hostKeys match
    case HostKeyMode.Insecure =>
      val warned = AtomicBoolean()
      (session, remote, key) =>
        if warned.compareAndSet(false, true) then
          log.warn("host-keys = insecure: accepting any SSH host key; use accept-new or strict against servers you do not control")
        true
    case mode =>
      val told = AtomicBoolean()
      def refuse(session: ClientSession, remote: SocketAddress, why: String): Boolean =
        session.setAttribute(Refused, why)
        if told.compareAndSet(false, true) then log.error(s"SSH host key of $remote refused: $why")
        false
      new KnownHostsServerKeyVerifier(RejectAllServerKeyVerifier.INSTANCE, settings.knownHosts):
        override def acceptModifiedServerKey(session: ClientSession, remote: SocketAddress, entry: org.apache.sshd.client.config.hosts.KnownHostEntry, expected: PublicKey, actual: PublicKey): Boolean =
          refuse(session, remote,
            s"it changed (now ${KeyUtils.getFingerPrint(actual)}, ${settings.knownHosts} has ${KeyUtils.getFingerPrint(expected)}); " +
              "if the server's key really changed, remove its line from that file")

        // The file could not be read mid-run: refuse, where MINA's default would take the key as unknown.
        override def acceptIncompleteHostKeys(session: ClientSession, remote: SocketAddress, key: PublicKey, reason: Throwable): Boolean =
          refuse(session, remote, s"${settings.knownHosts} cannot be read (${reason.getMessage}); fix it, or name another with --known-hosts")

        override def acceptUnknownHostKey(session: ClientSession, remote: SocketAddress, key: PublicKey): Boolean =
          if mode == HostKeyMode.Strict then
            refuse(session, remote, s"it is not in ${settings.knownHosts} (host-keys = strict); add it there, or use --host-keys accept-new")
          else
            // accept-new. MINA reads the file leniently (a line it cannot parse is skipped, a file it
            // cannot read is taken as empty), so the host may be "unknown" only because its pin was
            // lost: read the whole file again before pinning. And a key is taken only once it is
            // pinned; MINA's default would take it even if writing failed.
            unreadable(settings.knownHosts) match
              case Some(problem) => refuse(session, remote, s"$problem, so its pin may be lost; fix it, or name another with --known-hosts")
              case None =>
                try
                  updateKnownHostsFile(session, remote, key, settings.knownHosts, java.util.List.of())
                  true
                catch case e: Exception =>
                  refuse(session, remote, s"it could not be pinned in ${settings.knownHosts} (${e.getMessage}); fix that file, or name another with --known-hosts")
