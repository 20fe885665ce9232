package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.cli.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.*
import fleetsim.protocol.MessageKind
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import scala.concurrent.Await
import scala.concurrent.duration.*

/** SSH fleets: every device tunnels to the real reference controller's SSH server on 127.0.0.1. */
class SshFleetSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private def config(devices: Int, extra: String = ""): Config =
    val state = Files.createTempDirectory("fleetsim-ssh")
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $devices, ramp-rate = 1000, transport = ssh }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s, state-dir = "$state/controller" }
      fleetsim.ssh { known-hosts = "$state/known_hosts", max-handshakes = 16 }
      fleetsim.http.request-timeout = 3s
      fleetsim.device.backoff { min = 200ms, max = 2s }
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  private def withSystem(c: Config)(test: ActorSystem[SpawnProtocol.Command] ?=> Unit): Unit =
    val system = ActorSystem(SpawnProtocol(), "ssh-e2e", c)
    try test(using system)
    finally
      system.terminate()
      Await.result(system.whenTerminated, 30.seconds)

  "An SSH fleet against the reference controller" should {
    "bring 200 devices to Reporting with every call through their tunnels, counted alike on both sides" in {
      val c = config(200)
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 200))
        val start = run.metrics.snapshot().byKind(MessageKind.Heartbeat).ok
        eventually(assert(run.metrics.snapshot().byKind(MessageKind.Heartbeat).ok >= start + 400))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val controller = summary.controller.get
        assert(summary.tunnels.get.opened == 200 && summary.tunnels.get.upAtEnd == 200)
        for kind <- Seq("heartbeat", "stats", "config") do
          withClue(s"$kind: ") {
            assert(summary.messages(kind).ok > 0)
            assert(summary.messages(kind).ok == controller.received(kind))
            assert(controller.tunnelled(kind) == controller.received(kind)) // nothing came direct
          }
        assert(controller.tunnelled("join") == 0) // joins go over plain HTTP, before the tunnel
      }
    }
  }
