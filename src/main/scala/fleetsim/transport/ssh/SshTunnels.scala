package fleetsim.transport.ssh

import fleetsim.transport.*
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.sshd.client.SshClient
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.config.keys.{KeyUtils, PublicKeyEntry}
import org.apache.sshd.common.util.net.SshdSocketAddress
import org.apache.sshd.core.CoreModuleProperties

import java.security.KeyPair
import java.time.Duration as JDuration
import scala.jdk.CollectionConverters.*
import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future}
import scala.util.{Failure, Success, Try}

/** One MINA SSHD client and I/O pool for the whole fleet, opening a session per device. The fleet
  * makes at most `max-handshakes` at a time ([[fleetsim.transport.GatedTunnels]]).
  *
  * @param target where tunnelled calls go, as the SSH server sees it (the controller's HTTP address)
  */
final class SshTunnels(settings: SshSettings, target: SshdSocketAddress, http: HttpSettings)(using
    system: ActorSystem[?])
    extends Tunnels:
  private given ExecutionContext = system.executionContext
  private val deadlines = Deadlines(http.requestTimeout)

  private val client =
    val c = SshClient.setUpDefaultClient()
    CoreModuleProperties.IO_CONNECT_TIMEOUT.set(c, millis(settings.connectTimeout))
    CoreModuleProperties.AUTH_TIMEOUT.set(c, millis(settings.handshakeTimeout))
    CoreModuleProperties.HEARTBEAT_INTERVAL.set(c, millis(settings.keepaliveInterval))
    CoreModuleProperties.HEARTBEAT_NO_REPLY_MAX.set(c, Integer.valueOf(settings.keepaliveMaxMissed))
    c.setServerKeyVerifier(HostKeys.verifier(settings))
    // With BouncyCastle on the class path (for client certificates), MINA offers the post-quantum
    // hybrids first, and their key generation in pure Java made each handshake cost several times a
    // curve25519 one (docs/ssh.md): the fleet asks for curve25519 first, the others after.
    val (cheap, rest) = c.getKeyExchangeFactories.asScala.partition(_.getName.startsWith("curve25519"))
    c.setKeyExchangeFactories((cheap ++ rest).asJava)
    c.start()
    c

  val publicKey: Option[String] = Some(PublicKeyEntry.toString(settings.keys.getPublic))

  def open(device: Int, login: String, offered: Option[SshEndpoint], pushed: Push => Unit): Future[Either[FailureReason, Tunnel]] =
    settings.endpoint.orElse(offered.map(e => e.host -> e.port)) match
      case None => Future.successful(Left(FailureReason.ProtocolError)) // nowhere to tunnel to
      case Some((host, port)) => handshake(settings.user.getOrElse(login), host, port)

  /** Connect, check the host key, authenticate: all asynchronous, within the handshake timeout. */
  private def handshake(user: String, host: String, port: Int): Future[Either[FailureReason, Tunnel]] =
    val connected = Try(client.connect(user, host, port)) match
      case Success(f) => SshStreams.completion(f)(f => if f.isConnected then Success(f.getSession) else Failure(f.getException))
      case Failure(e) => Future.failed(e)
    val tunnel = connected.flatMap { session =>
      settings.password.foreach(session.addPasswordIdentity)
      session.addPublicKeyIdentity(settings.keys)
      val authed = Try(session.auth()) match
        case Success(f) => SshStreams.completion(f)(f => if f.isSuccess then Success(session) else Failure(f.getException))
        case Failure(e) => Future.failed(e)
      authed.transform {
        case Success(s) => Success(Right(SshTunnel(s, target, http.pipelining, http.limits, deadlines)))
        case Failure(_) =>
          val reason =
            if session.getAttribute(HostKeys.Refused) != null then FailureReason.HostKeyRejected
            else if session.isOpen && !session.isClosing then FailureReason.AuthRejected
            else FailureReason.ProtocolError
          session.close(true)
          Success(Left(reason))
      }
    }.recover { case _ => Left(FailureReason.ConnectFailed) }
    Replies.orElse(settings.handshakeTimeout, Left(FailureReason.TimedOut))(tunnel).map { result =>
      if result == Left(FailureReason.TimedOut) then tunnel.foreach(_.foreach(_.close())) // should it still arrive
      result
    }

  def close(): Future[Done] =
    deadlines.close()
    SshStreams.completion(client.close(false))(_ => Success(Done))

  private def millis(d: FiniteDuration) = JDuration.ofMillis(d.toMillis)
