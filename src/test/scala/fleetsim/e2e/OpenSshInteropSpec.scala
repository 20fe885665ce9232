package fleetsim.e2e

import com.typesafe.config.ConfigFactory
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
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

  private val dir = Files.createTempDirectory("fleetsim-openssh")
  private val port = freePort()

  /** sshd listening on `port` for the test, stopped after it. Started in the test rather than in
    * beforeAll: a suite that aborts there takes every later suite of the run down with it.
    */
  private def withSshd(test: => Unit): Unit =
    val sshdBinary = Programs.sshd
    val keygen = Programs.sshKeygen.toString
    Programs.run(keygen, "-q", "-t", "ed25519", "-N", "", "-f", dir.resolve("host_key").toString)
    Programs.run(keygen, "-q", "-t", "ed25519", "-N", "", "-f", dir.resolve("device_key").toString)
    Files.copy(dir.resolve("device_key.pub"), dir.resolve("authorized_keys"))
    Files.createDirectories(Path.of("/run/sshd")) // sshd's privilege-separation directory
    Files.writeString(dir.resolve("sshd_config"),
      s"""ListenAddress 127.0.0.1
         |Port $port
         |HostKey ${dir.resolve("host_key")}
         |PidFile ${dir.resolve("sshd.pid")}
         |AuthorizedKeysFile ${dir.resolve("authorized_keys")}
         |StrictModes no
         |UsePAM no
         |PasswordAuthentication no
         |KbdInteractiveAuthentication no
         |PermitRootLogin prohibit-password
         |AllowTcpForwarding yes
         |LogLevel ERROR
         |""".stripMargin)
    val sshd = ProcessBuilder(sshdBinary.toString, "-D", "-e", "-f", dir.resolve("sshd_config").toString).inheritIO().start()
    try
      eventually(Socket(InetAddress.getLoopbackAddress, port).close()) // listening
      test
    finally sshd.destroy()

  "Devices tunnelling through OpenSSH's sshd" should {
    "all reach Reporting, their calls forwarded to the reference controller's HTTP API" in {
      val c = ConfigFactory.parseString(s"""
        fleetsim.fleet { devices = 50, ramp-rate = 1000, transport = ssh }
        fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s, state-dir = "$dir/controller" }
        fleetsim.ssh {
          endpoint = "127.0.0.1:$port"
          user = "${System.getProperty("user.name")}"
          key = "${dir.resolve("device_key")}"
          known-hosts = "$dir/known_hosts"
        }
        fleetsim.device.backoff { min = 200ms, max = 2s }
        fleetsim.run.results-dir = "$dir/results"
        """).withFallback(ConfigFactory.load()).resolve()
      withSshd(withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 50))
        val start = run.controller.get.counts.received("heartbeat")
        eventually(assert(run.controller.get.counts.received("heartbeat") >= start + 100))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.tunnels.get.opened >= 50)
        for kind <- Seq("heartbeat", "stats", "config") do
          assert(summary.messages(kind).ok > 0 && summary.messages(kind).ok == summary.controller.get.received(kind), kind)
        // sshd pinned on first use: its key is now in known_hosts.
        assert(Files.readString(dir.resolve("known_hosts")).contains(s"[127.0.0.1]:$port"))
      })
    }
  }
