package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.controller.{Controller, ControllerSettings, Registry, SshGateway}
import fleetsim.device.DeviceState.*
import fleetsim.protocol.ApiCall
import fleetsim.transport.FailureReason
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.sshd.common.config.keys.{KeyUtils, PublicKeyEntry}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.{InetAddress, ServerSocket}
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.concurrent.Await
import scala.concurrent.duration.*

/** SSH fleets: every device tunnels to the real reference controller's SSH server on 127.0.0.1. */
class SshFleetSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private def config(devices: Int, extra: String = "", state: Path = Files.createTempDirectory("fleetsim-ssh")): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $devices, ramp-rate = 1000, transport = ssh }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s, state-dir = "$state/controller" }
      fleetsim.ssh { known-hosts = "$state/known_hosts", max-handshakes = 16 }
      fleetsim.http.request-timeout = 3s
      fleetsim.device.backoff { min = 200ms, max = 2s }
      fleetsim.run.results-dir = "${Files.createTempDirectory(state, "results")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()


  "An SSH fleet against the reference controller" should {
    "bring 200 devices to Reporting with every call through their tunnels, counted alike on both sides" in {
      // Busy tunnels outlive an idle timeout; a config of 64 KiB comes in dozens of packets (at most 1.5 KB each: SshStreams.smallBuffers).
      val c = config(200, "fleetsim.controller { ssh-idle-timeout = 2s, config-size = 64KiB }")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 200))
        val start = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok
        eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok >= start + 5 * 200))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val controller = summary.controller.get
        assert(summary.tunnels.get.opened == 200 && summary.tunnels.get.upAtEnd == 200)
        assert(summary.tunnels.get.retunnels == 0)
        val kinds = Seq("heartbeat", "stats", "config")
        reconciles(summary.messages.filter((kind, _) => kinds.contains(kind)), controller.received)
        for kind <- kinds do
          withClue(s"$kind: ") {
            assert(summary.messages(kind).ok > 0)
            assert(controller.tunnelled(kind) == controller.received(kind)) // nothing came direct
          }
          assert(controller.tunnelled("join") == 0) // joins go over plain HTTP, before the tunnel
      }
    }

    "re-tunnel every device after the controller drops every session at once (a scenario's ssh-drop), spread out rather than in a herd" in {
      val c = config(200, "fleetsim.device.backoff.min = 1s")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val gateway = run.controller.get.ssh.get
        eventually(assert(run.metrics.devicesByState(Reporting) == 200))
        assert(Await.result(run.act(fleetsim.control.RunAction.SshDrop), 10.seconds) == 200)
        // Dropped 120 ms after the devices were told to time their recovery; below 20 for about 100 ms
        // before the first are back (a backoff of up to 1 s each), so looked for every 5 ms.
        eventually(timeout(Span(10, Seconds)), interval(Span(5, Millis)))(assert(gateway.sessions < 20))
        // Watch the sessions come back: the first 10% to the first 90% must take more than 100 ms.
        val started = System.nanoTime()
        def sinceDrop = (System.nanoTime() - started) / 1_000_000
        var tenth = Option.empty[Long]
        eventually {
          if tenth.isEmpty && gateway.sessions >= 20 then tenth = Some(sinceDrop)
          assert(gateway.sessions >= 180)
        }
        val ninetieth = sinceDrop
        assert(ninetieth - tenth.get > 300, s"10% of the tunnels were back after ${tenth.get} ms, 90% after $ninetieth ms")
        eventually(assert(run.metrics.devicesByState(Reporting) == 200))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.tunnels.get.retunnels >= 200)
        assert(summary.tunnels.get.upAtEnd == 200)
        assert(summary.messages("join").ok == 200) // a lost tunnel is opened again, without a join
        val drop = summary.actions.head
        assert(drop.kind == "ssh-drop" && drop.cut == 200 && drop.recovered == 200 && drop.recoveryMs.p100.exists(_ > 0), drop)
      }
    }

    "keep every tunnel through a server so slow that calls are given up as stuck, its late replies coming after" in {
      // Replies 2.5 s late against a timeout of 1 s: a call unanswered a timeout past its deadline
      // ends its connection, whose channel closes while the server still owes it a reply, which
      // comes later. The channel ends, the session stays. Heartbeats lost do not end a session
      // here (max-lost-heartbeats).
      val c = config(20, "fleetsim.http.request-timeout = 1s\nfleetsim.device.max-lost-heartbeats = 1000")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 20))
        def timedOut = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).failures.getOrElse(FailureReason.TimedOut, 0L)
        val controller = run.controller.get
        controller.inject(fleetsim.controller.Faults(latencyMs = 2500))
        eventually(assert(timedOut >= 60)) // each device's connection given up on, most of them more than once
        controller.inject(fleetsim.controller.Faults())
        val answered = controller.counts.received("heartbeat")
        eventually(assert(controller.counts.received("heartbeat") >= answered + 40)) // fast again, late replies all come
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.tunnels.get.retunnels == 0 && summary.tunnels.get.opened == 20, summary.tunnels)
        assert(summary.messages("heartbeat").failures.keySet == Set("timedOut"), summary.messages("heartbeat"))
      }
    }

    "recover every device after the SSH server stops and starts again" in {
      val state = Files.createTempDirectory("fleetsim-ssh")
      val base = config(100, state = state)
      withSystem(base) {
        val settings = ControllerSettings(base)
        val registry = Registry()
        val first = Await.result(Controller.start(settings, registry, ssh = true), 10.seconds)
        val ports = settings.copy(port = first.address.getPort, sshPort = first.ssh.get.address.getPort)
        val c = config(100, s"""fleetsim.controller.url = "${first.url}"""", state)
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 100))
        Await.result(first.stop(), 10.seconds)
        eventually(assert(run.metrics.devicesByState(Tunneling) == 100))
        val second = Await.result(Controller.start(ports, registry, ssh = true), 10.seconds) // same host key, same registry
        try
          eventually(assert(run.metrics.devicesByState(Reporting) == 100))
          assert(run.metrics.tunnelsUpNow == 100)
        finally
          Await.result(run.finish("test over"), 60.seconds)
          Await.result(second.stop(), 10.seconds)
      }
    }

    "back off, and not hang, against a server that never answers the handshake" in {
      val silent = ServerSocket(0, 50, InetAddress.getLoopbackAddress) // accepts into its backlog, never speaks
      try
        val c = config(20, s"""fleetsim.ssh { endpoint = "127.0.0.1:${silent.getLocalPort}", handshake-timeout = 1s }""")
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.snapshot().tunnels.failures(FailureReason.TimedOut) >= 40))
          assert(run.metrics.devicesByState(Tunneling) == 20)
          val summary = Await.result(run.finish("test over"), 30.seconds)
          assert(summary.tunnels.get.opened == 0)
        }
      finally silent.close()
    }

    "refuse a changed host key under strict checking, and say so" in {
      val state = Files.createTempDirectory("fleetsim-ssh")
      val c0 = config(10, "fleetsim.ssh.host-keys = strict", state)
      withSystem(c0) {
        val controller = Await.result(Controller.start(ControllerSettings(c0), ssh = true), 10.seconds)
        val ssh = controller.ssh.get.address
        val impostor = PublicKeyEntry.toString(KeyUtils.generateKeyPair("ecdsa-sha2-nistp256", 256).getPublic)
        Files.writeString(state.resolve("known_hosts"), s"[127.0.0.1]:${ssh.getPort} $impostor\n")
        val c = config(10, s"""fleetsim.ssh.host-keys = strict, fleetsim.controller.url = "${controller.url}"""", state)
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        try
          eventually(assert(run.metrics.snapshot().tunnels.failures(FailureReason.HostKeyRejected) >= 10))
          assert(run.metrics.devicesByState(Reporting) == 0)
          val summary = Await.result(run.finish("test over"), 30.seconds)
          val failures = summary.tunnels.get.failures.filter(_._2 > 0)
          assert(failures.keySet == Set("hostKeyRejected") && failures("hostKeyRejected") >= 10, failures) // each refusal counted for what it is
        finally Await.result(controller.stop(), 10.seconds)
      }
    }

    "tunnel through an ssh-gateway of the controller's, which refuses a key the controller did not admit" in {
      val state = Files.createTempDirectory("fleetsim-ssh")
      val gatewayPort = freePort()
      val c0 = config(20, s"""fleetsim.controller.ssh-gateways = "127.0.0.1:$gatewayPort"""", state)
      withSystem(c0) {
        val controller = Await.result(Controller.start(ControllerSettings(c0)), 10.seconds) // no SSH server of its own
        val gateway = Await.result(SshGateway.forwarding(ControllerSettings(ConfigFactory.parseString(
          s"""fleetsim.controller { ssh-port = $gatewayPort, state-dir = "$state/gateway" }""").withFallback(c0)), Uri(controller.url)), 10.seconds)
        val run = Await.result(FleetRun.start(RunSettings(config(20, s"""fleetsim.controller.url = "${controller.url}"""", state))), 30.seconds)
        try
          eventually(assert(run.metrics.devicesByState(Reporting) == 20))
          assert(gateway.sessions == 20)
          // OpenSSH's client as device 0, which joined, with a key of its own: the gateway asks the controller, and refuses.
          val key = state.resolve("stranger")
          Programs.run(Programs.sshKeygen.toString, "-q", "-t", "ed25519", "-N", "", "-f", key.toString)
          val login = ProcessBuilder(Programs.ssh.toString, "-i", key.toString, "-p", gatewayPort.toString, "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", s"UserKnownHostsFile=$state/stranger_known_hosts", "-o", "IdentitiesOnly=yes",
            "-N", s"${run.settings.fleet.mac(0)}@127.0.0.1").redirectErrorStream(true).start()
          assert(login.waitFor(30, TimeUnit.SECONDS), "ssh neither logged in nor gave up")
          val said = String(login.getInputStream.readAllBytes())
          assert(login.exitValue == 255 && said.contains("Permission denied"), said)
          // The devices' own sessions untouched; the stranger's is gone once the gateway has seen it close.
          eventually(assert(gateway.sessions == 20))
          val before = controller.counts.received("heartbeat")
          eventually(assert(controller.counts.received("heartbeat") >= before + 20))
          Await.result(run.finish("test over"), 60.seconds)
          val counts = controller.counts
          assert(counts.received("heartbeat") > 0 && counts.tunnelled("heartbeat") == counts.received("heartbeat"))
        finally
          Await.result(gateway.stop(), 10.seconds)
          Await.result(controller.stop(), 10.seconds)
      }
    }

    "keep the thread count flat from 50 to 500 devices" in {
      def steadyThreads(devices: Int): Threads =
        // Pekko's blocking-io pool starts a thread for each task until it has its fixed 16, however
        // idle the others: bounded, but it would read as growth. Held at 4, what is left is ours.
        val c = config(devices, """fleetsim.controller.heartbeat-interval = 2s
          pekko.actor.default-blocking-io-dispatcher.thread-pool-executor.fixed-pool-size = 4""")
        var threads: Threads = null
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == devices))
          val start = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok
          eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok >= start + devices))
          threads = Threads(summon[ActorSystem[?]])
          Await.result(run.finish("test over"), 60.seconds)
        }
        threads
      val (at50, at500) = (steadyThreads(50), steadyThreads(500))
      assert(at500.overCeilings.isEmpty, at500.overCeilings)
      assert(at500.others <= at50.others + 4, s"${at50.others} threads at 50 devices, ${at500.others} at 500")
    }
  }
