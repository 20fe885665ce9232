package fleetsim.transport.ssh

import org.apache.sshd.client.config.hosts.KnownHostEntry
import org.apache.sshd.client.keyverifier.{KnownHostsServerKeyVerifier, RejectAllServerKeyVerifier, ServerKeyVerifier}
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.AttributeRepository.AttributeKey
import org.apache.sshd.common.config.keys.{KeyUtils, PublicKeyEntryResolver}
import org.slf4j.LoggerFactory

import java.net.SocketAddress
import java.nio.file.Files
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
      // Every line a key: MINA skips a line it cannot parse, and a skipped pin would let accept-new pin another key.
      fleetsim.TextFiles.utf8(file).left.map(problem => s"--known-hosts: $problem").flatMap { text =>
        val unreadable = text.linesIterator.zipWithIndex.find { (line, _) =>
          val entry = line.trim
          entry.nonEmpty && !entry.startsWith("#") &&
            Try(KnownHostEntry.parseKnownHostEntry(entry).getKeyEntry.resolvePublicKey(null, java.util.Map.of(), PublicKeyEntryResolver.FAILING)).isFailure
        }
        unreadable match
          case Some((line, i)) => Left(s"--known-hosts: $file:${i + 1} is not a known_hosts line fleetsim can read ('${line.take(40)}'): $fix")
          case None if settings.hostKeys == HostKeyMode.AcceptNew && !Files.isWritable(file) =>
            Left(s"--known-hosts: $file cannot be written, so accept-new cannot pin new keys: $fix, or use --host-keys strict")
          case None => Right(())
      }
    else if settings.hostKeys == HostKeyMode.Strict then Right(()) // every key is refused, each saying where to add it
    else
      try
        Option(file.toAbsolutePath.getParent).foreach(Files.createDirectories(_))
        Either.cond(Files.isWritable(Option(file.toAbsolutePath.getParent).getOrElse(file)), (),
          s"--known-hosts: the folder of $file cannot be written, so accept-new cannot pin keys: $fix")
      catch case e: java.io.IOException => Left(s"--known-hosts: cannot make the folder of $file (${e.getClass.getSimpleName}: ${e.getMessage}): $fix")

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
            // accept-new: a key is taken only once it is pinned; MINA's default would take it even if writing failed.
            try
              updateKnownHostsFile(session, remote, key, settings.knownHosts, java.util.List.of())
              true
            catch case e: Exception =>
              refuse(session, remote, s"it could not be pinned in ${settings.knownHosts} (${e.getMessage}); fix that file, or name another with --known-hosts")
