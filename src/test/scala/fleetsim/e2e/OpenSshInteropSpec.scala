package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.transport.FailureReason
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.{InetAddress, Socket}
import java.nio.file.{Files, Path}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** Interop with real OpenSSH: Debian's sshd on a loopback port with a throwaway config, this user
  * and an ed25519 key made by ssh-keygen; the devices tunnel through it to the reference controller.
  */
class OpenSshInteropSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  /** A throwaway sshd: its directory (keys, config, the device's key), port and log. */
  private final case class Sshd(dir: Path, port: Int):
    val log: Path = dir.resolve("sshd.log")
    def said: String = Files.readString(log)
    /** A fleet of `devices` logging in to it as this user with `key`, tunnelling to the reference controller. */
    def fleet(devices: Int, key: Path): Config = ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $devices, ramp-rate = 1000, transport = ssh }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s, state-dir = "$dir/controller" }
      fleetsim.ssh {
        endpoint = "127.0.0.1:$port"
        user = "${System.getProperty("user.name")}"
        key = "$key"
        known-hosts = "$dir/known_hosts"
      }
      fleetsim.device.backoff { min = 200ms, max = 2s }
      fleetsim.run.results-dir = "$dir/results"
      """).withFallback(ConfigFactory.load()).resolve()

  /** sshd listening on a port of its own for the test, stopped after it, with `device_key` the one
    * key it admits. Started in the test rather than in beforeAll: a suite that aborts there takes
    * every later suite of the run down with it.
    */
  private def withSshd(test: Sshd => Unit): Unit =
    val sshd = Sshd(Files.createTempDirectory("fleetsim-openssh"), freePort())
    val dir = sshd.dir
    val keygen = Programs.sshKeygen.toString
    Programs.run(keygen, "-q", "-t", "ed25519", "-N", "", "-f", dir.resolve("host_key").toString)
    Programs.run(keygen, "-q", "-t", "ed25519", "-N", "", "-f", dir.resolve("device_key").toString)
    Files.copy(dir.resolve("device_key.pub"), dir.resolve("authorized_keys"))
    Files.createDirectories(Path.of("/run/sshd")) // sshd's privilege-separation directory
    Files.writeString(dir.resolve("sshd_config"),
      s"""ListenAddress 127.0.0.1
         |Port ${sshd.port}
         |HostKey ${dir.resolve("host_key")}
         |PidFile ${dir.resolve("sshd.pid")}
         |AuthorizedKeysFile ${dir.resolve("authorized_keys")}
         |StrictModes no
         |UsePAM no
         |PasswordAuthentication no
         |KbdInteractiveAuthentication no
         |PermitRootLogin prohibit-password
         |AllowTcpForwarding yes
         |LogLevel VERBOSE
         |""".stripMargin)
    // Its log in a file: what it says of each login is part of what the tests check.
    val process = ProcessBuilder(Programs.sshd.toString, "-D", "-E", sshd.log.toString, "-f", dir.resolve("sshd_config").toString)
      .inheritIO().start()
    try
      eventually(Socket(InetAddress.getLoopbackAddress, sshd.port).close()) // listening
      test(sshd)
    finally process.destroy()

  "Devices tunnelling through OpenSSH's sshd" should {
    "all reach Reporting, their calls forwarded to the reference controller's HTTP API, each login signed at once" in withSshd { sshd =>
      val c = sshd.fleet(50, sshd.dir.resolve("device_key"))
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 50))
        val start = run.controller.get.counts.received("heartbeat")
        eventually(assert(run.controller.get.counts.received("heartbeat") >= start + 100))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.tunnels.get.opened >= 50)
        for kind <- Seq("heartbeat", "stats", "config") do
          assert(summary.messages(kind).ok > 0 && summary.messages(kind).ok == summary.controller.get.received(kind), kind)
        // Each login signed in its first request: sshd never had to say it would take the key
        // ("Postponed publickey", a round trip more), and it accepted every one.
        val said = sshd.said
        assert(!said.contains("Postponed publickey"), said.linesIterator.find(_.contains("Postponed")))
        assert(said.linesIterator.count(_.contains("Accepted publickey")) == summary.tunnels.get.opened)
        // sshd pinned on first use: its key is now in known_hosts.
        assert(Files.readString(sshd.dir.resolve("known_hosts")).contains(s"[127.0.0.1]:${sshd.port}"))
      }
    }

    "carry calls to a server that closes the connection after every reply, a channel each, none failed" in withSshd { sshd =>
      // nginx says Connection: close on every reply and closes; sshd then ends the channel, and the
      // device's next call opens another on the same session.
      val nginx = HttpServers.nginx("keepalive_timeout 0;")
      try
        val profile = Path.of(getClass.getResource("/conformance/static.conf").toURI)
        val c = ConfigFactory.parseString(s"""
          fleetsim.device-profile = "$profile"
          fleetsim.controller.url = "http://127.0.0.1:${nginx.port}"
          fleetsim.ssh.target = "127.0.0.1:${nginx.port}"
          fleetsim.http.request-timeout = 3s
          """).withFallback(sshd.fleet(10, sshd.dir.resolve("device_key")))
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == 10 && run.metrics.snapshot().byKind("heartbeat").ok >= 50))
          val summary = Await.result(run.finish("test over"), 60.seconds)
          val counts = summary.messages.values
          val (sent, ok, failed) = (counts.map(_.sent).sum, counts.map(_.ok).sum, counts.map(_.failed).sum)
          assert(failed == 0 && sent == ok, summary.messages)
          assert(summary.tunnels.get.opened == 10 && summary.tunnels.get.retunnels == 0)
          // Every call nginx logged, tunnelled or not (the joins), the fleet counted ok.
          eventually(assert(nginx.served("cell=") == ok))
        }
      finally nginx.stop()
    }

    "be refused with a key sshd does not know: each try one signed attempt, counted as auth rejected, none Reporting" in withSshd { sshd =>
      val stranger = sshd.dir.resolve("stranger_key")
      Programs.run(Programs.sshKeygen.toString, "-q", "-t", "ed25519", "-N", "", "-f", stranger.toString)
      val c = sshd.fleet(10, stranger)
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        def failed = sshd.said.linesIterator.count(_.contains("Failed publickey"))
        // Every device refused, most of them twice: in sshd's log, and counted by the fleet (which hears it after sshd logs it).
        eventually(assert(failed >= 20 && run.metrics.snapshot().tunnels.failures(FailureReason.AuthRejected) >= 20))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.devices.byState("Reporting") == 0 && summary.tunnels.get.opened == 0)
        assert(summary.tunnels.get.failures("authRejected") >= 20)
        // One signed attempt a connection, no query first, and no key but the device's offered.
        val said = sshd.said
        val connections = said.linesIterator.count(_.startsWith("Connection from"))
        assert(!said.contains("Postponed publickey") && !said.contains("Accepted publickey"))
        assert(failed <= connections, said)
      }
    }
  }
