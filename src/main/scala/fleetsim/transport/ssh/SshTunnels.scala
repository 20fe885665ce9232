package fleetsim.transport.ssh

import fleetsim.transport.*
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.sshd.client.SshClient
import org.apache.sshd.client.auth.pubkey.UserAuthPublicKeyFactory
import org.apache.sshd.client.config.hosts.HostConfigEntryResolver
import org.apache.sshd.common.keyprovider.KeyIdentityProvider
import org.apache.sshd.common.util.net.SshdSocketAddress
import org.apache.sshd.core.CoreModuleProperties

import java.time.Duration as JDuration
import scala.jdk.CollectionConverters.*
import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future}
import scala.util.{Failure, Success, Try}

/** One MINA SSHD client and I/O pool for the whole fleet, opening a tunnel per device: the SSH
  * kind's [[Sessions]]. The fleet makes at most `max-handshakes` at a time ([[fleetsim.transport.GatedSessions]]).
  *
  * @param target where tunnelled calls go, as the SSH server sees it (the controller's HTTP address)
  */
final class SshTunnels(settings: SshSettings, target: SshdSocketAddress, http: HttpSettings)(using
    system: ActorSystem[?])
    extends Sessions:
  import SshTunnels.*
  private given ExecutionContext = system.executionContext
  private val deadlines = Deadlines(http.requestTimeout)

  private val client =
    val c = SshClient.setUpDefaultClient()
    CoreModuleProperties.IO_CONNECT_TIMEOUT.set(c, millis(settings.connectTimeout))
    CoreModuleProperties.AUTH_TIMEOUT.set(c, millis(settings.handshakeTimeout))
    CoreModuleProperties.HEARTBEAT_INTERVAL.set(c, millis(settings.keepaliveInterval))
    CoreModuleProperties.HEARTBEAT_NO_REPLY_MAX.set(c, Integer.valueOf(settings.keepaliveMaxMissed))
    SshStreams.smallBuffers(c)
    SshStreams.fewIoThreads(c)
    c.setServerKeyVerifier(HostKeys.verifier(settings))
    // A device is not this machine's user: no ~/.ssh/config (read again at every connect, a stat and
    // an exception when it is missing) and no ~/.ssh/id_* keys offered should the device's be refused.
    c.setHostConfigEntryResolver(HostConfigEntryResolver.EMPTY)
    c.setKeyIdentityProvider(KeyIdentityProvider.EMPTY_KEYS_PROVIDER)
    c.setUserAuthFactories(SshClient.DEFAULT_USER_AUTH_FACTORIES.asScala.map {
      case _: UserAuthPublicKeyFactory => SignedFirst(settings.keys)
      case other => other
    }.asJava)
    // With BouncyCastle on the class path (for client certificates), MINA offers the post-quantum
    // hybrids first, and their key generation in pure Java made each handshake cost several times a
    // curve25519 one (docs/ssh.md): the fleet asks for curve25519 first, the others after.
    val (cheap, rest) = c.getKeyExchangeFactories.asScala.partition(_.getName.startsWith("curve25519"))
    c.setKeyExchangeFactories((cheap ++ rest).asJava)
    c.start()
    c

  /** `offered`: the SSH server the controller named at join; `--controller-ssh` overrides it. */
  def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
    settings.endpoint.orElse(offered.collect { case e: SshEndpoint => e.host -> e.port }) match
      case None => nowhere
      case Some((host, port)) => handshake(settings.user.getOrElse(login), host, port)

  /** Connect, check the host key, authenticate: all asynchronous, within the handshake timeout. */
  private def handshake(user: String, host: String, port: Int): Future[Either[SessionFailure, Session]] =
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
        case Failure(e) =>
          // Credentials refused on a session still open: the server does not admit this device. A
          // host key refused closes the session, whose attributes MINA may have cleared by now: the
          // disconnect's reason says it too.
          val failure =
            if session.getAttribute(HostKeys.Refused) != null || hostKeyRefused(e) then SessionFailure.Failed(FailureReason.HostKeyRejected)
            else if session.isOpen && !session.isClosing then SessionFailure.Refused(FailureReason.AuthRejected)
            else SessionFailure.Failed(FailureReason.ProtocolError)
          session.close(true)
          Success(Left(failure))
      }
    }.recover { // a host key refused in the key exchange can fail the connect itself, before auth is asked
      case e => if hostKeyRefused(e) then hostKeyRejected else connectFailed
    }
    Replies.orElse(settings.handshakeTimeout, timedOut)(tunnel).map { result =>
      if result == timedOut then tunnel.foreach(_.foreach(_.close())) // should it still arrive
      result
    }

  def close(): Future[Done] =
    deadlines.close()
    SshStreams.completion(client.close(false))(_ => Success(Done))

  private def millis(d: FiniteDuration) = JDuration.ofMillis(d.toMillis)

  private def hostKeyRefused(e: Throwable): Boolean =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(8).exists {
      case s: org.apache.sshd.common.SshException => s.getDisconnectCode == org.apache.sshd.common.SshConstants.SSH2_DISCONNECT_HOST_KEY_NOT_VERIFIABLE
      case _ => false
    }

object SshTunnels:
  private val nowhere: Future[Either[SessionFailure, Session]] = Future.successful(Left(SessionFailure.Failed(FailureReason.ProtocolError))) // nowhere to tunnel to
  private val connectFailed: Either[SessionFailure, Session] = Left(SessionFailure.Failed(FailureReason.ConnectFailed))
  private val hostKeyRejected: Either[SessionFailure, Session] = Left(SessionFailure.Failed(FailureReason.HostKeyRejected))
  private val timedOut: Either[SessionFailure, Session] = Left(SessionFailure.Failed(FailureReason.TimedOut))
