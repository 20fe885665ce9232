package fleetsim.transport.ssh

import com.typesafe.config.Config
import fleetsim.{finiteDuration, hostPort}

import org.apache.sshd.common.NamedResource
import org.apache.sshd.common.config.keys.KeyUtils
import org.apache.sshd.common.util.security.SecurityUtils

import java.nio.file.{Files, Path, Paths}
import java.security.KeyPair
import scala.jdk.CollectionConverters.*
import scala.concurrent.duration.*

/** How the fleet checks the SSH server's host key. */
enum HostKeyMode(val key: String):
  /** Only keys already in the known_hosts file. */
  case Strict extends HostKeyMode("strict")
  /** Pin a host's key on first use; refuse it if it changes later. */
  case AcceptNew extends HostKeyMode("accept-new")
  /** Accept any key (warned about once): for throwaway test servers only. */
  case Insecure extends HostKeyMode("insecure")

object HostKeyMode:
  def parse(text: String): HostKeyMode =
    values.find(_.key == text).getOrElse(throw IllegalArgumentException(
      s"fleetsim.ssh.host-keys must be one of ${values.map(_.key).mkString(", ")} (got '$text')"))

/** The SSH transport's settings: where tunnels go, who they log in as, and every timeout that keeps
  * a storm of handshakes from holding descriptors for minutes.
  *
  * @param endpoint overrides the SSH address the controller names at join
  * @param user None logs in with the device's MAC
  * @param keys the devices' key pair: from a file, or generated for the run (and sent at join)
  * @param target where tunnelled calls go, as the SSH server sees it; None = the controller's HTTP address
  */
final case class SshSettings(
    endpoint: Option[(String, Int)],
    user: Option[String],
    keys: KeyPair,
    password: Option[String],
    hostKeys: HostKeyMode,
    knownHosts: Path,
    target: Option[(String, Int)],
    connectTimeout: FiniteDuration,
    handshakeTimeout: FiniteDuration,
    keepaliveInterval: FiniteDuration,
    keepaliveMaxMissed: Int,
    maxHandshakes: Int):
  require(connectTimeout > Duration.Zero, "fleetsim.ssh.connect-timeout must be positive")
  require(handshakeTimeout > Duration.Zero, "fleetsim.ssh.handshake-timeout must be positive")
  require(keepaliveInterval > Duration.Zero, "fleetsim.ssh.keepalive-interval must be positive")
  require(keepaliveMaxMissed >= 1, "fleetsim.ssh.keepalive-max-missed must be at least 1")
  require(maxHandshakes >= 1, "fleetsim.ssh.max-handshakes must be at least 1")

  override def toString: String = s"SshSettings($endpoint, user=$user, password=${password.map(_ => "***")}, $hostKeys)" // no secrets

object SshSettings:
  def apply(config: Config): SshSettings =
    val c = config.getConfig("fleetsim.ssh")
    def optional(key: String) = Option(c.getString(key)).filter(_.nonEmpty)
    SshSettings(
      endpoint = optional("endpoint").map(hostPort(_, "fleetsim.ssh.endpoint")),
      user = optional("user"),
      keys = optional("key").fold(KeyUtils.generateKeyPair("ssh-ed25519", 256))(file => loadKey(Paths.get(file))),
      password = optional("password"),
      hostKeys = HostKeyMode.parse(c.getString("host-keys")),
      knownHosts = Paths.get(c.getString("known-hosts")),
      target = optional("target").map(hostPort(_, "fleetsim.ssh.target")),
      connectTimeout = c.finiteDuration("connect-timeout"),
      handshakeTimeout = c.finiteDuration("handshake-timeout"),
      keepaliveInterval = c.finiteDuration("keepalive-interval"),
      keepaliveMaxMissed = c.getInt("keepalive-max-missed"),
      maxHandshakes = c.getInt("max-handshakes"))

  /** The first key pair in an OpenSSH private key file (unencrypted: devices cannot type a passphrase). */
  def loadKey(file: Path): KeyPair =
    val keys =
      try SecurityUtils.loadKeyPairIdentities(null, NamedResource.ofName(file.toString), Files.newInputStream(file), null)
      catch case e: Exception => throw IllegalArgumentException(s"cannot read SSH key '$file': ${e.getMessage}")
    Option(keys).flatMap(_.asScala.headOption).getOrElse(throw IllegalArgumentException(s"no private key in '$file'"))
