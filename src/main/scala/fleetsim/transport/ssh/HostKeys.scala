package fleetsim.transport.ssh

import org.apache.sshd.client.keyverifier.{KnownHostsServerKeyVerifier, RejectAllServerKeyVerifier, ServerKeyVerifier}
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.AttributeRepository.AttributeKey
import org.apache.sshd.common.config.keys.KeyUtils
import org.slf4j.LoggerFactory

import java.net.SocketAddress
import java.nio.file.Files
import java.security.PublicKey
import java.util.concurrent.atomic.AtomicBoolean

/** Host-key checking per [[HostKeyMode]]. A refused key marks the session, so the transport can
  * tell a host-key refusal from any other failed handshake, and is logged once with what to do.
  */
object HostKeys:
  private val log = LoggerFactory.getLogger(getClass)
  /** Set on a session whose server key was refused. */
  val Refused = AttributeKey[String]()

  def verifier(settings: SshSettings): ServerKeyVerifier = settings.hostKeys match
    case HostKeyMode.Insecure =>
      val warned = AtomicBoolean()
      (session, remote, key) =>
        if warned.compareAndSet(false, true) then
          log.warn("host-keys = insecure: accepting any SSH host key; use accept-new or strict against servers you do not control")
        true
    case mode =>
      Option(settings.knownHosts.getParent).foreach(Files.createDirectories(_))
      val firstUse: ServerKeyVerifier = if mode == HostKeyMode.Strict then RejectAllServerKeyVerifier.INSTANCE else (_, _, _) => true
      val told = AtomicBoolean()
      def refuse(session: ClientSession, remote: SocketAddress, why: String): Boolean =
        session.setAttribute(Refused, why)
        if told.compareAndSet(false, true) then log.error(s"SSH host key of $remote refused: $why")
        false
      new KnownHostsServerKeyVerifier(firstUse, settings.knownHosts):
        override def acceptModifiedServerKey(session: ClientSession, remote: SocketAddress, entry: org.apache.sshd.client.config.hosts.KnownHostEntry, expected: PublicKey, actual: PublicKey): Boolean =
          refuse(session, remote,
            s"it changed (now ${KeyUtils.getFingerPrint(actual)}, ${settings.knownHosts} has ${KeyUtils.getFingerPrint(expected)}); " +
              "if the server's key really changed, remove its line from that file")

        override def acceptUnknownHostKey(session: ClientSession, remote: SocketAddress, key: PublicKey): Boolean =
          super.acceptUnknownHostKey(session, remote, key) ||
            refuse(session, remote, s"it is not in ${settings.knownHosts} (host-keys = strict); add it there, or use --host-keys accept-new")
