package fleetsim.transport.ssh

import org.apache.sshd.client.SshClient
import org.apache.sshd.common.config.keys.KeyUtils
import org.apache.sshd.common.keyprovider.KeyPairProvider
import org.apache.sshd.server.SshServer
import org.scalatest.BeforeAndAfterAll
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.*
import scala.util.Try

/** Host-key checking fails closed: the fleet's verifier (HostKeys) against a real SSH server (MINA's
  * own, on 127.0.0.1 port 0), with known_hosts files that break after the run's start check passed.
  * A key is taken only when it is in the file (strict) or was pinned there (accept-new); a file that
  * cannot be read or written refuses it, never trusts it.
  */
class HostKeysSpec extends AnyWordSpec with BeforeAndAfterAll:
  private val server = SshServer.setUpDefaultServer()
  server.setHost("127.0.0.1")
  server.setPort(0)
  server.setKeyPairProvider(KeyPairProvider.wrap(KeyUtils.generateKeyPair("ssh-ed25519", 256)))
  server.setPasswordAuthenticator((_, _, _) => false)
  server.start()
  private val client = SshClient.setUpDefaultClient()
  client.start()

  override def afterAll(): Unit =
    client.stop()
    server.stop(true)

  private def settings(mode: HostKeyMode, knownHosts: Path) = SshSettings(
    endpoint = None, user = None, keys = KeyUtils.generateKeyPair("ssh-ed25519", 256), password = None, hostKeys = mode,
    knownHosts = knownHosts, target = None, connectTimeout = 5.seconds, handshakeTimeout = 5.seconds,
    keepaliveInterval = 30.seconds, keepaliveMaxMissed = 3, maxHandshakes = 4)

  /** Connects with `settings`' verifier until it has judged the server's key: None if the key was
    * taken, else why it was refused. The reason is read as the verifier leaves it, before the
    * refused session closes: MINA clears a session's attributes when it closes.
    */
  private def handshake(s: SshSettings): Option[String] =
    val verifier = HostKeys.verifier(s)
    val judged = java.util.concurrent.CompletableFuture[Option[String]]()
    client.setServerKeyVerifier { (session, remote, key) =>
      val taken = Try(verifier.verifyServerKey(session, remote, key))
      judged.complete(taken.fold(e => Some(s"the verifier failed: $e"),
        ok => Option.when(!ok)(Option(session.getAttribute(HostKeys.Refused)).getOrElse("refused, with no reason given"))))
      taken.get
    }
    val session = client.connect("device", "127.0.0.1", server.getPort).verify(60, TimeUnit.SECONDS).getSession
    try Try(judged.get(60, TimeUnit.SECONDS)).getOrElse(fail("the server's key was not judged within 60 s"))
    finally session.close(true)

  private def dir() = Files.createTempDirectory("fleetsim-host-keys")

  "accept-new" should {
    "pin the key on first use and take it again" in {
      val file = dir().resolve("known_hosts")
      val s = settings(HostKeyMode.AcceptNew, file)
      assert(HostKeys.check(s).isRight)
      assert(handshake(s).isEmpty)
      assert(Files.readString(file).contains("ssh-ed25519 "), "the key was not written")
      assert(HostKeys.check(s).isRight, "the file it wrote does not pass its own check")
      assert(handshake(s).isEmpty)
    }
    "refuse a key it cannot pin (the file became a folder after the start)" in {
      val file = dir().resolve("known_hosts")
      val s = settings(HostKeyMode.AcceptNew, file)
      assert(HostKeys.check(s).isRight)
      Files.createDirectories(file)
      val refused = handshake(s)
      assert(refused.exists(_.contains(file.toString)), s"refused: $refused")
    }
  }

    "refuse a key when its file cannot be read whole any more, rather than pin it again" in {
      val file = dir().resolve("known_hosts")
      val s = settings(HostKeyMode.AcceptNew, file)
      assert(handshake(s).isEmpty)
      assert(handshake(settings(HostKeyMode.Strict, file)).isEmpty, "the pinned key is not taken under strict")
      // Its pin garbled mid-run: MINA alone would skip the line, find the host unknown, and pin the key anew.
      Files.writeString(file, Files.readString(file).trim.dropRight(12) + "\n")
      assert(HostKeys.check(s).isLeft, s"the start check takes ${Files.readString(file)}")
      val refused = handshake(settings(HostKeyMode.AcceptNew, file))
      assert(refused.exists(_.contains("is not a known_hosts line")), s"refused: $refused")
      assert(Files.readString(file).linesIterator.count(_.contains("ssh-ed25519")) == 1, "a key pinned beside the garbled line")
    }

  "The start check" should {
    "refuse a file with a line that is not a key, and a folder" in {
      val file = Files.writeString(dir().resolve("known_hosts"), "# pinned\n127.0.0.1 ssh-ed25519 not-base64!\n")
      val problem = HostKeys.check(settings(HostKeyMode.Strict, file))
      assert(problem.left.exists(_.contains(s"$file:2 is not a known_hosts line")), problem.toString)
      val folder = dir()
      assert(HostKeys.check(settings(HostKeyMode.AcceptNew, folder)).left.exists(_.contains("is a folder")))
    }
  }
